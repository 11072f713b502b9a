package incident

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nodediag/nodediag/agent/check"
	"github.com/nodediag/nodediag/agent/rules"
	"github.com/nodediag/nodediag/collector/capi"
	"github.com/nodediag/nodediag/collector/workload"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// Options tune Diagnose.
type Options struct {
	// Now is the time the report is made at (ages: "Provisioned, created
	// 42m ago"); zero means time.Now().
	Now time.Time
	// Engine judges the nodes' evidence again; nil means rules.NewEngine()
	// (made once per Diagnose). Pass one to share it between calls: it is
	// used from several goroutines (its compiled signatures are read-only).
	Engine *rules.Engine
	// MaxQuotes bounds the node quotes per finding (3 if zero) and
	// MaxLines the lines per quote (3 if zero); the rest is referenced.
	MaxQuotes, MaxLines int
	// Cache, when set, keeps re-judged reports between calls (a
	// collector diagnosing the same cluster again re-judges only the
	// nodes whose report or Machine version changed).
	Cache *RejudgeCache
	// Grace is how long a Machine may take to provision before being
	// without a node's cause is an error (15m if zero): CAPZ VMs
	// usually bootstrap in 5-10 minutes, and "Machine is being created"
	// is no finding.
	Grace time.Duration
	// Workload is the workload cluster's own state (its Nodes and the
	// chain's system workloads), read from its API server or a CI tree's
	// dumps; nil when it was not read. A State whose API server did not
	// answer is a gap in the report.
	Workload *workload.State
	// ObjectLogs are the management cluster's controller log lines and
	// Warning events that name objects (a CI tree's controller logs and
	// events.log): the evidence of a Machine whose node gave none.
	ObjectLogs []ObjectLog
}

