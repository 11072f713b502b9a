// Package nodesim runs a node simulator for tests: a real systemd manager
// (systemd --user: the same binary and the same org.freedesktop.systemd1
// D-Bus API as PID 1) and a real systemd-journald, on a machine whose PID 1
// is not systemd. Units written by the test run under that manager, and its
// bus answers go-systemd exactly as a node's system bus does.
//
// It is the recipe of the feasibility report (shared recipes,
// node-components/sd/start-node-sim.sh and stop-node-sim.sh) in Go:
//
//   - a private mount namespace (unshare --mount --propagation private) with
//     a tmpfs on /run/systemd holding /run/systemd/system, which makes
//     sd_booted() true inside the namespace only; tmpfs mounts over the host
//     paths a kubelet would write (/var/lib, /var/log, /usr/libexec), so that
//     nothing a unit does reaches the machine;
//   - systemd-journald writing to Dir/journal through a bind mount on
//     /run/log/journal, with a journald.conf of its own (bound over
//     /etc/systemd/journald.conf) that leaves out the kernel's messages;
//   - systemd --user with XDG_RUNTIME_DIR=Dir/rt and XDG_CONFIG_HOME=Dir/cfg
//     (unit files in Dir/cfg/systemd/user); its dbus.socket (the
//     dbus-user-session package) listens on Dir/rt/bus and socket-activates
//     dbus-daemon.
//
// journald learns the unit of a line (_SYSTEMD_UNIT) from the writer's
// cgroup in /proc when it reads the line: a process that exits right after
// writing (echo, a kubelet refusing a flag) may be gone by then, on a busy
// machine, and its line has no _SYSTEMD_UNIT. A test that filters by unit
// keeps the writer alive until its lines are in the journal.
//
// The cgroup hazard: a systemd manager migrates every process of the cgroup
// it starts in into <that cgroup>/init.scope. Started in the root cgroup of
// a machine whose PID 1 is not systemd, it would move PID 1 and every other
// process of the machine. So the launcher first moves itself into its own
// cgroup, nodediag_sim_<unique>.slice (in the name=systemd and unified
// hierarchies on cgroup v1 or hybrid, at the top of /sys/fs/cgroup on pure
// v2), checks that it left the root cgroup, and only then execs the manager.
// The name ends in ".slice" because journald derives _SYSTEMD_UNIT from the
// cgroup path by skipping *.slice components. Start refuses (skips the test)
// when it finds no cgroup hierarchy to isolate the manager in. Cleanup stops
// the manager, kills what is left in the slice by PID, removes the cgroups,
// and fails the test if PID 1's cgroups changed.
package nodesim

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Programs the simulator runs: Debian's paths (systemd 252 on bookworm).
const (
	systemdBin  = "/lib/systemd/systemd"
	journaldBin = "/lib/systemd/systemd-journald"
	// dbus-user-session installs the user manager's dbus.socket; without it
	// the manager has no bus.
	dbusUserSocket = "/usr/lib/systemd/user/dbus.socket"
	dbusDaemonBin  = "/usr/bin/dbus-daemon"
)

// Bounds of the simulator's life cycle. Start takes about 0.3 s and a stop
// about 2 s on the machine of the feasibility report.
const (
	// UpTimeout is how long Start waits for the manager and its bus.
	UpTimeout   = 5 * time.Second
	stopTimeout = 10 * time.Second
	cmdTimeout  = 10 * time.Second
	pollEvery   = 20 * time.Millisecond
)

// cgroupRoot is where the cgroup hierarchies are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// Options says what the simulator runs.
type Options struct {
	// Units are unit files by name ("kubelet.service": "[Service]\n...").
	Units map[string]string
	// Start lists the units started once the manager is up (without
	// waiting for them: a failing unit is a normal case).
	Start []string
}

// Sim is a running simulator. Its methods are for the test goroutine.
type Sim struct {
	// Dir holds everything of the simulator: rt (XDG_RUNTIME_DIR), cfg
	// (XDG_CONFIG_HOME), journal, logs.
	Dir string

	tb      testing.TB
	slice   string   // "nodediag_sim_<unique>.slice"
	cgroups []string // the slice's directory in each hierarchy used
	cmd     *exec.Cmd
	exited  chan struct{} // closed when the manager's process is reaped
	pid1    []byte        // /proc/1/cgroup before the start, to check after
}

// Available says why a simulator cannot run here, or nil when it can.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("needs root (mount namespace, cgroups)")
	}
	for _, name := range []string{"unshare", "systemctl"} {
		if _, err := exec.LookPath(name); err != nil {
			return fmt.Errorf("no %s: %w", name, err)
		}
	}
	for _, p := range []string{systemdBin, journaldBin, dbusDaemonBin, dbusUserSocket} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("no %s (packages systemd, dbus-user-session): %w", p, err)
		}
	}
	if _, _, err := hierarchies(); err != nil {
		return err
	}
	return nil
}

