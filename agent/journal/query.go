package journal

import (
	"bytes"
	"cmp"
	"fmt"
	"strings"
	"time"
)

// Term is one match: the entry has the field Field with exactly the value
// Value (byte for byte).
type Term struct{ Field, Value string }

// Query selects and shapes the entries Query yields.
type Query struct {
	// Any: an entry matches when, for one of the clauses of Any, it has
	// every Term of the clause (FIELD=value, byte-exact). Any empty means all
	// entries; a clause without terms matches every entry.
	Any [][]Term
	// BootID, when set, keeps only the entries of that boot (32 hex digits,
	// or a UUID with dashes; any case).
	BootID string
	// Since and Until, when set, bound the entry's realtime (inclusive).
	// Within a file the reader finds the bounds by bisection, as journalctl
	// does, so it assumes the file's realtime clock did not jump backwards.
	Since, Until time.Time
	// Fields are the fields to decode into Entry.Fields; nil decodes all.
	// An empty, non-nil list decodes none (only the entry's metadata).
	Fields []string
	// Reuse hands fn the same Entry, and the same Fields map, for every
	// entry: fn must not keep them past its return (the strings it reads
	// stay valid). It spares a map per entry of a long query.
	Reuse bool
}

// Entry is one journal entry.
type Entry struct {
	Realtime  time.Time     // __REALTIME_TIMESTAMP (UTC)
	Monotonic time.Duration // __MONOTONIC_TIMESTAMP, on the clock of boot BootID
	BootID    string        // 32 lowercase hex digits
	Seqnum    uint64        // sequence number within the file's seqnum ID
	File      string        // host path of the file the entry was read from
	// Fields holds the decoded fields (values may hold any bytes). A field
	// given several times in one entry keeps its first value. A field that
	// could not be read (failed decompression) is missing and recorded in
	// the Journal's Problems.
	Fields map[string]string
}

// Query calls fn for each matching entry, in time order across all files,
// until fn returns false. fn may keep the *Entry: it is not reused, unless
// q.Reuse.
//
// The order is journalctl's: entries of one file in the file's order;
// entries of different files by sequence number when they share a seqnum
// source (all the files of one journald), else by monotonic time within the
// same boot, else by realtime. This is realtime order, ties broken by
// seqnum, except when a clock jumped. An entry present in two files (same
// seqnum source, seqnum, boot, time and content) is yielded once.
//
// Problems met while reading (a bad offset, a truncated object, a failed
// decompression) are appended to j.Problems and reading goes on with the
// next entry. Query returns an error for an invalid query, and when nothing
// could be read at all: no entry was yielded and every file met a problem.
func (j *Journal) Query(q Query, fn func(*Entry) bool) error {
	qc, err := j.newQueryCtx(&q)
	if err != nil {
		return err
	}
	j.beginCall()
	var cursors []*cursor
	for _, f := range j.Files {
		if f.hf == nil {
			continue
		}
		c, err := qc.openCursor(f)
		if err != nil {
			j.problem(f, 0, err)
			continue
		}
		if c != nil {
			cursors = append(cursors, c)
		}
	}
	emitted := 0
	for len(cursors) > 0 {
		best := 0
		for i := 1; i < len(cursors); i++ {
			if compareHeads(cursors[i], cursors[best]) < 0 {
				best = i
			}
		}
		c := cursors[best]
		e := qc.decode(c)
		// Skip the copies of this entry in other files.
		for i, o := range cursors {
			if i != best && sameEntry(o, c) {
				qc.advance(o)
			}
		}
		qc.advance(c)
		cursors = dropDone(cursors)
		if e != nil {
			emitted++
			if !fn(e) {
				return nil
			}
		}
	}
	if emitted == 0 {
		if all, err := j.allFailed(); all {
			return fmt.Errorf("journal: nothing could be read: %w", err)
		}
	}
	return nil
}

// dropDone removes the cursors whose file has no entry left.
func dropDone(cs []*cursor) []*cursor {
	out := cs[:0]
	for _, c := range cs {
		if c.ok {
			out = append(out, c)
		}
	}
	clear(cs[len(out):])
	return out
}

