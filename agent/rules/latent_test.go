package rules_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nodediag/nodediag/agent/rules"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// Swap on a node whose kubelet exits on an unknown flag: the kubelet never
// reaches its swap check, so the flag is what stops it now and swap is a
// warning that explains nothing; a kubelet that does refuse swap keeps
// SwapEnabled an error.
func TestLatentContradiction(t *testing.T) {
	swap := &nodediagv1.ProbeEvidence{Name: "swap", Status: "ok", Data: &nodediagv1.ProbeEvidence_Swap{Swap: &nodediagv1.Swap{
		Devices: []*nodediagv1.SwapDevice{{Filename: "/swap.img", Type: "file", SizeKib: 2 << 20,
			Line: &nodediagv1.SourceLine{Path: "/proc/swaps", Line: 2, Text: "/swap.img file 2097152 0 -2"}}},
	}}}
	kubelet := func(lines ...string) *nodediagv1.Evidence {
		src := &nodediagv1.LogExcerpt{Source: "journal:kubelet.service", Kind: "kubelet"}
		for i, l := range lines {
			src.Lines = append(src.Lines, logLine(int32(i+1), time.Duration(i)*time.Minute, l))
		}
		src.TotalLines = int64(len(src.Lines))
		ev := logsEvidence(src)
		ev.Probes = append(ev.Probes, swap)
		return ev
	}
	var flagLines, swapLines []string
	for range 20 {
		flagLines = append(flagLines, "F1011 13:59:52.481207    5188 server.go:148] unknown flag: --cadvisor-port")
		swapLines = append(swapLines, `E1215 01:35:15.919309    8470 run.go:72] "command failed" err="failed to run Kubelet: running with swap on is not supported, please disable swap or set --fail-swap-on flag to false"`)
	}

	fs := analyze(t, kubelet(flagLines...), rules.Context{})
	sw := findingByID(fs, "SwapEnabled")
	if sw == nil || sw.Severity != rules.Warning {
		t.Fatalf("kubelet exits on a flag: SwapEnabled %v, want a warning", sw)
	}
	if len(sw.Explains) != 0 {
		t.Errorf("a latent SwapEnabled explains %v", sw.Explains)
	}
	if !strings.Contains(sw.Title, "not what stops the kubelet now") {
		t.Errorf("title %q does not say it is not the cause now", sw.Title)
	}
	if fs[0].Id != "KubeletUnknownFlag" {
		t.Errorf("first finding %s, want KubeletUnknownFlag", fs[0].Id)
	}

	fs = analyze(t, kubelet(swapLines...), rules.Context{})
	if sw := findingByID(fs, "SwapEnabled"); sw == nil || sw.Severity != rules.Error || fs[0] != sw {
		t.Errorf("kubelet refuses swap: SwapEnabled %v, want the first finding, an error", sw)
	}
}
