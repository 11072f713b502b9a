package rules

import (
	"regexp"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

var utClock = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// utUnit builds a unit's state as the units probe reports it, with its
// evidence in the probe's form.
func utUnit(name, load, active, sub, result string, restarts uint32, code, status int32) *nodediagv1.UnitState {
	u := &nodediagv1.UnitState{
		Name: name, LoadState: load, ActiveState: active, SubState: sub, Result: result,
		NRestarts: restarts, ExecMainCode: code, ExecMainStatus: status, Source: "dbus",
	}
	u.Evidence = &nodediagv1.Quote{Source: "dbus:" + name, Excerpt: "ActiveState=" + active + " SubState=" + sub + " Result=" + result}
	return u
}

// utJournalUnit is state the journal probe derived from a systemd message.
func utJournalUnit(name, active, sub, result string, restarts uint32, line string) *nodediagv1.UnitState {
	return &nodediagv1.UnitState{
		Name: name, ActiveState: active, SubState: sub, Result: result, NRestarts: restarts, Source: "journal",
		Evidence: &nodediagv1.Quote{Source: "journal:" + name, Time: timestamppb.New(utClock.Add(-time.Minute)), Excerpt: line},
	}
}

// utEvidence is the evidence of the cases: unit state from the bus (dbus),
// from the journal (journal), and other probes' data.
type utEvidence struct {
	dbus, journal []*nodediagv1.UnitState
	kubelet       *nodediagv1.KubeletConfig
	cloudInit     *nodediagv1.CloudInit
}

func (e utEvidence) input() *Input {
	ev := &nodediagv1.Evidence{CollectedAt: timestamppb.New(utClock)}
	add := func(pe *nodediagv1.ProbeEvidence) {
		pe.Status = "ok"
		ev.Probes = append(ev.Probes, pe)
	}
	if e.dbus != nil {
		add(&nodediagv1.ProbeEvidence{Name: "units", Data: &nodediagv1.ProbeEvidence_Units{Units: &nodediagv1.Units{Source: "dbus", Units: e.dbus}}})
	}
	if e.journal != nil {
		add(&nodediagv1.ProbeEvidence{Name: "journal", Data: &nodediagv1.ProbeEvidence_Journal{Journal: &nodediagv1.Journal{Units: e.journal}}})
	}
	if e.kubelet != nil {
		add(&nodediagv1.ProbeEvidence{Name: "kubelet-config", Data: &nodediagv1.ProbeEvidence_KubeletConfig{KubeletConfig: e.kubelet}})
	}
	if e.cloudInit != nil {
		add(&nodediagv1.ProbeEvidence{Name: "cloud-init", Data: &nodediagv1.ProbeEvidence_CloudInit{CloudInit: e.cloudInit}})
	}
	return &Input{Ev: ev, Clock: utClock, Until: utClock}
}

// utGot is what the tables compare.
type utGot struct {
	ID, Title, Confidence string
	Quotes                []string // source: excerpt
}

func utSummary(fs []*nodediagv1.Finding) []utGot {
	var out []utGot
	for _, f := range fs {
		g := utGot{ID: f.Id, Title: f.Title, Confidence: f.Confidence}
		for _, q := range f.Evidence {
			g.Quotes = append(g.Quotes, q.Source+": "+q.Excerpt)
		}
		out = append(out, g)
	}
	return out
}

var utUnfilled = regexp.MustCompile(`\{[a-z_]+\}`)

func TestUnitRules(t *testing.T) {
	configMissing := &nodediagv1.KubeletConfig{Config: &nodediagv1.KubeletConfigFile{Path: "/var/lib/kubelet/config.yaml"}}
	configPresent := &nodediagv1.KubeletConfig{Config: &nodediagv1.KubeletConfigFile{Path: "/var/lib/kubelet/config.yaml", Present: true}}
	crio := &nodediagv1.KubeletConfig{Config: &nodediagv1.KubeletConfigFile{Path: "/var/lib/kubelet/config.yaml", Present: true,
		ContainerRuntimeEndpoint: "unix:///var/run/crio/crio.sock"}}
	crioFlag := &nodediagv1.KubeletConfig{
		Config: &nodediagv1.KubeletConfigFile{Path: "/var/lib/kubelet/config.yaml", Present: true, ContainerRuntimeEndpoint: "unix:///run/containerd/containerd.sock"},
		Flags:  []*nodediagv1.KubeletFlag{{Name: "container-runtime-endpoint", Value: "unix:///var/run/crio/crio.sock", Active: true}},
	}
	running := &nodediagv1.CloudInit{Status: "running"}
	done := &nodediagv1.CloudInit{Status: "done"}
	kubeletOK := utUnit("kubelet.service", "loaded", "active", "running", "success", 0, 0, 0)
	containerdOK := utUnit("containerd.service", "loaded", "active", "running", "success", 0, 0, 0)
	crashLoop := utUnit("kubelet.service", "loaded", "activating", "auto-restart", "exit-code", 6, cldExited, 1)

	tests := []struct {
		name string
		ev   utEvidence
		want []utGot
	}{
		{name: "healthy", ev: utEvidence{dbus: []*nodediagv1.UnitState{kubeletOK, containerdOK}, kubelet: configPresent}},
		{name: "no unit state"},
		{
			name: "kubelet waiting to restart after exit 1",
			ev:   utEvidence{dbus: []*nodediagv1.UnitState{crashLoop, containerdOK}, kubelet: configPresent},
			want: []utGot{{ID: "KubeletCrashLoop", Confidence: High,
				Title:  "the kubelet crash-loops: kubelet.service keeps failing and restarting (NRestarts=6, Result=exit-code, status 1)",
				Quotes: []string{"dbus:kubelet.service: ActiveState=activating SubState=auto-restart Result=exit-code"}}},
		},
		{
			name: "first failure, restart pending",
			ev:   utEvidence{dbus: []*nodediagv1.UnitState{utUnit("kubelet.service", "loaded", "activating", "auto-restart", "exit-code", 0, cldExited, 1)}},
			want: []utGot{{ID: "KubeletCrashLoop", Confidence: High,
				Title:  "the kubelet crash-loops: kubelet.service keeps failing and restarting (NRestarts=0, Result=exit-code, status 1)",
				Quotes: []string{"dbus:kubelet.service: ActiveState=activating SubState=auto-restart Result=exit-code"}}},
		},
		{
			name: "caught starting again after many restarts",
			ev:   utEvidence{dbus: []*nodediagv1.UnitState{utUnit("kubelet.service", "loaded", "activating", "start", "success", 14, 0, 0)}},
			want: []utGot{{ID: "KubeletCrashLoop", Confidence: High,
				Title:  "the kubelet crash-loops: kubelet.service keeps failing and restarting (NRestarts=14, Result=success)",
				Quotes: []string{"dbus:kubelet.service: ActiveState=activating SubState=start Result=success"}}},
		},
		{
			name: "start limit hit after restarts",
			ev:   utEvidence{dbus: []*nodediagv1.UnitState{utUnit("kubelet.service", "loaded", "failed", "failed", "start-limit-hit", 5, cldExited, 1)}},
			want: []utGot{{ID: "KubeletCrashLoop", Confidence: High,
				Title:  "the kubelet crash-loops: kubelet.service keeps failing and restarting (NRestarts=5, Result=start-limit-hit, status 1)",
				Quotes: []string{"dbus:kubelet.service: ActiveState=failed SubState=failed Result=start-limit-hit"}}},
		},
		{
			name: "restarted during the bootstrap, running since",
			ev:   utEvidence{dbus: []*nodediagv1.UnitState{utUnit("kubelet.service", "loaded", "active", "running", "success", 23, cldExited, 1)}, kubelet: configPresent},
		},
		{
			name: "no config yet: the kubelet waits for kubeadm",
			ev:   utEvidence{dbus: []*nodediagv1.UnitState{crashLoop}, kubelet: configMissing, cloudInit: running},
		},
		{
			name: "no config after the bootstrap: KubeletConfigMissing's to say",
			ev:   utEvidence{dbus: []*nodediagv1.UnitState{crashLoop}, kubelet: configMissing, cloudInit: done},
		},
		{
			name: "failed, no restart",
			ev:   utEvidence{dbus: []*nodediagv1.UnitState{utUnit("kubelet.service", "loaded", "failed", "failed", "exit-code", 0, cldExited, 1)}, kubelet: configPresent},
			want: []utGot{{ID: "KubeletNotRunning", Confidence: High,
				Title:  "the kubelet is not running: kubelet.service is failed (Result=exit-code, status 1)",
				Quotes: []string{"dbus:kubelet.service: ActiveState=failed SubState=failed Result=exit-code"}}},
		},
		{
			name: "stopped",
			ev:   utEvidence{dbus: []*nodediagv1.UnitState{utUnit("kubelet.service", "loaded", "inactive", "dead", "success", 0, 0, 0)}, cloudInit: done},
			want: []utGot{{ID: "KubeletNotRunning", Confidence: High,
				Title:  "the kubelet is not running: kubelet.service is inactive (dead)",
				Quotes: []string{"dbus:kubelet.service: ActiveState=inactive SubState=dead Result=success"}}},
		},
		{
			name: "not started yet while cloud-init runs",
			ev:   utEvidence{dbus: []*nodediagv1.UnitState{utUnit("kubelet.service", "loaded", "inactive", "dead", "success", 0, 0, 0)}, cloudInit: running},
		},
		{
			name: "masked",
			ev:   utEvidence{dbus: []*nodediagv1.UnitState{utUnit("kubelet.service", "masked", "inactive", "dead", "", 0, 0, 0)}, cloudInit: running},
			want: []utGot{{ID: "KubeletNotRunning", Confidence: High,
				Title:  "the kubelet is not running: kubelet.service is masked: systemd will not start it",
				Quotes: []string{"dbus:kubelet.service: ActiveState=inactive SubState=dead Result="}}},
		},
		{
			name: "killed by a signal",
			ev:   utEvidence{dbus: []*nodediagv1.UnitState{utUnit("kubelet.service", "loaded", "failed", "failed", "signal", 0, cldKilled, 9)}},
			want: []utGot{{ID: "KubeletNotRunning", Confidence: High,
				Title:  "the kubelet is not running: kubelet.service is failed (Result=signal, signal SIGKILL)",
				Quotes: []string{"dbus:kubelet.service: ActiveState=failed SubState=failed Result=signal"}}},
		},
		{
			name: "no kubelet.service: another unit may run the kubelet",
			ev:   utEvidence{dbus: []*nodediagv1.UnitState{utUnit("kubelet.service", "not-found", "inactive", "dead", "success", 0, 0, 0)}},
		},
		{
			name: "containerd failed",
			ev:   utEvidence{dbus: []*nodediagv1.UnitState{kubeletOK, utUnit("containerd.service", "loaded", "failed", "failed", "exit-code", 0, cldExited, 1)}, kubelet: configPresent},
			want: []utGot{{ID: "RuntimeNotRunning", Confidence: High,
				Title:  "the container runtime is not running: containerd.service is failed (Result=exit-code, status 1)",
				Quotes: []string{"dbus:containerd.service: ActiveState=failed SubState=failed Result=exit-code"}}},
		},
		{
			name: "containerd crash-loops while cloud-init runs",
			ev:   utEvidence{dbus: []*nodediagv1.UnitState{utUnit("containerd.service", "loaded", "activating", "auto-restart", "exit-code", 4, cldExited, 1)}, cloudInit: running},
			want: []utGot{{ID: "RuntimeNotRunning", Confidence: High,
				Title:  "the container runtime is not running: containerd.service keeps failing and restarting (NRestarts=4, Result=exit-code, status 1)",
				Quotes: []string{"dbus:containerd.service: ActiveState=activating SubState=auto-restart Result=exit-code"}}},
		},
		{
			name: "containerd dumped core",
			ev:   utEvidence{dbus: []*nodediagv1.UnitState{utUnit("containerd.service", "loaded", "failed", "failed", "core-dump", 0, cldDumped, 11)}},
			want: []utGot{{ID: "RuntimeNotRunning", Confidence: High,
				Title:  "the container runtime is not running: containerd.service is failed (Result=core-dump, signal SIGSEGV)",
				Quotes: []string{"dbus:containerd.service: ActiveState=failed SubState=failed Result=core-dump"}}},
		},
		{
			name: "containerd not started yet while cloud-init runs",
			ev:   utEvidence{dbus: []*nodediagv1.UnitState{utUnit("containerd.service", "loaded", "inactive", "dead", "success", 0, 0, 0)}, cloudInit: running},
		},
		{
			name: "containerd stopped after the bootstrap",
			ev:   utEvidence{dbus: []*nodediagv1.UnitState{utUnit("containerd.service", "loaded", "inactive", "dead", "success", 0, 0, 0)}, cloudInit: done},
			want: []utGot{{ID: "RuntimeNotRunning", Confidence: High,
				Title:  "the container runtime is not running: containerd.service is inactive (dead)",
				Quotes: []string{"dbus:containerd.service: ActiveState=inactive SubState=dead Result=success"}}},
		},
		{
			name: "the kubelet uses CRI-O",
			ev:   utEvidence{dbus: []*nodediagv1.UnitState{kubeletOK, utUnit("containerd.service", "loaded", "failed", "failed", "exit-code", 0, cldExited, 1)}, kubelet: crio},
		},
		{
			name: "the flag's endpoint wins over the file's",
			ev:   utEvidence{dbus: []*nodediagv1.UnitState{kubeletOK, utUnit("containerd.service", "loaded", "failed", "failed", "exit-code", 0, cldExited, 1)}, kubelet: crioFlag},
		},
		{
			name: "no containerd.service",
			ev:   utEvidence{dbus: []*nodediagv1.UnitState{kubeletOK, utUnit("containerd.service", "not-found", "inactive", "dead", "success", 0, 0, 0)}},
		},
		{
			name: "both down",
			ev: utEvidence{dbus: []*nodediagv1.UnitState{crashLoop, utUnit("containerd.service", "loaded", "failed", "failed", "exit-code", 0, cldExited, 3)},
				kubelet: configPresent},
			want: []utGot{
				{ID: "KubeletCrashLoop", Confidence: High,
					Title:  "the kubelet crash-loops: kubelet.service keeps failing and restarting (NRestarts=6, Result=exit-code, status 1)",
					Quotes: []string{"dbus:kubelet.service: ActiveState=activating SubState=auto-restart Result=exit-code"}},
				{ID: "RuntimeNotRunning", Confidence: High,
					Title:  "the container runtime is not running: containerd.service is failed (Result=exit-code, status 3)",
					Quotes: []string{"dbus:containerd.service: ActiveState=failed SubState=failed Result=exit-code"}},
			},
		},
		{
			name: "derived from the journal: medium confidence, the line quoted",
			ev: utEvidence{journal: []*nodediagv1.UnitState{utJournalUnit("kubelet.service", "activating", "auto-restart", "exit-code", 7,
				"kubelet.service: Scheduled restart job, restart counter is at 7.")}},
			want: []utGot{{ID: "KubeletCrashLoop", Confidence: Medium,
				Title:  "the kubelet crash-loops: kubelet.service keeps failing and restarting (NRestarts=7, Result=exit-code)",
				Quotes: []string{"journal:kubelet.service: kubelet.service: Scheduled restart job, restart counter is at 7."}}},
		},
		{
			name: "systemd's own state wins over the journal's",
			ev: utEvidence{dbus: []*nodediagv1.UnitState{kubeletOK}, journal: []*nodediagv1.UnitState{utJournalUnit("kubelet.service", "activating", "auto-restart", "exit-code", 7,
				"kubelet.service: Scheduled restart job, restart counter is at 7.")}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.ev.input()
			var fs []*nodediagv1.Finding
			for _, r := range unitRules {
				fs = append(fs, r.Fn(in)...)
			}
			if diff := cmp.Diff(tt.want, utSummary(fs)); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
			for _, f := range fs {
				if utUnfilled.MatchString(f.Title + f.Remediation) {
					t.Errorf("%s: unfilled template: %q / %q", f.Id, f.Title, f.Remediation)
				}
				if len(f.Evidence) == 0 {
					t.Errorf("%s: no evidence quoted", f.Id)
				}
			}
		})
	}
}

// The unit's quote is its evidence as recorded, clipped and redacted like
// every quote.
func TestUnitQuote(t *testing.T) {
	at := timestamppb.New(utClock)
	u := &nodediagv1.UnitState{Name: "kubelet.service", Evidence: &nodediagv1.Quote{Source: "journal:kubelet.service", Time: at, Line: 4, Excerpt: "x"}}
	want := &nodediagv1.Quote{Source: "journal:kubelet.service", Time: at, Line: 4, Excerpt: "x"}
	if diff := cmp.Diff(want, unitQuote(u), protocmp.Transform()); diff != "" {
		t.Errorf("quote (-want +got):\n%s", diff)
	}
	if q := unitQuote(&nodediagv1.UnitState{Name: "kubelet.service"}); q != nil {
		t.Errorf("quote of a state without evidence = %v, want nil", q)
	}
}

// A crash-looping kubelet ranks above the bootstrap's consequences it
// explains, and below a cause.
func TestKubeletCrashLoopRanks(t *testing.T) {
	fs := []*nodediagv1.Finding{
		f("CloudInitFailed"), f("BootstrapSentinelMissing"), f("KubeletNotHealthy"), f("KubeletCrashLoop"),
	}
	rank(fs, rankOptions{})
	if got, want := ids(fs), []string{"KubeletCrashLoop", "KubeletNotHealthy", "CloudInitFailed", "BootstrapSentinelMissing"}; !cmp.Equal(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
	if !fs[1].Consequence || fs[0].Consequence {
		t.Errorf("consequence flags: %v %v", fs[0].Consequence, fs[1].Consequence)
	}
}

// Through the engine: containerd's failed unit raises RuntimeNotRunning once,
// and containerd's own line about why is the cause that explains it: its
// configuration does not load.
func TestUnitFindingTakesTheLogLine(t *testing.T) {
	e, err := NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	line := "containerd: failed to load TOML: /etc/containerd/config.toml: (3, 2): unexpected token unclosed table key, was expecting a table key"
	ev := utEvidence{dbus: []*nodediagv1.UnitState{
		utUnit("kubelet.service", "loaded", "active", "running", "success", 0, 0, 0),
		utUnit("containerd.service", "loaded", "failed", "failed", "exit-code", 0, cldExited, 1),
	}}.input().Ev
	ev.Probes = append(ev.Probes, &nodediagv1.ProbeEvidence{Name: "journal", Status: "ok", Data: &nodediagv1.ProbeEvidence_Journal{Journal: &nodediagv1.Journal{
		Sources: []*nodediagv1.LogExcerpt{{Source: "journal:containerd.service", Kind: "containerd", Lines: []*nodediagv1.LogLine{
			{N: 1, Time: timestamppb.New(utClock.Add(-time.Minute)), Text: line},
		}}},
	}}})
	res := e.Analyze(ev, Context{})
	var got []utGot
	for _, g := range utSummary(res.Findings) {
		if g.ID == "RuntimeNotRunning" || g.ID == "ContainerdConfigInvalid" {
			got = append(got, g)
		}
	}
	want := []utGot{
		{ID: "ContainerdConfigInvalid", Confidence: High,
			Title:  "containerd cannot load its configuration /etc/containerd/config.toml: (3, 2): unexpected token unclosed table key, was expecting a table key",
			Quotes: []string{"journal:containerd.service: " + line}},
		{ID: "RuntimeNotRunning", Confidence: High,
			Title: "the container runtime is not running: containerd.service is failed (Result=exit-code, status 1)",
			// containerd's last words: a line without a logrus level is
			// its dying output.
			Quotes: []string{"dbus:containerd.service: ActiveState=failed SubState=failed Result=exit-code", "journal:containerd.service: " + line}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}
	for _, f := range res.Findings {
		if f.Id == "RuntimeNotRunning" && !f.Consequence {
			t.Error("RuntimeNotRunning is not marked a consequence of the configuration that does not load")
		}
	}
}
