package kubeenv

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

var (
	namespaceGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	clusterGVR   = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "clusters"}
	machineGVR   = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "machines"}
	mdGVR        = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "machinedeployments"}
	kcpGVR       = schema.GroupVersionResource{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Resource: "kubeadmcontrolplanes"}
	azmGVR       = schema.GroupVersionResource{Group: "infrastructure.cluster.x-k8s.io", Version: "v1beta1", Resource: "azuremachines"}
	hcpGVR       = schema.GroupVersionResource{Group: "addons.cluster.x-k8s.io", Version: "v1alpha1", Resource: "helmchartproxies"}
)

// providerID is the Azure VM of the first control plane Machine; the
// Machine and the AzureMachine carry it, as CAPZ writes them.
const providerID = "azure:///subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/prod-rg/providers/Microsoft.Compute/virtualMachines/prod-cp-x7k2p"

// objects is a small Cluster API cluster whose first control plane Machine
// is stuck in Provisioned because the VM's bootstrap failed.
var objects = []struct {
	gvr  schema.GroupVersionResource
	yaml string
}{
	{namespaceGVR, `
apiVersion: v1
kind: Namespace
metadata: {name: capi-test}`},
	{clusterGVR, `
apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata:
  name: prod
  namespace: capi-test
  labels: {cni: calico, cloud-provider: azure}
spec:
  clusterNetwork: {pods: {cidrBlocks: [192.168.0.0/16]}}
  controlPlaneRef: {apiGroup: controlplane.cluster.x-k8s.io, kind: KubeadmControlPlane, name: prod-cp}
  infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: AzureCluster, name: prod}`},
	{kcpGVR, `
apiVersion: controlplane.cluster.x-k8s.io/v1beta2
kind: KubeadmControlPlane
metadata:
  name: prod-cp
  namespace: capi-test
  labels: {cluster.x-k8s.io/cluster-name: prod}
spec:
  replicas: 3
  version: v1.33.1
  machineTemplate:
    spec:
      infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: AzureMachineTemplate, name: prod-cp}`},
	{mdGVR, `
apiVersion: cluster.x-k8s.io/v1beta2
kind: MachineDeployment
metadata:
  name: prod-md-0
  namespace: capi-test
  labels: {cluster.x-k8s.io/cluster-name: prod}
spec:
  clusterName: prod
  replicas: 2
  selector: {matchLabels: {cluster.x-k8s.io/deployment-name: prod-md-0}}
  template:
    metadata: {labels: {cluster.x-k8s.io/deployment-name: prod-md-0}}
    spec:
      clusterName: prod
      version: v1.33.1
      bootstrap: {configRef: {apiGroup: bootstrap.cluster.x-k8s.io, kind: KubeadmConfigTemplate, name: prod-md-0}}
      infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: AzureMachineTemplate, name: prod-md-0}`},
	// The status in this body is dropped: machines have a /status subresource.
	{machineGVR, `
apiVersion: cluster.x-k8s.io/v1beta2
kind: Machine
metadata:
  name: prod-cp-x7k2p
  namespace: capi-test
  labels: {cluster.x-k8s.io/cluster-name: prod, cluster.x-k8s.io/control-plane: ""}
spec:
  clusterName: prod
  version: v1.33.1
  providerID: ` + providerID + `
  bootstrap: {configRef: {apiGroup: bootstrap.cluster.x-k8s.io, kind: KubeadmConfig, name: prod-cp-x7k2p}}
  infrastructureRef: {apiGroup: infrastructure.cluster.x-k8s.io, kind: AzureMachine, name: prod-cp-x7k2p}
status:
  phase: Running`},
	{azmGVR, `
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: AzureMachine
metadata:
  name: prod-cp-x7k2p
  namespace: capi-test
  labels: {cluster.x-k8s.io/cluster-name: prod}
spec:
  providerID: ` + providerID + `
  vmSize: Standard_D2s_v3
  additionalTags: {team: platform}`},
	{hcpGVR, `
apiVersion: addons.cluster.x-k8s.io/v1alpha1
kind: HelmChartProxy
metadata: {name: calico, namespace: capi-test}
spec:
  clusterSelector: {matchLabels: {cni: calico}}
  repoURL: https://docs.tigera.io/calico/charts
  chartName: tigera-operator
  namespace: tigera-operator
  version: v3.29.1`},
}

