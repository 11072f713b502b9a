package journal

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nodediag/nodediag/agent/host"
)

func TestMain(m *testing.M) {
	code := m.Run()
	fixtureCleanup()
	os.Exit(code)
}

const machineID = "3d1219c7c4c5404aaa1f6d2a48adfda4"

var t0 = time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)

// The node fixture: one node's log of 6000 entries over two boots, written
// as journald lays it out, in several files of both journal directories:
//
//	/var/log/journal/<machine-id>/system@…journal~  entries    0–999  (boot 1)
//	/var/log/journal/<machine-id>/system@…journal   entries 1000–1999 (boot 1)
//	/var/log/journal/<machine-id>/system.journal    entries 2000–3999 (boots 1 and 2)
//	/var/log/journal/<machine-id>/user-1000.journal 300 user entries interleaved in time
//	/run/log/journal/<machine-id>/system.journal    entries 4000–5999 (boot 2)
//
// Boot 2 starts at entry 2500. The files are written once per test binary
// and only read.
const (
	fixtureEntries = 6000
	fixtureBootAt  = 2500
	fixtureUser    = 300
	fixtureStep    = 10 * time.Millisecond
)

var (
	fixtureOnce sync.Once
	fixtureRoot string
	cleanups    []string
	cleanupMu   sync.Mutex
)

func fixtureCleanup() {
	cleanupMu.Lock()
	defer cleanupMu.Unlock()
	for _, d := range cleanups {
		os.RemoveAll(d)
	}
}

// sharedDir makes a directory removed when the test binary ends.
func sharedDir(t testing.TB, pattern string) string {
	d, err := os.MkdirTemp("", pattern)
	if err != nil {
		t.Fatal(err)
	}
	cleanupMu.Lock()
	cleanups = append(cleanups, d)
	cleanupMu.Unlock()
	return d
}

// archivedName is the name journald gives a rotated file.
func archivedName(seq int, rt time.Time, suffix string) string {
	return fmt.Sprintf("system@0123456789abcdef0123456789abcdef-%016x-%016x.journal%s", seq, rt.UnixMicro(), suffix)
}

func nodeFixture(t *testing.T) *host.Host {
	t.Helper()
	needJournalRemote(t)
	fixtureOnce.Do(func() {
		root := sharedDir(t, "journal-fixture-")
		persist := filepath.Join(root, "var/log/journal", machineID)
		volatile := filepath.Join(root, "run/log/journal", machineID)
		part := func(from, to int) func(func(exportEntry) bool) {
			g := nodeLog{n: to - from, offset: from, bootAt: fixtureBootAt, start: t0, step: fixtureStep}
			return g.entries
		}
		// journal-remote only writes names ending in .journal; journald
		// renames a file it finds corrupt or dirty to ….journal~.
		tilde := filepath.Join(persist, archivedName(1, t0, ""))
		writeJournal(t, tilde, part(0, 1000))
		if err := os.Rename(tilde, tilde+"~"); err != nil {
			t.Fatal(err)
		}
		writeJournal(t, filepath.Join(persist, archivedName(1001, t0.Add(1000*fixtureStep), "")), part(1000, 2000))
		writeJournal(t, filepath.Join(persist, "system.journal"), part(2000, 4000))
		writeJournal(t, filepath.Join(persist, "user-1000.journal"), userLog)
		writeJournal(t, filepath.Join(volatile, "system.journal"), part(4000, fixtureEntries))
		fixtureRoot = root
	})
	if fixtureRoot == "" {
		t.Fatal("the fixture could not be written (see the first test that failed)")
	}
	h, err := host.New(fixtureRoot, nil)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// userLog is a user session's log: entries between the system ones
// (5 ms after a 10 ms step), in both boots.
func userLog(yield func(exportEntry) bool) {
	for k := 0; k < fixtureUser; k++ {
		i := k * fixtureEntries / fixtureUser
		rt := t0.Add(time.Duration(i)*fixtureStep + 5*time.Millisecond)
		boot, mono := boot1, time.Duration(i)*fixtureStep+3*time.Second+5*time.Millisecond
		if i >= fixtureBootAt {
			boot, mono = boot2, time.Duration(i-fixtureBootAt)*fixtureStep+2*time.Second+5*time.Millisecond
		}
		e := exportEntry{
			{Name: "__REALTIME_TIMESTAMP", Value: strconv.FormatInt(rt.UnixMicro(), 10)},
			{Name: "__MONOTONIC_TIMESTAMP", Value: strconv.FormatInt(mono.Microseconds(), 10)},
			{Name: "_BOOT_ID", Value: boot},
			{Name: "_HOSTNAME", Value: "node-0"},
			{Name: "_TRANSPORT", Value: "stdout"},
			{Name: "_UID", Value: "1000"},
			{Name: "_SYSTEMD_USER_UNIT", Value: "podman.service"},
			{Name: "_SYSTEMD_UNIT", Value: "user@1000.service"},
			{Name: "SYSLOG_IDENTIFIER", Value: "podman"},
			{Name: "_PID", Value: "4242"},
			{Name: "PRIORITY", Value: "6"},
			{Name: "MESSAGE", Value: fmt.Sprintf("user message %d", k)},
		}
		if !yield(e) {
			return
		}
	}
}
