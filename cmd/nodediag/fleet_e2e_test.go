package main

// The fleet end to end: `nodediag serve`, `nodediag-agent run`, `nodediag
// certs`, `sweep`, `nodes` and `node` as real processes on loopback, and the
// faults of issue 5: the collector killed in the middle of a sweep and
// started again (no acknowledged report lost, agents back), an unreachable
// collector (the agent backs off, stays small, stops on SIGTERM), and
// clients the collector must refuse (no certificate, the wrong role, an
// oversize or malformed message) while it goes on serving its agents.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nodediag/nodediag/collector/store"
	"github.com/nodediag/nodediag/internal/loadgen"
	"github.com/nodediag/nodediag/internal/testenv"
	"github.com/nodediag/nodediag/internal/tlsconfig"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

const (
	collectorPkg = "github.com/nodediag/nodediag/cmd/nodediag"
	agentPkg     = "github.com/nodediag/nodediag/cmd/nodediag-agent"
)

// hostRoot is an example host of the agent's tests.
func hostRoot(t testing.TB, name string) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", "agent", "testdata", "hosts", name, "root"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(root); err != nil {
		t.Fatal(err)
	}
	return root
}

// fleet is a collector process, the agents started against it and the
// flags clients need to reach it.
type fleet struct {
	t          *testing.T
	collector  string // binary
	agent      string // binary
	addr       string
	metrics    string
	dataDir    string
	certDir    string // "" when --insecure
	serveArgs  []string
	serve      *testenv.Daemon
	agents     map[string]*testenv.Daemon
	agentSpool map[string]string
}

func newFleet(t *testing.T, withTLS bool, extra ...string) *fleet {
	f := &fleet{
		t:          t,
		collector:  testenv.Build(t, collectorPkg),
		agent:      testenv.Build(t, agentPkg),
		addr:       fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)),
		metrics:    fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)),
		dataDir:    t.TempDir(),
		agents:     map[string]*testenv.Daemon{},
		agentSpool: map[string]string{},
	}
	f.serveArgs = []string{f.collector, "serve", "--listen", f.addr, "--data-dir", f.dataDir, "--metrics-listen", f.metrics}
	if withTLS {
		f.certDir = filepath.Join(t.TempDir(), "pki")
		out, err := exec.Command(f.collector, "certs", "--dir", f.certDir).CombinedOutput()
		if err != nil {
			t.Fatalf("nodediag certs: %v\n%s", err, out)
		}
		f.serveArgs = append(f.serveArgs, "--tls-cert", f.cert("server.crt"), "--tls-key", f.cert("server.key"), "--client-ca", f.cert("ca.crt"))
	} else {
		f.serveArgs = append(f.serveArgs, "--insecure")
	}
	f.serveArgs = append(f.serveArgs, extra...)
	f.startCollector()
	return f
}

func (f *fleet) cert(name string) string { return filepath.Join(f.certDir, name) }

// startCollector starts `nodediag serve` and waits until it accepts
// connections.
func (f *fleet) startCollector() {
	f.t.Helper()
	f.serve = testenv.Start(f.t, f.serveArgs, nil, "", 20*time.Second, testenv.DialReady("tcp", f.addr))
}

// clientFlags are the flags of an operator command (role "operator") or of
// an agent (role "agent").
func (f *fleet) clientFlags(role string) []string {
	if f.certDir == "" {
		return []string{"--collector", f.addr, "--insecure"}
	}
	return []string{"--collector", f.addr, "--tls-cert", f.cert(role + ".crt"), "--tls-key", f.cert(role + ".key"), "--ca", f.cert("ca.crt")}
}

// startAgent runs `nodediag-agent run` for node over an example host.
func (f *fleet) startAgent(node, host string) *testenv.Daemon {
	f.t.Helper()
	spool := filepath.Join(f.t.TempDir(), "spool")
	args := append([]string{f.agent, "run"}, f.clientFlags("agent")...)
	args = append(args, "--node-name", node, "--root", hostRoot(f.t, host), "--exec", "none", "--interval", "1h", "--spool-dir", spool)
	d := testenv.Start(f.t, args, nil, "", 5*time.Second, func() error { return nil })
	f.agents[node] = d
	f.agentSpool[node] = spool
	return d
}

