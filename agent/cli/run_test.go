package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nodediag/nodediag/agent/stream/streamtest"
)

const exampleHost = "../testdata/hosts/healthy-worker/root"

// runOnce runs `nodediag-agent run --once` over the example host against
// addr, with its spool in a temporary directory.
func runOnce(t *testing.T, addr string, extra ...string) (stderr string, code int) {
	t.Helper()
	t.Setenv("NODE_NAME", "")
	args := append([]string{"run", "--once", "--insecure", "--collector", addr,
		"--root", exampleHost, "--exec", "none", "--offline",
		"--spool-dir", filepath.Join(t.TempDir(), "spool")}, extra...)
	var o, e bytes.Buffer
	code = Run(context.Background(), args, &o, &e)
	if o.Len() > 0 {
		t.Errorf("run wrote on stdout: %q", o.String())
	}
	return e.String(), code
}

// --once against the test collector: exit 0 once the report is
// acknowledged, the Hello naming the node as check does (the host's name
// and machine id under --root) and the report checking that host.
func TestRunOnceAcknowledged(t *testing.T) {
	col := streamtest.Start(t, "127.0.0.1:0", streamtest.Config{})
	stderr, code := runOnce(t, col.Addr)
	if code != ExitOK {
		t.Fatalf("exit %d, want 0:\n%s", code, stderr)
	}
	hellos := col.Hellos()
	if len(hellos) != 1 {
		t.Fatalf("%d Hellos, want 1", len(hellos))
	}
	if h := hellos[0]; h.NodeName != "capz-e2e-md-0-7xk2p" || h.MachineId != "3c1a2fa389d21bb347503742d7c022d4" || h.GetAgentStart() == nil {
		t.Errorf("Hello = %v", h)
	}
	ups := col.Uploads()
	if len(ups) != 1 {
		t.Fatalf("%d uploads, want 1", len(ups))
	}
	r := ups[0].Upload.GetReport()
	if r.GetHost().GetNodeName() != "capz-e2e-md-0-7xk2p" || r.GetEvidence() == nil || len(r.GetProbes()) == 0 {
		t.Errorf("report: node %q, evidence %v, %d probes", r.GetHost().GetNodeName(), r.GetEvidence() != nil, len(r.GetProbes()))
	}
	if !strings.Contains(stderr, "report acknowledged") {
		t.Errorf("no acknowledgement in the log:\n%s", stderr)
	}
}

// --once exits 1 when the report is not acknowledged in --ack-timeout, or
// when the collector refuses the agent.
func TestRunOnceNotDelivered(t *testing.T) {
	t.Run("no ack", func(t *testing.T) {
		col := streamtest.Start(t, "127.0.0.1:0", streamtest.Config{NoAck: true})
		stderr, code := runOnce(t, col.Addr, "--ack-timeout", "300ms")
		if code != ExitFindings {
			t.Fatalf("exit %d, want 1:\n%s", code, stderr)
		}
		if !strings.Contains(stderr, "not acknowledged") {
			t.Errorf("stderr does not say the report was not acknowledged:\n%s", stderr)
		}
	})
	t.Run("refused", func(t *testing.T) {
		col := streamtest.Start(t, "127.0.0.1:0", streamtest.Config{Refuse: status.Error(codes.Unauthenticated, "no client certificate")})
		stderr, code := runOnce(t, col.Addr)
		if code != ExitFindings {
			t.Fatalf("exit %d, want 1:\n%s", code, stderr)
		}
		if !strings.Contains(stderr, "Unauthenticated") {
			t.Errorf("stderr does not name the refusal:\n%s", stderr)
		}
	})
}

// Usage errors exit 2 with a message that says what to do.
func TestRunUsage(t *testing.T) {
	dir := t.TempDir()
	cert := filepath.Join(dir, "tls.crt")
	if err := os.WriteFile(cert, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no collector", []string{"--insecure"}, "--collector HOST:PORT is required"},
		{"no TLS choice", []string{"--collector", "127.0.0.1:1"}, "mutual TLS is the default"},
		{"insecure and TLS", []string{"--collector", "127.0.0.1:1", "--insecure", "--ca", cert}, "mutually exclusive"},
		{"partial TLS", []string{"--collector", "127.0.0.1:1", "--tls-cert", cert}, "needs all of --tls-cert, --tls-key and --ca"},
		{"bad files", []string{"--collector", "127.0.0.1:1", "--tls-cert", cert, "--tls-key", cert, "--ca", cert}, "run:"},
		{"bad interval", []string{"--collector", "127.0.0.1:1", "--insecure", "--interval", "0s"}, "--interval"},
		{"bad memory limit", []string{"--collector", "127.0.0.1:1", "--insecure", "--memory-limit", "lots"}, "--memory-limit"},
		{"no node name", []string{"--collector", "127.0.0.1:1", "--insecure", "--root", dir}, "set --node-name or NODE_NAME"},
		{"unknown probe", []string{"--collector", "127.0.0.1:1", "--insecure", "--root", exampleHost, "--probe", "nope"}, "unknown probe"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("NODE_NAME", "")
			stdout, stderr, code := run(t, append([]string{"run"}, tc.args...)...)
			if code != ExitUsage {
				t.Errorf("exit %d, want 2", code)
			}
			if !strings.Contains(stderr, tc.want) || stdout != "" {
				t.Errorf("stderr %q does not contain %q (stdout %q)", stderr, tc.want, stdout)
			}
		})
	}
}

func TestRunHelp(t *testing.T) {
	_, stderr, code := run(t, "run", "-h")
	if code != ExitOK {
		t.Fatalf("run -h: exit %d", code)
	}
	for _, want := range []string{"-collector", "-insecure", "-spool-dir", "-once", "-memory-limit", "one at a time"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("run -h does not mention %q", want)
		}
	}
}

func TestParseBytes(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"0", 0, false},
		{"1024", 1024, false},
		{"256MiB", 256 << 20, false},
		{"256Mi", 256 << 20, false},
		{"1.5GiB", 3 << 29, false},
		{"100MB", 100e6, false},
		{"64K", 64 << 10, false},
		{"", 0, true},
		{"MiB", 0, true},
		{"12 parsecs", 0, true},
		{"-1", 0, true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseBytes(tc.in)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("parseBytes(%q) = %d, %v; want %d, error %v", tc.in, got, err, tc.want, tc.wantErr)
			}
		})
	}
}
