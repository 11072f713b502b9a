package host_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/nodediag/nodediag/agent/host"
)

// DialUnix reaches a socket by its host path under the root, through a
// symlink that points outside it as the node sees it (/var/run -> /run),
// and reports a missing socket as ENOENT.
func TestDialUnix(t *testing.T) {
	root, err := os.MkdirTemp("", "du") // short: a socket path holds 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.MkdirAll(filepath.Join(root, "run/containerd"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "var"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/run", filepath.Join(root, "var/run")); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(root, "run/containerd/containerd.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		if c, err := l.Accept(); err == nil {
			c.Write([]byte("hello"))
			c.Close()
		}
	}()
	h, err := host.New(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := h.DialUnix(context.Background(), "/var/run/containerd/containerd.sock")
	if err != nil {
		t.Fatalf("DialUnix: %v", err)
	}
	got, _ := io.ReadAll(c)
	c.Close()
	if string(got) != "hello" {
		t.Errorf("read %q from the socket, want hello", got)
	}
	if _, err := h.DialUnix(context.Background(), "/run/nosuch.sock"); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("missing socket: err = %v, want ENOENT", err)
	}
}
