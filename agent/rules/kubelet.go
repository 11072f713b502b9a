package rules

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/version"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// Kubelet rules: flags the kubelet rejects or will reject (judged against
// the kubelet's own version, kubeletflags.go), and its --config file.
var kubeletRules = []Rule{
	{Name: "kubelet-flags", Fn: kubeletFlagFindings},
	{Name: "kubelet-config-invalid", Fn: kubeletConfigInvalid},
	{Name: "kubelet-config-missing", Fn: kubeletConfigMissing},
	{Name: "kubelet-unknown-flag-source", Fn: kubeletUnknownFlagSource},
}

// kubeletVersionEvidence is the kubelet version the flag rules judge
// against, and what shows it.
type kubeletVersionEvidence struct {
	v *version.Version
	// text is the version as the evidence spells it ("v1.35.0").
	text  string
	quote *nodediagv1.Quote
	// confidence is High when the kubelet that runs answered, Medium when
	// the version is another copy's or the Machine's expected version.
	confidence string
}

// kubeletVersion returns the version of the kubelet that kubelet.service
// runs (effectiveBinary: the copy at the unit's ExecStart path, else the first
// in PATH order, else the first whose version is known), with high
// confidence when that copy is the one the unit runs or the only kubelet
// with a version, medium otherwise; without a binary that answers, the
// version the kubelet logged at start-up; without any, the expected version
// of the context (--expect-version, the Machine's version; medium
// confidence). It returns nil when nothing tells.
func kubeletVersion(in *Input) *kubeletVersionEvidence {
	if b, ve := binaryVersion(in, "kubelet"); ve != nil {
		confidence := High // the kubelet's own log line, when no binary answered
		if parseKubeVersion(b.GetVersion()) != nil {
			known := 0
			for _, c := range binaryCopies(in, "kubelet") {
				if parseKubeVersion(c.GetVersion()) != nil {
					known++
				}
			}
			if !isCopyAt(b, unitKubeletPath(in)) && known != 1 {
				confidence = Medium
			}
		}
		return &kubeletVersionEvidence{v: ve.v, text: ve.text, quote: ve.quote, confidence: confidence}
	}
	if ev := in.Ctx.ExpectVersion; ev != "" {
		if v, err := version.ParseGeneric(ev); err == nil {
			return &kubeletVersionEvidence{
				v: v, text: ev, confidence: Medium,
				quote: QuoteText("--expect-version", fmt.Sprintf("the kubelet's own version is unknown; the Machine expects Kubernetes %s", ev)),
			}
		}
	}
	return nil
}

// kubeletFlagFindings judges every kubelet flag of the table against the
// kubelet's version:
//   - an active flag the kubelet rejects: KubeletRemovedFlag (error);
//   - an active flag removed in a later release: KubeletDeprecatedFlag
//     (warning, before the upgrade that breaks it);
//   - a dormant flag (in a file or variable that does not reach the command
//     line) the kubelet would reject: KubeletDormantRemovedFlag (warning).
//
// A dormant flag that is merely deprecated raises nothing: it neither breaks
// the kubelet now nor on the next upgrade unless also wired. Without any
// version evidence nothing is raised.
func kubeletFlagFindings(in *Input) []*nodediagv1.Finding {
	kc := in.KubeletConfig()
	if kc == nil {
		return nil
	}
	kv := kubeletVersion(in)
	if kv == nil {
		return nil
	}
	var out []*nodediagv1.Finding
	seen := map[string]bool{}
	for _, f := range kc.GetFlags() {
		lc := lookupKubeletFlag(f.GetName())
		if lc == nil {
			continue
		}
		var p *Problem
		switch {
		case f.GetActive() && lc.removedBy(kv.v):
			p = KubeletRemovedFlag
		case f.GetActive() && lc.deprecatedAt(kv.v):
			p = KubeletDeprecatedFlag
		case !f.GetActive() && lc.removedBy(kv.v):
			p = KubeletDormantRemovedFlag
		default:
			continue
		}
		file := f.GetSource().GetPath()
		if file == "" {
			file = kc.GetExecStart().GetPath()
		}
		key := fmt.Sprintf("%s|%s|%s|%d", p.ID, f.GetName(), file, f.GetSource().GetLine())
		if seen[key] {
			continue
		}
		seen[key] = true
		params := Params{
			"version":       kv.text,
			"flag":          f.GetName(),
			"file":          file,
			"variable_note": "",
			"removed_in":    lc.Removed,
			"replacement":   lc.Replacement,
			"reason":        f.GetInactiveReason(),
		}
		if v := f.GetVariable(); v != "" {
			params["variable_note"] = " (" + v + ")"
		}
		fd := p.Finding(params, QuoteLine(f.GetSource()), kv.quote)
		if p == KubeletRemovedFlag {
			// The kubelet's own refusal, when a log shows it, proves the
			// effect of the line that carries the flag.
			if q := unknownFlagLine(in, f.GetName()); q != nil {
				fd.Evidence = append(fd.Evidence, q)
			}
		}
		fd.Confidence = weakest(p.Confidence, kv.confidence)
		if !lc.Confirmed || kc.GetAssumedWiring() {
			// The removal release is inferred, or the unit that would put
			// the flag on the command line was not seen.
			fd.Confidence = weakest(fd.Confidence, Medium)
		}
		out = append(out, fd)
	}
	return out
}

