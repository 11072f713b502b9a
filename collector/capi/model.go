// Package capi is the collector's model of Cluster API state: the objects
// of one workload cluster as the management cluster holds them, read with
// client-go (reader.go) or from YAML dumps, reduced to what nodediag
// judges. The correlation with node reports and the cluster rules are in
// collector/incident; this package only reads and models.
//
// Conditions: Cluster API v1beta2 keeps metav1.Condition in
// status.conditions; v1beta1 objects keep theirs in status.conditions too
// (with severity), and v1beta2 objects repeat them under
// status.deprecated.v1beta1.conditions. Object.Conditions holds the v1beta2
// ones when there are any, and V1Beta1Conditions the old ones, so that a
// rule can ask for either name (Ready vs Available, BootstrapSucceeded...).
package capi

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Ref names another object (spec.infrastructureRef, spec.bootstrap.configRef,
// spec.controlPlaneRef, status.nodeRef).
type Ref struct {
	APIVersion, Kind, Namespace, Name string
	// APIGroup is the referenced kind's group: v1beta2 references carry
	// only apiGroup (no version, resolved through discovery), v1beta1 ones
	// apiVersion, from which the reader fills APIGroup too. Empty for the
	// core group (Node).
	APIGroup string
}

// IsZero says whether the reference is empty.
func (r Ref) IsZero() bool { return r.Kind == "" && r.Name == "" }

// Condition is a status condition of either API version.
type Condition struct {
	Type   string
	Status string // "True", "False", "Unknown"
	Reason string
	// Severity is v1beta1's (Error, Warning, Info), empty for v1beta2.
	Severity           string
	Message            string
	LastTransitionTime time.Time
}

// Object is what every object read has in common.
type Object struct {
	APIVersion, Kind, Namespace, Name string
	UID                               string
	Labels, Annotations               map[string]string
	// Owners are the kinds and names of metadata.ownerReferences.
	Owners            []Ref
	CreationTimestamp time.Time
	// DeletionTimestamp is set while the object is being deleted.
	DeletionTimestamp *time.Time
	// Phase is status.phase ("Provisioned", "Running", ...), when the kind
	// has one.
	Phase             string
	Conditions        []Condition
	V1Beta1Conditions []Condition
	// Raw is the object as read (for fields this model leaves out, and
	// for quoting it in reports).
	Raw *unstructured.Unstructured
}

// Condition returns the condition named t: from Conditions first, then
// from V1Beta1Conditions.
func (o *Object) Condition(t string) (Condition, bool) {
	for _, c := range o.Conditions {
		if c.Type == t {
			return c, true
		}
	}
	for _, c := range o.V1Beta1Conditions {
		if c.Type == t {
			return c, true
		}
	}
	return Condition{}, false
}

// Machine is a cluster.x-k8s.io Machine.
type Machine struct {
	Object
	ClusterName string // spec.clusterName
	// Version is spec.version, the Kubernetes version the Machine expects.
	Version       string
	ProviderID    string // spec.providerID
	FailureDomain string
	// ControlPlane: the cluster.x-k8s.io/control-plane label is set.
	ControlPlane bool
	InfraRef     Ref // spec.infrastructureRef
	BootstrapRef Ref // spec.bootstrap.configRef
	// NodeRef is status.nodeRef: the Node the Machine became.
	NodeRef Ref
	// Addresses are status.addresses (type → address).
	Addresses []Address
	// Infra is the object InfraRef names (AzureMachine, ...), when read.
	Infra *InfraMachine
}

// Address is one of a Machine's addresses.
type Address struct{ Type, Address string }

// InfraMachine is a provider's machine (AzureMachine and others, read
// generically through infrastructureRef).
type InfraMachine struct {
	Object
	ProviderID string // spec.providerID
	Ready      bool   // status.ready or status.initialization.provisioned
	// VMState is the provider's VM state when it reports one
	// (AzureMachine status.vmState: "Succeeded", "Failed", ...).
	VMState string
	// FailureReason and FailureMessage are status.failureReason/Message.
	FailureReason, FailureMessage string
}

// MachineSet, MachineDeployment and MachinePool carry replica counts.
type Replicas struct {
	Desired, Current, Ready, Available, UpToDate int32
}

// MachineDeployment is a cluster.x-k8s.io MachineDeployment.
type MachineDeployment struct {
	Object
	ClusterName string
	Version     string
	Replicas    Replicas
}

// MachineSet is a cluster.x-k8s.io MachineSet.
type MachineSet struct {
	Object
	ClusterName string
	Replicas    Replicas
}

// MachinePool is a cluster.x-k8s.io MachinePool.
type MachinePool struct {
	Object
	ClusterName string
	Version     string
	Replicas    Replicas
	InfraRef    Ref
	// ProviderIDs are spec.providerIDList.
	ProviderIDs []string
	// Infra is the object InfraRef names (AzureMachinePool, ...), when
	// read.
	Infra *InfraMachine
}

// MachineHealthCheck is a cluster.x-k8s.io MachineHealthCheck.
type MachineHealthCheck struct {
	Object
	ClusterName string
	// ExpectedMachines, CurrentHealthy and RemediationsAllowed are its
	// status counts.
	ExpectedMachines, CurrentHealthy, RemediationsAllowed int32
	// Targets are status.targets (Machine names).
	Targets []string
}

// KubeadmControlPlane is a controlplane.cluster.x-k8s.io
// KubeadmControlPlane.
type KubeadmControlPlane struct {
	Object
	Version     string // spec.version
	Replicas    Replicas
	Initialized bool // status.initialization.controlPlaneInitialized or status.initialized
}

// HelmChartProxy is an addons.cluster.x-k8s.io HelmChartProxy: a chart
// installed on every cluster whose labels match ClusterSelector.
type HelmChartProxy struct {
	Object
	ChartName string
	// ClusterSelector is spec.clusterSelector.matchLabels and
	// MatchExpressions its matchExpressions (Selects, Unmet).
	ClusterSelector  map[string]string
	MatchExpressions []metav1.LabelSelectorRequirement
	// MatchingClusters are status.matchingClusters (names).
	MatchingClusters []string
}

// HelmReleaseProxy is one chart's release on one cluster.
type HelmReleaseProxy struct {
	Object
	ClusterName string
	ChartName   string
	Status      string // status.status ("deployed", "failed", ...)
}

// Cluster is a cluster.x-k8s.io Cluster with everything of it that was
// read.
type Cluster struct {
	Object
	ControlPlaneRef Ref
	InfraRef        Ref
	// ControlPlaneInitialized: status.initialization.controlPlaneInitialized
	// (v1beta2) or status.controlPlaneReady / the ControlPlaneInitialized
	// condition (v1beta1).
	ControlPlaneInitialized bool

	Infra        *Object // AzureCluster, ...
	ControlPlane *KubeadmControlPlane
	// OtherControlPlane is the object ControlPlaneRef names when it is not
	// a KubeadmControlPlane (another control plane provider).
	OtherControlPlane   *Object
	Machines            []*Machine
	MachineSets         []*MachineSet
	MachineDeployments  []*MachineDeployment
	MachinePools        []*MachinePool
	MachineHealthChecks []*MachineHealthCheck
	// KubeadmConfigs are the bootstrap configs of the Machines, by name.
	KubeadmConfigs map[string]*Object
	// HelmChartProxies are all of the namespace's proxies (matching this
	// cluster or not: a missing label is a finding), HelmReleaseProxies
	// this cluster's releases.
	HelmChartProxies   []*HelmChartProxy
	HelmReleaseProxies []*HelmReleaseProxy

	// Problems are what could not be read (a kind not installed, a
	// Forbidden), as sentences; a problem is not a negative result.
	Problems []ReadProblem
}

// ReadProblem is something the reader could not read.
type ReadProblem struct {
	// Resource is the plural resource with its group
	// ("azuremachines.infrastructure.cluster.x-k8s.io").
	Resource string
	// Verb is what was refused or failed (list, watch, get).
	Verb string
	// Forbidden: the API server said 403; Identity is who asked (from a
	// SelfSubjectReview when it could be made) and Role the least rule
	// that would allow it.
	Forbidden bool
	Identity  string
	Role      string
	// NotServed: the API server does not serve the resource (the
	// provider's CRDs are not installed).
	NotServed bool
	// NotFound: the object named by a reference (Name) does not exist.
	NotFound bool
	// Name is the object ("namespace/name") when the problem is about one
	// object rather than a list.
	Name string
	Err  string
}
