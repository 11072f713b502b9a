package server

import (
	"crypto/rand"
	"encoding/hex"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// sweep is one Fleet.Sweep under way: the agents it asked and the answers
// that came back. Answers are queued by the upload goroutines of the agents
// (s.answer) and streamed by the Sweep RPC's goroutine; queueing never
// waits for the RPC, so a slow operator's client never holds an agent up.
type sweep struct {
	id      string
	started time.Time
	// expected is the set of nodes asked: those connected when the sweep
	// started. It does not change after the sweep is registered.
	expected map[string]bool
	// notify holds a token when answers were queued since the RPC last
	// took them.
	notify chan struct{}
	// latency observes each answer's delay (nil: not observed).
	latency func(time.Duration)

	mu       sync.Mutex
	answered map[string]bool
	queue    []*nodediagv1.NodeSummary
	finished bool
}

func newSweep(id string, started time.Time, expected map[string]bool) *sweep {
	return &sweep{
		id:       id,
		started:  started,
		expected: expected,
		notify:   make(chan struct{}, 1),
		answered: make(map[string]bool, len(expected)),
	}
}

// newRequestID is a sweep's request ID: 64 random bits, so that nobody can
// guess the ID of a sweep and answer it for a node (answers are also
// checked against the nodes asked).
func newRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return "sweep-" + hex.EncodeToString(b[:])
}

// waitingFor says whether the sweep asked node and has no answer from it
// yet: an agent of that node that reconnects is asked again.
func (sw *sweep) waitingFor(node string) bool {
	if !sw.expected[node] {
		return false
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return !sw.finished && !sw.answered[node]
}

// add queues sum as node's answer. A node's second answer (a resent
// upload, an agent asked again after a reconnect that had answered on its
// old stream), an answer from a node not asked, and an answer after the
// sweep ended are dropped: the reports are stored all the same.
func (sw *sweep) add(sum *nodediagv1.NodeSummary, now time.Time) bool {
	node := sum.GetNodeName()
	if !sw.expected[node] {
		return false
	}
	sw.mu.Lock()
	if sw.finished || sw.answered[node] {
		sw.mu.Unlock()
		return false
	}
	sw.answered[node] = true
	sw.queue = append(sw.queue, sum)
	sw.mu.Unlock()
	if sw.latency != nil {
		sw.latency(now.Sub(sw.started))
	}
	select {
	case sw.notify <- struct{}{}:
	default: // a token is there already
	}
	return true
}

// take returns the answers queued since the last take.
func (sw *sweep) take() []*nodediagv1.NodeSummary {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	q := sw.queue
	sw.queue = nil
	return q
}

// complete says whether every node asked has answered.
func (sw *sweep) complete() bool {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return len(sw.answered) == len(sw.expected)
}

// finish ends the sweep: later answers are dropped. It returns the answers
// queued and not yet taken, and the nodes asked that did not answer,
// sorted; both are consistent with each other (no answer falls between).
func (sw *sweep) finish() (rest []*nodediagv1.NodeSummary, missing []string) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	sw.finished = true
	rest, sw.queue = sw.queue, nil
	for n := range sw.expected {
		if !sw.answered[n] {
			missing = append(missing, n)
		}
	}
	slices.Sort(missing)
	return rest, missing
}

// answer hands sum, a stored report that answers the CheckRequest
// requestID, to the sweep that asked, if it is still under way. It never
// waits: it runs on an agent's upload path.
func (s *Server) answer(requestID string, sum *nodediagv1.NodeSummary) {
	s.mu.RLock()
	sw := s.sweeps[requestID]
	s.mu.RUnlock()
	if sw == nil {
		return // an old sweep, or one that ended: the report is stored anyway
	}
	sw.add(sum, time.Now())
}

// live is a copy of sum with the collector's live state of the node set:
// whether its stream is open, and when it was last heard from (left unset
// when zero). sum itself is not changed (it may be shared).
func live(sum *nodediagv1.NodeSummary, connected bool, lastSeen time.Time) *nodediagv1.NodeSummary {
	c := proto.Clone(sum).(*nodediagv1.NodeSummary)
	c.Connected = connected
	c.LastSeen = nil
	if !lastSeen.IsZero() {
		c.LastSeen = timestamppb.New(lastSeen)
	}
	return c
}
