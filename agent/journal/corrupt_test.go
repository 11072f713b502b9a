package journal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/host/hosttest"
)

// Bad input: a journal cut short (copied while written, disk full), bytes
// flipped, chains that loop, offsets outside the file, payloads that do not
// decompress. The reader yields what it can read, each entry as it is in
// the intact file, says what it could not read, never panics, never loops.

// corruptBase is a real file (compact, keyed hash, zstd) of 3000 entries,
// its bytes, and the entries read from it intact, by seqnum.
type corruptBase struct {
	bytes   []byte
	used    uint64 // end of the last object
	entries map[uint64]*Entry
	kubelet int // entries of kubelet.service
	h       *host.Host
	path    string // host path of the file
}

func newCorruptBase(t *testing.T) *corruptBase {
	t.Helper()
	h, p := singleFile(t, writerOptions{}, 3000)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	j := openHost(t, h)
	base := &corruptBase{bytes: b, entries: map[uint64]*Entry{}, h: h, path: h.HostPath(p)}
	for _, e := range queryAll(t, j, Query{}) {
		base.entries[e.Seqnum] = e
	}
	base.kubelet = len(queryAll(t, j, Query{Any: kubeletQuery}))
	tail := binary.LittleEndian.Uint64(b[hTailObjectOffset:])
	base.used = tail + binary.LittleEndian.Uint64(b[tail+8:])
	if len(base.entries) != 3000 || len(j.Problems) != 0 {
		t.Fatalf("base: %d entries, problems %v", len(base.entries), j.Problems)
	}
	return base
}

var kubeletQuery = [][]Term{{{"_SYSTEMD_UNIT", "kubelet.service"}}}

// result is what exercise read from a damaged file.
type result struct {
	all, kubelet int
	boots        []Boot
	problems     []Problem
	opened       bool
}

// exercise writes b as the journal of a new host and reads it every way:
// all entries, a unit, a boot, a time window, the boots. When strict, every
// entry yielded must be the intact file's entry of the same seqnum, with the
// same values (a field that could not be read may be missing): the damage
// is to structures the reader checks. Flipped bytes may change values the
// format has no check for (a message's text), so they are not strict.
func (base *corruptBase) exercise(t *testing.T, b []byte, strict bool) result {
	t.Helper()
	h := hosttest.Tree(t, map[string]string{"var/log/journal/" + machineID + "/system.journal": string(b)})
	j := openHost(t, h)
	var r result
	r.opened = len(j.Files) == 1
	check := func(q Query) int {
		n := 0
		err := j.Query(q, func(e *Entry) bool {
			n++
			if !strict {
				return true
			}
			want := base.entries[e.Seqnum]
			if want == nil {
				t.Errorf("entry with seqnum %d is not in the intact file", e.Seqnum)
				return true
			}
			if !e.Realtime.Equal(want.Realtime) || e.BootID != want.BootID || e.Monotonic != want.Monotonic {
				t.Errorf("entry %d: %v %s %v, intact %v %s %v", e.Seqnum, e.Realtime, e.BootID, e.Monotonic, want.Realtime, want.BootID, want.Monotonic)
			}
			for k, v := range e.Fields {
				if want.Fields[k] != v {
					t.Errorf("entry %d: %s=%.40q, intact %.40q", e.Seqnum, k, v, want.Fields[k])
				}
			}
			return true
		})
		if err != nil && n > 0 {
			t.Errorf("Query %+v: error %v after %d entries", q, err, n)
		}
		return n
	}
	r.all = check(Query{})
	r.kubelet = check(Query{Any: kubeletQuery})
	check(Query{Any: kubeletQuery, BootID: boot2, Fields: []string{"MESSAGE"}})
	check(Query{Since: t0.Add(5 * fixtureStep), Until: t0.Add(2500 * fixtureStep)})
	r.boots, _ = j.Boots()
	r.problems = j.Problems
	return r
}

func hasProblem(ps []Problem, target error) bool {
	for _, p := range ps {
		if errors.Is(p.Err, target) {
			return true
		}
	}
	return false
}

