// Package testenv is what tests that run real components share: how to
// demand a prerequisite (root, a Debian package's binary), a free loopback
// port, and a daemon started for the test and stopped by PID.
//
// A missing prerequisite fails the test under CI=true (the CI machine is
// prepared by .ci/run: a skip there would hide a broken setup) and skips it
// with the reason elsewhere.
package testenv

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Require stops the test when ok is false: t.Fatal under CI=true, t.Skip
// otherwise, with the reason.
func Require(t testing.TB, ok bool, format string, args ...any) {
	t.Helper()
	if ok {
		return
	}
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("prerequisite missing in CI (see .ci/run): %s", msg)
	}
	t.Skip(msg)
}

// RequireRoot demands root.
func RequireRoot(t testing.TB, why string) {
	t.Helper()
	Require(t, os.Getuid() == 0, "needs root: %s", why)
}

// RequireBinary demands a binary (absolute path or PATH name) and returns
// its path; pkg names the Debian package that provides it.
func RequireBinary(t testing.TB, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	Require(t, err == nil, "%s not found (Debian package %s): %v", name, pkg, err)
	return p
}

// FreePort returns a loopback TCP port nobody listens on now.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Daemon is a process started for a test.
type Daemon struct {
	Cmd    *exec.Cmd
	output *syncBuffer
}

// Output is what the daemon wrote so far (stdout and stderr).
func (d *Daemon) Output() string { return d.output.String() }

// syncBuffer is a buffer that the copies of stdout and stderr write
// concurrently.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Start runs argv in its own process group, waits until ready returns nil
// (polled every 20 ms, at most timeout), and stops the group by PID when the
// test ends. If logPath is not empty, the daemon's stdout and stderr also go
// to that file (a log the agent can read).
func Start(t testing.TB, argv []string, env []string, logPath string, timeout time.Duration, ready func() error) *Daemon {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	buf := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = buf, buf
	if logPath != "" {
		f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		w := multi{buf, &lockedFile{f: f}}
		cmd.Stdout, cmd.Stderr = w, w
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", strings.Join(argv, " "), err)
	}
	d := &Daemon{Cmd: cmd, output: buf}
	t.Cleanup(func() { d.Stop() })
	deadline := time.Now().Add(timeout)
	for {
		err := ready()
		if err == nil {
			return d
		}
		if time.Now().After(deadline) {
			d.Stop()
			t.Fatalf("%s not ready after %v: %v\n%s", argv[0], timeout, err, buf.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the daemon's process group and waits for it.
func (d *Daemon) Stop() {
	if d.Cmd.Process == nil || d.Cmd.ProcessState != nil {
		return
	}
	syscall.Kill(-d.Cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { d.Cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		syscall.Kill(-d.Cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// DialReady is a ready function that succeeds once network/address accepts
// a connection.
func DialReady(network, address string) func() error {
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		c, err := (&net.Dialer{}).DialContext(ctx, network, address)
		if err != nil {
			return err
		}
		return c.Close()
	}
}

type lockedFile struct {
	mu sync.Mutex
	f  *os.File
}

func (l *lockedFile) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Write(p)
}

type multi []interface{ Write([]byte) (int, error) }

func (m multi) Write(p []byte) (int, error) {
	for _, w := range m {
		w.Write(p)
	}
	return len(p), nil
}
