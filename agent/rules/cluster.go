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
	CatMPNotReady         = "machinepool.not-ready"
	CatReconcileError     = "controller.reconcile-error"
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
	CatMDNotReady, CatMPNotReady, CatReconcileError, CatMHCLoop, CatAddonMissing, CatAddonFailed,
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

// Cluster API objects joined with the node reports. A finding's title and
// remediation may carry what the node reported ({node_title}, the node's
// remediation): the node's own catalog entry says it, and the Machine's
// finding brings it up.
var (
	MachineNotRunning = register(Problem{
		ID: "MachineNotRunning", Scope: ScopeCluster, Category: CatMachineNotRunning, Severity: Error, Domain: DomainUnknown, Confidence: Low,
		Title:       "Machine {machine} is {phase}, not Running{detail}",
		Remediation: "{remediation}",
		Defaults:    Params{"detail": "", "remediation": "Collect the node's evidence first (see missing evidence), then fix what it names."},
		RefutedBy:   "Machine {machine} reaching Running with nothing changed on its VM",
	})
	MachineProvisioning = register(Problem{
		ID: "MachineProvisioning", Scope: ScopeCluster, Category: CatMachineNotRunning, Severity: Info, Domain: DomainUnknown, Confidence: Low,
		Title:       "Machine {machine} is {phase} ({since}): within the usual provisioning time",
		Remediation: "Nothing yet: a CAPZ VM usually bootstraps in 5-10 minutes. Look again after {grace}.",
		RefutedBy:   "nothing yet: look again after the grace period",
	})
	MachineNodeError = register(Problem{
		ID: "MachineNodeError", Scope: ScopeCluster, Category: CatMachineNodeError, Severity: Error, Domain: DomainNode,
		Title:       "Machine {machine} is {phase} but its node {node} reports {node_title}",
		Remediation: "{remediation}",
		RefutedBy:   "{refuted_by}",
	})
	InfraMachineFailed = register(Problem{
		ID: "InfraMachineFailed", Scope: ScopeCluster, Category: CatInfraFailed, Severity: Error, Domain: DomainCloud,
		Title:       "{kind} {name}: {what}",
		Remediation: "Read the provider's error (quota, SKU availability in the region, allocation): change the machine template (size, zone) or raise the quota.",
		RefutedBy:   "the VM existing and running (provider's activity log)",
	})
	ControlPlaneNotInitialized = register(Problem{
		ID: "ControlPlaneNotInitialized", Scope: ScopeCluster, Category: CatCPNotInitialized, Severity: Critical, Domain: DomainControlPlane,
		Title:       "{what}: no other Machine can join",
		Remediation: "Fix the first control plane Machine (kubeadm init runs only there); the others follow.",
		RefutedBy:   "the Cluster's ControlPlaneInitialized condition True",
	})
	KCPPreflightWaiting = register(Problem{
		ID: "KCPPreflightWaiting", Scope: ScopeCluster, Category: CatCPPreflightBlocked, Severity: Error, Domain: DomainControlPlane,
		Title:       "KubeadmControlPlane {kcp} waits for its preflight checks ({ready}/{desired} ready): the control plane pods of its Machines are not healthy",
		Remediation: "KCP adds no control plane Machine until the existing ones are healthy: fix what the control plane node reports (its kubelet, runtime or image pulls), not KCP.",
		RefutedBy:   "every control plane Machine with APIServerPodHealthy, ControllerManagerPodHealthy, SchedulerPodHealthy, EtcdPodHealthy and EtcdMemberHealthy True",
	})
	MachineDeploymentNotReady = register(Problem{
		ID: "MachineDeploymentNotReady", Scope: ScopeCluster, Category: CatMDNotReady, Severity: Error, Domain: DomainUnknown,
		Title:       "MachineDeployment {md} has 0 of {desired} replicas ready",
		Remediation: "Fix what keeps its Machines from running (the findings it is explained by).",
		RefutedBy:   "MachineDeployment {md} with a ready replica",
	})
	MachinePoolNotReady = register(Problem{
		ID: "MachinePoolNotReady", Scope: ScopeCluster, Category: CatMPNotReady, Severity: Error, Domain: DomainUnknown,
		Title:       "MachinePool {pool} has {ready} of {desired} replicas ready ({since})",
		Remediation: "Fix what keeps its instances from running (the findings it is explained by); an instance's own evidence comes from `az vmss run-command invoke --instance-id` (scripts/run-command).",
		RefutedBy:   "MachinePool {pool} with all its replicas ready",
	})
	ControllerReconcileError = register(Problem{
		ID: "ControllerReconcileError", Scope: ScopeCluster, Category: CatReconcileError, Severity: Error, Domain: DomainUnknown, Confidence: Medium,
		Title:       "{kind} {name}: {error} ({controller})",
		Remediation: "{advice}",
		Defaults:    Params{"advice": "The controller's own error says what it cannot do: fix that (credentials, quota and cloud API errors are the provider's; bootstrap data errors the KubeadmConfig's); the controller retries by itself."},
		RefutedBy:   "a later reconcile of {kind} {name} without the error (the object turning Ready)",
	})
	MHCRemediationLoop = register(Problem{
		ID: "MHCRemediationLoop", Scope: ScopeCluster, Category: CatMHCLoop, Severity: Error, Domain: DomainUnknown, Confidence: Medium,
		Title:       "MachineHealthCheck {mhc} keeps remediating Machines that never become healthy ({now} now, {replacements} replacement(s))",
		Remediation: "Remediation only replaces the VM with an identical one: fix the cause the nodes report. To keep a failing VM for inspection, annotate its Machine with cluster.x-k8s.io/skip-remediation=\"\" (remove it afterwards).",
		RefutedBy:   "the replacement Machines becoming healthy and staying so",
	})
	AddonNotMatched = register(Problem{
		ID: "AddonNotMatched", Scope: ScopeCluster, Category: CatAddonMissing, Severity: Error, Domain: DomainAddon,
		Title:       "{what}",
		Remediation: "{remediation}",
		RefutedBy:   "{refuted_by}",
	})
	AddonReleaseFailed = register(Problem{
		ID: "AddonReleaseFailed", Scope: ScopeCluster, Category: CatAddonFailed, Severity: Error, Domain: DomainAddon,
		Title:       "the {label} release {release} of HelmChartProxy {proxy} failed",
		Remediation: "Read the release's conditions and the caaph-controller-manager logs (caaph-system) for the Helm error; fix the chart values in HelmChartProxy {proxy}.",
		RefutedBy:   "the release deployed (status deployed)",
	})
)
