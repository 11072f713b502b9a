package probes

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/logline"
	"github.com/nodediag/nodediag/agent/probe"
	"github.com/nodediag/nodediag/agent/redact"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// logsFile is a text log the logs probe reads, and the kind of log it is
// (LogExcerpt.kind: which log signatures apply to it).
type logsFile struct {
	path, kind string
}

// logsFiles are the text logs of a node bootstrapped by cloud-init and
// kubeadm, and who writes them.
var logsFiles = []logsFile{
	// cloud-init (cc_final_message, the output redirection of every
	// stage): the stdout and stderr of all stages, so the output of the
	// runcmd script (preKubeadmCommands, kubeadm init/join,
	// postKubeadmCommands) too.
	{"/var/log/cloud-init-output.log", "cloud-init-output"},
	// cloud-init's own Python logging, DEBUG included.
	{"/var/log/cloud-init.log", "cloud-init"},
	// rsyslog, fed by journald: "syslog" on Debian and Ubuntu, "messages"
	// on RHEL-like systems and Azure Linux. Only the lines of the node's
	// components are kept (logsSyslogRelevant).
	{"/var/log/syslog", "syslog"},
	{"/var/log/messages", "syslog"},
	// The kubelet and containerd with file logging (--log-file, a unit
	// redirecting stdout), and the copies of their journals in CI artifact
	// trees.
	{"/var/log/kubelet.log", "kubelet"},
	{"/var/log/containerd.log", "containerd"},
	// The kernel's messages: rsyslog's kern.log (Debian, Ubuntu), and the
	// ring buffer some images save at boot.
	{"/var/log/kern.log", "syslog"},
	{"/var/log/dmesg", "kernel"},
	// Ignition's messages (Flatcar's provisioning, before its
	// kubeadm.service), where a collector saved them: CAPZ's CI trees
	// keep journalctl -t ignition as ignition.log.
	{"/var/log/ignition.log", "cloud-init-output"},
}

// logsDir holds, besides logsFiles, the kubeadm output saved by bootstrap
// scripts that tee it: /var/log/kubeadm*.log (kubeadm-init.log,
// kubeadm-join.log).
const logsDir = "/var/log"

// Limits of the logs probe.
const (
	// logsHead and logsTail bound what is read of a file: its first and
	// last bytes. The head holds the bootstrap (the first error is often
	// the cause); the tail holds what happens now.
	logsHead = 2 << 20
	logsTail = 6 << 20
	// logsContext is how many lines of the end of each file are kept
	// whatever they say: the context of the last error, or the sign that
	// the log stopped in the middle of something.
	logsContext = 60
	// logsMaxLines caps the lines kept per file.
	logsMaxLines = 4000
	// logsKeepFirst is how many of the earliest notable lines survive when
	// notable lines alone exceed logsMaxLines: the first errors are the
	// earliest proof, the last ones show that it still happens.
	logsKeepFirst = 1000
	// logsMaxLineBytes clips a kept line.
	logsMaxLineBytes = 4096
	// logsBefore is how many lines before a notable line are kept with it:
	// the command a script echoed before it failed ("+ curl ... URL" above
	// "curl: (22) ... 404") is the other half of the proof.
	logsBefore = 2
)

// logs reads the text logs under /var/log and keeps, of each file, the lines
// that may prove a problem (logline.Notable), cloud-init's stage headers and
// footers, and the last lines. It is skipped when none of the files exists.
//
// A file that exists but cannot be read (permissions, not a regular file)
// is recorded as unreadable and the others are still read.
type logs struct{}

func (logs) Name() string { return "logs" }

func (logs) Run(ctx context.Context, h *host.Host) (*nodediagv1.ProbeEvidence, error) {
	pe := &nodediagv1.ProbeEvidence{}
	data := &nodediagv1.Logs{}
	files := append([]logsFile(nil), logsFiles...)
	kubeadm, err := logsKubeadmFiles(h)
	if err != nil {
		probe.Unreadable(pe, logsDir, err)
	}
	files = append(files, kubeadm...)
	loc := logsZone(h, pe)
	anchor := logsAnchor(h, loc)
	found := 0
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			if len(data.Sources) == 0 {
				return nil, fmt.Errorf("reading %s: %w", f.path, err)
			}
			probe.Unreadable(pe, f.path, fmt.Errorf("not read: %w", err))
			continue
		}
		ex, err := logsRead(h, f, loc, anchor)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		found++
		if err != nil {
			probe.Unreadable(pe, f.path, err)
			continue
		}
		data.Sources = append(data.Sources, ex)
	}
	if found == 0 {
		return nil, fmt.Errorf("%w: no text logs under %s", probe.ErrNotApplicable, logsDir)
	}
	pe.Data = &nodediagv1.ProbeEvidence_Logs{Logs: data}
	return pe, nil
}

// logsKubeadmFiles lists /var/log/kubeadm*.log.
func logsKubeadmFiles(h *host.Host) ([]logsFile, error) {
	ents, err := h.ReadDir(logsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []logsFile
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "kubeadm") && strings.HasSuffix(e.Name(), ".log") {
			out = append(out, logsFile{logsDir + "/" + e.Name(), "kubeadm"})
		}
	}
	return out, nil
}