// cursor is the position of a query in one file.
type cursor struct {
	f    *File
	s    stream
	stop uint64 // offsets ≥ stop are past Until (0: no bound)
	head entryHead
	ok   bool // head holds the next entry
}

// compareHeads orders the next entries of two files as sd-journal does.
func compareHeads(a, b *cursor) int {
	x, y := &a.head, &b.head
	if a.f.hdr.seqnumID == b.f.hdr.seqnumID {
		if c := cmp.Compare(x.seqnum, y.seqnum); c != 0 {
			return c
		}
	}
	if x.boot == y.boot {
		if c := cmp.Compare(x.monotonic, y.monotonic); c != 0 {
			return c
		}
	}
	if c := cmp.Compare(x.realtime, y.realtime); c != 0 {
		return c
	}
	return cmp.Compare(x.xor, y.xor)
}

// sameEntry says whether two files hold the same entry next.
func sameEntry(a, b *cursor) bool {
	x, y := &a.head, &b.head
	return a.f.hdr.seqnumID == b.f.hdr.seqnumID && x.seqnum == y.seqnum &&
		x.boot == y.boot && x.monotonic == y.monotonic && x.realtime == y.realtime && x.xor == y.xor
}

// queryCtx is the state of one Query.
type queryCtx struct {
	j       *Journal
	any     [][][]byte // the terms as "FIELD=value" payloads
	boot    string     // normalized BootID
	since   uint64     // µs, 0: none
	until   uint64     // µs, 0: none (inclusive bound)
	hasTill bool
	all     bool     // decode all fields
	want    []string // fields to decode
	names   map[string]string
	// lastName is the field name of the last object decoded (not found
	// in cache), and whether it is wanted.
	lastName string
	lastKeep bool
	cache    dataCache
	items    []uint64

	lastBoot    [16]byte
	lastBootStr string

	reuse bool   // Query.Reuse
	entry *Entry // the entry handed to fn again and again, with reuse
}

func (j *Journal) newQueryCtx(q *Query) (*queryCtx, error) {
	qc := &queryCtx{j: j, all: q.Fields == nil, want: q.Fields, names: map[string]string{}, reuse: q.Reuse}
	for _, clause := range q.Any {
		var c [][]byte
		for _, t := range clause {
			if t.Field == "" || strings.ContainsRune(t.Field, '=') {
				return nil, fmt.Errorf("journal: invalid field name %q in a query term", t.Field)
			}
			c = append(c, []byte(t.Field+"="+t.Value))
		}
		qc.any = append(qc.any, c)
	}
	if q.BootID != "" {
		id, ok := parseID(q.BootID)
		if !ok {
			return nil, fmt.Errorf("journal: invalid boot ID %q", q.BootID)
		}
		qc.boot = id
	}
	if !q.Since.IsZero() {
		us := q.Since.UnixMicro()
		if q.Since.After(time.UnixMicro(us)) {
			us++ // round up: a bound between two microseconds
		}
		qc.since = uint64(max(us, 0))
	}
	if !q.Until.IsZero() {
		us := q.Until.UnixMicro()
		if us < 0 {
			us = 0
		}
		qc.until = uint64(us)
		qc.hasTill = true
	}
	if qc.hasTill && qc.since > qc.until {
		return nil, fmt.Errorf("journal: Since %s is after Until %s", q.Since, q.Until)
	}
	qc.cache.init()
	return qc, nil
}

// openCursor builds the stream of f for the query and reads its first
// entry; nil when f has no matching entry.
func (qc *queryCtx) openCursor(f *File) (*cursor, error) {
	j := qc.j
	s, err := qc.fileStream(f)
	if err != nil {
		return nil, err
	}
	if s.cur() == 0 {
		return nil, nil
	}
	c := &cursor{f: f, s: s}
	if qc.since != 0 || qc.hasTill {
		lo, hi, ok := j.timeBounds(f, qc.since, qc.until, qc.hasTill)
		if !ok {
			return nil, nil
		}
		if lo != 0 {
			s.seek(lo)
		}
		c.stop = hi
	}
	qc.advance(c)
	if !c.ok {
		return nil, nil
	}
	return c, nil
}

