package rules

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"

	"github.com/nodediag/nodediag/agent/ctdconfig"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// containerdRules judge containerd's configuration as its files say it (the
// containerd-config probe). Each raises its problem at most once, quoting
// every configuration line that causes it, so that the journal line a log
// signature finds for the same problem joins it (merge).
var containerdRules = []Rule{
	{Name: "containerd-config-invalid", Fn: containerdConfigInvalid},
	{Name: "containerd-cri-disabled", Fn: containerdCRIDisabled},
	{Name: "containerd-registry-endpoints", Fn: containerdRegistryEndpoints},
	{Name: "containerd-cgroup-driver", Fn: containerdCgroupDriver},
}

// What the containerd-config probe (agent/ctdconfig) writes into its
// evidence, repeated here so that the rules do not depend on the probe's
// package (a test checks that they agree).
const (
	// The CRI plugin's ID (layout 1), URI (layout 2), and the images and
	// runtime plugins of layout 3.
	pluginCRIv1      = "cri"
	pluginCRI        = "io.containerd.grpc.v1.cri"
	pluginCRIImages  = "io.containerd.cri.v1.images"
	pluginCRIRuntime = "io.containerd.cri.v1.runtime"
	// errInvalidHostTree is the error of a hosts.toml without a [host]
	// table, in containerd 1.x's words.
	errInvalidHostTree = "invalid `host` tree"
	// errNotRegularFile is in the error of a hosts.toml that is not a
	// regular file (a directory).
	errNotRegularFile = "not a regular file"
)

// containerdConfigInvalid: a configuration containerd cannot load (the main
// file or an import does not parse, does not exist, is not a file).
func containerdConfigInvalid(in *Input) []*nodediagv1.Finding {
	c := in.Containerd()
	if c.GetParseError() == "" {
		if f := refusedPluginKey(in, c); f != nil {
			return []*nodediagv1.Finding{f}
		}
		if p := invalidPluginURI(in); p != "" {
			msg := fmt.Sprintf("invalid disabled plugin URI %q expect io.containerd.x.vx", p)
			l := c.GetDisabledPluginsLine()
			return []*nodediagv1.Finding{ContainerdConfigInvalid.Finding(Params{"file": l.GetPath(), "error": msg}, QuoteLine(l))}
		}
		return nil
	}
	file, line := c.GetConfigFile(), "?"
	q := QuoteText(file, c.GetParseError())
	if l := c.GetParseErrorLine(); l != nil {
		file, line = l.GetPath(), strconv.Itoa(int(l.GetLine()))
		q = QuoteLine(l)
	}
	return []*nodediagv1.Finding{ContainerdConfigInvalid.Finding(Params{"file": file, "error": c.GetParseError(), "line": line}, q)}
}

// invalidPluginURI returns the first disabled_plugins entry that makes
// containerd refuse a configuration of layout 2 or 3 ("containerd: failed
// to load TOML from ...: invalid disabled plugin URI "cri" expect
// io.containerd.x.vx", reproduced with containerd 1.6.20): there, entries
// are plugin URIs. containerd 1.x wants four dot-separated parts
// (Config.ValidateV2); 2.x only a dot (Config.ValidateVersion).
// refusedPluginKey: containerd said which plugin key of its configuration
// it refused ("invalid plugin key URI \"containerd.runtime.v1.linux\""):
// the finding quotes the line that writes that key, with containerd's line.
func refusedPluginKey(in *Input, c *nodediagv1.Containerd) *nodediagv1.Finding {
	ms := in.Matched("containerd-invalid-plugin-uri")
	if len(ms) == 0 {
		return nil
	}
	last := ms[len(ms)-1]
	key := last.Group("key")
	for _, l := range c.GetPluginKeys() {
		if strings.Contains(l.GetText(), `"`+key+`"`) || strings.Contains(l.GetText(), "."+key+"]") || strings.Contains(l.GetText(), "plugins."+key) {
			msg := fmt.Sprintf("invalid plugin key URI %q expect io.containerd.x.vx", key)
			return ContainerdConfigInvalid.Finding(Params{"file": l.GetPath(), "error": msg}, QuoteLine(l), last.Quote())
		}
	}
	return nil
}

func invalidPluginURI(in *Input) string {
	c := in.Containerd()
	if c.GetVersion() < 2 || c.GetDisabledPluginsLine() == nil {
		return ""
	}
	v2 := containerd2(in)
	for _, p := range c.GetDisabledPlugins() {
		if !strings.Contains(p, ".") || (!v2 && len(strings.Split(p, ".")) < 4) {
			return p
		}
	}
	return ""
}

