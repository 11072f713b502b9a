package cli

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodediag/nodediag/agent/journal/journaltest"
)

// TestJournalOnlyNode: an Azure Linux 3 node keeps its logs in the journal
// only (no syslog file). The kubelet's refusal of the stale flag, and
// systemd restarting it, are read from real journal files with no
// journalctl: the refused flag is named first with the file that sets it
// and its journal line, and the crash loop is its consequence.
func TestJournalOnlyNode(t *testing.T) {
	journaltest.NeedJournalRemote(t)
	root := filepath.Join(t.TempDir(), "root")
	if out, err := exec.Command("cp", "-a", filepath.Join(scenarioDir, "azl3-stale-sysconfig-flag", "root"), root).CombinedOutput(); err != nil {
		t.Fatalf("copying the example host: %v\n%s", err, out)
	}
	t0 := time.Date(2024, 5, 1, 0, 0, 45, 0, time.UTC)
	entry := func(at time.Duration, pid int, unit, ident, msg string) journaltest.Entry {
		e := journaltest.Entry{
			{Name: "__REALTIME_TIMESTAMP", Value: strconv.FormatInt(t0.Add(at).UnixMicro(), 10)},
			{Name: "__MONOTONIC_TIMESTAMP", Value: strconv.FormatInt(int64((45*time.Second+at)/time.Microsecond), 10)},
			{Name: "_BOOT_ID", Value: "0123456789abcdef0123456789abcdef"},
			{Name: "_PID", Value: strconv.Itoa(pid)},
			{Name: "PRIORITY", Value: "6"},
			{Name: "SYSLOG_IDENTIFIER", Value: ident},
			{Name: "MESSAGE", Value: msg},
		}
		if pid == 1 {
			return append(e, journaltest.Field{Name: "_SYSTEMD_UNIT", Value: "init.scope"}, journaltest.Field{Name: "UNIT", Value: unit})
		}
		return append(e, journaltest.Field{Name: "_SYSTEMD_UNIT", Value: unit})
	}
	var es []journaltest.Entry
	for i := 0; i < 20; i++ {
		at := time.Duration(i) * 10 * time.Second
		pid := 3000 + i
		es = append(es,
			entry(at, pid, "kubelet.service", "kubelet", fmt.Sprintf(`E0501 00:%02d:%02d.000000 %7d run.go:74] "command failed" err="failed to parse kubelet flag: unknown flag: --pod-infra-container-image"`, (45+i*10)/60, (45+i*10)%60, pid)),
			entry(at+time.Millisecond, 1, "kubelet.service", "systemd", "kubelet.service: Main process exited, code=exited, status=1/FAILURE"),
			entry(at+2*time.Millisecond, 1, "kubelet.service", "systemd", "kubelet.service: Failed with result 'exit-code'."),
			entry(at+9*time.Second, 1, "kubelet.service", "systemd", fmt.Sprintf("kubelet.service: Scheduled restart job, restart counter is at %d.", i+1)),
		)
	}
	journaltest.WriteJournal(t, filepath.Join(root, "var/log/journal/31c20a9a9e3d296418186456189fa4d5/system.journal"), journaltest.Options{}, journaltest.Entries(es...))

	out, stderr, code := run(t, "check", "--root", root, "--exec", "none")
	if code != ExitFindings {
		t.Fatalf("exit %d (%s), want 1:\n%s", code, stderr, out)
	}
	first := strings.SplitN(strings.SplitN(out, "\n1. ", 2)[1], "\n\n", 2)[0]
	// No binary ran (--exec none) and the kubelet died before logging its
	// version: its refusal in the journal, tied to the file that carries
	// the flag, is the cause.
	for _, want := range []string{
		"ERROR KubeletUnknownFlag",
		"unknown flag --pod-infra-container-image set in /etc/sysconfig/kubelet",
		"/etc/sysconfig/kubelet:1",
		"journal:kubelet.service",
	} {
		if !strings.Contains(first, want) {
			t.Errorf("the first finding lacks %q:\n%s", want, first)
		}
	}
	if !strings.Contains(out, "KubeletCrashLoop") || !strings.Contains(out, "restart counter is at 20") {
		t.Errorf("the crash loop, from systemd's own messages, should follow as a consequence:\n%s", out)
	}
}
