package probes

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/testing/protocmp"
	criv1 "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/host/hosttest"
	"github.com/nodediag/nodediag/agent/probe"
	"github.com/nodediag/nodediag/internal/testenv"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// runProbe runs the runtime probe on the machine's own root ("/", a live
// host) against socket, given as $CONTAINERD_ADDRESS.
func runRuntimeProbe(t *testing.T, socket string) (*nodediagv1.Runtime, *nodediagv1.ProbeEvidence) {
	t.Helper()
	h, err := host.New("/", nil)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Require(t, h.Live(), "/ is not a live root here (no procfs at /proc)")
	t.Setenv(runtimeAddressEnv, socket)
	start := time.Now()
	pe, err := runtimeProbe{}.Run(context.Background(), h)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	rt := pe.GetRuntime()
	t.Logf("probe took %v: state=%s error=%q", time.Since(start).Round(time.Millisecond), rt.GetState(), rt.GetError())
	if rt.GetSocket() != socket || rt.GetSocketFrom() != "env" {
		t.Errorf("socket = %q from %q, want %q from env", rt.GetSocket(), rt.GetSocketFrom(), socket)
	}
	return rt, pe
}

// The probe against the real containerd (Debian's 1.6.20): a healthy
// daemon, its CRI plugin disabled or failing to load, and the daemon gone.
func TestRuntimeProbeContainerd(t *testing.T) {
	tests := []struct {
		name  string
		opts  testenv.ContainerdOptions
		setup func(t *testing.T, c *testenv.Containerd)
		// want is compared with the probe's Runtime, error excepted.
		want *nodediagv1.Runtime
		// wantError is a substring of Runtime.error; wantLog one of
		// containerd's own log.
		wantError, wantLog string
	}{
		{
			name: "healthy, no CNI config, images imported",
			setup: func(t *testing.T, c *testenv.Containerd) {
				c.Import(t,
					testenv.Image{Ref: "registry.k8s.io/pause:3.9"},
					testenv.Image{Ref: "registry.k8s.io/kube-apiserver:v1.30.0"},
					testenv.Image{Ref: "127.0.0.1:5000/dkp/kube-proxy:v1.30.0"},
				)
			},
			want: &nodediagv1.Runtime{
				State: "ok", RuntimeName: "containerd", RuntimeVersion: "1.6.20~ds1", RuntimeApiVersion: "v1",
				Conditions: []*nodediagv1.RuntimeCondition{
					{Type: "RuntimeReady", Status: true},
					{Type: "NetworkReady", Status: false, Reason: "NetworkPluginNotReady", Message: "Network plugin returns error: cni plugin not initialized"},
				},
				Images: []*nodediagv1.RuntimeImage{
					{Tags: []string{"127.0.0.1:5000/dkp/kube-proxy:v1.30.0"}},
					{Tags: []string{"registry.k8s.io/kube-apiserver:v1.30.0"}},
					{Tags: []string{"registry.k8s.io/pause:3.9"}},
				},
			},
		},
		{
			name:      "CRI disabled",
			opts:      testenv.ContainerdOptions{DisabledPlugins: []string{"io.containerd.grpc.v1.cri"}},
			want:      &nodediagv1.Runtime{State: "no-cri"},
			wantError: "rpc error: code = Unimplemented desc = unknown service runtime.v1.RuntimeService",
		},
		{
			name: "config_path with registry.mirrors: CRI fails to load",
			opts: testenv.ContainerdOptions{
				RegistryConfigPath: "/etc/containerd/certs.d",
				Mirrors:            map[string][]string{"127.0.0.1:5001": {"http://127.0.0.1:5000"}},
			},
			want:      &nodediagv1.Runtime{State: "no-cri"},
			wantError: "unknown service runtime.v1.RuntimeService",
			wantLog:   "level=warning msg=\"failed to load plugin io.containerd.grpc.v1.cri\" error=\"invalid plugin config: `mirrors` cannot be set when `config_path` is provided\"",
		},
		{
			name:      "stopped: containerd removed its socket",
			setup:     func(t *testing.T, c *testenv.Containerd) { c.Stop() },
			want:      &nodediagv1.Runtime{State: "absent"},
			wantError: "no socket at ",
		},
		{
			name:      "killed: a stale socket nobody listens on",
			setup:     func(t *testing.T, c *testenv.Containerd) { c.Kill() },
			want:      &nodediagv1.Runtime{State: "refused"},
			wantError: "connection refused",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testenv.StartContainerd(t, tt.opts)
			if tt.setup != nil {
				tt.setup(t, c)
			}
			rt, pe := runRuntimeProbe(t, c.Socket)
			if len(pe.GetUnreadable()) > 0 {
				t.Errorf("unreadable: %v", pe.GetUnreadable())
			}
			if !strings.Contains(rt.GetError(), tt.wantError) {
				t.Errorf("error = %q, want it to contain %q", rt.GetError(), tt.wantError)
			}
			if tt.want.State == "ok" && rt.GetError() != "" {
				t.Errorf("error = %q, want none", rt.GetError())
			}
			want := tt.want
			want.Socket, want.SocketFrom = c.Socket, "env"
			// Image IDs, digests and sizes are the builds'; the tags say
			// which image is which.
			ignore := protocmp.IgnoreFields(&nodediagv1.RuntimeImage{}, "id", "digests", "size")
			if diff := cmp.Diff(want, rt, protocmp.Transform(), ignore, protocmp.IgnoreFields(&nodediagv1.Runtime{}, "error")); diff != "" {
				t.Errorf("runtime (-want +got):\n%s", diff)
			}
			// Imported images have no repo digest: none came from a registry.
			for _, im := range rt.GetImages() {
				if !strings.HasPrefix(im.GetId(), "sha256:") || im.GetSize() == 0 {
					t.Errorf("image %v: want an ID and a size", im)
				}
			}
			if tt.wantLog != "" && !strings.Contains(c.Log(), tt.wantLog) {
				t.Errorf("containerd's log lacks %q:\n%s", tt.wantLog, c.Log())
			}
		})
	}
}

