package rules

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// runtimeRules judge what the container runtime said over its CRI socket
// (the runtime probe, Input.Runtime): whether it answers, whether it serves
// the CRI, its network condition, its images against what the control plane
// needs, and its static pod containers' exits.
//
// The runtime's answer is the node's state now, from a live node only (a
// copy of a host has no runtime to ask). Other rules judge the same
// problems from other evidence (containerd.service's state, containerd's
// configuration, the containers' logs of /var/log/pods); where they already
// raise the finding, these rules add nothing, so that each problem is one
// finding that the log lines of its signatures join (merge): see each rule.
var runtimeRules = []Rule{
	{Name: "runtime-not-running", Fn: runtimeNotRunning},
	{Name: "runtime-cri-disabled", Fn: runtimeCRIDisabled},
	{Name: "runtime-network-not-ready", Fn: runtimeNetworkNotReady},
	{Name: "runtime-images-missing", Fn: runtimeImagesMissing},
	{Name: "runtime-static-pod-exits", Fn: runtimeStaticPodExits},
}

// Runtime.state values (the runtime probe's).
const (
	rtOK      = "ok"
	rtAbsent  = "absent"
	rtRefused = "refused"
	rtTimeout = "timeout"
	rtNoCRI   = "no-cri"
)

// CRI condition types (k8s.io/cri-api runtime.v1).
const (
	rtConditionRuntimeReady = "RuntimeReady"
	rtConditionNetworkReady = "NetworkReady"
)

// runtimeSource is the quote source of what the runtime said: "cri:" and
// the socket (a host path).
func runtimeSource(rt *nodediagv1.Runtime) string { return "cri:" + rt.GetSocket() }

// runtimeAnswerQuote quotes how the runtime answered (or did not).
func runtimeAnswerQuote(rt *nodediagv1.Runtime) *nodediagv1.Quote {
	switch rt.GetState() {
	case "":
		return nil
	case rtOK:
		return QuoteText(runtimeSource(rt), fmt.Sprintf("%s %s (CRI %s)", rt.GetRuntimeName(), rt.GetRuntimeVersion(), rt.GetRuntimeApiVersion()))
	}
	return QuoteText(runtimeSource(rt), rt.GetState()+": "+rt.GetError())
}

// runtimeSocketQuote quotes the configuration line that names the socket,
// when the socket came from containerd's configuration.
func runtimeSocketQuote(in *Input, rt *nodediagv1.Runtime) *nodediagv1.Quote {
	if rt.GetSocketFrom() != "config" {
		return nil
	}
	return QuoteLine(in.Containerd().GetGrpcAddressLine())
}

// ---- not running -----------------------------------------------------------

// rtMaxLogQuotes is how many of containerd's own error lines a
// RuntimeNotRunning finding quotes: its last words.
const rtMaxLogQuotes = 2

// runtimeNotRunning raises RuntimeNotRunning when the runtime does not
// answer on a live node: no socket ("absent"), a socket nobody listens on
// ("refused": containerd stopped or was killed and left it), or a socket
// that accepts and never answers ("timeout": containerd hangs); and when it
// answers but reports RuntimeReady=false. It quotes the socket's state,
// the configuration line that names the socket, containerd.service's state
// and containerd's last error lines.
//
// Not judged: a kubelet that uses another runtime (CRI-O: containerd's
// socket is then irrelevant), a socket absent while cloud-init still runs
// (preKubeadmCommands may install or start containerd), and a
// containerd.service that is failed or crash-looping: the unit rule raises
// RuntimeNotRunning for it already, and the same problem is one finding.
func runtimeNotRunning(in *Input) []*nodediagv1.Finding {
	rt := in.Runtime()
	if rt == nil || !kubeletUsesContainerd(in) {
		return nil
	}
	u := unitNamed(in, unitContainerd)
	if len(containerdUnitRule(in)) > 0 {
		return nil
	}
	var detail string
	sock := rt.GetSocket()
	switch rt.GetState() {
	case rtAbsent:
		if bootstrapRunning(in) && !unitCrashLooping(u) {
			return nil
		}
		detail = "no socket at " + sock
	case rtRefused:
		detail = "nothing listens on " + sock + " (a stale socket: containerd stopped or was killed)"
	case rtTimeout:
		detail = sock + " accepts connections but containerd does not answer"
	case rtOK:
		c := runtimeCondition(rt, rtConditionRuntimeReady)
		if c == nil || c.GetStatus() {
			return nil
		}
		detail = "containerd reports RuntimeReady=false"
		if r := runtimeConditionText(c); r != "" {
			detail += " (" + r + ")"
		}
	default:
		return nil
	}
	quotes := []*nodediagv1.Quote{runtimeAnswerQuote(rt), runtimeSocketQuote(in, rt)}
	if u != nil && u.GetLoadState() != "not-found" {
		quotes = append(quotes, runtimeUnitQuote(u))
	}
	quotes = append(quotes, runtimeContainerdErrors(in)...)
	return []*nodediagv1.Finding{RuntimeNotRunning.Finding(Params{"detail": detail}, quotes...)}
}

