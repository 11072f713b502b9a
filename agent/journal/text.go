package journal

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/nodediag/nodediag/agent/host"
)

// Text exports: the journal as journalctl prints it in its short formats,
// the form CI artifact trees keep (the Cluster API and CAPZ e2e log
// collectors save `journalctl --no-pager --output=short-precise` into
// journal.log, and the same with `-u kubelet.service` into kubelet.log, `-u
// containerd.service` into containerd.log, `-k` into kern.log). A TextJournal
// reads such files and yields the same Entry values the binary reader
// yields, so that what is built on entries cannot tell the two apart:
//
//   - MESSAGE, SYSLOG_IDENTIFIER, _PID and _HOSTNAME come from the line
//     ("May 01 00:00:07.000000 node-0 systemd[1]: kubelet.service: ...");
//   - _SYSTEMD_UNIT is the export's unit (journalctl -u) for every entry
//     not written by systemd itself, or, in a whole-journal export, the unit
//     of a known identifier (kubelet, containerd);
//   - UNIT is set on systemd's (PID 1) messages about a unit: the export's
//     unit, or the unit the message names ("kubelet.service: Main process
//     exited ...", "Started kubelet.service - ...");
//   - the boot is the one of the last "-- Boot ID --" line journalctl wrote
//     above the entry; the entries before the first such line belong to a
//     boot whose ID the export does not say (BootID "").
//
// What text cannot give: the monotonic clock, sequence numbers, fields other
// than those above, and bytes of a message journalctl did not print (it
// shows "[N blob data]" for binary messages), and tabs: journalctl prints a
// tab in a message as spaces.

// TextExport is one text export of the journal.
type TextExport struct {
	// Path is the file's host path.
	Path string
	// Unit is the unit the export was made for (journalctl -u UNIT), ""
	// for a whole journal (or a kernel-only one).
	Unit string
}

// TextOptions tune how text exports are read.
type TextOptions struct {
	// Reference is a time at or after the export was made (its file's
	// modification time, or a date written in another log of the same node).
	// The short formats print no year: the year is chosen so that the last
	// entry is not after Reference (plus a day of slack for time zones),
	// counting a year for each time the dates wrap from December to January.
	// Zero means the host's clock.
	Reference time.Time
	// Location is the time zone the export was printed in: journalctl
	// prints local time, and CI nodes run on UTC. Nil means UTC.
	Location *time.Location
	// Units are the units the caller will ask for (_SYSTEMD_UNIT or UNIT
	// terms). Their entries are kept from the first read of each export,
	// so that a query for one of them reads memory, not the whole export
	// again: memory (those entries) for time (a pass per query). Entries
	// kept are shared between queries: callers must not modify them.
	Units []string
}

// Limits of the text reader.
const (
	// textMaxLine bounds a line; the rest of a longer line is dropped and
	// the line is kept as far as it goes.
	textMaxLine = 1 << 20
	// textMaxProblems bounds the problems recorded per file.
	textMaxProblems = 8
)

// ErrNotText is returned (wrapped) for a file that is not a journalctl text
// export: no line of it has the short format.
var ErrNotText = errors.New("not a journalctl text export (short or short-precise)")

// LooksLikeText says whether head (the first bytes of a file) is
// journalctl's short output: its first complete lines are entries of the
// short family (and journalctl's "-- ... --" lines), at most one in five
// not.
func LooksLikeText(head []byte) bool {
	entries, other := 0, 0
	lines := bytes.Split(head, []byte("\n"))
	if len(lines) > 1 {
		lines = lines[:len(lines)-1] // the last may be cut
	}
	for _, l := range lines {
		if entries+other >= 20 {
			break
		}
		switch parseTextLine(l).kind {
		case textEntry:
			entries++
		case textBad:
			other++
		case textContinuation, textBoot, textReboot:
			// says nothing either way
		}
	}
	return entries > 0 && other*5 <= entries+other
}

