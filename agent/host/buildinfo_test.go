package host_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/host/hosttest"
)

// copyTestBinary puts this test binary (a real Go executable) at the host
// path name under h's root, with mode.
func copyTestBinary(t *testing.T, h *host.Host, name string, mode os.FileMode) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(h.Root, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, mode); err != nil {
		t.Fatal(err)
	}
}

func TestBuildInfoReadsGoBinaryWithoutRunningIt(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{
		"usr/local/bin/kubelet": "->/usr/bin/kubelet",
	})
	// Not executable: reading build info must not need the execute bit.
	copyTestBinary(t, h, "usr/bin/kubelet", 0o644)
	for _, name := range []string{"/usr/bin/kubelet", "/usr/local/bin/kubelet"} {
		t.Run(name, func(t *testing.T) {
			bi, err := h.BuildInfo(name)
			if err != nil {
				t.Fatalf("BuildInfo(%s): %v", name, err)
			}
			if bi.GoVersion != runtime.Version() {
				t.Errorf("GoVersion = %q, want %q", bi.GoVersion, runtime.Version())
			}
			if bi.Main.Path != "github.com/nodediag/nodediag" {
				t.Errorf("Main.Path = %q, want the module of this test", bi.Main.Path)
			}
			if !strings.HasPrefix(bi.Path, "github.com/nodediag/nodediag/agent/host") {
				t.Errorf("Path = %q, want this test's package", bi.Path)
			}
		})
	}
}

func TestBuildInfoErrors(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{
		"usr/bin/script":   "#!/bin/sh\necho 'Kubernetes v1.35.0'\n",
		"usr/bin/dir/":     "",
		"usr/bin/dangling": "->/opt/bin/missing",
	})
	if err := syscall.Mkfifo(filepath.Join(h.Root, "usr/bin/fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		wantErr error // nil: any error
	}{
		{"/usr/bin/missing", fs.ErrNotExist},
		{"/usr/bin/dangling", fs.ErrNotExist},
		{"/usr/bin/dir", host.ErrNotRegular},
		{"/usr/bin/fifo", host.ErrNotRegular},
		{"/usr/bin/script", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bi, err := h.BuildInfo(tt.name)
			if err == nil {
				t.Fatalf("BuildInfo(%s) = %v, want an error", tt.name, bi)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("error = %v, want %v", err, tt.wantErr)
			}
			var pe *fs.PathError
			if !errors.As(err, &pe) || pe.Path != tt.name {
				t.Errorf("error %v does not name the host path %s", err, tt.name)
			}
			if strings.Contains(err.Error(), h.Root) {
				t.Errorf("error %q names the path under the root", err)
			}
		})
	}
}
