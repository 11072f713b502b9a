package testenv

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

// The generated configuration is valid TOML and says what the options say.
func TestContainerdConfig(t *testing.T) {
	tests := []struct {
		name string
		opts ContainerdOptions
		want []string // lines (trimmed) the file must hold
		not  []string // substrings it must not hold
	}{
		{
			name: "defaults",
			want: []string{
				`version = 2`, `root = "/d/root"`, `state = "/d/state"`,
				`address = "/d/containerd.sock"`, `address = "/d/containerd.sock.ttrpc"`,
				`sandbox_image = "registry.k8s.io/pause:3.9"`, `snapshotter = "overlayfs"`,
				`conf_dir = "/d/cni"`, `[plugins."io.containerd.grpc.v1.cri".registry]`,
			},
			not: []string{"disabled_plugins", "config_path", "mirrors"},
		},
		{
			name: "CRI disabled, registry options, extra table",
			opts: ContainerdOptions{
				DisabledPlugins:    []string{"io.containerd.grpc.v1.cri"},
				SandboxImage:       "127.0.0.1:5000/pause:3.10",
				RegistryConfigPath: "/etc/containerd/certs.d",
				Mirrors: map[string][]string{
					"docker.io":      {"https://mirror.example"},
					"127.0.0.1:5001": {"://127.0.0.1:5000", `quote"back\slash`},
				},
				Extra: "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n  SystemdCgroup = true",
			},
			want: []string{
				`disabled_plugins = ["io.containerd.grpc.v1.cri"]`,
				`sandbox_image = "127.0.0.1:5000/pause:3.10"`,
				`config_path = "/etc/containerd/certs.d"`,
				`[plugins."io.containerd.grpc.v1.cri".registry.mirrors."127.0.0.1:5001"]`,
				`endpoint = ["://127.0.0.1:5000", "quote\"back\\slash"]`,
				`[plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]`,
				`SystemdCgroup = true`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := containerdConfig("/d", "/d/containerd.sock", "/d/cni", tt.opts)
			var v map[string]any
			if err := toml.Unmarshal([]byte(got), &v); err != nil {
				t.Fatalf("not TOML: %v\n%s", err, got)
			}
			lines := map[string]bool{}
			for _, l := range strings.Split(got, "\n") {
				lines[strings.TrimSpace(l)] = true
			}
			for _, w := range tt.want {
				if !lines[w] {
					t.Errorf("no line %s in\n%s", w, got)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(got, n) {
					t.Errorf("%q in\n%s", n, got)
				}
			}
		})
	}
	// Mirrors come out in name order, whatever the map's order.
	got := containerdConfig("/d", "/s", "/c", ContainerdOptions{Mirrors: map[string][]string{"b": nil, "a": nil}})
	if strings.Index(got, `mirrors."a"`) > strings.Index(got, `mirrors."b"`) {
		t.Errorf("mirrors out of order:\n%s", got)
	}
}

// A daemon starts, imports images, and stops without leaving anything on
// the machine: its socket goes, /run/containerd stays as it was.
func TestStartContainerd(t *testing.T) {
	before, beforeErr := os.Stat("/run/containerd")
	c := StartContainerd(t, ContainerdOptions{})
	if !strings.HasPrefix(c.Dir, os.TempDir()) || len(c.Socket) > 107 {
		t.Errorf("dir %s socket %s: want a short directory under %s", c.Dir, c.Socket, os.TempDir())
	}
	c.Import(t, Image{Ref: "registry.k8s.io/pause:3.9"}, Image{Ref: "example.invalid/nodediag/x:1"})
	out := c.Ctr(t, "images", "ls", "-q")
	for _, want := range []string{"registry.k8s.io/pause:3.9", "example.invalid/nodediag/x:1"} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("ctr images ls lacks %s:\n%s", want, out)
		}
	}
	if !strings.Contains(c.Log(), `msg="containerd successfully booted`) {
		t.Errorf("log lacks the boot line:\n%s", c.Log())
	}
	c.Stop()
	if _, err := os.Stat(c.Socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket after Stop: %v", err)
	}
	if err := syscall.Kill(c.PID, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("PID %d after Stop: %v", c.PID, err)
	}
	c.Stop() // a second Stop does nothing
	after, afterErr := os.Stat("/run/containerd")
	if (beforeErr == nil) != (afterErr == nil) || (before != nil && after != nil && before.ModTime() != after.ModTime()) {
		t.Errorf("/run/containerd changed on the machine: before %v %v, after %v %v", before, beforeErr, after, afterErr)
	}
}

// Kill leaves the socket file, which then refuses connections.
func TestContainerdKill(t *testing.T) {
	// A socket outside the daemon's directory, as on a node.
	sockDir, err := os.MkdirTemp("", "ctdsock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	c := StartContainerd(t, ContainerdOptions{Socket: filepath.Join(sockDir, "run/containerd/containerd.sock")})
	c.Kill()
	fi, err := os.Stat(c.Socket)
	if err != nil || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("socket after Kill: %v %v", fi, err)
	}
	_, err = net.Dial("unix", c.Socket)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial after Kill: %v, want ECONNREFUSED", err)
	}
}
