package rules

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/types/known/timestamppb"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// Evidence builders for the kubelet rules.

func ktKubeletEvidence(kc *nodediagv1.KubeletConfig, bins []*nodediagv1.Binary, ci *nodediagv1.CloudInit) *nodediagv1.Evidence {
	ev := &nodediagv1.Evidence{CollectedAt: timestamppb.New(kubeletTestNow)}
	if kc != nil {
		ev.Probes = append(ev.Probes, &nodediagv1.ProbeEvidence{Name: "kubelet-config", Status: "ok", Data: &nodediagv1.ProbeEvidence_KubeletConfig{KubeletConfig: kc}})
	}
	if bins != nil {
		ev.Probes = append(ev.Probes, &nodediagv1.ProbeEvidence{Name: "binaries", Status: "ok", Data: &nodediagv1.ProbeEvidence_Binaries{Binaries: &nodediagv1.Binaries{Binaries: bins}}})
	}
	if ci != nil {
		ev.Probes = append(ev.Probes, &nodediagv1.ProbeEvidence{Name: "cloud-init", Status: "ok", Data: &nodediagv1.ProbeEvidence_CloudInit{CloudInit: ci}})
	}
	return ev
}

func ktKubeletBinary(path, v string, effective bool) *nodediagv1.Binary {
	return &nodediagv1.Binary{
		Name: "kubelet", Path: path, Version: v, Effective: effective, Method: "exec",
		Command: path + " --version", Output: "Kubernetes " + v + "\n",
	}
}

const (
	ktSysconfigPath  = "/etc/sysconfig/kubelet"
	ktSysconfigLine  = "KUBELET_EXTRA_ARGS=--pod-infra-container-image=mcr.microsoft.com/oss/kubernetes/pause:3.6"
	ktFlagsEnvPath   = "/var/lib/kubelet/kubeadm-flags.env"
	ktConfigPath     = "/var/lib/kubelet/config.yaml"
	ktKubeadmDropIn  = "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf"
	ktConfigArgsLine = `Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"`
)

var kubeletTestNow = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// ktAzl3Kubelet is the Azure Linux 3 node of the CAPZ incident: the gallery
// image's /etc/sysconfig/kubelet still sets --pod-infra-container-image.
func ktAzl3Kubelet(extra ...*nodediagv1.KubeletFlag) *nodediagv1.KubeletConfig {
	kc := &nodediagv1.KubeletConfig{
		UnitFiles: []string{"/usr/lib/systemd/system/kubelet.service", ktKubeadmDropIn},
		ExecStart: &nodediagv1.SourceLine{Path: ktKubeadmDropIn, Line: 11, Text: "ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS"},
		ExecPath:  "/usr/bin/kubelet",
		Flags: []*nodediagv1.KubeletFlag{
			{Name: "config", Value: ktConfigPath, Variable: "KUBELET_CONFIG_ARGS", Active: true, Source: &nodediagv1.SourceLine{Path: ktKubeadmDropIn, Line: 4, Text: ktConfigArgsLine}},
			{Name: "pod-infra-container-image", Value: "mcr.microsoft.com/oss/kubernetes/pause:3.6", Variable: "KUBELET_EXTRA_ARGS", Active: true,
				Source: &nodediagv1.SourceLine{Path: ktSysconfigPath, Line: 1, Text: ktSysconfigLine}},
		},
		Config: &nodediagv1.KubeletConfigFile{Path: ktConfigPath, Present: true, Kind: "KubeletConfiguration", ApiVersion: "kubelet.config.k8s.io/v1beta1"},
	}
	kc.Flags = append(kc.Flags, extra...)
	return kc
}

// kubeletFindingSummary is what the tests compare of a finding.
type kubeletFindingSummary struct {
	ID, Severity, Confidence, Title string
	Quotes                          []string // "source:line: excerpt"
}

