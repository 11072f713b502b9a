// Package journal reads systemd journal files natively, in pure Go, through
// agent/host: the agent stays one static binary (no cgo, no libsystemd, no
// journalctl needed), and it reads journals copied off a host as well as a
// live node's.
//
// The reader follows systemd's journal file format (docs/JOURNAL_FILE_FORMAT.md
// and journal-def.h of systemd): every header size from systemd 186 on, the
// compact layout of systemd 252, keyed (siphash24) and Jenkins hashes, and
// DATA payloads compressed with zstd, xz or lz4. It uses the file's indexes as
// journalctl does: a match FIELD=value is looked up in the data hash table and
// its entries come from the DATA object's entry array chain, so a query for one
// unit never scans the entries of the others.
//
// Files are read, never written, and every offset read from a file is checked
// before use: a truncated, corrupt or half-written file gives what can be read
// of it plus Problems saying what could not, never a panic or an endless loop
// (every chain walk is bounded by the file's size). Memory is bounded (a block
// cache of a dozen MiB and a small cache of decoded fields) whatever the size of
// the journal: entries are streamed to the caller, never collected.
//
// A Journal is not safe for concurrent use.
package journal

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/nodediag/nodediag/agent/host"
)

// DefaultDirs are the directories journald writes: the persistent journal
// (/var/log/journal/<machine-id>/, when Storage=persistent or auto with the
// directory present) and the volatile one (/run/log/journal/<machine-id>/,
// Storage=volatile, or before the flush at boot).
var DefaultDirs = []string{"/var/log/journal", "/run/log/journal"}

// Journal is a set of journal files read as one time-ordered stream.
type Journal struct {
	// Files are the usable files, oldest first (by the realtime of their
	// first entry).
	Files []*File
	// Problems says what could not be read and why: a file (Offset 0) or an
	// object at an offset of it. Open records the files it skipped; Query and
	// Boots add what they meet. At most maxProblemsPerFile are kept per file.
	Problems []Problem

	h     *host.Host
	cache *blockCache
	dec   decoders
	// seen deduplicates Problems (file, offset, message) across queries.
	seen map[problemKey]bool
	// epoch numbers the calls of Query and Boots: a file whose problemEpoch
	// is the current epoch met a problem during the current call.
	epoch uint64
}

// Problem is something of a journal that could not be read.
type Problem struct {
	Path   string // host path of the file or directory
	Offset int64  // offset of the object in the file; 0 for the file itself
	Err    error
}

func (p Problem) String() string {
	if p.Offset != 0 {
		return fmt.Sprintf("%s: object at offset %d: %v", p.Path, p.Offset, p.Err)
	}
	return fmt.Sprintf("%s: %v", p.Path, p.Err)
}

// File is one journal file.
type File struct {
	Path    string // host path
	Size    int64  // size when opened
	Entries uint64 // n_entries of the header
	// Head and Tail are the realtime of the first and last entries (from the
	// header; zero for a file without entries).
	Head, Tail time.Time
	// Features names the file's incompatible features: "compact",
	// "keyed-hash", "zstd", "xz", "lz4".
	Features []string

	hf      *host.File
	hdr     header
	compact bool
	keyed   bool
	// limit is the end of what may be read: the file's size, or less when
	// the header says the used part (header_size + arena_size) is smaller.
	limit uint64
	last  *block // the block read last (a fast path of the cache)
	// nProblems counts the Problems recorded for the file.
	nProblems int
	// arrays caches the global entry array chain (for time bisection).
	arrays []arrayInfo
	// problemEpoch is the Journal's epoch of the file's last problem, and
	// lastErr that problem.
	problemEpoch uint64
	lastErr      error
}

type problemKey struct {
	path string
	off  int64
	msg  string
}

// maxProblemsPerFile bounds the Problems kept for one file: a corrupt file
// would otherwise add one per entry of every query.
const maxProblemsPerFile = 50

// errMoreProblems closes the list of a file's problems once the cap is reached.
var errMoreProblems = errors.New("further problems of this file are not recorded")

