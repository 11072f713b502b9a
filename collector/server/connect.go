package server

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nodediag/nodediag/agent/redact"
	"github.com/nodediag/nodediag/agent/rules"
	"github.com/nodediag/nodediag/collector/store"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// maxNodeName is the longest node name accepted: a Kubernetes node name is
// a DNS subdomain (253 characters at most).
const maxNodeName = 253

// maxIdentity bounds the other identity strings of a Hello (machine ID,
// provider ID, agent version): they are kept for the whole stream and shown
// in the fleet table.
const maxIdentity = 1024

type collectorService struct {
	nodediagv1.UnimplementedCollectorServer
	s *Server
}

var _ nodediagv1.CollectorServer = (*collectorService)(nil)

// session is one agent's open stream.
type session struct {
	node       string
	hello      *nodediagv1.Hello
	agentStart time.Time
	conn       uint64 // serial number, for logs
	// out is the bounded send queue, drained by Connect's goroutine.
	out      chan *nodediagv1.CollectorMessage
	done     chan struct{}
	once     sync.Once
	cause    error // why the session ended; set before done is closed
	lastSeen atomic.Int64
}

func (ss *session) touch(t time.Time) { ss.lastSeen.Store(t.UnixNano()) }

func (ss *session) seen() time.Time { return time.Unix(0, ss.lastSeen.Load()) }

// end ends the session with err (nil: the agent closed its side); the first
// cause wins.
func (ss *session) end(err error) {
	ss.once.Do(func() {
		ss.cause = err
		close(ss.done)
	})
}

// offer queues m unless the queue is full or the session ended; it never
// waits.
func (ss *session) offer(m *nodediagv1.CollectorMessage) bool {
	select {
	case <-ss.done:
		return false
	default:
	}
	select {
	case ss.out <- m:
		return true
	default:
		return false
	}
}

// send queues m, waiting for room, unless the session ends first.
func (ss *session) send(m *nodediagv1.CollectorMessage) bool {
	select {
	case ss.out <- m:
		return true
	case <-ss.done:
		return false
	}
}

// Connect is an agent's stream: Hello and Welcome, then Uploads, each
// acknowledged once stored, and CheckRequests from sweeps.
func (c *collectorService) Connect(stream nodediagv1.Collector_ConnectServer) error {
	s := c.s
	err := c.connect(stream)
	if code := status.Code(err); err != nil && code != codes.Canceled && code != codes.Unavailable && code != codes.Aborted {
		s.metrics.refused.WithLabelValues(code.String()).Inc()
	}
	return err
}

func (c *collectorService) connect(stream nodediagv1.Collector_ConnectServer) error {
	s := c.s
	first, err := s.recvAgent(stream)
	if err != nil {
		if err := recvStatus(err); err != nil {
			return err
		}
		return status.Error(codes.InvalidArgument, "the stream ended before a Hello")
	}
	hello := first.GetHello()
	if hello == nil {
		return status.Errorf(codes.FailedPrecondition, "the first message must be a Hello, not %s", kind(first))
	}
	if err := validateHello(hello); err != nil {
		return err
	}
	if id, ok := stream.Context().Value(identityKey{}).(*identity); ok {
		if err := id.mayReport(hello.NodeName); err != nil {
			return err
		}
	}
	now := time.Now()
	ss := &session{
		node:       hello.NodeName,
		hello:      hello,
		agentStart: hello.AgentStart.AsTime(),
		out:        make(chan *nodediagv1.CollectorMessage, s.o.SendQueue),
		done:       make(chan struct{}),
	}
	ss.touch(now)
	welcome := &nodediagv1.Welcome{NodeName: hello.NodeName, MaxMessageBytes: int64(s.o.MaxMessageBytes)}
	if s.o.AgentInterval > 0 {
		welcome.Interval = durationpb.New(s.o.AgentInterval)
	}
	if err := s.register(ss); err != nil {
		return err
	}
	defer s.unregister(ss)
	// The Welcome is the first message: what sweeps queue from now on
	// waits in ss.out, which this goroutine drains only after it.
	if err := stream.Send(&nodediagv1.CollectorMessage{Msg: &nodediagv1.CollectorMessage_Welcome{Welcome: welcome}}); err != nil {
		return err
	}
	s.log.Debug("agent connected", "node", ss.node, "conn", ss.conn, "agent", hello.GetAgent().GetVersion())

	go s.receive(stream, ss)
	for {
		select {
		case m := <-ss.out:
			if err := c.sendOne(stream, m); err != nil {
				ss.end(err)
				return err
			}
		case <-ss.done:
			// Acks of reports stored before the end are still owed:
			// send what is queued (an agent that gets them need not
			// send those reports again).
		drain:
			for {
				select {
				case m := <-ss.out:
					if err := c.sendOne(stream, m); err != nil {
						break drain
					}
				default:
					break drain
				}
			}
			s.log.Debug("agent disconnected", "node", ss.node, "conn", ss.conn, "cause", ss.cause)
			return ss.cause
		}
	}
}

