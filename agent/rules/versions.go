package rules

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// versionRules judge the versions of the node's binaries: against the version
// the Machine expects, against the control plane (the Kubernetes version skew
// policy, kubernetes/website content/en/releases/version-skew-policy.md), and
// against kubeadm (kubeadm's own skew policy, create-cluster-kubeadm.md
// "Version skew policy"). Only minor versions matter for skew; patches do
// not.
var versionRules = []Rule{
	{Name: "kubelet-not-installed", Fn: ruleKubeletNotInstalled},
	{Name: "kubelet-multiple-binaries", Fn: ruleKubeletMultipleBinaries},
	{Name: "version-mismatch", Fn: ruleVersionMismatch},
	{Name: "kubelet-control-plane-skew", Fn: ruleKubeletControlPlaneSkew},
	{Name: "kubeadm-kubelet-skew", Fn: ruleKubeadmKubeletSkew},
	{Name: "kubeadm-control-plane-skew", Fn: ruleKubeadmControlPlaneSkew},
	{Name: "kubectl-skew", Fn: ruleKubectlSkew},
	{Name: "binary-is-a-download-error", Fn: ruleBinaryIsText},
}

// ruleBinaryIsText: a kubelet, kubeadm or other binary whose file is text,
// not a program: a download that failed and was saved in the binary's place
// (curl without --fail writes the server's XML or HTML error page, wget -O
// its 404 body). Every use of the binary then fails with a shell syntax
// error or "exec format error"; the file's first line says what the server
// answered.
func ruleBinaryIsText(in *Input) []*nodediagv1.Finding {
	var out []*nodediagv1.Finding
	for _, b := range in.Binaries() {
		text := b.GetNotAProgram()
		if text == "" {
			continue
		}
		out = append(out, BootstrapDownloadFailed.Finding(
			Params{"url": b.GetPath(), "what": "the file is not a program but what the server answered"},
			QuoteText(b.GetPath(), text)))
	}
	return out
}

// binaryVersionsProbe is the name of the probe that fills Binaries: a rule
// that concludes from the absence of a binary needs to know it looked.
const binaryVersionsProbe = "binary-versions"

// searchedBinDirs are the directories the binary-versions probe searches.
var searchedBinDirs = []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin", "/opt/bin"}

// packagedKubeletPath is where packages (deb, rpm) and the CAPI images install
// the kubelet, and what kubeadm's 10-kubeadm.conf drop-in runs.
const packagedKubeletPath = "/usr/bin/kubelet"

// versionEvidence is a version and the evidence that shows it.
type versionEvidence struct {
	text  string // "v1.32.0", as shown to the operator
	v     *version.Version
	quote *nodediagv1.Quote
	// assumed is true when the version is the one the Machine expects, not
	// one observed on the node.
	assumed bool
}

// minor is "1.32".
func (k *versionEvidence) minor() string { return fmt.Sprintf("%d.%d", k.v.Major(), k.v.Minor()) }

// parseKubeVersion reads "v1.32.0", "1.32.0", "v1.33.0-rc.1+abc" or "v1.32"; nil
// when s is not a version ("stable-1.32", "").
func parseKubeVersion(s string) *version.Version {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	if v, err := version.ParseSemantic(s); err == nil {
		return v
	}
	if v, err := version.ParseGeneric(s); err == nil {
		return v
	}
	return nil
}

func versionWithV(s string) string {
	if s == "" || strings.HasPrefix(s, "v") {
		return s
	}
	return "v" + s
}

// binaryCopies returns the copies of one binary, in the probe's (PATH) order.
func binaryCopies(in *Input, name string) []*nodediagv1.Binary {
	var out []*nodediagv1.Binary
	for _, b := range in.Binaries() {
		if b.GetName() == name {
			out = append(out, b)
		}
	}
	return out
}

// unitKubeletPath is the binary the kubelet unit's ExecStart runs, or "".
func unitKubeletPath(in *Input) string {
	kc := in.KubeletConfig()
	if p := kc.GetExecPath(); p != "" {
		return p
	}
	return execStartBinary(kc.GetExecStart().GetText())
}

