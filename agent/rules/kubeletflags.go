package rules

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
)

// kubeletFlagLifecycle is the history of one kubelet command-line flag that
// was removed, or is scheduled for removal.
type kubeletFlagLifecycle struct {
	// Flag is the name without dashes, as pflag normalises it ('-', not '_').
	Flag string
	// Deprecated is the minor release ("1.24") that deprecated the flag;
	// empty when that release is not known. Informational only.
	Deprecated string
	// Removed is the first minor release whose kubelet rejects the flag
	// ("failed to parse kubelet flag: unknown flag: --<flag>").
	Removed string
	// Replacement completes the sentence "it was removed in Kubernetes X":
	// "; use ... instead", or empty when nothing replaces it.
	Replacement string
	// Source is where the removal is documented: a CHANGELOG and a
	// kubernetes/kubernetes PR.
	Source string
	// Confirmed is true when a changelog line names the flag's removal; false
	// when the release is inferred from the PR and other evidence (the
	// finding's confidence is then medium).
	Confirmed bool
}

// Replacement texts shared by several rows.
const (
	replDockershimCNI = "; the kubelet no longer sets up pod networking: CNI is configured in the container runtime (containerd, CRI-O; cri-dockerd for Docker Engine)"
	replDockershim    = "; the kubelet talks to the container runtime through --container-runtime-endpoint (containerd, CRI-O; cri-dockerd for Docker Engine)"
	replKlog          = "; the kubelet logs to stderr, which systemd keeps in the journal (-v and --vmodule remain)"
)