func (c *collectorService) sendOne(stream nodediagv1.Collector_ConnectServer, m *nodediagv1.CollectorMessage) error {
	if err := stream.Send(m); err != nil {
		return err
	}
	if m.GetAck() != nil {
		c.s.metrics.acks.Inc()
	}
	return nil
}

// receive reads the agent's messages until the stream ends, storing each
// Upload and queueing its Ack.
func (s *Server) receive(stream nodediagv1.Collector_ConnectServer, ss *session) {
	for {
		m, err := s.recvAgent(stream)
		if err != nil {
			ss.end(recvStatus(err))
			return
		}
		ss.touch(time.Now())
		switch msg := m.Msg.(type) {
		case *nodediagv1.AgentMessageRaw_Upload:
			if err := s.upload(ss, msg.Upload); err != nil {
				ss.end(err)
				return
			}
		case *nodediagv1.AgentMessageRaw_Hello:
			ss.end(status.Error(codes.FailedPrecondition, "a second Hello on one stream"))
			return
		case *nodediagv1.AgentMessageRaw_Report:
			// A Report without a sequence number can be neither
			// acknowledged nor told apart from a resend: it is not
			// stored (the proto says agents send Uploads).
			s.log.Debug("report without seq ignored", "node", ss.node)
		default:
			ss.end(status.Error(codes.InvalidArgument, "an empty message"))
			return
		}
	}
}

// upload decodes u's report, stores it and queues its Ack. An error ends
// the stream.
//
// The report arrives encoded (AgentMessageRaw): it is decoded here, at most
// Server.decoding at a time, only for its summary and finding counts, and
// the store keeps the bytes the agent sent. So a sweep's burst of thousands
// of uploads waits as byte slices, and the decoded reports live only for
// the time of a summary.
func (s *Server) upload(ss *session, u *nodediagv1.UploadRaw) error {
	s.metrics.received.Inc()
	if u.Seq == 0 {
		return status.Error(codes.InvalidArgument, "an Upload's seq counts from 1")
	}
	if len(u.Report) == 0 {
		return status.Errorf(codes.InvalidArgument, "upload %d has no report", u.Seq)
	}
	if !s.beginPut() {
		return status.Error(codes.Unavailable, "collector shutting down")
	}
	defer s.puts.Done()
	select {
	case <-ss.done:
		// Replaced or shutting down: no Ack could follow, and the agent
		// sends the report again on its new stream.
		return ss.cause
	default:
	}
	now := time.Now()
	summary, counts, err := s.summarize(ss, u, now)
	if err != nil {
		return err
	}
	seq := u.Seq
	rec := &store.Record{
		Summary:    summary,
		AgentStart: ss.agentStart,
		Seq:        seq,
		ReceivedAt: now,
		Encoded:    u.Report,
	}
	if u.OriginSeq > math.MaxInt64 || u.Seq > math.MaxInt64 {
		return status.Errorf(codes.InvalidArgument, "upload %d: seq or origin_seq out of range", u.Seq)
	}
	if u.OriginSeq != 0 && u.OriginAgentStart != nil {
		// Sent again by a later agent process: stored once per origin.
		rec.AgentStart, rec.Seq = u.OriginAgentStart.AsTime(), u.OriginSeq
	}
	// Not the stream's context: a Put under way finishes even if the agent
	// goes away (it will send the report again, and the store keeps it
	// once).
	ctx, cancel := context.WithTimeout(context.Background(), s.o.PutTimeout)
	err = s.o.Store.Put(ctx, rec)
	cancel()
	if err != nil {
		s.metrics.failed.Inc()
		s.log.Error("storing a report failed; not acknowledged", "node", ss.node, "seq", seq, "err", err)
		return status.Errorf(codes.Unavailable, "the collector could not store upload %d; it is not acknowledged: send it again", seq)
	}
	s.metrics.stored.Inc()
	s.metrics.findings.setCounts(ss.node, counts)
	if id := summary.RequestId; id != "" {
		s.answer(id, live(summary, true, ss.seen()))
	}
	ss.send(&nodediagv1.CollectorMessage{Msg: &nodediagv1.CollectorMessage_Ack{Ack: &nodediagv1.Ack{Seq: seq}}})
	return nil
}

