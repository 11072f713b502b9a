package probe_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/host/hosttest"
	"github.com/nodediag/nodediag/agent/probe"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// fakeProbe is a probe whose behaviour is a function: these tests are about
// RunAll, not about any real probe.
type fakeProbe struct {
	name string
	run  func(ctx context.Context, h *host.Host) (*nodediagv1.ProbeEvidence, error)
}

func (p fakeProbe) Name() string { return p.name }
func (p fakeProbe) Run(ctx context.Context, h *host.Host) (*nodediagv1.ProbeEvidence, error) {
	return p.run(ctx, h)
}

// osData is evidence with some data, to see that it is kept.
func osData(hostname string) *nodediagv1.ProbeEvidence {
	return &nodediagv1.ProbeEvidence{Data: &nodediagv1.ProbeEvidence_Os{Os: &nodediagv1.OSInfo{Hostname: hostname}}}
}

// summary is what RunAll decided about one probe; durations are left out.
type summary struct {
	Name, Status, Error string
	Unreadable          []string
	Hostname            string
}

func summarize(ev *nodediagv1.Evidence) []summary {
	var out []summary
	for _, pe := range ev.GetProbes() {
		s := summary{Name: pe.GetName(), Status: pe.GetStatus(), Error: pe.GetError(), Hostname: pe.GetOs().GetHostname()}
		for _, u := range pe.GetUnreadable() {
			s.Unreadable = append(s.Unreadable, u.GetSource()+": "+u.GetError())
		}
		out = append(out, s)
	}
	return out
}

func TestRunAll(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{"etc/hostname": "node-1\n"})
	// "first" finishes only after "last" has: the order of the result is
	// the order of the list, not the order of completion.
	lastDone := make(chan struct{})
	probes := []probe.Probe{
		fakeProbe{"first", func(ctx context.Context, h *host.Host) (*nodediagv1.ProbeEvidence, error) {
			<-lastDone
			b, err := h.ReadFile("/etc/hostname")
			if err != nil {
				return nil, err
			}
			return osData(strings.TrimSpace(string(b))), nil
		}},
		fakeProbe{"panics", func(context.Context, *host.Host) (*nodediagv1.ProbeEvidence, error) {
			var m map[string]int
			m["boom"]++ // a real runtime panic
			return nil, nil
		}},
		fakeProbe{"panics-with-value", func(context.Context, *host.Host) (*nodediagv1.ProbeEvidence, error) {
			panic("the parser met a line it did not expect")
		}},
		fakeProbe{"absent", func(context.Context, *host.Host) (*nodediagv1.ProbeEvidence, error) {
			pe := &nodediagv1.ProbeEvidence{}
			probe.Unreadable(pe, "/etc/cloud/cloud.cfg", errors.New("permission denied"))
			return pe, fmt.Errorf("%w: no /var/lib/cloud", probe.ErrNotApplicable)
		}},
		fakeProbe{"fails-with-partial-evidence", func(context.Context, *host.Host) (*nodediagv1.ProbeEvidence, error) {
			pe := osData("partial")
			probe.Unreadable(pe, "/etc/os-release", errors.New("input/output error"))
			return pe, errors.New("the kernel release is unreadable")
		}},
		fakeProbe{"fails-with-nothing", func(context.Context, *host.Host) (*nodediagv1.ProbeEvidence, error) {
			return nil, errors.New("nothing read")
		}},
		fakeProbe{"last", func(context.Context, *host.Host) (*nodediagv1.ProbeEvidence, error) {
			defer close(lastDone)
			return osData("last"), nil
		}},
	}
	ev := probe.RunAll(context.Background(), h, probes)

	got := summarize(ev)
	// Panics: the message is kept, with the first frames after it.
	for i := range got {
		if got[i].Status == probe.StatusError && strings.HasPrefix(got[i].Error, "panic: ") {
			msg, stack, _ := strings.Cut(got[i].Error, "\n")
			if !strings.Contains(stack, "probe_test.go") {
				t.Errorf("%s: the panic's stack does not name where it happened:\n%s", got[i].Name, stack)
			}
			got[i].Error = msg
		}
	}
	want := []summary{
		{Name: "first", Status: probe.StatusOK, Hostname: "node-1"},
		{Name: "panics", Status: probe.StatusError, Error: "panic: assignment to entry in nil map"},
		{Name: "panics-with-value", Status: probe.StatusError, Error: "panic: the parser met a line it did not expect"},
		{Name: "absent", Status: probe.StatusSkipped, Error: "not applicable: no /var/lib/cloud",
			Unreadable: []string{"/etc/cloud/cloud.cfg: permission denied"}},
		{Name: "fails-with-partial-evidence", Status: probe.StatusError, Error: "the kernel release is unreadable",
			Unreadable: []string{"/etc/os-release: input/output error"}, Hostname: "partial"},
		{Name: "fails-with-nothing", Status: probe.StatusError, Error: "nothing read"},
		{Name: "last", Status: probe.StatusOK, Hostname: "last"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("RunAll (-want +got):\n%s", diff)
	}
	if ev.GetSnapshot() != true || ev.GetHost().GetRoot() != h.Root || !ev.GetCollectedAt().AsTime().Equal(hosttest.Now) {
		t.Errorf("evidence header: snapshot %v, root %q, collected at %v; want true, %q, %v",
			ev.GetSnapshot(), ev.GetHost().GetRoot(), ev.GetCollectedAt().AsTime(), h.Root, hosttest.Now)
	}
}

// A probe stuck where its context cannot reach it (a read on a hung NFS
// mount) does not hold RunAll past its context: it is reported unfinished,
// and the probes that finished keep their evidence.
func TestRunAllStuckProbe(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{"etc/hostname": "node-1\n"})
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // lets the abandoned goroutine end
	probes := []probe.Probe{
		fakeProbe{"quick", func(context.Context, *host.Host) (*nodediagv1.ProbeEvidence, error) {
			return osData("node-1"), nil
		}},
		fakeProbe{"stuck", func(context.Context, *host.Host) (*nodediagv1.ProbeEvidence, error) {
			<-release // ignores ctx, as a blocked read does
			return osData("too late"), nil
		}},
		fakeProbe{"honours-ctx", func(ctx context.Context, _ *host.Host) (*nodediagv1.ProbeEvidence, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	ev := probe.RunAll(ctx, h, probes)

	var statuses []string
	for _, pe := range ev.GetProbes() {
		statuses = append(statuses, pe.GetName()+" "+pe.GetStatus())
	}
	if diff := cmp.Diff([]string{"quick ok", "stuck error", "honours-ctx error"}, statuses); diff != "" {
		t.Fatalf("statuses (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(osData("node-1").GetOs(), ev.GetProbes()[0].GetOs(), protocmp.Transform()); diff != "" {
		t.Errorf("the finished probe lost its evidence (-want +got):\n%s", diff)
	}
	stuck := ev.GetProbes()[1]
	if stuck.GetError() != probe.ErrorUnfinished || stuck.GetData() != nil {
		t.Errorf("stuck probe: error %q, data %v; want %q and no data", stuck.GetError(), stuck.GetData(), probe.ErrorUnfinished)
	}
	// Whether the probe that honours ctx returned before RunAll gave up on
	// it or not, it is an error that says why.
	if e := ev.GetProbes()[2].GetError(); e != probe.ErrorUnfinished && e != context.DeadlineExceeded.Error() {
		t.Errorf("honours-ctx: error %q", e)
	}
}
