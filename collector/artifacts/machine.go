package artifacts

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/nodediag/nodediag/agent/check"
	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/journal"
	"github.com/nodediag/nodediag/agent/probes"
	"github.com/nodediag/nodediag/agent/rules"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// copies are the machine files that are copies of a node's file, and the
// host path each stands for. A kubelet.log or containerd.log that is not
// journalctl output (a collector that copied /var/log/kubelet.log) is read
// as that file instead of as a journal export.
var copies = map[string]string{
	"cloud-init-output.log": "/var/log/cloud-init-output.log",
	"cloud-init.log":        "/var/log/cloud-init.log",
	"cni.log":               "/var/log/calico/cni/cni.log",
	"kubelet.log":           "/var/log/kubelet.log",
	"containerd.log":        "/var/log/containerd.log",
}

// exports are the machine files that are journalctl exports, and the unit
// each was made for ("" for the whole journal). kern.log (-k) holds only
// the kernel's messages, which no probe reads from the journal.
var exports = []journal.TextExport{
	{Path: "/journal.log"},
	{Path: "/kubelet.log", Unit: "kubelet.service"},
	{Path: "/containerd.log", Unit: "containerd.service"},
}

// Recorded command outputs.
const (
	kubeletVersionFile = "kubelet-version.txt"   // kubelet --version
	sentinelFile       = "sentinel-file-dir.txt" // ls /run/cluster-api/ (or ls -la)
	// kubeletPath is where the node view puts the kubelet that answers
	// with kubelet-version.txt: the collector ran a bare "kubelet" with
	// /opt/bin first on PATH, so where it was is not recorded.
	kubeletPath = "/usr/bin/kubelet"
	// maxRecorded bounds a recorded output read.
	maxRecorded = 64 << 10
)

// Checked is a machine's report and what was wrong with its files.
type Checked struct {
	Report *nodediagv1.Report
	// Clock is the time the logs were collected at, as the newest
	// journal entry (else a date in cloud-init's logs, else the files'
	// modification time) says: the report's "now".
	Clock time.Time
	// Problems are the machine's own (symlinks not followed) and what the
	// probes could not read of its files.
	Problems []string
	// Skipped are the files known and knowingly not read, each with why.
	Skipped []string
}

// Check runs the agent's probes over a view of the machine's files (each
// file standing at the host path it is a copy of, the journal read from
// its text exports, kubelet --version and ls /run/cluster-api answered from
// their recorded output) and judges the evidence with e: the rules cannot
// tell it from a live node's. Nothing under the tree is written: the view
// is a temporary directory of empty placeholders, removed before Check
// returns, whose reads are served by the tree's files (host.Files).
func (m *Machine) Check(ctx context.Context, e *rules.Engine) (*Checked, error) {
	tmp, err := os.MkdirTemp("", "nodediag-artifacts-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	v := &view{root: tmp, files: map[string]string{}, recorded: host.Recorded{}}
	defer func() {
		if v.scratch != "" {
			os.RemoveAll(v.scratch)
		}
	}()

	var texts []journal.TextExport
	for _, x := range exports {
		name := strings.TrimPrefix(x.Path, "/")
		p, ok := m.Files[name]
		if !ok {
			continue
		}
		if isJournalText(p) {
			if err := v.place(x.Path, p); err != nil {
				return nil, err
			}
			texts = append(texts, x)
			continue
		}
		// Not journalctl output: a copy of the log file itself, read as
		// the node's file; journal.log has no such file.
		if hp, ok := copies[name]; ok {
			if err := v.place(hp, p); err != nil {
				return nil, err
			}
			continue
		}
		v.emptyOrNot(name, p)
	}
	v.kernelAndProvisioning(m, &texts)
	for rel, p := range m.PodLogs {
		if err := v.place(podsDir+"/"+rel, p); err != nil {
			return nil, err
		}
	}
	for name, hp := range copies {
		if name == "kubelet.log" || name == "containerd.log" {
			continue
		}
		if p, ok := m.Files[name]; ok {
			place := v.place
			if name == "cloud-init-output.log" || name == "cloud-init.log" {
				place = func(hp, p string) error { return v.placeCollected(name, hp, p) }
			}
			if err := place(hp, p); err != nil {
				return nil, err
			}
		}
	}
	if p, ok := m.Files[kubeletVersionFile]; ok {
		if err := v.recordKubelet(p); err != nil {
			return nil, err
		}
	}
	if p, ok := m.Files[sentinelFile]; ok {
		if err := v.sentinels(p); err != nil {
			return nil, err
		}
	}
	m.Problems = append(m.Problems, v.problems...)

	h, err := host.New(tmp, v.recorded)
	if err != nil {
		return nil, err
	}
	h.Net = host.NoNetwork{}
	h.Files = v.files
	clock, hostname := m.clock(h, texts)
	h.Now = func() time.Time { return clock }

	name := hostname
	if name == "" {
		name = m.Name
	}
	r, err := check.Host(ctx, h, check.Options{Probes: probes.JournalText(texts...), Engine: e, NodeName: name, Root: m.Dir})
	if err != nil {
		return nil, err
	}
	ev := r.GetEvidence()
	if hostname != "" {
		r.Host.Hostname = hostname
	}
	c := &Checked{Report: r, Clock: clock, Problems: append([]string(nil), m.Problems...), Skipped: v.skipped}
	for name := range m.Files {
		if why := notRead(name); why != "" {
			c.Skipped = append(c.Skipped, name+": not read: "+why)
		}
	}
	sort.Strings(c.Skipped)
	for _, pe := range ev.GetProbes() {
		for _, u := range pe.GetUnreadable() {
			c.Problems = append(c.Problems, fmt.Sprintf("%s: %s", v.treePath(u.GetSource()), u.GetError()))
		}
	}
	return c, nil
}

// openRegular opens a file of the tree for reading: never through a
// symlink (O_NOFOLLOW), never a FIFO or a device (opened O_NONBLOCK, then
// checked), and only the file Lstat saw. The tree's directories were
// walked without following symlinks; a directory swapped for a symlink
// between the walk and the open is the one case this does not stop
// (os.Root would).
func openRegular(p string) (*os.File, os.FileInfo, error) {
	before, err := os.Lstat(p)
	if err != nil {
		return nil, nil, err
	}
	if !before.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%s: not a regular file (%s)", p, before.Mode().Type())
	}
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	after, err := f.Stat()
	if err != nil || !after.Mode().IsRegular() || !os.SameFile(before, after) {
		f.Close()
		return nil, nil, fmt.Errorf("%s: changed while being opened", p)
	}
	return f, after, nil
}

