package report

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/nodediag/nodediag/agent/rules"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

func finding(id, sev, title string, excerpts ...string) *nodediagv1.Finding {
	f := &nodediagv1.Finding{Id: id, Category: "kubelet.flag-removed", Severity: sev, Confidence: "high", Title: title, Remediation: "fix it in " + id}
	for i, e := range excerpts {
		f.Evidence = append(f.Evidence, &nodediagv1.Quote{Source: "/etc/sysconfig/kubelet", Line: int32(i + 1), Excerpt: e})
	}
	return f
}

func TestCompactIsBoundedOnHugeInput(t *testing.T) {
	huge := strings.Repeat("é", 1<<20) // 2 MiB of two-byte runes: cuts must respect rune boundaries
	r := &nodediagv1.Report{
		Host:  &nodediagv1.HostInfo{NodeName: strings.Repeat("n", 10000)},
		Gaps:  []string{huge},
		Agent: &nodediagv1.AgentInfo{Version: "dev"},
	}
	r.Findings = append(r.Findings, finding("KubeletRemovedFlag", "error", huge, huge, huge, "short"))
	for i := 0; i < 10000; i++ {
		r.Findings = append(r.Findings, finding("DiskNearlyFull", "warning", huge[:1000]))
	}
	out := Compact(r)
	if len(out) > MaxCompact {
		t.Fatalf("compact output is %d bytes, over %d", len(out), MaxCompact)
	}
	if !utf8.ValidString(out) {
		t.Error("compact output cut a rune in half")
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if !strings.HasPrefix(lines[len(lines)-1], "SUMMARY error") {
		t.Errorf("last line %q, want the SUMMARY", lines[len(lines)-1])
	}
	if !strings.Contains(out, "fix: fix it in KubeletRemovedFlag") {
		t.Error("the top finding's fix was crowded out")
	}
	if !strings.Contains(out, "evidence: /etc/sysconfig/kubelet:1:") {
		t.Error("the top finding's first evidence was crowded out")
	}
}

func TestCompactKeepsEverythingWhenSmall(t *testing.T) {
	r := &nodediagv1.Report{Host: &nodediagv1.HostInfo{NodeName: "node-1"}}
	r.Findings = []*nodediagv1.Finding{
		finding("KubeletRemovedFlag", "error", "kubelet v1.35.0 rejects --pod-infra-container-image", "KUBELET_EXTRA_ARGS=--pod-infra-container-image=x"),
		finding("BootstrapSentinelMissing", "error", "sentinel missing"),
	}
	r.Findings[1].Consequence = true
	want := `nodediag: ERROR KubeletRemovedFlag [kubelet.flag-removed]: kubelet v1.35.0 rejects --pod-infra-container-image
evidence: /etc/sysconfig/kubelet:1: KUBELET_EXTRA_ARGS=--pod-infra-container-image=x
fix: fix it in KubeletRemovedFlag
look: /etc/sysconfig/kubelet
also: BootstrapSentinelMissing (error, consequence): sentinel missing
SUMMARY error node-1 KubeletRemovedFlag: kubelet v1.35.0 rejects --pod-infra-container-image (2 error)
`
	if got := Compact(r); got != want {
		t.Errorf("Compact =\n%s\nwant\n%s", got, want)
	}
}

func TestSummary(t *testing.T) {
	tests := []struct {
		name string
		fs   []*nodediagv1.Finding
		want string
	}{
		{"healthy", nil, "SUMMARY ok node-1: no finding at error or above"},
		{"warnings only", []*nodediagv1.Finding{finding("DiskNearlyFull", "warning", "/var is 88% full")},
			"SUMMARY ok node-1: no finding at error or above (1 warning); top: DiskNearlyFull: /var is 88% full"},
		{"info only", []*nodediagv1.Finding{finding("BootstrapInProgress", "info", "cloud-init is still running")},
			"SUMMARY ok node-1: no finding at error or above (1 info)"},
		{"errors", []*nodediagv1.Finding{finding("SwapEnabled", "error", "swap is on"), finding("DiskNearlyFull", "warning", "x")},
			"SUMMARY error node-1 SwapEnabled: swap is on (1 error, 1 warning)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &nodediagv1.Report{Host: &nodediagv1.HostInfo{NodeName: "node-1"}, Findings: tt.fs}
			if got := Summary(r); got != tt.want {
				t.Errorf("Summary = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestWriteTextEndsWithSummary(t *testing.T) {
	r := &nodediagv1.Report{
		Agent:    &nodediagv1.AgentInfo{Version: "dev"},
		Host:     &nodediagv1.HostInfo{NodeName: "node-1", Root: "/"},
		Findings: []*nodediagv1.Finding{finding("SwapEnabled", "error", "swap is on", "Filename Type\n/swapfile file")},
		Gaps:     []string{"logs: cannot read /var/log/syslog: permission denied"},
		Probes:   []*nodediagv1.ProbeStatus{{Name: "swap", Status: "ok"}},
	}
	var b bytes.Buffer
	if err := WriteText(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"1. ERROR SwapEnabled", "     /etc/sysconfig/kubelet:1\n       Filename Type\n       /swapfile file\n", "not seen", "permission denied", "probes: swap ok"} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q:\n%s", want, out)
		}
	}
	if !strings.HasSuffix(out, "SUMMARY error node-1 SwapEnabled: swap is on (1 error)\n") {
		t.Errorf("text output does not end with the summary:\n%s", out)
	}
}

func TestWriteJSONIsTheContract(t *testing.T) {
	r := &nodediagv1.Report{
		Agent:    &nodediagv1.AgentInfo{Version: "dev"},
		Findings: []*nodediagv1.Finding{finding("SwapEnabled", "error", "swap is on", "x")},
		Probes:   []*nodediagv1.ProbeStatus{{Name: "swap", Status: "ok", DurationMs: 3}},
		Evidence: &nodediagv1.Evidence{CollectedAt: nil, Snapshot: true},
	}
	var b bytes.Buffer
	if err := WriteJSON(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{`"duration_ms": 3`, `"severity": "error"`, `"findings": [`, `"excerpt": "x"`} {
		if !strings.Contains(out, want) {
			t.Errorf("JSON lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, `"evidence": {`) || strings.Contains(out, "snapshot") {
		t.Errorf("JSON output must not carry the raw evidence:\n%s", out)
	}
	var back nodediagv1.Report
	if err := protojson.Unmarshal(b.Bytes(), &back); err != nil {
		t.Errorf("JSON output does not parse back: %v", err)
	}
}

func FuzzCompact(f *testing.F) {
	f.Add("KubeletRemovedFlag", "kubelet rejects a flag", "KUBELET_EXTRA_ARGS=--x", "gap")
	f.Fuzz(func(t *testing.T, id, title, excerpt, gap string) {
		r := &nodediagv1.Report{Gaps: []string{gap}}
		for i := 0; i < 50; i++ {
			r.Findings = append(r.Findings, finding(id, "error", title, excerpt, excerpt))
		}
		if out := Compact(r); len(out) > MaxCompact {
			t.Fatalf("%d bytes", len(out))
		}
	})
}

// TestBuildLeavesItsInputs: the evidence and the rules' findings given to
// Build are not changed (the report redacts its own copies).
func TestBuildLeavesItsInputs(t *testing.T) {
	ev := &nodediagv1.Evidence{Probes: []*nodediagv1.ProbeEvidence{{Name: "logs", Status: "ok", Data: &nodediagv1.ProbeEvidence_Logs{Logs: &nodediagv1.Logs{Sources: []*nodediagv1.LogExcerpt{{
		Source: "/var/log/cloud-init-output.log", Lines: []*nodediagv1.LogLine{{N: 1, Text: "kubeadm join --token abcdef.0123456789abcdef 10.0.0.4:6443"}},
	}}}}}}}
	res := rules.Result{Findings: []*nodediagv1.Finding{{Id: "X", Title: "token abcdef.0123456789abcdef", Severity: "error"}}}
	evBefore, fBefore := proto.Clone(ev), proto.Clone(res.Findings[0])
	r := Build(ev, res, "n")
	if !proto.Equal(ev, evBefore) || !proto.Equal(res.Findings[0], fBefore) {
		t.Fatal("Build changed its inputs")
	}
	if strings.Contains(r.GetFindings()[0].GetTitle(), "0123456789abcdef") || strings.Contains(r.GetEvidence().GetProbes()[0].GetLogs().GetSources()[0].GetLines()[0].GetText(), "0123456789abcdef") {
		t.Error("the report is not redacted")
	}
}