// logsRead reads the head and tail of one log and excerpts it.
func logsRead(h *host.Host, f logsFile, loc *time.Location, anchor time.Time) (*nodediagv1.LogExcerpt, error) {
	head, tail, size, skipped, err := h.ReadHeadTail(f.path, logsHead, logsTail)
	if err != nil {
		return nil, err
	}
	var mtime time.Time
	if fi, err := h.Stat(f.path); err == nil {
		mtime = fi.ModTime()
	}
	ref := logsYearRef(h.Live(), h.Now(), time.Now(), mtime, anchor)
	return excerptLog(f.path, f.kind, head, tail, size, skipped, ref, loc), nil
}

// logsYearRef is the time that gives a year to a log's yearless timestamps
// (traditional syslog, klog headers): when the log was last written.
//   - On a live host: the file's mtime, or the host's clock if earlier.
//   - On a copy judged at a fixed time (--now, tests): that time.
//   - On a copy whose file times were kept (cp -a, tar): the mtime.
//   - On a copy whose file times were not kept (a git checkout, an
//     extraction without -p: the mtime is the moment of the copy), the
//     newest dated line of cloud-init's logs is the anchor, and yearless
//     lines are taken to fall within a year after it.
func logsYearRef(live bool, hostNow, wallNow, mtime, anchor time.Time) time.Time {
	if live {
		if !mtime.IsZero() && mtime.Before(hostNow) {
			return mtime
		}
		return hostNow
	}
	if d := hostNow.Sub(wallNow); d > time.Minute || d < -time.Minute {
		return hostNow // a fixed clock
	}
	if d := wallNow.Sub(mtime); !mtime.IsZero() && (d > logsFreshCopy || d < -logsFreshCopy) {
		return mtime
	}
	if !anchor.IsZero() {
		return anchor.Add(logsAnchorSpan)
	}
	return hostNow
}

const (
	// logsFreshCopy: a file written this close to the analyst's clock on a
	// copy of a host was written by the copy, not by the node.
	logsFreshCopy = 48 * time.Hour
	// logsAnchorSpan: yearless lines of a copy are placed from a month
	// before to eleven months after the anchor (yearless() allows a day
	// after its reference, and the year before).
	logsAnchorSpan = 335 * 24 * time.Hour
)

// logsAnchor is the newest time a dated line of cloud-init's logs shows
// (its stage headers, cloud-init.log): a year the node itself wrote down.
func logsAnchor(h *host.Host, loc *time.Location) time.Time {
	var newest time.Time
	for _, f := range logsFiles {
		if f.kind != "cloud-init-output" && f.kind != "cloud-init" {
			continue
		}
		head, tail, _, _, err := h.ReadHeadTail(f.path, logsHead, logsTail)
		if err != nil {
			continue
		}
		for _, part := range [][]byte{head, tail} {
			logsEachLine(string(part), func(_ int, raw string) {
				p := logline.ParseIn(raw, time.Time{}, loc)
				if p.HasTime && logsDated(p.Format) && p.Time.After(newest) {
					newest = p.Time
				}
			})
		}
	}
	return newest
}

// logsDated says whether a format carries its year.
func logsDated(f logline.Format) bool {
	switch f {
	case logline.FormatRFC3339, logline.FormatLogrus, logline.FormatCloudInit, logline.FormatCloudInitStage, logline.FormatDateTime, logline.FormatCAPIScript:
		return true
	}
	return false
}

// excerptLog keeps the lines of one log that matter. head is the file's
// start (the whole file when skipped is 0) and tail its end when the
// middle, skipped bytes long, was not read. ref gives a year to yearless
// timestamps, loc a zone to zone-less ones (logline.ParseIn).
//
// Lines are numbered from 1 in the head. The tail's lines follow a middle
// whose lines were not counted: their n is 0 and n_from_end says where they
// are from the end. The partial line where the tail starts is dropped; the
// head's last, cut line is kept with a marker.
//
// Kept are the important lines (logline.Notable, and cloud-init's stage
// headers and footers in cloud-init-output) and the last logsContext
// lines; of a syslog, only the lines logsSyslogRelevant keeps count at all.
// A line without a timestamp of its own gets the one of the nearest earlier
// line that has one (time_inferred), never one from across the unread
// middle.
func excerptLog(source, kind string, head, tail []byte, size, skipped int64, ref time.Time, loc *time.Location) *nodediagv1.LogExcerpt {
	ex := &nodediagv1.LogExcerpt{
		Source:       source,
		Kind:         kind,
		SizeBytes:    size,
		Truncated:    skipped > 0,
		SkippedBytes: skipped,
	}
	k := newLineKeeper()
	var (
		lastTime time.Time
		keys     redact.KeyBlock
	)
	add := func(raw string, n, fromEnd int32, cut bool) {
		ex.TotalLines++
		// A private key printed into a log spans lines that no single-line
		// redaction recognises: drop them here, before they are evidence.
		raw = keys.Line(strings.TrimSuffix(raw, "\r"))
		p := logline.ParseIn(raw, ref, loc)
		c := logsCandidate{n: n, fromEnd: fromEnd, raw: raw, program: p.Program, cut: cut}
		switch {
		case p.HasTime:
			lastTime, c.time = p.Time, p.Time
			k.seeTime(p.Time)
		case !lastTime.IsZero():
			c.time, c.inferred = lastTime, true
		}
		if kind == "syslog" && !logsSyslogRelevant(p) {
			return
		}
		c.important = logline.Notable(raw) || (kind == "cloud-init-output" && p.Format == logline.FormatCloudInitStage)
		k.add(c)
	}

	hs := string(head)
	nHead := logsCountLines(hs)
	cutHead := skipped > 0 && !strings.HasSuffix(hs, "\n")
	logsEachLine(hs, func(i int, raw string) {
		add(raw, int32(i+1), 0, cutHead && i == nHead-1)
	})
	if skipped > 0 {
		// The first tail line starts somewhere in the middle: drop it.
		t := string(tail)
		if i := strings.IndexByte(t, '\n'); i >= 0 {
			t = t[i+1:]
		} else {
			t = ""
		}
		lastTime = time.Time{} // nothing is known of the time of the middle
		nTail := logsCountLines(t)
		logsEachLine(t, func(i int, raw string) {
			add(raw, 0, int32(nTail-i), false)
		})
	}
	k.finish(ex)
	return ex
}