// Open opens the journal files under the given host directories: the
// directory itself and each of its subdirectories one level down
// (/var/log/journal/<machine-id>/), files named *.journal or *.journal~
// (system.journal, system@<seqnum-id>-<seqnum>-<realtime>.journal,
// user-1000@....journal, system@....journal~). A file that cannot be opened,
// or whose header is invalid or uses an incompatible feature this reader does
// not know, is recorded in Problems and skipped. Missing directories are not
// problems. Open never fails because of one bad file; it returns an error only
// for a bad argument. The same file reached twice (overlapping directories,
// symlinks) is opened once.
func Open(h *host.Host, dirs ...string) (*Journal, error) {
	if h == nil {
		return nil, errors.New("journal: nil host")
	}
	if len(dirs) == 0 {
		return nil, errors.New("journal: no directory given")
	}
	for _, d := range dirs {
		if !path.IsAbs(d) {
			return nil, fmt.Errorf("journal: directory %q is not an absolute host path", d)
		}
	}
	j := &Journal{h: h, cache: newBlockCache(), seen: map[problemKey]bool{}}
	opened := map[string]bool{}
	for _, d := range dirs {
		for _, p := range j.listDir(path.Clean(d)) {
			id := p
			if r, err := h.Resolve(p); err == nil {
				id = r
			}
			if opened[id] {
				continue
			}
			opened[id] = true
			if f := j.openFile(p); f != nil {
				j.Files = append(j.Files, f)
			}
		}
	}
	slices.SortStableFunc(j.Files, func(a, b *File) int {
		if c := a.Head.Compare(b.Head); c != 0 {
			return c
		}
		return strings.Compare(a.Path, b.Path)
	})
	return j, nil
}

// isJournalName says whether a file name is one journald writes: active
// (system.journal, user-1000.journal), archived (name@...journal) and
// archived after corruption or an unclean shutdown (...journal~).
func isJournalName(name string) bool {
	return strings.HasSuffix(name, ".journal") || strings.HasSuffix(name, ".journal~")
}

// listDir returns the journal files of dir and of its subdirectories, one
// level down, in name order. A missing directory gives nothing.
func (j *Journal) listDir(dir string) []string {
	ents, err := j.h.ReadDir(dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			j.addProblem(nil, dir, 0, err)
		}
		return nil
	}
	var out []string
	for _, e := range ents {
		p := path.Join(dir, e.Name())
		if isDirEntry(j.h, p, e) {
			sub, err := j.h.ReadDir(p)
			if err != nil {
				if !errors.Is(err, fs.ErrNotExist) {
					j.addProblem(nil, p, 0, err)
				}
				continue
			}
			for _, s := range sub {
				if isJournalName(s.Name()) && !s.IsDir() {
					out = append(out, path.Join(p, s.Name()))
				}
			}
			continue
		}
		if isJournalName(e.Name()) {
			out = append(out, p)
		}
	}
	return out
}

// isDirEntry says whether a directory entry is a directory, following a
// symlink (inside the root).
func isDirEntry(h *host.Host, p string, e fs.DirEntry) bool {
	if e.IsDir() {
		return true
	}
	if e.Type()&fs.ModeSymlink == 0 {
		return false
	}
	fi, err := h.Stat(p)
	return err == nil && fi.IsDir()
}

