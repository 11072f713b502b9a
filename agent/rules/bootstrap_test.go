package rules

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// bsClock is the evidence clock of the bootstrap rule tests.
var bsClock = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// bsAgo is a time before bsClock.
func bsAgo(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(bsClock.Add(-d)) }

const (
	bsRunStatus  = "/run/cloud-init/status.json"
	bsRunResult  = "/run/cloud-init/result.json"
	bsDataStatus = "/var/lib/cloud/data/status.json"
	bsDataResult = "/var/lib/cloud/data/result.json"
	bsScriptsErr = "('scripts_user', RuntimeError('Runparts: 1 failures (part-001) in 1 attempted commands'))"
)

// bsStages are the five stages of a run whose modules-final ended finalEnd
// before the clock, each a minute long, back to back; notStarted and the
// stages after it have no times.
func bsStages(finalEnd time.Duration, notStarted string) []*nodediagv1.CloudInitStage {
	names := []string{"init-local", "init", "modules-init", "modules-config", "modules-final"}
	var out []*nodediagv1.CloudInitStage
	off := false
	for i, n := range names {
		sg := &nodediagv1.CloudInitStage{Name: n}
		if n == notStarted {
			off = true
		}
		if !off {
			start := finalEnd + time.Duration(len(names)-i)*time.Minute
			sg.Start, sg.Finished = bsAgo(start), bsAgo(start-time.Minute)
		}
		out = append(out, sg)
	}
	return out
}

// bsCloudInit is the evidence of a cloud-init run in this boot in the given
// status, finished 10 minutes before the clock.
func bsCloudInit(status string) *nodediagv1.CloudInit {
	ci := &nodediagv1.CloudInit{
		Status:         status,
		Datasource:     "DataSourceAzure [seed=/dev/sr0]",
		SentinelPath:   "/run/cluster-api/bootstrap-success.complete",
		StatusJsonPath: bsRunStatus,
		Stages:         bsStages(10*time.Minute, ""),
		LastUpdate:     bsAgo(10 * time.Minute),
		ResultPresent:  true,
		ResultJsonPath: bsRunResult,
		StatusSource:   bsRunResult,
		BootFinished:   true,
	}
	switch status {
	case "error":
		ci.Errors = []string{bsScriptsErr}
		ci.Stages[4].Errors = []string{bsScriptsErr}
	case "degraded":
		ci.StatusSource = bsRunStatus
		ci.Stages[3].RecoverableErrors = []string{"WARNING: Removing /etc/apt/sources.list to favor deb822 source format"}
	}
	return ci
}

// bsRunning is cloud-init running stage for d.
func bsRunning(stage string, d time.Duration) *nodediagv1.CloudInit {
	ci := &nodediagv1.CloudInit{
		Status:         "running",
		RunningStage:   stage,
		SentinelPath:   "/run/cluster-api/bootstrap-success.complete",
		StatusJsonPath: bsRunStatus,
		StatusSource:   bsRunStatus,
	}
	// Stages up to stage finished before it started; stage started d ago.
	names := []string{"init-local", "init", "modules-init", "modules-config", "modules-final"}
	at := d + 10*time.Minute
	for _, n := range names {
		sg := &nodediagv1.CloudInitStage{Name: n}
		switch {
		case n == stage:
			sg.Start = bsAgo(d)
			at = 0
		case at > 0:
			sg.Start, sg.Finished = bsAgo(at), bsAgo(at-time.Minute)
			at -= 2 * time.Minute
		}
		ci.Stages = append(ci.Stages, sg)
	}
	ci.LastUpdate = bsAgo(d)
	return ci
}

func with(ci *nodediagv1.CloudInit, mod func(*nodediagv1.CloudInit)) *nodediagv1.CloudInit {
	mod(ci)
	return ci
}

// bsOutputLog is cloud-init-output.log as the logs probe reports it.
func bsOutputLog(lines ...string) *nodediagv1.ProbeEvidence {
	src := &nodediagv1.LogExcerpt{Source: "/var/log/cloud-init-output.log", Kind: "cloud-init-output"}
	for i, l := range lines {
		src.Lines = append(src.Lines, &nodediagv1.LogLine{N: int32(i + 1), Text: l})
	}
	return &nodediagv1.ProbeEvidence{Name: "logs", Data: &nodediagv1.ProbeEvidence_Logs{Logs: &nodediagv1.Logs{Sources: []*nodediagv1.LogExcerpt{src}}}}
}

