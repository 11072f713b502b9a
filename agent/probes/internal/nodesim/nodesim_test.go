package nodesim

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The simulator's manager lives in its own slice, never in the root cgroup,
// and a unit's output reaches the real journal under the unit's name.
func TestSimulator(t *testing.T) {
	s := Start(t, Options{
		Units: map[string]string{"hello.service": "[Service]\nExecStart=/bin/sh -c 'echo hello from a simulated node; exec sleep infinity'\n"},
		Start: []string{"hello.service"},
	})

	cg, err := os.ReadFile("/proc/" + strconv.Itoa(s.cmd.Process.Pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(cg)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && (parts[1] == "name=systemd" || parts[1] == "") && !strings.HasPrefix(parts[2], "/"+s.slice) {
			t.Errorf("manager in cgroup %q, want under /%s", line, s.slice)
		}
	}

	// The unit stays up after its line: journald learns a line's unit from
	// the writer's cgroup in /proc, and a writer that has already exited
	// when journald reads the line leaves it without _SYSTEMD_UNIT.
	s.WaitUnit("hello.service", 10*time.Second, func(m map[string]string) bool { return m["SubState"] == "running" }, "SubState")

	if _, err := exec.LookPath("journalctl"); err != nil {
		t.Skip("no journalctl to read the journal with")
	}
	// journald writes the line shortly after the unit printed it.
	var out []byte
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(pollEvery) {
		ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
		out, err = exec.CommandContext(ctx, "journalctl", "--directory", s.JournalDir(), "-u", "hello.service", "-o", "cat", "--no-pager", "-q").Output()
		cancel()
		if err == nil && strings.Contains(string(out), "hello from a simulated node") {
			break
		}
	}
	if !strings.Contains(string(out), "hello from a simulated node") {
		t.Fatalf("journalctl -u hello.service: %q, %v; want the unit's line\n%s", out, err, s.logTail())
	}
	// Only the simulated units' messages: not the machine's kernel's.
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	kmsg, err := exec.CommandContext(ctx, "journalctl", "--directory", s.JournalDir(), "_TRANSPORT=kernel", "-o", "cat", "--no-pager", "-q").Output()
	if err != nil || len(kmsg) > 0 {
		t.Errorf("kernel messages in the journal: %.200q, %v", kmsg, err)
	}
}
