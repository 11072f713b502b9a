package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// DefaultCmdTimeout bounds one command: a version query answers in
// milliseconds, a hung binary must not hold the agent.
const DefaultCmdTimeout = 10 * time.Second

// MaxOutput caps what is kept of a command's stdout and of its stderr.
const MaxOutput = 1 << 20

// ErrExecDisabled is returned when the runner does not run commands
// (NoExec, for copies of hosts that must not be executed).
var ErrExecDisabled = errors.New("running host binaries is disabled")

// ErrTimeout is returned (wrapped) when a command did not finish in time.
var ErrTimeout = errors.New("command timed out")

// Cmd is one command: argv, never a shell string.
type Cmd struct {
	// Root is the host root the command belongs to.
	Root string
	// Path is the binary's host path ("/usr/bin/kubelet").
	Path string
	Args []string
}

// String is the command line as quoted in evidence ("/usr/bin/kubelet --version").
func (c Cmd) String() string {
	return strings.Join(append([]string{c.Path}, c.Args...), " ")
}

// Output is what a command wrote.
type Output struct {
	Stdout []byte
	Stderr []byte
}

// Runner runs a node binary.
//
// Implementations run argv directly (no shell), give the command no input, an
// environment of PATH and LANG only, and kill it with its children when ctx
// ends. A command that exits non-zero returns its output and an *ExitError.
type Runner interface {
	Run(ctx context.Context, c Cmd) (Output, error)
}

// ExitError is a command that ran and exited non-zero.
type ExitError struct {
	Cmd    string
	Code   int
	Stderr string
}

func (e *ExitError) Error() string {
	msg := fmt.Sprintf("%s: exit status %d", e.Cmd, e.Code)
	if s := strings.TrimSpace(e.Stderr); s != "" {
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[:i]
		}
		msg += ": " + s
	}
	return msg
}

// IsNotInstalled says whether err means the binary is not there to run.
func IsNotInstalled(err error) bool {
	return errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist)
}

// Local runs the binary found under the host root in this process's
// namespaces: `az vm run-command` (root "/") and tests.
type Local struct{}

var _ Runner = Local{}

// Run implements Runner.
func (Local) Run(ctx context.Context, c Cmd) (Output, error) {
	h := Host{Root: c.Root}
	if h.Root == "" {
		h.Root = "/"
	}
	p, err := h.Path(c.Path)
	if err != nil {
		return Output{}, err
	}
	cmd := exec.CommandContext(ctx, p, c.Args...)
	cmd.Args[0] = c.Path
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C", "LC_ALL=C"}
	cmd.Stdin = nil
	// A process group of its own, so that a timeout kills the children too
	// (a script that runs `sleep` holds our pipes otherwise).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = time.Second
	var stdout, stderr capped
	stdout.max, stderr.max = MaxOutput, MaxOutput
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	out := Output{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}
	if ctx.Err() != nil && err != nil {
		return out, fmt.Errorf("%s: %w: %w", c, ErrTimeout, ctx.Err())
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out, &ExitError{Cmd: c.String(), Code: ee.ExitCode(), Stderr: string(out.Stderr)}
	}
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return out, &fs.PathError{Op: "exec", Path: c.Path, Err: pe.Err}
		}
		return out, fmt.Errorf("%s: %w", c, err)
	}
	return out, nil
}

// NoExec runs nothing: for copies of hosts, whose binaries must not run on
// the analyst's machine.
type NoExec struct{}

var _ Runner = NoExec{}

// Run implements Runner.
func (NoExec) Run(_ context.Context, c Cmd) (Output, error) {
	return Output{}, fmt.Errorf("%s: %w", c, ErrExecDisabled)
}

// capped is a buffer that keeps the first max bytes and discards the rest.
type capped struct {
	bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.Len(); room > 0 {
		if len(p) > room {
			c.Buffer.Write(p[:room])
		} else {
			c.Buffer.Write(p)
		}
	}
	return len(p), nil
}

var _ io.Writer = (*capped)(nil)
