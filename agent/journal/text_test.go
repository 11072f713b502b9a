package journal

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/nodediag/nodediag/agent/host"
)

func TestParseTextLine(t *testing.T) {
	tests := []struct {
		name string
		line string
		want textLine
	}{
		{
			name: "short-precise",
			line: "May 01 00:00:07.000123 node-0 systemd[1]: kubelet.service: Main process exited, code=exited, status=1/FAILURE",
			want: textLine{kind: textEntry, stamp: stamp{month: time.May, day: 1, sec: 7, nsec: 123000}, hostname: "node-0", ident: "systemd", pid: "1",
				message: "kubelet.service: Main process exited, code=exited, status=1/FAILURE", prefixLen: len("May 01 00:00:07.000123 node-0 systemd[1]: ")},
		},
		{
			name: "short, a one-digit day padded with a space",
			line: "Jan  2 23:59:59 cp-0 kubelet[812]: I0102 23:59:59.1 812 server.go:1] x",
			want: textLine{kind: textEntry, stamp: stamp{month: time.January, day: 2, sec: 86399}, hostname: "cp-0", ident: "kubelet", pid: "812",
				message: "I0102 23:59:59.1 812 server.go:1] x", prefixLen: len("Jan  2 23:59:59 cp-0 kubelet[812]: ")},
		},
		{
			name: "short-iso-precise keeps its offset",
			line: "2024-05-01T02:00:07.500000+02:00 node-0 containerd[99]: level=info",
			want: textLine{kind: textEntry, stamp: stamp{year: 2024, month: time.May, day: 1, sec: 7207, nsec: 500000000, zone: time.FixedZone("+02:00", 7200)},
				hostname: "node-0", ident: "containerd", pid: "99", message: "level=info", prefixLen: len("2024-05-01T02:00:07.500000+02:00 node-0 containerd[99]: ")},
		},
		{
			name: "kernel: no PID",
			line: "May 01 00:00:01.000000 node-0 kernel: Linux version 6.8.0",
			want: textLine{kind: textEntry, stamp: stamp{month: time.May, day: 1, sec: 1}, hostname: "node-0", ident: "kernel",
				message: "Linux version 6.8.0", prefixLen: len("May 01 00:00:01.000000 node-0 kernel: ")},
		},
		{
			name: "no hostname",
			line: "May 01 00:00:01.000000 kubelet[7]: hello",
			want: textLine{kind: textEntry, stamp: stamp{month: time.May, day: 1, sec: 1}, ident: "kubelet", pid: "7",
				message: "hello", prefixLen: len("May 01 00:00:01.000000 kubelet[7]: ")},
		},
		{
			name: "empty message",
			line: "May 01 00:00:01.000000 node-0 kubelet[7]:",
			want: textLine{kind: textEntry, stamp: stamp{month: time.May, day: 1, sec: 1}, hostname: "node-0", ident: "kubelet", pid: "7",
				prefixLen: len("May 01 00:00:01.000000 node-0 kubelet[7]:")},
		},
		{name: "continuation", line: "                                           second line", want: textLine{kind: textContinuation}},
		{name: "boot", line: "-- Boot fedcba9876543210fedcba9876543210 --", want: textLine{kind: textBoot, bootID: "fedcba9876543210fedcba9876543210"}},
		{name: "old reboot marker", line: "-- Reboot --", want: textLine{kind: textReboot}},
		{name: "note", line: "-- No entries --", want: textLine{kind: textNote}},
		{name: "logs begin", line: "-- Logs begin at Wed 2024-05-01 00:00:00 UTC, end at Wed 2024-05-01 01:00:00 UTC. --", want: textLine{kind: textNote}},
		{name: "klog line is not journalctl output", line: `I0501 00:00:01.000000    1234 server.go:484] "Kubelet version"`, want: textLine{kind: textBad}},
		{name: "bad month", line: "Foo 01 00:00:01 node-0 kubelet[7]: x", want: textLine{kind: textBad}},
		{name: "bad hour", line: "May 01 25:00:01 node-0 kubelet[7]: x", want: textLine{kind: textBad}},
		{name: "binary", line: "May 01 00:00:01 node-0 k[7]: \x00\xff\xfe", want: textLine{kind: textBad}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := parseTextLine([]byte(tt.line))
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(textLine{}, stamp{}), cmp.Comparer(func(a, b *time.Location) bool {
				return a.String() == b.String()
			})); diff != "" {
				t.Errorf("parseTextLine(%q) (-want +got):\n%s", tt.line, diff)
			}
		})
	}
}