func TestTruncatedFiles(t *testing.T) {
	base := newCorruptBase(t)
	// The objects follow the hash tables (3.7 MB of buckets for a file
	// sized for 128 MiB).
	objects := binary.LittleEndian.Uint64(base.bytes[hDataHashOffset:]) + binary.LittleEndian.Uint64(base.bytes[hDataHashSize:])
	within := func(num, den uint64) uint64 { return objects + (base.used-objects)*num/den }
	cuts := []struct {
		name     string
		at       uint64
		usable   bool // the file is opened
		someRead bool // entries are read
	}{
		{"zero length", 0, false, false},
		{"inside the header", 100, false, false},
		{"after the header", headerSizeMin + 56, true, false},
		{"inside the hash tables", 4096, true, false},
		{"at the first objects", objects + 300, true, false},
		{"in the middle of the objects", within(1, 2), true, true},
		{"at three quarters of the objects, mid-object", within(3, 4) + 13, true, true},
		{"one byte short", base.used - 1, true, true},
	}
	for _, c := range cuts {
		t.Run(c.name, func(t *testing.T) {
			r := base.exercise(t, base.bytes[:c.at], true)
			if r.opened != c.usable {
				t.Errorf("opened %v, want %v (problems %v)", r.opened, c.usable, r.problems)
			}
			if c.someRead && (r.all == 0 || r.kubelet == 0 || len(r.boots) == 0) {
				t.Errorf("read %d entries, %d of kubelet, boots %v", r.all, r.kubelet, r.boots)
			}
			if r.all >= len(base.entries) {
				t.Errorf("read all %d entries of a cut file", r.all)
			}
			if len(r.problems) == 0 {
				t.Error("no problem recorded")
			}
		})
	}
}

func TestFlippedBytes(t *testing.T) {
	base := newCorruptBase(t)
	for seed := uint64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0))
			b := slices.Clone(base.bytes)
			// Flip bytes among the objects written (the rest of the file is
			// zeros that nothing refers to).
			hs := binary.LittleEndian.Uint64(b[hHeaderSize:])
			for range 200 {
				b[hs+rng.Uint64N(base.used-hs)] ^= byte(1 + rng.IntN(255))
			}
			base.exercise(t, b, false)
		})
	}
	t.Run("garbage after the header", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(99, 0))
		b := slices.Clone(base.bytes)
		for i := uint64(headerSizeMax); i < base.used; i++ {
			b[i] = byte(rng.Uint32())
		}
		r := base.exercise(t, b, false)
		if len(r.problems) == 0 {
			t.Error("no problem recorded")
		}
	})
}