// kubeletFlagTable lists the kubelet flags removed since 1.12 and those
// scheduled for removal, from the research notes /tmp/research/removed-flags.md
// (rows of confidence C, "a changelog line confirms it", and P, "the PR plus
// strong evidence"). Rows of uncertain removal release (U) are left out on
// purpose: a hard error must not rest on a guess. Left out for that reason:
// --redirect-container-streaming (removal release unknown) and the cAdvisor
// flags mistakenly registered with the kubelet (--docker-root,
// --containerd, ...; dropped by PR #139870 for 1.37, release unconfirmed).
//
// "PR #N" is kubernetes/kubernetes#N.
var kubeletFlagTable = []kubeletFlagLifecycle{
	// CHANGELOG-1.12.md (not opened) · PR #65707: "The formerly publicly-available cAdvisor web UI that the
	// kubelet started using --cadvisor-port is now entirely removed in 1.12." Deprecated in 1.10 (PR #59827).
	{Flag: "cadvisor-port", Deprecated: "1.10", Removed: "1.12", Replacement: "; run cAdvisor as a DaemonSet if its UI is needed", Source: "CHANGELOG-1.12.md, PR #65707"},
	// CHANGELOG-1.21.md · PR #99236 (KEP-2129). Deprecated in 1.15 (PR #78504).
	{Flag: "enable-cadvisor-json-endpoints", Deprecated: "1.15", Removed: "1.21", Replacement: "; use the /metrics/cadvisor and /stats/summary endpoints", Source: "CHANGELOG-1.21.md, PR #99236"},
	// CHANGELOG-1.22.md · PR #101057: "the Kubelet's --chaos-chance flag are removed".
	{Flag: "chaos-chance", Removed: "1.22", Source: "CHANGELOG-1.22.md, PR #101057", Confirmed: true},
	// CHANGELOG-1.23.md · PR #103941: "Removed deprecated --seccomp-profile-root/seccompProfileRoot config."
	{Flag: "seccomp-profile-root", Deprecated: "1.19", Removed: "1.23", Replacement: "; seccomp profiles live in <root-dir>/seccomp", Source: "CHANGELOG-1.23.md, PR #103941", Confirmed: true},

	// CHANGELOG-1.24.md · PR #106907 (KEP-2221): the dockershim flags are removed along with dockershim.
	// Deprecated in 1.21 (PR #98730).
	{Flag: "experimental-dockershim-root-directory", Deprecated: "1.21", Removed: "1.24", Replacement: replDockershim, Source: "CHANGELOG-1.24.md, PR #106907", Confirmed: true},
	{Flag: "docker-endpoint", Deprecated: "1.21", Removed: "1.24", Replacement: replDockershim, Source: "CHANGELOG-1.24.md, PR #106907", Confirmed: true},
	{Flag: "image-pull-progress-deadline", Deprecated: "1.21", Removed: "1.24", Replacement: replDockershim, Source: "CHANGELOG-1.24.md, PR #106907", Confirmed: true},
	{Flag: "network-plugin", Deprecated: "1.21", Removed: "1.24", Replacement: replDockershimCNI, Source: "CHANGELOG-1.24.md, PR #106907", Confirmed: true},
	{Flag: "cni-conf-dir", Deprecated: "1.21", Removed: "1.24", Replacement: replDockershimCNI, Source: "CHANGELOG-1.24.md, PR #106907", Confirmed: true},
	{Flag: "cni-bin-dir", Deprecated: "1.21", Removed: "1.24", Replacement: replDockershimCNI, Source: "CHANGELOG-1.24.md, PR #106907", Confirmed: true},
	{Flag: "cni-cache-dir", Deprecated: "1.21", Removed: "1.24", Replacement: replDockershimCNI, Source: "CHANGELOG-1.24.md, PR #106907", Confirmed: true},
	{Flag: "network-plugin-mtu", Deprecated: "1.21", Removed: "1.24", Replacement: replDockershimCNI, Source: "CHANGELOG-1.24.md, PR #106907", Confirmed: true},
	// CHANGELOG-1.24.md · PR #107096: "Removed kubelet --non-masquerade-cidr deprecated CLI flag".
	// Deprecated in 1.11 or earlier.
	{Flag: "non-masquerade-cidr", Removed: "1.24", Replacement: "; masquerading is the job of the CNI plugin or ip-masq-agent", Source: "CHANGELOG-1.24.md, PR #107096", Confirmed: true},
	// CHANGELOG-1.24.md · PR #101719: "The deprecated flag --really-crash-for-testing was removed."
	{Flag: "really-crash-for-testing", Removed: "1.24", Source: "CHANGELOG-1.24.md, PR #101719", Confirmed: true},
	// CHANGELOG-1.24.md · PR #104732. Deprecated in 1.19 (PR #91373).
	{Flag: "experimental-check-node-capabilities-before-mount", Deprecated: "1.19", Removed: "1.24", Replacement: "; CSI drivers replace it", Source: "CHANGELOG-1.24.md, PR #104732", Confirmed: true},
	// CHANGELOG-1.24.md · PR #106932: "The feature DynamicKubeletConfig has been removed from the kubelet."
	// The line names the feature, not the flag (P). The feature was deprecated in 1.22 (KEP-281).
	{Flag: "dynamic-config-dir", Deprecated: "1.22", Removed: "1.24", Replacement: "; use the --config file (and --config-dir drop-ins)", Source: "CHANGELOG-1.24.md, PR #106932"},
	// CHANGELOG-1.25.md · PR #109388: "Use --kernel-memcg-notification instead."
	{Flag: "experimental-kernel-memcg-notification", Removed: "1.25", Replacement: "; use kernelMemcgNotification in the KubeletConfiguration (or --kernel-memcg-notification)", Source: "CHANGELOG-1.25.md, PR #109388", Confirmed: true},

	// CHANGELOG-1.26.md · PR #112120 (KEP-2845): "Legacy klog flags are no longer available. Only -v and
	// -vmodule are still supported." Deprecated in 1.23.
	{Flag: "log-dir", Deprecated: "1.23", Removed: "1.26", Replacement: replKlog, Source: "CHANGELOG-1.26.md, PR #112120", Confirmed: true},
	{Flag: "log-file", Deprecated: "1.23", Removed: "1.26", Replacement: replKlog, Source: "CHANGELOG-1.26.md, PR #112120", Confirmed: true},
	{Flag: "log-file-max-size", Deprecated: "1.23", Removed: "1.26", Replacement: replKlog, Source: "CHANGELOG-1.26.md, PR #112120", Confirmed: true},
	{Flag: "logtostderr", Deprecated: "1.23", Removed: "1.26", Replacement: replKlog, Source: "CHANGELOG-1.26.md, PR #112120", Confirmed: true},
	{Flag: "alsologtostderr", Deprecated: "1.23", Removed: "1.26", Replacement: replKlog, Source: "CHANGELOG-1.26.md, PR #112120", Confirmed: true},
	{Flag: "one-output", Deprecated: "1.23", Removed: "1.26", Replacement: replKlog, Source: "CHANGELOG-1.26.md, PR #112120", Confirmed: true},
	{Flag: "stderrthreshold", Deprecated: "1.23", Removed: "1.26", Replacement: replKlog, Source: "CHANGELOG-1.26.md, PR #112120", Confirmed: true},
	{Flag: "skip-log-headers", Deprecated: "1.23", Removed: "1.26", Replacement: replKlog, Source: "CHANGELOG-1.26.md, PR #112120", Confirmed: true},
	{Flag: "skip-headers", Deprecated: "1.23", Removed: "1.26", Replacement: replKlog, Source: "CHANGELOG-1.26.md, PR #112120", Confirmed: true},
	{Flag: "add-dir-header", Deprecated: "1.23", Removed: "1.26", Replacement: replKlog, Source: "CHANGELOG-1.26.md, PR #112120", Confirmed: true},
	{Flag: "log-backtrace-at", Deprecated: "1.23", Removed: "1.26", Replacement: replKlog, Source: "CHANGELOG-1.26.md, PR #112120", Confirmed: true},

	// CHANGELOG-1.27.md · PR #114017: "Kubelet: remove deprecated flag --container-runtime".
	// Deprecated in 1.24 ("will be removed in 1.27 as the only valid value is 'remote'").
	{Flag: "container-runtime", Deprecated: "1.24", Removed: "1.27", Replacement: "; only --container-runtime-endpoint (containerRuntimeEndpoint) is needed", Source: "CHANGELOG-1.27.md, PR #114017", Confirmed: true},
	// CHANGELOG-1.27.md · PR #116015: "the deprecated --master-service-namespace flag is removed in v1.27".
	{Flag: "master-service-namespace", Removed: "1.27", Source: "CHANGELOG-1.27.md, PR #116015", Confirmed: true},
	// Deprecated: CHANGELOG-1.28.md · PR #118596. Removed with the in-tree Azure cloud provider:
	// CHANGELOG-1.30.md · PR #122857 (the line does not name the flag: P); a 1.30 kubelet rejecting it is
	// quoted in Azure/karpenter-provider-azure#370.
	{Flag: "azure-container-registry-config", Deprecated: "1.28", Removed: "1.30", Replacement: "; use --image-credential-provider-config and --image-credential-provider-bin-dir with the acr-credential-provider", Source: "CHANGELOG-1.30.md, PR #122857 (deprecated by PR #118596)"},
	// CHANGELOG-1.31.md · PR #122082: "Kubelet flag --keep-terminated-pod-volumes was removed. This flag was
	// deprecated in 2017." (1.8, PR #47539).
	{Flag: "keep-terminated-pod-volumes", Deprecated: "1.8", Removed: "1.31", Source: "CHANGELOG-1.31.md, PR #122082", Confirmed: true},
	// CHANGELOG-1.34.md · PR #122384: "Removed the deprecated --register-schedulable command line argument".
	{Flag: "register-schedulable", Removed: "1.34", Replacement: "; use --register-with-taints (registerWithTaints) instead", Source: "CHANGELOG-1.34.md, PR #122384", Confirmed: true},
	// CHANGELOG-1.34.md · PR #130161: "Kubelet: removed the deprecated flag --cloud-config from the command
	// line." Deprecated around 1.19 (PR #90408).
	{Flag: "cloud-config", Removed: "1.34", Replacement: "; the cloud provider's configuration belongs to its external cloud-controller-manager", Source: "CHANGELOG-1.34.md, PR #130161", Confirmed: true},
	// CHANGELOG-1.35.md (Urgent Upgrade Notes) · PR #133779: "Removed the --pod-infra-container-image flag
	// from kubelet command line." Deprecated for all runtimes in 1.24 (PR #108045); a no-op since 1.29.
	{Flag: "pod-infra-container-image", Deprecated: "1.24", Removed: "1.35", Replacement: "; set the sandbox (pause) image in the container runtime instead (containerd's sandbox image, CRI-O's pause_image)", Source: "CHANGELOG-1.35.md, PR #133779", Confirmed: true},
}

