package incident

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodediag/nodediag/agent/rules"
	"github.com/nodediag/nodediag/collector/workload"
)

// Quotes of public failure reports (the same as collector/workload's
// apiserver test, whose sources are named there).
const (
	wlKubeProxyPull = `Back-off pulling image "registry.k8s.io/kube-proxy:v1.31.100": ErrImagePull: rpc error: code = NotFound desc = failed to pull and unpack image "registry.k8s.io/kube-proxy:v1.31.100": failed to resolve reference "registry.k8s.io/kube-proxy:v1.31.100": registry.k8s.io/kube-proxy:v1.31.100: not found`
	wlInstallCNI    = `2022-12-22 10:29:47.681 [FATAL][1] cni-installer/<nil> <nil>: Unable to create token for CNI kubeconfig error=Post "https://10.96.0.1:443/api/v1/namespaces/kube-system/serviceaccounts/calico-node/token": dial tcp 10.96.0.1:443: i/o timeout`
	wlCNINotReady   = `container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized`
	wlCorednsTaint  = `0/1 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling..`
	// https://github.com/kubernetes/kops/pull/18529
	wlCCMPull = `Back-off pulling image "mcr.microsoft.com/oss/kubernetes/azure-cloud-controller-manager:v1.36.2": ErrImagePull: rpc error: code = NotFound desc = failed to pull and unpack image "mcr.microsoft.com/oss/kubernetes/azure-cloud-controller-manager:v1.36.2": failed to resolve image: mcr.microsoft.com/oss/kubernetes/azure-cloud-controller-manager:v1.36.2: not found`
	// https://github.com/projectcalico/calico/pull/7556 (readiness probe)
	wlBIRD = `calico/node is not ready: BIRD is not ready: BGP not established with 10.0.1.1`
)

func wlNode(name string, ready bool, msg string, uninit bool, pid string) workload.Node {
	n := workload.Node{Name: name, ProviderID: pid, Created: t0}
	st := "True"
	if !ready {
		st = "False"
	}
	n.Conditions = []workload.Condition{{Type: "Ready", Status: st, Reason: "KubeletNotReady", Message: msg, LastTransitionTime: t0}}
	if uninit {
		n.Taints = append(n.Taints, workload.Taint{Key: taintUninitialized, Value: "true", Effect: "NoSchedule"})
	}
	return n
}

func wl(link, kind, ns, name string, desired, ready int32, pods ...workload.Pod) workload.Workload {
	return workload.Workload{Link: link, Kind: kind, Namespace: ns, Name: name, Desired: desired, Ready: ready, Pods: pods}
}

func readyPod(name, node string) workload.Pod {
	return workload.Pod{Name: name, Node: node, Phase: "Running", Created: t0, Containers: []workload.Container{{Name: "c", Ready: true, State: "running"}}}
}

func waitingPod(name, node, container, reason, msg, image string, last *workload.Termination) workload.Pod {
	return workload.Pod{Name: name, Node: node, Phase: "Pending", Created: t0, Containers: []workload.Container{{Name: container, Image: image, State: "waiting", Reason: reason, Message: msg, Last: last, Restarts: 4}}}
}

// healthyChain is a workload cluster whose every link runs.
func healthyChain(nodes ...workload.Node) *workload.State {
	return &workload.State{Source: "test", Reached: true, Nodes: nodes, Workloads: []workload.Workload{
		wl(workload.LinkKubeProxy, "DaemonSet", "kube-system", "kube-proxy", 2, 2, readyPod("kube-proxy-a", "capz-e2e-cp-0")),
		wl(workload.LinkCNI, "DaemonSet", "calico-system", "calico-node", 2, 2, readyPod("calico-node-a", "capz-e2e-cp-0")),
		wl(workload.LinkCoreDNS, "Deployment", "kube-system", "coredns", 2, 2, readyPod("coredns-a", "capz-e2e-cp-0")),
		wl(workload.LinkCNM, "DaemonSet", "kube-system", "cloud-node-manager", 2, 2, readyPod("cnm-a", "capz-e2e-cp-0")),
		wl(workload.LinkCCM, "Deployment", "kube-system", "cloud-controller-manager", 1, 1, readyPod("ccm-a", "capz-e2e-cp-0")),
	}}
}

