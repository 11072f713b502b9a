// Package host is the only code of the agent that touches the node. A Host is
// a root directory (the node's "/" as this process sees it: "/" on a VM,
// "/host" in the DaemonSet, a directory tree in tests) and a Runner for the
// node's binaries.
//
// Rules of the package:
//   - Every name is a host path ("/etc/sysconfig/kubelet"). It is resolved
//     inside Root, symlinks included: an absolute symlink on the node points
//     into Root, never into the agent's own filesystem, and ".." never climbs
//     out of Root.
//   - Reads are bounded and read-only: only regular files are opened (a
//     FIFO or a device is never opened: opening some devices acts on them),
//     always O_RDONLY|O_NONBLOCK, and no read returns more than a cap.
//   - A permission error is an error, never "absent": Exists returns false
//     only for fs.ErrNotExist.
//   - Errors name the host path, not the path under Root, so that they can be
//     shown to the operator as they are.
package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	securejoin "github.com/cyphar/filepath-securejoin"
	"golang.org/x/sys/unix"
)

// DefaultMaxRead is the cap of ReadFile: no configuration file the agent
// reads is legitimately larger.
const DefaultMaxRead = 16 << 20

// ErrTooLarge is returned (wrapped) by ReadFile for a file larger than the cap.
var ErrTooLarge = errors.New("file larger than the read limit")

// ErrNotRegular is returned (wrapped) when a read targets something that is
// not a regular file (a directory, a FIFO, a device, a socket). Such a file
// is never opened.
var ErrNotRegular = errors.New("not a regular file")

// ErrChanged is returned (wrapped) when the file opened is not the file that
// was checked before opening it: the path was changed in between.
var ErrChanged = errors.New("file replaced while being opened")

// Host is a node seen through its root directory.
type Host struct {
	// Root is the node's "/" as this process sees it. It is absolute and clean.
	Root string
	// Exec runs the node's binaries. Never nil after New.
	Exec Runner
	// Now is the host's clock. Tests fix it.
	Now func() time.Time
	// MaxRead caps ReadFile; DefaultMaxRead when zero.
	MaxRead int64
	// CmdTimeout bounds each command; DefaultCmdTimeout when zero.
	CmdTimeout time.Duration
	// Net reaches the network from the node; nil is LocalNetwork{}.
	// NoNetwork{} keeps the agent off it (--offline).
	Net Network
	// Files serves host paths from files elsewhere on this machine: a CI
	// artifact tree keeps a node's /var/log/cloud-init-output.log as
	// machines/NAME/cloud-init-output.log (see files.go).
	Files map[string]string
	// Since, when set, is the start of the window the caller will judge
	// (--since): probes of time-ordered evidence (the journal) need not read
	// what comes before it.
	Since time.Time
}

// New returns a Host for root. A nil runner runs nothing (NoExec).
func New(root string, r Runner) (*Host, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("host root %q: %w", root, err)
	}
	// Resolve the root itself once: securejoin wants a root free of symlinks.
	if resolved, err := filepath.EvalSymlinks(abs); err == nil {
		abs = resolved
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("host root: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("host root %s: not a directory", abs)
	}
	if r == nil {
		r = NoExec{}
	}
	return &Host{Root: abs, Exec: r, Now: time.Now}, nil
}

// Path maps a host path to the path this process opens, resolving symlinks
// inside Root. A missing file is not an error here.
func (h *Host) Path(name string) (string, error) {
	if !path.IsAbs(name) {
		return "", &fs.PathError{Op: "resolve", Path: name, Err: errors.New("not an absolute host path")}
	}
	if p, ok := h.mapped(name); ok {
		return p, nil
	}
	if h.Root == "/" {
		// Inside "/" every symlink already resolves inside the root.
		return path.Clean(name), nil
	}
	p, err := securejoin.SecureJoin(h.Root, name)
	if err != nil {
		return "", h.hostErr("resolve", name, err)
	}
	return p, nil
}

