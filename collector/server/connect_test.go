package server

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nodediag/nodediag/collector/store"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

func TestWelcome(t *testing.T) {
	for _, tc := range []struct {
		name     string
		interval time.Duration
		maxBytes int
		want     *nodediagv1.Welcome
	}{
		{name: "no interval", want: &nodediagv1.Welcome{NodeName: "node-1", MaxMessageBytes: DefaultMaxMessageBytes}},
		{name: "interval", interval: 5 * time.Minute, want: &nodediagv1.Welcome{NodeName: "node-1", Interval: durationpb.New(5 * time.Minute), MaxMessageBytes: DefaultMaxMessageBytes}},
		{name: "message limit", maxBytes: 1 << 20, want: &nodediagv1.Welcome{NodeName: "node-1", MaxMessageBytes: 1 << 20}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Options{AgentInterval: tc.interval, MaxMessageBytes: tc.maxBytes}, nil)
			_, w := connectAgent(t, h.conn, "node-1")
			if d := cmp.Diff(tc.want, w, protocmp.Transform()); d != "" {
				t.Errorf("Welcome (-want +got):\n%s", d)
			}
		})
	}
}

func TestAckOnlyAfterStored(t *testing.T) {
	gate := newGate(func(n string) bool { return n == "node-1" })
	h := newHarness(t, Options{}, gate.wrap)
	a, _ := connectAgent(t, h.conn, "node-1")
	r := report("node-1", "", finding("KubeletRemovedFlag", "kubelet.flag-removed", "error"))
	seq := a.upload(t, r, "connect")
	<-gate.entered

	// The Put is held: the report is not in the store, and the agent has
	// no Ack. The Ack cannot come before the release: Put has not
	// returned (checked again when the Ack arrives).
	if _, err := h.store.Latest(context.Background(), "node-1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Latest while the Put is held: %v, want not found", err)
	}
	gate.open()
	a.expectAck(t, seq)
	if n := gate.returned.Load(); n != 1 {
		t.Fatalf("an Ack arrived with %d Puts returned", n)
	}
	rec, err := h.store.Latest(context.Background(), "node-1")
	if err != nil {
		t.Fatalf("Latest after the Ack: %v", err)
	}
	if d := cmp.Diff(r, rec.Report, protocmp.Transform()); d != "" {
		t.Errorf("stored report (-want +got):\n%s", d)
	}
	if rec.Seq != seq || !rec.AgentStart.Equal(agentStart) {
		t.Errorf("stored seq %d agent_start %s, want %d %s", rec.Seq, rec.AgentStart, seq, agentStart)
	}
	if got := metricValue(t, h.srv.metrics.acks); got != 1 {
		t.Errorf("acks_total = %v, want 1", got)
	}
}

func TestPutFailureIsNotAcknowledged(t *testing.T) {
	gate := newGate(func(n string) bool { return n == "node-1" })
	gate.fail.Store(true)
	gate.open()
	h := newHarness(t, Options{}, gate.wrap)
	healthy := join(t, h.conn, "node-ok")

	a, _ := connectAgent(t, h.conn, "node-1")
	a.upload(t, report("node-1", ""), "connect")
	// No Ack: the first thing the agent hears is the end of its stream.
	st := expectEnd(t, a.stream, codes.Unavailable)
	if !strings.Contains(st.Message(), "not acknowledged") {
		t.Errorf("status message %q does not say the upload is not acknowledged", st.Message())
	}
	if _, err := h.store.Latest(context.Background(), "node-1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Latest after a failed Put: %v, want not found", err)
	}
	if got := metricValue(t, h.srv.metrics.failed); got != 1 {
		t.Errorf("reports_failed_total = %v, want 1", got)
	}
	// The other agent is unaffected.
	healthy.expectAck(t, healthy.upload(t, report("node-ok", ""), "interval"))
}

