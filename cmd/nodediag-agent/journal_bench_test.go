package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nodediag/nodediag/agent/journal/journaltest"
)

// The whole check on a node whose journal is large, side by side with
// journalctl printing the evidence an operator would read of it: the
// kubelet's and containerd's entries of the last boot, in export format
// (journalctl -D DIR -u kubelet -u containerd -b -o export), and the same
// over the last ten minutes (--since). Both run as processes; their CPU
// (user + system, from the child's rusage) and peak RSS are compared. The
// journal has NODEDIAG_BENCH_JOURNAL_ENTRIES entries (200,000 by default;
// 2,000,000 is about 0.7 GB).

var largeJournalRoot string

func setupLargeJournal(b *testing.B) string {
	b.Helper()
	setupBench(b)
	if largeJournalRoot != "" {
		return largeJournalRoot
	}
	journaltest.NeedJournalRemote(b)
	n := 200_000
	if s := os.Getenv("NODEDIAG_BENCH_JOURNAL_ENTRIES"); s != "" {
		if v, err := strconv.Atoi(s); err == nil && v > 0 {
			n = v
		}
	}
	root := filepath.Join(filepath.Dir(benchRoot), "journal-root")
	if out, err := exec.Command("cp", "-a", "../../agent/testdata/hosts/healthy-worker/root", root).CombinedOutput(); err != nil {
		b.Fatalf("copy host: %v\n%s", err, out)
	}
	journaltest.WriteJournal(b, filepath.Join(root, "var/log/journal/3d1219c7c4c5404aaa1f6d2a48adfda4/system.journal"), journaltest.Options{},
		journaltest.NodeJournal(n, largeJournalT0))
	largeJournalRoot = root
	b.Logf("journal of %d entries", n)
	return root
}

var largeJournalT0 = time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)

// cpuOf runs argv and returns the child's CPU time (user + system).
func cpuOf(b *testing.B, argv ...string) time.Duration {
	b.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); err != nil && !(ok && ee.ExitCode() <= 2) {
		b.Fatalf("%v: %v", argv, err)
	}
	return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
}

// BenchmarkCheckLargeJournal reports the check's CPU per run and its ratio
// to journalctl's (cpu-ratio), the same with --since 10m (since-ratio), and
// the check's peak RSS.
func BenchmarkCheckLargeJournal(b *testing.B) {
	root := setupLargeJournal(b)
	jdir := filepath.Join(root, "var/log/journal")
	// The end of the journal: --now and --since name the same window.
	end := largeJournalEnd(b, root)
	since := end.Add(-10 * time.Minute)
	var agent, jctl, agentSince, jctlSince time.Duration
	var maxRSS int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		agent += cpuOf(b, benchBin, "check", "--root", root, "--output", "json", "--exec", "none", "--offline", "--now", end.Format(time.RFC3339))
		jctl += cpuOf(b, "journalctl", "-D", jdir, "-u", "kubelet.service", "-u", "containerd.service", "-b", "-o", "export", "--no-pager", "-q")
		agentSince += cpuOf(b, benchBin, "check", "--root", root, "--output", "json", "--exec", "none", "--offline", "--now", end.Format(time.RFC3339), "--since", "10m")
		jctlSince += cpuOf(b, "journalctl", "-D", jdir, "-u", "kubelet.service", "-u", "containerd.service", "--since", since.Format("2006-01-02 15:04:05"), "-o", "export", "--no-pager", "-q")
		measure(b, []string{benchBin, "check", "--root", root, "--output", "json", "--exec", "none", "--offline", "--now", end.Format(time.RFC3339)}, &maxRSS)
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(agent.Seconds()/n, "check-cpu-s")
	b.ReportMetric(jctl.Seconds()/n, "journalctl-cpu-s")
	b.ReportMetric(agent.Seconds()/jctl.Seconds(), "cpu-ratio")
	b.ReportMetric(agentSince.Seconds()/n, "check-since10m-cpu-s")
	b.ReportMetric(jctlSince.Seconds()/n, "journalctl-since10m-cpu-s")
	b.ReportMetric(agentSince.Seconds()/jctlSince.Seconds(), "since-ratio")
	if maxRSS > 0 {
		b.ReportMetric(float64(maxRSS)/1024, "check-maxRSS-MiB")
	}
}

// largeJournalEnd is the time of the journal's last entry.
func largeJournalEnd(b *testing.B, root string) time.Time {
	b.Helper()
	n := 200_000
	if s := os.Getenv("NODEDIAG_BENCH_JOURNAL_ENTRIES"); s != "" {
		if v, err := strconv.Atoi(s); err == nil && v > 0 {
			n = v
		}
	}
	return largeJournalT0.Add(time.Duration(n-1) * 50 * time.Millisecond).Add(time.Second)
}