// kubeletFlags indexes kubeletFlagTable by flag name.
var kubeletFlags = func() map[string]*kubeletFlagLifecycle {
	m := make(map[string]*kubeletFlagLifecycle, len(kubeletFlagTable))
	for i := range kubeletFlagTable {
		m[kubeletFlagTable[i].Flag] = &kubeletFlagTable[i]
	}
	return m
}()

// lookupKubeletFlag returns the lifecycle of a flag as written ("--" and "-"
// already removed), normalised as pflag does ('_' is '-').
func lookupKubeletFlag(name string) *kubeletFlagLifecycle {
	return kubeletFlags[strings.ReplaceAll(name, "_", "-")]
}

// removedBy says whether a kubelet of version v rejects the flag.
func (l *kubeletFlagLifecycle) removedBy(v *version.Version) bool {
	return l.Removed != "" && !minorBefore(v, version.MustParseGeneric(l.Removed))
}

// deprecatedAt says whether a kubelet of version v accepts the flag and
// warns about it: the flag is removed later, and deprecated by v (or since
// an unknown release).
func (l *kubeletFlagLifecycle) deprecatedAt(v *version.Version) bool {
	if l.Removed == "" || l.removedBy(v) {
		return false
	}
	return l.Deprecated == "" || !minorBefore(v, version.MustParseGeneric(l.Deprecated))
}

// minorBefore says whether v's major.minor is before w's; patch and
// pre-release do not matter (v1.35.0-rc.1 is 1.35).
func minorBefore(v, w *version.Version) bool {
	if v.Major() != w.Major() {
		return v.Major() < w.Major()
	}
	return v.Minor() < w.Minor()
}
