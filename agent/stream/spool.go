package stream

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// Spool bounds. A report with its evidence is typically tens to hundreds of
// KiB; the byte bound is what keeps a pathological node from filling the
// agent's disk or memory.
const (
	// DefaultSpoolReports is how many unacknowledged uploads are kept: the
	// latest check, and a few answers to requests that arrived during an
	// outage.
	DefaultSpoolReports = 4
	// DefaultSpoolBytes bounds the encoded size of the kept uploads.
	DefaultSpoolBytes = 16 << 20
)

// The spool file format, one file per upload ("upload-<n>.pb", n a counter
// that grows across restarts, zero-padded so that names sort in order):
//
//	magic   8 bytes  "NDSPOOL1"
//	length  4 bytes  big-endian length of the payload
//	crc     4 bytes  big-endian CRC-32C (Castagnoli) of the payload
//	payload          the nodediag.v1.Upload, protobuf-encoded
//
// A file is written to a temporary name in the same directory, synced and
// renamed, so a crash leaves either the whole file or none; a file that is
// shorter or longer than its header says, or whose checksum differs, is
// discarded with a warning. The seq in the payload is the writing process's;
// a restarted agent numbers spooled uploads again (Hello.agent_start changed).
const (
	spoolMagic  = "NDSPOOL1"
	spoolHeader = len(spoolMagic) + 8
	spoolPrefix = "upload-"
	spoolSuffix = ".pb"
	spoolTemp   = ".tmp-"
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Entry is an upload the spool keeps until its Ack.
type Entry struct {
	Upload *nodediagv1.Upload
	// Size is the encoded size of Upload.
	Size int
	// file is the spool file's name in the directory, "" when in memory
	// only; n its counter.
	file string
	n    uint64
}

// Spool keeps the unacknowledged uploads, oldest first, bounded by count and
// bytes (the oldest are dropped first), on disk when it can (file mode 0600
// in a 0700 directory) and in memory always. Safe for concurrent use.
type Spool struct {
	dir        string // "" when memory only
	maxReports int
	maxBytes   int
	logf       func(format string, args ...any)

	mu      sync.Mutex
	entries []*Entry
	next    uint64
	warned  bool
}

// OpenSpool opens the spool in dir and loads the uploads a previous process
// left there, oldest first (Entries). dir "" keeps uploads in memory only. A
// directory that cannot be created or written is not an error: the spool
// warns through logf and keeps uploads in memory. Unreadable or damaged
// files are discarded with a warning; leftover temporary files are removed.
// maxReports and maxBytes at or below zero take the defaults.
func OpenSpool(dir string, maxReports, maxBytes int, logf func(format string, args ...any)) *Spool {
	if maxReports <= 0 {
		maxReports = DefaultSpoolReports
	}
	if maxBytes <= 0 {
		maxBytes = DefaultSpoolBytes
	}
	if logf == nil {
		logf = func(string, ...any) {}
	}
	s := &Spool{dir: dir, maxReports: maxReports, maxBytes: maxBytes, logf: logf, next: 1}
	if dir == "" {
		return s
	}
	if err := s.prepare(); err != nil {
		s.logf("spool: %v; keeping unacknowledged reports in memory only", err)
		s.dir = ""
		s.warned = true
		return s
	}
	s.load()
	return s
}

// prepare makes the directory and proves it writable.
func (s *Spool) prepare() error {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("cannot create %s: %w", s.dir, err)
	}
	f, err := os.CreateTemp(s.dir, spoolTemp+"probe-*")
	if err != nil {
		return fmt.Errorf("cannot write in %s: %w", s.dir, err)
	}
	name := f.Name()
	f.Close()
	if err := os.Remove(name); err != nil {
		return fmt.Errorf("cannot remove %s: %w", name, err)
	}
	return nil
}