// TextJournal reads text exports of the journal.
type TextJournal struct {
	h       *host.Host
	exports []*textFile
	o       TextOptions
	// Problems are what could not be read: unreadable files, lines that are
	// not journalctl output (binary garbage, another format), as in
	// Journal.Problems.
	Problems []Problem
	// Files describes the exports, as Journal.Files does the binary files.
	Files []*File
}

// textFile is one export and what the first pass learnt of it.
type textFile struct {
	TextExport
	size      int64
	startYear int // the year of the first dated line
	lines     int // entries
	boots     []Boot
	// said: the file's bad lines are in Problems already (the scan says
	// them once; the queries' reads do not repeat them).
	said bool
	// cache holds the entries of TextOptions.Units, in file order, when
	// cached.
	cache  []*Entry
	cached bool
}

// OpenText opens the text exports and reads each once (boots, years, the
// number of entries). An export that cannot be read is recorded in Problems
// and left out; OpenText fails only when none is usable.
func OpenText(h *host.Host, o TextOptions, exports ...TextExport) (*TextJournal, error) {
	if o.Location == nil {
		o.Location = time.UTC
	}
	if o.Reference.IsZero() {
		o.Reference = h.Now()
	}
	t := &TextJournal{h: h, o: o}
	var lastErr error
	for _, e := range exports {
		tf, err := t.scan(e)
		if err != nil {
			t.Problems = append(t.Problems, Problem{Path: e.Path, Err: err})
			lastErr = err
			continue
		}
		t.exports = append(t.exports, tf)
		f := &File{Path: e.Path, Size: tf.size, Entries: uint64(tf.lines), Features: []string{"text"}}
		if n := len(tf.boots); n > 0 {
			f.Head, f.Tail = tf.boots[0].First, tf.boots[n-1].Last
		}
		t.Files = append(t.Files, f)
	}
	if len(t.exports) == 0 && lastErr != nil {
		return t, lastErr
	}
	return t, nil
}

// textEndsBytes is how much of an export's head and tail TextEnds reads.
const textEndsBytes = 64 << 10

// TextEnds reads only the head and the tail of an export: the host name of
// its first entry and the time of its last, the year chosen as OpenText
// chooses it (the last entry not after o.Reference and a day). last is zero
// when the tail shows no entry line (a last message longer than the tail).
func TextEnds(h *host.Host, o TextOptions, e TextExport) (hostname string, last time.Time, err error) {
	if o.Location == nil {
		o.Location = time.UTC
	}
	if o.Reference.IsZero() {
		o.Reference = h.Now()
	}
	head, tail, _, skipped, err := h.ReadHeadTail(e.Path, textEndsBytes, textEndsBytes)
	if err != nil {
		return "", time.Time{}, err
	}
	if len(tail) == 0 {
		tail = head
	} else if skipped > 0 {
		// The tail starts inside a line.
		if i := bytes.IndexByte(tail, '\n'); i >= 0 {
			tail = tail[i+1:]
		}
	}
	for _, line := range bytes.Split(head, []byte("\n")) {
		if l := parseTextLine(line); l.kind == textEntry {
			hostname = strings.Clone(l.hostname)
			break
		}
	}
	lines := bytes.Split(tail, []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		l := parseTextLine(lines[i])
		if l.kind != textEntry {
			continue
		}
		if l.stamp.year != 0 {
			return hostname, l.stamp.time(0, o.Location).UTC(), nil
		}
		ref := o.Reference.In(o.Location)
		y := ref.Year()
		if l.stamp.time(y, o.Location).After(ref.Add(24 * time.Hour)) {
			y--
		}
		return hostname, l.stamp.time(y, o.Location).UTC(), nil
	}
	return hostname, time.Time{}, nil
}

// Close releases nothing: files are opened per pass.
func (t *TextJournal) Close() error { return nil }

