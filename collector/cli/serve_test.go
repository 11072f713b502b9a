package cli

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodediag/nodediag/collector/store"
)

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestServe runs `nodediag serve --insecure` in process: it prints where it
// serves, stores an agent's report, answers operators, serves metrics and
// health, and on the end of its context (SIGTERM in main) returns nil with
// the store closed and the report kept.
func TestServe(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s := startServe(t, true, "--listen", "127.0.0.1:0", "--insecure", "--data-dir", dir,
		"--metrics-listen", "127.0.0.1:0", "--log-level", "debug", "--history", "3", "--max-age", "24h")
	if strings.Contains(s.log(), "WARNING") {
		t.Errorf("a loopback --insecure collector warned:\n%s", s.log())
	}
	connectAgent(t, s.addr, insecureCreds(), "node-bad", answers, errorFinding())

	r := run(t, "node", "node-bad", "--collector", s.addr, "--insecure")
	if r.code() != ExitFindings || !strings.Contains(r.stdout, "KubeletRemovedFlag") {
		t.Fatalf("node node-bad against serve:\n%s", r)
	}
	r = run(t, "sweep", "--collector", s.addr, "--insecure", "--timeout", "30s")
	if r.code() != ExitFindings || !strings.Contains(r.stdout, "sweep: 1/1 nodes answered") {
		t.Fatalf("sweep against serve:\n%s", r)
	}

	code, body := httpGet(t, "http://"+s.metrics+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	for _, want := range []string{"nodediag_collector_", "go_goroutines", "process_resident_memory_bytes", "promhttp_metric_handler_requests_total"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := httpGet(t, "http://"+s.metrics+path); code != http.StatusOK || body != "ok\n" {
			t.Errorf("%s: %d %q", path, code, body)
		}
	}

	if err := s.stop(t); err != nil {
		t.Fatalf("serve returned %v after its context ended, want nil\n%s", err, s.log())
	}
	if !strings.Contains(s.log(), "collector stopped") {
		t.Errorf("no log of the stop:\n%s", s.log())
	}
	// Closed: SQLite removes the write-ahead log when its last connection
	// closes (after copying it into the database).
	if _, err := os.Stat(filepath.Join(dir, store.FileName+"-wal")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the store's -wal file is still there after serve returned (%v): the store was not closed", err)
	}
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rec, err := st.Latest(context.Background(), "node-bad")
	if err != nil {
		t.Fatalf("the acknowledged report is not in the store: %v", err)
	}
	if rec.Report.GetFindings()[0].GetId() != "KubeletRemovedFlag" {
		t.Errorf("stored report = %v", rec.Report)
	}
}

// TestServeInsecureWarning: --insecure on every interface warns loudly.
func TestServeInsecureWarning(t *testing.T) {
	s := startServe(t, false, "--listen", "0.0.0.0:0", "--insecure", "--data-dir", t.TempDir())
	if err := s.stop(t); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s.log(), "nodediag: WARNING: serving WITHOUT TLS (--insecure) on ") {
		t.Errorf("no warning:\n%s", s.log())
	}
}

// TestServeJSONLog: --log-format json writes slog's JSON lines; the lines
// for scripts stay as they are.
func TestServeJSONLog(t *testing.T) {
	s := startServe(t, false, "--listen", "127.0.0.1:0", "--insecure", "--data-dir", t.TempDir(), "--log-format", "json")
	if err := s.stop(t); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s.log(), `"msg":"collector started"`) {
		t.Errorf("no JSON log line:\n%s", s.log())
	}
}

func TestServeUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"neither TLS nor insecure", nil, []string{"mutual TLS is the default", "--tls-cert, --tls-key and --client-ca", "nodediag certs", "--insecure"}},
		{"both", []string{"--insecure", "--tls-cert", "x.crt"}, []string{"exclude each other"}},
		{"TLS flags missing", []string{"--tls-cert", "x.crt"}, []string{"--tls-key and --client-ca missing"}},
		{"bad listen", []string{"--insecure", "--listen", "7443"}, []string{"--listen"}},
		{"bad log format", []string{"--insecure", "--log-format", "xml"}, []string{"--log-format"}},
		{"bad log level", []string{"--insecure", "--log-level", "loud"}, []string{"--log-level"}},
		{"bad durability", []string{"--insecure", "--durability", "maybe"}, []string{"--durability"}},
		{"zero history", []string{"--insecure", "--history", "0"}, []string{"--history"}},
		{"sweep timeout over max", []string{"--insecure", "--sweep-timeout", "2h", "--max-sweep-timeout", "1h"}, []string{"--sweep-timeout"}},
		{"argument", []string{"--insecure", "extra"}, []string{"unknown command"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			r := run(t, append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dir}, tc.args...)...)
			if r.code() != ExitUsage {
				t.Fatalf("want exit 2\n%s", r)
			}
			oneLineErr(t, r.err)
			for _, w := range tc.want {
				if !strings.Contains(r.err.Error(), w) {
					t.Errorf("error %q lacks %q", r.err, w)
				}
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a usage error created the data directory")
			}
		})
	}
}

// TestServeStartupErrors: what cannot be used is named on one line, exit 2.
func TestServeStartupErrors(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	notPEM := filepath.Join(t.TempDir(), "bad.crt")
	if err := os.WriteFile(notPEM, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := newPKI(t)
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"port taken", []string{"--insecure", "--listen", taken.Addr().String(), "--data-dir", t.TempDir()}, []string{"--listen " + taken.Addr().String(), "address already in use"}},
		{"metrics port taken", []string{"--insecure", "--listen", "127.0.0.1:0", "--metrics-listen", taken.Addr().String(), "--data-dir", t.TempDir()}, []string{"--metrics-listen", "address already in use"}},
		{"data dir is a file", []string{"--insecure", "--listen", "127.0.0.1:0", "--data-dir", file}, []string{"--data-dir " + file, "not a directory"}},
		{"bad certificate", []string{"--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--tls-cert", notPEM, "--tls-key", p.path("server.key"), "--client-ca", p.path("ca.crt")}, []string{"loading the collector's TLS files", notPEM}},
		{"missing CA", []string{"--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--tls-cert", p.path("server.crt"), "--tls-key", p.path("server.key"), "--client-ca", p.path("nosuch.crt")}, []string{"nosuch.crt"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, append([]string{"serve"}, tc.args...)...)
			if r.code() != ExitUsage {
				t.Fatalf("want exit 2\n%s", r)
			}
			oneLineErr(t, r.err)
			t.Logf("nodediag: %v", r.err)
			for _, w := range tc.want {
				if !strings.Contains(r.err.Error(), w) {
					t.Errorf("error %q lacks %q", r.err, w)
				}
			}
		})
	}
}
