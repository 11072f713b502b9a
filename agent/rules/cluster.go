package rules

// Cluster problems: what `nodediag diagnose` names from Cluster API
// objects, the workload cluster's own state and the node reports joined
// (collector/incident). They share the catalog, its validation and its
// templates with the node problems; their findings carry a failure domain
// and, for the workload dependency chain, the link they break.

// Scopes of a problem.
const (
	ScopeNode    = "node"
	ScopeCluster = "cluster"
)

// Failure domains of an incident.
const (
	DomainNode         = "node"
	DomainControlPlane = "control plane"
	DomainNetwork      = "network"
	DomainRegistry     = "registry"
	DomainCloud        = "cloud"
	DomainAddon        = "addon"
	DomainUnknown      = "unknown"
)

// Domains lists every failure domain.
var Domains = []string{DomainNode, DomainControlPlane, DomainNetwork, DomainRegistry, DomainCloud, DomainAddon, DomainUnknown}

// The dependency chain of a workload cluster: if a link breaks, the links
// after it fail too, so a report names the first broken one.
const (
	LinkKubeProxy  = "kube-proxy"
	LinkCNI        = "CNI"
	LinkCoreDNS    = "CoreDNS"
	LinkCNM        = "cloud-node-manager"
	LinkCCM        = "cloud-controller-manager"
	LinkProviderID = "providerID"
	LinkRunning    = "Machine Running"
)

// ChainLinks are the links in chain order.
var ChainLinks = []string{LinkKubeProxy, LinkCNI, LinkCoreDNS, LinkCNM, LinkCCM, LinkProviderID, LinkRunning}

// Cluster categories (docs/CONTRACTS.md).
const (
	CatMachineNotRunning  = "machine.not-running"
	CatMachineNodeError   = "machine.node-error"
	CatInfraFailed        = "infra.provisioning-failed"
	CatCPNotInitialized   = "controlplane.not-initialized"
	CatCPPreflightBlocked = "controlplane.preflight-blocked"
	CatMDNotReady         = "machinedeployment.not-ready"
	CatMHCLoop            = "machinehealthcheck.remediation-loop"
	CatAddonMissing       = "addon.not-installed"
	CatAddonFailed        = "addon.release-failed"
	CatComponentFailing   = "workload.component-failing"
	CatComponentMissing   = "workload.component-missing"
	CatNodeNotReady       = "workload.node-not-ready"
	CatNodeUninitialized  = "workload.node-uninitialized"
)

// ClusterCategories lists every cluster category, for validation.
var ClusterCategories = []string{
	CatMachineNotRunning, CatMachineNodeError, CatInfraFailed, CatCPNotInitialized, CatCPPreflightBlocked,
	CatMDNotReady, CatMHCLoop, CatAddonMissing, CatAddonFailed,
	CatComponentFailing, CatComponentMissing, CatNodeNotReady, CatNodeUninitialized,
}

// DomainOf is the failure domain of a node finding's category.
func DomainOf(category string) string {
	switch category {
	case CatEndpointInvalid, CatRegUnreachable, CatImagePullFailed:
		return DomainRegistry
	case CatCNINotReady, CatAPIUnreachable:
		return DomainNetwork
	case CatStaticPodCrash:
		return DomainControlPlane
	case "":
		return DomainUnknown
	}
	return DomainNode
}

// The workload cluster's chain (read with a read-only identity from its
// API server, or from a CI tree's dumps).
var (
	WorkloadComponentFailing = register(Problem{
		ID: "WorkloadComponentFailing", Scope: ScopeCluster, Category: CatComponentFailing, Severity: Error, Domain: DomainAddon,
		Title:       "{link} is not running in the workload cluster: {kind} {workload} has {ready} of {desired} pods ready{reason}",
		Remediation: "{advice} Look closer with `kubectl --kubeconfig WORKLOAD -n {namespace} describe pod {pod}` and `kubectl --kubeconfig WORKLOAD -n {namespace} logs {pod} -c {container} --previous`.",
		Defaults:    Params{"reason": "", "advice": "Fix what the pod's state says.", "pod": "POD", "container": "CONTAINER"},
		RefutedBy:   "{kind} {workload} with all its pods ready",
	})
	WorkloadComponentMissing = register(Problem{
		ID: "WorkloadComponentMissing", Scope: ScopeCluster, Category: CatComponentMissing, Severity: Error, Domain: DomainAddon, Confidence: Medium,
		Title:       "no {link} runs in the workload cluster ({looked})",
		Remediation: "{advice}",
		RefutedBy:   "a {link} DaemonSet or Deployment in the workload cluster, or {link} running outside it",
	})
	WorkloadNodeNotReady = register(Problem{
		ID: "WorkloadNodeNotReady", Scope: ScopeCluster, Category: CatNodeNotReady, Severity: Error, Domain: DomainNode,
		Title:       "Node {node} is NotReady: {message}",
		Remediation: "{advice}",
		Defaults:    Params{"advice": "Read the node's kubelet and runtime (run the agent on the VM): the Ready condition quotes what the kubelet reports."},
		RefutedBy:   "Node {node} with Ready=True",
	})
	WorkloadNodeUninitialized = register(Problem{
		ID: "WorkloadNodeUninitialized", Scope: ScopeCluster, Category: CatNodeUninitialized, Severity: Error, Domain: DomainCloud, ChainLink: LinkCCM,
		Title:       "Node {node} still carries the taint {taint} ({age}): the cloud provider has not initialised it, so it has no providerID and its Machine cannot turn Running",
		Remediation: "The cloud-controller-manager (and on Azure the cloud-node-manager on the node) removes this taint when it sets spec.providerID. Make them run in the workload cluster: the cloud-provider-azure chart (HelmChartProxy selecting the cluster's cloud-provider label) or your own manifests; then read their pods' state and logs.",
		Defaults:    Params{"taint": "node.cloudprovider.kubernetes.io/uninitialized"},
		RefutedBy:   "the taint gone and spec.providerID set on Node {node}",
	})
)
