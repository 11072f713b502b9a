package cli

// Real components for the CLI's tests: a collector (collector/server over a
// real SQLite store in a temporary directory) on a loopback listener, with
// mutual TLS from collector/certs when asked; agents simulated by real gRPC
// streams of the Collector service; the cobra commands run in process.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nodediag/nodediag/collector/certs"
	"github.com/nodediag/nodediag/collector/server"
	"github.com/nodediag/nodediag/collector/store"
	"github.com/nodediag/nodediag/internal/tlsconfig"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// waitLimit bounds every wait of these tests: reaching it is a failure
// (something hangs), never an expected outcome.
const waitLimit = 30 * time.Second

// pki is a directory of certificates written by collector/certs.
type pki struct{ dir string }

func (p pki) path(name string) string { return filepath.Join(p.dir, name) }

// newPKI issues and writes a CA, a server certificate for localhost and
// 127.0.0.1, an operator's certificate and the agents' (one per node when
// agents are named, else the shared agent.crt).
func newPKI(t *testing.T, agents ...string) pki {
	t.Helper()
	set, err := certs.Issue(certs.Options{
		ServerNames: []string{"localhost", "127.0.0.1"},
		Agents:      agents,
		Validity:    time.Hour,
		CAValidity:  time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	p := pki{dir: t.TempDir()}
	if _, err := certs.Write(p.dir, set, false); err != nil {
		t.Fatal(err)
	}
	return p
}

// operatorFlags are the client flags of the operator's certificate.
func (p pki) operatorFlags(addr string) []string {
	return []string{"--collector", addr, "--tls-cert", p.path("operator.crt"), "--tls-key", p.path("operator.key"), "--ca", p.path("ca.crt")}
}

// agentCreds are the transport credentials of an agent with certificate
// name (e.g. "agent" or "agents/node-a").
func (p pki) agentCreds(t *testing.T, name string) credentials.TransportCredentials {
	t.Helper()
	cfg, err := tlsconfig.NewClient(p.path(name+".crt"), p.path(name+".key"), p.path("ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	return credentials.NewTLS(cfg)
}

// collector is a running server.Server on 127.0.0.1.
type collector struct {
	addr  string
	dir   string
	creds credentials.TransportCredentials // of agents, plaintext only
}

// startCollector starts a collector, over mutual TLS with p's files when
// p is not nil, plaintext otherwise. It is stopped, and its store closed,
// when the test ends.
func startCollector(t *testing.T, p *pki) *collector {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(dir, store.Options{Durability: store.ProcessCrash})
	if err != nil {
		t.Fatal(err)
	}
	o := server.Options{
		Store:  st,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	c := &collector{dir: dir, creds: insecure.NewCredentials()}
	if p != nil {
		if o.TLS, err = tlsconfig.NewServer(p.path("server.crt"), p.path("server.key"), p.path("ca.crt")); err != nil {
			t.Fatal(err)
		}
		c.creds = nil // the test picks the agent's certificate
	}
	srv, err := server.New(o)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.addr = lis.Addr().String()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
		if err := st.Close(); err != nil {
			t.Errorf("closing the store: %v", err)
		}
	})
	return c
}

// insecureFlags are the client flags of a plaintext collector.
func (c *collector) insecureFlags() []string { return []string{"--collector", c.addr, "--insecure"} }

// An agent's answers to CheckRequests.
const (
	answers = true
	silent  = false
)

// agent is a simulated agent: a real Collector stream that says Hello,
// uploads a report at connect and, when it answers, one per CheckRequest
// (with the request's ID).
type agent struct {
	node     string
	findings []*nodediagv1.Finding
	answer   bool
	stream   grpc.BidiStreamingClient[nodediagv1.AgentMessage, nodediagv1.CollectorMessage]
	seq      uint64
	acks     chan uint64
}

func (a *agent) upload(requestID, reason string) error {
	a.seq++
	return a.stream.Send(&nodediagv1.AgentMessage{Msg: &nodediagv1.AgentMessage_Upload{Upload: &nodediagv1.Upload{
		Seq:    a.seq,
		Reason: reason,
		Report: &nodediagv1.Report{
			Agent:     &nodediagv1.AgentInfo{Version: "v0.0.0-test"},
			Host:      &nodediagv1.HostInfo{Hostname: a.node, NodeName: a.node, MachineId: "machine-" + a.node},
			Findings:  a.findings,
			RequestId: requestID,
		},
	}}})
}

// connectAgent connects an agent for node to the collector at addr and
// waits until its first upload is acknowledged (then it is registered:
// a sweep asks it). It disconnects when the test ends.
func connectAgent(t *testing.T, addr string, creds credentials.TransportCredentials, node string, answer bool, findings ...*nodediagv1.Finding) *agent {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := nodediagv1.NewCollectorClient(cc).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a := &agent{node: node, findings: findings, answer: answer, stream: stream, acks: make(chan uint64, 64)}
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-done
		cc.Close()
	})
	err = stream.Send(&nodediagv1.AgentMessage{Msg: &nodediagv1.AgentMessage_Hello{Hello: &nodediagv1.Hello{
		NodeName:   node,
		Agent:      &nodediagv1.AgentInfo{Version: "v0.0.0-test"},
		MachineId:  "machine-" + node,
		ProviderId: "azure:///vm/" + node,
		AgentStart: timestamppb.Now(),
	}}})
	if err != nil {
		close(done)
		t.Fatal(err)
	}
	m, err := stream.Recv()
	if err != nil {
		close(done)
		t.Fatalf("agent %s: no Welcome: %v", node, err)
	}
	if m.GetWelcome() == nil {
		close(done)
		t.Fatalf("agent %s: first message %v, want a Welcome", node, m)
	}
	if err := a.upload("", "connect"); err != nil {
		close(done)
		t.Fatal(err)
	}
	go func() {
		defer close(done)
		for {
			m, err := stream.Recv()
			if err != nil {
				return
			}
			switch {
			case m.GetAck() != nil:
				select {
				case a.acks <- m.GetAck().GetSeq():
				default:
				}
			case m.GetCheck() != nil && a.answer:
				if err := a.upload(m.GetCheck().GetRequestId(), "request"); err != nil {
					return
				}
			}
		}
	}()
	select {
	case seq := <-a.acks:
		if seq != 1 {
			t.Fatalf("agent %s: first ack for seq %d, want 1", node, seq)
		}
	case <-time.After(waitLimit):
		t.Fatalf("agent %s: no Ack of its first upload", node)
	}
	return a
}

// Findings of simulated reports.
func errorFinding() *nodediagv1.Finding {
	return &nodediagv1.Finding{
		Id:          "KubeletRemovedFlag",
		Category:    "kubelet.flag-removed",
		Severity:    "error",
		Title:       "kubelet v1.35.0 rejects --pod-infra-container-image set in /etc/sysconfig/kubelet",
		Confidence:  "high",
		Evidence:    []*nodediagv1.Quote{{Source: "/etc/sysconfig/kubelet", Line: 1, Excerpt: "KUBELET_EXTRA_ARGS=--pod-infra-container-image=registry.k8s.io/pause:3.9"}},
		Remediation: "Remove --pod-infra-container-image from KUBELET_EXTRA_ARGS in /etc/sysconfig/kubelet.",
	}
}

func warningFinding() *nodediagv1.Finding {
	return &nodediagv1.Finding{
		Id:       "SwapEnabled",
		Category: "node.swap",
		Severity: "warning",
		Title:    "swap is on (/swap.img)",
		Evidence: []*nodediagv1.Quote{{Source: "/proc/swaps", Line: 2, Excerpt: "/swap.img file 4194300 0 -2"}},
	}
}

// result is what a command run in process printed and returned.
type result struct {
	stdout, stderr string
	err            error
}

func (r result) code() int { return ExitCode(r.err) }

func (r result) String() string {
	return fmt.Sprintf("exit %d, err: %v\nstdout:\n%sstderr:\n%s", r.code(), r.err, r.stdout, r.stderr)
}

// run executes `nodediag ARGS...` in process.
func run(t testing.TB, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLimit)
	defer cancel()
	cmd := NewRootCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	return result{stdout: out.String(), stderr: errOut.String(), err: err}
}

