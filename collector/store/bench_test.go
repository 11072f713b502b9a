package store

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/nodediag/nodediag/internal/loadgen"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

var (
	benchOnce    sync.Once
	benchReport  *nodediagv1.Report
	benchEncoded []byte
	benchErr     error
)

// benchUpload is the report of the disk-full example host, evidence
// included, and its encoding as an agent uploads it (~15 KB).
func benchUpload(b *testing.B) (*nodediagv1.Report, []byte) {
	b.Helper()
	benchOnce.Do(func() {
		benchReport, benchErr = loadgen.ExampleReport("../../agent/testdata/hosts/disk-full/root")
		if benchErr == nil {
			benchEncoded, benchErr = proto.Marshal(benchReport)
		}
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchReport, benchEncoded
}

// BenchmarkPut measures Puts of a realistic report from many concurrent
// agents (as the collector's upload handlers make them: the encoding as
// received, a fresh seq each), for each durability. puts/s is the
// throughput of the whole store; ns/op is per Put across all goroutines.
func BenchmarkPut(b *testing.B) {
	report, enc := benchUpload(b)
	for _, d := range []Durability{PowerLoss, ProcessCrash} {
		// RunParallel runs parallelism*GOMAXPROCS goroutines, each a node.
		for _, parallelism := range []int{1, 32} {
			goroutines := parallelism * runtime.GOMAXPROCS(0)
			b.Run(fmt.Sprintf("%s/goroutines=%d", d, goroutines), func(b *testing.B) {
				s, err := Open(b.TempDir(), Options{Durability: d, MaxAge: -1})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				var nodes, seq atomic.Uint64
				b.SetBytes(int64(len(enc)))
				b.ReportAllocs()
				b.SetParallelism(parallelism)
				start := time.Now()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					node := fmt.Sprintf("bench-%d", nodes.Add(1))
					sum := summaryOf(node, report, time.Now())
					for pb.Next() {
						rec := &Record{
							Summary:    sum,
							AgentStart: start,
							Seq:        seq.Add(1),
							ReceivedAt: time.Now(),
							Encoded:    enc,
						}
						if err := s.Put(context.Background(), rec); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "puts/s")
			})
		}
	}
}
