package journal

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodediag/nodediag/agent/journal/journaltest"
)

// Test journals are real: the tests write Journal Export Format
// (systemd's docs/JOURNAL_EXPORT_FORMATS.md) and convert it with systemd's
// own writer, systemd-journal-remote, into journal files. On systemd 252
// these are compact, keyed-hash files whose large payloads are
// zstd-compressed. journalctl, when present, is the oracle.

// The writer of real journal files is shared with other packages' tests.
type (
	field       = journaltest.Field
	exportEntry = journaltest.Entry
)

func needJournalRemote(t testing.TB) { t.Helper(); journaltest.NeedJournalRemote(t) }

// needJournalctl returns journalctl's path or skips the test.
func needJournalctl(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("journalctl")
	if err != nil {
		t.Skipf("journalctl not installed: %v", err)
	}
	return p
}

func writeExport(w *bufio.Writer, e exportEntry) error { return journaltest.WriteExport(w, e) }

func writeJournal(t testing.TB, path string, gen func(yield func(exportEntry) bool)) {
	t.Helper()
	journaltest.WriteJournal(t, path, journaltest.Options{}, gen)
}

// writerOptions choose the format journal-remote writes (journaltest.Options).
type writerOptions struct {
	env  []string
	args []string
}

func writeJournalWith(t testing.TB, path string, o writerOptions, gen func(yield func(exportEntry) bool)) {
	t.Helper()
	journaltest.WriteJournal(t, path, journaltest.Options{Env: o.env, Args: o.args}, gen)
}

// Boot IDs of the generated journals.
const (
	boot1 = "0123456789abcdef0123456789abcdef"
	boot2 = "fedcba9876543210fedcba9876543210"
)

// nodeLog generates the log of a node in the shape of the recipe's
// generator (kubelet, containerd and cloud-init entries from their units'
// stdout, PRIORITY=6 even for klog E lines) over two boots, plus what PID 1
// says about the units (UNIT=, _PID=1, every 50 entries), a multi-line
// message (entries 12, 1014, 2016…) and a 3000-byte message that
// journal-remote compresses (entries 9, 1011, 2013…). Entry i is at
// start+i*step; boot 2 starts at entry n/2.
type nodeLog struct {
	n     int
	start time.Time
	step  time.Duration
	host  string
	// offset shifts the entry numbers (to write later parts of a log into
	// other files).
	offset int
	// bootAt is the number of the first entry of boot 2; (offset+n)/2 when 0.
	bootAt int
}

func (g nodeLog) entries(yield func(exportEntry) bool) {
	for i := g.offset; i < g.offset+g.n; i++ {
		if !yield(g.entry(i)) {
			return
		}
	}
}

