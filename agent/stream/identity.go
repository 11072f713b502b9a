package stream

import nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"

// ProviderID is the node's cloud identity as the kubelet is told it: the
// value of the kubelet's --provider-id flag in the report's kubelet-config
// evidence ("azure:///subscriptions/.../virtualMachines/..."), the last
// active one (the last occurrence on a command line wins), else "". A flag
// that does not reach the kubelet's command line is not the node's
// identity. The providerID field of the KubeletConfiguration file is not in
// the evidence (KubeletConfigFile has no such field), so it is not seen.
func ProviderID(r *nodediagv1.Report) string {
	id := ""
	for _, pe := range r.GetEvidence().GetProbes() {
		for _, f := range pe.GetKubeletConfig().GetFlags() {
			if f.GetName() == "provider-id" && f.GetActive() && f.GetValue() != "" {
				id = f.GetValue()
			}
		}
	}
	return id
}