// Sockets that are not a runtime: a file that is no socket, a socket that
// accepts and never answers (bounded by the call timeout), one that refuses.
func TestRuntimeProbeBadSockets(t *testing.T) {
	dir, err := os.MkdirTemp("", "rtp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })

	hung := filepath.Join(dir, "hung.sock")
	l, err := net.Listen("unix", hung)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		var held []net.Conn // never read, never answered
		for {
			c, err := l.Accept()
			if err != nil {
				for _, c := range held {
					c.Close()
				}
				return
			}
			held = append(held, c)
		}
	}()

	// A server that is not gRPC: it answers anything with an HTTP/1 error.
	garbage := filepath.Join(dir, "garbage.sock")
	gl, err := net.Listen("unix", garbage)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gl.Close() })
	go func() {
		for {
			c, err := gl.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"))
			c.Close()
		}
	}()

	stale := filepath.Join(dir, "stale.sock")
	sl, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	sl.SetUnlinkOnClose(false)
	sl.Close()

	regular := filepath.Join(dir, "file.sock")
	if err := os.WriteFile(regular, nil, 0o644); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name, socket, state, err string
	}{
		{"accepts and never answers", hung, "timeout", "code = DeadlineExceeded"},
		{"answers garbage", garbage, "error", "code = Unavailable"},
		{"stale socket", stale, "refused", "dial unix " + stale + ": connection refused"},
		{"not a socket", regular, "error", regular + " is not a socket but a regular file"},
		{"absent", filepath.Join(dir, "none.sock"), "absent", "no socket at " + filepath.Join(dir, "none.sock")},
		{"relative", "run/containerd/containerd.sock", "error", "not an absolute path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt, _ := runRuntimeProbe(t, tt.socket)
			if rt.GetState() != tt.state || !strings.Contains(rt.GetError(), tt.err) {
				t.Errorf("state %q error %q, want %q with %q", rt.GetState(), rt.GetError(), tt.state, tt.err)
			}
			if rt.GetRuntimeVersion() != "" || len(rt.GetImages()) > 0 {
				t.Errorf("a runtime that did not answer has data: %v", rt)
			}
		})
	}
}

