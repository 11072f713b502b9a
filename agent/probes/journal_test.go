package probes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/nodediag/nodediag/agent/host/hosttest"
	"github.com/nodediag/nodediag/agent/journal"
	"github.com/nodediag/nodediag/agent/journal/journaltest"
	"github.com/nodediag/nodediag/agent/probe"
	"github.com/nodediag/nodediag/internal/testenv"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

const (
	jBoot1 = "0123456789abcdef0123456789abcdef"
	jBoot2 = "fedcba9876543210fedcba9876543210"
)

var jT0 = time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)

// jEntry is a journal entry as journald stores a unit's stdout line
// (PRIORITY=6 even for klog E lines), or, with pid 1, what systemd says about
// a unit (UNIT=).
func jEntry(at time.Duration, boot, unit string, pid int, msg string) journaltest.Entry {
	rt := jT0.Add(at)
	e := journaltest.Entry{
		{Name: "__REALTIME_TIMESTAMP", Value: strconv.FormatInt(rt.UnixMicro(), 10)},
		{Name: "__MONOTONIC_TIMESTAMP", Value: strconv.FormatInt(int64(at/time.Microsecond)+1_000_000, 10)},
		{Name: "_BOOT_ID", Value: boot},
		{Name: "_HOSTNAME", Value: "node-1"},
		{Name: "_PID", Value: strconv.Itoa(pid)},
		{Name: "PRIORITY", Value: "6"},
		{Name: "MESSAGE", Value: msg},
	}
	if pid == 1 {
		return append(e, journaltest.Field{Name: "_SYSTEMD_UNIT", Value: "init.scope"}, journaltest.Field{Name: "SYSLOG_IDENTIFIER", Value: "systemd"}, journaltest.Field{Name: "UNIT", Value: unit})
	}
	return append(e, journaltest.Field{Name: "_SYSTEMD_UNIT", Value: unit}, journaltest.Field{Name: "SYSLOG_IDENTIFIER", Value: strings.TrimSuffix(unit, ".service")})
}

