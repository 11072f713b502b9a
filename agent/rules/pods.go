package rules

import (
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// podRules judge the containers' logs of /var/log/pods (the pods probe).
var podRules = []Rule{
	{Name: "pod-crash-loops", Fn: podCrashLoops},
}

// What makes a crash loop.
//
// The kubelet starts <n>+1.log at every start of a container, including the
// start after a reboot, so <n> alone counts reboots too: a control plane node
// rebooted four times shows 4.log for a perfectly healthy etcd. A crash loop
// is told from that by the runs themselves: the latest run is short, and
// either it ended with an exit line (the process said why it stopped), or the
// run before it was short too and the latest started right after it (the
// kubelet's back-off, at most five minutes by default). A run whose log was
// rotated ran long enough to fill containerLogMaxSize: not a crash loop.
const (
	crashMinRestarts = 3
	// crashRunMax is the longest a run of a crash loop lasts (from its
	// log's first line to its last): long enough for a kube-apiserver that
	// its startup probe kills after four minutes.
	crashRunMax = 10 * time.Minute
	// crashGapMax is the longest pause between two runs of a crash loop:
	// the kubelet's back-off caps at five minutes.
	crashGapMax = 10 * time.Minute
	// crashClockSlack tolerates a next run that seems to start a little
	// before the previous one's last line (clocks of different writers).
	crashClockSlack = time.Minute
)

// crashRun is what the log of one run of a container shows.
type crashRun struct {
	ex          *nodediagv1.LogExcerpt
	file        string // base name of the log
	rotated     bool   // the run's log was rotated: it ran long
	timed       bool
	first, last time.Time
	exit        *nodediagv1.LogLine // the first exit line of the run
}

func (r crashRun) short() bool {
	return r.ex != nil && r.timed && !r.rotated && r.last.Sub(r.first) <= crashRunMax
}

func (r crashRun) duration() time.Duration { return r.last.Sub(r.first) }

// newCrashRun reads a run from its excerpt; files are the container's log
// files, to see whether the run's log was rotated.
// Its exit line is the first the crash-exit-line fact matches: the line a
// process writes as it dies (a klog fatal, a Go panic, cobra's "Error: ",
// component-base's "command failed", a zap or logrus fatal).
func newCrashRun(in *Input, ex *nodediagv1.LogExcerpt, files []string) crashRun {
	r := crashRun{ex: ex}
	if ex == nil {
		return r
	}
	r.file = path.Base(ex.GetSource())
	num, rest, _ := strings.Cut(r.file, ".log")
	r.rotated = rest != ""
	for _, f := range files {
		if strings.HasPrefix(f, num+".log.") {
			r.rotated = true
		}
	}
	if ex.GetFirstTime() != nil && ex.GetLastTime() != nil {
		r.timed = true
		r.first, r.last = ex.GetFirstTime().AsTime(), ex.GetLastTime().AsTime()
	}
	if exits := in.MatchedIn(ex, "crash-exit-line"); len(exits) > 0 {
		r.exit = exits[0].Line
	}
	return r
}

// podCrash is a container judged to be crash-looping.
type podCrash struct {
	c            *nodediagv1.PodContainer
	problem      *Problem
	component    string // the control plane component, for static pods
	latest, prev crashRun
	backToBack   bool
}

// crashLoop judges one container.
func crashLoop(in *Input, c *nodediagv1.PodContainer) (podCrash, bool) {
	pc := podCrash{c: c, latest: newCrashRun(in, c.GetLog(), c.GetFiles()), prev: newCrashRun(in, c.GetPreviousLog(), c.GetFiles())}
	if c.GetRestarts() < crashMinRestarts || !in.InWindow(c.GetLastTime()) {
		return pc, false
	}
	latest, prev := pc.latest, pc.prev
	if latest.timed && !latest.short() {
		return pc, false // the latest run has lasted: whatever happened before is over
	}
	if latest.short() && prev.short() {
		gap := latest.first.Sub(prev.last)
		pc.backToBack = gap >= -crashClockSlack && gap <= crashGapMax
	}
	exited := latest.short() && latest.exit != nil ||
		!latest.timed && prev.short() && prev.exit != nil
	return pc, pc.backToBack || exited
}

// controlPlaneComponents are the static pods of the control plane, in the
// order they depend on each other (and in which crash loops are reported).
var controlPlaneComponents = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}

// podComponent is the control plane component a static pod runs ("etcd" for
// "etcd-node-1"), "" for other pods.
func podComponent(c *nodediagv1.PodContainer) string {
	if !c.GetStatic() {
		return ""
	}
	for _, comp := range controlPlaneComponents {
		if strings.HasPrefix(c.GetPod(), comp+"-") {
			return comp
		}
	}
	return ""
}