// execStartBinary reads the program of an ExecStart= line: its first word,
// without systemd's prefixes ("-", "@", ":", "+", "!", "!!"; systemd.service(5)
// "Command lines") or quotes.
func execStartBinary(text string) string {
	s := strings.TrimSpace(text)
	// systemd allows blanks around "=" ("ExecStart = /usr/bin/kubelet").
	if rest, ok := strings.CutPrefix(s, "ExecStart"); ok {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(rest), "="); ok {
			s = strings.TrimSpace(rest)
		}
	}
	f := strings.Fields(s)
	if len(f) == 0 {
		return ""
	}
	w := strings.TrimLeft(f[0], "-@:+!")
	return strings.Trim(w, `"'`)
}

// isCopyAt says whether b is the file at host path p (its path, another path
// that is the same file, or the file its symlinks lead to).
func isCopyAt(b *nodediagv1.Binary, p string) bool {
	if p == "" {
		return false
	}
	if b.GetPath() == p || b.GetResolvedPath() == p {
		return true
	}
	for _, a := range b.GetAliases() {
		if a == p {
			return true
		}
	}
	return false
}

// effectiveBinary is the copy of name that runs: for the kubelet the one the
// unit's ExecStart names; else the first in PATH order (Effective); else the
// first whose version is known.
func effectiveBinary(in *Input, name string) *nodediagv1.Binary {
	bs := binaryCopies(in, name)
	if name == "kubelet" {
		if p := unitKubeletPath(in); p != "" {
			for _, b := range bs {
				if isCopyAt(b, p) {
					return b
				}
			}
		}
	}
	for _, b := range bs {
		if b.GetEffective() {
			return b
		}
	}
	for _, b := range bs {
		if b.GetVersion() != "" {
			return b
		}
	}
	return nil
}

// binaryVersion is the version of the copy of name that runs, with the quote
// of what it answered; for the kubelet, when no copy answered, the version
// it logged at start-up; nil when unknown.
func binaryVersion(in *Input, name string) (*nodediagv1.Binary, *versionEvidence) {
	b := effectiveBinary(in, name)
	var v *version.Version
	if b != nil {
		v = parseKubeVersion(b.GetVersion())
	}
	if v == nil {
		if name == "kubelet" {
			return b, loggedKubeletVersion(in)
		}
		return b, nil
	}
	return b, &versionEvidence{text: versionWithV(b.GetVersion()), v: v, quote: QuoteExec(b)}
}

// controlPlaneKubeVersion is the control plane's version as the node shows it
// (the kube-apiserver static pod, else the kubeadm configuration), else the
// version the Machine expects.
func controlPlaneKubeVersion(in *Input) *versionEvidence {
	k := in.Kubeadm()
	if v := parseKubeVersion(k.GetControlPlaneVersion()); v != nil {
		q := QuoteLine(k.GetControlPlaneVersionSource())
		if q == nil {
			q = QuoteText("kubeadm", "control plane version "+k.GetControlPlaneVersion())
		}
		return &versionEvidence{text: versionWithV(k.GetControlPlaneVersion()), v: v, quote: q}
	}
	return expectedKubeVersion(in)
}

// expectedKubeVersion is --expect-version (or the Machine's version in the
// collector); nil when not given.
func expectedKubeVersion(in *Input) *versionEvidence {
	e := in.Ctx.ExpectVersion
	v := parseKubeVersion(e)
	if v == nil {
		return nil
	}
	return &versionEvidence{text: versionWithV(e), v: v, quote: QuoteText("--expect-version", e), assumed: true}
}

// minorsBehind is how many minor versions b is behind a (negative when b is
// ahead); ok is false when the majors differ, where no skew is allowed.
func minorsBehind(a, b *version.Version) (n int, ok bool) {
	if a.Major() != b.Major() {
		return 0, false
	}
	return int(a.Minor()) - int(b.Minor()), true
}

// newerMinor says whether a's major.minor is above b's.
func newerMinor(a, b *version.Version) bool {
	if a.Major() != b.Major() {
		return a.Major() > b.Major()
	}
	return a.Minor() > b.Minor()
}

// versionDiffers says whether a binary's version is not the expected one: major,
// minor, patch and pre-release compared, build metadata ignored, patches of
// 100 and more (LTS builds) taken literally. An expectation of only
// major.minor ("v1.32") accepts any patch.
func versionDiffers(got, want *version.Version) bool {
	if len(want.Components()) == 2 {
		return got.Major() != want.Major() || got.Minor() != want.Minor()
	}
	if got.Major() != want.Major() || got.Minor() != want.Minor() || got.Patch() != want.Patch() {
		return true
	}
	return got.PreRelease() != want.PreRelease()
}