func (s *Spool) load() {
	des, err := os.ReadDir(s.dir)
	if err != nil {
		s.logf("spool: cannot read %s: %v", s.dir, err)
		return
	}
	type found struct {
		name string
		n    uint64
	}
	var files []found
	for _, de := range des {
		name := de.Name()
		if strings.HasPrefix(name, spoolTemp) {
			// A write that did not reach its rename.
			os.Remove(filepath.Join(s.dir, name))
			continue
		}
		n, ok := spoolNumber(name)
		if !ok || !de.Type().IsRegular() {
			continue
		}
		files = append(files, found{name, n})
		if n >= s.next {
			s.next = n + 1
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].n < files[j].n })
	for _, f := range files {
		p := filepath.Join(s.dir, f.name)
		b, err := os.ReadFile(p)
		if err != nil {
			s.logf("spool: discarding %s: %v", p, err)
			os.Remove(p)
			continue
		}
		u, err := DecodeSpoolFile(b)
		if err != nil {
			s.logf("spool: discarding %s: %v", p, err)
			os.Remove(p)
			continue
		}
		s.entries = append(s.entries, &Entry{Upload: u, Size: len(b) - spoolHeader, file: f.name, n: f.n})
	}
	s.mu.Lock()
	s.enforceLocked()
	s.mu.Unlock()
}

func spoolNumber(name string) (uint64, bool) {
	if !strings.HasPrefix(name, spoolPrefix) || !strings.HasSuffix(name, spoolSuffix) {
		return 0, false
	}
	n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(name, spoolPrefix), spoolSuffix), 10, 64)
	return n, err == nil
}

// ErrSpoolDamaged is wrapped by DecodeSpoolFile's errors.
var ErrSpoolDamaged = errors.New("damaged spool file")

// EncodeSpoolFile renders u in the spool file format.
func EncodeSpoolFile(u *nodediagv1.Upload) ([]byte, error) {
	payload, err := proto.Marshal(u)
	if err != nil {
		return nil, fmt.Errorf("encoding upload: %w", err)
	}
	b := make([]byte, spoolHeader, spoolHeader+len(payload))
	copy(b, spoolMagic)
	binary.BigEndian.PutUint32(b[8:], uint32(len(payload)))
	binary.BigEndian.PutUint32(b[12:], crc32.Checksum(payload, crcTable))
	return append(b, payload...), nil
}

// DecodeSpoolFile parses a spool file; a truncated, extended or corrupted
// file is an error wrapping ErrSpoolDamaged.
func DecodeSpoolFile(b []byte) (*nodediagv1.Upload, error) {
	if len(b) < spoolHeader {
		return nil, fmt.Errorf("%w: truncated header (%d of %d bytes)", ErrSpoolDamaged, len(b), spoolHeader)
	}
	if string(b[:8]) != spoolMagic {
		return nil, fmt.Errorf("%w: not a spool file (magic %q)", ErrSpoolDamaged, b[:8])
	}
	n := binary.BigEndian.Uint32(b[8:])
	payload := b[spoolHeader:]
	if uint64(len(payload)) != uint64(n) {
		what := "truncated"
		if uint64(len(payload)) > uint64(n) {
			what = "trailing data"
		}
		return nil, fmt.Errorf("%w: %s (%d payload bytes, header says %d)", ErrSpoolDamaged, what, len(payload), n)
	}
	if crc32.Checksum(payload, crcTable) != binary.BigEndian.Uint32(b[12:]) {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrSpoolDamaged)
	}
	u := &nodediagv1.Upload{}
	if err := proto.Unmarshal(payload, u); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSpoolDamaged, err)
	}
	if u.GetReport() == nil {
		return nil, fmt.Errorf("%w: upload without a report", ErrSpoolDamaged)
	}
	return u, nil
}

// Dir is the spool's directory, "" when it keeps uploads in memory only.
func (s *Spool) Dir() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dir
}

// Entries returns the kept uploads, oldest first. The uploads are shared:
// callers must not modify them.
func (s *Spool) Entries() []*Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Entry(nil), s.entries...)
}