// HostPath maps a path under Root back to the host path ("/etc/...").
func (h *Host) HostPath(p string) string {
	if h.Root == "/" {
		return p
	}
	rel, err := filepath.Rel(h.Root, p)
	if err != nil || strings.HasPrefix(rel, "..") {
		return p
	}
	return path.Clean("/" + filepath.ToSlash(rel))
}

// hostErr rewrites an error so that it names the host path.
func (h *Host) hostErr(op, name string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &fs.PathError{Op: op, Path: name, Err: pe.Err}
	}
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// ReadFile reads a regular file whole, up to MaxRead bytes; a larger file is
// an error wrapping ErrTooLarge.
func (h *Host) ReadFile(name string) ([]byte, error) {
	max := h.MaxRead
	if max <= 0 {
		max = DefaultMaxRead
	}
	b, truncated, err := h.ReadFileLimit(name, max)
	if err != nil {
		return nil, err
	}
	if truncated {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("%w (%d bytes)", ErrTooLarge, max)}
	}
	return b, nil
}

// ReadFileLimit reads at most max bytes of a regular file from its start and
// says whether the file held more.
func (h *Host) ReadFileLimit(name string, max int64) (data []byte, truncated bool, err error) {
	f, err := h.open(name)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, false, h.hostErr("read", name, err)
	}
	if int64(len(b)) > max {
		return b[:max], true, nil
	}
	return b, false, nil
}

// ReadHeadTail reads a regular file whole when it is at most head+tail bytes;
// otherwise it reads its first head and last tail bytes, and skipped is the
// number of bytes in between that were not read. size is the file's size when
// it was opened.
//
// A file that shrinks while it is read (logrotate's copytruncate empties a
// log the agent is reading) is not an error: what could still be read is
// returned, and size then describes what was read when the file shrank into
// its head (see readHeadTail).
func (h *Host) ReadHeadTail(name string, head, tail int64) (first, last []byte, size, skipped int64, err error) {
	f, err := h.open(name)
	if err != nil {
		return nil, nil, 0, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, 0, 0, h.hostErr("stat", name, err)
	}
	size = fi.Size()
	if size <= head+tail {
		// Sizes of files in /proc are 0; the limit still holds. A file that
		// shrinks meanwhile simply gives fewer bytes.
		b, err := io.ReadAll(io.LimitReader(f, head+tail))
		if err != nil {
			return nil, nil, 0, 0, h.hostErr("read", name, err)
		}
		return b, nil, int64(len(b)), 0, nil
	}
	first, last, size, skipped, err = readHeadTail(f, size, head, tail)
	if err != nil {
		return nil, nil, 0, 0, h.hostErr("read", name, err)
	}
	return first, last, size, skipped, nil
}

// readHeadTail reads the first head and the last tail bytes of r, whose size
// was size (larger than head+tail) when it was measured.
//
// When r has shrunk since (a short read ending in io.EOF), what could be read
// is returned, never an error:
//   - a head shorter than head: r now ends inside its head, which was read
//     whole; it is returned alone, with size the bytes read and skipped 0;
//   - a tail shorter than tail (possibly empty): the bytes from size-tail to
//     r's new end; size and skipped describe the file as it was measured.
//
// Any other read error is returned.
func readHeadTail(r io.ReaderAt, size, head, tail int64) (first, last []byte, readSize, skipped int64, err error) {
	first = make([]byte, head)
	n, err := r.ReadAt(first, 0)
	if int64(n) < head {
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, nil, 0, 0, err
		}
		return first[:n], nil, int64(n), 0, nil
	}
	last = make([]byte, tail)
	n, err = r.ReadAt(last, size-tail)
	if int64(n) < tail && err != nil && !errors.Is(err, io.EOF) {
		return nil, nil, 0, 0, err
	}
	return first, last[:n], size, size - head - tail, nil
}