// TestJournalProbe reads real journal files (written by systemd's own
// journal-remote): the kubelet's and containerd's lines of the last boot,
// systemd's messages about them, the state derived from those, and nothing
// of the previous boot or of other units.
func TestJournalProbe(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{"etc/hostname": "node-1\n"})
	var es []journaltest.Entry
	// Boot 1: a healthy kubelet.
	es = append(es, jEntry(0, jBoot1, "kubelet.service", 900, `I0501 00:00:00.000000     900 server.go:484] "Kubelet version" kubeletVersion="v1.34.2"`))
	es = append(es, jEntry(time.Second, jBoot1, "kubelet.service", 900, `E0501 00:00:01.000000     900 kubelet.go:3002] "Error getting node" err="node \"node-1\" not found"`))
	// Boot 2: the kubelet refuses a flag and systemd restarts it.
	base := time.Hour
	for i := 0; i < 6; i++ {
		at := base + time.Duration(i)*10*time.Second
		pid := 2000 + i
		es = append(es, jEntry(at, jBoot2, "kubelet.service", pid, fmt.Sprintf(`E0501 01:00:%02d.000000 %7d run.go:74] "command failed" err="failed to parse kubelet flag: unknown flag: --pod-infra-container-image"`, i*10, pid)))
		es = append(es, jEntry(at+time.Millisecond, jBoot2, "kubelet.service", 1, "kubelet.service: Main process exited, code=exited, status=1/FAILURE"))
		es = append(es, jEntry(at+2*time.Millisecond, jBoot2, "kubelet.service", 1, "kubelet.service: Failed with result 'exit-code'."))
		es = append(es, jEntry(at+9*time.Second, jBoot2, "kubelet.service", 1, fmt.Sprintf("kubelet.service: Scheduled restart job, restart counter is at %d.", i+1)))
	}
	es = append(es, jEntry(base+time.Minute, jBoot2, "containerd.service", 800, `time="2024-05-01T01:01:00.000000000Z" level=info msg="containerd successfully booted in 0.05s"`))
	es = append(es, jEntry(base+time.Minute, jBoot2, "ssh.service", 700, "error: kex_exchange_identification: Connection closed by remote host"))
	journaltest.WriteJournal(t, filepath.Join(h.Root, "var/log/journal/3d1219c7c4c5404aaa1f6d2a48adfda4/system.journal"), journaltest.Options{}, journaltest.Entries(es...))

	pe, err := journalProbe{}.Run(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	j := pe.GetJournal()
	if len(j.Files) != 1 || len(j.Boots) != 2 || j.BootId != jBoot2 {
		t.Fatalf("files %d, boots %v, boot %s: want 1 file, 2 boots, the last one chosen", len(j.Files), j.Boots, j.BootId)
	}
	bySource := map[string]*nodediagv1.LogExcerpt{}
	for _, s := range j.Sources {
		bySource[s.Source] = s
	}
	kubelet := bySource["journal:kubelet.service"]
	if kubelet == nil || kubelet.Kind != "kubelet" {
		t.Fatalf("sources %v: want journal:kubelet.service of kind kubelet", j.Sources)
	}
	if kubelet.TotalLines != 24 {
		t.Errorf("kubelet lines read: %d, want 24 (boot 2 only, its own and systemd's)", kubelet.TotalLines)
	}
	for _, l := range kubelet.Lines {
		if strings.Contains(l.Text, "Error getting node") {
			t.Errorf("a line of the previous boot was kept: %s", l.Text)
		}
		if l.Time == nil || l.Time.AsTime().Before(jT0.Add(base)) {
			t.Errorf("line without the entry's time: %v", l)
		}
	}
	if _, ok := bySource["journal:containerd.service"]; !ok {
		t.Error("containerd's journal was not read")
	}

	// --since: the entries before it are not read at all (the reader finds
	// the start by bisection).
	h.Since = jT0.Add(base + 30*time.Second)
	pe, err = journalProbe{}.Run(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range pe.GetJournal().GetSources() {
		if s.Source == "journal:kubelet.service" && s.TotalLines != 12 {
			t.Errorf("--since: %d kubelet lines read, want 12 (the last three restarts)", s.TotalLines)
		}
		for _, l := range s.Lines {
			if l.Time.AsTime().Before(h.Since) {
				t.Errorf("--since: a line before it: %s", l.Text)
			}
		}
	}
	h.Since = time.Time{}
	for s := range bySource {
		if strings.Contains(s, "ssh") {
			t.Errorf("a unit nobody asked for was read: %s", s)
		}
	}
	var st *nodediagv1.UnitState
	for _, u := range j.Units {
		if u.Name == "kubelet.service" {
			st = u
		}
	}
	if st == nil || st.Source != "journal" || st.NRestarts != 6 || st.ActiveState != "activating" || st.SubState != "auto-restart" || st.Result != "exit-code" || st.ExecMainStatus != 1 {
		t.Fatalf("kubelet state %v: want 6 restarts, activating/auto-restart, exit-code, status 1", st)
	}
	if st.Evidence == nil || !strings.Contains(st.Evidence.Excerpt, "restart counter is at 6") {
		t.Errorf("the state's evidence %v should quote systemd's last line", st.Evidence)
	}
}

func TestJournalProbeNoJournal(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{"etc/hostname": "node-1\n"})
	_, err := journalProbe{}.Run(context.Background(), h)
	if !errors.Is(err, probe.ErrNotApplicable) {
		t.Errorf("error %v, want not applicable", err)
	}
}

// A damaged journal file is a gap; the readable one is still read.
func TestJournalProbeDamagedFile(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{
		"var/log/journal/3d1219c7c4c5404aaa1f6d2a48adfda4/system@0123456789abcdef0123456789abcdef-0000000000000001-0005f0b3a1c2d3e4.journal": "LPKSHHRH" + strings.Repeat("\x00", 200),
	})
	journaltest.WriteJournal(t, filepath.Join(h.Root, "var/log/journal/3d1219c7c4c5404aaa1f6d2a48adfda4/system.journal"), journaltest.Options{},
		journaltest.Entries(jEntry(0, jBoot1, "kubelet.service", 900, `E0501 00:00:00.000000     900 run.go:74] "command failed" err="failed to parse kubelet flag: unknown flag: --network-plugin"`)))
	pe, err := journalProbe{}.Run(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	if len(pe.GetJournal().GetSources()) != 1 {
		t.Errorf("sources %v, want the kubelet's from the good file", pe.GetJournal().GetSources())
	}
	if len(pe.Unreadable) == 0 || !strings.Contains(pe.Unreadable[0].Source, "system@") {
		t.Errorf("unreadable %v, want the damaged file named", pe.Unreadable)
	}
}