// TestBrokenStructures damages one structure at a time and checks what is
// still read and what is reported.
func TestBrokenStructures(t *testing.T) {
	base := newCorruptBase(t)
	le := binary.LittleEndian
	h0 := base.h
	kubeletData, f := dataOffset(t, h0, base.path, "_SYSTEMD_UNIT=kubelet.service")
	bootData, _ := dataOffset(t, h0, base.path, "_BOOT_ID="+boot1)
	g := nodeLog{n: 3000, start: t0, step: fixtureStep}
	bigMessage, _ := dataOffset(t, h0, base.path, "MESSAGE="+g.entry(1011).Get("MESSAGE"))
	firstArray := le.Uint64(base.bytes[hEntryArrayOffset:])
	po := f.dataPayloadOffset()
	// capacity is the number of items of the array at off.
	capacity := func(off uint64) int {
		return int((le.Uint64(base.bytes[off+8:]) - entryArrayItems) / 4)
	}
	second := le.Uint64(base.bytes[firstArray+entryArrayNext:])
	third := le.Uint64(base.bytes[second+entryArrayNext:])

	// An entry the kubelet query yields (the 10th): its offset via the
	// DATA object's entry array.
	entryOffset := func(b []byte, arr uint64, k uint64) uint64 {
		for arr != 0 {
			n := (le.Uint64(b[arr+8:]) - entryArrayItems) / 4
			if k < n {
				return uint64(le.Uint32(b[arr+entryArrayItems+4*k:]))
			}
			k -= n
			arr = le.Uint64(b[arr+entryArrayNext:])
		}
		t.Fatal("no such item")
		return 0
	}

	tests := []struct {
		name   string
		damage func(b []byte)
		check  func(t *testing.T, r result)
	}{
		{
			name: "global entry array chain loops on itself",
			damage: func(b []byte) {
				le.PutUint64(b[firstArray+entryArrayNext:], firstArray)
			},
			check: func(t *testing.T, r result) {
				// The entries of the first array only.
				if r.all != capacity(firstArray) || !hasProblem(r.problems, errLoop) {
					t.Errorf("%d entries, problems %v", r.all, r.problems)
				}
				if r.kubelet != base.kubelet {
					t.Errorf("%d kubelet entries (the unit's own chain is intact), want %d", r.kubelet, base.kubelet)
				}
			},
		},
		{
			name: "global entry array chain goes back",
			damage: func(b []byte) {
				le.PutUint64(b[third+entryArrayNext:], firstArray)
			},
			check: func(t *testing.T, r result) {
				if r.all != capacity(firstArray)+capacity(second)+capacity(third) || !hasProblem(r.problems, errLoop) {
					t.Errorf("%d entries, problems %v", r.all, r.problems)
				}
			},
		},
		{
			name: "a unit's entry array chain loops",
			damage: func(b []byte) {
				arr := kubeletData.entryArray
				next := le.Uint64(b[arr+entryArrayNext:])
				le.PutUint64(b[next+entryArrayNext:], arr)
			},
			check: func(t *testing.T, r result) {
				// The inline entry, then the first two arrays.
				arr := kubeletData.entryArray
				want := 1 + capacity(arr) + capacity(le.Uint64(base.bytes[arr+entryArrayNext:]))
				if r.kubelet != want || !hasProblem(r.problems, errLoop) {
					t.Errorf("%d kubelet entries, problems %v", r.kubelet, r.problems)
				}
				if r.all != len(base.entries) {
					t.Errorf("%d entries, want %d", r.all, len(base.entries))
				}
			},
		},
		{
			name: "a data hash chain loops",
			damage: func(b []byte) {
				le.PutUint64(b[kubeletData.off+dataNextHashOffset:], kubeletData.off)
			},
			check: func(t *testing.T, r result) {
				// The kubelet object is found before the loop is met.
				if r.kubelet != base.kubelet || r.all != len(base.entries) {
					t.Errorf("%d kubelet entries, %d in all", r.kubelet, r.all)
				}
			},
		},
		{
			name: "a _BOOT_ID value list loops",
			damage: func(b []byte) {
				le.PutUint64(b[bootData.off+dataNextFieldOffset:], bootData.off)
			},
			check: func(t *testing.T, r result) {
				if len(r.boots) == 0 || !hasProblem(r.problems, errLoop) {
					t.Errorf("boots %v, problems %v", r.boots, r.problems)
				}
			},
		},
		{
			name: "the _BOOT_ID field is lost",
			damage: func(b []byte) {
				// The FIELD object named _BOOT_ID: its name is damaged.
				for k := bytes.Index(b, []byte("_BOOT_ID")); k >= 0; {
					if o := k - fieldPayload; o > 0 && o%8 == 0 && b[o] == objectField {
						b[k] = 'X'
						return
					}
					next := bytes.Index(b[k+1:], []byte("_BOOT_ID"))
					if next < 0 {
						break
					}
					k += 1 + next
				}
				t.Fatal("no FIELD object _BOOT_ID")
			},
			check: func(t *testing.T, r result) {
				// The boots are found from the entries' boot IDs.
				want := []Boot{{boot1, t0, t0.Add(1499 * fixtureStep)}, {boot2, t0.Add(1500 * fixtureStep), t0.Add(2999 * fixtureStep)}}
				if !slices.Equal(r.boots, want) {
					t.Errorf("boots %v, want %v", r.boots, want)
				}
			},
		},
		{
			name: "an entry array item points outside the file",
			damage: func(b []byte) {
				arr := kubeletData.entryArray
				le.PutUint32(b[arr+entryArrayItems+4:], 0xfffffff8)
			},
			check: func(t *testing.T, r result) {
				if r.kubelet != base.kubelet-1 || len(r.problems) == 0 {
					t.Errorf("%d kubelet entries (want %d), problems %v", r.kubelet, base.kubelet-1, r.problems)
				}
			},
		},
		{
			name: "an entry is not an entry",
			damage: func(b []byte) {
				b[entryOffset(b, kubeletData.entryArray, 9)] = objectData
			},
			check: func(t *testing.T, r result) {
				if r.kubelet != base.kubelet-1 || r.all != len(base.entries)-1 || !hasProblem(r.problems, errBadObject) {
					t.Errorf("%d kubelet entries, %d in all, problems %v", r.kubelet, r.all, r.problems)
				}
			},
		},
		{
			name: "an entry's size runs past the end",
			damage: func(b []byte) {
				le.PutUint64(b[entryOffset(b, kubeletData.entryArray, 9)+8:], 1<<40)
			},
			check: func(t *testing.T, r result) {
				if r.kubelet != base.kubelet-1 || !hasProblem(r.problems, errOutside) {
					t.Errorf("%d kubelet entries, problems %v", r.kubelet, r.problems)
				}
			},
		},
		{
			name: "a compressed payload does not decompress",
			damage: func(b []byte) {
				for i := bigMessage.off + po + 10; i < bigMessage.off+bigMessage.size-4; i++ {
					b[i] ^= 0x5a
				}
			},
			check: func(t *testing.T, r result) {
				// The entry is still read, without its MESSAGE.
				if r.all != len(base.entries) || r.kubelet != base.kubelet || !hasProblem(r.problems, errDecompress) {
					t.Errorf("%d entries, %d kubelet, problems %v", r.all, r.kubelet, r.problems)
				}
			},
		},
		{
			name: "a data object's size runs past the end",
			damage: func(b []byte) {
				le.PutUint64(b[bigMessage.off+8:], 1<<40)
			},
			check: func(t *testing.T, r result) {
				if r.all != len(base.entries) || !hasProblem(r.problems, errOutside) {
					t.Errorf("%d entries, problems %v", r.all, r.problems)
				}
			},
		},
		{
			name: "the data hash table is outside the file",
			damage: func(b []byte) {
				le.PutUint64(b[hDataHashOffset:], 1<<40)
			},
			check: func(t *testing.T, r result) {
				// Matches cannot be looked up; all entries can still be read.
				if r.all != len(base.entries) || r.kubelet != 0 || !hasProblem(r.problems, errHashTableAbsent) {
					t.Errorf("%d entries, %d kubelet, problems %v", r.all, r.kubelet, r.problems)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := slices.Clone(base.bytes)
			tc.damage(b)
			r := base.exercise(t, b, true)
			tc.check(t, r)
			for _, p := range r.problems {
				if !strings.HasPrefix(p.String(), "/var/log/journal/") {
					t.Errorf("problem without the file's path: %s", p)
				}
			}
		})
	}
}

// TestHashChainLoopNotFound looks up a value that is not in the file and
// whose bucket chain loops: the lookup ends with a problem.
func TestHashChainLoopNotFound(t *testing.T) {
	base := newCorruptBase(t)
	le := binary.LittleEndian
	d, f := dataOffset(t, base.h, base.path, "_SYSTEMD_UNIT=kubelet.service")
	buckets := f.hdr.dataHashSize / hashItemSize
	want := f.hash([]byte("_SYSTEMD_UNIT=kubelet.service")) % buckets
	var probe string
	for i := 0; ; i++ {
		probe = fmt.Sprintf("nosuch-%d.service", i)
		if f.hash([]byte("_SYSTEMD_UNIT="+probe))%buckets == want {
			break
		}
	}
	b := slices.Clone(base.bytes)
	le.PutUint64(b[d.off+dataNextHashOffset:], d.off)
	h := hosttest.Tree(t, map[string]string{"var/log/journal/" + machineID + "/system.journal": string(b)})
	j := openHost(t, h)
	err := j.Query(Query{Any: [][]Term{{{"_SYSTEMD_UNIT", probe}}}}, func(*Entry) bool { return true })
	if err == nil || !errors.Is(err, errLoop) || !hasProblem(j.Problems, errLoop) {
		t.Errorf("err %v, problems %v", err, j.Problems)
	}
}

// TestProblemsBounded checks that a file damaged everywhere does not grow
// Problems without bound, across queries.
func TestProblemsBounded(t *testing.T) {
	base := newCorruptBase(t)
	b := slices.Clone(base.bytes)
	// Every entry object loses its type.
	hs := binary.LittleEndian.Uint64(b[hHeaderSize:])
	for off := hs; off+16 <= base.used; {
		size := binary.LittleEndian.Uint64(b[off+8:])
		if b[off] == objectEntry {
			b[off] = objectTag
		}
		off += (size + 7) &^ 7
	}
	h := hosttest.Tree(t, map[string]string{"var/log/journal/" + machineID + "/system.journal": string(b)})
	j := openHost(t, h)
	for range 3 {
		err := j.Query(Query{}, func(*Entry) bool { t.Fatal("an entry"); return false })
		if err == nil {
			t.Error("no error when nothing could be read")
		}
	}
	if n := len(j.Problems); n == 0 || n > maxProblemsPerFile+1 {
		t.Errorf("%d problems", n)
	}
	if !hasProblem(j.Problems, errMoreProblems) {
		t.Error("the cap is not reported")
	}
}

// TestFileShrinks reads a file that shrinks after Open (a journal vacuumed
// or rewritten meanwhile).
func TestFileShrinks(t *testing.T) {
	base := newCorruptBase(t)
	h := hosttest.Tree(t, map[string]string{"var/log/journal/" + machineID + "/system.journal": string(base.bytes)})
	j := openHost(t, h)
	p := filepath.Join(h.Root, "var/log/journal", machineID, "system.journal")
	if err := os.Truncate(p, int64(base.used/2)); err != nil {
		t.Fatal(err)
	}
	n := 0
	j.Query(Query{}, func(*Entry) bool { n++; return true })
	if n >= len(base.entries) || len(j.Problems) == 0 {
		t.Errorf("%d entries, problems %v", n, j.Problems)
	}
}

// TestOnlineFile reads a file that a writer has open (state ONLINE): what
// was appended after the part read is ignored without a problem per object;
// a copy cut while written is reported once.
func TestOnlineFile(t *testing.T) {
	base := newCorruptBase(t)
	le := binary.LittleEndian
	hs := le.Uint64(base.bytes[hHeaderSize:])
	objects := le.Uint64(base.bytes[hDataHashOffset:]) + le.Uint64(base.bytes[hDataHashSize:])
	cut := objects + (base.used-objects)*2/3 + 20
	for _, tc := range []struct {
		name     string
		arena    uint64 // arena_size of the header
		problems int
	}{
		{"the header covers what was read", cut - hs, 0},
		{"a copy cut while written", le.Uint64(base.bytes[hArenaSize:]), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := slices.Clone(base.bytes[:cut])
			b[hState] = stateOnline
			le.PutUint64(b[hArenaSize:], tc.arena)
			r := base.exercise(t, b, true)
			if r.all < len(base.entries)/2 || r.kubelet == 0 || len(r.boots) != 2 {
				t.Errorf("%d entries, %d of kubelet, boots %v", r.all, r.kubelet, r.boots)
			}
			if len(r.problems) != tc.problems {
				t.Errorf("problems: %v", r.problems)
			}
		})
	}
}