// criDisablers are the disabled_plugins entries that stop the CRI being
// served, by configuration layout. containerd matches disabled_plugins
// against the plugin ID in a version 1 file and against the URI otherwise
// (services/server/config V1DisabledFilter/V2DisabledFilter; 2.x migrates a
// version 1 file's "cri" to the URI): "cri" in a version 2 or 3 file
// does not name the CRI (containerd refuses the file instead:
// invalidPluginURI). In version 3 the CRI service needs the images and
// runtime plugins, so disabling either stops it too.
func criDisablers(layoutVersion int32) []string {
	switch {
	case layoutVersion >= 3:
		return []string{pluginCRI, pluginCRIImages, pluginCRIRuntime}
	case layoutVersion == 2:
		return []string{pluginCRI}
	default:
		return []string{pluginCRIv1}
	}
}

// containerdCRIDisabled: configuration that keeps containerd's CRI plugin
// from loading. One finding with every cause's lines.
func containerdCRIDisabled(in *Input) []*nodediagv1.Finding {
	c := in.Containerd()
	if c == nil || c.GetParseError() != "" || invalidPluginURI(in) != "" || kubeletUsesDockershim(in) {
		return nil
	}
	if in.Runtime().GetState() == rtOK {
		// The CRI answered: the file was changed after containerd
		// started, and the title would be false. (It applies at the next
		// restart.)
		return nil
	}
	var quotes []*nodediagv1.Quote
	for _, p := range c.GetDisabledPlugins() {
		if contains(criDisablers(c.GetVersion()), p) {
			quotes = append(quotes, QuoteLine(c.GetDisabledPluginsLine()))
			break
		}
	}
	var out []*nodediagv1.Finding
	if len(quotes) > 0 {
		out = append(out, RuntimeCRIDisabled.Finding(nil, dedupeQuotes(quotes)...))
	}
	// The registry configuration that makes the CRI plugin refuse to load
	// is its own cause, in the registry section that is to be fixed. Where
	// containerd says so itself (its refusal, RegistryMirrorsWithConfigPath's
	// signature) the mirrors are quoted even with a config_path the file
	// leaves empty or to containerd's default.
	refused := len(in.Matched(RegistryMirrorsWithConfigPath.ID)) > 0
	if c.GetRegistryConfigPath() != "" || refused {
		var conflict []*nodediagv1.Quote
		// "`mirrors` cannot be set when `config_path` is provided"
		// (ValidatePluginConfig in 1.x, ValidateImageConfig in 2.x).
		if c.GetLegacyMirrorsLine() != nil {
			conflict = append(conflict, QuoteLine(c.GetLegacyMirrorsLine()), QuoteLine(c.GetRegistryConfigPathLine()))
		}
		// "`configs.tls` cannot be set when `config_path` is provided": 1.x
		// only; 2.x logs a deprecation warning.
		if c.GetLegacyConfigsTlsLine() != nil && (!containerd2(in) || refused) {
			conflict = append(conflict, QuoteLine(c.GetLegacyConfigsTlsLine()), QuoteLine(c.GetRegistryConfigPathLine()))
		}
		if len(conflict) > 0 {
			file := c.GetRegistryConfigPathLine().GetPath()
			if file == "" {
				file = c.GetConfigFile()
			}
			out = append(out, RegistryMirrorsWithConfigPath.Finding(Params{"file": file}, dedupeQuotes(conflict)...))
		}
	}
	return out
}

// endpointKind says where an endpoint is written: the deprecated
// registry.mirrors of config.toml, or a hosts.toml.
type endpointKind int

const (
	legacyMirror endpointKind = iota
	hostsEntry
)

