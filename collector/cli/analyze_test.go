package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	agentcli "github.com/nodediag/nodediag/agent/cli"
)

// hostArgs are the agent flags of an example host (its args file: --now).
func hostArgs(t *testing.T, host string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "agent", "testdata", "hosts", host, "args"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// agentFindings runs `nodediag-agent ARGS...` in process and returns the
// IDs of its JSON report's findings, in order.
func agentFindings(t *testing.T, args ...string) []string {
	t.Helper()
	var out, errOut strings.Builder
	if code := agentcli.Run(context.Background(), args, &out, &errOut); code > 1 {
		t.Fatalf("nodediag-agent %v: exit %d\n%s", args, code, errOut.String())
	}
	var r struct {
		Findings []struct{ ID string } `json:"findings"`
	}
	if err := json.Unmarshal([]byte(out.String()), &r); err != nil {
		t.Fatalf("agent JSON: %v", err)
	}
	var ids []string
	for _, f := range r.Findings {
		ids = append(ids, f.ID)
	}
	return ids
}

type analyzeJSON struct {
	Inputs []struct {
		Path     string   `json:"path"`
		Kind     string   `json:"kind"`
		Problems []string `json:"problems"`
		Error    string   `json:"error"`
		Report   *struct {
			Findings []struct{ ID string } `json:"findings"`
		} `json:"report"`
	} `json:"inputs"`
}

// TestAnalyzeBundlesGiveTheLiveVerdict: the real agent bundles scenario
// hosts (`nodediag-agent collect`), `nodediag analyze` judges the bundles
// again, and each gets the findings the agent's own check gives the host,
// in the same order. A bundle cut short, a path that is no report and a
// bundle of another format are said, and the rest analysed.
func TestAnalyzeBundlesGiveTheLiveVerdict(t *testing.T) {
	hosts := []string{"kubelet-1.27-container-runtime-flag", "join-token-expired", "disk-full", "dkp-registry-missing-scheme", "kubelet-client-cert-expired", "healthy-worker", "planted-secrets"}
	dir := t.TempDir()
	var paths []string
	want := map[string][]string{}
	for _, h := range hosts {
		root := filepath.Join("..", "..", "agent", "testdata", "hosts", h, "root")
		common := append([]string{"--root", root, "--exec", "none", "--offline", "--node-name", h}, hostArgs(t, h)...)
		want[h] = agentFindings(t, append([]string{"check", "--output", "json"}, common...)...)
		bundle := filepath.Join(dir, h+".tar.gz")
		var out, errOut strings.Builder
		if code := agentcli.Run(context.Background(), append([]string{"collect", "--bundle", bundle}, common...), &out, &errOut); code > 1 {
			t.Fatalf("collect %s: exit %d\n%s", h, code, errOut.String())
		}
		if !strings.Contains(out.String(), "bundle: ") {
			t.Errorf("collect %s printed no bundle line:\n%s", h, out.String())
		}
		paths = append(paths, bundle)
	}
	res := run(t, append([]string{"analyze", "-o", "json"}, paths...)...)
	if res.code() != ExitFindings {
		t.Fatalf("analyze: want exit 1\n%s", res)
	}
	var got analyzeJSON
	if err := json.Unmarshal([]byte(res.stdout), &got); err != nil {
		t.Fatal(err)
	}
	for i, in := range got.Inputs {
		h := hosts[i]
		if in.Kind != "bundle" || in.Report == nil || len(in.Problems) > 0 {
			t.Errorf("%s: kind %q, problems %q, error %q", h, in.Kind, in.Problems, in.Error)
			continue
		}
		var ids []string
		for _, f := range in.Report.Findings {
			ids = append(ids, f.ID)
		}
		if strings.Join(ids, ",") != strings.Join(want[h], ",") {
			t.Errorf("%s: analyze says %v, the live check %v", h, ids, want[h])
		}
	}

	// Bad inputs beside a good one.
	b, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(dir, "cut.tar.gz")
	os.WriteFile(cut, b[:len(b)*3/4], 0o644)
	junk := filepath.Join(dir, "junk.bin")
	os.WriteFile(junk, []byte{0x1f, 0x8b, 0, 1, 2, 3}, 0o644)
	res = run(t, "analyze", "-o", "json", cut, junk, paths[1])
	var bad analyzeJSON
	if err := json.Unmarshal([]byte(res.stdout), &bad); err != nil {
		t.Fatalf("%v\n%s", err, res)
	}
	if res.code() != ExitFindings || len(bad.Inputs) != 3 {
		t.Fatalf("analyze with bad inputs: %s", res)
	}
	if in := bad.Inputs[0]; in.Report == nil && !strings.Contains(in.Error, "report.json") || in.Report != nil && !strings.Contains(strings.Join(in.Problems, " "), "cut short") {
		t.Errorf("cut bundle: error %q, problems %q", in.Error, in.Problems)
	}
	if in := bad.Inputs[1]; in.Error == "" || !strings.Contains(in.Error, "not a nodediag bundle") {
		t.Errorf("junk: error %q", in.Error)
	}
	if bad.Inputs[2].Report == nil {
		t.Errorf("the good bundle beside bad ones was not analysed")
	}
	if res := run(t, "analyze", junk); res.code() != ExitUsage {
		t.Errorf("only junk: want exit 2\n%s", res)
	}

	// Markdown: a table and each node's report.
	md := run(t, "analyze", paths[0], filepath.Join("..", "..", "agent", "testdata", "hosts", "healthy-worker", "root"))
	if md.code() != ExitFindings || !strings.Contains(md.stdout, "| input | kind | node | verdict |") || !strings.Contains(md.stdout, "KubeletUnknownFlag") || !strings.Contains(md.stdout, "| host root |") {
		t.Errorf("markdown:\n%s", md)
	}
}

// TestAnalyzeRunsNothingOfAHostTree: analyze of a host tree (a copied root)
// never runs its binaries: a canary kubelet that would leave a mark is read
// as a file only.
func TestAnalyzeRunsNothingOfAHostTree(t *testing.T) {
	root := filepath.Join(t.TempDir(), "root")
	marker := filepath.Join(t.TempDir(), "ran")
	canary := "#!/bin/sh\ntouch " + marker + "\necho 'Kubernetes v1.35.0'\n"
	files := map[string]string{
		"etc/hostname":          "copied-node\n",
		"etc/sysconfig/kubelet": "KUBELET_EXTRA_ARGS=--pod-infra-container-image=x\n",
	}
	for _, b := range []string{"usr/bin/kubelet", "usr/bin/kubeadm", "usr/bin/kubectl", "usr/bin/containerd", "usr/bin/crictl", "usr/bin/runc"} {
		files[b] = canary
	}
	for p, body := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range []string{"markdown", "json"} {
		r := run(t, "analyze", root, "-o", o)
		if r.code() > 1 {
			t.Fatalf("analyze -o %s: %s", o, r)
		}
		if !strings.Contains(r.stdout, "copied-node") {
			t.Errorf("analyze -o %s did not read the tree:\n%s", o, r)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("analyze ran a binary of the host tree")
	}
}
