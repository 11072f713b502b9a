package incident

import (
	"bytes"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/html"
	"google.golang.org/protobuf/proto"

	"github.com/nodediag/nodediag/agent/rules"
	"github.com/nodediag/nodediag/collector/capi"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

const (
	cpVM     = "capz-e2e-control-plane-t8x5m"
	workerVM = "capz-e2e-md-0-7xk2p"
)

// A healthy cluster: every Machine Running, every node healthy by its own
// report, the add-ons selected. No finding at warning or above, no root
// cause, no gap. The control plane's stored record carries its provider ID
// (from the Hello) in another case and spelling: it joins by providerID;
// the worker's report has none and joins by nodeRef.
func TestHealthyCluster(t *testing.T) {
	cp := machine("capz-e2e-control-plane-abcde", cpVM, "Running", "v1.32.3", true)
	w := machine("capz-e2e-md-0-5c8d7-x1y2z", workerVM, "Running", "v1.32.3", false)
	cpr := nodeReport(t, "healthy-control-plane")
	cpr.Summary = &nodediagv1.NodeSummary{NodeName: cpVM, ProviderId: strings.ToUpper(providerID(cpVM)) + "/"}
	inc := diagnose(t, cluster(cp, w), cpr, nodeReport(t, "healthy-worker"))
	for _, f := range inc.Findings {
		if rules.SeverityAtLeast(f.Severity, rules.Warning) {
			t.Errorf("healthy cluster has finding %s: %s", f.Key, f.Title)
		}
	}
	if !inc.Healthy || inc.RootCause != nil || len(inc.Gaps) != 0 {
		t.Errorf("healthy=%v root=%v gaps=%v", inc.Healthy, inc.RootCause, inc.Gaps)
	}
	if len(inc.Rejudged) != 0 {
		t.Errorf("nodes at their Machine's version re-judged differently: %+v", inc.Rejudged)
	}
	var got []string
	for _, m := range inc.Machines {
		got = append(got, m.Machine+" "+m.Node+" "+m.MatchedBy+" "+m.TopFinding)
	}
	want := []string{
		"capz-e2e-control-plane-abcde " + cpVM + " providerID none",
		"capz-e2e-md-0-5c8d7-x1y2z " + workerVM + " nodeRef none",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("machines (-want +got):\n%s", d)
	}
	for _, l := range inc.Chain {
		if l.State == "broken" {
			t.Errorf("link %s broken in a healthy cluster", l.Name)
		}
	}
	if !strings.Contains(inc.Title, "no problem found") {
		t.Errorf("title %q", inc.Title)
	}
}

// Join keys: provider ID (normalised), then nodeRef, then the infra
// machine's name; a report matching nothing is listed as such.
func TestJoin(t *testing.T) {
	byPID := machine("m-pid", "vm-pid", "Running", "v1.32.3", false)
	byPID.NodeRef.Name = "some-other-name"
	byRef := machine("m-ref", "vm-ref", "Running", "v1.32.3", false)
	byRef.ProviderID, byRef.Infra.ProviderID = "", ""
	byName := machine("m-name", "vm-name", "Provisioned", "v1.32.3", false)
	byName.ProviderID, byName.Infra.ProviderID = "", ""
	none := machine("m-none", "vm-none", "Provisioned", "v1.32.3", false)
	c := cluster(byPID, byRef, byName, none)

	rep := func(host, node, pid string) NodeReport {
		r := agentReport(t, "healthy-worker")
		r.Host.Hostname, r.Host.NodeName = host, node
		nr := NodeReport{Report: r}
		if pid != "" {
			nr.Summary = &nodediagv1.NodeSummary{NodeName: node, ProviderId: pid}
		}
		return nr
	}
	reports := []NodeReport{
		rep("stranger", "stranger", ""),
		// The VM's name, but the provider ID below is the stronger key:
		// this report is another machine's (a rebuilt VM's old report).
		rep("vm-pid", "vm-pid-old", ""),
		rep("vm-name", "vm-name", ""),
		rep("vm-ref", "vm-ref", ""),
		// Upper case, two slashes instead of three, a trailing slash.
		rep("h", "n", strings.ToUpper(strings.Replace(providerID("vm-pid"), ":///", "://", 1))+"/"),
	}
	got := map[string]string{}
	for _, mn := range Join(c, reports) {
		switch {
		case mn.Machine == nil:
			got["unmatched:"+mn.Node.NodeName()] = ""
		case mn.Node == nil:
			got[mn.Machine.Name] = "-"
		default:
			got[mn.Machine.Name] = mn.MatchedBy + " " + mn.Node.NodeName()
		}
	}
	want := map[string]string{
		"m-pid":                MatchProviderID + " n",
		"m-ref":                MatchNodeRef + " vm-ref",
		"m-name":               MatchInfraName + " vm-name",
		"m-none":               "-",
		"unmatched:stranger":   "",
		"unmatched:vm-pid-old": "",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("join (-want +got):\n%s", d)
	}
}

// A machine pool instance's report (a CI tree's machine-pools/POOL/
// COMPUTERNAME/) joins the pool's Machine whose provider ID names that VMSS
// instance, even before the Machine has a nodeRef.
func TestJoinPoolInstance(t *testing.T) {
	inst := func(name, id string) *capi.Machine {
		m := machine(name, name, "Provisioned", "v1.32.3", false)
		m.NodeRef.Name = ""
		pid := "azure:///subscriptions/S/resourceGroups/RG/providers/Microsoft.Compute/virtualMachineScaleSets/capz-mp-0/virtualMachines/" + id
		m.ProviderID, m.Infra.ProviderID = pid, pid
		return m
	}
	c := cluster(inst("capz-mp-0-1", "1"), inst("capz-mp-0-10", "10"))
	r := agentReport(t, "healthy-worker")
	r.Host.Hostname, r.Host.NodeName = "capz-mp-0-00000a", "capz-mp-0-00000a"
	got := Join(c, []NodeReport{{Report: r, PoolInstance: "capz-mp-0/virtualMachines/10"}})
	if got[1].Node == nil || got[1].MatchedBy != MatchPoolInstance {
		t.Errorf("capz-mp-0-10: joined by %q, want %q", got[1].MatchedBy, MatchPoolInstance)
	}
	if got[0].Node != nil {
		t.Errorf("capz-mp-0-1 joined the report of instance 10")
	}
}

func TestNormalizeProviderID(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"three slashes", "azure:///subscriptions/S/resourceGroups/RG/x/", "azure:///subscriptions/s/resourcegroups/rg/x"},
		{"two slashes", "azure://subscriptions/S", "azure:///subscriptions/s"},
		{"no scheme", "Node-1", "node-1"},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := NormalizeProviderID(tc.in); got != tc.want {
				t.Errorf("NormalizeProviderID(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

const stuckVM = "capi-quickstart-md-0-5c8d7-zt4rp"

func workerStuck(t *testing.T) (*capi.Cluster, []NodeReport) {
	cp := machine("capz-e2e-control-plane-abcde", cpVM, "Running", "v1.32.3", true)
	w := machine("capz-e2e-md-0-5c8d7-zt4rp", stuckVM, "Provisioned", "v1.27.16", false)
	w.CreationTimestamp = t0.Add(20 * time.Minute)
	return cluster(cp, w), []NodeReport{nodeReport(t, "healthy-control-plane"), nodeReport(t, "kubelet-1.27-container-runtime-flag")}
}

// A worker stuck in Provisioned whose node reports the cause: the cause is
// named at the Machine with the node's quotes, the fix points at the
// KubeadmConfigTemplate, and the MachineDeployment at 0 ready is its
// consequence.
func TestWorkerStuckWithNodeEvidence(t *testing.T) {
	c, nrs := workerStuck(t)
	inc := diagnose(t, c, nrs...)
	key := "MachineNotRunning/Machine/capz-e2e-md-0-5c8d7-zt4rp"
	if len(inc.Findings) == 0 || inc.Findings[0].Key != key {
		t.Fatalf("first finding: %v, want %s", keys(inc), key)
	}
	f := inc.Findings[0]
	if f.NodeCause == nil || f.NodeCause.ID != "KubeletRemovedFlag" || f.NodeCause.Node != stuckVM {
		t.Fatalf("node cause %+v, want KubeletRemovedFlag on %s", f.NodeCause, stuckVM)
	}
	var quoted bool
	for _, e := range f.Evidence {
		if strings.Contains(e.Source, "/etc/default/kubelet") && strings.Contains(e.Excerpt, "--container-runtime=remote") {
			quoted = true
		}
	}
	if !quoted {
		t.Errorf("the node's quote of /etc/default/kubelet is not at the Machine: %+v", f.Evidence)
	}
	if !strings.Contains(f.Remediation, "KubeadmConfigTemplate default/capz-e2e-md-0") {
		t.Errorf("remediation does not name the template: %s", f.Remediation)
	}
	md := find(inc, "MachineDeploymentNotReady/MachineDeployment/capz-e2e-md-0")
	if md == nil || !md.Consequence || !contains(md.ExplainedBy, key) {
		t.Errorf("MachineDeployment finding %+v, want a consequence of %s", md, key)
	}
	if inc.RootCause == nil || inc.FailureDomain != DomainNode || inc.Confidence != rules.High {
		t.Errorf("root %+v domain %s confidence %s", inc.RootCause, inc.FailureDomain, inc.Confidence)
	}
	if !contains(inc.Symptoms, "Machine capz-e2e-md-0-5c8d7-zt4rp (worker) is Provisioned, not Running (created 45m ago)") {
		t.Errorf("symptoms %q", inc.Symptoms)
	}
	if inc.Machines[1].MatchedBy != MatchInfraName {
		t.Errorf("stuck worker matched by %q, want the AzureMachine's name", inc.Machines[1].MatchedBy)
	}
}

// The first control plane Machine has not initialised the control plane:
// its node's cause comes first, the control plane finding is its
// consequence and the workers' failures (even a join-token error) are the
// control plane's consequences. A worker without a report says how to get
// its evidence.
func TestFirstControlPlaneNotInitialised(t *testing.T) {
	cp := machine("capz-tiny-control-plane-aaaaa", "capz-tiny-control-plane-x2m4p", "Provisioned", "v1.32.3", true)
	cp2 := machine("capz-tiny-control-plane-bbbbb", "capz-tiny-control-plane-later", "Pending", "v1.32.3", true)
	cp2.CreationTimestamp = t0.Add(time.Minute)
	w1 := machine("capz-e2e-md-0-p9s2d", "capz-e2e-md-0-p9s2d", "Provisioned", "v1.32.3", false)
	w2 := machine("capz-e2e-md-0-noreport", "capz-e2e-md-0-noreport", "Provisioned", "v1.32.3", false)
	c := cluster(cp, cp2, w1, w2)
	c.ControlPlaneInitialized = false
	c.ControlPlane.Initialized = false
	c.Conditions = []capi.Condition{{Type: "ControlPlaneInitialized", Status: "False", Reason: "NotInitialized", Message: "Control plane not yet initialized"}}
	inc := diagnose(t, c, nodeReport(t, "kubeadm-preflight-small-vm"), nodeReport(t, "join-token-expired"))

	root := "MachineNotRunning/Machine/capz-tiny-control-plane-aaaaa"
	cpKey := "ControlPlaneNotInitialized/Cluster/capz-e2e"
	if inc.Findings[0].Key != root || inc.Findings[0].NodeCause.ID != "KubeadmPreflightFailed" {
		t.Fatalf("findings %v, want %s (KubeadmPreflightFailed) first", keys(inc), root)
	}
	cpf := find(inc, cpKey)
	if cpf == nil || !contains(cpf.ExplainedBy, root) {
		t.Fatalf("control plane finding %+v, want explained by %s", cpf, root)
	}
	for _, w := range []string{"capz-e2e-md-0-p9s2d", "capz-e2e-md-0-noreport", "capz-tiny-control-plane-bbbbb"} {
		f := find(inc, "MachineNotRunning/Machine/"+w)
		if f == nil || !f.Consequence || !contains(f.ExplainedBy, cpKey) {
			t.Errorf("%s: %+v, want a consequence of %s", w, f, cpKey)
		}
	}
	nr := find(inc, "MachineNotRunning/Machine/capz-e2e-md-0-noreport")
	if nr == nil || !strings.Contains(nr.MissingEvidence, "az vm run-command invoke --resource-group capz-e2e --name capz-e2e-md-0-noreport") ||
		!strings.Contains(nr.MissingEvidence, "nodediag-agent check --output compact") || nr.Confidence != rules.Low {
		t.Errorf("worker without report: %+v", nr)
	}
	if i, j := index(inc, cpKey), index(inc, "MachineNotRunning/Machine/capz-e2e-md-0-p9s2d"); i > j {
		t.Errorf("worker listed before the control plane that explains it: %v", keys(inc))
	}
	if !strings.Contains(inc.Impact, "not initialised") {
		t.Errorf("impact %q", inc.Impact)
	}
}

// KCP waits for its preflight checks (the DKP case): the control plane
// Machine lacks the pod conditions and its node says why (a registry
// mirror without a scheme).
func TestKCPPreflightExplainedByNode(t *testing.T) {
	cpm := machine("dkp-airgap-control-plane-6j2gk", "dkp-airgap-control-plane-6j2gk", "Running", "v1.22.8", true)
	cpm.Conditions = []capi.Condition{{Type: "Ready", Status: "True"}}
	c := cluster(cpm)
	c.ControlPlane.Replicas = capi.Replicas{Desired: 3, Current: 1, Ready: 0, UpToDate: 1}
	c.ControlPlane.Conditions = []capi.Condition{{Type: "ScalingUp", Status: "True", Reason: "ScalingUp",
		Message: "Scaling up from 1 to 3 replicas is blocked because:\n* Waiting for control plane to pass preflight checks: machine dkp-airgap-control-plane-6j2gk does not have APIServerPodHealthy condition"}}
	c.MachineDeployments = nil
	inc := diagnose(t, c, nodeReport(t, "dkp-registry-missing-scheme"))

	kcp := find(inc, "KCPPreflightWaiting/KubeadmControlPlane/capz-e2e-control-plane")
	if kcp == nil {
		t.Fatalf("no KCP preflight finding: %v", keys(inc))
	}
	cause := "MachineNodeError/Machine/dkp-airgap-control-plane-6j2gk"
	if !contains(kcp.ExplainedBy, cause) || kcp.Domain != DomainRegistry || kcp.Confidence != rules.High {
		t.Errorf("KCP finding explained by %v, domain %s, confidence %s; want %s, registry, high", kcp.ExplainedBy, kcp.Domain, kcp.Confidence, cause)
	}
	var sawMissing, sawPreflight bool
	for _, e := range kcp.Evidence {
		sawMissing = sawMissing || strings.Contains(e.Excerpt, "APIServerPodHealthy (absent)")
		sawPreflight = sawPreflight || strings.Contains(e.Excerpt, "preflight checks")
	}
	if !sawMissing || !sawPreflight {
		t.Errorf("KCP evidence lacks the missing conditions or the preflight message: %+v", kcp.Evidence)
	}
	if inc.Findings[0].Key != cause || inc.Findings[0].NodeCause.ID != "RegistryEndpointInvalid" {
		t.Errorf("findings %v, want %s (RegistryEndpointInvalid) first", keys(inc), cause)
	}
}

// No label selects the CNI chart: the HelmChartProxy finding is the cause,
// the node's "network plugin not ready" its consequence, and the chain's
// first broken link is the CNI.
func TestMissingCNILabel(t *testing.T) {
	c, nrs := missingCNI(t)
	inc := diagnose(t, c, nrs...)
	addon := "AddonNotMatched/Cluster/capz-e2e/cni"
	node := "MachineNodeError/Machine/capz-e2e-md-0-h7g3t"
	if inc.Findings[0].Key != addon {
		t.Fatalf("findings %v, want %s first", keys(inc), addon)
	}
	f := find(inc, node)
	if f == nil || !contains(f.ExplainedBy, addon) || f.NodeCause == nil || f.NodeCause.Category != "cni.not-ready" {
		t.Fatalf("node finding %+v, want a cni.not-ready consequence of %s", f, addon)
	}
	if index(inc, addon) > index(inc, node) {
		t.Errorf("the node's symptom ranks above the missing chart: %v", keys(inc))
	}
	if !strings.Contains(inc.Findings[0].Remediation, "kubectl label cluster -n default capz-e2e cni=calico") {
		t.Errorf("remediation %q", inc.Findings[0].Remediation)
	}
	if inc.FirstBrokenLink != linkCNI || inc.FailureDomain != DomainAddon || inc.Confidence != rules.High {
		t.Errorf("first broken link %q, domain %q, confidence %q", inc.FirstBrokenLink, inc.FailureDomain, inc.Confidence)
	}
}

func missingCNI(t *testing.T) (*capi.Cluster, []NodeReport) {
	cp := machine("capz-e2e-control-plane-abcde", cpVM, "Running", "v1.32.3", true)
	w := machine("capz-e2e-md-0-h7g3t", "capz-e2e-md-0-h7g3t", "Running", "v1.32.3", false)
	c := cluster(cp, w)
	delete(c.Labels, "cni")
	c.MachineDeployments[0].Replicas.Ready, c.MachineDeployments[0].Replicas.Available = 0, 0
	return c, []NodeReport{nodeReport(t, "healthy-control-plane"), nodeReport(t, "cni-not-installed")}
}

// Re-judging: the same node evidence, kubelet v1.32.3, is healthy for a
// Machine that wants v1.32.3 and wrong for one that wants v1.33.0; the
// agent's own report (no expectation) said nothing.
func TestVersionRejudged(t *testing.T) {
	orig := agentReport(t, "healthy-worker")
	for _, f := range orig.GetFindings() {
		if strings.HasPrefix(f.GetCategory(), "version.") {
			t.Fatalf("the agent alone already reports %s", f.GetId())
		}
	}
	cp := machine("capz-e2e-control-plane-abcde", cpVM, "Running", "v1.32.3", true)
	w := machine("capz-e2e-md-0-5c8d7-x1y2z", workerVM, "Running", "v1.33.0", false)
	inc := diagnose(t, cluster(cp, w), nodeReport(t, "healthy-control-plane"), nodeReport(t, "healthy-worker"))
	f := find(inc, "MachineNodeError/Machine/capz-e2e-md-0-5c8d7-x1y2z")
	if f == nil || f.NodeCause == nil || !strings.HasPrefix(f.NodeCause.Category, "version.") {
		t.Fatalf("no version finding at the Machine: %v", keys(inc))
	}
	if !strings.Contains(f.NodeCause.Title, "v1.33.0") {
		t.Errorf("version finding does not name the Machine's version: %s", f.NodeCause.Title)
	}
	if !strings.Contains(f.ConfidenceReason, "re-judged with the Machine's spec.version v1.33.0") {
		t.Errorf("the finding does not say its verdict changed: %s", f.ConfidenceReason)
	}
	if len(inc.Rejudged) != 1 || inc.Rejudged[0].Node != workerVM || inc.Rejudged[0].Before != "none" || inc.Rejudged[0].ExpectVersion != "v1.33.0" {
		t.Errorf("rejudged %+v", inc.Rejudged)
	}
}

// A Forbidden read is a gap naming identity, verb, resource and role, and
// no rule concludes from the resource's absence.
func TestForbiddenIsAGap(t *testing.T) {
	c, nrs := missingCNI(t)
	c.HelmChartProxies = nil
	c.Problems = []capi.ReadProblem{{Resource: "helmchartproxies.addons.cluster.x-k8s.io", Verb: "list", Forbidden: true,
		Identity: "system:serviceaccount:ops:nodediag", Role: "ClusterRole with get, list, watch on helmchartproxies.addons.cluster.x-k8s.io"}}
	inc := diagnose(t, c, nrs...)
	for _, f := range inc.Findings {
		if strings.HasPrefix(f.ID, "Addon") {
			t.Errorf("concluded from an unreadable resource: %s", f.Key)
		}
	}
	if len(inc.Gaps) != 1 {
		t.Fatalf("gaps %+v", inc.Gaps)
	}
	g := inc.Gaps[0]
	for _, w := range []string{"system:serviceaccount:ops:nodediag", "list", "helmchartproxies.addons.cluster.x-k8s.io", "ClusterRole with get, list, watch", "not a negative result"} {
		if !strings.Contains(g.Sentence, w) {
			t.Errorf("gap %q lacks %q", g.Sentence, w)
		}
	}
	if inc.Healthy {
		t.Error("a report with a gap says healthy")
	}
}

// A MachineHealthCheck that replaces Machines that never get healthy: the
// loop is a consequence of the node's cause.
func TestMHCRemediationLoop(t *testing.T) {
	cp := machine("capz-e2e-control-plane-abcde", cpVM, "Running", "v1.32.3", true)
	w := machine("capz-e2e-md-0-p9s2d", "capz-e2e-md-0-p9s2d", "Provisioned", "v1.32.3", false)
	w.CreationTimestamp = t0.Add(40 * time.Minute)
	w.Conditions = append(w.Conditions, capi.Condition{Type: "HealthCheckSucceeded", Status: "False", Reason: "NodeStartupTimeout", Message: "Node failed to report startup in 10m0s"})
	c := cluster(cp, w)
	mhc := &capi.MachineHealthCheck{Object: obj("MachineHealthCheck", "capz-e2e-md-0-mhc", t0), ClusterName: "capz-e2e", ExpectedMachines: 1, Targets: []string{w.Name}}
	c.MachineHealthChecks = []*capi.MachineHealthCheck{mhc}
	inc := diagnose(t, c, nodeReport(t, "healthy-control-plane"), nodeReport(t, "join-token-expired"))
	f := find(inc, "MHCRemediationLoop/MachineHealthCheck/capz-e2e-md-0-mhc")
	if f == nil || !contains(f.ExplainedBy, "MachineNotRunning/Machine/capz-e2e-md-0-p9s2d") || !strings.Contains(f.Remediation, annSkipRemediate) {
		t.Fatalf("MHC loop finding %+v (findings %v)", f, keys(inc))
	}
}

// HTML: one self-contained page that parses, with every value escaped (a
// condition message carrying a script tag) and secrets redacted.
func TestHTMLEscapesAndRedacts(t *testing.T) {
	c, nrs := workerStuck(t)
	im := c.Machines[1].Infra
	im.VMState = "Failed"
	im.FailureReason = "CreateError"
	im.FailureMessage = `<script>alert("x")</script> kubeadm join --token abcdef.0123456789abcdef failed`
	inc := diagnose(t, c, nrs...)
	var b bytes.Buffer
	if err := RenderHTML(&b, inc); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	doc, err := html.Parse(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	var walk func(n *html.Node)
	var scripts, external int
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			if n.Data == "script" {
				scripts++
			}
			for _, a := range n.Attr {
				if (a.Key == "src" || a.Key == "href") && !strings.HasPrefix(a.Val, "#") {
					external++
				}
			}
		}
		for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
			walk(ch)
		}
	}
	walk(doc)
	if scripts != 0 || external != 0 {
		t.Errorf("HTML has %d script element(s) and %d external reference(s)", scripts, external)
	}
	if !strings.Contains(out, "&lt;script&gt;") {
		t.Error("the script tag of the message is not shown escaped")
	}
	if strings.Contains(out, "0123456789abcdef") {
		t.Error("the bootstrap token's secret reached the HTML")
	}
	var md bytes.Buffer
	if err := RenderMarkdown(&md, inc); err != nil {
		t.Fatal(err)
	}
	// Quotes are verbatim inside fenced code blocks (shown as text by any
	// Markdown renderer); everywhere else the tag is escaped.
	if strings.Contains(outsideFences(md.String()), "<script>") || strings.Contains(md.String(), "0123456789abcdef") {
		t.Error("Markdown carries the raw script tag outside a code block, or the token")
	}
	if !strings.Contains(md.String(), "&lt;script&gt;") {
		t.Error("Markdown does not show the escaped tag in the title")
	}
}

// Golden Markdown and JSON reports of two scenarios; -update rewrites them.
func TestGolden(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(t *testing.T) (*capi.Cluster, []NodeReport)
	}{
		{"worker-stuck", workerStuck},
		{"missing-cni-label", missingCNI},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, nrs := tc.build(t)
			inc := diagnose(t, c, nrs...)
			for _, f := range []struct {
				ext    string
				render func(*bytes.Buffer, *Incident) error
			}{
				{"md", func(b *bytes.Buffer, i *Incident) error { return RenderMarkdown(b, i) }},
				{"json", func(b *bytes.Buffer, i *Incident) error { return RenderJSON(b, i) }},
			} {
				var b bytes.Buffer
				if err := f.render(&b, inc); err != nil {
					t.Fatal(err)
				}
				golden(t, filepath.Join("testdata", tc.name+"."+f.ext+".golden"), b.String())
			}
		})
	}
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if d := cmp.Diff(string(want), got); d != "" {
		t.Errorf("%s differs (-want +got):\n%s", path, d)
	}
}