// Boots returns the boots the exports show, oldest first. journalctl
// prints no "-- Boot --" line above an export's first entries, so their
// boot has no ID in that export: when another export names a boot whose
// span holds them, they are that boot; else their boot has ID "".
func (t *TextJournal) Boots() ([]Boot, error) {
	var named, unnamed []Boot
	byID := map[string]int{}
	for _, f := range t.exports {
		for _, b := range f.boots {
			if b.ID == "" {
				unnamed = append(unnamed, b)
				continue
			}
			if i, ok := byID[b.ID]; ok {
				named[i].First = minTime(named[i].First, b.First)
				named[i].Last = maxTime(named[i].Last, b.Last)
				continue
			}
			byID[b.ID] = len(named)
			named = append(named, b)
		}
	}
	out := named
	for _, u := range unnamed {
		// Held by a named boot, or the same unnamed boot seen in
		// another export (spans that overlap).
		if namedBootOf(named, u) >= 0 || overlapsAny(out[len(named):], u) {
			continue
		}
		out = append(out, u)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].First.Before(out[j].First) })
	return out, nil
}

func overlapsAny(bs []Boot, u Boot) bool {
	for _, b := range bs {
		if !u.Last.Before(b.First) && !b.Last.Before(u.First) {
			return true
		}
	}
	return false
}

// namedBootOf returns the index of the named boot whose span holds u's,
// -1 if none does.
func namedBootOf(named []Boot, u Boot) int {
	for i, b := range named {
		if !u.First.Before(b.First) && !u.Last.After(b.Last) {
			return i
		}
	}
	return -1
}

// Query calls fn for each matching entry (see Query of Journal: the same
// Any, BootID, Since and Until; Fields is ignored, every field of a text
// entry is cheap). The exports read for a unit a clause names (a
// _SYSTEMD_UNIT or UNIT term) are the ones made for it, when there are
// such exports; else the whole-journal exports; a query naming no unit
// reads every export (see filesFor). Entries are yielded in each file's
// order.
func (t *TextJournal) Query(q Query, fn func(*Entry) bool) error {
	files := t.filesFor(q)
	if len(files) == 0 {
		return nil
	}
	want := strings.ToLower(strings.ReplaceAll(q.BootID, "-", ""))
	// An export shows a boot's ID only where the boot changes: the entries
	// above its first "-- Boot --" line have none. They are of the boot
	// asked for when they fall within its span as the other exports show it.
	var span Boot
	if want != "" {
		boots, _ := t.Boots()
		for _, b := range boots {
			if b.ID == want {
				span = b
			}
		}
	}
	var clauses [][]Term // the clauses of the export being read
	pre := func(a *textAttrs, rt time.Time, bootID string, _ int) bool {
		if want != "" && bootID != want {
			if bootID != "" || span.ID == "" || rt.Before(span.First) || rt.After(span.Last) {
				return false
			}
		}
		if !q.Since.IsZero() && rt.Before(q.Since) {
			return false
		}
		if !q.Until.IsZero() && rt.After(q.Until) {
			return false
		}
		return a.matches(clauses)
	}
	cachedQuery := t.answersFromCache(q)
	for _, fq := range files {
		f := fq.f
		clauses = fq.any
		if cachedQuery && f.cached {
			for _, e := range f.cache {
				a := textAttrs{message: e.Fields["MESSAGE"], ident: e.Fields["SYSLOG_IDENTIFIER"], pid: e.Fields["_PID"],
					hostname: e.Fields["_HOSTNAME"], systemdUnit: e.Fields["_SYSTEMD_UNIT"], unit: e.Fields["UNIT"], transport: e.Fields["_TRANSPORT"]}
				if pre(&a, e.Realtime, e.BootID, 0) && !fn(e) {
					return nil
				}
			}
			continue
		}
		stop := false
		err := t.read(f, pre, func(e *Entry) bool {
			if !fn(e) {
				stop = true
				return false
			}
			return true
		})
		if err != nil {
			t.Problems = append(t.Problems, Problem{Path: f.Path, Err: err})
		}
		if stop {
			return nil
		}
	}
	return nil
}