// liveTree is a host tree that passes for a running node: a procfs mounted
// at its /proc (unmounted at the end). Its root is short, for sockets.
func liveTree(t *testing.T, files map[string]string) *host.Host {
	t.Helper()
	testenv.RequireRoot(t, "mounting a procfs into a test tree")
	root, err := os.MkdirTemp("", "rtroot")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	files["proc/"] = ""
	hosttest.Write(t, root, files)
	procDir := filepath.Join(root, "proc")
	if err := unix.Mount("proc", procDir, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		t.Fatalf("mount proc on %s: %v", procDir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(procDir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", procDir, err)
		}
	})
	h, err := host.New(root, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !h.Live() {
		t.Fatal("a tree with a procfs at /proc is not live")
	}
	return h
}

// The socket is a host path resolved inside the root; it comes from the
// environment, else containerd's configuration, else the default.
func TestRuntimeProbeSocketChoice(t *testing.T) {
	tests := []struct {
		name       string
		files      map[string]string
		env        string
		socket     string // host path of a stale socket to create
		wantSocket string
		wantFrom   string
		wantState  string
	}{
		{
			name:       "default, nothing there",
			files:      map[string]string{"etc/": ""},
			wantSocket: "/run/containerd/containerd.sock", wantFrom: "default", wantState: "absent",
		},
		{
			name:       "default through the /var/run symlink",
			files:      map[string]string{"var/run": "->/run", "run/containerd/": ""},
			socket:     "/var/run/containerd/containerd.sock",
			wantSocket: "/run/containerd/containerd.sock", wantFrom: "default", wantState: "refused",
		},
		{
			name: "config [grpc] address",
			files: map[string]string{
				"etc/containerd/config.toml": "version = 2\n[grpc]\n  address = \"/run/k8s/containerd.sock\"\n",
			},
			socket:     "/run/k8s/containerd.sock",
			wantSocket: "/run/k8s/containerd.sock", wantFrom: "config", wantState: "refused",
		},
		{
			name:       "env wins, as a host path",
			files:      map[string]string{"etc/containerd/config.toml": "version = 2\n[grpc]\n  address = \"/run/k8s/containerd.sock\"\n"},
			env:        "unix:///run/other.sock",
			socket:     "/run/other.sock",
			wantSocket: "/run/other.sock", wantFrom: "env", wantState: "refused",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := liveTree(t, tt.files)
			if tt.socket != "" {
				p, err := h.Path(tt.socket)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				l, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
				if err != nil {
					t.Fatal(err)
				}
				l.SetUnlinkOnClose(false)
				l.Close()
			}
			t.Setenv(runtimeAddressEnv, tt.env)
			pe, err := runtimeProbe{}.Run(context.Background(), h)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			rt := pe.GetRuntime()
			if rt.GetSocket() != tt.wantSocket || rt.GetSocketFrom() != tt.wantFrom || rt.GetState() != tt.wantState {
				t.Errorf("socket %q from %q state %q (%s), want %q from %q state %q",
					rt.GetSocket(), rt.GetSocketFrom(), rt.GetState(), rt.GetError(), tt.wantSocket, tt.wantFrom, tt.wantState)
			}
		})
	}
}

// A copy of a host is not asked: its socket file is not the node's runtime.
func TestRuntimeProbeCopyOfHost(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{"run/containerd/": ""})
	_, err := runtimeProbe{}.Run(context.Background(), h)
	if !errors.Is(err, probe.ErrNotApplicable) {
		t.Fatalf("err = %v, want ErrNotApplicable", err)
	}
}

