package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	agentcli "github.com/nodediag/nodediag/agent/cli"
	"github.com/nodediag/nodediag/collector/incident"
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

// TestDiagnoseThroughCollector: a collector that reads the management
// cluster itself (serve --kubeconfig) answers `diagnose cluster` and
// `describe cluster` given only --collector, from its informers and the
// report the real agent streamed to it; its verdict is the one made here
// from the kubeconfig and the same host's report. A collector that reads no
// cluster leaves the diagnosis to this side; an unknown cluster and an
// identity without RBAC are clear errors.
func TestDiagnoseThroughCollector(t *testing.T) {
	_, srv := kubeenv.StartAPIServer(t)
	kubeenv.Load(t, srv.Config, stuckWorker)
	const node = "sw-md-0-abcde-q8m4z"
	hostRoot := filepath.Join("..", "..", "agent", "testdata", "hosts", "kubelet-1.27-container-runtime-flag", "root")

	s := startServe(t, false, "--listen", "127.0.0.1:0", "--insecure", "--data-dir", t.TempDir(), "--kubeconfig", srv.Kubeconfig)
	var aout, aerr strings.Builder
	if code := agentcli.Run(context.Background(), []string{"run", "--once", "--collector", s.addr, "--insecure", "--root", hostRoot, "--node-name", node, "--offline"}, &aout, &aerr); code != 0 {
		t.Fatalf("nodediag-agent run --once: exit %d, want 0 (the report acknowledged)\n%s%s", code, aout.String(), aerr.String())
	}
	collector := []string{"--collector", s.addr, "--insecure"}

	remote := run(t, append([]string{"diagnose", "cluster", "stuck-worker/sw", "-o", "json"}, collector...)...)
	if remote.code() != ExitFindings {
		t.Fatalf("diagnose through the collector: want exit 1\n%s\ncollector log:\n%s", remote, s.log())
	}
	local := run(t, "diagnose", "cluster", "stuck-worker/sw", "-o", "json", "--kubeconfig", srv.Kubeconfig, "--reports", nodeReportFile(t, "kubelet-1.27-container-runtime-flag", node))
	if local.code() != ExitFindings {
		t.Fatalf("diagnose here: want exit 1\n%s", local)
	}
	var ri, li incident.Incident
	for _, x := range []struct {
		out string
		inc *incident.Incident
	}{{remote.stdout, &ri}, {local.stdout, &li}} {
		if err := json.Unmarshal([]byte(x.out), x.inc); err != nil {
			t.Fatalf("incident JSON: %v\n%s", err, x.out)
		}
	}
	if ri.RootCause == nil || li.RootCause == nil || ri.RootCause.Finding != li.RootCause.Finding || ri.RootCause.Node != li.RootCause.Node {
		t.Fatalf("root cause through the collector %+v, here %+v", ri.RootCause, li.RootCause)
	}
	if !strings.Contains(ri.RootCause.Node, "KubeletRemovedFlag") {
		t.Errorf("root cause %+v, want the node's KubeletRemovedFlag", ri.RootCause)
	}
	if len(ri.Machines) != len(li.Machines) {
		t.Errorf("machines through the collector %d, here %d", len(ri.Machines), len(li.Machines))
	}

	md := run(t, append([]string{"diagnose", "cluster", "stuck-worker/sw"}, collector...)...)
	if md.code() != ExitFindings || !strings.Contains(md.stdout, "## Root cause") || !strings.Contains(md.stdout, node) {
		t.Errorf("markdown through the collector:\n%s", md)
	}
	tree := run(t, append([]string{"describe", "cluster", "stuck-worker/sw"}, collector...)...)
	if tree.err != nil {
		t.Fatalf("describe through the collector: %s", tree)
	}
	for _, want := range []string{"Cluster/sw", "MachineDeployment/sw-md-0", "Machine/" + node, "Provisioned", "KubeletRemovedFlag", "AzureMachine/" + node} {
		if !strings.Contains(tree.stdout, want) {
			t.Errorf("describe through the collector lacks %q:\n%s", want, tree.stdout)
		}
	}
	if res := run(t, append([]string{"diagnose", "cluster", "stuck-worker/nope"}, collector...)...); res.code() != ExitUsage || !strings.Contains(res.err.Error(), "not found") {
		t.Errorf("unknown cluster through the collector: want exit 2, not found\n%s", res)
	}

	// A collector whose identity may read nothing: the refusal names it.
	_, nobody := srv.User(t, "nobody")
	denied := startServe(t, false, "--listen", "127.0.0.1:0", "--insecure", "--data-dir", t.TempDir(), "--kubeconfig", nobody)
	if res := run(t, "diagnose", "cluster", "stuck-worker/sw", "--collector", denied.addr, "--insecure"); res.code() != ExitUsage || !strings.Contains(res.err.Error(), "cannot read cluster stuck-worker/sw") || !strings.Contains(res.err.Error(), `user "nobody"`) {
		t.Errorf("a collector without RBAC: want exit 2 saying the collector's identity lacks the role\n%s", res)
	}

	// A collector that reads no cluster: the diagnosis is made here, with
	// the kubeconfig of $KUBECONFIG and the collector's stored report.
	plain := startServe(t, false, "--listen", "127.0.0.1:0", "--insecure", "--data-dir", t.TempDir())
	if code := agentcli.Run(context.Background(), []string{"run", "--once", "--collector", plain.addr, "--insecure", "--root", hostRoot, "--node-name", node, "--offline"}, &aout, &aerr); code != 0 {
		t.Fatalf("nodediag-agent run --once: exit %d\n%s", code, aerr.String())
	}
	t.Setenv("KUBECONFIG", srv.Kubeconfig)
	res := run(t, "diagnose", "cluster", "stuck-worker/sw", "-o", "json", "--collector", plain.addr, "--insecure")
	var fi incident.Incident
	if res.code() != ExitFindings || json.Unmarshal([]byte(res.stdout), &fi) != nil || fi.RootCause == nil || fi.RootCause.Node != ri.RootCause.Node {
		t.Errorf("diagnose with a collector that reads no cluster: want the same root cause made here\n%s", res)
	}
}

