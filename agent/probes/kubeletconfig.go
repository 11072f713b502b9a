package probes

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/probe"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// The kubelet-config probe answers "what command line does systemd give the
// kubelet, and where does each flag come from?". It reads kubelet.service and
// its drop-ins the way systemd does, the environment files they name, and the
// kubelet's --config file. It never asks systemd (no systemctl, no D-Bus), so
// the answer is the same on a live node, a bundle and a copied root.
//
// Host paths it reads, and who writes them:
const (
	kubeletUnitName = "kubelet.service"
	// Written by `kubeadm init/join` (phase kubelet-start): KUBELET_KUBEADM_ARGS,
	// the flags kubeadm computed (container runtime endpoint, node labels,
	// and, up to kubeadm 1.34, --pod-infra-container-image).
	kubeadmFlagsEnvFile = "/var/lib/kubelet/kubeadm-flags.env"
	// Shipped by the kubelet deb package (Ubuntu node images) for the
	// operator's KUBELET_EXTRA_ARGS; read by 10-kubeadm.conf of the deb.
	defaultKubeletEnvFile = "/etc/default/kubelet"
	// Shipped by the kubelet rpm package (Azure Linux, RHEL-like images) for
	// KUBELET_EXTRA_ARGS; read by 10-kubeadm.conf of the rpm. The Azure Linux 3
	// gallery image sets --pod-infra-container-image in it.
	sysconfigKubeletEnvFile = "/etc/sysconfig/kubelet"
	// The kubelet's state directory (--root-dir default); kubeadm writes
	// config.yaml and kubeadm-flags.env there.
	kubeletStateDir = "/var/lib/kubelet"
	// Written by `kubeadm init/join` (phase kubelet-start) from the
	// KubeletConfiguration of the kubeadm configuration.
	kubeletDefaultConfigFile = "/var/lib/kubelet/config.yaml"
)

// kubeletEnvFiles are the environment files that carry kubelet flags on
// kubeadm-style nodes. Their flags are reported even when the unit does not
// read them: a stale flag in a dormant file bites the day the file is wired.
var kubeletEnvFiles = []string{kubeadmFlagsEnvFile, defaultKubeletEnvFile, sysconfigKubeletEnvFile}

// unitSearchPath is systemd's system unit search path (systemd.unit(5)),
// highest priority first: the first directory holding kubelet.service
// provides the unit, and a drop-in masks the drop-ins of the same name in the
// directories after it. /lib/systemd/system is /usr/lib/systemd/system on
// merged-/usr hosts; Host resolves the symlink and the name masking removes
// the duplicates.
var unitSearchPath = []string{
	"/etc/systemd/system",
	"/run/systemd/system",
	"/usr/local/lib/systemd/system",
	"/usr/lib/systemd/system",
	"/lib/systemd/system",
}

// assumedDropInSource names the assumed wiring in SourceLines: it is not a
// file of the host.
const assumedDropInSource = "assumed:10-kubeadm.conf"

// assumedDropIn is the kubeadm drop-in of the kubelet deb and rpm packages
// (kubernetes/release, cmd/krel/templates/latest/kubeadm/10-kubeadm.conf),
// with both the deb's /etc/default/kubelet and the rpm's
// /etc/sysconfig/kubelet. It stands in for the unit when a node carries the
// kubelet's files but no unit (a copied root without /usr/lib, a bundle).
const assumedDropIn = `[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
EnvironmentFile=-/etc/default/kubelet
EnvironmentFile=-/etc/sysconfig/kubelet
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
`

// maxSourceText caps the verbatim text kept for one (logical) line.
const maxSourceText = 4096

type kubeletConfig struct{}

func (kubeletConfig) Name() string { return "kubelet-config" }

