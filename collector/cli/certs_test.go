package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// certFiles are the files of `nodediag certs` with a shared agent
// certificate.
var certFiles = []string{"ca.crt", "ca.key", "server.crt", "server.key", "agent.crt", "agent.key", "operator.crt", "operator.key"}

func TestCertsWrites(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	r := run(t, "certs", "--dir", dir)
	if r.code() != ExitOK {
		t.Fatalf("%s", r)
	}
	for _, f := range certFiles {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		want := os.FileMode(0o644)
		if strings.HasSuffix(f, ".key") {
			want = 0o600
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", f, fi.Mode().Perm(), want)
		}
		if !strings.Contains(r.stdout, filepath.Join(dir, f)+" ") {
			t.Errorf("output does not list %s\n%s", f, r.stdout)
		}
	}
	p := func(f string) string { return filepath.Join(dir, f) }
	for _, want := range []string{
		"Wrote 8 files in " + dir,
		"(for localhost, 127.0.0.1; until ",
		"nodediag serve --tls-cert " + p("server.crt") + " --tls-key " + p("server.key") + " --client-ca " + p("ca.crt"),
		"nodediag-agent run --collector localhost:7443 --tls-cert " + p("agent.crt") + " --tls-key " + p("agent.key") + " --ca " + p("ca.crt"),
		"nodediag sweep --collector localhost:7443 --tls-cert " + p("operator.crt") + " --tls-key " + p("operator.key") + " --ca " + p("ca.crt"),
		"keep it offline",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q\n%s", want, r.stdout)
		}
	}
}

func TestCertsRefusesToOverwrite(t *testing.T) {
	dir := t.TempDir()
	if r := run(t, "certs", "--dir", dir); r.code() != ExitOK {
		t.Fatalf("%s", r)
	}
	before, err := os.ReadFile(filepath.Join(dir, "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	r := run(t, "certs", "--dir", dir)
	if r.code() != ExitUsage {
		t.Fatalf("want exit 2 over existing files\n%s", r)
	}
	oneLineErr(t, r.err)
	if !strings.Contains(r.err.Error(), filepath.Join(dir, "ca.key")) || !strings.Contains(r.err.Error(), "--force") {
		t.Errorf("error %q does not name the files and --force", r.err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "ca.key")); !bytes.Equal(before, after) {
		t.Error("the CA key was replaced without --force")
	}
	if r := run(t, "certs", "--dir", dir, "--force"); r.code() != ExitOK {
		t.Fatalf("--force: %s", r)
	}
	after, _ := os.ReadFile(filepath.Join(dir, "ca.key"))
	if bytes.Equal(before, after) {
		t.Error("--force did not replace the CA key")
	}
	if fi, _ := os.Stat(filepath.Join(dir, "ca.key")); fi.Mode().Perm() != 0o600 {
		t.Errorf("replaced key: mode %v", fi.Mode().Perm())
	}
}

func TestCertsPerNodeAgents(t *testing.T) {
	dir := t.TempDir()
	r := run(t, "certs", "--dir", dir, "--agent", "node-a", "--agent", "node-b", "--server-name", "nodediag.example.com,10.0.0.7", "--operator", "alice")
	if r.code() != ExitOK {
		t.Fatalf("%s", r)
	}
	for _, f := range []string{"agents/node-a.crt", "agents/node-a.key", "agents/node-b.crt", "agents/node-b.key"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "agent.crt")); err == nil {
		t.Error("a shared agent certificate was written with per-node ones")
	}
	for _, want := range []string{
		"nodediag-agent run --collector nodediag.example.com:7443 --node-name node-a --tls-cert " + filepath.Join(dir, "agents/node-a.crt"),
		"--node-name node-b",
		"(for nodediag.example.com, 10.0.0.7;",
		`operator "alice"`,
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q\n%s", want, r.stdout)
		}
	}
}

