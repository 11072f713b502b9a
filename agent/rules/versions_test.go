package rules

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// ---- evidence builders -------------------------------------------------------

const vtDropIn = "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf"

type vtNode struct {
	bins      []*nodediagv1.Binary
	noBinList bool   // the binaries probe did not run
	binStatus string // its status, "ok" when empty
	execStart string // ExecStart= line of the kubelet unit; "" for no kubelet-config evidence
	kubeadm   *nodediagv1.Kubeadm
}

func (n vtNode) evidence() *nodediagv1.Evidence {
	ev := &nodediagv1.Evidence{CollectedAt: timestamppb.New(kubeletTestNow)}
	if !n.noBinList {
		st := n.binStatus
		if st == "" {
			st = "ok"
		}
		pe := &nodediagv1.ProbeEvidence{Name: "binary-versions", Status: st}
		if st == "ok" {
			pe.Data = &nodediagv1.ProbeEvidence_Binaries{Binaries: &nodediagv1.Binaries{Binaries: n.bins}}
		}
		ev.Probes = append(ev.Probes, pe)
	}
	if n.execStart != "" {
		ev.Probes = append(ev.Probes, &nodediagv1.ProbeEvidence{Name: "kubelet-config", Status: "ok", Data: &nodediagv1.ProbeEvidence_KubeletConfig{KubeletConfig: &nodediagv1.KubeletConfig{
			ExecStart: &nodediagv1.SourceLine{Path: vtDropIn, Line: 11, Text: n.execStart},
		}}})
	}
	if n.kubeadm != nil {
		ev.Probes = append(ev.Probes, &nodediagv1.ProbeEvidence{Name: "kubeadm", Status: "ok", Data: &nodediagv1.ProbeEvidence_Kubeadm{Kubeadm: n.kubeadm}})
	}
	return ev
}

func vtKubelet(path, v string, effective bool) *nodediagv1.Binary {
	return &nodediagv1.Binary{Name: "kubelet", Path: path, Version: v, Effective: effective, Method: "exec",
		Command: path + " --version", Output: "Kubernetes " + v}
}

func vtKubeadm(v string) *nodediagv1.Binary {
	return &nodediagv1.Binary{Name: "kubeadm", Path: "/usr/bin/kubeadm", Version: v, Effective: true, Method: "exec",
		Command: "/usr/bin/kubeadm version -o short", Output: v}
}

func vtKubectl(v string) *nodediagv1.Binary {
	return &nodediagv1.Binary{Name: "kubectl", Path: "/usr/bin/kubectl", Version: v, Effective: true, Method: "exec",
		Command: "/usr/bin/kubectl version --client -o json",
		Output:  "{\n  \"clientVersion\": {\n    \"major\": \"1\",\n    \"gitVersion\": \"" + v + "\",\n    \"platform\": \"linux/amd64\"\n  }\n}"}
}

// vtCAPIInit is a control plane node's kubeadm evidence with the version
// only in CABPK's /run/kubeadm/kubeadm.yaml (kubeadm init not yet run).
func vtCAPIInit(v string) *nodediagv1.Kubeadm {
	line := &nodediagv1.SourceLine{Path: "/run/kubeadm/kubeadm.yaml", Line: 20, Text: "kubernetesVersion: " + v}
	return &nodediagv1.Kubeadm{
		ConfigFiles:               []*nodediagv1.KubeadmConfigFile{{Path: "/run/kubeadm/kubeadm.yaml", Kinds: []string{"ClusterConfiguration", "InitConfiguration"}, KubernetesVersion: v, KubernetesVersionLine: line}},
		ControlPlaneVersion:       v,
		ControlPlaneVersionSource: line,
		ControlPlane:              true,
	}
}

// vtAPIServer is a control plane node running kube-apiserver v.
func vtAPIServer(v string) *nodediagv1.Kubeadm {
	line := &nodediagv1.SourceLine{Path: "/etc/kubernetes/manifests/kube-apiserver.yaml", Line: 18, Text: "    image: registry.k8s.io/kube-apiserver:" + v}
	return &nodediagv1.Kubeadm{ControlPlaneVersion: v, ControlPlaneVersionSource: line, ControlPlane: true}
}