const ltt = "2024-05-01T12:00:00Z"

func cond(typ, status, reason, message string) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": message, "lastTransitionTime": ltt}
}

// v1beta1Cond is a Cluster API v1beta1 condition: severity, reason and
// message are omitted when empty (the CRD demands at least 1 character).
func v1beta1Cond(typ, status, severity, reason, message string) map[string]any {
	c := map[string]any{"type": typ, "status": status, "lastTransitionTime": ltt}
	for k, v := range map[string]string{"severity": severity, "reason": reason, "message": message} {
		if v != "" {
			c[k] = v
		}
	}
	return c
}

// statuses are written through /status after the objects exist, as the
// Cluster API controllers write them.
var statuses = []struct {
	gvr    schema.GroupVersionResource
	name   string
	status map[string]any
}{
	{clusterGVR, "prod", map[string]any{
		"phase":          "Provisioned",
		"initialization": map[string]any{"infrastructureProvisioned": true, "controlPlaneInitialized": false},
		"conditions": []any{
			cond("Available", "False", "NotAvailable", "* ControlPlaneAvailable: Control plane not yet initialized"),
			cond("ControlPlaneInitialized", "False", "NotInitialized", "Control plane not yet initialized"),
		},
	}},
	{kcpGVR, "prod-cp", map[string]any{
		"replicas": int64(1), "readyReplicas": int64(0), "availableReplicas": int64(0),
		"initialization": map[string]any{"controlPlaneInitialized": false},
		"conditions": []any{
			cond("Available", "False", "NotAvailable", "Control plane not yet initialized"),
			cond("ScalingUp", "True", "ScalingUp", "Scaling up from 1 to 3 replicas is blocked because:\n* Waiting for the first control plane Machine to be available"),
		},
		"deprecated": map[string]any{"v1beta1": map[string]any{"conditions": []any{
			v1beta1Cond("Available", "False", "Info", "WaitingForKubeadmInit", ""),
		}}},
	}},
	{mdGVR, "prod-md-0", map[string]any{
		"phase":    "ScalingUp",
		"replicas": int64(2), "readyReplicas": int64(0), "availableReplicas": int64(0),
		"conditions": []any{
			cond("Available", "False", "WaitingForAvailableMachines", "0 available replicas, at least 2 required"),
		},
	}},
	{machineGVR, "prod-cp-x7k2p", map[string]any{
		"phase":          "Provisioned",
		"initialization": map[string]any{"infrastructureProvisioned": true, "bootstrapDataSecretCreated": true},
		"conditions": []any{
			cond("Ready", "False", "NotReady", "* NodeHealthy: Waiting for a Node with spec.providerID "+providerID+" to exist"),
			cond("InfrastructureReady", "True", "Ready", ""),
			cond("NodeHealthy", "Unknown", "NodeDoesNotExist", "Waiting for a Node with spec.providerID "+providerID+" to exist"),
		},
		"deprecated": map[string]any{"v1beta1": map[string]any{"conditions": []any{
			v1beta1Cond("Ready", "False", "Info", "WaitingForNodeRef", ""),
		}}},
	}},
	{azmGVR, "prod-cp-x7k2p", map[string]any{
		"ready":   false,
		"vmState": "Succeeded",
		"conditions": []any{
			v1beta1Cond("BootstrapSucceeded", "False", "Error", "BootstrapFailed", "VM bootstrapping failed: cloud-init exited with 1"),
			v1beta1Cond("VMRunning", "True", "", "", ""),
		},
	}},
	{hcpGVR, "calico", map[string]any{
		"matchingClusters": []any{map[string]any{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "prod", "namespace": "capi-test"}},
		"conditions":       []any{v1beta1Cond("Ready", "True", "", "", "")},
	}},
}

func resource(dyn dynamic.Interface, gvr schema.GroupVersionResource, ns string) dynamic.ResourceInterface {
	if gvr == namespaceGVR {
		return dyn.Resource(gvr)
	}
	return dyn.Resource(gvr).Namespace(ns)
}