// runtimeUnitQuote quotes the unit's state as its source recorded it, or,
// without a recorded line, the state itself.
func runtimeUnitQuote(u *nodediagv1.UnitState) *nodediagv1.Quote {
	if q := unitQuote(u); q != nil {
		return q
	}
	return QuoteText(u.GetSource()+":"+u.GetName(), unitDetail(u))
}

// runtimeContainerdErrors quotes containerd's last error lines in the
// window (the runtime-error fact), the CNI start-up error excepted.
func runtimeContainerdErrors(in *Input) []*nodediagv1.Quote {
	var hits []Match
	for _, m := range in.Matched("runtime-error") {
		if lineKind(m.Src, m.Line) == "containerd" && !in.HasFact(m.Line, "runtime-cni-noise") {
			hits = append(hits, m)
		}
	}
	if len(hits) > rtMaxLogQuotes {
		hits = hits[len(hits)-rtMaxLogQuotes:]
	}
	var out []*nodediagv1.Quote
	for _, h := range hits {
		out = append(out, h.Quote())
	}
	return out
}

func runtimeCondition(rt *nodediagv1.Runtime, typ string) *nodediagv1.RuntimeCondition {
	for _, c := range rt.GetConditions() {
		if c.GetType() == typ {
			return c
		}
	}
	return nil
}

// runtimeConditionText is "reason: message", or either.
func runtimeConditionText(c *nodediagv1.RuntimeCondition) string {
	var parts []string
	for _, s := range []string{c.GetReason(), c.GetMessage()} {
		if s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, ": ")
}

// runtimeConditionQuote quotes a condition as crictl info shows it.
func runtimeConditionQuote(rt *nodediagv1.Runtime, c *nodediagv1.RuntimeCondition) *nodediagv1.Quote {
	return QuoteText(runtimeSource(rt), fmt.Sprintf("%s=%t reason=%s message=%s", c.GetType(), c.GetStatus(), c.GetReason(), c.GetMessage()))
}

// ---- CRI not served --------------------------------------------------------

// runtimeCRIDisabled raises RuntimeCRIDisabled when containerd answers on
// its socket but serves no CRI ("unknown service runtime.v1.RuntimeService":
// the plugin is disabled or failed to load). When containerd's configuration
// shows why (disabled_plugins, registry.mirrors with config_path), the
// containerd rules raise the finding with those lines and this rule adds
// nothing; otherwise containerd's log says why ("failed to load plugin
// io.containerd.grpc.v1.cri"), and the signature's line joins this finding.
func runtimeCRIDisabled(in *Input) []*nodediagv1.Finding {
	rt := in.Runtime()
	if rt.GetState() != rtNoCRI || len(containerdCRIDisabled(in)) > 0 {
		return nil
	}
	return []*nodediagv1.Finding{RuntimeCRIDisabled.Finding(nil, runtimeAnswerQuote(rt), runtimeSocketQuote(in, rt))}
}

// ---- network ---------------------------------------------------------------

// runtimeNetworkNotReady raises CNINotInitialized when the runtime reports
// NetworkReady=false (containerd: reason NetworkPluginNotReady, "Network
// plugin returns error: cni plugin not initialized") on a node that has
// joined: before that, no CNI add-on has reached it, and a missing network
// is how every node starts. A missing, invalid or incomplete CNI config
// (the CNI rules) explains it and ranks above.
//
// The runtime says how things are now, not for how long. The kubelet and
// containerd log the same condition over and over; when their lines (the
// CNINotInitialized signatures) show it lasting the signatures' persist
// time, the finding says for how long and its confidence is high; else it is
// medium (the add-on may be on its way).
func runtimeNetworkNotReady(in *Input) []*nodediagv1.Finding {
	rt := in.Runtime()
	if rt.GetState() != rtOK || !nodeJoined(in) {
		return nil
	}
	c := runtimeCondition(rt, rtConditionNetworkReady)
	if c == nil || c.GetStatus() {
		return nil
	}
	params := Params{}
	confidence := Medium
	ms := runtimeSignatureMatches(in, CNINotInitialized.ID)
	if len(ms) > 0 {
		if run := persistingRun(ms, in.persistFor(ms[0].sig.persist)); len(run) > 0 && ms[0].sig.persist > 0 {
			params["duration"] = humanDuration(span(run))
			confidence = High
		}
	}
	f := CNINotInitialized.Finding(params, runtimeConditionQuote(rt, c))
	f.Confidence = confidence
	return []*nodediagv1.Finding{f}
}

