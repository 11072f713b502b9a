package testenv

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Kill kills the daemon's process group with SIGKILL (a crash: nothing
// runs its shutdown) and waits for it.
func (d *Daemon) Kill() {
	if d.Cmd.Process == nil || d.Cmd.ProcessState != nil {
		return
	}
	syscall.Kill(-d.Cmd.Process.Pid, syscall.SIGKILL)
	d.Cmd.Wait()
}

// Terminate sends SIGTERM to the daemon alone and waits up to timeout for
// it to exit; it returns the exit code, or an error when the daemon did not
// exit in time (it is then killed).
func (d *Daemon) Terminate(timeout time.Duration) (int, error) {
	if d.Cmd.ProcessState != nil {
		return d.Cmd.ProcessState.ExitCode(), nil
	}
	d.Cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { d.Cmd.Wait(); close(done) }()
	select {
	case <-done:
		return d.Cmd.ProcessState.ExitCode(), nil
	case <-time.After(timeout):
		syscall.Kill(-d.Cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return -1, fmt.Errorf("pid %d still running %v after SIGTERM", d.Cmd.Process.Pid, timeout)
	}
}

// ProcUsage is what the kernel counts for a process.
type ProcUsage struct {
	// RSS and PeakRSS (VmRSS, VmHWM) in bytes.
	RSS, PeakRSS int64
	// CPU is user plus system time.
	CPU time.Duration
}

// Usage reads /proc/PID/status and /proc/PID/stat.
func Usage(pid int) (ProcUsage, error) {
	var u ProcUsage
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(fields[0], 10, 64)
		switch k {
		case "VmRSS":
			u.RSS = n << 10
		case "VmHWM":
			u.PeakRSS = n << 10
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, err
	}
	// The command name may hold spaces and parentheses: fields count
	// from the last ')'.
	s := string(stat)
	rest := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(rest) < 13 {
		return u, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(rest))
	}
	// utime and stime are fields 14 and 15 of stat(5): 12 and 13 after
	// the name (state is the first), in clock ticks (USER_HZ, 100 on
	// Linux).
	ut, _ := strconv.ParseInt(rest[11], 10, 64)
	st, _ := strconv.ParseInt(rest[12], 10, 64)
	u.CPU = time.Duration(ut+st) * (time.Second / 100)
	return u, nil
}
