package rules

import (
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

var kernelClock = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// kernelInput is a node whose kernel journal holds lines, each at its
// offset before kernelClock.
func kernelInput(lines ...struct {
	ago  time.Duration
	text string
}) *Input {
	ex := &nodediagv1.LogExcerpt{Source: "journal:kernel", Kind: "kernel"}
	for i, l := range lines {
		ex.Lines = append(ex.Lines, &nodediagv1.LogLine{N: int32(i + 1), Text: l.text, Program: "kernel", Time: timestamppb.New(kernelClock.Add(-l.ago))})
	}
	if n := len(ex.Lines); n > 0 {
		ex.LastTime = ex.Lines[n-1].Time
	}
	ev := &nodediagv1.Evidence{Probes: []*nodediagv1.ProbeEvidence{{Name: "journal", Status: "ok", Data: &nodediagv1.ProbeEvidence_Journal{Journal: &nodediagv1.Journal{Sources: []*nodediagv1.LogExcerpt{ex}}}}}}
	return &Input{Ev: ev, Clock: kernelClock, Until: kernelClock}
}

type kline = struct {
	ago  time.Duration
	text string
}

func TestOOMKilledRule(t *testing.T) {
	tests := []struct {
		name     string
		lines    []kline
		severity string // "" for no finding
		process  string
	}{
		{"the kubelet killed just now", []kline{{time.Minute, "Memory cgroup out of memory: Killed process 989 (kubelet) total-vm:856872kB, anon-rss:49600kB, file-rss:0kB, shmem-rss:0kB"}}, Error, "kubelet"},
		{"etcd killed twice, long ago", []kline{{5 * time.Hour, "Out of memory: Killed process 1200 (etcd) total-vm:1kB"}, {4 * time.Hour, "Out of memory: Killed process 1300 (etcd) total-vm:1kB"}}, Error, "etcd"},
		{"containerd killed once, three hours ago, and nothing since", []kline{{3 * time.Hour, "Out of memory: Kill process 994 (containerd) score 4 or sacrifice child"}}, Warning, "containerd"},
		{"a workload's container over its limit", []kline{{time.Minute, "Memory cgroup out of memory: Killed process 4242 (java) total-vm:1kB"}}, Info, "java"},
		{"no kill", []kline{{time.Minute, "eth0: renamed from veth12"}}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := oomKilledRule(kernelInput(tt.lines...))
			if tt.severity == "" {
				if len(fs) != 0 {
					t.Fatalf("findings %v, want none", fs)
				}
				return
			}
			if len(fs) != 1 || fs[0].Severity != tt.severity || fs[0].Id != OOMKilled.ID {
				t.Fatalf("findings %v, want one OOMKilled at %s", fs, tt.severity)
			}
			if want := "the kernel's OOM killer killed " + tt.process; len(fs[0].Title) < len(want) || fs[0].Title[:len(want)] != want {
				t.Errorf("title %q, want it to start with %q", fs[0].Title, want)
			}
		})
	}
}

// The kill lines name the victim; the header and the summary of each kill
// are context, quoted only when no kill line was kept.
func TestOOMKilledQuotesTheKills(t *testing.T) {
	kill := func(ago time.Duration, pid string) []kline {
		return []kline{
			{ago, "kube-apiserver invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, oom_score_adj=-997"},
			{ago, "oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=x,mems_allowed=0,global_oom,task_memcg=/x,task=kube-apiserver,pid=" + pid + ",uid=0"},
			{ago, "Out of memory: Killed process " + pid + " (kube-apiserver) total-vm:9086264kB, anon-rss:6877940kB"},
		}
	}
	lines := append(append(kill(30*time.Minute, "48211"), kill(20*time.Minute, "52002")...), kill(10*time.Minute, "60637")...)
	fs := oomKilledRule(kernelInput(lines...))
	if len(fs) != 1 {
		t.Fatalf("findings %v, want one", fs)
	}
	var got []string
	for _, q := range fs[0].Evidence {
		got = append(got, q.GetExcerpt())
	}
	want := []string{lines[0].text, lines[2].text, lines[8].text}
	if !slices.Equal(got, want) {
		t.Errorf("quotes %q, want the first kill's header, the first and the last kill line %q", got, want)
	}
	// Before 4.19: the choice, then the kill, of one pid: the kill is quoted.
	old := []kline{
		{time.Minute, "Out of memory: Kill process 20877 (kube-apiserver) score 1068 or sacrifice child"},
		{time.Minute, "Killed process 20877 (kube-apiserver) total-vm:404820kB, anon-rss:143712kB"},
	}
	if ev := oomKilledRule(kernelInput(old...))[0].Evidence; len(ev) != 1 || ev[0].GetExcerpt() != old[1].text {
		t.Errorf("quotes %v, want only the kill line %q", ev, old[1].text)
	}
	// Several components killed: the first kill of each.
	multi := []kline{
		{3 * time.Minute, "Killed process 40422 (containerd) total-vm:1121000kB"},
		{2 * time.Minute, "Killed process 41908 (kubelet) total-vm:118092kB"},
		{time.Minute, "Killed process 40414 (dockerd) total-vm:6866100kB"},
		{time.Minute, "Killed process 40500 (containerd) total-vm:1121000kB"},
	}
	got = nil
	for _, q := range oomKilledRule(kernelInput(multi...))[0].Evidence {
		got = append(got, q.GetExcerpt())
	}
	if want := []string{multi[0].text, multi[1].text, multi[2].text, multi[3].text}; !slices.Equal(got, want) {
		t.Errorf("quotes %q, want each component's first kill and the last kill %q", got, want)
	}
	// A journal that kept only the header: it is quoted.
	fs = oomKilledRule(kernelInput(lines[0]))
	if len(fs) != 1 || len(fs[0].Evidence) != 1 || fs[0].Evidence[0].GetExcerpt() != lines[0].text {
		t.Errorf("header only: findings %v, want one quoting the header", fs)
	}
}

