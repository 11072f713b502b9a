package server

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// benchReport is a report of about 15 KB: twelve findings quoting
// evidence, the size of a real report's findings part.
func benchReport(node string) *nodediagv1.Report {
	r := report(node, "")
	for i := range 12 {
		f := finding(fmt.Sprintf("Problem%d", i), "kubelet.flag-removed", "error")
		f.Remediation = strings.Repeat("Remove the flag from /etc/sysconfig/kubelet and restart the kubelet. ", 4)
		for j := range 4 {
			f.Evidence = append(f.Evidence, &nodediagv1.Quote{
				Source:  "journal:kubelet.service",
				Line:    int32(j + 1),
				Excerpt: strings.Repeat("E0501 12:00:00.000000 1234 server.go:310] failed to run Kubelet ", 3),
			})
		}
		r.Findings = append(r.Findings, f)
	}
	return r
}

// BenchmarkUpload measures stored and acknowledged reports per second:
// agents (multiplexed on a few bufconn connections) each upload ~15 KB
// reports one after the other, waiting for each Ack, into the real SQLite
// store with its default durability.
func BenchmarkUpload(b *testing.B) {
	for _, agents := range []int{10, 100} {
		b.Run(fmt.Sprintf("agents=%d", agents), func(b *testing.B) {
			h := newHarness(b, Options{}, nil)
			conns := make([]*grpc.ClientConn, 4)
			for i := range conns {
				conns[i] = h.dial()
			}
			as := make([]*agent, agents)
			for i := range as {
				as[i] = join(b, conns[i%len(conns)], fmt.Sprintf("node-%03d", i))
			}
			reports := make([]*nodediagv1.Report, agents)
			for i := range reports {
				reports[i] = benchReport(as[i].node)
			}
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			errs := make(chan error, agents)
			for i, a := range as {
				n := b.N / agents
				if i < b.N%agents {
					n++
				}
				wg.Go(func() {
					for range n {
						seq, err := a.trySend(reports[i], "interval")
						if err == nil {
							var m *nodediagv1.CollectorMessage
							m, err = a.stream.Recv()
							if err == nil && m.GetAck().GetSeq() != seq {
								err = fmt.Errorf("%s: got %v, want the ack of %d", a.node, m, seq)
							}
						}
						if err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "reports/s")
			b.ReportMetric(float64(proto.Size(reports[0])), "bytes/report")
		})
	}
}
