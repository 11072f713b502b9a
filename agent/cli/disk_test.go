package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestDiskFullOnARealFilesystem mounts a small tmpfs at /var/lib/containerd
// of a copy of the healthy example host, fills it, and expects the agent to
// measure it (statfs) and name the full image filesystem as the cause.
func TestDiskFullOnARealFilesystem(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	root := filepath.Join(t.TempDir(), "root")
	if out, err := exec.Command("cp", "-a", filepath.Join(scenarioDir, "healthy-worker", "root"), root).CombinedOutput(); err != nil {
		t.Fatalf("copying the example host: %v\n%s", err, out)
	}
	mnt := filepath.Join(root, "var/lib/containerd")
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m,nr_inodes=256"); err != nil {
		t.Skipf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	// Fill it up to the last page.
	f, err := os.Create(filepath.Join(mnt, "layer"))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	f.Close()

	out, stderr, code := run(t, "check", "--root", root)
	if code != ExitFindings {
		t.Fatalf("exit %d (%s), want 1:\n%s", code, stderr, out)
	}
	first := strings.SplitN(strings.SplitN(out, "\n1. ", 2)[1], "\n", 3)
	if !strings.HasPrefix(first[0], "ERROR DiskFull") || !strings.Contains(first[1], "/var/lib/containerd is full") {
		t.Errorf("want DiskFull for /var/lib/containerd first, got:\n%s", out)
	}
	if !strings.Contains(out, "statfs:/var/lib/containerd") {
		t.Errorf("the finding should quote the measurement:\n%s", out)
	}
}
