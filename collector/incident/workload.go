package incident

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/nodediag/nodediag/agent/rules"
	"github.com/nodediag/nodediag/collector/workload"
)

// The workload cluster's side of the dependency chain: its Nodes and the
// system workloads of each link, read from its API server or a CI tree's
// dumps (Options.Workload).

// workloadGrace is how young a pod or Node may be and still be starting:
// a new node is NotReady until the CNI is up, a new pod is Pending or
// ContainerCreating for a while.
const workloadGrace = 5 * time.Minute

// hardWaiting are container waiting reasons that are failures at any age.
var hardWaiting = map[string]bool{
	"ImagePullBackOff": true, "ErrImagePull": true, "InvalidImageName": true, "ErrImageNeverPull": true,
	"CrashLoopBackOff": true, "CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true,
}

// ownCause are container states that a component has for its own reasons
// (its image, its configuration): a broken link before it does not explain
// them.
var ownCause = map[string]bool{
	"ImagePullBackOff": true, "ErrImagePull": true, "InvalidImageName": true, "ErrImageNeverPull": true,
	"CreateContainerConfigError": true,
}

// networkNotReady is the kubelet's Ready message when the CNI is not up
// ("container runtime network not ready: NetworkReady=false
// reason:NetworkPluginNotReady message:Network plugin returns error: cni
// plugin not initialized", or "...: No CNI configuration file in
// /etc/cni/net.d/").
var networkNotReady = regexp.MustCompile(`(?i)NetworkPluginNotReady|network not ready|cni plugin not initialized|No CNI configuration file|cni config uninitialized`)

// unreachableAPI is a component's last words when the service IP of the
// API server does not answer (kube-proxy down): the component is a
// consequence of an earlier link.
var unreachableAPI = regexp.MustCompile(`(?i)dial tcp [^ ]+: (i/o timeout|connect: (connection refused|no route to host))|Unable to contact k8s api-server|connection refused|context deadline exceeded`)

const (
	taintUninitialized = "node.cloudprovider.kubernetes.io/uninitialized"
	taintNotReady      = "node.kubernetes.io/not-ready"
)

// ruleWorkload judges the workload cluster's links and Nodes.
func (d *diag) ruleWorkload() {
	w := d.o.Workload
	d.wlOK = map[string]bool{}
	if w == nil {
		return
	}
	if !w.Reached {
		why := ""
		if !d.controlPlaneInitialized() {
			why = " (expected while the control plane is not initialised)"
		}
		for _, p := range w.Problems {
			d.gapList = append(d.gapList, Gap{Resource: "workload cluster", Verb: p.Verb, Sentence: fmt.Sprintf("the workload cluster could not be read (%s)%s: %s; the report cannot tell the state of kube-proxy, the CNI, CoreDNS, cloud-node-manager and cloud-controller-manager, nor the Nodes' conditions, from the cluster itself.", w.Source, why, p.Err)})
		}
		return
	}
	cniFound := len(w.LinkWorkloads(workload.LinkCNI)) > 0
	for _, p := range w.Problems {
		if p.Optional && cniFound {
			continue // the CNI runs where it was read: that namespace does not matter.
		}
		g := Gap{Resource: "workload " + p.Resource, Verb: p.Verb, Forbidden: p.Forbidden, Identity: p.Identity}
		if p.Forbidden {
			g.Role = fmt.Sprintf("%s on %s (deploy/workload-reader grants it)", workload.Verbs, p.Resource)
			g.Sentence = fmt.Sprintf("in the workload cluster (%s), %s may not %s %s (Forbidden); the least role needed: %s. Until granted, the report cannot tell the chain's links from them: a gap, not a negative result.", w.Source, p.Identity, p.Verb, p.Resource, g.Role)
		} else {
			g.Sentence = fmt.Sprintf("in the workload cluster (%s), could not %s %s: %s; the chain's links that live there are unknown.", w.Source, p.Verb, p.Resource, p.Err)
		}
		d.gapList = append(d.gapList, g)
	}
	cilium := false
	for _, wl := range w.LinkWorkloads(workload.LinkCNI) {
		cilium = cilium || strings.Contains(wl.Name, "cilium")
	}
	for _, link := range workload.Links {
		ws := w.LinkWorkloads(link)
		if len(ws) == 0 {
			d.missingLink(w, link, cilium)
			continue
		}
		ok := true
		for _, wl := range ws {
			if d.workloadFinding(w, wl) != nil {
				ok = false
			}
		}
		d.wlOK[link] = ok
	}
	d.workloadNodes(w)
}

