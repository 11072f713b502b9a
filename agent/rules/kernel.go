package rules

import (
	"fmt"
	"sort"
	"strings"
	"time"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// Kernel rules judge what the kernel's messages (the oom-kill, link-down and
// link-up facts of signatures/05-kernel.json) mean for the node: an OOM kill
// of one of the node's own components, a link that stays down.
var kernelRules = []Rule{
	{Name: "oom-killed", Fn: oomKilledRule},
	{Name: "link-down", Fn: linkDownRule},
}

// nodeComponents are the processes (their comm, which the kernel cuts at 15
// characters) whose death is the node's failure, not a workload's.
var nodeComponents = map[string]bool{
	"kubelet": true, "containerd": true, "dockerd": true, "crio": true, "etcd": true,
	"kube-apiserver": true, "kube-controller": true, "kube-controller-manager": true,
	"kube-scheduler": true, "kube-proxy": true, "systemd-journal": true, "systemd-journald": true,
}

// oomRecent is how long after an OOM kill of a component, with no other, the
// node is taken to have recovered: systemd and the kubelet restart what was
// killed.
const oomRecent = time.Hour

// oomKilledRule raises OOMKilled for the node's components the kernel killed
// for lack of memory in the window: an error when it happened more than once
// or within oomRecent of the evidence's end, a warning for a single kill
// long before it (the component was restarted and has run since). A
// workload's kill (a container over its memory limit) is the pod's business:
// an info finding, never above a failure.
func oomKilledRule(in *Input) []*nodediagv1.Finding {
	ms := append(append([]Match{}, in.Matched("oom-kill")...), in.Matched("oom-kill-context")...)
	if len(ms) == 0 {
		return nil
	}
	sort.SliceStable(ms, func(i, j int) bool { return ms[i].Time().Before(ms[j].Time()) })
	var comps, others []string
	var compMatches, otherMatches []Match
	seen := map[string]bool{}
	for _, m := range ms {
		p := m.Group("process")
		if p == "" {
			continue
		}
		if nodeComponents[p] {
			compMatches = append(compMatches, m)
			if !seen[p] {
				comps = append(comps, p)
			}
		} else {
			otherMatches = append(otherMatches, m)
			if !seen[p] {
				others = append(others, p)
			}
		}
		seen[p] = true
	}
	var out []*nodediagv1.Finding
	if len(compMatches) > 0 {
		f := OOMKilled.Finding(Params{"process": strings.Join(comps, ", ")}, oomQuotes(compMatches)...)
		last := compMatches[len(compMatches)-1].Time()
		if kills := distinctKills(compMatches); kills < 2 && !last.IsZero() && in.Clock.Sub(last) > oomRecent {
			f.Severity, f.Confidence = Warning, Medium
			f.Title += fmt.Sprintf(" once, %s before the evidence ends", humanDuration(in.Clock.Sub(last)))
		}
		out = append(out, f)
	}
	if len(otherMatches) > 0 && len(compMatches) == 0 {
		f := OOMKilled.Finding(Params{"process": strings.Join(others, ", ")}, matchQuotes(otherMatches, 2)...)
		f.Severity = Info
		f.Title += " (a workload, not one of the node's components)"
		out = append(out, f)
	}
	return out
}

// oomQuotes quotes an OOM kill as an operator reads it: the header of the
// first kill (who asked for memory: "etcd invoked oom-killer"), the first
// kill line of each component killed ("Out of memory: Killed process N
// (name)", which names the victim), and the last kill line. The header and
// the summary lines alone only when no kill line was kept.
func oomQuotes(ms []Match) []*nodediagv1.Quote {
	// One line per killed pid, the last: before 4.19 the kernel wrote
	// "Kill process N (x) score S or sacrifice child" (the choice), then
	// "Killed process N (x) total-vm:..." (the kill).
	var kills []Match
	at := map[string]int{}
	for _, m := range ms {
		if m.Sig.Fact != "oom-kill" {
			continue
		}
		if i, ok := at[m.Group("pid")]; ok && m.Group("pid") != "" {
			kills[i] = m
			continue
		}
		at[m.Group("pid")] = len(kills)
		kills = append(kills, m)
	}
	if len(kills) == 0 {
		return matchQuotes(ms, 3)
	}
	var out []*nodediagv1.Quote
	first := kills[0].Time()
	var header *Match
	for i, m := range ms {
		// The header has no pid (the summary line has one); it is the
		// first kill's when written up to a few seconds before it.
		if m.Sig.Fact == "oom-kill-context" && m.Group("pid") == "" && !m.Time().After(first) && first.Sub(m.Time()) <= 5*time.Second {
			header = &ms[i]
		}
	}
	if header != nil {
		out = append(out, header.Quote())
	}
	quoted := map[int]bool{}
	seen := map[string]bool{}
	for i, m := range kills {
		if p := m.Group("process"); !seen[p] && len(out) < maxOOMQuotes-1 {
			seen[p] = true
			quoted[i] = true
			out = append(out, m.Quote())
		}
	}
	if last := len(kills) - 1; !quoted[last] {
		out = append(out, kills[last].Quote())
	}
	return out
}

// maxOOMQuotes bounds the quotes of one OOM finding.
const maxOOMQuotes = 5

// distinctKills counts the kills among OOM matches: the header, the kill and
// the summary of one kill are lines of the same second.
func distinctKills(ms []Match) int {
	var times []time.Time
	for _, m := range ms {
		times = append(times, m.Time())
	}
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	n := 0
	var last time.Time
	for i, t := range times {
		if i == 0 || t.Sub(last) > 5*time.Second {
			n++
		}
		last = t
	}
	return n
}

// matchQuotes quotes the first and the last of ms, at most n lines.
func matchQuotes(ms []Match, n int) []*nodediagv1.Quote {
	var out []*nodediagv1.Quote
	for i, m := range ms {
		if i < n-1 || i == len(ms)-1 {
			out = append(out, m.Quote())
		}
		if len(out) == n {
			break
		}
	}
	return out
}

// linkDownRule raises LinkDown for an interface whose link went down in the
// window: an error while it stays down (no later link-up of it), a warning
// when it came back (a flap; it is the cause of what failed meanwhile, and
// the ranking makes it as severe as what it explains).
func linkDownRule(in *Input) []*nodediagv1.Finding {
	// In time order across sources: the kernel's "NIC Link is Down" comes
	// before the network manager's "Lost carrier" of the same loss.
	downs := append([]Match{}, in.Matched("link-down")...)
	if len(downs) == 0 {
		return nil
	}
	sort.SliceStable(downs, func(i, j int) bool { return downs[i].Time().Before(downs[j].Time()) })
	ups := in.Matched("link-up")
	byIface := map[string][]Match{}
	var order []string
	for _, m := range downs {
		i := m.Group("iface")
		if _, ok := byIface[i]; !ok {
			order = append(order, i)
		}
		byIface[i] = append(byIface[i], m)
	}
	var out []*nodediagv1.Finding
	for _, iface := range order {
		ms := byIface[iface]
		last := ms[len(ms)-1]
		quotes := matchQuotes(ms, 2)
		var back *Match
		for _, u := range ups {
			if u.Group("iface") == iface && !u.Time().Before(last.Time()) {
				back = &u
				break
			}
		}
		f := LinkDown.Finding(Params{"iface": iface}, quotes...)
		if back != nil {
			f.Evidence = append(f.Evidence, back.Quote())
			f.Severity = Warning
			f.Title += fmt.Sprintf(" and came back %s later", humanDuration(back.Time().Sub(last.Time())))
		}
		out = append(out, f)
	}
	return out
}
