package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// answering starts agents that answer every CheckRequest; their unexpected
// errors fail the test at cleanup.
func answering(t *testing.T, h *harness, names ...string) []*agent {
	t.Helper()
	errs := make(chan error, len(names))
	var wg sync.WaitGroup
	agents := make([]*agent, len(names))
	for i, n := range names {
		a := join(t, h.conn, n)
		agents[i] = a
		wg.Go(func() { a.answerChecks(errs) })
	}
	t.Cleanup(func() {
		for _, a := range agents {
			a.cancel()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("agent: %v", err)
		}
	})
	return agents
}

func nodeNames(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return out
}

func TestSweepAllAnswer(t *testing.T) {
	h := newHarness(t, Options{}, nil)
	names := nodeNames("node", 50)
	answering(t, h, names...)

	stream, err := h.fleet().Sweep(context.Background(), sweepReq(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	r := readSweep(stream, nil)
	if r.err != nil {
		t.Fatalf("sweep ended with %v", r.err)
	}
	if r.started.GetExpected() != 50 || !strings.HasPrefix(r.started.GetRequestId(), "sweep-") || r.started.GetStartedAt() == nil {
		t.Errorf("SweepStarted = %v", r.started)
	}
	var got []string
	for _, a := range r.answers {
		got = append(got, a.NodeName)
		if a.RequestId != r.started.RequestId || !a.Connected || a.LastSeen == nil || a.TopId != "CheckAnswered" {
			t.Errorf("answer %v: want the sweep's request ID, connected, last seen and the report's top finding", a)
		}
	}
	slices.Sort(got)
	if d := cmp.Diff(names, got); d != "" {
		t.Errorf("answers (-want +got):\n%s", d)
	}
	if r.done.GetExpected() != 50 || r.done.GetAnswered() != 50 || len(r.done.GetMissing()) != 0 || r.done.GetTimedOut() || r.done.GetElapsed() == nil {
		t.Errorf("SweepDone = %v, want 50 of 50, none missing, not timed out", r.done)
	}
	// Every answer is stored as any report.
	rec, err := h.store.Latest(context.Background(), "node-007")
	if err != nil || rec.Report.RequestId != r.started.RequestId {
		t.Errorf("node-007's latest report: %v %v, want the sweep's answer", rec, err)
	}
	m := h.srv.metrics
	if got := metricValue(t, m.sweepsStarted); got != 1 {
		t.Errorf("sweeps_started_total = %v", got)
	}
	if got := metricValue(t, m.sweepsCompleted.WithLabelValues(sweepAllAnswered)); got != 1 {
		t.Errorf("sweeps_completed_total{all_answered} = %v", got)
	}
	if got := histogramCount(t, m.answerLatency); got != 50 {
		t.Errorf("sweep_answer_latency_seconds count = %v, want 50", got)
	}
	if got := histogramCount(t, m.sweepDuration); got != 1 {
		t.Errorf("sweep_duration_seconds count = %v, want 1", got)
	}
	if help, series := gathered(t, h.reg, "nodediag_collector_sweep_duration_seconds"); series == nil || help == "" {
		t.Error("nodediag_collector_sweep_duration_seconds is not registered with help")
	}
	// The sweep is forgotten once done.
	h.srv.mu.RLock()
	n := len(h.srv.sweeps)
	h.srv.mu.RUnlock()
	if n != 0 {
		t.Errorf("%d sweeps still registered after Done", n)
	}
}

func TestSweepTimeoutListsMissing(t *testing.T) {
	h := newHarness(t, Options{}, nil)
	answering(t, h, "node-a", "node-b")
	// These agents are connected but never answer (they never read).
	for _, n := range []string{"silent-2", "silent-1", "silent-3"} {
		join(t, h.conn, n)
	}
	stream, err := h.fleet().Sweep(context.Background(), sweepReq(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	r := readSweep(stream, nil)
	if r.err != nil {
		t.Fatalf("sweep ended with %v", r.err)
	}
	want := &nodediagv1.SweepDone{Expected: 5, Answered: 2, Missing: []string{"silent-1", "silent-2", "silent-3"}, TimedOut: true}
	if d := cmp.Diff(want, r.done, protocmp.Transform(), protocmp.IgnoreFields(&nodediagv1.SweepDone{}, "elapsed")); d != "" {
		t.Errorf("SweepDone (-want +got):\n%s", d)
	}
	if len(r.answers) != 2 {
		t.Errorf("%d answers, want 2", len(r.answers))
	}
	if got := metricValue(t, h.srv.metrics.sweepsCompleted.WithLabelValues(sweepTimedOut)); got != 1 {
		t.Errorf("sweeps_completed_total{timed_out} = %v", got)
	}
}

func TestSweepNoAgents(t *testing.T) {
	h := newHarness(t, Options{}, nil)
	stream, err := h.fleet().Sweep(context.Background(), &nodediagv1.SweepRequest{})
	if err != nil {
		t.Fatal(err)
	}
	r := readSweep(stream, nil)
	if r.err != nil || r.started.GetExpected() != 0 || len(r.answers) != 0 {
		t.Fatalf("sweep: %+v", r)
	}
	if r.done == nil || r.done.Expected != 0 || r.done.Answered != 0 || r.done.TimedOut || len(r.done.Missing) != 0 {
		t.Errorf("SweepDone = %v, want an immediate empty Done", r.done)
	}
}

func TestSweepTimeoutBounds(t *testing.T) {
	h := newHarness(t, Options{SweepTimeout: 3 * time.Second, MaxSweepTimeout: time.Minute}, nil)
	for _, tc := range []struct {
		name string
		req  *nodediagv1.SweepRequest
		want time.Duration
		code codes.Code
	}{
		{name: "default", req: &nodediagv1.SweepRequest{}, want: 3 * time.Second},
		{name: "asked", req: sweepReq(10 * time.Second), want: 10 * time.Second},
		{name: "clamped", req: sweepReq(time.Hour), want: time.Minute},
		{name: "negative", req: sweepReq(-time.Second), code: codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := h.srv.sweepTimeout(tc.req)
			if status.Code(err) != tc.code || got != tc.want {
				t.Errorf("sweepTimeout = %v, %v; want %v, %v", got, err, tc.want, tc.code)
			}
		})
	}
	stream, err := h.fleet().Sweep(context.Background(), sweepReq(-time.Second))
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("a sweep with a negative timeout: %v, want InvalidArgument", err)
	}
}

func TestSweepAgentReconnects(t *testing.T) {
	h := newHarness(t, Options{}, nil)
	answering(t, h, "node-a")
	old := join(t, h.conn, "node-b")

	stream, err := h.fleet().Sweep(context.Background(), sweepReq(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	started, err := stream.Recv()
	if err != nil || started.GetStarted().GetExpected() != 2 {
		t.Fatalf("first event %v %v, want SweepStarted{2}", started, err)
	}
	id := started.GetStarted().RequestId
	// node-b's agent gets the request, loses its connection before
	// answering, and reconnects: the new stream is asked again.
	m, err := old.stream.Recv()
	if err != nil || m.GetCheck().GetRequestId() != id {
		t.Fatalf("node-b's old stream: %v %v, want the CheckRequest", m, err)
	}
	old.cancel()
	b, _ := connectAgent(t, h.dial(), "node-b")
	m, err = b.stream.Recv()
	if err != nil || m.GetCheck().GetRequestId() != id {
		t.Fatalf("node-b's new stream: %v %v, want the CheckRequest again", m, err)
	}
	b.upload(t, report("node-b", id), "request")

	r := readSweep(stream, nil)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.done.GetAnswered() != 2 || len(r.done.GetMissing()) != 0 || len(r.answers) != 2 {
		t.Errorf("sweep: %d answers, done %v; want both nodes", len(r.answers), r.done)
	}
	b.expectAck(t, b.seq)
}

func TestSweepClientGoesAway(t *testing.T) {
	h := newHarness(t, Options{}, nil)
	silent := join(t, h.conn, "node-a")
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := h.fleet().Sweep(ctx, sweepReq(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	ev, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	id := ev.GetStarted().RequestId
	cancel()
	// The agent's answer after the client left is stored as any report.
	m, err := silent.stream.Recv()
	if err != nil || m.GetCheck().GetRequestId() != id {
		t.Fatalf("%v %v", m, err)
	}
	silent.expectAck(t, silent.upload(t, report("node-a", id), "request"))
	rec, err := h.store.Latest(context.Background(), "node-a")
	if err != nil || rec.Report.RequestId != id {
		t.Errorf("latest of node-a: %v %v", rec, err)
	}
}

func TestListNodes(t *testing.T) {
	gate := newGate(func(n string) bool { return n == "node-c" })
	h := newHarness(t, Options{}, gate.wrap)
	join(t, h.conn, "node-a", finding("KubeletRemovedFlag", "kubelet.flag-removed", "error"))
	gone := join(t, h.conn, "node-b")
	gone.cancel()
	// node-c is connected and its first upload is being stored: it has
	// no stored report yet.
	c, _ := connectAgent(t, h.conn, "node-c")
	c.upload(t, report("node-c", ""), "connect")
	<-gate.entered

	// node-b's stream end is noticed by the server asynchronously: wait
	// for it (a condition, not a time).
	waitFor(t, func() bool {
		h.srv.mu.RLock()
		defer h.srv.mu.RUnlock()
		_, ok := h.srv.lastSeen["node-b"]
		return ok
	})
	resp, err := h.fleet().ListNodes(context.Background(), &nodediagv1.ListNodesRequest{})
	gate.open()
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Name, Top, Machine string
		Connected, Seen    bool
		Reported           bool
	}
	var got []row
	for _, n := range resp.Nodes {
		got = append(got, row{n.NodeName, n.TopId, n.MachineId, n.Connected, n.LastSeen != nil, n.ReportedAt != nil})
	}
	want := []row{
		{Name: "node-a", Top: "KubeletRemovedFlag", Machine: "machine-node-a", Connected: true, Seen: true, Reported: true},
		{Name: "node-b", Machine: "machine-node-b", Connected: false, Seen: true, Reported: true},
		{Name: "node-c", Machine: "machine-node-c", Connected: true, Seen: true},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ListNodes (-want +got):\n%s", d)
	}
	c.expectAck(t, 1)
}

// waitFor polls cond until it holds (the test's own timeout bounds it).
// waitFor polls cond until it holds; a minute without it fails the test
// (a regression must fail here, not hang until the package's timeout).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("the condition waited for did not hold within a minute")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestGetNode(t *testing.T) {
	h := newHarness(t, Options{}, nil)
	r := report("node-a", "", finding("SwapOn", "node.swap", "warning"))
	a, _ := connectAgent(t, h.conn, "node-a")
	a.expectAck(t, a.upload(t, r, "connect"))

	rec, err := h.fleet().GetNode(context.Background(), &nodediagv1.GetNodeRequest{NodeName: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(r, rec.Report, protocmp.Transform()); d != "" {
		t.Errorf("report (-want +got):\n%s", d)
	}
	if s := rec.Summary; s.NodeName != "node-a" || !s.Connected || s.LastSeen == nil || s.TopId != "SwapOn" || s.Warnings != 1 {
		t.Errorf("summary %v", s)
	}

	_, err = h.fleet().GetNode(context.Background(), &nodediagv1.GetNodeRequest{NodeName: "node-zz"})
	if st := status.Convert(err); st.Code() != codes.NotFound || !strings.Contains(st.Message(), `"node-zz"`) {
		t.Errorf("unknown node: %v, want NotFound naming the node", err)
	}
	_, err = h.fleet().GetNode(context.Background(), &nodediagv1.GetNodeRequest{})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("no name: %v, want InvalidArgument", err)
	}
}

func TestShutdown(t *testing.T) {
	gate := newGate(func(n string) bool { return n == "node-put" })
	h := newHarness(t, Options{}, gate.wrap)
	// Their streams' ends are read by answerChecks (Unavailable expected).
	answering(t, h, "node-a", "node-b")
	silent := join(t, h.conn, "node-silent")
	// An upload whose Put is in flight when the collector stops.
	p, _ := connectAgent(t, h.conn, "node-put")
	p.upload(t, report("node-put", ""), "connect")
	<-gate.entered

	stream, err := h.fleet().Sweep(context.Background(), sweepReq(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var answers []string
	for len(answers) < 2 {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetAnswer(); a != nil {
			answers = append(answers, a.NodeName)
		}
	}

	shut := make(chan error, 1)
	go func() {
		err := h.srv.Shutdown(context.Background())
		if gate.returned.Load() != 1 {
			err = errors.New("Shutdown returned before the Put in flight")
		}
		shut <- err
	}()
	<-h.srv.closed
	// The sweep (node-silent and node-put never answered) ends with
	// Unavailable after the answers it streamed.
	_, err = stream.Recv()
	if status.Code(err) != codes.Unavailable {
		t.Errorf("sweep after Shutdown: %v, want Unavailable", err)
	}
	expectEnd(t, silent.stream, codes.Unavailable)
	expectEnd(t, p.stream, codes.Unavailable)
	gate.open()
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
	// The Put in flight finished: the report is stored (the agent sends
	// it again; the store keeps it once).
	if _, err := h.store.Latest(context.Background(), "node-put"); err != nil {
		t.Errorf("the report whose Put was in flight: %v", err)
	}
	// New agents are refused.
	if _, _, err := tryConnect(h.dial(), "node-late"); status.Code(err) != codes.Unavailable {
		t.Errorf("connecting after Shutdown: %v, want Unavailable", err)
	}
	if got := metricValue(t, h.srv.metrics.sweepsCompleted.WithLabelValues(sweepShutdown)); got != 1 {
		t.Errorf("sweeps_completed_total{shutdown} = %v", got)
	}
}
