package incident

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nodediag/nodediag/agent/rules"
	"github.com/nodediag/nodediag/collector/capi"
)

// Cluster finding IDs: the catalog's (agent/rules/cluster.go).
var (
	IDMachineNotRunning     = rules.MachineNotRunning.ID
	IDMachineNodeError      = rules.MachineNodeError.ID
	IDInfraMachineFailed    = rules.InfraMachineFailed.ID
	IDControlPlaneNotInit   = rules.ControlPlaneNotInitialized.ID
	IDKCPPreflightWaiting   = rules.KCPPreflightWaiting.ID
	IDMachineDeploymentDown = rules.MachineDeploymentNotReady.ID
	IDMachinePoolDown       = rules.MachinePoolNotReady.ID
	IDReconcileError        = rules.ControllerReconcileError.ID
	IDMHCRemediationLoop    = rules.MHCRemediationLoop.ID
	IDAddonNotMatched       = rules.AddonNotMatched.ID
	IDAddonReleaseFailed    = rules.AddonReleaseFailed.ID
)

// The conditions KCP's preflight checks want on every control plane
// Machine before it adds another.
var kcpPodConditions = []string{"APIServerPodHealthy", "ControllerManagerPodHealthy", "SchedulerPodHealthy", "EtcdPodHealthy", "EtcdMemberHealthy"}

const (
	annClonedFrom     = "cluster.x-k8s.io/cloned-from-name"
	labelDeployment   = "cluster.x-k8s.io/deployment-name"
	annSkipRemediate  = "cluster.x-k8s.io/skip-remediation"
	agentCheckCommand = "nodediag-agent check --output compact"
)

func notRunning(phase string) bool {
	switch phase {
	case "Pending", "Provisioning", "Provisioned", "Failed", "Unknown", "":
		return true
	}
	return false
}

// bootstrapSource names the object the Machine's bootstrap configuration
// comes from, where a fix must go so that new Machines get it.
func (d *diag) bootstrapSource(m *capi.Machine) string {
	if m.ControlPlane && d.c.ControlPlane != nil {
		return fmt.Sprintf("KubeadmControlPlane %s/%s (spec.kubeadmConfigSpec)", d.c.ControlPlane.Namespace, d.c.ControlPlane.Name)
	}
	if kc := d.c.KubeadmConfigs[m.BootstrapRef.Name]; kc != nil {
		if t := kc.Annotations[annClonedFrom]; t != "" {
			return fmt.Sprintf("KubeadmConfigTemplate %s/%s (spec.template.spec)", m.Namespace, t)
		}
	}
	if md := d.deploymentOf(m); md != nil && md.Raw != nil {
		if t, ok := nestedString(md.Raw.Object, "spec", "template", "spec", "bootstrap", "configRef", "name"); ok {
			return fmt.Sprintf("KubeadmConfigTemplate %s/%s (spec.template.spec), used by MachineDeployment %s", md.Namespace, t, md.Name)
		}
	}
	if m.BootstrapRef.Name != "" {
		return fmt.Sprintf("the template KubeadmConfig %s/%s was made from", m.Namespace, m.BootstrapRef.Name)
	}
	return ""
}

func (d *diag) deploymentOf(m *capi.Machine) *capi.MachineDeployment {
	name := m.Labels[labelDeployment]
	for _, md := range d.c.MachineDeployments {
		if md.Name == name {
			return md
		}
	}
	return nil
}

// vmCommand is how to get a node's evidence when no agent reported it.
func (d *diag) vmCommand(m *capi.Machine) string {
	vm := m.InfraRef.Name
	if m.Infra != nil {
		vm = m.Infra.Name
	}
	rg := d.c.Name
	pid := m.ProviderID
	if pid == "" && m.Infra != nil {
		pid = m.Infra.ProviderID
	}
	if _, rest, ok := strings.Cut(strings.ToLower(pid), "/resourcegroups/"); ok {
		// Keep the original case of the resource group.
		i := strings.Index(strings.ToLower(pid), "/resourcegroups/") + len("/resourcegroups/")
		rg = pid[i : i+strings.Index(rest+"/", "/")]
	}
	return fmt.Sprintf("az vm run-command invoke --resource-group %s --name %s --command-id RunShellScript --scripts %q", rg, vm, agentCheckCommand)
}