// Bytes is the encoded size of the kept uploads.
func (s *Spool) Bytes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, e := range s.entries {
		n += e.Size
	}
	return n
}

// Add keeps u (on disk if it can) and drops the oldest uploads beyond the
// bounds, saying so. The caller must not modify u afterwards.
func (s *Spool) Add(u *nodediagv1.Upload) *Entry {
	b, err := EncodeSpoolFile(u)
	e := &Entry{Upload: u, Size: proto.Size(u)}
	s.mu.Lock()
	defer s.mu.Unlock()
	e.n = s.next
	s.next++
	// The bounds first, then the new file: the directory never holds more
	// uploads than the bounds allow, even for a moment.
	s.entries = append(s.entries, e)
	s.enforceLocked()
	if s.dir != "" && err == nil {
		name := fmt.Sprintf("%s%020d%s", spoolPrefix, e.n, spoolSuffix)
		if werr := writeAtomic(s.dir, name, b); werr != nil {
			if !s.warned {
				s.logf("spool: %v; keeping unacknowledged reports in memory only", werr)
				s.warned = true
			}
		} else {
			e.file = name
			s.warned = false
		}
	}
	return e
}

// Remove forgets the upload with seq (acknowledged) and returns whether it
// was kept.
func (s *Spool) Remove(seq uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, e := range s.entries {
		if e.Upload.GetSeq() == seq {
			s.removeFileLocked(e)
			s.entries = append(s.entries[:i], s.entries[i+1:]...)
			return true
		}
	}
	return false
}

// enforceLocked drops the oldest entries beyond the bounds; the newest is
// always kept.
func (s *Spool) enforceLocked() {
	for len(s.entries) > 1 {
		total := 0
		for _, e := range s.entries {
			total += e.Size
		}
		if len(s.entries) <= s.maxReports && total <= s.maxBytes {
			return
		}
		old := s.entries[0]
		s.logf("spool: dropping unacknowledged report seq %d (%s, %d bytes): bounds are %d reports, %d bytes",
			old.Upload.GetSeq(), old.Upload.GetReason(), old.Size, s.maxReports, s.maxBytes)
		s.removeFileLocked(old)
		s.entries = s.entries[1:]
	}
}

func (s *Spool) removeFileLocked(e *Entry) {
	if e.file == "" || s.dir == "" {
		return
	}
	if err := os.Remove(filepath.Join(s.dir, e.file)); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.logf("spool: cannot remove %s: %v", e.file, err)
	}
	e.file = ""
}

// writeAtomic writes b as dir/name with mode 0600: a temporary file in dir,
// synced, renamed over name, and the directory synced.
func writeAtomic(dir, name string, b []byte) error {
	f, err := os.CreateTemp(dir, spoolTemp+"*")
	if err != nil {
		return fmt.Errorf("cannot write in %s: %w", dir, err)
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", filepath.Join(dir, name), err)
	}
	// CreateTemp makes the file 0600; say so, whatever the umask did.
	if err := f.Chmod(0o600); err != nil {
		return fail(err)
	}
	if _, err := f.Write(b); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", filepath.Join(dir, name), err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", filepath.Join(dir, name), err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// Renumber gives the kept uploads new sequence numbers from seq, oldest
// first, and returns the next free one: a restarted agent numbers its
// uploads from 1 again, spooled ones included.
func (s *Spool) Renumber(seq uint64) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.entries {
		u := proto.Clone(e.Upload).(*nodediagv1.Upload)
		u.Seq = seq
		e.Upload = u
		seq++
	}
	return seq
}

// Has reports whether the upload with seq is kept (not yet acknowledged nor
// dropped).
func (s *Spool) Has(seq uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.entries {
		if e.Upload.GetSeq() == seq {
			return true
		}
	}
	return false
}

// Len is the number of kept uploads.
func (s *Spool) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}
