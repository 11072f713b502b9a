package incident

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/nodediag/nodediag/agent/redact"
	"github.com/nodediag/nodediag/agent/rules"
)

// The dependency chain of a CAPZ workload cluster (the catalog's): if a
// link breaks, the links after it fail too, so the report names the first
// broken one.
const (
	linkKubeProxy  = rules.LinkKubeProxy
	linkCNI        = rules.LinkCNI
	linkCoreDNS    = rules.LinkCoreDNS
	linkCNM        = rules.LinkCNM
	linkCCM        = rules.LinkCCM
	linkProviderID = rules.LinkProviderID
	linkRunning    = rules.LinkRunning
)

var chainOrder = rules.ChainLinks

func linkIndex(l string) int {
	for i, n := range chainOrder {
		if n == l {
			return i
		}
	}
	return len(chainOrder)
}

// linkOfNode places a node finding on the chain from its category or what
// it names.
func linkOfNode(id, category, title string) string {
	s := strings.ToLower(id + " " + title)
	switch {
	case strings.Contains(s, "kube-proxy") || strings.Contains(s, "kubeproxy"):
		return linkKubeProxy
	case category == "cni.not-ready":
		return linkCNI
	case strings.Contains(s, "coredns"):
		return linkCoreDNS
	case strings.Contains(s, "cloud-node-manager"):
		return linkCNM
	case strings.Contains(s, "cloud-controller-manager"):
		return linkCCM
	}
	return ""
}

// chain fills the dependency chain and makes the findings of later links
// consequences of the first broken link's cluster findings.
func (d *diag) chain() {
	for _, f := range d.findings {
		if f.ChainLink == "" && f.NodeCause != nil {
			f.ChainLink = linkOfNode(f.NodeCause.ID, f.NodeCause.Category, f.NodeCause.Title)
		}
	}
	broken := map[string][]string{}
	for _, f := range d.findings {
		if f.ChainLink != "" {
			broken[f.ChainLink] = append(broken[f.ChainLink], f.Key)
		}
		if f.ID == IDMachineNotRunning {
			broken[linkRunning] = append(broken[linkRunning], f.Key)
		}
	}
	if a := d.addons["cloud-provider"]; a != nil {
		broken[linkCNM] = append(broken[linkCNM], a.Key)
	}
	reported := false
	for _, s := range d.machines {
		if s.rep != nil {
			reported = true
		}
	}
	allRunning, allProviderIDs := len(d.machines) > 0, len(d.machines) > 0
	for _, s := range d.machines {
		if s.m.Phase != "Running" {
			allRunning = false
		}
		if s.m.ProviderID == "" || s.m.NodeRef.Name == "" {
			allProviderIDs = false
		}
	}
	// The CNI works where a Running node reports no CNI problem.
	cniWorks := false
	for _, s := range d.machines {
		if s.m.Phase != "Running" || s.rep == nil {
			continue
		}
		bad := false
		for _, f := range s.rep.GetFindings() {
			bad = bad || f.GetCategory() == "cni.not-ready"
		}
		cniWorks = cniWorks || !bad
	}
	_ = reported
	ok := map[string]bool{
		linkKubeProxy:  d.wlOK[linkKubeProxy],
		linkCNI:        d.addonOK["cni"] && cniWorks || d.wlOK[linkCNI],
		linkCoreDNS:    d.wlOK[linkCoreDNS],
		linkCNM:        d.addonOK["cloud-provider"] && allProviderIDs || d.wlOK[linkCNM],
		linkCCM:        d.addonOK["cloud-provider"] && allProviderIDs || d.wlOK[linkCCM],
		linkProviderID: allProviderIDs,
		linkRunning:    allRunning,
	}
	first := -1
	for i, n := range chainOrder {
		l := ChainLink{Name: n, State: "unknown"}
		switch {
		case len(broken[n]) > 0:
			l.State = "broken"
			l.Findings = broken[n]
			sort.Strings(l.Findings)
			if first < 0 {
				first = i
			}
		case ok[n]:
			l.State = "ok"
		}
		d.links = append(d.links, l)
	}
	if first < 0 {
		return
	}
	// The causes at the first broken link: the add-on findings, and the
	// workload's components that fail on their own (not because an
	// earlier link failed).
	var causes []*Finding
	for _, k := range broken[chainOrder[first]] {
		switch f := d.byKey[k]; f.ID {
		case IDAddonNotMatched, IDAddonReleaseFailed:
			causes = append(causes, f)
		case rules.WorkloadComponentFailing.ID, rules.WorkloadComponentMissing.ID:
			if len(f.ExplainedBy) == 0 {
				causes = append(causes, f)
			}
		}
	}
	for _, f := range d.findings {
		if len(f.ExplainedBy) > 0 || slices.Contains(causes, f) {
			continue
		}
		switch {
		case f.ID == IDMachineNotRunning || f.ID == IDMachineNodeError:
			if f.ChainLink != "" && linkIndex(f.ChainLink) < first {
				continue
			}
			if f.NodeCause != nil && f.ChainLink == "" {
				continue // the node names a cause of its own.
			}
		case d.downstream[f]:
			// What a broken link makes of the links after it (and of
			// the Nodes at it): a component that cannot reach the API
			// server, pods waiting for the network, Nodes NotReady
			// without a CNI or without their providerID.
			if f.ChainLink == "" || linkIndex(f.ChainLink) < first {
				continue
			}
		default:
			continue
		}
		for _, c := range causes {
			d.explain(c, f)
		}
	}
}