func setLink(s *workload.State, w workload.Workload) {
	for i := range s.Workloads {
		if s.Workloads[i].Link == w.Link {
			s.Workloads[i] = w
			return
		}
	}
	s.Workloads = append(s.Workloads, w)
}

func diagnoseWL(t *testing.T, s *workload.State) *Incident {
	t.Helper()
	cp := machine("capz-e2e-cp-0", "capz-e2e-cp-0", "Running", "v1.31.100", true)
	w := machine("capz-e2e-md-0-a", "capz-e2e-md-0-a", "Provisioned", "v1.31.100", false)
	inc, err := Diagnose(cluster(cp, w), nil, Options{Now: now, Engine: testEngine(t), Workload: s})
	if err != nil {
		t.Fatal(err)
	}
	return inc
}

func explainedBy(t *testing.T, inc *Incident, key, cause string) {
	t.Helper()
	f := find(inc, key)
	if f == nil {
		t.Errorf("no finding %s; have %v", key, keys(inc))
		return
	}
	if !slices.Contains(f.ExplainedBy, cause) {
		t.Errorf("%s: explained by %v, want %s", key, f.ExplainedBy, cause)
	}
}

// kube-proxy cannot pull its image: calico-node cannot reach the API
// server through the Service IP, the Nodes stay NotReady without a CNI,
// CoreDNS cannot be scheduled on them, and no Node is initialised. The
// report leads with kube-proxy and puts the rest under it.
func TestChainKubeProxyFirst(t *testing.T) {
	s := healthyChain(
		wlNode("capz-e2e-cp-0", false, wlCNINotReady, true, ""),
		wlNode("capz-e2e-md-0-a", false, wlCNINotReady, true, ""))
	kpImage := "registry.k8s.io/kube-proxy:v1.31.100"
	setLink(s, wl(workload.LinkKubeProxy, "DaemonSet", "kube-system", "kube-proxy", 2, 0,
		waitingPod("kube-proxy-8sd57", "capz-e2e-cp-0", "kube-proxy", "ImagePullBackOff", wlKubeProxyPull, kpImage, nil),
		waitingPod("kube-proxy-dqm2r", "capz-e2e-md-0-a", "kube-proxy", "ImagePullBackOff", wlKubeProxyPull, kpImage, nil)))
	cni := waitingPod("calico-node-784sk", "capz-e2e-md-0-a", "install-cni", "CrashLoopBackOff", "back-off 1m20s restarting failed container=install-cni", "docker.io/calico/cni:v3.29.1",
		&workload.Termination{Reason: "Error", ExitCode: 1, Message: wlInstallCNI})
	cni.Containers[0].Init = true
	setLink(s, wl(workload.LinkCNI, "DaemonSet", "calico-system", "calico-node", 2, 0, cni))
	setLink(s, wl(workload.LinkCoreDNS, "Deployment", "kube-system", "coredns", 2, 0, workload.Pod{Name: "coredns-74ff55c5b-7g5b8", Phase: "Pending", Created: t0,
		Conditions: []workload.Condition{{Type: "PodScheduled", Status: "False", Reason: "Unschedulable", Message: wlCorednsTaint}}}))
	inc := diagnoseWL(t, s)

	kp := "WorkloadComponentFailing/DaemonSet/kube-system/kube-proxy"
	if inc.FirstBrokenLink != "kube-proxy" || inc.RootCause == nil || inc.RootCause.Finding != kp {
		t.Fatalf("first broken link %q, root cause %+v; findings %v", inc.FirstBrokenLink, inc.RootCause, keys(inc))
	}
	f := find(inc, kp)
	if f.Domain != DomainRegistry || !strings.Contains(f.Title, "ImagePullBackOff") || !strings.Contains(f.Remediation, kpImage) {
		t.Errorf("kube-proxy finding: domain %s, title %q, remediation %q", f.Domain, f.Title, f.Remediation)
	}
	if !slices.ContainsFunc(f.Evidence, func(e Evidence) bool {
		return strings.Contains(e.Excerpt, "registry.k8s.io/kube-proxy:v1.31.100: not found")
	}) {
		t.Errorf("the registry's not-found is not quoted: %+v", f.Evidence)
	}
	for _, k := range []string{
		"WorkloadComponentFailing/DaemonSet/calico-system/calico-node",
		"WorkloadComponentFailing/Deployment/kube-system/coredns",
		"WorkloadNodeNotReady/Node/capz-e2e-md-0-a",
		"WorkloadNodeUninitialized/Node/capz-e2e-md-0-a",
	} {
		explainedBy(t, inc, k, kp)
	}
	cn := find(inc, "WorkloadComponentFailing/DaemonSet/calico-system/calico-node")
	if cn != nil && !slices.ContainsFunc(cn.Evidence, func(e Evidence) bool { return strings.Contains(e.Excerpt, "dial tcp 10.96.0.1:443: i/o timeout") }) {
		t.Errorf("install-cni's last words are not quoted: %+v", cn.Evidence)
	}
}

