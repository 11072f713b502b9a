package probes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/probe"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// binDirs are searched for the node's binaries in the order of the PATH that
// systemd gives its units (and that cloud-init's runcmd and kubeadm inherit),
// so the first copy found is the one a bare "kubelet" runs. /opt/bin comes
// last: Flatcar and many CAPI preKubeadmCommands installBinary there because /usr
// is read-only or owned by packages.
var binDirs = []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin", "/opt/bin"}

// binRequiredDirs: a root with none of these has no binaries to check (an
// artifact tree that holds only logs, say).
var binRequiredDirs = []string{"/usr/bin", "/usr/local/bin", "/opt/bin"}

// versionQuery is how one binary is asked its version: the way the real one
// answers (facts and sources in the research notes on version output).
type versionQuery struct {
	name string
	args []string
	// parse reads the normalised version ("v1.35.0") from what the binary
	// printed.
	parse func([]byte) (string, error)
	// modules whose version in the Go build info is the binary's version,
	// most specific first: the fallback when the binary cannot be run.
	modules []string
	// packages (dpkg) whose version is the binary's version, when the
	// package owns the file: the fallback when the build info has none.
	// Only packages that carry the binary's own version: Docker's
	// containerd.io also installs runc, at containerd's version.
	packages []string
}

var versionQueries = []versionQuery{
	// staging/src/k8s.io/component-base/version/verflag: "Kubernetes v1.35.0".
	{name: "kubelet", args: []string{"--version"}, parse: parseKubeletVersionOutput, modules: []string{"k8s.io/kubernetes"}, packages: []string{"kubelet"}},
	// cmd/kubeadm/app/cmd/version.go: -o short prints GitVersion alone.
	{name: "kubeadm", args: []string{"version", "-o", "short"}, parse: parseKubeadmVersionOutput, modules: []string{"k8s.io/kubernetes"}, packages: []string{"kubeadm"}},
	// -o json exists in every kubectl; the text form changed in 1.28.
	{name: "kubectl", args: []string{"version", "--client", "-o", "json"}, parse: parseKubectlVersionOutput, modules: []string{"k8s.io/kubernetes"}, packages: []string{"kubectl"}},
	// cmd/containerd/command/main.go: "containerd <package> <version> <revision>".
	// Packages: Docker's containerd.io, Debian's and Ubuntu's containerd,
	// AKS's moby-containerd.
	{name: "containerd", args: []string{"--version"}, parse: parseContainerdVersionOutput, modules: []string{"github.com/containerd/containerd/v2", "github.com/containerd/containerd"}, packages: []string{"containerd.io", "containerd", "moby-containerd"}},
	// urfave/cli's default version printer: "crictl version <version>".
	{name: "crictl", args: []string{"--version"}, parse: parseCrictlVersionOutput, modules: []string{"sigs.k8s.io/cri-tools", "github.com/kubernetes-sigs/cri-tools"}, packages: []string{"cri-tools"}},
	// runc main.go: "runc version <version>", then commit/spec/go lines.
	{name: "runc", args: []string{"--version"}, parse: parseRuncVersionOutput, modules: []string{"github.com/opencontainers/runc"}, packages: []string{"runc", "moby-runc"}},
}

// Limits of what is kept of a binary's answer: enough to quote the line that
// carries the version, small enough to keep the evidence small.
const (
	binOutputMaxBytes = 512
	binOutputMaxLines = 8
	// binParallel bounds the binaries asked at once; a hung one holds a slot
	// only until the Host's command timeout.
	binParallel = 4
)

// binaries finds kubelet, kubeadm, kubectl, containerd, crictl and runc under
// the root and asks every copy its version.
type binaries struct{}

func (binaries) Name() string { return "binary-versions" }

// binCandidate is one copy of a binary found in binDirs.
type binCandidate struct {
	q        versionQuery
	path     string
	resolved string
	aliases  []string
	first    bool
}