// skewConfidence lowers a skew finding's confidence when the control plane's
// version is only the Machine's expected one: a worker's Machine may
// legitimately expect another version than the control plane runs.
func skewConfidence(f *nodediagv1.Finding, cp *versionEvidence) *nodediagv1.Finding {
	if cp.assumed && f.Confidence == High {
		f.Confidence = Medium
	}
	return f
}

// ---- rules -------------------------------------------------------------------

// ruleKubeletNotInstalled: no kubelet anywhere in the PATH directories, on a
// node meant to run one (a kubelet unit, kubeadm or its files), when the
// binaries probe did look. A machine with neither is not set up for a
// kubelet yet (an install that has not reached it): its absence is no
// failure of its own.
func ruleKubeletNotInstalled(in *Input) []*nodediagv1.Finding {
	if in.Probe(binaryVersionsProbe).GetStatus() != "ok" {
		return nil
	}
	k, kc := in.Kubeadm(), in.KubeletConfig()
	hasUnit := !kc.GetAssumedWiring() && (len(kc.GetUnitFiles()) > 0 || kc.GetExecStart() != nil)
	kubeadm := len(binaryCopies(in, "kubeadm")) > 0 || len(k.GetStaticPods()) > 0 || len(k.GetConfigFiles()) > 0 || k.GetKubeletConf().GetPresent()
	if !hasUnit && !kubeadm {
		return nil
	}
	if len(binaryCopies(in, "kubelet")) > 0 {
		return nil
	}
	unit := unitKubeletPath(in)
	if unit == "" {
		unit = packagedKubeletPath
	}
	if !slices.Contains(searchedBinDirs, path.Dir(unit)) {
		// The unit runs a kubelet where the probe did not look
		// (/opt/kubernetes/bin): its absence is not known.
		return nil
	}
	return []*nodediagv1.Finding{KubeletNotInstalled.Finding(
		Params{"unit_path": unit},
		QuoteLine(in.KubeletConfig().GetExecStart()),
		QuoteText(unit, "does not exist (no kubelet in /usr/local/sbin, /usr/local/bin, /usr/sbin, /usr/bin, /sbin, /bin or /opt/bin either)"),
	)}
}

