package rules

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

var (
	closureOnce sync.Once
	closure     map[string]map[string]bool
)

// explainsClosure is the transitive closure of Problem.Explains.
func explainsClosure() map[string]map[string]bool {
	closureOnce.Do(func() {
		closure = map[string]map[string]bool{}
		var visit func(id string, into map[string]bool)
		visit = func(id string, into map[string]bool) {
			p, ok := catalog[id]
			if !ok {
				return
			}
			for _, e := range p.Explains {
				if !into[e] {
					into[e] = true
					visit(e, into)
				}
			}
		}
		for id := range catalog {
			set := map[string]bool{}
			visit(id, set)
			closure[id] = set
		}
	})
	return closure
}

// checkAcyclic fails when a problem explains itself through others: ranking
// needs causes and consequences, not circles.
func checkAcyclic() error {
	var cycles []string
	for id, set := range explainsClosure() {
		if set[id] {
			cycles = append(cycles, id)
		}
	}
	sort.Strings(cycles)
	if len(cycles) > 0 {
		return fmt.Errorf("explains graph has cycles through %s", strings.Join(cycles, ", "))
	}
	return nil
}

// rank orders findings so that the first is the most likely root cause, and
// fills Explains and Consequence.
//
// A finding explains another when its problem's Explains (transitively)
// names the other's problem and it is at least a warning. A finding that some
// other explains is a consequence. Order: root candidates (warning and up)
// first, then consequences, nearest to their cause first, then the remaining
// info findings; within each: severity, causes before symptoms, confidence,
// catalog order, earliest evidence, title. A latent finding (see latent)
// explains nothing: the node shows another cause at work. When the
// bootstrap failed first (see bootstrapFirst), the bootstrap's failures
// explain the kubelet's instead of the other way round.
func rank(fs []*nodediagv1.Finding, o rankOptions) {
	cl := explainsClosure()
	explains := func(a, b string) bool {
		if o.bootstrapFirst {
			switch {
			case isKubeletSymptom(a) && isBootstrapSymptom(b):
				return false
			case isBootstrapSymptom(a) && isKubeletSymptom(b):
				return true
			}
		}
		return cl[a][b]
	}
	explainedBy := map[*nodediagv1.Finding][]*nodediagv1.Finding{}
	for _, a := range fs {
		a.Explains = nil
		a.Consequence = false
	}
	for _, a := range fs {
		if !SeverityAtLeast(a.Severity, Warning) || o.latent[a] {
			continue
		}
		seen := map[string]bool{}
		for _, b := range fs {
			if a == b || a.Id == b.Id || !explains(a.Id, b.Id) {
				continue
			}
			b.Consequence = true
			explainedBy[b] = append(explainedBy[b], a)
			if !seen[b.Id] {
				seen[b.Id] = true
				a.Explains = append(a.Explains, b.Id)
			}
		}
		sort.Strings(a.Explains)
	}
	// A cause is as severe as what it is shown to cause: a missing CNI
	// configuration (a warning: normal before the add-on arrives) that
	// explains a network not ready for an hour (an error) is the error's
	// cause. A cause found in files or state, with no line of a log, quotes
	// the first log line of the most severe finding it explains: the line
	// that shows its effect.
	for _, a := range fs {
		if a.Consequence || len(explainedBy) == 0 {
			continue
		}
		var worst *nodediagv1.Finding
		for _, b := range fs {
			for _, x := range explainedBy[b] {
				if x == a && (worst == nil || Severity(b.Severity).Above(Severity(worst.Severity))) {
					worst = b
				}
			}
		}
		if worst == nil {
			continue
		}
		if Severity(worst.Severity).Above(Severity(a.Severity)) {
			a.Severity = worst.Severity
		}
		if !hasLogQuote(a) {
			for _, q := range worst.Evidence {
				if isLogQuote(q) {
					a.Evidence = append(a.Evidence, q)
					break
				}
			}
		}
	}
	// depth: the longest chain of explainers above a finding (the graph is
	// acyclic, checked by the catalog test).
	depth := map[*nodediagv1.Finding]int{}
	var depthOf func(f *nodediagv1.Finding, guard int) int
	depthOf = func(f *nodediagv1.Finding, guard int) int {
		if d, ok := depth[f]; ok {
			return d
		}
		d := 0
		if guard < len(fs) {
			for _, a := range explainedBy[f] {
				if ad := depthOf(a, guard+1) + 1; ad > d {
					d = ad
				}
			}
		}
		depth[f] = d
		return d
	}
	group := func(f *nodediagv1.Finding) int {
		switch {
		case f.Consequence:
			return 1 + depthOf(f, 0)
		case SeverityAtLeast(f.Severity, Warning):
			return 0
		default:
			return 1 << 20
		}
	}
	sort.SliceStable(fs, func(i, j int) bool {
		if gi, gj := group(fs[i]), group(fs[j]); gi != gj {
			return gi < gj
		}
		return less(fs[i], fs[j])
	})
}

// rankOptions are what the evidence says about the order of causes.
type rankOptions struct {
	latent         map[*nodediagv1.Finding]bool
	bootstrapFirst bool
}

// isBootstrapSymptom and isKubeletSymptom: the bootstrap's failures
// (bootstrapSymptoms) and the kubelet's own (kubeletSymptoms without them).
func isBootstrapSymptom(id string) bool { return slices.Contains(bootstrapSymptoms, id) }
func isKubeletSymptom(id string) bool {
	return slices.Contains(kubeletSymptoms, id) && !isBootstrapSymptom(id)
}

func less(a, b *nodediagv1.Finding) bool {
	if sa, sb := Severity(a.Severity).Rank(), Severity(b.Severity).Rank(); sa != sb {
		return sa > sb
	}
	pa, pb := catalog[a.Id], catalog[b.Id]
	if pa != nil && pb != nil && pa.Symptom != pb.Symptom {
		return !pa.Symptom
	}
	if ca, cb := Confidence(a.Confidence).Rank(), Confidence(b.Confidence).Rank(); ca != cb {
		return ca > cb
	}
	if pa != nil && pb != nil && pa.order != pb.order {
		return pa.order < pb.order
	}
	if ta, tb := firstTime(a), firstTime(b); ta != tb {
		return ta < tb
	}
	return a.Title < b.Title
}

// firstTime is the earliest quoted time, as a sortable string ("" sorts last
// by comparing as greater through the "~" sentinel).
func firstTime(f *nodediagv1.Finding) string {
	best := "~"
	for _, q := range f.Evidence {
		if q.Time != nil {
			if s := q.Time.AsTime().UTC().Format("2006-01-02T15:04:05.000000000Z"); s < best {
				best = s
			}
		}
	}
	return best
}

// hasLogQuote says whether f quotes a line of a log.
func hasLogQuote(f *nodediagv1.Finding) bool {
	for _, q := range f.Evidence {
		if isLogQuote(q) {
			return true
		}
	}
	return false
}

// isLogQuote says whether q is a timed line of a log (a journal's, or a
// file under /var/log), not a state file's.
func isLogQuote(q *nodediagv1.Quote) bool {
	return q.Time != nil && (strings.HasPrefix(q.Source, "journal:") || strings.HasPrefix(q.Source, "/var/log/"))
}
