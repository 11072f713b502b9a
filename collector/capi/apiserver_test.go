package capi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/nodediag/nodediag/internal/testenv/kubeenv"
)

// t0 is the lastTransitionTime of every condition in testdata.
var t0 = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// cmpModel compares models, leaving out what the API server makes up (UID,
// creationTimestamp) and the raw objects.
var cmpModel = []cmp.Option{
	cmpopts.IgnoreFields(Object{}, "Raw", "UID", "CreationTimestamp"),
	cmpopts.EquateEmpty(),
}

// cond is a v1beta2 condition, cond1 a v1beta1 one.
func cond(typ, status, reason, message string) Condition {
	return Condition{Type: typ, Status: status, Reason: reason, Message: message, LastTransitionTime: t0}
}

func cond1(typ, status, severity, reason, message string) Condition {
	return Condition{Type: typ, Status: status, Severity: severity, Reason: reason, Message: message, LastTransitionTime: t0}
}

func obj(apiVersion, kind, ns, name string, labels map[string]string) Object {
	return Object{APIVersion: apiVersion, Kind: kind, Namespace: ns, Name: name, Labels: labels}
}

const (
	v1beta2  = "cluster.x-k8s.io/v1beta2"
	kcpV     = "controlplane.cluster.x-k8s.io/v1beta2"
	kcV      = "bootstrap.cluster.x-k8s.io/v1beta2"
	azV      = "infrastructure.cluster.x-k8s.io/v1beta1"
	addonV   = "addons.cluster.x-k8s.io/v1alpha1"
	infraG   = "infrastructure.cluster.x-k8s.io"
	azureSub = "azure:///subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/"
)

func clusterLabel(name string, more ...string) map[string]string {
	m := map[string]string{ClusterNameLabel: name}
	for i := 0; i+1 < len(more); i += 2 {
		m[more[i]] = more[i+1]
	}
	return m
}

func infraRef(kind, ns, name string) Ref {
	return Ref{APIGroup: infraG, Kind: kind, Namespace: ns, Name: name}
}

func kcpRef(ns, name string) Ref {
	return Ref{APIGroup: "controlplane.cluster.x-k8s.io", Kind: "KubeadmControlPlane", Namespace: ns, Name: name}
}

func kcRef(ns, name string) Ref {
	return Ref{APIGroup: "bootstrap.cluster.x-k8s.io", Kind: "KubeadmConfig", Namespace: ns, Name: name}
}

func nodeRef(name string) Ref { return Ref{APIVersion: "v1", Kind: "Node", Name: name} }

// server is one API server for all tests of the package (each scenario in
// its own namespace): starting one takes seconds and half a GB.
type server struct {
	cfg *rest.Config
	srv *kubeenv.APIServer
	dyn dynamic.Interface
	rm  *restmapper.DeferredDiscoveryRESTMapper
}

func startServer(t testing.TB) *server {
	cfg, srv := kubeenv.StartAPIServer(t)
	cfg.QPS, cfg.Burst = 200, 400
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &server{cfg: cfg, srv: srv, dyn: dyn, rm: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
}

// create creates u (without status) and, if it has one, writes its status
// through /status as a controller does.
func (s *server) create(ctx context.Context, t testing.TB, u *unstructured.Unstructured) {
	t.Helper()
	gvk := u.GroupVersionKind()
	m, err := s.rm.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		t.Fatalf("%s: %v", gvk, err)
	}
	ri := s.dyn.Resource(m.Resource).Namespace(u.GetNamespace())
	status, hasStatus := u.Object["status"]
	created, err := ri.Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %s %s/%s: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	if !hasStatus {
		return
	}
	created.Object["status"] = status
	if _, err := ri.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update status of %s %s/%s: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
}