// ruleMachines: a Machine not Running brings its node's top finding up; a
// Running Machine whose node reports an error shows it; an infrastructure
// machine's failure is quoted with who to escalate to.
func (d *diag) ruleMachines() {
	for _, s := range d.machines {
		m := s.m
		if m.DeletionTimestamp != nil {
			continue
		}
		since, _ := phaseSince(m)
		phaseEv := Evidence{Source: objName(&m.Object) + " status.phase", Excerpt: fmt.Sprintf("phase: %s (%s)", m.Phase, sinceText(d.o.Now, m))}
		var f *Finding
		switch {
		case notRunning(m.Phase):
			mp := rules.Params{"machine": m.Name, "phase": m.Phase}
			f = newFinding(rules.MachineNotRunning, objName(&m.Object), mp)
			f.Evidence = append([]Evidence{phaseEv}, badConditions(&m.Object, 3)...)
			retitle := func(detail string) {
				mp["detail"] = detail
				*f = *withEvidence(newFinding(rules.MachineNotRunning, f.Subject, mp), f.Evidence)
			}
			switch {
			case s.Node != nil && s.top != nil && rules.SeverityAtLeast(s.top.GetSeverity(), rules.Warning):
				node := s.nodeName()
				retitle(fmt.Sprintf(": its node %s reports %s", node, s.top.GetTitle()))
				f.NodeCause = nodeCause(node, s.top)
				f.Evidence = append(f.Evidence, d.nodeEvidence(node, s.top)...)
				f.Domain = domainOf(s.top.GetCategory())
				f.Confidence = s.top.GetConfidence()
				f.ConfidenceReason = fmt.Sprintf("the node's own report (joined by %s) names the cause with %s confidence", s.MatchedBy, s.top.GetConfidence())
				f.Remediation = s.top.GetRemediation()
				if src := d.bootstrapSource(m); src != "" {
					f.Remediation += fmt.Sprintf(" For Machine %s the bootstrap comes from %s: fix it there so that replacement Machines get the fix.", m.Name, src)
				}
				if r := s.top.GetRefutedBy(); r != "" {
					f.RefutedBy = r
				}
			case s.Node != nil:
				node := s.nodeName()
				retitle(fmt.Sprintf(", but its node %s reports no problem", node))
				f.Domain = DomainCloud
				f.Confidence = rules.Low
				f.ConfidenceReason = "the node is healthy by its own report: what is missing is between the node and the Machine (node registration, providerID)"
				f.MissingEvidence = fmt.Sprintf("the Node object %s of the workload cluster: `kubectl get node %s -o jsonpath='{.spec.providerID}'` (empty: the cloud-controller-manager did not set it)", node, node)
				f.Remediation = "Make sure the cloud-controller-manager runs in the workload cluster (it sets spec.providerID on the Node, which the Machine waits for)."
				f.ChainLink = linkProviderID
			case d.o.Now.Sub(since) < d.o.Grace:
				ev := f.Evidence
				f = withEvidence(newFinding(rules.MachineProvisioning, f.Subject, rules.Params{"machine": m.Name, "phase": m.Phase, "since": sinceText(d.o.Now, m), "grace": d.o.Grace.String()}), ev)
				f.ConfidenceReason = fmt.Sprintf("younger than %s and no node report: not yet a problem", d.o.Grace)
			default:
				retitle(", and no node report explains it")
				f.ConfidenceReason = "no agent report for this Machine's VM: the cause on the node is unknown"
				f.MissingEvidence = fmt.Sprintf("the node's own evidence: run `%s` (the agent binary on the VM, or from a bundle)", d.vmCommand(m))
			}
		case s.failed && s.top != nil:
			node := s.nodeName()
			f = newFinding(rules.MachineNodeError, objName(&m.Object), rules.Params{"machine": m.Name, "phase": m.Phase, "node": node, "node_title": s.top.GetTitle(),
				"remediation": s.top.GetRemediation(), "refuted_by": s.top.GetRefutedBy()})
			f.Evidence = append([]Evidence{phaseEv}, d.nodeEvidence(node, s.top)...)
			f.NodeCause = nodeCause(node, s.top)
			f.Domain = domainOf(s.top.GetCategory())
			f.Confidence = s.top.GetConfidence()
			f.ConfidenceReason = fmt.Sprintf("the node's own report (joined by %s) names the cause with %s confidence", s.MatchedBy, s.top.GetConfidence())
			f.Remediation = s.top.GetRemediation()
			f.RefutedBy = s.top.GetRefutedBy()
		}
		if f != nil {
			if f.NodeCause != nil && s.rejudged != nil {
				f.ConfidenceReason += fmt.Sprintf("; verdict re-judged with the Machine's spec.version %s (the agent alone reported: %s)", m.Version, s.rejudged.Before)
			}
			if f.NodeCause != nil && f.NodeCause.Category == "cni.not-ready" {
				f.ChainLink = linkCNI
			}
			s.finding = d.add(f)
		}
		d.ruleInfra(s)
	}
}