func TestResentUploadStoredOnceAckedTwice(t *testing.T) {
	h := newHarness(t, Options{}, nil)
	r := report("node-1", "", finding("SwapOn", "node.swap", "warning"))

	a, _ := connectAgent(t, h.conn, "node-1")
	a.expectAck(t, a.upload(t, r, "connect"))
	a.cancel()

	// The agent did not see the Ack (say) and sends seq 1 again on a new
	// stream, as the same agent process.
	b, _ := connectAgent(t, h.dial(), "node-1")
	b.expectAck(t, b.upload(t, r, "connect"))

	hist, err := h.store.History(context.Background(), "node-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 1 {
		t.Errorf("history has %d records, want 1", len(hist))
	}
	if got := metricValue(t, h.srv.metrics.acks); got != 2 {
		t.Errorf("acks_total = %v, want 2", got)
	}
	// Findings are counted once for the node however often it resends.
	if got := metricValue(t, h.srv.metrics.findings.vec.WithLabelValues("node.swap", "warning")); got != 1 {
		t.Errorf("findings{node.swap,warning} = %v, want 1", got)
	}
}

// A report resent by a later agent process (from its spool, renumbered
// under the new agent_start) carries its origin: the collector stores it
// once, and acknowledges it under the new seq.
func TestResentByLaterProcessStoredOncePerOrigin(t *testing.T) {
	h := newHarness(t, Options{}, nil)
	r := report("node-1", "", finding("SwapOn", "node.swap", "warning"))
	origin := timestamppb.New(time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC))
	send := func(a *agent, seq uint64) {
		t.Helper()
		mustSend(t, a.stream, &nodediagv1.AgentMessage{Msg: &nodediagv1.AgentMessage_Upload{Upload: &nodediagv1.Upload{
			Seq: seq, Report: r, Reason: "connect", OriginAgentStart: origin, OriginSeq: 7,
		}}})
		a.expectAck(t, seq)
	}
	a, _ := connectAgent(t, h.conn, "node-1")
	send(a, 7)
	a.cancel()
	// A later process (another agent_start) sends it again as its seq 1.
	stream, cancel := openStream(t, h.dial())
	later := hello("node-1")
	later.AgentStart = timestamppb.New(agentStart.Add(time.Hour))
	mustSend(t, stream, &nodediagv1.AgentMessage{Msg: &nodediagv1.AgentMessage_Hello{Hello: later}})
	if m, err := stream.Recv(); err != nil || m.GetWelcome() == nil {
		t.Fatalf("waiting for the Welcome: %v %v", m, err)
	}
	send(&agent{node: "node-1", start: later.AgentStart.AsTime(), stream: stream, cancel: cancel}, 1)

	hist, err := h.store.History(context.Background(), "node-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 1 {
		t.Fatalf("history has %d records, want 1", len(hist))
	}
	if hist[0].Seq != 7 || !hist[0].AgentStart.Equal(origin.AsTime()) {
		t.Errorf("stored as seq %d of %v, want its origin: seq 7 of %v", hist[0].Seq, hist[0].AgentStart, origin.AsTime())
	}
}

// rawCodec sends the bytes it is given as they are: a client that sends
// what is not protobuf.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, ok := v.([]byte)
	if !ok {
		return nil, errors.New("rawCodec marshals []byte")
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	p, ok := v.(*[]byte)
	if !ok {
		return errors.New("rawCodec unmarshals into *[]byte")
	}
	*p = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }

var _ encoding.CodecV2 = rawCodec{}

