package rules

// The catalog: every problem nodediag can name. Rules refer to these by
// variable, so a typo fails to compile; log signatures (signatures/*.json)
// refer to them by ID, checked when the signatures load.
//
// Declaration order is the last tie-breaker of ranking: within a severity and
// confidence, an earlier problem is the more decisive explanation.

// Bootstrap consequences. These are what an operator sees first (the
// CAPZ.Linux.Bootstrapping extension fails, cloud-init reports an error, the
// Machine stays Provisioned); they rank below the cause that explains them.
var (
	bootstrapSymptoms = []string{"CloudInitFailed", "BootstrapCommandFailed", "KubeadmInitFailed", "KubeadmJoinFailed", "KubeadmFailed", "BootstrapSentinelMissing", "KubeletTLSBootstrapFailed"}
	kubeletSymptoms   = append([]string{"KubeletNotHealthy", "KubeletCrashLoop", "KubeletNotRunning", "KubeletConfigMissing"}, bootstrapSymptoms...)
)

// Causes, most decisive first.
var (
	KubeletRemovedFlag = register(Problem{
		ID: "KubeletRemovedFlag", Category: CatFlagRemoved, Severity: Error,
		Title:       "kubelet {version} rejects --{flag} set in {file}",
		Remediation: "Remove --{flag} from {file}{variable_note}: it was removed in Kubernetes {removed_in}{replacement}. If the file comes from the node image (the Azure Linux 3 gallery image ships /etc/sysconfig/kubelet with KUBELET_EXTRA_ARGS=--pod-infra-container-image=...), remove the flag in the bootstrap template (preKubeadmCommands of the KubeadmConfigTemplate or KubeadmControlPlane, or kubeletExtraArgs) so that new Machines get the fix, then restart kubelet.",
		RefutedBy:   "kubelet running with that command line, or a kubelet older than {removed_in}",
		Explains:    append([]string{"KubeletUnknownFlag"}, kubeletSymptoms...),
	})
	KubeletUnknownFlag = register(Problem{
		ID: "KubeletUnknownFlag", Category: CatFlagRemoved, Severity: Error,
		Title:       "kubelet refuses to start: unknown flag {flag}{where}",
		Defaults:    Params{"where": ""},
		Remediation: "Remove {flag} from the kubelet's command line (KUBELET_EXTRA_ARGS in /etc/default/kubelet or /etc/sysconfig/kubelet, KUBELET_KUBEADM_ARGS in /var/lib/kubelet/kubeadm-flags.env, kubeletExtraArgs of the kubeadm configuration) or move it to the KubeletConfiguration file, then restart kubelet.",
		RefutedBy:   "a later kubelet start without the error",
		Explains:    kubeletSymptoms,
	})
	KubeletConfigInvalid = register(Problem{
		ID: "KubeletConfigInvalid", Category: CatKubeletNotRunning, Severity: Error,
		Title:       "kubelet cannot load its configuration {file}",
		Remediation: "Fix {file}: {error}. kubeadm writes it from the KubeletConfiguration of the kubeadm config (kubeletConfiguration patches, KubeadmConfig.spec.files); correct the source and rerun the bootstrap, or fix the file and restart kubelet.",
		RefutedBy:   "the file parsing as a KubeletConfiguration",
		Explains:    kubeletSymptoms,
	})
	KubeletNotInstalled = register(Problem{
		ID: "KubeletNotInstalled", Category: CatKubeletNotRunning, Severity: Error,
		Title:       "no kubelet binary on the node ({unit_path} is what the unit runs)",
		Remediation: "Install the kubelet the node image or preKubeadmCommands are meant to provide (check the download or package step in /var/log/cloud-init-output.log), or point the unit at the installed binary.",
		RefutedBy:   "an executable kubelet at the path the unit runs",
		Explains:    kubeletSymptoms,
	})
	KubeletSpawnFailed = register(Problem{
		ID: "KubeletSpawnFailed", Category: CatKubeletNotRunning, Severity: Error,
		Title:       "systemd cannot start the kubelet: {detail}",
		Remediation: "systemd fails before the kubelet runs, at a step of setting up its process: CHDIR is the unit's WorkingDirectory= missing (create it, e.g. mkdir -p /var/lib/kubelet, or remove the setting), EXEC the ExecStart= binary missing or not executable, USER/GROUP an unknown account, NAMESPACE a ReadWritePaths= or similar path that does not exist. Fix the unit or the path (systemctl cat kubelet shows the unit and its drop-ins), then systemctl daemon-reload and restart kubelet.",
		RefutedBy:   "the kubelet's own log lines after its start",
		Explains:    append([]string{"KubeletNotInstalled"}, kubeletSymptoms...),
	})
	VersionMismatch = register(Problem{
		ID: "VersionMismatch", Category: CatVersionMismatch, Severity: Error,
		Title:       "{binary} is {version}, not the expected {expected}",
		Remediation: "Install {binary} {expected} (the Machine's version). A script that replaces the gallery image's binaries may have failed without stopping cloud-init (a failed curl in a pipeline, a missing set -o pipefail): check its output in /var/log/cloud-init-output.log and the binaries in {path}.",
		RefutedBy:   "{binary} reporting version {expected}",
		Explains:    append([]string{"KubeletNewerThanControlPlane", "KubeletTooOld", "KubeadmKubeletSkew", "KubeadmControlPlaneSkew", "KubeadmPreflightKubeletVersion", "KubectlSkew"}, kubeletSymptoms...),
	})
	KubeletNewerThanControlPlane = register(Problem{
		ID: "KubeletNewerThanControlPlane", Category: CatVersionSkew, Severity: Error,
		Title:       "kubelet {version} is newer than the control plane {control_plane}",
		Remediation: "The kubelet must not be newer than kube-apiserver. Install kubelet {control_plane_minor}.x (the node image's gallery version or the binaries installed by preKubeadmCommands must match KUBERNETES_VERSION), or raise the control plane version.",
		RefutedBy:   "kubelet --version at or below the control plane's minor version",
		Explains:    append([]string{"KubeadmPreflightKubeletVersion"}, kubeletSymptoms...),
	})
	KubeletTooOld = register(Problem{
		ID: "KubeletTooOld", Category: CatVersionSkew, Severity: Error,
		Title:       "kubelet {version} is {skew} minor versions older than the control plane {control_plane}",
		Remediation: "A kubelet may be at most {max_skew} minor versions older than kube-apiserver. Upgrade the kubelet (node image or installed binaries) to within the supported skew.",
		RefutedBy:   "kubelet within {max_skew} minor versions of the control plane",
		Explains:    kubeletSymptoms,
	})
	KubeadmKubeletSkew = register(Problem{
		ID: "KubeadmKubeletSkew", Category: CatVersionSkew, Severity: Error,
		Title:       "kubeadm {kubeadm} and kubelet {version} are outside kubeadm's supported skew",
		Remediation: "kubeadm supports a kubelet of its own minor version down to {min_kubelet}. Install kubeadm and kubelet of the same version (the one the Machine expects).",
		RefutedBy:   "kubeadm and kubelet of the same minor version",
		Explains:    append([]string{"KubeadmPreflightKubeletVersion"}, bootstrapSymptoms...),
	})
	KubeadmControlPlaneSkew = register(Problem{
		ID: "KubeadmControlPlaneSkew", Category: CatVersionSkew, Severity: Error,
		Title:       "kubeadm {kubeadm} cannot manage control plane {control_plane}",
		Remediation: "kubeadm supports a control plane of its own minor version or one older. Install kubeadm matching the control plane version {control_plane}.",
		RefutedBy:   "kubeadm of the control plane's minor version",
		Explains:    bootstrapSymptoms,
	})
	APIServerOlderThanKubelet = register(Problem{
		ID: "APIServerOlderThanKubelet", Category: CatVersionSkew, Severity: Error,
		Title:       "the API server rejects what this kubelet asks ({detail}): the kubelet is newer than the control plane",
		Remediation: "The kubelet may not be newer than the API server (the version skew policy): it asks for fields and resources the older server does not know. Give the node the control plane's minor version (the Machine template's version, the image's kubelet), or upgrade the control plane first.",
		RefutedBy:   "the kubelet's minor version not above the API server's",
		Explains:    append([]string{"KubeletNotHealthy", "PodCrashLoop"}, bootstrapSymptoms...),
	})
	JoinKubeletConfigVersion = register(Problem{
		ID: "JoinKubeletConfigVersion", Category: CatVersionSkew, Severity: Error,
		Title:       "kubeadm join asks for the kubelet configuration of {version}, which the cluster does not serve: the node's kubeadm is not the control plane's minor version",
		Remediation: "A kubeadm join reads the kubelet-config ConfigMap of its own minor version (kubelet-config-1.13; a single kubelet-config from 1.24 on), and the cluster has only its control plane's. Give the node the control plane's minor version (the Machine template's version and the image's kubeadm and kubelet), or upgrade the control plane first.",
		RefutedBy:   "the ConfigMap kubelet-config-{version} present in kube-system",
		Explains:    append([]string{"KubeadmJoinFailed"}, kubeletSymptoms...),
	})
	KubeletMultipleBinaries = register(Problem{
		ID: "KubeletMultipleBinaries", Category: CatVersionMismatch, Severity: Warning, Confidence: Medium,
		Title:       "two kubelet binaries of different versions: {paths}",
		Remediation: "The unit runs {effective}. Remove the stale copy or point kubelet.service (ExecStart in its drop-ins) at the intended binary, so that the version the node runs is the one that was installed.",
		RefutedBy:   "one kubelet binary, or copies of the same version",
		Explains:    []string{"VersionMismatch", "KubeletNewerThanControlPlane", "KubeletTooOld", "KubeadmKubeletSkew"},
	})
	BootstrapDownloadFailed = register(Problem{
		ID: "BootstrapDownloadFailed", Category: CatDownloadFailed, Severity: Error,
		Title:       "the download of {url} failed: {what}",
		Defaults:    Params{"url": "a bootstrap file"},
		Remediation: "Check that the URL exists and is reachable from the node (version string, storage account, proxy, DNS, NSG egress), fix it in the preKubeadmCommands or the script that downloads it, and make the script fail loudly (set -o errexit -o pipefail, curl --fail).",
		RefutedBy:   "the download succeeding on a retry later in the log",
		Explains:    append([]string{"PackageInstallFailed", "KubeletNotInstalled", "VersionMismatch", "KubeletMultipleBinaries"}, kubeletSymptoms...),
	})
	PackageInstallFailed = register(Problem{
		ID: "PackageInstallFailed", Category: CatDownloadFailed, Severity: Error,
		Title:       "a package install failed during bootstrap",
		Remediation: "Fix the package step of the bootstrap (package name and version, repository reachability, dpkg/rpm errors); the rest of the bootstrap then runs against the binaries of the image.",
		RefutedBy:   "the package installed later in the log",
		Explains:    append([]string{"KubeletNotInstalled", "VersionMismatch"}, kubeletSymptoms...),
	})
	RegistryEndpointInvalid = register(Problem{
		ID: "RegistryEndpointInvalid", Category: CatEndpointInvalid, Severity: Error,
		Title:       "a registry or mirror endpoint is malformed: {detail}",
		Remediation: "Write mirror endpoints as <scheme>://<host>[:<port>] in the containerd configuration (registry.mirrors endpoint, or server/[host] in certs.d/<registry>/hosts.toml), and image references without a scheme. In air-gapped DKP the registry variable must be host:port (no scheme) when seeding the registry and http(s)://host:port when creating the cluster.",
		RefutedBy:   "image pulls through the mirror succeeding",
		Explains:    append([]string{"ImagePullFailed", "ImageNotFound", "KubeadmPreflightFailed", "KubeletNotHealthy"}, bootstrapSymptoms...),
	})
	RegistryMirrorsWithConfigPath = register(Problem{
		ID: "RegistryMirrorsWithConfigPath", Category: CatEndpointInvalid, Severity: Error,
		Title:       "{file} sets registry mirrors (or TLS configs) in the CRI plugin together with config_path: containerd refuses to load its CRI plugin",
		Defaults:    Params{"file": "containerd's configuration"},
		Remediation: "Use one way to configure registries: move every mirror of registry.mirrors (and every configs.tls) into /etc/containerd/certs.d/<registry>/hosts.toml and delete those tables, or remove config_path (deprecated mirrors stay usable in containerd 1.x only). containerd loads its CRI plugin again after a restart; kubeadm and the kubelet then find the runtime.",
		RefutedBy:   "crictl info answering with that configuration",
		Explains:    append([]string{"RuntimeCRIDisabled", "RuntimeNotRunning", "KubeadmPreflightFailed", "ImagePullFailed"}, kubeletSymptoms...),
	})
	RegistryUnreachable = register(Problem{
		ID: "RegistryUnreachable", Category: CatRegUnreachable, Severity: Error,
		Title:       "a registry cannot be reached: {detail}",
		Remediation: "Make the registry reachable from the node (DNS, egress rules, proxy, VNet peering for private registries) or configure a reachable mirror; in air-gapped clusters every image must come from the local registry.",
		RefutedBy:   "a successful pull from that registry",
		Explains:    append([]string{"ImagePullFailed", "ImageNotFound", "KubeadmPreflightFailed", "KubeletNotHealthy"}, bootstrapSymptoms...),
	})
	// RegistryMirrorUnreachable is an endpoint that fails while a later one
	// of the same registry answers: pulls still work, each after waiting for
	// the dead endpoint first (a dropped connection costs containerd up to
	// 30 s per request, a refused one nothing).
	RegistryMirrorUnreachable = register(Problem{
		ID: "RegistryMirrorUnreachable", Category: CatRegUnreachable, Severity: Warning,
		Title:       "registry endpoint {endpoint} ({role}) fails at {step}; pulls fall back to {fallback}",
		Remediation: "Fix {endpoint} or remove it from {file}: containerd tries it before {fallback} on every pull and waits for it to fail first.",
		RefutedBy:   "{endpoint} answering GET /v2/ from the node",
	})
	ImageNotFound = register(Problem{
		ID: "ImageNotFound", Category: CatImagePullFailed, Severity: Error,
		Title:       "image {image} does not exist in its registry",
		Remediation: "Use a tag that exists (an LTS version such as v1.31.100 has no upstream registry.k8s.io image: pre-pull it from the custom registry and retag it), or push the image to the configured registry or mirror.",
		RefutedBy:   "the image present on the node (crictl images)",
		Explains:    append([]string{"ImagePullFailed", "KubeadmPreflightFailed", "KubeletNotHealthy"}, bootstrapSymptoms...),
	})
	ImagePullAuthFailed = register(Problem{
		ID: "ImagePullAuthFailed", Category: CatImagePullFailed, Severity: Error,
		Title:       "the registry refused credentials for {image}",
		Remediation: "Give the node credentials for the registry (kubelet credential provider or containerd registry auth, imagePullSecrets, managed identity with AcrPull for ACR).",
		RefutedBy:   "an authorised pull from that registry",
		Explains:    append([]string{"ImagePullFailed", "KubeadmPreflightFailed", "KubeletNotHealthy"}, bootstrapSymptoms...),
	})
	RegistryCertificateUntrusted = register(Problem{
		ID: "RegistryCertificateUntrusted", Category: CatRegUnreachable, Severity: Error,
		Title:       "the node does not trust the TLS certificate of a registry: {detail}",
		Remediation: "Give containerd the registry's CA: ca = \"/etc/containerd/certs.d/<registry>/ca.crt\" in that registry's hosts.toml (config_path), or the CA in the node's trust store (update-ca-certificates) and a restart of containerd; a registry with a self-signed certificate needs its own CA, not skip_verify, in production.",
		RefutedBy:   "a pull from that registry succeeding",
		Explains:    append([]string{"ImagePullFailed", "ImageNotFound", "KubeadmPreflightFailed", "KubeletNotHealthy"}, bootstrapSymptoms...),
	})
	SandboxImageMissing = register(Problem{
		ID: "SandboxImageMissing", Category: CatImagePullFailed, Severity: Error,
		Title:       "the runtime cannot get its pod sandbox (pause) image {image}: no pod can start",
		Remediation: "Put the sandbox image the runtime is configured with on the node, or point the configuration at one it can get: sandbox_image (containerd 1.x) or pinned_images.sandbox (containerd 2.x) in /etc/containerd/config.toml, --pod-infra-container-image for older kubelets. A name without a registry (localhost/...) is never pulled: it must be imported into the k8s.io namespace (ctr -n k8s.io images import), as the node image's boot scripts do; otherwise check that the registry or mirror serves it.",
		RefutedBy:   "the image listed by crictl images, and pod sandboxes starting",
		Explains:    append([]string{"ImagePullFailed", "CNINotInitialized", "KubeletNotHealthy"}, bootstrapSymptoms...),
	})
	ImageReferenceInvalid = register(Problem{
		ID: "ImageReferenceInvalid", Category: CatImagePullFailed, Severity: Error,
		Title:       "an image name the node uses is not a valid reference: {image}",
		Defaults:    Params{"image": "(see the quoted line)"},
		Remediation: "The runtime rejects the name before it asks any registry (invalid reference format: a stray quote or space, upper-case letters, a second tag). Find where it is set and fix the value: --pod-infra-container-image in the kubelet's flags (/etc/sysconfig/kubelet, /etc/default/kubelet, /var/lib/kubelet/kubeadm-flags.env), sandbox_image in /etc/containerd/config.toml, or the image of a static pod manifest; then restart the kubelet.",
		RefutedBy:   "the same image pulled by that name (crictl pull)",
		Explains:    append([]string{"ImagePullFailed", "CNINotInitialized", "KubeletNotHealthy"}, bootstrapSymptoms...),
	})
	ImagePullFailed = register(Problem{
		ID: "ImagePullFailed", Category: CatImagePullFailed, Severity: Error, Confidence: Medium,
		Title:       "image pulls fail: {image}",
		Remediation: "Read the pull error quoted here: check the image reference, the registry's reachability and the containerd registry configuration (/etc/containerd/config.toml, /etc/containerd/certs.d).",
		RefutedBy:   "the image present on the node",
		Explains:    append([]string{"KubeadmPreflightFailed", "KubeletNotHealthy"}, bootstrapSymptoms...),
	})
	// ContainerdConfigInvalid is the cause of a containerd that does not
	// start: containerd exits at load ("containerd: failed to load TOML:
	// ..." in its journal, which the RuntimeNotRunning signature matches)
	// when config.toml or one of its imports does not parse, does not exist
	// or is not a file. It names the file and the line, which the journal
	// line does not always do.
	ContainerdConfigInvalid = register(Problem{
		ID: "ContainerdConfigInvalid", Category: CatRuntimeNotRunning, Severity: Error,
		Title:       "containerd cannot load its configuration {file}: {error}",
		Remediation: "Fix {file}: containerd refuses to start until every file of its configuration (/etc/containerd/config.toml and the files its imports name) loads; check it with `containerd config dump`. A bootstrap step that edits config.toml with sed or appends TOML (preKubeadmCommands, the image build) is the usual source: fix that step so that new Machines get a valid file, then restart containerd.",
		RefutedBy:   "containerd running with that configuration (`containerd config dump` succeeding)",
		Explains:    append([]string{"RuntimeNotRunning", "RuntimeCRIDisabled", "KubeadmPreflightFailed", "ImagePullFailed"}, kubeletSymptoms...),
	})
	RuntimeCRIDisabled = register(Problem{
		ID: "RuntimeCRIDisabled", Category: CatRuntimeNotRunning, Severity: Error,
		Title:       "containerd runs but does not serve the CRI",
		Remediation: "Enable containerd's CRI plugin: remove \"cri\" from disabled_plugins in /etc/containerd/config.toml (the containerd.io package ships it disabled) and fix any error that stops the plugin loading (e.g. registry.mirrors set together with config_path), then restart containerd.",
		RefutedBy:   "crictl info answering",
		Explains:    append([]string{"RuntimeNotRunning", "KubeadmPreflightFailed", "ImagePullFailed"}, kubeletSymptoms...),
	})
	RuntimeNotRunning = register(Problem{
		ID: "RuntimeNotRunning", Category: CatRuntimeNotRunning, Severity: Error,
		Title:       "the container runtime is not running: {detail}",
		Remediation: "Start containerd and read why it stopped (journalctl -u containerd): a broken /etc/containerd/config.toml stops it at load. The kubelet and kubeadm need its socket at the configured containerRuntimeEndpoint.",
		RefutedBy:   "containerd active and its socket answering CRI",
		Explains:    append([]string{"KubeadmPreflightFailed", "ImagePullFailed"}, kubeletSymptoms...),
	})
	KubeletCgroupDriverMismatch = register(Problem{
		ID: "KubeletCgroupDriverMismatch", Category: CatCgroupMismatch, Severity: Error,
		Title:       "kubelet and the runtime disagree on the cgroup driver",
		Remediation: "Use the same driver on both sides: cgroupDriver in /var/lib/kubelet/config.yaml and SystemdCgroup in containerd's runc options (systemd on systemd hosts).",
		RefutedBy:   "both configured with the same driver",
		// Pods whose containers the runtime puts in cgroups the kubelet
		// does not manage are killed and restarted: the static pods
		// crash-loop.
		Explains: append([]string{"StaticPodCrashLoop", "ControllerCrashLoop", "PodCrashLoop"}, kubeletSymptoms...),
	})
	CRIOCgroupManagerMismatch = register(Problem{
		ID: "CRIOCgroupManagerMismatch", Category: CatCgroupMismatch, Severity: Error, Confidence: High,
		Title:       "CRI-O runs with the {crio} cgroup manager, the kubelet with the other driver: CRI-O refuses every pod sandbox",
		Remediation: "Use the same driver on both sides: cgroup_manager in CRI-O's configuration (/etc/crio/crio.conf, /etc/crio/crio.conf.d/*.conf, or crio's --cgroup-manager) and cgroupDriver in the kubelet's configuration (/var/lib/kubelet/config.yaml, or --cgroup-driver); systemd on systemd hosts. Restart crio and the kubelet.",
		RefutedBy:   "pod sandboxes created by CRI-O after the change",
		Explains:    append([]string{"StaticPodCrashLoop", "ControllerCrashLoop", "PodCrashLoop"}, kubeletSymptoms...),
	})
	RuntimeCgroupParentRefused = register(Problem{
		ID: "RuntimeCgroupParentRefused", Category: CatCgroupMismatch, Severity: Error, Confidence: High,
		Title:       "{runtime} refuses the pod cgroups the kubelet asks for: it runs the systemd cgroup driver, the kubelet cgroupfs",
		Defaults:    Params{"runtime": "the runtime", "runtime_setting": "the runtime's cgroup driver"},
		Remediation: "Use one cgroup driver on both sides (systemd on systemd hosts): {runtime_setting}, and the kubelet's cgroupDriver in /var/lib/kubelet/config.yaml (--cgroup-driver in kubeadm-flags.env on old kubeadm nodes); restart both. The pods the runtime refused are recreated.",
		RefutedBy:   "pod sandboxes created after the change",
		Explains:    append([]string{"StaticPodCrashLoop", "ControllerCrashLoop", "PodCrashLoop"}, kubeletSymptoms...),
	})
	SwapEnabled = register(Problem{
		ID: "SwapEnabled", Category: CatSwapEnabled, Severity: Error,
		Title:       "swap is on ({devices}) and the kubelet refuses to run with swap",
		Defaults:    Params{"devices": "see /proc/swaps"},
		Remediation: "Turn swap off (swapoff -a, and remove it from /etc/fstab or the image's swap unit), or allow it in the KubeletConfiguration (failSwapOn: false, memorySwap.swapBehavior) and skip kubeadm's Swap preflight check.",
		RefutedBy:   "/proc/swaps without devices, or failSwapOn: false",
		Explains:    append([]string{"KubeadmPreflightFailed"}, kubeletSymptoms...),
	})
	DiskFull = register(Problem{
		ID: "DiskFull", Category: CatDiskPressure, Severity: Error,
		Title:       "{path} is full: {used_percent}% used, {free} free",
		Remediation: "Free space on {mount} (container images under /var/lib/containerd, logs under /var/log, etcd data) or grow the disk (the OS disk size of the AzureMachineTemplate); the kubelet evicts pods and image pulls fail below its thresholds.",
		RefutedBy:   "free space above the kubelet's eviction thresholds",
		Explains:    append([]string{"StaticPodCrashLoop", "ControllerCrashLoop", "DiskNoSpaceLogged", "KubeletDiskEviction", "ImagePullFailed", "BootstrapDownloadFailed", "PackageInstallFailed"}, kubeletSymptoms...),
	})
	DiskInodesExhausted = register(Problem{
		ID: "DiskInodesExhausted", Category: CatDiskPressure, Severity: Error,
		Title:       "{path} has no inodes left: {inodes_used_percent}% used",
		Remediation: "Delete the many small files filling {mount} (container layers, logs, leaked pod directories), or recreate the filesystem with more inodes.",
		RefutedBy:   "free inodes above the kubelet's threshold",
		Explains:    append([]string{"StaticPodCrashLoop", "ControllerCrashLoop", "DiskNoSpaceLogged", "KubeletDiskEviction", "ImagePullFailed", "BootstrapDownloadFailed", "PackageInstallFailed"}, kubeletSymptoms...),
	})
	DiskNoSpaceLogged = register(Problem{
		ID: "DiskNoSpaceLogged", Category: CatDiskPressure, Severity: Error,
		Title:       "writing {path} failed: no space left on device",
		Defaults:    Params{"path": "a file"},
		Remediation: "Find the full filesystem (df -h, df -i) and free or grow it; the failed write is quoted here.",
		RefutedBy:   "every filesystem with free space and inodes",
		Explains:    append([]string{"StaticPodCrashLoop", "ControllerCrashLoop", "KubeletDiskEviction", "ImagePullFailed", "BootstrapDownloadFailed", "PackageInstallFailed"}, kubeletSymptoms...),
	})
	CertificateNotYetValid = register(Problem{
		ID: "CertificateNotYetValid", Category: CatTimeSkew, Severity: Error,
		Title:       "certificate {path} is not valid until {not_before}: the clock is behind",
		Remediation: "Fix the node's clock (chrony/systemd-timesyncd, the Azure host time sync), then restart the kubelet; certificates are judged against the node's time.",
		RefutedBy:   "the node's clock past the certificate's notBefore",
		Explains:    append([]string{"StaticPodCrashLoop", "ControllerCrashLoop", "ClockSkew", "APIServerCertificateUntrusted", "APIServerUnreachable"}, kubeletSymptoms...),
	})
	ClockSkew = register(Problem{
		ID: "ClockSkew", Category: CatTimeSkew, Severity: Error,
		Title:       "TLS fails because the clock is off: {detail}",
		Remediation: "Fix the node's time synchronisation (chrony/systemd-timesyncd, the hypervisor's time source) and restart the kubelet.",
		RefutedBy:   "the node's time matching a reliable clock",
		Explains:    append([]string{"StaticPodCrashLoop", "ControllerCrashLoop", "APIServerCertificateUntrusted", "APIServerUnreachable"}, kubeletSymptoms...),
	})
	PublicRegistryCertificateRejected = register(Problem{
		ID: "PublicRegistryCertificateRejected", Category: CatTimeSkew, Severity: Error, Confidence: Medium,
		Title:       "by this node's clock the certificate of {registry} is expired or not yet valid; {registry} is a public registry that keeps its certificate valid, so the node's clock is probably wrong",
		Remediation: "Compare the node's time with a reliable clock (date -u, timedatectl, chronyc tracking) and fix its time synchronisation (chrony or systemd-timesyncd reaching its servers, the hypervisor's time source); the pulls succeed once the clock is right. If the clock is right, look for an outdated CA bundle (the ca-certificates package) or a TLS-intercepting proxy between the node and {registry}.",
		RefutedBy:   "the node's clock matching a reliable one",
		Explains:    append([]string{"ImagePullFailed", "SandboxImageMissing", "CertificateExpired", "KubeadmPreflightFailed"}, kubeletSymptoms...),
	})
	CertificateNotValidNow = register(Problem{
		ID: "CertificateNotValidNow", Category: CatCertExpired, Severity: Error, Confidence: Medium,
		Title:       "a TLS certificate is expired or not yet valid by this node's clock; the error gives no dates, so it cannot tell an expired certificate from a clock behind a new one",
		Remediation: "Check the node's clock first (date -u against a reliable clock, timedatectl, chronyc tracking): a clock behind a freshly made certificate gives this same error. If the clock is right, find the certificate of the quoted endpoint and its dates (openssl s_client -connect HOST:PORT | openssl x509 -noout -dates) and renew it (kubeadm certs renew for the control plane's).",
		RefutedBy:   "the node's clock right and the endpoint's certificate within its dates",
		Explains:    append([]string{"StaticPodCrashLoop", "ControllerCrashLoop", "APIServerUnreachable", "APIServerCertificateUntrusted", "ImagePullFailed"}, kubeletSymptoms...),
	})
	CertificateExpired = register(Problem{
		ID: "CertificateExpired", Category: CatCertExpired, Severity: Error,
		Title:       "certificate {path} expired on {not_after}",
		Defaults:    Params{"path": "(named in the quoted line)", "not_after": "(see the quoted line)"},
		Remediation: "Renew it: kubeadm certs renew for control-plane certificates (then restart the static pods); for the kubelet client certificate, delete the expired /var/lib/kubelet/pki/kubelet-client-current.pem and rejoin or re-bootstrap the kubelet (rotateCertificates keeps it fresh while the node is up).",
		RefutedBy:   "a current certificate in its place",
		Explains:    append([]string{"StaticPodCrashLoop", "ControllerCrashLoop", "APIServerUnreachable", "APIServerCertificateUntrusted"}, kubeletSymptoms...),
	})
	APIServerCertificateUntrusted = register(Problem{
		ID: "APIServerCertificateUntrusted", Category: CatAPIUnreachable, Severity: Error,
		Title:       "the API server's certificate is not trusted: {detail}",
		Remediation: "The node's CA (/etc/kubernetes/pki/ca.crt, the caCertHashes of the join configuration) does not match the API server's: check that the cluster CA secret and the join configuration belong to this cluster and that nothing intercepts TLS on the way (proxy).",
		RefutedBy:   "a TLS handshake with the API server verifying against the node's CA",
		Explains:    append([]string{"KubeletNotHealthy"}, bootstrapSymptoms...),
	})
	JoinTokenInvalid = register(Problem{
		ID: "JoinTokenInvalid", Category: CatCloudInitFailed, Severity: Error,
		Title:       "kubeadm join was refused: the bootstrap token is invalid or expired",
		Remediation: "The bootstrap token expired before the node joined (CABPK refreshes tokens only while the Machine is reconciled): delete the Machine so that a new one gets a fresh token, or check the KubeadmConfig's token TTL.",
		RefutedBy:   "the token listed by kubeadm token list on the control plane",
		Explains:    bootstrapSymptoms,
	})
	APIServerUnreachable = register(Problem{
		ID: "APIServerUnreachable", Category: CatAPIUnreachable, Severity: Error,
		Title:       "the API server {endpoint} cannot be reached from the node",
		Remediation: "Check the path from the node to the control plane endpoint: DNS of the endpoint, the load balancer and its health probe on 6443, NSG rules, and whether the first control plane node ever initialised (a join waits for it).",
		RefutedBy:   "a connection to the endpoint succeeding from the node",
		// A node that cannot reach its API server never gets the CNI's
		// pod (a DaemonSet) that writes the network configuration.
		Explains: append([]string{"KubeletNotHealthy", "CNINotInitialized", "CNIConfigMissing"}, bootstrapSymptoms...),
	})
	KubeadmPreflightKubeletVersion = register(Problem{
		ID: "KubeadmPreflightKubeletVersion", Category: CatVersionSkew, Severity: Error,
		Title:       "kubeadm preflight refused the kubelet version",
		Remediation: "Install the kubelet of the control plane's version; a gallery image's kubelet newer than KUBERNETES_VERSION, left in place by a failed binary replacement, is the usual cause.",
		RefutedBy:   "kubelet and control plane of the same minor version",
		Explains:    bootstrapSymptoms,
	})
	KubeadmPreflightFailed = register(Problem{
		ID: "KubeadmPreflightFailed", Category: CatPreflightFailed, Severity: Error,
		Title:       "kubeadm preflight check failed: {check}",
		Remediation: "Fix what the preflight check names (quoted here) on the node or in the bootstrap configuration; ignorePreflightErrors only hides it.",
		RefutedBy:   "a kubeadm run whose preflight passes",
		Explains:    bootstrapSymptoms,
	})
	ImageFilesystemFull = register(Problem{
		ID: "ImageFilesystemFull", Category: CatDiskPressure, Severity: Error,
		Title:       "the image filesystem ({usage} used) stays above the kubelet's garbage collection threshold",
		Defaults:    Params{"usage": "most of it"},
		Remediation: "The kubelet keeps trying to delete unused images and cannot get the image filesystem (/var/lib/containerd) below imageGCHighThresholdPercent: the images left are in use. Grow the disk (the OS disk size of the machine template), move /var/lib/containerd to a larger data disk, or remove what fills it (large images, leftover containers: crictl rmi --prune, crictl ps -a); the kubelet evicts pods for imagefs next.",
		RefutedBy:   "image filesystem usage below imageGCHighThresholdPercent",
		Explains:    []string{"KubeletDiskEviction", "ImagePullFailed"},
	})
	KubeletDiskEviction = register(Problem{
		ID: "KubeletDiskEviction", Category: CatDiskPressure, Severity: Error,
		Title:       "the kubelet is evicting pods to reclaim {resource}",
		Remediation: "Free space or inodes on the kubelet's filesystems (/var/lib/kubelet, /var/lib/containerd) or grow the disk.",
		RefutedBy:   "no DiskPressure condition on the node",
	})
	StaticPodCrashLoop = register(Problem{
		ID: "StaticPodCrashLoop", Category: CatStaticPodCrash, Severity: Error,
		Title:    "{container} ({pod}) is crash-looping: {restarts} restarts, and this node's API server is down with it",
		Defaults: Params{"restarts": "repeated"},
		Remediation: "The kubelet keeps restarting the static pod {pod} and {container} keeps exiting, so the API server of this node does not serve: kubeadm's wait for the control plane times out, and the kubelet, the controllers and the node's agents cannot reach it. " +
			"Its last words, quoted here from its log under /var/log/pods, name the reason. For etcd: \"no space left on device\" (free or grow the filesystem of /var/lib/etcd), \"member ... has already been bootstrapped\" (a /var/lib/etcd left by an earlier kubeadm run: empty it before kubeadm runs again, or recreate the Machine), a certificate under /etc/kubernetes/pki/etcd. " +
			"For kube-apiserver: a missing or expired file under /etc/kubernetes/pki (kubeadm init phase certs, kubeadm certs renew), a wrong flag in /etc/kubernetes/manifests/kube-apiserver.yaml, or etcd not answering on 127.0.0.1:2379. " +
			"crictl ps -a and crictl logs show the same on the node; the kubelet starts it again as soon as the cause is gone.",
		RefutedBy: "{container} running for more than 10 minutes without a restart",
		Explains:  []string{"ControllerCrashLoop", "PodCrashLoop", "APIServerUnreachable", "KubeadmInitFailed", "KubeadmJoinFailed", "KubeadmFailed"},
	})
	ControllerCrashLoop = register(Problem{
		ID: "ControllerCrashLoop", Category: CatStaticPodCrash, Severity: Error,
		Title:    "{container} ({pod}) is crash-looping: {restarts} restarts",
		Defaults: Params{"restarts": "repeated"},
		Remediation: "The kubelet keeps restarting the static pod {pod} and {container} keeps exiting, so the control plane does not converge (kubeadm 1.33 and later also wait for it in wait-control-plane). " +
			"It exits when it loses its leader election lease to an API server that is down (see the other findings); otherwise its last words, quoted here from its log under /var/log/pods, name the reason: a missing or unreadable kubeconfig (/etc/kubernetes/controller-manager.conf, /etc/kubernetes/scheduler.conf) or certificate under /etc/kubernetes/pki, or a wrong flag in /etc/kubernetes/manifests/{container}.yaml.",
		RefutedBy: "{container} running for more than 10 minutes without a restart",
		Explains:  []string{"KubeadmInitFailed", "KubeadmJoinFailed", "KubeadmFailed"},
	})
	PodCrashLoop = register(Problem{
		ID: "PodCrashLoop", Category: CatStaticPodCrash, Severity: Warning,
		Title:    "{container} of the system pod {pod} is crash-looping: {restarts} restarts",
		Defaults: Params{"restarts": "repeated"},
		Remediation: "A pod of the node's own machinery keeps exiting: a crash-looping kube-proxy breaks Services on this node, the CNI agent (calico-node) leaves it NotReady, the cloud node manager leaves it uninitialised, a CSI node plugin leaves volumes unmounted. " +
			"Its last words, quoted here from its log under /var/log/pods, name the reason; when this node's API server is down too, fix that first.",
		RefutedBy: "{container} running for more than 10 minutes without a restart",
	})
	CNIPluginMissing = register(Problem{
		ID: "CNIPluginMissing", Category: CatCNINotReady, Severity: Error,
		Title:       "CNI config {file} uses plugin {plugin}, which is not in {bin_dir}",
		Defaults:    Params{"file": "of the node"},
		Remediation: "Install the CNI plugin binaries (the CNI add-on's install container copies them, or the containernetworking-plugins package), or fix the plugin type in the config.",
		RefutedBy:   "the plugin binary present in the CNI bin directory",
		Explains:    []string{"CNINotInitialized"},
	})
	CNIConfigInvalid = register(Problem{
		ID: "CNIConfigInvalid", Category: CatCNINotReady, Severity: Error,
		Title:       "CNI config {file} cannot be parsed",
		Remediation: "Fix or remove {file}: {error}. The runtime loads the first valid file in /etc/cni/net.d by name order.",
		RefutedBy:   "the file parsing as a CNI network configuration",
		Explains:    []string{"CNINotInitialized", "CNIConfigMissing"},
	})
	CNIConfigMissing = register(Problem{
		ID: "CNIConfigMissing", Category: CatCNINotReady, Severity: Warning, Confidence: Medium,
		Title:       "no CNI network configuration in {dir}",
		Remediation: "The node stays NotReady until a CNI add-on writes its config here. On CAPZ the CNI (Calico) is installed by a HelmChartProxy that matches the Cluster's labels (cni: calico): check the label, the HelmReleaseProxy and the calico-node pod for this node.",
		RefutedBy:   "a *.conf or *.conflist file in the directory",
		Explains:    []string{"CNINotInitialized"},
	})
	CalicoNodeNotRunning = register(Problem{
		ID: "CalicoNodeNotRunning", Category: CatCNINotReady, Severity: Error,
		Title:       "calico's CNI plugin fails on this node: calico/node has not run here ({detail})",
		Remediation: "calico-node (the DaemonSet's pod on this node) writes /var/lib/calico/nodename when it starts, and the plugin needs it to set up or tear down any pod's network. Find why calico-node does not run on this node: kubectl -n kube-system (or calico-system) get pods -o wide for this node, its events and logs (an image it cannot pull, a taint it does not tolerate, a crash); once it runs, the sandboxes come up.",
		RefutedBy:   "/var/lib/calico/nodename present and calico-node running on the node",
		Explains:    []string{"CNINotInitialized", "CNIConfigMissing"},
	})
	CNINotInitialized = register(Problem{
		ID: "CNINotInitialized", Category: CatCNINotReady, Severity: Error,
		Title:       "the network plugin has not been ready for {duration}",
		Defaults:    Params{"duration": "a while"},
		Remediation: "Install or repair the CNI add-on (its pods on this node, its config in /etc/cni/net.d, its binaries in /opt/cni/bin).",
		RefutedBy:   "NetworkReady=true in the runtime status",
	})
)