// summarize decodes u's report (waiting for one of the decoding slots) and
// returns its summary and finding counts; a report that does not decode is
// InvalidArgument.
func (s *Server) summarize(ss *session, u *nodediagv1.UploadRaw, now time.Time) (*nodediagv1.NodeSummary, map[findingKey]int, error) {
	select {
	case s.decoding <- struct{}{}:
	case <-ss.done:
		return nil, nil, ss.cause
	}
	defer func() { <-s.decoding }()
	r := &nodediagv1.Report{}
	if err := proto.Unmarshal(u.Report, r); err != nil {
		return nil, nil, status.Errorf(codes.InvalidArgument, "upload %d: malformed report: %v", u.Seq, err)
	}
	// An agent redacts what it sends; one that did not (an old agent,
	// a hostile one) has its report redacted and clipped here, before
	// anything keeps or shows it. An honest report is stored as sent.
	if redact.Received(r, redact.MaxUntrusted) {
		b, err := proto.Marshal(r)
		if err != nil {
			return nil, nil, status.Errorf(codes.InvalidArgument, "upload %d: re-encoding the redacted report: %v", u.Seq, err)
		}
		u.Report = b
		s.metrics.redacted.Inc()
	}
	return Summarize(ss.hello, r, now), findingCounts(r), nil
}

func validateHello(h *nodediagv1.Hello) error {
	switch {
	case h.NodeName == "":
		return status.Error(codes.InvalidArgument, "the Hello has no node name")
	case len(h.NodeName) > maxNodeName:
		return status.Errorf(codes.InvalidArgument, "the node name is longer than %d bytes", maxNodeName)
	case len(h.MachineId) > maxIdentity || len(h.ProviderId) > maxIdentity ||
		len(h.GetAgent().GetVersion()) > maxIdentity || len(h.GetAgent().GetRevision()) > maxIdentity:
		return status.Errorf(codes.InvalidArgument, "the Hello's machine ID, provider ID or agent version is longer than %d bytes", maxIdentity)
	case h.AgentStart == nil:
		// Without it, the uploads of a restarted agent (seq from 1
		// again) would be taken for resends and dropped.
		return status.Error(codes.InvalidArgument, "the Hello has no agent_start: it tells uploads of different agent processes apart")
	}
	for _, r := range h.NodeName {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return status.Errorf(codes.InvalidArgument, "the node name %q has a space or control character", h.NodeName)
		}
	}
	return nil
}

// kind names the message a oneof holds, for errors.
func kind(m *nodediagv1.AgentMessageRaw) string {
	switch m.Msg.(type) {
	case *nodediagv1.AgentMessageRaw_Upload:
		return "an Upload"
	case *nodediagv1.AgentMessageRaw_Report:
		return "a Report"
	case *nodediagv1.AgentMessageRaw_Hello:
		return "a Hello"
	}
	return "an empty message"
}

