package store

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The crash test runs the store in a child process (this test binary again,
// running TestHelperProcess only) and kills it with SIGKILL while it Puts.
const (
	envCrashDir        = "NODEDIAG_STORE_CRASH_DIR"
	envCrashDurability = "NODEDIAG_STORE_CRASH_DURABILITY"
	envCrashFirstSeq   = "NODEDIAG_STORE_CRASH_FIRST_SEQ"
	crashWriters       = 4
)

// TestHelperProcess is the child of TestPutSurvivesProcessKill, not a test:
// it opens the store in $NODEDIAG_STORE_CRASH_DIR and has crashWriters
// goroutines Put reports in a loop, each printing "node seq" on stdout as
// soon as its Put returns nil (the moment the collector would acknowledge
// the upload), until it is killed.
func TestHelperProcess(t *testing.T) {
	dir := os.Getenv(envCrashDir)
	if dir == "" {
		t.Skip("the child process of TestPutSurvivesProcessKill")
	}
	d, err := strconv.Atoi(os.Getenv(envCrashDurability))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	first, err := strconv.ParseUint(os.Getenv(envCrashFirstSeq), 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	// Everything is kept: what the parent checks is never pruned.
	s, err := Open(dir, Options{History: 1 << 30, MaxAge: -1, Durability: Durability(d)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	// Never outlive a parent that failed to kill us.
	time.AfterFunc(2*time.Minute, func() { os.Exit(3) })
	var out sync.Mutex
	var wg sync.WaitGroup
	for w := range crashWriters {
		wg.Go(func() {
			node := fmt.Sprintf("crash-%d", w)
			for seq := first; ; seq++ {
				rec := crashRecord(node, seq)
				if err := s.Put(context.Background(), rec); err != nil {
					fmt.Fprintf(os.Stderr, "put %s %d: %v\n", node, seq, err)
					os.Exit(2)
				}
				// One write(2) per line, straight into the pipe: once it
				// returns, the parent will read the line even if this
				// process is killed right after.
				out.Lock()
				_, err := fmt.Fprintf(os.Stdout, "%s %d\n", node, seq)
				out.Unlock()
				if err != nil {
					os.Exit(2)
				}
			}
		})
	}
	wg.Wait()
}

// crashRecord is a report of a few KB, so that batches span many pages.
func crashRecord(node string, seq uint64) *Record {
	rec := testRecord(node, seq)
	rec.ReceivedAt = time.Now()
	for i := range 40 {
		rec.Report.Gaps = append(rec.Report.Gaps, fmt.Sprintf("/var/log/pods/kube-system_pod-%d-%d/c/0.log: permission denied", seq, i))
	}
	return rec
}

func TestPutSurvivesProcessKill(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a child process")
	}
	for _, d := range []Durability{PowerLoss, ProcessCrash} {
		t.Run(d.String(), func(t *testing.T) {
			dir := t.TempDir()
			// Three kills in a row: each reopen also recovers the
			// write-ahead log the previous child left.
			acked := map[string]map[uint64]bool{}
			for round := range 3 {
				// Each child goes on where the previous one was killed:
				// new seqs, so that nothing is a duplicate.
				for _, line := range runAndKill(t, dir, d, uint64(round)*1_000_000+1, 300) {
					node, seqText, ok := strings.Cut(line, " ")
					seq, err := strconv.ParseUint(seqText, 10, 64)
					if !ok || err != nil {
						t.Fatalf("child printed %q", line)
					}
					if acked[node] == nil {
						acked[node] = map[uint64]bool{}
					}
					acked[node][seq] = true
				}
				checkAcked(t, dir, acked, round)
			}
		})
	}
}

// runAndKill starts the child on dir, reads at least n acknowledgements,
// SIGKILLs it while it is still putting, and returns every line it printed
// (those in the pipe after the kill included).
func runAndKill(t *testing.T, dir string, d Durability, firstSeq uint64, n int) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), envCrashDir+"="+dir, envCrashDurability+"="+strconv.Itoa(int(d)),
		envCrashFirstSeq+"="+strconv.FormatUint(firstSeq, 10))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	var lines []string
	sc := bufio.NewScanner(stdout)
	for len(lines) < n && sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) < n {
		cmd.Wait()
		t.Fatalf("child stopped after %d acknowledgements: %v; stderr:\n%s", len(lines), sc.Err(), stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	err = cmd.Wait()
	killed = true
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die of SIGKILL (%v); stderr:\n%s", err, stderr.String())
	}
	return lines
}

// checkAcked reopens the store and checks that every acknowledged report
// of the rounds so far is stored, whole, and that the database is sound.
func checkAcked(t *testing.T, dir string, acked map[string]map[uint64]bool, round int) {
	t.Helper()
	ctx := context.Background()
	s, err := Open(dir, Options{History: 1 << 30, MaxAge: -1})
	if err != nil {
		t.Fatalf("reopening after kill %d: %v", round+1, err)
	}
	defer s.Close()
	total := 0
	for node, want := range acked {
		recs, err := s.History(ctx, node, 0)
		if err != nil {
			t.Fatalf("History(%s) after kill %d: %v", node, round+1, err)
		}
		have := map[uint64]bool{}
		for _, r := range recs {
			have[r.Seq] = true
			if r.Report.GetRequestId() != fmt.Sprintf("req-%d", r.Seq) || len(r.Report.GetGaps()) != 41 {
				t.Errorf("%s seq %d: report read back is not the one put", node, r.Seq)
			}
		}
		for seq := range want {
			if !have[seq] {
				t.Errorf("kill %d: %s seq %d was acknowledged (Put returned nil) but is not stored", round+1, node, seq)
			}
			total++
		}
	}
	t.Logf("kill %d: %d acknowledged reports checked", round+1, total)
	var res string
	if err := rawDB(t, dir).QueryRow("PRAGMA integrity_check").Scan(&res); err != nil || res != "ok" {
		t.Errorf("integrity_check after kill %d: %q, %v", round+1, res, err)
	}
}