// Run reports every copy of every binary, first in PATH order first. A node
// without any of them yields an empty list, not a skip: a kubelet missing
// where one is expected is for the rules to find.
func (binaries) Run(ctx context.Context, h *host.Host) (*nodediagv1.ProbeEvidence, error) {
	pe := &nodediagv1.ProbeEvidence{}
	present := false
	for _, d := range binRequiredDirs {
		ok, err := h.Exists(d)
		if err != nil {
			probe.Unreadable(pe, d, err)
			present = true // it is there, only unreadable
			continue
		}
		present = present || ok
	}
	if !present {
		return nil, fmt.Errorf("the root has none of %s: no binaries to check: %w", strings.Join(binRequiredDirs, ", "), probe.ErrNotApplicable)
	}

	var cands []*binCandidate
	for _, q := range versionQueries {
		cands = append(cands, findBinary(h, pe, q)...)
	}

	pkgs := newPkgDBs(h, versionQueries)
	out := make([]*nodediagv1.Binary, len(cands))
	sem := make(chan struct{}, binParallel)
	var wg sync.WaitGroup
	for i, c := range cands {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			out[i] = askVersion(ctx, h, pkgs, c)
		}()
	}
	wg.Wait()
	// Set only when some binary needed the package database (after Wait,
	// no goroutine writes it any more).
	if pkgs.dpkgErr != nil {
		probe.Unreadable(pe, dpkgStatusPath, pkgs.dpkgErr)
	}
	pe.Data = &nodediagv1.ProbeEvidence_Binaries{Binaries: &nodediagv1.Binaries{Binaries: out}}
	return pe, nil
}

// findBinary lists the copies of q.name in binDirs, in PATH order, merging
// the paths that are the same file.
func findBinary(h *host.Host, pe *nodediagv1.ProbeEvidence, q versionQuery) []*binCandidate {
	var out []*binCandidate
	byResolved := map[string]*binCandidate{}
	for _, d := range binDirs {
		p := d + "/" + q.name
		fi, err := h.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			probe.Unreadable(pe, p, err)
			continue
		}
		if fi.IsDir() {
			continue
		}
		resolved, err := h.Resolve(p)
		if err != nil {
			probe.Unreadable(pe, p, err)
			continue
		}
		if c, ok := byResolved[resolved]; ok {
			c.aliases = append(c.aliases, p)
			continue
		}
		c := &binCandidate{q: q, path: p, resolved: resolved, first: len(out) == 0}
		byResolved[resolved] = c
		out = append(out, c)
	}
	return out
}

// askVersion runs one copy and, when it cannot run at all, reads its Go build
// info instead, and when that records no version, the package database.
func askVersion(ctx context.Context, h *host.Host, pkgs *pkgDBs, c *binCandidate) *nodediagv1.Binary {
	b := &nodediagv1.Binary{
		Name:      c.q.name,
		Path:      c.path,
		Effective: c.first,
		Aliases:   c.aliases,
		Command:   host.Cmd{Path: c.path, Args: c.q.args}.String(),
		Method:    "exec",
	}
	if c.resolved != c.path {
		b.ResolvedPath = c.resolved
	}
	out, err := h.Run(ctx, c.path, c.q.args...)
	var ee *host.ExitError
	if err == nil || errors.As(err, &ee) {
		// A binary that answered, even with a failure status, may still
		// have printed its version.
		text := out.Stdout
		v, perr := c.q.parse(out.Stdout)
		if perr != nil && len(out.Stderr) > 0 {
			if v2, err2 := c.q.parse(out.Stderr); err2 == nil {
				text, v, perr = out.Stderr, v2, nil
			}
		}
		if len(text) == 0 {
			text = out.Stderr
		}
		b.Version = v
		b.Output = binExcerpt(text, strings.TrimPrefix(v, "v"))
		switch {
		case ee != nil:
			b.Error = binDescribeExitError(ee)
		case perr != nil:
			b.Error = "cannot read the version from the output: " + binValidUTF8(perr.Error())
		}
		return b
	}
	b.Error = binDescribeRunError(h, err)
	if len(out.Stdout) > 0 {
		// A timeout may leave a partial answer: keep it as evidence.
		b.Output = binExcerpt(out.Stdout, "")
	}
	if !canReadBuildInfoInstead(err) {
		return b
	}
	bi, berr := h.BuildInfo(c.path)
	if berr != nil {
		b.Error += "; no Go build info either: " + binValidUTF8(berr.Error())
		b.NotAProgram = binTextInstead(h, c.path)
		if b.NotAProgram == "" {
			// Text in the binary's place is not what any package
			// installed, whatever dpkg says of the path.
			pkgs.fill(b, c)
		}
		return b
	}
	b.Method = "buildinfo"
	v, line := buildInfoVersion(bi, c.q.modules)
	b.Version = v
	b.Output = renderBuildInfo(bi, line)
	if v == "" {
		b.Error += "; the Go build info records no version of " + strings.Join(c.q.modules, " or ")
		pkgs.fill(b, c)
	}
	return b
}