// runtimeSignatureMatches returns the lines of the window that the
// signatures claim for the problem id, in log order.
func runtimeSignatureMatches(in *Input, id string) []sigMatch {
	var out []sigMatch
	for _, m := range in.Matched(id) {
		out = append(out, sigMatch{m.Sig, m.Src, m.Line, m.sub})
	}
	return out
}

// ---- images ----------------------------------------------------------------

// rtImage is an image the node needs and the line that names it.
type rtImage struct {
	ref  string
	why  string // "kube-apiserver (static pod)", "the CRI pause image"
	line *nodediagv1.SourceLine
}

// runtimeRequiredImages lists the images the control plane needs on this
// node: those of the static pod manifests and containerd's pause image.
func runtimeRequiredImages(in *Input) []rtImage {
	var out []rtImage
	seen := map[string]bool{}
	add := func(im rtImage) {
		if im.ref == "" || seen[runtimeNormalizeRef(im.ref)] {
			return
		}
		seen[runtimeNormalizeRef(im.ref)] = true
		out = append(out, im)
	}
	for _, sp := range in.Kubeadm().GetStaticPods() {
		for _, ref := range sp.GetImages() {
			add(rtImage{ref: ref, why: sp.GetName() + " (static pod " + sp.GetPath() + ")", line: sp.GetImageLine()})
		}
	}
	c := in.Containerd()
	add(rtImage{ref: c.GetSandboxImage(), why: "the pause image (sandbox_image)", line: c.GetSandboxImageLine()})
	return out
}

// runtimeNormalizeRef writes an image reference the way containerd names
// images: a registry host ("docker.io" when there is none), "library/" for
// Docker Hub's official images, and ":latest" without a tag or digest.
func runtimeNormalizeRef(ref string) string {
	ref = strings.TrimSpace(ref)
	name, digest, hasDigest := strings.Cut(ref, "@")
	first, _, hasSlash := strings.Cut(name, "/")
	if !hasSlash || (!strings.ContainsAny(first, ".:") && first != "localhost") {
		if !strings.Contains(name, "/") {
			name = "library/" + name
		}
		name = "docker.io/" + name
	}
	if hasDigest {
		return name + "@" + digest
	}
	if i := strings.LastIndex(name, ":"); i < 0 || strings.Contains(name[i:], "/") {
		name += ":latest"
	}
	return name
}

// runtimeImageSet is the runtime's images by normalized tag and digest.
func runtimeImageSet(rt *nodediagv1.Runtime) map[string]bool {
	set := map[string]bool{}
	for _, im := range rt.GetImages() {
		for _, r := range append(append([]string(nil), im.GetTags()...), im.GetDigests()...) {
			set[runtimeNormalizeRef(r)] = true
		}
	}
	return set
}

// runtimeListed says whether the runtime probe's call succeeded (a list that
// could not be read is not an empty list).
func runtimeListed(in *Input, call string) bool {
	for _, pe := range in.Ev.GetProbes() {
		if pe.GetRuntime() == nil {
			continue
		}
		for _, u := range pe.GetUnreadable() {
			if strings.HasSuffix(u.GetSource(), " "+call) {
				return false
			}
		}
		return true
	}
	return false
}

