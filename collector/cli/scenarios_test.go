package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodediag/nodediag/internal/testenv/kubeenv"
)

// nodeAt is an example host of agent/testdata/hosts reporting as node, the
// name that joins it to machine (its nodeRef, or its AzureMachine's name
// while the Machine has no Node).
type nodeAt struct{ host, node, machine string }

// scenarioIncident is the part of `diagnose -o json` the scenarios assert.
type scenarioIncident struct {
	Healthy   bool `json:"healthy"`
	RootCause *struct {
		Finding string `json:"finding"`
		Node    string `json:"node"`
	} `json:"root_cause"`
	Findings []struct {
		Key         string   `json:"key"`
		ID          string   `json:"id"`
		Severity    string   `json:"severity"`
		Consequence bool     `json:"consequence"`
		ExplainedBy []string `json:"explained_by"`
		NodeCause   *struct {
			ID string `json:"id"`
		} `json:"node_cause"`
	} `json:"findings"`
	Machines []struct {
		Machine   string `json:"machine"`
		Node      string `json:"node"`
		MatchedBy string `json:"matched_by"`
	} `json:"machines"`
	UnmatchedReports []string `json:"unmatched_reports"`
	Gaps             []struct {
		Sentence string `json:"sentence"`
	} `json:"gaps"`
}

// find is the index of the first finding whose key starts with prefix, -1
// when none does.
func (in *scenarioIncident) find(prefix string) int {
	for i, f := range in.Findings {
		if strings.HasPrefix(f.Key, prefix) {
			return i
		}
	}
	return -1
}