// judgeEndpoint says what is wrong with an endpoint as containerd uses it,
// or "" when containerd can use it. The behaviours (containerd 1.6 to 2.x,
// reproduced with 1.6.20 in REPORT.md section 4):
//
// Legacy mirrors (pkg/cri/server/image_pull.go registryEndpoints,
// 2.x internal/cri/server/images/image_pull.go): an endpoint containing
// "://" is parsed as it is; without, addDefaultScheme adds http for
// localhost and https otherwise. A parse error fails every pull of the
// registry ("get registry endpoints: parse endpoint url: parse
// \"://10.0.0.4:5000\": missing protocol scheme", the DKP air-gapped case);
// an endpoint without a host name is dialled as such and fails ("https://:5000"
// gives "tls: either ServerName or InsecureSkipVerify must be specified").
//
// hosts.toml (remotes/docker/config/hosts.go parseHostConfig): a host or
// server not starting with "http" gets "https://" prepended, so "://x"
// becomes "https://://x", whose host is ":" ("http: no Host in request
// URL"), and "https://https://x" has the host "https" (a DNS lookup of
// "https"). A value that does not parse at all makes containerd reject the
// whole file: that is the hosts file's error, not judged here.
//
// Both: a scheme other than http or https is refused by the HTTP client
// ("unsupported protocol scheme").
func judgeEndpoint(kind endpointKind, raw string) string {
	// The evidence holds user info redacted ("robot:[REDACTED]@"), which
	// net/url refuses and containerd, given the real one, accepts.
	raw = ctdconfig.StripUserinfo(raw)
	s := raw
	switch kind {
	case legacyMirror:
		if !strings.Contains(s, "://") {
			u, err := url.Parse("dummy://" + s)
			if err != nil {
				return "containerd cannot parse it (" + err.Error() + ") and fails every pull of the registry"
			}
			s = "https://" + s
			if isLocalhost(u.Host) {
				s = "http://" + raw
			}
		}
		if _, err := url.Parse(s); err != nil {
			return "containerd cannot parse it (" + err.Error() + ") and fails every pull of the registry"
		}
	case hostsEntry:
		if !strings.HasPrefix(s, "http") {
			s = "https://" + s
		}
	}
	u, err := url.Parse(s)
	if err != nil {
		return "" // a hosts file containerd rejects whole: judged as the file's error
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Sprintf("its scheme %q is not http or https (unsupported protocol scheme)", u.Scheme)
	case u.Hostname() == "":
		if strings.HasPrefix(raw, "://") {
			return "its scheme is empty, so it has no host (http: no Host in request URL)"
		}
		return "it has no host name"
	case (u.Hostname() == "http" || u.Hostname() == "https") && strings.HasPrefix(u.Path, "//"):
		return fmt.Sprintf("its scheme is written twice: containerd dials a host named %q", u.Hostname())
	}
	return ""
}

// containerdRegistryEndpoints: endpoints containerd cannot use, and hosts
// files it does not use. Only the registry configuration in effect is
// judged: the hosts files when config_path is set, the legacy mirrors
// otherwise (with both set the CRI does not load: containerdCRIDisabled).
// One finding, quoting every line, so that the journal's "missing protocol
// scheme" or "failed to decode hosts.toml" line joins it.
//
// A hosts file containerd ignores is this problem too, not one of its own:
// the RegistryEndpointInvalid signature already matches containerd's
// "failed to decode hosts.toml" line, and a separate ID would split the
// file's line and the journal's line of one cause into two findings.
func containerdRegistryEndpoints(in *Input) []*nodediagv1.Finding {
	c := in.Containerd()
	if c == nil || c.GetParseError() != "" {
		return nil
	}
	var details []string
	var quotes []*nodediagv1.Quote
	add := func(detail string, q ...*nodediagv1.Quote) {
		details = append(details, detail)
		quotes = append(quotes, q...)
	}
	if c.GetRegistryConfigPath() == "" {
		for _, ep := range c.GetLegacyMirrors() {
			if why := judgeEndpoint(legacyMirror, ep.GetUrl()); why != "" {
				add(fmt.Sprintf("mirror %q of %s: %s", ep.GetUrl(), ep.GetRegistry(), why), QuoteLine(ep.GetLine()))
			}
		}
	} else {
		for _, hf := range c.GetHostsFiles() {
			if why := hostsFileProblem(in, c, hf); why != "" {
				q := QuoteLine(hf.GetErrorLine())
				if q == nil {
					q = QuoteText(hf.GetPath(), hf.GetError())
				}
				add(why, q)
				continue
			}
			for _, ep := range hf.GetEndpoints() {
				if why := judgeEndpoint(hostsEntry, ep.GetUrl()); why != "" {
					add(fmt.Sprintf("%s %q in %s: %s", ep.GetKind(), ep.GetUrl(), hf.GetPath(), why), QuoteLine(ep.GetLine()))
				}
				if v := containerdVersion(in); v != nil && v.LessThan(version.MustParseGeneric("2.2.0")) && slices.ContainsFunc(ep.GetCapabilities(), func(c string) bool { return strings.EqualFold(c, ctdconfig.CapabilityReferrers) }) {
					add(fmt.Sprintf("capability %q of %s in %s: containerd %s knows it only from 2.2, refuses it (\"unknown capability referrers\") and ignores the whole file", ctdconfig.CapabilityReferrers, ep.GetUrl(), hf.GetPath(), v), QuoteLine(ep.GetLine()))
				}
			}
		}
	}
	for _, host := range plainHTTPRegistries(in) {
		if detail, q := plainHTTPConfig(c, host); detail != "" {
			add(detail, q)
		}
	}
	if len(details) == 0 {
		return nil
	}
	detail := details[0]
	if len(details) > 1 {
		detail += fmt.Sprintf(" (and %d more)", len(details)-1)
	}
	return []*nodediagv1.Finding{RegistryEndpointInvalid.Finding(Params{"detail": detail}, dedupeQuotes(quotes)...)}
}