// runtimeImagesMissing: an image the control plane needs (a static pod's,
// the pause image) that the runtime does not have, while the logs show its
// pull failing. The image's absence now proves the failure is not a
// transient that a retry fixed: the image's own finding (ImageNotFound,
// ImagePullAuthFailed when the failing line says so, else ImagePullFailed)
// is raised with the manifest line that needs it, the runtime's image list
// and the failing line; the log signatures' lines of the same problem join
// it. A missing image whose pulls are not seen failing is not a cause (the
// kubelet has not tried yet, or is down for another reason that other
// findings name): no finding.
//
// One finding per problem, naming all its images: the signature lines join
// a finding only when its problem is raised once.
func runtimeImagesMissing(in *Input) []*nodediagv1.Finding {
	rt := in.Runtime()
	if rt.GetState() != rtOK || !runtimeListed(in, "ListImages") {
		return nil
	}
	have := runtimeImageSet(rt)
	type group struct {
		images []string
		quotes []*nodediagv1.Quote
	}
	groups := map[*Problem]*group{}
	var order []*Problem
	for _, im := range runtimeRequiredImages(in) {
		if have[runtimeNormalizeRef(im.ref)] {
			continue
		}
		p, fail := runtimePullFailure(in, im.ref)
		if fail == nil {
			continue
		}
		g := groups[p]
		if g == nil {
			g = &group{}
			groups[p] = g
			order = append(order, p)
		}
		g.images = append(g.images, im.ref)
		g.quotes = append(g.quotes,
			QuoteText(runtimeSource(rt), fmt.Sprintf("%s, needed by %s, is not among the runtime's %d images", im.ref, im.why, len(rt.GetImages()))),
			QuoteLine(im.line), fail)
	}
	var out []*nodediagv1.Finding
	for _, p := range order {
		g := groups[p]
		out = append(out, p.Finding(Params{"image": strings.Join(g.images, ", ")}, g.quotes...))
	}
	return out
}

// runtimePullFailure finds the last line of the window that shows a pull of
// ref failing: a line a log signature claims that names the image as its
// pull-image fact reads it. The problem is the signature's when it is about
// the image (ImageNotFound, ImagePullAuthFailed), else ImagePullFailed: the
// cause a registry or endpoint signature names is its own finding, and it
// explains this one.
func runtimePullFailure(in *Input, ref string) (*Problem, *nodediagv1.Quote) {
	want := runtimeNormalizeRef(ref)
	var p *Problem
	var q *nodediagv1.Quote
	for _, pull := range in.Matched("pull-image") {
		img := strings.TrimRight(pull.Group("image"), ":")
		if img != ref && runtimeNormalizeRef(img) != want {
			continue
		}
		c := in.Claim(pull.Line)
		if c == nil {
			continue
		}
		switch c.Sig.ID {
		case ImageNotFound.ID, ImagePullAuthFailed.ID:
			p = catalog[c.Sig.ID]
		default:
			p = ImagePullFailed
		}
		q = c.Quote()
	}
	return p, q
}

// ---- static pod containers -------------------------------------------------

// runtimeStaticPodExits: a control plane static pod's container that the
// runtime shows exiting non-zero again and again: its latest instance
// exited with a non-zero code on the kubelet's attempt crashMinRestarts or
// later (the attempt counts the restarts of the container in its pod, and
// starts again from 0 with a new pod, after a reboot: unlike the log files
// of /var/log/pods, it does not count reboots), or it runs again, started
// less than crashRunMax ago after an instance that exited non-zero.
//
// The pods rule judges the same containers from their logs; a container it
// finds crash-looping is its finding, and this rule adds nothing. This one
// speaks when the logs do not settle it (no log files, runs too few or
// rotated) or were not read.
func runtimeStaticPodExits(in *Input) []*nodediagv1.Finding {
	rt := in.Runtime()
	if rt.GetState() != rtOK {
		return nil
	}
	type key struct{ ns, pod, name string }
	byKey := map[key][]*nodediagv1.RuntimeContainer{}
	var keys []key
	for _, c := range rt.GetContainers() {
		if c.GetPodNamespace() != "kube-system" || runtimeComponent(c.GetPodName()) == "" {
			continue
		}
		k := key{c.GetPodNamespace(), c.GetPodName(), c.GetName()}
		if byKey[k] == nil {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], c)
	}
	type crash struct {
		component string
		latest    *nodediagv1.RuntimeContainer
		prev      *nodediagv1.RuntimeContainer
	}
	var crashes []crash
	for _, k := range keys {
		cs := byKey[k]
		sort.SliceStable(cs, func(i, j int) bool { return cs[i].GetAttempt() > cs[j].GetAttempt() })
		latest := cs[0]
		var prev *nodediagv1.RuntimeContainer
		if len(cs) > 1 {
			prev = cs[1]
		}
		if !runtimeCrashing(in, latest, prev) || runtimePodsRuleFlags(in, k.ns, k.pod, k.name) {
			continue
		}
		crashes = append(crashes, crash{runtimeComponent(k.pod), latest, prev})
	}
	order := func(comp string) int {
		for i, c := range controlPlaneComponents {
			if c == comp {
				return i
			}
		}
		return len(controlPlaneComponents)
	}
	sort.SliceStable(crashes, func(i, j int) bool { return order(crashes[i].component) < order(crashes[j].component) })
	var out []*nodediagv1.Finding
	etcdDown := false
	for _, c := range crashes {
		p := StaticPodCrashLoop
		if c.component == "kube-controller-manager" || c.component == "kube-scheduler" {
			p = ControllerCrashLoop
		}
		quotes := []*nodediagv1.Quote{runtimeContainerQuote(rt, c.latest, in.Clock)}
		if c.prev != nil && c.latest.GetState() != "exited" {
			quotes = append(quotes, runtimeContainerQuote(rt, c.prev, in.Clock))
		}
		quotes = append(quotes, runtimePodLogQuote(in, c.latest))
		f := p.Finding(Params{
			"pod":       c.latest.GetPodName(),
			"container": c.latest.GetName(),
			"namespace": c.latest.GetPodNamespace(),
			"restarts":  strconv.FormatUint(uint64(c.latest.GetAttempt()), 10),
		}, quotes...)
		// The runtime shows the last exits, not the pace of the loop.
		f.Confidence = Medium
		if c.component == "kube-apiserver" && etcdDown {
			f.Confidence = Low
		}
		if c.component == "etcd" {
			etcdDown = true
		}
		out = append(out, f)
	}
	return out
}