// fileStream is the stream of f's entries that match the query's terms and
// boot.
func (qc *queryCtx) fileStream(f *File) (stream, error) {
	j := qc.j
	var s stream
	if len(qc.any) > 0 {
		var ors []stream
		for _, clause := range qc.any {
			if len(clause) == 0 {
				ors = []stream{j.globalChain(f)}
				break
			}
			var ands []stream
			for _, payload := range clause {
				d, found, err := j.findData(f, payload)
				if err != nil {
					return nil, err
				}
				if !found {
					ands = nil
					break
				}
				ands = append(ands, j.dataChain(f, &d))
			}
			if len(ands) > 0 {
				ors = append(ors, newAnd(ands))
			}
		}
		s = newOr(ors)
	}
	if qc.boot != "" {
		d, found, err := j.findData(f, []byte("_BOOT_ID="+qc.boot))
		if err != nil {
			return nil, err
		}
		if !found {
			return emptyStream{}, nil
		}
		bs := j.dataChain(f, &d)
		if s == nil {
			s = bs
		} else {
			s = newAnd([]stream{s, bs})
		}
	}
	if s == nil {
		s = j.globalChain(f)
	}
	return s, nil
}

func (j *Journal) globalChain(f *File) stream {
	return j.newChain(f, 0, f.hdr.entryArrayOffset, f.hdr.nEntries)
}

func (j *Journal) dataChain(f *File, d *dataObject) stream {
	return j.newChain(f, d.entry, d.entryArray, d.nEntries)
}

// advance reads the next entry of c's stream that passes the time bounds.
func (qc *queryCtx) advance(c *cursor) {
	j := qc.j
	c.ok = false
	for {
		off := c.s.cur()
		if off == 0 || (c.stop != 0 && off >= c.stop) {
			return
		}
		h, err := j.readEntryHead(c.f, off)
		c.s.next()
		if err != nil {
			j.problem(c.f, off, err)
			continue
		}
		if h.realtime < qc.since || (qc.hasTill && h.realtime > qc.until) {
			continue
		}
		c.head = h
		c.ok = true
		return
	}
}

// decode reads the fields of c's current entry.
func (qc *queryCtx) decode(c *cursor) *Entry {
	j := qc.j
	f := c.f
	h := &c.head
	if h.boot != qc.lastBoot || qc.lastBootStr == "" {
		qc.lastBoot = h.boot
		qc.lastBootStr = formatID(h.boot)
	}
	var e *Entry
	if qc.reuse {
		if qc.entry == nil {
			qc.entry = &Entry{Fields: map[string]string{}}
		}
		e = qc.entry
		clear(e.Fields)
	} else {
		e = &Entry{}
	}
	e.Realtime = usecTime(h.realtime)
	e.Monotonic = time.Duration(h.monotonic) * time.Microsecond
	e.BootID = qc.lastBootStr
	e.Seqnum = h.seqnum
	e.File = f.Path
	if !qc.all && len(qc.want) == 0 {
		if e.Fields == nil {
			e.Fields = map[string]string{}
		}
		return e
	}
	items, err := j.entryItems(f, h, qc.items[:0])
	qc.items = items[:0]
	if err != nil {
		j.problem(f, h.off, err)
		return nil
	}
	n := len(items)
	if !qc.all {
		n = len(qc.want)
	}
	if e.Fields == nil {
		e.Fields = make(map[string]string, n)
	}
	for _, p := range items {
		name, value, keep, ok := qc.field(f, p)
		if !ok || !keep {
			continue
		}
		if _, dup := e.Fields[name]; !dup {
			e.Fields[name] = value
		}
	}
	return e
}

// wants says whether the field name is to be decoded.
func (qc *queryCtx) wants(name []byte) bool {
	if qc.all {
		return true
	}
	for _, w := range qc.want {
		if w == string(name) {
			return true
		}
	}
	return false
}