// Run reads the kubelet's systemd unit, environment files and configuration
// file. It is not applicable when the host has no kubelet unit, no kubelet
// environment file and no /var/lib/kubelet.
func (kubeletConfig) Run(ctx context.Context, h *host.Host) (*nodediagv1.ProbeEvidence, error) {
	kc := &nodediagv1.KubeletConfig{}
	pe := &nodediagv1.ProbeEvidence{Data: &nodediagv1.ProbeEvidence_KubeletConfig{KubeletConfig: kc}}

	units, masked := findKubeletUnit(h, pe)
	kc.Masked = masked
	if len(units) > 0 && !masked {
		kc.Enablement, kc.WantedBy = kubeletEnablement(h)
	}
	if len(units) == 0 {
		if !kubeletTraces(h, pe) {
			return nil, fmt.Errorf("no %s, no kubelet environment file and no %s: %w", kubeletUnitName, kubeletStateDir, probe.ErrNotApplicable)
		}
		kc.AssumedWiring = true
		units = []unitSource{{Path: assumedDropInSource, Directives: parseUnitFile([]byte(assumedDropIn))}}
	} else {
		for _, u := range units {
			kc.UnitFiles = append(kc.UnitFiles, u.Path)
		}
	}
	if err := ctx.Err(); err != nil {
		return pe, err
	}

	var svc serviceConfig
	if !masked {
		svc = collectService(units)
	}
	if svc.exec != nil {
		kc.ExecStart = svc.exec.src
		kc.ExecPath = svc.exec.cmd.Path
	}

	// The environment as systemd builds it for ExecStart: Environment=
	// first, then every EnvironmentFile= in order, which override it
	// (systemd.exec(5)); within each, a later assignment wins.
	env := map[string]*envAssign{}
	for _, a := range svc.env {
		if a.ignored == "" {
			env[a.name] = a
		}
	}
	all := append([]*envAssign(nil), svc.env...)
	read := map[string]*nodediagv1.EnvFile{}
	for _, ref := range svc.envFiles {
		ef := &nodediagv1.EnvFile{Path: ref.path, Optional: ref.optional}
		kc.EnvFiles = append(kc.EnvFiles, ef)
		if first := read[ref.path]; first != nil {
			// Named twice: reading it again changes nothing.
			ef.Present, ef.Error = first.Present, first.Error
			continue
		}
		assigns, present, err := readKubeletEnvFile(h, pe, ref.path)
		ef.Present = present
		if err != nil {
			ef.Error = err.Error()
		}
		read[ref.path] = ef
		for _, a := range assigns {
			if a.ignored == "" {
				env[a.name] = a
			}
		}
		all = append(all, assigns...)
	}
	// The well-known files the unit does not read: their flags are dormant.
	for _, p := range kubeletEnvFiles {
		if read[p] != nil {
			continue
		}
		assigns, _, _ := readKubeletEnvFile(h, pe, p)
		for _, a := range assigns {
			a.ignored = p + " is not an EnvironmentFile of " + kubeletUnitName
		}
		all = append(all, assigns...)
	}

	// Active flags: the expanded ExecStart.
	used := map[string]bool{}
	if svc.exec != nil {
		values := map[string]string{}
		for name, a := range env {
			values[name] = a.value
		}
		words, refs := expandExecArgs(svc.exec.cmd.Args, values)
		for _, r := range refs {
			used[r] = true
		}
		texts := make([]string, len(words))
		for i, w := range words {
			texts[i] = w.Text
		}
		for _, f := range splitKubeletFlags(texts) {
			kf := &nodediagv1.KubeletFlag{Name: f.Name, Value: f.Value, Source: svc.exec.src, Active: true}
			if v := words[f.Index].Var; v != "" {
				kf.Variable = v
				if a := env[v]; a != nil {
					kf.Source = a.src
				}
			}
			kc.Flags = append(kc.Flags, kf)
		}
	}
	// Dormant flags: every other assignment that carries flags.
	for _, a := range all {
		if svc.exec != nil && used[a.name] && env[a.name] == a {
			continue
		}
		words, _ := splitSystemdWords(a.value, false, true)
		flags := splitKubeletFlags(words)
		if len(flags) == 0 {
			continue
		}
		reason := a.ignored
		switch {
		case masked:
			reason = kubeletUnitName + " is masked"
		case reason != "":
		case svc.exec == nil:
			reason = kubeletUnitName + " has no ExecStart"
		case env[a.name] != nil && env[a.name] != a:
			reason = fmt.Sprintf("%s is set again at %s:%d", a.name, env[a.name].src.GetPath(), env[a.name].src.GetLine())
		default:
			reason = "ExecStart does not use $" + a.name
		}
		for _, f := range flags {
			kc.Flags = append(kc.Flags, &nodediagv1.KubeletFlag{
				Name: f.Name, Value: f.Value, Source: a.src, Variable: a.name, InactiveReason: reason,
			})
		}
	}

	kc.Config = readKubeletConfigFile(h, pe, kc.Flags)
	return pe, nil
}

// unitSource is one unit file or drop-in, parsed.
type unitSource struct {
	Path       string
	Directives []unitDirective
}

// kubeletWantsDirs are where systemctl enable links a unit so that its
// target starts it at boot (systemd.unit(5), [Install] WantedBy=).
var kubeletWantsDirs = []string{
	"/etc/systemd/system/multi-user.target.wants",
	"/etc/systemd/system/default.target.wants",
	"/etc/systemd/system/graphical.target.wants",
	"/usr/lib/systemd/system/multi-user.target.wants",
	"/lib/systemd/system/multi-user.target.wants",
}

// kubeletEnablement says whether systemd starts kubelet.service at boot: a
// link in a target's .wants directory ("enabled", and where), or none
// ("disabled": the unit only runs when something starts it, and a reboot
// leaves the node without a kubelet). Nothing is said when a directory
// cannot be read.
func kubeletEnablement(h *host.Host) (enablement, wantedBy string) {
	for _, d := range kubeletWantsDirs {
		p := d + "/" + kubeletUnitName
		ok, err := h.Exists(p)
		if err != nil {
			return "", ""
		}
		if ok {
			return "enabled", p
		}
	}
	return "disabled", ""
}

