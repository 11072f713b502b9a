package rules

import (
	"fmt"
	"k8s.io/apimachinery/pkg/util/version"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// Unit rules judge the state of the kubelet's and the container runtime's
// systemd units (Input.Units: systemd's own over D-Bus when the units probe
// reached the bus, else the state the journal probe derived from systemd's
// messages about the units).
//
// A unit in trouble is a symptom here: why the kubelet exits is in its log
// (the signatures) or its configuration (the kubelet rules), and those
// causes rank above. The rules hold back where a stopped or restarting
// kubelet is how a healthy bootstrap looks: before kubeadm has written the
// kubelet's configuration, the kubelet exits at every start.
var unitRules = []Rule{
	{Name: "kubelet-unit", Fn: kubeletUnitRule},
	{Name: "kubelet-not-this-boot", Fn: kubeletNotThisBootRule},
	{Name: "containerd-unit", Fn: containerdUnitRule},
}

// Units the rules judge.
const (
	unitKubelet    = "kubelet.service"
	unitContainerd = "containerd.service"
)

// unitCrashLoopRestarts is how many automatic restarts make a crash loop of
// a unit that is not running now: three quick exits in a row are no longer
// a hiccup (a restart during an upgrade, a dependency that came up late).
const unitCrashLoopRestarts = 3

// ExecMainCode values: the si_code of the main process's SIGCHLD.
const (
	cldExited = 1
	cldKilled = 2
	cldDumped = 3
)

// unitSourceJournal is UnitState.source for state derived from the journal.
const unitSourceJournal = "journal"

// unitNamed returns the state of the named unit, or nil.
func unitNamed(in *Input, name string) *nodediagv1.UnitState {
	for _, u := range in.Units() {
		if u.GetName() == name {
			return u
		}
	}
	return nil
}

// unitCrashLooping says whether systemd keeps restarting u after failures:
// it is waiting to restart it after a failed run (SubState auto-restart with
// a result other than success), or it restarted it at least
// unitCrashLoopRestarts times and the unit is not up now (starting again,
// or failed once systemd's start limit was hit). A unit that restarted many
// times and is active now has recovered: the kubelet of every kubeadm node
// restarts until kubeadm writes its configuration.
func unitCrashLooping(u *nodediagv1.UnitState) bool {
	if u.GetSubState() == "auto-restart" && u.GetResult() != "" && u.GetResult() != "success" {
		return true
	}
	if u.GetNRestarts() < unitCrashLoopRestarts {
		return false
	}
	switch u.GetActiveState() {
	case "activating", "failed":
		return true
	}
	return false
}

// unitDown says whether u is not running and systemd is not starting it:
// masked, failed, or inactive. A unit of unknown LoadState (derived from
// the journal) is judged by its ActiveState.
func unitDown(u *nodediagv1.UnitState) bool {
	if u.GetLoadState() == "masked" {
		return true
	}
	switch u.GetActiveState() {
	case "failed", "inactive":
		return true
	}
	return false
}

// unitExit describes u's last result and main process exit: "Result=exit-code,
// status 1", "Result=signal, signal SIGKILL".
func unitExit(u *nodediagv1.UnitState) string {
	var parts []string
	if r := u.GetResult(); r != "" {
		parts = append(parts, "Result="+r)
	}
	switch u.GetExecMainCode() {
	case cldExited:
		if u.GetExecMainStatus() != 0 {
			parts = append(parts, fmt.Sprintf("status %d", u.GetExecMainStatus()))
		}
	case cldKilled, cldDumped:
		parts = append(parts, "signal "+signalName(u.GetExecMainStatus()))
	}
	return strings.Join(parts, ", ")
}

// signalName names the signals a daemon usually dies of.
func signalName(n int32) string {
	switch n {
	case 6:
		return "SIGABRT"
	case 9:
		return "SIGKILL"
	case 11:
		return "SIGSEGV"
	case 15:
		return "SIGTERM"
	}
	return fmt.Sprintf("%d", n)
}

// unitDetail says in a few words what state u is in, for a title:
// "containerd.service is failed (Result=exit-code, status 1)".
func unitDetail(u *nodediagv1.UnitState) string {
	name := u.GetName()
	exit := unitExit(u)
	switch {
	case unitCrashLooping(u):
		d := fmt.Sprintf("%s keeps failing and restarting (NRestarts=%d", name, u.GetNRestarts())
		if exit != "" {
			d += ", " + exit
		}
		return d + ")"
	case u.GetLoadState() == "masked":
		return name + " is masked: systemd will not start it"
	case u.GetActiveState() == "failed":
		if exit == "" {
			return name + " is failed"
		}
		return fmt.Sprintf("%s is failed (%s)", name, exit)
	default:
		d := fmt.Sprintf("%s is %s", name, u.GetActiveState())
		if sub := u.GetSubState(); sub != "" && sub != u.GetActiveState() {
			d += " (" + sub + ")"
		}
		if r := u.GetResult(); r != "" && r != "success" {
			d += " after Result=" + r
		}
		return d
	}
}

// unitQuote quotes the state of u as its source recorded it (the bus
// properties, or the journal line it was derived from).
func unitQuote(u *nodediagv1.UnitState) *nodediagv1.Quote {
	e := u.GetEvidence()
	if e.GetExcerpt() == "" {
		return nil
	}
	return &nodediagv1.Quote{Source: e.GetSource(), Time: e.GetTime(), Line: e.GetLine(), Excerpt: clip(e.GetExcerpt())}
}

// unitLastWords is how many of a unit's last error lines its finding quotes.
const unitLastWords = 2

// unitFinding builds p's finding about u. State derived from the journal is
// an inference from systemd's last messages (a later start may have left no
// message the probe kept): medium confidence at most.
//
// The unit's own last error lines are quoted with its state: what the
// kubelet or containerd said as it exited is the first clue to why.
func unitFinding(in *Input, p *Problem, params Params, u *nodediagv1.UnitState, kind string) *nodediagv1.Finding {
	f := p.Finding(params, append([]*nodediagv1.Quote{unitQuote(u)}, in.LastWords(kind, unitLastWords)...)...)
	if u.GetSource() == unitSourceJournal && f.Confidence == High {
		f.Confidence = Medium
	}
	return f
}

// bootstrapRunning says whether cloud-init is still running the bootstrap:
// units it has not started yet are not failures.
func bootstrapRunning(in *Input) bool {
	return in.CloudInit().GetStatus() == "running"
}

// kubeletAwaitsConfig says whether the kubelet's --config file is known not
// to exist. The kubelet then exits at every start until kubeadm's
// kubelet-start phase writes the file: that is how every kubeadm node
// boots, and when the bootstrap ended without the file, KubeletConfigMissing
// and the bootstrap findings name what stopped it. A crash loop or a stop
// of such a kubelet says nothing more.
func kubeletAwaitsConfig(in *Input) bool {
	c := in.KubeletConfig().GetConfig()
	return c != nil && c.GetPath() != "" && !c.GetPresent()
}

// kubeletUnitRule: kubelet.service crash-loops (KubeletCrashLoop) or is down
// and not restarting (KubeletNotRunning). A kubelet.service systemd does not
// know (not-found) is not judged: some distributions run the kubelet under
// another unit (k3s, snaps), and a missing kubelet is the binary rules'.
func kubeletUnitRule(in *Input) []*nodediagv1.Finding {
	u := unitNamed(in, unitKubelet)
	if u == nil || u.GetLoadState() == "not-found" || kubeletAwaitsConfig(in) {
		return nil
	}
	switch {
	case unitCrashLooping(u):
		return []*nodediagv1.Finding{unitFinding(in, KubeletCrashLoop, Params{"detail": unitDetail(u)}, u, "kubelet")}
	case unitDown(u):
		if u.GetActiveState() == "inactive" && u.GetLoadState() != "masked" && bootstrapRunning(in) {
			return nil // not started yet: kubeadm starts it
		}
		return []*nodediagv1.Finding{unitFinding(in, KubeletNotRunning, Params{"detail": unitDetail(u)}, u, "kubelet")}
	}
	return nil
}

// containerdUnitRule: containerd.service crash-loops or is down: the
// runtime is not running (RuntimeNotRunning), with the unit's state as
// evidence; log lines of the same problem (containerd's own "failed to load
// TOML", the kubelet's dial errors on its socket) join the finding.
//
// Not judged: a containerd.service systemd does not know (the node may run
// CRI-O), a kubelet configured for a runtime that is neither containerd nor
// Docker (whose dockerd needs containerd.service), and an inactive
// containerd while cloud-init still runs (preKubeadmCommands may install or
// start it).
func containerdUnitRule(in *Input) []*nodediagv1.Finding {
	u := unitNamed(in, unitContainerd)
	if u == nil || u.GetLoadState() == "not-found" || !kubeletUsesContainerd(in) {
		return nil
	}
	if !unitCrashLooping(u) && !unitDown(u) {
		return nil
	}
	if u.GetActiveState() == "inactive" && u.GetLoadState() != "masked" && !unitCrashLooping(u) && bootstrapRunning(in) {
		return nil
	}
	return []*nodediagv1.Finding{unitFinding(in, RuntimeNotRunning, Params{"detail": unitDetail(u)}, u, "containerd")}
}

// kubeletUsesContainerd says whether the kubelet's runtime may depend on
// containerd.service: its runtime endpoint (containerRuntimeEndpoint of the
// KubeletConfiguration, or an active --container-runtime-endpoint flag,
// which wins) names containerd or Docker's cri-dockerd, or is unknown.
func kubeletUsesContainerd(in *Input) bool {
	kc := in.KubeletConfig()
	endpoint := kc.GetConfig().GetContainerRuntimeEndpoint()
	for _, f := range kc.GetFlags() {
		if f.GetActive() && f.GetName() == "container-runtime-endpoint" {
			endpoint = f.GetValue()
		}
	}
	if endpoint == "" {
		return true
	}
	e := strings.ToLower(endpoint)
	return strings.Contains(e, "containerd") || strings.Contains(e, "docker")
}

// kubeletUsesDockershim says whether the kubelet talks to Docker itself
// (dockershim, before 1.24): a kubelet older than 1.24 with no runtime
// endpoint, or dockershim's socket, and no --container-runtime=remote.
// containerd's CRI plugin is then not the kubelet's business (Docker CE's
// containerd.io ships it disabled, rightly).
func kubeletUsesDockershim(in *Input) bool {
	_, kv := binaryVersion(in, "kubelet")
	if kv == nil || !kv.v.LessThan(version.MustParseGeneric("1.24.0")) {
		return false
	}
	kc := in.KubeletConfig()
	endpoint := kc.GetConfig().GetContainerRuntimeEndpoint()
	for _, f := range kc.GetFlags() {
		if !f.GetActive() {
			continue
		}
		switch f.GetName() {
		case "container-runtime-endpoint":
			endpoint = f.GetValue()
		case "container-runtime":
			if f.GetValue() == "remote" {
				return false
			}
		}
	}
	return endpoint == "" || strings.Contains(endpoint, "dockershim.sock")
}

// kubeletNotThisBootRule: the kubelet ran in the boot before and has not run
// in this one, which the journal covers (other units logged): systemd did
// not start it. The usual cause is a kubelet.service that was started by
// hand or by a script but never enabled, so that the node lost its kubelet
// at the reboot; the unit's enablement is quoted when the probe read it.
// Not judged when systemd itself was asked (the units probe: its state is
// the truth) or while cloud-init still runs (kubeadm starts the kubelet).
func kubeletNotThisBootRule(in *Input) []*nodediagv1.Finding {
	j := in.Journal()
	if j == nil || bootstrapRunning(in) {
		return nil
	}
	if u := probeData(in, (*nodediagv1.ProbeEvidence).GetUnits).GetUnits(); len(u) > 0 {
		return nil
	}
	var run *nodediagv1.UnitLastRun
	for _, r := range j.GetEarlierRuns() {
		if r.GetUnit() == unitKubelet {
			run = r
		}
	}
	if run == nil || len(j.GetSources()) == 0 && len(j.GetBoots()) < 2 {
		return nil
	}
	var bootStart *timestamppb.Timestamp
	for _, b := range j.GetBoots() {
		if b.GetBootId() == j.GetBootId() {
			bootStart = b.GetFirst()
		}
	}
	detail := "kubelet.service has not run in this boot"
	if bootStart != nil {
		detail += " (since " + bootStart.AsTime().UTC().Format(time.RFC3339) + ")"
	}
	quotes := []*nodediagv1.Quote{{Source: "journal:" + unitKubelet, Time: run.GetLast(), Excerpt: clip(run.GetLastLine())}}
	kc := in.KubeletConfig()
	switch kc.GetEnablement() {
	case "disabled":
		detail += "; it is not enabled"
		quotes = append(quotes, QuoteText("/etc/systemd/system/multi-user.target.wants/"+unitKubelet, "absent: systemd does not start kubelet.service at boot (systemctl enable kubelet)"))
	case "enabled":
		quotes = append(quotes, QuoteText(kc.GetWantedBy(), "present: kubelet.service is enabled, yet it did not start"))
	}
	quotes = append(quotes, QuoteText("journal:"+unitKubelet, fmt.Sprintf("last boot with kubelet entries: %s, %d entries, the last at %s", run.GetBootId(), run.GetEntries(), run.GetLast().AsTime().UTC().Format(time.RFC3339))))
	return []*nodediagv1.Finding{KubeletNotRunning.Finding(Params{"detail": detail}, quotes...)}
}