func (g nodeLog) entry(i int) exportEntry {
	bootAt := g.bootAt
	if bootAt == 0 {
		bootAt = (g.offset + g.n) / 2
	}
	rt := g.start.Add(time.Duration(i) * g.step)
	boot := boot1
	mono := time.Duration(i)*g.step + 3*time.Second
	if i >= bootAt {
		boot = boot2
		mono = time.Duration(i-bootAt)*g.step + 2*time.Second
	}
	host := g.host
	if host == "" {
		host = "node-0"
	}
	unit, ident, pid := "kubelet.service", "kubelet", "1234"
	switch i % 3 {
	case 1:
		unit, ident, pid = "containerd.service", "containerd", "99"
	case 2:
		unit, ident, pid = "cloud-final.service", "cloud-init", "555"
	}
	var msg string
	switch {
	case i%50 == 7:
		// PID 1 about a unit: no _SYSTEMD_UNIT of the unit, UNIT= instead.
		u := "kubelet.service"
		if i%100 == 57 {
			u = "containerd.service"
		}
		msg = u + ": Main process exited, code=exited, status=1/FAILURE"
		if i%150 == 7 {
			msg = u + ": Scheduled restart job, restart counter is at 5."
		}
		return exportEntry{
			{Name: "__REALTIME_TIMESTAMP", Value: strconv.FormatInt(rt.UnixMicro(), 10)},
			{Name: "__MONOTONIC_TIMESTAMP", Value: strconv.FormatInt(mono.Microseconds(), 10)},
			{Name: "_BOOT_ID", Value: boot},
			{Name: "_HOSTNAME", Value: host},
			{Name: "_TRANSPORT", Value: "journal"},
			{Name: "_PID", Value: "1"},
			{Name: "_SYSTEMD_UNIT", Value: "init.scope"},
			{Name: "SYSLOG_IDENTIFIER", Value: "systemd"},
			{Name: "UNIT", Value: u},
			{Name: "PRIORITY", Value: "6"},
			{Name: "MESSAGE", Value: msg},
		}
	case ident == "kubelet" && i%97 == 0:
		msg = fmt.Sprintf(`E%s %s kubelet.go:2855] "Container runtime network not ready" networkReady="NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized" seq=%d`, rt.Format("0102 15:04:05.000000"), pid, i)
	case ident == "kubelet" && i%1002 == 9:
		// A large message: journal-remote compresses payloads over 512 bytes.
		msg = fmt.Sprintf(`E%s %s server.go:310] "Failed to run kubelet" err="%s" seq=%d`, rt.Format("0102 15:04:05.000000"), pid, strings.Repeat("failed to load kubelet config file, path: /var/lib/kubelet/config.yaml; ", 40), i)
	case ident == "kubelet" && i%1002 == 12:
		msg = fmt.Sprintf("panic: runtime error: invalid memory address\n\ngoroutine 1 [running]:\nmain.main()\n\t/src/main.go:12 +0x1d seq=%d", i)
	case ident == "kubelet":
		msg = fmt.Sprintf(`I%s %s kubelet_node_status.go:76] "Attempting to register node" node="%s" seq=%d`, rt.Format("0102 15:04:05.000000"), pid, host, i)
	case ident == "containerd" && i%89 == 0:
		msg = fmt.Sprintf(`time="%s" level=error msg="PullImage \"registry.k8s.io/pause:3.9\" failed" error="failed to resolve reference: dial tcp: lookup registry.k8s.io: no such host" seq=%d`, rt.Format(time.RFC3339Nano), i)
	case ident == "containerd":
		msg = fmt.Sprintf(`time="%s" level=info msg="ImageCreate event name:\"sha256:%064d\"" seq=%d`, rt.Format(time.RFC3339Nano), i, i)
	default:
		msg = fmt.Sprintf("Cloud-init v. 22.4.2 running 'modules:final' at %s. Up %d seconds. seq=%d", rt.Format(time.RFC1123Z), int(mono.Seconds()), i)
	}
	return exportEntry{
		{Name: "__REALTIME_TIMESTAMP", Value: strconv.FormatInt(rt.UnixMicro(), 10)},
		{Name: "__MONOTONIC_TIMESTAMP", Value: strconv.FormatInt(mono.Microseconds(), 10)},
		{Name: "_BOOT_ID", Value: boot},
		{Name: "_HOSTNAME", Value: host},
		{Name: "_TRANSPORT", Value: "stdout"},
		{Name: "_SYSTEMD_UNIT", Value: unit},
		{Name: "SYSLOG_IDENTIFIER", Value: ident},
		{Name: "_PID", Value: pid},
		{Name: "PRIORITY", Value: "6"},
		{Name: "MESSAGE", Value: msg},
	}
}

// parseExport parses journalctl -o export output (binary-safe).
func parseExport(b []byte) ([]exportEntry, error) {
	var out []exportEntry
	var cur exportEntry
	for len(b) > 0 {
		nl := bytes.IndexByte(b, '\n')
		if nl < 0 {
			return nil, fmt.Errorf("unterminated line %q", b)
		}
		line := b[:nl]
		b = b[nl+1:]
		if len(line) == 0 {
			if cur != nil {
				out = append(out, cur)
				cur = nil
			}
			continue
		}
		if eq := bytes.IndexByte(line, '='); eq >= 0 {
			cur = append(cur, field{Name: string(line[:eq]), Value: string(line[eq+1:])})
			continue
		}
		// NAME\n le64 bytes \n
		if len(b) < 8 {
			return nil, fmt.Errorf("binary field %s: short length", line)
		}
		n := binary.LittleEndian.Uint64(b)
		b = b[8:]
		if uint64(len(b)) < n+1 || b[n] != '\n' {
			return nil, fmt.Errorf("binary field %s: bad length %d", line, n)
		}
		cur = append(cur, field{Name: string(line), Value: string(b[:n])})
		b = b[n+1:]
	}
	if cur != nil {
		out = append(out, cur)
	}
	return out, nil
}

// cursorSeqnum extracts the seqnum (i=) from a journalctl __CURSOR.
func cursorSeqnum(c string) (uint64, error) {
	for _, part := range strings.Split(c, ";") {
		if v, ok := strings.CutPrefix(part, "i="); ok {
			return strconv.ParseUint(v, 16, 64)
		}
	}
	return 0, fmt.Errorf("no seqnum in cursor %q", c)
}