// logsCountLines counts the lines of s. A last line without a newline (a
// log being written) is a line.
func logsCountLines(s string) int {
	n := strings.Count(s, "\n")
	if s != "" && !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}

// logsEachLine calls fn with the index and text (without "\n") of each line
// of s, as counted by logsCountLines.
func logsEachLine(s string, fn func(i int, line string)) {
	for i := 0; s != ""; i++ {
		line, rest, _ := strings.Cut(s, "\n")
		fn(i, line)
		s = rest
	}
}

// logsText makes a kept line's text: valid UTF-8 (invalid bytes become
// U+FFFD), clipped to logsMaxLineBytes on a rune boundary with a marker
// saying how much was cut.
func logsText(raw string, cut bool) string {
	s := strings.ToValidUTF8(raw, "\uFFFD")
	if len(s) > logsMaxLineBytes {
		// Redact before cutting: a secret cut in two escapes the patterns.
		s = redact.String(s)
	}
	if len(s) > logsMaxLineBytes {
		n := logsMaxLineBytes
		for n > 0 && (s[n]&0xC0) == 0x80 {
			n--
		}
		s = fmt.Sprintf("%s …[%d more bytes]", s[:n], len(s)-n)
	}
	if cut {
		s += " …[the rest of this line is in the part of the file that was not read]"
	}
	return s
}

// logsSyslogRelevant keeps, of a syslog, the lines of the node's components:
// the kubelet, containerd, kubeadm and cloud-init (whose lines include the
// bootstrap script's output), systemd about their units, the kernel and the
// network's managers.
func logsSyslogRelevant(p logline.Line) bool {
	switch p.Program {
	case "kubelet", "containerd", "kubeadm", "cloud-init":
		return true
	case "systemd":
		return strings.Contains(p.Message, "kubelet.service") || strings.Contains(p.Message, "containerd.service")
	case "kernel", "systemd-networkd", "NetworkManager":
		// Kept when notable, as every line is: OOM kills, filesystem
		// errors, hung tasks, lost links.
		return true
	}
	return false
}

// Where the host says what its local time is.
const (
	// A TZif file, usually a symlink into /usr/share/zoneinfo (systemd's
	// timedatectl, tzdata).
	logsLocaltime = "/etc/localtime"
	// The zone's name on Debian and Ubuntu ("Europe/Berlin").
	logsTimezone = "/etc/timezone"
)

// logsZone is the host's local time zone, in which syslog, klog headers and
// cloud-init.log write their zone-less timestamps: /etc/localtime read under
// the root, else the zone named by /etc/timezone, else UTC (what CAPZ, AKS
// and most cloud images run in).
func logsZone(h *host.Host, pe *nodediagv1.ProbeEvidence) *time.Location {
	name := "Local"
	if b, err := h.ReadFile(logsTimezone); err == nil {
		if n := strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]); n != "" {
			name = n
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		probe.Unreadable(pe, logsTimezone, err)
	}
	b, err := h.ReadFile(logsLocaltime)
	switch {
	case err == nil:
		loc, lerr := time.LoadLocationFromTZData(name, b)
		if lerr == nil {
			return loc
		}
		probe.Unreadable(pe, logsLocaltime, fmt.Errorf("not a time zone file (%v): zone-less log times read as UTC", lerr))
	case !errors.Is(err, fs.ErrNotExist):
		probe.Unreadable(pe, logsLocaltime, fmt.Errorf("%w: zone-less log times read as UTC", err))
	}
	if name != "Local" {
		if loc, err := time.LoadLocation(name); err == nil {
			return loc
		}
	}
	return time.UTC
}
