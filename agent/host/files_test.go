package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestFilesServeHostPaths(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	tree := filepath.Join(outside, "machines/m-0")
	if err := os.MkdirAll(tree, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(tree, "cloud-init-output.log"), "kubeadm join failed\n")
	write(filepath.Join(outside, "secret"), "not for the probes\n")
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(tree, "kubelet.log")); err != nil {
		t.Fatal(err)
	}
	h, err := New(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.Files = map[string]string{
		"/var/log/cloud-init-output.log": filepath.Join(tree, "cloud-init-output.log"),
		"/var/log/kubelet.log":           filepath.Join(tree, "kubelet.log"),
	}
	b, err := h.ReadFile("/var/log/../log/cloud-init-output.log")
	if err != nil || string(b) != "kubeadm join failed\n" {
		t.Errorf("mapped file: %q %v", b, err)
	}
	if ok, err := h.Exists("/var/log/cloud-init-output.log"); !ok || err != nil {
		t.Errorf("Exists of a mapped file: %v %v", ok, err)
	}
	// A symlink in the tree is never followed out of it.
	_, err = h.ReadFile("/var/log/kubelet.log")
	if err == nil || !(errors.Is(err, ErrNotRegular) || errors.Is(err, syscall.ELOOP)) {
		t.Errorf("a mapped symlink was read: err %v", err)
	}
	// Unmapped paths stay inside the root.
	if _, err := h.ReadFile("/var/log/syslog"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("unmapped path: %v", err)
	}
}

func TestRecorded(t *testing.T) {
	r := Recorded{RecordedKey("/usr/bin/kubelet", "--version"): {Stdout: []byte("Kubernetes v1.33.1\n")}}
	out, err := r.Run(context.Background(), Cmd{Path: "/usr/bin/kubelet", Args: []string{"--version"}})
	if err != nil || string(out.Stdout) != "Kubernetes v1.33.1\n" {
		t.Errorf("recorded: %q %v", out.Stdout, err)
	}
	if _, err := r.Run(context.Background(), Cmd{Path: "/usr/bin/kubeadm", Args: []string{"version", "-o", "short"}}); !errors.Is(err, ErrExecDisabled) {
		t.Errorf("not recorded: %v, want ErrExecDisabled", err)
	}
}
