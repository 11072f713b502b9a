package rules

import (
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// Bootstrap rules: what cloud-init's own state and the Cluster API sentinel
// say about the node's bootstrap. They judge the cloud-init probe's evidence
// only; the failing command itself (kubeadm init/join, a download, a
// preKubeadmCommand) is named by the log signatures, whose findings these
// symptoms rank below.

// bootstrapStuckAfter is how long one cloud-init stage may run before the
// bootstrap counts as stuck rather than in progress. A CAPI bootstrap on a
// healthy VM finishes modules-final (kubeadm included) in a few minutes;
// kubeadm's own waits (kubelet health, the control plane, TLS bootstrap) time
// out after 4 to 5 minutes each.
const bootstrapStuckAfter = 30 * time.Minute

// bootstrapMaxErrorQuotes caps the cloud-init errors quoted in one finding.
const bootstrapMaxErrorQuotes = 5

// Host paths the bootstrap rules name (they read nothing: the probe did).
const (
	// Written by CABPK's last runcmd (see agent/probes/cloudinit.go).
	bootstrapSentinelPath = "/run/cluster-api/bootstrap-success.complete"
	bootstrapCAPIDir      = "/run/cluster-api"
	// kubeadm writes it when the node has joined (or initialised) a cluster.
	bootstrapKubeletConf = "/etc/kubernetes/kubelet.conf"
)

// bootstrapLogKinds are the logs of the bootstrap: cloud-init's output
// (cloud-init-output.log, the journal of cloud-init's units) and its own log.
var bootstrapLogKinds = []string{"cloud-init-output", "cloud-init"}

// bootstrapFirstErrors is how many of the bootstrap's first error lines a
// bootstrap finding quotes.
const bootstrapFirstErrors = 2

var bootstrapRules = []Rule{
	{Name: "cloud-init-failed", Fn: cloudInitFailedRule},
	{Name: "cloud-init-running", Fn: cloudInitRunningRule},
	{Name: "cloud-init-disabled", Fn: cloudInitDisabledRule},
	{Name: "bootstrap-sentinel-missing", Fn: bootstrapSentinelMissingRule},
	{Name: "cloud-init-no-datasource", Fn: cloudInitNoDatasourceRule},
	{Name: "bootstrap-command-cause", Fn: bootstrapCommandCauseRule},
}

// bootstrapCommandCauseRule: cloud-init says the bootstrap script failed
// ("Failed running /var/lib/cloud/instance/scripts/part-001 [1]"), which
// is only the exit status of its last command; what to fix is what the
// script printed as it failed. The finding quotes the first error lines of
// the bootstrap's output before cloud-init's report, then the report (the
// signature's other lines join it).
func bootstrapCommandCauseRule(in *Input) []*nodediagv1.Finding {
	fails := in.Matched(BootstrapCommandFailed.ID)
	if len(fails) == 0 {
		return nil
	}
	fail := fails[0]
	var quotes []*nodediagv1.Quote
	for _, q := range in.FirstErrors(bootstrapLogKinds, bootstrapFirstErrors) {
		// Before the report: above it in its file, or not later in time
		// (another log of the bootstrap: the journal of bootstrap.service).
		before := q.GetSource() == fail.Src.GetSource() && q.GetLine() > 0 && q.GetLine() < fail.Line.GetN()
		if !before && q.GetTime() != nil && fail.Line.GetTime() != nil {
			before = !q.GetTime().AsTime().After(fail.Line.GetTime().AsTime())
		}
		if before {
			quotes = append(quotes, q)
		}
	}
	if len(quotes) == 0 {
		return nil
	}
	quotes = append(quotes, fail.Quote())
	return []*nodediagv1.Finding{BootstrapCommandFailed.Finding(Params{"command": fail.Group("command")}, quotes...)}
}

// maxDatasourceQuotes bounds the datasource configuration lines quoted.
const maxDatasourceQuotes = 4

// cloudInitNoDatasourceRule: cloud-init finished in this boot on the None
// datasource, and the bootstrap its user data would have run did not
// happen (the kubelet's configuration absent after it, or CAPI's sentinel
// missing): the machine's user data never reached cloud-init. The cause of
// those symptoms, quoted by the lines that chose the datasource.
//
// A node provisioned by hand also runs on DataSourceNone (an Ubuntu server
// install keeps subiquity's datasource_list [None]); there the kubelet's
// missing configuration says only that kubeadm has not run yet, hence the
// medium confidence and a title that states what cloud-init did.
func cloudInitNoDatasourceRule(in *Input) []*nodediagv1.Finding {
	ci := in.CloudInit()
	if ci == nil || !cloudInitThisBoot(ci) {
		return nil
	}
	switch ci.GetStatus() {
	case "done", "error", "degraded":
	default:
		return nil
	}
	var fin *Match
	if ms := in.Matched("cloud-init-finished"); len(ms) > 0 {
		fin = &ms[len(ms)-1]
	}
	ds := ci.GetDatasource()
	if ds == "" && fin != nil {
		ds = strings.TrimSuffix(fin.Group("datasource"), ".")
	}
	if !strings.HasPrefix(ds, "DataSourceNone") {
		return nil
	}
	symptom := kubeletConfigMissing(in)
	if len(symptom) == 0 {
		symptom = bootstrapSentinelMissingRule(in)
	}
	if len(symptom) == 0 || len(symptom[0].GetEvidence()) == 0 {
		return nil
	}
	var quotes []*nodediagv1.Quote
	for i, l := range ci.GetDatasourceConfig() {
		if i == maxDatasourceQuotes {
			break
		}
		quotes = append(quotes, QuoteLine(l))
	}
	if fin != nil {
		quotes = append(quotes, fin.Quote())
	} else {
		src := ci.GetResultJsonPath()
		if src == "" {
			src = ci.GetStatusJsonPath()
		}
		quotes = append(quotes, QuoteText(src, "datasource: "+ds))
	}
	quotes = append(quotes, cloudInitStatusQuote(ci), symptom[0].GetEvidence()[0])
	return []*nodediagv1.Finding{CloudInitNoDatasource.Finding(Params{"datasource": ds}, quotes...)}
}

// failedCloudInitUnits quotes what systemd last said of each cloud-init
// unit that failed ("Failed to start Execute cloud user/final scripts.").
func failedCloudInitUnits(in *Input) []*nodediagv1.Quote {
	var out []*nodediagv1.Quote
	for _, u := range in.Journal().GetUnits() {
		if strings.HasPrefix(u.GetName(), "cloud-") && u.GetActiveState() == "failed" && u.GetEvidence() != nil {
			out = append(out, u.GetEvidence())
		}
	}
	return out
}

// cloudInitFailedRule: cloud-init finished with errors. Each error is
// quoted verbatim from the file the probe found it in (result.json, which
// gathers every stage's errors, or status.json).
func cloudInitFailedRule(in *Input) []*nodediagv1.Finding {
	ci := in.CloudInit()
	if ci.GetStatus() != "error" {
		return nil
	}
	src := ci.GetStatusSource()
	if src == "" {
		src = ci.GetStatusJsonPath()
	}
	errs := ci.GetErrors()
	if len(errs) == 0 {
		// The probe keeps the errors in Errors; stages are a fallback for
		// evidence written by an older agent.
		for _, sg := range ci.GetStages() {
			errs = append(errs, sg.GetErrors()...)
		}
	}
	var quotes []*nodediagv1.Quote
	for i, e := range errs {
		if i == bootstrapMaxErrorQuotes {
			break
		}
		q := QuoteText(src, e)
		q.Time = cloudInitErrorTime(ci, e)
		quotes = append(quotes, q)
	}
	if len(quotes) == 0 {
		quotes = append(quotes, cloudInitStatusQuote(ci))
	}
	// The failing step's own words: result.json only says which module
	// failed. Without any, systemd's word of the cloud-init unit that
	// failed.
	first := in.FirstErrors(bootstrapLogKinds, bootstrapFirstErrors)
	quotes = append(quotes, first...)
	if len(first) == 0 {
		quotes = append(quotes, failedCloudInitUnits(in)...)
	}
	if ci.GetSentinelPresent() {
		// The bootstrap completed: a module failed beside it (a package
		// update without a mirror on an air-gapped node), not the node.
		sentinel := ci.GetSentinelPath()
		if sentinel == "" {
			sentinel = bootstrapSentinelPath
		}
		quotes = append(quotes, QuoteText(sentinel, "present: the bootstrap completed"))
		return []*nodediagv1.Finding{CloudInitModuleFailed.Finding(Params{}, quotes...)}
	}
	return []*nodediagv1.Finding{CloudInitFailed.Finding(Params{}, quotes...)}
}

// cloudInitErrorTime is when the stage that reported e ended, or the last
// update of cloud-init's state.
func cloudInitErrorTime(ci *nodediagv1.CloudInit, e string) *timestamppb.Timestamp {
	for _, sg := range ci.GetStages() {
		for _, se := range sg.GetErrors() {
			if se == e {
				if sg.GetFinished() != nil {
					return sg.GetFinished()
				}
				return sg.GetStart()
			}
		}
	}
	return ci.GetLastUpdate()
}

// cloudInitRunningRule: cloud-init is still running. Past bootstrapStuckAfter
// in one stage (on the evidence's clock) it is stuck; before that it is a
// bootstrap in progress.
func cloudInitRunningRule(in *Input) []*nodediagv1.Finding {
	ci := in.CloudInit()
	if ci.GetStatus() != "running" {
		return nil
	}
	stage, since := cloudInitRunningSince(ci)
	if stage == "" {
		stage = "unknown"
	}
	src := ci.GetStatusSource()
	if src == "" {
		src = ci.GetStatusJsonPath()
	}
	if since.IsZero() || in.Clock.IsZero() {
		// No time to measure against: cannot call it stuck.
		q := QuoteText(src, "status: running, stage "+stage)
		return []*nodediagv1.Finding{BootstrapInProgress.Finding(Params{"stage": stage}, q)}
	}
	q := QuoteText(src, fmt.Sprintf("stage %s running since %s", stage, since.UTC().Format(time.RFC3339)))
	q.Time = timestamppb.New(since)
	d := in.Clock.Sub(since)
	if d > bootstrapStuckAfter {
		return []*nodediagv1.Finding{CloudInitStillRunning.Finding(Params{"stage": stage, "duration": humanDuration(d)}, q)}
	}
	return []*nodediagv1.Finding{BootstrapInProgress.Finding(Params{"stage": stage}, q)}
}

// cloudInitRunningSince is the stage cloud-init is in and since when: the
// running stage of status.json, else the first stage that started and did
// not finish, else (between two stages, each its own systemd unit) the next
// stage, waiting since the last update.
func cloudInitRunningSince(ci *nodediagv1.CloudInit) (string, time.Time) {
	stages := ci.GetStages()
	if name := ci.GetRunningStage(); name != "" {
		for _, sg := range stages {
			if sg.GetName() == name && sg.GetStart() != nil {
				return name, sg.GetStart().AsTime()
			}
		}
	}
	for _, sg := range stages {
		if sg.GetStart() != nil && sg.GetFinished() == nil {
			return sg.GetName(), sg.GetStart().AsTime()
		}
	}
	name := ci.GetRunningStage()
	if name == "" {
		for _, sg := range stages {
			if sg.GetStart() == nil {
				name = sg.GetName()
				break
			}
		}
	}
	var since time.Time
	if ci.GetLastUpdate() != nil {
		since = ci.GetLastUpdate().AsTime()
	}
	return name, since
}

// cloudInitDisabledRule: cloud-init is disabled on a node that was meant to
// be bootstrapped by it and never was. A cloud-init that ran for this
// instance and was disabled afterwards (so that it does not run again) is
// expected; so is a disabled cloud-init on a host nothing says is to be
// bootstrapped.
func cloudInitDisabledRule(in *Input) []*nodediagv1.Finding {
	ci := in.CloudInit()
	if ci.GetStatus() != "disabled" || ci.GetSentinelPresent() || cloudInitEverRan(ci) {
		return nil
	}
	expected, ok := bootstrapExpected(in, ci)
	if !ok {
		return nil
	}
	marker := ci.GetDisabledBy()
	if marker == "" {
		marker = ci.GetStatusSource()
	}
	quotes := append([]*nodediagv1.Quote{
		QuoteText(marker, "present"),
		QuoteText(bootstrapSentinel(ci), "absent"),
	}, expected...)
	return []*nodediagv1.Finding{CloudInitDisabled.Finding(Params{"marker": marker}, quotes...)}
}

// cloudInitEverRan says whether cloud-init's state shows a run for this
// instance: a stage that started, or the scripts_user semaphore.
func cloudInitEverRan(ci *nodediagv1.CloudInit) bool {
	if ci.GetScriptsUserRan() != nil {
		return true
	}
	for _, sg := range ci.GetStages() {
		if sg.GetStart() != nil {
			return true
		}
	}
	return false
}

// bootstrapExpected says whether this node is meant to be bootstrapped by
// kubeadm through cloud-init, with the evidence: the CAPI bootstrap's own
// traces, or kubeadm installed on a node that has not joined a cluster, or a
// Kubernetes version a Machine expects of it (analysis context, nothing on
// the node to quote).
func bootstrapExpected(in *Input, ci *nodediagv1.CloudInit) ([]*nodediagv1.Quote, bool) {
	if q := capiBootstrapQuote(in, ci); q != nil {
		return []*nodediagv1.Quote{q}, true
	}
	var kubeadm *nodediagv1.Binary
	for _, b := range in.Binaries() {
		if b.GetName() == "kubeadm" && b.GetPath() != "" {
			kubeadm = b
			break
		}
	}
	kad := in.Kubeadm()
	if kubeadm != nil && kad != nil && !kad.GetKubeletConf().GetPresent() {
		path := kad.GetKubeletConf().GetPath()
		if path == "" {
			path = bootstrapKubeletConf
		}
		return []*nodediagv1.Quote{QuoteExec(kubeadm), QuoteText(path, "absent")}, true
	}
	return nil, in.Ctx.ExpectVersion != ""
}

// bootstrapSentinelMissingRule: cloud-init has finished in this boot, the
// node is bootstrapped by CAPI's kubeadm bootstrap, and the sentinel the
// bootstrap writes last is absent: the bootstrap script stopped earlier.
//
// No finding when the evidence cannot tell: cloud-init's state read only from
// /var/lib (the sentinel lives in /run, which a copy of the host may lack, and
// which a reboot empties), or a bootstrap that ran in an earlier boot (the
// sentinel is not written again after a reboot: runcmd runs once per
// instance).
func bootstrapSentinelMissingRule(in *Input) []*nodediagv1.Finding {
	ci := in.CloudInit()
	if ci == nil || ci.GetSentinelPresent() {
		return nil
	}
	switch ci.GetStatus() {
	case "done", "error", "degraded":
	default:
		return nil
	}
	if !cloudInitThisBoot(ci) || bootstrapRanEarlierBoot(in, ci) {
		return nil
	}
	capi := capiBootstrapQuote(in, ci)
	if capi == nil {
		return nil
	}
	sentinel := bootstrapSentinel(ci)
	quotes := []*nodediagv1.Quote{QuoteText(sentinel, "absent"), cloudInitStatusQuote(ci), capi}
	// Without an error of cloud-init's (CloudInitFailed quotes those): how
	// it ended, in its own words (the datasource it used), and the first
	// error of the bootstrap's output if there is one.
	if ci.GetStatus() != "error" {
		if fin := in.Matched("cloud-init-finished"); len(fin) > 0 {
			quotes = append(quotes, fin[len(fin)-1].Quote())
		}
		quotes = append(quotes, in.FirstErrors(bootstrapLogKinds, bootstrapFirstErrors)...)
	}
	return []*nodediagv1.Finding{BootstrapSentinelMissing.Finding(Params{"sentinel": sentinel}, quotes...)}
}

// cloudInitThisBoot says whether the evidence shows this boot's /run: the
// state files were read there, or the CAPI directory exists.
func cloudInitThisBoot(ci *nodediagv1.CloudInit) bool {
	return strings.HasPrefix(ci.GetStatusJsonPath(), "/run/") ||
		strings.HasPrefix(ci.GetResultJsonPath(), "/run/") ||
		ci.GetClusterApiDirPresent()
}

// bootstrapRanEarlierBoot says whether cloud-init ran the runcmd script
// (scripts_user, once per instance) before this boot: before the boot time,
// or before this boot's first cloud-init stage.
func bootstrapRanEarlierBoot(in *Input, ci *nodediagv1.CloudInit) bool {
	ran := ci.GetScriptsUserRan()
	if ran == nil {
		return false
	}
	if bt := in.OS().GetBootTime(); bt != nil && ran.AsTime().Before(bt.AsTime()) {
		return true
	}
	if !strings.HasPrefix(ci.GetStatusJsonPath(), "/run/") {
		return false
	}
	for _, sg := range ci.GetStages() {
		if sg.GetStart() != nil {
			return ran.AsTime().Before(sg.GetStart().AsTime())
		}
	}
	return false
}

// capiBootstrapQuote is the evidence that CAPI's kubeadm bootstrap drives
// this node, or nil. Only what CAPI itself writes counts: a kubeadm
// configuration of the bootstrap provider, the /run/cluster-api directory its
// write_files create, or a line of cloud-init's output naming it (a kubeadm
// installed by hand, or a package "Setting up kubeadm", is not CAPI).
func capiBootstrapQuote(in *Input, ci *nodediagv1.CloudInit) *nodediagv1.Quote {
	for _, cf := range in.Kubeadm().GetConfigFiles() {
		if cf.GetPath() == "" || !strings.HasPrefix(cf.GetPath(), "/run/kubeadm/") {
			continue
		}
		text := "present"
		if len(cf.GetKinds()) > 0 {
			text = "present: " + strings.Join(cf.GetKinds(), ", ")
		}
		return QuoteText(cf.GetPath(), text)
	}
	if ci.GetClusterApiDirPresent() {
		return QuoteText(bootstrapCAPIDir, "present")
	}
	for _, m := range in.m().byName["capi-sentinel-mention"] {
		if m.Src.GetKind() == "cloud-init-output" {
			return m.Quote()
		}
	}
	return nil
}

// cloudInitStatusQuote states cloud-init's status, naming the file it rests
// on and when cloud-init last wrote its state.
func cloudInitStatusQuote(ci *nodediagv1.CloudInit) *nodediagv1.Quote {
	src := ci.GetStatusSource()
	if src == "" {
		src = ci.GetStatusJsonPath()
	}
	text := "status: " + ci.GetStatus()
	switch ci.GetStatus() {
	case "error":
		if errs := ci.GetErrors(); len(errs) > 0 {
			text += ": " + errs[0]
			if len(errs) > 1 {
				text += fmt.Sprintf(" (and %d more)", len(errs)-1)
			}
		}
	case "degraded":
		text += " (recoverable errors only)"
	}
	for _, sg := range ci.GetStages() {
		if sg.GetName() == "modules-final" && sg.GetFinished() != nil {
			text += "; modules-final finished " + sg.GetFinished().AsTime().UTC().Format(time.RFC3339)
		}
	}
	q := QuoteText(src, text)
	q.Time = ci.GetLastUpdate()
	return q
}

func bootstrapSentinel(ci *nodediagv1.CloudInit) string {
	if p := ci.GetSentinelPath(); p != "" {
		return p
	}
	return bootstrapSentinelPath
}

// kubeadmFailure names a kubeadm failure whose log line does not say whether
// init or join ran, from the configuration the bootstrap provider wrote:
// /run/kubeadm/kubeadm.yaml (ClusterConfiguration, InitConfiguration) means
// init, kubeadm-join-config.yaml (JoinConfiguration) join.
func kubeadmFailure(in *Input) string {
	var init, join bool
	for _, cf := range in.Kubeadm().GetConfigFiles() {
		for _, k := range cf.GetKinds() {
			switch k {
			case "InitConfiguration", "ClusterConfiguration":
				init = true
			case "JoinConfiguration":
				join = true
			}
		}
	}
	switch {
	case init && !join:
		return KubeadmInitFailed.ID
	case join && !init:
		return KubeadmJoinFailed.ID
	}
	return KubeadmFailed.ID
}
