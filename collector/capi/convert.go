package capi

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The conversions below are pure functions from an object as the API server
// returned it (unstructured) to the model. They read both API shapes of
// Cluster API:
//
//   - v1beta2 (storage version since Cluster API v1.11): metav1.Condition in
//     status.conditions, the old conditions in
//     status.deprecated.v1beta1.conditions; replica counts in
//     status.readyReplicas/availableReplicas/upToDateReplicas (the old ones
//     in status.deprecated.v1beta1); references with apiGroup+kind+name.
//   - v1beta1 (and the v1alpha/v1beta1 providers: CAPZ, CAAPH): the old
//     conditions (with severity) in status.conditions, the new ones in
//     status.v1beta2.conditions when the controller writes them; counts in
//     status.readyReplicas/availableReplicas/updatedReplicas with the new
//     ones in status.v1beta2; references with apiVersion+kind+name.
//
// Which shape an object has is decided by the version of its apiVersion
// (oldShape). A field missing from the object leaves the model's zero value;
// a field of the wrong type is treated as missing (the API server validated
// the object against its CRD, so this only happens with stand-ins or dumps).

// Label keys Cluster API sets.
const (
	// ClusterNameLabel is on every object of a cluster.
	ClusterNameLabel = "cluster.x-k8s.io/cluster-name"
	// ControlPlaneLabel is on control plane Machines.
	ControlPlaneLabel = "cluster.x-k8s.io/control-plane"
)

// oldShape says whether apiVersion is one whose conditions are Cluster API
// v1beta1 conditions in status.conditions: v1beta1 and every alpha version
// (the providers nodediag reads still serve those); v1beta2 and anything
// newer keep metav1.Condition there.
func oldShape(apiVersion string) bool {
	v := schema.FromAPIVersionAndKind(apiVersion, "").Version
	return v == "v1beta1" || strings.Contains(v, "alpha")
}

func nestedString(o map[string]any, path ...string) string {
	v, ok, _ := unstructured.NestedFieldNoCopy(o, path...)
	if !ok {
		return ""
	}
	s, _ := v.(string)
	return s
}

func nestedBool(o map[string]any, path ...string) (value, found bool) {
	v, ok, _ := unstructured.NestedFieldNoCopy(o, path...)
	if !ok {
		return false, false
	}
	b, ok := v.(bool)
	return b, ok
}

// nestedInt reads an integer; JSON decoding gives int64 (API server) or
// float64 (a generic JSON decoder), both are taken.
func nestedInt(o map[string]any, path ...string) (int32, bool) {
	v, ok, _ := unstructured.NestedFieldNoCopy(o, path...)
	if !ok {
		return 0, false
	}
	switch n := v.(type) {
	case int64:
		return int32(n), true
	case int32:
		return n, true
	case int:
		return int32(n), true
	case float64:
		return int32(n), true
	}
	return 0, false
}

// firstInt returns the first of paths that holds an integer.
func firstInt(o map[string]any, paths ...[]string) int32 {
	for _, p := range paths {
		if n, ok := nestedInt(o, p...); ok {
			return n
		}
	}
	return 0
}

func nestedSlice(o map[string]any, path ...string) []any {
	v, ok, _ := unstructured.NestedFieldNoCopy(o, path...)
	if !ok {
		return nil
	}
	s, _ := v.([]any)
	return s
}

func nestedMap(o map[string]any, path ...string) map[string]any {
	v, ok, _ := unstructured.NestedFieldNoCopy(o, path...)
	if !ok {
		return nil
	}
	m, _ := v.(map[string]any)
	return m
}

func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}

// conditions reads a list of conditions of either shape.
func conditions(o map[string]any, path ...string) []Condition {
	var out []Condition
	for _, c := range nestedSlice(o, path...) {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		s := func(k string) string { v, _ := m[k].(string); return v }
		out = append(out, Condition{
			Type:               s("type"),
			Status:             s("status"),
			Reason:             s("reason"),
			Severity:           s("severity"),
			Message:            s("message"),
			LastTransitionTime: parseTime(s("lastTransitionTime")),
		})
	}
	return out
}