// The cloud-controller-manager's image does not exist while every earlier
// link runs: the Nodes stay uninitialised and the worker Machine
// Provisioned, explained by it.
func TestChainCCMImage(t *testing.T) {
	s := healthyChain(wlNode("capz-e2e-cp-0", true, "kubelet is posting ready status", true, ""), wlNode("capz-e2e-md-0-a", true, "kubelet is posting ready status", true, ""))
	img := "mcr.microsoft.com/oss/kubernetes/azure-cloud-controller-manager:v1.36.2"
	setLink(s, wl(workload.LinkCCM, "Deployment", "kube-system", "cloud-controller-manager", 1, 0,
		waitingPod("cloud-controller-manager-5d8f", "capz-e2e-cp-0", "cloud-controller-manager", "ImagePullBackOff", wlCCMPull, img, nil)))
	inc := diagnoseWL(t, s)
	ccm := "WorkloadComponentFailing/Deployment/kube-system/cloud-controller-manager"
	if inc.FirstBrokenLink != "cloud-controller-manager" || inc.RootCause == nil || inc.RootCause.Finding != ccm {
		t.Fatalf("first broken link %q, root cause %+v; findings %v", inc.FirstBrokenLink, inc.RootCause, keys(inc))
	}
	explainedBy(t, inc, "WorkloadNodeUninitialized/Node/capz-e2e-cp-0", ccm)
	explainedBy(t, inc, "WorkloadNodeUninitialized/Node/capz-e2e-md-0-a", ccm)
	if m := find(inc, "MachineNotRunning/Machine/capz-e2e-md-0-a"); m == nil || !m.Consequence {
		t.Errorf("the Provisioned worker: %+v (findings %v)", m, keys(inc))
	}
	for _, l := range inc.Chain[:4] {
		if l.State != "ok" {
			t.Errorf("link %s is %s, want ok (its workloads run)", l.Name, l.State)
		}
	}
}

// A component that fails for a reason of its own (its image) is no
// consequence of an earlier broken link: both are causes.
func TestChainOwnCauseIsNotDownstream(t *testing.T) {
	s := healthyChain(wlNode("capz-e2e-cp-0", true, "", false, providerID("capz-e2e-cp-0")))
	bird := workload.Pod{Name: "calico-node-tfk7t", Node: "capz-e2e-cp-0", Phase: "Running", Created: t0, Containers: []workload.Container{{Name: "calico-node", State: "running", Ready: false}},
		Conditions: []workload.Condition{{Type: "Ready", Status: "False", Reason: "ContainersNotReady", Message: wlBIRD}}}
	setLink(s, wl(workload.LinkCNI, "DaemonSet", "calico-system", "calico-node", 1, 0, bird))
	setLink(s, wl(workload.LinkCoreDNS, "Deployment", "kube-system", "coredns", 2, 0,
		waitingPod("coredns-1", "capz-e2e-cp-0", "coredns", "ErrImagePull", `failed to pull image "registry.k8s.io/coredns/coredns:v9.9.9": not found`, "registry.k8s.io/coredns/coredns:v9.9.9", nil)))
	inc := diagnoseWL(t, s)
	dns := find(inc, "WorkloadComponentFailing/Deployment/kube-system/coredns")
	if dns == nil || dns.Consequence {
		t.Errorf("CoreDNS's own image failure: %+v; findings %v", dns, keys(inc))
	}
	if inc.FirstBrokenLink != "CNI" {
		t.Errorf("first broken link %q", inc.FirstBrokenLink)
	}
}