// certs --add gives a new node its certificate from the CA of the
// directory, and rewrites nothing else.
func TestCertsAddAgent(t *testing.T) {
	dir := t.TempDir()
	if r := run(t, "certs", "--dir", dir, "--agent", "node-a"); r.code() != ExitOK {
		t.Fatalf("%s", r)
	}
	ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	r := run(t, "certs", "--dir", dir, "--add", "--agent", "node-c")
	if r.code() != ExitOK || !strings.Contains(r.stdout, filepath.Join(dir, "agents/node-c.crt")) {
		t.Fatalf("certs --add: %s", r)
	}
	if fi, err := os.Stat(filepath.Join(dir, "agents/node-c.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("node-c.key: %v %v, want mode 0600", fi, err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "ca.crt")); string(after) != string(ca) {
		t.Error("certs --add replaced the CA")
	}
	for name, args := range map[string][]string{
		"again without --force": {"certs", "--dir", dir, "--add", "--agent", "node-c"},
		"no --agent":            {"certs", "--dir", dir, "--add"},
		"no CA in the dir":      {"certs", "--dir", t.TempDir(), "--add", "--agent", "node-d"},
	} {
		if r := run(t, args...); r.code() != ExitUsage {
			t.Errorf("%s: want exit 2\n%s", name, r)
		}
	}
}

func TestCertsUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no dir", nil, "--dir DIR is required"},
		{"bad agent name", []string{"--dir", "DIR", "--agent", "Node_A"}, `agent name "Node_A"`},
		{"no server name", []string{"--dir", "DIR", "--server-name", ""}, "--server-name"},
		{"CA shorter than certificates", []string{"--dir", "DIR", "--validity", "48h", "--ca-validity", "24h"}, "shorter"},
		{"cert-manager with dir", []string{"--cert-manager", "--dir", "DIR"}, "writes nothing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "pki")
			args := []string{"certs"}
			for _, a := range tc.args {
				args = append(args, strings.ReplaceAll(a, "DIR", dir))
			}
			r := run(t, args...)
			if r.code() != ExitUsage || !strings.Contains(errString(r.err), tc.want) {
				t.Fatalf("want exit 2 saying %q\n%s", tc.want, r)
			}
			if _, err := os.Stat(dir); err == nil {
				t.Error("a refused certs wrote its directory")
			}
		})
	}
}

func TestCertsCertManager(t *testing.T) {
	wd := t.TempDir()
	t.Chdir(wd)
	r := run(t, "certs", "--cert-manager")
	if r.code() != ExitOK {
		t.Fatalf("%s", r)
	}
	for _, want := range []string{"apiVersion: cert-manager.io/v1", "kind: Certificate", "nodediag:agents"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if ents, _ := os.ReadDir(wd); len(ents) != 0 {
		t.Errorf("--cert-manager wrote files: %v", ents)
	}
}

// TestCertsFilesServeAndSweep: the files `nodediag certs` writes, passed
// to `nodediag serve`, `nodediag sweep` and an agent as the output says,
// give a working mutual TLS fleet; a per-node certificate reports for its
// node.
func TestCertsFilesServeAndSweep(t *testing.T) {
	dir := t.TempDir()
	if r := run(t, "certs", "--dir", dir, "--agent", "node-a"); r.code() != ExitOK {
		t.Fatalf("%s", r)
	}
	p := pki{dir: dir}
	s := startServe(t, false, "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(),
		"--tls-cert", p.path("server.crt"), "--tls-key", p.path("server.key"), "--client-ca", p.path("ca.crt"))
	connectAgent(t, s.addr, p.agentCreds(t, "agents/node-a"), "node-a", answers)

	r := run(t, append([]string{"sweep", "--timeout", "30s"}, p.operatorFlags(s.addr)...)...)
	if r.code() != ExitOK || !strings.Contains(r.stdout, "sweep: 1/1 nodes answered") {
		t.Fatalf("sweep with the operator's files:\n%s", r)
	}
	r = run(t, append([]string{"nodes", "-o", "json"}, p.operatorFlags(s.addr)...)...)
	if r.code() != ExitOK || !strings.Contains(r.stdout, `"node_name": "node-a"`) {
		t.Fatalf("nodes with the operator's files:\n%s", r)
	}
	if err := s.stop(t); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(s.log(), "WARNING") {
		t.Errorf("a mutual TLS collector warned:\n%s", s.log())
	}
}
