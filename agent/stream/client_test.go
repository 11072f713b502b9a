package stream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nodediag/nodediag/agent/stream/streamtest"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// The agent's side is tested against streamtest's test collector: real
// gRPC on loopback, the protocol as the proto describes it.

const testProviderID = "azure:///subscriptions/sub/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/node-1"

// checks is the Check function of the tests: each check makes a report
// named "check-N" (in its host's name), with a kubelet --provider-id in its
// evidence, and notes whether two checks ever ran at once.
type checks struct {
	delay   time.Duration
	n       atomic.Int64
	running atomic.Int32
	overlap atomic.Bool

	mu   sync.Mutex
	made []string // "check-N reason requestID"
}

func (c *checks) Check(ctx context.Context, reason, requestID string) (*nodediagv1.Report, error) {
	if c.running.Add(1) > 1 {
		c.overlap.Store(true)
	}
	defer c.running.Add(-1)
	if c.delay > 0 {
		select {
		case <-time.After(c.delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	n := c.n.Add(1)
	c.mu.Lock()
	c.made = append(c.made, fmt.Sprintf("check-%d %s %s", n, reason, requestID))
	c.mu.Unlock()
	return &nodediagv1.Report{
		Host: &nodediagv1.HostInfo{Hostname: fmt.Sprintf("check-%d", n), NodeName: "node-1", MachineId: "machine-1"},
		Evidence: &nodediagv1.Evidence{Probes: []*nodediagv1.ProbeEvidence{{
			Name: "kubelet-config",
			Data: &nodediagv1.ProbeEvidence_KubeletConfig{KubeletConfig: &nodediagv1.KubeletConfig{
				Flags: []*nodediagv1.KubeletFlag{{Name: "provider-id", Value: testProviderID, Active: true}},
			}},
		}}},
	}, nil
}

// names returns the "check-N" of every report made.
func (c *checks) names() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, m := range c.made {
		out = append(out, strings.Fields(m)[0])
	}
	return out
}

// logBuffer collects the agent's log, safe for concurrent writes.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) count(s string) int { return strings.Count(l.String(), s) }

// testOptions are Options with short delays: the interval is long (tests
// that want interval checks shorten it).
func testOptions(addr string, c *checks, log *logBuffer) Options {
	return Options{
		Addr:           addr,
		NodeName:       "node-1",
		Agent:          &nodediagv1.AgentInfo{Version: "v0.0.0-test"},
		Check:          c.Check,
		Interval:       time.Hour,
		MinInterval:    time.Millisecond,
		IntervalJitter: -1,
		Splay:          time.Millisecond,
		BackoffInitial: 20 * time.Millisecond,
		BackoffMax:     100 * time.Millisecond,
		ConnectTimeout: 5 * time.Second,
		Logger:         slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
}

// start runs the agent until the test ends (or stop is called) and
// returns stop, which cancels it and returns Run's error.
func start(t *testing.T, o Options) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, o) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
				t.Errorf("Run did not return after its context ended")
			}
		})
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

func reportName(r streamtest.Received) string { return r.Upload.GetReport().GetHost().GetHostname() }

// freeAddr is a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// The Hello identifies the node (the machine and provider IDs learnt from
// the first check, which runs before the first connection), the connect
// upload comes first, and the Welcome's interval replaces the agent's own
// (an hour here: every interval upload proves the Welcome was honoured).
func TestHelloAndWelcomeInterval(t *testing.T) {
	col := streamtest.Start(t, "127.0.0.1:0", streamtest.Config{Interval: 20 * time.Millisecond})
	var c checks
	var log logBuffer
	o := testOptions(col.Addr, &c, &log)
	agentStart := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	o.AgentStart = agentStart
	stop := start(t, o)

	streamtest.Wait(t, "three interval uploads", func() bool {
		n := 0
		for _, u := range col.Uploads() {
			if u.Upload.Reason == ReasonInterval {
				n++
			}
		}
		return n >= 3
	})
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	hellos := col.Hellos()
	if len(hellos) != 1 {
		t.Fatalf("%d Hellos, want 1 (one connection)", len(hellos))
	}
	h := hellos[0]
	if h.NodeName != "node-1" || h.MachineId != "machine-1" || h.ProviderId != testProviderID ||
		h.GetAgent().GetVersion() != "v0.0.0-test" || !h.GetAgentStart().AsTime().Equal(agentStart) {
		t.Errorf("Hello = %v", h)
	}
	ups := col.Uploads()
	if ups[0].Upload.Reason != ReasonConnect || ups[0].Upload.Seq != 1 || reportName(ups[0]) != "check-1" {
		t.Errorf("first upload: seq %d reason %q report %s; want seq 1, connect, check-1", ups[0].Upload.Seq, ups[0].Upload.Reason, reportName(ups[0]))
	}
	for i, u := range ups {
		if u.Upload.Seq != uint64(i+1) {
			t.Errorf("upload %d has seq %d: seqs count from 1 without gaps", i, u.Upload.Seq)
		}
	}
	if !strings.Contains(log.String(), "check interval set by the collector") {
		t.Errorf("the new interval is not logged:\n%s", log.String())
	}
}