// plainHTTPRegistries are the registry hosts that answered containerd's
// HTTPS with plain HTTP in the window, in the order first seen.
func plainHTTPRegistries(in *Input) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range in.Matched("registry-plain-http") {
		if h := m.Group("host"); h != "" && !seen[h] && in.InWindow(m.Line.GetTime()) {
			seen[h] = true
			out = append(out, h)
		}
	}
	return out
}

// plainHTTPConfig names the configuration that makes containerd speak
// HTTPS to host, a registry that speaks plain HTTP: the endpoint written
// without a scheme (https by default) or with https, the hosts file or
// mirrors entry that is missing, or a mirrors key without the port of the
// image's registry. "" when the configuration already says http for it
// (then the journal's line is all there is).
func plainHTTPConfig(c *nodediagv1.Containerd, host string) (string, *nodediagv1.Quote) {
	httpsTo := func(ep *nodediagv1.RegistryEndpoint) string {
		u := ep.GetUrl()
		switch {
		case strings.HasPrefix(u, "http://"):
			return ""
		case strings.HasPrefix(u, "https://"):
			return "it says https"
		case ep.GetKind() == "mirrors" && ctdconfig.IsLocalhost(hostOfEndpoint(u)):
			return "" // containerd uses http for a localhost mirror without a scheme
		}
		return "without a scheme it means https"
	}
	fixFor := fmt.Sprintf("%s answers plain HTTP and containerd speaks HTTPS to it", host)
	// An endpoint that names host, whichever registry it serves (a mirror
	// of docker.io at mirror:5000 is configured in docker.io's file).
	dir := c.GetRegistryConfigPath()
	var eps []*nodediagv1.RegistryEndpoint
	where := map[*nodediagv1.RegistryEndpoint]string{}
	if dir != "" {
		for _, hf := range c.GetHostsFiles() {
			for _, ep := range hf.GetEndpoints() {
				eps = append(eps, ep)
				where[ep] = hf.GetPath()
			}
		}
	} else {
		for _, ep := range c.GetLegacyMirrors() {
			eps = append(eps, ep)
			where[ep] = c.GetConfigFile()
		}
	}
	hostname, _, hasPort := strings.Cut(host, ":")
	if dir == "" && hasPort {
		// A mirrors key is the image's registry as written: "reg" does not
		// serve images of "reg:5000", whatever its endpoints say.
		var portless *nodediagv1.RegistryEndpoint
		keyed := false
		for _, ep := range c.GetLegacyMirrors() {
			switch ep.GetRegistry() {
			case host:
				keyed = true
			case hostname:
				if portless == nil {
					portless = ep
				}
			}
		}
		if portless != nil && !keyed {
			return fmt.Sprintf("%s: the registry.mirrors key %q in %s has no port, so pulls of %s do not use it: the key is the image's registry as written, %q", fixFor, hostname, c.GetConfigFile(), host, host), QuoteLine(portless.GetLine())
		}
	}
	named := false
	for _, ep := range eps {
		if hostOfEndpoint(ep.GetUrl()) != host {
			continue
		}
		named = true
		if why := httpsTo(ep); why != "" {
			return fmt.Sprintf("%s: %s %q of %s in %s (%s): write http://%s", fixFor, ep.GetKind(), ep.GetUrl(), ep.GetRegistry(), where[ep], why, host), QuoteLine(ep.GetLine())
		}
	}
	if named {
		return "", nil
	}
	if dir != "" {
		for _, hf := range c.GetHostsFiles() {
			if hf.GetRegistry() == host {
				return "", nil
			}
		}
		first, _, _ := strings.Cut(dir, ":")
		q := QuoteLine(c.GetRegistryConfigPathLine())
		if q == nil {
			q = QuoteText(c.GetConfigFile(), "config_path = "+dir)
		}
		return fmt.Sprintf("%s: no hosts file of %s under %s: write %s/%s/hosts.toml with server = \"http://%s\"", fixFor, host, dir, first, host, host), q
	}
	for _, ep := range c.GetLegacyMirrors() {
		if ep.GetRegistry() == host {
			return "", nil // its endpoints are other hosts: the line above judges them
		}
	}
	for _, t := range c.GetUnknownTables() {
		if strings.Contains(t.GetText(), hostname) {
			section, _, _ := strings.Cut(strings.TrimLeft(strings.TrimSpace(t.GetText()), "["), ".")
			return fmt.Sprintf("%s: containerd does not read the table at %s:%d, which names it (%q is not a section of containerd's configuration; the CRI's registry lives under [plugins....])", fixFor, t.GetPath(), t.GetLine(), section), QuoteLine(t)
		}
	}
	var q *nodediagv1.Quote
	switch {
	case !c.GetConfigPresent():
		q = QuoteText(c.GetConfigFile(), "absent: containerd runs on its defaults, without config_path or mirrors")
	default:
		q = QuoteText(c.GetConfigFile(), "no config_path and no registry.mirrors entry for "+host)
	}
	return fmt.Sprintf("%s: nothing in %s tells containerd to use http for it: set the CRI registry's config_path = \"/etc/containerd/certs.d\" and write /etc/containerd/certs.d/%s/hosts.toml with server = \"http://%s\"", fixFor, c.GetConfigFile(), host, host), q
}

