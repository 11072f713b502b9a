package artifacts

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/nodediag/nodediag/agent/journal/journaltest"
	"github.com/nodediag/nodediag/agent/report"
	"github.com/nodediag/nodediag/agent/rules"
	"github.com/nodediag/nodediag/collector/capi"
	"github.com/nodediag/nodediag/collector/incident"
	"github.com/nodediag/nodediag/collector/reports"
	"github.com/nodediag/nodediag/internal/artifacttree"
	"github.com/nodediag/nodediag/internal/testenv"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// tree is the example artifact tree (go run ./hack/genartifacts).
const tree = "testdata/capz-e2e"

const (
	cpMachine     = "capz-e2e-control-plane-t8x5m"
	workerMachine = "capz-e2e-md-0-6b8f9-x7k2l"
	workerVM      = "capz-e2e-md-0-p9s2d"
)

func engine(t testing.TB) *rules.Engine {
	t.Helper()
	e, err := rules.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestGeneratedTreeIsCurrent: the committed tree is what the generator
// writes with the real systemd-journal-remote and journalctl (a golden:
// regenerate with go run ./hack/genartifacts and review the diff).
func TestGeneratedTreeIsCurrent(t *testing.T) {
	_, err := exec.LookPath("journalctl")
	testenv.Require(t, err == nil, "journalctl (Debian package systemd): %v", err)
	_, err = os.Stat(journaltest.JournalRemote)
	testenv.Require(t, err == nil, "%s (Debian package systemd-journal-remote): %v", journaltest.JournalRemote, err)
	out := filepath.Join(t.TempDir(), "tree")
	if err := artifacttree.Write("../..", out); err != nil {
		t.Fatal(err)
	}
	files := func(root string) map[string]string {
		m := map[string]string{}
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				b, _ := os.ReadFile(p)
				rel, _ := filepath.Rel(root, p)
				m[rel] = string(b)
			}
			return nil
		})
		return m
	}
	if diff := cmp.Diff(files(tree), files(out)); diff != "" {
		t.Errorf("testdata/capz-e2e is stale: run go run ./hack/genartifacts (-committed +generated):\n%s", diff)
	}
}