// open opens a regular file read-only without ever opening anything else.
//
// Opening is an action on the node: opening /dev/watchdog arms it (the node
// reboots when nobody feeds it), opening a tape device rewinds it, opening a
// FIFO without O_NONBLOCK waits for a writer. So the resolved path is
// stat'ed first (following symlinks, as the open does) and only a regular
// file is opened, with O_NONBLOCK|O_NOCTTY in case a race swapped it
// between the stat and the open; the handle is then fstat'ed and refused
// when it is not the very file that was stat'ed, or not a regular file.
// Under a root other than "/" the path is resolved (SecureJoin) and opened
// with O_NOFOLLOW, so a symlink swapped in as its last component is refused
// too.
func (h *Host) open(name string) (*os.File, error) {
	p, err := h.Path(name)
	if err != nil {
		return nil, err
	}
	before, err := os.Stat(p)
	if err != nil {
		return nil, h.hostErr("open", name, err)
	}
	if !before.Mode().IsRegular() {
		return nil, notRegular(name, before)
	}
	flags := os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_NOCTTY
	if h.Root != "/" {
		flags |= syscall.O_NOFOLLOW
	}
	f, err := os.OpenFile(p, flags, 0)
	if err != nil {
		return nil, h.hostErr("open", name, err)
	}
	after, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, h.hostErr("stat", name, err)
	}
	if !after.Mode().IsRegular() {
		f.Close()
		return nil, notRegular(name, after)
	}
	if !os.SameFile(before, after) {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: name, Err: ErrChanged}
	}
	return f, nil
}

// notRegular is the error for a host path that is not a regular file.
func notRegular(name string, fi fs.FileInfo) error {
	return &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w (%s)", ErrNotRegular, describeType(fi.Mode()))}
}

// describeType names the type of a file that is not regular.
func describeType(m fs.FileMode) string {
	switch t := m.Type(); {
	case t&fs.ModeDir != 0:
		return "a directory"
	case t&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case t&fs.ModeCharDevice != 0:
		return "a character device"
	case t&fs.ModeDevice != 0:
		return "a block device"
	case t&fs.ModeSocket != 0:
		return "a socket"
	case t&fs.ModeSymlink != 0:
		return "a symbolic link"
	default:
		return "type " + t.String()
	}
}

// Stat follows symlinks (inside Root).
func (h *Host) Stat(name string) (fs.FileInfo, error) {
	p, err := h.Path(name)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return nil, h.hostErr("stat", name, err)
	}
	return fi, nil
}

// Exists says whether name exists. It is false with a nil error only when the
// file does not exist; any other failure (EACCES, ELOOP) is an error.
func (h *Host) Exists(name string) (bool, error) {
	_, err := h.Stat(name)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return false, err
}

// ReadDir lists a directory, sorted by name.
func (h *Host) ReadDir(name string) ([]fs.DirEntry, error) {
	p, err := h.Path(name)
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(p)
	if err != nil {
		return nil, h.hostErr("readdir", name, err)
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	return ents, nil
}

// Live says whether Root is a running system rather than a copy of one: its
// /proc is a procfs mount. Measurements that only make sense on a live system
// (statfs of a path, the boot time, the kernel's host name) depend on it.
//
// Files under <root>/proc are not enough: a copy of a host (a sosreport-style
// tree, a careless cp -a of /proc) carries them too, and taking it for live
// would measure the analyst's disk and report stale kernel values.
func (h *Host) Live() bool {
	p, err := h.Path("/proc")
	if err != nil {
		return false
	}
	var sf unix.Statfs_t
	if err := unix.Statfs(p, &sf); err != nil {
		return false
	}
	return sf.Type == unix.PROC_SUPER_MAGIC
}

// Run runs a node binary (a host path) with args, bounded by CmdTimeout, and
// returns its standard output. See Runner.
func (h *Host) Run(ctx context.Context, name string, args ...string) (Output, error) {
	timeout := h.CmdTimeout
	if timeout <= 0 {
		timeout = DefaultCmdTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return h.Exec.Run(ctx, Cmd{Root: h.Root, Path: name, Args: args})
}