// loggedKubeletVersion is the version the kubelet stated in the newest
// start-up line of the logs (the kubelet-version fact): when no binary could
// be asked (a copy of a host without its binaries, --exec none), the
// kubelet's own word.
func loggedKubeletVersion(in *Input) *versionEvidence {
	var found *versionEvidence
	var at time.Time
	for _, m := range in.Matched("kubelet-version") {
		text := m.Group("version")
		v := parseKubeVersion(text)
		if v == nil {
			continue
		}
		if t := m.Line.GetTime(); found == nil || (t != nil && !t.AsTime().Before(at)) {
			found = &versionEvidence{text: text, v: v, quote: m.Quote()}
			if t != nil {
				at = t.AsTime()
			}
		}
	}
	return found
}

// unknownFlagLine quotes the first log line where the kubelet refuses
// --flag (the KubeletUnknownFlag signature), or nil.
func unknownFlagLine(in *Input, flag string) *nodediagv1.Quote {
	for _, m := range in.m().byName[KubeletUnknownFlag.ID] {
		if m.Group("flag") == "--"+flag {
			return m.Quote()
		}
	}
	return nil
}

// weakest returns the lower of two confidences.
func weakest(a, b string) string {
	if Confidence(b).Below(Confidence(a)) {
		return b
	}
	return a
}

// kubeletConfigFlag returns the active --config flag that names the
// configuration file c, or nil.
func kubeletConfigFlag(kc *nodediagv1.KubeletConfig) *nodediagv1.KubeletFlag {
	var found *nodediagv1.KubeletFlag
	for _, f := range kc.GetFlags() {
		if f.GetActive() && f.GetName() == "config" && f.GetValue() == kc.GetConfig().GetPath() {
			found = f
		}
	}
	return found
}

// kubeletConfigInvalid raises KubeletConfigInvalid for a --config file the
// kubelet cannot load. The file must be the one the kubelet's command line
// names: a config.yaml the kubelet is not told to read does not stop it.
func kubeletConfigInvalid(in *Input) []*nodediagv1.Finding {
	kc := in.KubeletConfig()
	c := kc.GetConfig()
	if !c.GetPresent() || c.GetParseError() == "" {
		return nil
	}
	flag := kubeletConfigFlag(kc)
	if flag == nil && !kc.GetAssumedWiring() {
		return nil
	}
	return []*nodediagv1.Finding{KubeletConfigInvalid.Finding(
		Params{"file": c.GetPath(), "error": c.GetParseError()},
		QuoteText(c.GetPath(), c.GetParseError()),
		QuoteLine(c.GetParseErrorLine()),
		QuoteLine(flag.GetSource()),
	)}
}

// kubeletConfigMissing raises KubeletConfigMissing when the --config file
// does not exist although the bootstrap is over, or the node had joined. Before kubeadm init/join
// has run, a missing /var/lib/kubelet/config.yaml is normal (the kubelet
// crash-loops on it until the kubelet-start phase writes it), so the rule
// needs evidence that the bootstrap finished: cloud-init done or in error
// with its result written, or CAPI's bootstrap sentinel present.
func kubeletConfigMissing(in *Input) []*nodediagv1.Finding {
	kc := in.KubeletConfig()
	c := kc.GetConfig()
	if c == nil || c.GetPresent() {
		return nil
	}
	flag := kubeletConfigFlag(kc)
	if flag == nil && !kc.GetAssumedWiring() {
		return nil
	}
	ci := in.CloudInit()
	var done *nodediagv1.Quote
	switch {
	case ci.GetSentinelPresent():
		sentinel := ci.GetSentinelPath()
		if sentinel == "" {
			sentinel = "/run/cluster-api/bootstrap-success.complete"
		}
		done = QuoteText(sentinel, "present: the bootstrap script ran to its end")
	case ci.GetResultPresent() && (ci.GetStatus() == "done" || ci.GetStatus() == "error"):
		src := ci.GetStatusSource()
		if src == "" {
			src = "cloud-init"
		}
		done = QuoteText(src, "cloud-init status: "+ci.GetStatus())
	case in.Kubeadm().GetKubeletConf().GetPresent():
		// kubeadm writes config.yaml before the TLS bootstrap that gives
		// kubelet.conf: a node with kubelet.conf had the file once.
		path := in.Kubeadm().GetKubeletConf().GetPath()
		if path == "" {
			path = bootstrapKubeletConf
		}
		done = QuoteText(path, "present: the node joined its cluster, so kubeadm had written the kubelet's configuration")
	default:
		return nil
	}
	return []*nodediagv1.Finding{KubeletConfigMissing.Finding(
		Params{"file": c.GetPath()},
		QuoteText(c.GetPath(), "does not exist"),
		QuoteLine(flag.GetSource()),
		done,
	)}
}

// kubeletUnknownFlagSource ties the kubelet's refusal of a flag, in its log,
// to the line that puts the flag on its command line: the file to fix. It
// stays silent for a flag that KubeletRemovedFlag judges (the flag's table
// entry and the kubelet's version are known): that finding quotes both.
func kubeletUnknownFlagSource(in *Input) []*nodediagv1.Finding {
	kc := in.KubeletConfig()
	if kc == nil {
		return nil
	}
	known := kubeletVersion(in) != nil
	seen := map[string]bool{}
	var out []*nodediagv1.Finding
	for _, m := range in.Matched(KubeletUnknownFlag.ID) {
		name, long := strings.CutPrefix(m.Group("flag"), "--")
		if !long || seen[name] {
			continue
		}
		seen[name] = true
		if known && lookupKubeletFlag(name) != nil {
			continue
		}
		for _, f := range kc.GetFlags() {
			if !f.GetActive() || f.GetName() != name || f.GetSource() == nil {
				continue
			}
			out = append(out, KubeletUnknownFlag.Finding(
				Params{"flag": "--" + name, "where": " set in " + f.GetSource().GetPath()},
				QuoteLine(f.GetSource()), m.Quote()))
			break
		}
	}
	return out
}