func bsKubeadm(k *nodediagv1.Kubeadm) *nodediagv1.ProbeEvidence {
	return &nodediagv1.ProbeEvidence{Name: "kubeadm", Data: &nodediagv1.ProbeEvidence_Kubeadm{Kubeadm: k}}
}

func bsBinaries(bs ...*nodediagv1.Binary) *nodediagv1.ProbeEvidence {
	return &nodediagv1.ProbeEvidence{Name: "binary-versions", Data: &nodediagv1.ProbeEvidence_Binaries{Binaries: &nodediagv1.Binaries{Binaries: bs}}}
}

func bsOS(boot time.Duration) *nodediagv1.ProbeEvidence {
	return &nodediagv1.ProbeEvidence{Name: "os", Data: &nodediagv1.ProbeEvidence_Os{Os: &nodediagv1.OSInfo{BootTime: bsAgo(boot)}}}
}

var (
	bsKubeadmJoin = bsKubeadm(&nodediagv1.Kubeadm{ConfigFiles: []*nodediagv1.KubeadmConfigFile{
		{Path: "/run/kubeadm/kubeadm-join-config.yaml", Kinds: []string{"JoinConfiguration"}},
	}})
	bsJoinLine   = "[preflight] Running pre-flight checks"
	bsFYILine    = "[preflight] FYI: You can look at this config file with 'kubectl -n kube-system get cm kubeadm-config -o yaml'"
	bsKubeadmCmd = "kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml  && echo success > /run/cluster-api/bootstrap-success.complete"
	bsKubeadmBin = &nodediagv1.Binary{Name: "kubeadm", Path: "/usr/bin/kubeadm", Version: "v1.32.0", Command: "/usr/bin/kubeadm version -o short", Output: "v1.32.0\n", Method: "exec"}
)

// bsInput is the Input the engine builds from evidence collected live at bsClock.
func bsInput(ci *nodediagv1.CloudInit, ctx Context, more ...*nodediagv1.ProbeEvidence) *Input {
	ev := &nodediagv1.Evidence{CollectedAt: timestamppb.New(bsClock)}
	if ci != nil {
		ev.Probes = append(ev.Probes, &nodediagv1.ProbeEvidence{Name: "cloud-init", Status: "ok", Data: &nodediagv1.ProbeEvidence_CloudInit{CloudInit: ci}})
	}
	ev.Probes = append(ev.Probes, more...)
	return newInput(ev, ctx)
}

func runBootstrapRules(in *Input) []*nodediagv1.Finding {
	var out []*nodediagv1.Finding
	for _, r := range bootstrapRules {
		out = append(out, r.Fn(in)...)
	}
	return out
}

func bsQuote(source, text string, at *timestamppb.Timestamp) *nodediagv1.Quote {
	q := QuoteText(source, text)
	q.Time = at
	return q
}

func bsLogQuote(n int32, text string) *nodediagv1.Quote {
	return &nodediagv1.Quote{Source: "/var/log/cloud-init-output.log", Line: n, Excerpt: text}
}