func TestLinkDownRule(t *testing.T) {
	down := kline{10 * time.Minute, "ixgbe 0000:af:00.1 enp175s0f1: NIC Link is Down"}
	up := kline{10*time.Minute - 2*time.Second, "ixgbe 0000:af:00.1 enp175s0f1: NIC Link is Up 10 Gbps, Flow Control: RX/TX"}
	otherUp := kline{9 * time.Minute, "eth1: Gained carrier"}
	if fs := linkDownRule(kernelInput(down)); len(fs) != 1 || fs[0].Severity != Error {
		t.Errorf("a link that stays down: %v, want an error", fs)
	}
	if fs := linkDownRule(kernelInput(down, up)); len(fs) != 1 || fs[0].Severity != Warning || len(fs[0].Evidence) != 2 {
		t.Errorf("a link back 2s later: %v, want a warning quoting both lines", fs)
	}
	if fs := linkDownRule(kernelInput(down, otherUp)); len(fs) != 1 || fs[0].Severity != Error {
		t.Errorf("another link coming up: %v, want an error", fs)
	}
}

// TestStaleEvent: a hung task an hour before the evidence ends is a warning;
// one minute before it, or ten of them (the kernel's hung_task_warnings),
// an error.
func TestStaleEvent(t *testing.T) {
	hung := func(ago time.Duration) kline {
		return kline{ago, "INFO: task restic:4121 blocked for more than 120 seconds."}
	}
	severity := func(lines ...kline) string {
		in := kernelInput(lines...)
		for _, f := range signatureFindings(in) {
			if f.Id == HungTask.ID {
				return f.Severity
			}
		}
		return ""
	}
	if got := severity(hung(time.Hour)); got != Warning {
		t.Errorf("an hour ago: %s, want warning", got)
	}
	if got := severity(hung(time.Minute)); got != Error {
		t.Errorf("a minute ago: %s, want error", got)
	}
	var ten []kline
	for i := 0; i < 10; i++ {
		ten = append(ten, hung(3*time.Hour-time.Duration(i)*2*time.Minute))
	}
	if got := severity(ten...); got != Error {
		t.Errorf("ten reports hours ago: %s, want error (the kernel stopped reporting)", got)
	}
}

// TestOverSinceRestart: a kubelet that refused its configuration, then was
// fixed and has run for half an hour since, is no longer failing on it.
func TestOverSinceRestart(t *testing.T) {
	errLine := &nodediagv1.LogLine{N: 1, Text: `E0501 11:00:00.000000    1201 server.go:302] "Failed to run kubelet" err="failed to run Kubelet: misconfiguration: kubelet cgroup driver: \"cgroupfs\" is different from docker cgroup driver: \"systemd\""`, Time: timestamppb.New(kernelClock.Add(-time.Hour))}
	started := &nodediagv1.Quote{Source: "journal:kubelet.service", Time: timestamppb.New(kernelClock.Add(-30 * time.Minute)), Excerpt: "Started kubelet.service - kubelet: The Kubernetes Node Agent."}
	journalEv := func(active string) *Input {
		ex := &nodediagv1.LogExcerpt{Source: "journal:kubelet.service", Kind: "kubelet", Lines: []*nodediagv1.LogLine{errLine}, LastTime: timestamppb.New(kernelClock)}
		u := &nodediagv1.UnitState{Name: "kubelet.service", ActiveState: active, Source: "journal", Evidence: started}
		ev := &nodediagv1.Evidence{Probes: []*nodediagv1.ProbeEvidence{{Name: "journal", Status: "ok", Data: &nodediagv1.ProbeEvidence_Journal{Journal: &nodediagv1.Journal{Sources: []*nodediagv1.LogExcerpt{ex}, Units: []*nodediagv1.UnitState{u}}}}}}
		return &Input{Ev: ev, Clock: kernelClock, Until: kernelClock}
	}
	sev := func(in *Input) string {
		for _, f := range signatureFindings(in) {
			if f.Id == KubeletCgroupDriverMismatch.ID {
				return f.Severity
			}
		}
		return ""
	}
	if got := sev(journalEv("active")); got != Info {
		t.Errorf("active for 30 minutes since the error: %s, want info", got)
	}
	if got := sev(journalEv("activating")); got != Error {
		t.Errorf("still restarting: %s, want error", got)
	}
}
