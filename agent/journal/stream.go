package journal

import (
	"fmt"
	"sort"
)

// A stream yields entry offsets of one file in ascending order: the entry
// array chain of the file (all entries) or of a DATA object (the entries
// that hold that field value), and intersections and unions of them. Entry
// arrays are sorted by offset (entries are appended), so AND and OR of
// matches are merges of sorted lists, as in sd-journal.
type stream interface {
	// cur is the current entry offset; 0 once the stream is exhausted.
	cur() uint64
	// next moves past the current offset.
	next()
	// seek moves to the first offset ≥ x; it does not move when cur() ≥ x.
	seek(x uint64)
}

type emptyStream struct{}

func (emptyStream) cur() uint64 { return 0 }
func (emptyStream) next()       {}
func (emptyStream) seek(uint64) {}

// chainStream walks an entry array chain: an optional inline first entry
// (DATA objects store their first entry in entry_offset), then the items of
// the ENTRY_ARRAY objects linked by next_entry_array_offset, n items in all.
//
// Every offset is checked: items must grow strictly (a chain that goes back
// is corrupt), lie inside the file and be aligned; arrays must follow each
// other at growing offsets. So a walk ends after at most n items and as many
// arrays as fit in the file, whatever the file holds.
type chainStream struct {
	j *Journal
	f *File

	c     uint64 // current offset, 0 when exhausted
	first uint64 // inline first entry not yet consumed
	last  uint64 // last offset produced

	itemSize uint64
	nextArr  uint64 // next array to enter
	arr      uint64 // current array
	arrN     uint64 // items of the current array to use
	idx      uint64 // next item of the current array to buffer
	left     uint64 // items of the chain after those of the current array

	buf    []uint64 // buffered items of the current array
	bufPos int
}

// chainBatch is how many items are read from an array at once.
const chainBatch = 512

// newChain returns a stream over the chain starting with the inline entry
// first (0 if none) and the array at arr, of n entries in all (first
// included).
func (j *Journal) newChain(f *File, first, arr, n uint64) *chainStream {
	s := &chainStream{j: j, f: f, nextArr: arr}
	s.itemSize = 8
	if f.compact {
		s.itemSize = 4
	}
	if first != 0 && n > 0 {
		s.first = first
		n--
	}
	s.left = n
	s.advance()
	return s
}

func (s *chainStream) cur() uint64 { return s.c }

func (s *chainStream) next() {
	if s.c != 0 {
		s.advance()
	}
}

func (s *chainStream) finish() {
	s.c = 0
	s.first = 0
	s.buf = s.buf[:0]
	s.bufPos = 0
	s.arrN, s.idx, s.left, s.nextArr = 0, 0, 0, 0
}

// accept checks the next offset v of the chain.
func (s *chainStream) accept(v uint64) bool {
	if v > s.last && v >= s.f.limit && s.f.hdr.state == stateOnline {
		// Past the end of what is read of a file being written: an entry
		// appended after Open, not a problem. (In a file that is not being
		// written it is one: the file was cut, or the item is corrupt.)
		return false
	}
	if v <= s.last || !s.f.validOffset(v) {
		s.j.problem(s.f, s.arr, fmt.Errorf("%w: entry array item %d after %d", errBadObject, v, s.last))
		return false
	}
	s.last = v
	s.c = v
	return true
}

// advance moves to the next valid offset.
func (s *chainStream) advance() {
	for {
		if s.first != 0 {
			v := s.first
			s.first = 0
			if s.accept(v) {
				return
			}
			continue
		}
		if s.bufPos < len(s.buf) {
			v := s.buf[s.bufPos]
			s.bufPos++
			if v == 0 {
				// A slot not written yet: the chain ends here.
				s.finish()
				return
			}
			if s.accept(v) {
				return
			}
			continue
		}
		if s.idx < s.arrN {
			if !s.fill() {
				s.finish()
				return
			}
			continue
		}
		if !s.enterNext() {
			s.finish()
			return
		}
	}
}

// fill buffers the next items of the current array.
func (s *chainStream) fill() bool {
	n := min(s.arrN-s.idx, chainBatch)
	b, err := s.j.cache.read(s.f, s.arr+entryArrayItems+s.idx*s.itemSize, n*s.itemSize)
	if err != nil {
		s.j.problem(s.f, s.arr, fmt.Errorf("entry array: %w", err))
		return false
	}
	s.buf = s.buf[:0]
	for i := uint64(0); i < n; i++ {
		s.buf = append(s.buf, item(b[i*s.itemSize:], s.itemSize))
	}
	s.bufPos = 0
	s.idx += n
	return true
}

// enterNext moves to the next array of the chain.
func (s *chainStream) enterNext() bool {
	if s.left == 0 || s.nextArr == 0 {
		return false
	}
	a := s.nextArr
	if a <= s.arr || !s.f.validOffset(a) {
		s.j.problem(s.f, s.arr, fmt.Errorf("%w: next entry array at %d", errLoop, a))
		return false
	}
	size, _, err := s.j.checkObject(s.f, a, objectEntryArray, entryArrayItems+s.itemSize)
	if err != nil {
		s.j.problem(s.f, a, fmt.Errorf("entry array: %w", err))
		return false
	}
	b, err := s.j.cache.read(s.f, a+entryArrayNext, 8)
	if err != nil {
		s.j.problem(s.f, a, fmt.Errorf("entry array: %w", err))
		return false
	}
	s.nextArr = le.Uint64(b)
	capacity := (size - entryArrayItems) / s.itemSize
	s.arr = a
	s.arrN = min(capacity, s.left)
	s.left -= s.arrN
	s.idx = 0
	s.buf = s.buf[:0]
	s.bufPos = 0
	return true
}

// item reads item i of the current array (0 on error).
func (s *chainStream) item(i uint64) uint64 {
	b, err := s.j.cache.read(s.f, s.arr+entryArrayItems+i*s.itemSize, s.itemSize)
	if err != nil {
		s.j.problem(s.f, s.arr, fmt.Errorf("entry array: %w", err))
		return 0
	}
	return item(b, s.itemSize)
}

// seek moves to the first offset ≥ x: within the buffered items, else by
// bisection in the current array, else array by array (each array is
// checked by its last item; arrays double in size, so a chain has few).
func (s *chainStream) seek(x uint64) {
	for s.c != 0 && s.c < x {
		// Within the buffered items.
		if rest := s.buf[s.bufPos:]; len(rest) > 0 && (rest[len(rest)-1] >= x || rest[len(rest)-1] == 0) {
			i := sort.Search(len(rest), func(i int) bool { return rest[i] >= x || rest[i] == 0 })
			s.bufPos += i
			s.advance()
			continue
		}
		// Within the rest of the current array.
		if s.idx < s.arrN {
			lastV := s.item(s.arrN - 1)
			if lastV >= x || lastV == 0 {
				lo, hi := s.idx, s.arrN-1
				for lo < hi {
					mid := lo + (hi-lo)/2
					v := s.item(mid)
					if v >= x || v == 0 {
						hi = mid
					} else {
						lo = mid + 1
					}
				}
				s.idx = lo
				s.buf = s.buf[:0]
				s.bufPos = 0
				s.advance()
				continue
			}
			// The whole array is below x.
			s.last = max(s.last, lastV)
			s.idx = s.arrN
			s.buf = s.buf[:0]
			s.bufPos = 0
		} else {
			s.buf = s.buf[:0]
			s.bufPos = 0
		}
		if !s.enterNext() {
			s.finish()
			return
		}
		s.advance()
	}
}

// andStream yields the offsets present in every child.
type andStream struct {
	kids []stream
	c    uint64
}

func newAnd(kids []stream) stream {
	if len(kids) == 1 {
		return kids[0]
	}
	s := &andStream{kids: kids}
	s.settle()
	return s
}

func (s *andStream) cur() uint64 { return s.c }

// settle moves the children to the first offset they all hold.
func (s *andStream) settle() {
	for {
		var m uint64
		for _, k := range s.kids {
			c := k.cur()
			if c == 0 {
				s.c = 0
				return
			}
			m = max(m, c)
		}
		same := true
		for _, k := range s.kids {
			if k.cur() < m {
				k.seek(m)
				c := k.cur()
				if c == 0 {
					s.c = 0
					return
				}
				if c != m {
					same = false
				}
			}
		}
		if same {
			s.c = m
			return
		}
	}
}

func (s *andStream) next() {
	if s.c == 0 {
		return
	}
	s.kids[0].next()
	s.settle()
}

func (s *andStream) seek(x uint64) {
	if s.c == 0 || s.c >= x {
		return
	}
	s.kids[0].seek(x)
	s.settle()
}

// orStream yields the offsets present in any child.
type orStream struct {
	kids []stream
	c    uint64
}

func newOr(kids []stream) stream {
	switch len(kids) {
	case 0:
		return emptyStream{}
	case 1:
		return kids[0]
	}
	s := &orStream{kids: kids}
	s.settle()
	return s
}

func (s *orStream) cur() uint64 { return s.c }

func (s *orStream) settle() {
	var m uint64
	for _, k := range s.kids {
		if c := k.cur(); c != 0 && (m == 0 || c < m) {
			m = c
		}
	}
	s.c = m
}

func (s *orStream) next() {
	if s.c == 0 {
		return
	}
	for _, k := range s.kids {
		if k.cur() == s.c {
			k.next()
		}
	}
	s.settle()
}

func (s *orStream) seek(x uint64) {
	if s.c == 0 || s.c >= x {
		return
	}
	for _, k := range s.kids {
		k.seek(x)
	}
	s.settle()
}