// openFile opens one journal file and checks its header; nil (with a
// Problem) when it cannot be used.
func (j *Journal) openFile(p string) *File {
	hf, err := j.h.Open(p)
	if err != nil {
		j.addProblem(nil, p, 0, err)
		return nil
	}
	size := hf.Size()
	buf := make([]byte, min(size, headerSizeMax))
	n, err := hf.ReadAt(buf, 0)
	if n < len(buf) {
		if err == nil {
			err = errShort
		}
		hf.Close()
		j.addProblem(nil, p, 0, fmt.Errorf("reading the header: %w", err))
		return nil
	}
	hdr, err := parseHeader(buf, size)
	if err != nil {
		hf.Close()
		j.addProblem(nil, p, 0, err)
		return nil
	}
	f := &File{
		Path:     p,
		Size:     size,
		Entries:  hdr.nEntries,
		Features: hdr.features(),
		hf:       hf,
		hdr:      hdr,
		compact:  hdr.incompatible&incompatibleCompact != 0,
		keyed:    hdr.incompatible&incompatibleKeyedHash != 0,
		limit:    uint64(size),
	}
	if hdr.headRealtime != 0 {
		f.Head = usecTime(hdr.headRealtime)
	}
	if hdr.tailRealtime != 0 {
		f.Tail = usecTime(hdr.tailRealtime)
	}
	// The objects lie within header_size + arena_size (the arena follows the
	// file's allocation, in steps of 8 MiB). A file smaller than that was
	// cut (copied while written, disk full): what is inside is still read.
	if used := hdr.headerSize + hdr.arenaSize; used >= hdr.headerSize {
		if used < f.limit {
			f.limit = used
		} else if used > f.limit {
			j.addProblem(f, p, 0, fmt.Errorf("file truncated: the header says %d bytes are used, the file has %d", used, size))
		}
	}
	if f.compact && f.limit > 1<<32 {
		// Offsets of compact files are 32-bit.
		f.limit = 1 << 32
	}
	return f
}

// Close closes the files.
func (j *Journal) Close() error {
	var errs []error
	for _, f := range j.Files {
		if f.hf != nil {
			j.cache.drop(f)
			if err := f.hf.Close(); err != nil {
				errs = append(errs, err)
			}
			f.hf = nil
		}
	}
	j.dec.close()
	return errors.Join(errs...)
}

// addProblem records a problem of file f (nil for a directory or a file that
// was not opened) at path p, deduplicated and bounded per file.
func (j *Journal) addProblem(f *File, p string, off uint64, err error) {
	if f != nil {
		f.problemEpoch = j.epoch
		f.lastErr = err
		if f.hdr.state == stateOnline && errors.Is(err, errOutside) {
			// A file being written: what lies past the part read at Open
			// was appended since (or the copy was cut while written, which
			// Open reported once). Not a problem of each object.
			return
		}
	}
	k := problemKey{path: p, off: int64(off), msg: err.Error()}
	if j.seen[k] {
		return
	}
	if f != nil {
		if f.nProblems > maxProblemsPerFile {
			return
		}
		f.nProblems++
		if f.nProblems > maxProblemsPerFile {
			j.Problems = append(j.Problems, Problem{Path: p, Err: errMoreProblems})
			return
		}
	}
	j.seen[k] = true
	j.Problems = append(j.Problems, Problem{Path: p, Offset: int64(off), Err: err})
}

// problem records a problem of an object of f.
func (j *Journal) problem(f *File, off uint64, err error) {
	j.addProblem(f, f.Path, off, err)
}

// beginCall starts a call of Query or Boots.
func (j *Journal) beginCall() {
	j.epoch++
}

// allFailed says whether every open file met a problem during the current
// call, and returns the first problem recorded for them.
func (j *Journal) allFailed() (bool, error) {
	var first error
	for _, f := range j.Files {
		if f.hf == nil {
			continue
		}
		if f.problemEpoch != j.epoch {
			return false, nil
		}
		if first == nil {
			first = fmt.Errorf("%s: %w", f.Path, f.lastErr)
		}
	}
	return first != nil, first
}

// usecTime converts microseconds since the epoch to a time (UTC).
func usecTime(us uint64) time.Time {
	return time.UnixMicro(int64(us)).UTC()
}

// formatID formats a 128-bit ID as systemd does: 32 lowercase hex digits.
func formatID(id [16]byte) string {
	return hex.EncodeToString(id[:])
}

// parseID accepts a 128-bit ID as 32 hex digits or as a UUID with dashes,
// in any case, and returns it as 32 lowercase hex digits.
func parseID(s string) (string, bool) {
	if len(s) == 36 && s[8] == '-' && s[13] == '-' && s[18] == '-' && s[23] == '-' {
		s = strings.ReplaceAll(s, "-", "")
	}
	if len(s) != 32 {
		return "", false
	}
	s = strings.ToLower(s)
	if _, err := hex.DecodeString(s); err != nil {
		return "", false
	}
	return s, true
}
