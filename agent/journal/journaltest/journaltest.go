// Package journaltest writes real systemd journal files for tests: entries
// in Journal Export Format, converted by systemd-journal-remote (Debian
// package systemd-journal-remote), the same program systemd uses to write
// journals it receives. With systemd 252 the files are compact, keyed-hash
// files whose large payloads are zstd-compressed, like a current node's.
package journaltest

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// JournalRemote is where Debian installs systemd-journal-remote.
const JournalRemote = "/lib/systemd/systemd-journal-remote"

// NeedJournalRemote skips the test when systemd-journal-remote is absent.
func NeedJournalRemote(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(JournalRemote); err != nil {
		t.Skipf("%s not installed (Debian package systemd-journal-remote): %v", JournalRemote, err)
	}
}

// Field is one field of an exported entry.
type Field struct{ Name, Value string }

// Entry is one entry of Journal Export Format, its fields in order.
type Entry []Field

// Get returns the value of the first field called name, or "".
func (e Entry) Get(name string) string {
	for _, f := range e {
		if f.Name == name {
			return f.Value
		}
	}
	return ""
}

// WriteExport writes an entry in Journal Export Format: "NAME=value\n", or
// for a value holding a newline (or any byte a text line cannot carry)
// "NAME\n" + le64 length + the bytes + "\n"; a blank line ends the entry.
func WriteExport(w *bufio.Writer, e Entry) error {
	for _, f := range e {
		w.WriteString(f.Name)
		if strings.ContainsAny(f.Value, "\n") || !isText(f.Value) {
			w.WriteByte('\n')
			var n [8]byte
			binary.LittleEndian.PutUint64(n[:], uint64(len(f.Value)))
			w.Write(n[:])
		} else {
			w.WriteByte('=')
		}
		w.WriteString(f.Value)
		w.WriteByte('\n')
	}
	return w.WriteByte('\n')
}

func isText(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 && s[i] != '\t' {
			return false
		}
	}
	return true
}

// Options choose the format journal-remote writes: Env such as
// SYSTEMD_JOURNAL_COMPACT=0 (the regular layout) and
// SYSTEMD_JOURNAL_KEYED_HASH=0 (Jenkins hashes), Args such as
// --compress=no.
type Options struct {
	Env  []string
	Args []string
}

// WriteJournal converts the entries gen yields into a journal file at path
// (the name must end in .journal). The entries are streamed, never held
// whole. It skips the test when journal-remote is absent.
func WriteJournal(t testing.TB, path string, o Options, gen func(yield func(Entry) bool)) {
	t.Helper()
	NeedJournalRemote(t)
	if err := Write(path, o, gen); err != nil {
		t.Fatal(err)
	}
}

// Write is WriteJournal outside a test (a generator of test data): it
// returns what went wrong.
func Write(path string, o Options, gen func(yield func(Entry) bool)) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	cmd := exec.Command(JournalRemote, append(append([]string{"-o", path}, o.Args...), "-")...)
	cmd.Env = append(os.Environ(), o.Env...)
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	w := bufio.NewWriterSize(in, 1<<20)
	var werr error
	gen(func(e Entry) bool {
		werr = WriteExport(w, e)
		return werr == nil
	})
	if werr == nil {
		werr = w.Flush()
	}
	in.Close()
	if err := cmd.Wait(); err != nil || werr != nil {
		return fmt.Errorf("%s -o %s: %v %v\n%s", JournalRemote, path, err, werr, stderr.String())
	}
	return nil
}

// Entries yields the given entries: a gen for WriteJournal.
func Entries(es ...Entry) func(yield func(Entry) bool) {
	return func(yield func(Entry) bool) {
		for _, e := range es {
			if !yield(e) {
				return
			}
		}
	}
}

// NodeJournal yields n entries of a busy node's journal, 50 ms apart from
// t0, over two boots (the second from entry n/2): the kubelet's klog lines
// (one in 97 an error), containerd's logrus lines, cloud-final's, and other
// units' (systemd-networkd, sshd, chronyd) one entry in seven. The
// benchmarks of the journal reader, the journal probe and the whole check
// read it.
func NodeJournal(n int, t0 time.Time) func(yield func(Entry) bool) {
	units := []string{"kubelet.service", "containerd.service", "cloud-final.service", "systemd-networkd.service", "sshd.service", "chronyd.service"}
	return func(yield func(Entry) bool) {
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
			if !yield(Entry{
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
	}
}