// findKubeletUnit returns kubelet.service and its drop-ins in the order
// systemd applies them: the unit file of the highest-priority directory,
// then the drop-ins (<dir>/kubelet.service.d/*.conf and the service-wide
// <dir>/service.d/*.conf) sorted by file name, a drop-in masking those of the
// same name in lower-priority directories. A file that cannot be read is
// recorded in pe and returned without directives; a masked drop-in (a
// symlink to /dev/null) is left out. When the unit itself is masked, only
// its file is returned, and masked is true: systemd loads nothing else.
func findKubeletUnit(h *host.Host, pe *nodediagv1.ProbeEvidence) (units []unitSource, masked bool) {
	var out []unitSource
	for _, dir := range unitSearchPath {
		p := dir + "/" + kubeletUnitName
		if maskedUnitFile(h, p) {
			return []unitSource{{Path: p}}, true
		}
		b, err := h.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			// It is the unit systemd would use: list it, and do not fall
			// back to a lower-priority copy.
			probe.Unreadable(pe, p, err)
			out = append(out, unitSource{Path: p})
			break
		}
		if len(b) == 0 {
			// "If a unit file is empty (i.e. has the file size 0) or is
			// symlinked to /dev/null, ... it appears with a load state of
			// masked" (systemd.unit(5)).
			return []unitSource{{Path: p}}, true
		}
		out = append(out, unitSource{Path: p, Directives: parseUnitFile(b)})
		break
	}

	dropins := map[string]string{} // file name → host path of the winning copy
	for _, dir := range unitSearchPath {
		for _, d := range []string{dir + "/" + kubeletUnitName + ".d", dir + "/service.d"} {
			ents, err := h.ReadDir(d)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				probe.Unreadable(pe, d, err)
				continue
			}
			for _, e := range ents {
				name := e.Name()
				if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".conf") {
					continue
				}
				if _, seen := dropins[name]; !seen {
					dropins[name] = d + "/" + name
				}
			}
		}
	}
	names := make([]string, 0, len(dropins))
	for n := range dropins {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := dropins[n]
		if maskedUnitFile(h, p) {
			continue
		}
		b, err := h.ReadFile(p)
		if err != nil {
			probe.Unreadable(pe, p, err)
			out = append(out, unitSource{Path: p})
			continue
		}
		out = append(out, unitSource{Path: p, Directives: parseUnitFile(b)})
	}
	return out, false
}

// maskedUnitFile says whether p is a symlink to /dev/null, systemd's way of
// masking a unit or a drop-in. Resolve answers from the link itself, so this
// holds in a copied root that has no /dev.
func maskedUnitFile(h *host.Host, p string) bool {
	r, err := h.Resolve(p)
	return err == nil && r == "/dev/null"
}

// kubeletTraces says whether the host carries the kubelet's files without a
// unit. An error other than "absent" counts as a trace (and is recorded).
func kubeletTraces(h *host.Host, pe *nodediagv1.ProbeEvidence) bool {
	found := false
	for _, p := range append([]string{kubeletStateDir}, kubeletEnvFiles...) {
		ok, err := h.Exists(p)
		if err != nil {
			probe.Unreadable(pe, p, err)
			ok = true
		}
		found = found || ok
	}
	return found
}

// envAssign is one variable assignment: an Environment= word of the unit or
// a line of an environment file.
type envAssign struct {
	name, value string
	src         *nodediagv1.SourceLine
	// ignored says why systemd does not apply the assignment; empty when it
	// does.
	ignored string
}

type envFileRef struct {
	path     string
	optional bool
}

type execStart struct {
	cmd execCommand
	src *nodediagv1.SourceLine
}

// serviceConfig is what the [Service] sections of a unit and its drop-ins
// set, once resets are applied.
type serviceConfig struct {
	// Every Environment= assignment, in order; those removed by a reset
	// carry an ignored reason.
	env      []*envAssign
	envFiles []envFileRef
	// The effective ExecStart; nil when none is left.
	exec *execStart
}

// collectService applies the [Service] directives of units in order, with
// systemd's rules: an empty Environment=, EnvironmentFile= or ExecStart=
// resets the list built so far; the last ExecStart wins; a line systemd
// cannot parse is ignored.
func collectService(units []unitSource) serviceConfig {
	var sc serviceConfig
	for _, u := range units {
		for _, d := range u.Directives {
			if d.Section != "Service" {
				continue
			}
			src := &nodediagv1.SourceLine{Path: u.Path, Line: d.Line, Text: capSourceText(d.Text)}
			switch d.Key {
			case "Environment":
				if d.Value == "" {
					for _, a := range sc.env {
						if a.ignored == "" {
							a.ignored = fmt.Sprintf("reset by the empty Environment= at %s:%d", u.Path, d.Line)
						}
					}
					continue
				}
				words, err := splitSystemdWords(d.Value, true, false)
				if err != nil {
					continue
				}
				for _, w := range words {
					name, value, ok := strings.Cut(systemdSpecifiers(w), "=")
					if !ok || !validEnvName(name) {
						continue
					}
					sc.env = append(sc.env, &envAssign{name: name, value: value, src: src})
				}
			case "EnvironmentFile":
				if d.Value == "" {
					sc.envFiles = nil
					continue
				}
				p := systemdSpecifiers(d.Value)
				ref := envFileRef{path: p}
				if rest, ok := strings.CutPrefix(p, "-"); ok {
					ref = envFileRef{path: rest, optional: true}
				}
				sc.envFiles = append(sc.envFiles, ref)
			case "ExecStart":
				if d.Value == "" {
					sc.exec = nil
					continue
				}
				cmd, err := parseExecStart(d.Value)
				if err != nil {
					continue
				}
				sc.exec = &execStart{cmd: cmd, src: src}
			}
		}
	}
	return sc
}

