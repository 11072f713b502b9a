package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/klauspost/compress/zstd"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/probe"
	"github.com/nodediag/nodediag/agent/probes"
	"github.com/nodediag/nodediag/agent/report"
	"github.com/nodediag/nodediag/agent/rules"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// hostsDir holds the agent's example hosts: real host roots, each with the
// report the agent must produce.
const hostsDir = "../../agent/testdata/hosts"

var (
	exampleOnce    sync.Once
	exampleReports []*nodediagv1.Report
	exampleErr     error
)

// exampleHostReports runs the agent's pipeline (probes, rules, report, the
// evidence included, as `nodediag-agent run` streams it) in process over
// every example host, offline and without running the hosts' binaries: the
// realistic reports the collector receives. Computed once per test binary.
func exampleHostReports(tb testing.TB) []*nodediagv1.Report {
	tb.Helper()
	exampleOnce.Do(func() {
		exampleReports, exampleErr = buildExampleReports()
	})
	if exampleErr != nil {
		tb.Fatalf("building reports of the example hosts: %v", exampleErr)
	}
	return exampleReports
}

func buildExampleReports() ([]*nodediagv1.Report, error) {
	dirs, err := filepath.Glob(filepath.Join(hostsDir, "*", "root"))
	if err != nil {
		return nil, err
	}
	if len(dirs) == 0 {
		return nil, fmt.Errorf("no example hosts under %s", hostsDir)
	}
	sort.Strings(dirs)
	engine, err := rules.NewEngine()
	if err != nil {
		return nil, err
	}
	var out []*nodediagv1.Report
	for _, root := range dirs {
		h, err := host.New(root, host.NoExec{})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", root, err)
		}
		h.Net = host.NoNetwork{}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		ev := probe.RunAll(ctx, h, probes.All())
		cancel()
		res := engine.Analyze(ev, rules.Context{})
		name := filepath.Base(filepath.Dir(root))
		out = append(out, report.Build(ev, res, name))
	}
	return out, nil
}

// summaryOf is the fleet-table line the collector derives from a report.
func summaryOf(node string, r *nodediagv1.Report, at time.Time) *nodediagv1.NodeSummary {
	s := &nodediagv1.NodeSummary{
		NodeName:   node,
		MachineId:  r.GetHost().GetMachineId(),
		ProviderId: "azure:///subscriptions/0000/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/" + node,
		Agent:      r.GetAgent(),
		ReportedAt: timestamppb.New(at),
		RequestId:  r.GetRequestId(),
	}
	for i, f := range r.GetFindings() {
		if i == 0 {
			s.TopId, s.TopTitle, s.TopSeverity = f.GetId(), f.GetTitle(), f.GetSeverity()
		}
		switch f.GetSeverity() {
		case "error", "critical":
			s.Errors++
		case "warning":
			s.Warnings++
		}
	}
	return s
}

func TestExampleReportSizes(t *testing.T) {
	if os.Getenv("STORE_SIZES") == "" {
		t.Skip("set STORE_SIZES=1 to print the sizes of the example reports")
	}
	for _, r := range exampleHostReports(t) {
		b, _ := proto.Marshal(r)
		fast, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
		def, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault))
		better, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBetterCompression))
		t.Logf("%-40s %7d bytes, zstd fastest %6d default %6d better %6d", r.GetHost().GetNodeName(), len(b),
			len(fast.EncodeAll(b, nil)), len(def.EncodeAll(b, nil)), len(better.EncodeAll(b, nil)))
	}
}