// register files ss as its node's stream, ending the one it replaces, and
// asks it again what the sweeps under way asked its predecessor.
func (s *Server) register(ss *session) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return status.Error(codes.Unavailable, "collector shutting down")
	}
	old := s.agents[ss.node]
	if old == nil && len(s.agents) >= s.o.MaxAgents {
		s.mu.Unlock()
		s.log.Warn("refused an agent: the collector serves its maximum of agents", "node", ss.node, "max_agents", s.o.MaxAgents)
		return status.Errorf(codes.ResourceExhausted, "the collector serves %d agents, its maximum (serve --max-agents): node %q is not accepted", s.o.MaxAgents, ss.node)
	}
	if old != nil && heldElsewhere(old.hello, ss.hello) {
		s.mu.Unlock()
		s.log.Warn("refused a connection for a node held by another machine", "node", ss.node,
			"machine_id", ss.hello.MachineId, "holder_machine_id", old.hello.MachineId)
		return status.Errorf(codes.AlreadyExists, "node %q is connected from another machine (machine ID %s, this one %s): "+
			"a node name is held by one machine at a time; give each node its own name (NODE_NAME) and its own certificate (nodediag certs --agent NAME)",
			ss.node, old.hello.MachineId, ss.hello.MachineId)
	}
	s.connSeq++
	ss.conn = s.connSeq
	s.agents[ss.node] = ss
	var asks []string
	for id, sw := range s.sweeps {
		if sw.waitingFor(ss.node) {
			asks = append(asks, id)
		}
	}
	s.mu.Unlock()
	if old != nil {
		old.end(status.Errorf(codes.Aborted, "replaced by a newer connection for node %q", ss.node))
		s.metrics.replaced.Inc()
		s.log.Warn("a second connection for a node replaces the first", "node", ss.node, "old_conn", old.conn, "new_conn", ss.conn)
	} else {
		s.metrics.connected.Inc()
	}
	for _, id := range asks {
		if !ss.offer(checkRequest(id)) {
			s.metrics.dropped.Inc()
		}
	}
	return nil
}

// heldElsewhere says whether a node's live stream (opened with held) is
// another machine's than the Hello of a new stream: both say their machine
// ID and they differ. The same machine reconnecting replaces its stream (the
// old one is most often dead without the collector knowing yet); another
// machine must wait until the holder's stream ends, which keepalive notices
// within about 40 s when the holder is gone. So a copied certificate cannot
// push a live agent out of its node name.
func heldElsewhere(held, hello *nodediagv1.Hello) bool {
	return held.GetMachineId() != "" && hello.GetMachineId() != "" && held.GetMachineId() != hello.GetMachineId()
}

func (s *Server) unregister(ss *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.agents[ss.node] != ss {
		return // replaced: the newer session is counted
	}
	delete(s.agents, ss.node)
	s.lastSeen[ss.node] = ss.seen()
	s.metrics.connected.Dec()
}

func checkRequest(id string) *nodediagv1.CollectorMessage {
	return &nodediagv1.CollectorMessage{Msg: &nodediagv1.CollectorMessage_Check{Check: &nodediagv1.CheckRequest{RequestId: id}}}
}

// Summarize is a node's line of the fleet table for report r, received at
// receivedAt on the stream opened by hello: identity from the Hello (the
// report's own when the Hello leaves it out), the top finding (the
// report's first), errors (severity error or critical) and warnings.
// Connected and LastSeen are live state, left unset.
func Summarize(hello *nodediagv1.Hello, r *nodediagv1.Report, receivedAt time.Time) *nodediagv1.NodeSummary {
	sum := &nodediagv1.NodeSummary{
		NodeName:   hello.GetNodeName(),
		MachineId:  hello.GetMachineId(),
		ProviderId: hello.GetProviderId(),
		Agent:      hello.GetAgent(),
		ReportedAt: timestamppb.New(receivedAt),
		RequestId:  clip(r.GetRequestId(), 128),
	}
	if sum.MachineId == "" {
		sum.MachineId = r.GetHost().GetMachineId()
	}
	if sum.Agent == nil {
		sum.Agent = r.GetAgent()
	}
	for i, f := range r.GetFindings() {
		if i == 0 {
			sum.TopId, sum.TopTitle, sum.TopSeverity = clip(f.Id, 128), clip(f.Title, 512), clip(f.Severity, 16)
		}
		switch sev := rules.Severity(f.Severity); {
		case sev.AtLeast(rules.Error):
			sum.Errors++
		case sev == rules.Warning:
			sum.Warnings++
		}
	}
	return sum
}

// clip bounds a string of a summary at n bytes (on a UTF-8 boundary): every
// fleet listing carries each node's summary, so one node's oversized title
// must not make the table of the fleet too large to send.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
