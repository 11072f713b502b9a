package journal

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"sort"
	"time"
)

// Boot is one boot of the journal.
type Boot struct {
	ID          string    // 32 lowercase hex digits
	First, Last time.Time // realtime of the boot's first and last entries
}

// Boots returns the boots found, oldest first, with the realtime of their
// first and last entries. It reads the _BOOT_ID= DATA objects of each file
// (the FIELD object's list of values) and the first and last entries of
// their entry arrays, never the entries in between. When a file's list of
// values is damaged or absent, its boots are found from the boot IDs of its
// entries instead, by bisection (a few dozen entries per boot). Problems met
// are appended to j.Problems; an error is returned only when nothing could
// be read at all.
func (j *Journal) Boots() ([]Boot, error) {
	type span struct{ first, last uint64 }
	spans := map[string]*span{}
	j.beginCall()
	for _, f := range j.Files {
		if f.hf == nil {
			continue
		}
		add := func(id string, first, last uint64) {
			s := spans[id]
			if s == nil {
				spans[id] = &span{first, last}
				return
			}
			s.first = min(s.first, first)
			s.last = max(s.last, last)
		}
		n, err := j.fileBoots(f, add)
		if err != nil {
			j.problem(f, 0, err)
		}
		if err != nil || (n == 0 && f.hdr.nEntries > 0) {
			// The list of _BOOT_ID values is damaged (or cut: its head is
			// the newest value), or absent: find the boots from the
			// entries instead.
			j.bootsByEntries(f, add)
		}
	}
	out := make([]Boot, 0, len(spans))
	for id, s := range spans {
		out = append(out, Boot{ID: id, First: usecTime(s.first), Last: usecTime(s.last)})
	}
	slices.SortFunc(out, func(a, b Boot) int {
		if c := a.First.Compare(b.First); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	if len(out) == 0 {
		if all, err := j.allFailed(); all {
			return nil, fmt.Errorf("journal: nothing could be read: %w", err)
		}
	}
	return out, nil
}

var bootField = []byte("_BOOT_ID")

// fileBoots calls fn for each boot of f with the realtime (µs) of its first
// and last entries in f, and returns the number of boots found.
func (j *Journal) fileBoots(f *File, fn func(id string, first, last uint64)) (int, error) {
	p, err := j.findField(f, bootField)
	if err != nil {
		return 0, err
	}
	n := 0
	// DATA objects are prepended to their field's list, so offsets shrink
	// along it: a list that does not shrink loops.
	for steps := uint64(0); p != 0; steps++ {
		if steps > f.limit/dataPayloadRegular {
			return n, fmt.Errorf("_BOOT_ID values: %w", errLoop)
		}
		d, stored, err := j.readDataHeader(f, p, 64)
		if err != nil {
			return n, fmt.Errorf("_BOOT_ID values: %w", err)
		}
		payload := stored
		if d.flags&compressedMask != 0 || d.size-d.payloadOff != uint64(len(stored)) {
			payload, err = j.payload(f, &d, stored)
			if err != nil {
				j.problem(f, p, err)
				payload = nil
			}
		}
		if v, ok := bytes.CutPrefix(payload, []byte("_BOOT_ID=")); ok {
			if id, ok := parseID(string(v)); ok {
				if j.bootSpan(f, &d, id, fn) {
					n++
				}
			} else {
				j.problem(f, p, fmt.Errorf("%w: _BOOT_ID value %q", errBadObject, v))
			}
		}
		if d.nextField != 0 && d.nextField >= p {
			return n, fmt.Errorf("_BOOT_ID values at %d: %w", p, errLoop)
		}
		p = d.nextField
	}
	return n, nil
}

// bootSpan finds the first and last entries of the boot's DATA object d
// and says whether it could.
func (j *Journal) bootSpan(f *File, d *dataObject, id string, fn func(id string, first, last uint64)) bool {
	if d.nEntries == 0 || d.entry == 0 {
		return false
	}
	first, err := j.readEntryHead(f, d.entry)
	if err != nil {
		j.problem(f, d.entry, err)
		return false
	}
	last := first
	if d.nEntries > 1 {
		off, err := j.lastOfChain(f, d.entryArray, d.nEntries-1)
		if err != nil {
			j.problem(f, d.off, err)
		} else if off > first.off {
			if h, err := j.readEntryHead(f, off); err != nil {
				j.problem(f, off, err)
			} else {
				last = h
			}
		}
	}
	fn(id, first.realtime, last.realtime)
	return true
}

// bootsByEntries finds the boots of f from the boot IDs of its entries,
// assuming that the entries of a boot follow each other in the file (they
// do in a file of one machine): it reads the first entry of each run of a
// boot and finds the run's end by bisection, a few dozen entries per boot.
func (j *Journal) bootsByEntries(f *File, fn func(id string, first, last uint64)) {
	arrays := j.globalArrays(f)
	if len(arrays) == 0 {
		return
	}
	total := arrays[len(arrays)-1].start + arrays[len(arrays)-1].n
	for k := uint64(0); k < total; {
		first, ok := j.entryAt(f, arrays, k)
		if !ok {
			k++
			continue
		}
		// The last index of the run: exponential then binary search.
		same := func(i uint64) bool {
			h, ok := j.entryAt(f, arrays, i)
			return ok && h.boot == first.boot
		}
		lo, step := k, uint64(1)
		for lo+step < total && same(lo+step) {
			lo += step
			step *= 2
		}
		hi := min(lo+step, total) // first index known (or assumed) outside
		for hi-lo > 1 {
			mid := lo + (hi-lo)/2
			if same(mid) {
				lo = mid
			} else {
				hi = mid
			}
		}
		last, _ := j.entryAt(f, arrays, lo)
		fn(formatID(first.boot), first.realtime, last.realtime)
		k = lo + 1
	}
}

// entryAt reads the head of the entry at index k of f's global chain.
func (j *Journal) entryAt(f *File, arrays []arrayInfo, k uint64) (entryHead, bool) {
	i := sort.Search(len(arrays), func(i int) bool { return arrays[i].start+arrays[i].n > k })
	if i == len(arrays) {
		return entryHead{}, false
	}
	a := arrays[i]
	itemSize := uint64(8)
	if f.compact {
		itemSize = 4
	}
	b, err := j.cache.read(f, a.off+entryArrayItems+(k-a.start)*itemSize, itemSize)
	if err != nil {
		j.problem(f, a.off, err)
		return entryHead{}, false
	}
	off := item(b, itemSize)
	h, err := j.readEntryHead(f, off)
	if err != nil {
		j.problem(f, off, err)
		return entryHead{}, false
	}
	return h, true
}

// lastOfChain returns the last item of the entry array chain starting at
// arr and holding n items. Arrays double in size along a chain, so this
// reads a few array headers, not the items.
func (j *Journal) lastOfChain(f *File, arr, n uint64) (uint64, error) {
	itemSize := uint64(8)
	if f.compact {
		itemSize = 4
	}
	prev := uint64(0)
	for a := arr; n > 0; {
		if a == 0 {
			return 0, fmt.Errorf("%w: entry array chain ends early", errBadObject)
		}
		if a <= prev {
			return 0, fmt.Errorf("%w: entry array at %d after %d", errLoop, a, prev)
		}
		size, _, err := j.checkObject(f, a, objectEntryArray, entryArrayItems+itemSize)
		if err != nil {
			return 0, fmt.Errorf("entry array: %w", err)
		}
		capacity := (size - entryArrayItems) / itemSize
		if n <= capacity {
			// The last item; an online file may not have filled it yet:
			// fall back to the last item written.
			for i := n; i > 0; i-- {
				b, err := j.cache.read(f, a+entryArrayItems+(i-1)*itemSize, itemSize)
				if err != nil {
					return 0, err
				}
				if v := item(b, itemSize); v != 0 && f.validOffset(v) {
					return v, nil
				}
			}
			return 0, fmt.Errorf("%w: empty entry array at %d", errBadObject, a)
		}
		n -= capacity
		b, err := j.cache.read(f, a+entryArrayNext, 8)
		if err != nil {
			return 0, err
		}
		prev, a = a, le.Uint64(b)
	}
	return 0, nil
}

// arrayInfo is one array of a file's global entry array chain.
type arrayInfo struct {
	off   uint64 // offset of the ENTRY_ARRAY object
	start uint64 // index of its first item in the chain
	n     uint64 // items used
}

// maxArrays bounds the arrays of a chain kept for bisection (a chain of
// doubling arrays has a few dozen).
const maxArrays = 1 << 16

// globalArrays returns (and caches) the arrays of f's global entry array
// chain, stopping at the first bad one.
func (j *Journal) globalArrays(f *File) []arrayInfo {
	if f.arrays != nil {
		return f.arrays
	}
	itemSize := uint64(8)
	if f.compact {
		itemSize = 4
	}
	arrays := []arrayInfo{}
	left := f.hdr.nEntries
	start := uint64(0)
	prev := uint64(0)
	for a := f.hdr.entryArrayOffset; a != 0 && left > 0 && len(arrays) < maxArrays; {
		if a <= prev {
			j.problem(f, prev, fmt.Errorf("%w: next entry array at %d", errLoop, a))
			break
		}
		size, _, err := j.checkObject(f, a, objectEntryArray, entryArrayItems+itemSize)
		if err != nil {
			j.problem(f, a, fmt.Errorf("entry array: %w", err))
			break
		}
		n := min((size-entryArrayItems)/itemSize, left)
		arrays = append(arrays, arrayInfo{off: a, start: start, n: n})
		start += n
		left -= n
		b, err := j.cache.read(f, a+entryArrayNext, 8)
		if err != nil {
			j.problem(f, a, fmt.Errorf("entry array: %w", err))
			break
		}
		prev, a = a, le.Uint64(b)
	}
	f.arrays = arrays
	return arrays
}

// timeBounds finds by bisection over f's global entry array chain the first
// entry with realtime ≥ since (lo; 0 when since is 0) and the first entry
// with realtime > until (hi; 0 when there is none or no Until). ok is false
// when no entry of f can be within the bounds. When the chain cannot be
// read, it returns no bounds and ok: the exact check of each entry's
// realtime still applies.
func (j *Journal) timeBounds(f *File, since, until uint64, hasTill bool) (lo, hi uint64, ok bool) {
	arrays := j.globalArrays(f)
	if len(arrays) == 0 {
		return 0, 0, true
	}
	last := arrays[len(arrays)-1]
	total := last.start + last.n
	var failed bool
	at := func(k uint64) (off, rt uint64) {
		h, ok := j.entryAt(f, arrays, k)
		if !ok {
			failed = true
			return 0, 0
		}
		return h.off, h.realtime
	}
	search := func(pred func(rt uint64) bool) (uint64, bool) {
		k := sort.Search(int(total), func(i int) bool {
			_, rt := at(uint64(i))
			return failed || pred(rt)
		})
		return uint64(k), !failed
	}
	if since != 0 {
		k, good := search(func(rt uint64) bool { return rt >= since })
		if !good {
			return 0, 0, true
		}
		if k == total {
			return 0, 0, false
		}
		lo, _ = at(k)
	}
	if hasTill {
		k, good := search(func(rt uint64) bool { return rt > until })
		if !good {
			return 0, 0, true
		}
		if k < total {
			hi, _ = at(k)
			if k == 0 || (lo != 0 && hi <= lo) {
				return 0, 0, false
			}
		}
	}
	if failed {
		return 0, 0, true
	}
	return lo, hi, true
}
