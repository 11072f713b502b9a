// Package rules turns Evidence into ranked Findings. It does no I/O: the same
// rules judge a live host, a bundle from an air-gapped host, a CI artifact
// tree and, in the collector, a node whose Machine is known.
//
// What is data and what is code: the meaning of every finding (ID, category,
// severity, title, remediation) is the Go catalog (catalog.go, problems.go);
// pure matching of log lines is data (signatures/*.json, embedded); logic over
// versions, thresholds and several pieces of evidence is Go (one file per
// domain: kubelet.go, versions.go, bootstrap.go, node.go).
package rules

import (
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// Context is what the analysis knows besides the evidence.
type Context struct {
	// ExpectVersion is the Kubernetes version the Machine expects
	// ("v1.32.0"): --expect-version, or the Machine's spec in the collector.
	ExpectVersion string
	// Since bounds the window from below; zero means the last boot.
	Since time.Time
	// SinceAgo bounds the window to this long before the evidence clock
	// (--since DURATION); used when Since is zero.
	SinceAgo time.Duration
	// Now overrides the evidence clock (--now), for snapshots whose own
	// clock is unknown and for reproducible tests.
	Now time.Time
	// Role is what the node is meant to be (RoleControlPlane, RoleWorker):
	// the Machine's cluster.x-k8s.io/control-plane label in the collector,
	// --role on the command line. Empty: the rules infer it from what
	// kubeadm left on the node, when they can.
	Role string
	// RoleSource names where Role comes from and RoleReason why, for the
	// quote that shows it ("Machine/NAME metadata.labels", "label
	// cluster.x-k8s.io/control-plane").
	RoleSource, RoleReason string
}

// InWindowOf returns c bounded by a report's window: judging stored
// evidence again in the window its agent used, so that only what the
// caller adds (an expected version, a role, newer rules) changes.
func (c Context) InWindowOf(w *nodediagv1.Window) Context {
	if w.GetSince() != nil {
		c.Since = w.GetSince().AsTime()
	}
	if w.GetUntil() != nil {
		c.Now = w.GetUntil().AsTime()
	}
	return c
}

// Result is what Analyze concluded.
type Result struct {
	// Findings, ranked: the first is the most likely root cause.
	Findings []*nodediagv1.Finding
	Window   *nodediagv1.Window
	// Gaps are the evidence that could not be collected, as sentences.
	Gaps []string
	// Verdict says what the check can say of the root as a whole when its
	// findings are no diagnosis of a node (verdict.go), and VerdictReason
	// why; both empty otherwise.
	Verdict, VerdictReason string
}

// Input is the evidence as the rules see it.
type Input struct {
	Ev  *nodediagv1.Evidence
	Ctx Context
	// Clock is the evidence's own "now": the host's clock at collection,
	// or, for a snapshot, the newest timestamp found in the evidence.
	Clock time.Time
	// Since and Until bound the window; Since is zero when unbounded.
	Since, Until time.Time
	// ClockIsLowerBound is true when Clock is the newest time a copy of a
	// host shows (no --now): the copy was taken at that time or later.
	ClockIsLowerBound bool

	sigs    []*Signature // the engine's signatures
	matches *matched     // what they matched (match.go), on first use
}

// A Rule is Go logic over the evidence.
type Rule struct {
	Name string
	Fn   func(in *Input) []*nodediagv1.Finding
}

// goRules is the explicit list of Go rules, one slice per domain file.
func goRules() []Rule {
	var all []Rule
	for _, rs := range [][]Rule{kubeletRules, versionRules, bootstrapRules, nodeRules, podRules, unitRules, containerdRules, runtimeRules, registryRules, kernelRules} {
		all = append(all, rs...)
	}
	return all
}

// Engine analyses evidence with a set of log signatures.
type Engine struct {
	Signatures []*Signature
}

// NewEngine returns an engine with the embedded signatures. It fails only if
// the shipped data is broken, which a test prevents.
func NewEngine() (*Engine, error) {
	sigs, err := LoadSignatures(nil)
	if err != nil {
		return nil, err
	}
	return &Engine{Signatures: sigs}, nil
}

// Analyze judges ev.
func (e *Engine) Analyze(ev *nodediagv1.Evidence, c Context) Result {
	in := newInput(ev, c)
	in.sigs = e.Signatures
	var fs []*nodediagv1.Finding
	for _, r := range goRules() {
		fs = append(fs, r.Fn(in)...)
	}
	fs = merge(fs, signatureFindings(in))
	fs = absorbPredicted(fs)
	fs = append(fs, unrecognisedErrors(in, fs)...)
	latentFs := latent(in, fs)
	roleAdjust(in, fs)
	verdict, reason := judgeVerdict(in, fs)
	rank(fs, rankOptions{latent: latentFs, bootstrapFirst: bootstrapFirst(in, fs)})
	return Result{
		Findings:      fs,
		Window:        &nodediagv1.Window{Since: ts(in.Since), Until: ts(in.Until)},
		Gaps:          gaps(ev),
		Verdict:       verdict,
		VerdictReason: reason,
	}
}

// provenBy maps a finding to the findings that prove the same cause more
// precisely: the runtime refusing the kubelet's pod cgroups proves the
// cgroup drivers apart that files predict; a certificate file's dates or a
// clock shown off say which of "expired or not yet valid" a log line meant.
var provenBy = map[string][]string{
	"KubeletCgroupDriverMismatch": {"RuntimeCgroupParentRefused", "CRIOCgroupManagerMismatch"},
	// A bare "certificate has expired or is not yet valid" is the log side
	// of a certificate file found expired, or of a clock shown off.
	"CertificateNotValidNow": {"CertificateExpired", "ClockSkew", "PublicRegistryCertificateRejected"},
}

// absorbPredicted folds a finding into the one that proves its cause more
// precisely: one cause, that proof first, the folded finding's lines after it.
func absorbPredicted(fs []*nodediagv1.Finding) []*nodediagv1.Finding {
	byID := map[string]*nodediagv1.Finding{}
	for _, f := range fs {
		byID[f.GetId()] = f
	}
	out := fs[:0]
	for _, f := range fs {
		var proof *nodediagv1.Finding
		for _, id := range provenBy[f.GetId()] {
			if p := byID[id]; p != nil && proof == nil {
				proof = p
			}
		}
		if proof == nil {
			out = append(out, f)
			continue
		}
		for _, q := range f.GetEvidence() {
			if !hasQuote(proof, q) {
				proof.Evidence = append(proof.Evidence, q)
			}
		}
	}
	return out
}

func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t.UTC())
}