// An upload is in the spool (on disk) before it is sent and leaves it on
// its Ack: a collector that does not acknowledge leaves it there; after a
// reconnection to one that does, the same upload (same agent_start and seq)
// is sent again, acknowledged, and removed from memory and disk.
func TestUploadKeptUntilAck(t *testing.T) {
	dir := t.TempDir()
	spool := OpenSpool(dir, 0, 0, t.Logf)
	noAck := streamtest.Start(t, "127.0.0.1:0", streamtest.Config{NoAck: true})
	var c checks
	var log logBuffer
	o := testOptions(noAck.Addr, &c, &log)
	o.Spool = spool
	start(t, o)

	streamtest.Wait(t, "the connect upload", func() bool { return len(noAck.Uploads()) == 1 })
	first := noAck.Uploads()[0]
	if spool.Len() != 1 || !spool.Has(first.Upload.Seq) {
		t.Fatalf("spool holds %d uploads; want the unacknowledged seq %d", spool.Len(), first.Upload.Seq)
	}
	if files, _ := os.ReadDir(dir); len(files) != 1 {
		t.Fatalf("spool dir holds %d files, want 1", len(files))
	}

	noAck.Stop()
	acking := streamtest.Start(t, noAck.Addr, streamtest.Config{})
	streamtest.Wait(t, "the spool to empty after the Acks", func() bool {
		return len(acking.Uploads()) >= 2 && spool.Len() == 0
	})
	again := acking.Uploads()[0]
	if again.Upload.Seq != first.Upload.Seq || !again.AgentStart.Equal(first.AgentStart) || reportName(again) != reportName(first) {
		t.Errorf("after reconnecting, the first upload is seq %d %s (start %v); want the unacknowledged seq %d %s (start %v) again",
			again.Upload.Seq, reportName(again), again.AgentStart, first.Upload.Seq, reportName(first), first.AgentStart)
	}
	if r := acking.Uploads()[1]; r.Upload.Reason != ReasonConnect || reportName(r) != "check-2" {
		t.Errorf("after the resend: %s %q; want a fresh connect check", reportName(r), r.Upload.Reason)
	}
	if files, _ := os.ReadDir(dir); len(files) != 0 {
		t.Errorf("spool dir still holds %d files after the Acks", len(files))
	}
}

