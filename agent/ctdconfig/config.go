package ctdconfig

import (
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/nodediag/nodediag/agent/redact"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// Plugin IDs of the CRI plugin in each configuration layout. Version 1 keys
// plugin sections by plugin ID ("cri"), version 2 by URI (containerd 1.x,
// services/server/config: Config.Decode uses p.ID for version 1 and p.URI()
// otherwise), version 3 (containerd 2.x) splits the CRI plugin into an
// images and a runtime plugin (docs/cri/config.md).
const (
	PluginCRIv1      = "cri"
	PluginCRI        = "io.containerd.grpc.v1.cri"
	PluginCRIImages  = "io.containerd.cri.v1.images"
	PluginCRIRuntime = "io.containerd.cri.v1.runtime"
)

// File is one parsed containerd configuration file (the main config.toml or
// one of its imports).
type File struct {
	Path string
	doc  *doc
}

// ParseConfig parses one containerd configuration file. A file that is not
// TOML gives a *ParseError naming the line; containerd refuses to start on
// it ("failed to load TOML").
func ParseConfig(path string, b []byte) (*File, error) {
	d, err := parseDoc(path, b)
	if err != nil {
		return nil, err
	}
	return &File{Path: path, doc: d}, nil
}

// Imports returns the file's imports = [...] entries as written, with the
// line of each.
func (f *File) Imports() (imports []string, lines []*nodediagv1.SourceLine) {
	v, _ := f.doc.get("imports")
	arr, _ := v.([]any)
	for i, e := range arr {
		if s, ok := e.(string); ok {
			imports = append(imports, s)
			lines = append(lines, f.doc.line("imports", itoa(i)))
		}
	}
	return imports, lines
}

// version is the file's version key; 0 when it has none.
func (f *File) version() int {
	v, _ := f.doc.get("version")
	switch n := v.(type) {
	case int64:
		return int(n)
	case float64:
		return int(n)
	}
	return 0
}

// Build describes the configuration that files make together, in
// containerd's load order (the main file first, then its imports breadth
// first), with containerd's merge rules (services/server/config mergeConfig
// in 1.x and 2.x): a later non-empty scalar overrides an earlier one
// (version, [grpc] address), lists are appended (disabled_plugins, imports),
// and a plugin's section ([plugins."<id>"]) is taken whole from the last file
// that has one ("Maps merged by keys, but values are replaced entirely").
//
// Values the files do not set get containerd's defaults where the message
// says so (grpc address, CNI directories); hosts files are not read here
// (Read does that).
// topLevelSections are the top-level keys of containerd's configuration
// (services/server/config Config, versions 1 to 3) that hold a table.
var topLevelSections = map[string]bool{
	"grpc": true, "ttrpc": true, "debug": true, "metrics": true, "cgroup": true,
	"plugins": true, "timeouts": true, "proxy_plugins": true, "stream_processors": true,
}

func Build(files []*File) *nodediagv1.Containerd {
	c := &nodediagv1.Containerd{
		ConfigFile:  ConfigFile,
		GrpcAddress: DefaultGRPCAddress,
		CniConfDir:  DefaultCNIConfDir,
		CniBinDir:   DefaultCNIBinDir,
	}
	if len(files) == 0 {
		return c
	}
	c.ConfigFile = files[0].Path
	c.ConfigPresent = true
	b := builder{files: files}
	for _, f := range files {
		if v := f.version(); v != 0 {
			c.Version = int32(v)
		}
		imps, _ := f.Imports()
		for _, imp := range imps {
			c.Imports = appendUnique(c.Imports, imp)
		}
		if s, ok := f.doc.str("grpc", "address"); ok && s != "" {
			c.GrpcAddress, c.GrpcAddressLine = s, f.doc.line("grpc", "address")
		}
		for _, k := range f.doc.keysInOrder("plugins") {
			if l := f.doc.line("plugins", k); l != nil {
				c.PluginKeys = append(c.PluginKeys, l)
			}
		}
		for _, k := range f.doc.keysInOrder() {
			if _, table := f.doc.tree[k].(map[string]any); table && !topLevelSections[k] {
				if l := f.doc.line(k); l != nil {
					c.UnknownTables = append(c.UnknownTables, l)
				}
			}
		}
	}
	if c.Version == 0 {
		c.Version = 1
	}
	b.disabledPlugins(c)

	lay := layoutOf(int(c.Version))
	if d, sec := b.section(lay.images); d != nil {
		b.images(c, d, sec, lay)
	}
	if d, sec := b.section(lay.runtime); d != nil {
		b.runtime(c, d, sec)
	}
	return c
}

// layout says where the CRI settings live in a configuration version.
type layout struct {
	version int
	// images holds the registry and the pause image; runtime holds the
	// runtimes and CNI. Both are the one CRI plugin before version 3.
	images, runtime string
}

func layoutOf(version int) layout {
	switch {
	case version >= 3:
		return layout{version: version, images: PluginCRIImages, runtime: PluginCRIRuntime}
	case version == 2:
		return layout{version: version, images: PluginCRI, runtime: PluginCRI}
	default:
		return layout{version: version, images: PluginCRIv1, runtime: PluginCRIv1}
	}
}

type builder struct {
	files []*File
}

// section returns the file whose [plugins."<id>"] section is in effect (the
// last one that has it) and the section's key path.
func (b builder) section(id string) (*doc, []string) {
	key := []string{"plugins", id}
	for i := len(b.files) - 1; i >= 0; i-- {
		if b.files[i].doc.has(key...) {
			return b.files[i].doc, key
		}
	}
	return nil, nil
}

// disabledPlugins appends every file's disabled_plugins and quotes the line
// that names a CRI plugin (the one a finding needs), else the first list.
func (b builder) disabledPlugins(c *nodediagv1.Containerd) {
	var first, cri *nodediagv1.SourceLine
	for _, f := range b.files {
		v, _ := f.doc.get("disabled_plugins")
		arr, _ := v.([]any)
		for i, e := range arr {
			s, ok := e.(string)
			if !ok {
				continue
			}
			c.DisabledPlugins = appendUnique(c.DisabledPlugins, s)
			l := f.doc.line("disabled_plugins", itoa(i))
			if first == nil {
				first = l
			}
			if cri == nil && isCRIPlugin(s) {
				cri = l
			}
		}
	}
	c.DisabledPluginsLine = first
	if cri != nil {
		c.DisabledPluginsLine = cri
	}
}

// isCRIPlugin says whether a disabled_plugins entry names a CRI plugin in
// some layout.
func isCRIPlugin(s string) bool {
	switch s {
	case PluginCRIv1, PluginCRI, PluginCRIImages, PluginCRIRuntime:
		return true
	}
	return false
}

// images fills what the CRI images settings say: pause image, registry.
func (b builder) images(c *nodediagv1.Containerd, d *doc, sec []string, lay layout) {
	at := func(k ...string) []string { return append(append([]string{}, sec...), k...) }
	sandbox := at("sandbox_image")
	if lay.version >= 3 {
		sandbox = at("pinned_images", "sandbox")
	}
	if s, ok := d.str(sandbox...); ok && s != "" {
		c.SandboxImage, c.SandboxImageLine = s, d.line(sandbox...)
	}
	if s, ok := d.str(at("registry", "config_path")...); ok && s != "" {
		c.RegistryConfigPath, c.RegistryConfigPathLine = s, d.line(at("registry", "config_path")...)
	}
	mirrors := at("registry", "mirrors")
	for _, reg := range d.keysInOrder(mirrors...) {
		if c.LegacyMirrorsLine == nil {
			c.LegacyMirrorsLine = d.line(append(mirrors, reg)...)
		}
		v, _ := d.get(append(mirrors, reg, "endpoint")...)
		arr, _ := v.([]any)
		for i, e := range arr {
			s, ok := e.(string)
			if !ok {
				continue
			}
			ep := &nodediagv1.RegistryEndpoint{
				Registry:  reg,
				Url:       redact.String(s),
				Line:      d.line(append(mirrors, reg, "endpoint", itoa(i))...),
				Kind:      "mirrors",
				PlainHttp: legacyScheme(s) == "http",
			}
			legacyTLS(d, at("registry", "configs"), s, ep)
			c.LegacyMirrors = append(c.LegacyMirrors, ep)
		}
	}
	configs := at("registry", "configs")
	for _, host := range d.keysInOrder(configs...) {
		if d.has(append(configs, host, "tls")...) {
			c.LegacyConfigsTlsLine = d.line(append(configs, host, "tls")...)
			break
		}
	}
}

// legacyScheme is the scheme containerd uses for a registry.mirrors
// endpoint: as written when it contains "://", else http for localhost and
// https otherwise (pkg/cri/server/image_pull.go addDefaultScheme, 1.6 to
// 2.x internal/cri/server/images/image_pull.go). Empty when the endpoint does
// not parse.
func legacyScheme(endpoint string) string {
	if strings.Contains(endpoint, "://") {
		u, err := url.Parse(endpoint)
		if err != nil {
			return ""
		}
		return u.Scheme
	}
	u, err := url.Parse("dummy://" + endpoint)
	if err != nil {
		return ""
	}
	if IsLocalhost(u.Host) {
		return "http"
	}
	return "https"
}

// IsLocalhost is containerd's docker.IsLocalhost (core/remotes/docker):
// "localhost" or a loopback IP, with or without a port.
func IsLocalhost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// legacyTLS copies the TLS settings that registry.configs."<host>".tls gives
// the endpoint's host (containerd looks them up by the endpoint URL's host):
// insecure_skip_verify and ca_file. Credentials (auth) are never read.
func legacyTLS(d *doc, configs []string, endpoint string, ep *nodediagv1.RegistryEndpoint) {
	if !strings.Contains(endpoint, "://") {
		endpoint = "dummy://" + endpoint
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return
	}
	tls := append(append([]string{}, configs...), u.Host, "tls")
	if v, ok := d.get(append(tls, "insecure_skip_verify")...); ok {
		ep.SkipVerify, _ = v.(bool)
	}
	if s, ok := d.str(append(tls, "ca_file")...); ok && s != "" {
		ep.Ca = []string{s}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func appendUnique(ss []string, s string) []string {
	for _, x := range ss {
		if x == s {
			return ss
		}
	}
	return append(ss, s)
}

// runtime fills what the CRI runtime settings say: the default runtime's
// SystemdCgroup and the CNI directories.
func (b builder) runtime(c *nodediagv1.Containerd, d *doc, sec []string) {
	at := func(k ...string) []string { return append(append([]string{}, sec...), k...) }
	// The default runtime: default_runtime_name ("runc" when unset), or the
	// deprecated default_runtime table of 1.x when it names a runtime_type
	// (ValidatePluginConfig then makes it the runtime "default").
	opts := at("containerd", "runtimes", "runc", "options")
	if s, ok := d.str(at("containerd", "default_runtime_name")...); ok && s != "" {
		opts = at("containerd", "runtimes", s, "options")
	}
	if s, ok := d.str(at("containerd", "default_runtime", "runtime_type")...); ok && s != "" {
		opts = at("containerd", "default_runtime", "options")
	}
	if v, ok := d.get(append(opts, "SystemdCgroup")...); ok {
		if on, isBool := v.(bool); isBool {
			c.SystemdCgroup = &on
			c.SystemdCgroupLine = d.line(append(opts, "SystemdCgroup")...)
		}
	}
	if s, ok := d.str(at("cni", "conf_dir")...); ok && s != "" {
		c.CniConfDir = s
	}
	// containerd 2.x reads bin_dirs (a list) and still accepts bin_dir.
	if v, ok := d.get(at("cni", "bin_dirs")...); ok {
		if arr, _ := v.([]any); len(arr) > 0 {
			if s, _ := arr[0].(string); s != "" {
				c.CniBinDir = s
				return
			}
		}
	}
	if s, ok := d.str(at("cni", "bin_dir")...); ok && s != "" {
		c.CniBinDir = s
	}
}