// Containers through the CRI, as the kubelet runs a static pod: a host
// network sandbox and a container that exits with status 3 on its fourth
// attempt. The test creates them; the probe only reads.
func TestRuntimeProbeContainers(t *testing.T) {
	c := testenv.StartContainerd(t, testenv.ContainerdOptions{})
	c.Import(t,
		testenv.BusyboxImage(t, testenv.DefaultSandboxImage, "/bin/busybox", "sleep", "3600"),
		testenv.BusyboxImage(t, "registry.k8s.io/etcd:3.5.12-0", "/bin/busybox", "sh", "-c", "echo member has already been bootstrapped >&2; exit 3"),
	)
	conn, err := testenv.DialUnix(c.Socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	rs, is := criv1.NewRuntimeServiceClient(conn), criv1.NewImageServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// The cgroups runc creates for the pod go under a parent of the test's
	// own, removed at the end.
	cgroupParent := "/nodediag-test-" + filepath.Base(c.Dir)
	t.Cleanup(func() { removeCgroups(t, cgroupParent) })

	logDir := filepath.Join(c.Dir, "pods")
	sandboxConfig := &criv1.PodSandboxConfig{
		Metadata:     &criv1.PodSandboxMetadata{Name: "etcd-node-1", Namespace: "kube-system", Uid: "0123456789abcdef", Attempt: 0},
		LogDirectory: logDir,
		Labels:       map[string]string{runtimeLabelPodName: "etcd-node-1", runtimeLabelPodNamespace: "kube-system"},
		Linux: &criv1.LinuxPodSandboxConfig{
			CgroupParent: cgroupParent,
			SecurityContext: &criv1.LinuxSandboxSecurityContext{
				NamespaceOptions: &criv1.NamespaceOption{Network: criv1.NamespaceMode_NODE},
			},
		},
	}
	sb, err := rs.RunPodSandbox(ctx, &criv1.RunPodSandboxRequest{Config: sandboxConfig})
	if err != nil {
		t.Fatalf("RunPodSandbox: %v\n%s", err, c.Log())
	}
	t.Cleanup(func() {
		// A clean stop and removal, so that runc deletes the pod's cgroups.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := rs.StopPodSandbox(ctx, &criv1.StopPodSandboxRequest{PodSandboxId: sb.GetPodSandboxId()}); err != nil {
			t.Errorf("StopPodSandbox: %v", err)
		}
		if _, err := rs.RemovePodSandbox(ctx, &criv1.RemovePodSandboxRequest{PodSandboxId: sb.GetPodSandboxId()}); err != nil {
			t.Errorf("RemovePodSandbox: %v", err)
		}
	})
	// The kubelet asks for the image by its ID.
	img, err := is.ImageStatus(ctx, &criv1.ImageStatusRequest{Image: &criv1.ImageSpec{Image: "registry.k8s.io/etcd:3.5.12-0"}})
	if err != nil || img.GetImage() == nil {
		t.Fatalf("ImageStatus: %v %v", img, err)
	}
	created, err := rs.CreateContainer(ctx, &criv1.CreateContainerRequest{
		PodSandboxId: sb.GetPodSandboxId(),
		Config: &criv1.ContainerConfig{
			Metadata: &criv1.ContainerMetadata{Name: "etcd", Attempt: 3},
			Image:    &criv1.ImageSpec{Image: img.GetImage().GetId()},
			LogPath:  "etcd/3.log",
			Labels:   map[string]string{runtimeLabelPodName: "etcd-node-1", runtimeLabelPodNamespace: "kube-system"},
		},
		SandboxConfig: sandboxConfig,
	})
	if err != nil {
		t.Fatalf("CreateContainer: %v\n%s", err, c.Log())
	}
	id := created.GetContainerId()
	if _, err := rs.StartContainer(ctx, &criv1.StartContainerRequest{ContainerId: id}); err != nil {
		t.Fatalf("StartContainer: %v\n%s", err, c.Log())
	}
	for {
		st, err := rs.ContainerStatus(ctx, &criv1.ContainerStatusRequest{ContainerId: id})
		if err != nil {
			t.Fatalf("ContainerStatus: %v", err)
		}
		if st.GetStatus().GetState() == criv1.ContainerState_CONTAINER_EXITED {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("container %s did not exit: %v", id, st.GetStatus())
		}
		time.Sleep(20 * time.Millisecond)
	}

	rt, pe := runRuntimeProbe(t, c.Socket)
	if len(pe.GetUnreadable()) > 0 {
		t.Errorf("unreadable: %v", pe.GetUnreadable())
	}
	var got *nodediagv1.RuntimeContainer
	for _, rc := range rt.GetContainers() {
		if rc.GetId() == id {
			got = rc
		}
	}
	if got == nil {
		t.Fatalf("container %s not listed: %v", id, rt.GetContainers())
	}
	// Both times are set. Their order is not checked: containerd stamps
	// started_at when its Start call returns, which for a process that exits
	// at once comes after the exit's own time stamp (seen here: 0.6 ms).
	if got.GetStartedAt() == nil || got.GetFinishedAt() == nil {
		t.Errorf("started %v finished %v: want both", got.GetStartedAt(), got.GetFinishedAt())
	}
	want := &nodediagv1.RuntimeContainer{
		Id: id, Name: "etcd", PodNamespace: "kube-system", PodName: "etcd-node-1",
		Image: "registry.k8s.io/etcd:3.5.12-0", State: "exited", Attempt: 3, ExitCode: 3, Reason: "Error",
	}
	if diff := cmp.Diff(want, got, protocmp.Transform(), protocmp.IgnoreFields(&nodediagv1.RuntimeContainer{}, "started_at", "finished_at")); diff != "" {
		t.Errorf("container (-want +got):\n%s", diff)
	}
	// What the container wrote went to the log the kubelet would read.
	if b, err := os.ReadFile(filepath.Join(logDir, "etcd/3.log")); err != nil || !strings.Contains(string(b), "member has already been bootstrapped") {
		t.Errorf("container log: %q %v", b, err)
	}
}

// removeCgroups removes the cgroup directories under parent in every
// hierarchy, deepest first (runc removes a container's own on deletion;
// the parents it created stay).
func removeCgroups(t *testing.T, parent string) {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*")
	roots = append(roots, "/sys/fs/cgroup")
	for _, r := range roots {
		top := filepath.Join(r, parent)
		var dirs []string
		filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := os.Remove(dirs[i]); err != nil {
				t.Errorf("removing cgroup %s: %v", dirs[i], err)
			}
		}
	}
}
