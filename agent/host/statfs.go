package host

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrNotMeasurable is returned (wrapped) by Usage and MountPoint for a path
// whose filesystem this process cannot measure for the node: on a copy of a
// host (a directory tree, a bundle), statfs would measure the analyst's own
// disk, not the node's.
var ErrNotMeasurable = errors.New("a copy of a host: its filesystems cannot be measured here")

// Usage is the space and inode usage of the filesystem holding a path, as
// statfs(2) reports it and df(1) prints it.
type Usage struct {
	// Dev is the st_dev of the path: two paths with the same Dev live on the
	// same filesystem.
	Dev uint64
	// TotalBytes is the filesystem's size (f_blocks).
	TotalBytes uint64
	// FreeBytes is the space available to unprivileged users (f_bavail): what
	// df calls "Avail" and what the kubelet's eviction signals call
	// "available". It excludes the blocks reserved for root.
	FreeBytes uint64
	// UsedBytes is f_blocks - f_bfree.
	UsedBytes uint64
	// UsedPercent is used/(used+avail)*100, as df computes "Use%" (df rounds
	// it up; this is not rounded).
	UsedPercent float64
	InodesTotal uint64
	InodesFree  uint64
	InodesUsed  uint64
	// InodesUsedPercent is used/total*100, as df -i; 0 when the filesystem
	// reports no inodes (btrfs, some network filesystems).
	InodesUsedPercent float64
	// ReadOnly says the filesystem is mounted read-only (ST_RDONLY in
	// f_flag). Nothing can fill such a filesystem: an immutable image
	// (squashfs, erofs, composefs "/" of FCOS/RHCOS-style nodes) is always
	// 100% used, by construction.
	ReadOnly bool
}

// Usage measures the filesystem holding the host path name.
//
// Measuring only makes sense for the node's own filesystems. On a live root
// (Live) every path is measured: Root is "/" on a VM, or "/host" in the
// DaemonSet, where the host's mounts appear under the hostPath mount. On a
// copy of a host, only paths on a filesystem mounted inside the root are
// measured (a node's disk attached and mounted at Root, or a test that mounts
// a small tmpfs into its tree to make a real full disk); any other path would
// measure the disk of the machine doing the analysis, and gives an error
// wrapping ErrNotMeasurable.
func (h *Host) Usage(name string) (Usage, error) {
	p, err := h.Path(name)
	if err != nil {
		return Usage{}, err
	}
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return Usage{}, &fs.PathError{Op: "stat", Path: name, Err: err}
	}
	dev := uint64(st.Dev)
	if !h.Live() {
		inside, err := h.mountedInside(dev)
		if err != nil {
			return Usage{}, &fs.PathError{Op: "statfs", Path: name, Err: err}
		}
		if !inside {
			return Usage{}, &fs.PathError{Op: "statfs", Path: name, Err: ErrNotMeasurable}
		}
	}
	var sf unix.Statfs_t
	if err := unix.Statfs(p, &sf); err != nil {
		return Usage{}, &fs.PathError{Op: "statfs", Path: name, Err: err}
	}
	return usageOf(dev, &sf), nil
}

// usageOf turns a statfs result into a Usage, the way df does.
func usageOf(dev uint64, sf *unix.Statfs_t) Usage {
	// Block counts are in units of f_bsize here as in gopsutil's disk.Usage;
	// measured against df -B1 on ext4 and tmpfs they match exactly.
	bsize := uint64(sf.Bsize)
	u := Usage{
		Dev:         dev,
		TotalBytes:  uint64(sf.Blocks) * bsize,
		FreeBytes:   uint64(sf.Bavail) * bsize,
		UsedBytes:   (uint64(sf.Blocks) - uint64(sf.Bfree)) * bsize,
		InodesTotal: uint64(sf.Files),
		InodesFree:  uint64(sf.Ffree),
		ReadOnly:    sf.Flags&unix.ST_RDONLY != 0,
	}
	if d := u.UsedBytes + u.FreeBytes; d > 0 {
		u.UsedPercent = float64(u.UsedBytes) / float64(d) * 100
	}
	if u.InodesTotal > 0 && u.InodesFree <= u.InodesTotal {
		u.InodesUsed = u.InodesTotal - u.InodesFree
		u.InodesUsedPercent = float64(u.InodesUsed) / float64(u.InodesTotal) * 100
	}
	return u
}