// gaps turns what could not be read into sentences.
func (d *diag) gaps() {
	for _, p := range d.c.Problems {
		g := Gap{Resource: p.Resource, Verb: p.Verb, Forbidden: p.Forbidden, Identity: p.Identity, Role: p.Role}
		what := cannotTell(p.Resource)
		switch {
		case p.Forbidden:
			id := p.Identity
			if id == "" {
				id = "the collector's identity (unknown: no SelfSubjectReview)"
			}
			role := p.Role
			if role == "" {
				role = fmt.Sprintf("a Role allowing get, list, watch on %s", p.Resource)
			}
			g.Sentence = fmt.Sprintf("%s may not %s %s (Forbidden); the least role needed: %s. Until granted, the report cannot tell %s: this is a gap, not a negative result.", id, p.Verb, p.Resource, role, what)
		case p.NotServed:
			g.Sentence = fmt.Sprintf("the API server does not serve %s (its CRDs are not installed): the report cannot tell %s.", p.Resource, what)
		default:
			g.Sentence = fmt.Sprintf("could not %s %s: %s; the report cannot tell %s.", p.Verb, p.Resource, p.Err, what)
		}
		d.gapList = append(d.gapList, g)
	}
}

func cannotTell(resource string) string {
	r, _, _ := strings.Cut(resource, ".")
	switch r {
	case "helmchartproxies", "helmreleaseproxies":
		return "whether a CNI or cloud-provider chart is installed on the cluster"
	case "machinehealthchecks":
		return "whether Machines are being remediated in a loop"
	case "kubeadmcontrolplanes":
		return "the control plane's replicas and preflight state"
	case "machinedeployments", "machinesets":
		return "the worker groups' replica counts"
	case "machines":
		return "which Machines exist and what they expect"
	case "kubeadmconfigs", "kubeadmconfigtemplates":
		return "which bootstrap template a fix must go to"
	}
	if strings.Contains(resource, "infrastructure") {
		return "the VMs' provisioning state (the infrastructure machines)"
	}
	return "what " + resource + " would show"
}

// ranked orders the findings: causes (most severe, earliest chain link,
// most confident first), each followed by what it explains, depth first.
func (d *diag) ranked() []Finding {
	// A cause that keeps a Machine from running (or its deployment or
	// control plane from becoming ready) is what the operator came for: it
	// leads a cause that explains none, whatever its chain link.
	machines := map[string]bool{}
	var blocks func(f *Finding, depth int) bool
	blocks = func(f *Finding, depth int) bool {
		if v, ok := machines[f.Key]; ok {
			return v
		}
		v := f.ID == IDMachineNotRunning || f.ID == IDMachineDeploymentDown || f.ID == IDMachinePoolDown || f.ID == IDControlPlaneNotInit
		for _, k := range f.Explains {
			if !v && depth < len(d.findings) {
				v = blocks(d.byKey[k], depth+1)
			}
		}
		machines[f.Key] = v
		return v
	}
	less := func(a, b *Finding) bool {
		if sa, sb := rules.Severity(a.Severity), rules.Severity(b.Severity); sa != sb {
			return sa.Above(sb)
		}
		if ba, bb := blocks(a, 0), blocks(b, 0); ba != bb {
			return ba
		}
		if ai, bi := linkIndex(a.ChainLink), linkIndex(b.ChainLink); ai != bi {
			return ai < bi
		}
		if (a.NodeCause != nil) != (b.NodeCause != nil) {
			return a.NodeCause != nil
		}
		if ca, cb := rules.Confidence(a.Confidence), rules.Confidence(b.Confidence); ca != cb {
			return cb.Below(ca)
		}
		return a.Key < b.Key
	}
	var causes []*Finding
	for _, f := range d.findings {
		sort.Strings(f.Explains)
		sort.Strings(f.ExplainedBy)
		if !f.Consequence {
			causes = append(causes, f)
		}
	}
	sort.SliceStable(causes, func(i, j int) bool { return less(causes[i], causes[j]) })
	var out []Finding
	placed := map[string]bool{}
	var visit func(f *Finding)
	visit = func(f *Finding) {
		if placed[f.Key] {
			return
		}
		placed[f.Key] = true
		out = append(out, *f)
		var cons []*Finding
		for _, k := range f.Explains {
			cons = append(cons, d.byKey[k])
		}
		sort.SliceStable(cons, func(i, j int) bool { return less(cons[i], cons[j]) })
		for _, c := range cons {
			visit(c)
		}
	}
	for _, c := range causes {
		visit(c)
	}
	for _, f := range d.findings { // only reachable through a circle: never, but nothing is lost
		visit(f)
	}
	return out
}

