package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// ContainerdOptions shape the configuration StartContainerd writes. The zero
// value is a daemon with the CRI plugin, the pause image
// registry.k8s.io/pause:3.9, an empty CNI conf dir (so the CRI reports
// NetworkReady=false) and no registry configuration.
type ContainerdOptions struct {
	// DisabledPlugins is the top-level disabled_plugins ("cri").
	DisabledPlugins []string
	// SandboxImage is the CRI plugin's sandbox_image; registry.k8s.io/pause:3.9 when empty.
	SandboxImage string
	// CNIConfDir is the CRI plugin's cni conf_dir; DIR/cni (created empty) when empty.
	CNIConfDir string
	// RegistryConfigPath is the CRI registry's config_path (a certs.d
	// directory of <registry>/hosts.toml); not written when empty.
	RegistryConfigPath string
	// Mirrors is the deprecated CRI registry.mirrors: registry name →
	// endpoints, written as given (tables in name order). Together with
	// RegistryConfigPath it stops the CRI plugin from loading, as it does on
	// a node.
	Mirrors map[string][]string
	// Extra is TOML appended to the generated file: tables the generated
	// part does not already open, such as
	// [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options].
	Extra string
	// Socket is where the daemon serves ([grpc] address; the ttrpc socket is
	// Socket+".ttrpc"); DIR/containerd.sock when empty. A unix socket path
	// is at most 107 bytes. Its directory is created if needed; the socket
	// files are removed when the test ends.
	Socket string
}

// Containerd is a containerd (Debian's 1.6, run as root) started for a
// test by StartContainerd.
type Containerd struct {
	// Dir is the daemon's private directory (root, state, CNI conf dir,
	// the config file and the log); it is removed when the test ends.
	Dir string
	// Socket is the gRPC socket (containerd's own API and the CRI).
	Socket string
	// ConfigFile is the config.toml the daemon was started with, and Config its text.
	ConfigFile, Config string
	// CNIConfDir is the CRI plugin's CNI conf dir.
	CNIConfDir string
	// LogFile receives the daemon's standard output and error: logrus text
	// lines (time="..." level=... msg="...").
	LogFile string
	// PID is the daemon's process ID.
	PID int

	stopOnce sync.Once
	done     chan struct{}
}

// containerdReadyTimeout bounds the start: containerd 1.6 answers in well
// under a second here (REPORT.md section 3a).
const containerdReadyTimeout = 20 * time.Second

// DefaultSandboxImage is the pause image the generated configuration names.
const DefaultSandboxImage = "registry.k8s.io/pause:3.9"