// TestAnalyzeTree: the tree gives the incident report of the cluster its
// resource dumps hold, joined with the reports of its machine directories,
// and the build log's first failure.
func TestAnalyzeTree(t *testing.T) {
	res, err := Analyze(context.Background(), tree, engine(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Problems) != 0 {
		t.Errorf("problems in a good tree: %v", res.Problems)
	}
	var names []string
	for _, m := range res.Machines {
		names = append(names, m.Machine.Cluster+"/"+m.Machine.Name)
		if m.Err != nil {
			t.Errorf("%s: %v", m.Machine.Name, m.Err)
		}
	}
	if diff := cmp.Diff([]string{"capz-e2e/" + cpMachine, "capz-e2e/" + workerMachine}, names); diff != "" {
		t.Fatalf("machines (-want +got):\n%s", diff)
	}
	worker := res.Machines[1].Checked
	if got := top(worker.Report); got != "JoinTokenInvalid" {
		t.Errorf("worker's top finding %q, want JoinTokenInvalid", got)
	}
	if worker.Report.GetHost().GetNodeName() != workerVM {
		t.Errorf("worker's node name %q, want the journal's host name %s", worker.Report.GetHost().GetNodeName(), workerVM)
	}
	// The journal came from the text exports: the kubelet's restarts as
	// systemd logged them.
	var kubelet *nodediagv1.UnitState
	for _, pe := range worker.Report.GetEvidence().GetProbes() {
		for _, u := range pe.GetJournal().GetUnits() {
			if u.GetName() == "kubelet.service" {
				kubelet = u
			}
		}
	}
	if kubelet.GetNRestarts() != 8 || kubelet.GetResult() != "exit-code" {
		t.Errorf("kubelet state from the text journal: %v, want 8 restarts, exit-code", kubelet)
	}
	if report.ExitCode(res.Machines[0].Checked.Report) != 0 {
		t.Errorf("the healthy control plane has an error: %s", top(res.Machines[0].Checked.Report))
	}

	if len(res.Clusters) != 1 || res.Clusters[0].Err != nil {
		t.Fatalf("clusters %+v", res.Clusters)
	}
	inc := res.Clusters[0].Incident
	if inc.RootCause == nil || inc.RootCause.Finding != "MachineNotRunning/Machine/"+workerMachine || !strings.Contains(inc.RootCause.Node, "JoinTokenInvalid") && !strings.Contains(inc.Title, "bootstrap token") {
		t.Errorf("root cause %+v (title %q)", inc.RootCause, inc.Title)
	}
	for _, row := range inc.Machines {
		if row.MatchedBy != incident.MatchMachineDir {
			t.Errorf("Machine %s matched by %q, want %s", row.Machine, row.MatchedBy, incident.MatchMachineDir)
		}
	}

	b := res.Build
	if b == nil || b.Kind != "timeout" || b.Line != 31 || !strings.Contains(b.Text, "Timed out after 1200.001s") {
		t.Fatalf("build failure %+v", b)
	}
	if !strings.Contains(b.Location, "machinedeployment_helpers.go:131") || !strings.Contains(b.Spec, "1 worker nodes") {
		t.Errorf("location %q spec %q", b.Location, b.Spec)
	}
}

// TestSameDiagnosisAsLive: the worker's artifacts give the root cause the
// agent gives on the node itself (the example host the tree was made
// from), and the tree's incident is the one the collector writes from the
// same Cluster API objects and the node's live report.
func TestSameDiagnosisAsLive(t *testing.T) {
	ctx := context.Background()
	e := engine(t)
	res, err := Analyze(ctx, tree, e)
	if err != nil {
		t.Fatal(err)
	}
	var live []incident.NodeReport
	for _, m := range artifacttree.Machines {
		l, err := reports.Read(ctx, filepath.Join("../../agent/testdata/hosts", m.Host, "root"), reports.Options{})
		if err != nil {
			t.Fatal(err)
		}
		l.Report.Host.NodeName = m.VM
		live = append(live, incident.NodeReport{Report: l.Report})
		for _, a := range res.Machines {
			if a.Machine.Name == m.Machine && top(a.Checked.Report) != top(l.Report) {
				t.Errorf("%s: top finding from the artifacts %q, live %q", m.Machine, top(a.Checked.Report), top(l.Report))
			}
		}
	}
	f, err := os.Open("../../hack/democluster/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	objs, err := capi.DecodeObjects(f)
	if err != nil {
		t.Fatal(err)
	}
	c, err := capi.NewObjects(objs).Cluster(ctx, "demo", "capz-e2e")
	if err != nil {
		t.Fatal(err)
	}
	want, err := incident.Diagnose(c, live, incident.Options{Now: res.Clusters[0].Incident.GeneratedAt, Engine: e})
	if err != nil {
		t.Fatal(err)
	}
	got := res.Clusters[0].Incident
	if got.Title != want.Title || got.RootCause.Finding != want.RootCause.Finding {
		t.Errorf("from the artifacts: %q (%s)\nlive:               %q (%s)", got.Title, got.RootCause.Finding, want.Title, want.RootCause.Finding)
	}
}

// copyTree copies the example tree into a temporary directory.
func copyTree(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "artifacts")
	err := filepath.WalkDir(tree, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(tree, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestBadTrees: missing files, binary garbage in a log, a symlink out of
// the tree, a broken resource dump: each is said, and the rest is analysed.
func TestBadTrees(t *testing.T) {
	ctx := context.Background()
	e := engine(t)
	machineDir := func(root, name string) string { return filepath.Join(root, "clusters/capz-e2e/machines", name) }

	t.Run("missing files", func(t *testing.T) {
		root := copyTree(t)
		for _, n := range []string{"kubelet.log", "journal.log", "containerd.log", "kern.log", "kubelet-version.txt"} {
			os.Remove(filepath.Join(machineDir(root, workerMachine), n))
		}
		os.Remove(filepath.Join(root, "build-log.txt"))
		res, err := Analyze(ctx, root, e)
		if err != nil {
			t.Fatal(err)
		}
		if got := top(res.Machines[1].Checked.Report); got != "JoinTokenInvalid" {
			t.Errorf("worker without its journal: top %q, want JoinTokenInvalid from cloud-init-output.log", got)
		}
		if res.Build != nil || res.BuildErr != nil {
			t.Errorf("no build log: %+v %v", res.Build, res.BuildErr)
		}
		if len(res.Clusters) != 1 || res.Clusters[0].Incident == nil {
			t.Errorf("the incident needs no journal: %+v", res.Clusters)
		}
	})

	t.Run("binary garbage in a log", func(t *testing.T) {
		root := copyTree(t)
		p := filepath.Join(machineDir(root, workerMachine), "kubelet.log")
		b, _ := os.ReadFile(p)
		lines := bytes.SplitAfter(b, []byte("\n"))
		var out []byte
		for i, l := range lines {
			out = append(out, l...)
			if i == 3 {
				out = append(out, []byte("\x00\x00\xff\xfe\x01garbage from a torn copy\x00\n")...)
			}
		}
		os.WriteFile(p, out, 0o644)
		res, err := Analyze(ctx, root, e)
		if err != nil {
			t.Fatal(err)
		}
		w := res.Machines[1].Checked
		if !containsAll(w.Problems, "kubelet.log", "line 5: binary data") {
			t.Errorf("problems %v, want kubelet.log line 5 named as binary data", w.Problems)
		}
		n := 0
		for _, p := range w.Problems {
			if strings.Contains(p, "binary data") {
				n++
			}
		}
		if n != 1 {
			t.Errorf("the bad line is said %d times, want once: %v", n, w.Problems)
		}
		if got := top(w.Report); got != "JoinTokenInvalid" {
			t.Errorf("top %q", got)
		}
	})

	t.Run("a symlink out of the tree is not followed", func(t *testing.T) {
		root := copyTree(t)
		secret := filepath.Join(t.TempDir(), "outside.log")
		os.WriteFile(secret, []byte("May 01 00:00:01.000000 h kubelet[1]: OUTSIDE-THE-TREE\n"), 0o644)
		p := filepath.Join(machineDir(root, cpMachine), "kubelet.log")
		os.Remove(p)
		if err := os.Symlink(secret, p); err != nil {
			t.Fatal(err)
		}
		res, err := Analyze(ctx, root, e)
		if err != nil {
			t.Fatal(err)
		}
		cp := res.Machines[0].Checked
		if !containsAll(cp.Problems, "kubelet.log: a symbolic link (to "+secret+"), not followed") {
			t.Errorf("problems %v, want the symlink named", cp.Problems)
		}
		if strings.Contains(cp.Report.String(), "OUTSIDE-THE-TREE") {
			t.Error("the symlink's target was read")
		}
	})

	t.Run("a broken resource dump", func(t *testing.T) {
		root := copyTree(t)
		p := filepath.Join(root, "clusters/bootstrap/resources/demo/MachineSet/capz-e2e-md-0-6b8f9.yaml")
		os.WriteFile(p, []byte("kind: [unclosed\n"), 0o644)
		res, err := Analyze(ctx, root, e)
		if err != nil {
			t.Fatal(err)
		}
		if !containsAll(res.Problems, "MachineSet/capz-e2e-md-0-6b8f9.yaml") {
			t.Errorf("problems %v, want the broken dump named", res.Problems)
		}
		if len(res.Clusters) != 1 || res.Clusters[0].Incident == nil {
			t.Errorf("the other dumps still make the incident: %+v", res.Clusters)
		}
	})

	t.Run("a symlinked directory and a FIFO are named, never entered or opened", func(t *testing.T) {
		root := copyTree(t)
		elsewhere := t.TempDir()
		os.MkdirAll(filepath.Join(elsewhere, "m-x"), 0o755)
		os.WriteFile(filepath.Join(elsewhere, "m-x", "journal.log"), []byte("May 01 00:00:01.000000 h kubelet[1]: OUTSIDE\n"), 0o644)
		if err := os.Symlink(filepath.Join(elsewhere, "m-x"), filepath.Join(root, "clusters/capz-e2e/machines/m-x")); err != nil {
			t.Fatal(err)
		}
		fifo := filepath.Join(machineDir(root, cpMachine), "journal.log")
		os.Remove(fifo)
		if err := syscall.Mkfifo(fifo, 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := Analyze(ctx, root, e) // would block on the FIFO if it were opened
		if err != nil {
			t.Fatal(err)
		}
		if !containsAll(res.Problems, "machines/m-x: a symbolic link") || !containsAll(res.Problems, "journal.log: not a regular file") {
			t.Errorf("problems %v", res.Problems)
		}
		if len(res.Machines) != 2 {
			t.Errorf("%d machines, want the 2 real ones", len(res.Machines))
		}
	})

	t.Run("the job's build log, not a copy deeper in the tree", func(t *testing.T) {
		root := copyTree(t)
		os.MkdirAll(filepath.Join(root, "artifacts/sub"), 0o755)
		os.WriteFile(filepath.Join(root, "artifacts/sub/build-log.txt"), []byte("panic: another job\n"), 0o644)
		res, err := Analyze(ctx, root, e)
		if err != nil {
			t.Fatal(err)
		}
		if res.Build == nil || res.Build.Path != filepath.Join(root, "build-log.txt") {
			t.Errorf("build log %+v", res.Build)
		}
	})

	t.Run("a worker without logs is judged at the time of the tree, not of the other node", func(t *testing.T) {
		// Log collection failed on the worker (its VM never answered
		// ssh): the cluster's clock is the build log's and the dumps'.
		root := copyTree(t)
		os.RemoveAll(machineDir(root, workerMachine))
		res, err := Analyze(ctx, root, e)
		if err != nil {
			t.Fatal(err)
		}
		inc := res.Clusters[0].Incident
		if want := time.Date(2024, 5, 1, 0, 27, 10, 0, time.UTC); !inc.GeneratedAt.Equal(want) {
			t.Errorf("incident at %v, want the build log's last time %v", inc.GeneratedAt, want)
		}
		if inc.Healthy {
			t.Errorf("a worker Provisioned for 27 minutes with no report is healthy: %q", inc.Title)
		}
	})

	t.Run("one machine's directory given alone", func(t *testing.T) {
		res, err := Analyze(ctx, machineDir(tree, workerMachine), e)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Machines) != 1 || top(res.Machines[0].Checked.Report) != "JoinTokenInvalid" {
			t.Errorf("machines %d", len(res.Machines))
		}
	})
}

func TestFirstFailure(t *testing.T) {
	tests := []struct {
		name, log    string
		line         int
		kind, sig    string
		wantNoFail   bool
		wantNotInOut string
	}{
		{name: "ginkgo v1", log: "ok\n• Failure [912.3 seconds]\nWorkload cluster creation\n", line: 2, kind: "fatal", sig: "ginkgo-v1-failure"},
		{name: "a panic", log: "STEP: x\npanic: runtime error: invalid memory address\n\ngoroutine 1\n", line: 2, kind: "fatal", sig: "go-panic"},
		{name: "kubectl wait", log: "+ kubectl wait --for=condition=Ready nodes --all\nerror: timed out waiting for the condition on nodes/x\n", line: 2, kind: "timeout", sig: "wait-timeout"},
		{name: "make", log: "go build\nmake: *** [Makefile:680: test-e2e-run] Error 1\n", line: 2, kind: "fatal", sig: "make-error"},
		{name: "colours", log: "\x1b[38;5;9m[FAILED] Timed out after 30.000s.\x1b[0m\n", line: 1, kind: "timeout", sig: "gomega-timeout"},
		{name: "secrets are redacted", log: "curl https://acct.blob.core.windows.net/c/x?sv=2021&sig=SECRETSIGNATURE%3D\npanic: boom\n", line: 2, kind: "fatal", sig: "go-panic", wantNotInOut: "SECRETSIGNATURE"},
		{name: "no failure", log: "PASS\nok\n", wantNoFail: true},
		{name: "prow's deadline", log: `{"component":"entrypoint","file":"k8s.io/test-infra/prow/entrypoint/run.go:169","func":"k8s.io/test-infra/prow/entrypoint.Options.ExecuteProcess","level":"error","msg":"Process did not finish before 4h0m0s timeout","severity":"error","time":"2024-05-01T04:00:00Z"}` + "\n", line: 1, kind: "timeout", sig: "prow-timeout"},
		{name: "go test build failure", log: "ok  \tx\nFAIL\tsigs.k8s.io/cluster-api-provider-azure/test/e2e [build failed]\n", line: 2, kind: "fatal", sig: "go-test-fail"},
		{name: "a client's warning in a passing spec is no failure", log: "[It] passes\nW0501 00:00:01.000000    1 reflector.go:561] watch of *v1.Node ended: context deadline exceeded\n------------------------------\n[It] fails\n  [FAILED] Timed out after 10.000s.\n", line: 5, kind: "timeout", sig: "gomega-timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bf, err := firstFailure(strings.NewReader(tt.log))
			if tt.wantNoFail {
				if !IsNoFailure(err) {
					t.Errorf("err %v, want ErrNoFailure", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.name == "a client's warning in a passing spec is no failure" && bf.Spec != "fails" {
				t.Errorf("spec %q, want the failing one", bf.Spec)
			}
			if bf.Line != tt.line || bf.Kind != tt.kind || bf.Signature != tt.sig {
				t.Errorf("got line %d %s %s, want %d %s %s", bf.Line, bf.Kind, bf.Signature, tt.line, tt.kind, tt.sig)
			}
			if tt.wantNotInOut != "" && strings.Contains(strings.Join(bf.Context, "\n")+bf.Text, tt.wantNotInOut) {
				t.Errorf("%q leaked: %v", tt.wantNotInOut, bf.Context)
			}
		})
	}
}

func TestParseListing(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
		exists   bool
	}{
		{"ls", "bootstrap-success.complete\nplaceholder\n", []string{"bootstrap-success.complete", "placeholder"}, true},
		{"ls -la", "total 4\ndrwxr-xr-x  2 root root  80 May  1 00:03 .\ndrwxr-xr-x 30 root root 900 May  1 00:00 ..\n-rw-r--r--  1 root root   8 May  1 00:03 bootstrap-success.complete\n", []string{"bootstrap-success.complete"}, true},
		{"empty directory", "", nil, true},
		{"no directory", "ls: cannot access '/run/cluster-api/': No such file or directory\n", nil, false},
		{"hostile names", "../../etc/passwd\n.\nok\n", []string{"ok"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, exists := parseListing([]byte(tt.in))
			if diff := cmp.Diff(tt.want, got); diff != "" || exists != tt.exists {
				t.Errorf("names (-want +got):\n%s exists %v", diff, exists)
			}
		})
	}
}

func FuzzFirstFailure(f *testing.F) {
	f.Add([]byte(buildLogSample))
	f.Add([]byte("\x00\xff[FAILED] in [It] - x\n• [FAILED] [1.0 seconds]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		bf, err := firstFailure(bytes.NewReader(b))
		if err == nil && (bf == nil || bf.Line < 1 || bf.Failures < 1) {
			t.Fatalf("a failure without a line: %+v", bf)
		}
	})
}

const buildLogSample = "[It] spec\n  [FAILED] in [It] - /a.go:1 @ x\n• [FAILED] [3.0 seconds]\n  [FAILED] Timed out after 1.0s.\n  In [It] at: /a.go:1 @ x\n"

// top is a report's first finding's ID, "" without finding.
func top(r *nodediagv1.Report) string {
	if fs := r.GetFindings(); len(fs) > 0 {
		return fs[0].GetId()
	}
	return ""
}

func containsAll(ss []string, parts ...string) bool {
	for _, s := range ss {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(s, p)
		}
		if ok {
			return true
		}
	}
	return false
}

// TestDiscoverLayouts: the layouts the CAPI and CAPZ collectors write,
// found from the top of the tree or from inside it.
func TestDiscoverLayouts(t *testing.T) {
	root := t.TempDir()
	files := []string{
		"build-log.txt",
		"clusters/wl/machines/wl-md-0-a/kubelet.log",
		"clusters/wl/machines/wl-md-0-a/cloud-init-output.log",
		"clusters/wl/machine-pools/wl-mp-0/wl-mp-0000001/journal.log",
		"clusters/wl/machines/not-a-machine/notes.txt",
		"clusters/bootstrap/resources/default/Cluster/wl.yaml",
		"clusters/bootstrap/resources/default/Machine/wl-md-0-a.yaml",
		"clusters/bootstrap/logs/capz-system/controller.log",
	}
	for _, f := range files {
		p := filepath.Join(root, f)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte("x\n"), 0o644)
	}
	tr, err := Discover(root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range tr.Machines {
		got = append(got, m.Cluster+"|"+m.Pool+"|"+m.Name)
	}
	if diff := cmp.Diff([]string{"wl||wl-md-0-a", "wl|wl-mp-0|wl-mp-0000001"}, got); diff != "" {
		t.Errorf("machines (-want +got):\n%s", diff)
	}
	if len(tr.Resources) != 2 || tr.BuildLog != filepath.Join(root, "build-log.txt") {
		t.Errorf("resources %v, build log %q", tr.Resources, tr.BuildLog)
	}
	// From inside: the clusters/ directory, and one cluster's.
	for _, sub := range []string{"clusters", "clusters/wl"} {
		tr, err := Discover(filepath.Join(root, sub))
		if err != nil || len(tr.Machines) != 2 {
			t.Errorf("%s: %d machines, err %v", sub, len(tr.Machines), err)
		}
	}
	if !IsTree(root) || !IsTree(filepath.Join(root, "clusters/wl/machines/wl-md-0-a")) || IsTree(filepath.Join(root, "clusters/bootstrap/logs")) {
		t.Error("IsTree")
	}
}

// TestJournalNotText: a journal.log in a format the reader does not know
// is said, not silently dropped; a kubelet.log that is the kubelet's own
// log file is read as /var/log/kubelet.log.
func TestJournalNotText(t *testing.T) {
	root := copyTree(t)
	dir := filepath.Join(root, "clusters/capz-e2e/machines", workerMachine)
	os.WriteFile(filepath.Join(dir, "journal.log"), []byte("[    5.123456] capz-e2e-md-0-p9s2d kubelet[1]: short-monotonic is not read\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "kubelet.log"), []byte(`E0501 00:03:00.300000    3100 run.go:72] "command failed" err="failed to parse kubelet flag: unknown flag: --container-runtime"`+"\n"), 0o644)
	res, err := Analyze(context.Background(), root, engine(t))
	if err != nil {
		t.Fatal(err)
	}
	w := res.Machines[1].Checked
	if !containsAll(w.Problems, "journal.log: not journalctl's short output") {
		t.Errorf("problems %v", w.Problems)
	}
	if !strings.Contains(w.Report.String(), "/var/log/kubelet.log") {
		t.Error("the kubelet's own log was not read as /var/log/kubelet.log")
	}
}

// TestEmptyCommandOutputIsUnknown: the collectors write a command's file
// even when the command failed, without its stderr. An empty
// sentinel-file-dir.txt or journal.log is unknown, not an empty directory
// or journal: no finding concludes from it, and it is said.
func TestEmptyCommandOutputIsUnknown(t *testing.T) {
	root := copyTree(t)
	dir := filepath.Join(root, "clusters/capz-e2e/machines", cpMachine)
	for _, f := range []string{"sentinel-file-dir.txt", "journal.log"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	res, err := Analyze(context.Background(), root, engine(t))
	if err != nil {
		t.Fatal(err)
	}
	var cp *Checked
	for _, m := range res.Machines {
		if m.Machine.Name == cpMachine {
			cp = m.Checked
		}
	}
	if cp == nil {
		t.Fatal("the control plane machine was not checked")
	}
	if !containsAll(cp.Problems, "sentinel-file-dir.txt is empty", "unknown") || !containsAll(cp.Problems, "journal.log is empty", "unknown") {
		t.Errorf("problems %v: want both empty outputs said", cp.Problems)
	}
	for _, f := range cp.Report.GetFindings() {
		if f.GetId() == "BootstrapSentinelMissing" {
			t.Errorf("an empty ls output was taken for an absent sentinel: %s", f.GetTitle())
		}
	}
}

// TestCollectorPreamble: CAPZ's collector writes cloud-init-output.log
// after its own lines (the wait, cloud-init status --wait's verdict, "Found
// ..., reading contents:"), and "... not found" for a log the node lacks.
// The log is read from its first line of its own, the verdict is said, and
// an absent log is not taken for an empty one.
func TestCollectorPreamble(t *testing.T) {
	root := copyTree(t)
	dir := filepath.Join(root, "clusters/capz-e2e/machines", workerMachine)
	orig, err := os.ReadFile(filepath.Join(dir, "cloud-init-output.log"))
	if err != nil {
		t.Fatal(err)
	}
	before, err := Analyze(context.Background(), copyTree(t), engine(t))
	if err != nil {
		t.Fatal(err)
	}
	pre := "Waiting for cloud-init to complete before collecting output log...\n..........\nstatus: error\nFound cloud-init-output.log, reading contents:\n"
	os.WriteFile(filepath.Join(dir, "cloud-init-output.log"), append([]byte(pre), orig...), 0o644)
	os.WriteFile(filepath.Join(dir, "cloud-init.log"), []byte("cloud-init.log not found\n"), 0o644)
	res, err := Analyze(context.Background(), root, engine(t))
	if err != nil {
		t.Fatal(err)
	}
	w := res.Machines[1].Checked
	if !containsAll(w.Problems, `status --wait said "status: error"`) || !containsAll(w.Problems, "found no /var/log/cloud-init.log") {
		t.Errorf("problems %v: want the verdict and the absent log said", w.Problems)
	}
	if got, want := top(w.Report), top(before.Machines[1].Checked.Report); got != want {
		t.Errorf("top finding %q with the preamble, %q without", got, want)
	}
	js := w.Report.String()
	if strings.Contains(js, "Waiting for cloud-init to complete") || strings.Contains(js, "reading contents:") {
		t.Errorf("the collector's own lines were read as the node's log")
	}
}

func TestVMSSInstanceID(t *testing.T) {
	for name, want := range map[string]string{"capz-mp-0000000": "0", "capz-mp-000000a": "10", "capz-mp-00000Z1": "1261", "short": "", "capz-mp-0-x!": ""} {
		got, ok := vmssInstanceID(name)
		if got != want || ok != (want != "") {
			t.Errorf("vmssInstanceID(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
}

// TestWorkloadDumps: the Node and Pod dumps Cluster API's framework writes
// for the workload cluster (clusters/CLUSTER/resources/Node/NAME.yaml and
// resources/NS/Pod/NAME.yaml) are the chain's evidence. Here kube-proxy
// cannot pull its image (the pod states of
// https://github.com/labring/sealos/issues/1035 and the not-found message
// form of https://github.com/kubernetes/kops/pull/18529): the incident names
// kube-proxy as the first broken link with the pod's message quoted, and
// the worker that cannot join for its own reason (a refused bootstrap
// token) still leads with its node's cause, not the chain's.
func TestWorkloadDumps(t *testing.T) {
	root := copyTree(t)
	dir := filepath.Join(root, "clusters", "capz-e2e", "resources")
	write := func(rel, body string) {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("Node/capz-e2e-control-plane-t8x5m.yaml", `apiVersion: v1
kind: Node
metadata:
  creationTimestamp: "2024-05-01T00:02:00Z"
  labels:
    node-role.kubernetes.io/control-plane: ""
  name: capz-e2e-control-plane-t8x5m
spec:
  providerID: azure:///subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/capz-e2e-rg/providers/Microsoft.Compute/virtualMachines/capz-e2e-control-plane-t8x5m
status:
  conditions:
  - lastTransitionTime: "2024-05-01T00:04:00Z"
    message: kubelet is posting ready status
    reason: KubeletReady
    status: "True"
    type: Ready
`)
	write("kube-system/Pod/kube-proxy-8sd57.yaml", `apiVersion: v1
kind: Pod
metadata:
  creationTimestamp: "2024-05-01T00:03:00Z"
  labels:
    k8s-app: kube-proxy
  name: kube-proxy-8sd57
  namespace: kube-system
  ownerReferences:
  - apiVersion: apps/v1
    controller: true
    kind: DaemonSet
    name: kube-proxy
    uid: 0f6b2d7e-0000-0000-0000-000000000001
spec:
  containers:
  - image: registry.k8s.io/kube-proxy:v1.32.3
    name: kube-proxy
  nodeName: capz-e2e-control-plane-t8x5m
status:
  containerStatuses:
  - image: registry.k8s.io/kube-proxy:v1.32.3
    imageID: ""
    name: kube-proxy
    ready: false
    restartCount: 0
    state:
      waiting:
        message: 'Back-off pulling image "registry.k8s.io/kube-proxy:v1.32.3": ErrImagePull: rpc error: code = NotFound desc = failed to pull and unpack image "registry.k8s.io/kube-proxy:v1.32.3": failed to resolve reference "registry.k8s.io/kube-proxy:v1.32.3": registry.k8s.io/kube-proxy:v1.32.3: not found'
        reason: ImagePullBackOff
  phase: Pending
`)
	write("kube-system/Pod/coredns-66f779496c-89vm2.yaml", `apiVersion: v1
kind: Pod
metadata:
  creationTimestamp: "2024-05-01T00:03:00Z"
  labels:
    k8s-app: kube-dns
    pod-template-hash: 66f779496c
  name: coredns-66f779496c-89vm2
  namespace: kube-system
  ownerReferences:
  - apiVersion: apps/v1
    controller: true
    kind: ReplicaSet
    name: coredns-66f779496c
    uid: 0f6b2d7e-0000-0000-0000-000000000002
spec:
  containers:
  - image: registry.k8s.io/coredns/coredns:v1.11.3
    name: coredns
  nodeName: capz-e2e-control-plane-t8x5m
status:
  conditions:
  - status: "True"
    type: Ready
  containerStatuses:
  - name: coredns
    ready: true
    state:
      running:
        startedAt: "2024-05-01T00:05:00Z"
  phase: Running
`)
	res, err := Analyze(context.Background(), root, engine(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Clusters) != 1 || res.Clusters[0].Incident == nil {
		t.Fatalf("clusters %+v", res.Clusters)
	}
	inc := res.Clusters[0].Incident
	if inc.FirstBrokenLink != "kube-proxy" {
		t.Errorf("first broken link %q, chain %+v", inc.FirstBrokenLink, inc.Chain)
	}
	var kp *incident.Finding
	for i := range inc.Findings {
		if inc.Findings[i].Key == "WorkloadComponentFailing/DaemonSet/kube-system/kube-proxy" {
			kp = &inc.Findings[i]
		}
	}
	if kp == nil {
		t.Fatalf("no kube-proxy finding: %+v", inc.Findings)
	}
	quoted := false
	for _, e := range kp.Evidence {
		quoted = quoted || strings.Contains(e.Excerpt, "registry.k8s.io/kube-proxy:v1.32.3: not found")
	}
	if !quoted {
		t.Errorf("the pull error is not quoted: %+v", kp.Evidence)
	}
	if inc.RootCause == nil || inc.RootCause.Finding != "MachineNotRunning/Machine/"+workerMachine {
		t.Errorf("root cause %+v: the worker's own cause should lead", inc.RootCause)
	}
	for _, l := range inc.Chain {
		if l.Name == "CoreDNS" && l.State != "ok" {
			t.Errorf("CoreDNS runs in the dumps: link %+v", l)
		}
	}
}