func (d *diag) controlPlaneInitialized() bool {
	return d.c.ControlPlaneInitialized || d.c.ControlPlane != nil && d.c.ControlPlane.Initialized
}

// onAzure: the cluster's Machines are Azure VMs, which need
// cloud-provider-azure (CCM and CNM) to get their providerID.
func (d *diag) onAzure() bool {
	for _, s := range d.machines {
		if strings.HasPrefix(s.m.ProviderID, "azure://") || strings.HasPrefix(s.m.InfraRef.Kind, "Azure") {
			return true
		}
	}
	for _, n := range d.o.Workload.Nodes {
		if strings.HasPrefix(n.ProviderID, "azure://") {
			return true
		}
	}
	return false
}

// newFinding is a finding of catalog problem p about subject, its texts
// from the catalog's templates.
func newFinding(p *rules.Problem, subject string, params rules.Params) *Finding {
	nf := p.Finding(params)
	return &Finding{ID: p.ID, Category: p.Category, Severity: p.Severity, Subject: subject, Domain: p.Domain, ChainLink: p.ChainLink,
		Confidence: p.Confidence, Title: nf.GetTitle(), Remediation: nf.GetRemediation(), RefutedBy: nf.GetRefutedBy()}
}

// withEvidence sets f's evidence and returns f.
func withEvidence(f *Finding, ev []Evidence) *Finding {
	f.Evidence = ev
	return f
}

func linkDomain(link string) string {
	if link == workload.LinkCNM || link == workload.LinkCCM {
		return DomainCloud
	}
	return DomainNetwork
}

// missingLink: no workload of link runs in the cluster, and it should.
func (d *diag) missingLink(w *workload.State, link string, cilium bool) {
	for _, ns := range workload.Namespaces {
		if w.Unreadable("daemonsets.apps in "+ns) || w.Unreadable("deployments.apps in "+ns) {
			return // a gap, not an absence.
		}
	}
	if w.Unreadable("nodes") && (link == workload.LinkCNM || link == workload.LinkCCM) {
		return
	}
	looked := "no DaemonSet or Deployment of it in " + strings.Join(workload.Namespaces, ", ")
	var advice string
	var ev []Evidence
	switch link {
	case workload.LinkKubeProxy:
		if cilium {
			return // Cilium can replace kube-proxy: its absence is no evidence.
		}
		advice = "kubeadm installs kube-proxy during kubeadm init unless the addon/kube-proxy phase is skipped: without it (and without a CNI that replaces it) the kubernetes Service IP does not answer and the CNI, CoreDNS and cloud-node-manager cannot reach the API server. Reinstall it (`kubeadm init phase addon kube-proxy` on a control plane node) or install a CNI that replaces it."
	case workload.LinkCNI:
		advice = fmt.Sprintf("Install a CNI on cluster %s (a HelmChartProxy selecting it, e.g. the calico chart with the Cluster label cni: calico, or a ClusterResourceSet): without one every Node stays NotReady.", d.c.Name)
		for _, n := range w.Nodes {
			if c, ok := n.Condition("Ready"); ok && c.Status != "True" && networkNotReady.MatchString(c.Message) && len(ev) < 2 {
				ev = append(ev, nodeCondEvidence(n, c))
			}
		}
	case workload.LinkCoreDNS:
		advice = "kubeadm installs CoreDNS during kubeadm init unless the addon/coredns phase is skipped: reinstall it (`kubeadm init phase addon coredns`) or install the DNS add-on the cluster is meant to have."
	case workload.LinkCNM, workload.LinkCCM:
		if !d.onAzure() {
			return
		}
		uninit := 0
		for _, n := range w.Nodes {
			if _, ok := n.Tainted(taintUninitialized); ok || n.ProviderID == "" {
				uninit++
				if len(ev) < 2 {
					ev = append(ev, nodeInitEvidence(n))
				}
			}
		}
		if uninit == 0 {
			return // every Node initialised: it runs elsewhere (or ran).
		}
		advice = fmt.Sprintf("Azure VMs need cloud-provider-azure (cloud-controller-manager and cloud-node-manager) in the workload cluster to get their providerID: install the cloud-provider-azure chart (a HelmChartProxy selecting the Cluster's cloud-provider: azure label) on cluster %s.", d.c.Name)
	}
	f := newFinding(rules.WorkloadComponentMissing, "Cluster/"+d.c.Name+"/"+link, rules.Params{"link": link, "looked": looked, "advice": advice})
	f.Domain, f.ChainLink = linkDomain(link), link
	f.Evidence = append([]Evidence{{Source: "workload cluster: " + w.Source, Excerpt: looked}}, ev...)
	f.ConfidenceReason = "the workload cluster's system namespaces were read and hold no such workload"
	f = d.add(f)
	// The add-on rule found why: no chart selects the cluster.
	kind := map[string]string{workload.LinkCNI: "cni", workload.LinkCCM: "cloud-provider", workload.LinkCNM: "cloud-provider"}[link]
	if a := d.addons[kind]; a != nil {
		d.explain(a, f)
	}
}