// Kernel: what the kernel says went wrong under the node's components
// (node-problem-detector's kernel monitor watches the same messages). Each
// explains the failures of the components it takes down.
var (
	componentSymptoms = append([]string{"KubeletNotHealthy", "KubeletCrashLoop", "KubeletNotRunning", "RuntimeNotRunning", "StaticPodCrashLoop", "ControllerCrashLoop", "PodCrashLoop", "APIServerUnreachable"}, bootstrapSymptoms...)

	OOMKilled = register(Problem{
		ID: "OOMKilled", Category: CatOOMKill, Severity: Error,
		Title:    "the kernel's OOM killer killed {process}",
		Defaults: Params{"process": "a process"},
		Remediation: "The node ran out of memory (or {process}'s memory cgroup hit its limit) and the kernel killed {process}. " +
			"Reserve memory for the node's own daemons in the KubeletConfiguration (systemReserved, kubeReserved, evictionHard memory.available) so that the kubelet evicts pods before the kernel kills, " +
			"look at the kernel's task list above the kill (the largest consumers by rss), raise a memory limit that is too low (a MemoryMax of the unit, the cgroup named by oom_memcg), or give the VM more memory.",
		RefutedBy: "{process} running since the kill without another one",
		Explains:  componentSymptoms,
	})
	FilesystemError = register(Problem{
		ID: "FilesystemError", Category: CatFilesystemError, Severity: Error,
		Title:    "the kernel reports filesystem errors on {device}",
		Defaults: Params{"device": "a disk"},
		Remediation: "The filesystem on {device} is damaged or its disk fails I/O: the kernel stops writing to it (a read-only remount, an aborted journal, an XFS shutdown), and whatever lives on it fails with \"read-only file system\" or I/O errors (etcd under /var/lib/etcd, images under /var/lib/containerd, the kubelet's /var/lib/kubelet). " +
			"Drain the node, check the disk's health (the cloud's disk state, SMART, dmesg for I/O errors), repair the filesystem offline (fsck, xfs_repair) or replace the disk, and recreate the Machine if the OS disk is affected.",
		RefutedBy: "the filesystem mounted read-write with no error since the last boot",
		Explains:  append([]string{"DiskNoSpaceLogged", "ImagePullFailed", "KubeletConfigInvalid"}, componentSymptoms...),
	})
	ConntrackTableFull = register(Problem{
		ID: "ConntrackTableFull", Category: CatConntrackFull, Severity: Error,
		Title: "the kernel's connection tracking table is full and drops packets",
		Remediation: "New connections through this node are dropped while nf_conntrack is full: Services, DNS and the node's own connections to the API server fail at random. " +
			"Raise net.netfilter.nf_conntrack_max (kube-proxy sets it from --conntrack-max-per-core and --conntrack-min, its conntrack section of the KubeProxyConfiguration), shorten the timeouts of idle entries, or find the pod that opens connections without end (conntrack -S, conntrack -L | sort by source).",
		RefutedBy: "no \"table full\" message in the last minutes and net.netfilter.nf_conntrack_count below nf_conntrack_max",
		Explains:  []string{"APIServerUnreachable", "KubeletNotHealthy", "RegistryUnreachable", "ImagePullFailed"},
	})
	HungTask = register(Problem{
		ID: "HungTask", Category: CatHungTask, Severity: Error, Confidence: Medium,
		Title:    "tasks hang in the kernel: {task} blocked for more than {seconds} seconds",
		Defaults: Params{"task": "a task", "seconds": "120"},
		Remediation: "A task stuck in uninterruptible sleep for minutes waits on I/O that does not complete (a slow or failing disk, a hung network filesystem or block device such as Ceph RBD or NFS, a FUSE daemon) or on a kernel lock. " +
			"Processes that touch the same disk or mount hang with it: the runtime, the kubelet's PLEG, etcd. Read the kernel's stack of the task quoted here, check the disk's latency and health and the remote storage, and reboot the node if the I/O never returns.",
		RefutedBy: "no task reported blocked since, and the runtime answering",
		Explains:  componentSymptoms,
	})
	KernelModuleMissing = register(Problem{
		ID: "KernelModuleMissing", Category: CatModuleMissing, Severity: Error,
		Title:    "the kernel module {module} is not loaded",
		Defaults: Params{"module": "a module the node needs"},
		Remediation: "Load {module} now (modprobe {module}) and at every boot (a file in /etc/modules-load.d/, such as k8s.conf with br_netfilter and overlay, as the kubeadm install guide does), then set the sysctls that depend on it (net.bridge.bridge-nf-call-iptables=1 in /etc/sysctl.d/). " +
			"A node image or a container host (LXC, a minimal kernel) without the module must get a kernel that has it; a bootstrap script that sets the sysctl before the module is loaded fails the same way.",
		RefutedBy: "{module} listed in /proc/modules, or its /proc/sys entry present",
		Explains:  append([]string{"KubeadmPreflightFailed", "CNINotInitialized", "ContainerdConfigInvalid"}, componentSymptoms...),
	})
	LinkDown = register(Problem{
		ID: "LinkDown", Category: CatLinkDown, Severity: Error, Confidence: Medium,
		Title:    "the network link of {iface} went down",
		Defaults: Params{"iface": "an interface"},
		Remediation: "The node lost its network link: everything it does over the network fails until the link returns, and some clients (the kubelet's connection to the API server, long-lived watches) do not recover by themselves afterwards. " +
			"Check the NIC, the cable or switch port, the bond's members, and on cloud VMs the accelerated-networking VF (hv_netvsc/mlx5) and the platform's maintenance events; restart the kubelet if it stays disconnected after the link is back.",
		RefutedBy: "the link up again and the kubelet reporting to the API server since",
		Explains:  []string{"APIServerUnreachable", "KubeletNotHealthy", "RegistryUnreachable", "ImagePullFailed", "CNINotInitialized"},
	})
)