const vtExecStart = "ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS"

// vtFinding is what the tests compare of a finding.
type vtFinding struct {
	ID, Severity, Confidence, Title, Remediation string
	Quotes                                       []string // "source:line: excerpt"
}

func runVersionRules(ev *nodediagv1.Evidence, c Context) []*nodediagv1.Finding {
	in := newInput(ev, c)
	var out []*nodediagv1.Finding
	for _, r := range versionRules {
		out = append(out, r.Fn(in)...)
	}
	return out
}

func summarizeVersionFindings(fs []*nodediagv1.Finding) []vtFinding {
	var out []vtFinding
	for _, f := range fs {
		s := vtFinding{ID: f.Id, Severity: f.Severity, Confidence: f.Confidence, Title: f.Title}
		for _, q := range f.Evidence {
			s.Quotes = append(s.Quotes, fmt.Sprintf("%s:%d: %s", q.Source, q.Line, q.Excerpt))
		}
		out = append(out, s)
	}
	return out
}

func TestVersionRules(t *testing.T) {
	const (
		quoteKubeadmYAML  = "/run/kubeadm/kubeadm.yaml:20: kubernetesVersion: v1.32.0"
		quoteExpect132    = "--expect-version:0: v1.32.0"
		quoteKubelet1332  = "exec:/usr/bin/kubelet --version:0: Kubernetes v1.33.2"
		quoteKubeadm1332  = "exec:/usr/bin/kubeadm version -o short:0: v1.33.2"
		quoteAPIServer128 = "/etc/kubernetes/manifests/kube-apiserver.yaml:18:     image: registry.k8s.io/kube-apiserver:v1.28.0"
	)
	tests := []struct {
		name   string
		node   vtNode
		expect string
		want   []vtFinding
	}{
		{
			// The CAPZ incident: the gallery image ships kubelet and
			// kubeadm v1.33.2, the script that should have replaced them
			// with v1.32.0 failed silently, and kubeadm.yaml asks for
			// v1.32.0.
			name: "CAPZ gallery image newer than the cluster",
			node: vtNode{
				bins:      []*nodediagv1.Binary{vtKubelet("/usr/bin/kubelet", "v1.33.2", true), vtKubeadm("v1.33.2")},
				execStart: vtExecStart,
				kubeadm:   vtCAPIInit("v1.32.0"),
			},
			expect: "v1.32.0",
			want: []vtFinding{
				{ID: "VersionMismatch", Severity: Error, Confidence: High, Title: "kubelet is v1.33.2, not the expected v1.32.0", Quotes: []string{quoteKubelet1332, quoteExpect132}},
				{ID: "VersionMismatch", Severity: Error, Confidence: High, Title: "kubeadm is v1.33.2, not the expected v1.32.0", Quotes: []string{quoteKubeadm1332, quoteExpect132}},
				{ID: "KubeletNewerThanControlPlane", Severity: Error, Confidence: High, Title: "kubelet v1.33.2 is newer than the control plane v1.32.0", Quotes: []string{quoteKubelet1332, quoteKubeadmYAML}},
			},
		},
		{
			name: "healthy node: nothing",
			node: vtNode{
				bins:      []*nodediagv1.Binary{vtKubelet("/usr/bin/kubelet", "v1.32.0", true), vtKubeadm("v1.32.0"), vtKubectl("v1.32.0")},
				execStart: vtExecStart,
				kubeadm:   vtCAPIInit("v1.32.0"),
			},
			expect: "v1.32.0",
		},
		{
			name: "patch differences are not skew",
			node: vtNode{
				bins:    []*nodediagv1.Binary{vtKubelet("/usr/bin/kubelet", "v1.32.5", true), vtKubeadm("v1.32.1"), vtKubectl("v1.31.0")},
				kubeadm: vtAPIServer("v1.32.0"),
			},
		},
		{
			name: "kubelet newer than kubeadm",
			node: vtNode{bins: []*nodediagv1.Binary{vtKubelet("/usr/bin/kubelet", "v1.31.1", true), vtKubeadm("v1.30.0")}},
			want: []vtFinding{{ID: "KubeadmKubeletSkew", Severity: Error, Confidence: High, Title: "kubeadm v1.30.0 and kubelet v1.31.1 are outside kubeadm's supported skew",
				Quotes: []string{"exec:/usr/bin/kubeadm version -o short:0: v1.30.0", "exec:/usr/bin/kubelet --version:0: Kubernetes v1.31.1"}}},
		},
		{
			name: "kubelet four minors behind kubeadm 1.33",
			node: vtNode{bins: []*nodediagv1.Binary{vtKubelet("/usr/bin/kubelet", "v1.29.5", true), vtKubeadm("v1.33.0")}},
			want: []vtFinding{{ID: "KubeadmKubeletSkew", Severity: Error, Confidence: High, Title: "kubeadm v1.33.0 and kubelet v1.29.5 are outside kubeadm's supported skew",
				Quotes: []string{"exec:/usr/bin/kubeadm version -o short:0: v1.33.0", "exec:/usr/bin/kubelet --version:0: Kubernetes v1.29.5"}}},
		},
		{
			name: "kubelet three minors behind kubeadm 1.33: supported",
			node: vtNode{bins: []*nodediagv1.Binary{vtKubelet("/usr/bin/kubelet", "v1.30.0", true), vtKubeadm("v1.33.0")}},
		},
		{
			name: "kubelet two minors behind kubeadm 1.28: n-1 before 1.29",
			node: vtNode{bins: []*nodediagv1.Binary{vtKubelet("/usr/bin/kubelet", "v1.26.3", true), vtKubeadm("v1.28.3")}},
			want: []vtFinding{{ID: "KubeadmKubeletSkew", Severity: Error, Confidence: High, Title: "kubeadm v1.28.3 and kubelet v1.26.3 are outside kubeadm's supported skew",
				Quotes: []string{"exec:/usr/bin/kubeadm version -o short:0: v1.28.3", "exec:/usr/bin/kubelet --version:0: Kubernetes v1.26.3"}}},
		},
		{
			name: "kubelet 1.24 vs control plane 1.28: max skew 2 below kubelet 1.25",
			node: vtNode{bins: []*nodediagv1.Binary{vtKubelet("/usr/bin/kubelet", "v1.24.17", true)}, kubeadm: vtAPIServer("v1.28.0")},
			want: []vtFinding{{ID: "KubeletTooOld", Severity: Error, Confidence: High, Title: "kubelet v1.24.17 is 4 minor versions older than the control plane v1.28.0",
				Quotes: []string{"exec:/usr/bin/kubelet --version:0: Kubernetes v1.24.17", quoteAPIServer128}}},
		},
		{
			name: "kubelet 1.24 vs control plane 1.27: three behind is too many for a 1.24 kubelet",
			node: vtNode{bins: []*nodediagv1.Binary{vtKubelet("/usr/bin/kubelet", "v1.24.17", true)}, kubeadm: vtAPIServer("v1.27.3")},
			want: []vtFinding{{ID: "KubeletTooOld", Severity: Error, Confidence: High, Title: "kubelet v1.24.17 is 3 minor versions older than the control plane v1.27.3",
				Quotes: []string{"exec:/usr/bin/kubelet --version:0: Kubernetes v1.24.17", "/etc/kubernetes/manifests/kube-apiserver.yaml:18:     image: registry.k8s.io/kube-apiserver:v1.27.3"}}},
		},
		{
			name: "kubelet 1.25 vs control plane 1.28: n-3 allowed",
			node: vtNode{bins: []*nodediagv1.Binary{vtKubelet("/usr/bin/kubelet", "v1.25.0", true)}, kubeadm: vtAPIServer("v1.28.0")},
		},
		{
			name: "kubelet 1.25 vs control plane 1.29: four behind",
			node: vtNode{bins: []*nodediagv1.Binary{vtKubelet("/usr/bin/kubelet", "v1.25.0", true)}, kubeadm: vtAPIServer("v1.29.0")},
			want: []vtFinding{{ID: "KubeletTooOld", Severity: Error, Confidence: High, Title: "kubelet v1.25.0 is 4 minor versions older than the control plane v1.29.0",
				Quotes: []string{"exec:/usr/bin/kubelet --version:0: Kubernetes v1.25.0", "/etc/kubernetes/manifests/kube-apiserver.yaml:18:     image: registry.k8s.io/kube-apiserver:v1.29.0"}}},
		},
		{
			// A failed replacement put v1.32.0 in /usr/local/bin, first in
			// PATH, while the unit still runs the image's /usr/bin/kubelet.
			name: "two kubelets: the unit's is the one judged",
			node: vtNode{
				bins: []*nodediagv1.Binary{
					vtKubelet("/usr/local/bin/kubelet", "v1.32.0", true),
					vtKubelet("/usr/bin/kubelet", "v1.33.2", false),
				},
				execStart: vtExecStart,
				kubeadm:   vtCAPIInit("v1.32.0"),
			},
			want: []vtFinding{
				{ID: "KubeletMultipleBinaries", Severity: Warning, Confidence: Medium, Title: "two kubelet binaries of different versions: /usr/local/bin/kubelet (v1.32.0), /usr/bin/kubelet (v1.33.2)",
					Quotes: []string{"exec:/usr/local/bin/kubelet --version:0: Kubernetes v1.32.0", quoteKubelet1332, vtDropIn + ":11: " + vtExecStart}},
				{ID: "KubeletNewerThanControlPlane", Severity: Error, Confidence: High, Title: "kubelet v1.33.2 is newer than the control plane v1.32.0", Quotes: []string{quoteKubelet1332, quoteKubeadmYAML}},
			},
		},
		{
			name: "two copies of one version: nothing",
			node: vtNode{bins: []*nodediagv1.Binary{vtKubelet("/usr/local/bin/kubelet", "v1.32.0", true), vtKubelet("/usr/bin/kubelet", "v1.32.0", false)}},
		},
		{
			name: "unit runs an alias, with a systemd prefix",
			node: vtNode{
				bins: []*nodediagv1.Binary{
					vtKubelet("/usr/local/bin/kubelet", "v1.32.0", true),
					func() *nodediagv1.Binary {
						b := vtKubelet("/usr/bin/kubelet", "v1.31.0", false)
						b.Aliases = []string{"/bin/kubelet"}
						return b
					}(),
				},
				execStart: "ExecStart=-/bin/kubelet $KUBELET_EXTRA_ARGS",
			},
			expect: "v1.32.0",
			want: []vtFinding{
				{ID: "KubeletMultipleBinaries", Severity: Warning, Confidence: Medium, Title: "two kubelet binaries of different versions: /usr/local/bin/kubelet (v1.32.0), /usr/bin/kubelet (v1.31.0)",
					Quotes: []string{"exec:/usr/local/bin/kubelet --version:0: Kubernetes v1.32.0", "exec:/usr/bin/kubelet --version:0: Kubernetes v1.31.0", vtDropIn + ":11: ExecStart=-/bin/kubelet $KUBELET_EXTRA_ARGS"}},
				{ID: "VersionMismatch", Severity: Error, Confidence: High, Title: "kubelet is v1.31.0, not the expected v1.32.0", Quotes: []string{"exec:/usr/bin/kubelet --version:0: Kubernetes v1.31.0", quoteExpect132}},
			},
		},
		{
			name: "no kubelet on a kubeadm node",
			node: vtNode{bins: []*nodediagv1.Binary{vtKubeadm("v1.32.0")}, execStart: "ExecStart=/usr/local/bin/kubelet $KUBELET_ARGS", kubeadm: &nodediagv1.Kubeadm{}},
			want: []vtFinding{{ID: "KubeletNotInstalled", Severity: Error, Confidence: High, Title: "no kubelet binary on the node (/usr/local/bin/kubelet is what the unit runs)",
				Quotes: []string{vtDropIn + ":11: ExecStart=/usr/local/bin/kubelet $KUBELET_ARGS", "/usr/local/bin/kubelet:0: does not exist (no kubelet in /usr/local/sbin, /usr/local/bin, /usr/sbin, /usr/bin, /sbin, /bin or /opt/bin either)"}}},
		},
		{
			name: "no kubelet, kubeadm files only",
			node: vtNode{kubeadm: &nodediagv1.Kubeadm{KubeletConf: &nodediagv1.KubeconfigFile{Path: "/etc/kubernetes/kubelet.conf", Present: true}}},
			want: []vtFinding{{ID: "KubeletNotInstalled", Severity: Error, Confidence: High, Title: "no kubelet binary on the node (/usr/bin/kubelet is what the unit runs)",
				Quotes: []string{"/usr/bin/kubelet:0: does not exist (no kubelet in /usr/local/sbin, /usr/local/bin, /usr/sbin, /usr/bin, /sbin, /bin or /opt/bin either)"}}},
		},
		{
			name: "no kubelet, but the binaries probe failed: no conclusion",
			node: vtNode{binStatus: "error", kubeadm: &nodediagv1.Kubeadm{}, execStart: vtExecStart},
		},
		{
			name: "no kubelet, no kubelet unit, no kubeadm: not set up for a kubelet yet, nothing",
			node: vtNode{kubeadm: &nodediagv1.Kubeadm{}},
		},
		{
			name: "no kubelet on a host that is not a node: nothing",
			node: vtNode{},
		},
		{
			name: "nothing known: nothing",
			node: vtNode{noBinList: true},
		},
		{
			name: "versions unknown: nothing",
			node: vtNode{
				bins:    []*nodediagv1.Binary{{Name: "kubelet", Path: "/usr/bin/kubelet", Effective: true, Method: "exec", Command: "/usr/bin/kubelet --version", Error: "no answer within 10s: killed"}},
				kubeadm: vtCAPIInit("stable-1.32"),
			},
			expect: "not-a-version",
		},
		{
			name:   "control plane from --expect-version: skew at medium confidence",
			node:   vtNode{bins: []*nodediagv1.Binary{vtKubelet("/usr/bin/kubelet", "v1.33.2", true), vtKubectl("v1.30.1")}},
			expect: "v1.32.0",
			want: []vtFinding{
				{ID: "VersionMismatch", Severity: Error, Confidence: High, Title: "kubelet is v1.33.2, not the expected v1.32.0", Quotes: []string{quoteKubelet1332, quoteExpect132}},
				{ID: "KubeletNewerThanControlPlane", Severity: Error, Confidence: Medium, Title: "kubelet v1.33.2 is newer than the control plane v1.32.0", Quotes: []string{quoteKubelet1332, quoteExpect132}},
				{ID: "KubectlSkew", Severity: Warning, Confidence: Medium, Title: "kubectl v1.30.1 is more than one minor version from the control plane v1.32.0",
					Quotes: []string{`exec:/usr/bin/kubectl version --client -o json:0: "gitVersion": "v1.30.1",`, quoteExpect132}},
			},
		},
		{
			name: "kubeadm too new for the control plane",
			node: vtNode{bins: []*nodediagv1.Binary{vtKubelet("/usr/bin/kubelet", "v1.32.0", true), vtKubeadm("v1.34.0")}, kubeadm: vtCAPIInit("v1.32.0")},
			want: []vtFinding{{ID: "KubeadmControlPlaneSkew", Severity: Error, Confidence: High, Title: "kubeadm v1.34.0 cannot manage control plane v1.32.0",
				Quotes: []string{"exec:/usr/bin/kubeadm version -o short:0: v1.34.0", quoteKubeadmYAML}}},
		},
		{
			name: "kubeadm older than the control plane",
			node: vtNode{bins: []*nodediagv1.Binary{vtKubelet("/usr/bin/kubelet", "v1.31.0", true), vtKubeadm("v1.31.0")}, kubeadm: vtCAPIInit("v1.32.0")},
			want: []vtFinding{{ID: "KubeadmControlPlaneSkew", Severity: Error, Confidence: High, Title: "kubeadm v1.31.0 cannot manage control plane v1.32.0",
				Quotes: []string{"exec:/usr/bin/kubeadm version -o short:0: v1.31.0", quoteKubeadmYAML}}},
		},
		{
			name:   "LTS patch taken literally",
			node:   vtNode{bins: []*nodediagv1.Binary{vtKubelet("/usr/bin/kubelet", "v1.31.100", true), vtKubeadm("v1.31.5")}},
			expect: "v1.31.100",
			want: []vtFinding{{ID: "VersionMismatch", Severity: Error, Confidence: High, Title: "kubeadm is v1.31.5, not the expected v1.31.100",
				Quotes: []string{"exec:/usr/bin/kubeadm version -o short:0: v1.31.5", "--expect-version:0: v1.31.100"}}},
		},
		{
			name:   "build metadata ignored, expectation without v",
			node:   vtNode{bins: []*nodediagv1.Binary{vtKubelet("/usr/bin/kubelet", "v1.33.0+k3s1", true)}},
			expect: "1.33.0",
		},
		{
			name:   "pre-release is not the release",
			node:   vtNode{bins: []*nodediagv1.Binary{vtKubelet("/usr/bin/kubelet", "v1.33.0-rc.1", true)}},
			expect: "v1.33.0",
			want: []vtFinding{{ID: "VersionMismatch", Severity: Error, Confidence: High, Title: "kubelet is v1.33.0-rc.1, not the expected v1.33.0",
				Quotes: []string{"exec:/usr/bin/kubelet --version:0: Kubernetes v1.33.0-rc.1", "--expect-version:0: v1.33.0"}}},
		},
		{
			name: "version from build info quoted as such",
			node: vtNode{bins: []*nodediagv1.Binary{{Name: "kubelet", Path: "/usr/bin/kubelet", Version: "v1.33.1", Effective: true, Method: "buildinfo",
				Command: "/usr/bin/kubelet --version", Error: "not run: running host binaries is disabled", Output: "mod\tk8s.io/kubernetes\tv1.33.1\ngo\tgo1.24.2"}}},
			expect: "v1.32.0",
			want: []vtFinding{
				{ID: "VersionMismatch", Severity: Error, Confidence: High, Title: "kubelet is v1.33.1, not the expected v1.32.0", Quotes: []string{"buildinfo:/usr/bin/kubelet:0: mod\tk8s.io/kubernetes\tv1.33.1", quoteExpect132}},
				{ID: "KubeletNewerThanControlPlane", Severity: Error, Confidence: Medium, Title: "kubelet v1.33.1 is newer than the control plane v1.32.0", Quotes: []string{"buildinfo:/usr/bin/kubelet:0: mod\tk8s.io/kubernetes\tv1.33.1", quoteExpect132}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := runVersionRules(tt.node.evidence(), Context{ExpectVersion: tt.expect})
			for _, f := range fs {
				for _, s := range []string{f.Title, f.Remediation, f.RefutedBy} {
					if strings.Contains(s, "{") {
						t.Errorf("%s: unfilled template parameter in %q", f.Id, s)
					}
				}
				if len(f.Evidence) == 0 {
					t.Errorf("%s quotes no evidence", f.Id)
				}
			}
			got := summarizeVersionFindings(fs)
			for i := range got {
				got[i].Remediation = ""
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestVersionRemediationNamesTheFix(t *testing.T) {
	fs := runVersionRules(vtNode{
		bins:    []*nodediagv1.Binary{vtKubelet("/usr/bin/kubelet", "v1.33.2", true), vtKubeadm("v1.33.2")},
		kubeadm: vtCAPIInit("v1.32.0"),
	}.evidence(), Context{ExpectVersion: "v1.32.0"})
	var rem []string
	for _, f := range fs {
		rem = append(rem, f.Id+": "+f.Remediation)
	}
	for _, want := range []string{
		"VersionMismatch: Install kubelet v1.32.0 (the Machine's version).",
		"in /usr/bin/kubelet.",
		"KubeletNewerThanControlPlane: The kubelet must not be newer than kube-apiserver. Install kubelet 1.32.x",
	} {
		if !strings.Contains(strings.Join(rem, "\n"), want) {
			t.Errorf("remediations do not say %q:\n%s", want, strings.Join(rem, "\n"))
		}
	}
}

func TestExecStartBinary(t *testing.T) {
	tests := []struct{ in, want string }{
		{vtExecStart, "/usr/bin/kubelet"},
		{"ExecStart=-/usr/local/bin/kubelet --v=2", "/usr/local/bin/kubelet"},
		{"ExecStart=@/usr/bin/kubelet kubelet --v=2", "/usr/bin/kubelet"},
		{"ExecStart=!!/opt/bin/kubelet", "/opt/bin/kubelet"},
		{`ExecStart=+"/usr/bin/kubelet" $ARGS`, "/usr/bin/kubelet"},
		{"  ExecStart = /usr/bin/kubelet", "/usr/bin/kubelet"},
		{"/usr/bin/kubelet $KUBELET_ARGS", "/usr/bin/kubelet"},
		{"ExecStart=", ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := execStartBinary(tt.in); got != tt.want {
			t.Errorf("execStartBinary(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// The rules run through the engine as the agent runs them: the version
// findings of the CAPZ incident come out ranked with the mismatch first.
func TestVersionRulesThroughEngine(t *testing.T) {
	e, err := NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	res := e.Analyze(vtNode{
		bins:      []*nodediagv1.Binary{vtKubelet("/usr/bin/kubelet", "v1.33.2", true)},
		execStart: vtExecStart,
		kubeadm:   vtCAPIInit("v1.32.0"),
	}.evidence(), Context{ExpectVersion: "v1.32.0"})
	var ids []string
	for _, f := range res.Findings {
		ids = append(ids, f.Id)
	}
	if len(ids) < 2 || ids[0] != "VersionMismatch" {
		t.Errorf("findings = %v, want VersionMismatch first", ids)
	}
	found := false
	for _, f := range res.Findings {
		if f.Id == "KubeletNewerThanControlPlane" {
			found = true
			if !f.Consequence {
				t.Errorf("KubeletNewerThanControlPlane is not marked as explained by VersionMismatch")
			}
		}
	}
	if !found {
		t.Errorf("findings = %v, want KubeletNewerThanControlPlane", ids)
	}
}

// A kubelet the unit runs from a directory the probe does not search is not
// known to be missing.
func TestKubeletNotInstalledOutsideSearchedDirs(t *testing.T) {
	kc := &nodediagv1.KubeletConfig{ExecPath: "/opt/kubernetes/bin/kubelet", ExecStart: &nodediagv1.SourceLine{Path: "/etc/systemd/system/kubelet.service", Line: 5, Text: "ExecStart=/opt/kubernetes/bin/kubelet"}}
	ev := &nodediagv1.Evidence{Probes: []*nodediagv1.ProbeEvidence{
		{Name: "kubelet-config", Status: "ok", Data: &nodediagv1.ProbeEvidence_KubeletConfig{KubeletConfig: kc}},
		{Name: "binary-versions", Status: "ok", Data: &nodediagv1.ProbeEvidence_Binaries{Binaries: &nodediagv1.Binaries{}}},
	}}
	if fs := ruleKubeletNotInstalled(&Input{Ev: ev}); len(fs) != 0 {
		t.Errorf("got %v, want nothing", fs)
	}
	kc.ExecPath = "/usr/bin/kubelet"
	if fs := ruleKubeletNotInstalled(&Input{Ev: ev}); len(fs) != 1 {
		t.Errorf("got %v, want KubeletNotInstalled for /usr/bin/kubelet", fs)
	}
}