func TestWorkloadUnreachableIsAGap(t *testing.T) {
	s := &workload.State{Source: "Secret default/capz-e2e-nodediag-kubeconfig", Problems: []workload.Problem{{Resource: "the API server", Verb: "list", Err: "https://10.0.0.4:6443 did not answer: context deadline exceeded"}}}
	inc := diagnoseWL(t, s)
	if !slices.ContainsFunc(inc.Gaps, func(g Gap) bool {
		return strings.Contains(g.Sentence, "the workload cluster could not be read (Secret default/capz-e2e-nodediag-kubeconfig)")
	}) {
		t.Errorf("gaps %+v", inc.Gaps)
	}
	for _, f := range inc.Findings {
		if strings.HasPrefix(f.ID, "Workload") {
			t.Errorf("a finding from a cluster that was not read: %s", f.Key)
		}
	}
}

// Pods and Nodes younger than a start takes are starting, not failing;
// Cilium without kube-proxy is a replacement, not an absence.
func TestWorkloadYoungAndCilium(t *testing.T) {
	young := now.Add(-time.Minute)
	n := wlNode("capz-e2e-cp-0", false, wlCNINotReady, false, providerID("capz-e2e-cp-0"))
	n.Created = young
	s := healthyChain(n)
	s.Workloads = slices.DeleteFunc(s.Workloads, func(w workload.Workload) bool { return w.Link == workload.LinkKubeProxy })
	setLink(s, wl(workload.LinkCNI, "DaemonSet", "kube-system", "cilium", 1, 0, workload.Pod{Name: "cilium-x", Phase: "Pending", Created: young,
		Containers: []workload.Container{{Name: "cilium-agent", State: "waiting", Reason: "PodInitializing"}}}))
	inc := diagnoseWL(t, s)
	for _, f := range inc.Findings {
		if strings.HasPrefix(f.ID, "Workload") {
			t.Errorf("finding %s: %s", f.Key, f.Title)
		}
	}
}

// Every finding of an incident is a cluster problem of the catalog, with
// the catalog's category and severity: one engine, one catalog.
func TestEveryClusterFindingIsInTheCatalog(t *testing.T) {
	c, nrs := missingCNI(t)
	w, wrs := workerStuck(t)
	incs := []*Incident{diagnose(t, c, nrs...), diagnose(t, w, wrs...), diagnose(t, w)}
	s := healthyChain(wlNode("capz-e2e-cp-0", false, wlCNINotReady, true, ""))
	setLink(s, wl(workload.LinkKubeProxy, "DaemonSet", "kube-system", "kube-proxy", 2, 0,
		waitingPod("kube-proxy-8sd57", "capz-e2e-cp-0", "kube-proxy", "ImagePullBackOff", wlKubeProxyPull, "registry.k8s.io/kube-proxy:v1.31.100", nil)))
	s.Workloads = slices.DeleteFunc(s.Workloads, func(w workload.Workload) bool { return w.Link == workload.LinkCoreDNS })
	incs = append(incs, diagnoseWL(t, s))
	n := 0
	for _, inc := range incs {
		for _, f := range inc.Findings {
			n++
			p, ok := rules.Lookup(f.ID)
			if !ok || p.Scope != rules.ScopeCluster {
				t.Errorf("%s: not a cluster problem of the catalog", f.Key)
				continue
			}
			if f.Category != p.Category || f.Severity != p.Severity {
				t.Errorf("%s: category %s severity %s, the catalog says %s %s", f.Key, f.Category, f.Severity, p.Category, p.Severity)
			}
			if strings.Contains(f.Title, "{") && !strings.Contains(p.Title, "{what}") {
				t.Errorf("%s: a template parameter left in the title %q", f.Key, f.Title)
			}
		}
	}
	if n < 10 {
		t.Errorf("only %d findings looked at", n)
	}
}