// ref reads an object reference at path of o: v1beta2 (apiGroup, kind,
// name) or v1beta1 (apiVersion, kind, name, namespace). ns is the
// namespace of the referring object, where a namespaced reference points
// (Cluster API references never cross namespaces).
func ref(o map[string]any, ns string, path ...string) Ref {
	m := nestedMap(o, path...)
	if m == nil {
		return Ref{}
	}
	s := func(k string) string { v, _ := m[k].(string); return v }
	r := Ref{APIVersion: s("apiVersion"), Kind: s("kind"), Name: s("name"), Namespace: s("namespace"), APIGroup: s("apiGroup")}
	if r.APIGroup == "" && r.APIVersion != "" {
		r.APIGroup = schema.FromAPIVersionAndKind(r.APIVersion, "").Group
	}
	if r.Namespace == "" && r.Name != "" {
		r.Namespace = ns
	}
	return r
}

// groupKind is the kind a reference names.
func (r Ref) groupKind() schema.GroupKind { return schema.GroupKind{Group: r.APIGroup, Kind: r.Kind} }

// ConvertObject fills what every object has: metadata, status.phase and
// conditions of both shapes.
func ConvertObject(u *unstructured.Unstructured) Object {
	o := Object{
		APIVersion:        u.GetAPIVersion(),
		Kind:              u.GetKind(),
		Namespace:         u.GetNamespace(),
		Name:              u.GetName(),
		UID:               string(u.GetUID()),
		Labels:            u.GetLabels(),
		Annotations:       u.GetAnnotations(),
		CreationTimestamp: parseTime(nestedString(u.Object, "metadata", "creationTimestamp")),
		Phase:             nestedString(u.Object, "status", "phase"),
		Raw:               u,
	}
	if d := nestedString(u.Object, "metadata", "deletionTimestamp"); d != "" {
		t := parseTime(d)
		o.DeletionTimestamp = &t
	}
	for _, or := range u.GetOwnerReferences() {
		o.Owners = append(o.Owners, Ref{
			APIVersion: or.APIVersion, Kind: or.Kind, Name: or.Name, Namespace: o.Namespace,
			APIGroup: schema.FromAPIVersionAndKind(or.APIVersion, "").Group,
		})
	}
	if oldShape(o.APIVersion) {
		o.V1Beta1Conditions = conditions(u.Object, "status", "conditions")
		o.Conditions = conditions(u.Object, "status", "v1beta2", "conditions")
	} else {
		o.Conditions = conditions(u.Object, "status", "conditions")
		o.V1Beta1Conditions = conditions(u.Object, "status", "deprecated", "v1beta1", "conditions")
	}
	return o
}

// replicas reads the counts of a MachineSet, MachineDeployment, MachinePool
// or KubeadmControlPlane. v1beta2 semantics first (Ready = Machines with
// Ready=True, Available, UpToDate); when the object does not carry them
// (v1beta1 without status.v1beta2, or a v1beta2 object whose controller has
// not computed them yet) the v1beta1 counts (readyReplicas: Nodes ready,
// updatedReplicas) stand in.
func replicas(u *unstructured.Unstructured) Replicas {
	o := u.Object
	r := Replicas{
		Desired: firstInt(o, []string{"spec", "replicas"}),
		Current: firstInt(o, []string{"status", "replicas"}),
	}
	if oldShape(u.GetAPIVersion()) {
		r.Ready = firstInt(o, []string{"status", "v1beta2", "readyReplicas"}, []string{"status", "readyReplicas"})
		r.UpToDate = firstInt(o, []string{"status", "v1beta2", "upToDateReplicas"}, []string{"status", "updatedReplicas"})
		if n, ok := nestedInt(o, "status", "v1beta2", "availableReplicas"); ok {
			r.Available = n
		} else if n, ok := nestedInt(o, "status", "availableReplicas"); ok {
			r.Available = n
		} else if un, ok := nestedInt(o, "status", "unavailableReplicas"); ok {
			// v1beta1 KubeadmControlPlane has no availableReplicas.
			r.Available = max(r.Current-un, 0)
		}
		return r
	}
	dep := []string{"status", "deprecated", "v1beta1"}
	r.Ready = firstInt(o, []string{"status", "readyReplicas"}, append(dep[:3:3], "readyReplicas"))
	r.Available = firstInt(o, []string{"status", "availableReplicas"}, append(dep[:3:3], "availableReplicas"))
	r.UpToDate = firstInt(o, []string{"status", "upToDateReplicas"}, append(dep[:3:3], "updatedReplicas"))
	return r
}