// hostOfEndpoint is an endpoint's host[:port], as containerd dials it.
func hostOfEndpoint(u string) string {
	if _, rest, ok := strings.Cut(u, "://"); ok {
		u = rest
	}
	h, _, _ := strings.Cut(u, "/")
	return h
}

// hostsFileProblem says why containerd does not use hf, or "". A missing
// [host] table matters only to containerd 1.x before 1.7.32.
func hostsFileProblem(in *Input, c *nodediagv1.Containerd, hf *nodediagv1.HostsFile) string {
	switch e := hf.GetError(); {
	case e == "":
		return ""
	case e == errInvalidHostTree:
		if c.GetVersion() >= 3 || !hostTreeRequired(containerdVersion(in)) {
			return ""
		}
		return fmt.Sprintf("containerd 1.x ignores %s (no [host] table: \"invalid `host` tree\") and pulls %s from the upstream registry", hf.GetPath(), hostsRegistryName(hf))
	case strings.Contains(e, errNotRegularFile):
		return fmt.Sprintf("%s is not a file: every pull of %s fails (%s)", hf.GetPath(), hf.GetRegistry(), e)
	default:
		return fmt.Sprintf("containerd ignores %s (%s) and pulls %s from the upstream registry", hf.GetPath(), e, hostsRegistryName(hf))
	}
}

// hostTreeRequired says whether a containerd of version v rejects a
// hosts.toml without a [host] table: 1.6 and 1.7 before 1.7.32 (containerd
// #10027, fixed by #10028 in 1.7.32); 2.x does not. Unknown versions are
// assumed to (containerd 1.x is what the version 2 layout is written for).
func hostTreeRequired(v *version.Version) bool {
	if v == nil {
		return true
	}
	if v.Major() >= 2 {
		return false
	}
	return v.LessThan(version.MustParseGeneric("1.7.32"))
}

// containerdVersion is the running containerd's version: what its CRI
// answered, else what its binary says; nil when unknown.
func containerdVersion(in *Input) *version.Version {
	if rt := in.Runtime(); rt != nil && strings.Contains(rt.GetRuntimeName(), "containerd") {
		if v := leadingVersion(rt.GetRuntimeVersion()); v != nil {
			return v
		}
	}
	if _, ve := binaryVersion(in, "containerd"); ve != nil {
		return ve.v
	}
	return nil
}

