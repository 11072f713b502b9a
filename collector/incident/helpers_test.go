package incident

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/probe"
	"github.com/nodediag/nodediag/agent/probes"
	"github.com/nodediag/nodediag/agent/report"
	"github.com/nodediag/nodediag/agent/rules"
	"github.com/nodediag/nodediag/collector/capi"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

const hostsDir = "../../agent/testdata/hosts"

// t0 is when the test clusters were created; now is when they are judged.
var (
	t0  = time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	now = t0.Add(65 * time.Minute)
)

var (
	reportsMu sync.Mutex
	reports   = map[string]*nodediagv1.Report{}
	engineMu  sync.Mutex
	engine    *rules.Engine
)

func testEngine(t *testing.T) *rules.Engine {
	t.Helper()
	engineMu.Lock()
	defer engineMu.Unlock()
	if engine == nil {
		e, err := rules.NewEngine()
		if err != nil {
			t.Fatal(err)
		}
		engine = e
	}
	return engine
}

// agentReport is the report the agent makes of an example host, evidence
// included, as `nodediag-agent check --offline` with the host's own args
// (--now) would make it: the real probes, the real fake binaries, the
// real rules. Reports are cached per host and cloned per use.
func agentReport(t *testing.T, name string) *nodediagv1.Report {
	t.Helper()
	reportsMu.Lock()
	defer reportsMu.Unlock()
	if r, ok := reports[name]; ok {
		return proto.Clone(r).(*nodediagv1.Report)
	}
	dir := filepath.Join(hostsDir, name)
	h, err := host.New(filepath.Join(dir, "root"), host.Local{})
	if err != nil {
		t.Fatal(err)
	}
	h.Net = host.NoNetwork{}
	var rctx rules.Context
	if b, err := os.ReadFile(filepath.Join(dir, "args")); err == nil {
		args := strings.Fields(string(b))
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "--now" {
				n, err := time.Parse(time.RFC3339, args[i+1])
				if err != nil {
					t.Fatal(err)
				}
				rctx.Now = n
				h.Now = func() time.Time { return n }
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ev := probe.RunAll(ctx, h, probes.All())
	ev.Host.Root = name
	r := report.Build(ev, testEngine(t).Analyze(ev, rctx), "")
	reports[name] = r
	return proto.Clone(r).(*nodediagv1.Report)
}

func nodeReport(t *testing.T, name string) NodeReport {
	return NodeReport{Report: agentReport(t, name)}
}

func obj(kind, name string, created time.Time) capi.Object {
	return capi.Object{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: kind, Namespace: "default", Name: name, CreationTimestamp: created}
}

func providerID(vm string) string {
	return "azure:///subscriptions/0000/resourceGroups/capz-e2e/providers/Microsoft.Compute/virtualMachines/" + vm
}

// machine builds a Machine whose AzureMachine (the VM) is named vm.
func machine(name, vm, phase, version string, cp bool) *capi.Machine {
	m := &capi.Machine{Object: obj("Machine", name, t0), ClusterName: "capz-e2e", Version: version, ControlPlane: cp}
	m.Phase = phase
	m.Labels = map[string]string{"cluster.x-k8s.io/cluster-name": "capz-e2e"}
	if cp {
		m.Labels["cluster.x-k8s.io/control-plane"] = ""
	} else {
		m.Labels[labelDeployment] = "capz-e2e-md-0"
	}
	m.InfraRef = capi.Ref{Kind: "AzureMachine", Namespace: "default", Name: vm}
	m.Infra = &capi.InfraMachine{Object: obj("AzureMachine", vm, t0), ProviderID: providerID(vm), Ready: true, VMState: "Succeeded"}
	m.Infra.APIVersion = "infrastructure.cluster.x-k8s.io/v1beta1"
	m.ProviderID = providerID(vm)
	m.BootstrapRef = capi.Ref{Kind: "KubeadmConfig", Namespace: "default", Name: name + "-kc"}
	if phase == "Running" {
		m.NodeRef = capi.Ref{Kind: "Node", Name: vm}
		m.Conditions = []capi.Condition{{Type: "Ready", Status: "True"}, {Type: "NodeHealthy", Status: "True"}}
	} else {
		m.Conditions = []capi.Condition{{Type: "NodeHealthy", Status: "Unknown", Reason: "NodeDoesNotExist", Message: "Waiting for a Node with spec.providerID " + providerID(vm) + " to exist"}}
	}
	if cp && phase == "Running" {
		for _, c := range kcpPodConditions {
			m.Conditions = append(m.Conditions, capi.Condition{Type: c, Status: "True"})
		}
	}
	return m
}

// cluster builds cluster capz-e2e with a KCP, one MachineDeployment and
// the two usual HelmChartProxies, labelled to match both.
func cluster(machines ...*capi.Machine) *capi.Cluster {
	c := &capi.Cluster{Object: obj("Cluster", "capz-e2e", t0), ControlPlaneInitialized: true}
	c.Labels = map[string]string{"cni": "calico", "cloud-provider": "azure"}
	c.Machines = machines
	var cps, ws, cpReady, wReady int32
	c.KubeadmConfigs = map[string]*capi.Object{}
	for _, m := range machines {
		if m.ControlPlane {
			cps++
			if m.Phase == "Running" {
				cpReady++
			}
			continue
		}
		ws++
		if m.Phase == "Running" {
			wReady++
		}
		kc := obj("KubeadmConfig", m.BootstrapRef.Name, t0)
		kc.Annotations = map[string]string{annClonedFrom: "capz-e2e-md-0"}
		c.KubeadmConfigs[kc.Name] = &kc
	}
	c.ControlPlane = &capi.KubeadmControlPlane{Object: obj("KubeadmControlPlane", "capz-e2e-control-plane", t0), Version: "v1.32.3",
		Replicas: capi.Replicas{Desired: cps, Current: cps, Ready: cpReady, Available: cpReady, UpToDate: cps}, Initialized: true}
	md := &capi.MachineDeployment{Object: obj("MachineDeployment", "capz-e2e-md-0", t0), ClusterName: "capz-e2e",
		Replicas: capi.Replicas{Desired: ws, Current: ws, Ready: wReady, Available: wReady, UpToDate: ws}}
	md.Raw = &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
		"bootstrap": map[string]any{"configRef": map[string]any{"kind": "KubeadmConfigTemplate", "name": "capz-e2e-md-0"}}}}}}}
	c.MachineDeployments = []*capi.MachineDeployment{md}
	calico := &capi.HelmChartProxy{Object: obj("HelmChartProxy", "calico", t0), ChartName: "tigera-operator", ClusterSelector: map[string]string{"cni": "calico"}}
	ccm := &capi.HelmChartProxy{Object: obj("HelmChartProxy", "cloud-provider-azure-chart", t0), ChartName: "cloud-provider-azure", ClusterSelector: map[string]string{"cloud-provider": "azure"}}
	c.HelmChartProxies = []*capi.HelmChartProxy{calico, ccm}
	return c
}

func diagnose(t *testing.T, c *capi.Cluster, nrs ...NodeReport) *Incident {
	t.Helper()
	inc, err := Diagnose(c, nrs, Options{Now: now, Engine: testEngine(t)})
	if err != nil {
		t.Fatal(err)
	}
	return inc
}

func find(inc *Incident, key string) *Finding {
	for i := range inc.Findings {
		if inc.Findings[i].Key == key {
			return &inc.Findings[i]
		}
	}
	return nil
}

func index(inc *Incident, key string) int {
	for i := range inc.Findings {
		if inc.Findings[i].Key == key {
			return i
		}
	}
	return -1
}

func keys(inc *Incident) []string {
	var out []string
	for _, f := range inc.Findings {
		s := f.Key
		if f.Consequence {
			s += " (consequence of " + strings.Join(f.ExplainedBy, ", ") + ")"
		}
		out = append(out, s)
	}
	return out
}