func (s *server) namespace(ctx context.Context, t testing.TB, ns string) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}
	_, err := s.dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Create(ctx, u, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// load creates the objects of testdata/NAME.yaml with their status, as
// kubeenv.Load does.
func (s *server) load(ctx context.Context, t testing.TB, name string) {
	t.Helper()
	if err := kubeenv.LoadFile(ctx, s.cfg, filepath.Join("testdata", name+".yaml")); err != nil {
		t.Fatal(err)
	}
}

// Expected models of the testdata clusters.

func healthyWant() *Cluster {
	const ns = "healthy"
	machine := func(name string, cp bool, addr string, labels map[string]string) *Machine {
		return &Machine{
			Object: Object{
				APIVersion: v1beta2, Kind: "Machine", Namespace: ns, Name: name, Labels: labels, Phase: "Running",
				Conditions: []Condition{cond("Ready", "True", "Ready", "")},
			},
			ClusterName: "ok", Version: "v1.33.1", ProviderID: azureSub + "ok-rg/providers/Microsoft.Compute/virtualMachines/" + name,
			ControlPlane: cp,
			InfraRef:     infraRef("AzureMachine", ns, name),
			BootstrapRef: kcRef(ns, name),
			NodeRef:      nodeRef(name),
			Addresses:    []Address{{"InternalIP", addr}},
			Infra: &InfraMachine{
				Object: Object{
					APIVersion: azV, Kind: "AzureMachine", Namespace: ns, Name: name, Labels: clusterLabel("ok"),
					V1Beta1Conditions: []Condition{cond1("Ready", "True", "", "", "")},
				},
				ProviderID: azureSub + "ok-rg/providers/Microsoft.Compute/virtualMachines/" + name,
				Ready:      true, VMState: "Succeeded",
			},
		}
	}
	cp := machine("ok-cp-h5v2q", true, "10.0.0.4", clusterLabel("ok", ControlPlaneLabel, ""))
	cp.Addresses = append(cp.Addresses, Address{"Hostname", "ok-cp-h5v2q"})
	cp.Conditions = append(cp.Conditions, cond("NodeHealthy", "True", "NodeHealthy", ""))
	cp.Infra.V1Beta1Conditions = append(cp.Infra.V1Beta1Conditions, cond1("BootstrapSucceeded", "True", "", "", ""))
	mdLabels := clusterLabel("ok", "cluster.x-k8s.io/deployment-name", "ok-md-0")
	const vmss = azureSub + "ok-rg/providers/Microsoft.Compute/virtualMachineScaleSets/ok-mp-0/virtualMachines/"
	kc := func(name string) *Object {
		o := obj(kcV, "KubeadmConfig", ns, name, clusterLabel("ok"))
		return &o
	}
	return &Cluster{
		Object: Object{
			APIVersion: v1beta2, Kind: "Cluster", Namespace: ns, Name: "ok",
			Labels: map[string]string{"cni": "calico", "cloud-provider": "azure"}, Phase: "Provisioned",
			Conditions: []Condition{
				cond("Available", "True", "Available", ""),
				cond("ControlPlaneInitialized", "True", "Initialized", ""),
			},
		},
		ControlPlaneRef:         kcpRef(ns, "ok-cp"),
		InfraRef:                infraRef("AzureCluster", ns, "ok"),
		ControlPlaneInitialized: true,
		Infra: &Object{
			APIVersion: azV, Kind: "AzureCluster", Namespace: ns, Name: "ok", Labels: clusterLabel("ok"),
			V1Beta1Conditions: []Condition{cond1("Ready", "True", "", "", "")},
		},
		ControlPlane: &KubeadmControlPlane{
			Object: Object{
				APIVersion: kcpV, Kind: "KubeadmControlPlane", Namespace: ns, Name: "ok-cp", Labels: clusterLabel("ok"),
				Conditions: []Condition{cond("Available", "True", "Available", "")},
			},
			Version: "v1.33.1", Replicas: Replicas{Desired: 1, Current: 1, Ready: 1, Available: 1, UpToDate: 1}, Initialized: true,
		},
		Machines: []*Machine{cp, machine("ok-md-0-7f9c4-a", false, "10.1.0.4", mdLabels), machine("ok-md-0-7f9c4-b", false, "10.1.0.5", mdLabels)},
		MachineSets: []*MachineSet{{
			Object:      obj(v1beta2, "MachineSet", ns, "ok-md-0-7f9c4", mdLabels),
			ClusterName: "ok", Replicas: Replicas{Desired: 2, Current: 2, Ready: 2, Available: 2, UpToDate: 2},
		}},
		MachineDeployments: []*MachineDeployment{{
			Object: Object{
				APIVersion: v1beta2, Kind: "MachineDeployment", Namespace: ns, Name: "ok-md-0", Labels: clusterLabel("ok"), Phase: "Running",
				Conditions: []Condition{cond("Available", "True", "Available", "")},
			},
			ClusterName: "ok", Version: "v1.33.1", Replicas: Replicas{Desired: 2, Current: 2, Ready: 2, Available: 2, UpToDate: 2},
		}},
		MachinePools: []*MachinePool{{
			Object: Object{
				APIVersion: v1beta2, Kind: "MachinePool", Namespace: ns, Name: "ok-mp-0", Labels: clusterLabel("ok"), Phase: "Running",
			},
			ClusterName: "ok", Version: "v1.33.1", Replicas: Replicas{Desired: 2, Current: 2, Ready: 2, Available: 2, UpToDate: 2},
			InfraRef:    infraRef("AzureMachinePool", ns, "ok-mp-0"),
			ProviderIDs: []string{vmss + "0", vmss + "1"},
			Infra: &InfraMachine{
				Object:  obj(azV, "AzureMachinePool", ns, "ok-mp-0", clusterLabel("ok")),
				Ready:   true,
				VMState: "Succeeded",
			},
		}},
		MachineHealthChecks: []*MachineHealthCheck{{
			Object:      obj(v1beta2, "MachineHealthCheck", ns, "ok-md-0", clusterLabel("ok")),
			ClusterName: "ok", ExpectedMachines: 2, CurrentHealthy: 2, RemediationsAllowed: 2,
			Targets: []string{"ok-md-0-7f9c4-a", "ok-md-0-7f9c4-b"},
		}},
		KubeadmConfigs: map[string]*Object{
			"ok-cp-h5v2q": kc("ok-cp-h5v2q"), "ok-md-0-7f9c4-a": kc("ok-md-0-7f9c4-a"), "ok-md-0-7f9c4-b": kc("ok-md-0-7f9c4-b"),
		},
		HelmChartProxies: []*HelmChartProxy{
			{
				Object: Object{
					APIVersion: addonV, Kind: "HelmChartProxy", Namespace: ns, Name: "calico",
					V1Beta1Conditions: []Condition{cond1("Ready", "True", "", "", "")},
				},
				ChartName: "tigera-operator", ClusterSelector: map[string]string{"cni": "calico"}, MatchingClusters: []string{"ok"},
			},
			{
				Object:    obj(addonV, "HelmChartProxy", ns, "cloud-provider-azure", nil),
				ChartName: "cloud-provider-azure", ClusterSelector: map[string]string{"cloud-provider": "azure"}, MatchingClusters: []string{"ok"},
			},
		},
		HelmReleaseProxies: []*HelmReleaseProxy{
			{
				Object:      obj(addonV, "HelmReleaseProxy", ns, "calico-ok-x2b9d", clusterLabel("ok", "helmreleaseproxy.addons.cluster.x-k8s.io/name", "calico")),
				ClusterName: "ok", ChartName: "tigera-operator", Status: "deployed",
			},
			{
				Object:      obj(addonV, "HelmReleaseProxy", ns, "cloud-provider-azure-ok-8ksl2", clusterLabel("ok", "helmreleaseproxy.addons.cluster.x-k8s.io/name", "cloud-provider-azure")),
				ClusterName: "ok", ChartName: "cloud-provider-azure", Status: "deployed",
			},
		},
	}
}

func stuckWorkerWant() *Cluster {
	const ns = "stuck-worker"
	const m = "sw-md-0-abcde-q8m4z"
	pid := azureSub + "sw-rg/providers/Microsoft.Compute/virtualMachines/" + m
	waiting := "Waiting for a Node with spec.providerID " + pid + " to exist"
	return &Cluster{
		Object: Object{
			APIVersion: v1beta2, Kind: "Cluster", Namespace: ns, Name: "sw", Phase: "Provisioned",
			Conditions: []Condition{cond("Available", "False", "NotAvailable", "* WorkersAvailable: 0 available replicas, at least 1 required")},
		},
		ControlPlaneRef:         kcpRef(ns, "sw-cp"),
		InfraRef:                infraRef("AzureCluster", ns, "sw"),
		ControlPlaneInitialized: true,
		Infra:                   &Object{APIVersion: azV, Kind: "AzureCluster", Namespace: ns, Name: "sw"},
		ControlPlane: &KubeadmControlPlane{
			Object:  obj(kcpV, "KubeadmControlPlane", ns, "sw-cp", clusterLabel("sw")),
			Version: "v1.33.1", Replicas: Replicas{Desired: 1, Current: 1, Ready: 1, Available: 1, UpToDate: 1}, Initialized: true,
		},
		MachineDeployments: []*MachineDeployment{{
			Object: Object{
				APIVersion: v1beta2, Kind: "MachineDeployment", Namespace: ns, Name: "sw-md-0", Labels: clusterLabel("sw"), Phase: "ScalingUp",
				Conditions: []Condition{cond("Available", "False", "WaitingForAvailableMachines", "0 available replicas, at least 1 required")},
			},
			ClusterName: "sw", Version: "v1.33.1", Replicas: Replicas{Desired: 1, Current: 1, UpToDate: 1},
		}},
		Machines: []*Machine{{
			Object: Object{
				APIVersion: v1beta2, Kind: "Machine", Namespace: ns, Name: m, Phase: "Provisioned",
				Labels: clusterLabel("sw", "cluster.x-k8s.io/deployment-name", "sw-md-0"),
				Conditions: []Condition{
					cond("Ready", "False", "NotReady", "* NodeHealthy: "+waiting),
					cond("NodeHealthy", "Unknown", "NodeDoesNotExist", waiting),
				},
			},
			ClusterName: "sw", Version: "v1.33.1", ProviderID: pid, FailureDomain: "2",
			InfraRef: infraRef("AzureMachine", ns, m), BootstrapRef: kcRef(ns, m),
			Addresses: []Address{{"InternalIP", "10.1.0.7"}},
			Infra: &InfraMachine{
				Object: Object{
					APIVersion: azV, Kind: "AzureMachine", Namespace: ns, Name: m, Labels: clusterLabel("sw"),
					V1Beta1Conditions: []Condition{
						cond1("Ready", "False", "Error", "BootstrapFailed", "1 of 2 completed"),
						cond1("BootstrapSucceeded", "False", "Error", "BootstrapFailed", "VM bootstrapping failed: cloud-init exited with 1 (see /var/log/cloud-init-output.log)"),
						cond1("VMRunning", "True", "", "", ""),
					},
				},
				ProviderID: pid, Ready: true, VMState: "Succeeded",
			},
		}},
		KubeadmConfigs: map[string]*Object{m: func() *Object { o := obj(kcV, "KubeadmConfig", ns, m, clusterLabel("sw")); return &o }()},
	}
}

func firstCPWant() *Cluster {
	const ns = "first-cp"
	const m = "fcp-cp-x7k2p"
	return &Cluster{
		Object: Object{
			APIVersion: v1beta2, Kind: "Cluster", Namespace: ns, Name: "fcp", Labels: map[string]string{"cni": "calico"}, Phase: "Provisioned",
			Conditions: []Condition{
				cond("Available", "False", "NotAvailable", "* ControlPlaneAvailable: Control plane not yet initialized"),
				cond("ControlPlaneInitialized", "False", "NotInitialized", "Control plane not yet initialized"),
			},
		},
		ControlPlaneRef: kcpRef(ns, "fcp-cp"),
		InfraRef:        infraRef("AzureCluster", ns, "fcp"),
		Infra:           &Object{APIVersion: azV, Kind: "AzureCluster", Namespace: ns, Name: "fcp"},
		ControlPlane: &KubeadmControlPlane{
			Object: Object{
				APIVersion: kcpV, Kind: "KubeadmControlPlane", Namespace: ns, Name: "fcp-cp", Labels: clusterLabel("fcp"),
				Conditions: []Condition{
					cond("Available", "False", "NotAvailable", "Control plane not yet initialized"),
					cond("ScalingUp", "True", "ScalingUp", "Scaling up from 1 to 3 replicas is blocked because:\n* Waiting for the first control plane Machine to be available"),
				},
				V1Beta1Conditions: []Condition{cond1("Available", "False", "Info", "WaitingForKubeadmInit", "")},
			},
			Version: "v1.33.1", Replicas: Replicas{Desired: 3, Current: 1, UpToDate: 1},
		},
		Machines: []*Machine{{
			Object: Object{
				APIVersion: v1beta2, Kind: "Machine", Namespace: ns, Name: m, Phase: "Provisioning",
				Labels:     clusterLabel("fcp", ControlPlaneLabel, ""),
				Conditions: []Condition{cond("InfrastructureReady", "False", "NotReady", "* VMRunning: VM is being created")},
			},
			ClusterName: "fcp", Version: "v1.33.1", ControlPlane: true,
			InfraRef: infraRef("AzureMachine", ns, m), BootstrapRef: kcRef(ns, m),
			Infra: &InfraMachine{
				Object: Object{
					APIVersion: azV, Kind: "AzureMachine", Namespace: ns, Name: m,
					V1Beta1Conditions: []Condition{cond1("VMRunning", "False", "Info", "Creating", "VM is being created")},
				},
				VMState: "Creating",
			},
		}},
		KubeadmConfigs: map[string]*Object{m: func() *Object { o := obj(kcV, "KubeadmConfig", ns, m, nil); return &o }()},
	}
}

func preflightWant() *Cluster {
	const ns = "preflight"
	machine := func(name, phase string, nodeRef Ref, conds ...Condition) *Machine {
		return &Machine{
			Object: Object{
				APIVersion: v1beta2, Kind: "Machine", Namespace: ns, Name: name, Phase: phase,
				Labels: clusterLabel("pf", ControlPlaneLabel, ""), Conditions: conds,
			},
			ClusterName: "pf", Version: "v1.33.1", ControlPlane: true,
			InfraRef: infraRef("AzureMachine", ns, name), BootstrapRef: kcRef(ns, name), NodeRef: nodeRef,
		}
	}
	return &Cluster{
		Object:                  obj(v1beta2, "Cluster", ns, "pf", nil),
		ControlPlaneRef:         kcpRef(ns, "pf-cp"),
		InfraRef:                infraRef("AzureCluster", ns, "pf"),
		ControlPlaneInitialized: true,
		Infra:                   &Object{APIVersion: azV, Kind: "AzureCluster", Namespace: ns, Name: "pf"},
		ControlPlane: &KubeadmControlPlane{
			Object: Object{
				APIVersion: kcpV, Kind: "KubeadmControlPlane", Namespace: ns, Name: "pf-cp", Labels: clusterLabel("pf"),
				Conditions: []Condition{
					cond("Available", "True", "Available", ""),
					cond("ScalingUp", "True", "ScalingUp", "Scaling up from 2 to 3 replicas is blocked because:\n* Waiting for control plane to pass preflight checks to continue reconciliation: Machine pf-cp-b2 does not have APIServerPodHealthy, EtcdMemberHealthy conditions"),
					cond("ControlPlaneComponentsHealthy", "False", "NotHealthy", "* Machine pf-cp-b2:\n  * APIServerPodHealthy: Waiting for the Pod kube-apiserver-pf-cp-b2 to be created"),
					cond("EtcdClusterHealthy", "Unknown", "HealthUnknown", "* Machine pf-cp-b2:\n  * EtcdMemberHealthy: Waiting for a Node with spec.providerID to exist"),
				},
			},
			Version: "v1.33.1", Replicas: Replicas{Desired: 3, Current: 2, Ready: 1, Available: 1, UpToDate: 2}, Initialized: true,
		},
		Machines: []*Machine{
			machine("pf-cp-a1", "Running", nodeRef("pf-cp-a1"),
				cond("APIServerPodHealthy", "True", "Running", ""), cond("EtcdMemberHealthy", "True", "Healthy", "")),
			machine("pf-cp-b2", "Provisioned", Ref{},
				cond("NodeHealthy", "Unknown", "NodeDoesNotExist", "Waiting for a Node with spec.providerID to exist")),
		},
		// Neither the AzureMachines nor the KubeadmConfigs exist: two
		// objects of each kind are read with GETs, each a NotFound.
		Problems: []ReadProblem{
			notFound("azuremachines."+infraG, ns, "pf-cp-a1"),
			notFound("azuremachines."+infraG, ns, "pf-cp-b2"),
			notFound("kubeadmconfigs.bootstrap.cluster.x-k8s.io", ns, "pf-cp-a1"),
			notFound("kubeadmconfigs.bootstrap.cluster.x-k8s.io", ns, "pf-cp-b2"),
		},
	}
}

func notFound(resource, ns, name string) ReadProblem {
	return ReadProblem{Resource: resource, Verb: "get", NotFound: true, Name: ns + "/" + name}
}

func v1beta1CondsWant() *Cluster {
	const ns = "v1beta1-conditions"
	return &Cluster{
		Object: Object{
			APIVersion: v1beta2, Kind: "Cluster", Namespace: ns, Name: "old", Phase: "Provisioned",
			Conditions: []Condition{cond("Available", "False", "NotAvailable", "* ControlPlaneAvailable: Control plane not yet initialized")},
			V1Beta1Conditions: []Condition{
				cond1("Ready", "False", "Warning", "WaitingForControlPlane", "Waiting for the control plane"),
				cond1("ControlPlaneInitialized", "False", "Info", "WaitingForControlPlaneProviderInitialized", ""),
			},
		},
		ControlPlaneRef: kcpRef(ns, "old-cp"),
		ControlPlane: &KubeadmControlPlane{
			Object:  obj(kcpV, "KubeadmControlPlane", ns, "old-cp", nil),
			Version: "v1.32.4", Replicas: Replicas{Desired: 1, Current: 1, UpToDate: 1},
		},
		MachineDeployments: []*MachineDeployment{{
			Object: Object{
				APIVersion: v1beta2, Kind: "MachineDeployment", Namespace: ns, Name: "old-md-0", Labels: clusterLabel("old"),
				V1Beta1Conditions: []Condition{cond1("Available", "False", "Warning", "WaitingForAvailableMachines", "Minimum availability requires 2 replicas, current 1 available")},
			},
			ClusterName: "old", Version: "v1.32.4", Replicas: Replicas{Desired: 2, Current: 2, Ready: 1, Available: 1, UpToDate: 2},
		}},
		Machines: []*Machine{{
			Object: Object{
				APIVersion: v1beta2, Kind: "Machine", Namespace: ns, Name: "old-md-0-a", Phase: "Failed", Labels: clusterLabel("old"),
				V1Beta1Conditions: []Condition{cond1("Ready", "False", "Error", "InfrastructureFailed", "VM provisioning failed")},
			},
			ClusterName: "old", Version: "v1.32.4", InfraRef: infraRef("AzureMachine", ns, "old-md-0-a"),
			Infra: &InfraMachine{
				Object:  obj(azV, "AzureMachine", ns, "old-md-0-a", nil),
				VMState: "Failed", FailureReason: "CreateError",
				FailureMessage: "failed to create VM: SkuNotAvailable: Standard_D2s_v3 is not available in westeurope zone 3",
			},
		}},
	}
}

func notServedWant() *Cluster {
	const ns = "not-served"
	machine := func(name string, ref Ref) *Machine {
		return &Machine{
			Object:      obj(v1beta2, "Machine", ns, name, clusterLabel("ns")),
			ClusterName: "ns", InfraRef: ref,
		}
	}
	return &Cluster{
		Object:          obj(v1beta2, "Cluster", ns, "ns", nil),
		ControlPlaneRef: kcpRef(ns, "ns-cp"),
		InfraRef:        Ref{APIGroup: "infrastructure.example.com", Kind: "FooCluster", Namespace: ns, Name: "ns"},
		ControlPlane: &KubeadmControlPlane{
			Object:  obj(kcpV, "KubeadmControlPlane", ns, "ns-cp", nil),
			Version: "v1.33.1", Replicas: Replicas{Desired: 1},
		},
		Machines: []*Machine{
			machine("ns-az-1", infraRef("AzureMachine", ns, "ns-az-1")),
			machine("ns-foo-1", Ref{APIGroup: "infrastructure.example.com", Kind: "FooMachine", Namespace: ns, Name: "ns-foo-1"}),
		},
		Problems: []ReadProblem{
			notFound("azuremachines."+infraG, ns, "ns-az-1"),
			{Resource: "foocluster.infrastructure.example.com", Verb: "get", NotServed: true},
			{Resource: "foomachine.infrastructure.example.com", Verb: "get", NotServed: true},
		},
	}
}

// scenarios are the testdata clusters and their expected models.
var scenarios = []struct {
	file, ns, name string
	want           func() *Cluster
}{
	{"healthy", "healthy", "ok", healthyWant},
	{"stuck-worker", "stuck-worker", "sw", stuckWorkerWant},
	{"first-cp", "first-cp", "fcp", firstCPWant},
	{"preflight", "preflight", "pf", preflightWant},
	{"v1beta1-conditions", "v1beta1-conditions", "old", v1beta1CondsWant},
	{"not-served", "not-served", "ns", notServedWant},
}

// withoutErr checks that every problem has an error text and removes it (the
// API server's wording is not this package's contract).
func withoutErr(t *testing.T, c *Cluster) {
	t.Helper()
	for i := range c.Problems {
		if c.Problems[i].Err == "" {
			t.Errorf("problem %+v has no error text", c.Problems[i])
		}
		c.Problems[i].Err = ""
	}
}

func TestAgainstAPIServer(t *testing.T) {
	s := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, sc := range scenarios {
		s.load(ctx, t, sc.file)
	}
	r, err := NewReader(s.cfg)
	if err != nil {
		t.Fatal(err)
	}

	direct := map[string]*Cluster{}
	for _, sc := range scenarios {
		t.Run("reader/"+sc.file, func(t *testing.T) {
			got, err := r.Cluster(ctx, sc.ns, sc.name)
			if err != nil {
				t.Fatal(err)
			}
			direct[sc.file] = got
			if got.Raw == nil || got.Raw.GetName() != sc.name {
				t.Errorf("Raw = %v, want the Cluster as read", got.Raw)
			}
			withoutErr(t, got)
			if diff := cmp.Diff(sc.want(), got, cmpModel...); diff != "" {
				t.Errorf("Cluster %s/%s (-want +got):\n%s", sc.ns, sc.name, diff)
			}
		})
	}

	t.Run("cluster not found", func(t *testing.T) {
		_, err := r.Cluster(ctx, "healthy", "nope")
		if !errors.Is(err, ErrClusterNotFound) || !strings.Contains(err.Error(), "healthy/nope") {
			t.Errorf("got %v, want ErrClusterNotFound naming healthy/nope", err)
		}
	})

	t.Run("many machines: one list per kind", func(t *testing.T) {
		// Over byNameGetLimit Machines: AzureMachines and KubeadmConfigs are
		// listed once; a missing one is still a NotFound.
		const ns = "many"
		s.namespace(ctx, t, ns)
		s.create(ctx, t, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": v1beta2, "kind": "Cluster", "metadata": map[string]any{"name": "many", "namespace": ns},
			"spec": map[string]any{"clusterNetwork": map[string]any{"pods": map[string]any{"cidrBlocks": []any{"192.168.0.0/16"}}}},
		}})
		s.createMachines(ctx, t, ns, "many", 5)
		s.create(ctx, t, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": v1beta2, "kind": "Machine",
			"metadata": map[string]any{"name": "many-md-0005", "namespace": ns, "labels": map[string]any{ClusterNameLabel: "many"}},
			"spec": map[string]any{
				"clusterName": "many", "bootstrap": map[string]any{"dataSecretName": "x"},
				"infrastructureRef": map[string]any{"apiGroup": infraG, "kind": "AzureMachine", "name": "many-md-0005"},
			},
		}})
		// Count the requests for AzureMachines.
		var mu sync.Mutex
		var azmRequests []string
		ccfg := rest.CopyConfig(s.cfg)
		ccfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return roundTripper(func(req *http.Request) (*http.Response, error) {
				if strings.Contains(req.URL.Path, "/azuremachines") {
					mu.Lock()
					azmRequests = append(azmRequests, req.Method+" "+req.URL.Path)
					mu.Unlock()
				}
				return rt.RoundTrip(req)
			})
		})
		cr, err := NewReader(ccfg)
		if err != nil {
			t.Fatal(err)
		}
		got, err := cr.Cluster(ctx, ns, "many")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"GET /apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/many/azuremachines"}, azmRequests); diff != "" {
			t.Errorf("requests for AzureMachines (-want +got):\n%s", diff)
		}
		withoutErr(t, got)
		infra := 0
		for _, m := range got.Machines {
			if m.Infra != nil && m.Infra.Ready && m.Infra.ProviderID == m.ProviderID {
				infra++
			}
		}
		if len(got.Machines) != 6 || infra != 5 {
			t.Errorf("read %d Machines, %d with their AzureMachine; want 6 and 5", len(got.Machines), infra)
		}
		want := []ReadProblem{notFound("azuremachines."+infraG, ns, "many-md-0005")}
		if diff := cmp.Diff(want, got.Problems); diff != "" {
			t.Errorf("problems (-want +got):\n%s", diff)
		}
	})

	t.Run("forbidden", func(t *testing.T) {
		// A user who may get Clusters in healthy and nothing else.
		ucfg, _ := s.srv.User(t, "clusters-only")
		s.grant(ctx, t, "healthy", "clusters-only", []string{"get"}, "cluster.x-k8s.io", "clusters")
		ur, err := NewReader(ucfg)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ur.Cluster(ctx, "healthy", "ok")
		if err != nil {
			t.Fatal(err)
		}
		if got.Name != "ok" || len(got.Machines) != 0 {
			t.Errorf("read Cluster %q with %d Machines, want ok with none readable", got.Name, len(got.Machines))
		}
		const who = `user "clusters-only" (groups system:authenticated)`
		var machines *ReadProblem
		for i, p := range got.Problems {
			if !p.Forbidden || p.Identity != who {
				t.Errorf("problem %+v: want Forbidden for %s", p, who)
			}
			if p.Resource == "machines.cluster.x-k8s.io" {
				machines = &got.Problems[i]
			}
		}
		want := &ReadProblem{
			Resource: "machines.cluster.x-k8s.io", Verb: "list", Forbidden: true, Identity: who,
			Role: "get, list, watch on machines.cluster.x-k8s.io in namespace healthy",
		}
		if diff := cmp.Diff(want, machines, cmpopts.IgnoreFields(ReadProblem{}, "Err")); diff != "" {
			t.Errorf("machines problem (-want +got):\n%s", diff)
		}
		// Everything the reader needed besides the Cluster was refused:
		// 5 Cluster API lists, 2 addon lists, the control plane and the
		// infrastructure cluster.
		if len(got.Problems) != 9 {
			t.Errorf("%d problems, want 9: %+v", len(got.Problems), got.Problems)
		}

		ncfg, _ := s.srv.User(t, "nobody")
		nr, err := NewReader(ncfg)
		if err != nil {
			t.Fatal(err)
		}
		_, err = nr.Cluster(ctx, "healthy", "ok")
		var fe *ForbiddenError
		if !errors.As(err, &fe) || !apierrors.IsForbidden(err) || errors.Is(err, ErrClusterNotFound) {
			t.Fatalf("nobody reads the Cluster: got %v, want a *ForbiddenError (and not ErrClusterNotFound)", err)
		}
		for _, want := range []string{`user "nobody"`, "get, list, watch on clusters.cluster.x-k8s.io in namespace healthy", "healthy/ok"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %q", err, want)
			}
		}
	})

	t.Run("cache", func(t *testing.T) {
		c, err := NewCache(s.cfg, "")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Stop()
		if err := c.WaitForSync(ctx); err != nil {
			t.Fatal(err)
		}
		for _, sc := range scenarios {
			got, err := c.Cluster(ctx, sc.ns, sc.name)
			if err != nil {
				t.Fatal(err)
			}
			withoutErr(t, got)
			// The cache lists where the reader gets: the not-served kinds
			// are reported with the verb list.
			for i := range got.Problems {
				if got.Problems[i].NotServed {
					got.Problems[i].Verb = "get"
				}
			}
			if diff := cmp.Diff(direct[sc.file], got, cmpModel...); diff != "" {
				t.Errorf("Cluster %s/%s from the cache (-reader +cache):\n%s", sc.ns, sc.name, diff)
			}
		}
		if _, err := c.Cluster(ctx, "healthy", "nope"); !errors.Is(err, ErrClusterNotFound) {
			t.Errorf("cache, missing Cluster: got %v, want ErrClusterNotFound", err)
		}

		// The cache watches: a Machine's new status arrives without a
		// new list.
		s.setPhase(ctx, t, "stuck-worker", "sw-md-0-abcde-q8m4z", "Running")
		for {
			got, err := c.Cluster(ctx, "stuck-worker", "sw")
			if err != nil {
				t.Fatal(err)
			}
			if got.Machines[0].Phase == "Running" {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("the cache never saw the Machine's new phase: %v", ctx.Err())
			case <-time.After(20 * time.Millisecond):
			}
		}
	})

	t.Run("another provider, v1beta2 contract", func(t *testing.T) {
		// A provider the reader has never heard of, in another version than
		// the Azure stand-ins of the same group: read through the Machine's
		// reference and discovery alone.
		s.load(ctx, t, "docker-crd")
		s.waitEstablished(ctx, t, "dockermachines.infrastructure.cluster.x-k8s.io")
		s.load(ctx, t, "docker")
		dr, err := NewReader(s.cfg) // a new Reader: discovery is cached per Reader
		if err != nil {
			t.Fatal(err)
		}
		got, err := dr.Cluster(ctx, "docker-provider", "dk")
		if err != nil {
			t.Fatal(err)
		}
		withoutErr(t, got)
		if len(got.Problems) != 0 || len(got.Machines) != 1 {
			t.Fatalf("problems %+v, %d Machines; want none and 1", got.Problems, len(got.Machines))
		}
		want := &InfraMachine{
			Object: Object{
				APIVersion: "infrastructure.cluster.x-k8s.io/v1beta2", Kind: "DockerMachine", Namespace: "docker-provider", Name: "dk-md-0-a",
				Conditions: []Condition{cond("Ready", "False", "NotReady", "* BootstrapExecSucceeded: Bootstrap failed")},
			},
			ProviderID: "docker:////dk-md-0-a", Ready: true,
			FailureReason: "BootstrapFailed", FailureMessage: "Bootstrap failed",
		}
		if diff := cmp.Diff(want, got.Machines[0].Infra, cmpModel...); diff != "" {
			t.Errorf("DockerMachine (-want +got):\n%s", diff)
		}
	})

	t.Run("cache forbidden", func(t *testing.T) {
		ucfg, _ := s.srv.User(t, "cache-nobody")
		c, err := NewCache(ucfg, "healthy")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Stop()
		if err := c.WaitForSync(ctx); err != nil {
			t.Fatal(err)
		}
		_, err = c.Cluster(ctx, "healthy", "ok")
		var fe *ForbiddenError
		if !errors.As(err, &fe) || fe.Problem.Identity != `user "cache-nobody" (groups system:authenticated)` ||
			fe.Problem.Role != "get, list, watch on clusters.cluster.x-k8s.io in namespace healthy" {
			t.Errorf("got %v, want a *ForbiddenError naming cache-nobody and the role", err)
		}
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// waitEstablished waits for a CRD installed by a test.
func (s *server) waitEstablished(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	ri := s.dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	for {
		crd, err := ri.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range conditions(crd.Object, "status", "conditions") {
			if c.Type == "Established" && c.Status == "True" {
				s.rm.Reset() // discover the new kind
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("CRD %s not Established: %v", name, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// grant gives user verbs on group/resource in ns with a Role and
// RoleBinding.
func (s *server) grant(ctx context.Context, t *testing.T, ns, user string, verbs []string, group, resource string) {
	t.Helper()
	name := user + "-" + resource
	var vs []any
	for _, v := range verbs {
		vs = append(vs, v)
	}
	role := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"rules":    []any{map[string]any{"apiGroups": []any{group}, "resources": []any{resource}, "verbs": vs}},
	}}
	binding := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
		"subjects": []any{map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}},
	}}
	s.create(ctx, t, role)
	s.create(ctx, t, binding)
}

func (s *server) setPhase(ctx context.Context, t *testing.T, ns, name, phase string) {
	t.Helper()
	ri := s.dyn.Resource(schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "machines"}).Namespace(ns)
	m, err := ri.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(m.Object, phase, "status", "phase"); err != nil {
		t.Fatal(err)
	}
	if _, err := ri.UpdateStatus(ctx, m, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// createMachines creates n Machines of cluster in ns with their
// AzureMachines (ready, with a providerID) and the Machines' status
// (Running, nodeRef), with a few requests in flight at once.
func (s *server) createMachines(ctx context.Context, t testing.TB, ns, cluster string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 8)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			name := fmt.Sprintf("%s-md-%04d", cluster, i)
			pid := azureSub + cluster + "-rg/providers/Microsoft.Compute/virtualMachines/" + name
			machine := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": v1beta2, "kind": "Machine",
				"metadata": map[string]any{"name": name, "namespace": ns, "labels": map[string]any{ClusterNameLabel: cluster}},
				"spec": map[string]any{
					"clusterName": cluster, "version": "v1.33.1", "providerID": pid,
					"bootstrap":         map[string]any{"dataSecretName": name},
					"infrastructureRef": map[string]any{"apiGroup": infraG, "kind": "AzureMachine", "name": name},
				},
				"status": map[string]any{
					"phase": "Running", "nodeRef": map[string]any{"name": name},
					"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Ready", "message": "", "lastTransitionTime": "2024-05-01T12:00:00Z"}},
				},
			}}
			azm := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": azV, "kind": "AzureMachine",
				"metadata": map[string]any{"name": name, "namespace": ns, "labels": map[string]any{ClusterNameLabel: cluster}},
				"spec":     map[string]any{"providerID": pid, "vmSize": "Standard_D2s_v3"},
				"status":   map[string]any{"ready": true, "vmState": "Succeeded"},
			}}
			if err := s.tryCreate(ctx, machine); err != nil {
				errs <- err
				return
			}
			if err := s.tryCreate(ctx, azm); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// tryCreate is create returning its error (for goroutines).