// CheckRequests are answered with their request id, duplicates coalesced
// (queued, being checked, or answered), and checks never overlap, while
// interval checks go on.
func TestCheckRequests(t *testing.T) {
	col := streamtest.Start(t, "127.0.0.1:0", streamtest.Config{})
	c := checks{delay: 15 * time.Millisecond}
	var log logBuffer
	o := testOptions(col.Addr, &c, &log)
	o.Interval = 25 * time.Millisecond
	o.Spool = OpenSpool("", 0, 0, nil)
	start(t, o)
	streamtest.Wait(t, "the connection", func() bool { return col.Connected("node-1") })

	ids := []string{"r1", "r1", "r2", "r1", "r3", "r2", "r3", "r3"}
	for _, id := range ids {
		col.Ask("node-1", id)
	}
	answered := func(id string) int {
		n := 0
		for _, u := range col.Uploads() {
			if u.Upload.GetReport().GetRequestId() == id {
				if u.Upload.Reason != ReasonRequest {
					t.Errorf("upload answering %s has reason %q", id, u.Upload.Reason)
				}
				n++
			}
		}
		return n
	}
	streamtest.Wait(t, "answers to r1, r2, r3", func() bool { return answered("r1") > 0 && answered("r2") > 0 && answered("r3") > 0 })
	// Asked again once answered and acknowledged: coalesced. r4 is
	// asked after it on the same stream, so a second answer to r1 would
	// be queued before r4's and arrive first.
	streamtest.Wait(t, "the Ack of r1's answer", func() bool {
		for _, u := range col.Uploads() {
			if u.Upload.GetReport().GetRequestId() == "r1" && !o.Spool.Has(u.Upload.Seq) {
				return true
			}
		}
		return false
	})
	col.Ask("node-1", "r1")
	col.Ask("node-1", "r4")
	streamtest.Wait(t, "the answer to r4", func() bool { return answered("r4") > 0 })
	for _, id := range []string{"r1", "r2", "r3", "r4"} {
		if n := answered(id); n != 1 {
			t.Errorf("request %s answered %d times, want once", id, n)
		}
	}
	if c.overlap.Load() {
		t.Error("two checks ran at the same time")
	}
	if !strings.Contains(log.String(), "check request coalesced") {
		t.Errorf("no coalesced request logged:\n%s", log.String())
	}
}

// The collector goes away: the agent keeps checking on its interval, the
// spool keeps the newest reports within its bound (dropping the oldest and
// saying so), and when a collector listens again on the same address the
// agent reconnects and sends what it kept. Every report made is accounted
// for: received, still in the spool, or dropped by the bound; nothing
// acknowledged is sent again on a stream.
func TestOutageSpoolsAndResends(t *testing.T) {
	const bound = 3
	var drops atomic.Int64
	var dropMu sync.Mutex
	dropped := map[string]bool{} // "check-N": here check N is upload seq N
	spool := OpenSpool(t.TempDir(), bound, 0, func(format string, args ...any) {
		if strings.Contains(format, "dropping") {
			drops.Add(1)
			dropMu.Lock()
			dropped[fmt.Sprintf("check-%d", args[0])] = true
			dropMu.Unlock()
		}
		t.Logf(format, args...)
	})
	first := streamtest.Start(t, "127.0.0.1:0", streamtest.Config{})
	var c checks
	var log logBuffer
	o := testOptions(first.Addr, &c, &log)
	o.Interval = 20 * time.Millisecond
	o.Spool = spool
	stop := start(t, o)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent log:\n%s", log.String())
		}
	})

	streamtest.Wait(t, "an acknowledged upload", func() bool { return len(first.Uploads()) > 0 && spool.Len() == 0 })
	first.Stop()
	down := c.n.Load()
	streamtest.Wait(t, "eight checks while the collector is down", func() bool { return c.n.Load() >= down+8 })
	if n := spool.Len(); n > bound {
		t.Errorf("spool holds %d uploads during the outage, bound %d", n, bound)
	}
	if drops.Load() == 0 {
		t.Error("no upload dropped: the bound was not exercised")
	}
	newest := c.n.Load()

	// Checks go on meanwhile: the report that was the newest may be
	// dropped before the reconnection, but every report kept is sent, in
	// order, before any newer one.
	second := streamtest.Start(t, first.Addr, streamtest.Config{})
	streamtest.Wait(t, "a report as new as the outage's newest at the new collector", func() bool {
		for _, u := range second.Uploads() {
			var n int64
			fmt.Sscanf(reportName(u), "check-%d", &n)
			if n >= newest {
				return true
			}
		}
		return false
	})
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}

	got := map[string]bool{}
	for _, col := range []*streamtest.Collector{first, second} {
		for _, u := range col.Uploads() {
			if u.AfterAck {
				t.Errorf("%s: seq %d received again after its Ack", col, u.Upload.Seq)
			}
			got[reportName(u)] = true
		}
	}
	for _, e := range spool.Entries() {
		got[e.Upload.GetReport().GetHost().GetHostname()] = true
	}
	// A dropped upload may have been received (sent, its Ack lost with
	// the collector): only the reports neither received nor kept must
	// all have been dropped by the bound.
	dropMu.Lock()
	for _, n := range c.names() {
		if !got[n] && !dropped[n] {
			t.Errorf("%s was neither received, kept nor dropped by the bound: lost", n)
		}
	}
	dropMu.Unlock()
	if h1, h2 := first.Hellos(), second.Hellos(); len(h2) == 0 || !h1[0].AgentStart.AsTime().Equal(h2[0].AgentStart.AsTime()) {
		t.Error("the agent_start changed across a reconnection (acknowledged seqs would be ambiguous)")
	}
	if n := log.count("cannot reach the collector") + log.count("connection to the collector lost"); n != 1 {
		t.Errorf("the outage is logged %d times at warn level, want once:\n%s", n, log.String())
	}
	if !strings.Contains(log.String(), "reconnected to the collector") {
		t.Errorf("the reconnection is not logged:\n%s", log.String())
	}
}

