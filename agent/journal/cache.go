package journal

import (
	"errors"
	"fmt"
	"io"
	"sync"
)

// Reads go through a bounded block cache over host.File.ReadAt: journal
// objects are small (an ENTRY is about a hundred bytes) and read in nearly
// ascending order, so one pread of a block serves hundreds of objects, and
// the objects every entry shares (PRIORITY=6, _HOSTNAME=..., the hash table
// buckets) stay in memory. The cache is shared by the files of a Journal and
// holds at most blockCount blocks whatever the size of the journal.
const (
	blockShift = 16 // 64 KiB blocks
	blockSize  = 1 << blockShift
	blockCount = 64 // 4 MiB in all
)

// blockPool recycles block buffers between Journals: an agent run opens
// the journal more than once, and fresh buffers would be zeroed each time.
var blockPool = sync.Pool{New: func() any {
	b := make([]byte, blockSize)
	return &b
}}

type block struct {
	f          *File
	idx        uint64 // block number in the file
	data       []byte // the block's bytes; shorter than blockSize at the end of the file
	prev, next *block // LRU list, most recently used after the sentinel
}

type blockKey struct {
	f   *File
	idx uint64
}

type blockCache struct {
	m       map[blockKey]*block
	lru     block // sentinel: lru.next is the most recently used block
	n       int
	scratch []byte // spans of two blocks are copied here
	// preads counts the reads made (a figure for tests and benchmarks).
	preads int
}

func newBlockCache() *blockCache {
	c := &blockCache{m: make(map[blockKey]*block, blockCount)}
	c.lru.next = &c.lru
	c.lru.prev = &c.lru
	return c
}

func (c *blockCache) unlink(b *block) {
	b.prev.next = b.next
	b.next.prev = b.prev
}

func (c *blockCache) pushFront(b *block) {
	b.prev = &c.lru
	b.next = c.lru.next
	c.lru.next.prev = b
	c.lru.next = b
}

// drop forgets the blocks of a file (when it is closed) and gives their
// buffers back to the pool.
func (c *blockCache) drop(f *File) {
	for k, b := range c.m {
		if k.f == f {
			c.unlink(b)
			delete(c.m, k)
			c.n--
			buf := b.data[:cap(b.data)]
			b.data = nil
			blockPool.Put(&buf)
		}
	}
	f.last = nil
}

// get returns block idx of f, reading it when it is not cached.
func (c *blockCache) get(f *File, idx uint64) (*block, error) {
	if b := f.last; b != nil && b.f == f && b.idx == idx {
		return b, nil
	}
	if b, ok := c.m[blockKey{f, idx}]; ok {
		c.unlink(b)
		c.pushFront(b)
		f.last = b
		return b, nil
	}
	var b *block
	if c.n >= blockCount {
		// Reuse the least recently used block and its buffer.
		b = c.lru.prev
		c.unlink(b)
		delete(c.m, blockKey{b.f, b.idx})
		if b.f.last == b {
			b.f.last = nil
		}
	} else {
		b = &block{data: *blockPool.Get().(*[]byte)}
		c.n++
	}
	start := idx << blockShift
	want := uint64(blockSize)
	if start+want > f.limit {
		want = f.limit - start
	}
	buf := b.data[:cap(b.data)][:want]
	n, err := f.hf.ReadAt(buf, int64(start))
	c.preads++
	if err != nil && !(errors.Is(err, io.EOF) && uint64(n) == want) {
		// Give the buffer back; nothing is cached for this block.
		b.f = nil
		b.data = buf[:0]
		c.n--
		if n < len(buf) && (err == nil || errors.Is(err, io.EOF)) {
			return nil, fmt.Errorf("%w: short read at %d (the file shrank?)", errOutside, start+uint64(n))
		}
		return nil, err
	}
	b.f, b.idx, b.data = f, idx, buf
	c.m[blockKey{f, idx}] = b
	c.pushFront(b)
	f.last = b
	return b, nil
}

// read returns n bytes of f at off. The slice is only valid until the next
// call on the cache: callers decode it at once. Reads past the readable end
// of the file are errors wrapping errOutside. Reads larger than a block are
// made directly into a new buffer that the caller owns.
func (c *blockCache) read(f *File, off, n uint64) ([]byte, error) {
	if off > f.limit || n > f.limit-off {
		return nil, fmt.Errorf("%w: %d bytes at %d (readable size %d)", errOutside, n, off, f.limit)
	}
	if n == 0 {
		return nil, nil
	}
	idx := off >> blockShift
	end := (off + n - 1) >> blockShift
	if idx == end {
		b, err := c.get(f, idx)
		if err != nil {
			return nil, err
		}
		lo := off - idx<<blockShift
		if lo+n > uint64(len(b.data)) {
			return nil, fmt.Errorf("%w: %d bytes at %d", errOutside, n, off)
		}
		return b.data[lo : lo+n], nil
	}
	if n > blockSize {
		buf := make([]byte, n)
		m, err := f.hf.ReadAt(buf, int64(off))
		c.preads++
		if uint64(m) < n {
			if err == nil || errors.Is(err, io.EOF) {
				err = fmt.Errorf("%w: short read of %d bytes at %d", errOutside, n, off)
			}
			return nil, err
		}
		return buf, nil
	}
	if cap(c.scratch) < int(n) {
		c.scratch = make([]byte, n, max(n, 4096))
	}
	out := c.scratch[:n]
	copied := uint64(0)
	for i := idx; i <= end; i++ {
		b, err := c.get(f, i)
		if err != nil {
			return nil, err
		}
		lo := uint64(0)
		if i == idx {
			lo = off - idx<<blockShift
		}
		k := copy(out[copied:], b.data[min(lo, uint64(len(b.data))):])
		copied += uint64(k)
	}
	if copied < n {
		return nil, fmt.Errorf("%w: %d bytes at %d", errOutside, n, off)
	}
	return out, nil
}