// ruleInfra: the provider's machine failed. A VM extension failure (CAPZ's
// bootstrapping extension waits for cloud-init's sentinel) is a symptom of
// the bootstrap; anything else (quota, SKU, allocation) is the provider's.
func (d *diag) ruleInfra(s *mstate) {
	im := s.m.Infra
	if im == nil {
		return
	}
	var ev []Evidence
	text := ""
	if im.VMState == "Failed" {
		ev = append(ev, Evidence{Source: objName(&im.Object) + " status.vmState", Excerpt: "vmState: Failed"})
	}
	if im.FailureReason != "" || im.FailureMessage != "" {
		ev = append(ev, Evidence{Source: objName(&im.Object) + " status.failureReason/failureMessage", Excerpt: strings.TrimSpace(im.FailureReason + ": " + im.FailureMessage)})
		text += im.FailureReason + " " + im.FailureMessage
	}
	for _, list := range [][]capi.Condition{im.Conditions, im.V1Beta1Conditions} {
		for _, c := range list {
			if c.Status == "False" && (c.Severity == "Error" || strings.Contains(c.Reason, "Failed") || strings.Contains(c.Message, "Error")) && len(ev) < 4 {
				ev = append(ev, condEvidence(&im.Object, c))
				text += " " + c.Reason + " " + c.Message
			}
		}
	}
	if len(ev) == 0 {
		return
	}
	extension := strings.Contains(strings.ToLower(text), "extension") || strings.Contains(text, "Bootstrap")
	what := "the provider failed to provision the VM: " + strings.TrimSpace(text)
	if extension {
		what = "the VM's bootstrapping extension failed (it waits for cloud-init to finish)"
	}
	f := withEvidence(newFinding(rules.InfraMachineFailed, objName(&im.Object), rules.Params{"kind": im.Kind, "name": im.Name, "what": what}), ev)
	if extension {
		f.RefutedBy = "cloud-init finished on the VM and wrote /run/cluster-api/bootstrap-success.complete"
		if s.finding != nil && s.finding.NodeCause != nil {
			f.Confidence, f.ConfidenceReason = rules.High, "the node's report names the bootstrap failure the extension waited for"
			f.Remediation = "Fix the node's cause (the Machine's finding); the extension error is its symptom."
			d.add(f)
			d.explain(s.finding, d.byKey[f.ID+"/"+f.Subject])
			return
		}
		f.Confidence, f.ConfidenceReason = rules.Medium, "the extension only reports that cloud-init did not finish; the node's evidence is missing"
		f.MissingEvidence = fmt.Sprintf("cloud-init's log on the VM: `%s`", d.vmCommand(s.m))
		f.Escalation = "If cloud-init finished successfully on the VM and the extension still failed, open a case with Azure support quoting the extension's error."
	} else {
		f.Confidence, f.ConfidenceReason = rules.High, "the provider's own status says the VM failed"
		f.Escalation = "Quota, capacity (AllocationFailed) or platform errors belong to the cloud provider: open a case with the error and the VM name."
	}
	d.add(f)
	// The VM failed: the Machine cannot run, unless its node reported a
	// cause of its own (then the VM did run, and both are shown).
	if s.finding != nil && s.finding.NodeCause == nil {
		d.explain(d.byKey[f.ID+"/"+f.Subject], s.finding)
	}
}

