package host

// Internal tests: the mountinfo parser is unexported, and hosttest (which
// imports this package) cannot be used from here, so roots are built by hand.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// newRoot makes a root with the given directories and a Host for it.
func newRoot(t *testing.T, dirs ...string) (*Host, string) {
	t.Helper()
	root := t.TempDir()
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	h, err := New(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	return h, h.Root
}

// mountTmpfs mounts a tmpfs with opts on dir for the test, or skips the test
// when this process may not mount (not root, or no CAP_SYS_ADMIN).
func mountTmpfs(t *testing.T, dir, opts string) {
	t.Helper()
	mountTmpfsFlags(t, dir, 0, opts)
}

// mountTmpfsFlags is mountTmpfs with mount flags (unix.MS_RDONLY).
func mountTmpfsFlags(t *testing.T, dir string, flags uintptr, opts string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: mounting a tmpfs to make a real full filesystem needs root (run the tests as root to cover statfs)")
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", flags, opts); err != nil {
		if errors.Is(err, unix.EPERM) {
			t.Skipf("skipping: mount tmpfs on %s: %v (no CAP_SYS_ADMIN)", dir, err)
		}
		t.Fatalf("mount tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
}

// fill writes to dir until the filesystem refuses, and returns the error
// that stopped it.
func fill(t *testing.T, dir string) error {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		return err
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for i := 0; i < 1<<10; i++ {
		if _, err := f.Write(chunk); err != nil {
			return err
		}
	}
	t.Fatal("a 1 MiB tmpfs accepted 64 MiB")
	return nil
}

func TestUsageOfTmpfsMountedInSnapshot(t *testing.T) {
	h, root := newRoot(t, "etc", "var/lib/containerd", "var/lib/kubelet")
	if h.Live() {
		t.Fatal("a fresh directory tree must not be live")
	}
	containerd := filepath.Join(root, "var/lib/containerd")
	mountTmpfs(t, containerd, "size=1m,nr_inodes=64")

	u, err := h.Usage("/var/lib/containerd")
	if err != nil {
		t.Fatalf("Usage: %v", err)
	}
	// Empty: tmpfs has no reserved blocks; the root directory takes one inode.
	want := Usage{
		Dev:         u.Dev,
		TotalBytes:  1 << 20,
		FreeBytes:   1 << 20,
		InodesTotal: 64, InodesFree: 63, InodesUsed: 1, InodesUsedPercent: 100.0 / 64,
	}
	if diff := cmp.Diff(want, u); diff != "" {
		t.Errorf("empty tmpfs (-want +got):\n%s", diff)
	}

	// Half full.
	if err := os.WriteFile(filepath.Join(containerd, "half"), make([]byte, 512<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	u, err = h.Usage("/var/lib/containerd")
	if err != nil {
		t.Fatal(err)
	}
	if u.UsedBytes != 512<<10 || u.FreeBytes != 512<<10 || u.UsedPercent != 50 {
		t.Errorf("half full: used=%d free=%d used%%=%v, want 524288 524288 50", u.UsedBytes, u.FreeBytes, u.UsedPercent)
	}

	// Full: the write fails the way a node's does.
	if err := fill(t, containerd); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("filling the tmpfs: %v, want ENOSPC", err)
	}
	u, err = h.Usage("/var/lib/containerd")
	if err != nil {
		t.Fatal(err)
	}
	if u.FreeBytes != 0 || u.UsedPercent != 100 || u.UsedBytes != 1<<20 {
		t.Errorf("full: used=%d free=%d used%%=%v, want 1048576 0 100", u.UsedBytes, u.FreeBytes, u.UsedPercent)
	}

	// A path inside the mount is on it too.
	if err := os.Mkdir(filepath.Join(containerd, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	in, err := h.Usage("/var/lib/containerd/sub")
	if err != nil {
		t.Fatal(err)
	}
	if in.Dev != u.Dev {
		t.Errorf("a directory inside the mount has st_dev %d, the mount %d", in.Dev, u.Dev)
	}

	// A directory of the tree itself is the analyst's disk: not measured.
	_, err = h.Usage("/var/lib/kubelet")
	if !errors.Is(err, ErrNotMeasurable) {
		t.Errorf("Usage(/var/lib/kubelet) on a copy of a host: %v, want ErrNotMeasurable", err)
	}
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe.Path != "/var/lib/kubelet" {
		t.Errorf("the error must name the host path: %v", err)
	}

	mp, fstype, err := h.MountPoint("/var/lib/containerd/sub")
	if err != nil || mp != "/var/lib/containerd" || fstype != "tmpfs" {
		t.Errorf("MountPoint(/var/lib/containerd/sub) = %q, %q, %v; want /var/lib/containerd, tmpfs", mp, fstype, err)
	}
	if _, _, err := h.MountPoint("/var/lib/kubelet"); !errors.Is(err, ErrNotMeasurable) {
		t.Errorf("MountPoint(/var/lib/kubelet) on a copy of a host: %v, want ErrNotMeasurable", err)
	}
}

func TestUsageInodesExhausted(t *testing.T) {
	h, root := newRoot(t, "var/lib/kubelet")
	dir := filepath.Join(root, "var/lib/kubelet")
	mountTmpfs(t, dir, "size=1m,nr_inodes=64")
	var err error
	n := 0
	for ; n < 1000; n++ {
		var f *os.File
		if f, err = os.Create(filepath.Join(dir, fmt.Sprintf("f%d", n))); err != nil {
			break
		}
		f.Close()
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("creating files stopped with %v after %d, want ENOSPC", err, n)
	}
	if n != 63 {
		t.Errorf("created %d files, want 63 (64 inodes, one for the root directory)", n)
	}
	u, err := h.Usage("/var/lib/kubelet")
	if err != nil {
		t.Fatal(err)
	}
	if u.InodesFree != 0 || u.InodesUsed != 64 || u.InodesUsedPercent != 100 {
		t.Errorf("inodes free=%d used=%d used%%=%v, want 0 64 100", u.InodesFree, u.InodesUsed, u.InodesUsedPercent)
	}
}

// A root that is itself a mount point (a node's disk attached to a rescue VM
// and mounted) is the node's filesystem: measured although not live.
func TestUsageRootIsMountPoint(t *testing.T) {
	dir := t.TempDir()
	mountTmpfs(t, dir, "size=2m")
	if err := os.MkdirAll(filepath.Join(dir, "var/log"), 0o755); err != nil {
		t.Fatal(err)
	}
	h, err := New(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	u, err := h.Usage("/var/log")
	if err != nil {
		t.Fatalf("Usage: %v", err)
	}
	if u.TotalBytes != 2<<20 {
		t.Errorf("total = %d, want 2 MiB", u.TotalBytes)
	}
	mp, fstype, err := h.MountPoint("/var/log")
	if err != nil || mp != "/" || fstype != "tmpfs" {
		t.Errorf("MountPoint = %q, %q, %v; want /, tmpfs", mp, fstype, err)
	}
}

// On a live root every path is measured: the test's own "/" is live.
func TestUsageLiveRoot(t *testing.T) {
	h, err := New("/", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !h.Live() {
		t.Skip("skipping: this machine has no /proc, so \"/\" is not a live root")
	}
	u, err := h.Usage("/")
	if err != nil {
		t.Fatalf("Usage(/): %v", err)
	}
	if u.TotalBytes == 0 || u.UsedPercent < 0 || u.UsedPercent > 100 {
		t.Errorf("Usage(/) = %+v: not a filesystem", u)
	}
	mp, _, err := h.MountPoint("/")
	if err != nil || mp != "/" {
		t.Errorf("MountPoint(/) = %q, %v; want /", mp, err)
	}

	// A tmpfs mounted anywhere is found with its own numbers.
	dir := t.TempDir()
	mountTmpfs(t, dir, "size=1m,nr_inodes=64")
	u, err = h.Usage(dir)
	if err != nil {
		t.Fatal(err)
	}
	if u.TotalBytes != 1<<20 || u.InodesTotal != 64 {
		t.Errorf("Usage(%s) = %+v, want the 1 MiB tmpfs", dir, u)
	}
	mp, fstype, err := h.MountPoint(filepath.Join(dir, "not-yet-created"))
	if err != nil || mp != dir || fstype != "tmpfs" {
		t.Errorf("MountPoint(%s/...) = %q, %q, %v; want %s, tmpfs", dir, mp, fstype, err, dir)
	}
}

// A read-only filesystem (an immutable image's "/") says so; a writable one
// does not.
func TestUsageReadOnly(t *testing.T) {
	h, root := newRoot(t, "usr", "var")
	mountTmpfsFlags(t, filepath.Join(root, "usr"), unix.MS_RDONLY, "size=1m")
	mountTmpfs(t, filepath.Join(root, "var"), "size=1m")
	for _, tt := range []struct {
		path string
		want bool
	}{
		{"/usr", true},
		{"/var", false},
	} {
		u, err := h.Usage(tt.path)
		if err != nil {
			t.Fatalf("Usage(%s): %v", tt.path, err)
		}
		if u.ReadOnly != tt.want {
			t.Errorf("Usage(%s).ReadOnly = %v, want %v", tt.path, u.ReadOnly, tt.want)
		}
	}
}

func TestUsageMissingPath(t *testing.T) {
	h, _ := newRoot(t)
	_, err := h.Usage("/var/lib/etcd")
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Usage of a missing path: %v, want fs.ErrNotExist", err)
	}
}

func TestParseMountinfo(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []mount
	}{
		{
			name: "proc(5) example",
			in:   "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n",
			want: []mount{{Dev: "98:0", MountPoint: "/mnt2", FSType: "ext3", Source: "/dev/root"}},
		},
		{
			name: "no optional fields, escaped space",
			in:   "120 26 0:52 / /var/lib/my\\040disk rw,relatime - tmpfs tmpfs rw,size=1024k,nr_inodes=64\n",
			want: []mount{{Dev: "0:52", MountPoint: "/var/lib/my disk", FSType: "tmpfs", Source: "tmpfs"}},
		},
		{
			name: "several optional fields",
			in:   "29 1 8:1 / / rw,relatime shared:1 master:2 propagate_from:3 - ext4 /dev/sda1 rw\n",
			want: []mount{{Dev: "8:1", MountPoint: "/", FSType: "ext4", Source: "/dev/sda1"}},
		},
		{
			name: "malformed lines are skipped",
			in:   "garbage\n1 2 3 4 5 6 7\n36 35 98:0 / /x rw - xfs /dev/sdb rw\n36 35 98:0 / /y rw -\n",
			want: []mount{{Dev: "98:0", MountPoint: "/x", FSType: "xfs", Source: "/dev/sdb"}},
		},
		{name: "empty", in: "", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, parseMountinfo([]byte(tt.in))); diff != "" {
				t.Errorf("parseMountinfo (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParseMountinfo(f *testing.F) {
	f.Add("36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n")
	f.Add("120 26 0:52 / /var/lib/my\\040disk rw - tmpfs tmpfs rw\n")
	f.Add("1 2 3 4 5 6 -\n")
	f.Fuzz(func(t *testing.T, in string) {
		for _, m := range parseMountinfo([]byte(in)) {
			if m.FSType == "" {
				t.Errorf("mount without a type from %q", in)
			}
		}
	})
}

func TestLongestMount(t *testing.T) {
	mounts := []mount{
		{MountPoint: "/", FSType: "ext4"},
		{MountPoint: "/var", FSType: "xfs"},
		{MountPoint: "/var/lib/containerd", FSType: "tmpfs"},
		{MountPoint: "/var/lib/containerd", FSType: "overlay"}, // mounted on top
		{MountPoint: "/var/lib/kube", FSType: "btrfs"},
	}
	tests := []struct {
		path, want string
	}{
		{"/", "ext4"},
		{"/etc", "ext4"},
		{"/var", "xfs"},
		{"/var/log", "xfs"},
		{"/var/lib/containerd", "overlay"},
		{"/var/lib/containerd/io.containerd.content.v1.content", "overlay"},
		// A prefix of a name is not a parent directory.
		{"/var/lib/kubelet", "xfs"},
		{"/variable", "ext4"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			m, ok := longestMount(mounts, tt.path)
			if !ok || m.FSType != tt.want {
				t.Errorf("longestMount(%s) = %+v, %v; want %s", tt.path, m, ok, tt.want)
			}
		})
	}
	if _, ok := longestMount(mounts[1:], "/etc"); ok {
		t.Error("a path under no mount point must not match")
	}
}

func TestUnescapeOctal(t *testing.T) {
	tests := []struct{ in, want string }{
		{`/swapfile`, "/swapfile"},
		{`/my\040swap\040file`, "/my swap file"},
		{`/tab\011and\012newline`, "/tab\tand\nnewline"},
		{`/back\134slash`, `/back\slash`},
		{`/trailing\04`, `/trailing\04`},
		{`/not\999octal`, `/not\999octal`},
		{`/too\777big`, `/too\777big`},
		{`/deleted\040(deleted)`, "/deleted (deleted)"},
		{`\`, `\`},
	}
	for _, tt := range tests {
		if got := UnescapeOctal(tt.in); got != tt.want {
			t.Errorf("UnescapeOctal(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// Without anything mounted in it, a copy of a host has nothing measurable:
// statfs would measure the disk the tree sits on.
func TestUsageSnapshotNotMeasurable(t *testing.T) {
	h, _ := newRoot(t, "var/lib/kubelet")
	for _, p := range []string{"/", "/var/lib/kubelet"} {
		if _, err := h.Usage(p); !errors.Is(err, ErrNotMeasurable) {
			t.Errorf("Usage(%s): %v, want ErrNotMeasurable", p, err)
		}
		if _, _, err := h.MountPoint(p); !errors.Is(err, ErrNotMeasurable) {
			t.Errorf("MountPoint(%s): %v, want ErrNotMeasurable", p, err)
		}
	}
}
