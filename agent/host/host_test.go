package host_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/host/hosttest"
)

func tree(t *testing.T, files map[string]string) *host.Host {
	return hosttest.Tree(t, files)
}

func TestReadFileResolvesSymlinksInsideRoot(t *testing.T) {
	h := tree(t, map[string]string{
		"run/systemd/resolve/stub-resolv.conf": "nameserver 127.0.0.53\n",
		"etc/resolv.conf":                      "->/run/systemd/resolve/stub-resolv.conf",
		"run/cloud-init/status.json":           "->../../var/lib/cloud/data/status.json",
		"var/lib/cloud/data/status.json":       `{"v1":{}}`,
		// Tries to climb out of the root: must land on the root's own /etc/hostname.
		"etc/escape":   "->../../../../../../../../etc/hostname",
		"etc/hostname": "node-1\n",
		// An absolute link to a file that exists on the machine running the
		// test but not in the root: must be "not exist", not the machine's file.
		"etc/os-release": "->/etc/passwd",
	})
	tests := []struct {
		name, want string
		wantErr    error
	}{
		{"/etc/resolv.conf", "nameserver 127.0.0.53\n", nil},
		{"/run/cloud-init/status.json", `{"v1":{}}`, nil},
		{"/etc/escape", "node-1\n", nil},
		{"/etc/../etc/hostname", "node-1\n", nil},
		{"/etc/os-release", "", fs.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := h.ReadFile(tt.name)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("ReadFile(%s) error = %v, want %v", tt.name, err, tt.wantErr)
			}
			if string(b) != tt.want {
				t.Errorf("ReadFile(%s) = %q, want %q", tt.name, b, tt.want)
			}
		})
	}
}

func TestErrorsNameHostPaths(t *testing.T) {
	h := tree(t, map[string]string{"etc/x": "x"})
	_, err := h.ReadFile("/etc/missing")
	if err == nil || !strings.Contains(err.Error(), "/etc/missing") || strings.Contains(err.Error(), h.Root) {
		t.Errorf("error %q should name the host path and not the root %s", err, h.Root)
	}
	if _, err := h.ReadFile("relative/path"); err == nil {
		t.Error("a relative host path must be refused")
	}
}

func TestReadFileBounds(t *testing.T) {
	h := tree(t, map[string]string{"var/log/big.log": strings.Repeat("a", 100)})
	h.MaxRead = 10
	if _, err := h.ReadFile("/var/log/big.log"); !errors.Is(err, host.ErrTooLarge) {
		t.Errorf("ReadFile over the cap: error = %v, want host.ErrTooLarge", err)
	}
	b, truncated, err := h.ReadFileLimit("/var/log/big.log", 40)
	if err != nil || !truncated || len(b) != 40 {
		t.Errorf("ReadFileLimit = %d bytes, truncated=%v, err=%v; want 40, true, nil", len(b), truncated, err)
	}
}

func TestReadHeadTail(t *testing.T) {
	h := tree(t, map[string]string{"small": "0123456789", "big": "0123456789abcdefghij"})
	first, last, size, skipped, err := h.ReadHeadTail("/small", 8, 4)
	if err != nil || string(first) != "0123456789" || last != nil || size != 10 || skipped != 0 {
		t.Errorf("small: %q %q %d %d %v", first, last, size, skipped, err)
	}
	first, last, size, skipped, err = h.ReadHeadTail("/big", 4, 6)
	if err != nil || string(first) != "0123" || string(last) != "efghij" || size != 20 || skipped != 10 {
		t.Errorf("big: %q %q %d %d %v", first, last, size, skipped, err)
	}
}

func TestReadRefusesNonRegularFiles(t *testing.T) {
	h := tree(t, map[string]string{"etc/x": "x"})
	fifo := filepath.Join(h.Root, "run/kubelet.fifo")
	os.MkdirAll(filepath.Dir(fifo), 0o755)
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	// Opening a FIFO with no writer would block forever without O_NONBLOCK.
	if _, err := h.ReadFile("/run/kubelet.fifo"); !errors.Is(err, host.ErrNotRegular) {
		t.Errorf("ReadFile(fifo) error = %v, want host.ErrNotRegular", err)
	}
	if _, err := h.ReadFile("/etc"); !errors.Is(err, host.ErrNotRegular) {
		t.Errorf("ReadFile(dir) error = %v, want host.ErrNotRegular", err)
	}
}

func TestExists(t *testing.T) {
	h := tree(t, map[string]string{"run/cluster-api/bootstrap-success.complete": "success\n", "etc/file": "x", "etc/loop": "->/etc/loop"})
	for _, tt := range []struct {
		name    string
		want    bool
		wantErr bool
	}{
		{"/run/cluster-api/bootstrap-success.complete", true, false},
		{"/run/cluster-api/other", false, false},
		{"/nonexistent/dir/file", false, false},
		{"/etc/loop", false, true},
	} {
		got, err := h.Exists(tt.name)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("Exists(%s) = %v, %v; want %v, error %v", tt.name, got, err, tt.want, tt.wantErr)
		}
	}
}