// runtimeComponent is the control plane component whose static pod this
// is ("etcd" for "etcd-node-1"), or "".
func runtimeComponent(pod string) string {
	for _, comp := range controlPlaneComponents {
		if strings.HasPrefix(pod, comp+"-") {
			return comp
		}
	}
	return ""
}

// runtimeCrashing judges a container's latest instance (and the one before).
func runtimeCrashing(in *Input, latest, prev *nodediagv1.RuntimeContainer) bool {
	if latest.GetAttempt() < crashMinRestarts {
		return false
	}
	switch latest.GetState() {
	case "exited":
		return latest.GetExitCode() != 0 && in.InWindow(latest.GetFinishedAt())
	case "running", "created":
		if prev == nil || prev.GetState() != "exited" || prev.GetExitCode() == 0 || latest.GetStartedAt() == nil {
			return false
		}
		return in.Clock.Sub(latest.GetStartedAt().AsTime()) <= crashRunMax
	}
	return false
}

// runtimePodsRuleFlags says whether the pods rule finds the container
// crash-looping from its logs.
func runtimePodsRuleFlags(in *Input, ns, pod, name string) bool {
	for _, c := range in.Pods() {
		if c.GetNamespace() == ns && c.GetPod() == pod && c.GetContainer() == name {
			_, ok := crashLoop(in, c)
			return ok
		}
	}
	return false
}

// runtimeContainerQuote states a container instance as the runtime reports
// it: "container etcd of kube-system/etcd-node-1, attempt 5: exited with
// code 1 (Error) at 2024-05-01T11:58:00Z after 3s".
func runtimeContainerQuote(rt *nodediagv1.Runtime, c *nodediagv1.RuntimeContainer, now time.Time) *nodediagv1.Quote {
	s := fmt.Sprintf("container %s of %s/%s, attempt %d: ", c.GetName(), c.GetPodNamespace(), c.GetPodName(), c.GetAttempt())
	switch c.GetState() {
	case "exited":
		s += fmt.Sprintf("exited with code %d", c.GetExitCode())
		if r := c.GetReason(); r != "" {
			s += " (" + r + ")"
		}
		if f := c.GetFinishedAt(); f != nil {
			s += " at " + podsClock(f.AsTime())
			if st := c.GetStartedAt(); st != nil && !f.AsTime().Before(st.AsTime()) {
				s += " after " + humanDuration(f.AsTime().Sub(st.AsTime()))
			}
		}
		if m := firstLine(c.GetMessage()); m != "" {
			s += ": " + m
		}
	default:
		s += c.GetState()
		if st := c.GetStartedAt(); st != nil {
			s += " since " + podsClock(st.AsTime()) + " (" + humanDuration(now.Sub(st.AsTime())) + ")"
		}
	}
	return QuoteText(runtimeSource(rt), s)
}

// runtimePodLogQuote is the line of the container's log (/var/log/pods)
// that says why it exits, when the pods probe read it.
func runtimePodLogQuote(in *Input, c *nodediagv1.RuntimeContainer) *nodediagv1.Quote {
	for _, pc := range in.Pods() {
		if pc.GetNamespace() == c.GetPodNamespace() && pc.GetPod() == c.GetPodName() && pc.GetContainer() == c.GetName() {
			crash := podCrash{c: pc, latest: newCrashRun(in, pc.GetLog(), pc.GetFiles()), prev: newCrashRun(in, pc.GetPreviousLog(), pc.GetFiles())}
			return crash.causeQuote(in)
		}
	}
	return nil
}