// ruleControlPlane: the first control plane Machine not initialised blocks
// every other Machine; KCP waiting for its preflight checks is explained by
// the control plane nodes.
func (d *diag) ruleControlPlane() {
	var cps []*mstate
	for _, s := range d.machines {
		if s.m.ControlPlane {
			cps = append(cps, s)
		}
	}
	sort.SliceStable(cps, func(i, j int) bool { return cps[i].m.CreationTimestamp.Before(cps[j].m.CreationTimestamp) })
	kcp := d.c.ControlPlane
	initialized := d.c.ControlPlaneInitialized || (kcp != nil && kcp.Initialized)
	if !initialized && (kcp != nil || len(cps) > 0) {
		what := fmt.Sprintf("the control plane of cluster %s is not initialised", d.c.Name)
		if len(cps) > 0 {
			what = fmt.Sprintf("the first control plane Machine %s has not initialised the control plane", cps[0].m.Name)
		}
		f := newFinding(rules.ControlPlaneNotInitialized, objName(&d.c.Object), rules.Params{"what": what})
		f.Evidence = append(f.Evidence, Evidence{Source: objName(&d.c.Object) + " status", Excerpt: "control plane initialized: false"})
		if c, ok := d.c.Condition("ControlPlaneInitialized"); ok {
			f.Evidence = append(f.Evidence, condEvidence(&d.c.Object, c))
		}
		if kcp != nil {
			f.Evidence = append(f.Evidence, replicasEvidence(&kcp.Object, kcp.Replicas))
		}
		f.ConfidenceReason = "Cluster API's own status says the control plane is not initialised; workers join only an initialised control plane"
		if len(cps) > 0 {
			first := cps[0]
			f.Evidence = append(f.Evidence, Evidence{Source: objName(&first.m.Object) + " status.phase", Excerpt: "phase: " + first.m.Phase + " (first control plane Machine: kubeadm init runs here)"})
			f = d.add(f)
			if ff := first.finding; ff != nil {
				if ff.NodeCause != nil {
					d.explain(ff, f)
					f.Domain = ff.Domain
				} else {
					d.explain(f, ff)
					f.MissingEvidence = ff.MissingEvidence
				}
			}
		} else {
			f = d.add(f)
		}
		for _, s := range d.machines {
			if s.finding != nil && (!s.m.ControlPlane || len(cps) > 0 && s != cps[0]) {
				d.explain(f, s.finding)
			}
		}
	}
	if kcp == nil {
		return
	}
	var ev []Evidence
	for _, list := range [][]capi.Condition{kcp.Conditions, kcp.V1Beta1Conditions} {
		for _, c := range list {
			if strings.Contains(strings.ToLower(c.Message), "preflight") {
				ev = append(ev, condEvidence(&kcp.Object, c))
			}
		}
	}
	var lacking []*mstate
	// An absent condition says nothing while the control plane has all its
	// replicas ready (older KCPs, or a status not yet written); it counts
	// only while KCP is short of ready replicas.
	short := kcp.Replicas.Ready < kcp.Replicas.Desired
	named := func(m *capi.Machine) bool {
		for _, list := range [][]capi.Condition{kcp.Conditions, kcp.V1Beta1Conditions} {
			for _, c := range list {
				if strings.Contains(c.Message, m.Name) {
					return true
				}
			}
		}
		return false
	}
	for _, s := range cps {
		if s.m.NodeRef.Name == "" && s.m.Phase != "Running" {
			// No Node yet, so no pod conditions: while KCP is short of
			// ready replicas (or names it), it is a Machine KCP waits
			// for, and its node's report says why.
			if short || named(s.m) {
				lacking = append(lacking, s)
				ev = append(ev, Evidence{Source: objName(&s.m.Object) + " status", Excerpt: fmt.Sprintf("no Node yet (phase %s)", s.m.Phase)})
			}
			continue
		}
		var missing []string
		for _, t := range kcpPodConditions {
			if c, ok := s.m.Condition(t); !ok {
				if short {
					missing = append(missing, t+" (absent)")
				}
			} else if c.Status != "True" {
				missing = append(missing, fmt.Sprintf("%s=%s %s", t, c.Status, c.Reason))
			}
		}
		if len(missing) > 0 {
			lacking = append(lacking, s)
			ev = append(ev, Evidence{Source: objName(&s.m.Object) + " status.conditions", Excerpt: "not healthy: " + strings.Join(missing, ", ")})
		}
	}
	if len(ev) == 0 || (len(lacking) == 0 && kcp.Replicas.Ready >= kcp.Replicas.Desired) {
		return
	}
	ev = append([]Evidence{replicasEvidence(&kcp.Object, kcp.Replicas)}, ev...)
	f := withEvidence(newFinding(rules.KCPPreflightWaiting, objName(&kcp.Object), rules.Params{"kcp": kcp.Name, "ready": fmt.Sprint(kcp.Replicas.Ready), "desired": fmt.Sprint(kcp.Replicas.Desired)}), ev)
	f = d.add(f)
	explained := false
	for _, s := range lacking {
		if s.finding != nil && s.finding.NodeCause != nil {
			d.explain(s.finding, f)
			f.Domain = s.finding.Domain
			explained = true
		}
	}
	if explained {
		f.Confidence, f.ConfidenceReason = rules.High, "the control plane node's report names why its pods are not healthy"
	} else {
		f.Confidence, f.ConfidenceReason = rules.Medium, "KCP's status says what it waits for, but no control plane node report says why"
		if len(lacking) > 0 {
			target := lacking[0]
			for _, s := range lacking {
				if s.Node == nil {
					target = s // a Machine whose node has not reported
					break
				}
			}
			f.MissingEvidence = fmt.Sprintf("the control plane node's evidence (kubelet, containerd, image pulls): `%s`", d.vmCommand(target.m))
		}
	}
}

