package journal

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

var le = binary.LittleEndian

// maxEntryItems bounds the fields of one entry (journald writes at most
// 1024 fields to an entry; anything far larger is corruption).
const maxEntryItems = 1 << 16

// item decodes an entry array item (or a compact entry item) of size 4 or 8.
func item(b []byte, size uint64) uint64 {
	if size == 4 {
		return uint64(le.Uint32(b))
	}
	return le.Uint64(b)
}

// hash is the hash function of f's hash tables.
func (f *File) hash(b []byte) uint64 {
	if f.keyed {
		return siphash24(f.hdr.fileID, b)
	}
	return jenkinsHash64(b)
}

// checkObject reads the object header at off and checks that it is an
// object of type typ of at least minSize bytes lying inside the file. It
// returns the object's size and flags.
func (j *Journal) checkObject(f *File, off uint64, typ uint8, minSize uint64) (size uint64, flags uint8, err error) {
	if off%8 != 0 || off < f.hdr.headerSize {
		return 0, 0, fmt.Errorf("%w: %s at misaligned or header offset %d", errBadObject, objectTypeName(typ), off)
	}
	b, err := j.cache.read(f, off, objectHeaderSize)
	if err != nil {
		return 0, 0, err
	}
	return checkObjectHeader(f, b, off, typ, minSize)
}

// checkObjectHeader checks the object header b (at least 16 bytes) read at off.
func checkObjectHeader(f *File, b []byte, off uint64, typ uint8, minSize uint64) (uint64, uint8, error) {
	if b[0] != typ {
		return 0, 0, fmt.Errorf("%w: expected %s, found %s", errBadObject, objectTypeName(typ), objectTypeName(b[0]))
	}
	size := le.Uint64(b[8:])
	if size < minSize {
		return 0, 0, fmt.Errorf("%w: %s of %d bytes (at least %d expected)", errBadObject, objectTypeName(typ), size, minSize)
	}
	if size > f.limit-off {
		return 0, 0, fmt.Errorf("%w: %s of %d bytes runs past the readable end (%d)", errOutside, objectTypeName(typ), size, f.limit)
	}
	return size, b[1], nil
}

// validOffset says whether off may be the offset of an object of f.
func (f *File) validOffset(off uint64) bool {
	return off%8 == 0 && off >= f.hdr.headerSize && off < f.limit
}

// entryHead is the fixed part of an ENTRY object.
type entryHead struct {
	off       uint64
	size      uint64
	seqnum    uint64
	realtime  uint64
	monotonic uint64
	xor       uint64
	boot      [16]byte
}

// readEntryHead reads the fixed part of the ENTRY object at off.
func (j *Journal) readEntryHead(f *File, off uint64) (entryHead, error) {
	var e entryHead
	if !f.validOffset(off) {
		return e, fmt.Errorf("%w: entry offset %d", errOutside, off)
	}
	b, err := j.cache.read(f, off, entryItems)
	if err != nil {
		return e, err
	}
	size, _, err := checkObjectHeader(f, b, off, objectEntry, entryItems)
	if err != nil {
		return e, err
	}
	e.off = off
	e.size = size
	e.seqnum = le.Uint64(b[entrySeqnum:])
	e.realtime = le.Uint64(b[entryRealtime:])
	e.monotonic = le.Uint64(b[entryMonotonic:])
	copy(e.boot[:], b[entryBootID:entryBootID+16])
	e.xor = le.Uint64(b[entryXorHash:])
	return e, nil
}

// entryItems reads the DATA offsets of the entry e into dst.
func (j *Journal) entryItems(f *File, e *entryHead, dst []uint64) ([]uint64, error) {
	itemSize := uint64(entryItemRegular)
	if f.compact {
		itemSize = entryItemCompact
	}
	n := (e.size - entryItems) / itemSize
	if n > maxEntryItems {
		return dst, fmt.Errorf("%w: entry with %d items", errBadObject, n)
	}
	b, err := j.cache.read(f, e.off+entryItems, n*itemSize)
	if err != nil {
		return dst, err
	}
	for i := uint64(0); i < n; i++ {
		var p uint64
		if f.compact {
			p = uint64(le.Uint32(b[i*4:]))
		} else {
			p = le.Uint64(b[i*16:])
		}
		dst = append(dst, p)
	}
	return dst, nil
}

// dataObject is a DATA object's header fields.
type dataObject struct {
	off        uint64
	size       uint64
	flags      uint8
	hash       uint64
	nextHash   uint64
	nextField  uint64
	entry      uint64 // first entry (inline)
	entryArray uint64 // entry array chain of the other entries
	nEntries   uint64
	payloadOff uint64 // offset of the payload in the object
}

func (f *File) dataPayloadOffset() uint64 {
	if f.compact {
		return dataPayloadCompact
	}
	return dataPayloadRegular
}

// readDataHeader reads the DATA object at off, and up to prefix bytes of its
// (stored, maybe compressed) payload. The payload slice is valid until the
// next read of the cache.
func (j *Journal) readDataHeader(f *File, off uint64, prefix uint64) (dataObject, []byte, error) {
	var d dataObject
	if !f.validOffset(off) {
		return d, nil, fmt.Errorf("%w: data offset %d", errOutside, off)
	}
	po := f.dataPayloadOffset()
	// Read the object header, the DATA fields and a prefix of the payload at
	// once; the common object fits well within it.
	want := po + prefix
	if want > f.limit-off {
		want = f.limit - off
	}
	if want < po {
		return d, nil, fmt.Errorf("%w: DATA at %d runs past the readable end", errOutside, off)
	}
	b, err := j.cache.read(f, off, want)
	if err != nil {
		return d, nil, err
	}
	size, flags, err := checkObjectHeader(f, b, off, objectData, po)
	if err != nil {
		return d, nil, err
	}
	d = dataObject{
		off:        off,
		size:       size,
		flags:      flags,
		hash:       le.Uint64(b[dataHash:]),
		nextHash:   le.Uint64(b[dataNextHashOffset:]),
		nextField:  le.Uint64(b[dataNextFieldOffset:]),
		entry:      le.Uint64(b[dataEntryOffset:]),
		entryArray: le.Uint64(b[dataEntryArrayOffset:]),
		nEntries:   le.Uint64(b[dataNEntries:]),
		payloadOff: po,
	}
	end := min(size, want)
	return d, b[po:end], nil
}

// maxPayload bounds a DATA payload the reader decodes (stored or
// decompressed). journald stores fields of at most a few MiB (its
// line length limit is 48 KiB); larger ones are recorded as problems, not
// read, so that memory stays bounded.
const maxPayload = 16 << 20

// payload returns the whole uncompressed payload of the DATA object d. The
// slice is valid until the next read of the cache or the next decompression.
func (j *Journal) payload(f *File, d *dataObject, stored []byte) ([]byte, error) {
	n := d.size - d.payloadOff
	if n > maxPayload {
		return nil, fmt.Errorf("%w: %d bytes stored", errTooLarge, n)
	}
	if uint64(len(stored)) < n {
		var err error
		stored, err = j.cache.read(f, d.off+d.payloadOff, n)
		if err != nil {
			return nil, err
		}
	}
	if d.flags&compressedMask == 0 {
		return stored, nil
	}
	return j.dec.decompress(d.flags&compressedMask, stored)
}

// findData looks the DATA object whose payload is want up in f's data hash
// table. found is false when f has no such object.
func (j *Journal) findData(f *File, want []byte) (d dataObject, found bool, err error) {
	h := f.hdr
	if h.dataHashSize < hashItemSize || h.dataHashSize%hashItemSize != 0 || !f.validOffset(h.dataHashOffset) {
		return d, false, fmt.Errorf("%w: data hash table at %d of %d bytes", errHashTableAbsent, h.dataHashOffset, h.dataHashSize)
	}
	hv := f.hash(want)
	bucket := hv % (h.dataHashSize / hashItemSize)
	b, err := j.cache.read(f, h.dataHashOffset+bucket*hashItemSize, hashItemSize)
	if err != nil {
		return d, false, fmt.Errorf("data hash table: %w", err)
	}
	p := le.Uint64(b)
	// Objects are appended to the end of a chain and to the end of the file,
	// so offsets grow along a chain: a chain that goes back loops.
	for steps := uint64(0); p != 0; steps++ {
		if steps > f.limit/dataPayloadRegular {
			return d, false, fmt.Errorf("data hash chain: %w", errLoop)
		}
		obj, stored, err := j.readDataHeader(f, p, uint64(len(want)))
		if err != nil {
			return d, false, fmt.Errorf("data hash chain: %w", err)
		}
		if obj.hash == hv {
			var payload []byte
			if obj.flags&compressedMask == 0 && obj.size-obj.payloadOff == uint64(len(want)) {
				payload = stored
			} else if obj.flags&compressedMask != 0 {
				payload, err = j.payload(f, &obj, stored)
				if err != nil {
					j.problem(f, p, err)
					payload = nil
				}
			}
			if payload != nil && bytes.Equal(payload, want) {
				return obj, true, nil
			}
		}
		if obj.nextHash != 0 && obj.nextHash <= p {
			return d, false, fmt.Errorf("data hash chain at %d: %w", p, errLoop)
		}
		p = obj.nextHash
	}
	return d, false, nil
}

// findField looks the FIELD object named name up in f's field hash table and
// returns the head of its DATA list (0 when absent).
func (j *Journal) findField(f *File, name []byte) (headData uint64, err error) {
	h := f.hdr
	if h.fieldHashSize < hashItemSize || h.fieldHashSize%hashItemSize != 0 || !f.validOffset(h.fieldHashOffset) {
		return 0, fmt.Errorf("%w: field hash table at %d of %d bytes", errHashTableAbsent, h.fieldHashOffset, h.fieldHashSize)
	}
	hv := f.hash(name)
	bucket := hv % (h.fieldHashSize / hashItemSize)
	b, err := j.cache.read(f, h.fieldHashOffset+bucket*hashItemSize, hashItemSize)
	if err != nil {
		return 0, fmt.Errorf("field hash table: %w", err)
	}
	p := le.Uint64(b)
	for steps := uint64(0); p != 0; steps++ {
		if steps > f.limit/fieldPayload {
			return 0, fmt.Errorf("field hash chain: %w", errLoop)
		}
		if !f.validOffset(p) {
			return 0, fmt.Errorf("field hash chain: %w: %d", errOutside, p)
		}
		b, err := j.cache.read(f, p, fieldPayload)
		if err != nil {
			return 0, fmt.Errorf("field hash chain: %w", err)
		}
		size, _, err := checkObjectHeader(f, b, p, objectField, fieldPayload)
		if err != nil {
			return 0, fmt.Errorf("field hash chain: %w", err)
		}
		fh := le.Uint64(b[fieldHash:])
		next := le.Uint64(b[fieldNextHashOffset:])
		head := le.Uint64(b[fieldHeadDataOffset:])
		if fh == hv && size-fieldPayload == uint64(len(name)) {
			nb, err := j.cache.read(f, p+fieldPayload, size-fieldPayload)
			if err != nil {
				return 0, fmt.Errorf("field hash chain: %w", err)
			}
			if bytes.Equal(nb, name) {
				return head, nil
			}
		}
		if next != 0 && next <= p {
			return 0, fmt.Errorf("field hash chain at %d: %w", p, errLoop)
		}
		p = next
	}
	return 0, nil
}
