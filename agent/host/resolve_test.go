package host_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/host/hosttest"
)

func TestResolve(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{
		"usr/bin/kubelet":       "#!/bin/sh\n",
		"bin":                   "->usr/bin",
		"usr/local/bin/kubelet": "->/usr/bin/kubelet",
		"opt/bin/kubelet":       "->../../usr/local/bin/kubelet",
		"usr/sbin/dangling":     "->/opt/missing/kubelet",
		"usr/sbin/escape":       "->../../../../../usr/bin/kubelet",
	})
	tests := []struct{ name, want string }{
		{"/usr/bin/kubelet", "/usr/bin/kubelet"},
		{"/bin/kubelet", "/usr/bin/kubelet"},
		{"/usr/local/bin/kubelet", "/usr/bin/kubelet"},
		{"/opt/bin/kubelet", "/usr/bin/kubelet"},
		{"/usr/sbin/dangling", "/opt/missing/kubelet"},
		{"/usr/sbin/escape", "/usr/bin/kubelet"},
		{"/usr/sbin/missing", "/usr/sbin/missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := h.Resolve(tt.name)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("Resolve(%s) = %s, want %s", tt.name, got, tt.want)
			}
		})
	}
	if _, err := h.Resolve("usr/bin/kubelet"); err == nil {
		t.Error("Resolve of a relative path: want an error")
	}
}

// With Root "/", Path does not resolve symlinks; Resolve must.
func TestResolveRootSlash(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "target"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "target"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	h, err := host.New("/", host.NoExec{})
	if err != nil {
		t.Fatal(err)
	}
	// The temp dir itself may sit behind a symlink (macOS /var): compare
	// with what the OS resolves.
	want, err := filepath.EvalSymlinks(filepath.Join(dir, "target"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := h.Resolve(filepath.Join(dir, "link"))
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("Resolve(link) = %s, want %s", got, want)
	}
}