// mountedInside says whether the device dev is a filesystem mounted at or
// under Root, rather than the filesystem Root merely sits on. A path under
// Root (symlinks resolved inside Root) lives on another device than Root's
// parent directory only if something is mounted between them.
func (h *Host) mountedInside(dev uint64) (bool, error) {
	if h.Root == "/" {
		// The process's own root is the node's root.
		return true, nil
	}
	var parent unix.Stat_t
	if err := unix.Stat(filepath.Dir(h.Root), &parent); err != nil {
		return false, fmt.Errorf("stat the parent of the root: %w", err)
	}
	return dev != uint64(parent.Dev), nil
}

// selfMountinfo is the mount table of this process. Its mount points are
// paths as this process sees them: host paths when Root is "/", and paths
// under Root for the host's mounts otherwise (the DaemonSet's hostPath mount
// of "/" at /host is recursive, so the host's mounts appear under /host).
const selfMountinfo = "/proc/self/mountinfo"

// MountPoint returns the mount point (a host path) and filesystem type of the
// filesystem holding the host path name: the longest mount point of the mount
// table that contains it.
//
// The table is this process's own (/proc/self/mountinfo), of which only the
// mounts at or under Root count, mapped back to host paths. Not the host's
// <root>/proc/self/mountinfo: in the DaemonSet "self" in the host's /proc is
// still this process, whose mount points are "/host/..."; and pid 1's table
// is the host's only with hostPID. On a copy of a host, a path on no mount at
// or under Root gives an error wrapping ErrNotMeasurable, as Usage.
func (h *Host) MountPoint(name string) (mountPoint, fstype string, err error) {
	p, err := h.Path(name)
	if err != nil {
		return "", "", err
	}
	b, err := os.ReadFile(selfMountinfo)
	if err != nil {
		return "", "", &fs.PathError{Op: "mountpoint", Path: name, Err: err}
	}
	mounts := mountsUnder(parseMountinfo(b), h.Root)
	for i := range mounts {
		// Clean: HostPath(Root) is "/.".
		mounts[i].MountPoint = path.Clean(h.HostPath(mounts[i].MountPoint))
	}
	m, ok := longestMount(mounts, path.Clean(h.HostPath(p)))
	if !ok {
		if h.Live() {
			return "", "", &fs.PathError{Op: "mountpoint", Path: name, Err: errors.New("no mount at or under the root holds it")}
		}
		return "", "", &fs.PathError{Op: "mountpoint", Path: name, Err: ErrNotMeasurable}
	}
	return m.MountPoint, m.FSType, nil
}

// mountsUnder keeps the mounts whose mount point is root or below it.
func mountsUnder(mounts []mount, root string) []mount {
	var out []mount
	for _, m := range mounts {
		if containsPath(root, m.MountPoint) {
			out = append(out, m)
		}
	}
	return out
}

// mount is an entry of /proc/<pid>/mountinfo.
type mount struct {
	// Dev is the "major:minor" field.
	Dev        string
	MountPoint string
	FSType     string
	Source     string
}

// parseMountinfo parses /proc/<pid>/mountinfo (proc(5)): "36 35 98:0 /mnt1
// /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue". Octal
// escapes of the mount point (\040 for a space) are decoded. Malformed lines
// are skipped: the table is the kernel's and a line it did not write cannot
// name a mount.
func parseMountinfo(b []byte) []mount {
	var out []mount
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := -1
		for i := 6; i < len(fields); i++ {
			if fields[i] == "-" {
				sep = i
				break
			}
		}
		if len(fields) < 6 || sep < 0 || sep+1 >= len(fields) {
			continue
		}
		m := mount{Dev: fields[2], MountPoint: UnescapeOctal(fields[4]), FSType: fields[sep+1]}
		if sep+2 < len(fields) {
			m.Source = UnescapeOctal(fields[sep+2])
		}
		out = append(out, m)
	}
	return out
}

// longestMount returns the mount of mounts whose mount point is the longest
// one containing path; among equal mount points the last one (mounted on
// top) wins.
func longestMount(mounts []mount, path string) (mount, bool) {
	var best mount
	found := false
	for _, m := range mounts {
		if !containsPath(m.MountPoint, path) {
			continue
		}
		if !found || len(m.MountPoint) >= len(best.MountPoint) {
			best, found = m, true
		}
	}
	return best, found
}

// containsPath says whether path is dir or below it.
func containsPath(dir, path string) bool {
	if dir == "/" || dir == path {
		return true
	}
	return strings.HasPrefix(path, dir+"/")
}

// UnescapeOctal decodes the \ooo escapes the kernel writes in /proc/mounts,
// /proc/self/mountinfo and /proc/swaps for a space, tab, newline or
// backslash in a path. Anything else is kept as it is.
func UnescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			v := (s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0')
			if s[i+1] <= '3' {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }
