package cli

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/nodediag/nodediag/agent/host/hosttest"
	"github.com/nodediag/nodediag/agent/report"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// plantedSecrets are the secrets hack/genhosts planted in the
// planted-secrets example host: none may leave the agent, in any output.
var plantedSecrets = []string{
	"jlq4b8e3ns7kz2rd",                     // bootstrap token secret (kubeadm join --token, the join config)
	"9f86d081884c7d659a2feaa0c55ad015",     // kubeadm --certificate-key
	"Tr0ub4dor&3",                          // registry password
	"Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0", // SAS signature
	"planted0secret0key0material",          // private key block in a log
	"c2VjcmV0LXBheWxvYWQ",                  // kubeconfig bearer token
	"PRIVATE KEY-----\nM",                  // any PEM private key body
	// Shapes redaction once missed.
	"Hunter2curl",             // curl -u capzci:...
	"YWRtaW46SHVudGVyMmF1dGg", // docker config.json "auth"
	"Hunter2pass",             // REGISTRY_PASS=
	"Hunter2pwd",              // DB_PWD=
	"horse battery",           // password: "correct horse battery staple"
	"Hunter2/slash",           // https://deploy:Hunter2/slash@...
	"slash@git",               // the part after the "/"
	"Hunter2escaped",          // {\"password\":\"...\"}
	"_5xf60f.jlq4",            // join-token_5xf60f.<secret>
	"planted0pgp0secret",      // PGP key body
	"Zm9vPGPtail",             // the short last line of the PGP body
}

// plantedHere reports whether a secret of plantedSecrets is really in the
// host (the PEM marker is a pattern, not a planted value).
func plantedHere(s string) bool { return !strings.HasPrefix(s, "PRIVATE KEY") }

func TestPlantedSecretsNeverLeave(t *testing.T) {
	root := filepath.Join(scenarioDir, "planted-secrets", "root")
	// The secrets are really there: the test would prove nothing otherwise.
	var all bytes.Buffer
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			all.Write(b)
		}
		return nil
	})
	for _, s := range plantedSecrets {
		if plantedHere(s) && !strings.Contains(all.String(), s) {
			t.Fatalf("the planted-secrets host lacks %q: regenerate it (make hosts)", s)
		}
	}

	outputs := map[string]string{}
	for _, o := range []string{"text", "json", "compact"} {
		out, stderr, code := run(t, "check", "--root", root, "--output", o)
		if code == ExitUsage {
			t.Fatalf("--output %s: %s", o, stderr)
		}
		outputs[o] = out + stderr
	}
	// The full evidence, as a bundle or a stream would carry it.
	r, err := checkOnce(context.Background(), checkOptions{root: root, output: "json", exec: "local", timeout: timeoutForTests})
	if err != nil {
		t.Fatal(err)
	}
	b, err := protojson.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	outputs["evidence"] = string(b)
	// The bundle of collect: the report and the raw files, decompressed.
	bundlePath := filepath.Join(t.TempDir(), "b.tar.gz")
	if _, stderr, code := run(t, "collect", "--root", root, "--bundle", bundlePath); code == ExitUsage {
		t.Fatalf("collect: %s", stderr)
	}
	outputs["bundle"] = gunzip(t, bundlePath)
	if !strings.Contains(outputs["bundle"], "files/var/log/cloud-init-output.log") {
		t.Errorf("the bundle holds no raw file: it would prove nothing")
	}
	// The lines were kept as evidence (redacted): a test of lines the agent
	// never read would prove nothing.
	for _, kept := range []string{"capzci:[REDACTED]", `\"auth\":\"[REDACTED]\"`, "REGISTRY_PASS=[REDACTED]", "deploy:[REDACTED]@git.example.com"} {
		if !strings.Contains(outputs["evidence"], kept) {
			t.Errorf("the evidence lacks %q: was the line read?", kept)
		}
	}
	for name, out := range outputs {
		for _, s := range plantedSecrets {
			if strings.Contains(out, s) {
				t.Errorf("%s output leaks %q", name, s)
			}
		}
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	root := hosttest.Tree(t, map[string]string{"etc/hostname": "n1\n"}).Root
	for _, args := range [][]string{
		nil,
		{"nosuch"},
		{"check", "--output", "yaml", "--root", root},
		{"check", "--exec", "ssh", "--root", root},
		{"check", "--since", "yesterday", "--root", root},
		{"check", "--now", "soon", "--root", root},
		{"check", "--probe", "nosuch", "--root", root},
		{"check", "--root", filepath.Join(root, "missing")},
		{"check", "--root", root, "extra"},
		{"check", "--rules-dir", filepath.Join(root, "etc"), "--root", root},
		{"check", "--bogus-flag"},
		{"check", "--timeout", "0s", "--root", root},
		// A bundle analyze would read only in part is not made.
		{"collect", "--root", root, "--bundle", filepath.Join(t.TempDir(), "b.tar.gz"), "--max-bytes", "200000000"},
	} {
		if _, _, code := run(t, args...); code != ExitUsage {
			t.Errorf("%q: exit %d, want %d", args, code, ExitUsage)
		}
	}
	if out, _, code := run(t, "version"); code != ExitOK || !strings.HasPrefix(out, "nodediag-agent ") {
		t.Errorf("version: exit %d, %q", code, out)
	}
}