// badPod is a pod that is not ready for longer than a start takes, or in
// a state that is a failure at any age.
func badPod(now time.Time, p *workload.Pod) bool {
	ready := p.Phase == "Running"
	for _, c := range p.Containers {
		if !c.Init && !c.Ready {
			ready = false
		}
		if c.State == "waiting" && hardWaiting[c.Reason] {
			return true
		}
	}
	if ready {
		return false
	}
	return p.Created.IsZero() || now.Sub(p.Created) >= workloadGrace
}

// telling is the container of p whose state says most: a hard waiting
// reason first, then a restarting one, then any not ready.
func telling(p *workload.Pod) *workload.Container {
	var best *workload.Container
	score := func(c *workload.Container) int {
		switch {
		case c.State == "waiting" && hardWaiting[c.Reason]:
			return 4
		case c.Restarts > 0 || c.Last != nil:
			return 3
		case c.State == "terminated" || c.State == "waiting":
			return 2
		case !c.Ready:
			return 1
		}
		return 0
	}
	for i := range p.Containers {
		c := &p.Containers[i]
		if s := score(c); s > 0 && (best == nil || s > score(best)) {
			best = c
		}
	}
	return best
}

// workloadFinding judges one workload of a link; nil when it is healthy.
func (d *diag) workloadFinding(w *workload.State, wl *workload.Workload) *Finding {
	var bad []*workload.Pod
	for i := range wl.Pods {
		if badPod(d.o.Now, &wl.Pods[i]) {
			bad = append(bad, &wl.Pods[i])
		}
	}
	if len(bad) == 0 && (wl.Ready >= wl.Desired || len(wl.Pods) > 0) {
		return nil
	}
	params := rules.Params{"link": wl.Link, "kind": wl.Kind, "workload": wl.Namespace + "/" + wl.Name, "namespace": wl.Namespace,
		"ready": fmt.Sprint(wl.Ready), "desired": fmt.Sprint(wl.Desired)}
	subject := wl.Kind + "/" + wl.Namespace + "/" + wl.Name
	ev := []Evidence{{Source: fmt.Sprintf("workload cluster: %s status", subject), Excerpt: fmt.Sprintf("desired %d, ready %d", wl.Desired, wl.Ready)}}
	own, pulls, downstream, reasons := false, false, false, false
	for i, p := range bad {
		c := telling(p)
		if i == 0 {
			params["pod"] = p.Name
			if c != nil {
				params["container"] = c.Name
				params["reason"], params["advice"] = podReason(p, c)
			} else {
				params["reason"], params["advice"] = podReason(p, nil)
			}
		}
		if c != nil {
			reasons = true
			own = own || ownCause[c.Reason]
			pulls = pulls || strings.Contains(c.Reason, "Image") && c.Reason != "InvalidImageName"
			last := ""
			if c.Last != nil {
				last = c.Last.Message
			}
			downstream = downstream || unreachableAPI.MatchString(c.Message+" "+last)
		}
		if cond, ok := podCondition(p, "PodScheduled"); ok {
			reasons = true
			downstream = downstream || strings.Contains(cond.Message, taintNotReady) || strings.Contains(cond.Message, taintUninitialized)
		}
		if c == nil || c.Reason == "ContainerCreating" || c.Reason == "PodInitializing" {
			downstream = true // waiting for the node's network (or earlier)
		}
		if i < d.o.MaxQuotes {
			ev = append(ev, podEvidence(p, c)...)
		} else {
			ev[len(ev)-1].More = fmt.Sprintf("%d more pod(s) of %s not ready", len(bad)-i, subject)
			break
		}
	}
	if len(bad) == 0 {
		params["reason"] = ""
	}
	f := newFinding(rules.WorkloadComponentFailing, subject, params)
	f.ChainLink, f.Domain = wl.Link, linkDomain(wl.Link)
	f.Evidence = ev
	if pulls {
		f.Domain = DomainRegistry
	}
	if reasons {
		f.ConfidenceReason = "the workload cluster's own pod states say so"
	} else {
		f.Confidence = rules.Medium
		f.ConfidenceReason = "the workload's ready count is short but no pod state says why"
	}
	f = d.add(f)
	d.downstream[f] = downstream && !own
	return f
}