func TestRefusals(t *testing.T) {
	h := newHarness(t, Options{MaxMessageBytes: 64 << 10}, nil)
	healthy := join(t, h.conn, "node-ok")

	helloMsg := func(hl *nodediagv1.Hello) *nodediagv1.AgentMessage {
		return &nodediagv1.AgentMessage{Msg: &nodediagv1.AgentMessage_Hello{Hello: hl}}
	}
	noName := hello("")
	noStart := hello("node-x")
	noStart.AgentStart = nil
	spaced := hello("node x")
	huge := hello("node-x")
	huge.MachineId = strings.Repeat("m", 4096)
	// Another machine's agent for a node whose stream is live.
	otherMachine := hello("node-ok")
	otherMachine.MachineId = "machine-of-an-impostor"
	for _, tc := range []struct {
		name string
		// send sends what the server refuses; it may first say Hello
		// (then it reads the Welcome).
		send    func(t *testing.T, s nodediagv1.Collector_ConnectClient)
		want    codes.Code
		message string
	}{
		{
			name: "upload before hello",
			send: func(t *testing.T, s nodediagv1.Collector_ConnectClient) {
				mustSend(t, s, &nodediagv1.AgentMessage{Msg: &nodediagv1.AgentMessage_Upload{Upload: &nodediagv1.Upload{Seq: 1, Report: report("node-x", "")}}})
			},
			want: codes.FailedPrecondition, message: "first message must be a Hello",
		},
		{
			name: "hello without node name",
			send: func(t *testing.T, s nodediagv1.Collector_ConnectClient) { mustSend(t, s, helloMsg(noName)) },
			want: codes.InvalidArgument, message: "no node name",
		},
		{
			name: "hello without agent_start",
			send: func(t *testing.T, s nodediagv1.Collector_ConnectClient) { mustSend(t, s, helloMsg(noStart)) },
			want: codes.InvalidArgument, message: "agent_start",
		},
		{
			name: "hello with a 4 KiB machine ID",
			send: func(t *testing.T, s nodediagv1.Collector_ConnectClient) { mustSend(t, s, helloMsg(huge)) },
			want: codes.InvalidArgument, message: "longer than",
		},
		{
			name: "node held by another machine",
			send: func(t *testing.T, s nodediagv1.Collector_ConnectClient) { mustSend(t, s, helloMsg(otherMachine)) },
			want: codes.AlreadyExists, message: "held by one machine at a time",
		},
		{
			name: "upload with an origin_seq out of range",
			send: func(t *testing.T, s nodediagv1.Collector_ConnectClient) {
				sayHello(t, s, "node-x")
				mustSend(t, s, &nodediagv1.AgentMessage{Msg: &nodediagv1.AgentMessage_Upload{Upload: &nodediagv1.Upload{
					Seq: 1, Report: report("node-x", ""), OriginSeq: 1 << 63, OriginAgentStart: timestamppb.Now()}}})
			},
			want: codes.InvalidArgument, message: "out of range",
		},
		{
			name: "node name with a space",
			send: func(t *testing.T, s nodediagv1.Collector_ConnectClient) { mustSend(t, s, helloMsg(spaced)) },
			want: codes.InvalidArgument, message: "space",
		},
		{
			name: "upload with seq 0",
			send: func(t *testing.T, s nodediagv1.Collector_ConnectClient) {
				sayHello(t, s, "node-x")
				mustSend(t, s, &nodediagv1.AgentMessage{Msg: &nodediagv1.AgentMessage_Upload{Upload: &nodediagv1.Upload{Report: report("node-x", "")}}})
			},
			want: codes.InvalidArgument, message: "seq",
		},
		{
			name: "second hello",
			send: func(t *testing.T, s nodediagv1.Collector_ConnectClient) {
				sayHello(t, s, "node-x")
				mustSend(t, s, helloMsg(hello("node-x")))
			},
			want: codes.FailedPrecondition, message: "second Hello",
		},
		{
			name: "oversize message",
			send: func(t *testing.T, s nodediagv1.Collector_ConnectClient) {
				sayHello(t, s, "node-x")
				r := report("node-x", "")
				r.Gaps = []string{strings.Repeat("x", 100<<10)}
				mustSend(t, s, &nodediagv1.AgentMessage{Msg: &nodediagv1.AgentMessage_Upload{Upload: &nodediagv1.Upload{Seq: 1, Report: r}}})
			},
			want: codes.ResourceExhausted,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := metricValue(t, h.srv.metrics.refused.WithLabelValues(tc.want.String()))
			s, _ := openStream(t, h.conn)
			tc.send(t, s)
			st := expectEnd(t, s, tc.want)
			if !strings.Contains(st.Message(), tc.message) {
				t.Errorf("status message %q does not contain %q", st.Message(), tc.message)
			}
			if got := metricValue(t, h.srv.metrics.refused.WithLabelValues(tc.want.String())); got != before+1 {
				t.Errorf("refused_total{code=%s} = %v, want %v", tc.want, got, before+1)
			}
			// The healthy agent keeps working.
			healthy.expectAck(t, healthy.upload(t, report("node-ok", ""), "interval"))
		})
	}

	for _, tc := range []struct {
		name  string
		hello bool
		msg   []byte
	}{
		// Field 1 (hello), length-delimited, claiming 200 bytes that
		// are not there.
		{name: "malformed first message", msg: []byte{0x0a, 0xc8, 0x01, 0x0a}},
		{name: "malformed message after the hello", hello: true, msg: []byte{0x0a, 0xc8, 0x01, 0x0a}},
		// A well-formed Upload (field 3) whose report (its field 2) is
		// not protobuf: a tag whose varint never ends. The collector
		// decodes reports after the message (AgentMessageRaw).
		{name: "malformed report in an upload", hello: true, msg: []byte{0x1a, 0x08, 0x08, 0x01, 0x12, 0x04, 0xff, 0xff, 0xff, 0xff}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := metricValue(t, h.srv.metrics.refused.WithLabelValues(codes.InvalidArgument.String()))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			desc := &grpc.StreamDesc{StreamName: "Connect", ServerStreams: true, ClientStreams: true}
			cs, err := h.conn.NewStream(ctx, desc, nodediagv1.Collector_Connect_FullMethodName, grpc.ForceCodecV2(rawCodec{}))
			if err != nil {
				t.Fatal(err)
			}
			var reply []byte
			if tc.hello {
				b, err := proto.Marshal(&nodediagv1.AgentMessage{Msg: &nodediagv1.AgentMessage_Hello{Hello: hello("node-raw")}})
				if err != nil {
					t.Fatal(err)
				}
				if err := cs.SendMsg(b); err != nil {
					t.Fatal(err)
				}
				if err := cs.RecvMsg(&reply); err != nil {
					t.Fatal(err)
				}
				var m nodediagv1.CollectorMessage
				if err := proto.Unmarshal(reply, &m); err != nil || m.GetWelcome() == nil {
					t.Fatalf("reply to the raw Hello: %v %v", &m, err)
				}
			}
			if err := cs.SendMsg(tc.msg); err != nil {
				t.Fatal(err)
			}
			err = cs.RecvMsg(&reply)
			if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "malformed") {
				t.Fatalf("malformed message: stream ended with %v, want InvalidArgument", err)
			}
			if got := metricValue(t, h.srv.metrics.refused.WithLabelValues(codes.InvalidArgument.String())); got != before+1 {
				t.Errorf("refused_total{code=InvalidArgument} = %v, want %v", got, before+1)
			}
			healthy.expectAck(t, healthy.upload(t, report("node-ok", ""), "interval"))
		})
	}
}