// An unreachable collector: attempts are spaced by the growing backoff (no
// busy loop), checks go on into the bounded spool, and Run returns as soon
// as its context ends.
func TestUnreachableCollectorBacksOff(t *testing.T) {
	addr := freeAddr(t)
	var mu sync.Mutex
	var dials []time.Time
	dialer := func(ctx context.Context, a string) (net.Conn, error) {
		mu.Lock()
		dials = append(dials, time.Now())
		mu.Unlock()
		return (&net.Dialer{}).DialContext(ctx, "tcp", a)
	}
	var c checks
	var log logBuffer
	o := testOptions(addr, &c, &log)
	o.BackoffInitial, o.BackoffMax = 100*time.Millisecond, 2*time.Second
	o.Interval = 50 * time.Millisecond
	o.DialOptions = []grpc.DialOption{grpc.WithContextDialer(dialer)}
	spool := OpenSpool("", 0, 0, nil)
	o.Spool = spool
	stop := start(t, o)

	time.Sleep(3 * time.Second)
	begin := time.Now()
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if d := time.Since(begin); d > 2*time.Second {
		t.Errorf("Run took %v to return after its context ended", d)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dials) < 2 || len(dials) > 8 {
		t.Errorf("%d dials in 3 s with backoff from 100ms to 2s; want 2 to 8", len(dials))
	}
	for i := 1; i < len(dials); i++ {
		gap := dials[i].Sub(dials[i-1])
		if min := BackoffDelay(o.BackoffInitial, o.BackoffMax, DefaultBackoffFactor, i-1, 0); gap < min {
			t.Errorf("dial %d came %v after the previous one; the backoff allows no less than %v", i, gap, min)
		}
	}
	if c.n.Load() < 5 {
		t.Errorf("%d checks in 3 s at a 50ms interval: checks must go on while disconnected", c.n.Load())
	}
	if spool.Len() > DefaultSpoolReports {
		t.Errorf("spool holds %d uploads, bound %d", spool.Len(), DefaultSpoolReports)
	}
	if n := log.count("cannot reach the collector"); n != 1 {
		t.Errorf("the outage is logged %d times at warn level, want once", n)
	}
}

// A refusal (here Unauthenticated) is logged as an error with a hint once,
// and retried at the longest backoff, not the shortest.
func TestRefusalRetriedAtMaxBackoff(t *testing.T) {
	col := streamtest.Start(t, "127.0.0.1:0", streamtest.Config{Refuse: status.Error(codes.Unauthenticated, "no client certificate")})
	var c checks
	var log logBuffer
	o := testOptions(col.Addr, &c, &log)
	o.BackoffInitial, o.BackoffMax = time.Millisecond, 400*time.Millisecond
	var mu sync.Mutex
	var dials []time.Time
	o.DialOptions = []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
		mu.Lock()
		dials = append(dials, time.Now())
		mu.Unlock()
		return (&net.Dialer{}).DialContext(ctx, "tcp", a)
	})}
	stop := start(t, o)
	streamtest.Wait(t, "three refused attempts", func() bool { return col.Streams() >= 3 })
	stop()
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < len(dials); i++ {
		if gap := dials[i].Sub(dials[i-1]); gap < o.BackoffMax/2 {
			t.Errorf("attempt %d came %v after the previous refusal; want at least half the longest backoff (%v)", i, gap, o.BackoffMax/2)
		}
	}
	if n := log.count("the collector refused the agent"); n != 1 {
		t.Errorf("the refusal is logged %d times, want once:\n%s", n, log.String())
	}
	if !strings.Contains(log.String(), "--tls-cert") {
		t.Errorf("the refusal's log has no hint:\n%s", log.String())
	}
}

