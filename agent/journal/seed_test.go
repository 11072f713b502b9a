package journal

import (
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/host/hosttest"
)

// testdata/small.journal is a real journal file small enough to seed the
// fuzz target: systemd-journal-remote wrote it (compact, keyed hash, a
// zstd-compressed 3000-byte message, two boots, PID 1's messages about a
// unit), then shrinkJournal shrank its hash tables (systemd sizes them for
// a file of 128 MiB: 3.7 MB of mostly empty buckets) and relinked them.
// go test -run TestSeedJournal -update-seed rewrites it.
var updateSeed = flag.Bool("update-seed", false, "rewrite testdata/small.journal with systemd-journal-remote")

const seedPath = "testdata/small.journal"

// seedLog is the content of the seed: 16 entries over two boots.
func seedLog(yield func(exportEntry) bool) {
	g := nodeLog{n: 16, start: t0, step: time.Second}
	for i := 0; i < g.n; i++ {
		e := g.entry(i)
		if i == 12 {
			// A compressed payload (journal-remote compresses values over
			// 512 bytes).
			e = g.entry(1011)
		}
		if !yield(e) {
			return
		}
	}
}

func TestSeedJournal(t *testing.T) {
	if *updateSeed {
		dir := t.TempDir()
		p := filepath.Join(dir, "small.journal")
		writeJournal(t, p, seedLog)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		small, err := shrinkJournal(b, 7, 31)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(seedPath, small, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(seedPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 32<<10 {
		t.Errorf("the seed has %d bytes; keep it small", len(b))
	}
	h := hosttest.Tree(t, map[string]string{"var/log/journal/" + machineID + "/system.journal": string(b)})
	j, err := Open(h, "/var/log/journal")
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if len(j.Files) != 1 || len(j.Problems) != 0 {
		t.Fatalf("files %v, problems %v", j.Files, j.Problems)
	}
	if got, want := j.Files[0].Features, []string{"compact", "keyed-hash", "zstd"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("features %v, want %v", got, want)
	}
	got := queryAll(t, j, Query{Any: [][]Term{{{"_SYSTEMD_UNIT", "kubelet.service"}}, {{"UNIT", "kubelet.service"}, {"_PID", "1"}}}})
	if len(got) < 6 {
		t.Errorf("%d kubelet entries in the seed", len(got))
	}
	var compressed bool
	for _, e := range got {
		if len(e.Fields["MESSAGE"]) > 2000 {
			compressed = true
		}
	}
	if !compressed {
		t.Error("the seed lacks the large (compressed) message")
	}
	// journalctl reads the shrunk file as the reader does.
	if _, err := exec.LookPath("journalctl"); err == nil {
		want := journalctlExport(t, h, "_SYSTEMD_UNIT=kubelet.service", "+", "UNIT=kubelet.service", "_PID=1")
		if len(want) != len(got) {
			t.Fatalf("journalctl prints %d entries, the reader yields %d", len(want), len(got))
		}
		for i := range want {
			if w, g := fromExport(t, want[i], nil), fromEntry(got[i]); fmt.Sprint(w) != fmt.Sprint(g) {
				t.Errorf("entry %d: journalctl %v, reader %v", i, w, g)
			}
		}
	}
}

// shrinkJournal rewrites a journal file with hash tables of dataBuckets and
// fieldBuckets buckets: the objects after the tables move down, every
// offset is relocated, and the tables are rebuilt from the hashes stored in
// the DATA and FIELD objects. The file must have its two hash tables first,
// field table then data table, as systemd writes them.
func shrinkJournal(b []byte, dataBuckets, fieldBuckets uint64) ([]byte, error) {
	hdr, err := parseHeader(b, int64(len(b)))
	if err != nil {
		return nil, err
	}
	compact := hdr.incompatible&incompatibleCompact != 0
	hs := hdr.headerSize
	fieldObj := hdr.fieldHashOffset - objectHeaderSize
	dataObj := hdr.dataHashOffset - objectHeaderSize
	if fieldObj != hs || dataObj != hdr.fieldHashOffset+hdr.fieldHashSize {
		return nil, fmt.Errorf("unexpected layout: field table at %d, data table at %d", fieldObj, dataObj)
	}
	le := binary.LittleEndian
	oldEnd := hdr.dataHashOffset + hdr.dataHashSize
	newFieldObj := hs
	newDataObj := newFieldObj + objectHeaderSize + fieldBuckets*hashItemSize
	newEnd := newDataObj + objectHeaderSize + dataBuckets*hashItemSize
	delta := oldEnd - newEnd
	// journal-remote leaves arena_size at the allocated size (8 MiB): what
	// was written ends with the tail object.
	tail := le.Uint64(b[hTailObjectOffset:])
	used := tail + (le.Uint64(b[tail+8:])+7)&^7
	rel := func(o uint64) uint64 {
		if o == 0 {
			return 0
		}
		if o < oldEnd {
			panic(fmt.Sprintf("offset %d inside the hash tables", o))
		}
		return o - delta
	}
	out := make([]byte, used-delta)
	copy(out, b[:hs])
	copy(out[newEnd:], b[oldEnd:used])
	put64 := func(at uint64, f func(uint64) uint64) { le.PutUint64(out[at:], f(le.Uint64(out[at:]))) }
	put32 := func(at uint64, f func(uint64) uint64) {
		le.PutUint32(out[at:], uint32(f(uint64(le.Uint32(out[at:])))))
	}
	// Header.
	le.PutUint64(out[hArenaSize:], uint64(len(out))-hs)
	le.PutUint64(out[hFieldHashOffset:], newFieldObj+objectHeaderSize)
	le.PutUint64(out[hFieldHashSize:], fieldBuckets*hashItemSize)
	le.PutUint64(out[hDataHashOffset:], newDataObj+objectHeaderSize)
	le.PutUint64(out[hDataHashSize:], dataBuckets*hashItemSize)
	put64(hTailObjectOffset, rel)
	put64(hEntryArrayOffset, rel)
	if hs >= 264 {
		put32(256, rel) // tail_entry_array_offset
	}
	if hs >= 272 {
		put64(264, rel) // tail_entry_offset
	}
	// Table objects.
	for _, t := range []struct{ at, typ, n uint64 }{{newFieldObj, objectFieldHashTable, fieldBuckets}, {newDataObj, objectDataHashTable, dataBuckets}} {
		out[t.at] = byte(t.typ)
		le.PutUint64(out[t.at+8:], objectHeaderSize+t.n*hashItemSize)
	}
	link := func(table, buckets, off, hash, nextAt uint64) {
		item := table + objectHeaderSize + (hash%buckets)*hashItemSize
		if tail := le.Uint64(out[item+8:]); tail == 0 {
			le.PutUint64(out[item:], off)
		} else {
			le.PutUint64(out[tail+nextAt:], off)
		}
		le.PutUint64(out[item+8:], off)
		le.PutUint64(out[off+nextAt:], 0)
	}
	// Every other object: relocate its offsets, relink it in its table.
	for off := newEnd; off+objectHeaderSize <= uint64(len(out)); {
		typ := out[off]
		size := le.Uint64(out[off+8:])
		if typ == objectUnused && size == 0 {
			break // the end of what was written
		}
		if typ == objectUnused || size < objectHeaderSize || off+size > uint64(len(out)) {
			return nil, fmt.Errorf("object at %d: type %d size %d", off, typ, size)
		}
		switch typ {
		case objectData:
			for _, f := range []uint64{dataNextFieldOffset, dataEntryOffset, dataEntryArrayOffset} {
				put64(off+f, rel)
			}
			if compact {
				put32(off+dataPayloadRegular, rel)
			}
			link(newDataObj, dataBuckets, off, le.Uint64(out[off+dataHash:]), dataNextHashOffset)
		case objectField:
			put64(off+fieldHeadDataOffset, rel)
			link(newFieldObj, fieldBuckets, off, le.Uint64(out[off+fieldHash:]), fieldNextHashOffset)
		case objectEntry:
			if compact {
				for p := off + entryItems; p+4 <= off+size; p += 4 {
					put32(p, rel)
				}
			} else {
				for p := off + entryItems; p+16 <= off+size; p += 16 {
					put64(p, rel)
				}
			}
		case objectEntryArray:
			put64(off+entryArrayNext, rel)
			if compact {
				for p := off + entryArrayItems; p+4 <= off+size; p += 4 {
					put32(p, rel)
				}
			} else {
				for p := off + entryArrayItems; p+8 <= off+size; p += 8 {
					put64(p, rel)
				}
			}
		}
		off += (size + 7) &^ 7
	}
	return out, nil
}

// seedHost returns a host whose journal is the seed file.
func seedHost(t testing.TB) (*host.Host, []byte) {
	b, err := os.ReadFile(seedPath)
	if err != nil {
		t.Fatal(err)
	}
	return hosttest.Tree(t, map[string]string{"var/log/journal/" + machineID + "/system.journal": string(b)}), b
}
