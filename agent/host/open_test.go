package host_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/host/hosttest"
)

// openWatch sees every open(2) of one file, whoever makes it: inotify's
// IN_OPEN is queued by the kernel while the open happens, so it is there to
// be read as soon as the call that opened the file has returned. A stat(2)
// queues nothing.
type openWatch struct {
	t    *testing.T
	fd   int
	path string
}

func watchOpens(t *testing.T, path string) *openWatch {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Skipf("skipping: inotify: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if _, err := unix.InotifyAddWatch(fd, path, unix.IN_OPEN|unix.IN_DONT_FOLLOW); err != nil {
		t.Fatalf("inotify watch %s: %v", path, err)
	}
	return &openWatch{t: t, fd: fd, path: path}
}

// opened says whether the file was opened since the last call.
func (w *openWatch) opened() bool {
	w.t.Helper()
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	n, err := unix.Read(w.fd, buf)
	if errors.Is(err, unix.EAGAIN) {
		return false
	}
	if err != nil {
		w.t.Fatalf("reading inotify events of %s: %v", w.path, err)
	}
	return n > 0
}

// withoutHanging runs f and fails the test if f does not return: a FIFO
// opened without O_NONBLOCK waits for a writer forever. This guards against
// a hang; it measures nothing.
func withoutHanging(t *testing.T, fifo string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		// Release the blocked reader so that the test binary can end.
		if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		t.Fatalf("reading through a symlink to the FIFO %s blocked", fifo)
	}
}

// A symlink to a device or a FIFO is refused by every read, and the device
// or FIFO is never opened: opening some devices acts on them
// (/dev/watchdog arms a reboot, a tape rewinds).
func TestReadNeverOpensNonRegularFiles(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{
		"var/log/kubelet.log":       "->/dev/null",
		"var/log/pipe.log":          "->../../run/log.fifo",
		"etc/kubernetes/pki/ca.crt": "->/dev/null",
		"usr/bin/kubelet":           "->/run/log.fifo",
	})
	fifo := filepath.Join(h.Root, "run/log.fifo")
	if err := os.MkdirAll(filepath.Dir(fifo), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	// The node's /dev/null, inside the root: a character device of its own
	// inode, so that only this test's opens are seen.
	devNull := filepath.Join(h.Root, "dev/null")
	if err := os.MkdirAll(filepath.Dir(devNull), 0o755); err != nil {
		t.Fatal(err)
	}
	haveDev := unix.Mknod(devNull, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))) == nil

	reads := map[string]func(name string) error{
		"ReadFile": func(name string) error { _, err := h.ReadFile(name); return err },
		"ReadFileLimit": func(name string) error {
			_, _, err := h.ReadFileLimit(name, 10)
			return err
		},
		"ReadHeadTail": func(name string) error {
			_, _, _, _, err := h.ReadHeadTail(name, 4, 4)
			return err
		},
		"BuildInfo": func(name string) error { _, err := h.BuildInfo(name); return err },
	}
	targets := []struct {
		name, file string
		needsDev   bool
	}{
		{"/var/log/pipe.log", fifo, false},
		{"/usr/bin/kubelet", fifo, false},
		{"/run/log.fifo", fifo, false},
		{"/var/log/kubelet.log", devNull, true},
		{"/etc/kubernetes/pki/ca.crt", devNull, true},
	}
	for _, tt := range targets {
		for op, read := range reads {
			t.Run(op+tt.name, func(t *testing.T) {
				if tt.needsDev && !haveDev {
					t.Skip("skipping: mknod of a character device needs CAP_MKNOD")
				}
				w := watchOpens(t, tt.file)
				var err error
				withoutHanging(t, fifo, func() { err = read(tt.name) })
				if !errors.Is(err, host.ErrNotRegular) {
					t.Errorf("%s(%s) error = %v, want host.ErrNotRegular", op, tt.name, err)
				}
				var pe *fs.PathError
				if !errors.As(err, &pe) || pe.Path != tt.name {
					t.Errorf("error %v does not name the host path %s", err, tt.name)
				}
				if w.opened() {
					t.Errorf("%s(%s) opened %s", op, tt.name, tt.file)
				}
			})
		}
	}

	// The watch does see opens: the checks above can fail.
	t.Run("an open is seen", func(t *testing.T) {
		files := []string{fifo}
		if haveDev {
			files = append(files, devNull)
		}
		for _, file := range files {
			w := watchOpens(t, file)
			f, err := os.OpenFile(file, os.O_RDONLY|syscall.O_NONBLOCK, 0)
			if errors.Is(err, fs.ErrPermission) {
				continue // a nodev filesystem: the device cannot be opened at all
			}
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
			if !w.opened() {
				t.Errorf("opening %s queued no IN_OPEN event", file)
			}
		}
	})
}

// A regular file reached through symlinks is still read.
func TestReadRegularFileThroughSymlinks(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{
		"var/log/kubelet.log":   "->/var/log/kubelet/current.log",
		"var/log/kubelet":       "->../../data/logs",
		"data/logs/current.log": "I0501 kubelet started\n",
	})
	b, err := h.ReadFile("/var/log/kubelet.log")
	if err != nil || string(b) != "I0501 kubelet started\n" {
		t.Errorf("ReadFile = %q, %v", b, err)
	}
	first, _, size, _, err := h.ReadHeadTail("/var/log/kubelet.log", 64, 64)
	if err != nil || string(first) != "I0501 kubelet started\n" || size != int64(len(first)) {
		t.Errorf("ReadHeadTail = %q, size %d, %v", first, size, err)
	}
}

func TestLive(t *testing.T) {
	// A copy of a host that carries files of /proc is not live.
	copied := hosttest.Tree(t, map[string]string{
		"proc/self/stat": "1 (systemd) S 0 1 1 0 -1 4194560\n",
		"proc/stat":      "btime 1714550400\n",
	})
	if copied.Live() {
		t.Error("a tree with a plain file at proc/self/stat is live")
	}
	if hosttest.Tree(t, map[string]string{"etc/hostname": "node-1\n"}).Live() {
		t.Error("a tree without /proc is live")
	}

	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skipf("skipping: this machine has no /proc (%v)", err)
	}
	h, err := host.New("/", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !h.Live() {
		t.Error(`"/" is not live`)
	}

	// A root with a procfs mounted at its /proc (a node's root in the
	// DaemonSet, /host) is live.
	if os.Geteuid() != 0 {
		t.Skip("skipping the procfs mount: needs root")
	}
	tree := hosttest.Tree(t, map[string]string{"proc/": ""})
	procDir := filepath.Join(tree.Root, "proc")
	if err := unix.Mount("proc", procDir, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		t.Skipf("skipping: mount proc on %s: %v", procDir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(procDir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", procDir, err)
		}
	})
	if !tree.Live() {
		t.Error("a tree with procfs mounted at /proc is not live")
	}
}
