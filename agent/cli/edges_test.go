package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/nodediag/nodediag/agent/host/hosttest"
	"github.com/nodediag/nodediag/agent/rules"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// The honest edges of a check: what it says when the findings cannot be a
// node's diagnosis.

func checkJSON(t *testing.T, args ...string) (*nodediagv1.Report, int) {
	t.Helper()
	out, stderr, code := run(t, append([]string{"check", "--output", "json"}, args...)...)
	var r nodediagv1.Report
	if err := protojson.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("exit %d, no report: %v\n%s\n%s", code, err, out, stderr)
	}
	return &r, code
}

// A Debian server with containerd (a Docker host) and an ordinary journal is
// not a Kubernetes node: it says so and exits 0, whatever its runtime's
// state.
func TestNotAKubernetesNode(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{
		"etc/os-release":             "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nID=debian\nVERSION_ID=\"12\"\n",
		"etc/hostname":               "web-1\n",
		"proc/swaps":                 "Filename\tType\tSize\tUsed\tPriority\n/swapfile file 1024 0 -2\n",
		"etc/containerd/config.toml": "disabled_plugins = [\"cri\"]\n",
		"usr/bin/containerd":         "#!/bin/sh\necho containerd github.com/containerd/containerd 1.6.20\n",
	})
	r, code := checkJSON(t, "--root", h.Root, "--exec", "none", "--offline")
	if r.GetVerdict() != rules.VerdictNotANode || code != ExitOK {
		t.Fatalf("verdict %q exit %d, want %q and 0: %v", r.GetVerdict(), code, rules.VerdictNotANode, r.GetFindings())
	}
	for _, f := range r.GetFindings() {
		if rules.SeverityAtLeast(f.GetSeverity(), rules.Warning) {
			t.Errorf("a finding above info on a machine that is no node: %v", f)
		}
	}
	text, _, _ := run(t, "check", "--root", h.Root, "--exec", "none", "--offline")
	if !strings.Contains(text, "SUMMARY not-a-kubernetes-node web-1: not a Kubernetes node") {
		t.Errorf("text output:\n%s", text)
	}
}

// The machine the tests run on, when it is no Kubernetes node (CI's is a
// Debian machine with containerd installed for other tests), as the issue
// found it: check --root / said ERROR RuntimeNotRunning and exited 1.
func TestThisMachineIsNoNode(t *testing.T) {
	for _, p := range []string{"/usr/bin/kubelet", "/usr/local/bin/kubelet", "/etc/kubernetes", "/var/lib/kubelet"} {
		if _, err := os.Stat(p); err == nil {
			t.Skipf("%s exists: this machine may be a node", p)
		}
	}
	r, code := checkJSON(t, "--root", "/", "--exec", "none", "--offline", "--skip", "runtime")
	if r.GetVerdict() != rules.VerdictNotANode || code != ExitOK {
		t.Fatalf("verdict %q exit %d, want %q and 0: %v", r.GetVerdict(), code, rules.VerdictNotANode, r.GetFindings())
	}
}

// An empty root has no evidence at all: it says so and exits 2.
func TestEmptyRootHasNoEvidence(t *testing.T) {
	r, code := checkJSON(t, "--root", t.TempDir(), "--exec", "none", "--offline")
	if r.GetVerdict() != rules.VerdictNoEvidence || code != ExitUsage {
		t.Fatalf("verdict %q exit %d, want %q and 2", r.GetVerdict(), code, rules.VerdictNoEvidence)
	}
}

// A check whose probes ran out of time is incomplete, never "ok".
func TestTimeoutIsIncomplete(t *testing.T) {
	s := scenarioNamed(t, "healthy-worker")
	r, code := checkJSON(t, "--root", filepath.Join(s.dir, "root"), "--timeout", "1ns", "--exec", "none")
	if r.GetVerdict() != rules.VerdictIncomplete || code != ExitUsage {
		t.Fatalf("verdict %q exit %d, want %q and 2: %v", r.GetVerdict(), code, rules.VerdictIncomplete, r.GetProbes())
	}
	text, _, _ := run(t, "check", "--root", filepath.Join(s.dir, "root"), "--timeout", "1ns", "--exec", "none")
	if strings.Contains(text, "SUMMARY ok") || !strings.Contains(text, "SUMMARY incomplete") {
		t.Errorf("text output:\n%s", text)
	}
}