func podCondition(p *workload.Pod, t string) (workload.Condition, bool) {
	for _, c := range p.Conditions {
		if c.Type == t && c.Status != "True" {
			return c, true
		}
	}
	return workload.Condition{}, false
}

// podReason says in a few words why the pod is not ready, and what to do.
func podReason(p *workload.Pod, c *workload.Container) (reason, advice string) {
	if c == nil {
		if cond, ok := podCondition(p, "PodScheduled"); ok {
			return fmt.Sprintf(": pod %s is %s, not scheduled: %s", p.Name, p.Phase, cond.Message),
				"The pods cannot be scheduled: the scheduler's message names the taint or resource in the way (a node.kubernetes.io/not-ready taint means the Nodes wait for the CNI)."
		}
		return fmt.Sprintf(": pod %s is %s", p.Name, p.Phase), "The pod has no container state yet: read its events."
	}
	what := c.Reason
	if what == "" {
		what = c.State
	}
	reason = fmt.Sprintf(": pod %s container %s is %s", p.Name, c.Name, what)
	switch c.Reason {
	case "ImagePullBackOff", "ErrImagePull", "ErrImageNeverPull":
		advice = fmt.Sprintf("The image %s cannot be pulled (the message says why: a tag that does not exist, a registry the nodes cannot reach, credentials). Point the workload at an image that exists, or make the registry reachable; kube-proxy's tag follows the cluster's Kubernetes version, so a custom or LTS version's tag may exist only in its own registry (pre-pull and re-tag it in preKubeadmCommands).", c.Image)
	case "InvalidImageName":
		advice = fmt.Sprintf("The image reference %q is not valid (an empty tag, as a chart renders when its version map lacks the cluster's Kubernetes minor): set the image or tag explicitly in the chart values.", c.Image)
	case "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
		advice = "The container cannot be created from its specification (a missing ConfigMap or Secret, a bad mount): the message names it."
	case "ContainerCreating", "PodInitializing":
		advice = "The pod's sandbox or init containers are not done: on a new cluster this is the node's network (the CNI link) or an earlier link."
	default:
		advice = "The container exits: its last termination message (quoted) says why; if it cannot reach the API server through its Service IP (10.96.0.1:443 i/o timeout), fix kube-proxy first."
	}
	if c.Message != "" {
		reason += " (" + oneLine(c.Message, 200) + ")"
	} else if c.Last != nil && c.Last.Message != "" {
		reason += ", last exit: " + oneLine(c.Last.Message, 200)
	}
	return reason, advice
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		for n > 0 && s[n]&0xC0 == 0x80 {
			n--
		}
		s = s[:n] + "…"
	}
	return s
}

func podEvidence(p *workload.Pod, c *workload.Container) []Evidence {
	src := fmt.Sprintf("workload cluster: Pod/%s", p.Name)
	if p.Node != "" {
		src += " (node " + p.Node + ")"
	}
	var out []Evidence
	if c != nil {
		ex := fmt.Sprintf("container %s: %s", c.Name, c.State)
		if c.Reason != "" {
			ex += " reason=" + c.Reason
		}
		if c.Message != "" {
			ex += " message=" + strconvQuote(c.Message)
		}
		if c.Restarts > 0 {
			ex += fmt.Sprintf(" restarts=%d", c.Restarts)
		}
		if c.Image != "" {
			ex += " image=" + c.Image
		}
		out = append(out, Evidence{Source: src + " status.containerStatuses", Excerpt: ex})
		if l := c.Last; l != nil && (l.Message != "" || l.Reason != "") {
			e := Evidence{Source: src + " lastState.terminated", Excerpt: fmt.Sprintf("reason=%s exitCode=%d message=%s", l.Reason, l.ExitCode, strconvQuote(l.Message))}
			if !l.Finished.IsZero() {
				t := l.Finished
				e.Time = &t
			}
			out = append(out, e)
		}
	}
	for _, cond := range p.Conditions {
		if cond.Message != "" && (c == nil || cond.Type == "PodScheduled") {
			out = append(out, Evidence{Source: src + " status.conditions", Excerpt: fmt.Sprintf("%s=%s reason=%s message=%s", cond.Type, cond.Status, cond.Reason, strconvQuote(cond.Message))})
		}
	}
	if len(out) == 0 {
		out = append(out, Evidence{Source: src + " status.phase", Excerpt: "phase: " + p.Phase})
	}
	return out
}