// serveRun is `nodediag serve` running in process.
type serveRun struct {
	addr, metrics string
	cancel        context.CancelFunc
	done          chan error
	mu            sync.Mutex
	stderr        strings.Builder
}

func (s *serveRun) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr.String()
}

// stop cancels the command's context (as SIGTERM does through main) and
// returns what the command returned.
func (s *serveRun) stop(t testing.TB) error {
	t.Helper()
	s.cancel()
	select {
	case err := <-s.done:
		s.done <- err // for the cleanup
		return err
	case <-time.After(waitLimit):
		t.Fatalf("serve did not return after its context ended\n%s", s.log())
		return nil
	}
}

// startServe runs `nodediag serve ARGS...` in a goroutine and waits for
// its "nodediag: serving on" line (and "metrics on" when wantMetrics).
// It fails the test when the command returns first.
func startServe(t testing.TB, wantMetrics bool, args ...string) *serveRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &serveRun{cancel: cancel, done: make(chan error, 1)}
	pr, pw := io.Pipe()
	addrs := make(chan [2]string, 1)
	go func() {
		var a [2]string
		sent := false
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.stderr.WriteString(line + "\n")
			s.mu.Unlock()
			if v, ok := strings.CutPrefix(line, "nodediag: serving on "); ok {
				a[0] = v
			}
			if v, ok := strings.CutPrefix(line, "nodediag: metrics on "); ok {
				a[1] = v
			}
			if !sent && a[0] != "" && (!wantMetrics || a[1] != "") {
				addrs <- a
				sent = true
			}
		}
		io.Copy(io.Discard, pr)
	}()
	go func() {
		cmd := NewRootCommand()
		cmd.SetOut(io.Discard)
		cmd.SetErr(pw)
		cmd.SetArgs(append([]string{"serve"}, args...))
		err := cmd.ExecuteContext(ctx)
		pw.Close()
		s.done <- err
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.done:
		case <-time.After(waitLimit):
			t.Errorf("serve did not return after its context ended")
		}
	})
	select {
	case a := <-addrs:
		s.addr, s.metrics = a[0], a[1]
	case err := <-s.done:
		s.done <- err
		t.Fatalf("serve returned before serving: %v\n%s", err, s.log())
	case <-time.After(waitLimit):
		t.Fatalf("no \"nodediag: serving on\" line\n%s", s.log())
	}
	return s
}

// oneLineErr fails the test unless err is one line.
func oneLineErr(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("want an error")
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error is not one line: %q", err)
	}
}

func insecureCreds() credentials.TransportCredentials { return insecure.NewCredentials() }