// An agent without the rights to read the node's files says "permission
// denied: run as root" and exits 2, with no error made of what it could not
// read. The check runs in a child process as nobody.
func TestPermissionDenied(t *testing.T) {
	if os.Getenv("NODEDIAG_TEST_CHILD") == "permission" {
		code := Run(t.Context(), []string{"check", "--root", os.Getenv("NODEDIAG_TEST_ROOT"), "--output", "json", "--exec", "none", "--offline"}, os.Stdout, os.Stderr)
		os.Exit(code)
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the check as another user")
	}
	s := scenarioNamed(t, "kubelet-client-cert-expired")
	dir, err := os.MkdirTemp("", "nodediag-perm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	root := filepath.Join(dir, "root")
	if err := exec.Command("cp", "-a", filepath.Join(s.dir, "root"), root).Run(); err != nil {
		t.Fatal(err)
	}
	// Readable by all but what a node keeps to root.
	exec.Command("chmod", "-R", "a+rX", root).Run()
	for _, p := range []string{"var/lib/kubelet", "etc/kubernetes"} {
		os.Chmod(filepath.Join(root, p), 0o700)
	}
	// The test binary, where nobody may run it.
	self, _ := os.Executable()
	bin := filepath.Join(dir, "cli.test")
	if err := exec.Command("cp", self, bin).Run(); err != nil {
		t.Fatal(err)
	}
	os.Chmod(bin, 0o755)
	cmd := exec.Command(bin, "-test.run", "^TestPermissionDenied$")
	cmd.Env = append(os.Environ(), "NODEDIAG_TEST_CHILD=permission", "NODEDIAG_TEST_ROOT="+root)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.Output()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var r nodediagv1.Report
	if err := protojson.Unmarshal(out[:strings.LastIndex(string(out), "}")+1], &r); err != nil {
		t.Fatalf("exit %d: %v\n%s", code, err, out)
	}
	if r.GetVerdict() != rules.VerdictPermissionDenied || code != ExitUsage {
		t.Fatalf("verdict %q exit %d, want %q and 2", r.GetVerdict(), code, rules.VerdictPermissionDenied)
	}
	if !strings.Contains(r.GetVerdictReason(), "run the agent as root") {
		t.Errorf("reason %q", r.GetVerdictReason())
	}
	for _, f := range r.GetFindings() {
		if rules.SeverityAtLeast(f.GetSeverity(), rules.Warning) {
			t.Errorf("a cause made of unreadable files: %v", f)
		}
	}
}

func scenarioNamed(t *testing.T, name string) scenario {
	t.Helper()
	for _, s := range scenarios(t) {
		if s.name == name {
			return s
		}
	}
	t.Fatalf("no example host %s", name)
	return scenario{}
}

// TestSparseHugeLog: a 10 GiB cloud-init output log, all hole but its first
// and last lines (a disk filled by a runaway writer, or a sparse copy),
// gives the same findings as the log alone: its tail is read, not taken for
// binary; collect bundles that tail and says it was cut.
func TestSparseHugeLog(t *testing.T) {
	src := filepath.Join(scenarioDir, "join-token-expired", "root")
	root := filepath.Join(t.TempDir(), "root")
	if err := os.CopyFS(root, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(root, "var/log/cloud-init-output.log")
	orig, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(orig), "\n")
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	const hole = 10 << 30
	if _, err := f.WriteString(first + "\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(orig, hole); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if fi, _ := os.Stat(log); fi.Size() < hole {
		t.Fatalf("the log is %d bytes, want a 10 GiB sparse file", fi.Size())
	}

	want := agentIDs(t, "check", "--root", src, "--output", "json", "--now", "2024-05-01T00:10:00Z")
	got := agentIDs(t, "check", "--root", root, "--output", "json", "--now", "2024-05-01T00:10:00Z")
	if len(want) == 0 || strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("findings %v with the sparse log, want %v as with the log alone", got, want)
	}
	bundle := filepath.Join(t.TempDir(), "b.tar.gz")
	if _, stderr, code := run(t, "collect", "--root", root, "--bundle", bundle); code == ExitUsage {
		t.Fatalf("collect: %s", stderr)
	}
	out := gunzip(t, bundle)
	lines := strings.Split(strings.TrimSpace(string(orig)), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(out, last) {
		t.Errorf("the bundle lacks the log's last line %q", last)
	}
	if fi, _ := os.Stat(bundle); fi.Size() > 1<<20 {
		t.Errorf("the bundle is %d bytes: the hole was bundled", fi.Size())
	}
}

// agentIDs runs the agent and returns its JSON report's finding IDs.
func agentIDs(t *testing.T, args ...string) []string {
	t.Helper()
	out, stderr, code := run(t, args...)
	if code > ExitFindings {
		t.Fatalf("%v: exit %d: %s", args, code, stderr)
	}
	var r struct {
		Findings []struct{ ID string } `json:"findings"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	var ids []string
	for _, f := range r.Findings {
		ids = append(ids, f.ID)
	}
	return ids
}