// StartContainerd runs the real containerd as root on a fresh directory
// (os.MkdirTemp("", "ctd"): short, so that the socket path stays within the
// 108 bytes of a unix socket address), with a version 2 configuration built
// from opts, and returns when the socket answers a gRPC health check. It
// fails the test (CI=true) or skips it when root, containerd, ctr, runc or
// mount are missing.
//
// The daemon runs in its own mount and PID namespaces (clone flags of the
// child, as unshare(1) would set them):
// containerd 1.6 keeps shim sockets and runc state in the fixed directories
// /run/containerd/{s,runc,fifo}, so the namespace gets a /run of its own (a
// tmpfs into which every entry of the machine's /run but containerd is
// bound back). Nothing the daemon does under /run/containerd reaches the
// machine, a containerd of the machine is not disturbed, and when the
// daemon exits the kernel ends every shim and container it started.
//
// The daemon is stopped (SIGTERM, SIGKILL after 10 s) and its directory
// removed when the test ends; Stop (clean shutdown, socket removed) or Kill
// (a crash: the socket stays) end it earlier.
func StartContainerd(t testing.TB, opts ContainerdOptions) *Containerd {
	t.Helper()
	RequireRoot(t, "containerd runs as root")
	bin := RequireBinary(t, "containerd", "containerd")
	RequireBinary(t, "runc", "runc")
	RequireBinary(t, "ctr", "containerd")
	RequireBinary(t, "mount", "mount")

	dir, err := os.MkdirTemp("", "ctd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("removing %s: %v", dir, err)
		}
		// A socket placed elsewhere (opts.Socket), left by Kill.
		if opts.Socket != "" {
			os.Remove(opts.Socket)
			os.Remove(opts.Socket + ".ttrpc")
		}
	})
	c := &Containerd{
		Dir:        dir,
		Socket:     opts.Socket,
		ConfigFile: filepath.Join(dir, "config.toml"),
		CNIConfDir: opts.CNIConfDir,
		LogFile:    filepath.Join(dir, "containerd.log"),
		done:       make(chan struct{}),
	}
	if c.Socket == "" {
		c.Socket = filepath.Join(dir, "containerd.sock")
	}
	if len(c.Socket) > 107 {
		t.Fatalf("socket path %s is %d bytes: a unix socket address holds at most 107", c.Socket, len(c.Socket))
	}
	if c.CNIConfDir == "" {
		c.CNIConfDir = filepath.Join(dir, "cni")
	}
	for _, d := range []string{"root", "state", "opt", "hostrun", c.CNIConfDir, filepath.Dir(c.Socket)} {
		p := d
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, d)
		}
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c.Config = containerdConfig(dir, c.Socket, c.CNIConfDir, opts)
	if err := os.WriteFile(c.ConfigFile, []byte(c.Config), 0o644); err != nil {
		t.Fatal(err)
	}
	logf, err := os.OpenFile(c.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close() // the child holds its own descriptor

	// "$1" is the directory, "$2" the binary, the rest its arguments.
	cmd := exec.Command("/bin/sh", "-c", containerdNamespaceScript, "sh", dir, bin, "--config", c.ConfigFile)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:    true,
		Cloneflags: syscall.CLONE_NEWPID,
		// With CLONE_NEWNS in Unshareflags, Go also makes every mount of
		// the new namespace private, so nothing propagates back.
		Unshareflags: syscall.CLONE_NEWNS,
		// If the test binary dies (a -timeout panic), the daemon's PID
		// namespace, shims and containers included, dies with it.
		Pdeathsig: syscall.SIGKILL,
	}
	// Pdeathsig fires when the thread that started the child exits: keep
	// it from being one Go is about to retire.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting containerd in its own namespaces: %v", err)
	}
	c.PID = cmd.Process.Pid
	go func() { cmd.Wait(); close(c.done) }()
	t.Cleanup(c.Stop)

	deadline := time.Now().Add(containerdReadyTimeout)
	for {
		err := containerdHealthy(c.Socket)
		if err == nil {
			return c
		}
		select {
		case <-c.done:
			t.Fatalf("containerd exited before serving (%v); its log:\n%s", cmd.ProcessState, c.Log())
		default:
		}
		if time.Now().After(deadline) {
			c.Stop()
			t.Fatalf("containerd not serving %s after %v: %v; its log:\n%s", c.Socket, containerdReadyTimeout, err, c.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// containerdNamespaceScript runs as PID 1 of the daemon's namespaces: it
// mounts the procfs of the new PID namespace (runc reads /proc/<pid> of the
// processes it starts), gives the namespace a /run of its own holding the
// machine's /run entries except containerd, then becomes containerd.
const containerdNamespaceScript = `set -e
d=$1; shift
mount -t proc -o nosuid,nodev,noexec proc /proc
mount --rbind /run "$d/hostrun"
mount -t tmpfs -o mode=0755 nodediag-run /run
for e in "$d"/hostrun/* "$d"/hostrun/.[!.]*; do
  n=${e##*/}
  if [ "$n" = containerd ] || { [ ! -e "$e" ] && [ ! -L "$e" ]; }; then continue; fi
  if [ -L "$e" ]; then ln -s "$(readlink "$e")" "/run/$n"
  elif [ -d "$e" ]; then mkdir -p "/run/$n" && mount --rbind "$e" "/run/$n"
  else : > "/run/$n" && mount --bind "$e" "/run/$n"
  fi
done
exec "$@"
`

// containerdHealthy asks the daemon's gRPC health service.
func containerdHealthy(socket string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	conn, err := DialUnix(socket)
	if err != nil {
		return err
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return err
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("health: %s", resp.GetStatus())
	}
	return nil
}

// DialUnix returns a gRPC client connection to a unix socket (containerd's
// API, the CRI). The connection is made lazily by the first call.
func DialUnix(socket string) (*grpc.ClientConn, error) {
	return grpc.NewClient("passthrough:///"+socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		}))
}

// Stop stops the daemon and waits until it and everything it started have
// exited; containerd removes its socket as it shuts down. It may be called
// more than once, and after Kill.
func (c *Containerd) Stop() { c.stop(syscall.SIGTERM) }

// Kill kills the daemon (SIGKILL) and waits until it and everything it
// started have exited, leaving its socket file behind as a crash does: a
// stale socket that refuses connections.
func (c *Containerd) Kill() { c.stop(syscall.SIGKILL) }

func (c *Containerd) stop(sig syscall.Signal) {
	c.stopOnce.Do(func() {
		select {
		case <-c.done:
			return
		default:
		}
		// PID 1 of its namespace: only the signals it handles (and
		// SIGKILL) reach it; containerd shuts down cleanly on SIGTERM.
		syscall.Kill(c.PID, sig)
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			syscall.Kill(c.PID, syscall.SIGKILL)
			<-c.done
		}
	})
}