// ruleKubeletMultipleBinaries: copies of the kubelet of different versions;
// which one runs depends on the unit and PATH, and an install that put the
// new one beside the old one did not replace what runs.
func ruleKubeletMultipleBinaries(in *Input) []*nodediagv1.Finding {
	bs := binaryCopies(in, "kubelet")
	versions := map[string]bool{}
	var parts []string
	var quotes []*nodediagv1.Quote
	for _, b := range bs {
		v := b.GetVersion()
		if pv := parseKubeVersion(v); pv != nil {
			versions[pv.String()] = true
		}
		if v == "" {
			v = "version unknown"
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", b.GetPath(), v))
		quotes = append(quotes, QuoteExec(b))
	}
	if len(versions) < 2 {
		return nil
	}
	eff := effectiveBinary(in, "kubelet")
	quotes = append(quotes, QuoteLine(in.KubeletConfig().GetExecStart()))
	return []*nodediagv1.Finding{KubeletMultipleBinaries.Finding(
		Params{"paths": strings.Join(parts, ", "), "effective": eff.GetPath()},
		quotes...,
	)}
}

// ruleVersionMismatch: the kubelet or kubeadm that runs is not the version
// the Machine expects (a gallery image's binaries left in place by a
// replacement that failed silently).
func ruleVersionMismatch(in *Input) []*nodediagv1.Finding {
	want := expectedKubeVersion(in)
	if want == nil {
		return nil
	}
	var out []*nodediagv1.Finding
	for _, name := range []string{"kubelet", "kubeadm"} {
		b, got := binaryVersion(in, name)
		if got == nil || !versionDiffers(got.v, want.v) {
			continue
		}
		quotes := []*nodediagv1.Quote{got.quote, want.quote}
		if name == "kubelet" {
			// What the kubelet that ran said of itself: the binary on disk
			// and the one that ran may differ.
			if logged := loggedKubeletVersion(in); logged != nil && !versionDiffers(logged.v, got.v) {
				quotes = append(quotes, logged.quote)
			}
		}
		out = append(out, VersionMismatch.Finding(
			Params{"binary": name, "version": got.text, "expected": want.text, "path": b.GetPath()},
			quotes...,
		))
	}
	return out
}

// ruleKubeletControlPlaneSkew: the kubelet must not be newer than
// kube-apiserver, and may be at most three minor versions older (two for a
// kubelet older than 1.25, or a control plane older than 1.28: n-3 came with
// 1.28 control planes, KEP-3935).
func ruleKubeletControlPlaneSkew(in *Input) []*nodediagv1.Finding {
	_, kl := binaryVersion(in, "kubelet")
	cp := controlPlaneKubeVersion(in)
	if kl == nil || cp == nil {
		return nil
	}
	if newerMinor(kl.v, cp.v) {
		quotes := []*nodediagv1.Quote{kl.quote, cp.quote}
		// kubeadm's own refusal, when its preflight met the two.
		if ms := in.Matched(KubeadmPreflightKubeletVersion.ID); len(ms) > 0 {
			quotes = append(quotes, ms[len(ms)-1].Quote())
		}
		return []*nodediagv1.Finding{skewConfidence(KubeletNewerThanControlPlane.Finding(
			Params{"version": kl.text, "control_plane": cp.text, "control_plane_minor": cp.minor()},
			quotes...,
		), cp)}
	}
	skew, ok := minorsBehind(cp.v, kl.v)
	if !ok {
		return nil
	}
	maxSkew := 2
	if cp.v.AtLeast(version.MajorMinor(1, 28)) && kl.v.AtLeast(version.MajorMinor(1, 25)) {
		maxSkew = 3
	}
	if skew <= maxSkew {
		return nil
	}
	return []*nodediagv1.Finding{skewConfidence(KubeletTooOld.Finding(
		Params{"version": kl.text, "control_plane": cp.text, "skew": fmt.Sprint(skew), "max_skew": fmt.Sprint(maxSkew)},
		kl.quote, cp.quote,
	), cp)}
}

// ruleKubeadmKubeletSkew: kubeadm supports a kubelet of its own minor version
// down to three older (since kubeadm 1.29, kubernetes/kubernetes#120825; one
// older before), never a newer one.
func ruleKubeadmKubeletSkew(in *Input) []*nodediagv1.Finding {
	_, ka := binaryVersion(in, "kubeadm")
	_, kl := binaryVersion(in, "kubelet")
	if ka == nil || kl == nil {
		return nil
	}
	allowed := 1
	if ka.v.AtLeast(version.MajorMinor(1, 29)) {
		allowed = 3
	}
	behind, ok := minorsBehind(ka.v, kl.v)
	if ok && behind >= 0 && behind <= allowed {
		return nil
	}
	minKubelet := fmt.Sprintf("%d.%d", ka.v.Major(), max(int(ka.v.Minor())-allowed, 0))
	return []*nodediagv1.Finding{KubeadmKubeletSkew.Finding(
		Params{"kubeadm": ka.text, "version": kl.text, "min_kubelet": minKubelet},
		ka.quote, kl.quote,
	)}
}

// ruleKubeadmControlPlaneSkew: kubeadm manages a control plane of its own
// minor version or one older.
func ruleKubeadmControlPlaneSkew(in *Input) []*nodediagv1.Finding {
	_, ka := binaryVersion(in, "kubeadm")
	cp := controlPlaneKubeVersion(in)
	if ka == nil || cp == nil {
		return nil
	}
	behind, ok := minorsBehind(ka.v, cp.v)
	if ok && behind >= 0 && behind <= 1 {
		return nil
	}
	return []*nodediagv1.Finding{skewConfidence(KubeadmControlPlaneSkew.Finding(
		Params{"kubeadm": ka.text, "control_plane": cp.text},
		ka.quote, cp.quote,
	), cp)}
}

// ruleKubectlSkew: kubectl is supported within one minor version of
// kube-apiserver, older or newer.
func ruleKubectlSkew(in *Input) []*nodediagv1.Finding {
	_, kc := binaryVersion(in, "kubectl")
	cp := controlPlaneKubeVersion(in)
	if kc == nil || cp == nil {
		return nil
	}
	behind, ok := minorsBehind(cp.v, kc.v)
	if ok && behind >= -1 && behind <= 1 {
		return nil
	}
	return []*nodediagv1.Finding{skewConfidence(KubectlSkew.Finding(
		Params{"kubectl": kc.text, "control_plane": cp.text},
		kc.quote, cp.quote,
	), cp)}
}
