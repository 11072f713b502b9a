package capi

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// The API server of the tests stores v1beta2 and converts without a webhook,
// so v1beta1-shaped objects (a management cluster on Cluster API < 1.11, or
// a v1beta1 read through CAPI's conversion webhook) are tested here, from
// YAML as such a server returns it.

func mustU(t testing.TB, s string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(s), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestConvertV1Beta1(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		conv func(*unstructured.Unstructured) any
		want any
	}{
		{
			name: "v1beta1 Cluster: old conditions in status.conditions, new ones in status.v1beta2",
			yaml: `
apiVersion: cluster.x-k8s.io/v1beta1
kind: Cluster
metadata: {name: c, namespace: ns}
spec:
  controlPlaneRef: {apiVersion: controlplane.cluster.x-k8s.io/v1beta1, kind: KubeadmControlPlane, name: c-cp, namespace: ns}
  infrastructureRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta1, kind: AzureCluster, name: c}
status:
  phase: Provisioned
  controlPlaneReady: true
  conditions:
  - {type: Ready, status: "False", severity: Warning, reason: WaitingForWorkers, lastTransitionTime: "2024-05-01T12:00:00Z"}
  v1beta2:
    conditions:
    - {type: Available, status: "False", reason: NotAvailable, message: "* WorkersAvailable: 0 of 2", lastTransitionTime: "2024-05-01T12:00:00Z"}`,
			conv: func(u *unstructured.Unstructured) any { return ConvertCluster(u) },
			want: &Cluster{
				Object: Object{
					APIVersion: "cluster.x-k8s.io/v1beta1", Kind: "Cluster", Namespace: "ns", Name: "c", Phase: "Provisioned",
					Conditions:        []Condition{cond("Available", "False", "NotAvailable", "* WorkersAvailable: 0 of 2")},
					V1Beta1Conditions: []Condition{cond1("Ready", "False", "Warning", "WaitingForWorkers", "")},
				},
				ControlPlaneRef:         Ref{APIVersion: "controlplane.cluster.x-k8s.io/v1beta1", APIGroup: "controlplane.cluster.x-k8s.io", Kind: "KubeadmControlPlane", Namespace: "ns", Name: "c-cp"},
				InfraRef:                Ref{APIVersion: "infrastructure.cluster.x-k8s.io/v1beta1", APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "AzureCluster", Namespace: "ns", Name: "c"},
				ControlPlaneInitialized: true,
			},
		},
		{
			name: "v1beta1 Cluster: ControlPlaneInitialized from the condition",
			yaml: `
apiVersion: cluster.x-k8s.io/v1beta1
kind: Cluster
metadata: {name: c, namespace: ns}
status:
  conditions:
  - {type: ControlPlaneInitialized, status: "True", lastTransitionTime: "2024-05-01T12:00:00Z"}`,
			conv: func(u *unstructured.Unstructured) any { return ConvertCluster(u).ControlPlaneInitialized },
			want: true,
		},
		{
			name: "v1beta1 Machine: refs with apiVersion, nodeRef with kind",
			yaml: `
apiVersion: cluster.x-k8s.io/v1beta1
kind: Machine
metadata: {name: m, namespace: ns, labels: {cluster.x-k8s.io/control-plane: ""}}
spec:
  clusterName: c
  version: v1.30.2
  failureDomain: "1"
  bootstrap: {configRef: {apiVersion: bootstrap.cluster.x-k8s.io/v1beta1, kind: KubeadmConfig, name: m}}
  infrastructureRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta1, kind: AzureMachine, name: m, namespace: ns}
status:
  phase: Running
  nodeRef: {apiVersion: v1, kind: Node, name: m-node, uid: 1234}
  conditions:
  - {type: Ready, status: "True", lastTransitionTime: "2024-05-01T12:00:00Z"}`,
			conv: func(u *unstructured.Unstructured) any { return ConvertMachine(u) },
			want: &Machine{
				Object: Object{
					APIVersion: "cluster.x-k8s.io/v1beta1", Kind: "Machine", Namespace: "ns", Name: "m", Phase: "Running",
					Labels:            map[string]string{ControlPlaneLabel: ""},
					V1Beta1Conditions: []Condition{cond1("Ready", "True", "", "", "")},
				},
				ClusterName: "c", Version: "v1.30.2", FailureDomain: "1", ControlPlane: true,
				InfraRef:     Ref{APIVersion: "infrastructure.cluster.x-k8s.io/v1beta1", APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "AzureMachine", Namespace: "ns", Name: "m"},
				BootstrapRef: Ref{APIVersion: "bootstrap.cluster.x-k8s.io/v1beta1", APIGroup: "bootstrap.cluster.x-k8s.io", Kind: "KubeadmConfig", Namespace: "ns", Name: "m"},
				NodeRef:      Ref{APIVersion: "v1", Kind: "Node", Name: "m-node"},
			},
		},
		{
			name: "v1beta1 MachineDeployment with status.v1beta2 counts",
			yaml: `
apiVersion: cluster.x-k8s.io/v1beta1
kind: MachineDeployment
metadata: {name: md, namespace: ns}
spec: {clusterName: c, replicas: 3, template: {spec: {version: v1.30.2}}}
status:
  replicas: 3
  readyReplicas: 3
  availableReplicas: 3
  updatedReplicas: 3
  v1beta2: {readyReplicas: 1, availableReplicas: 0, upToDateReplicas: 2}`,
			conv: func(u *unstructured.Unstructured) any { return ConvertMachineDeployment(u).Replicas },
			want: Replicas{Desired: 3, Current: 3, Ready: 1, Available: 0, UpToDate: 2},
		},
		{
			name: "v1beta1 MachineDeployment without status.v1beta2",
			yaml: `
apiVersion: cluster.x-k8s.io/v1beta1
kind: MachineDeployment
metadata: {name: md, namespace: ns}
spec: {clusterName: c, replicas: 3}
status: {replicas: 3, readyReplicas: 2, availableReplicas: 1, updatedReplicas: 3}`,
			conv: func(u *unstructured.Unstructured) any { return ConvertMachineDeployment(u).Replicas },
			want: Replicas{Desired: 3, Current: 3, Ready: 2, Available: 1, UpToDate: 3},
		},
		{
			name: "v1beta1 KubeadmControlPlane: initialized, available from unavailableReplicas",
			yaml: `
apiVersion: controlplane.cluster.x-k8s.io/v1beta1
kind: KubeadmControlPlane
metadata: {name: cp, namespace: ns}
spec: {replicas: 3, version: v1.30.2}
status: {replicas: 3, readyReplicas: 2, updatedReplicas: 3, unavailableReplicas: 1, initialized: true}`,
			conv: func(u *unstructured.Unstructured) any { return ConvertKubeadmControlPlane(u) },
			want: &KubeadmControlPlane{
				Object:  Object{APIVersion: "controlplane.cluster.x-k8s.io/v1beta1", Kind: "KubeadmControlPlane", Namespace: "ns", Name: "cp"},
				Version: "v1.30.2", Replicas: Replicas{Desired: 3, Current: 3, Ready: 2, Available: 2, UpToDate: 3}, Initialized: true,
			},
		},
		{
			name: "v1beta2-contract infrastructure machine: initialization.provisioned, deprecated failure",
			yaml: `
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: DockerMachine
metadata: {name: dm, namespace: ns}
spec: {providerID: "docker:////dm"}
status:
  initialization: {provisioned: true}
  deprecated: {v1beta1: {failureReason: CreateError, failureMessage: "container exited"}}
  conditions:
  - {type: Ready, status: "True", reason: Ready, message: "", lastTransitionTime: "2024-05-01T12:00:00Z"}`,
			conv: func(u *unstructured.Unstructured) any { return ConvertInfraMachine(u) },
			want: &InfraMachine{
				Object: Object{
					APIVersion: "infrastructure.cluster.x-k8s.io/v1beta2", Kind: "DockerMachine", Namespace: "ns", Name: "dm",
					Conditions: []Condition{cond("Ready", "True", "Ready", "")},
				},
				ProviderID: "docker:////dm", Ready: true, FailureReason: "CreateError", FailureMessage: "container exited",
			},
		},
		{
			name: "AzureMachinePool: provisioningState as VM state, providerIDList",
			yaml: `
apiVersion: cluster.x-k8s.io/v1beta2
kind: MachinePool
metadata: {name: mp, namespace: ns}
spec:
  clusterName: c
  replicas: 2
  providerIDList: ["azure:///a", "azure:///b"]
  template: {spec: {version: v1.33.1, infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: AzureMachinePool, name: mp}}}
status: {replicas: 2, readyReplicas: 1}`,
			conv: func(u *unstructured.Unstructured) any { return ConvertMachinePool(u) },
			want: &MachinePool{
				Object:      Object{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "MachinePool", Namespace: "ns", Name: "mp"},
				ClusterName: "c", Version: "v1.33.1", Replicas: Replicas{Desired: 2, Current: 2, Ready: 1},
				InfraRef:    Ref{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "AzureMachinePool", Namespace: "ns", Name: "mp"},
				ProviderIDs: []string{"azure:///a", "azure:///b"},
			},
		},
		{
			name: "wrong types are missing fields, not panics",
			yaml: `
apiVersion: cluster.x-k8s.io/v1beta2
kind: Machine
metadata: {name: m, namespace: ns}
spec: {clusterName: 7, infrastructureRef: "AzureMachine/m", version: [1]}
status: {phase: {x: 1}, conditions: [1, "x", {type: Ready, status: "True", lastTransitionTime: "yesterday"}], addresses: "10.0.0.1"}`,
			conv: func(u *unstructured.Unstructured) any { return ConvertMachine(u) },
			want: &Machine{
				Object: Object{
					APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Machine", Namespace: "ns", Name: "m",
					Conditions: []Condition{{Type: "Ready", Status: "True"}},
				},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.conv(mustU(t, tt.yaml))
			if diff := cmp.Diff(tt.want, got, cmpModel...); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzConvert: no object the API server (or a YAML dump) could hand over
// makes a conversion panic.
func FuzzConvert(f *testing.F) {
	for _, s := range []string{
		`{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Machine","status":{"conditions":[{"type":"Ready"}],"v1beta2":{"conditions":[1]}}}`,
		`{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"MachineDeployment","spec":{"replicas":"x"},"status":{"deprecated":{"v1beta1":[]}}}`,
		`{"metadata":{"labels":{"a":1}},"spec":{"infrastructureRef":{"apiVersion":"/","kind":3}}}`,
		`{"status":{"matchingClusters":[{"name":1},"x"],"targets":[1,"m"],"addresses":[{"type":1}]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m := map[string]any{}
		if err := json.Unmarshal(b, &m); err != nil {
			return
		}
		u := &unstructured.Unstructured{Object: m}
		ConvertCluster(u)
		ConvertMachine(u)
		ConvertInfraMachine(u)
		ConvertMachineSet(u)
		ConvertMachineDeployment(u)
		ConvertMachinePool(u)
		ConvertMachineHealthCheck(u)
		ConvertKubeadmControlPlane(u)
		h := ConvertHelmChartProxy(u)
		_, _ = h.Selects(map[string]string{"cni": "calico"})
		_ = h.Unmet(map[string]string{"cni": "calico"})
		_ = h.SelectorString()
		ConvertHelmReleaseProxy(u)
	})
}
