package artifacts

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodediag/nodediag/collector/incident"
)

// The layouts of the collectors, one test each: the example tree (a
// healthy control plane, and worker capz-e2e-md-0-6b8f9-x7k2l whose
// kubeadm join was refused its token) with the worker's evidence given in
// that layout's files only. Each test says, before analyze runs, which
// cause the incident must name on which Machine.

// layout is a copy of the example tree to rewrite.
type layout struct {
	t    *testing.T
	root string
}

func newLayout(t *testing.T) *layout { return &layout{t: t, root: copyTree(t)} }

func (l *layout) worker() string {
	return filepath.Join(l.root, "clusters", "capz-e2e", "machines", workerMachine)
}

// write writes body at rel below the tree's root.
func (l *layout) write(rel, body string) {
	l.t.Helper()
	p := filepath.Join(l.root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		l.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		l.t.Fatal(err)
	}
}

// removeWorker removes the worker's machine directory: its VM could not
// be reached (SSH failed), or the collector never ran there.
func (l *layout) removeWorker() {
	l.t.Helper()
	if err := os.RemoveAll(l.worker()); err != nil {
		l.t.Fatal(err)
	}
}

func (l *layout) read(rel string) string {
	l.t.Helper()
	b, err := os.ReadFile(filepath.Join(l.root, filepath.FromSlash(rel)))
	if err != nil {
		l.t.Fatal(err)
	}
	return string(b)
}

// incident analyzes the tree and returns its one incident.
func (l *layout) incident() (*Result, *incident.Incident) {
	l.t.Helper()
	res, err := Analyze(context.Background(), l.root, engine(l.t))
	if err != nil {
		l.t.Fatal(err)
	}
	if len(res.Clusters) != 1 || res.Clusters[0].Incident == nil {
		l.t.Fatalf("clusters %+v", res.Clusters)
	}
	return res, res.Clusters[0].Incident
}

func findingOf(inc *incident.Incident, key string) *incident.Finding {
	for i := range inc.Findings {
		if inc.Findings[i].Key == key {
			return &inc.Findings[i]
		}
	}
	return nil
}

func findingKeys(inc *incident.Incident) []string {
	var out []string
	for _, f := range inc.Findings {
		out = append(out, f.Key+" <- "+strings.Join(f.ExplainedBy, ","))
	}
	return out
}

// The worker's VM was never made: only the resource group's activity log
// says why. The quota message is Azure's, as quoted in
// https://github.com/Azure/azure_preview_modules/issues/360 ("Operation
// could not be completed as it results in exceeding approved Total
// Regional Cores quota. Additional details - Deployment Model: Resource
// Manager, Location: eastus, Current Limit: 100, Current Usage: 100,
// Additional Required: 1, (Minimum) New Limit Required: 101."); the event
// around it is written in the shape CAPZ's collectActivityLogs gives
// (armmonitor.EventData's Go field names).
func TestLayoutActivityLogOnly(t *testing.T) {
	l := newLayout(t)
	l.removeWorker()
	vm := "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/capz-e2e-rg/providers/Microsoft.Compute/virtualMachines/" + workerVM
	l.write("clusters/capz-e2e/azure-activity-logs/capz-e2e-rg.log", `{
    "Authorization": null,
    "Caller": "00000000-0000-0000-0000-000000000000",
    "Category": {
        "localizedValue": "Administrative",
        "value": "Administrative"
    },
    "Level": "Informational",
    "OperationName": {
        "localizedValue": "Create or Update Virtual Machine",
        "value": "Microsoft.Compute/virtualMachines/write"
    },
    "ResourceID": "`+vm+`",
    "Status": {
        "localizedValue": "Started",
        "value": "Started"
    },
    "EventTimestamp": "2024-05-01T00:01:00.1234567Z"
}
{
    "Authorization": null,
    "Category": {
        "localizedValue": "Administrative",
        "value": "Administrative"
    },
    "Level": "Error",
    "OperationName": {
        "localizedValue": "Create or Update Virtual Machine",
        "value": "Microsoft.Compute/virtualMachines/write"
    },
    "Properties": {
        "statusCode": "Conflict",
        "statusMessage": "{\"status\":\"Failed\",\"error\":{\"code\":\"OperationNotAllowed\",\"message\":\"Operation could not be completed as it results in exceeding approved Total Regional Cores quota. Additional details - Deployment Model: Resource Manager, Location: eastus, Current Limit: 100, Current Usage: 100, Additional Required: 1, (Minimum) New Limit Required: 101.\"}}"
    },
    "ResourceID": "`+vm+`",
    "Status": {
        "localizedValue": "Failed",
        "value": "Failed"
    },
    "EventTimestamp": "2024-05-01T00:01:02.1234567Z"
}
`)
	// Expected: the AzureMachine's activity log failure is the cause of
	// the worker Machine not running, and leads the report.
	_, inc := l.incident()
	key := "ControllerReconcileError/AzureMachine/" + workerVM
	f := findingOf(inc, key)
	if f == nil {
		t.Fatalf("no %s: %v", key, findingKeys(inc))
	}
	if !strings.Contains(f.Title, "OperationNotAllowed: Operation could not be completed as it results in exceeding approved Total Regional Cores quota") || f.Domain != incident.DomainCloud {
		t.Errorf("title %q domain %s", f.Title, f.Domain)
	}
	// (The tree's AzureMachine also carries the bootstrap extension's
	// failure, InfraMachineFailed: it explains the Machine too, after.)
	m := findingOf(inc, "MachineNotRunning/Machine/"+workerMachine)
	if m == nil || len(m.ExplainedBy) == 0 || m.ExplainedBy[0] != key {
		t.Errorf("the worker's Machine finding is not explained by the quota: %v", findingKeys(inc))
	}
	if inc.RootCause == nil || inc.RootCause.Finding != key {
		t.Errorf("root cause %+v, want %s", inc.RootCause, key)
	}
	if len(f.Evidence) != 1 || !strings.Contains(f.Evidence[0].Source, "capz-e2e-rg.log (event 2)") {
		t.Errorf("evidence %+v", f.Evidence)
	}
}

