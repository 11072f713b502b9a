package server

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nodediag/nodediag/collector/store"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// fleetService is the operator's side: sweeps and the fleet table.
type fleetService struct {
	nodediagv1.UnimplementedFleetServer
	s *Server
}

var _ nodediagv1.FleetServer = (*fleetService)(nil)

// sweepTimeout is the wait a SweepRequest asks for, defaulted and bounded.
func (s *Server) sweepTimeout(req *nodediagv1.SweepRequest) (time.Duration, error) {
	d := req.GetTimeout()
	if d == nil {
		return s.o.SweepTimeout, nil
	}
	if err := d.CheckValid(); err != nil {
		return 0, status.Errorf(codes.InvalidArgument, "sweep timeout: %v", err)
	}
	t := d.AsDuration()
	switch {
	case t < 0:
		return 0, status.Errorf(codes.InvalidArgument, "sweep timeout %s is negative", t)
	case t == 0:
		return s.o.SweepTimeout, nil
	case t > s.o.MaxSweepTimeout:
		return s.o.MaxSweepTimeout, nil
	}
	return t, nil
}

// Sweep asks every agent connected now to check, and streams their answers
// as they arrive (see the proto). The sweep is registered before the
// CheckRequests go out, so that no answer can be missed, and an agent of
// the sweep that reconnects before answering is asked again (register).
// Nothing here holds s.mu while sending to the client.
func (f *fleetService) Sweep(req *nodediagv1.SweepRequest, stream nodediagv1.Fleet_SweepServer) error {
	s := f.s
	timeout, err := s.sweepTimeout(req)
	if err != nil {
		return err
	}
	started := time.Now()
	sw := newSweep(newRequestID(), started, nil)
	sw.latency = func(d time.Duration) { s.metrics.answerLatency.Observe(d.Seconds()) }

	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return status.Error(codes.Unavailable, "collector shutting down")
	}
	sessions := make([]*session, 0, len(s.agents))
	sw.expected = make(map[string]bool, len(s.agents))
	for name, ss := range s.agents {
		sessions = append(sessions, ss)
		sw.expected[name] = true
	}
	s.sweeps[sw.id] = sw
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.sweeps, sw.id)
		s.mu.Unlock()
	}()
	s.metrics.sweepsStarted.Inc()
	s.log.Info("sweep started", "request_id", sw.id, "expected", len(sw.expected), "timeout", timeout)

	if err := stream.Send(&nodediagv1.SweepEvent{Event: &nodediagv1.SweepEvent_Started{Started: &nodediagv1.SweepStarted{
		RequestId: sw.id,
		Expected:  int32(len(sw.expected)),
		StartedAt: timestamppb.New(started),
	}}}); err != nil {
		sw.finish()
		s.metrics.sweepEnded(sweepClientGone, time.Since(started), 0)
		return err
	}
	check := checkRequest(sw.id)
	for _, ss := range sessions {
		if !ss.offer(check) {
			s.metrics.dropped.Inc()
			s.log.Debug("check request dropped", "request_id", sw.id, "node", ss.node)
		}
	}

	sent := 0
	sendAll := func(sums []*nodediagv1.NodeSummary) error {
		for _, sum := range sums {
			if err := stream.Send(&nodediagv1.SweepEvent{Event: &nodediagv1.SweepEvent_Answer{Answer: sum}}); err != nil {
				return err
			}
			sent++
		}
		return nil
	}
	done := func(timedOut bool) error {
		rest, missing := sw.finish()
		if err := sendAll(rest); err != nil {
			s.metrics.sweepEnded(sweepClientGone, time.Since(started), sent)
			return err
		}
		elapsed := time.Since(started)
		outcome := sweepAllAnswered
		if len(missing) > 0 {
			outcome = sweepTimedOut
		}
		s.metrics.sweepEnded(outcome, elapsed, sent)
		s.log.Info("sweep done", "request_id", sw.id, "expected", len(sw.expected), "answered", sent, "missing", len(missing), "elapsed", elapsed)
		return stream.Send(&nodediagv1.SweepEvent{Event: &nodediagv1.SweepEvent_Done{Done: &nodediagv1.SweepDone{
			Expected: int32(len(sw.expected)),
			Answered: int32(sent),
			Missing:  missing,
			Elapsed:  durationpb.New(elapsed),
			TimedOut: timedOut && len(missing) > 0,
		}}})
	}

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	ctx := stream.Context()
	for {
		if sw.complete() {
			return done(false)
		}
		select {
		case <-sw.notify:
			if err := sendAll(sw.take()); err != nil {
				sw.finish()
				s.metrics.sweepEnded(sweepClientGone, time.Since(started), sent)
				return err
			}
		case <-timer.C:
			return done(true)
		case <-ctx.Done():
			// The answers are stored all the same; nobody is left to tell.
			sw.finish()
			s.metrics.sweepEnded(sweepClientGone, time.Since(started), sent)
			return status.FromContextError(ctx.Err()).Err()
		case <-s.closed:
			rest, _ := sw.finish()
			s.metrics.sweepEnded(sweepShutdown, time.Since(started), sent)
			if err := sendAll(rest); err != nil {
				return err
			}
			return status.Errorf(codes.Unavailable, "collector shutting down: sweep %s ended after %d of %d answers", sw.id, sent, len(sw.expected))
		}
	}
}