// UnrecognisedError is what no rule knows: an error that a component keeps
// logging to the end of its log, which no signature claims. It is said with
// its quotes, at low confidence, so that a failure nodediag has no rule for
// never reads as a healthy node.
var UnrecognisedError = register(Problem{
	ID: "UnrecognisedError", Category: CatUnrecognised, Severity: Warning, Confidence: Low,
	Title:    "{source} has repeated an error nodediag does not recognise for {duration}: {pattern}",
	Defaults: Params{"duration": "a while"},
	Remediation: "No rule of nodediag knows this error, so nothing here judged it: read the quoted lines (the first and the last of each repeated error) and the component's log around them. " +
		"If it is the cause, a log signature for it (agent/rules/signatures) makes the next diagnosis name it.",
	RefutedBy: "the error no longer logged, or a known cause that explains it",
})

// Symptoms: consequences that another finding usually explains.
var (
	KubeletNotHealthy = register(Problem{
		ID: "KubeletNotHealthy", Category: CatKubeletNotRunning, Severity: Error, Confidence: Medium, Symptom: true,
		Title:       "the kubelet never became healthy",
		Remediation: "Read the kubelet's own log for why it exits (journalctl -u kubelet): a rejected flag, an unreadable config, swap, the runtime socket.",
		RefutedBy:   "kubelet healthz answering on :10248",
		Explains:    append([]string{"KubeletConfigMissing"}, bootstrapSymptoms...),
	})
	KubeletCrashLoop = register(Problem{
		ID: "KubeletCrashLoop", Category: CatKubeletNotRunning, Severity: Error, Symptom: true,
		Title:       "the kubelet crash-loops: {detail}",
		Remediation: "kubelet.service starts the kubelet, the kubelet exits, and systemd starts it again (the kubeadm unit restarts it every 10 s). Why it exits is in its own last lines before each restart (journalctl -u kubelet -n 50; quoted in the other findings when nodediag recognised them): a flag this kubelet no longer accepts, a configuration it cannot load, swap, the container runtime's socket, an expired client certificate. Fix that cause; the restarts then stop by themselves.",
		RefutedBy:   "kubelet.service active (running) with no new restarts",
		Explains:    append([]string{"KubeletNotHealthy"}, bootstrapSymptoms...),
	})
	KubeletNotRunning = register(Problem{
		ID: "KubeletNotRunning", Category: CatKubeletNotRunning, Severity: Error, Symptom: true,
		Title:       "the kubelet is not running: {detail}",
		Remediation: "systemd is not running the kubelet and will not restart it. Read why it stopped (systemctl status kubelet; journalctl -u kubelet -n 50): fix a failed start at its cause, then systemctl enable --now kubelet; a masked or disabled unit (the image, a hardening script, an operator) needs systemctl unmask kubelet and enable --now. kubeadm init and join start the kubelet in their kubelet-start phase.",
		RefutedBy:   "kubelet.service active (running)",
		Explains:    append([]string{"KubeletNotHealthy"}, bootstrapSymptoms...),
	})
	KubeletConfigMissing = register(Problem{
		ID: "KubeletConfigMissing", Category: CatKubeletNotRunning, Severity: Error, Confidence: Medium, Symptom: true,
		Title:       "the kubelet's configuration {file} does not exist after the bootstrap ended",
		Remediation: "kubeadm init/join writes it; the bootstrap did not get that far. Look at the kubeadm output in /var/log/cloud-init-output.log.",
		RefutedBy:   "the file present",
	})
	KubeletTLSBootstrapFailed = register(Problem{
		ID: "KubeletTLSBootstrapFailed", Category: CatKubeletNotRunning, Severity: Error, Confidence: Medium, Symptom: true,
		Title:       "the kubelet's TLS bootstrap did not complete",
		Remediation: "The kubelet could not get its client certificate: check that it runs, that it reaches the API server, and that its CSR was approved (kubectl get csr).",
		RefutedBy:   "/var/lib/kubelet/pki/kubelet-client-current.pem present and valid",
		Explains:    []string{"KubeadmJoinFailed", "KubeadmInitFailed", "KubeadmFailed", "BootstrapCommandFailed", "CloudInitFailed", "BootstrapSentinelMissing"},
	})
	KubeadmInitFailed = register(Problem{
		ID: "KubeadmInitFailed", Category: CatCloudInitFailed, Severity: Error, Symptom: true,
		Title:       "kubeadm init failed in phase {phase}",
		Remediation: "The first control plane node did not initialise; the quoted kubeadm error names the phase. Fix its cause (see the other findings) and recreate the Machine.",
		RefutedBy:   "kubeadm init completing (\"Your Kubernetes control-plane has initialized successfully!\")",
		Explains:    []string{"BootstrapCommandFailed", "CloudInitFailed", "BootstrapSentinelMissing", "KubeletConfigMissing"},
	})
	KubeadmJoinFailed = register(Problem{
		ID: "KubeadmJoinFailed", Category: CatCloudInitFailed, Severity: Error, Symptom: true,
		Title:       "kubeadm join failed in phase {phase}",
		Remediation: "The node did not join; the quoted kubeadm error names the phase. Fix its cause (see the other findings) and recreate the Machine.",
		RefutedBy:   "kubeadm join completing (\"This node has joined the cluster\")",
		Explains:    []string{"BootstrapCommandFailed", "CloudInitFailed", "BootstrapSentinelMissing", "KubeletConfigMissing"},
	})
	// KubeadmFailed is a kubeadm failure whose line does not say whether init or
	// join ran: "error execution phase preflight: ...", "wait-control-plane"
	// with an error both commands share. KubeadmInitFailed and KubeadmJoinFailed
	// are raised instead when the phase or the error belongs to one of them.
	KubeadmFailed = register(Problem{
		ID: "KubeadmFailed", Category: CatCloudInitFailed, Severity: Error, Symptom: true,
		Title:       "kubeadm failed in phase {phase}",
		Remediation: "kubeadm init or join stopped with the quoted error, so the bootstrap script never wrote /run/cluster-api/bootstrap-success.complete, cloud-init reports scripts_user failed, and the kubelet has no configuration and crash-loops. Fix the cause (the [ERROR ...] lines above it and the other findings) and recreate the Machine. /run/kubeadm/kubeadm.yaml means init ran, /run/kubeadm/kubeadm-join-config.yaml join.",
		RefutedBy:   "kubeadm completing (\"Your Kubernetes control-plane has initialized successfully!\" or \"This node has joined the cluster\")",
		Explains:    []string{"BootstrapCommandFailed", "CloudInitFailed", "BootstrapSentinelMissing", "KubeletConfigMissing"},
	})
	BootstrapCommandFailed = register(Problem{
		ID: "BootstrapCommandFailed", Category: CatCloudInitFailed, Severity: Error, Symptom: true,
		Title:       "a bootstrap command failed: {command}",
		Remediation: "cloud-init ran the bootstrap script and it exited non-zero; the script's first error in /var/log/cloud-init-output.log (quoted above cloud-init's report when the output shows one) is the one to fix.",
		RefutedBy:   "the script completing (the sentinel file written)",
		Explains:    []string{"CloudInitFailed", "BootstrapSentinelMissing"},
	})
	CloudInitFailed = register(Problem{
		ID: "CloudInitFailed", Category: CatCloudInitFailed, Severity: Error, Symptom: true,
		Title:       "cloud-init finished with errors",
		Remediation: "A VMExtensionProvisioningError of CAPZ.Linux.Bootstrapping only says this. Read the first failing command in /var/log/cloud-init-output.log (quoted in the other findings when nodediag recognised it).",
		RefutedBy:   "cloud-init status: done without errors",
		Explains:    []string{"BootstrapSentinelMissing"},
	})
	CloudInitModuleFailed = register(Problem{
		ID: "CloudInitModuleFailed", Category: CatCloudInitFailed, Severity: Warning,
		Title:       "a cloud-init module failed, though the bootstrap completed",
		Remediation: "The node bootstrapped (the sentinel is there); a module beside it failed, often a package update or install that cannot reach its mirror on an air-gapped node. Fix or disable that module in the image or the cloud-config so that the next node does not carry the error.",
		RefutedBy:   "cloud-init status: done without errors",
	})
	CloudInitStillRunning = register(Problem{
		ID: "CloudInitStillRunning", Category: CatCloudInitFailed, Severity: Warning, Confidence: Medium, Symptom: true,
		Title:       "cloud-init has been running stage {stage} for {duration}",
		Remediation: "A bootstrap that has not finished after this long is usually blocked: a download without a timeout, a wait for the API server or for the network. Look at the end of /var/log/cloud-init-output.log.",
		RefutedBy:   "cloud-init finishing",
		Explains:    []string{"BootstrapSentinelMissing"},
	})
	CloudInitDisabled = register(Problem{
		ID: "CloudInitDisabled", Category: CatCloudInitFailed, Severity: Warning, Symptom: true,
		Title:       "cloud-init is disabled ({marker}), so the bootstrap never ran",
		Remediation: "CAPI's kubeadm bootstrap is delivered as cloud-init user data, so nothing ran. /etc/cloud/cloud-init.disabled is put there by the image: remove it from the image. /run/cloud-init/disabled is written by cloud-init's generator when the kernel command line disables it (cloud-init=disabled) or no datasource was found: check the VM's custom data and the image's datasource list.",
		RefutedBy:   "cloud-init state files of this boot",
		Explains:    []string{"BootstrapSentinelMissing"},
	})
	BootstrapSentinelMissing = register(Problem{
		ID: "BootstrapSentinelMissing", Category: CatSentinelMissing, Severity: Error, Symptom: true,
		Title:       "{sentinel} is missing although cloud-init has finished",
		Remediation: "CAPI writes this file as the last bootstrap command, and the CAPZ.Linux.Bootstrapping extension waits for it; its absence means the bootstrap script stopped earlier. The cause is in /var/log/cloud-init-output.log.",
		RefutedBy:   "the sentinel file present",
	})
	CloudInitNoDatasource = register(Problem{
		ID: "CloudInitNoDatasource", Category: CatSentinelMissing, Severity: Error, Confidence: Medium,
		Title:       "cloud-init ran on {datasource}, no datasource: the machine's user data, which holds its bootstrap, never reached it",
		Remediation: "cloud-init fell back to the None datasource, so it never read the user data that carries the bootstrap (Cluster API's kubeadm bootstrap data, a cloud's custom data) and kubeadm never ran. The quoted lines choose the datasource: an image build's leftover (subiquity's /etc/cloud/cloud.cfg.d/99-installer.cfg, a datasource_list without the platform's datasource, a ds= argument on the kernel command line) must not ship in the image. Fix the image (a datasource_list naming the platform's datasource: Azure, OpenStack or ConfigDrive, VMware, Ec2, NoCloud) and recreate the machine.",
		RefutedBy:   "cloud-init reporting the platform's datasource (status.json, the \"Datasource ...\" of its final message)",
		Explains:    kubeletSymptoms,
	})
	BootstrapInProgress = register(Problem{
		ID: "BootstrapInProgress", Category: CatCloudInitFailed, Severity: Info, Confidence: Medium, Symptom: true,
		Title:       "cloud-init is still running (stage {stage})",
		Remediation: "Wait: the bootstrap is in progress. Check again if it is still running in 20 minutes.",
		RefutedBy:   "cloud-init finishing",
	})
)