func TestBootstrapRules(t *testing.T) {
	const sentinel = "/run/cluster-api/bootstrap-success.complete"
	finalEnd := bsAgo(10 * time.Minute).AsTime().Format(time.RFC3339)
	sentinelMissing := func(status *nodediagv1.Quote, capi *nodediagv1.Quote) *nodediagv1.Finding {
		return BootstrapSentinelMissing.Finding(Params{"sentinel": sentinel}, QuoteText(sentinel, "absent"), status, capi)
	}
	doneQuote := bsQuote(bsRunResult, "status: done; modules-final finished "+finalEnd, bsAgo(10*time.Minute))
	joinQuote := QuoteText("/run/kubeadm/kubeadm-join-config.yaml", "present: JoinConfiguration")

	tests := []struct {
		name string
		ci   *nodediagv1.CloudInit
		ctx  Context
		more []*nodediagv1.ProbeEvidence
		want []*nodediagv1.Finding
	}{
		{
			name: "healthy CAPI node: done and the sentinel present",
			ci:   with(bsCloudInit("done"), func(ci *nodediagv1.CloudInit) { ci.SentinelPresent, ci.ClusterApiDirPresent = true, true }),
			more: []*nodediagv1.ProbeEvidence{bsKubeadmJoin, bsOutputLog(bsJoinLine)},
		},
		{
			name: "healthy CAPI node, 23.4+ degraded (recoverable errors only)",
			ci:   with(bsCloudInit("degraded"), func(ci *nodediagv1.CloudInit) { ci.SentinelPresent, ci.ClusterApiDirPresent = true, true }),
			more: []*nodediagv1.ProbeEvidence{bsKubeadmJoin},
		},
		{
			name: "non-CAPI host: done, no sentinel, nothing of kubeadm",
			ci:   bsCloudInit("done"),
			more: []*nodediagv1.ProbeEvidence{bsOutputLog("Cloud-init v. 22.4.2 finished at Wed, 01 May 2024 11:50:00 +0000. Datasource DataSourceAzure [seed=/dev/sr0].  Up 38.79 seconds")},
		},
		{
			name: "non-CAPI host with cloud-init disabled",
			ci:   &nodediagv1.CloudInit{Status: "disabled", DisabledBy: "/etc/cloud/cloud-init.disabled", StatusSource: "/etc/cloud/cloud-init.disabled", SentinelPath: sentinel},
		},
		{
			name: "no cloud-init evidence at all",
		},
		{
			name: "CAPI node, done, sentinel absent: the bootstrap stopped (output log names the sentinel)",
			ci:   bsCloudInit("done"),
			more: []*nodediagv1.ProbeEvidence{bsOutputLog(bsJoinLine, "+ "+bsKubeadmCmd)},
			want: []*nodediagv1.Finding{sentinelMissing(doneQuote, bsLogQuote(2, "+ "+bsKubeadmCmd))},
		},
		{
			// kubeadm run by hand or by another tool writes no sentinel:
			// only what CAPI itself leaves proves a CAPI bootstrap.
			name: "kubeadm's output alone does not make a CAPI node",
			ci:   bsCloudInit("done"),
			more: []*nodediagv1.ProbeEvidence{bsOutputLog(bsJoinLine, bsFYILine)},
		},
		{
			name: "CAPI node known by its sentinel command in cloud-init-output.log",
			ci:   bsCloudInit("done"),
			more: []*nodediagv1.ProbeEvidence{bsOutputLog(bsJoinLine, "+ echo success > /run/cluster-api/bootstrap-success.complete")},
			want: []*nodediagv1.Finding{sentinelMissing(doneQuote, bsLogQuote(2, "+ echo success > /run/cluster-api/bootstrap-success.complete"))},
		},
		{
			name: "CAPI node known by its kubeadm configuration",
			ci:   bsCloudInit("done"),
			more: []*nodediagv1.ProbeEvidence{bsKubeadmJoin},
			want: []*nodediagv1.Finding{sentinelMissing(doneQuote, joinQuote)},
		},
		{
			name: "CAPI node known by /run/cluster-api only",
			ci:   with(bsCloudInit("degraded"), func(ci *nodediagv1.CloudInit) { ci.ClusterApiDirPresent = true }),
			want: []*nodediagv1.Finding{sentinelMissing(
				bsQuote(bsRunStatus, "status: degraded (recoverable errors only); modules-final finished "+finalEnd, bsAgo(10*time.Minute)),
				QuoteText("/run/cluster-api", "present"))},
		},
		{
			name: "cloud-init error on a CAPI node: errors quoted verbatim, sentinel missing",
			ci:   bsCloudInit("error"),
			more: []*nodediagv1.ProbeEvidence{bsKubeadmJoin},
			want: []*nodediagv1.Finding{
				CloudInitFailed.Finding(Params{}, bsQuote(bsRunResult, bsScriptsErr, bsAgo(10*time.Minute))),
				sentinelMissing(bsQuote(bsRunResult, "status: error: "+bsScriptsErr+"; modules-final finished "+finalEnd, bsAgo(10*time.Minute)), joinQuote),
			},
		},
		{
			name: "cloud-init error on a non-CAPI host: only the failure",
			ci: with(bsCloudInit("error"), func(ci *nodediagv1.CloudInit) {
				// Errors from status.json (result.json unreadable): quoted from there.
				ci.StatusSource = bsRunStatus
				ci.Errors = append(ci.Errors, "No instance datasource found.")
				ci.Stages[1].Errors = []string{"No instance datasource found."}
			}),
			want: []*nodediagv1.Finding{CloudInitFailed.Finding(Params{},
				bsQuote(bsRunStatus, bsScriptsErr, bsAgo(10*time.Minute)),
				bsQuote(bsRunStatus, "No instance datasource found.", bsAgo(13*time.Minute)))},
		},
		{
			name: "running 5 minutes: bootstrap in progress (info only)",
			ci:   bsRunning("modules-final", 5*time.Minute),
			more: []*nodediagv1.ProbeEvidence{bsKubeadmJoin},
			want: []*nodediagv1.Finding{BootstrapInProgress.Finding(Params{"stage": "modules-final"},
				bsQuote(bsRunStatus, "stage modules-final running since 2024-05-01T11:55:00Z", bsAgo(5*time.Minute)))},
		},
		{
			name: "running 2 hours: stuck",
			ci:   bsRunning("modules-final", 2*time.Hour),
			more: []*nodediagv1.ProbeEvidence{bsKubeadmJoin},
			want: []*nodediagv1.Finding{CloudInitStillRunning.Finding(Params{"stage": "modules-final", "duration": "2h"},
				bsQuote(bsRunStatus, "stage modules-final running since 2024-05-01T10:00:00Z", bsAgo(2*time.Hour)))},
		},
		{
			name: "running 47 minutes in modules-config, stage named only by its unfinished start",
			ci:   with(bsRunning("modules-config", 47*time.Minute), func(ci *nodediagv1.CloudInit) { ci.RunningStage = "" }),
			want: []*nodediagv1.Finding{CloudInitStillRunning.Finding(Params{"stage": "modules-config", "duration": "47m"},
				bsQuote(bsRunStatus, "stage modules-config running since 2024-05-01T11:13:00Z", bsAgo(47*time.Minute)))},
		},
		{
			name: "exactly 30 minutes is not yet stuck",
			ci:   bsRunning("modules-final", 30*time.Minute),
			want: []*nodediagv1.Finding{BootstrapInProgress.Finding(Params{"stage": "modules-final"},
				bsQuote(bsRunStatus, "stage modules-final running since 2024-05-01T11:30:00Z", bsAgo(30*time.Minute)))},
		},
		{
			name: "between stages for 3 hours: waiting for the next stage since the last update",
			ci: &nodediagv1.CloudInit{
				Status: "running", StatusJsonPath: bsRunStatus, StatusSource: bsRunStatus,
				Stages:     bsStages(3*time.Hour, "modules-config"),
				LastUpdate: bsAgo(3*time.Hour + 2*time.Minute),
			},
			want: []*nodediagv1.Finding{CloudInitStillRunning.Finding(Params{"stage": "modules-config", "duration": "3h2m"},
				bsQuote(bsRunStatus, "stage modules-config running since 2024-05-01T08:58:00Z", bsAgo(3*time.Hour+2*time.Minute)))},
		},
		{
			name: "running with no time known: in progress, never stuck",
			ci:   &nodediagv1.CloudInit{Status: "running", RunningStage: "init", StatusJsonPath: bsRunStatus},
			want: []*nodediagv1.Finding{BootstrapInProgress.Finding(Params{"stage": "init"}, QuoteText(bsRunStatus, "status: running, stage init"))},
		},
		{
			name: "disabled on a node meant for kubeadm (kubeadm installed, never joined)",
			ci:   &nodediagv1.CloudInit{Status: "disabled", DisabledBy: "/etc/cloud/cloud-init.disabled", StatusSource: "/etc/cloud/cloud-init.disabled", SentinelPath: sentinel},
			more: []*nodediagv1.ProbeEvidence{
				bsBinaries(bsKubeadmBin),
				bsKubeadm(&nodediagv1.Kubeadm{KubeletConf: &nodediagv1.KubeconfigFile{Path: "/etc/kubernetes/kubelet.conf"}}),
			},
			want: []*nodediagv1.Finding{CloudInitDisabled.Finding(Params{"marker": "/etc/cloud/cloud-init.disabled"},
				QuoteText("/etc/cloud/cloud-init.disabled", "present"),
				QuoteText(sentinel, "absent"),
				&nodediagv1.Quote{Source: "exec:/usr/bin/kubeadm version -o short", Excerpt: "v1.32.0"},
				QuoteText("/etc/kubernetes/kubelet.conf", "absent"))},
		},
		{
			name: "disabled on a node a Machine expects (collector context)",
			ci:   &nodediagv1.CloudInit{Status: "disabled", DisabledBy: "/run/cloud-init/disabled", StatusSource: "/run/cloud-init/disabled", SentinelPath: sentinel},
			ctx:  Context{ExpectVersion: "v1.32.0"},
			want: []*nodediagv1.Finding{CloudInitDisabled.Finding(Params{"marker": "/run/cloud-init/disabled"},
				QuoteText("/run/cloud-init/disabled", "present"), QuoteText(sentinel, "absent"))},
		},
		{
			name: "disabled on a joined kubeadm node: expected",
			ci:   &nodediagv1.CloudInit{Status: "disabled", DisabledBy: "/etc/cloud/cloud-init.disabled", SentinelPath: sentinel},
			more: []*nodediagv1.ProbeEvidence{
				bsBinaries(bsKubeadmBin),
				bsKubeadm(&nodediagv1.Kubeadm{KubeletConf: &nodediagv1.KubeconfigFile{Path: "/etc/kubernetes/kubelet.conf", Present: true}}),
			},
		},
		{
			name: "disabled after the bootstrap ran in an earlier boot: expected",
			ci: &nodediagv1.CloudInit{
				Status: "disabled", DisabledBy: "/etc/cloud/cloud-init.disabled", SentinelPath: sentinel,
				StatusJsonPath: bsDataStatus, Stages: bsStages(48*time.Hour, ""),
				ScriptsUserRan: bsAgo(48*time.Hour + 90*time.Second),
			},
			ctx: Context{ExpectVersion: "v1.32.0"},
		},
		{
			name: "rebooted CAPI node: runcmd ran before this boot, the sentinel is not written again",
			ci: with(bsCloudInit("done"), func(ci *nodediagv1.CloudInit) {
				ci.ScriptsUserRan = bsAgo(72 * time.Hour)
			}),
			more: []*nodediagv1.ProbeEvidence{bsOutputLog("+ " + bsKubeadmCmd), bsOS(time.Hour)},
		},
		{
			name: "rebooted CAPI node, boot time unknown: runcmd ran before this boot's first stage",
			ci: with(bsCloudInit("done"), func(ci *nodediagv1.CloudInit) {
				ci.ScriptsUserRan = bsAgo(72 * time.Hour)
			}),
			more: []*nodediagv1.ProbeEvidence{bsOutputLog("+ " + bsKubeadmCmd)},
		},
		{
			name: "runcmd ran in this boot: the sentinel should be there",
			ci: with(bsCloudInit("done"), func(ci *nodediagv1.CloudInit) {
				ci.ScriptsUserRan = bsAgo(11 * time.Minute)
			}),
			more: []*nodediagv1.ProbeEvidence{bsKubeadmJoin, bsOS(20 * time.Minute)},
			want: []*nodediagv1.Finding{sentinelMissing(doneQuote, joinQuote)},
		},
		{
			name: "state read only from /var/lib (a copy without /run): the sentinel's absence proves nothing",
			ci: with(bsCloudInit("done"), func(ci *nodediagv1.CloudInit) {
				ci.StatusJsonPath, ci.ResultJsonPath, ci.StatusSource = bsDataStatus, bsDataResult, bsDataResult
			}),
			more: []*nodediagv1.ProbeEvidence{bsKubeadmJoin},
		},
		{
			name: "not started yet: nothing to say",
			ci:   &nodediagv1.CloudInit{Status: "not-started", StatusSource: "/run/cloud-init/enabled", SentinelPath: sentinel, ClusterApiDirPresent: true},
			more: []*nodediagv1.ProbeEvidence{bsKubeadmJoin},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := runBootstrapRules(bsInput(tt.ci, tt.ctx, tt.more...))
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
			for _, f := range got {
				if len(f.Evidence) == 0 {
					t.Errorf("%s without evidence", f.Id)
				}
				if p, _ := Lookup(f.Id); p != nil {
					for _, name := range p.TemplateParams() {
						if containsPlaceholder(f.Title+f.Remediation, name) {
							t.Errorf("%s: parameter {%s} not filled: %q", f.Id, name, f.Title)
						}
					}
				}
			}
		})
	}
}