// TestDiagnoseReadsTheWorkloadCluster: with the workload cluster's
// kubeconfig, the report judges the chain from its own Nodes and
// kube-system (a second real kube-apiserver stands in for it); without the
// Secret of the default access, stderr says the workload was not read and
// how to set it up, and the report is made from the management side.
func TestDiagnoseReadsTheWorkloadCluster(t *testing.T) {
	_, srv := kubeenv.StartAPIServer(t)
	kubeenv.Load(t, srv.Config, stuckWorker)
	wlCfg, wlSrv := kubeenv.StartWorkloadAPIServer(t)
	cs := kubernetes.NewForConfigOrDie(wlCfg)
	ctx := context.Background()
	labels := map[string]string{"k8s-app": "kube-proxy"}
	ds, err := cs.AppsV1().DaemonSets("kube-system").Create(ctx, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-proxy"}, Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "kube-proxy", Image: "registry.k8s.io/kube-proxy:v1.31.100"}}}},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ds.Status = appsv1.DaemonSetStatus{DesiredNumberScheduled: 1}
	if _, err := cs.AppsV1().DaemonSets("kube-system").UpdateStatus(ctx, ds, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	p, err := cs.CoreV1().Pods("kube-system").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-proxy-8sd57", Labels: labels},
		Spec: corev1.PodSpec{NodeName: "sw-cp-0", Containers: []corev1.Container{{Name: "kube-proxy", Image: "registry.k8s.io/kube-proxy:v1.31.100"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status = corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "kube-proxy", Image: "registry.k8s.io/kube-proxy:v1.31.100",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "registry.k8s.io/kube-proxy:v1.31.100"`}}}}}
	if _, err := cs.CoreV1().Pods("kube-system").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	res := run(t, "diagnose", "cluster", "stuck-worker/sw", "--kubeconfig", srv.Kubeconfig, "--workload-kubeconfig", wlSrv.Kubeconfig, "-o", "json")
	if res.code() != ExitFindings {
		t.Fatalf("want exit 1\n%s", res)
	}
	for _, want := range []string{`"first_broken_link": "kube-proxy"`, `"key": "WorkloadComponentFailing/DaemonSet/kube-system/kube-proxy"`, `kube-proxy-8sd57`} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("diagnose -o json lacks %s\n%.3000s", want, res.stdout)
		}
	}
	res = run(t, "diagnose", "cluster", "stuck-worker/sw", "--kubeconfig", srv.Kubeconfig)
	if !strings.Contains(res.stderr, "the workload cluster was not read") || !strings.Contains(res.stderr, "Secret stuck-worker/sw-nodediag-kubeconfig not found") {
		t.Errorf("without the Secret: %s", res)
	}
	if strings.Contains(res.stdout, "WorkloadComponent") {
		t.Errorf("a workload finding without reading the workload cluster:\n%s", res.stdout)
	}
	if res := run(t, "diagnose", "cluster", "stuck-worker/sw", "--kubeconfig", srv.Kubeconfig, "--workload-access", "root"); res.code() != ExitUsage {
		t.Errorf("--workload-access root: want exit 2\n%s", res)
	}

	// The Secret of the default access (envtest's kubeconfig carries its
	// credentials inline), read here and by a collector that watches the
	// management cluster.
	mgmt := kubernetes.NewForConfigOrDie(srv.Config)
	if _, err := mgmt.CoreV1().Secrets("stuck-worker").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sw-nodediag-kubeconfig"},
		Data: map[string][]byte{"value": wlSrv.KubeConfig()}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := `"key": "WorkloadComponentFailing/DaemonSet/kube-system/kube-proxy"`
	if res := run(t, "diagnose", "cluster", "stuck-worker/sw", "--kubeconfig", srv.Kubeconfig, "-o", "json"); !strings.Contains(res.stdout, want) {
		t.Errorf("through the Secret: no %s\n%s", want, res)
	}
	if res := run(t, "diagnose", "cluster", "stuck-worker/sw", "--kubeconfig", srv.Kubeconfig, "--workload-access", "none", "-o", "json"); strings.Contains(res.stdout, "WorkloadComponent") {
		t.Errorf("--workload-access none read the workload cluster:\n%.2000s", res.stdout)
	}
	s := startServe(t, false, "--listen", "127.0.0.1:0", "--insecure", "--data-dir", t.TempDir(), "--kubeconfig", srv.Kubeconfig)
	if res := run(t, "diagnose", "cluster", "stuck-worker/sw", "--collector", s.addr, "--insecure", "-o", "json"); !strings.Contains(res.stdout, want) {
		t.Errorf("through the collector: no %s\n%s", want, res)
	}
}