// view builds the node view of a machine directory.
type view struct {
	root     string
	files    map[string]string // host path → tree file
	recorded host.Recorded
	problems []string
	// scratch holds the logs rewritten without a collector's preamble.
	scratch string
	// skipped are files not read here, each with why.
	skipped []string
}

// podsDir is where the kubelet keeps its container logs.
const podsDir = "/var/log/pods"

// kernelAndProvisioning reads kern.log (journalctl -k) as a journal export
// when journal.log, which holds the same messages, was not read, and
// ignition.log (journalctl -t ignition) as a provisioning log.
func (v *view) kernelAndProvisioning(m *Machine, texts *[]journal.TextExport) {
	if p, ok := m.Files["kern.log"]; ok {
		whole := false
		for _, x := range *texts {
			whole = whole || x.Path == "/journal.log"
		}
		switch {
		case whole:
			v.skipped = append(v.skipped, "kern.log: not read: journal.log, which was read, holds the kernel's messages too")
		case isJournalText(p):
			if err := v.place("/kern.log", p); err == nil {
				*texts = append(*texts, journal.TextExport{Path: "/kern.log"})
			}
		default:
			v.emptyOrNot("kern.log", p)
		}
	}
	if p, ok := m.Files["ignition.log"]; ok {
		if fi, err := os.Lstat(p); err == nil && fi.Size() == 0 {
			v.emptyOrNot("ignition.log", p)
		} else if err := v.place("/var/log/ignition.log", p); err != nil {
			v.problems = append(v.problems, err.Error())
		}
	}
}

// emptyOrNot says why a journal export was not read.
func (v *view) emptyOrNot(name, p string) {
	if fi, err := os.Lstat(p); err == nil && fi.Size() == 0 {
		v.problems = append(v.problems, fmt.Sprintf("%s is empty: the collector's journalctl printed nothing (it keeps no stderr), so it is unknown, not empty", name))
		return
	}
	v.problems = append(v.problems, fmt.Sprintf("%s: not journalctl's short output (short, short-precise, short-iso): not read", name))
}

// place puts an empty placeholder at host path hp (so that directory
// listings show it) and serves its reads from the tree file p.
func (v *view) place(hp, p string) error {
	if err := v.placeholder(hp, 0o644); err != nil {
		return err
	}
	v.files[hp] = p
	return nil
}

func (v *view) placeholder(hp string, mode os.FileMode) error {
	full := filepath.Join(v.root, filepath.FromSlash(path.Clean(hp)))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		return err
	}
	return os.WriteFile(full, nil, mode)
}

// treePath names a host path of the view by the tree file serving it.
func (v *view) treePath(source string) string {
	if p, ok := v.files[source]; ok {
		return p
	}
	return source
}

// recordKubelet makes kubelet --version answer with the recorded output.
func (v *view) recordKubelet(p string) error {
	b, err := readSmall(p)
	if err != nil {
		v.problems = append(v.problems, err.Error())
		return nil
	}
	if err := v.placeholder(kubeletPath, 0o755); err != nil {
		return err
	}
	v.recorded[host.RecordedKey(kubeletPath, "--version")] = host.Output{Stdout: b}
	return nil
}