func containsPlaceholder(s, name string) bool {
	for i := 0; i+len(name)+2 <= len(s); i++ {
		if s[i] == '{' && s[i+1:i+1+len(name)] == name && s[i+1+len(name)] == '}' {
			return true
		}
	}
	return false
}

// Severities the operator sees: the healthy node exits 0, a bootstrap in
// progress is information, a stuck one a warning, a failure an error.
func TestBootstrapRuleSeverities(t *testing.T) {
	capi := []*nodediagv1.ProbeEvidence{bsKubeadmJoin}
	healthy := with(bsCloudInit("done"), func(ci *nodediagv1.CloudInit) { ci.SentinelPresent = true })
	tests := []struct {
		name string
		in   *Input
		want map[string]string
	}{
		{name: "healthy", in: bsInput(healthy, Context{}, capi...), want: map[string]string{}},
		{name: "running 5m", in: bsInput(bsRunning("modules-final", 5*time.Minute), Context{}, capi...), want: map[string]string{"BootstrapInProgress": Info}},
		{name: "running 2h", in: bsInput(bsRunning("modules-final", 2*time.Hour), Context{}, capi...), want: map[string]string{"CloudInitStillRunning": Warning}},
		{name: "error", in: bsInput(bsCloudInit("error"), Context{}, capi...), want: map[string]string{"CloudInitFailed": Error, "BootstrapSentinelMissing": Error}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := map[string]string{}
			for _, f := range runBootstrapRules(tt.in) {
				got[f.Id] = f.Severity
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("severities (-want +got):\n%s", diff)
			}
		})
	}
}

