package rules

import (
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/nodediag/nodediag/agent/logline"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// The one matcher. Every log line of the evidence is read once, here: the
// problem signature that claims it (the first that matches, in file order),
// the fact signatures that match it (each on its own: a fact is an
// observation a Go rule asks for, such as the kubelet's start-up version
// line), and whether it is notable (an error, a failure). Go rules receive
// these matches through Input and never look at a log line's text
// themselves; a test enforces it (TestRulesDoNotReadLogText).

// A Match is a line a signature matched.
type Match struct {
	Sig  *Signature
	Src  *nodediagv1.LogExcerpt
	Line *nodediagv1.LogLine
	sub  []string
}

// Group is the match's named group, "" when the signature has none of that
// name or it matched nothing (of groups sharing a name in alternatives, the
// one that matched).
func (m Match) Group(name string) string {
	for i, n := range m.Sig.re.SubexpNames() {
		if n == name && i < len(m.sub) && m.sub[i] != "" {
			return m.sub[i]
		}
	}
	return ""
}

// Quote quotes the matched line.
func (m Match) Quote() *nodediagv1.Quote { return QuoteLog(m.Src, m.Line) }

// Time is the line's time, zero when it has none.
func (m Match) Time() time.Time {
	if t := m.Line.GetTime(); t != nil {
		return t.AsTime()
	}
	return time.Time{}
}

// lineInfo is what the matcher learnt of one line.
type lineInfo struct {
	claim   *Match
	facts   []Match
	notable bool
	err     bool // errorLine: the line states an error
	// warnedFailure: a warning of cloud-init that reports a failure
	// (cloud-init logs its failing steps at WARNING: "util.py[WARNING]:
	// Failed running ...", "[Errno 2] No such file or directory").
	warnedFailure bool
}

// matched is the matcher's result over the evidence.
type matched struct {
	byLine map[*nodediagv1.LogLine]*lineInfo
	// byName holds every match in evidence order, by problem ID (claims)
	// and by fact name.
	byName map[string][]Match
	// claims are the problem signatures' matches, in evidence order.
	claims []Match
	// templates are the unclaimed error lines by template (templates.go).
	templates []*Template
}

// matchAll runs the signatures over every line of every log of the
// evidence, once.
func matchAll(in *Input, sigs []*Signature) *matched {
	m := &matched{byLine: map[*nodediagv1.LogLine]*lineInfo{}, byName: map[string][]Match{}}
	var problems, facts []*Signature
	for _, s := range sigs {
		if s.Fact != "" {
			facts = append(facts, s)
		} else {
			problems = append(problems, s)
		}
	}
	for _, src := range in.Logs() {
		for _, l := range src.GetLines() {
			text := l.GetText()
			kind := lineKind(src, l)
			lower, ascii := lowerASCII(text)
			info := &lineInfo{notable: logline.Notable(text)}
			for _, s := range problems {
				if !s.appliesTo(kind) || !mayMatch(s.hints, lower, ascii) {
					continue
				}
				if sub := s.re.FindStringSubmatch(text); sub != nil {
					info.claim = &Match{Sig: s, Src: src, Line: l, sub: sub}
					m.claims = append(m.claims, *info.claim)
					m.byName[s.ID] = append(m.byName[s.ID], *info.claim)
					break
				}
			}
			for _, s := range facts {
				if !s.appliesTo(kind) || !mayMatch(s.hints, lower, ascii) {
					continue
				}
				if sub := s.re.FindStringSubmatch(text); sub != nil {
					fm := Match{Sig: s, Src: src, Line: l, sub: sub}
					info.facts = append(info.facts, fm)
					m.byName[s.Fact] = append(m.byName[s.Fact], fm)
				}
			}
			info.err = errorLine(src, l, info)
			info.warnedFailure = !info.err && warnedFailure(src, l, info)
			m.byLine[l] = info
		}
	}
	m.templates = mineTemplates(in, m)
	return m
}

// m is the matcher's result, computed on first use with the engine's
// signatures (the embedded ones for an Input made without an engine: the
// rules' own tests).
func (in *Input) m() *matched {
	if in.matches == nil {
		sigs := in.sigs
		if sigs == nil {
			sigs = embeddedSignatures()
		}
		in.matches = matchAll(in, sigs)
	}
	return in.matches
}

// Matched returns the matches of a problem ID or a fact name among the
// lines of the window, in evidence order.
func (in *Input) Matched(name string) []Match {
	var out []Match
	for _, m := range in.m().byName[name] {
		if in.InWindow(m.Line.GetTime()) {
			out = append(out, m)
		}
	}
	return out
}

// MatchedIn returns the matches of a problem ID or a fact name among the
// lines of one log, window or not (a container's runs are judged whole).
func (in *Input) MatchedIn(src *nodediagv1.LogExcerpt, name string) []Match {
	var out []Match
	for _, m := range in.m().byName[name] {
		if m.Src == src {
			out = append(out, m)
		}
	}
	return out
}

// Claim returns the problem signature's match of a line, or nil.
func (in *Input) Claim(l *nodediagv1.LogLine) *Match {
	if info := in.m().byLine[l]; info != nil {
		return info.claim
	}
	return nil
}

// HasFact says whether the fact signature of that name matched the line.
func (in *Input) HasFact(l *nodediagv1.LogLine, name string) bool {
	info := in.m().byLine[l]
	return info != nil && hasFact(info, name)
}

// Notable says whether the line says something went wrong
// (logline.Notable).
func (in *Input) Notable(l *nodediagv1.LogLine) bool {
	info := in.m().byLine[l]
	return info != nil && info.notable
}

// embeddedSignatures are the shipped signatures, loaded once.
var embeddedSignatures = sync.OnceValue(func() []*Signature {
	sigs, err := LoadSignatures(nil)
	if err != nil {
		return nil // a test keeps the shipped signatures loadable
	}
	return sigs
})

// IsError says whether the line states an error: its own level (klog E or
// F, logrus error and above), or a notable line of a log without levels.
func (in *Input) IsError(l *nodediagv1.LogLine) bool {
	info := in.m().byLine[l]
	return info != nil && info.err
}

// warnedFailure says whether the line is a cloud-init warning of a failure.
func (in *Input) warnedFailure(l *nodediagv1.LogLine) bool {
	info := in.m().byLine[l]
	return info != nil && info.warnedFailure
}

// LastWords quotes a component's last error lines in the window (those of
// the log kind: "kubelet", "containerd"), systemd's lines about it left out:
// what it said as it failed, the most recent last, each message once.
func (in *Input) LastWords(kind string, n int) []*nodediagv1.Quote {
	return in.errorQuotes([]string{kind}, n, false)
}

// FirstErrors quotes the first error lines in the window of logs of these
// kinds ("cloud-init-output", "cloud-init"): the first step that failed,
// each message once. cloud-init's warnings of a failure count: that is the
// level cloud-init reports its failing steps at.
func (in *Input) FirstErrors(kinds []string, n int) []*nodediagv1.Quote {
	return in.errorQuotes(kinds, n, true)
}

func (in *Input) errorQuotes(kinds []string, n int, first bool) []*nodediagv1.Quote {
	var all []Match
	for _, src := range in.Logs() {
		for _, l := range src.GetLines() {
			if l.GetProgram() == "systemd" || !slices.Contains(kinds, lineKind(src, l)) || !(in.IsError(l) || first && in.warnedFailure(l)) || !in.InWindow(l.GetTime()) || in.HasFact(l, "runtime-cni-noise") {
				continue
			}
			all = append(all, Match{Src: src, Line: l})
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Time().Before(all[j].Time()) })
	if !first {
		slices.Reverse(all)
	}
	var picked []*nodediagv1.Quote
	seen := map[string]bool{}
	for _, m := range all {
		if len(picked) == n {
			break
		}
		key := messageTemplate(m.Line.GetText())
		if seen[key] {
			continue
		}
		seen[key] = true
		picked = append(picked, m.Quote())
	}
	if !first {
		slices.Reverse(picked)
	}
	return picked
}