func nodeCondEvidence(n workload.Node, c workload.Condition) Evidence {
	e := Evidence{Source: "workload cluster: Node/" + n.Name + " status.conditions", Excerpt: fmt.Sprintf("%s=%s reason=%s message=%s", c.Type, c.Status, c.Reason, strconvQuote(c.Message))}
	if !c.LastTransitionTime.IsZero() {
		t := c.LastTransitionTime
		e.Time = &t
	}
	return e
}

func nodeInitEvidence(n workload.Node) Evidence {
	var taints []string
	for _, t := range n.Taints {
		taints = append(taints, t.Key+"="+t.Value+":"+t.Effect)
	}
	pid := n.ProviderID
	if pid == "" {
		pid = `""`
	}
	return Evidence{Source: "workload cluster: Node/" + n.Name + " spec", Excerpt: fmt.Sprintf("providerID: %s; taints: %s", pid, strings.Join(taints, ", "))}
}

// machineOfNode is the Machine whose Node this is.
func (d *diag) machineOfNode(n workload.Node) *mstate {
	for _, s := range d.machines {
		if s.m.NodeRef.Name == n.Name || n.ProviderID != "" && strings.EqualFold(s.m.ProviderID, n.ProviderID) {
			return s
		}
	}
	for _, s := range d.machines {
		if s.Node != nil && s.Node.NodeName() == n.Name {
			return s
		}
	}
	return nil
}

// workloadNodes: Nodes NotReady (with the kubelet's message), and Nodes
// the cloud provider has not initialised.
func (d *diag) workloadNodes(w *workload.State) {
	azure := d.onAzure()
	for _, n := range w.Nodes {
		young := !n.Created.IsZero() && d.o.Now.Sub(n.Created) < workloadGrace
		ms := d.machineOfNode(n)
		if c, ok := n.Condition("Ready"); ok && c.Status != "True" && !young {
			msg := c.Message
			if msg == "" {
				msg = c.Reason
			}
			f := newFinding(rules.WorkloadNodeNotReady, "Node/"+n.Name, rules.Params{"node": n.Name, "message": oneLine(msg, 240)})
			f.Evidence = []Evidence{nodeCondEvidence(n, c)}
			if t, ok := n.Tainted(taintNotReady); ok {
				f.Evidence = append(f.Evidence, Evidence{Source: "workload cluster: Node/" + n.Name + " spec.taints", Excerpt: t.Key + ":" + t.Effect})
			}
			f.ConfidenceReason = "the Node's Ready condition, as its kubelet reports it"
			if networkNotReady.MatchString(msg) {
				f.ChainLink, f.Domain = linkCNI, DomainNetwork
				f.Remediation = "The kubelet waits for the CNI to write its configuration (/etc/cni/net.d): make the CNI's pods run on this node (see the CNI link); if no CNI is installed, install one."
			}
			f = d.add(f)
			d.downstream[f] = f.ChainLink == linkCNI
			if ms != nil && ms.finding != nil && ms.finding.NodeCause != nil {
				d.explain(ms.finding, f) // the node's own report names why
			}
		}
		_, tainted := n.Tainted(taintUninitialized)
		if !azure || young || !tainted && n.ProviderID != "" {
			continue
		}
		f := newFinding(rules.WorkloadNodeUninitialized, "Node/"+n.Name, rules.Params{"node": n.Name, "age": "created " + age(d.o.Now, n.Created) + " ago"})
		if !tainted {
			// Registered without the cloud taint: the cloud-node-manager
			// skips such a node ("Node has no cloud taint, skipping
			// initialization") and nothing sets its providerID.
			f.Title = fmt.Sprintf("Node %s has no spec.providerID and no %s taint: the cloud-node-manager skips a node registered without it, so nothing sets its providerID and its Machine cannot turn Running", n.Name, taintUninitialized)
			f.Remediation = fmt.Sprintf("Register the node with the taint: add register-with-taints: %s=true:NoSchedule to the kubelet's extra args (kubeletExtraArgs of the KubeadmConfigTemplate, as CAPZ's Windows templates do), then replace the Machine.", taintUninitialized)
			f.ChainLink = linkProviderID
		}
		f.Evidence = []Evidence{nodeInitEvidence(n)}
		f.ConfidenceReason = "the Node object's taints and providerID"
		f = d.add(f)
		d.downstream[f] = tainted
		if ms != nil && ms.finding != nil && ms.finding.NodeCause == nil {
			d.explain(f, ms.finding) // the Machine waits for this Node's providerID
		}
	}
}