// podCrashLoops raises StaticPodCrashLoop (etcd, kube-apiserver),
// ControllerCrashLoop (kube-controller-manager, kube-scheduler) and
// PodCrashLoop (the other system pods) for the containers that crash-loop in
// the window.
//
// Confidence is high when two short runs back to back show the loop, medium
// when one run and its exit line do. When etcd crash-loops, a kube-apiserver
// crash loop of the same node is likely its consequence (it cannot reach its
// storage, and the catalog cannot tell one StaticPodCrashLoop from another):
// its finding has low confidence, so that etcd's ranks first.
func podCrashLoops(in *Input) []*nodediagv1.Finding {
	var crashes []podCrash
	for _, c := range in.Pods() {
		pc, ok := crashLoop(in, c)
		if !ok {
			continue
		}
		pc.component = podComponent(c)
		switch pc.component {
		case "etcd", "kube-apiserver":
			pc.problem = StaticPodCrashLoop
		case "kube-controller-manager", "kube-scheduler":
			pc.problem = ControllerCrashLoop
		default:
			pc.problem = PodCrashLoop
		}
		crashes = append(crashes, pc)
	}
	order := func(pc podCrash) int {
		for i, comp := range controlPlaneComponents {
			if pc.component == comp {
				return i
			}
		}
		return len(controlPlaneComponents)
	}
	sort.SliceStable(crashes, func(i, j int) bool { return order(crashes[i]) < order(crashes[j]) })
	etcdDown := false
	var out []*nodediagv1.Finding
	for _, pc := range crashes {
		f := pc.finding(in)
		if pc.component == "kube-apiserver" && etcdDown {
			f.Confidence = Low
		}
		if pc.component == "etcd" {
			etcdDown = true
		}
		out = append(out, f)
	}
	return out
}

// finding quotes the container's restarts, how its runs went, and the line
// that says why it exits.
func (pc podCrash) finding(in *Input) *nodediagv1.Finding {
	c := pc.c
	params := Params{
		"pod":       c.GetPod(),
		"container": c.GetContainer(),
		"namespace": c.GetNamespace(),
		"restarts":  strconv.FormatUint(uint64(c.GetRestarts()), 10),
	}
	quotes := []*nodediagv1.Quote{
		QuoteText(c.GetDir(), fmt.Sprintf("%d restarts (0.log .. %d.log, one log per start; present: %s)", c.GetRestarts(), c.GetRestarts(), strings.Join(c.GetFiles(), ", "))),
	}
	if q := pc.runsQuote(); q != nil {
		quotes = append(quotes, q)
	}
	quotes = append(quotes, pc.causeQuote(in))
	if q := pc.manifestFlagQuote(in); q != nil {
		quotes = append(quotes, q)
	}
	f := pc.problem.Finding(params, quotes...)
	if !pc.backToBack {
		// One run seen: its exit line is the evidence, not the pace.
		f.Confidence = Medium
	}
	return f
}

// runsQuote states how long the runs lasted and how far apart they were.
func (pc podCrash) runsQuote() *nodediagv1.Quote {
	l, p := pc.latest, pc.prev
	var parts []string
	if l.timed {
		parts = append(parts, fmt.Sprintf("%s: the run lasted %s (%s to %s)", l.file, humanDuration(l.duration()), podsClock(l.first), podsClock(l.last)))
	} else if l.ex != nil {
		parts = append(parts, l.file+": no timed line yet")
	}
	if p.timed {
		s := fmt.Sprintf("%s: the run before lasted %s (%s to %s)", p.file, humanDuration(p.duration()), podsClock(p.first), podsClock(p.last))
		if l.timed {
			s += fmt.Sprintf(", and the next began %s after it", humanDuration(l.first.Sub(p.last)))
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return nil
	}
	src := l.ex.GetSource()
	if src == "" {
		src = p.ex.GetSource()
	}
	return QuoteText(src, strings.Join(parts, "; "))
}

// causeQuote is the line that says why the container exits: the first exit
// line of the latest run that has one (a Go panic restates its message and
// adds a stack after the line that says why; a later line is aftermath),
// else the last notable line of the latest run, else of the run before.
func (pc podCrash) causeQuote(in *Input) *nodediagv1.Quote {
	for _, r := range []crashRun{pc.latest, pc.prev} {
		if r.exit != nil {
			return QuoteLog(r.ex, r.exit)
		}
	}
	for _, r := range []crashRun{pc.latest, pc.prev} {
		lines := r.ex.GetLines()
		for i := len(lines) - 1; i >= 0; i-- {
			if in.Notable(lines[i]) {
				return QuoteLog(r.ex, lines[i])
			}
		}
	}
	return nil
}

// manifestFlagQuote is, for a static pod that exits on a flag it does not
// know ("Error: unknown flag: --address" after an upgrade removed it), the
// line of its manifest that passes that flag: the line to change.
func (pc podCrash) manifestFlagQuote(in *Input) *nodediagv1.Quote {
	var flag string
	for _, r := range []crashRun{pc.latest, pc.prev} {
		if r.ex == nil {
			continue
		}
		for _, m := range in.MatchedIn(r.ex, "component-unknown-flag") {
			flag = m.Group("flag")
		}
		if flag != "" {
			break
		}
	}
	if flag == "" || pc.component == "" {
		return nil
	}
	for _, sp := range in.Kubeadm().GetStaticPods() {
		if sp.GetName() != pc.component && path.Base(sp.GetPath()) != pc.component+".yaml" {
			continue
		}
		for _, l := range sp.GetFlagLines() {
			t := strings.Trim(strings.TrimPrefix(strings.TrimSpace(l.GetText()), "- "), `"',`)
			if t == flag || strings.HasPrefix(t, flag+"=") {
				return QuoteLine(l)
			}
		}
	}
	return nil
}

// podsClock formats a time for a quote.
func podsClock(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }
