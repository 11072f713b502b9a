package journal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// Layout of systemd journal files (systemd's docs/JOURNAL_FILE_FORMAT.md and
// src/libsystemd/sd-journal/journal-def.h). Every number is little-endian,
// every object starts on an 8-byte boundary, offsets count from the start of
// the file.

var signature = []byte("LPKSHHRH")

// Header field offsets.
const (
	hCompatibleFlags   = 8
	hIncompatibleFlags = 12
	hState             = 16
	hFileID            = 24
	hMachineID         = 40
	hTailEntryBootID   = 56
	hSeqnumID          = 72
	hHeaderSize        = 88
	hArenaSize         = 96
	hDataHashOffset    = 104
	hDataHashSize      = 112
	hFieldHashOffset   = 120
	hFieldHashSize     = 128
	hTailObjectOffset  = 136
	hNObjects          = 144
	hNEntries          = 152
	hTailEntrySeqnum   = 160
	hHeadEntrySeqnum   = 168
	hEntryArrayOffset  = 176
	hHeadRealtime      = 184
	hTailRealtime      = 192
	hTailMonotonic     = 200
	// headerSizeMin is the header of the first file format (systemd 186 and
	// older): every field before n_data exists in every file. n_data and
	// n_fields came in 187, n_tags and n_entry_arrays in 189, the hash chain
	// depths in 246, tail_entry_array_offset/n_entries in 252 and
	// tail_entry_offset in 254; a reader checks header_size before using them.
	headerSizeMin = 208
	hNData        = 208
	hNFields      = 216
	hNTags        = 224
	hNEntryArrays = 232
	// headerSizeMax is the largest header this reader knows (systemd 254+).
	// Larger headers (future versions) are fine: the fields it does not know
	// are ignored, header_size says where the objects start.
	headerSizeMax = 272
)

// Incompatible header flags: a file with a flag this reader does not know
// cannot be read correctly and is skipped.
const (
	incompatibleXZ        = 1 << 0
	incompatibleLZ4       = 1 << 1
	incompatibleKeyedHash = 1 << 2
	incompatibleZstd      = 1 << 3
	incompatibleCompact   = 1 << 4
	incompatibleKnown     = incompatibleXZ | incompatibleLZ4 | incompatibleKeyedHash | incompatibleZstd | incompatibleCompact
)

// File states.
const (
	stateOffline  = 0
	stateOnline   = 1
	stateArchived = 2
)

// Object types.
const (
	objectUnused         = 0
	objectData           = 1
	objectField          = 2
	objectEntry          = 3
	objectDataHashTable  = 4
	objectFieldHashTable = 5
	objectEntryArray     = 6
	objectTag            = 7
)

// Object flags (DATA objects only): how the payload is compressed.
const (
	compressedXZ   = 1 << 0
	compressedLZ4  = 1 << 1
	compressedZstd = 1 << 2
	compressedMask = compressedXZ | compressedLZ4 | compressedZstd
)

// Object layouts.
const (
	objectHeaderSize = 16 // type u8, flags u8, reserved [6], size le64

	// DATA: hash, next_hash_offset, next_field_offset, entry_offset,
	// entry_array_offset, n_entries, then (compact files only)
	// tail_entry_array_offset le32 and tail_entry_array_n_entries le32, then
	// the payload "FIELD=value".
	dataHash             = 16
	dataNextHashOffset   = 24
	dataNextFieldOffset  = 32
	dataEntryOffset      = 40
	dataEntryArrayOffset = 48
	dataNEntries         = 56
	dataPayloadRegular   = 64
	dataPayloadCompact   = 72

	// FIELD: hash, next_hash_offset, head_data_offset, then the field name.
	fieldHash           = 16
	fieldNextHashOffset = 24
	fieldHeadDataOffset = 32
	fieldPayload        = 40

	// ENTRY: seqnum, realtime, monotonic, boot_id [16], xor_hash, then the
	// items: {object_offset le64, hash le64} or, compact, {object_offset le32}.
	entrySeqnum      = 16
	entryRealtime    = 24
	entryMonotonic   = 32
	entryBootID      = 40
	entryXorHash     = 56
	entryItems       = 64
	entryItemRegular = 16
	entryItemCompact = 4

	// ENTRY_ARRAY: next_entry_array_offset, then le64 items or, compact, le32.
	entryArrayNext  = 16
	entryArrayItems = 24

	// Hash table items: head_hash_offset le64, tail_hash_offset le64.
	hashItemSize = 16
)

// header is the part of a journal file header this reader uses.
type header struct {
	compatible   uint32
	incompatible uint32
	state        uint8
	fileID       [16]byte
	machineID    [16]byte
	seqnumID     [16]byte
	headerSize   uint64
	arenaSize    uint64

	dataHashOffset, dataHashSize   uint64
	fieldHashOffset, fieldHashSize uint64

	nObjects         uint64
	nEntries         uint64
	headSeqnum       uint64
	tailSeqnum       uint64
	entryArrayOffset uint64
	headRealtime     uint64
	tailRealtime     uint64
	// nData is 0 when the header predates it.
	nData uint64
}

var (
	errShort           = errors.New("file too short for a journal header")
	errSignature       = errors.New("not a journal file (bad signature)")
	errIncompatible    = errors.New("unsupported incompatible feature")
	errBadHeader       = errors.New("invalid journal header")
	errOutside         = errors.New("offset outside the file")
	errBadObject       = errors.New("invalid object")
	errLoop            = errors.New("chain does not advance (loop or corruption)")
	errDecompress      = errors.New("decompression failed")
	errTooLarge        = errors.New("data object larger than the reader's limit")
	errHashTableAbsent = errors.New("no usable hash table")
)

// parseHeader parses and checks the header at the start of a file of size
// fileSize. b holds the first min(fileSize, headerSizeMax) bytes or more.
func parseHeader(b []byte, fileSize int64) (header, error) {
	var h header
	if len(b) < headerSizeMin {
		return h, fmt.Errorf("%w (%d bytes)", errShort, len(b))
	}
	if !bytes.Equal(b[:8], signature) {
		return h, errSignature
	}
	le := binary.LittleEndian
	h.compatible = le.Uint32(b[hCompatibleFlags:])
	h.incompatible = le.Uint32(b[hIncompatibleFlags:])
	h.state = b[hState]
	copy(h.fileID[:], b[hFileID:])
	copy(h.machineID[:], b[hMachineID:])
	copy(h.seqnumID[:], b[hSeqnumID:])
	h.headerSize = le.Uint64(b[hHeaderSize:])
	h.arenaSize = le.Uint64(b[hArenaSize:])
	h.dataHashOffset = le.Uint64(b[hDataHashOffset:])
	h.dataHashSize = le.Uint64(b[hDataHashSize:])
	h.fieldHashOffset = le.Uint64(b[hFieldHashOffset:])
	h.fieldHashSize = le.Uint64(b[hFieldHashSize:])
	h.nObjects = le.Uint64(b[hNObjects:])
	h.nEntries = le.Uint64(b[hNEntries:])
	h.tailSeqnum = le.Uint64(b[hTailEntrySeqnum:])
	h.headSeqnum = le.Uint64(b[hHeadEntrySeqnum:])
	h.entryArrayOffset = le.Uint64(b[hEntryArrayOffset:])
	h.headRealtime = le.Uint64(b[hHeadRealtime:])
	h.tailRealtime = le.Uint64(b[hTailRealtime:])

	if unknown := h.incompatible &^ incompatibleKnown; unknown != 0 {
		return h, fmt.Errorf("%w: incompatible flags %#x (unknown bits %#x)", errIncompatible, h.incompatible, unknown)
	}
	if h.headerSize < headerSizeMin || h.headerSize%8 != 0 || h.headerSize > uint64(fileSize) {
		return h, fmt.Errorf("%w: header_size %d (file size %d)", errBadHeader, h.headerSize, fileSize)
	}
	if h.state > stateArchived {
		// An unknown state is not fatal: the state only says whether a writer
		// may still be appending.
		h.state = stateOnline
	}
	if h.headerSize >= hNData+8 && uint64(len(b)) >= hNData+8 {
		h.nData = le.Uint64(b[hNData:])
	}
	return h, nil
}

// features names the incompatible flags of a file.
func (h *header) features() []string {
	var out []string
	if h.incompatible&incompatibleCompact != 0 {
		out = append(out, "compact")
	}
	if h.incompatible&incompatibleKeyedHash != 0 {
		out = append(out, "keyed-hash")
	}
	if h.incompatible&incompatibleZstd != 0 {
		out = append(out, "zstd")
	}
	if h.incompatible&incompatibleXZ != 0 {
		out = append(out, "xz")
	}
	if h.incompatible&incompatibleLZ4 != 0 {
		out = append(out, "lz4")
	}
	return out
}

// objectTypeName names an object type for error messages.
func objectTypeName(t uint8) string {
	switch t {
	case objectUnused:
		return "UNUSED"
	case objectData:
		return "DATA"
	case objectField:
		return "FIELD"
	case objectEntry:
		return "ENTRY"
	case objectDataHashTable:
		return "DATA_HASH_TABLE"
	case objectFieldHashTable:
		return "FIELD_HASH_TABLE"
	case objectEntryArray:
		return "ENTRY_ARRAY"
	case objectTag:
		return "TAG"
	}
	return fmt.Sprintf("type %d", t)
}