// Log returns what the daemon has logged so far.
func (c *Containerd) Log() string {
	b, err := os.ReadFile(c.LogFile)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", c.LogFile, err)
	}
	return string(b)
}

// Ctr runs `ctr -a SOCKET -n k8s.io ARGS...` (the CRI's namespace) and
// returns its standard output; a failure fails the test. ctr runs outside
// the daemon's namespace: `ctr run` needs --fifo-dir under c.Dir (its
// default, /run/containerd/fifo, is the machine's, which the daemon does
// not see).
func (c *Containerd) Ctr(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"-a", c.Socket, "-n", "k8s.io"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ctr %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// containerdConfig is the version 2 config.toml for a daemon in dir.
func containerdConfig(dir, socket, cniConfDir string, o ContainerdOptions) string {
	sandbox := o.SandboxImage
	if sandbox == "" {
		sandbox = DefaultSandboxImage
	}
	var b strings.Builder
	fmt.Fprintf(&b, "version = 2\nroot = %s\nstate = %s\n", tomlString(filepath.Join(dir, "root")), tomlString(filepath.Join(dir, "state")))
	if len(o.DisabledPlugins) > 0 {
		fmt.Fprintf(&b, "disabled_plugins = %s\n", tomlStrings(o.DisabledPlugins))
	}
	fmt.Fprintf(&b, "\n[grpc]\n  address = %s\n[ttrpc]\n  address = %s\n[debug]\n  level = \"info\"\n", tomlString(socket), tomlString(socket+".ttrpc"))
	fmt.Fprintf(&b, "[plugins.\"io.containerd.internal.v1.opt\"]\n  path = %s\n", tomlString(filepath.Join(dir, "opt")))
	const cri = `plugins."io.containerd.grpc.v1.cri"`
	// restrict_oom_score_adj: runc would set the pause container's
	// oom_score_adj to -998, which needs CAP_SYS_RESOURCE; root lacks it on
	// some CI machines (Firecracker VMs), and runc then fails with "can't
	// get final child's PID from pipe: EOF".
	fmt.Fprintf(&b, "[%s]\n  sandbox_image = %s\n  restrict_oom_score_adj = true\n", cri, tomlString(sandbox))
	fmt.Fprintf(&b, "  [%s.containerd]\n    snapshotter = \"overlayfs\"\n", cri)
	fmt.Fprintf(&b, "  [%s.cni]\n    bin_dir = \"/usr/lib/cni\"\n    conf_dir = %s\n", cri, tomlString(cniConfDir))
	fmt.Fprintf(&b, "  [%s.registry]\n", cri)
	if o.RegistryConfigPath != "" {
		fmt.Fprintf(&b, "    config_path = %s\n", tomlString(o.RegistryConfigPath))
	}
	names := make([]string, 0, len(o.Mirrors))
	for name := range o.Mirrors {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(&b, "    [%s.registry.mirrors.%s]\n      endpoint = %s\n", cri, tomlString(name), tomlStrings(o.Mirrors[name]))
	}
	if o.Extra != "" {
		b.WriteString("\n" + o.Extra + "\n")
	}
	return b.String()
}

// tomlString writes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\u%04X", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func tomlStrings(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = tomlString(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