// Once: nil when the report is acknowledged; ErrNotAcknowledged when the
// collector does not acknowledge within AckTimeout; the refusal's status
// when it refuses.
func TestOnce(t *testing.T) {
	t.Run("acknowledged", func(t *testing.T) {
		col := streamtest.Start(t, "127.0.0.1:0", streamtest.Config{})
		var c checks
		var log logBuffer
		o := testOptions(col.Addr, &c, &log)
		o.Once = true
		if err := Run(context.Background(), o); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if ups := col.Uploads(); len(ups) != 1 || c.n.Load() != 1 {
			t.Errorf("%d uploads, %d checks; want 1 and 1", len(ups), c.n.Load())
		}
	})
	t.Run("not acknowledged", func(t *testing.T) {
		col := streamtest.Start(t, "127.0.0.1:0", streamtest.Config{NoAck: true})
		var c checks
		var log logBuffer
		o := testOptions(col.Addr, &c, &log)
		o.Once, o.AckTimeout = true, 300*time.Millisecond
		err := Run(context.Background(), o)
		if !errors.Is(err, ErrNotAcknowledged) {
			t.Fatalf("Run: %v; want ErrNotAcknowledged", err)
		}
		if len(col.Uploads()) == 0 {
			t.Error("the report was not sent")
		}
	})
	t.Run("refused", func(t *testing.T) {
		col := streamtest.Start(t, "127.0.0.1:0", streamtest.Config{Refuse: status.Error(codes.PermissionDenied, "certificate for node-2")})
		var c checks
		var log logBuffer
		o := testOptions(col.Addr, &c, &log)
		o.Once = true
		err := Run(context.Background(), o)
		if status.Code(err) != codes.PermissionDenied {
			t.Fatalf("Run: %v; want PermissionDenied", err)
		}
		if col.Streams() != 1 {
			t.Errorf("%d attempts; a refusal ends --once at once", col.Streams())
		}
	})
}

// The uploads a process left in its spool directory are sent by the next
// process, numbered in its own seq space (its agent_start), before its own
// first report.
func TestSpoolSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	noAck := streamtest.Start(t, "127.0.0.1:0", streamtest.Config{NoAck: true})
	var c1 checks
	var log logBuffer
	o := testOptions(noAck.Addr, &c1, &log)
	o.Spool = OpenSpool(dir, 0, 0, t.Logf)
	o.AgentStart = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	stop := start(t, o)
	streamtest.Wait(t, "the first process's upload", func() bool { return len(noAck.Uploads()) == 1 })
	stop()
	noAck.Stop()

	col := streamtest.Start(t, "127.0.0.1:0", streamtest.Config{})
	c2 := checks{}
	c2.n.Store(100) // the second process's reports are check-101, ...
	o2 := testOptions(col.Addr, &c2, &log)
	o2.Spool = OpenSpool(dir, 0, 0, t.Logf)
	if o2.Spool.Len() != 1 {
		t.Fatalf("the new spool loaded %d uploads from %s, want 1", o2.Spool.Len(), dir)
	}
	o2.AgentStart = o.AgentStart.Add(time.Hour)
	start(t, o2)
	streamtest.Wait(t, "both reports acknowledged", func() bool { return len(col.Uploads()) >= 2 && o2.Spool.Len() == 0 })
	ups := col.Uploads()
	if reportName(ups[0]) != "check-1" || ups[0].Upload.Seq != 1 || !ups[0].AgentStart.Equal(o2.AgentStart) {
		t.Errorf("first upload: %s seq %d start %v; want the previous process's check-1 as seq 1 of the new agent_start %v",
			reportName(ups[0]), ups[0].Upload.Seq, ups[0].AgentStart, o2.AgentStart)
	}
	if reportName(ups[1]) != "check-101" || ups[1].Upload.Seq != 2 {
		t.Errorf("second upload: %s seq %d; want check-101 seq 2", reportName(ups[1]), ups[1].Upload.Seq)
	}
	// The resent report keeps the identity it was made under, so that a
	// collector that stored it before the Ack was lost stores it once.
	if got := ups[0].Upload; got.GetOriginSeq() != 1 || !got.GetOriginAgentStart().AsTime().Equal(o.AgentStart) {
		t.Errorf("resent upload's origin: seq %d start %v; want seq 1 of the first process (%v)", got.GetOriginSeq(), got.GetOriginAgentStart().AsTime(), o.AgentStart)
	}
	if got := ups[1].Upload; got.GetOriginSeq() != 2 || !got.GetOriginAgentStart().AsTime().Equal(o2.AgentStart) {
		t.Errorf("new upload's origin: seq %d start %v; want its own (2, %v)", got.GetOriginSeq(), got.GetOriginAgentStart().AsTime(), o2.AgentStart)
	}
	if files, _ := os.ReadDir(dir); len(files) != 0 {
		t.Errorf("%d files left in the spool dir after the Acks", len(files))
	}
}