func (d *diag) assemble() *Incident {
	inc := &Incident{
		Cluster:          d.c.Namespace + "/" + d.c.Name,
		GeneratedAt:      d.o.Now.UTC().Truncate(1e9),
		Findings:         d.ranked(),
		Chain:            d.links,
		UnmatchedReports: d.unmatched,
		Rejudged:         d.rejudged,
		Gaps:             d.gapList,
		FailureDomain:    DomainUnknown,
	}
	for _, s := range d.machines {
		row := MachineRow{Machine: s.m.Name, Role: s.role(), Phase: s.m.Phase, Version: s.m.Version, Node: s.nodeName(), MatchedBy: s.MatchedBy}
		switch {
		case s.top != nil:
			row.TopFinding, row.Severity = s.top.GetId()+": "+s.top.GetTitle(), s.top.GetSeverity()
		case s.rep != nil:
			row.TopFinding = "none"
		default:
			if s.m.Phase == "Running" {
				inc.Gaps = append(inc.Gaps, Gap{Resource: "node/" + s.nodeName(), Sentence: fmt.Sprintf("no agent report for Machine %s (node %s): its node was not judged.", s.m.Name, s.nodeName())})
			}
		}
		inc.Machines = append(inc.Machines, row)
		for _, g := range s.rep.GetGaps() {
			inc.Gaps = append(inc.Gaps, Gap{Resource: "node/" + s.nodeName(), Sentence: fmt.Sprintf("node %s: %s", s.nodeName(), g)})
		}
	}
	inc.Symptoms = d.symptoms()
	inc.Impact = d.impact()
	errors := 0
	for _, f := range inc.Findings {
		if rules.SeverityAtLeast(f.Severity, rules.Error) {
			errors++
		}
	}
	// The first broken link, unless it is the last one: a Machine not
	// Running is the chain's last symptom, not a link to name.
	for _, l := range d.links {
		if l.State == "broken" {
			if l.Name != linkRunning {
				inc.FirstBrokenLink = l.Name
			}
			break
		}
	}
	inc.Healthy = errors == 0 && len(inc.Gaps) == 0
	if len(inc.Findings) == 0 || !rules.SeverityAtLeast(inc.Findings[0].Severity, rules.Warning) {
		inc.Title = fmt.Sprintf("Cluster %s: no problem found", inc.Cluster)
		if len(inc.Gaps) > 0 {
			inc.Title = fmt.Sprintf("Cluster %s: no problem found in what could be read (%d gap(s))", inc.Cluster, len(inc.Gaps))
		}
		return inc
	}
	root := inc.Findings[0]
	rc := &RootCause{Finding: root.Key, Summary: root.Title, Evidence: root.Evidence}
	if root.NodeCause != nil {
		rc.Node = root.NodeCause.Node + ": " + root.NodeCause.ID
		rc.Summary = fmt.Sprintf("%s on node %s (%s)", root.NodeCause.Title, root.NodeCause.Node, root.Subject)
	}
	inc.RootCause = rc
	inc.Title = fmt.Sprintf("Cluster %s: %s", inc.Cluster, rc.Summary)
	inc.FailureDomain = root.Domain
	inc.Confidence, inc.ConfidenceReason = root.Confidence, root.ConfidenceReason
	// Every independent cause's fix, the root cause's first.
	seen := map[string]bool{}
	for _, f := range inc.Findings {
		if f.Consequence || !rules.SeverityAtLeast(f.Severity, rules.Warning) {
			continue
		}
		for _, r := range []string{f.Remediation, missing(f.MissingEvidence)} {
			if r != "" && !seen[r] {
				seen[r] = true
				inc.Remediation = append(inc.Remediation, r)
			}
		}
	}
	for _, f := range inc.Findings {
		if f.Escalation != "" && !seen[f.Escalation] {
			seen[f.Escalation] = true
			inc.Escalation = append(inc.Escalation, f.Subject+": "+f.Escalation)
		}
	}
	return inc
}

