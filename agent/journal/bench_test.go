package journal

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nodediag/nodediag/agent/host"
)

// The benchmarks compare, side by side, the reader and journalctl on the
// same generated journal: the kubelet and containerd entries of the last
// boot, as the journal probe asks for them. The journal has
// NODEDIAG_BENCH_JOURNAL_ENTRIES entries (200k by default, so that make
// bench stays short; 2000000 makes the ~1 GB journal of the issue), written
// once per run by systemd-journal-remote, which rotates its output by itself
// at about 174k entries: a multi-file /var/log/journal/<machine-id>/.

var (
	generatedMu sync.Mutex
	generated   = map[int]string{}
)

func benchEntries(b *testing.B) int {
	n := 200_000
	if s := os.Getenv("NODEDIAG_BENCH_JOURNAL_ENTRIES"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 100 {
			b.Fatalf("NODEDIAG_BENCH_JOURNAL_ENTRIES=%q: want a number ≥ 100", s)
		}
		n = v
	}
	return n
}

// generatedJournal returns a host whose /var/log/journal/<machine-id>/
// holds the node log of n entries over two boots, written by one run of
// systemd-journal-remote (which rotates its output at about 174k entries,
// so that the files share their seqnum source, as journald's do). Each size
// is written once per test binary.
func generatedJournal(tb testing.TB, n int) *host.Host {
	tb.Helper()
	needJournalRemote(tb)
	generatedMu.Lock()
	defer generatedMu.Unlock()
	root, ok := generated[n]
	if !ok {
		root = sharedDir(tb, "journal-generated-")
		start := time.Now()
		g := nodeLog{n: n, start: t0, step: 10 * time.Millisecond}
		writeJournal(tb, filepath.Join(root, "var/log/journal", machineID, "system.journal"), g.entries)
		var size int64
		files, _ := filepath.Glob(filepath.Join(root, "var/log/journal", machineID, "*"))
		for _, f := range files {
			if fi, err := os.Stat(f); err == nil {
				size += fi.Size()
			}
		}
		tb.Logf("generated journal: %d entries, %d files, %d MiB, written in %s", n, len(files), size>>20, time.Since(start).Round(time.Millisecond))
		generated[n] = root
	}
	h, err := host.New(root, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

// benchJournal returns the host of the bench journal.
func benchJournal(b *testing.B) *host.Host {
	b.Helper()
	return generatedJournal(b, benchEntries(b))
}

// unitClauses are the matches journalctl -u UNIT adds (systemd 252's
// add_matches_for_unit): the unit's own entries, its coredumps, what PID 1
// says about it, and what privileged daemons say about it.
func unitClauses(unit string) [][]Term {
	return [][]Term{
		{{"_SYSTEMD_UNIT", unit}},
		{{"MESSAGE_ID", "fc2e22bc6ee647b6b90729ab34a250b1"}, {"_UID", "0"}, {"COREDUMP_UNIT", unit}},
		{{"_PID", "1"}, {"UNIT", unit}},
		{{"_UID", "0"}, {"OBJECT_SYSTEMD_UNIT", unit}},
	}
}

var benchFields = []string{"MESSAGE", "_SYSTEMD_UNIT", "UNIT", "_PID", "PRIORITY"}

// readerLastBoot does what the journal probe does: open the journal, find
// the last boot, stream the kubelet and containerd entries of that boot.
func readerLastBoot(b *testing.B, h *host.Host) int {
	j, err := Open(h, "/var/log/journal")
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	boots, err := j.Boots()
	if err != nil || len(boots) == 0 {
		b.Fatalf("Boots: %v %v", boots, err)
	}
	q := Query{
		Any:    append(unitClauses("kubelet.service"), unitClauses("containerd.service")...),
		BootID: boots[len(boots)-1].ID,
		Fields: benchFields,
	}
	n := 0
	if err := j.Query(q, func(e *Entry) bool {
		n++
		return true
	}); err != nil {
		b.Fatal(err)
	}
	if len(j.Problems) > 0 {
		b.Fatalf("problems: %v", j.Problems)
	}
	return n
}

// resetPeakRSS resets the process's peak RSS (VmHWM), so that it measures
// what follows only (Linux ≥ 4.0).
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// peakRSS reads the process's peak RSS in bytes.
func peakRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func BenchmarkQueryKubeletContainerdLastBoot(b *testing.B) {
	h := benchJournal(b)
	runtime.GC()
	resetOK := resetPeakRSS()
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for b.Loop() {
		n = readerLastBoot(b, h)
	}
	b.StopTimer()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(n), "entries/op")
	b.ReportMetric(float64(ms.HeapSys)/(1<<20), "heap-sys-MiB")
	b.ReportMetric(float64(ms.Sys)/(1<<20), "go-sys-MiB")
	if resetOK {
		b.ReportMetric(float64(peakRSS())/(1<<20), "peak-RSS-MiB")
	}
	if want := journalctlCount(b, h); n != want {
		b.Errorf("reader yields %d entries, journalctl %d", n, want)
	}
}

func BenchmarkJournalctlSameQuery(b *testing.B) {
	h := benchJournal(b)
	jctl := needJournalctl(b)
	dir := filepath.Join(h.Root, "var/log/journal")
	var maxRSS int64
	b.ResetTimer()
	for b.Loop() {
		cmd := exec.Command(jctl, "-D", dir, "-u", "kubelet", "-u", "containerd", "-b", "-o", "export", "--no-pager")
		devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			b.Fatal(err)
		}
		cmd.Stdout = devnull
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			b.Fatalf("journalctl: %v %s", err, stderr.String())
		}
		devnull.Close()
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			maxRSS = max(maxRSS, ru.Maxrss<<10)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(maxRSS)/(1<<20), "peak-RSS-MiB")
}

// journalctlCount counts what journalctl prints for the benchmark's query.
func journalctlCount(b *testing.B, h *host.Host) int {
	jctl := needJournalctl(b)
	out, err := exec.Command(jctl, "-D", filepath.Join(h.Root, "var/log/journal"), "-u", "kubelet", "-u", "containerd", "-b", "-o", "export", "--no-pager").Output()
	if err != nil {
		b.Fatalf("journalctl: %v", err)
	}
	return bytes.Count(out, []byte("\n__CURSOR=")) + boolInt(bytes.HasPrefix(out, []byte("__CURSOR=")))
}

func boolInt(v bool) int {
	if v {
		return 1
	}
	return 0
}