// hierarchies returns the cgroup hierarchies to isolate the manager in
// (their mount points) and the /proc/<pid>/cgroup controller fields that
// must then show the slice: "name=systemd" for the v1 named hierarchy, ""
// for the unified one.
func hierarchies() (mounts, fields []string, err error) {
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil {
		return []string{cgroupRoot}, []string{""}, nil // pure cgroup v2
	}
	if fi, err := os.Stat(filepath.Join(cgroupRoot, "systemd")); err == nil && fi.IsDir() {
		mounts, fields = append(mounts, filepath.Join(cgroupRoot, "systemd")), append(fields, "name=systemd")
	}
	if _, err := os.Stat(filepath.Join(cgroupRoot, "unified", "cgroup.controllers")); err == nil {
		mounts, fields = append(mounts, filepath.Join(cgroupRoot, "unified")), append(fields, "")
	}
	if len(mounts) == 0 {
		return nil, nil, errors.New("no name=systemd or unified cgroup hierarchy to isolate a systemd manager in; refusing to start one in the root cgroup")
	}
	return mounts, fields, nil
}

// inNamespace is run by sh inside the new mount namespace. It moves itself
// into the slice before anything else, refuses to go on if it is still in a
// root cgroup, then sets up the mounts, starts journald and execs the
// manager (same PID: the one Sim.cmd tracks).
const inNamespace = `set -eu
for c in $NODESIM_CGROUPS; do echo $$ > "$c/cgroup.procs"; done
while IFS=: read -r id ctl path; do
  for want in $NODESIM_FIELDS; do
    [ "$want" = "-" ] && want=""
    if [ "$ctl" = "$want" ]; then
      case "$path" in
        /"$NODESIM_SLICE"|/"$NODESIM_SLICE"/*) ;;
        *) echo "nodesim: still in cgroup $path of hierarchy '$ctl': refusing to start a systemd manager" >&2; exit 97 ;;
      esac
    fi
  done
done < /proc/self/cgroup
mount -t tmpfs tmpfs /run/systemd
mkdir -p /run/systemd/system /run/systemd/journal
mkdir -p /run/log
mount -t tmpfs tmpfs /run/log
mkdir -p /run/log/journal
mount --bind "$NODESIM_DIR/journal" /run/log/journal
if [ -f /etc/systemd/journald.conf ]; then mount --bind "$NODESIM_DIR/journald.conf" /etc/systemd/journald.conf; fi
mount -t tmpfs tmpfs /var/lib
mkdir -p /var/lib/kubelet
mount -t tmpfs tmpfs /var/log
mkdir -p /var/log/pods /var/log/containers
mount -t tmpfs tmpfs /usr/libexec
` + journaldBin + ` >"$NODESIM_DIR/journald.log" 2>&1 &
i=0
while [ $i -lt 90 ] && [ ! -S /run/systemd/journal/stdout ]; do sleep 0.05; i=$((i+1)); done
if [ ! -S /run/systemd/journal/stdout ]; then echo "nodesim: journald has no stdout socket after 4.5 s" >&2; exit 98; fi
echo "nodesim: journald up after $i polls" >&2
exec ` + systemdBin + ` --user
`