func missing(s string) string {
	if s == "" {
		return ""
	}
	return "Get the missing evidence: " + s
}

func (d *diag) symptoms() []string {
	var out []string
	for _, s := range d.machines {
		if s.m.DeletionTimestamp != nil {
			out = append(out, fmt.Sprintf("Machine %s (%s) is being deleted", s.m.Name, s.role()))
			continue
		}
		if notRunning(s.m.Phase) {
			out = append(out, fmt.Sprintf("Machine %s (%s) is %s, not Running (%s)", s.m.Name, s.role(), s.m.Phase, sinceText(d.o.Now, s.m)))
		}
		if im := s.m.Infra; im != nil && (im.VMState == "Failed" || im.FailureReason != "") {
			out = append(out, fmt.Sprintf("%s %s: vmState %s %s", im.Kind, im.Name, im.VMState, strings.TrimSpace(im.FailureReason+" "+im.FailureMessage)))
		}
	}
	if kcp := d.c.ControlPlane; kcp != nil {
		out = append(out, fmt.Sprintf("KubeadmControlPlane %s: %d/%d ready (initialized: %t)", kcp.Name, kcp.Replicas.Ready, kcp.Replicas.Desired, kcp.Initialized || d.c.ControlPlaneInitialized))
	}
	for _, md := range d.c.MachineDeployments {
		out = append(out, fmt.Sprintf("MachineDeployment %s: %d/%d ready", md.Name, md.Replicas.Ready, md.Replicas.Desired))
	}
	for _, mp := range d.c.MachinePools {
		out = append(out, fmt.Sprintf("MachinePool %s: %d/%d ready", mp.Name, mp.Replicas.Ready, mp.Replicas.Desired))
	}
	for _, f := range d.findings {
		if f.ID == IDMHCRemediationLoop || f.ID == IDAddonNotMatched || f.ID == IDAddonReleaseFailed {
			out = append(out, f.Title)
		}
	}
	return out
}

func (d *diag) impact() string {
	initialized := d.c.ControlPlaneInitialized || (d.c.ControlPlane != nil && d.c.ControlPlane.Initialized)
	if !initialized && (d.c.ControlPlane != nil || len(d.machines) > 0) {
		return "The control plane is not initialised: the workload cluster has no API server, no other Machine can join and nothing can run."
	}
	var down []string
	for _, md := range d.c.MachineDeployments {
		if md.Replicas.Desired > 0 && md.Replicas.Ready == 0 {
			down = append(down, md.Name)
		}
	}
	for _, mp := range d.c.MachinePools {
		if mp.Replicas.Desired > 0 && mp.Replicas.Ready == 0 {
			down = append(down, mp.Name)
		}
	}
	bad := 0
	for _, s := range d.machines {
		if s.finding != nil {
			bad++
		}
	}
	switch {
	case len(down) > 0:
		return fmt.Sprintf("No worker of %s is ready: workloads scheduled there cannot run. %d of %d Machine(s) affected.", strings.Join(down, ", "), bad, len(d.machines))
	case bad > 0:
		return fmt.Sprintf("%d of %d Machine(s) affected.", bad, len(d.machines))
	}
	for _, f := range d.findings {
		if rules.SeverityAtLeast(f.Severity, rules.Error) {
			return "The cluster's Machines are up, but: " + f.Title + "."
		}
	}
	return fmt.Sprintf("None observed: %d Machine(s), all judged healthy from what could be read.", len(d.machines))
}

// redactIncident passes every string of the report through agent/redact,
// the agent's single choke point for secrets.
func redactIncident(inc *Incident) { redactValue(reflect.ValueOf(inc)) }

func redactValue(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			redactValue(v.Elem())
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				redactValue(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			redactValue(v.Index(i))
		}
	case reflect.String:
		if v.CanSet() {
			v.SetString(redact.String(strings.ToValidUTF8(v.String(), "\uFFFD")))
		}
	}
}