// ListNodes is the fleet table: every node with a stored report, and every
// connected agent that has none yet (from its Hello), with their live
// state, sorted by node name.
func (f *fleetService) ListNodes(ctx context.Context, _ *nodediagv1.ListNodesRequest) (*nodediagv1.ListNodesResponse, error) {
	s := f.s
	stored, err := s.o.Store.Nodes(ctx)
	if err != nil {
		return nil, s.storeStatus("listing nodes", err)
	}
	type liveState struct {
		hello    *nodediagv1.Hello
		lastSeen time.Time
	}
	s.mu.RLock()
	connected := make(map[string]liveState, len(s.agents))
	for name, ss := range s.agents {
		connected[name] = liveState{hello: ss.hello, lastSeen: ss.seen()}
	}
	seen := make(map[string]time.Time, len(stored))
	for _, sum := range stored {
		if t, ok := s.lastSeen[sum.GetNodeName()]; ok {
			seen[sum.GetNodeName()] = t
		}
	}
	s.mu.RUnlock()

	out := make([]*nodediagv1.NodeSummary, 0, max(len(stored), len(connected)))
	for _, sum := range stored {
		name := sum.GetNodeName()
		if ls, ok := connected[name]; ok {
			out = append(out, live(sum, true, ls.lastSeen))
			delete(connected, name)
			continue
		}
		out = append(out, live(sum, false, seen[name]))
	}
	for name, ls := range connected {
		out = append(out, &nodediagv1.NodeSummary{
			NodeName:   name,
			MachineId:  ls.hello.GetMachineId(),
			ProviderId: ls.hello.GetProviderId(),
			Agent:      ls.hello.GetAgent(),
			Connected:  true,
			LastSeen:   timestamppb.New(ls.lastSeen),
		})
	}
	slices.SortFunc(out, func(a, b *nodediagv1.NodeSummary) int { return strings.Compare(a.NodeName, b.NodeName) })
	return &nodediagv1.ListNodesResponse{Nodes: out}, nil
}

// GetNode is a node's latest stored report, with its live state.
func (f *fleetService) GetNode(ctx context.Context, req *nodediagv1.GetNodeRequest) (*nodediagv1.NodeRecord, error) {
	s := f.s
	name := req.GetNodeName()
	if name == "" {
		return nil, status.Error(codes.InvalidArgument, "a node name is required")
	}
	rec, err := s.o.Store.Latest(ctx, name)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, status.Errorf(codes.NotFound, "no report of node %q is stored (its agent has not reported to this collector)", name)
		}
		return nil, s.storeStatus("reading the node's report", err)
	}
	return &nodediagv1.NodeRecord{Summary: s.liveSummary(rec.Summary), Report: rec.Report}, nil
}

// liveSummary is a stored summary with the node's live state: connected
// now, or when its stream ended (zero when it never had one here).
func (s *Server) liveSummary(sum *nodediagv1.NodeSummary) *nodediagv1.NodeSummary {
	name := sum.GetNodeName()
	s.mu.RLock()
	ss := s.agents[name]
	lastSeen := s.lastSeen[name]
	s.mu.RUnlock()
	if ss != nil {
		return live(sum, true, ss.seen())
	}
	return live(sum, false, lastSeen)
}