// A report larger than the collector's message limit is sent without its
// evidence, and says so.
func TestOversizeReportLosesEvidence(t *testing.T) {
	col := streamtest.Start(t, "127.0.0.1:0", streamtest.Config{})
	var c checks
	var log logBuffer
	o := testOptions(col.Addr, &c, &log)
	o.Once = true
	o.MaxMessageBytes = 1000
	o.Check = func(ctx context.Context, reason, requestID string) (*nodediagv1.Report, error) {
		r, err := c.Check(ctx, reason, requestID)
		r.Evidence.Probes[0].Error = strings.Repeat("x", 2000) // too large with the evidence
		return r, err
	}
	if err := Run(context.Background(), o); err != nil {
		t.Fatalf("Run: %v", err)
	}
	r := col.Uploads()[0].Upload.GetReport()
	if r.Evidence != nil || len(r.Gaps) != 1 || !strings.Contains(r.Gaps[0], "evidence was left out") {
		t.Errorf("report: evidence %v, gaps %q; want no evidence and a gap saying why", r.Evidence != nil, r.Gaps)
	}
}

// The collector's Welcome says a smaller limit than the agent's own: a
// report over it is sent without its evidence, and says so.
func TestWelcomeMessageLimitApplies(t *testing.T) {
	col := streamtest.Start(t, "127.0.0.1:0", streamtest.Config{MaxMessageBytes: 1000})
	var c checks
	var log logBuffer
	o := testOptions(col.Addr, &c, &log)
	o.Once = true
	o.Check = func(ctx context.Context, reason, requestID string) (*nodediagv1.Report, error) {
		r, err := c.Check(ctx, reason, requestID)
		r.Evidence.Probes[0].Error = strings.Repeat("x", 2000) // over the collector's 1000 bytes
		return r, err
	}
	if err := Run(context.Background(), o); err != nil {
		t.Fatalf("Run: %v", err)
	}
	r := col.Uploads()[0].Upload.GetReport()
	if r.Evidence != nil || len(r.Gaps) != 1 || !strings.Contains(r.Gaps[0], "collector accepts 1000") {
		t.Errorf("report: evidence %v, gaps %q; want no evidence and a gap naming the collector's 1000 bytes", r.Evidence != nil, r.Gaps)
	}
}

// Run's end closes the stream from the agent's side: the collector sees the
// end of the agent's messages (io.EOF), not a cancelled RPC.
func TestStopClosesStreamCleanly(t *testing.T) {
	col := streamtest.Start(t, "127.0.0.1:0", streamtest.Config{})
	var c checks
	var log logBuffer
	stop := start(t, testOptions(col.Addr, &c, &log))
	streamtest.Wait(t, "the connection", func() bool { return col.Connected("node-1") && len(col.Uploads()) == 1 })
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	streamtest.Wait(t, "the stream's end", func() bool { return len(col.Ends()) == 1 })
	if err := col.Ends()[0]; err != nil {
		t.Errorf("the stream ended with %v; want the agent's clean close", err)
	}
}

func TestOptionsRequired(t *testing.T) {
	var c checks
	for name, o := range map[string]Options{
		"no address":   {NodeName: "n", Check: c.Check},
		"no check":     {Addr: "127.0.0.1:1", NodeName: "n"},
		"no node name": {Addr: "127.0.0.1:1", Check: c.Check},
	} {
		if err := Run(context.Background(), o); err == nil {
			t.Errorf("%s: Run returned nil", name)
		}
	}
}
