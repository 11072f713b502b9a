package probes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/host/hosttest"
	"github.com/nodediag/nodediag/agent/probe"
	"github.com/nodediag/nodediag/agent/rules"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// fsMountTmpfs mounts a tmpfs with opts on dir for the test, or skips the
// test when this process may not mount.
func fsMountTmpfs(t *testing.T, dir, opts string) {
	t.Helper()
	fsMountTmpfsFlags(t, dir, 0, opts)
}

// fsMountTmpfsFlags is fsMountTmpfs with mount flags (unix.MS_RDONLY).
func fsMountTmpfsFlags(t *testing.T, dir string, flags uintptr, opts string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: mounting a tmpfs into the test tree (a real full disk) needs root")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
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

// fsFill writes into dir until the filesystem is full.
func fsFill(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for i := 0; i < 1<<12; i++ {
		if _, err := f.Write(chunk); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			t.Fatal(err)
		}
	}
	t.Fatalf("%s never filled up", dir)
}

func runFilesystems(t *testing.T, h *host.Host) *nodediagv1.ProbeEvidence {
	t.Helper()
	ev := probe.RunAll(context.Background(), h, []probe.Probe{filesystems{}})
	return ev.Probes[0]
}

// A copy of a host with nothing mounted in it: nothing can be measured, and
// the probe says so instead of measuring the analyst's disk.
func TestFilesystemsSnapshotSkipped(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{"var/lib/kubelet/config.yaml": "kind: KubeletConfiguration\n", "var/log/": ""})
	pe := runFilesystems(t, h)
	if pe.Status != probe.StatusSkipped {
		t.Fatalf("status = %q (%s), want skipped", pe.Status, pe.Error)
	}
	if !strings.Contains(pe.Error, "cannot be measured here") {
		t.Errorf("error = %q, want the reason", pe.Error)
	}
	if pe.GetFilesystems() != nil {
		t.Errorf("a skipped probe carries no filesystems: %v", pe.GetFilesystems())
	}
}

// A tmpfs mounted into the tree makes a real full disk; the rest of the tree
// is reported as not measurable.
func TestFilesystemsFullTmpfsInSnapshot(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{"var/lib/kubelet/": "", "var/log/": "", "etc/hostname": "node-1\n"})
	containerd := filepath.Join(h.Root, "var/lib/containerd")
	fsMountTmpfs(t, containerd, "size=1m,nr_inodes=64")
	fsFill(t, containerd)

	pe := runFilesystems(t, h)
	if pe.Status != probe.StatusOK {
		t.Fatalf("status = %q (%s), want ok", pe.Status, pe.Error)
	}
	want := &nodediagv1.Filesystems{Filesystems: []*nodediagv1.Filesystem{{
		Path: "/var/lib/containerd", MountPoint: "/var/lib/containerd", Fstype: "tmpfs",
		TotalBytes: 1 << 20, FreeBytes: 0, UsedBytes: 1 << 20, UsedPercent: 100,
		InodesTotal: 64, InodesFree: 62, InodesUsedPercent: 2 * 100.0 / 64,
		Method: "statfs",
	}}}
	if diff := cmp.Diff(want, pe.GetFilesystems(), protocmp.Transform()); diff != "" {
		t.Errorf("filesystems (-want +got):\n%s", diff)
	}
	var unreadable []string
	for _, u := range pe.Unreadable {
		unreadable = append(unreadable, u.Source)
		if !strings.Contains(u.Error, "a copy of a host: its filesystems cannot be measured here") {
			t.Errorf("unreadable %s: %q, want the reason", u.Source, u.Error)
		}
	}
	// /var/lib/etcd does not exist: not reported at all.
	if diff := cmp.Diff([]string{"/", "/var", "/var/lib/kubelet", "/var/log"}, unreadable); diff != "" {
		t.Errorf("unreadable sources (-want +got):\n%s", diff)
	}
}