func mustSend(t *testing.T, s nodediagv1.Collector_ConnectClient, m *nodediagv1.AgentMessage) {
	t.Helper()
	if err := s.Send(m); err != nil {
		t.Fatal(err)
	}
}

func sayHello(t *testing.T, s nodediagv1.Collector_ConnectClient, node string) {
	t.Helper()
	mustSend(t, s, &nodediagv1.AgentMessage{Msg: &nodediagv1.AgentMessage_Hello{Hello: hello(node)}})
	m, err := s.Recv()
	if err != nil || m.GetWelcome() == nil {
		t.Fatalf("waiting for the Welcome: %v %v", m, err)
	}
}

func TestSecondConnectionReplacesFirst(t *testing.T) {
	h := newHarness(t, Options{}, nil)
	old := join(t, h.conn, "node-1")
	other := join(t, h.conn, "node-2")

	// The agent reconnected (on another connection) before the collector
	// noticed its old one was gone.
	a := join(t, h.dial(), "node-1")
	st := expectEnd(t, old.stream, codes.Aborted)
	if !strings.Contains(st.Message(), "replaced by a newer connection") {
		t.Errorf("old stream ended with %q", st.Message())
	}
	a.expectAck(t, a.upload(t, report("node-1", ""), "interval"))
	other.expectAck(t, other.upload(t, report("node-2", ""), "interval"))

	if got := metricValue(t, h.srv.metrics.replaced); got != 1 {
		t.Errorf("agent_replacements_total = %v, want 1", got)
	}
	if got := metricValue(t, h.srv.metrics.connected); got != 2 {
		t.Errorf("agents_connected = %v, want 2", got)
	}
	// A replacement is not a refusal.
	if got := seriesCount(t, h.srv.metrics.refused); got != 0 {
		t.Errorf("refused_total has %d series, want none", got)
	}
	resp, err := h.fleet().ListNodes(context.Background(), &nodediagv1.ListNodesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Nodes) != 2 || !resp.Nodes[0].Connected {
		t.Errorf("ListNodes after a replacement: %v", resp.Nodes)
	}
}

func TestFindingsMetricReplacedPerNode(t *testing.T) {
	h := newHarness(t, Options{}, nil)
	a := join(t, h.conn, "node-1",
		finding("KubeletRemovedFlag", "kubelet.flag-removed", "error"),
		finding("KubeletRemovedFlag", "kubelet.flag-removed", "error"),
		finding("SwapOn", "node.swap", "warning"))
	join(t, h.conn, "node-2", finding("SwapOn", "node.swap", "warning"), finding("Odd", "", "info"))

	gauge := func(cat, sev string) float64 {
		return metricValue(t, h.srv.metrics.findings.vec.WithLabelValues(cat, sev))
	}
	if got := gauge("kubelet.flag-removed", "error"); got != 2 {
		t.Errorf("findings{kubelet.flag-removed,error} = %v, want 2", got)
	}
	if got := gauge("node.swap", "warning"); got != 2 {
		t.Errorf("findings{node.swap,warning} = %v, want 2", got)
	}
	if got := gauge(noCategory, "info"); got != 1 {
		t.Errorf("findings{none,info} = %v, want 1", got)
	}

	// node-1's second report replaces its first: the flag is fixed.
	a.expectAck(t, a.upload(t, report("node-1", "", finding("SwapOn", "node.swap", "warning")), "change"))
	help, series := gathered(t, h.reg, "nodediag_collector_findings")
	want := map[string]float64{
		"category=node.swap,severity=warning": 2,
		"category=none,severity=info":         1,
	}
	if d := cmp.Diff(want, series); d != "" {
		t.Errorf("nodediag_collector_findings after node-1's second report (-want +got):\n%s", d)
	}
	if help == "" {
		t.Error("nodediag_collector_findings has no help text")
	}
	if got := metricValue(t, h.srv.metrics.stored); got != 3 {
		t.Errorf("reports_stored_total = %v, want 3", got)
	}
	if got := metricValue(t, h.srv.metrics.received); got != 3 {
		t.Errorf("reports_received_total = %v, want 3", got)
	}
}