// Diagnose joins the cluster's Machines with the node reports, re-judges the
// nodes with their Machines' expectations, applies the cluster rules and
// returns the ranked, redacted incident report. reports are the latest
// report of each node; a report without Evidence is used as it is.
func Diagnose(c *capi.Cluster, reports []NodeReport, o Options) (*Incident, error) {
	if c == nil {
		return nil, fmt.Errorf("diagnose: no cluster")
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	if o.MaxQuotes <= 0 {
		o.MaxQuotes = 3
	}
	if o.MaxLines <= 0 {
		o.MaxLines = 3
	}
	if o.Grace <= 0 {
		o.Grace = 15 * time.Minute
	}
	if o.Engine == nil {
		e, err := rules.NewEngine()
		if err != nil {
			return nil, fmt.Errorf("diagnose: loading the agent's rules: %w", err)
		}
		o.Engine = e
	}
	d := &diag{c: c, o: o, byKey: map[string]*Finding{}, downstream: map[*Finding]bool{}}
	var mns []MachineNode
	for _, mn := range Join(c, reports) {
		if mn.Machine == nil {
			d.unmatched = append(d.unmatched, mn.Node.NodeName())
			continue
		}
		mns = append(mns, mn)
	}
	d.machines = make([]*mstate, len(mns))
	// Re-judging is the expensive part (the signatures over every log
	// line): spread it over the CPUs; the order of the result is the
	// Machines'.
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(runtime.GOMAXPROCS(0), max(len(mns), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				d.machines[i] = d.machineState(mns[i])
			}
		}()
	}
	for i := range mns {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, s := range d.machines {
		if s.rejudged != nil {
			d.rejudged = append(d.rejudged, *s.rejudged)
		}
	}
	d.gaps()
	d.ruleMachines()
	d.ruleControlPlane()
	d.ruleAddons()
	d.ruleWorkload()
	d.ruleMachineDeployments()
	d.ruleMachinePools()
	d.ruleObjectLogs()
	d.ruleMachineHealthChecks()
	d.chain()
	inc := d.assemble()
	redactIncident(inc)
	return inc, nil
}

// diag is one Diagnose call's state.
type diag struct {
	c         *capi.Cluster
	o         Options
	machines  []*mstate
	unmatched []string
	findings  []*Finding
	byKey     map[string]*Finding
	gapList   []Gap
	rejudged  []Rejudgement
	links     []ChainLink
	// addons: the add-on findings by kind ("cni", "cloud-provider").
	addons map[string]*Finding
	// addonOK: a chart of that kind matches the cluster.
	addonOK map[string]bool
	// wlOK: the workload cluster runs the link's workloads, all ready.
	wlOK map[string]bool
	// downstream: what the finding shows is what an earlier broken link
	// makes of it (a component that cannot reach the API server, a pod
	// waiting for the node's network), so that link explains it.
	downstream map[*Finding]bool
}

// mstate is a Machine with its (re-judged) node report.
type mstate struct {
	MachineNode
	m      *capi.Machine
	rep    *nodediagv1.Report
	top    *nodediagv1.Finding // the node's first finding, if any
	failed bool                // the node has a finding at error or above
	// rejudged is set when the Machine's expectations changed the verdict.
	rejudged *Rejudgement
	// finding is the Machine's cluster finding, if any.
	finding *Finding
}

func (s *mstate) role() string {
	if s.m.ControlPlane {
		return "control-plane"
	}
	return "worker"
}

func (s *mstate) nodeName() string {
	if s.Node != nil {
		return s.Node.NodeName()
	}
	return s.m.NodeRef.Name
}

// machineState re-judges the node's evidence with the Machine's version as
// the expected one: the agent's rules and report.Build, nothing else.
func (d *diag) machineState(mn MachineNode) *mstate {
	s := &mstate{MachineNode: mn, m: mn.Machine}
	if mn.Node == nil {
		return s
	}
	s.rep = mn.Node.Report
	if ev := s.rep.GetEvidence(); ev != nil {
		ctx := machineRole(s.m)
		ctx.ExpectVersion = s.m.Version
		key := cacheKey(mn.Node.NodeName(), s.m.Name, ev, s.m.Version+"\x00"+ctx.Role)
		if c, ok := d.o.Cache.get(key); ok {
			s.rep, s.rejudged = c.rep, c.rj
			return s.finish()
		}
		// The agent's own window, so that only the expectation changes; the
		// stored evidence was redacted by its agent.
		re, err := check.Rejudge(s.rep, check.Options{Engine: d.o.Engine, Context: ctx, NodeName: mn.Node.NodeName()}, false)
		if err != nil {
			return s.finish()
		}
		if rj, changed := compareVerdicts(s.rep, re); changed {
			rj.Node, rj.Machine, rj.ExpectVersion, rj.Role = mn.Node.NodeName(), s.m.Name, s.m.Version, ctx.Role
			s.rejudged = &rj
		}
		s.rep = re
		d.o.Cache.put(key, cached{rep: re, rj: s.rejudged})
	}
	return s.finish()
}

// machineRole is what the Machine says its node is, where and why: the
// cluster.x-k8s.io/control-plane label makes a control plane Machine, every
// other Machine is a worker.
func machineRole(m *capi.Machine) rules.Context {
	c := rules.Context{Role: rules.RoleWorker, RoleSource: "Machine/" + m.Name + " metadata.labels", RoleReason: "no cluster.x-k8s.io/control-plane label"}
	if m.ControlPlane {
		c.Role, c.RoleReason = rules.RoleControlPlane, "label cluster.x-k8s.io/control-plane"
	}
	return c
}

func (s *mstate) finish() *mstate {
	if fs := s.rep.GetFindings(); len(fs) > 0 {
		s.top = fs[0]
	}
	for _, f := range s.rep.GetFindings() {
		if rules.SeverityAtLeast(f.GetSeverity(), rules.Error) {
			s.failed = true
		}
	}
	return s
}

func compareVerdicts(before, after *nodediagv1.Report) (Rejudgement, bool) {
	ids := func(r *nodediagv1.Report) map[string]bool {
		m := map[string]bool{}
		for _, f := range r.GetFindings() {
			m[f.GetId()+": "+f.GetTitle()] = true
		}
		return m
	}
	top := func(r *nodediagv1.Report) string {
		if fs := r.GetFindings(); len(fs) > 0 {
			return fs[0].GetId()
		}
		return "none"
	}
	b, a := ids(before), ids(after)
	rj := Rejudgement{Before: top(before), After: top(after)}
	for k := range a {
		if !b[k] {
			rj.Added = append(rj.Added, k)
		}
	}
	for k := range b {
		if !a[k] {
			rj.Removed = append(rj.Removed, k)
		}
	}
	sort.Strings(rj.Added)
	sort.Strings(rj.Removed)
	return rj, len(rj.Added)+len(rj.Removed) > 0 || rj.Before != rj.After
}

// ---- findings and their graph ------------------------------------------------

func (d *diag) add(f *Finding) *Finding {
	f.Key = f.ID + "/" + f.Subject
	if old, ok := d.byKey[f.Key]; ok {
		return old
	}
	d.findings = append(d.findings, f)
	d.byKey[f.Key] = f
	return f
}

// explain records that cause explains cons, unless that would make a
// circle (cons already explains cause, directly or not).
func (d *diag) explain(cause, cons *Finding) {
	if cause == nil || cons == nil || cause == cons || d.reaches(cons, cause, 0) {
		return
	}
	for _, k := range cause.Explains {
		if k == cons.Key {
			return
		}
	}
	cause.Explains = append(cause.Explains, cons.Key)
	cons.ExplainedBy = append(cons.ExplainedBy, cause.Key)
	cons.Consequence = true
}

func (d *diag) reaches(from, to *Finding, depth int) bool {
	if from == to {
		return true
	}
	if depth > len(d.findings) {
		return false
	}
	for _, k := range from.Explains {
		if d.reaches(d.byKey[k], to, depth+1) {
			return true
		}
	}
	return false
}

// ---- evidence ----------------------------------------------------------------

func objName(o *capi.Object) string { return o.Kind + "/" + o.Name }

// condEvidence quotes a condition of an object.
func condEvidence(o *capi.Object, c capi.Condition) Evidence {
	s := fmt.Sprintf("%s=%s", c.Type, c.Status)
	if c.Reason != "" {
		s += " reason=" + c.Reason
	}
	if c.Message != "" {
		s += " message=" + strconvQuote(c.Message)
	}
	e := Evidence{Source: objName(o) + " status.conditions", Excerpt: s}
	if !c.LastTransitionTime.IsZero() {
		t := c.LastTransitionTime.UTC()
		e.Time = &t
	}
	return e
}

func strconvQuote(s string) string { return fmt.Sprintf("%q", s) }

// badConditions quotes the conditions of o that are not True (at most n),
// skipping the aggregate ones that repeat the others.
func badConditions(o *capi.Object, n int) []Evidence {
	var out []Evidence
	seen := map[string]bool{}
	for _, list := range [][]capi.Condition{o.Conditions, o.V1Beta1Conditions} {
		for _, c := range list {
			if c.Status == "True" || seen[c.Type] || c.Type == "Ready" || c.Type == "Available" {
				continue
			}
			// Conditions whose False is the normal state.
			if strings.HasSuffix(c.Type, "Deleting") || c.Type == "Paused" || c.Type == "ScalingUp" && c.Status == "False" {
				continue
			}
			seen[c.Type] = true
			if len(out) < n {
				out = append(out, condEvidence(o, c))
			}
		}
	}
	return out
}

// nodeEvidence quotes a node finding, bounded: MaxQuotes quotes of MaxLines
// lines each, the rest referenced by node and source.
func (d *diag) nodeEvidence(node string, f *nodediagv1.Finding) []Evidence {
	var out []Evidence
	qs := f.GetEvidence()
	for i, q := range qs {
		if i == d.o.MaxQuotes {
			out[len(out)-1].More = fmt.Sprintf("%d more quote(s) in node %s's report, finding %s", len(qs)-i, node, f.GetId())
			break
		}
		e := Evidence{Source: "node " + node + ": " + q.GetSource(), Line: q.GetLine()}
		if q.Time != nil {
			t := q.Time.AsTime().UTC()
			e.Time = &t
		}
		lines := strings.Split(strings.TrimRight(q.GetExcerpt(), "\n"), "\n")
		if len(lines) > d.o.MaxLines {
			e.More = fmt.Sprintf("%d more line(s) in node %s's report (%s)", len(lines)-d.o.MaxLines, node, q.GetSource())
			lines = lines[:d.o.MaxLines]
		}
		for i, l := range lines {
			// The agent clipped its quote around the match already
			// (rules.MaxExcerpt): cutting it again from the start would
			// drop what proves it. Only an oversized line is cut.
			if n := rules.MaxExcerpt + 2*len("…"); len(l) > n {
				for n > 0 && (l[n]&0xC0) == 0x80 {
					n--
				}
				lines[i] = l[:n] + "…"
			}
		}
		e.Excerpt = strings.Join(lines, "\n")
		out = append(out, e)
	}
	return out
}

func nodeCause(node string, f *nodediagv1.Finding) *NodeFinding {
	return &NodeFinding{Node: node, ID: f.GetId(), Category: f.GetCategory(), Severity: f.GetSeverity(), Title: f.GetTitle(), Consequences: f.GetExplains()}
}

// domainOf maps a node finding's category to a failure domain.
func domainOf(category string) string { return rules.DomainOf(category) }

func age(now, t time.Time) string {
	if t.IsZero() || now.Before(t) {
		return ""
	}
	dur := now.Sub(t).Truncate(time.Minute)
	if dur < time.Minute {
		return "<1m"
	}
	h, m := int(dur.Hours()), int(dur.Minutes())%60
	switch {
	case h >= 48:
		return fmt.Sprintf("%dd", h/24)
	case h > 0:
		return fmt.Sprintf("%dh%02dm", h, m)
	}
	return fmt.Sprintf("%dm", m)
}

// phaseSince is when the Machine entered its phase when the object says
// (v1beta1 status.lastUpdated), else its creation.
func phaseSince(m *capi.Machine) (time.Time, string) {
	if m.Raw != nil {
		if s, ok := nestedString(m.Raw.Object, "status", "lastUpdated"); ok {
			if t, err := time.Parse(time.RFC3339, s); err == nil {
				return t, "in this phase since"
			}
		}
	}
	return m.CreationTimestamp, "created"
}

// sinceText says how long the Machine has been in its phase, or since its
// creation: "created 45m ago".
func sinceText(now time.Time, m *capi.Machine) string {
	t, how := phaseSince(m)
	switch a := age(now, t); {
	case t.IsZero():
		return "age unknown"
	case a == "":
		return how + " " + t.UTC().Format(time.RFC3339)
	default:
		return how + " " + a + " ago"
	}
}

func nestedString(obj map[string]any, path ...string) (string, bool) {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", false
		}
		cur = m[p]
	}
	s, ok := cur.(string)
	return s, ok && s != ""
}

// RejudgeCache keeps re-judged node reports, keyed by node, Machine,
// evidence (machine ID and collection time) and expected version. Safe for
// concurrent use; its values are shared and never modified. It holds at
// most maxCached entries: when full it starts again empty (old reports of
// a node are never asked for again).
type RejudgeCache struct {
	mu sync.Mutex
	m  map[string]cached
}

type cached struct {
	rep *nodediagv1.Report
	rj  *Rejudgement
}

// NewRejudgeCache returns an empty cache.
func NewRejudgeCache() *RejudgeCache { return &RejudgeCache{m: map[string]cached{}} }

func cacheKey(node, machine string, ev *nodediagv1.Evidence, version string) string {
	return node + "\x00" + machine + "\x00" + ev.GetHost().GetMachineId() + "\x00" + ev.GetCollectedAt().AsTime().Format(time.RFC3339Nano) + "\x00" + version
}

func (c *RejudgeCache) get(k string) (cached, bool) {
	if c == nil {
		return cached{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

func (c *RejudgeCache) put(k string, v cached) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxCached {
		clear(c.m)
	}
	c.m[k] = v
}

const maxCached = 50000