// Start runs a simulator for the test and stops it when the test ends. It
// skips the test when the simulator cannot run here (not root, programs
// missing, no cgroup hierarchy to isolate it in) or does not come up within
// UpTimeout.
func Start(tb testing.TB, opt Options) *Sim {
	tb.Helper()
	if err := Available(); err != nil {
		tb.Skipf("node simulator unavailable: %v", err)
	}
	mounts, fields, _ := hierarchies()
	// A short directory: unix socket paths are limited to 107 bytes.
	dir, err := os.MkdirTemp("", "nodesim")
	if err != nil {
		tb.Fatal(err)
	}
	s := &Sim{Dir: dir, tb: tb, exited: make(chan struct{})}
	tb.Cleanup(s.stop)
	var unique [4]byte
	if _, err := rand.Read(unique[:]); err != nil {
		tb.Fatal(err)
	}
	s.slice = fmt.Sprintf("nodediag_sim_%d_%s.slice", os.Getpid(), hex.EncodeToString(unique[:]))
	for _, d := range []string{"rt", "cfg/systemd/user", "journal"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			tb.Fatal(err)
		}
	}
	// journald keeps to the simulated units: not the machine's kernel ring
	// buffer, and only in the volatile directory bound to Dir/journal.
	if err := os.WriteFile(filepath.Join(dir, "journald.conf"), []byte("[Journal]\nStorage=volatile\nReadKMsg=no\n"), 0o644); err != nil {
		tb.Fatal(err)
	}
	for name, content := range opt.Units {
		if err := os.WriteFile(filepath.Join(dir, "cfg/systemd/user", name), []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	for _, m := range mounts {
		cg := filepath.Join(m, s.slice)
		if err := os.Mkdir(cg, 0o755); err != nil {
			tb.Skipf("node simulator unavailable: cannot create cgroup %s: %v", cg, err)
		}
		s.cgroups = append(s.cgroups, cg)
	}
	s.pid1, err = os.ReadFile("/proc/1/cgroup")
	if err != nil {
		tb.Skipf("node simulator unavailable: %v", err)
	}

	log, err := os.Create(filepath.Join(dir, "systemd-user.log"))
	if err != nil {
		tb.Fatal(err)
	}
	defer log.Close()
	fieldList := make([]string, len(fields))
	for i, f := range fields {
		if f == "" {
			f = "-"
		}
		fieldList[i] = f
	}
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", inNamespace)
	cmd.Env = append(s.env(),
		"NODESIM_DIR="+dir,
		"NODESIM_SLICE="+s.slice,
		"NODESIM_CGROUPS="+strings.Join(s.cgroups, " "),
		"NODESIM_FIELDS="+strings.Join(fieldList, " "),
	)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		tb.Skipf("node simulator unavailable: %v", err)
	}
	s.cmd = cmd
	go func() {
		_ = cmd.Wait()
		close(s.exited)
	}()

	if err := s.waitUp(); err != nil {
		tb.Skipf("node simulator did not come up within %s: %v\n%s", UpTimeout, err, s.logTail())
	}
	if len(opt.Start) > 0 {
		if out, err := s.Systemctl(append([]string{"start", "--no-block"}, opt.Start...)...); err != nil {
			tb.Fatalf("systemctl --user start %s: %v\n%s", strings.Join(opt.Start, " "), err, out)
		}
	}
	return s
}

// env is the environment of the manager and of systemctl: the test's, with
// the simulator's runtime and configuration directories and no bus address
// of the test's own.
func (s *Sim) env() []string {
	var out []string
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "DBUS_SESSION_BUS_ADDRESS", "DBUS_SYSTEM_BUS_ADDRESS", "NOTIFY_SOCKET":
			continue
		}
		out = append(out, kv)
	}
	return append(out, "XDG_RUNTIME_DIR="+filepath.Join(s.Dir, "rt"), "XDG_CONFIG_HOME="+filepath.Join(s.Dir, "cfg"))
}

// waitUp waits for the manager to report itself running and for its bus.
func (s *Sim) waitUp() error {
	deadline := time.Now().Add(UpTimeout)
	var last string
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			return errors.New("the manager exited")
		default:
		}
		out, _ := s.Systemctl("show", "-p", "SystemState", "--value")
		last = strings.TrimSpace(out)
		if (last == "running" || last == "degraded") && isSocket(s.BusPath()) {
			return nil
		}
		time.Sleep(pollEvery)
	}
	return fmt.Errorf("SystemState=%q, bus %s present=%v", last, s.BusPath(), isSocket(s.BusPath()))
}

func isSocket(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode()&fs.ModeSocket != 0
}

// BusPath is the socket of the manager's bus (dbus-daemon, socket-activated
// by the manager's dbus.socket): what a node's system bus is to PID 1.
func (s *Sim) BusPath() string { return filepath.Join(s.Dir, "rt", "bus") }

// BusAddress is the D-Bus address of BusPath, for DBUS_SYSTEM_BUS_ADDRESS.
func (s *Sim) BusAddress() string { return "unix:path=" + s.BusPath() }

// PrivateSocket is the manager's own socket: what /run/systemd/private is
// for PID 1 (a direct connection, no bus daemon).
func (s *Sim) PrivateSocket() string { return filepath.Join(s.Dir, "rt", "systemd", "private") }

// JournalDir holds the journal files journald writes (<machine-id>/...).
func (s *Sim) JournalDir() string { return filepath.Join(s.Dir, "journal") }

// UnitDir is where unit files go (then daemon-reload).
func (s *Sim) UnitDir() string { return filepath.Join(s.Dir, "cfg", "systemd", "user") }

// Systemctl runs systemctl --user against the simulator and returns its
// combined output.
func (s *Sim) Systemctl(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "systemctl", append([]string{"--user"}, args...)...)
	cmd.Env = s.env()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Show returns properties of a unit as systemctl show prints them, with