// On a snapshot the evidence clock is the newest time in the evidence: a
// copy of a node stuck in modules-final, examined a day later, is judged on
// its own log's last line, not on the day of examination.
func TestBootstrapRunningOnSnapshotClock(t *testing.T) {
	ci := bsRunning("modules-final", 2*time.Hour)
	logs := bsOutputLog("[kubelet-check] Waiting for a healthy kubelet at http://127.0.0.1:10248/healthz. This can take up to 4m0s")
	logs.GetLogs().Sources[0].LastTime = timestamppb.New(bsClock)
	ev := &nodediagv1.Evidence{
		CollectedAt: timestamppb.New(bsClock.Add(24 * time.Hour)),
		Snapshot:    true,
		Probes: []*nodediagv1.ProbeEvidence{
			{Name: "cloud-init", Data: &nodediagv1.ProbeEvidence_CloudInit{CloudInit: ci}},
			logs,
		},
	}
	var got []string
	for _, f := range runBootstrapRules(newInput(ev, Context{})) {
		got = append(got, f.Id+": "+f.Title)
	}
	want := []string{"CloudInitStillRunning: cloud-init has been running stage modules-final for 2h"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}
}

func TestHumanDuration(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want string
	}{
		{40 * time.Second, "40s"},
		{47*time.Minute + 59*time.Second, "47m"},
		{2 * time.Hour, "2h"},
		{2*time.Hour + 5*time.Minute, "2h5m"},
		{26 * time.Hour, "1d2h"},
		{72 * time.Hour, "3d"},
	}
	for _, tt := range tests {
		if got := humanDuration(tt.in); got != tt.want {
			t.Errorf("humanDuration(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestBootstrapRulesAreWired(t *testing.T) {
	names := map[string]bool{}
	for _, r := range goRules() {
		names[r.Name] = true
	}
	for _, r := range bootstrapRules {
		if !names[r.Name] {
			t.Errorf("rule %s is not in goRules()", r.Name)
		}
	}
}

// A module error beside a completed bootstrap is a warning, not the node's
// failure.
func TestCloudInitModuleFailedBesideBootstrap(t *testing.T) {
	ci := &nodediagv1.CloudInit{Status: "error", Errors: []string{"('package_update_upgrade_install', ProcessExecutionError())"},
		StatusSource: "/run/cloud-init/result.json", SentinelPresent: true, SentinelPath: "/run/cluster-api/bootstrap-success.complete"}
	in := &Input{Ev: &nodediagv1.Evidence{Probes: []*nodediagv1.ProbeEvidence{{Name: "cloud-init", Status: "ok", Data: &nodediagv1.ProbeEvidence_CloudInit{CloudInit: ci}}}}}
	fs := cloudInitFailedRule(in)
	if len(fs) != 1 || fs[0].Id != "CloudInitModuleFailed" || fs[0].Severity != Warning {
		t.Fatalf("got %v, want one CloudInitModuleFailed warning", fs)
	}
}

// cloud-init on the None datasource is the cause only when the bootstrap its
// user data would have run did not happen: a node whose kubelet has its
// configuration (provisioned by hand on DataSourceNone) gets no finding.
func TestCloudInitNoDatasource(t *testing.T) {
	none := func(ci *nodediagv1.CloudInit) {
		ci.Datasource = "DataSourceNone"
		ci.DatasourceConfig = []*nodediagv1.SourceLine{{Path: "/etc/cloud/cloud.cfg.d/99-installer.cfg", Line: 9, Text: "datasource_list:"}}
	}
	kubelet := func(present bool) *nodediagv1.ProbeEvidence {
		kc := &nodediagv1.KubeletConfig{
			Config: &nodediagv1.KubeletConfigFile{Path: "/var/lib/kubelet/config.yaml", Present: present},
			Flags: []*nodediagv1.KubeletFlag{{Name: "config", Value: "/var/lib/kubelet/config.yaml", Active: true,
				Source: &nodediagv1.SourceLine{Path: "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf", Line: 4, Text: `Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"`}}},
		}
		return &nodediagv1.ProbeEvidence{Name: "kubelet-config", Data: &nodediagv1.ProbeEvidence_KubeletConfig{KubeletConfig: kc}}
	}
	finished := bsOutputLog("Cloud-init v. 22.4.2-0ubuntu0~22.04.1 finished at Thu, 23 Feb 2023 10:13:01 +0000. Datasource DataSourceNone.  Up 52.40 seconds")
	tests := []struct {
		name string
		in   *Input
		want bool
	}{
		{"None, the kubelet's configuration never written", bsInput(with(bsCloudInit("done"), none), Context{}, kubelet(false), finished), true},
		{"None, datasource read from the final message only", bsInput(with(bsCloudInit("done"), func(ci *nodediagv1.CloudInit) { ci.Datasource = "" }), Context{}, kubelet(false), bsOutputLog("Cloud-init v. 22.4.2 finished at Thu, 23 Feb 2023 10:13:01 +0000. Datasource DataSourceNone.  Up 52.40 seconds")), true},
		{"None, but the kubelet has its configuration", bsInput(with(bsCloudInit("done"), none), Context{}, kubelet(true), finished), false},
		{"Azure datasource, configuration missing", bsInput(bsCloudInit("done"), Context{}, kubelet(false)), false},
		{"None, cloud-init still running", bsInput(with(bsRunning("modules-final", time.Minute), none), Context{}, kubelet(false)), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := cloudInitNoDatasourceRule(tt.in)
			if !tt.want {
				if len(fs) != 0 {
					t.Fatalf("findings %v, want none", fs)
				}
				return
			}
			if len(fs) != 1 || fs[0].Id != CloudInitNoDatasource.ID || fs[0].Category != CatSentinelMissing {
				t.Fatalf("findings %v, want one CloudInitNoDatasource", fs)
			}
			var srcs []string
			for _, q := range fs[0].Evidence {
				srcs = append(srcs, q.GetSource())
			}
			if tt.in.CloudInit().GetDatasourceConfig() != nil && srcs[0] != "/etc/cloud/cloud.cfg.d/99-installer.cfg" {
				t.Errorf("first quote from %s, want the datasource configuration line", srcs[0])
			}
			if last := srcs[len(srcs)-1]; last != "/var/lib/kubelet/config.yaml" {
				t.Errorf("last quote from %s, want the missing kubelet configuration", last)
			}
			if !containsQuote(fs[0], "Datasource DataSourceNone.") {
				t.Errorf("quotes %v, want cloud-init's final message", srcs)
			}
		})
	}
}

func containsQuote(f *nodediagv1.Finding, sub string) bool {
	for _, q := range f.GetEvidence() {
		if strings.Contains(q.GetExcerpt(), sub) {
			return true
		}
	}
	return false
}