// TestJournalProbeTextExports: the journal of TestJournalProbe, printed by
// the real journalctl as the CAPZ log collector prints it (journal.log
// whole, kubelet.log with -u kubelet.service, both --output=short-precise),
// gives the journal probe the same excerpts and unit states as the journal
// files themselves.
func TestJournalProbeTextExports(t *testing.T) {
	jc, err := exec.LookPath("journalctl")
	testenv.Require(t, err == nil, "journalctl (Debian package systemd): %v", err)
	h := hosttest.Tree(t, map[string]string{"etc/hostname": "node-1\n"})
	var es []journaltest.Entry
	es = append(es, jEntry(0, jBoot1, "kubelet.service", 900, `I0501 00:00:00.000000     900 server.go:484] "Kubelet version" kubeletVersion="v1.34.2"`))
	for i := 0; i < 4; i++ {
		at := time.Hour + time.Duration(i)*10*time.Second
		es = append(es, jEntry(at, jBoot2, "kubelet.service", 2000+i, fmt.Sprintf(`E0501 01:00:%02d.000000 %7d run.go:74] "command failed" err="failed to parse kubelet flag: unknown flag: --pod-infra-container-image"`, i*10, 2000+i)))
		es = append(es, jEntry(at+time.Millisecond, jBoot2, "kubelet.service", 1, "kubelet.service: Main process exited, code=exited, status=1/FAILURE"))
		es = append(es, jEntry(at+2*time.Millisecond, jBoot2, "kubelet.service", 1, "kubelet.service: Failed with result 'exit-code'."))
		es = append(es, jEntry(at+9*time.Second, jBoot2, "kubelet.service", 1, fmt.Sprintf("kubelet.service: Scheduled restart job, restart counter is at %d.", i+1)))
	}
	es = append(es, jEntry(time.Hour+time.Minute, jBoot2, "containerd.service", 800, `time="2024-05-01T01:01:00.000000000Z" level=error msg="failed to load cni during init"`))
	file := filepath.Join(h.Root, "var/log/journal/3d1219c7c4c5404aaa1f6d2a48adfda4/system.journal")
	journaltest.WriteJournal(t, file, journaltest.Options{}, journaltest.Entries(es...))
	export := func(name string, args ...string) {
		cmd := exec.Command(jc, append([]string{"--file", file, "--no-pager", "--output=short-precise"}, args...)...)
		cmd.Env = append(os.Environ(), "TZ=UTC")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("journalctl %v: %v", args, err)
		}
		if err := os.WriteFile(filepath.Join(h.Root, name), out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	export("journal.log")
	export("kubelet.log", "-u", "kubelet.service")

	fromFiles, err := journalProbe{}.Run(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	fromText, err := journalProbe{text: []journal.TextExport{{Path: "/journal.log"}, {Path: "/kubelet.log", Unit: "kubelet.service"}}}.Run(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	if len(fromText.Unreadable) > 0 {
		t.Errorf("unreadable: %v", fromText.Unreadable)
	}
	a, b := fromFiles.GetJournal(), fromText.GetJournal()
	if b.BootId != a.BootId {
		t.Errorf("boot %q, want %q", b.BootId, a.BootId)
	}
	ignore := protocmp.IgnoreFields(&nodediagv1.Journal{}, "files", "dirs", "boots")
	if diff := cmp.Diff(a, b, protocmp.Transform(), ignore); diff != "" {
		t.Errorf("journal evidence from text differs from the files' (-files +text):\n%s", diff)
	}
}