// answersFromCache says whether the kept entries answer q: every clause
// of q names a unit (_SYSTEMD_UNIT or UNIT) of TextOptions.Units, so that
// no entry outside them can match.
func (t *TextJournal) answersFromCache(q Query) bool {
	if len(q.Any) == 0 || len(t.o.Units) == 0 {
		return false
	}
	for _, clause := range q.Any {
		named := false
		for _, term := range clause {
			if (term.Field == "_SYSTEMD_UNIT" || term.Field == "UNIT") && slices.Contains(t.o.Units, term.Value) {
				named = true
			}
		}
		if !named {
			return false
		}
	}
	return true
}

// fileQuery is one export a query reads and the clauses of the query
// that export answers.
type fileQuery struct {
	f   *textFile
	any [][]Term
}

// filesFor picks the exports a query reads: for each unit a clause names,
// the exports made for that unit when there are such, else the
// whole-journal exports; a clause naming no unit, and a query of no
// clauses, reads every export. A whole-journal export is asked only the
// clauses of units without their own export, so that a query naming
// several units (journalctl -u A -u B) gets each entry once.
func (t *TextJournal) filesFor(q Query) []fileQuery {
	if len(q.Any) == 0 {
		out := make([]fileQuery, len(t.exports))
		for i, f := range t.exports {
			out[i] = fileQuery{f: f}
		}
		return out
	}
	hasExport := map[string]bool{}
	for _, f := range t.exports {
		if f.Unit != "" {
			hasExport[f.Unit] = true
		}
	}
	scoped := map[string][][]Term{} // unit → clauses naming it
	var rest [][]Term               // clauses the whole-journal exports answer
	for _, clause := range q.Any {
		unit := ""
		for _, term := range clause {
			if (term.Field == "_SYSTEMD_UNIT" || term.Field == "UNIT") && hasExport[term.Value] {
				unit = term.Value
			}
		}
		if unit == "" {
			rest = append(rest, clause)
			continue
		}
		scoped[unit] = append(scoped[unit], clause)
	}
	var out []fileQuery
	for _, f := range t.exports {
		switch {
		case f.Unit == "" && len(rest) > 0:
			out = append(out, fileQuery{f: f, any: rest})
		case f.Unit != "" && len(scoped[f.Unit]) > 0:
			out = append(out, fileQuery{f: f, any: scoped[f.Unit]})
		}
	}
	return out
}

// textAttrs are the fields of a text entry a query can ask for, known
// before the entry is built (most lines of a whole-journal export are not
// asked for: they are never turned into Entry values).
type textAttrs struct {
	message, ident, pid, hostname, systemdUnit, unit, transport string
}

// get returns a field's value and whether the entry has it.
func (a *textAttrs) get(field string) (string, bool) {
	var v string
	switch field {
	case "MESSAGE":
		return a.message, true
	case "SYSLOG_IDENTIFIER":
		v = a.ident
	case "_PID":
		v = a.pid
	case "_HOSTNAME":
		v = a.hostname
	case "_SYSTEMD_UNIT":
		v = a.systemdUnit
	case "UNIT":
		v = a.unit
	case "_TRANSPORT":
		v = a.transport
	}
	return v, v != ""
}