// readKubeletEnvFile reads an environment file. A missing file is
// (nil, false, nil); an unreadable one is recorded in pe and returned as an
// error with present true.
func readKubeletEnvFile(h *host.Host, pe *nodediagv1.ProbeEvidence, p string) ([]*envAssign, bool, error) {
	b, err := h.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		probe.Unreadable(pe, p, err)
		return nil, true, err
	}
	var out []*envAssign
	for _, a := range parseEnvFile(b) {
		ea := &envAssign{name: a.Key, value: a.Value, src: &nodediagv1.SourceLine{Path: p, Line: a.Line, Text: capSourceText(a.Text)}}
		switch {
		case a.Export:
			ea.ignored = `systemd ignores "export ` + a.Key + `=" (shell syntax, not an assignment)`
		case !validEnvName(a.Key):
			ea.ignored = fmt.Sprintf("systemd ignores the assignment: %q is not a valid variable name", a.Key)
		}
		out = append(out, ea)
	}
	return out, true, nil
}

// readKubeletConfigFile reads the --config file of the active flags (the last
// one wins, as in pflag), or /var/lib/kubelet/config.yaml when no flag names
// one and /var/lib/kubelet exists. It returns nil when there is no file to
// look at.
func readKubeletConfigFile(h *host.Host, pe *nodediagv1.ProbeEvidence, flags []*nodediagv1.KubeletFlag) *nodediagv1.KubeletConfigFile {
	p := ""
	for _, f := range flags {
		if f.Active && normalizeKubeletFlag(f.Name) == "config" {
			p = f.Value
		}
	}
	if p == "" {
		ok, err := h.Exists(kubeletStateDir)
		if err != nil {
			probe.Unreadable(pe, kubeletStateDir, err)
		}
		if !ok {
			return nil
		}
		p = kubeletDefaultConfigFile
	}
	b, err := h.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return &nodediagv1.KubeletConfigFile{Path: p}
	}
	if err != nil {
		probe.Unreadable(pe, p, err)
		return &nodediagv1.KubeletConfigFile{Path: p, Present: true}
	}
	return parseKubeletConfigFile(p, b)
}

func capSourceText(s string) string {
	if len(s) <= maxSourceText {
		return s
	}
	cut := maxSourceText
	for cut > 0 && (s[cut]&0xC0) == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}

// ---- unit files ----------------------------------------------------------

// unitDirective is one "Key=Value" of a unit file.
type unitDirective struct {
	Section string
	Key     string
	// Value with surrounding whitespace removed and continuation lines
	// joined; quoting is left to the directive's own parser.
	Value string
	// Line is the first physical line, Text the physical lines verbatim.
	Line int32
	Text string
}

// parseUnitFile parses systemd unit file syntax (systemd.syntax(7)): [Section]
// headers, "Key=Value" lines with whitespace around both trimmed, comment
// lines starting with '#' or ';', and a trailing backslash that joins the
// next line (the backslash becomes a space; comment lines inside a
// continuation are skipped). Like systemd it never fails: a line it cannot
// use (no '=', outside a section) is skipped.
func parseUnitFile(b []byte) []unitDirective {
	var (
		out     []unitDirective
		section string
		pending strings.Builder
		raw     []string
		start   int
		inCont  bool
	)
	emit := func(logical string, line int, raw []string) {
		if strings.HasPrefix(logical, "[") {
			if end := strings.IndexByte(logical, ']'); end > 0 && strings.TrimSpace(logical[end+1:]) == "" {
				section = logical[1:end]
				return
			}
		}
		key, value, ok := strings.Cut(logical, "=")
		if !ok || section == "" {
			return
		}
		out = append(out, unitDirective{
			Section: section,
			Key:     strings.TrimSpace(key),
			Value:   strings.TrimSpace(value),
			Line:    int32(line),
			Text:    strings.Join(raw, "\n"),
		})
	}
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		l = strings.TrimSuffix(l, "\r")
		t := strings.TrimSpace(l)
		if inCont {
			raw = append(raw, l)
			if t != "" && (t[0] == '#' || t[0] == ';') {
				continue
			}
			if continuesLine(l) {
				pending.WriteString(l[:len(l)-1])
				pending.WriteByte(' ')
				continue
			}
			pending.WriteString(l)
			inCont = false
			emit(strings.TrimSpace(pending.String()), start, raw)
			continue
		}
		if t == "" || t[0] == '#' || t[0] == ';' {
			continue
		}
		if continuesLine(l) {
			inCont, start, raw = true, i+1, []string{l}
			pending.Reset()
			pending.WriteString(l[:len(l)-1])
			pending.WriteByte(' ')
			continue
		}
		emit(t, i+1, []string{l})
	}
	if inCont {
		emit(strings.TrimSpace(pending.String()), start, raw)
	}
	return out
}