// binTextInstead is the first line of a binary's file when the file is text
// and not a script: what a download that failed wrote in its place (an XML
// or HTML error page, "404: Not Found"). Empty for anything else.
func binTextInstead(h *host.Host, path string) string {
	b, _, err := h.ReadFileLimit(path, binOutputMaxBytes)
	if err != nil || len(b) == 0 || bytes.HasPrefix(b, []byte("#!")) || bytes.IndexByte(b, 0) >= 0 || !utf8.Valid(b) {
		return ""
	}
	return binFirstLine(string(b))
}

// canReadBuildInfoInstead says whether a failure to run means the binary
// cannot be run here at all (execution disabled, no execute permission,
// another architecture), so that reading its build info is the only way to
// learn its version. A binary that ran and failed or hung is not retried.
func canReadBuildInfoInstead(err error) bool {
	return errors.Is(err, host.ErrExecDisabled) ||
		errors.Is(err, fs.ErrPermission) ||
		errors.Is(err, syscall.ENOEXEC)
}

func binDescribeExitError(ee *host.ExitError) string {
	msg := fmt.Sprintf("exit status %d", ee.Code)
	if l := binFirstLine(ee.Stderr); l != "" {
		msg += ": " + l
	}
	return binValidUTF8(msg)
}

func binDescribeRunError(h *host.Host, err error) string {
	timeout := h.CmdTimeout
	if timeout <= 0 {
		timeout = host.DefaultCmdTimeout
	}
	switch {
	case errors.Is(err, host.ErrTimeout):
		return fmt.Sprintf("no answer within %s: killed", timeout.Round(time.Millisecond))
	case errors.Is(err, host.ErrExecDisabled):
		return "not run: running host binaries is disabled"
	case errors.Is(err, fs.ErrPermission):
		return "not executable: " + binValidUTF8(err.Error())
	case errors.Is(err, syscall.ENOEXEC):
		return "cannot be executed here (another architecture, or not a program): " + binValidUTF8(err.Error())
	}
	return binValidUTF8(err.Error())
}

// ---- Go build info ---------------------------------------------------------

// ldflagsVersion finds a version stamped with -X in the recorded -ldflags:
// Kubernetes' hack/lib/version.sh stamps
// k8s.io/component-base/version.gitVersion, containerd's Makefile
// <package>/version.Version. Builds with -trimpath (Kubernetes since v1.29)
// do not record -ldflags at all (golang/go#52372), hence the module fallback.
var ldflagsVersion = regexp.MustCompile(`/version\.(?:gitVersion|Version)=['"]?(v?\d+\.\d+\.\d+[-0-9A-Za-z_.+~]*)`)