func replicasEvidence(o *capi.Object, r capi.Replicas) Evidence {
	return Evidence{Source: objName(o) + " status", Excerpt: fmt.Sprintf("replicas: desired %d, current %d, ready %d, available %d, up-to-date %d", r.Desired, r.Current, r.Ready, r.Available, r.UpToDate)}
}

// ruleMachineDeployments: a MachineDeployment with no ready replica.
func (d *diag) ruleMachineDeployments() {
	for _, md := range d.c.MachineDeployments {
		if md.Replicas.Desired == 0 || md.Replicas.Ready > 0 || md.DeletionTimestamp != nil || d.scalingUp(md) {
			continue
		}
		f := newFinding(rules.MachineDeploymentNotReady, objName(&md.Object), rules.Params{"md": md.Name, "desired": fmt.Sprint(md.Replicas.Desired)})
		f.Evidence = append([]Evidence{replicasEvidence(&md.Object, md.Replicas)}, badConditions(&md.Object, 2)...)
		f.ConfidenceReason = "the replica counts are Cluster API's own"
		f = d.add(f)
		if cp := d.byKey[IDControlPlaneNotInit+"/"+objName(&d.c.Object)]; cp != nil {
			d.explain(cp, f)
		}
		for _, s := range d.machines {
			if s.m.Labels[labelDeployment] == md.Name && s.finding != nil {
				d.explain(s.finding, f)
				if f.Domain == DomainUnknown {
					f.Domain = s.finding.Domain
				}
			}
		}
		if a := d.addons["cni"]; a != nil {
			d.explain(a, f)
		}
		if a := d.addons["cloud-provider"]; a != nil {
			d.explain(a, f)
		}
		if len(f.ExplainedBy) == 0 {
			f.MissingEvidence = "why its Machines are not ready: their node reports (run the agent on the VMs)"
		}
	}
}

