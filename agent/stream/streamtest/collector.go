// Package streamtest is a test collector for the agent's tests: a small
// implementation of the Collector service of proto/nodediag/v1 on a
// loopback listener, speaking real gRPC. It records what agents send and
// answers as the protocol says (a Welcome to each Hello, an Ack to each
// Upload), and lets a test refuse agents, withhold Acks, ask for checks and
// stop the server. The real collector (collector/server) is not used: the
// agent must not depend on it.
package streamtest

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// Config shapes a test collector.
type Config struct {
	// Interval is suggested in each Welcome (none when zero).
	Interval time.Duration
	// Refuse, a status error, ends every stream instead of the Welcome.
	Refuse error
	// NoAck withholds the Acks.
	NoAck bool
	// MaxMessageBytes is said in each Welcome (nothing when zero); the
	// test collector itself accepts any size.
	MaxMessageBytes int64
	// TLS serves TLS (mutual when it asks for client certificates);
	// plaintext when nil.
	TLS *tls.Config
}

// Received is an upload as the test collector got it.
type Received struct {
	Node       string
	AgentStart time.Time
	Upload     *nodediagv1.Upload
	// Again: the same (node, agent_start, seq) was received before;
	// AfterAck: and it had been acknowledged then.
	Again, AfterAck bool
}

type key struct {
	node  string
	start int64
	seq   uint64
}

// Collector is a running test collector.
type Collector struct {
	nodediagv1.UnimplementedCollectorServer
	// Addr is the HOST:PORT it listens on.
	Addr string

	cfg Config
	srv *grpc.Server

	mu       sync.Mutex
	hellos   []*nodediagv1.Hello
	uploads  []Received
	seen     map[key]bool // received; true once acknowledged
	sessions map[string]chan *nodediagv1.CollectorMessage
	streams  int
	ends     []error
}

// Start starts a test collector on addr ("127.0.0.1:0" for any port, or
// the address of a stopped one to restart it there); it is stopped when
// the test ends.
func Start(t testing.TB, addr string, cfg Config) *Collector {
	t.Helper()
	var lis net.Listener
	var err error
	// The port of a stopped collector may take a moment to be free again.
	for i := 0; i < 100; i++ {
		if lis, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("test collector: %v", err)
	}
	opts := []grpc.ServerOption{
		// As the real collector: pings every 10 s at most, also without a
		// stream.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	}
	if cfg.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg.TLS)))
	}
	c := &Collector{
		Addr:     lis.Addr().String(),
		cfg:      cfg,
		srv:      grpc.NewServer(opts...),
		seen:     map[key]bool{},
		sessions: map[string]chan *nodediagv1.CollectorMessage{},
	}
	nodediagv1.RegisterCollectorServer(c.srv, c)
	go c.srv.Serve(lis)
	t.Cleanup(c.Stop)
	return c
}

// Stop stops the test collector at once: its listener and every stream
// close (agents see Unavailable).
func (c *Collector) Stop() { c.srv.Stop() }

// Connect is the Collector service: Hello, Welcome, then an Ack for each
// Upload and the CheckRequests Ask queues.
func (c *Collector) Connect(stream nodediagv1.Collector_ConnectServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	hello := first.GetHello()
	if hello == nil {
		return status.Error(codes.InvalidArgument, "the first message must be a Hello")
	}
	c.mu.Lock()
	c.hellos = append(c.hellos, hello)
	c.streams++
	c.mu.Unlock()
	if c.cfg.Refuse != nil {
		return c.cfg.Refuse
	}
	w := &nodediagv1.Welcome{NodeName: hello.NodeName, MaxMessageBytes: c.cfg.MaxMessageBytes}
	if c.cfg.Interval > 0 {
		w.Interval = durationpb.New(c.cfg.Interval)
	}
	if err := stream.Send(&nodediagv1.CollectorMessage{Msg: &nodediagv1.CollectorMessage_Welcome{Welcome: w}}); err != nil {
		return err
	}
	out := make(chan *nodediagv1.CollectorMessage, 64)
	c.mu.Lock()
	c.sessions[hello.NodeName] = out
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		if c.sessions[hello.NodeName] == out {
			delete(c.sessions, hello.NodeName)
		}
		c.mu.Unlock()
	}()

	recvErr := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			u := m.GetUpload()
			if u == nil {
				continue
			}
			k := key{hello.NodeName, hello.GetAgentStart().AsTime().UnixNano(), u.Seq}
			c.mu.Lock()
			acked, again := c.seen[k]
			c.uploads = append(c.uploads, Received{
				Node: hello.NodeName, AgentStart: hello.GetAgentStart().AsTime(), Upload: u,
				Again: again, AfterAck: acked,
			})
			c.seen[k] = acked || !c.cfg.NoAck
			c.mu.Unlock()
			if !c.cfg.NoAck {
				out <- &nodediagv1.CollectorMessage{Msg: &nodediagv1.CollectorMessage_Ack{Ack: &nodediagv1.Ack{Seq: u.Seq}}}
			}
		}
	}()
	for {
		select {
		case m := <-out:
			if err := stream.Send(m); err != nil {
				return err
			}
		case err := <-recvErr:
			if err == io.EOF {
				err = nil // the agent closed its side
			}
			c.ended(err)
			return err
		case <-stream.Context().Done():
			c.ended(stream.Context().Err())
			return stream.Context().Err()
		}
	}
}

func (c *Collector) ended(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ends = append(c.ends, err)
}

// Ends returns how the welcomed streams ended, in order: nil when the agent
// closed its side cleanly, else the error Recv returned (a cancelled RPC).
func (c *Collector) Ends() []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]error(nil), c.ends...)
}

// Ask sends a CheckRequest with id to node's stream and reports whether
// the node is connected.
func (c *Collector) Ask(node, id string) bool {
	c.mu.Lock()
	out := c.sessions[node]
	c.mu.Unlock()
	if out == nil {
		return false
	}
	out <- &nodediagv1.CollectorMessage{Msg: &nodediagv1.CollectorMessage_Check{Check: &nodediagv1.CheckRequest{RequestId: id}}}
	return true
}

// Connected reports whether node has a stream open.
func (c *Collector) Connected(node string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessions[node] != nil
}

// Hellos returns the Hellos received, in order.
func (c *Collector) Hellos() []*nodediagv1.Hello {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*nodediagv1.Hello(nil), c.hellos...)
}

// Uploads returns the uploads received, in order.
func (c *Collector) Uploads() []Received {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Received(nil), c.uploads...)
}

// Streams is the number of streams opened (Hellos received).
func (c *Collector) Streams() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.streams
}

// WaitTimeout bounds Wait: generous, so that a slow machine does not fail a
// test that only waits for something that must happen.
var WaitTimeout = 30 * time.Second

// Wait polls cond until it holds, failing the test after WaitTimeout.
func Wait(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(WaitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", WaitTimeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// String describes the collector for test messages.
func (c *Collector) String() string { return fmt.Sprintf("test collector on %s", c.Addr) }