func (s *server) tryCreate(ctx context.Context, u *unstructured.Unstructured) error {
	gvk := u.GroupVersionKind()
	m, err := s.rm.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	ri := s.dyn.Resource(m.Resource).Namespace(u.GetNamespace())
	status := u.Object["status"]
	created, err := ri.Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	created.Object["status"] = status
	if _, err := ri.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("status of %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

// BenchmarkClusterFromCache: the target is a cluster of 1,000
// Machines diagnosed in at most 1 s after the informers have synced; this
// is the Cluster API half (assembling the model from the stores). The
// direct reader (one list per kind) is measured beside it.
func BenchmarkClusterFromCache(b *testing.B) {
	s := startServer(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const ns, cluster, n = "bench", "big", 1000
	s.namespace(ctx, b, ns)
	s.create(ctx, b, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1beta2, "kind": "Cluster",
		"metadata": map[string]any{"name": cluster, "namespace": ns},
		"spec":     map[string]any{"infrastructureRef": map[string]any{"apiGroup": infraG, "kind": "AzureCluster", "name": cluster}},
	}})
	start := time.Now()
	s.createMachines(ctx, b, ns, cluster, n)
	b.Logf("created %d Machines and AzureMachines with status in %v", n, time.Since(start).Round(time.Millisecond))

	check := func(b *testing.B, c *Cluster) {
		if len(c.Machines) != n || c.Machines[n-1].Infra == nil || !c.Machines[n-1].Infra.Ready {
			b.Fatalf("read %d Machines (last with infra %v), want %d with their AzureMachines", len(c.Machines), c.Machines[len(c.Machines)-1].Infra, n)
		}
	}
	b.Run("cache", func(b *testing.B) {
		c, err := NewCache(s.cfg, ns)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Stop()
		start := time.Now()
		if err := c.WaitForSync(ctx); err != nil {
			b.Fatal(err)
		}
		b.Logf("informers synced in %v", time.Since(start).Round(time.Millisecond))
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			got, err := c.Cluster(ctx, ns, cluster)
			if err != nil {
				b.Fatal(err)
			}
			check(b, got)
		}
	})
	b.Run("reader", func(b *testing.B) {
		r, err := NewReader(s.cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			got, err := r.Cluster(ctx, ns, cluster)
			if err != nil {
				b.Fatal(err)
			}
			check(b, got)
		}
	})
}
