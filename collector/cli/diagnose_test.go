package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/nodediag/nodediag/collector/reports"
	"github.com/nodediag/nodediag/internal/testenv/kubeenv"
)

// The stuck worker of the Cluster API reader's tests, on the real API
// server: its Machine is Provisioned and its VM's bootstrap failed.
const stuckWorker = "../capi/testdata/stuck-worker.yaml"

// nodeReportFile checks an example host and writes its report as the node
// nodeName, as `nodediag node NAME -o json` or the agent would give it.
func nodeReportFile(t *testing.T, host, nodeName string) string {
	t.Helper()
	r, err := reports.Load(context.Background(), filepath.Join("..", "..", "agent", "testdata", "hosts", host, "root"))
	if err != nil {
		t.Fatal(err)
	}
	r.Host.NodeName = nodeName
	b, err := protojson.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), nodeName+".json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDiagnoseAndDescribeAgainstAPIServer runs `nodediag diagnose cluster`
// and `describe cluster` against a real kube-apiserver holding the Cluster
// API objects, with the stuck worker's node report from a file: the report
// names the node's cause at the Machine.
func TestDiagnoseAndDescribeAgainstAPIServer(t *testing.T) {
	_, srv := kubeenv.StartAPIServer(t)
	kubeenv.Load(t, srv.Config, stuckWorker)
	report := nodeReportFile(t, "kubelet-1.27-container-runtime-flag", "sw-md-0-abcde-q8m4z")

	res := run(t, "diagnose", "cluster", "stuck-worker/sw", "--kubeconfig", srv.Kubeconfig, "--reports", report)
	if res.code() != ExitFindings {
		t.Fatalf("diagnose: want exit 1\n%s", res)
	}
	for _, want := range []string{"stuck-worker/sw", "sw-md-0-abcde-q8m4z", "KubeletRemovedFlag", "## Root cause", "## Remediation"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("diagnose markdown lacks %q:\n%s", want, res.stdout)
		}
	}

	res = run(t, "diagnose", "cluster", "stuck-worker/sw", "--kubeconfig", srv.Kubeconfig, "--reports", report, "-o", "json")
	if res.code() != ExitFindings || !strings.Contains(res.stdout, `"root_cause"`) {
		t.Errorf("diagnose -o json: %s", res)
	}
	res = run(t, "diagnose", "cluster", "stuck-worker/sw", "--kubeconfig", srv.Kubeconfig, "-o", "html")
	if res.code() != ExitFindings || !strings.HasPrefix(strings.TrimSpace(res.stdout), "<!DOCTYPE html>") {
		t.Errorf("diagnose -o html (no node report): %.400s", res)
	}

	res = run(t, "describe", "cluster", "stuck-worker/sw", "--kubeconfig", srv.Kubeconfig, "--reports", report)
	if res.err != nil {
		t.Fatalf("describe: %s", res)
	}
	for _, want := range []string{"Cluster/sw", "ControlPlane - KubeadmControlPlane/sw-cp", "MachineDeployment/sw-md-0", "Machine/sw-md-0-abcde-q8m4z", "Provisioned", "KubeletRemovedFlag", "AzureMachine/sw-md-0-abcde-q8m4z"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("describe lacks %q:\n%s", want, res.stdout)
		}
	}

	// Errors an operator meets.
	for name, args := range map[string][]string{
		"not NAMESPACE/NAME": {"diagnose", "cluster", "sw", "--kubeconfig", srv.Kubeconfig},
		"unknown cluster":    {"diagnose", "cluster", "stuck-worker/nope", "--kubeconfig", srv.Kubeconfig},
		"bad --reports":      {"diagnose", "cluster", "stuck-worker/sw", "--kubeconfig", srv.Kubeconfig, "--reports", t.TempDir()},
		"bad -o":             {"diagnose", "cluster", "stuck-worker/sw", "--kubeconfig", srv.Kubeconfig, "-o", "pdf"},
	} {
		if res := run(t, args...); res.code() != ExitUsage || strings.Count(strings.TrimSpace(res.err.Error()), "\n") > 0 {
			t.Errorf("%s: want exit 2 with one line\n%s", name, res)
		}
	}
	_, viewerKubeconfig := srv.User(t, "nobody")
	if res := run(t, "diagnose", "cluster", "stuck-worker/sw", "--kubeconfig", viewerKubeconfig); res.code() != ExitUsage || !strings.Contains(res.err.Error(), "nobody") {
		t.Errorf("an identity without RBAC: want exit 2 naming it\n%s", res)
	}
}