// ruleMachineHealthChecks: an MHC that keeps remediating: Machines it marked
// unhealthy or deleted, and replacements newer than the MHC itself. The
// loop destroys the evidence: say how to keep a VM.
func (d *diag) ruleMachineHealthChecks() {
	for _, mhc := range d.c.MachineHealthChecks {
		var ev []Evidence
		var remediated []*mstate
		if c, ok := mhc.Condition("RemediationAllowed"); ok && c.Status == "False" {
			ev = append(ev, condEvidence(&mhc.Object, c))
		}
		targets := map[string]bool{}
		for _, t := range mhc.Targets {
			targets[t] = true
		}
		var replacements int
		for _, s := range d.machines {
			m := s.m
			if len(targets) > 0 && !targets[m.Name] {
				continue
			}
			hit := false
			for _, t := range []string{"HealthCheckSucceeded", "OwnerRemediated"} {
				if c, ok := m.Condition(t); ok && c.Status == "False" {
					ev = append(ev, condEvidence(&m.Object, c))
					hit = true
				}
			}
			if m.DeletionTimestamp != nil {
				ev = append(ev, Evidence{Source: objName(&m.Object) + " metadata.deletionTimestamp", Excerpt: "being deleted since " + m.DeletionTimestamp.UTC().Format("2006-01-02T15:04:05Z")})
				hit = true
			}
			if hit {
				remediated = append(remediated, s)
			}
			if !mhc.CreationTimestamp.IsZero() && m.CreationTimestamp.Sub(mhc.CreationTimestamp) > 10*time.Minute {
				replacements++
			}
		}
		if len(remediated) == 0 || (replacements == 0 && len(ev) < 2) {
			continue
		}
		ev = append(ev, Evidence{Source: objName(&mhc.Object) + " status", Excerpt: fmt.Sprintf("expectedMachines %d, currentHealthy %d, remediationsAllowed %d; %d Machine(s) created after the MachineHealthCheck (replacements)", mhc.ExpectedMachines, mhc.CurrentHealthy, mhc.RemediationsAllowed, replacements)})
		if len(ev) > 6 {
			ev = append(ev[:5], Evidence{Source: "…", Excerpt: fmt.Sprintf("%d more", len(ev)-5)})
		}
		f := withEvidence(newFinding(rules.MHCRemediationLoop, objName(&mhc.Object), rules.Params{"mhc": mhc.Name, "now": fmt.Sprint(len(remediated)), "replacements": fmt.Sprint(replacements)}), ev)
		f.ConfidenceReason = "remediations and replacements are visible, but Cluster API keeps no history of deleted Machines"
		f = d.add(f)
		for _, s := range remediated {
			if s.finding != nil {
				d.explain(s.finding, f)
				f.Domain = s.finding.Domain
			}
		}
		if len(f.ExplainedBy) == 0 {
			f.MissingEvidence = "a remediated node's own evidence before it is deleted: annotate a Machine with " + annSkipRemediate + " and run the agent on its VM"
		}
	}
}

// ---- add-ons -----------------------------------------------------------------

var addonKinds = []struct {
	kind, label string
	words       []string
	link        string
}{
	{"cni", "CNI", []string{"calico", "tigera", "cilium", "flannel", "antrea", "azure-cni", "kube-ovn", "weave"}, linkCNI},
	{"cloud-provider", "cloud provider", []string{"cloud-provider", "cloud-controller", "ccm"}, linkCCM},
}

func addonKind(p *capi.HelmChartProxy) string {
	s := strings.ToLower(p.Name + " " + p.ChartName)
	for _, k := range addonKinds {
		for _, w := range k.words {
			if strings.Contains(s, w) {
				return k.kind
			}
		}
	}
	return ""
}

func (d *diag) selects(p *capi.HelmChartProxy) bool {
	for _, n := range p.MatchingClusters {
		if n == d.c.Name {
			return true
		}
	}
	ok, _ := p.Selects(d.c.Labels) // an unparsable selector selects nothing, as in CAAPH
	return ok
}

func (d *diag) unreadable(prefix string) bool {
	for _, p := range d.c.Problems {
		if strings.HasPrefix(p.Resource, prefix) {
			return true
		}
	}
	return false
}