func newInput(ev *nodediagv1.Evidence, c Context) *Input {
	in := &Input{Ev: ev, Ctx: c}
	in.Clock, in.ClockIsLowerBound = evidenceClock(ev)
	if !c.Now.IsZero() {
		in.Clock, in.ClockIsLowerBound = c.Now, false
	}
	in.Until = in.Clock
	switch {
	case !c.Since.IsZero():
		in.Since = c.Since
	case c.SinceAgo > 0:
		in.Since = in.Clock.Add(-c.SinceAgo)
	default:
		if os := in.OS(); os != nil && os.BootTime != nil {
			in.Since = os.BootTime.AsTime()
		}
	}
	return in
}

// evidenceClock is the collection time of a live host, and the newest time
// the evidence itself shows for a snapshot (a copy examined later must give
// the same answer).
func evidenceClock(ev *nodediagv1.Evidence) (clock time.Time, lowerBound bool) {
	collected := ev.GetCollectedAt().AsTime()
	if !ev.GetSnapshot() {
		return collected, false
	}
	var newest time.Time
	for _, pe := range ev.GetProbes() {
		// Each probe's data says what times of the node it shows
		// (nodediagv1.Timed): a new probe's data joins by saying so.
		if t := pe.Newest(); t.After(newest) {
			newest = t
		}
	}
	if newest.IsZero() {
		return collected, false
	}
	return newest, true
}

// InWindow says whether t falls in the window; an unknown time does.
func (in *Input) InWindow(t *timestamppb.Timestamp) bool {
	if t == nil {
		return true
	}
	at := t.AsTime()
	if !in.Since.IsZero() && at.Before(in.Since) {
		return false
	}
	return !at.After(in.Until.Add(time.Minute))
}

// Probe returns the evidence of the named probe, or nil.
func (in *Input) Probe(name string) *nodediagv1.ProbeEvidence {
	for _, pe := range in.Ev.GetProbes() {
		if pe.GetName() == name {
			return pe
		}
	}
	return nil
}

// The accessors below find a probe's data by its type, so that rules do not
// depend on probe names. Each returns nil when the probe did not run.

// probeData returns the first data that get finds among the probes.
func probeData[T comparable](in *Input, get func(*nodediagv1.ProbeEvidence) T) T {
	var zero T
	for _, pe := range in.Ev.GetProbes() {
		if d := get(pe); d != zero {
			return d
		}
	}
	return zero
}

func (in *Input) KubeletConfig() *nodediagv1.KubeletConfig {
	return probeData(in, (*nodediagv1.ProbeEvidence).GetKubeletConfig)
}

func (in *Input) Binaries() []*nodediagv1.Binary {
	return probeData(in, (*nodediagv1.ProbeEvidence).GetBinaries).GetBinaries()
}

func (in *Input) Kubeadm() *nodediagv1.Kubeadm {
	return probeData(in, (*nodediagv1.ProbeEvidence).GetKubeadm)
}

func (in *Input) CloudInit() *nodediagv1.CloudInit {
	return probeData(in, (*nodediagv1.ProbeEvidence).GetCloudInit)
}

// Logs returns the excerpts of every probe that read logs: text logs, the
// journal's units, the containers' logs of /var/log/pods.
func (in *Input) Logs() []*nodediagv1.LogExcerpt {
	var out []*nodediagv1.LogExcerpt
	for _, pe := range in.Ev.GetProbes() {
		out = append(out, pe.GetLogs().GetSources()...)
		out = append(out, pe.GetJournal().GetSources()...)
		for _, c := range pe.GetPods().GetContainers() {
			for _, l := range []*nodediagv1.LogExcerpt{c.GetPreviousLog(), c.GetLog()} {
				if l != nil {
					out = append(out, l)
				}
			}
		}
	}
	return out
}

