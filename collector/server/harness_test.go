package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nodediag/nodediag/collector/store"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// harness is a collector on bufconn with a real SQLite store.
type harness struct {
	t     testing.TB
	srv   *Server
	store *store.SQLite
	reg   *prometheus.Registry
	lis   *bufconn.Listener
	conn  *grpc.ClientConn
	// served is closed when Serve returned.
	served chan struct{}
}

// newHarness starts a collector with o; o.Store defaults to the harness's
// real store, and wrap (if not nil) may wrap it (a gate).
func newHarness(t testing.TB, o Options, wrap func(store.Store) store.Store) *harness {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{Durability: store.ProcessCrash})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("closing the store: %v", err)
		}
	})
	h := &harness{t: t, store: st, reg: prometheus.NewRegistry(), lis: bufconn.Listen(1 << 20), served: make(chan struct{})}
	o.Store = st
	if wrap != nil {
		o.Store = wrap(st)
	}
	o.Registerer = h.reg
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	h.srv, err = New(o)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(h.served)
		if err := h.srv.Serve(h.lis); err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	h.conn = h.dial()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := h.srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		<-h.served
	})
	return h
}

// dial opens a new client connection to the harness (closed at cleanup).
func (h *harness) dial() *grpc.ClientConn {
	h.t.Helper()
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return h.lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { conn.Close() })
	return conn
}

func (h *harness) fleet() nodediagv1.FleetClient { return nodediagv1.NewFleetClient(h.conn) }

// agentStart is the agent_start of the agents of the tests.
var agentStart = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// agent is a hand-driven agent stream.
type agent struct {
	node   string
	start  time.Time
	stream nodediagv1.Collector_ConnectClient
	cancel context.CancelFunc
	seq    uint64
}

func hello(node string) *nodediagv1.Hello {
	return &nodediagv1.Hello{
		NodeName:   node,
		Agent:      &nodediagv1.AgentInfo{Version: "v0.test"},
		MachineId:  "machine-" + node,
		ProviderId: "azure:///subscriptions/s/resourceGroups/g/providers/Microsoft.Compute/virtualMachines/" + node,
		AgentStart: timestamppb.New(agentStart),
	}
}

// openStream opens a Collector stream on conn without sending anything.
func openStream(t testing.TB, conn *grpc.ClientConn) (nodediagv1.Collector_ConnectClient, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := nodediagv1.NewCollectorClient(conn).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return stream, cancel
}

// connectAgent says Hello on a new stream of conn and returns the agent and
// the Welcome. It does not upload.
func connectAgent(t testing.TB, conn *grpc.ClientConn, node string) (*agent, *nodediagv1.Welcome) {
	t.Helper()
	a, w, err := tryConnect(conn, node)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.cancel)
	return a, w
}

func tryConnect(conn *grpc.ClientConn, node string) (*agent, *nodediagv1.Welcome, error) {
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := nodediagv1.NewCollectorClient(conn).Connect(ctx)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	a := &agent{node: node, start: agentStart, stream: stream, cancel: cancel}
	// A Send on a stream the server has ended returns io.EOF; the status
	// is what the next Recv returns.
	if err := stream.Send(&nodediagv1.AgentMessage{Msg: &nodediagv1.AgentMessage_Hello{Hello: hello(node)}}); err != nil && !errors.Is(err, io.EOF) {
		cancel()
		return nil, nil, err
	}
	m, err := stream.Recv()
	if err != nil {
		cancel()
		return nil, nil, err
	}
	if m.GetWelcome() == nil {
		cancel()
		return nil, nil, errors.New("first message is not a Welcome: " + m.String())
	}
	return a, m.GetWelcome(), nil
}

// join connects an agent and uploads its connect report, waiting for the
// Ack: the agent is then registered (its uploads are read only after).
func join(t testing.TB, conn *grpc.ClientConn, node string, findings ...*nodediagv1.Finding) *agent {
	t.Helper()
	a, _ := connectAgent(t, conn, node)
	seq := a.upload(t, report(node, "", findings...), "connect")
	a.expectAck(t, seq)
	return a
}

func report(node, requestID string, findings ...*nodediagv1.Finding) *nodediagv1.Report {
	return &nodediagv1.Report{
		Agent:     &nodediagv1.AgentInfo{Version: "v0.test"},
		Host:      &nodediagv1.HostInfo{Hostname: node, NodeName: node, MachineId: "machine-" + node},
		Findings:  findings,
		RequestId: requestID,
	}
}

func finding(id, category, severity string) *nodediagv1.Finding {
	return &nodediagv1.Finding{Id: id, Category: category, Severity: severity, Title: id + " title"}
}

// upload sends r as the agent's next Upload and returns its seq.
func (a *agent) upload(t testing.TB, r *nodediagv1.Report, reason string) uint64 {
	t.Helper()
	seq, err := a.trySend(r, reason)
	if err != nil {
		t.Fatalf("%s: sending upload %d: %v", a.node, seq, err)
	}
	return seq
}

