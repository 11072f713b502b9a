package check

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/journal/journaltest"
	"github.com/nodediag/nodediag/agent/rules"
)

// BenchmarkHostLargeJournal: the whole pipeline in process (probes, rules,
// report) on an example host with a large journal
// (NODEDIAG_BENCH_JOURNAL_ENTRIES, 200,000 by default): where a check's time
// goes, for a CPU profile (go test -bench HostLargeJournal -cpuprofile).
// The process-level comparison with journalctl is cmd/nodediag-agent's
// BenchmarkCheckLargeJournal.
func BenchmarkHostLargeJournal(b *testing.B) {
	journaltest.NeedJournalRemote(b)
	n := 200_000
	if s := os.Getenv("NODEDIAG_BENCH_JOURNAL_ENTRIES"); s != "" {
		if v, err := strconv.Atoi(s); err == nil && v > 0 {
			n = v
		}
	}
	root := filepath.Join(b.TempDir(), "root")
	if out, err := exec.Command("cp", "-a", exampleHosts+"healthy-worker/root", root).CombinedOutput(); err != nil {
		b.Fatalf("%v\n%s", err, out)
	}
	t0 := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	journaltest.WriteJournal(b, filepath.Join(root, "var/log/journal/3d1219c7c4c5404aaa1f6d2a48adfda4/system.journal"), journaltest.Options{}, journaltest.NodeJournal(n, t0))
	now := t0.Add(time.Duration(n) * 50 * time.Millisecond)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		h, err := host.New(root, host.NoExec{})
		if err != nil {
			b.Fatal(err)
		}
		h.Net = host.NoNetwork{}
		if _, err := Host(context.Background(), h, Options{Context: rules.Context{Now: now}}); err != nil {
			b.Fatal(err)
		}
	}
}
