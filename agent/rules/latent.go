package rules

import (
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// latentKubeletStoppers are the contradictions read from files that would
// stop the kubelet: swap on while failSwapOn holds, the kubelet's and the
// runtime's cgroup drivers apart.
var latentKubeletStoppers = map[string]bool{"SwapEnabled": true, "KubeletCgroupDriverMismatch": true}

// latent demotes such a contradiction to a warning when the kubelet's own
// log shows it stopping on another recognised cause (its exit line, the
// fact kubelet-exit, claimed by another problem), and never on this one
// (pods of a kubelet that runs restarting are what a cgroup mismatch
// does, not another cause): what the node shows outranks what its files predict (the kubelet
// parses its flags and loads its configuration before it checks swap; a
// kubelet that exits on an unknown flag never gets there). It stays
// reported, and explains nothing (it returns the findings it demoted): it
// stops the kubelet once the other cause is fixed.
func latent(in *Input, fs []*nodediagv1.Finding) map[*nodediagv1.Finding]bool {
	live := map[string]bool{} // problems with an error finding
	for _, f := range fs {
		if Severity(f.GetSeverity()) == Error {
			live[f.GetId()] = true
		}
	}
	var other *Match
	for i, m := range in.m().claims {
		p := catalog[m.Sig.ID]
		if m.Src.GetKind() != "kubelet" || p == nil || p.Symptom || latentKubeletStoppers[p.ID] || !live[p.ID] ||
			!in.InWindow(m.Line.GetTime()) || !in.HasFact(m.Line, "kubelet-exit") {
			continue
		}
		other = &in.m().claims[i]
		break
	}
	if other == nil {
		return nil
	}
	out := map[*nodediagv1.Finding]bool{}
	for _, f := range fs {
		if !latentKubeletStoppers[f.GetId()] || Severity(f.GetSeverity()) != Error {
			continue
		}
		confirmed := false
		for _, m := range in.Matched(f.GetId()) {
			confirmed = confirmed || m.Src.GetKind() == "kubelet"
		}
		if confirmed {
			continue
		}
		f.Severity = string(Warning)
		f.Title += "; not what stops the kubelet now: it exits on an earlier error first"
		f.Evidence = append(f.Evidence, other.Quote())
		out[f] = true
	}
	return out
}

// bootstrapFirst says whether the bootstrap failed before the kubelet
// logged its first error: a bootstrap command, cloud-init or kubeadm that
// failed while the kubelet had not yet failed was not failed by it (the
// usual order is the other: the kubelet fails, kubeadm waits for it and
// gives up), and the kubelet failing afterwards (its CA file or its
// configuration never written) is the bootstrap's consequence. Judged
// only when the kubelet did log errors: a kubelet that never ran says
// nothing of the order.
func bootstrapFirst(in *Input, fs []*nodediagv1.Finding) bool {
	first := in.FirstErrors([]string{"kubelet"}, 1)
	if len(first) == 0 || first[0].GetTime() == nil {
		return false
	}
	kubeletAt := first[0].GetTime().AsTime()
	bootstrap := map[string]bool{}
	for _, id := range bootstrapSymptoms {
		bootstrap[id] = true
	}
	for _, f := range fs {
		if !bootstrap[f.GetId()] || Severity(f.GetSeverity()) != Error {
			continue
		}
		for _, q := range f.GetEvidence() {
			if isLogQuote(q) && q.GetTime().AsTime().Before(kubeletAt) {
				return true
			}
		}
	}
	return false
}
