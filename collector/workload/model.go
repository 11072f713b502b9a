// Package workload reads a workload cluster's own state for the dependency
// chain kube-proxy → CNI → CoreDNS → cloud-node-manager →
// cloud-controller-manager → Node spec.providerID: its Nodes (conditions,
// taints, providerID) and the system workloads of each link (DaemonSets and
// Deployments with their pods' container states and last termination
// messages). It reads from the workload cluster's API server with a
// read-only identity (reader.go, kubeconfig.go) or from the resource dumps
// of a CI artifact tree (dump.go), and reduces both to State. It only reads
// and models; the chain is judged in collector/incident.
package workload

import (
	"time"

	"github.com/nodediag/nodediag/agent/rules"
)

// The chain's links that live in the workload cluster, in chain order.
// They are the catalog's (agent/rules), so that a link means the same in
// the State and in the incident.
const (
	LinkKubeProxy = rules.LinkKubeProxy
	LinkCNI       = rules.LinkCNI
	LinkCoreDNS   = rules.LinkCoreDNS
	LinkCNM       = rules.LinkCNM
	LinkCCM       = rules.LinkCCM
)

// Links are the workload links in chain order.
var Links = []string{LinkKubeProxy, LinkCNI, LinkCoreDNS, LinkCNM, LinkCCM}

// Namespaces are where the chain's workloads run: kube-system for
// kube-proxy, CoreDNS, Cilium, Azure CNI and cloud-provider-azure;
// calico-system for Calico installed by the Tigera operator (the CAPZ
// calico chart); kube-flannel for Flannel's manifest.
var Namespaces = []string{"kube-system", "calico-system", "kube-flannel"}

// State is what was read of one workload cluster.
type State struct {
	// Source says where the state comes from, for the report: "the
	// workload API server https://…:6443 (kubeconfig of Secret
	// ns/name-nodediag-kubeconfig)" or "the resource dumps under DIR".
	Source string    `json:"source"`
	ReadAt time.Time `json:"read_at"`
	// Reached: the API server answered (or the dump held resources).
	// When false, nothing below is known and Problems says why.
	Reached   bool       `json:"reached"`
	Nodes     []Node     `json:"nodes,omitempty"`
	Workloads []Workload `json:"workloads,omitempty"`
	// Problems are what could not be read: gaps, never negative results.
	Problems []Problem `json:"problems,omitempty"`
}

// Node is a workload cluster Node, reduced.
type Node struct {
	Name           string      `json:"name"`
	ProviderID     string      `json:"provider_id,omitempty"`
	KubeletVersion string      `json:"kubelet_version,omitempty"`
	Created        time.Time   `json:"created"`
	Conditions     []Condition `json:"conditions,omitempty"`
	Taints         []Taint     `json:"taints,omitempty"`
	// ControlPlane: the node-role.kubernetes.io/control-plane label.
	ControlPlane bool `json:"control_plane,omitempty"`
}

// Condition is a Node or Pod condition.
type Condition struct {
	Type               string    `json:"type"`
	Status             string    `json:"status"`
	Reason             string    `json:"reason,omitempty"`
	Message            string    `json:"message,omitempty"`
	LastTransitionTime time.Time `json:"last_transition_time"`
}

// Taint is a Node taint.
type Taint struct {
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect"`
}

// Condition returns the node's condition of type t.
func (n *Node) Condition(t string) (Condition, bool) {
	for _, c := range n.Conditions {
		if c.Type == t {
			return c, true
		}
	}
	return Condition{}, false
}

// Tainted says whether the node carries the taint key.
func (n *Node) Tainted(key string) (Taint, bool) {
	for _, t := range n.Taints {
		if t.Key == key {
			return t, true
		}
	}
	return Taint{}, false
}

// Workload is a DaemonSet or Deployment of a chain link with its pods.
type Workload struct {
	Link      string `json:"link"`
	Kind      string `json:"kind"` // DaemonSet, Deployment
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Desired is a DaemonSet's desiredNumberScheduled or a Deployment's
	// spec.replicas; Ready its numberReady or readyReplicas.
	Desired int32 `json:"desired"`
	Ready   int32 `json:"ready"`
	// Images are the pod template's container images.
	Images []string `json:"images,omitempty"`
	// Pods are the pods that are not ready (at most 20) and a few ready
	// ones; PodsOmitted counts the rest.
	Pods        []Pod `json:"pods,omitempty"`
	PodsOmitted int   `json:"pods_omitted,omitempty"`
}

// Pod is a pod of a chain workload, reduced.
type Pod struct {
	Name       string      `json:"name"`
	Node       string      `json:"node,omitempty"`
	Phase      string      `json:"phase"`
	Created    time.Time   `json:"created"`
	Conditions []Condition `json:"conditions,omitempty"`
	Containers []Container `json:"containers,omitempty"`
}

// Container is one container's (or init container's) status.
type Container struct {
	Name     string `json:"name"`
	Image    string `json:"image,omitempty"`
	Init     bool   `json:"init,omitempty"`
	Ready    bool   `json:"ready"`
	Restarts int32  `json:"restarts,omitempty"`
	// State is "waiting", "running" or "terminated"; Reason and Message
	// are the state's (CrashLoopBackOff, ImagePullBackOff and the kubelet's
	// message).
	State   string `json:"state"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Last is the previous termination (lastState.terminated), whose
	// message is the container's last words.
	Last *Termination `json:"last,omitempty"`
}

// Termination is a container's termination.
type Termination struct {
	Reason   string    `json:"reason,omitempty"`
	Message  string    `json:"message,omitempty"`
	ExitCode int32     `json:"exit_code"`
	Finished time.Time `json:"finished"`
}

// Problem is something that could not be read.
type Problem struct {
	Resource  string `json:"resource"` // "nodes", "pods in kube-system", "the API server"
	Verb      string `json:"verb,omitempty"`
	Forbidden bool   `json:"forbidden,omitempty"`
	// Identity is who asked (for a Forbidden), when known.
	Identity string `json:"identity,omitempty"`
	Err      string `json:"error"`
	// Optional: a namespace beside kube-system (calico-system,
	// kube-flannel) that the identity need not be granted; it matters only
	// when the chain's CNI is not found elsewhere.
	Optional bool `json:"optional,omitempty"`
}

// LinkWorkloads returns the workloads of link.
func (s *State) LinkWorkloads(link string) []*Workload {
	var out []*Workload
	for i := range s.Workloads {
		if s.Workloads[i].Link == link {
			out = append(out, &s.Workloads[i])
		}
	}
	return out
}

// Unreadable says whether a read of resource failed (a prefix match:
// "pods" matches "pods in kube-system").
func (s *State) Unreadable(resource string) bool {
	for _, p := range s.Problems {
		if p.Resource == resource || len(p.Resource) > len(resource) && p.Resource[:len(resource)+1] == resource+" " {
			return true
		}
	}
	return false
}
