package probes

import (
	"context"
	"fmt"
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
		t0 := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
		units := []string{"kubelet.service", "containerd.service", "cloud-final.service", "systemd-networkd.service", "sshd.service", "chronyd.service"}
		journaltest.WriteJournal(b, filepath.Join(dir, "var/log/journal/3d1219c7c4c5404aaa1f6d2a48adfda4/system.journal"), journaltest.Options{}, func(yield func(journaltest.Entry) bool) {
			for i := 0; i < n; i++ {
				at := t0.Add(time.Duration(i) * 50 * time.Millisecond)
				boot := "0123456789abcdef0123456789abcdef"
				if i >= n/2 {
					boot = "fedcba9876543210fedcba9876543210"
				}
				unit := units[i%3]
				if i%7 == 0 {
					unit = units[3+i%3]
				}
				sev := "I"
				if i%97 == 0 {
					sev = "E"
				}
				msg := fmt.Sprintf(`%s0501 %s %7d pod_workers.go:1301] "Syncing pod" pod="kube-system/kube-proxy-%d"`, sev, at.Format("15:04:05.000000"), 1876, i%50)
				if unit == "containerd.service" {
					msg = fmt.Sprintf(`time="%s" level=info msg="PullImage \"registry.k8s.io/pause:3.10\" returns image reference"`, at.Format(time.RFC3339Nano))
				}
				if !yield(journaltest.Entry{
					{Name: "__REALTIME_TIMESTAMP", Value: strconv.FormatInt(at.UnixMicro(), 10)},
					{Name: "__MONOTONIC_TIMESTAMP", Value: strconv.FormatInt(int64(i)*50_000+1, 10)},
					{Name: "_BOOT_ID", Value: boot},
					{Name: "_HOSTNAME", Value: "node-1"},
					{Name: "_PID", Value: "1876"},
					{Name: "_SYSTEMD_UNIT", Value: unit},
					{Name: "SYSLOG_IDENTIFIER", Value: unit[:len(unit)-len(".service")]},
					{Name: "PRIORITY", Value: "6"},
					{Name: "MESSAGE", Value: msg},
				}) {
					return
				}
			}
		})
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