// leadingVersion reads the version at the start of s ("1.6.20~ds1",
// "v2.0.4"); nil when s starts with none.
func leadingVersion(s string) *version.Version {
	s = strings.TrimPrefix(strings.TrimSpace(s), "v")
	end := 0
	for end < len(s) && (s[end] == '.' || s[end] >= '0' && s[end] <= '9') {
		end++
	}
	v, err := version.ParseGeneric(strings.TrimSuffix(s[:end], "."))
	if err != nil {
		return nil
	}
	return v
}

// containerd2 says whether the evidence shows containerd 2.x: a version 3
// configuration (which 1.x cannot load) or a 2.x version.
func containerd2(in *Input) bool {
	if in.Containerd().GetVersion() >= 3 {
		return true
	}
	v := containerdVersion(in)
	return v != nil && v.Major() >= 2
}

// containerdCgroupDriver: the kubelet and containerd's runc use different
// cgroup drivers. Judged only when both sides are known from files: the
// kubelet's KubeletConfiguration (or an active --cgroup-driver flag), and a
// containerd config.toml that loads. The defaults are cgroupfs on both
// sides: the kubelet's v1beta1 defaulting (SetDefaults_KubeletConfiguration:
// CgroupDriver "" → "cgroupfs") and runc's options without SystemdCgroup.
//
// Not judged when the kubelet takes the driver from the runtime instead: the
// KubeletCgroupDriverFromCRI feature (beta, on by default, from 1.31; GA in
// 1.34) with a runtime that implements the CRI RuntimeConfig call
// (containerd 2.0 and later).
func containerdCgroupDriver(in *Input) []*nodediagv1.Finding {
	c := in.Containerd()
	kc := in.KubeletConfig()
	cf := kc.GetConfig()
	if c == nil || c.GetParseError() != "" || cf == nil || !cf.GetPresent() || cf.GetParseError() != "" || kubeletUsesDockershim(in) {
		// (With dockershim the kubelet's peer is Docker's driver, which
		// the kubelet's own log states: its signature judges it.)
		return nil
	}
	if !c.GetConfigPresent() {
		// Not judged: a containerd without /etc/containerd/config.toml
		// may read another (Flatcar's unit passes --config
		// /usr/share/containerd/config.toml), so its defaults are not
		// known to apply.
		return nil
	}
	if containerd2(in) {
		if _, kv := binaryVersion(in, "kubelet"); kv != nil && !kv.v.LessThan(version.MustParseGeneric("1.31.0")) {
			return nil
		}
	}
	kubelet := cf.GetCgroupDriver()
	kq := QuoteLine(cf.GetCgroupDriverLine())
	if kubelet == "" {
		kubelet = "cgroupfs"
		kq = QuoteText(cf.GetPath(), "cgroupDriver not set: the kubelet uses cgroupfs")
	}
	for _, fl := range kc.GetFlags() {
		if fl.GetActive() && fl.GetName() == "cgroup-driver" {
			kubelet, kq = fl.GetValue(), QuoteLine(fl.GetSource())
		}
	}
	runtime := "cgroupfs"
	cq := QuoteText(c.GetConfigFile(), "SystemdCgroup not set in the default runtime's runc options: containerd uses cgroupfs")
	if c.SystemdCgroup != nil {
		cq = QuoteLine(c.GetSystemdCgroupLine())
		if c.GetSystemdCgroup() {
			runtime = "systemd"
		}
	}
	if kubelet == runtime {
		return nil
	}
	return []*nodediagv1.Finding{KubeletCgroupDriverMismatch.Finding(nil, kq, cq)}
}

// isLocalhost is containerd's docker.IsLocalhost: "localhost" or a loopback
// IP, with or without a port.
func isLocalhost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// dedupeQuotes drops nil and repeated quotes, keeping the first of each.
func dedupeQuotes(qs []*nodediagv1.Quote) []*nodediagv1.Quote {
	var out []*nodediagv1.Quote
	for _, q := range qs {
		if q == nil {
			continue
		}
		dup := false
		for _, o := range out {
			if o.Source == q.Source && o.Line == q.Line && o.Excerpt == q.Excerpt {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, q)
		}
	}
	return out
}

// hostsRegistryName names the registries a hosts file serves: its directory,
// or every registry without a directory of its own for _default (containerd
// 1.7 and later).
func hostsRegistryName(hf *nodediagv1.HostsFile) string {
	if hf.GetRegistry() == "_default" {
		return "every registry without hosts of its own"
	}
	return hf.GetRegistry()
}
