package journal

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/host/hosttest"
)

// journalctlExport runs journalctl over the host's journal directories and
// returns the entries it prints in export format.
func journalctlExport(t *testing.T, h *host.Host, args ...string) []exportEntry {
	t.Helper()
	jctl := needJournalctl(t)
	argv := append([]string{"--root", h.Root, "-o", "export", "--no-pager"}, args...)
	cmd := exec.Command(jctl, argv...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("journalctl %s: %v\n%s", strings.Join(argv, " "), err, stderr.String())
	}
	es, err := parseExport(out)
	if err != nil {
		t.Fatalf("parsing journalctl's export output: %v", err)
	}
	return es
}

// comparable is what the differential test compares of an entry.
type comparable struct {
	Realtime  string
	Monotonic string
	Seqnum    uint64
	BootID    string
	Fields    map[string]string
}

// fromExport converts an entry printed by journalctl, keeping the fields
// named in keep (all data fields when keep is nil). A repeated field keeps
// its first value, as the reader does.
func fromExport(t *testing.T, e exportEntry, keep []string) comparable {
	t.Helper()
	seq, err := cursorSeqnum(e.Get("__CURSOR"))
	if err != nil {
		t.Fatal(err)
	}
	c := comparable{
		Realtime:  e.Get("__REALTIME_TIMESTAMP"),
		Monotonic: e.Get("__MONOTONIC_TIMESTAMP"),
		Seqnum:    seq,
		BootID:    e.Get("_BOOT_ID"),
		Fields:    map[string]string{},
	}
	for _, f := range e {
		if strings.HasPrefix(f.Name, "__") {
			continue
		}
		if keep != nil && !contains(keep, f.Name) {
			continue
		}
		if _, dup := c.Fields[f.Name]; !dup {
			c.Fields[f.Name] = f.Value
		}
	}
	return c
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func fromEntry(e *Entry) comparable {
	return comparable{
		Realtime:  strconv.FormatInt(e.Realtime.UnixMicro(), 10),
		Monotonic: strconv.FormatInt(e.Monotonic.Microseconds(), 10),
		Seqnum:    e.Seqnum,
		BootID:    e.BootID,
		Fields:    e.Fields,
	}
}

// queryAll runs a query and collects what it yields.
func queryAll(t *testing.T, j *Journal, q Query) []*Entry {
	t.Helper()
	var out []*Entry
	if err := j.Query(q, func(e *Entry) bool {
		out = append(out, e)
		return true
	}); err != nil {
		t.Fatalf("Query: %v", err)
	}
	return out
}

var compared = []string{"MESSAGE", "_SYSTEMD_UNIT", "UNIT", "_PID", "PRIORITY", "_BOOT_ID", "SYSLOG_IDENTIFIER"}

// TestDifferentialJournalctl checks that the reader yields the entries
// journalctl prints for the same files: same entries, same order, same
// values, with and without matches.
func TestDifferentialJournalctl(t *testing.T) {
	h := nodeFixture(t)
	j, err := Open(h, DefaultDirs...)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if len(j.Problems) != 0 {
		t.Fatalf("problems opening the fixture: %v", j.Problems)
	}
	if got, want := len(j.Files), 5; got != want {
		t.Fatalf("%d files, want %d", got, want)
	}

	kubelet := []Term{{"_SYSTEMD_UNIT", "kubelet.service"}}
	pid1Kubelet := []Term{{"UNIT", "kubelet.service"}, {"_PID", "1"}}
	containerd := []Term{{"_SYSTEMD_UNIT", "containerd.service"}}
	pid1Containerd := []Term{{"_PID", "1"}, {"UNIT", "containerd.service"}}
	tests := []struct {
		name      string
		q         Query
		journalct []string
		minCount  int
	}{
		{
			name:     "all entries, all fields",
			q:        Query{},
			minCount: fixtureEntries + fixtureUser,
		},
		{
			name:      "kubelet unit",
			q:         Query{Any: [][]Term{kubelet}, Fields: compared},
			journalct: []string{"_SYSTEMD_UNIT=kubelet.service"},
			minCount:  1500,
		},
		{
			name:      "kubelet unit or PID 1 about kubelet",
			q:         Query{Any: [][]Term{kubelet, pid1Kubelet}, Fields: compared},
			journalct: []string{"_SYSTEMD_UNIT=kubelet.service", "+", "UNIT=kubelet.service", "_PID=1"},
			minCount:  1500,
		},
		{
			name:      "boot 1",
			q:         Query{BootID: boot1, Fields: compared},
			journalct: []string{"_BOOT_ID=" + boot1},
			minCount:  fixtureBootAt,
		},
		{
			name:      "kubelet and containerd of the last boot",
			q:         Query{Any: [][]Term{kubelet, pid1Kubelet, containerd, pid1Containerd}, BootID: strings.ToUpper(boot2), Fields: compared},
			journalct: []string{"-b", boot2, "_SYSTEMD_UNIT=kubelet.service", "+", "UNIT=kubelet.service", "_PID=1", "+", "_SYSTEMD_UNIT=containerd.service", "+", "_PID=1", "UNIT=containerd.service"},
			minCount:  2000,
		},
		{
			name:      "a user unit",
			q:         Query{Any: [][]Term{{{"_SYSTEMD_USER_UNIT", "podman.service"}, {"_UID", "1000"}}}, Fields: compared},
			journalct: []string{"_SYSTEMD_USER_UNIT=podman.service", "_UID=1000"},
			minCount:  fixtureUser,
		},
		{
			name:      "no such unit",
			q:         Query{Any: [][]Term{{{"_SYSTEMD_UNIT", "nosuch.service"}}}},
			journalct: []string{"_SYSTEMD_UNIT=nosuch.service"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := journalctlExport(t, h, tc.journalct...)
			got := queryAll(t, j, tc.q)
			if len(got) < tc.minCount {
				t.Errorf("%d entries, want at least %d", len(got), tc.minCount)
			}
			if len(got) != len(want) {
				t.Errorf("reader yields %d entries, journalctl prints %d", len(got), len(want))
			}
			for i := 0; i < min(len(got), len(want)); i++ {
				w := fromExport(t, want[i], tc.q.Fields)
				g := fromEntry(got[i])
				if d := cmp.Diff(w, g); d != "" {
					t.Fatalf("entry %d (-journalctl +reader):\n%s", i, d)
				}
			}
			if len(j.Problems) != 0 {
				t.Errorf("problems: %v", j.Problems)
			}
		})
	}
}

// TestDifferentialRotated compares the reader with journalctl on files
// that one writer rotated: they share a seqnum source, so entries are
// ordered across files by seqnum, as in a journald's /var/log/journal.
func TestDifferentialRotated(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a journal of 200k entries (about 10 s)")
	}
	h := generatedJournal(t, 200_000)
	j := openHost(t, h)
	if len(j.Files) < 2 {
		t.Fatalf("%d files: the writer did not rotate", len(j.Files))
	}
	if j.Files[0].hdr.seqnumID != j.Files[1].hdr.seqnumID {
		t.Fatal("the rotated files do not share their seqnum ID")
	}
	boots, err := j.Boots()
	if err != nil || len(boots) != 2 {
		t.Fatalf("boots %v %v", boots, err)
	}
	q := Query{
		Any:    [][]Term{{{"_SYSTEMD_UNIT", "kubelet.service"}}, {{"_PID", "1"}, {"UNIT", "kubelet.service"}}, {{"_SYSTEMD_UNIT", "containerd.service"}}},
		BootID: boots[1].ID,
		Fields: compared,
	}
	checkAgainstJournalctl(t, h, j, q, "-b", boots[1].ID, "_SYSTEMD_UNIT=kubelet.service", "+", "_PID=1", "UNIT=kubelet.service", "+", "_SYSTEMD_UNIT=containerd.service")
	// All entries: the same sequence of seqnums and times.
	want := journalctlExport(t, h)
	got := queryAll(t, j, Query{Fields: []string{}})
	if len(got) != len(want) || len(got) != 200_000 {
		t.Fatalf("reader %d entries, journalctl %d", len(got), len(want))
	}
	for i := range want {
		w := fromExport(t, want[i], []string{})
		if g := fromEntry(got[i]); w.Seqnum != g.Seqnum || w.Realtime != g.Realtime {
			t.Fatalf("entry %d: journalctl %d@%s, reader %d@%s", i, w.Seqnum, w.Realtime, g.Seqnum, g.Realtime)
		}
	}
}

// TestDuplicateFiles reads the same file present twice (a copy left in the
// volatile directory): each entry is yielded once, as journalctl prints it.
func TestDuplicateFiles(t *testing.T) {
	h, p := singleFile(t, writerOptions{}, 500)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	hosttest.Write(t, h.Root, map[string]string{"run/log/journal/" + machineID + "/system.journal": string(b)})
	j := openHost(t, h)
	if len(j.Files) != 2 {
		t.Fatalf("files %v problems %v", j.Files, j.Problems)
	}
	got := checkAgainstJournalctl(t, h, j, Query{Fields: compared})
	if len(got) != 500 {
		t.Errorf("%d entries, want 500", len(got))
	}
}