// ConvertCluster reads a Cluster (without the objects it references).
func ConvertCluster(u *unstructured.Unstructured) *Cluster {
	c := &Cluster{Object: ConvertObject(u)}
	ns := u.GetNamespace()
	c.ControlPlaneRef = ref(u.Object, ns, "spec", "controlPlaneRef")
	c.InfraRef = ref(u.Object, ns, "spec", "infrastructureRef")
	if b, ok := nestedBool(u.Object, "status", "initialization", "controlPlaneInitialized"); ok {
		c.ControlPlaneInitialized = b
	} else if b, ok := nestedBool(u.Object, "status", "controlPlaneReady"); ok && b {
		c.ControlPlaneInitialized = true
	} else if cond, ok := c.Condition("ControlPlaneInitialized"); ok {
		c.ControlPlaneInitialized = cond.Status == "True"
	}
	return c
}

// ConvertMachine reads a Machine (Infra is left for the reader).
func ConvertMachine(u *unstructured.Unstructured) *Machine {
	ns := u.GetNamespace()
	m := &Machine{
		Object:        ConvertObject(u),
		ClusterName:   nestedString(u.Object, "spec", "clusterName"),
		Version:       nestedString(u.Object, "spec", "version"),
		ProviderID:    nestedString(u.Object, "spec", "providerID"),
		FailureDomain: nestedString(u.Object, "spec", "failureDomain"),
		InfraRef:      ref(u.Object, ns, "spec", "infrastructureRef"),
		BootstrapRef:  ref(u.Object, ns, "spec", "bootstrap", "configRef"),
		NodeRef:       ref(u.Object, "", "status", "nodeRef"),
	}
	if m.FailureDomain == "" {
		m.FailureDomain = nestedString(u.Object, "status", "failureDomain")
	}
	_, m.ControlPlane = u.GetLabels()[ControlPlaneLabel]
	if m.NodeRef.Name != "" {
		// v1beta2's nodeRef has only a name: it is always a Node.
		m.NodeRef.Namespace = ""
		if m.NodeRef.Kind == "" {
			m.NodeRef.Kind = "Node"
		}
		if m.NodeRef.APIVersion == "" {
			m.NodeRef.APIVersion = "v1"
		}
	}
	for _, a := range nestedSlice(u.Object, "status", "addresses") {
		am, ok := a.(map[string]any)
		if !ok {
			continue
		}
		t, _ := am["type"].(string)
		addr, _ := am["address"].(string)
		m.Addresses = append(m.Addresses, Address{Type: t, Address: addr})
	}
	return m
}

// ConvertInfraMachine reads a provider's machine (AzureMachine,
// AzureMachinePool, DockerMachine...) by the fields the Cluster API
// contract names: spec.providerID, status.ready (v1beta1 contract) or
// status.initialization.provisioned (v1beta2 contract), failureReason and
// failureMessage (in status, or status.deprecated.v1beta1), and the
// provider's VM state when it has one (status.vmState for CAPZ,
// status.provisioningState for AzureMachinePool).
func ConvertInfraMachine(u *unstructured.Unstructured) *InfraMachine {
	im := &InfraMachine{
		Object:     ConvertObject(u),
		ProviderID: nestedString(u.Object, "spec", "providerID"),
		VMState:    nestedString(u.Object, "status", "vmState"),
	}
	if im.VMState == "" {
		im.VMState = nestedString(u.Object, "status", "provisioningState")
	}
	if b, ok := nestedBool(u.Object, "status", "initialization", "provisioned"); ok {
		im.Ready = b
	} else {
		im.Ready, _ = nestedBool(u.Object, "status", "ready")
	}
	im.FailureReason = nestedString(u.Object, "status", "failureReason")
	if im.FailureReason == "" {
		im.FailureReason = nestedString(u.Object, "status", "deprecated", "v1beta1", "failureReason")
	}
	im.FailureMessage = nestedString(u.Object, "status", "failureMessage")
	if im.FailureMessage == "" {
		im.FailureMessage = nestedString(u.Object, "status", "deprecated", "v1beta1", "failureMessage")
	}
	return im
}

// ConvertMachineSet reads a MachineSet.
func ConvertMachineSet(u *unstructured.Unstructured) *MachineSet {
	return &MachineSet{
		Object:      ConvertObject(u),
		ClusterName: nestedString(u.Object, "spec", "clusterName"),
		Replicas:    replicas(u),
	}
}

// ConvertMachineDeployment reads a MachineDeployment.
func ConvertMachineDeployment(u *unstructured.Unstructured) *MachineDeployment {
	return &MachineDeployment{
		Object:      ConvertObject(u),
		ClusterName: nestedString(u.Object, "spec", "clusterName"),
		Version:     nestedString(u.Object, "spec", "template", "spec", "version"),
		Replicas:    replicas(u),
	}
}