// Warnings that are not failures yet.
var (
	KubeletDeprecatedFlag = register(Problem{
		ID: "KubeletDeprecatedFlag", Category: CatFlagRemoved, Severity: Info,
		Title:       "kubelet flag --{flag} in {file} is removed in Kubernetes {removed_in}",
		Remediation: "Remove --{flag} from {file} before the kubelet reaches {removed_in}{replacement}; that kubelet will refuse to start with it.",
		RefutedBy:   "the flag absent from the kubelet's command line",
	})
	// KubeletDormantRemovedFlag is a removed flag that sits where the kubelet
	// does not read it today: in /etc/default/kubelet on an rpm-wired node,
	// in a variable ExecStart does not use, on an "export" line systemd
	// ignores. It breaks nothing now, so it is a warning, but it is the same
	// trap as KubeletRemovedFlag the day the file or variable is wired (a
	// package upgrade restores 10-kubeadm.conf, an operator adds
	// $KUBELET_EXTRA_ARGS to an override, an image moves from deb to rpm).
	KubeletDormantRemovedFlag = register(Problem{
		ID: "KubeletDormantRemovedFlag", Category: CatFlagRemoved, Severity: Warning, Confidence: Medium,
		Title:       "kubelet {version} would reject --{flag} in {file}, which does not reach its command line today",
		Remediation: "Remove --{flag} from {file}{variable_note}: it was removed in Kubernetes {removed_in}{replacement}. It is dormant now ({reason}), but the kubelet will refuse to start the day this file or variable is wired into kubelet.service (the kubeadm drop-in reads /etc/default/kubelet on deb systems, /etc/sysconfig/kubelet on rpm systems and /var/lib/kubelet/kubeadm-flags.env on both).",
		RefutedBy:   "the flag absent from {file}",
	})
	KubectlSkew = register(Problem{
		ID: "KubectlSkew", Category: CatVersionSkew, Severity: Warning,
		Title:       "kubectl {kubectl} is more than one minor version from the control plane {control_plane}",
		Remediation: "Use a kubectl within one minor version of kube-apiserver for the bootstrap scripts that call it.",
		RefutedBy:   "kubectl within one minor version",
	})
	KubeletServingCertificateExpired = register(Problem{
		ID: "KubeletServingCertificateExpired", Category: CatCertExpired, Severity: Warning,
		Title:       "the kubelet's self-signed serving certificate {path} expired on {not_after}",
		Remediation: "The kubelet creates this certificate once, valid one year, and never renews it; kube-apiserver does not verify it by default, but clients that do (metrics-server without --kubelet-insecure-tls) fail. Delete {path} and its key and restart the kubelet to get a new one, or turn on serverTLSBootstrap so that serving certificates are issued and rotated.",
		RefutedBy:   "a current serving certificate, or serverTLSBootstrap in use",
	})
	CertificateExpiresSoon = register(Problem{
		ID: "CertificateExpiresSoon", Category: CatCertExpired, Severity: Warning,
		Title:       "certificate {path} expires on {not_after} ({left} left)",
		Remediation: "Renew it before it expires (kubeadm certs renew for control-plane certificates; kubelet client certificates rotate when rotateCertificates is on and the node reaches the API server).",
		RefutedBy:   "a renewed certificate in its place",
	})
	DiskNearlyFull = register(Problem{
		ID: "DiskNearlyFull", Category: CatDiskPressure, Severity: Warning,
		Title:       "{path} is {used_percent}% full ({free} free)",
		Remediation: "Free space on {mount} before the kubelet's eviction thresholds are reached (container images, logs).",
		RefutedBy:   "usage below 85%",
	})
)