func (a *agent) trySend(r *nodediagv1.Report, reason string) (uint64, error) {
	a.seq++
	return a.seq, a.stream.Send(&nodediagv1.AgentMessage{Msg: &nodediagv1.AgentMessage_Upload{Upload: &nodediagv1.Upload{Seq: a.seq, Report: r, Reason: reason}}})
}

// expectAck reads the next message, which must be the Ack of seq.
func (a *agent) expectAck(t testing.TB, seq uint64) {
	t.Helper()
	m, err := a.stream.Recv()
	if err != nil {
		t.Fatalf("%s: waiting for the ack of %d: %v", a.node, seq, err)
	}
	if m.GetAck().GetSeq() != seq || m.GetAck() == nil {
		t.Fatalf("%s: got %v, want the ack of %d", a.node, m, seq)
	}
}

// expectEnd reads until the stream ends and checks its status code; a
// message other than a CheckRequest before the end fails the test.
func expectEnd(t testing.TB, stream nodediagv1.Collector_ConnectClient, want codes.Code) *status.Status {
	t.Helper()
	for {
		m, err := stream.Recv()
		if err == nil && m.GetCheck() != nil {
			continue
		}
		if err == nil {
			t.Fatalf("got %v, want the stream to end with %s", m, want)
		}
		if errors.Is(err, io.EOF) {
			t.Fatalf("the stream ended with OK, want %s", want)
		}
		st := status.Convert(err)
		if st.Code() != want {
			t.Fatalf("the stream ended with %s (%s), want %s", st.Code(), st.Message(), want)
		}
		return st
	}
}

// runAgent answers every CheckRequest with an upload carrying its
// request_id, until the stream ends; it reports the first error on errs.
// It never calls t.Fatal (it runs on its own goroutine).
func (a *agent) answerChecks(errs chan<- error) {
	for {
		m, err := a.stream.Recv()
		if err != nil {
			if st := status.Code(err); st != codes.Canceled && st != codes.Unavailable && st != codes.Aborted {
				errs <- err
			}
			return
		}
		if c := m.GetCheck(); c != nil {
			if _, err := a.trySend(report(a.node, c.RequestId, finding("CheckAnswered", "test.check", "info")), "request"); err != nil {
				return // the stream ended; Recv says why
			}
		}
	}
}

// sweepResult is what a Sweep stream delivered.
type sweepResult struct {
	started *nodediagv1.SweepStarted
	answers []*nodediagv1.NodeSummary
	done    *nodediagv1.SweepDone
	err     error // the stream's end when not OK
}

// readSweep reads a Sweep stream to its end. onStarted, if set, runs when
// the SweepStarted arrived.
func readSweep(stream nodediagv1.Fleet_SweepClient, onStarted func(*nodediagv1.SweepStarted)) sweepResult {
	var r sweepResult
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return r
		}
		if err != nil {
			r.err = err
			return r
		}
		switch e := ev.Event.(type) {
		case *nodediagv1.SweepEvent_Started:
			r.started = e.Started
			if onStarted != nil {
				onStarted(e.Started)
			}
		case *nodediagv1.SweepEvent_Answer:
			r.answers = append(r.answers, e.Answer)
		case *nodediagv1.SweepEvent_Done:
			r.done = e.Done
		}
	}
}

func sweepReq(timeout time.Duration) *nodediagv1.SweepRequest {
	return &nodediagv1.SweepRequest{Timeout: durationpb.New(timeout)}
}

// gateStore wraps the real store: Puts of gated nodes wait until released,
// and fail returns an error instead of storing.
type gateStore struct {
	store.Store
	gated   func(node string) bool
	entered chan string   // a gated Put started (buffered)
	release chan struct{} // closed to let gated Puts through
	fail    atomic.Bool   // gated Puts fail without storing
	// returned counts gated Puts that returned.
	returned atomic.Int32
	once     sync.Once
}

func newGate(gated func(string) bool) *gateStore {
	return &gateStore{gated: gated, entered: make(chan string, 100), release: make(chan struct{})}
}

func (g *gateStore) wrap(s store.Store) store.Store { g.Store = s; return g }

func (g *gateStore) open() { g.once.Do(func() { close(g.release) }) }

var errDiskFull = errors.New("disk full (test)")

func (g *gateStore) Put(ctx context.Context, rec *store.Record) error {
	if !g.gated(rec.Summary.GetNodeName()) {
		return g.Store.Put(ctx, rec)
	}
	g.entered <- rec.Summary.GetNodeName()
	<-g.release
	defer g.returned.Add(1)
	if g.fail.Load() {
		return errDiskFull
	}
	return g.Store.Put(ctx, rec)
}