// TestScenarios diagnoses the clusters of the cluster rules on one
// real API server, each fixture in its own namespace, with node reports from
// the example hosts joined to the Machines they explain: a healthy cluster;
// the first control plane Machine not initialised; KCP waiting for its
// preflight checks; a worker stuck in Provisioned; a cluster whose CNI label
// matches no HelmChartProxy.
func TestScenarios(t *testing.T) {
	_, srv := kubeenv.StartAPIServer(t)
	cases := []struct {
		name, fixture, cluster string
		// version, when set, replaces the fixture's Kubernetes version
		// v1.33.1 (Machines, KCP, MachineDeployment) before it is loaded.
		version     string
		reports     []nodeAt
		wantCode    int
		wantHealthy bool
		// wantRoot prefixes root_cause.finding ("" for no root cause);
		// wantRootNode is the ID of its node cause, if it has one.
		wantRoot, wantRootNode string
		// Finding key prefixes: present, absent, and present as a
		// consequence ranked after the root cause (explained by it,
		// directly or through another consequence).
		present, absent, consequences []string
	}{
		{
			// The healthy example hosts run kubelet v1.32.3: the cluster
			// is healthy at that version (at v1.33.1, its own, every node
			// is rightly re-judged VersionMismatch).
			name: "healthy", fixture: "../capi/testdata/healthy.yaml", cluster: "healthy/ok", version: "v1.32.3",
			reports: []nodeAt{
				{"healthy-control-plane", "ok-cp-h5v2q", "ok-cp-h5v2q"},
				{"healthy-worker", "ok-md-0-7f9c4-a", "ok-md-0-7f9c4-a"},
				{"healthy-worker", "ok-md-0-7f9c4-b", "ok-md-0-7f9c4-b"},
			},
			wantCode: 0, wantHealthy: true,
			absent: []string{"MachineNotRunning", "MachineNodeError", "ControlPlaneNotInitialized", "KCPPreflightWaiting", "AddonNotMatched", "MachineDeploymentNotReady"},
		},
		{
			name: "first control plane not initialised", fixture: "../capi/testdata/first-cp.yaml", cluster: "first-cp/fcp",
			reports: []nodeAt{
				{"kubeadm-preflight-small-vm", "fcp-cp-x7k2p", "fcp-cp-x7k2p"},
			},
			wantCode: ExitFindings,
			wantRoot: "MachineNotRunning/Machine/fcp-cp-x7k2p", wantRootNode: "KubeadmPreflightFailed",
			consequences: []string{"ControlPlaneNotInitialized/Cluster/fcp"},
		},
		{
			// KCP waits because pf-cp-b2 has no healthy API server pod:
			// its VM's containerd cannot pull through the malformed mirror
			// (the kube-apiserver image pull fails); pf-cp-a1 is healthy
			// (at the healthy host's version, as in the healthy case).
			name: "KCP preflight waiting", fixture: "../capi/testdata/preflight.yaml", cluster: "preflight/pf", version: "v1.32.3",
			reports: []nodeAt{
				{"healthy-control-plane", "pf-cp-a1", "pf-cp-a1"},
				{"dkp-registry-missing-scheme", "pf-cp-b2", "pf-cp-b2"},
			},
			wantCode: ExitFindings,
			wantRoot: "MachineNotRunning/Machine/pf-cp-b2", wantRootNode: "RegistryEndpointInvalid",
			consequences: []string{"KCPPreflightWaiting/KubeadmControlPlane/pf-cp"},
			absent:       []string{"MachineNodeError/Machine/pf-cp-a1", "MachineNotRunning/Machine/pf-cp-a1"},
		},
		{
			name: "worker stuck in Provisioned", fixture: "../capi/testdata/stuck-worker.yaml", cluster: "stuck-worker/sw",
			reports: []nodeAt{
				{"kubelet-1.27-container-runtime-flag", "sw-md-0-abcde-q8m4z", "sw-md-0-abcde-q8m4z"},
			},
			wantCode: ExitFindings,
			wantRoot: "MachineNotRunning/Machine/sw-md-0-abcde-q8m4z", wantRootNode: "KubeletRemovedFlag",
			consequences: []string{"MachineDeploymentNotReady/MachineDeployment/sw-md-0"},
			absent:       []string{"ControlPlaneNotInitialized", "AddonNotMatched"},
		},
		{
			name: "CNI label matches no HelmChartProxy", fixture: "testdata/missing-cni.yaml", cluster: "missing-cni/mc",
			reports: []nodeAt{
				{"cni-not-installed", "mc-md-0-5d8f7-h7g3t", "mc-md-0-5d8f7-h7g3t"},
			},
			wantCode:     ExitFindings,
			wantRoot:     "AddonNotMatched/Cluster/mc/cni",
			consequences: []string{"MachineNodeError/Machine/mc-md-0-5d8f7-h7g3t", "MachineDeploymentNotReady/MachineDeployment/mc-md-0"},
			absent:       []string{"AddonNotMatched/Cluster/mc/cloud-provider", "KCPPreflightWaiting", "ControlPlaneNotInitialized"},
		},
	}
	for _, c := range cases {
		path := c.fixture
		if c.version != "" {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			path = filepath.Join(t.TempDir(), filepath.Base(path))
			if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(b), "v1.33.1", c.version)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		kubeenv.Load(t, srv.Config, path)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var paths []string
			for _, r := range c.reports {
				paths = append(paths, nodeReportFile(t, r.host, r.node))
			}
			args := []string{"diagnose", "cluster", c.cluster, "--kubeconfig", srv.Kubeconfig, "--reports", strings.Join(paths, ",")}
			res := run(t, append(args, "-o", "json")...)
			var in scenarioIncident
			if err := json.Unmarshal([]byte(res.stdout), &in); err != nil {
				t.Fatalf("diagnose -o json: %v\n%s", err, res)
			}
			failed := false
			errorf := func(format string, a ...any) {
				t.Helper()
				failed = true
				t.Errorf(format, a...)
			}
			if res.code() != c.wantCode {
				errorf("exit code %d, want %d (%v)", res.code(), c.wantCode, res.err)
			}
			if in.Healthy != c.wantHealthy {
				errorf("healthy %v, want %v", in.Healthy, c.wantHealthy)
			}
			// Every report joined the Machine it stands for.
			for _, r := range c.reports {
				joined := false
				for _, m := range in.Machines {
					if m.Machine == r.machine && m.Node == r.node && m.MatchedBy != "" {
						joined = true
					}
				}
				if !joined {
					errorf("report of %s (node %s) did not join Machine %s; machines %+v, unmatched %v", r.host, r.node, r.machine, in.Machines, in.UnmatchedReports)
				}
			}
			if c.wantHealthy {
				for _, f := range in.Findings {
					if f.Severity == "error" || f.Severity == "critical" {
						errorf("healthy cluster with %s finding %s", f.Severity, f.Key)
					}
				}
				for _, g := range in.Gaps {
					errorf("healthy cluster with gap: %s", g.Sentence)
				}
			}
			switch {
			case c.wantRoot == "" && in.RootCause != nil:
				errorf("root cause %s, want none", in.RootCause.Finding)
			case c.wantRoot != "" && in.RootCause == nil:
				errorf("no root cause, want %s", c.wantRoot)
			case c.wantRoot != "":
				if !strings.HasPrefix(in.RootCause.Finding, c.wantRoot) {
					errorf("root cause %s, want %s", in.RootCause.Finding, c.wantRoot)
				}
				i := in.find(c.wantRoot)
				if i != 0 {
					errorf("finding %s ranked %d, want first", c.wantRoot, i)
				}
				if c.wantRootNode != "" && (i < 0 || in.Findings[i].NodeCause == nil || in.Findings[i].NodeCause.ID != c.wantRootNode) {
					errorf("root cause's node cause is not %s", c.wantRootNode)
				}
				if i >= 0 && in.Findings[i].Consequence {
					errorf("root cause %s is marked a consequence", in.Findings[i].Key)
				}
			}
			for _, p := range c.present {
				if in.find(p) < 0 {
					errorf("no finding %s", p)
				}
			}
			for _, p := range c.absent {
				if i := in.find(p); i >= 0 {
					errorf("finding %s present, want absent", in.Findings[i].Key)
				}
			}
			for _, p := range c.consequences {
				i := in.find(p)
				if i < 0 {
					errorf("no finding %s", p)
					continue
				}
				f := in.Findings[i]
				if !f.Consequence || len(f.ExplainedBy) == 0 {
					errorf("finding %s is not a consequence (explained by %v)", f.Key, f.ExplainedBy)
				}
				if r := in.find(c.wantRoot); c.wantRoot != "" && r >= i {
					errorf("consequence %s ranked %d, not after the root cause (%d)", f.Key, i, r)
				}
			}
			var keys []string
			for _, f := range in.Findings {
				k := f.Key + " (" + f.Severity
				if f.NodeCause != nil {
					k += ", node: " + f.NodeCause.ID
				}
				if f.Consequence {
					k += ", consequence of " + strings.Join(f.ExplainedBy, " ")
				}
				keys = append(keys, k+")")
			}
			t.Logf("exit %d, healthy %v, ranked findings:\n  %s", res.code(), in.Healthy, strings.Join(keys, "\n  "))
			if failed {
				md := run(t, args...)
				t.Logf("markdown report:\n%s", md.stdout)
			}
		})
	}
}