func TestProbeSelection(t *testing.T) {
	root := filepath.Join(scenarioDir, "swap-enabled", "root")
	js, stderr, code := run(t, "check", "--root", root, "--output", "json", "--probe", "swap,os", "--now", "2024-05-01T00:05:00Z")
	if code != ExitFindings {
		t.Fatalf("exit %d (%s), want 1: swap alone proves SwapEnabled", code, stderr)
	}
	var r nodediagv1.Report
	if err := protojson.Unmarshal([]byte(js), &r); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range r.Probes {
		names = append(names, p.Name)
	}
	if strings.Join(names, ",") != "os,swap" {
		t.Errorf("probes run: %v, want os and swap only", names)
	}
	if len(r.Findings) == 0 || r.Findings[0].Id != "SwapEnabled" {
		t.Errorf("findings %v, want SwapEnabled first", r.Findings)
	}
	_, _, code = run(t, "check", "--root", root, "--skip", "swap,logs", "--now", "2024-05-01T00:05:00Z")
	if code != ExitFindings {
		t.Errorf("with swap skipped the bootstrap failure still shows: exit %d, want 1", code)
	}
}

// TestExecNone: with --exec none no binary of the root runs, and what the
// versions could not tell is reported as a gap, not as a healthy node.
//
// By default (--exec auto) a root that is not the live system is a copy:
// its canary binary never runs, under check or collect. --exec local runs
// it, and says on stderr that a copy's code ran.
func TestExecNone(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{
		"usr/bin/kubelet":       "#!/bin/sh\necho 'Kubernetes v1.35.0'\n",
		"etc/sysconfig/kubelet": "KUBELET_EXTRA_ARGS=--pod-infra-container-image=x\n",
		"etc/hostname":          "copied-node\n",
	})
	marker := filepath.Join(t.TempDir(), "ran")
	for _, b := range []string{"usr/bin/kubelet", "usr/bin/containerd", "usr/bin/kubeadm", "usr/bin/runc"} {
		os.MkdirAll(filepath.Dir(filepath.Join(h.Root, b)), 0o755)
		if err := os.WriteFile(filepath.Join(h.Root, b), []byte("#!/bin/sh\ntouch "+marker+"\necho 'Kubernetes v1.35.0'\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ran := func() bool { _, err := os.Stat(marker); return err == nil }
	for _, args := range [][]string{
		{"check", "--root", h.Root, "--exec", "none"},
		{"check", "--root", h.Root},
		{"collect", "--root", h.Root, "--bundle", filepath.Join(t.TempDir(), "b.tar.gz")},
	} {
		out, stderr, code := run(t, args...)
		if code == ExitUsage {
			t.Fatalf("%v: %s", args, stderr)
		}
		if ran() {
			t.Fatalf("%v ran a binary of the copied root", args)
		}
		if strings.Contains(stderr, "warning") {
			t.Errorf("%v warned: %s", args, stderr)
		}
		if args[0] == "check" && strings.Contains(out, "KubeletRemovedFlag") {
			t.Errorf("%v: without the kubelet's version, the flag cannot be judged removed:\n%s", args, out)
		}
	}
	// The same tree, its binaries run on purpose, does judge it, and the
	// operator is told a copy's code ran.
	out, stderr, _ := run(t, "check", "--root", h.Root, "--exec", "local")
	if !ran() {
		t.Fatal("--exec local did not run the kubelet")
	}
	if !strings.Contains(out, "KubeletRemovedFlag") {
		t.Errorf("with the kubelet's version the removed flag is found:\n%s", out)
	}
	if !strings.Contains(stderr, "warning: --exec local runs the binaries of "+h.Root) {
		t.Errorf("--exec local on a copy: stderr %q, want the warning", stderr)
	}
}

// TestUnreadableIsReportedNotFatal: a file the agent cannot read (here a
// FIFO where a log should be) is a gap in the report; the rest is still read.
func TestUnreadableIsReportedNotFatal(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{
		"proc/swaps":    "Filename\tType\tSize\tUsed\tPriority\n/swapfile file 1024 0 -2\n",
		"var/log/x.log": "",
		// A kubelet's unit: this is a node (a machine without any is
		// judged not to be one, and its swap is no finding).
		"usr/lib/systemd/system/kubelet.service": "[Service]\nExecStart=/usr/bin/kubelet\n",
	})
	if err := mkfifo(filepath.Join(h.Root, "var/log/syslog")); err != nil {
		t.Skip(err)
	}
	out, stderr, code := run(t, "check", "--root", h.Root)
	if code != ExitFindings {
		t.Fatalf("exit %d (%s), want 1", code, stderr)
	}
	if !strings.Contains(out, "SwapEnabled") || !strings.Contains(out, "/var/log/syslog") {
		t.Errorf("want the swap finding and the unreadable syslog as a gap:\n%s", out)
	}
}

func TestCompactFitsRunCommand(t *testing.T) {
	for _, s := range scenarios(t) {
		out, _, _ := run(t, append(s.args, "--output", "compact")...)
		if len(out) > report.MaxCompact {
			t.Errorf("%s: compact output is %d bytes", s.name, len(out))
		}
	}
}

// gunzip is a gzip file's content (a bundle's tar, headers and members).
func gunzip(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