// buildInfoVersion returns the binary's version as the build info records it,
// and the line of `go version -m` output that shows it: a version stamped in
// -ldflags first, then the main module's version (Go ≥ 1.24 records the VCS
// tag, e.g. k8s.io/kubernetes v1.33.1), then the version of one of modules as
// a dependency (a kubelet built from a module that requires k8s.io/kubernetes).
func buildInfoVersion(bi *debug.BuildInfo, modules []string) (version, line string) {
	for _, s := range bi.Settings {
		if s.Key != "-ldflags" {
			continue
		}
		if m := ldflagsVersion.FindStringSubmatch(s.Value); m != nil {
			v, err := normalizeBinaryVersion(m[1])
			if err == nil {
				return v, "build\t-ldflags=..." + strings.TrimPrefix(m[0], "/") + "..."
			}
		}
	}
	known := func(v string) bool { return v != "" && v != "(devel)" }
	for _, mod := range modules {
		if bi.Main.Path == mod && known(bi.Main.Version) {
			if v, err := normalizeBinaryVersion(bi.Main.Version); err == nil {
				return v, "mod\t" + bi.Main.Path + "\t" + bi.Main.Version
			}
		}
	}
	for _, mod := range modules {
		for _, d := range bi.Deps {
			if d.Path == mod && known(d.Version) {
				if v, err := normalizeBinaryVersion(d.Version); err == nil {
					return v, "dep\t" + d.Path + "\t" + d.Version
				}
			}
		}
	}
	return "", ""
}

// renderBuildInfo writes the lines of `go version -m` that identify the
// binary, the line that carries the version first (it is what is quoted).
func renderBuildInfo(bi *debug.BuildInfo, versionLine string) string {
	var lines []string
	if versionLine != "" {
		lines = append(lines, versionLine)
	}
	lines = append(lines, "go\t"+bi.GoVersion, "path\t"+bi.Path)
	if versionLine == "" || !strings.HasPrefix(versionLine, "mod\t") {
		lines = append(lines, "mod\t"+bi.Main.Path+"\t"+bi.Main.Version)
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" || s.Key == "vcs.time" || s.Key == "vcs.modified" {
			lines = append(lines, "build\t"+s.Key+"="+s.Value)
		}
	}
	return binExcerpt([]byte(strings.Join(lines, "\n")), "")
}

// ---- parsers: one per output format ----------------------------------------

var (
	// As kubeadm's preflight GetKubeletVersion reads `kubelet --version`.
	kubeletVersionLine = regexp.MustCompile(`^\s*Kubernetes (v?\d+\.\d+\.\d+[-0-9A-Za-z_.+]*)\s*$`)
	// `kubeadm version -o short`, and the GitVersion alone on a line.
	shortVersionLine = regexp.MustCompile(`^\s*(v?\d+\.\d+\.\d+[-0-9A-Za-z_.+]*)\s*$`)
	// Go's %#v of version.Info: kubeadm's default output, kubectl ≤ 1.27's.
	goStructGitVersion = regexp.MustCompile(`GitVersion:"(v?\d+\.\d+\.\d+[^"]*)"`)
	// kubectl ≥ 1.28 without -o, and --short before.
	clientVersionLine = regexp.MustCompile(`(?m)^\s*Client Version: (v?\d+\.\d+\.\d+[-0-9A-Za-z_.+]*)\s*$`)
	// A gitVersion in JSON that did not parse whole (cut short, say).
	jsonGitVersion    = regexp.MustCompile(`"gitVersion":\s*"(v?\d+\.\d+\.\d+[^"]*)"`)
	crictlVersionLine = regexp.MustCompile(`^\s*crictl version (\S+)`)
	runcVersionLine   = regexp.MustCompile(`^\s*runc version (\S+)`)
	binVersionWord    = regexp.MustCompile(`^v?\d+\.\d+`)
)