// cli runs `nodediag ARGS... <client flags>` and returns its output and
// exit code.
func (f *fleet) cli(args ...string) (string, int) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, f.collector, append(args, f.clientFlags("operator")...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			f.t.Fatalf("nodediag %s: %v", strings.Join(args, " "), err)
		}
	}
	return string(out), cmd.ProcessState.ExitCode()
}

// nodes is `nodediag nodes -o json`, parsed.
func (f *fleet) nodes() map[string]map[string]any {
	f.t.Helper()
	out, code := f.cli("nodes", "-o", "json")
	if code != 0 && code != 1 {
		f.t.Fatalf("nodediag nodes: exit %d\n%s", code, out)
	}
	var resp struct {
		Nodes []map[string]any `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		f.t.Fatalf("nodediag nodes -o json: %v\n%s", err, out)
	}
	m := map[string]map[string]any{}
	for _, n := range resp.Nodes {
		m[fmt.Sprint(n["node_name"])] = n
	}
	return m
}

// waitConnected waits until every named node is connected with a stored
// report.
func (f *fleet) waitConnected(timeout time.Duration, names ...string) {
	f.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ns := f.nodes()
		missing := []string{}
		for _, n := range names {
			if ns[n]["connected"] != true || ns[n]["reported_at"] == nil {
				missing = append(missing, n)
			}
		}
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("after %v, not connected with a report: %v\ncollector:\n%s\nagents:\n%s", timeout, missing, f.serve.Output(), f.agentLogs())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (f *fleet) agentLogs() string {
	var b strings.Builder
	for n, d := range f.agents {
		fmt.Fprintf(&b, "--- %s\n%s\n", n, d.Output())
	}
	return b.String()
}

// checkTop is the top finding `nodediag-agent check` gives for host: what
// the collector must show for an agent over that host.
func (f *fleet) checkTop(host string) string {
	f.t.Helper()
	out, _ := exec.Command(f.agent, "check", "--root", hostRoot(f.t, host), "--exec", "none", "--output", "json").Output()
	var r struct {
		Findings []struct {
			ID string `json:"id"`
		} `json:"findings"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		f.t.Fatalf("check --output json of %s: %v", host, err)
	}
	if len(r.Findings) == 0 {
		return ""
	}
	return r.Findings[0].ID
}