// continuesLine says whether the line ends with an unescaped backslash
// (nothing may follow it, not even whitespace).
func continuesLine(t string) bool {
	n := 0
	for i := len(t) - 1; i >= 0 && t[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

// systemdSpecifiers resolves the one specifier that matters here, "%%" (a
// literal '%'); other specifiers (%n, %i, ...) are left as written.
func systemdSpecifiers(s string) string {
	return strings.ReplaceAll(s, "%%", "%")
}

// validEnvName reports whether s is a name systemd accepts for an
// environment variable: letters, digits and '_', not starting with a digit.
func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// errUnbalancedQuote and errTrailingBackslash are splitSystemdWords's errors.
var (
	errUnbalancedQuote   = errors.New("unbalanced quotes")
	errTrailingBackslash = errors.New("trailing backslash")
)

// splitSystemdWords splits s into words the way systemd's extract_first_word
// does with EXTRACT_UNQUOTE: words are separated by whitespace, single and
// double quotes group (anywhere in a word) and are removed, and a backslash
// escapes the next character, inside quotes too. With cunescape, C escapes
// (\n, \t, \s, \x41, \101, ...) are decoded (EXTRACT_CUNESCAPE); without it
// the escaped character is kept as it is. With relax an unfinished quote or
// a trailing backslash is accepted (EXTRACT_RELAX); without it they are
// errors, and systemd ignores the whole line.
func splitSystemdWords(s string, cunescape, relax bool) ([]string, error) {
	var (
		words  []string
		cur    strings.Builder
		inWord bool
		quote  byte
	)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if quote == 0 && isUnitSpace(c) {
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
			continue
		}
		inWord = true
		switch {
		case c == '\\':
			if i+1 >= len(s) {
				if !relax {
					return nil, errTrailingBackslash
				}
				cur.WriteByte('\\')
				continue
			}
			if cunescape {
				n, r := cUnescape(s[i+1:])
				cur.WriteString(r)
				i += n
			} else {
				i++
				cur.WriteByte(s[i])
			}
		case quote != 0 && c == quote:
			quote = 0
		case quote == 0 && (c == '\'' || c == '"'):
			quote = c
		default:
			cur.WriteByte(c)
		}
	}
	if quote != 0 && !relax {
		return nil, errUnbalancedQuote
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

func isUnitSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// cUnescape decodes the C escape at the start of s (s follows the
// backslash) and returns how many bytes it used. An escape systemd does not
// know is kept as the character itself.
func cUnescape(s string) (int, string) {
	switch c := s[0]; c {
	case 'a':
		return 1, "\a"
	case 'b':
		return 1, "\b"
	case 'f':
		return 1, "\f"
	case 'n':
		return 1, "\n"
	case 'r':
		return 1, "\r"
	case 't':
		return 1, "\t"
	case 'v':
		return 1, "\v"
	case 's':
		return 1, " "
	case 'x':
		if len(s) >= 3 {
			if v, err := strconv.ParseUint(s[1:3], 16, 8); err == nil {
				return 3, string([]byte{byte(v)})
			}
		}
	case 'u', 'U':
		n := 4
		if c == 'U' {
			n = 8
		}
		if len(s) > n {
			if v, err := strconv.ParseUint(s[1:1+n], 16, 32); err == nil && v <= 0x10FFFF {
				return 1 + n, string(rune(v))
			}
		}
	case '0', '1', '2', '3', '4', '5', '6', '7':
		if len(s) >= 3 {
			if v, err := strconv.ParseUint(s[:3], 8, 8); err == nil {
				return 3, string([]byte{byte(v)})
			}
		}
	}
	return 1, s[:1]
}

// execCommand is a parsed ExecStart= value.
type execCommand struct {
	// Prefix holds systemd's special prefixes ("-", "@", "+", "!", "!!", ":", "|").
	Prefix string
	// Path is the program systemd runs.
	Path string
	// Args are the arguments after argv[0], not yet expanded.
	Args []string
}

// parseExecStart parses an ExecStart= value (systemd.service(5), "Command
// lines"): optional prefixes, then words split and unquoted with C escapes;
// with '@' the second word is argv[0]; a lone ";" ends the first command.
func parseExecStart(value string) (execCommand, error) {
	var cmd execCommand
	i := 0
	for i < len(value) && strings.IndexByte("-@+!:|", value[i]) >= 0 {
		i++
	}
	cmd.Prefix = value[:i]
	words, err := splitSystemdWords(value[i:], true, false)
	if err != nil {
		return execCommand{}, fmt.Errorf("ExecStart=%s: %w", value, err)
	}
	for j, w := range words {
		if w == ";" {
			words = words[:j]
			break
		}
	}
	if len(words) == 0 {
		return execCommand{}, fmt.Errorf("ExecStart=%s: no command", value)
	}
	for j := range words {
		words[j] = systemdSpecifiers(words[j])
	}
	cmd.Path, cmd.Args = words[0], words[1:]
	if strings.Contains(cmd.Prefix, "@") {
		if len(cmd.Args) == 0 {
			return execCommand{}, fmt.Errorf("ExecStart=%s: '@' without argv[0]", value)
		}
		cmd.Args = cmd.Args[1:]
	}
	return cmd, nil
}

// argWord is one word of the expanded command line.
type argWord struct {
	Text string
	// Var is the variable the word comes from when the word is that
	// variable's value ($VAR split into words, or a word that is exactly
	// ${VAR}); empty when the word is written in ExecStart.
	Var string
}

// expandExecArgs expands variables in ExecStart arguments as systemd does at
// exec time (replace_env_argv): a word that is exactly $NAME becomes the
// value of NAME split into words (quotes group, nothing when NAME is unset);
// ${NAME} anywhere in a word is replaced by the value as it is, keeping one
// word; "$$" is a literal '$'; a $NAME inside a longer word is left as
// written. refs lists the variables referenced, in order.
func expandExecArgs(args []string, env map[string]string) (words []argWord, refs []string) {
	for _, a := range args {
		if len(a) > 1 && a[0] == '$' && a[1] != '{' && a[1] != '$' {
			name := a[1:]
			refs = append(refs, name)
			ws, _ := splitSystemdWords(env[name], false, true)
			for _, w := range ws {
				words = append(words, argWord{Text: w, Var: name})
			}
			continue
		}
		text, r := replaceBracedVars(a, env)
		refs = append(refs, r...)
		w := argWord{Text: text}
		if len(r) == 1 && a == "${"+r[0]+"}" {
			w.Var = r[0]
		}
		words = append(words, w)
	}
	return words, refs
}

// replaceBracedVars replaces ${NAME} in w with NAME's value (empty when
// unset) and "$$" with '$'.
func replaceBracedVars(w string, env map[string]string) (string, []string) {
	var (
		b    strings.Builder
		refs []string
	)
	for i := 0; i < len(w); {
		if w[i] == '$' && i+1 < len(w) {
			switch w[i+1] {
			case '$':
				b.WriteByte('$')
				i += 2
				continue
			case '{':
				if end := strings.IndexByte(w[i+2:], '}'); end >= 0 {
					name := w[i+2 : i+2+end]
					refs = append(refs, name)
					b.WriteString(env[name])
					i += 2 + end + 1
					continue
				}
			}
		}
		b.WriteByte(w[i])
		i++
	}
	return b.String(), refs
}

// kubeletFlagWord is a flag of a command line.
type kubeletFlagWord struct {
	// Name without its leading dashes, as written ("pod-infra-container-image", "v").
	Name  string
	Value string
	// Index of the word that holds the flag's name.
	Index int
}

// kubeletBoolFlags are the kubelet's boolean flags (current and removed): a
// word after one of them is not its value. Any other flag written without
// "=" takes the next word as its value when that word is not a flag, as
// pflag does ("--config /var/lib/kubelet/config.yaml").
var kubeletBoolFlags = map[string]bool{
	"add-dir-header": true, "alsologtostderr": true, "anonymous-auth": true,
	"authentication-token-webhook": true, "cgroups-per-qos": true, "containerized": true,
	"docker-only": true, "enable-cadvisor-json-endpoints": true, "enable-controller-attach-detach": true,
	"enable-debugging-handlers": true, "enable-load-reader": true, "enable-server": true,
	"exit-on-lock-contention": true, "experimental-allocatable-ignore-eviction": true,
	"experimental-check-node-capabilities-before-mount": true, "experimental-kernel-memcg-notification": true,
	"fail-cgroupv1": true, "fail-swap-on": true, "help": true, "h": true, "keep-terminated-pod-volumes": true,
	"kernel-memcg-notification": true, "local-storage-capacity-isolation": true, "log-cadvisor-usage": true,
	"logtostderr": true, "make-iptables-util-chains": true, "one-output": true, "protect-kernel-defaults": true,
	"really-crash-for-testing": true, "redirect-container-streaming": true, "register-node": true,
	"register-schedulable": true, "rotate-certificates": true, "rotate-server-certificates": true,
	"seccomp-default": true, "serialize-image-pulls": true, "skip-headers": true, "skip-log-headers": true,
	"storage-driver-secure": true, "version": true,
}

// normalizeKubeletFlag is the name pflag looks a flag up by: '_' is '-'.
func normalizeKubeletFlag(name string) string { return strings.ReplaceAll(name, "_", "-") }

// splitKubeletFlags finds the flags of a kubelet command line (the words
// after argv[0]): "--name=value", "--name value", "--bool", "-v=2", "-v 2".
// Words that are not flags are skipped, and "--" ends the flags.
func splitKubeletFlags(words []string) []kubeletFlagWord {
	var out []kubeletFlagWord
	for i := 0; i < len(words); i++ {
		w := words[i]
		if w == "--" {
			break
		}
		if len(w) < 2 || w[0] != '-' {
			continue
		}
		name := strings.TrimPrefix(strings.TrimPrefix(w, "-"), "-")
		f := kubeletFlagWord{Name: name, Index: i}
		if n, v, ok := strings.Cut(name, "="); ok {
			f.Name, f.Value = n, v
		} else if i+1 < len(words) && !strings.HasPrefix(words[i+1], "-") && !kubeletBoolFlags[normalizeKubeletFlag(name)] {
			f.Value = words[i+1]
			i++
		}
		out = append(out, f)
	}
	return out
}

// ---- environment files ---------------------------------------------------

// envFileAssignment is one assignment of an environment file.
type envFileAssignment struct {
	Key   string
	Value string
	// Line is the first physical line, Text the physical lines verbatim.
	Line int32
	Text string
	// Export is set for "export KEY=VALUE": shell syntax that systemd does not
	// accept; it ignores the line ("Ignoring invalid environment assignment").
	// Key is then the name after "export".
	Export bool
}

// parseEnvFile parses a systemd environment file as systemd's
// parse_env_file_internal (src/basic/env-file.c) does: "KEY=VALUE" per line,
// comment lines starting with '#' or ';', whitespace around the key and
// before the value skipped and trailing whitespace of an unquoted value
// dropped; single quotes keep everything literally, double quotes let a
// backslash escape '"', '\\', '`' and '$' and a newline (other backslashes
// stay); quoted and unquoted parts concatenate; an unquoted backslash escapes
// the next character, and a backslash before a newline joins the next line.
// Quotes in the middle of an unquoted value are literal characters. Lines
// without '=' are skipped. It never fails, as systemd's reader does not for
// syntax.
func parseEnvFile(b []byte) []envFileAssignment {
	const (
		preKey = iota
		inKey
		preValue
		inValue
		valueEscape
		singleQuote
		doubleQuote
		doubleQuoteEscape
		comment
		commentEscape
	)
	lines := strings.Split(string(b), "\n")
	for i := range lines {
		lines[i] = strings.TrimSuffix(lines[i], "\r")
	}
	var (
		out                 []envFileAssignment
		key, value          []byte
		lastKeyWS, lastValW = -1, -1
		state               = preKey
		line, start         = 1, 1
	)
	push := func(trimValue bool) {
		if trimValue && lastValW >= 0 {
			value = value[:lastValW]
		}
		if lastKeyWS >= 0 {
			key = key[:lastKeyWS]
		}
		end := min(line, len(lines))
		a := envFileAssignment{Key: string(key), Value: string(value), Line: int32(start), Text: strings.Join(lines[start-1:end], "\n")}
		if rest, ok := strings.CutPrefix(a.Key, "export"); ok && rest != "" && (rest[0] == ' ' || rest[0] == '\t') {
			a.Key, a.Export = strings.TrimSpace(rest), true
		}
		out = append(out, a)
		key, value = nil, nil
	}
	isNL := func(c byte) bool { return c == '\n' || c == '\r' }
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch state {
		case preKey:
			if c == '#' || c == ';' {
				state = comment
			} else if !isUnitSpace(c) {
				state, lastKeyWS, start = inKey, -1, line
				key = append(key[:0], c)
			}
		case inKey:
			switch {
			case isNL(c):
				state, key = preKey, key[:0]
			case c == '=':
				state, lastValW = preValue, -1
			default:
				if !isUnitSpace(c) {
					lastKeyWS = -1
				} else if lastKeyWS < 0 {
					lastKeyWS = len(key)
				}
				key = append(key, c)
			}
		case preValue:
			switch {
			case isNL(c):
				state = preKey
				push(false)
			case c == '\'':
				state = singleQuote
			case c == '"':
				state = doubleQuote
			case c == '\\':
				state = valueEscape
			case !isUnitSpace(c):
				state = inValue
				value = append(value, c)
			}
		case inValue:
			switch {
			case isNL(c):
				state = preKey
				push(true)
			case c == '\\':
				state, lastValW = valueEscape, -1
			default:
				if !isUnitSpace(c) {
					lastValW = -1
				} else if lastValW < 0 {
					lastValW = len(value)
				}
				value = append(value, c)
			}
		case valueEscape:
			state = inValue
			if !isNL(c) {
				value = append(value, c)
			}
		case singleQuote:
			if c == '\'' {
				state = preValue
			} else {
				value = append(value, c)
			}
		case doubleQuote:
			switch c {
			case '"':
				state = preValue
			case '\\':
				state = doubleQuoteEscape
			default:
				value = append(value, c)
			}
		case doubleQuoteEscape:
			state = doubleQuote
			if strings.IndexByte("\"\\`$", c) >= 0 {
				value = append(value, c)
			} else if c != '\n' {
				value = append(value, '\\', c)
			}
		case comment:
			if c == '\\' {
				state = commentEscape
			} else if isNL(c) {
				state = preKey
			}
		case commentEscape:
			if isNL(c) {
				state = preKey
			} else {
				state = comment
			}
		}
		if c == '\n' {
			line++
		}
	}
	switch state {
	case preValue, inValue, valueEscape, singleQuote, doubleQuote, doubleQuoteEscape:
		push(state == inValue)
	}
	return out
}

// ---- KubeletConfiguration ------------------------------------------------

// kubeletConfiguration is the part of KubeletConfiguration
// (kubelet.config.k8s.io/v1beta1) the rules use.
type kubeletConfiguration struct {
	APIVersion               string            `json:"apiVersion"`
	Kind                     string            `json:"kind"`
	CgroupDriver             string            `json:"cgroupDriver"`
	FailSwapOn               *bool             `json:"failSwapOn"`
	ContainerRuntimeEndpoint string            `json:"containerRuntimeEndpoint"`
	StaticPodPath            string            `json:"staticPodPath"`
	EvictionHard             map[string]string `json:"evictionHard"`
	Authentication           struct {
		X509 struct {
			ClientCAFile string `json:"clientCAFile"`
		} `json:"x509"`
	} `json:"authentication"`
	MemorySwap struct {
		SwapBehavior string `json:"swapBehavior"`
	} `json:"memorySwap"`
}

const kubeletConfigGroup = "kubelet.config.k8s.io"

var (
	yamlErrorLine  = regexp.MustCompile(`\bline (\d+)\b`)
	jsonFieldError = regexp.MustCompile(`Go struct field \w+\.([\w.]+) of type`)
)

// parseKubeletConfigFile parses the kubelet's --config file (YAML or JSON)
// at host path p. A file the kubelet would refuse (malformed YAML, a field of
// the wrong type, a kind other than KubeletConfiguration, an apiVersion
// outside kubelet.config.k8s.io, an empty file) gets a ParseError, with
// ParseErrorLine when the parser names a line; the fields that could be read
// are still filled.
func parseKubeletConfigFile(p string, b []byte) *nodediagv1.KubeletConfigFile {
	kf := &nodediagv1.KubeletConfigFile{Path: p, Present: true}
	lines := strings.Split(string(b), "\n")
	if strings.TrimSpace(string(b)) == "" {
		kf.ParseError = "the file is empty"
		return kf
	}
	var c kubeletConfiguration
	if err := yaml.Unmarshal(b, &c); err != nil {
		kf.ParseError = err.Error()
		if m := yamlErrorLine.FindStringSubmatch(kf.ParseError); m != nil {
			if n, err := strconv.Atoi(m[1]); err == nil && n >= 1 && n <= len(lines) {
				kf.ParseErrorLine = &nodediagv1.SourceLine{Path: p, Line: int32(n), Text: capSourceText(strings.TrimSuffix(lines[n-1], "\r"))}
			}
		} else if m := jsonFieldError.FindStringSubmatch(kf.ParseError); m != nil {
			// "Go struct field kubeletConfiguration.failSwapOn of type
			// bool": the line of that key.
			path := strings.Split(m[1], ".")
			kf.ParseErrorLine = configKeyLine(p, lines, path[len(path)-1])
		}
		return kf
	}
	kf.ApiVersion = c.APIVersion
	kf.Kind = c.Kind
	kf.CgroupDriver = c.CgroupDriver
	kf.FailSwapOn = c.FailSwapOn
	kf.ContainerRuntimeEndpoint = c.ContainerRuntimeEndpoint
	kf.StaticPodPath = c.StaticPodPath
	kf.ClientCaFile = c.Authentication.X509.ClientCAFile
	kf.EvictionHard = c.EvictionHard
	kf.SwapBehavior = c.MemorySwap.SwapBehavior
	kf.CgroupDriverLine = configKeyLine(p, lines, "cgroupDriver")
	kf.FailSwapOnLine = configKeyLine(p, lines, "failSwapOn")

	group, _, _ := strings.Cut(c.APIVersion, "/")
	switch {
	case c.Kind == "":
		kf.ParseError = `kind is missing (want "KubeletConfiguration")`
	case c.Kind != "KubeletConfiguration":
		kf.ParseError = fmt.Sprintf(`kind is %q, want "KubeletConfiguration"`, c.Kind)
	case c.APIVersion == "":
		kf.ParseError = `apiVersion is missing (want "` + kubeletConfigGroup + `/v1beta1")`
	case group != kubeletConfigGroup:
		kf.ParseError = fmt.Sprintf(`apiVersion %q is not in %s`, c.APIVersion, kubeletConfigGroup)
	}
	if kf.ParseError != "" {
		key := "kind"
		if c.Kind == "KubeletConfiguration" {
			key = "apiVersion"
		}
		kf.ParseErrorLine = configKeyLine(p, lines, key)
		return kf
	}
	if key, got, want := kubeletConfigShape(b); key != "" {
		kf.ParseError = fmt.Sprintf("%s is %s, the kubelet wants %s (it fails to decode the file)", key, got, want)
		kf.ParseErrorLine = configKeyLine(p, lines, key)
	}
	return kf
}

// kubeletConfigObjects and kubeletConfigLists are the KubeletConfiguration
// (v1beta1) fields whose value is a map or a list: a scalar there ("nil" left
// by a template, a quoted string) fails the kubelet's decoding of the whole
// file ("v1beta1.KubeletConfiguration.EvictionSoft: ReadMapCB: expect { or
// n"). Only the shape is judged, never the values: what the kubelet accepts
// must read as valid here.
var (
	kubeletConfigObjects = []string{"evictionHard", "evictionSoft", "evictionSoftGracePeriod", "evictionMinimumReclaim",
		"kubeReserved", "systemReserved", "featureGates", "authentication", "authorization", "memorySwap", "logging"}
	kubeletConfigLists = []string{"clusterDNS", "tlsCipherSuites", "allowedUnsafeSysctls", "enforceNodeAllocatable", "reservedMemory"}
)

// kubeletConfigShape returns the first top-level field of the file whose
// value has the wrong shape, what it is and what the kubelet wants.
func kubeletConfigShape(b []byte) (key, got, want string) {
	var top map[string]any
	if yaml.Unmarshal(b, &top) != nil {
		return "", "", ""
	}
	shape := func(v any) string {
		switch v.(type) {
		case map[string]any:
			return "a map"
		case []any:
			return "a list"
		case string:
			return "a string"
		case bool:
			return "a boolean"
		default:
			return "a number"
		}
	}
	for _, k := range kubeletConfigObjects {
		if v, ok := top[k]; ok && v != nil {
			if _, isMap := v.(map[string]any); !isMap {
				return k, fmt.Sprintf("%s (%v)", shape(v), v), "a map"
			}
		}
	}
	for _, k := range kubeletConfigLists {
		if v, ok := top[k]; ok && v != nil {
			if _, isList := v.([]any); !isList {
				return k, fmt.Sprintf("%s (%v)", shape(v), v), "a list"
			}
		}
	}
	return "", "", ""
}

// configKeyLine finds the line that sets key in a YAML or JSON configuration
// file ("cgroupDriver: systemd", `"cgroupDriver": "systemd"`), at the
// smallest indentation it appears with (the top-level key, not a nested one).
func configKeyLine(p string, lines []string, key string) *nodediagv1.SourceLine {
	var best *nodediagv1.SourceLine
	bestIndent := -1
	for i, l := range lines {
		l = strings.TrimSuffix(l, "\r")
		t := strings.TrimLeft(l, " \t")
		if !strings.HasPrefix(t, key+":") && !strings.HasPrefix(t, `"`+key+`"`) {
			continue
		}
		indent := len(l) - len(t)
		if bestIndent < 0 || indent < bestIndent {
			best = &nodediagv1.SourceLine{Path: p, Line: int32(i + 1), Text: capSourceText(l)}
			bestIndent = indent
		}
	}
	return best
}