// matches says whether the entry satisfies one clause of any.
func (a *textAttrs) matches(any [][]Term) bool {
	if len(any) == 0 {
		return true
	}
	for _, clause := range any {
		ok := true
		for _, term := range clause {
			if v, has := a.get(term.Field); !has || v != term.Value {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// fields is the Entry.Fields map of the entry.
func (a *textAttrs) fields() map[string]string {
	m := make(map[string]string, 8)
	for _, f := range []string{"MESSAGE", "SYSLOG_IDENTIFIER", "_PID", "_HOSTNAME", "_SYSTEMD_UNIT", "UNIT", "_TRANSPORT"} {
		if v, ok := a.get(f); ok {
			m[f] = strings.Clone(v)
		}
	}
	return m
}

// scan is the first pass over an export: how many entries, the year of its
// first line, then (a second read, once the year is known) its boots.
func (t *TextJournal) scan(e TextExport) (*textFile, error) {
	tf := &textFile{TextExport: e}
	var first, last, prev stamp
	wraps, n, bad := 0, 0, 0
	err := t.lines(e.Path, &tf.size, func(_ int, line []byte) {
		switch l := parseTextLine(line); l.kind {
		case textEntry:
			n++
			if n == 1 {
				first = l.stamp
			} else if l.stamp.year == 0 && wrapped(prev, l.stamp) {
				wraps++
			}
			prev, last = l.stamp, l.stamp
		case textBad:
			bad++
		}
	})
	if err != nil {
		return nil, err
	}
	if n == 0 {
		if bad > 0 {
			return nil, fmt.Errorf("%w: none of its %d line(s) is", ErrNotText, bad)
		}
		return tf, nil
	}
	tf.lines = n
	tf.startYear = first.year
	if first.year == 0 {
		ref := t.o.Reference.In(t.o.Location)
		y := ref.Year() - wraps
		if last.time(y+wraps, t.o.Location).After(ref.Add(24 * time.Hour)) {
			y--
		}
		tf.startYear = y
	}
	seq := -1
	units := map[string]bool{}
	for _, u := range t.o.Units {
		units[u] = true
	}
	err = t.read(tf, func(a *textAttrs, rt time.Time, bootID string, bootSeq int) bool {
		if bootSeq != seq {
			tf.boots = append(tf.boots, Boot{ID: bootID, First: rt})
			seq = bootSeq
		}
		tf.boots[len(tf.boots)-1].Last = rt
		// Only the entries of the units asked for are built, and kept.
		return units[a.systemdUnit] || units[a.unit]
	}, func(e *Entry) bool {
		tf.cache = append(tf.cache, e)
		return true
	})
	tf.said = true
	tf.cached = len(units) > 0 && err == nil
	return tf, err
}

// wrapped says whether the dates went from December to January between
// two consecutive lines: a new year.
func wrapped(prev, cur stamp) bool {
	return prev.month == time.December && cur.month == time.January
}

// lines calls fn for each line of the file at host path p (without its
// newline; a line longer than textMaxLine is cut there).
func (t *TextJournal) lines(p string, size *int64, fn func(no int, line []byte)) error {
	f, err := t.h.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	*size = f.Size()
	br := bufio.NewReaderSize(io.NewSectionReader(f, 0, f.Size()), 64<<10)
	no := 0
	var long []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(long) < textMaxLine {
				long = append(long, chunk[:min(len(chunk), textMaxLine-len(long))]...)
			}
			continue
		}
		if len(chunk) > 0 || len(long) > 0 {
			line := chunk
			if long != nil {
				if len(long) < textMaxLine {
					long = append(long, chunk[:min(len(chunk), textMaxLine-len(long))]...)
				}
				line, long = long, nil
			}
			no++
			fn(no, bytes.TrimRight(line, "\r\n"))
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// read yields the entries of one export that pre keeps (all when pre is
// nil), multi-line messages joined.
func (t *TextJournal) read(f *textFile, pre func(a *textAttrs, rt time.Time, bootID string, bootSeq int) bool, fn func(*Entry) bool) error {
	var size int64
	year := f.startYear
	var prev stamp
	started := false
	bootID, bootSeq := "", -1
	var pending *Entry
	var indent int
	stop := false
	flush := func() {
		if pending != nil && !stop {
			if !fn(pending) {
				stop = true
			}
		}
		pending = nil
	}
	bad := 0
	err := t.lines(f.Path, &size, func(no int, line []byte) {
		if stop {
			return
		}
		l := parseTextLine(line)
		switch l.kind {
		case textBoot, textReboot:
			flush()
			bootID = strings.Clone(l.bootID)
			bootSeq++
		case textContinuation:
			if pending == nil {
				return
			}
			cont := string(line)
			if k := leadingSpaces(cont); k >= indent {
				cont = cont[indent:]
			} else {
				cont = strings.TrimLeft(cont, " \t")
			}
			pending.Fields["MESSAGE"] += "\n" + cont
		case textEntry:
			flush()
			if bootSeq < 0 {
				bootSeq = 0
			}
			if l.stamp.year == 0 {
				if started && wrapped(prev, l.stamp) {
					year++
				}
				prev, started = l.stamp, true
			} else {
				year = l.stamp.year
			}
			a := attributes(f.Unit, &l)
			rt := l.stamp.time(year, t.o.Location).UTC()
			if pre != nil && !pre(&a, rt, bootID, bootSeq) {
				return
			}
			pending = &Entry{Realtime: rt, BootID: bootID, Seqnum: uint64(no), File: f.Path, Fields: a.fields()}
			indent = l.prefixLen
		case textBad:
			flush()
			bad++
			if bad <= textMaxProblems && !f.said {
				t.Problems = append(t.Problems, Problem{Path: f.Path, Err: fmt.Errorf("line %d: %s", no, describeBadLine(line))})
			}
		}
	})
	flush()
	if bad > textMaxProblems && !f.said {
		t.Problems = append(t.Problems, Problem{Path: f.Path, Err: fmt.Errorf("%d more line(s) are not journalctl output", bad-textMaxProblems)})
	}
	return err
}

// describeBadLine says what a line that is not journalctl output looks like.
func describeBadLine(line []byte) string {
	if !utf8.Valid(line) || bytes.IndexByte(line, 0) >= 0 {
		return fmt.Sprintf("binary data (%d bytes), not text", len(line))
	}
	s := string(line)
	if len(s) > 80 {
		s = s[:80] + "..."
	}
	return fmt.Sprintf("not journalctl output: %q", s)
}

func leadingSpaces(s string) int {
	n := 0
	for n < len(s) && s[n] == ' ' {
		n++
	}
	return n
}

// attributes are the fields of a parsed line of an export made for unit
// ("" for a whole journal).
func attributes(unit string, l *textLine) textAttrs {
	a := textAttrs{message: l.message, ident: l.ident, pid: l.pid, hostname: l.hostname}
	switch {
	case l.pid == "1" && l.ident == "systemd":
		a.unit = unit
		if a.unit == "" {
			a.unit = unitOfSystemdMessage(l.message)
		}
		a.systemdUnit = "init.scope"
	case unit != "":
		a.systemdUnit = unit
	default:
		a.systemdUnit = identUnits[l.ident]
	}
	if l.ident == "kernel" && l.pid == "" {
		a.transport = "kernel"
	}
	return a
}

// identUnits are the units of the identifiers whose unit is not in doubt:
// in a whole-journal export, a line "kubelet[1234]: ..." is the
// kubelet.service's.
var identUnits = map[string]string{
	"kubelet":    "kubelet.service",
	"containerd": "containerd.service",
}

// systemdUnitRe finds the unit of systemd's messages about one: "UNIT:
// message" (unit.c's log_unit_*), and the job results "Started UNIT -
// Description." (systemd 252 and later name the unit; earlier releases print
// only the description, which names no unit for sure).
var systemdUnitRe = regexp.MustCompile(`^(?:(?:Started|Starting|Stopped|Stopping|Failed to start|Reloaded|Reloading) )?([A-Za-z0-9:_.\\@-]+\.(?:service|socket|mount|timer|scope|slice|target|path))(?::| - )`)

func unitOfSystemdMessage(msg string) string {
	if m := systemdUnitRe.FindStringSubmatch(msg); m != nil {
		return m[1]
	}
	return ""
}

// Kinds of text lines.
const (
	textBad = iota
	textEntry
	textContinuation
	textBoot
	textReboot
	textNote // "-- No entries --", "-- Logs begin at ... --": nothing
)

// textLine is one parsed line.
type textLine struct {
	kind                          int
	stamp                         stamp
	hostname, ident, pid, message string
	prefixLen                     int
	bootID                        string
}

// stamp is a timestamp as printed: the year is 0 for the short formats.
type stamp struct {
	year  int
	month time.Month
	day   int
	sec   int // seconds of the day
	nsec  int
	zone  *time.Location // from short-iso's offset; nil otherwise
}

func (s stamp) time(year int, loc *time.Location) time.Time {
	if s.year != 0 {
		year = s.year
	}
	if s.zone != nil {
		loc = s.zone
	}
	return time.Date(year, s.month, s.day, 0, 0, s.sec, s.nsec, loc)
}

// Timestamps of the short family:
//
//	short            "May 01 00:00:07"
//	short-precise    "May 01 00:00:07.000000"
//	short-iso        "2024-05-01T00:00:07+0000"
//	short-iso-precise "2024-05-01T00:00:07.000000+00:00"
var (
	isoStampRe = regexp.MustCompile(`^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:?\d\d) `)
	bootRe     = regexp.MustCompile(`^-- Boot ([0-9a-f]{32}) --$`)
	rebootRe   = regexp.MustCompile(`^-- Reboot --$`)
	noteRe     = regexp.MustCompile(`^-- .* --$`)
)

var months = map[string]time.Month{
	"Jan": time.January, "Feb": time.February, "Mar": time.March, "Apr": time.April,
	"May": time.May, "Jun": time.June, "Jul": time.July, "Aug": time.August,
	"Sep": time.September, "Oct": time.October, "Nov": time.November, "Dec": time.December,
}

// parseTextLine parses one line of journalctl's short output.
func parseTextLine(b []byte) textLine {
	if !utf8.Valid(b) || bytes.IndexByte(b, 0) >= 0 {
		return textLine{kind: textBad}
	}
	// The line's bytes are the reader's buffer: the strings of the result
	// are only valid until the next line; Entry values get copies.
	s := unsafe.String(unsafe.SliceData(b), len(b))
	switch {
	case s == "":
		return textLine{kind: textNote}
	case s[0] == ' ' || s[0] == '\t':
		return textLine{kind: textContinuation}
	case strings.HasPrefix(s, "-- "):
		if m := bootRe.FindStringSubmatch(s); m != nil {
			return textLine{kind: textBoot, bootID: m[1]}
		}
		if rebootRe.MatchString(s) {
			return textLine{kind: textReboot}
		}
		if noteRe.MatchString(s) {
			return textLine{kind: textNote}
		}
	}
	var st stamp
	var rest string
	if n, ok := parseShortStamp(s, &st); ok {
		rest = s[n:]
	} else if m := isoStampRe.FindStringSubmatch(s); m != nil {
		st.year, _ = strconv.Atoi(m[1])
		mon, _ := strconv.Atoi(m[2])
		st.month = time.Month(mon)
		st.day, _ = strconv.Atoi(m[3])
		st.sec = clock(m[4], m[5], m[6])
		st.nsec = fraction(m[7])
		st.zone = zone(m[8])
		rest = s[len(m[0]):]
	} else {
		return textLine{kind: textBad}
	}
	if st.day < 1 || st.day > 31 || st.month < 1 || st.month > 12 || st.sec >= 86400+1 {
		return textLine{kind: textBad}
	}
	l := textLine{kind: textEntry, stamp: st}
	// "HOSTNAME IDENT[PID]: MESSAGE"; an entry without _HOSTNAME starts
	// with "IDENT[PID]:" (a hostname has no colon).
	host, after, _ := strings.Cut(rest, " ")
	if strings.HasSuffix(host, ":") {
		host, after = "", rest
	}
	l.hostname = host
	if ident, pid, msg, ok := cutIdent(after); ok {
		l.ident, l.pid, l.message = ident, pid, msg
	} else {
		// "HOST message" with neither identifier nor PID.
		l.message = after
	}
	l.prefixLen = len(s) - len(l.message)
	return l
}

// parseShortStamp reads the timestamp of the short and short-precise
// formats ("May 01 00:00:07" or "Jan  2 23:59:59.000123") and the space
// after it, returning how many bytes it took.
func parseShortStamp(s string, st *stamp) (int, bool) {
	if len(s) < 16 || s[3] != ' ' || s[6] != ' ' || s[9] != ':' || s[12] != ':' {
		return 0, false
	}
	mon, ok := months[s[:3]]
	if !ok {
		return 0, false
	}
	day := 0
	for _, c := range s[4:6] {
		switch {
		case c == ' ' && day == 0:
		case c >= '0' && c <= '9':
			day = day*10 + int(c-'0')
		default:
			return 0, false
		}
	}
	num := func(a string) (int, bool) {
		if a[0] < '0' || a[0] > '9' || a[1] < '0' || a[1] > '9' {
			return 0, false
		}
		return int(a[0]-'0')*10 + int(a[1]-'0'), true
	}
	hh, ok1 := num(s[7:9])
	mm, ok2 := num(s[10:12])
	ss, ok3 := num(s[13:15])
	if !ok1 || !ok2 || !ok3 {
		return 0, false
	}
	n := 15
	frac := ""
	if s[n] == '.' {
		j := n + 1
		for j < len(s) && j-n-1 < 9 && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j == n+1 {
			return 0, false
		}
		frac, n = s[n+1:j], j
	}
	if n >= len(s) || s[n] != ' ' {
		return 0, false
	}
	st.month, st.day = mon, day
	st.sec = secondsOfDay(hh, mm, ss)
	st.nsec = fraction(frac)
	return n + 1, true
}

// cutIdent reads "IDENT[PID]: MESSAGE" or "IDENT: MESSAGE" (the message may
// be empty, the colon then ends the line).
func cutIdent(s string) (ident, pid, msg string, ok bool) {
	end := strings.IndexByte(s, ' ')
	word := s
	if end >= 0 {
		word = s[:end]
		msg = s[end+1:]
	}
	if !strings.HasSuffix(word, ":") || len(word) < 2 {
		return "", "", "", false
	}
	word = word[:len(word)-1]
	if i := strings.IndexByte(word, '['); i >= 0 {
		if !strings.HasSuffix(word, "]") || i == 0 {
			return "", "", "", false
		}
		pid = word[i+1 : len(word)-1]
		if pid == "" || strings.Trim(pid, "0123456789") != "" {
			return "", "", "", false
		}
		word = word[:i]
	}
	if strings.ContainsAny(word, "[]") {
		return "", "", "", false
	}
	return word, pid, msg, true
}

func secondsOfDay(hh, mm, ss int) int {
	if hh > 23 || mm > 59 || ss > 60 {
		return 86400 + 1
	}
	return hh*3600 + mm*60 + ss
}

func clock(h, m, s string) int {
	hh, _ := strconv.Atoi(h)
	mm, _ := strconv.Atoi(m)
	ss, _ := strconv.Atoi(s)
	return secondsOfDay(hh, mm, ss)
}

func fraction(f string) int {
	if f == "" {
		return 0
	}
	n, _ := strconv.Atoi(f)
	for i := len(f); i < 9; i++ {
		n *= 10
	}
	return n
}

func zone(z string) *time.Location {
	if z == "Z" {
		return time.UTC
	}
	sign := 1
	if z[0] == '-' {
		sign = -1
	}
	d := strings.ReplaceAll(z[1:], ":", "")
	h, _ := strconv.Atoi(d[:2])
	m, _ := strconv.Atoi(d[2:])
	return time.FixedZone(strings.Clone(z), sign*(h*3600+m*60))
}

func minTime(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