func TestNewMetricsWithoutRegisterer(t *testing.T) {
	m, err := newMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	m.stored.Inc()
	if got := metricValue(t, m.stored); got != 1 {
		t.Errorf("stored = %v", got)
	}
	// Registering twice in one registry fails with a clear error.
	reg := prometheus.NewRegistry()
	if _, err := newMetrics(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := newMetrics(reg); err == nil {
		t.Error("a second registration of the metrics did not fail")
	}
}

func TestSummarize(t *testing.T) {
	at := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	r := report("node-1", "sweep-1",
		finding("KubeletRemovedFlag", "kubelet.flag-removed", "critical"),
		finding("Other", "x", "error"),
		finding("SwapOn", "node.swap", "warning"),
		finding("Info", "x", "info"))
	hl := hello("node-1")
	hl.MachineId = ""
	hl.Agent = nil
	got := Summarize(hl, r, at)
	want := &nodediagv1.NodeSummary{
		NodeName: "node-1", MachineId: "machine-node-1", ProviderId: hl.ProviderId,
		Agent: r.Agent, ReportedAt: timestamppb.New(at),
		TopId: "KubeletRemovedFlag", TopTitle: "KubeletRemovedFlag title", TopSeverity: "critical",
		Errors: 2, Warnings: 1, RequestId: "sweep-1",
	}
	if d := cmp.Diff(want, got, protocmp.Transform()); d != "" {
		t.Errorf("Summarize (-want +got):\n%s", d)
	}
}

// One node's oversized strings must not swell every fleet listing: the
// summary keeps a bounded prefix, cut on a UTF-8 boundary.
func TestSummarizeBoundsStrings(t *testing.T) {
	title := strings.Repeat("é", 10_000) // 2 bytes each
	r := report("node-1", strings.Repeat("r", 5000), &nodediagv1.Finding{Id: strings.Repeat("I", 1000), Title: title, Severity: "error"})
	sum := Summarize(hello("node-1"), r, time.Now())
	if len(sum.TopTitle) > 512+len("…") || !utf8.ValidString(sum.TopTitle) || !strings.HasPrefix(title, strings.TrimSuffix(sum.TopTitle, "…")) {
		t.Errorf("top title: %d bytes, valid UTF-8 %v: want a prefix of at most 512 bytes", len(sum.TopTitle), utf8.ValidString(sum.TopTitle))
	}
	if len(sum.TopId) > 128+len("…") || len(sum.RequestId) > 128+len("…") {
		t.Errorf("top id %d bytes, request id %d bytes: want at most 128", len(sum.TopId), len(sum.RequestId))
	}
	short := Summarize(hello("node-1"), report("node-1", "sweep-1", finding("SwapOn", "node.swap", "warning")), time.Now())
	if short.TopId != "SwapOn" || short.RequestId != "sweep-1" {
		t.Errorf("short strings changed: %q %q", short.TopId, short.RequestId)
	}
}

// The collector serves at most MaxAgents streams: one more is refused with
// ResourceExhausted, a node already connected may still replace its
// stream, and a freed place is taken again.
func TestMaxAgents(t *testing.T) {
	h := newHarness(t, Options{MaxAgents: 2}, nil)
	join(t, h.conn, "node-1")
	b := join(t, h.conn, "node-2")
	if _, _, err := tryConnect(h.dial(), "node-3"); status.Code(err) != codes.ResourceExhausted || !strings.Contains(status.Convert(err).Message(), "maximum") {
		t.Fatalf("a third agent with MaxAgents 2: %v, want ResourceExhausted", err)
	}
	// node-1 reconnecting replaces its own stream: not a new agent.
	join(t, h.dial(), "node-1")
	b.cancel()
	waitFor(t, func() bool {
		a, _, err := tryConnect(h.dial(), "node-3")
		if err == nil {
			a.cancel()
		}
		return err == nil
	})
}

// A node whose stream ended longer ago than ForgetAfter is forgotten: its
// last-seen time and its findings in the metrics go; a connected node stays.
func TestForgetDisconnectedNodes(t *testing.T) {
	h := newHarness(t, Options{}, nil)
	gone := join(t, h.conn, "node-gone", finding("SwapOn", "node.swap", "warning"))
	join(t, h.conn, "node-here", finding("SwapOn", "node.swap", "warning"))
	gone.cancel()
	waitFor(t, func() bool {
		h.srv.mu.RLock()
		defer h.srv.mu.RUnlock()
		_, ok := h.srv.lastSeen["node-gone"]
		return ok
	})
	if got := metricValue(t, h.srv.metrics.findings.vec.WithLabelValues("node.swap", "warning")); got != 2 {
		t.Fatalf("findings{node.swap,warning} = %v before forgetting, want 2", got)
	}
	h.srv.forget(time.Now().Add(-time.Hour)) // nothing that old yet
	h.srv.mu.RLock()
	_, kept := h.srv.lastSeen["node-gone"]
	h.srv.mu.RUnlock()
	if !kept {
		t.Fatal("a node seen a moment ago was forgotten")
	}
	h.srv.forget(time.Now().Add(time.Minute))
	h.srv.mu.RLock()
	_, kept = h.srv.lastSeen["node-gone"]
	_, here := h.srv.agents["node-here"]
	h.srv.mu.RUnlock()
	if kept || !here {
		t.Errorf("after forgetting: node-gone remembered %v, node-here connected %v", kept, here)
	}
	if got := metricValue(t, h.srv.metrics.findings.vec.WithLabelValues("node.swap", "warning")); got != 1 {
		t.Errorf("findings{node.swap,warning} = %v after forgetting node-gone, want 1 (node-here's)", got)
	}
}

// TestUploadRedactedBeforeStored: a report that arrives carrying secrets,
// or a huge string (an old or hostile agent) is stored
// redacted and clipped, and counted; an honest report is stored as sent.
// (Invalid UTF-8 cannot be sent through the generated client: Received
// makes it valid, see agent/redact.)
func TestUploadRedactedBeforeStored(t *testing.T) {
	h := newHarness(t, Options{}, nil)
	a, _ := connectAgent(t, h.conn, "node-1")
	honest := report("node-1", "", finding("KubeletRemovedFlag", "kubelet.flag-removed", "error"))
	a.expectAck(t, a.upload(t, honest, "connect"))
	if got := metricValue(t, h.srv.metrics.redacted); got != 0 {
		t.Errorf("reports_redacted_total = %v after an honest report, want 0", got)
	}

	f := finding("JoinFailed", "kubeadm.join-failed", "error")
	f.Evidence = []*nodediagv1.Quote{
		{Source: "/var/log/cloud-init-output.log", Excerpt: "+ kubeadm join 10.0.0.4:6443 --token abcdef.0123456789abcdef"},
		{Source: "/etc/azure.json", Excerpt: `"aadClientSecret": "Hunter2azure~secret"`},
		{Source: "/var/log/syslog", Excerpt: strings.Repeat("x", 100<<10)},
	}
	hostile := report("node-1", "", f)
	a.expectAck(t, a.upload(t, hostile, "check"))
	rec, err := h.store.Latest(context.Background(), "node-1")
	if err != nil {
		t.Fatal(err)
	}
	got := prototext(rec.Report)
	for _, secret := range []string{"0123456789abcdef", "Hunter2azure"} {
		if strings.Contains(got, secret) {
			t.Errorf("the stored report holds %q", secret)
		}
	}
	ev := rec.Report.GetFindings()[0].GetEvidence()
	if !strings.Contains(ev[0].GetExcerpt(), "--token [REDACTED]") {
		t.Errorf("excerpt %q: want the token redacted, the line kept", ev[0].GetExcerpt())
	}
	if n := len(ev[2].GetExcerpt()); n > 17<<10 || !strings.Contains(ev[2].GetExcerpt(), "bytes clipped]") {
		t.Errorf("a 100 KiB excerpt stored as %d bytes, want clipped at 16 KiB with a note", n)
	}
	if got := metricValue(t, h.srv.metrics.redacted); got != 1 {
		t.Errorf("reports_redacted_total = %v, want 1", got)
	}
}

func prototext(m proto.Message) string {
	b, _ := proto.Marshal(m)
	return string(b)
}

// TestSilentAndSlowConnections: 2,000 connections that never send a byte
// and 1,500 that send the HTTP/2 preface a byte at a time do not keep an
// agent from connecting and having its report stored; once the handshake
// timeout passes, the server has closed every one of them.
func TestSilentAndSlowConnections(t *testing.T) {
	defer func(d time.Duration) { handshakeTimeout = d }(handshakeTimeout)
	handshakeTimeout = 2 * time.Second
	h := newHarness(t, Options{}, nil)
	const silent, slow = 2000, 1500
	conns := make([]net.Conn, 0, silent+slow)
	for range silent + slow {
		c, err := h.lis.Dial()
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	preface := []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
	for _, c := range conns[silent:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < len(preface); i++ {
				select {
				case <-stop:
					return
				case <-time.After(200 * time.Millisecond):
				}
				if _, err := c.Write(preface[i : i+1]); err != nil {
					return // closed by the server
				}
			}
		}()
	}
	start := time.Now()
	a, _ := connectAgent(t, h.conn, "node-1")
	a.expectAck(t, a.upload(t, report("node-1", ""), "connect"))
	if _, err := h.store.Latest(context.Background(), "node-1"); err != nil {
		t.Errorf("the agent's report was not stored beside %d silent and %d slow connections: %v", silent, slow, err)
	}
	t.Logf("an agent connected and stored a report in %v beside %d silent and %d slow connections", time.Since(start).Round(time.Millisecond), silent, slow)

	// Each connection is closed by the server: a read ends (EOF or reset)
	// instead of waiting.
	deadline := time.Now().Add(handshakeTimeout + 10*time.Second)
	open := 0
	for _, c := range conns {
		c.SetReadDeadline(deadline)
		buf := make([]byte, 64)
		for {
			_, err := c.Read(buf)
			if err == nil {
				continue // the server's SETTINGS or GOAWAY before it closes
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				open++
			}
			break
		}
	}
	close(stop)
	wg.Wait()
	if open > 0 {
		t.Errorf("%d of %d connections still open %v after the handshake timeout", open, silent+slow, handshakeTimeout+10*time.Second)
	}
}