// TestPermissionDeniedIsAnError runs a child process as an unprivileged user:
// EACCES must come back as an error from Exists and ReadFile, never as "absent".
func TestPermissionDeniedIsAnError(t *testing.T) {
	if os.Getenv("NODEDIAG_EACCES_ROOT") != "" {
		h, err := host.New(os.Getenv("NODEDIAG_EACCES_ROOT"), nil)
		if err != nil {
			t.Fatal(err)
		}
		ok, err := h.Exists("/etc/kubernetes/pki/ca.crt")
		if ok || !errors.Is(err, fs.ErrPermission) {
			t.Fatalf("Exists = %v, %v; want false, a permission error", ok, err)
		}
		if _, err := h.ReadFile("/etc/kubernetes/pki/ca.crt"); !errors.Is(err, fs.ErrPermission) {
			t.Fatalf("ReadFile error = %v, want a permission error", err)
		}
		return
	}
	if os.Getuid() != 0 {
		t.Skip("needs root to run the check as another user")
	}
	root := t.TempDir()
	os.Chmod(root, 0o755)
	pki := filepath.Join(root, "etc/kubernetes/pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(root, "etc"), 0o755)
	os.Chmod(filepath.Join(root, "etc/kubernetes"), 0o755)
	os.WriteFile(filepath.Join(pki, "ca.crt"), []byte("x"), 0o600)
	// t.TempDir's parents must be traversable by the child.
	for d := filepath.Dir(root); d != "/"; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 {
			t.Skipf("%s is not traversable by other users", d)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPermissionDeniedIsAnError$", "-test.v")
	cmd.Env = append(os.Environ(), "NODEDIAG_EACCES_ROOT="+root)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("unprivileged child failed: %v\n%s", err, out)
	}
}

func TestLocalRunner(t *testing.T) {
	h := tree(t, map[string]string{
		"usr/bin/kubelet":    "#!/bin/sh\necho \"Kubernetes v1.35.0\"\n",
		"usr/local/bin/link": "->/usr/bin/kubelet",
		"usr/bin/failing":    "#!/bin/sh\necho 'unknown flag: --version' >&2\nexit 3\n",
		"usr/bin/hung":       "#!/bin/sh\nsleep 300\necho never\n",
		"usr/bin/env-dump":   "#!/bin/sh\nenv\n",
		"usr/bin/notexec":    "plain text",
	})
	h.CmdTimeout = 30 * time.Second
	ctx := context.Background()

	out, err := h.Run(ctx, "/usr/bin/kubelet", "--version")
	if err != nil || string(out.Stdout) != "Kubernetes v1.35.0\n" {
		t.Errorf("kubelet --version = %q, %v", out.Stdout, err)
	}
	out, err = h.Run(ctx, "/usr/local/bin/link", "--version")
	if err != nil || string(out.Stdout) != "Kubernetes v1.35.0\n" {
		t.Errorf("symlinked kubelet --version = %q, %v", out.Stdout, err)
	}

	_, err = h.Run(ctx, "/usr/bin/failing", "--version")
	var ee *host.ExitError
	if !errors.As(err, &ee) || ee.Code != 3 || !strings.Contains(ee.Error(), "unknown flag") {
		t.Errorf("failing command error = %v, want exit status 3 with stderr", err)
	}

	// Only the hung binary gets a short timeout, on a Host of its own: the
	// others keep a generous one, so that a loaded machine starting sh
	// slowly cannot make them time out.
	hung := *h
	hung.CmdTimeout = 200 * time.Millisecond
	_, err = hung.Run(ctx, "/usr/bin/hung")
	if !errors.Is(err, host.ErrTimeout) {
		t.Errorf("hung command error = %v, want host.ErrTimeout", err)
	}

	_, err = h.Run(ctx, "/usr/bin/missing", "--version")
	if !host.IsNotInstalled(err) {
		t.Errorf("missing binary error = %v, want host.IsNotInstalled", err)
	}
	if _, err = h.Run(ctx, "/usr/bin/notexec"); err == nil || host.IsNotInstalled(err) {
		t.Errorf("non-executable file error = %v, want a permission error", err)
	}

	t.Setenv("NODEDIAG_SECRET", "do-not-pass")
	out, err = h.Run(ctx, "/usr/bin/env-dump")
	if err != nil || strings.Contains(string(out.Stdout), "NODEDIAG_SECRET") {
		t.Errorf("the agent's environment leaked into a host command: %q, %v", out.Stdout, err)
	}
}

func TestNoExec(t *testing.T) {
	h := tree(t, map[string]string{"usr/bin/kubelet": "#!/bin/sh\necho hi\n"})
	h.Exec = host.NoExec{}
	if _, err := h.Run(context.Background(), "/usr/bin/kubelet", "--version"); !errors.Is(err, host.ErrExecDisabled) {
		t.Errorf("NoExec error = %v, want host.ErrExecDisabled", err)
	}
}

func TestHostPath(t *testing.T) {
	h := tree(t, map[string]string{"etc/x": "x"})
	p, err := h.Path("/etc/x")
	if err != nil {
		t.Fatal(err)
	}
	if got := h.HostPath(p); got != "/etc/x" {
		t.Errorf("HostPath(%s) = %s, want /etc/x", p, got)
	}
}