func (in *Input) Journal() *nodediagv1.Journal {
	return probeData(in, (*nodediagv1.ProbeEvidence).GetJournal)
}

func (in *Input) Pods() []*nodediagv1.PodContainer {
	return probeData(in, (*nodediagv1.ProbeEvidence).GetPods).GetContainers()
}

// Units returns the units' state: systemd's own (the units probe, over
// D-Bus) when it was read, else the one derived from the journal.
func (in *Input) Units() []*nodediagv1.UnitState {
	if u := probeData(in, (*nodediagv1.ProbeEvidence).GetUnits).GetUnits(); len(u) > 0 {
		return u
	}
	return in.Journal().GetUnits()
}

func (in *Input) Filesystems() []*nodediagv1.Filesystem {
	return probeData(in, (*nodediagv1.ProbeEvidence).GetFilesystems).GetFilesystems()
}

func (in *Input) Swap() *nodediagv1.Swap {
	return probeData(in, (*nodediagv1.ProbeEvidence).GetSwap)
}

func (in *Input) Certificates() []*nodediagv1.Certificate {
	return probeData(in, (*nodediagv1.ProbeEvidence).GetCertificates).GetCertificates()
}

func (in *Input) CNI() *nodediagv1.CNI {
	return probeData(in, (*nodediagv1.ProbeEvidence).GetCni)
}

func (in *Input) OS() *nodediagv1.OSInfo {
	return probeData(in, (*nodediagv1.ProbeEvidence).GetOs)
}

func (in *Input) Containerd() *nodediagv1.Containerd {
	return probeData(in, (*nodediagv1.ProbeEvidence).GetContainerd)
}

func (in *Input) Runtime() *nodediagv1.Runtime {
	return probeData(in, (*nodediagv1.ProbeEvidence).GetRuntime)
}

func (in *Input) Registries() *nodediagv1.Registries {
	return probeData(in, (*nodediagv1.ProbeEvidence).GetRegistries)
}

// Finding builds a finding of p with its templates filled from params.
func (p *Problem) Finding(params Params, quotes ...*nodediagv1.Quote) *nodediagv1.Finding {
	if len(p.Defaults) > 0 {
		merged := Params{}
		for k, v := range p.Defaults {
			merged[k] = v
		}
		for k, v := range params {
			merged[k] = v
		}
		params = merged
	}
	f := &nodediagv1.Finding{
		Id:          p.ID,
		Category:    p.Category,
		Severity:    p.Severity,
		Confidence:  p.Confidence,
		Title:       expand(p.Title, params),
		Remediation: expand(p.Remediation, params),
		RefutedBy:   expand(p.RefutedBy, params),
	}
	for _, q := range quotes {
		if q != nil && q.Excerpt != "" && !hasQuote(f, q) {
			f.Evidence = append(f.Evidence, q)
		}
	}
	return f
}

// merge adds the signature findings to the Go findings: a signature finding
// whose ID a Go rule already raised lends its quotes to that finding (the log
// line that shows the effect joins the file line that shows the cause).
func merge(goFs, sigFs []*nodediagv1.Finding) []*nodediagv1.Finding {
	// Only an ID raised once can take the quotes: with two expired
	// certificates, which one a log line is about is not known.
	byID := map[string]*nodediagv1.Finding{}
	count := map[string]int{}
	for _, f := range goFs {
		count[f.Id]++
		byID[f.Id] = f
	}
	for id, n := range count {
		if n > 1 {
			delete(byID, id)
		}
	}
	out := goFs
	for _, sf := range sigFs {
		if f, ok := byID[sf.Id]; ok {
			for _, q := range sf.Evidence {
				if !hasQuote(f, q) {
					f.Evidence = append(f.Evidence, q)
				}
			}
			continue
		}
		out = append(out, sf)
	}
	return out
}

func hasQuote(f *nodediagv1.Finding, q *nodediagv1.Quote) bool {
	for _, e := range f.Evidence {
		if e.Source == q.Source && e.Line == q.Line && e.Excerpt == q.Excerpt {
			return true
		}
	}
	return false
}

// gaps lists what the probes could not see.
func gaps(ev *nodediagv1.Evidence) []string {
	var out []string
	for _, pe := range ev.GetProbes() {
		switch pe.GetStatus() {
		case "error":
			out = append(out, pe.GetName()+": "+pe.GetError())
		}
		for _, u := range pe.GetUnreadable() {
			out = append(out, pe.GetName()+": cannot read "+u.GetSource()+": "+u.GetError())
		}
	}
	sort.Strings(out)
	return dedupe(out)
}

func dedupe(ss []string) []string {
	var out []string
	for i, s := range ss {
		if i == 0 || s != ss[i-1] {
			out = append(out, s)
		}
	}
	return out
}

// firstLine returns s up to its first newline.
func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