// TestFleetOverMutualTLS runs the whole fleet with the certificates of
// `nodediag certs`: three agents over example hosts, a sweep, the fleet
// table, a node's report and the metrics; the top finding the collector
// shows for each node is the one `nodediag-agent check` gives for its host.
func TestFleetOverMutualTLS(t *testing.T) {
	f := newFleet(t, true)
	hosts := map[string]string{
		"worker-ok":   "healthy-worker",
		"worker-disk": "disk-full",
		"cp-swap":     "swap-enabled",
	}
	for node, host := range hosts {
		f.startAgent(node, host)
	}
	f.waitConnected(30*time.Second, "worker-ok", "worker-disk", "cp-swap")

	out, code := f.cli("sweep", "--timeout", "60s")
	if code != 1 {
		t.Fatalf("sweep over two broken nodes: exit %d, want 1\n%s", code, out)
	}
	for node := range hosts {
		if !strings.Contains(out, node) {
			t.Errorf("sweep output does not list %s:\n%s", node, out)
		}
	}
	if !strings.Contains(out, "3/3") {
		t.Errorf("sweep output does not say 3/3 answered:\n%s", out)
	}

	ns := f.nodes()
	for node, host := range hosts {
		want := f.checkTop(host)
		got, _ := ns[node]["top_id"].(string)
		if got != want {
			t.Errorf("%s (%s): collector's top finding %q, the agent's check says %q", node, host, got, want)
		}
		if rid, _ := ns[node]["request_id"].(string); rid == "" {
			t.Errorf("%s: the latest report does not answer the sweep (no requestId): %v", node, ns[node])
		}
	}

	out, code = f.cli("node", "worker-disk", "-o", "json")
	if code != 1 {
		t.Errorf("node worker-disk: exit %d, want 1 (an error finding)\n%s", code, out)
	}
	if !strings.Contains(out, "DiskFull") && !strings.Contains(out, f.checkTop("disk-full")) {
		t.Errorf("node worker-disk -o json lacks its finding:\n%.2000s", out)
	}
	if out, code := f.cli("node", "no-such-node"); code != 2 || !strings.Contains(out, "no-such-node") {
		t.Errorf("node no-such-node: exit %d, want 2 naming the node\n%s", code, out)
	}

	resp, err := http.Get("http://" + f.metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body := new(strings.Builder)
	_, _ = ioCopy(body, resp)
	for _, want := range []string{"nodediag_collector_", "process_resident_memory_bytes"} {
		if !strings.Contains(body.String(), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func ioCopy(b *strings.Builder, resp *http.Response) (int64, error) {
	defer resp.Body.Close()
	buf := make([]byte, 32<<10)
	var n int64
	for {
		k, err := resp.Body.Read(buf)
		b.Write(buf[:k])
		n += int64(k)
		if err != nil {
			return n, nil
		}
	}
}

// TestCollectorRefusals: each client the collector must refuse gets the
// right gRPC code, and the collector goes on serving its agent.
func TestCollectorRefusals(t *testing.T) {
	f := newFleet(t, true, "--max-message-bytes", "1048576")
	f.startAgent("worker-ok", "healthy-worker")
	f.waitConnected(30*time.Second, "worker-ok")

	// dial connects with role's certificate, or with none for role "".
	dial := func(t *testing.T, role string, opts ...grpc.DialOption) *grpc.ClientConn {
		var cfg *tls.Config
		if role == "" {
			pem, err := os.ReadFile(f.cert("ca.crt"))
			if err != nil {
				t.Fatal(err)
			}
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM(pem)
			cfg = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}
		} else {
			c, err := tlsconfig.NewClient(f.cert(role+".crt"), f.cert(role+".key"), f.cert("ca.crt"))
			if err != nil {
				t.Fatal(err)
			}
			cfg = c
		}
		cc, err := grpc.NewClient(f.addr, append([]grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(cfg))}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return cc
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hello := &nodediagv1.AgentMessage{Msg: &nodediagv1.AgentMessage_Hello{Hello: &nodediagv1.Hello{NodeName: "intruder", AgentStart: timestamppb.Now()}}}

	t.Run("no client certificate", func(t *testing.T) {
		_, err := nodediagv1.NewFleetClient(dial(t, "")).ListNodes(ctx, &nodediagv1.ListNodesRequest{})
		if status.Code(err) != codes.Unauthenticated {
			t.Errorf("ListNodes without a client certificate: %v, want Unauthenticated", err)
		}
	})
	t.Run("agent certificate on the fleet service", func(t *testing.T) {
		s, err := nodediagv1.NewFleetClient(dial(t, "agent")).Sweep(ctx, &nodediagv1.SweepRequest{})
		if err == nil {
			_, err = s.Recv()
		}
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("Sweep with an agent's certificate: %v, want PermissionDenied", err)
		}
		// The operator's command line says it in one line, exit 2.
		cmd := exec.Command(f.collector, "nodes", "--collector", f.addr, "--tls-cert", f.cert("agent.crt"), "--tls-key", f.cert("agent.key"), "--ca", f.cert("ca.crt"))
		out, _ := cmd.CombinedOutput()
		if cmd.ProcessState.ExitCode() != 2 || !strings.Contains(strings.ToLower(string(out)), "operator") {
			t.Errorf("nodediag nodes with an agent's certificate: exit %d, want 2 and a word on the operator's certificate\n%s", cmd.ProcessState.ExitCode(), out)
		}
	})
	t.Run("oversize message", func(t *testing.T) {
		s, err := nodediagv1.NewCollectorClient(dial(t, "agent")).Connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Send(hello); err != nil {
			t.Fatal(err)
		}
		if m, err := s.Recv(); err != nil || m.GetWelcome() == nil {
			t.Fatalf("Welcome: %v %v", m, err)
		}
		big := &nodediagv1.Report{RequestId: strings.Repeat("x", 2<<20)}
		_ = s.Send(&nodediagv1.AgentMessage{Msg: &nodediagv1.AgentMessage_Upload{Upload: &nodediagv1.Upload{Seq: 1, Report: big}}})
		_, err = s.Recv()
		if status.Code(err) != codes.ResourceExhausted {
			t.Errorf("a 2 MiB upload to a collector with --max-message-bytes 1 MiB: %v, want ResourceExhausted", err)
		}
	})
	t.Run("malformed message", func(t *testing.T) {
		cc := dial(t, "agent")
		s, err := cc.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, "/nodediag.v1.Collector/Connect", grpc.ForceCodecV2(rawCodec{}))
		if err != nil {
			t.Fatal(err)
		}
		// A field tag whose varint never ends: not protobuf.
		if err := s.SendMsg([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0xff}); err != nil {
			t.Fatal(err)
		}
		var reply []byte
		err = s.RecvMsg(&reply)
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("a malformed message: %v, want InvalidArgument", err)
		}
	})

	// The collector is unaffected: its agent still answers a sweep.
	out, code := f.cli("sweep", "--timeout", "30s")
	if code != 0 || !strings.Contains(out, "worker-ok") {
		t.Errorf("sweep after the refusals: exit %d, want 0 with worker-ok\n%s\ncollector:\n%s", code, out, f.serve.Output())
	}
}

// TestCollectorKilledMidSweep kills the collector with SIGKILL while a sweep
// is answered and 1,000 simulated agents upload, starts it again on the same
// address and data directory, and checks that every upload the collector
// acknowledged is in its store, that the agents reconnected by themselves
// and that a new sweep gets every answer.
func TestCollectorKilledMidSweep(t *testing.T) {
	f := newFleet(t, false)
	agents := []string{"worker-a", "worker-b", "worker-c"}
	for _, n := range agents {
		f.startAgent(n, "healthy-worker")
	}
	f.waitConnected(30*time.Second, agents...)

	report, err := loadgen.ExampleReport(hostRoot(t, "disk-full"))
	if err != nil {
		t.Fatal(err)
	}
	const simAgents = 1000
	type key struct {
		node  string
		start time.Time
		seq   uint64
	}
	var mu sync.Mutex
	acked := map[key]bool{}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sim, err := loadgen.Start(ctx, loadgen.Options{
		Addr: f.addr, Agents: simAgents, NamePrefix: "sim", PerConn: 100, Report: report,
		OnAck: func(node string, start time.Time, seq uint64) {
			mu.Lock()
			acked[key{node, start, seq}] = true
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Stop()
	// An agent that never answers a CheckRequest: the sweep cannot end
	// before the kill, however fast the others answer.
	silent := silentAgent(t, f.addr, "silent-node")
	defer silent()

	// The sweep runs as a process; the collector dies once answers flow.
	sweep := exec.Command(f.collector, append([]string{"sweep", "--timeout", "60s"}, f.clientFlags("operator")...)...)
	var sweepOut strings.Builder
	sweep.Stdout, sweep.Stderr = &sweepOut, &sweepOut
	if err := sweep.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill once the collector has acknowledged 100 of the sweep's answers:
	// the rest are in flight, being stored or waiting for their commit.
	deadline := time.Now().Add(30 * time.Second)
	for sim.Acked.Load() < simAgents+100 {
		if time.Now().After(deadline) {
			t.Fatalf("the sweep's answers were not acknowledged (%d acks)\n%s", sim.Acked.Load(), f.serve.Output())
		}
		time.Sleep(time.Millisecond)
	}
	f.serve.Kill()
	if err := sweep.Wait(); err == nil || sweep.ProcessState.ExitCode() != 2 {
		t.Errorf("sweep whose collector died: exit %d, want 2\n%s", sweep.ProcessState.ExitCode(), sweepOut.String())
	}
	inFlight := sim.Uploads.Load() - sim.Acked.Load()
	sim.Stop()
	mu.Lock()
	nAcked := len(acked)
	mu.Unlock()

	f.startCollector()
	f.waitConnected(60*time.Second, agents...)
	out, code := f.cli("sweep", "--timeout", "30s")
	if code != 0 || !strings.Contains(out, "3/3") {
		t.Errorf("sweep after the restart: exit %d, want 0 with 3/3 answered\n%s", code, out)
	}
	if code, err := f.serve.Terminate(15 * time.Second); err != nil || code != 0 {
		t.Errorf("collector on SIGTERM: exit %d, %v\n%s", code, err, f.serve.Output())
	}

	st, err := store.Open(f.dataDir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	lost := 0
	for k := range acked {
		recs, err := st.History(context.Background(), k.node, 1000)
		if err != nil {
			t.Fatalf("history of %s: %v", k.node, err)
		}
		found := false
		for _, r := range recs {
			if r.Seq == k.seq && r.AgentStart.Equal(k.start) {
				found = true
				break
			}
		}
		if !found {
			lost++
			if lost <= 5 {
				t.Errorf("acknowledged upload %s seq %d (agent start %v) is not in the store", k.node, k.seq, k.start)
			}
		}
	}
	t.Logf("%d uploads acknowledged before the kill (%d sent, not acknowledged); %d lost", nAcked, inFlight, lost)
}

// TestAgentUnreachableCollector points an agent at an address that accepts
// TCP connections and closes them at once: it must retry with backoff (not
// a busy loop), keep its spool within bounds, stay small, and stop cleanly
// on SIGTERM.
func TestAgentUnreachableCollector(t *testing.T) {
	agent := testenv.Build(t, agentPkg)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var attempts atomic.Int64
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			attempts.Add(1)
			c.Close()
		}
	}()
	spool := filepath.Join(t.TempDir(), "spool")
	d := testenv.Start(t, []string{agent, "run", "--collector", l.Addr().String(), "--insecure",
		"--node-name", "lonely", "--root", hostRoot(t, "disk-full"), "--exec", "none",
		"--interval", "300ms", "--spool-dir", spool}, nil, "", 5*time.Second, func() error { return nil })

	const watch = 8 * time.Second
	var peak int64
	for end := time.Now().Add(watch); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		u, err := testenv.Usage(d.Cmd.Process.Pid)
		if err != nil {
			t.Fatalf("agent exited: %v\n%s", err, d.Output())
		}
		peak = u.PeakRSS
		files, _ := filepath.Glob(filepath.Join(spool, "upload-*"))
		if len(files) > 4 {
			t.Fatalf("the spool holds %d uploads, more than its bound of 4", len(files))
		}
	}
	n := attempts.Load()
	t.Logf("%d connection attempts in %v; agent peak RSS %.1f MiB", n, watch, float64(peak)/(1<<20))
	// Backoff from 1 s doubling, each delay drawn from [b/2, b]: at most
	// 1+ceil(log2) ... about 6 attempts in 8 s; a busy loop makes thousands.
	if n < 2 || n > 10 {
		t.Errorf("%d connection attempts in %v: want a few (backoff), not %d", n, watch, n)
	}
	if peak > 128<<20 {
		t.Errorf("agent peak RSS %d MiB while the collector is unreachable", peak>>20)
	}
	files, _ := filepath.Glob(filepath.Join(spool, "upload-*"))
	if len(files) == 0 {
		t.Errorf("no upload spooled while the collector was unreachable")
	}
	start := time.Now()
	code, err := d.Terminate(5 * time.Second)
	if err != nil || code != 0 {
		t.Errorf("agent on SIGTERM: exit %d after %v, %v\n%s", code, time.Since(start), err, d.Output())
	}
}

// rawCodec sends bytes as they are: a client that does not speak protobuf.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*(v.(*[]byte)) = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }

// silentAgent says Hello as node and then ignores every message: a node
// that is connected and never answers a sweep. The returned function ends it.
func silentAgent(t *testing.T, addr, node string) func() {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := nodediagv1.NewCollectorClient(cc).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&nodediagv1.AgentMessage{Msg: &nodediagv1.AgentMessage_Hello{Hello: &nodediagv1.Hello{NodeName: node, AgentStart: timestamppb.Now()}}}); err != nil {
		t.Fatal(err)
	}
	if m, err := s.Recv(); err != nil || m.GetWelcome() == nil {
		t.Fatalf("the silent agent's Welcome: %v %v", m, err)
	}
	go func() {
		for {
			if _, err := s.Recv(); err != nil {
				return
			}
		}
	}()
	return func() { cancel(); cc.Close() }
}