func summarizeKubelet(fs []*nodediagv1.Finding) []kubeletFindingSummary {
	var out []kubeletFindingSummary
	for _, f := range fs {
		s := kubeletFindingSummary{ID: f.Id, Severity: f.Severity, Confidence: f.Confidence, Title: f.Title}
		for _, q := range f.Evidence {
			s.Quotes = append(s.Quotes, kubeletQuoteString(q))
		}
		out = append(out, s)
	}
	return out
}

func kubeletQuoteString(q *nodediagv1.Quote) string {
	if q.Line > 0 {
		return q.Source + ":" + strconv.Itoa(int(q.Line)) + ": " + q.Excerpt
	}
	return q.Source + ": " + q.Excerpt
}

func runKubeletRules(in *Input) []*nodediagv1.Finding {
	var out []*nodediagv1.Finding
	for _, r := range kubeletRules {
		out = append(out, r.Fn(in)...)
	}
	return out
}

func TestKubeletFlagRules(t *testing.T) {
	const (
		execQuote135 = "exec:/usr/bin/kubelet --version: Kubernetes v1.35.0"
		sysconfigQ   = ktSysconfigPath + ":1: " + ktSysconfigLine
	)
	tests := []struct {
		name   string
		kc     *nodediagv1.KubeletConfig
		bins   []*nodediagv1.Binary
		expect string
		want   []kubeletFindingSummary
		// Substrings the remediation of the first finding must hold.
		remediation []string
	}{
		{
			name: "1.35 kubelet and --pod-infra-container-image in /etc/sysconfig/kubelet",
			kc:   ktAzl3Kubelet(),
			bins: []*nodediagv1.Binary{ktKubeletBinary("/usr/bin/kubelet", "v1.35.0", true)},
			want: []kubeletFindingSummary{{
				ID: "KubeletRemovedFlag", Severity: Error, Confidence: High,
				Title:  "kubelet v1.35.0 rejects --pod-infra-container-image set in /etc/sysconfig/kubelet",
				Quotes: []string{sysconfigQ, execQuote135},
			}},
			remediation: []string{
				"Remove --pod-infra-container-image from /etc/sysconfig/kubelet (KUBELET_EXTRA_ARGS): it was removed in Kubernetes 1.35; set the sandbox (pause) image in the container runtime instead",
			},
		},
		{
			name: "1.34 kubelet and the same flag: deprecated only",
			kc:   ktAzl3Kubelet(),
			bins: []*nodediagv1.Binary{ktKubeletBinary("/usr/bin/kubelet", "v1.34.2", true)},
			want: []kubeletFindingSummary{{
				ID: "KubeletDeprecatedFlag", Severity: Info, Confidence: High,
				Title:  "kubelet flag --pod-infra-container-image in /etc/sysconfig/kubelet is removed in Kubernetes 1.35",
				Quotes: []string{sysconfigQ, "exec:/usr/bin/kubelet --version: Kubernetes v1.34.2"},
			}},
			remediation: []string{"before the kubelet reaches 1.35; set the sandbox (pause) image"},
		},
		{
			name: "1.27 kubelet and --container-runtime=remote in kubeadm-flags.env",
			kc: &nodediagv1.KubeletConfig{ExecPath: "/usr/bin/kubelet", Flags: []*nodediagv1.KubeletFlag{{
				Name: "container-runtime", Value: "remote", Variable: "KUBELET_KUBEADM_ARGS", Active: true,
				Source: &nodediagv1.SourceLine{Path: ktFlagsEnvPath, Line: 1, Text: `KUBELET_KUBEADM_ARGS="--container-runtime=remote --container-runtime-endpoint=unix:///run/containerd/containerd.sock"`},
			}}},
			bins: []*nodediagv1.Binary{ktKubeletBinary("/usr/bin/kubelet", "v1.27.3", true)},
			want: []kubeletFindingSummary{{
				ID: "KubeletRemovedFlag", Severity: Error, Confidence: High,
				Title: "kubelet v1.27.3 rejects --container-runtime set in /var/lib/kubelet/kubeadm-flags.env",
				Quotes: []string{
					ktFlagsEnvPath + `:1: KUBELET_KUBEADM_ARGS="--container-runtime=remote --container-runtime-endpoint=unix:///run/containerd/containerd.sock"`,
					"exec:/usr/bin/kubelet --version: Kubernetes v1.27.3",
				},
			}},
			remediation: []string{"(KUBELET_KUBEADM_ARGS): it was removed in Kubernetes 1.27; only --container-runtime-endpoint"},
		},
		{
			name: "1.24 kubelet and --network-plugin=cni written in ExecStart, pflag spelling with _",
			kc: &nodediagv1.KubeletConfig{ExecPath: "/usr/bin/kubelet", Flags: []*nodediagv1.KubeletFlag{{
				Name: "network_plugin", Value: "cni", Active: true,
				Source: &nodediagv1.SourceLine{Path: "/etc/systemd/system/kubelet.service", Line: 7, Text: "ExecStart=/usr/bin/kubelet --network_plugin=cni"},
			}}},
			bins: []*nodediagv1.Binary{ktKubeletBinary("/usr/bin/kubelet", "v1.24.17", true)},
			want: []kubeletFindingSummary{{
				ID: "KubeletRemovedFlag", Severity: Error, Confidence: High,
				Title:  "kubelet v1.24.17 rejects --network_plugin set in /etc/systemd/system/kubelet.service",
				Quotes: []string{"/etc/systemd/system/kubelet.service:7: ExecStart=/usr/bin/kubelet --network_plugin=cni", "exec:/usr/bin/kubelet --version: Kubernetes v1.24.17"},
			}},
			remediation: []string{"/etc/systemd/system/kubelet.service: it was removed in Kubernetes 1.24; the kubelet no longer sets up pod networking"},
		},
		{
			name: "a dormant removed flag is a warning, a dormant deprecated one nothing",
			kc: ktAzl3Kubelet(
				&nodediagv1.KubeletFlag{Name: "network-plugin", Value: "cni", Variable: "KUBELET_EXTRA_ARGS",
					InactiveReason: "/etc/default/kubelet is not an EnvironmentFile of kubelet.service",
					Source:         &nodediagv1.SourceLine{Path: "/etc/default/kubelet", Line: 2, Text: "KUBELET_EXTRA_ARGS=--network-plugin=cni"}},
				&nodediagv1.KubeletFlag{Name: "pod-infra-container-image", Value: "x", Variable: "OLD",
					InactiveReason: "ExecStart does not use $OLD",
					Source:         &nodediagv1.SourceLine{Path: "/etc/default/kubelet", Line: 3, Text: "OLD=--pod-infra-container-image=x"}},
			),
			bins: []*nodediagv1.Binary{ktKubeletBinary("/usr/bin/kubelet", "v1.34.0", true)},
			want: []kubeletFindingSummary{
				{
					ID: "KubeletDeprecatedFlag", Severity: Info, Confidence: High,
					Title:  "kubelet flag --pod-infra-container-image in /etc/sysconfig/kubelet is removed in Kubernetes 1.35",
					Quotes: []string{sysconfigQ, "exec:/usr/bin/kubelet --version: Kubernetes v1.34.0"},
				},
				{
					ID: "KubeletDormantRemovedFlag", Severity: Warning, Confidence: Medium,
					Title:  "kubelet v1.34.0 would reject --network-plugin in /etc/default/kubelet, which does not reach its command line today",
					Quotes: []string{"/etc/default/kubelet:2: KUBELET_EXTRA_ARGS=--network-plugin=cni", "exec:/usr/bin/kubelet --version: Kubernetes v1.34.0"},
				},
			},
		},
		{
			name: "unknown kubelet version and no expected version: nothing",
			kc:   ktAzl3Kubelet(),
			bins: []*nodediagv1.Binary{{Name: "kubelet", Path: "/usr/bin/kubelet", Error: "exec format error", Effective: true}},
		},
		{
			name:   "unknown kubelet version: the expected version, with medium confidence",
			kc:     ktAzl3Kubelet(),
			expect: "v1.35.1",
			want: []kubeletFindingSummary{{
				ID: "KubeletRemovedFlag", Severity: Error, Confidence: Medium,
				Title:  "kubelet v1.35.1 rejects --pod-infra-container-image set in /etc/sysconfig/kubelet",
				Quotes: []string{sysconfigQ, "--expect-version: the kubelet's own version is unknown; the Machine expects Kubernetes v1.35.1"},
			}},
		},
		{
			name: "the binary the unit runs wins over another copy",
			kc:   ktAzl3Kubelet(),
			bins: []*nodediagv1.Binary{
				ktKubeletBinary("/usr/local/bin/kubelet", "v1.34.0", false),
				ktKubeletBinary("/usr/bin/kubelet", "v1.35.0", false),
			},
			want: []kubeletFindingSummary{{
				ID: "KubeletRemovedFlag", Severity: Error, Confidence: High,
				Title:  "kubelet v1.35.0 rejects --pod-infra-container-image set in /etc/sysconfig/kubelet",
				Quotes: []string{sysconfigQ, execQuote135},
			}},
		},
		{
			name: "several copies, none known to run: the first, with medium confidence",
			kc:   &nodediagv1.KubeletConfig{Flags: ktAzl3Kubelet().Flags},
			bins: []*nodediagv1.Binary{
				ktKubeletBinary("/usr/local/bin/kubelet", "v1.35.0", false),
				ktKubeletBinary("/opt/bin/kubelet", "v1.33.0", false),
			},
			want: []kubeletFindingSummary{{
				ID: "KubeletRemovedFlag", Severity: Error, Confidence: Medium,
				Title:  "kubelet v1.35.0 rejects --pod-infra-container-image set in /etc/sysconfig/kubelet",
				Quotes: []string{sysconfigQ, "exec:/usr/local/bin/kubelet --version: Kubernetes v1.35.0"},
			}},
		},
		{
			name: "assumed wiring lowers the confidence",
			kc: func() *nodediagv1.KubeletConfig {
				kc := ktAzl3Kubelet()
				kc.AssumedWiring, kc.UnitFiles = true, nil
				return kc
			}(),
			bins: []*nodediagv1.Binary{ktKubeletBinary("/usr/bin/kubelet", "v1.35.0", true)},
			want: []kubeletFindingSummary{{
				ID: "KubeletRemovedFlag", Severity: Error, Confidence: Medium,
				Title:  "kubelet v1.35.0 rejects --pod-infra-container-image set in /etc/sysconfig/kubelet",
				Quotes: []string{sysconfigQ, execQuote135},
			}},
		},
		{
			name: "a removal inferred from the PR has medium confidence",
			kc: &nodediagv1.KubeletConfig{Flags: []*nodediagv1.KubeletFlag{{
				Name: "azure-container-registry-config", Value: "/etc/kubernetes/azure.json", Active: true, Variable: "KUBELET_KUBEADM_ARGS",
				Source: &nodediagv1.SourceLine{Path: ktFlagsEnvPath, Line: 1, Text: "KUBELET_KUBEADM_ARGS=--azure-container-registry-config=/etc/kubernetes/azure.json"},
			}}},
			bins: []*nodediagv1.Binary{ktKubeletBinary("/usr/bin/kubelet", "v1.30.0", true)},
			want: []kubeletFindingSummary{{
				ID: "KubeletRemovedFlag", Severity: Error, Confidence: Medium,
				Title:  "kubelet v1.30.0 rejects --azure-container-registry-config set in /var/lib/kubelet/kubeadm-flags.env",
				Quotes: []string{ktFlagsEnvPath + ":1: KUBELET_KUBEADM_ARGS=--azure-container-registry-config=/etc/kubernetes/azure.json", "exec:/usr/bin/kubelet --version: Kubernetes v1.30.0"},
			}},
		},
		{
			name: "a pre-release is its minor: v1.35.0-rc.1 rejects the flag",
			kc:   ktAzl3Kubelet(),
			bins: []*nodediagv1.Binary{ktKubeletBinary("/usr/bin/kubelet", "v1.35.0-rc.1", true)},
			want: []kubeletFindingSummary{{
				ID: "KubeletRemovedFlag", Severity: Error, Confidence: High,
				Title:  "kubelet v1.35.0-rc.1 rejects --pod-infra-container-image set in /etc/sysconfig/kubelet",
				Quotes: []string{sysconfigQ, "exec:/usr/bin/kubelet --version: Kubernetes v1.35.0-rc.1"},
			}},
		},
		{
			name: "an old kubelet before the deprecation: nothing",
			kc:   ktAzl3Kubelet(),
			bins: []*nodediagv1.Binary{ktKubeletBinary("/usr/bin/kubelet", "v1.23.0", true)},
		},
		{
			name: "no kubelet-config evidence: nothing",
			bins: []*nodediagv1.Binary{ktKubeletBinary("/usr/bin/kubelet", "v1.35.0", true)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := newInput(ktKubeletEvidence(tt.kc, tt.bins, nil), Context{ExpectVersion: tt.expect})
			got := kubeletFlagFindings(in)
			if diff := cmp.Diff(tt.want, summarizeKubelet(got), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
			for _, want := range tt.remediation {
				if len(got) == 0 || !strings.Contains(got[0].Remediation, want) {
					t.Errorf("remediation %q lacks %q", kubeletRemediation(got), want)
				}
			}
			for _, f := range got {
				if strings.Contains(f.Title+f.Remediation+f.RefutedBy, "{") {
					t.Errorf("unfilled template in %q / %q / %q", f.Title, f.Remediation, f.RefutedBy)
				}
			}
		})
	}
}

func kubeletRemediation(fs []*nodediagv1.Finding) string {
	if len(fs) == 0 {
		return ""
	}
	return fs[0].Remediation
}

func TestKubeletConfigRules(t *testing.T) {
	bins := []*nodediagv1.Binary{ktKubeletBinary("/usr/bin/kubelet", "v1.33.0", true)}
	invalid := func() *nodediagv1.KubeletConfig {
		kc := ktAzl3Kubelet()
		kc.Config = &nodediagv1.KubeletConfigFile{
			Path: ktConfigPath, Present: true,
			ParseError:     "error converting YAML to JSON: yaml: line 3: mapping values are not allowed in this context",
			ParseErrorLine: &nodediagv1.SourceLine{Path: ktConfigPath, Line: 3, Text: "cgroupDriver: systemd: x"},
		}
		return kc
	}
	missing := func() *nodediagv1.KubeletConfig {
		kc := ktAzl3Kubelet()
		kc.Config = &nodediagv1.KubeletConfigFile{Path: ktConfigPath}
		return kc
	}
	const configFlagQ = ktKubeadmDropIn + ":4: " + ktConfigArgsLine
	tests := []struct {
		name string
		kc   *nodediagv1.KubeletConfig
		ci   *nodediagv1.CloudInit
		want []kubeletFindingSummary
	}{
		{
			name: "config.yaml invalid",
			kc:   invalid(),
			want: []kubeletFindingSummary{{
				ID: "KubeletConfigInvalid", Severity: Error, Confidence: High,
				Title: "kubelet cannot load its configuration /var/lib/kubelet/config.yaml",
				Quotes: []string{
					ktConfigPath + ": error converting YAML to JSON: yaml: line 3: mapping values are not allowed in this context",
					ktConfigPath + ":3: cgroupDriver: systemd: x",
					configFlagQ,
				},
			}},
		},
		{
			name: "config.yaml invalid but not named by an active --config: nothing",
			kc: func() *nodediagv1.KubeletConfig {
				kc := invalid()
				kc.Flags = kc.Flags[1:]
				return kc
			}(),
		},
		{
			name: "config.yaml missing while cloud-init runs (before kubeadm): nothing",
			kc:   missing(),
			ci:   &nodediagv1.CloudInit{Status: "running", RunningStage: "modules-final", StatusSource: "/run/cloud-init/status.json"},
		},
		{
			name: "config.yaml missing and no cloud-init evidence: nothing",
			kc:   missing(),
		},
		{
			name: "config.yaml missing after cloud-init finished in error",
			kc:   missing(),
			ci:   &nodediagv1.CloudInit{Status: "error", ResultPresent: true, StatusSource: "/run/cloud-init/result.json"},
			want: []kubeletFindingSummary{{
				ID: "KubeletConfigMissing", Severity: Error, Confidence: Medium,
				Title:  "the kubelet's configuration /var/lib/kubelet/config.yaml does not exist after the bootstrap ended",
				Quotes: []string{ktConfigPath + ": does not exist", configFlagQ, "/run/cloud-init/result.json: cloud-init status: error"},
			}},
		},
		{
			name: "config.yaml missing although the sentinel is present",
			kc:   missing(),
			ci:   &nodediagv1.CloudInit{Status: "running", SentinelPresent: true, SentinelPath: "/run/cluster-api/bootstrap-success.complete"},
			want: []kubeletFindingSummary{{
				ID: "KubeletConfigMissing", Severity: Error, Confidence: Medium,
				Title:  "the kubelet's configuration /var/lib/kubelet/config.yaml does not exist after the bootstrap ended",
				Quotes: []string{ktConfigPath + ": does not exist", configFlagQ, "/run/cluster-api/bootstrap-success.complete: present: the bootstrap script ran to its end"},
			}},
		},
		{
			name: "cloud-init done but result.json absent (status from an earlier stage): nothing",
			kc:   missing(),
			ci:   &nodediagv1.CloudInit{Status: "done"},
		},
		{
			name: "config present and valid: nothing",
			kc:   ktAzl3Kubelet(),
			ci:   &nodediagv1.CloudInit{Status: "done", ResultPresent: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Flags are judged at 1.33: --pod-infra-container-image only
			// warns, which the config rules must not care about.
			in := newInput(ktKubeletEvidence(tt.kc, bins, tt.ci), Context{})
			var got []*nodediagv1.Finding
			got = append(got, kubeletConfigInvalid(in)...)
			got = append(got, kubeletConfigMissing(in)...)
			if diff := cmp.Diff(tt.want, summarizeKubelet(got), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
		})
	}
}

// TestKubeletRulesThroughEngine runs the incident through the whole
// engine: the removed flag is the first finding and explains the symptoms.
func TestKubeletRulesThroughEngine(t *testing.T) {
	e, err := NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	ev := ktKubeletEvidence(ktAzl3Kubelet(), []*nodediagv1.Binary{ktKubeletBinary("/usr/bin/kubelet", "v1.35.0", true)}, nil)
	res := e.Analyze(ev, Context{})
	var ids []string
	for _, f := range res.Findings {
		ids = append(ids, f.Id)
	}
	if len(ids) == 0 || ids[0] != "KubeletRemovedFlag" {
		t.Errorf("findings = %v, want KubeletRemovedFlag first", ids)
	}
	var names []string
	for _, r := range kubeletRules {
		names = append(names, r.Name)
	}
	if diff := cmp.Diff([]string{"kubelet-flags", "kubelet-config-invalid", "kubelet-config-missing", "kubelet-unknown-flag-source"}, names); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	for _, f := range runKubeletRules(newInput(ev, Context{})) {
		if _, ok := Lookup(f.Id); !ok {
			t.Errorf("finding %s is not in the catalog", f.Id)
		}
	}
}

func TestKubeletDormantRemovedFlagInCatalog(t *testing.T) {
	if err := Validate(); err != nil {
		t.Fatal(err)
	}
	p, ok := Lookup("KubeletDormantRemovedFlag")
	if !ok || p.Severity != Warning || p.Category != CatFlagRemoved {
		t.Fatalf("KubeletDormantRemovedFlag = %+v", p)
	}
}

// Without a binary to ask, the kubelet's own start-up line gives its version.
func TestKubeletVersionFromItsLog(t *testing.T) {
	kc := &nodediagv1.KubeletConfig{Flags: []*nodediagv1.KubeletFlag{{
		Name: "pod-infra-container-image", Value: "x", Active: true, Variable: "KUBELET_EXTRA_ARGS",
		Source: &nodediagv1.SourceLine{Path: "/etc/sysconfig/kubelet", Line: 1, Text: "KUBELET_EXTRA_ARGS=--pod-infra-container-image=x"},
	}}}
	line := `Jun  1 10:00:00 node-1 kubelet[12]: I0601 10:00:00.000000      12 server.go:484] "Kubelet version" kubeletVersion="v1.35.0"`
	ev := &nodediagv1.Evidence{Probes: []*nodediagv1.ProbeEvidence{
		{Name: "kubelet-config", Status: "ok", Data: &nodediagv1.ProbeEvidence_KubeletConfig{KubeletConfig: kc}},
		{Name: "logs", Status: "ok", Data: &nodediagv1.ProbeEvidence_Logs{Logs: &nodediagv1.Logs{Sources: []*nodediagv1.LogExcerpt{{
			Source: "/var/log/messages", Kind: "syslog", Lines: []*nodediagv1.LogLine{{N: 7, Text: line}},
		}}}}},
	}}
	fs := kubeletFlagFindings(&Input{Ev: ev})
	if len(fs) != 1 || fs[0].Id != "KubeletRemovedFlag" || fs[0].Confidence != High {
		t.Fatalf("got %v, want one KubeletRemovedFlag with high confidence", fs)
	}
	if q := fs[0].Evidence[1]; q.Source != "/var/log/messages" || q.Line != 7 {
		t.Errorf("the version's quote = %v, want the kubelet's log line", q)
	}
}

// Without the kubelet's version, its refusal in the log still names the file
// that carries the flag.
func TestKubeletUnknownFlagSource(t *testing.T) {
	src := &nodediagv1.SourceLine{Path: "/etc/sysconfig/kubelet", Line: 1, Text: "KUBELET_EXTRA_ARGS=--improve-speed"}
	kc := &nodediagv1.KubeletConfig{Flags: []*nodediagv1.KubeletFlag{{Name: "improve-speed", Active: true, Source: src}}}
	line := `E0823 13:53:14.926448    8691 run.go:72] "command failed" err="failed to parse kubelet flag: unknown flag: --improve-speed"`
	ev := &nodediagv1.Evidence{Probes: []*nodediagv1.ProbeEvidence{
		{Name: "kubelet-config", Status: "ok", Data: &nodediagv1.ProbeEvidence_KubeletConfig{KubeletConfig: kc}},
		{Name: "journal", Status: "ok", Data: &nodediagv1.ProbeEvidence_Journal{Journal: &nodediagv1.Journal{Sources: []*nodediagv1.LogExcerpt{{
			Source: "journal:kubelet.service", Kind: "kubelet", Lines: []*nodediagv1.LogLine{{Text: line}},
		}}}}},
	}}
	fs := kubeletUnknownFlagSource(&Input{Ev: ev})
	if len(fs) != 1 || fs[0].Title != "kubelet refuses to start: unknown flag --improve-speed set in /etc/sysconfig/kubelet" {
		t.Fatalf("got %v", fs)
	}
	if q := fs[0].Evidence; len(q) != 2 || q[0].Source != "/etc/sysconfig/kubelet" || q[1].Source != "journal:kubelet.service" {
		t.Errorf("quotes %v: want the file's line, then the journal's", q)
	}
}
