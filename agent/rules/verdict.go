package rules

import (
	"sort"
	"strings"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// Verdicts of Result.Verdict: what a check can say of the root as a whole
// when the findings are not a node's diagnosis (docs/CONTRACTS.md).
const (
	// VerdictNotANode: nothing of a kubelet, kubeadm or container runtime
	// under the root. No finding is an error: the node's rules do not apply.
	VerdictNotANode = "not-a-kubernetes-node"
	// VerdictIncomplete: probes did not finish; what they did not read is
	// not concluded from.
	VerdictIncomplete = "incomplete"
	// VerdictNoEvidence: nothing under the root could be read.
	VerdictNoEvidence = "no-evidence"
	// VerdictPermissionDenied: the agent may not read the node's files.
	// No finding is an error: causes are not made of unreadable files.
	VerdictPermissionDenied = "permission-denied"
)

// nodePaths are the places whose unreadability means the agent runs without
// the rights to judge the node.
var nodePaths = []string{"/var/lib/kubelet", "/etc/kubernetes", "/var/log/journal", "/run/log/journal", "/var/log/pods", "/etc/containerd", "/var/log/cloud-init-output.log", "/var/log/syslog", "/var/log/messages"}

// judgeVerdict decides the verdict and applies it to the findings: for a root
// that is not a node, or one the agent may not read, every finding is
// capped at info (it stays listed, it is no diagnosis).
func judgeVerdict(in *Input, fs []*nodediagv1.Finding) (verdict, reason string) {
	ev := in.Ev
	switch {
	case len(permissionDenied(ev)) > 0:
		paths := permissionDenied(ev)
		verdict, reason = VerdictPermissionDenied, "permission denied reading "+strings.Join(paths, ", ")+": run the agent as root (or with the DaemonSet's privileges) to judge this node"
	case len(unfinished(ev)) > 0:
		verdict, reason = VerdictIncomplete, "probes that did not finish within the time limit: "+strings.Join(unfinished(ev), ", ")+"; nothing is concluded from what they did not read"
		return verdict, reason
	case in.Probe("os") != nil && !anyEvidence(ev):
		return VerdictNoEvidence, "nothing under the root could be read: no os-release, host name, kubelet, kubeadm, cloud-init, log or journal"
	case lookedForKubelet(in) && !kubernetesNode(in):
		verdict, reason = VerdictNotANode, "not a Kubernetes node: no kubelet (binary, unit or configuration), no kubeadm files, no kubelet log lines under the root"
	default:
		return "", ""
	}
	for _, f := range fs {
		if SeverityAtLeast(f.Severity, Warning) {
			f.Severity = Info
		}
	}
	return verdict, reason
}

// permissionDenied lists the node paths a probe could not read for lack of
// permission.
func permissionDenied(ev *nodediagv1.Evidence) []string {
	seen := map[string]bool{}
	for _, pe := range ev.GetProbes() {
		for _, u := range pe.GetUnreadable() {
			if !strings.Contains(strings.ToLower(u.GetError()), "permission denied") {
				continue
			}
			for _, p := range nodePaths {
				if u.GetSource() == p || strings.HasPrefix(u.GetSource(), p+"/") {
					seen[p] = true
				}
			}
		}
		if strings.Contains(strings.ToLower(pe.GetError()), "permission denied") {
			for _, p := range nodePaths {
				if strings.Contains(pe.GetError(), p) {
					seen[p] = true
				}
			}
		}
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// unfinished lists the probes that did not finish: stopped at the time
// limit, or that say what they did not read to the end.
func unfinished(ev *nodediagv1.Evidence) []string {
	var out []string
	for _, pe := range ev.GetProbes() {
		stopped := pe.GetStatus() == "error" && (pe.GetError() == "did not finish within the time limit" || strings.Contains(pe.GetError(), "context deadline exceeded"))
		for _, u := range pe.GetUnreadable() {
			if strings.Contains(u.GetError(), "context deadline exceeded") || strings.Contains(u.GetError(), "context canceled") {
				stopped = true
			}
		}
		if stopped {
			out = append(out, pe.GetName())
		}
	}
	return out
}

// anyEvidence says whether any probe read anything of the node.
func anyEvidence(ev *nodediagv1.Evidence) bool {
	for _, pe := range ev.GetProbes() {
		switch d := pe.GetData().(type) {
		case *nodediagv1.ProbeEvidence_Os:
			if d.Os.GetPrettyName() != "" || d.Os.GetHostname() != "" || d.Os.GetMachineId() != "" {
				return true
			}
		case nil:
		default:
			if pe.GetStatus() == "ok" {
				return true
			}
		}
	}
	return false
}

// lookedForKubelet says whether the probes that find a kubelet ran (a check
// of some probes only, or evidence made in a test, cannot tell a node from
// another machine).
func lookedForKubelet(in *Input) bool {
	return in.Probe("kubelet-config") != nil && in.Probe(binaryVersionsProbe) != nil
}

// kubernetesNode says whether the root shows anything of a Kubernetes node:
// a kubelet or kubeadm binary, the kubelet's unit or configuration,
// kubeadm's files, or the kubelet's own log lines. A container runtime
// alone (a Docker host has containerd and runc) is no node.
func kubernetesNode(in *Input) bool {
	for _, b := range in.Binaries() {
		if b.GetName() == "kubelet" || b.GetName() == "kubeadm" {
			return true
		}
	}
	if kc := in.KubeletConfig(); kc != nil && (len(kc.GetUnitFiles()) > 0 || kc.GetConfig().GetPresent() || len(kc.GetFlags()) > 0) {
		return true
	}
	if k := in.Kubeadm(); k != nil && (len(k.GetStaticPods()) > 0 || len(k.GetConfigFiles()) > 0 || k.GetKubeletConf().GetPresent()) {
		return true
	}
	for _, l := range in.Logs() {
		if l.GetKind() == "kubelet" || strings.HasPrefix(l.GetSource(), "journal:kubelet") {
			return true
		}
	}
	return false
}

// VerdictExit is the exit code a verdict implies, given whether a finding is
// at error or above: an incomplete check with an error still has found it.
func VerdictExit(verdict string, hasError bool) int {
	switch verdict {
	case VerdictNoEvidence, VerdictPermissionDenied:
		return 2
	case VerdictIncomplete:
		if hasError {
			return 1
		}
		return 2
	case VerdictNotANode:
		return 0
	}
	if hasError {
		return 1
	}
	return 0
}