// ConvertMachinePool reads a MachinePool (Infra is left for the reader).
func ConvertMachinePool(u *unstructured.Unstructured) *MachinePool {
	mp := &MachinePool{
		Object:      ConvertObject(u),
		ClusterName: nestedString(u.Object, "spec", "clusterName"),
		Version:     nestedString(u.Object, "spec", "template", "spec", "version"),
		Replicas:    replicas(u),
		InfraRef:    ref(u.Object, u.GetNamespace(), "spec", "template", "spec", "infrastructureRef"),
	}
	for _, p := range nestedSlice(u.Object, "spec", "providerIDList") {
		if s, ok := p.(string); ok {
			mp.ProviderIDs = append(mp.ProviderIDs, s)
		}
	}
	return mp
}

// ConvertMachineHealthCheck reads a MachineHealthCheck.
func ConvertMachineHealthCheck(u *unstructured.Unstructured) *MachineHealthCheck {
	mhc := &MachineHealthCheck{
		Object:              ConvertObject(u),
		ClusterName:         nestedString(u.Object, "spec", "clusterName"),
		ExpectedMachines:    firstInt(u.Object, []string{"status", "expectedMachines"}),
		CurrentHealthy:      firstInt(u.Object, []string{"status", "currentHealthy"}),
		RemediationsAllowed: firstInt(u.Object, []string{"status", "remediationsAllowed"}),
	}
	for _, t := range nestedSlice(u.Object, "status", "targets") {
		if s, ok := t.(string); ok {
			mhc.Targets = append(mhc.Targets, s)
		}
	}
	return mhc
}

// ConvertKubeadmControlPlane reads a KubeadmControlPlane.
func ConvertKubeadmControlPlane(u *unstructured.Unstructured) *KubeadmControlPlane {
	k := &KubeadmControlPlane{
		Object:   ConvertObject(u),
		Version:  nestedString(u.Object, "spec", "version"),
		Replicas: replicas(u),
	}
	if b, ok := nestedBool(u.Object, "status", "initialization", "controlPlaneInitialized"); ok {
		k.Initialized = b
	} else {
		k.Initialized, _ = nestedBool(u.Object, "status", "initialized")
	}
	return k
}

// ConvertHelmChartProxy reads a HelmChartProxy.
func ConvertHelmChartProxy(u *unstructured.Unstructured) *HelmChartProxy {
	h := &HelmChartProxy{
		Object:    ConvertObject(u),
		ChartName: nestedString(u.Object, "spec", "chartName"),
	}
	for k, v := range nestedMap(u.Object, "spec", "clusterSelector", "matchLabels") {
		if s, ok := v.(string); ok {
			if h.ClusterSelector == nil {
				h.ClusterSelector = map[string]string{}
			}
			h.ClusterSelector[k] = s
		}
	}
	for _, e := range nestedSlice(u.Object, "spec", "clusterSelector", "matchExpressions") {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		r := metav1.LabelSelectorRequirement{
			Key:      nestedString(m, "key"),
			Operator: metav1.LabelSelectorOperator(nestedString(m, "operator")),
		}
		for _, v := range nestedSlice(m, "values") {
			if s, ok := v.(string); ok {
				r.Values = append(r.Values, s)
			}
		}
		h.MatchExpressions = append(h.MatchExpressions, r)
	}
	for _, mc := range nestedSlice(u.Object, "status", "matchingClusters") {
		if m, ok := mc.(map[string]any); ok {
			if n, ok := m["name"].(string); ok {
				h.MatchingClusters = append(h.MatchingClusters, n)
			}
		}
	}
	return h
}

// ConvertHelmReleaseProxy reads a HelmReleaseProxy. Its cluster is
// spec.clusterRef.name, or the cluster-name label CAAPH sets.
func ConvertHelmReleaseProxy(u *unstructured.Unstructured) *HelmReleaseProxy {
	h := &HelmReleaseProxy{
		Object:      ConvertObject(u),
		ClusterName: nestedString(u.Object, "spec", "clusterRef", "name"),
		ChartName:   nestedString(u.Object, "spec", "chartName"),
		Status:      nestedString(u.Object, "status", "status"),
	}
	if h.ClusterName == "" {
		h.ClusterName = u.GetLabels()[ClusterNameLabel]
	}
	return h
}