// parseKubeletVersionOutput reads `kubelet --version`: "Kubernetes v1.35.0".
func parseKubeletVersionOutput(out []byte) (string, error) {
	for _, l := range strings.Split(string(out), "\n") {
		if m := kubeletVersionLine.FindStringSubmatch(l); m != nil {
			return binWithV(m[1]), nil
		}
	}
	return "", fmt.Errorf("no line %q in %s", "Kubernetes vX.Y.Z", binDescribeOutput(out))
}

// parseKubeadmVersionOutput reads `kubeadm version -o short` ("v1.35.0"); it
// also understands the default form (kubeadm version: &version.Info{...}).
func parseKubeadmVersionOutput(out []byte) (string, error) {
	for _, l := range strings.Split(string(out), "\n") {
		if m := shortVersionLine.FindStringSubmatch(l); m != nil {
			return binWithV(m[1]), nil
		}
	}
	if m := goStructGitVersion.FindSubmatch(out); m != nil {
		return binWithV(string(m[1])), nil
	}
	return "", fmt.Errorf("no version line in %s", binDescribeOutput(out))
}

// parseKubectlVersionOutput reads `kubectl version --client -o json`
// (clientVersion.gitVersion), tolerating the text forms: "Client Version:
// v1.33.1" (1.28+) and GitVersion:"v1.27.16" (1.24–1.27).
func parseKubectlVersionOutput(out []byte) (string, error) {
	var doc struct {
		ClientVersion *struct {
			GitVersion string `json:"gitVersion"`
		} `json:"clientVersion"`
	}
	if err := json.Unmarshal(out, &doc); err == nil && doc.ClientVersion != nil && binVersionWord.MatchString(doc.ClientVersion.GitVersion) {
		return binWithV(doc.ClientVersion.GitVersion), nil
	}
	for _, re := range []*regexp.Regexp{jsonGitVersion, clientVersionLine, goStructGitVersion} {
		if m := re.FindSubmatch(out); m != nil {
			return binWithV(string(m[1])), nil
		}
	}
	return "", fmt.Errorf("no client version in %s", binDescribeOutput(out))
}

// parseContainerdVersionOutput reads `containerd --version`: "containerd
// <package> <version> <revision>", where package and revision may be empty
// and the version is whatever the packager stamped ("v1.7.15", "1.7.20",
// "1.6.20~ds1"); distribution suffixes are dropped from the result.
func parseContainerdVersionOutput(out []byte) (string, error) {
	l := binFirstLine(string(out))
	f := strings.Fields(l)
	if len(f) < 2 || !strings.HasSuffix(f[0], "containerd") {
		return "", fmt.Errorf("not a containerd version line: %s", binDescribeOutput(out))
	}
	for _, w := range f[1:] {
		if binVersionWord.MatchString(w) {
			return normalizeBinaryVersion(w)
		}
	}
	return "", fmt.Errorf("no version in the containerd version line: %s", binDescribeOutput(out))
}

// parseCrictlVersionOutput reads `crictl --version`: "crictl version v1.30.0"
// (GitHub release) or "crictl version 1.32.0" (pkgs.k8s.io).
func parseCrictlVersionOutput(out []byte) (string, error) {
	m := crictlVersionLine.FindStringSubmatch(binFirstLine(string(out)))
	if m == nil {
		return "", fmt.Errorf("not a crictl version line: %s", binDescribeOutput(out))
	}
	return normalizeBinaryVersion(m[1])
}

// parseRuncVersionOutput reads the first line of `runc --version`: "runc
// version 1.1.12" (Debian "1.1.5+ds1", Ubuntu "1.3.3-0ubuntu1~22.04.3"); the
// commit/spec/go lines that follow vary by packager and are not read.
func parseRuncVersionOutput(out []byte) (string, error) {
	m := runcVersionLine.FindStringSubmatch(binFirstLine(string(out)))
	if m == nil {
		return "", fmt.Errorf("not a runc version line: %s", binDescribeOutput(out))
	}
	return normalizeBinaryVersion(m[1])
}

