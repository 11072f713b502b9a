package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/nodediag/nodediag/internal/loadgen"
	"github.com/nodediag/nodediag/internal/testenv"
	"github.com/nodediag/nodediag/internal/tlsconfig"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// BenchmarkSweep measures the collector as it runs: `nodediag serve` as a
// process with mutual TLS and its SQLite store on disk, and a simulated
// fleet (internal/loadgen) of 1,000 and 10,000 agents on loopback in the
// benchmark's process, each uploading the report `nodediag-agent check`
// makes of the disk-full example host (evidence included, ~15 KB). One
// iteration is one sweep: every agent asked, every answer stored (acked
// after its commit) and streamed to the operator.
//
// Reported: sweep-s (from the request to SweepDone), reports/s of the
// sweep, connect-reports/s (the storm of every agent connecting and
// uploading at once, as after a collector restart), the collector's peak
// RSS (VmHWM) and its CPU seconds per sweep. The load generator shares the
// machine's two cores with the collector.
func BenchmarkSweep(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("agents=%d", n), func(b *testing.B) { benchmarkSweep(b, n) })
	}
}

func benchmarkSweep(b *testing.B, agents int) {
	bin := testenv.Build(b, collectorPkg)
	pki := filepath.Join(b.TempDir(), "pki")
	if out, err := exec.Command(bin, "certs", "--dir", pki).CombinedOutput(); err != nil {
		b.Fatalf("nodediag certs: %v\n%s", err, out)
	}
	cert := func(n string) string { return filepath.Join(pki, n) }
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(b))
	serve := testenv.Start(b, []string{bin, "serve", "--listen", addr, "--data-dir", b.TempDir(),
		"--tls-cert", cert("server.crt"), "--tls-key", cert("server.key"), "--client-ca", cert("ca.crt"),
		"--log-level", "warn"}, nil, "", 20*time.Second, testenv.DialReady("tcp", addr))
	pid := serve.Cmd.Process.Pid

	report, err := loadgen.ExampleReport(hostRoot(b, "disk-full"))
	if err != nil {
		b.Fatal(err)
	}
	agentTLS, err := tlsconfig.NewClient(cert("agent.crt"), cert("agent.key"), cert("ca.crt"))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	t0 := time.Now()
	sim, err := loadgen.Start(ctx, loadgen.Options{Addr: addr, TLS: agentTLS, Agents: agents, Report: report})
	if err != nil {
		b.Fatalf("%v\ncollector:\n%s", err, serve.Output())
	}
	defer sim.Stop()
	connectStorm := time.Since(t0)

	opTLS, err := tlsconfig.NewClient(cert("operator.crt"), cert("operator.key"), cert("ca.crt"))
	if err != nil {
		b.Fatal(err)
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(opTLS)))
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Close()
	fleetc := nodediagv1.NewFleetClient(cc)

	cpu0, err := testenv.Usage(pid)
	if err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		s, err := fleetc.Sweep(ctx, &nodediagv1.SweepRequest{})
		if err != nil {
			b.Fatal(err)
		}
		answers := 0
		var done *nodediagv1.SweepDone
		for done == nil {
			ev, err := s.Recv()
			if err != nil {
				b.Fatalf("sweep: %v after %d answers\ncollector:\n%.4000s", err, answers, serve.Output())
			}
			switch {
			case ev.GetAnswer() != nil:
				answers++
			case ev.GetDone() != nil:
				done = ev.GetDone()
			}
		}
		total += time.Since(start)
		if int(done.Answered) != agents || answers != agents {
			b.Fatalf("sweep %d: %d answered (%d streamed) of %d, missing %d, timed out %v", i, done.Answered, answers, agents, len(done.Missing), done.TimedOut)
		}
	}
	b.StopTimer()
	u, err := testenv.Usage(pid)
	if err != nil {
		b.Fatal(err)
	}
	perSweep := total / time.Duration(b.N)
	b.ReportMetric(perSweep.Seconds(), "sweep-s")
	b.ReportMetric(float64(agents)/perSweep.Seconds(), "reports/s")
	b.ReportMetric(float64(agents)/connectStorm.Seconds(), "connect-reports/s")
	b.ReportMetric(float64(u.PeakRSS)/(1<<20), "collector-peak-MiB")
	b.ReportMetric((u.CPU-cpu0.CPU).Seconds()/float64(b.N), "collector-cpu-s/sweep")
	if errs := sim.Errors(); len(errs) > 0 {
		b.Errorf("simulated agents failed: %v", errs)
	}
}
