package workload

import "strings"

// linkNames maps a system workload to its chain link by name (exact, or a
// prefix ending in "-"): the names the upstream manifests and charts give
// them. Windows variants (kube-proxy-windows, cloud-node-manager-windows,
// calico-node-windows) belong to the same link.
var linkNames = []struct {
	link  string
	names []string
}{
	{LinkKubeProxy, []string{"kube-proxy"}},
	// Calico (manifest and Tigera operator), Cilium, Flannel, Azure CNI
	// (CNS and the CNI installer), Antrea, Weave.
	{LinkCNI, []string{"calico-node", "calico-kube-controllers", "calico-typha", "cilium", "cilium-operator", "kube-flannel-ds", "kube-flannel", "flannel", "azure-cns", "azure-cni", "azure-vnet", "antrea-agent", "antrea-controller", "weave-net"}},
	{LinkCoreDNS, []string{"coredns", "kube-dns"}},
	{LinkCNM, []string{"cloud-node-manager"}},
	{LinkCCM, []string{"cloud-controller-manager"}},
}

// LinkOf returns the chain link of a system workload named name with pod
// labels, or "" when it is none of them. The k8s-app label (kube-dns for
// CoreDNS) is tried first.
func LinkOf(name string, labels map[string]string) string {
	if labels["k8s-app"] == "kube-dns" {
		return LinkCoreDNS
	}
	for _, cand := range []string{labels["k8s-app"], name} {
		if cand == "" {
			continue
		}
		for _, l := range linkNames {
			for _, n := range l.names {
				if cand == n || strings.HasPrefix(cand, n+"-") {
					return l.link
				}
			}
		}
	}
	return ""
}

// CNIName names the CNI of the workload ("calico", "cilium", ...) from its
// name.
func CNIName(w *Workload) string {
	for _, n := range []string{"calico", "cilium", "flannel", "azure", "antrea", "weave"} {
		if strings.Contains(w.Name, n) {
			return n
		}
	}
	return w.Name
}