var (
	// major.minor[.patch], then semver pre-release and build metadata.
	binSemverPrefix = regexp.MustCompile(`^v?(\d+\.\d+(?:\.\d+)?)(-[0-9A-Za-z][0-9A-Za-z.-]*)?(\+[0-9A-Za-z][0-9A-Za-z.-]*)?`)
	// A Debian/Ubuntu/RPM package revision written where semver puts a
	// pre-release: "-1", "-0ubuntu1", "-1.azl3", "-2.el9". Upstream
	// pre-releases start with a letter ("-rc.1") or, from git describe,
	// carry a second hyphen ("-14-g926c958").
	binDistroRevision = regexp.MustCompile(`^-\d+(?:[.A-Za-z][0-9A-Za-z.]*)?$`)
	// Build metadata a distribution adds: "+ds1", "+dfsg", "+deb12u1", "+b1".
	binDistroBuild = regexp.MustCompile(`(?i)^\+(?:ds|dfsg|deb|ubuntu|really|b\d)`)
)

// normalizeBinaryVersion turns a version as a packager stamped it into the
// form the rules compare: a leading "v", the upstream pre-release and build
// metadata kept, the distribution's additions dropped ("1.6.20~ds1" →
// "v1.6.20", "1.4.4-0ubuntu1" → "v1.4.4", "1.1.5+ds1" → "v1.1.5"). The raw
// form stays in the binary's output.
func normalizeBinaryVersion(raw string) (string, error) {
	s := raw
	if i := strings.IndexByte(s, '~'); i >= 0 {
		s = s[:i] // "~" sorts before anything in Debian versions; never upstream semver.
	}
	m := binSemverPrefix.FindStringSubmatch(s)
	if m == nil {
		return "", fmt.Errorf("%q is not a version", binValidUTF8(raw))
	}
	pre, build := m[2], m[3]
	if binDistroRevision.MatchString(pre) {
		pre = ""
	}
	if binDistroBuild.MatchString(build) {
		build = ""
	}
	return "v" + m[1] + pre + build, nil
}

func binWithV(v string) string {
	if strings.HasPrefix(v, "v") {
		return v
	}
	return "v" + v
}

// ---- text helpers ----------------------------------------------------------

// binExcerpt keeps the first lines of a command's output, verbatim, within
// binOutputMaxBytes and binOutputMaxLines. When must (the version as printed)
// falls outside, the first line that holds it is added after a "…" line, so
// that the excerpt always shows where the version came from.
func binExcerpt(out []byte, must string) string {
	s := binValidUTF8(strings.TrimRight(string(out), "\r\n"))
	lines := strings.SplitAfter(s, "\n")
	var b strings.Builder
	for i, l := range lines {
		if i == binOutputMaxLines || b.Len()+len(l) > binOutputMaxBytes {
			break
		}
		b.WriteString(l)
	}
	if b.Len() == 0 && len(lines) > 0 {
		b.WriteString(binCut(lines[0], binOutputMaxBytes))
	}
	res := strings.TrimRight(b.String(), "\r\n")
	if must != "" && !strings.Contains(res, must) {
		for _, l := range lines {
			if strings.Contains(l, must) {
				res += "\n…\n" + binCut(strings.TrimRight(l, "\r\n"), binOutputMaxBytes)
				break
			}
		}
	}
	return res
}

// binCut cuts s to at most n bytes on a rune boundary.
func binCut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && (s[n]&0xC0) == 0x80 {
		n--
	}
	return s[:n]
}

// binValidUTF8 makes s safe for a proto string field (a binary may print
// anything).
func binValidUTF8(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

func binFirstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

// binDescribeOutput names an output in a parse error: its first line, cut short.
func binDescribeOutput(out []byte) string {
	l := binFirstLine(string(out))
	if l == "" {
		return "empty output"
	}
	return fmt.Sprintf("output %q", binCut(binValidUTF8(l), 120))
}
