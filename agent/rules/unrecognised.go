package rules

import (
	"fmt"
	"strconv"
	"time"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// unrecognisedPersist is how long an unclaimed error must repeat, to the end
// of its log, before it is said: the persist time of the known bootstrap
// transients.
const unrecognisedPersist = 10 * time.Minute

// unrecognisedMax is how many repeated errors the finding quotes.
const unrecognisedMax = 3

// unrecognisedErrors raises UnrecognisedError for the error lines no
// signature claims that repeat to the end of their log (the matcher's
// templates), quoting the first and the last line of each of the most
// repeated ones. It runs after the other rules, and says nothing when one
// of them named a cause at error or above: errors that repeat beside a
// known cause are mostly its consequences (a kubelet's "Error syncing pod"
// about the image a registry refuses), and the known cause is what to fix.
func unrecognisedErrors(in *Input, known []*nodediagv1.Finding) []*nodediagv1.Finding {
	for _, f := range known {
		if p := catalog[f.GetId()]; p != nil && !p.Symptom && SeverityAtLeast(f.GetSeverity(), Error) {
			return nil
		}
	}
	ts := persistingTemplates(in, unrecognisedPersist)
	if len(ts) == 0 {
		return nil
	}
	if len(ts) > unrecognisedMax {
		ts = ts[:unrecognisedMax]
	}
	top := ts[0]
	var quotes []*nodediagv1.Quote
	for _, t := range ts {
		first, last := t.Lines[0], t.Lines[len(t.Lines)-1]
		quotes = append(quotes, QuoteText(t.Src.GetSource(), fmt.Sprintf("%d lines of the form: %s", len(t.Lines), t.Pattern)), QuoteLog(t.Src, first))
		if last != first {
			quotes = append(quotes, QuoteLog(t.Src, last))
		}
	}
	params := Params{"source": top.Src.GetSource(), "pattern": clipDetail(top.Pattern), "count": strconv.Itoa(len(top.Lines))}
	if d := templateSpan(top); d >= time.Second {
		params["duration"] = humanDuration(d)
	}
	return []*nodediagv1.Finding{UnrecognisedError.Finding(params, quotes...)}
}

func templateSpan(t *Template) time.Duration {
	var first, last time.Time
	for _, l := range t.Lines {
		if l.GetTime() == nil {
			continue
		}
		at := l.GetTime().AsTime()
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	return last.Sub(first)
}
