package probes

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/journal/journaltest"
)

// The journal probe's cost, side by side with journalctl producing the same
// evidence (the kubelet's and containerd's entries of the last boot, export
// format): a generated node journal of NODEDIAG_BENCH_JOURNAL_ENTRIES
// entries (200,000 by default; 2,000,000 makes about 0.7 GB), kubelet,
// containerd and other units over two boots, klog/logrus lines with errors.

var (
	benchJournalRoot string
	benchJournalSize int
)

func benchJournalHost(b *testing.B) *host.Host {
	b.Helper()
	if benchJournalRoot == "" {
		journaltest.NeedJournalRemote(b)
		n := 200_000
		if s := os.Getenv("NODEDIAG_BENCH_JOURNAL_ENTRIES"); s != "" {
			if v, err := strconv.Atoi(s); err == nil && v > 0 {
				n = v
			}
		}
		dir, err := os.MkdirTemp("", "nodediag-journal-bench")
		if err != nil {
			b.Fatal(err)
		}
		benchJournalRoot, benchJournalSize = dir, n
		journaltest.WriteJournal(b, filepath.Join(dir, "var/log/journal/3d1219c7c4c5404aaa1f6d2a48adfda4/system.journal"), journaltest.Options{},
			journaltest.NodeJournal(n, time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)))
	}
	h, err := host.New(benchJournalRoot, nil)
	if err != nil {
		b.Fatal(err)
	}
	return h
}

func TestMain(m *testing.M) {
	code := m.Run()
	if benchJournalRoot != "" {
		os.RemoveAll(benchJournalRoot)
	}
	os.Exit(code)
}

// BenchmarkJournalProbe: the agent's whole journal evidence (reading,
// keeping the lines that matter, deriving unit state).
func BenchmarkJournalProbe(b *testing.B) {
	h := benchJournalHost(b)
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		pe, err := journalProbe{}.Run(context.Background(), h)
		if err != nil || len(pe.GetJournal().GetSources()) == 0 {
			b.Fatalf("journal probe: %v %v", err, pe.GetUnreadable())
		}
	}
	b.StopTimer()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.Sys)/(1<<20), "go-sys-MiB")
	b.ReportMetric(float64(benchJournalSize), "journal-entries")
}

// BenchmarkJournalctlEvidence: journalctl printing the same units' entries
// of the last boot (the evidence an operator would read), to /dev/null.
func BenchmarkJournalctlEvidence(b *testing.B) {
	h := benchJournalHost(b)
	jc, err := exec.LookPath("journalctl")
	if err != nil {
		b.Skip("no journalctl")
	}
	for i := 0; i < b.N; i++ {
		cmd := exec.Command(jc, "-D", filepath.Join(h.Root, "var/log/journal"), "-u", "kubelet", "-u", "containerd", "-u", "cloud-final", "-b", "-o", "export", "--no-pager")
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
	}
}