// TestAPIServer starts the real kube-apiserver with the Cluster API CRDs and
// the provider stand-ins, and does what the collector and its tests do.
func TestAPIServer(t *testing.T) {
	cfg, srv := StartAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("version and CRDs", func(t *testing.T) {
		dc, err := discovery.NewDiscoveryClientForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		v, err := dc.ServerVersion()
		if err != nil {
			t.Fatal(err)
		}
		if v.GitVersion != "v1.37.2" {
			t.Errorf("server version %q, want v1.37.2 (build.sh stamps it)", v.GitVersion)
		}
		for _, want := range []string{
			"clusters.cluster.x-k8s.io", "machines.cluster.x-k8s.io", "machinesets.cluster.x-k8s.io",
			"machinedeployments.cluster.x-k8s.io", "machinepools.cluster.x-k8s.io", "machinehealthchecks.cluster.x-k8s.io",
			"kubeadmcontrolplanes.controlplane.cluster.x-k8s.io", "kubeadmconfigs.bootstrap.cluster.x-k8s.io",
			"kubeadmconfigtemplates.bootstrap.cluster.x-k8s.io",
			"azuremachines.infrastructure.cluster.x-k8s.io", "azureclusters.infrastructure.cluster.x-k8s.io",
			"azuremachinepools.infrastructure.cluster.x-k8s.io", "azuremachinetemplates.infrastructure.cluster.x-k8s.io",
			"helmchartproxies.addons.cluster.x-k8s.io", "helmreleaseproxies.addons.cluster.x-k8s.io",
		} {
			if !contains(srv.CRDs, want) {
				t.Errorf("CRD %s not installed; have %v", want, srv.CRDs)
			}
		}
		cs, err := apiextensionsclient.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		crd, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "machines.cluster.x-k8s.io", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"v1beta2"}, crd.Status.StoredVersions); diff != "" {
			t.Errorf("Machine stored versions (-want +got):\n%s", diff)
		}
	})

	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objects {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(o.yaml), &u.Object); err != nil {
			t.Fatalf("test object: %v", err)
		}
		if _, err := resource(dyn, o.gvr, u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}

	t.Run("create drops status", func(t *testing.T) {
		m, err := dyn.Resource(machineGVR).Namespace("capi-test").Get(ctx, "prod-cp-x7k2p", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if phase, found, _ := unstructured.NestedString(m.Object, "status", "phase"); found {
			t.Errorf("status.phase %q persisted by create; the /status subresource should have dropped it", phase)
		}
	})

	for _, s := range statuses {
		ri := resource(dyn, s.gvr, "capi-test")
		o, err := ri.Get(ctx, s.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		o.Object["status"] = s.status
		if _, err := ri.UpdateStatus(ctx, o, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("update status of %s %s: %v", s.gvr.Resource, s.name, err)
		}
	}

	t.Run("read back", func(t *testing.T) {
		ml, err := dyn.Resource(machineGVR).Namespace("").List(ctx, metav1.ListOptions{
			LabelSelector: "cluster.x-k8s.io/cluster-name=prod,cluster.x-k8s.io/control-plane",
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(ml.Items) != 1 {
			t.Fatalf("listed %d control plane Machines of prod, want 1", len(ml.Items))
		}
		m := ml.Items[0]
		azm, err := dyn.Resource(azmGVR).Namespace("capi-test").Get(ctx, str(t, m, "spec", "infrastructureRef", "name"), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		kcp, err := dyn.Resource(kcpGVR).Namespace("capi-test").Get(ctx, "prod-cp", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		md, err := dyn.Resource(mdGVR).Namespace("capi-test").Get(ctx, "prod-md-0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cl, err := dyn.Resource(clusterGVR).Namespace("capi-test").Get(ctx, "prod", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		hcps, err := dyn.Resource(hcpGVR).Namespace("capi-test").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(hcps.Items) != 1 {
			t.Fatalf("listed %d HelmChartProxies, want 1", len(hcps.Items))
		}
		hcp := hcps.Items[0]

		got := map[string]any{
			"machine.apiVersion":         m.GetAPIVersion(),
			"machine.phase":              str(t, m, "status", "phase"),
			"machine.providerID":         str(t, m, "spec", "providerID"),
			"machine.version":            str(t, m, "spec", "version"),
			"machine.infraKind":          str(t, m, "spec", "infrastructureRef", "kind"),
			"machine.conditions":         conditions(t, m, "status", "conditions"),
			"machine.v1beta1.conditions": conditions(t, m, "status", "deprecated", "v1beta1", "conditions"),
			"azm.providerID":             str(t, *azm, "spec", "providerID"),
			"azm.vmSize":                 str(t, *azm, "spec", "vmSize"),
			"azm.additionalTags":         str(t, *azm, "spec", "additionalTags", "team"),
			"azm.ready":                  boolean(t, *azm, "status", "ready"),
			"azm.conditions":             conditions(t, *azm, "status", "conditions"),
			"kcp.readyReplicas":          integer(t, *kcp, "status", "readyReplicas"),
			"kcp.conditions":             conditions(t, *kcp, "status", "conditions"),
			"md.readyReplicas":           integer(t, *md, "status", "readyReplicas"),
			"md.conditions":              conditions(t, *md, "status", "conditions"),
			"cluster.cni":                cl.GetLabels()["cni"],
			"cluster.conditions":         conditions(t, *cl, "status", "conditions"),
			"hcp.selector":               str(t, hcp, "spec", "clusterSelector", "matchLabels", "cni"),
			"hcp.conditions":             conditions(t, hcp, "status", "conditions"),
		}
		want := map[string]any{
			"machine.apiVersion": "cluster.x-k8s.io/v1beta2",
			"machine.phase":      "Provisioned",
			"machine.providerID": providerID,
			"machine.version":    "v1.33.1",
			"machine.infraKind":  "AzureMachine",
			"machine.conditions": []string{
				"Ready=False NotReady: * NodeHealthy: Waiting for a Node with spec.providerID " + providerID + " to exist",
				"InfrastructureReady=True Ready: ",
				"NodeHealthy=Unknown NodeDoesNotExist: Waiting for a Node with spec.providerID " + providerID + " to exist",
			},
			"machine.v1beta1.conditions": []string{"Ready=False WaitingForNodeRef: "},
			"azm.providerID":             providerID,
			"azm.vmSize":                 "Standard_D2s_v3",
			"azm.additionalTags":         "platform",
			"azm.ready":                  false,
			"azm.conditions": []string{
				"BootstrapSucceeded=False BootstrapFailed: VM bootstrapping failed: cloud-init exited with 1",
				"VMRunning=True : ",
			},
			"kcp.readyReplicas": int64(0),
			"kcp.conditions": []string{
				"Available=False NotAvailable: Control plane not yet initialized",
				"ScalingUp=True ScalingUp: Scaling up from 1 to 3 replicas is blocked because:\n* Waiting for the first control plane Machine to be available",
			},
			"md.readyReplicas": int64(0),
			"md.conditions":    []string{"Available=False WaitingForAvailableMachines: 0 available replicas, at least 2 required"},
			"cluster.cni":      "calico",
			"cluster.conditions": []string{
				"Available=False NotAvailable: * ControlPlaneAvailable: Control plane not yet initialized",
				"ControlPlaneInitialized=False NotInitialized: Control plane not yet initialized",
			},
			"hcp.selector":   "calico",
			"hcp.conditions": []string{"Ready=True : "},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("objects read back (-want +got):\n%s", diff)
		}
	})

	t.Run("CAPI schema validates", func(t *testing.T) {
		bad := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
			"metadata": map[string]any{"name": "no-cluster", "namespace": "capi-test"},
			"spec": map[string]any{
				"bootstrap":         map[string]any{"dataSecretName": "x"},
				"infrastructureRef": map[string]any{"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "AzureMachine", "name": "x"},
			},
		}}
		_, err := dyn.Resource(machineGVR).Namespace("capi-test").Create(ctx, bad, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.clusterName: Required value") {
			t.Errorf("Machine without spec.clusterName: got %v, want Invalid with spec.clusterName: Required value", err)
		}
	})

	t.Run("user without role is Forbidden", func(t *testing.T) {
		vcfg, kubeconfig := srv.User(t, "viewer")
		vdyn, err := dynamic.NewForConfig(vcfg)
		if err != nil {
			t.Fatal(err)
		}
		_, err = vdyn.Resource(clusterGVR).Namespace("capi-test").List(ctx, metav1.ListOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `User "viewer" cannot list resource "clusters" in API group "cluster.x-k8s.io" in the namespace "capi-test"`) {
			t.Errorf("viewer lists clusters: got %v, want Forbidden naming user, verb, resource and namespace", err)
		}
		if _, err := os.Stat(kubeconfig); err != nil {
			t.Error(err)
		}
	})

	t.Run("kubeconfig file", func(t *testing.T) {
		kcfg, err := clientcmd.BuildConfigFromFlags("", srv.Kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		kdyn, err := dynamic.NewForConfig(kcfg)
		if err != nil {
			t.Fatal(err)
		}
		l, err := kdyn.Resource(machineGVR).Namespace("capi-test").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Items) != 1 {
			t.Errorf("listed %d Machines through %s, want 1", len(l.Items), srv.Kubeconfig)
		}
	})
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func str(t *testing.T, u unstructured.Unstructured, path ...string) string {
	t.Helper()
	v, found, err := unstructured.NestedString(u.Object, path...)
	if err != nil || !found {
		t.Errorf("%s %s: no string at %s (%v)", u.GetKind(), u.GetName(), strings.Join(path, "."), err)
	}
	return v
}

func boolean(t *testing.T, u unstructured.Unstructured, path ...string) bool {
	t.Helper()
	v, found, err := unstructured.NestedBool(u.Object, path...)
	if err != nil || !found {
		t.Errorf("%s %s: no bool at %s (%v)", u.GetKind(), u.GetName(), strings.Join(path, "."), err)
	}
	return v
}

func integer(t *testing.T, u unstructured.Unstructured, path ...string) int64 {
	t.Helper()
	v, found, err := unstructured.NestedInt64(u.Object, path...)
	if err != nil || !found {
		t.Errorf("%s %s: no integer at %s (%v)", u.GetKind(), u.GetName(), strings.Join(path, "."), err)
	}
	return v
}

// conditions renders the conditions at path as "Type=Status Reason: Message"
// and checks that each kept its lastTransitionTime.
func conditions(t *testing.T, u unstructured.Unstructured, path ...string) []string {
	t.Helper()
	cs, found, err := unstructured.NestedSlice(u.Object, path...)
	if err != nil || !found {
		t.Errorf("%s %s: no conditions at %s (%v)", u.GetKind(), u.GetName(), strings.Join(path, "."), err)
		return nil
	}
	var out []string
	for _, c := range cs {
		m, _ := c.(map[string]any)
		if m["lastTransitionTime"] != ltt {
			t.Errorf("%s %s: condition %v lost its lastTransitionTime", u.GetKind(), u.GetName(), m["type"])
		}
		s := func(k string) string { v, _ := m[k].(string); return v }
		out = append(out, s("type")+"="+s("status")+" "+s("reason")+": "+s("message"))
	}
	return out
}

func TestAPIServerStamp(t *testing.T) {
	root, err := repoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	bin := filepath.Join(out, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"kube-apiserver", "etcd"} {
		if err := os.WriteFile(filepath.Join(bin, n), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("KUBEBUILDER_ASSETS", "")
	t.Setenv("TESTBIN_DIR", out)
	if _, err := LocateAssets("."); err == nil || !strings.Contains(err.Error(), "stamp") {
		t.Errorf("no stamp: got %v, want an error about the stamp", err)
	}
	stamp := filepath.Join(out, ".stamp")
	if err := os.WriteFile(stamp, []byte("kube-apiserver=v1.37.2 src=0123456789abcdef go1.26.8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LocateAssets("."); err == nil || !strings.Contains(err.Error(), "stale") {
		t.Errorf("other sources: got %v, want stale", err)
	}
	a, err := LocateAssets(".")
	if a.Bin != bin {
		t.Errorf("Bin = %s, want %s", a.Bin, bin)
	}
	if diff := cmp.Diff([]string{filepath.Join(root, CAPICRDDir), filepath.Join(root, StandInCRDDir)}, a.CRDDirs); diff != "" {
		t.Errorf("CRDDirs (-want +got):\n%s", diff)
	}
	// KUBEBUILDER_ASSETS is taken as is: no stamp needed.
	t.Setenv("KUBEBUILDER_ASSETS", bin)
	if _, err := LocateAssets("."); err != nil {
		t.Errorf("KUBEBUILDER_ASSETS=%s: %v", bin, err)
	}
}