// timestamps as "@<unix seconds>".
func (s *Sim) Show(unit string, props ...string) (map[string]string, error) {
	args := []string{"show", "--timestamp=unix", unit}
	for _, p := range props {
		args = append(args, "-p", p)
	}
	out, err := s.Systemctl(args...)
	if err != nil {
		return nil, fmt.Errorf("systemctl --user show %s: %w: %s", unit, err, out)
	}
	m := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			m[k] = v
		}
	}
	return m, nil
}

// WaitUnit polls the unit's properties until ok accepts them, and fails the
// test after timeout. It returns the accepted properties.
func (s *Sim) WaitUnit(unit string, timeout time.Duration, ok func(map[string]string) bool, props ...string) map[string]string {
	s.tb.Helper()
	deadline := time.Now().Add(timeout)
	var last map[string]string
	for {
		m, err := s.Show(unit, props...)
		if err != nil {
			s.tb.Fatal(err)
		}
		last = m
		if ok(m) {
			return m
		}
		if time.Now().After(deadline) {
			s.tb.Fatalf("%s did not reach the expected state within %s; last: %v\n%s", unit, timeout, last, s.logTail())
		}
		time.Sleep(pollEvery)
	}
}

// DropIn writes a drop-in for unit and reloads the manager.
func (s *Sim) DropIn(unit, name, content string) {
	s.tb.Helper()
	d := filepath.Join(s.UnitDir(), unit+".d")
	if err := os.MkdirAll(d, 0o755); err != nil {
		s.tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, name), []byte(content), 0o644); err != nil {
		s.tb.Fatal(err)
	}
	if out, err := s.Systemctl("daemon-reload"); err != nil {
		s.tb.Fatalf("systemctl --user daemon-reload: %v\n%s", err, out)
	}
}

func (s *Sim) logTail() string {
	var b strings.Builder
	for _, name := range []string{"systemd-user.log", "journald.log"} {
		data, err := os.ReadFile(filepath.Join(s.Dir, name))
		if err != nil {
			continue
		}
		if len(data) > 2000 {
			data = data[len(data)-2000:]
		}
		fmt.Fprintf(&b, "--- %s:\n%s\n", name, data)
	}
	return b.String()
}

// stop ends the simulator: the manager is asked to exit (it stops its
// units), then whatever is left in the slice (journald, a unit's process
// that ignored SIGTERM) is killed by PID, the slice's cgroups are removed
// and the directory is deleted. It fails the test when PID 1's cgroups
// changed: the hazard this package exists to avoid.
func (s *Sim) stop() {
	if s.cmd != nil {
		select {
		case <-s.exited:
		default:
			if _, err := s.Systemctl("exit"); err != nil {
				_ = s.cmd.Process.Kill()
			}
			select {
			case <-s.exited:
			case <-time.After(stopTimeout):
				_ = s.cmd.Process.Kill()
				<-s.exited
			}
		}
	}
	if err := s.emptyCgroups(); err != nil {
		s.tb.Errorf("node simulator: %v", err)
	}
	for _, cg := range s.cgroups {
		if err := removeTree(cg); err != nil {
			s.tb.Errorf("node simulator: remove cgroup %s: %v", cg, err)
		}
	}
	if s.pid1 != nil {
		if now, err := os.ReadFile("/proc/1/cgroup"); err == nil && !bytes.Equal(now, s.pid1) {
			s.tb.Errorf("node simulator: PID 1 changed cgroups:\nbefore:\n%s\nafter:\n%s", s.pid1, now)
		}
	}
	if err := os.RemoveAll(s.Dir); err != nil {
		s.tb.Errorf("node simulator: %v", err)
	}
}

// emptyCgroups kills every process left in the slice, by PID, until none is
// left. Only processes of the slice are touched: the simulator started them.
func (s *Sim) emptyCgroups() error {
	deadline := time.Now().Add(stopTimeout)
	for {
		pids := s.slicePIDs()
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v still in %s", pids, s.slice)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(pollEvery)
	}
}

// slicePIDs lists the processes in the slice's cgroups, at any depth.
func (s *Sim) slicePIDs() []int {
	seen := map[int]bool{}
	for _, cg := range s.cgroups {
		_ = filepath.WalkDir(cg, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			data, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
			if err != nil {
				return nil
			}
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
					seen[pid] = true
				}
			}
			return nil
		})
	}
	out := make([]int, 0, len(seen))
	for pid := range seen {
		out = append(out, pid)
	}
	sort.Ints(out)
	return out
}

// removeTree removes an empty cgroup and its empty children, deepest first
// (cgroup directories are removed with rmdir, never their files).
func removeTree(cg string) error {
	var dirs []string
	err := filepath.WalkDir(cg, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("rmdir %s: %w", dirs[i], err)
		}
	}
	return nil
}