// The worker is an instance of MachinePool capz-e2e-mp-0 (a uniform scale
// set): CAPZ's collector writes its logs under machine-pools/POOL/ by the
// VMSS computer name (capz-e2e-mp-0000001 is instance 1), while its
// Machine, capz-e2e-mp-0-1, names the instance in its provider ID.
func TestLayoutMachinePool(t *testing.T) {
	l := newLayout(t)
	res := "clusters/bootstrap/resources/demo/"
	for _, rel := range []string{"Machine/" + workerMachine + ".yaml", "MachineDeployment/capz-e2e-md-0.yaml", "MachineSet/capz-e2e-md-0-6b8f9.yaml", "AzureMachine/" + workerVM + ".yaml"} {
		if err := os.Remove(filepath.Join(l.root, res+rel)); err != nil {
			t.Fatal(err)
		}
	}
	pid := "azure:///subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/capz-e2e-rg/providers/Microsoft.Compute/virtualMachineScaleSets/capz-e2e-mp-0/virtualMachines/1"
	l.write(res+"Machine/capz-e2e-mp-0-1.yaml", `apiVersion: cluster.x-k8s.io/v1beta2
kind: Machine
metadata:
  creationTimestamp: "2024-05-01T00:00:30Z"
  labels:
    cluster.x-k8s.io/cluster-name: capz-e2e
    cluster.x-k8s.io/pool-name: capz-e2e-mp-0
  name: capz-e2e-mp-0-1
  namespace: demo
spec:
  bootstrap:
    dataSecretName: capz-e2e-mp-0
  clusterName: capz-e2e
  infrastructureRef:
    apiGroup: infrastructure.cluster.x-k8s.io
    kind: AzureMachinePoolMachine
    name: capz-e2e-mp-0-1
  providerID: `+pid+`
  version: v1.32.3
status:
  conditions:
  - lastTransitionTime: "2024-05-01T00:10:00Z"
    message: Waiting for a Node with spec.providerID `+pid+` to exist
    reason: NodeDoesNotExist
    status: Unknown
    type: NodeHealthy
  phase: Provisioned
`)
	l.write(res+"MachinePool/capz-e2e-mp-0.yaml", `apiVersion: cluster.x-k8s.io/v1beta2
kind: MachinePool
metadata:
  creationTimestamp: "2024-05-01T00:00:30Z"
  labels:
    cluster.x-k8s.io/cluster-name: capz-e2e
  name: capz-e2e-mp-0
  namespace: demo
spec:
  clusterName: capz-e2e
  replicas: 1
  template:
    spec:
      bootstrap:
        configRef:
          apiGroup: bootstrap.cluster.x-k8s.io
          kind: KubeadmConfig
          name: capz-e2e-mp-0
      clusterName: capz-e2e
      infrastructureRef:
        apiGroup: infrastructure.cluster.x-k8s.io
        kind: AzureMachinePool
        name: capz-e2e-mp-0
      version: v1.32.3
  providerIDList:
  - `+pid+`
status:
  conditions:
  - lastTransitionTime: "2024-05-01T00:10:00Z"
    message: 0 of 1 replicas ready
    reason: WaitingForReplicasReady
    status: "False"
    type: Ready
  phase: ScalingUp
  readyReplicas: 0
  replicas: 1
`)
	pool := filepath.Join(l.root, "clusters", "capz-e2e", "machine-pools", "capz-e2e-mp-0", "capz-e2e-mp-0000001")
	if err := os.MkdirAll(filepath.Dir(pool), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(l.worker(), pool); err != nil {
		t.Fatal(err)
	}
	// Expected: the instance's own cause (its join token refused) on
	// Machine capz-e2e-mp-0-1, joined by the instance, leading the report;
	// the pool's not being ready explained by it.
	_, inc := l.incident()
	mk := "MachineNotRunning/Machine/capz-e2e-mp-0-1"
	m := findingOf(inc, mk)
	if m == nil || m.NodeCause == nil || m.NodeCause.ID != "JoinTokenInvalid" {
		t.Fatalf("no node cause on %s: %v", mk, findingKeys(inc))
	}
	for _, row := range inc.Machines {
		if row.Machine == "capz-e2e-mp-0-1" && row.MatchedBy != incident.MatchPoolInstance {
			t.Errorf("pool Machine joined by %q", row.MatchedBy)
		}
	}
	p := findingOf(inc, "MachinePoolNotReady/MachinePool/capz-e2e-mp-0")
	if p == nil || !p.Consequence || len(p.ExplainedBy) != 1 || p.ExplainedBy[0] != mk {
		t.Errorf("the pool's finding is not explained by its instance: %v", findingKeys(inc))
	}
	if inc.RootCause == nil || inc.RootCause.Finding != mk {
		t.Errorf("root cause %+v, want %s", inc.RootCause, mk)
	}
}