// textHost writes files under a fresh root and returns its Host.
func textHost(t *testing.T, files map[string]string) *host.Host {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h, err := host.New(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// queryAll returns every entry of a query.
func textAll(t *testing.T, tj *TextJournal, q Query) []*Entry {
	t.Helper()
	var out []*Entry
	if err := tj.Query(q, func(e *Entry) bool { out = append(out, e); return true }); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTextMatchesJournalctl is the differential test of the text reader:
// a real journal (systemd-journal-remote) printed by the real journalctl in
// each short format, whole and for one unit (as the CAPZ log collector runs
// it), read back as text, gives the entries the binary reader gives, to the
// precision the format prints.
func TestTextMatchesJournalctl(t *testing.T) {
	jc := needJournalctl(t)
	root := t.TempDir()
	jpath := filepath.Join(root, "var/log/journal/m/system.journal")
	g := nodeLog{n: 420, start: t0, step: 1500 * time.Millisecond}
	writeJournal(t, jpath, g.entries)
	h, err := host.New(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	j, err := Open(h, "/var/log/journal")
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	boots, err := j.Boots()
	if err != nil || len(boots) != 2 {
		t.Fatalf("binary boots: %v %v", boots, err)
	}
	for _, format := range []string{"short", "short-precise", "short-iso", "short-iso-precise"} {
		for _, unit := range []string{"", "kubelet.service", "containerd.service"} {
			t.Run(format+"/"+unit, func(t *testing.T) {
				args := []string{"--file", jpath, "--no-pager", "--output=" + format}
				if unit != "" {
					args = append(args, "-u", unit)
				}
				cmd := exec.Command(jc, args...)
				cmd.Env = append(os.Environ(), "TZ=UTC", "SYSTEMD_COLORS=0")
				out, err := cmd.Output()
				if err != nil {
					t.Fatalf("journalctl %v: %v", args, err)
				}
				name := "/" + format + "-" + strings.TrimSuffix(unit, ".service") + ".log"
				if err := os.WriteFile(filepath.Join(root, name), out, 0o644); err != nil {
					t.Fatal(err)
				}
				tj, err := OpenText(h, TextOptions{Reference: t0.Add(24 * time.Hour)}, TextExport{Path: name, Unit: unit})
				if err != nil {
					t.Fatal(err)
				}
				if len(tj.Problems) > 0 {
					t.Errorf("problems reading journalctl's own output: %v", tj.Problems)
				}
				// Its head and tail alone give the scan's host name and last time.
				host, end, err := TextEnds(h, TextOptions{Reference: t0.Add(24 * time.Hour)}, TextExport{Path: name, Unit: unit})
				if err != nil || host != "node-0" || !end.Equal(tj.Files[0].Tail) {
					t.Errorf("TextEnds: %q %v %v, want node-0 and %v", host, end, err, tj.Files[0].Tail)
				}
				var q Query
				if unit != "" {
					q.Any = [][]Term{{{"_SYSTEMD_UNIT", unit}}, {{"UNIT", unit}, {"_PID", "1"}}}
				}
				var want []*Entry
				if err := j.Query(q, func(e *Entry) bool { want = append(want, e); return true }); err != nil {
					t.Fatal(err)
				}
				got := textAll(t, tj, q)
				if len(got) != len(want) || len(want) == 0 {
					t.Fatalf("%d entries from the text, %d from the journal", len(got), len(want))
				}
				if unit != "" {
					// The entries kept for the unit (TextOptions.Units) are
					// the ones read.
					kept, err := OpenText(h, TextOptions{Reference: t0.Add(24 * time.Hour), Units: []string{unit}}, TextExport{Path: name, Unit: unit})
					if err != nil {
						t.Fatal(err)
					}
					if diff := cmp.Diff(got, textAll(t, kept, q)); diff != "" {
						t.Errorf("kept entries differ from read ones (-read +kept):\n%s", diff)
					}
				}
				precision := time.Second
				if strings.HasSuffix(format, "precise") {
					precision = time.Microsecond
				}
				firstBoot := want[0].BootID
				for i := range want {
					w, g := want[i], got[i]
					if !g.Realtime.Equal(w.Realtime.Truncate(precision)) {
						t.Errorf("entry %d: time %v, want %v", i, g.Realtime, w.Realtime.Truncate(precision))
					}
					for _, f := range []string{"MESSAGE", "SYSLOG_IDENTIFIER", "_PID", "_HOSTNAME"} {
						// journalctl prints a tab as 8 spaces: text cannot
						// give the tab back.
						if g.Fields[f] != strings.ReplaceAll(w.Fields[f], "\t", "        ") {
							t.Errorf("entry %d: %s %q, want %q", i, f, g.Fields[f], w.Fields[f])
						}
					}
					// The first boot of an export has no "-- Boot --" line.
					if g.BootID != w.BootID && !(g.BootID == "" && w.BootID == firstBoot) {
						t.Errorf("entry %d: boot %q, want %q", i, g.BootID, w.BootID)
					}
					if unit != "" && w.Fields["_PID"] != "1" && g.Fields["_SYSTEMD_UNIT"] != unit {
						t.Errorf("entry %d: _SYSTEMD_UNIT %q, want %q", i, g.Fields["_SYSTEMD_UNIT"], unit)
					}
					if w.Fields["_PID"] == "1" && g.Fields["UNIT"] != w.Fields["UNIT"] {
						t.Errorf("entry %d: UNIT %q, want %q (from %q)", i, g.Fields["UNIT"], w.Fields["UNIT"], g.Fields["MESSAGE"])
					}
				}
				// The last boot's entries, asked by its ID as the journal
				// probe asks, are the journal's.
				last := boots[len(boots)-1].ID
				q.BootID = last
				var wantLast []*Entry
				j.Query(q, func(e *Entry) bool { wantLast = append(wantLast, e); return true })
				if gotLast := textAll(t, tj, q); len(gotLast) != len(wantLast) {
					t.Errorf("boot %s: %d entries from the text, %d from the journal", last, len(gotLast), len(wantLast))
				}
				tb, _ := tj.Boots()
				if len(tb) != 2 || tb[1].ID != last {
					t.Errorf("text boots %+v, want 2 ending with %s", tb, last)
				}
			})
		}
	}
}

func TestTextYear(t *testing.T) {
	export := "Dec 31 23:59:58.000000 n kubelet[1]: a\nJan 01 00:00:01.000000 n kubelet[1]: b\n"
	tests := []struct {
		name string
		ref  time.Time
		want []time.Time
	}{
		{
			name: "the dates wrap: a year is counted",
			ref:  time.Date(2025, 1, 2, 0, 0, 0, 0, time.UTC),
			want: []time.Time{time.Date(2024, 12, 31, 23, 59, 58, 0, time.UTC), time.Date(2025, 1, 1, 0, 0, 1, 0, time.UTC)},
		},
		{
			name: "a reference months later keeps the year of the last line",
			ref:  time.Date(2025, 8, 1, 0, 0, 0, 0, time.UTC),
			want: []time.Time{time.Date(2024, 12, 31, 23, 59, 58, 0, time.UTC), time.Date(2025, 1, 1, 0, 0, 1, 0, time.UTC)},
		},
		{
			name: "a reference before the last date in its year means last year",
			ref:  time.Date(2025, 12, 31, 0, 0, 0, 0, time.UTC).AddDate(1, -12, -365),
			want: []time.Time{time.Date(2023, 12, 31, 23, 59, 58, 0, time.UTC), time.Date(2024, 1, 1, 0, 0, 1, 0, time.UTC)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := textHost(t, map[string]string{"journal.log": export})
			tj, err := OpenText(h, TextOptions{Reference: tt.ref}, TextExport{Path: "/journal.log"})
			if err != nil {
				t.Fatal(err)
			}
			var got []time.Time
			for _, e := range textAll(t, tj, Query{}) {
				got = append(got, e.Realtime)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("times (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTextAttributesUnits(t *testing.T) {
	export := strings.Join([]string{
		"May 01 00:00:01.000000 n systemd[1]: Started kubelet.service - kubelet: The Kubernetes Node Agent.",
		"May 01 00:00:02.000000 n kubelet[812]: E0501 00:00:02.000000     812 run.go:72] \"command failed\"",
		"May 01 00:00:02.100000 n systemd[1]: kubelet.service: Main process exited, code=exited, status=1/FAILURE",
		"May 01 00:00:02.200000 n systemd[1]: Started kubelet: The Kubernetes Node Agent.",
		"May 01 00:00:03.000000 n containerd[99]: level=error msg=x",
		"May 01 00:00:04.000000 n sshd[4]: Accepted publickey",
		"May 01 00:00:05.000000 n kubelet[812]: first line",
		strings.Repeat(" ", len("May 01 00:00:05.000000 n kubelet[812]: ")) + "second line",
		"",
	}, "\n")
	h := textHost(t, map[string]string{"journal.log": export})
	tj, err := OpenText(h, TextOptions{Reference: time.Date(2024, 5, 2, 0, 0, 0, 0, time.UTC)}, TextExport{Path: "/journal.log"})
	if err != nil {
		t.Fatal(err)
	}
	q := Query{Any: [][]Term{{{"_SYSTEMD_UNIT", "kubelet.service"}}, {{"UNIT", "kubelet.service"}, {"_PID", "1"}}}}
	var got []string
	for _, e := range textAll(t, tj, q) {
		got = append(got, e.Fields["MESSAGE"])
	}
	want := []string{
		"Started kubelet.service - kubelet: The Kubernetes Node Agent.",
		`E0501 00:00:02.000000     812 run.go:72] "command failed"`,
		"kubelet.service: Main process exited, code=exited, status=1/FAILURE",
		// The description-only form of older systemd names no unit for
		// sure: left out rather than guessed.
		"first line\nsecond line",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("kubelet.service entries (-want +got):\n%s", diff)
	}
}

// A query naming two units, one with an export of its own and one found
// only in the whole journal's, gets each unit's entries once: the first
// from its own export (not again from the whole journal), the second from
// the whole journal.
func TestTextQueryOfUnitsScopedAndNot(t *testing.T) {
	whole := strings.Join([]string{
		"May 01 00:00:01.000000 n kubelet[812]: kubelet in the whole journal",
		"May 01 00:00:02.000000 n containerd[99]: containerd in the whole journal",
		"May 01 00:00:03.000000 n sshd[4]: Accepted publickey",
		"",
	}, "\n")
	kubelet := "May 01 00:00:01.000000 n kubelet[812]: kubelet in the whole journal\n"
	h := textHost(t, map[string]string{"journal.log": whole, "kubelet.log": kubelet})
	tj, err := OpenText(h, TextOptions{Reference: time.Date(2024, 5, 2, 0, 0, 0, 0, time.UTC)},
		TextExport{Path: "/journal.log"}, TextExport{Path: "/kubelet.log", Unit: "kubelet.service"})
	if err != nil {
		t.Fatal(err)
	}
	q := Query{Any: [][]Term{{{"_SYSTEMD_UNIT", "kubelet.service"}}, {{"_SYSTEMD_UNIT", "containerd.service"}}}}
	var got []string
	for _, e := range textAll(t, tj, q) {
		got = append(got, e.Fields["_SYSTEMD_UNIT"]+": "+e.Fields["MESSAGE"])
	}
	slices.Sort(got)
	want := []string{
		"containerd.service: containerd in the whole journal",
		"kubelet.service: kubelet in the whole journal",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("entries of two units (-want +got):\n%s", diff)
	}
}

func TestTextBadInput(t *testing.T) {
	good := "May 01 00:00:01.000000 n kubelet[1]: ok 1\nMay 01 00:00:02.000000 n kubelet[1]: ok 2\n"
	t.Run("garbage between good lines is said and skipped", func(t *testing.T) {
		h := textHost(t, map[string]string{"kubelet.log": "May 01 00:00:00.000000 n kubelet[1]: ok 0\n\x00\x01\xff\xfe garbage\n" + good})
		tj, err := OpenText(h, TextOptions{Reference: time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC)}, TextExport{Path: "/kubelet.log", Unit: "kubelet.service"})
		if err != nil {
			t.Fatal(err)
		}
		es := textAll(t, tj, Query{})
		if len(es) != 3 {
			t.Errorf("%d entries, want 3", len(es))
		}
		if len(tj.Problems) != 1 || !strings.Contains(tj.Problems[0].String(), "line 2: binary data") {
			t.Errorf("problems %v, want one naming line 2 as binary", tj.Problems)
		}
	})
	t.Run("a file that is no journal text", func(t *testing.T) {
		h := textHost(t, map[string]string{"kubelet.log": "\x7fELF\x00\x00garbage\nI0501 klog line\n", "ok.log": good})
		tj, err := OpenText(h, TextOptions{}, TextExport{Path: "/kubelet.log"}, TextExport{Path: "/ok.log"})
		if err != nil {
			t.Fatalf("one good export must be enough: %v", err)
		}
		if len(tj.Problems) != 1 || !errors.Is(tj.Problems[0].Err, ErrNotText) {
			t.Errorf("problems %v, want ErrNotText for kubelet.log", tj.Problems)
		}
		if n := len(textAll(t, tj, Query{})); n != 2 {
			t.Errorf("%d entries, want the 2 of ok.log", n)
		}
		if _, err := OpenText(h, TextOptions{}, TextExport{Path: "/kubelet.log"}); !errors.Is(err, ErrNotText) {
			t.Errorf("only a bad export: err %v, want ErrNotText", err)
		}
	})
	t.Run("a missing file", func(t *testing.T) {
		h := textHost(t, map[string]string{"ok.log": good})
		_, err := OpenText(h, TextOptions{}, TextExport{Path: "/missing.log"})
		if !errors.Is(err, os.ErrNotExist) {
			t.Errorf("err %v, want not-exist", err)
		}
	})
	t.Run("a file cut in the middle of a line keeps the cut line", func(t *testing.T) {
		h := textHost(t, map[string]string{"k.log": good + "May 01 00:00:03.000000 n kubelet[1]: cut he"})
		tj, err := OpenText(h, TextOptions{}, TextExport{Path: "/k.log"})
		if err != nil {
			t.Fatal(err)
		}
		es := textAll(t, tj, Query{})
		if len(es) != 3 || es[2].Fields["MESSAGE"] != "cut he" {
			t.Errorf("entries %d, last %q", len(es), es[len(es)-1].Fields["MESSAGE"])
		}
	})
	t.Run("an empty export has no entries and no problem", func(t *testing.T) {
		h := textHost(t, map[string]string{"k.log": "-- No entries --\n"})
		tj, err := OpenText(h, TextOptions{}, TextExport{Path: "/k.log"})
		if err != nil || len(tj.Problems) != 0 {
			t.Fatalf("err %v problems %v", err, tj.Problems)
		}
		if n := len(textAll(t, tj, Query{})); n != 0 {
			t.Errorf("%d entries", n)
		}
	})
}

func FuzzParseText(f *testing.F) {
	f.Add([]byte("May 01 00:00:07.000123 node-0 systemd[1]: kubelet.service: Main process exited\n   cont\n-- Boot fedcba9876543210fedcba9876543210 --\nJan  2 23:59:59 cp-0 kubelet[812]: x\n"))
	f.Add([]byte("2024-05-01T02:00:07.500000+02:00 node-0 containerd[99]: level=info\n-- Reboot --\nDec 31 23:59:59 k: x\n"))
	f.Add([]byte("\x00\xff\n-- No entries --\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		root := t.TempDir()
		if err := os.WriteFile(filepath.Join(root, "j.log"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		h, err := host.New(root, nil)
		if err != nil {
			t.Fatal(err)
		}
		tj, err := OpenText(h, TextOptions{Reference: t0}, TextExport{Path: "/j.log", Unit: "kubelet.service"})
		if err != nil {
			return
		}
		tj.Boots()
		lines := bytes.Count(b, []byte("\n")) + 1
		n := 0
		tj.Query(Query{}, func(e *Entry) bool {
			// Only text lines become entries, each from a dated line.
			if !utf8.ValidString(e.Fields["MESSAGE"]) || e.Realtime.IsZero() {
				t.Fatalf("entry %+v", e)
			}
			n++
			return true
		})
		if n > lines {
			t.Fatalf("%d entries from %d lines", n, lines)
		}
	})
}

// TestTextUnnamedFirstBoot: journalctl names no boot above an export's
// first entries. A kubelet.log whose entries are all of the last boot
// (named only in journal.log) is that boot, not a boot of its own; the
// entries of journal.log's unnamed first boot stay out of the last boot.
func TestTextUnnamedFirstBoot(t *testing.T) {
	const last = "0123456789abcdef0123456789abcdef"
	h := textHost(t, map[string]string{
		"journal.log": "May 01 00:00:01.000000 n systemd[1]: cloud-final.service: Failed with result 'exit-code'.\n" +
			"-- Boot " + last + " --\n" +
			"May 01 01:00:00.000000 n systemd[1]: Started cloud-final.service - Execute cloud user/final scripts.\n" +
			"May 01 01:00:05.000000 n kubelet[9]: starting\n" +
			"May 01 01:10:00.000000 n systemd[1]: cloud-final.service: Deactivated successfully.\n",
		"kubelet.log": "May 01 01:00:05.000000 n kubelet[9]: starting\n",
	})
	// Read, and kept in memory for the units asked (TextOptions.Units):
	// the same answers.
	for _, units := range [][]string{nil, {"cloud-final.service", "kubelet.service"}} {
		t.Run(fmt.Sprintf("units %v", units), func(t *testing.T) {
			tj, err := OpenText(h, TextOptions{Reference: time.Date(2024, 5, 2, 0, 0, 0, 0, time.UTC), Units: units},
				TextExport{Path: "/journal.log"}, TextExport{Path: "/kubelet.log", Unit: "kubelet.service"})
			if err != nil {
				t.Fatal(err)
			}
			boots, _ := tj.Boots()
			var ids []string
			for _, b := range boots {
				ids = append(ids, b.ID)
			}
			if diff := cmp.Diff([]string{"", last}, ids); diff != "" {
				t.Fatalf("boots (-want +got):\n%s", diff)
			}
			q := Query{Any: [][]Term{{{"UNIT", "cloud-final.service"}, {"_PID", "1"}}}, BootID: last}
			var got []string
			for _, e := range textAll(t, tj, q) {
				got = append(got, e.Fields["MESSAGE"])
			}
			if len(got) != 2 || strings.Contains(strings.Join(got, "\n"), "exit-code") {
				t.Errorf("the last boot's cloud-final lines: %q", got)
			}
			q = Query{Any: [][]Term{{{"_SYSTEMD_UNIT", "kubelet.service"}}}, BootID: last}
			if n := len(textAll(t, tj, q)); n != 1 {
				t.Errorf("kubelet entries of the last boot: %d, want 1 (from kubelet.log)", n)
			}
		})
	}
}

// TestTextEndsOfALargeExport: head and tail alone, the tail starting inside
// a line, give the scan's host name and last time.
func TestTextEndsOfALargeExport(t *testing.T) {
	var b strings.Builder
	ts := time.Date(2024, 12, 31, 23, 0, 0, 0, time.UTC)
	for i := 0; i < 3000; i++ {
		ts = ts.Add(1500 * time.Millisecond)
		fmt.Fprintf(&b, "%s node-7 kubelet[4]: line %d %s\n", ts.Format("Jan 02 15:04:05.000000"), i, strings.Repeat("x", 100))
	}
	h := textHost(t, map[string]string{"journal.log": b.String()})
	o := TextOptions{Reference: time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)}
	tj, err := OpenText(h, o, TextExport{Path: "/journal.log"})
	if err != nil {
		t.Fatal(err)
	}
	host, end, err := TextEnds(h, o, TextExport{Path: "/journal.log"})
	if err != nil || host != "node-7" || !end.Equal(tj.Files[0].Tail) || !end.Equal(ts) {
		t.Errorf("TextEnds: %q %v %v, want node-7 and %v (scan: %v)", host, end, err, ts, tj.Files[0].Tail)
	}
}