func TestRenderToUnknownFormat(t *testing.T) {
	if err := RenderTo(&bytes.Buffer{}, &Incident{}, "yaml"); err == nil {
		t.Error("RenderTo accepted yaml")
	}
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// outsideFences drops the fenced code blocks of a Markdown text.
func outsideFences(md string) string {
	var b strings.Builder
	in := false
	for _, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(l, "```") {
			in = !in
			continue
		}
		if !in {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// The chain names its first broken link: kube-proxy's image missing on one
// node comes before the CNI chart that selects no cluster.
func TestChainFirstBrokenLink(t *testing.T) {
	c, nrs := missingCNI(t)
	lts := machine("capz-lts-md-0-9d2kq", "capz-lts-md-0-9d2kq", "Running", "v1.31.100", false)
	c.Machines = append(c.Machines, lts)
	inc := diagnose(t, c, append(nrs, nodeReport(t, "lts-kube-proxy-image-not-found"))...)
	if inc.FirstBrokenLink != linkKubeProxy {
		t.Fatalf("first broken link %q, want kube-proxy (chain %+v)", inc.FirstBrokenLink, inc.Chain)
	}
	kp, cni := "MachineNodeError/Machine/capz-lts-md-0-9d2kq", "AddonNotMatched/Cluster/capz-e2e/cni"
	if i, j := index(inc, kp), index(inc, cni); i < 0 || j < 0 || i > j {
		t.Errorf("findings %v: want %s before %s", keys(inc), kp, cni)
	}
	if f := find(inc, kp); f.NodeCause == nil || f.NodeCause.ID != "ImageNotFound" {
		t.Errorf("kube-proxy finding %+v", f)
	}
}

// A Machine created minutes ago without a node report is provisioning, not
// failing: no error, and its MachineDeployment is not "stuck".
func TestFreshMachineIsNotAnError(t *testing.T) {
	cp := machine("capz-e2e-control-plane-abcde", cpVM, "Running", "v1.32.3", true)
	w := machine("capz-e2e-md-0-new", "capz-e2e-md-0-new", "Provisioning", "v1.32.3", false)
	w.CreationTimestamp = now.Add(-3 * time.Minute)
	inc := diagnose(t, cluster(cp, w), nodeReport(t, "healthy-control-plane"))
	for _, f := range inc.Findings {
		if rules.SeverityAtLeast(f.Severity, rules.Warning) {
			t.Errorf("fresh Machine gives %s [%s]: %s", f.Key, f.Severity, f.Title)
		}
	}
	if f := find(inc, "MachineProvisioning/Machine/capz-e2e-md-0-new"); f == nil || f.Severity != rules.Info {
		t.Errorf("fresh Machine finding %+v, want an info one", f)
	}
}

// Diagnose changes none of its inputs, and a cache gives the same report
// on the second call as re-judging does.
func TestInputsUnchangedAndCache(t *testing.T) {
	c, nrs := workerStuck(t)
	before := make([]*nodediagv1.Report, len(nrs))
	for i, n := range nrs {
		before[i] = proto.Clone(n.Report).(*nodediagv1.Report)
	}
	w := c.Machines[1]
	w.Version = "v1.28.0" // a verdict that changes: the cache must keep it
	cache := NewRejudgeCache()
	first, err := Diagnose(c, nrs, Options{Now: now, Engine: testEngine(t), Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range nrs {
		if !proto.Equal(before[i], n.Report) {
			t.Errorf("report %d changed by Diagnose", i)
		}
	}
	if len(first.Rejudged) == 0 {
		t.Fatal("no verdict changed: the test proves nothing about the cache")
	}
	second, err := Diagnose(c, nrs, Options{Now: now, Engine: testEngine(t), Cache: cache})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(first, second); d != "" {
		t.Errorf("cached diagnosis differs (-first +second):\n%s", d)
	}
}

// A control plane with all its replicas ready whose Machines do not carry
// the pod-health conditions (an older KCP, a status not yet written) is not
// "waiting for preflight": an absent condition is not a failed one.
func TestKCPReadyWithoutPodConditionsIsNotPreflight(t *testing.T) {
	cp := machine("capz-e2e-control-plane-abcde", cpVM, "Running", "v1.32.3", true)
	cp.Conditions = []capi.Condition{{Type: "Ready", Status: "True"}, {Type: "NodeHealthy", Status: "True"}}
	w := machine("capz-e2e-md-0-5c8d7-x1y2z", workerVM, "Running", "v1.32.3", false)
	inc := diagnose(t, cluster(cp, w), nodeReport(t, "healthy-control-plane"), nodeReport(t, "healthy-worker"))
	for _, f := range inc.Findings {
		if f.ID == IDKCPPreflightWaiting {
			t.Errorf("KCP 1/1 ready without pod conditions: %s: %s", f.Key, f.Title)
		}
	}
	// Short of replicas, the absent conditions count again.
	c := cluster(cp, w)
	c.ControlPlane.Replicas.Desired = 3
	inc = diagnose(t, c, nodeReport(t, "healthy-control-plane"), nodeReport(t, "healthy-worker"))
	found := false
	for _, f := range inc.Findings {
		found = found || f.ID == IDKCPPreflightWaiting
	}
	if !found {
		t.Error("KCP 1/3 ready with Machines lacking pod conditions: no KCPPreflightWaiting")
	}
}

// Role-aware re-judging: the same node evidence (a join that cannot reach
// the API server) gets the worker's remediation at a worker Machine and the
// control plane's at a Machine labelled control-plane, with the Machine
// quoted as the evidence of the role.
func TestRoleRejudged(t *testing.T) {
	const vm = "capz-e2e-md-0-m3n6b"
	for _, tc := range []struct {
		cp   bool
		want string
		role string
	}{
		{false, "This is a worker node", "worker"},
		{true, "This is a control plane node", "control-plane"},
	} {
		name := "capz-e2e-md-0-5c8d7-x1y2z"
		if tc.cp {
			name = "capz-e2e-control-plane-abcde"
		}
		m := machine(name, vm, "Provisioned", "", tc.cp)
		m.CreationTimestamp = t0.Add(-2 * time.Hour)
		inc := diagnose(t, cluster(m), nodeReport(t, "join-api-server-unreachable"))
		f := find(inc, "MachineNotRunning/Machine/"+name)
		if f == nil || f.NodeCause == nil || f.NodeCause.ID != "APIServerUnreachable" {
			t.Fatalf("cp=%v: no APIServerUnreachable at the Machine: %v", tc.cp, keys(inc))
		}
		if !strings.HasPrefix(f.Remediation, tc.want) {
			t.Errorf("cp=%v: remediation %q, want it to start with %q", tc.cp, f.Remediation, tc.want)
		}
		quoted := false
		for _, e := range f.Evidence {
			if strings.HasSuffix(e.Source, "Machine/"+name+" metadata.labels") && strings.Contains(e.Excerpt, "role: "+tc.role) {
				quoted = true
			}
		}
		if !quoted {
			t.Errorf("cp=%v: the role is not quoted: %+v", tc.cp, f.Evidence)
		}
	}
}

// matchExpressions count as CAAPH counts them: a CNI chart selecting
// "cni in (calico, calico-ebpf)" matches a cluster labelled cni=calico-ebpf,
// and for one labelled cni=cilium the finding quotes the whole selector and
// says which label value would meet it.
func TestAddonSelectorExpressions(t *testing.T) {
	const addon = "AddonNotMatched/Cluster/capz-e2e/cni"
	for _, tc := range []struct {
		label string
		want  bool
	}{{"calico-ebpf", false}, {"cilium", true}} {
		c, nrs := missingCNI(t)
		c.Labels["cni"] = tc.label
		p := c.HelmChartProxies[0]
		p.ClusterSelector = nil
		p.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "cni", Operator: metav1.LabelSelectorOpIn, Values: []string{"calico", "calico-ebpf"}}}
		inc := diagnose(t, c, nrs...)
		f := find(inc, addon)
		if (f != nil) != tc.want {
			t.Fatalf("cni=%s: %s found %v, want %v (%v)", tc.label, addon, f != nil, tc.want, keys(inc))
		}
		if f == nil {
			continue
		}
		if !strings.Contains(f.Title, "selects cni in (calico,calico-ebpf)") {
			t.Errorf("title %q does not quote the selector", f.Title)
		}
		if !strings.Contains(f.Remediation, "cni=calico (or another of: calico-ebpf)") {
			t.Errorf("remediation %q does not say which value meets the selector", f.Remediation)
		}
	}
}