// intern returns name as a string, shared by every entry.
func (qc *queryCtx) intern(name []byte) string {
	if s, ok := qc.names[string(name)]; ok {
		return s
	}
	s := string(name)
	if len(qc.names) < 4096 {
		qc.names[s] = s
	}
	return s
}

// dataPrefix is how much of a DATA payload is read with its header: the
// whole of most objects.
const dataPrefix = 512 - dataPayloadCompact

// field decodes the DATA object at off: its field name, and its value when
// the query wants the field.
func (qc *queryCtx) field(f *File, off uint64) (name, value string, keep, ok bool) {
	if v, hit := qc.cache.get(f, off); hit {
		return v.name, v.value, v.keep, !v.bad
	}
	j := qc.j
	d, stored, err := j.readDataHeader(f, off, dataPrefix)
	if err != nil {
		j.problem(f, off, err)
		return "", "", false, false
	}
	payload := stored
	full := d.size-d.payloadOff == uint64(len(stored))
	if d.flags&compressedMask != 0 || !full {
		// The field name is inside the compressed payload; an uncompressed
		// payload longer than the prefix holds its name in the prefix.
		eq := bytes.IndexByte(stored, '=')
		if d.flags&compressedMask == 0 && eq > 0 && !qc.wants(stored[:eq]) {
			name = qc.intern(stored[:eq])
			qc.cache.put(f, off, dataVal{name: name}, d.nEntries)
			return name, "", false, true
		}
		payload, err = j.payload(f, &d, stored)
		if err != nil {
			j.problem(f, off, err)
			qc.cache.put(f, off, dataVal{bad: true}, d.nEntries)
			return "", "", false, false
		}
	}
	eq := bytes.IndexByte(payload, '=')
	if eq <= 0 {
		j.problem(f, off, fmt.Errorf("%w: DATA payload without a field name", errBadObject))
		qc.cache.put(f, off, dataVal{bad: true}, d.nEntries)
		return "", "", false, false
	}
	if nb := payload[:eq]; string(nb) == qc.lastName {
		// The objects missed are mostly of one field (MESSAGE: every
		// entry's own): its name is not looked up again.
		name, keep = qc.lastName, qc.lastKeep
	} else {
		name, keep = qc.intern(nb), qc.wants(nb)
		qc.lastName, qc.lastKeep = name, keep
	}
	if keep {
		value = string(payload[eq+1:])
	}
	qc.cache.put(f, off, dataVal{name: name, value: value, keep: keep}, d.nEntries)
	return name, value, keep, true
}

// dataCache keeps decoded DATA objects shared by several entries
// (PRIORITY=6, _HOSTNAME=..., _PID=...), by offset, in a direct-mapped table:
// one probe per field of every entry, a miss as cheap as a hit (the entries
// of a long query are millions), a slot taken by the latest object that
// falls in it. At most dataCacheSlots small values are held.
type dataCache struct {
	slots []dataSlot
}

type dataSlot struct {
	f   *File
	off uint64
	v   dataVal
}

type dataVal struct {
	name, value string
	keep        bool
	bad         bool
}

const (
	dataCacheBits     = 13
	dataCacheSlots    = 1 << dataCacheBits
	dataCacheMaxValue = 1024
)

func (c *dataCache) init() {
	c.slots = make([]dataSlot, dataCacheSlots)
}

// slot is where off lives: objects are 8-byte aligned, and a
// multiplicative hash spreads neighbours.
func (c *dataCache) slot(off uint64) *dataSlot {
	return &c.slots[((off>>3)*0x9E3779B97F4A7C15)>>(64-dataCacheBits)]
}

func (c *dataCache) get(f *File, off uint64) (dataVal, bool) {
	s := c.slot(off)
	if s.f == f && s.off == off && f != nil {
		return s.v, true
	}
	return dataVal{}, false
}

// put caches v when the object is shared by other entries (n_entries > 1)
// and small.
func (c *dataCache) put(f *File, off uint64, v dataVal, nEntries uint64) {
	if nEntries <= 1 || len(v.value) > dataCacheMaxValue {
		return
	}
	*c.slot(off) = dataSlot{f: f, off: off, v: v}
}
