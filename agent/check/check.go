// Package check is the pipeline of a check, and the only one: host →
// probes → Evidence → rules → the redacted Report. The agent's check,
// collect and run, nodediag analyze of host roots, bundles and CI artifact
// trees, the collector judging stored reports again, and the load generator
// all call Host or Rejudge, so that a node gets the same verdict whichever
// way its evidence arrives.
package check

import (
	"context"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/probe"
	"github.com/nodediag/nodediag/agent/probes"
	"github.com/nodediag/nodediag/agent/report"
	"github.com/nodediag/nodediag/agent/rules"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// Options are what a check is given besides the host.
type Options struct {
	// Probes to run; nil runs probes.All().
	Probes []probe.Probe
	// Engine judges the evidence; nil is the engine of the embedded
	// signatures.
	Engine *rules.Engine
	// Context is what the rules know besides the evidence (an expected
	// version, a role, --since, --now).
	Context rules.Context
	// Timeout bounds the probes (a probe still running is reported as an
	// error); zero leaves only ctx's bound.
	Timeout time.Duration
	// NodeName names the node in the report; empty: the host's name.
	NodeName string
	// Root is the root as the operator named it, for the report; empty:
	// the host's. Reports are compared across machines, and this process's
	// absolute path says nothing about the node.
	Root string
}

// defaultEngine is made once: its signatures are compiled at load.
var defaultEngine = sync.OnceValues(rules.NewEngine)

// engine returns o.Engine, or the embedded one.
func (o Options) engine() (*rules.Engine, error) {
	if o.Engine != nil {
		return o.Engine, nil
	}
	return defaultEngine()
}

// Host checks h and returns the redacted report; its Evidence field holds
// the evidence (bundles and streams carry it, --output json leaves it out).
// A --now of the context is the host's clock too: probes date yearless log
// lines (syslog, klog) against it.
func Host(ctx context.Context, h *host.Host, o Options) (*nodediagv1.Report, error) {
	e, err := o.engine()
	if err != nil {
		return nil, err
	}
	if now := o.Context.Now; !now.IsZero() {
		h.Now = func() time.Time { return now }
	}
	// The window's start, for the probes that need not read before it: an
	// absolute --since, or --since DURATION on a host whose clock is known
	// before its evidence is read (a live one, or --now).
	switch {
	case !o.Context.Since.IsZero():
		h.Since = o.Context.Since
	case o.Context.SinceAgo > 0 && (!o.Context.Now.IsZero() || h.Live()):
		h.Since = h.Now().Add(-o.Context.SinceAgo)
	}
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	ps := o.Probes
	if ps == nil {
		ps = probes.All()
	}
	ev := probe.RunAll(ctx, h, ps)
	if o.Root != "" {
		ev.Host.Root = o.Root
	}
	return report.Build(ev, e.Analyze(ev, o.Context), o.NodeName), nil
}

// Rejudge judges a report's stored evidence again with this nodediag's rules,
// in the report's own window, with what the caller adds in o.Context (the
// version the Machine expects, its role): a bundle or a report of an older
// agent gets today's verdict. What describes the evidence stays the
// collecting agent's: its version, the root, the node's name. A report
// without evidence is returned as it is.
//
// The evidence is not redacted again unless redactEvidence: the collecting
// agent redacted it, and redacting every stored node again costs more than
// judging it. Evidence from outside (a bundle, a file) is redacted again.
func Rejudge(r *nodediagv1.Report, o Options, redactEvidence bool) (*nodediagv1.Report, error) {
	ev := r.GetEvidence()
	if ev == nil {
		return r, nil
	}
	e, err := o.engine()
	if err != nil {
		return nil, err
	}
	c := o.Context.InWindowOf(r.GetWindow())
	res := e.Analyze(ev, c)
	name := o.NodeName
	if name == "" {
		name = r.GetHost().GetNodeName()
	}
	var out *nodediagv1.Report
	if redactEvidence {
		out = report.Build(ev, res, name)
	} else {
		out = report.Build(outline(ev), res, name)
		out.Evidence = ev
	}
	// The agent that collected it, not this process, made the evidence.
	out.Agent = proto.Clone(r.GetAgent()).(*nodediagv1.AgentInfo)
	if r.GetAgent() == nil {
		out.Agent = nil
	}
	if root := r.GetHost().GetRoot(); root != "" {
		out.Host.Root = root
	}
	if hn := r.GetHost().GetHostname(); hn != "" && out.Host.GetHostname() == "" {
		out.Host.Hostname = hn
	}
	return out, nil
}

// outline is what report.Build reads of the evidence besides the rules'
// result: the host, each probe's status, the OS facts. A new message: the
// stored evidence is never changed.
func outline(ev *nodediagv1.Evidence) *nodediagv1.Evidence {
	o := &nodediagv1.Evidence{CollectedAt: ev.GetCollectedAt(), Snapshot: ev.GetSnapshot()}
	if h := ev.GetHost(); h != nil {
		o.Host = proto.Clone(h).(*nodediagv1.HostInfo)
	}
	for _, pe := range ev.GetProbes() {
		p := &nodediagv1.ProbeEvidence{Name: pe.GetName(), Status: pe.GetStatus(), Error: pe.GetError(), DurationMs: pe.GetDurationMs()}
		if os := pe.GetOs(); os != nil {
			p.Data = &nodediagv1.ProbeEvidence_Os{Os: proto.Clone(os).(*nodediagv1.OSInfo)}
		}
		o.Probes = append(o.Probes, p)
	}
	return o
}
