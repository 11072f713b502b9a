package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/nodediag/nodediag/collector/reports"
	"github.com/nodediag/nodediag/collector/store"
	"github.com/nodediag/nodediag/internal/testenv/kubeenv"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// BenchmarkDiagnoseThroughCollector is the measure end to end: a
// cluster of 1,000 Machines (3 control plane, 997 workers, every tenth
// worker Provisioned) with their AzureMachines on the real API server, a
// collector (`nodediag serve --kubeconfig`, in process) whose store holds
// the latest report of every node, evidence included, and `nodediag
// diagnose cluster -o json --collector` run again and again after the
// informers synced: the CLI's whole path (RPC, the collector's join with
// 1,000 stored reports, re-judging kept between calls, the JSON decoded and
// rendered).
func BenchmarkDiagnoseThroughCollector(b *testing.B) {
	_, srv := kubeenv.StartAPIServer(b)
	const n = 1000
	dir := b.TempDir()
	start := time.Now()
	manifest := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(manifest, []byte(bigCluster(n)), 0o644); err != nil {
		b.Fatal(err)
	}
	kubeenv.Load(b, srv.Config, manifest)
	b.Logf("created a cluster of %d Machines in %v", n, time.Since(start).Round(time.Millisecond))

	dataDir := filepath.Join(dir, "data")
	healthy := hostReport(b, "healthy-worker")
	stuck := hostReport(b, "kubelet-1.27-container-runtime-flag")
	st, err := store.Open(dataDir, store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		vm := bigVM(i)
		src := healthy
		if i%10 == 9 {
			src = stuck
		}
		r := proto.Clone(src).(*nodediagv1.Report)
		r.Host.Hostname, r.Host.NodeName = vm, vm
		sum := &nodediagv1.NodeSummary{NodeName: vm, ProviderId: bigProviderID(vm)}
		if err := st.Put(context.Background(), &store.Record{Summary: sum, AgentStart: start, Seq: 1, ReceivedAt: time.Now(), Report: r}); err != nil {
			b.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
	s := startServe(b, false, "--listen", "127.0.0.1:0", "--insecure", "--data-dir", dataDir, "--kubeconfig", srv.Kubeconfig)
	args := []string{"diagnose", "cluster", "big/big", "-o", "json", "--collector", s.addr, "--insecure"}
	first := time.Now()
	res := run(b, args...) // waits for the informers; re-judges every node once
	if res.code() != ExitFindings || !strings.Contains(res.stdout, `"MachineNotRunning`) {
		b.Fatalf("first diagnosis: %.2000s", res)
	}
	b.Logf("first diagnosis (informers syncing, every node re-judged): %v, %d bytes of JSON", time.Since(first).Round(time.Millisecond), len(res.stdout))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if res := run(b, args...); res.code() != ExitFindings {
			b.Fatal(res)
		}
	}
}

// hostReport is the report of an example host, evidence included.
func hostReport(t testing.TB, host string) *nodediagv1.Report {
	t.Helper()
	r, err := reports.Load(context.Background(), filepath.Join("..", "..", "agent", "testdata", "hosts", host, "root"))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func bigVM(i int) string {
	if i < 3 {
		return fmt.Sprintf("big-control-plane-%05d", i)
	}
	return fmt.Sprintf("big-md-0-%05d", i)
}

func bigProviderID(vm string) string {
	return "azure:///subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/big-rg/providers/Microsoft.Compute/virtualMachines/" + vm
}

// bigCluster is the manifest of cluster big/big with n Machines.
func bigCluster(n int) string {
	var sb strings.Builder
	sb.WriteString(`apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata: {name: big, namespace: big, labels: {cni: calico, cloud-provider: azure}}
spec:
  controlPlaneRef: {apiGroup: controlplane.cluster.x-k8s.io, kind: KubeadmControlPlane, name: big-cp}
  infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: AzureCluster, name: big}
status:
  phase: Provisioned
  initialization: {infrastructureProvisioned: true, controlPlaneInitialized: true}
---
apiVersion: controlplane.cluster.x-k8s.io/v1beta2
kind: KubeadmControlPlane
metadata: {name: big-cp, namespace: big, labels: {cluster.x-k8s.io/cluster-name: big}}
spec:
  replicas: 3
  version: v1.32.3
  machineTemplate: {spec: {infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: AzureMachineTemplate, name: big-cp}}}
status:
  replicas: 3
  readyReplicas: 3
  initialization: {controlPlaneInitialized: true}
---
apiVersion: cluster.x-k8s.io/v1beta2
kind: MachineDeployment
metadata: {name: big-md-0, namespace: big, labels: {cluster.x-k8s.io/cluster-name: big}}
spec:
  clusterName: big
  replicas: 997
  selector: {matchLabels: {cluster.x-k8s.io/deployment-name: big-md-0}}
  template:
    metadata: {labels: {cluster.x-k8s.io/deployment-name: big-md-0}}
    spec:
      clusterName: big
      version: v1.32.3
      bootstrap: {configRef: {apiGroup: bootstrap.cluster.x-k8s.io, kind: KubeadmConfigTemplate, name: big-md-0}}
      infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: AzureMachineTemplate, name: big-md-0}
status:
  replicas: 997
  readyReplicas: 897
  availableReplicas: 897
`)
	for i := range n {
		vm := bigVM(i)
		labels := "cluster.x-k8s.io/cluster-name: big, cluster.x-k8s.io/deployment-name: big-md-0"
		version, phase, node := "v1.32.3", "Running", fmt.Sprintf("\n  nodeRef: {name: %s}", vm)
		if i < 3 {
			labels = "cluster.x-k8s.io/cluster-name: big, cluster.x-k8s.io/control-plane: \"\""
		}
		if i%10 == 9 {
			version, phase, node = "v1.27.16", "Provisioned", ""
		}
		fmt.Fprintf(&sb, `---
apiVersion: cluster.x-k8s.io/v1beta2
kind: Machine
metadata: {name: %[1]s, namespace: big, labels: {%[2]s}}
spec:
  clusterName: big
  version: %[3]s
  providerID: %[4]s
  bootstrap: {configRef: {apiGroup: bootstrap.cluster.x-k8s.io, kind: KubeadmConfig, name: %[1]s}}
  infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: AzureMachine, name: %[1]s}
status:
  phase: %[5]s%[6]s
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: AzureMachine
metadata: {name: %[1]s, namespace: big, labels: {cluster.x-k8s.io/cluster-name: big}}
spec: {providerID: %[4]s, vmSize: Standard_D2s_v3}
status: {ready: true, vmState: Succeeded}
`, vm, labels, version, bigProviderID(vm), phase, node)
	}
	return sb.String()
}
