package incident

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/nodediag/nodediag/collector/capi"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// BenchmarkDiagnose1000 diagnoses a cluster of 3 control plane and 997
// worker Machines, each with a stored report carrying its evidence (so
// every node is re-judged), a tenth of the workers stuck in Provisioned.
func BenchmarkDiagnose1000(b *testing.B) { benchDiagnose(b, nil) }

// BenchmarkDiagnose1000Cached: the same cluster diagnosed again, the
// re-judged reports kept between calls (as a collector does).
func BenchmarkDiagnose1000Cached(b *testing.B) { benchDiagnose(b, NewRejudgeCache()) }

func benchDiagnose(b *testing.B, cache *RejudgeCache) {
	t := &testing.T{}
	healthy := agentReport(t, "healthy-worker")
	stuck := agentReport(t, "kubelet-1.27-container-runtime-flag")
	var ms []*capi.Machine
	var nrs []NodeReport
	for i := 0; i < 1000; i++ {
		vm := fmt.Sprintf("capz-e2e-md-0-%05d", i)
		phase, src, version := "Running", healthy, "v1.32.3"
		if i%10 == 9 {
			phase, src, version = "Provisioned", stuck, "v1.27.16"
		}
		m := machine(vm, vm, phase, version, i < 3)
		ms = append(ms, m)
		r := proto.Clone(src).(*nodediagv1.Report)
		r.Host.Hostname, r.Host.NodeName = vm, vm
		nrs = append(nrs, NodeReport{Report: r, Summary: &nodediagv1.NodeSummary{NodeName: vm, ProviderId: providerID(vm)}})
	}
	c := cluster(ms...)
	e := testEngine(t)
	if cache != nil {
		if _, err := Diagnose(c, nrs, Options{Now: now, Engine: e, Cache: cache}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := Diagnose(c, nrs, Options{Now: now, Engine: e, Cache: cache}); err != nil {
			b.Fatal(err)
		}
	}
}