// Paths on one filesystem are reported once, with the others in also.
func TestFilesystemsGroupsBySTDev(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{"etc/hostname": "node-1\n"})
	fsMountTmpfs(t, filepath.Join(h.Root, "var"), "size=4m")
	for _, d := range []string{"var/lib/kubelet", "var/log", "var/lib/etcd"} {
		if err := os.MkdirAll(filepath.Join(h.Root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// containerd on its own disk, as on nodes with a data disk for images.
	fsMountTmpfs(t, filepath.Join(h.Root, "var/lib/containerd"), "size=2m")

	pe := runFilesystems(t, h)
	if pe.Status != probe.StatusOK {
		t.Fatalf("status = %q (%s), want ok", pe.Status, pe.Error)
	}
	type fsum struct {
		Path, MountPoint string
		Also             []string
		Total            uint64
	}
	var got []fsum
	for _, f := range pe.GetFilesystems().GetFilesystems() {
		got = append(got, fsum{f.Path, f.MountPoint, f.Also, f.TotalBytes})
	}
	want := []fsum{
		{"/var", "/var", []string{"/var/lib/kubelet", "/var/lib/etcd", "/var/log"}, 4 << 20},
		{"/var/lib/containerd", "/var/lib/containerd", nil, 2 << 20},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("filesystems (-want +got):\n%s", diff)
	}
	if len(pe.Unreadable) != 1 || pe.Unreadable[0].Source != "/" {
		t.Errorf("unreadable = %v, want only / (the tree itself)", pe.Unreadable)
	}
}

// An immutable "/" (mounted read-only, full by construction) with a writable
// /var, as on image-based nodes: "/" is reported read-only, /var is not.
func TestFilesystemsReadOnly(t *testing.T) {
	h := hosttest.Tree(t, nil)
	fsMountTmpfs(t, h.Root, "size=1m")
	if err := os.MkdirAll(filepath.Join(h.Root, "var"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("", h.Root, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		t.Fatalf("remount %s read-only: %v", h.Root, err)
	}
	fsMountTmpfs(t, filepath.Join(h.Root, "var"), "size=2m")

	pe := runFilesystems(t, h)
	if pe.Status != probe.StatusOK {
		t.Fatalf("status = %q (%s), want ok", pe.Status, pe.Error)
	}
	type fsum struct {
		Path, MountPoint string
		ReadOnly         bool
	}
	var got []fsum
	for _, f := range pe.GetFilesystems().GetFilesystems() {
		got = append(got, fsum{f.Path, f.MountPoint, f.ReadOnly})
	}
	want := []fsum{{"/", "/", true}, {"/var", "/var", false}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("filesystems (-want +got):\n%s", diff)
	}
}

// On a live root every path is measured: the test machine's own "/".
func TestFilesystemsLiveRoot(t *testing.T) {
	h, err := host.New("/", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !h.Live() {
		t.Skip("skipping: \"/\" of this machine is not live (no /proc)")
	}
	pe := runFilesystems(t, h)
	if pe.Status != probe.StatusOK {
		t.Fatalf("status = %q (%s), want ok", pe.Status, pe.Error)
	}
	fss := pe.GetFilesystems().GetFilesystems()
	if len(fss) == 0 || fss[0].Path != "/" || fss[0].MountPoint == "" || fss[0].TotalBytes == 0 || fss[0].Method != "statfs" {
		t.Errorf("first filesystem = %v, want / measured with its mount point", fss)
	}
}

// From a real full disk to the finding: the probe's evidence judged by the
// rules.
func TestFilesystemsFullDiskFinding(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{"etc/hostname": "node-1\n"})
	containerd := filepath.Join(h.Root, "var/lib/containerd")
	fsMountTmpfs(t, containerd, "size=1m")
	fsFill(t, containerd)
	ev := probe.RunAll(context.Background(), h, []probe.Probe{filesystems{}})
	eng, err := rules.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	res := eng.Analyze(ev, rules.Context{Now: hosttest.Now})
	if len(res.Findings) == 0 || res.Findings[0].Id != "DiskFull" {
		t.Fatalf("findings = %v, want DiskFull first", res.Findings)
	}
	f := res.Findings[0]
	if f.Title != "/var/lib/containerd is full: 100.0% used, 0 B free" {
		t.Errorf("title = %q", f.Title)
	}
	if len(f.Evidence) == 0 || f.Evidence[0].Source != "statfs:/var/lib/containerd" ||
		!strings.HasPrefix(f.Evidence[0].Excerpt, "/var/lib/containerd tmpfs size=1.0 MiB used=1.0 MiB avail=0 B use%=100.0") {
		t.Errorf("evidence = %v", f.Evidence)
	}
}