// ruleAddons: the cluster's labels match no HelmChartProxy of a CNI or a
// cloud provider (no release: the nodes' "cni plugin not initialized" is a
// consequence), or the matching release failed.
func (d *diag) ruleAddons() {
	d.addons, d.addonOK = map[string]*Finding{}, map[string]bool{}
	if d.unreadable("helmchartproxies") {
		return // a gap, not an absence.
	}
	var cniNodes []*mstate
	for _, s := range d.machines {
		for _, f := range s.rep.GetFindings() {
			if f.GetCategory() == "cni.not-ready" {
				cniNodes = append(cniNodes, s)
				break
			}
		}
	}
	labels := labelList(d.c.Labels)
	for _, k := range addonKinds {
		var of []*capi.HelmChartProxy
		var matched *capi.HelmChartProxy
		for _, p := range d.c.HelmChartProxies {
			if addonKind(p) != k.kind {
				continue
			}
			of = append(of, p)
			if matched == nil && d.selects(p) {
				matched = p
			}
		}
		subject := "Cluster/" + d.c.Name + "/" + k.kind
		if matched != nil {
			d.addonOK[k.kind] = true
			for _, r := range d.c.HelmReleaseProxies {
				if (r.ChartName == matched.ChartName || strings.HasPrefix(r.Name, matched.Name)) && strings.EqualFold(r.Status, "failed") {
					f := newFinding(rules.AddonReleaseFailed, "HelmReleaseProxy/"+r.Name, rules.Params{"label": k.label, "release": r.Name, "proxy": matched.Name})
					f.ChainLink = k.link
					f.Evidence = append([]Evidence{{Source: "HelmReleaseProxy/" + r.Name + " status.status", Excerpt: "status: " + r.Status}}, badConditions(&r.Object, 2)...)
					f.ConfidenceReason = "CAAPH's own status says the release failed"
					d.addonOK[k.kind] = false
					d.addons[k.kind] = d.add(f)
				}
			}
			continue
		}
		if len(of) == 0 && (k.kind != "cni" || len(cniNodes) == 0) {
			continue // no proxy of that kind: maybe installed another way.
		}
		// Title, remediation and refutation are set below, from what the
		// charts and nodes say.
		f := newFinding(rules.AddonNotMatched, subject, rules.Params{"what": "", "remediation": "", "refuted_by": ""})
		f.ChainLink = k.link
		f.Evidence = append(f.Evidence, Evidence{Source: objName(&d.c.Object) + " metadata.labels", Excerpt: labels})
		for _, p := range of {
			ex := "selector: " + p.SelectorString() + fmt.Sprintf("; matchingClusters: %d", len(p.MatchingClusters))
			if _, err := p.Selects(d.c.Labels); err != nil {
				ex += "; " + err.Error()
			}
			f.Evidence = append(f.Evidence, Evidence{Source: "HelmChartProxy/" + p.Name + " spec.clusterSelector", Excerpt: ex})
		}
		for i, s := range cniNodes {
			if k.kind != "cni" {
				break
			}
			if i == 2 {
				f.Evidence = append(f.Evidence, Evidence{Source: "nodes", Excerpt: fmt.Sprintf("%d more node(s) report the network plugin not ready", len(cniNodes)-2)})
				break
			}
			for _, nf := range s.rep.GetFindings() {
				if nf.GetCategory() == "cni.not-ready" && rules.SeverityAtLeast(nf.GetSeverity(), rules.Error) {
					f.Evidence = append(f.Evidence, d.nodeEvidence(s.nodeName(), nf)...)
					break
				}
			}
		}
		if len(of) > 0 {
			first := of[0]
			f.Title = fmt.Sprintf("no %s HelmChartProxy matches cluster %s: %s selects %s, the cluster's labels are %s", k.label, d.c.Name, first.Name, first.SelectorString(), labels)
			f.Remediation = addonRemediation(d.c, first)
			f.RefutedBy = fmt.Sprintf("a HelmReleaseProxy of %s for cluster %s, or the %s installed by other means (ClusterResourceSet, a manifest)", first.ChartName, d.c.Name, k.label)
			if k.kind == "cni" && len(cniNodes) > 0 {
				f.Confidence, f.ConfidenceReason = rules.High, "a CNI chart exists but does not select the cluster, and the nodes report the network plugin not ready"
			} else if k.kind == "cni" {
				f.Confidence, f.ConfidenceReason = rules.Medium, "a CNI chart exists but does not select the cluster; no node report confirms the missing CNI"
			} else {
				f.Confidence, f.ConfidenceReason = rules.High, "a cloud-provider chart exists but does not select the cluster: without cloud-controller-manager no Node gets its providerID"
			}
		} else {
			f.Title = fmt.Sprintf("no HelmChartProxy installs a CNI on cluster %s and its nodes report the network plugin not ready", d.c.Name)
			f.Confidence, f.ConfidenceReason = rules.Medium, "the nodes have no CNI configuration and no chart would install one; another installer (ClusterResourceSet) is not read"
			f.Remediation = fmt.Sprintf("Install a CNI on cluster %s: a HelmChartProxy selecting it (e.g. calico with a `cni: calico` selector and the label on the Cluster), or a ClusterResourceSet.", d.c.Name)
			f.RefutedBy = "a CNI installed by other means (ClusterResourceSet, a manifest applied by hand)"
		}
		f = d.add(f)
		d.addons[k.kind] = f
		if k.kind == "cni" {
			for _, s := range cniNodes {
				if s.finding != nil {
					d.explain(f, s.finding)
				}
			}
		}
	}
	// Without a cloud provider, Machines whose nodes are healthy never get
	// a providerID: the chart is the cause.
	if a := d.addons["cloud-provider"]; a != nil {
		for _, s := range d.machines {
			if s.finding != nil && s.finding.ID == IDMachineNotRunning && s.finding.NodeCause == nil && s.Node != nil {
				d.explain(a, s.finding)
			}
		}
	}
}

func labelList(m map[string]string) string {
	if len(m) == 0 {
		return "(none)"
	}
	var ks []string
	for k, v := range m {
		ks = append(ks, k+"="+v)
	}
	sort.Strings(ks)
	return strings.Join(ks, ", ")
}

// scalingUp: every Machine of md is within the grace period and none has a
// finding at warning or above: the deployment is being created, not stuck.
func (d *diag) scalingUp(md *capi.MachineDeployment) bool {
	n := 0
	for _, s := range d.machines {
		if s.m.Labels[labelDeployment] != md.Name {
			continue
		}
		n++
		since, _ := phaseSince(s.m)
		if d.o.Now.Sub(since) >= d.o.Grace || s.finding != nil && rules.SeverityAtLeast(s.finding.Severity, rules.Warning) {
			return false
		}
	}
	return n > 0
}

// addonRemediation says how to make the chart select the cluster: the
// labels to set (with the kubectl command when only labels are missing),
// else each unmet requirement of the selector.
func addonRemediation(c *capi.Cluster, p *capi.HelmChartProxy) string {
	unmet := p.Unmet(c.Labels)
	var set []string
	plain := true
	for _, u := range unmet {
		if k, v, ok := strings.Cut(u, "="); ok && !strings.ContainsAny(v, " <") && !strings.Contains(k, " ") {
			set = append(set, u)
		} else {
			plain = false
		}
	}
	tail := fmt.Sprintf(" so that CAAPH installs %s (HelmChartProxy %s).", p.ChartName, p.Name)
	if _, err := p.Selects(c.Labels); err != nil {
		return fmt.Sprintf("Fix spec.clusterSelector of HelmChartProxy %s (%v),%s", p.Name, err, tail)
	}
	if plain && len(set) > 0 {
		return fmt.Sprintf("Add the label(s) %s to Cluster %s/%s (`kubectl label cluster -n %s %s %s`) and to the cluster template's metadata.labels,%s", strings.Join(set, ", "), c.Namespace, c.Name, c.Namespace, c.Name, strings.Join(set, " "), tail)
	}
	return fmt.Sprintf("Change the labels of Cluster %s/%s (and the cluster template's metadata.labels) to meet the selector %s: %s,%s", c.Namespace, c.Name, p.SelectorString(), strings.Join(unmet, "; "), tail)
}