// sentinels recreates /run/cluster-api as ls printed it: the directory when
// ls could list it, an empty file per name.
func (v *view) sentinels(p string) error {
	b, err := readSmall(p)
	if err != nil {
		v.problems = append(v.problems, err.Error())
		return nil
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		// The collectors keep ls's stdout only: an empty file is an ls
		// that failed (no such directory, or no answer from the machine
		// at all) as much as an empty directory. Neither the directory
		// nor its sentinel is known: nothing is recreated, and it is said.
		v.problems = append(v.problems, fmt.Sprintf("%s is empty: ls /run/cluster-api printed nothing (the collector keeps no stderr), so whether the directory and its sentinel exist is unknown", sentinelFile))
		return nil
	}
	names, exists := parseListing(b)
	if !exists {
		return nil
	}
	if err := os.MkdirAll(filepath.Join(v.root, "run/cluster-api"), 0o755); err != nil {
		return err
	}
	for _, n := range names {
		if err := v.placeholder("/run/cluster-api/"+n, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// parseListing reads `ls DIR` (one name per line) or `ls -la DIR` output.
// exists is false when ls said the directory is not there.
func parseListing(b []byte) (names []string, exists bool) {
	exists = true
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "total "):
			continue
		case strings.Contains(line, "No such file or directory") || strings.HasPrefix(line, "ls: "):
			exists = false
			continue
		}
		name := line
		if f := strings.Fields(line); len(f) >= 9 && len(f[0]) >= 10 && strings.ContainsRune("-dlcbps", rune(f[0][0])) {
			if f[0][0] != '-' {
				continue // only regular files are sentinels
			}
			name = strings.Join(f[8:], " ")
		}
		if name == "." || name == ".." || strings.ContainsAny(name, "/\x00") || len(name) > 255 {
			continue
		}
		names = append(names, name)
	}
	return names, exists
}

// readSmall reads a recorded output (a regular file, never a symlink).
func readSmall(p string) ([]byte, error) {
	f, _, err := openRegular(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, maxRecorded)
	n, _ := f.Read(buf)
	return buf[:n], nil
}

// isJournalText says whether the file at p starts like journalctl's short
// output.
func isJournalText(p string) bool {
	f, _, err := openRegular(p)
	if err != nil {
		return false
	}
	defer f.Close()
	buf := make([]byte, 16<<10)
	n, _ := f.Read(buf)
	return journal.LooksLikeText(buf[:n])
}

// Dates in cloud-init's logs, which, unlike journalctl's short output, say
// the year: "2024-05-01 12:00:00,123 - util.py[DEBUG]" (cloud-init.log) and
// "... running 'modules:final' at Wed, 01 May 2024 12:00:02 +0000."
// (cloud-init-output.log).
var (
	cloudInitLogDate    = regexp.MustCompile(`(?m)^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),\d+ - `)
	cloudInitOutputDate = regexp.MustCompile(`at (\w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d [+-]\d{4})`)
)

// clock finds when the machine's logs were collected and the node's host
// name: the newest entry of the journal exports (their tails), their years
// anchored on the newest date of cloud-init's logs (else on the files'
// modification time).
func (m *Machine) clock(h *host.Host, texts []journal.TextExport) (time.Time, string) {
	anchor, fromLog := time.Time{}, false
	if b, _, err := h.ReadFileLimit("/var/log/cloud-init.log", 8<<20); err == nil {
		for _, mm := range cloudInitLogDate.FindAllSubmatch(b, -1) {
			if t, err := time.Parse("2006-01-02 15:04:05", string(mm[1])); err == nil && t.After(anchor) {
				anchor, fromLog = t, true
			}
		}
	}
	if b, _, err := h.ReadFileLimit("/var/log/cloud-init-output.log", 8<<20); err == nil {
		for _, mm := range cloudInitOutputDate.FindAllSubmatch(b, -1) {
			if t, err := time.Parse("Mon, 02 Jan 2006 15:04:05 -0700", string(mm[1])); err == nil && t.After(anchor) {
				anchor, fromLog = t, true
			}
		}
	}
	for _, p := range m.Files {
		if fi, err := os.Lstat(p); err == nil && !fromLog && fi.ModTime().After(anchor) {
			anchor = fi.ModTime()
		}
	}
	ref := anchor
	if fromLog {
		// The journal goes on after cloud-init's last line; a node lives
		// less than this long in a CI job.
		ref = anchor.Add(300 * 24 * time.Hour)
	}
	// The ends of each export are enough: the probe reads them whole.
	clock, hostname := time.Time{}, ""
	for _, x := range texts {
		host, last, err := journal.TextEnds(h, journal.TextOptions{Reference: ref}, x)
		if err != nil {
			continue
		}
		if hostname == "" {
			hostname = host
		}
		if last.After(clock) {
			clock = last
		}
	}
	if clock.IsZero() {
		clock = anchor
	}
	return clock.UTC(), hostname
}
