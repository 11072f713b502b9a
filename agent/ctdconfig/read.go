package ctdconfig

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/nodediag/nodediag/agent/host"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// Read reads containerd's configuration from h: ConfigFile, the drop-ins its
// imports name (recursively, as containerd loads them), and, when the CRI
// registry's config_path is set, every <dir>/<registry>/hosts.toml of its
// directories.
//
// It never fails. A missing ConfigFile is not an error (config_present is
// false: containerd runs on its defaults). What containerd itself would
// refuse is data: a main file or import that does not parse, or an import
// that does not exist, is parse_error (containerd does not start); a hosts
// file containerd ignores has its error. What the agent could not read
// (permissions, a file over the read limit) is returned in unreadable and
// the rest is still reported.
func Read(h *host.Host) (cfg *nodediagv1.Containerd, unreadable []*nodediagv1.Unreadable) {
	r := reader{h: h}
	cfg = r.config()
	if cfg.ParseError == "" && cfg.RegistryConfigPath != "" {
		cfg.HostsFiles = r.hostsFiles(cfg.RegistryConfigPath)
	}
	return cfg, r.unreadable
}

// Endpoints lists the registry endpoints containerd pulls from: with
// config_path set, each hosts file's endpoints in order (hosts, then
// server); without it, the legacy mirrors. containerd never uses both: with
// config_path set, mirrors stop the CRI plugin from loading (a problem of
// its own, not of the mirrors' reachability).
func Endpoints(cfg *nodediagv1.Containerd) []*nodediagv1.RegistryEndpoint {
	if cfg == nil {
		return nil
	}
	if cfg.GetRegistryConfigPath() == "" {
		return cfg.GetLegacyMirrors()
	}
	var out []*nodediagv1.RegistryEndpoint
	for _, hf := range cfg.GetHostsFiles() {
		out = append(out, hf.GetEndpoints()...)
	}
	return out
}

type reader struct {
	h          *host.Host
	unreadable []*nodediagv1.Unreadable
}

func (r *reader) cannotRead(name string, err error) {
	r.unreadable = append(r.unreadable, &nodediagv1.Unreadable{Source: name, Error: err.Error()})
}

// containerdFails says whether err reading a configuration file is one
// containerd meets too (and then does not start): the file is absent, or is
// not a regular file. Anything else (permission denied to the agent, the
// read limit) is the agent's own gap.
func containerdFails(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, host.ErrNotRegular)
}

// config reads the main file and its imports.
func (r *reader) config() *nodediagv1.Containerd {
	b, err := r.h.ReadFile(ConfigFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		c := Build(nil)
		c.Version = 0
		return c
	case err != nil:
		c := Build(nil)
		c.ConfigPresent = true
		if errors.Is(err, host.ErrNotRegular) {
			c.ParseError = err.Error()
			return c
		}
		r.cannotRead(ConfigFile, err)
		return c
	}
	main, err := ParseConfig(ConfigFile, b)
	if err != nil {
		return brokenMain(ConfigFile, b, err.(*ParseError))
	}

	files := []*File{main}
	loaded := map[string]bool{ConfigFile: true}
	type pending struct {
		path string
		line *nodediagv1.SourceLine // the imports entry naming it
	}
	var queue []pending
	layoutVersion := main.version()
	enqueue := func(f *File) {
		imps, lines := f.Imports()
		for i, imp := range imps {
			for _, p := range r.resolveImport(f.Path, imp, layoutVersion) {
				queue = append(queue, pending{p, lines[i]})
			}
		}
	}
	enqueue(main)
	var fatal *nodediagv1.Containerd
	for len(queue) > 0 && fatal == nil {
		p := queue[0]
		queue = queue[1:]
		if loaded[p.path] {
			continue
		}
		loaded[p.path] = true
		b, err := r.h.ReadFile(p.path)
		if err != nil {
			if containerdFails(err) {
				fatal = Build(files)
				fatal.ParseError = fmt.Sprintf("import %s: %v", p.path, err)
				fatal.ParseErrorLine = p.line
				break
			}
			r.cannotRead(p.path, err)
			continue
		}
		f, err := ParseConfig(p.path, b)
		if err != nil {
			pe := err.(*ParseError)
			fatal = Build(files)
			// The message alone, as for the main file: the line names the file.
			fatal.ParseError = pe.Msg
			d, _ := parseDoc(p.path, b)
			fatal.ParseErrorLine = d.sourceLine(pe.Line)
			break
		}
		files = append(files, f)
		enqueue(f)
	}
	if fatal != nil {
		return fatal
	}
	return Build(files)
}

// brokenMain describes a main file that does not parse: its parse error and
// line, and what the lines before the error say (containerd does not start,
// so the rest is context, never effective configuration).
func brokenMain(name string, b []byte, pe *ParseError) *nodediagv1.Containerd {
	d, _ := parseDoc(name, b)
	var c *nodediagv1.Containerd
	if pe.Line > 1 {
		prefix := strings.Join(d.lines[:min(pe.Line-1, len(d.lines))], "\n")
		if f, err := ParseConfig(name, []byte(prefix)); err == nil {
			c = Build([]*File{f})
		}
	}
	if c == nil {
		c = Build(nil)
		c.ConfigPresent = true
		c.ConfigFile = name
	}
	c.ParseError = pe.Msg
	c.ParseErrorLine = d.sourceLine(pe.Line)
	return c
}

// resolveImport resolves one imports entry of the file parent as containerd
// does (services/server/config resolveImports): a path without "*" that is
// relative is relative to parent's directory; an entry with "*" is a glob
// (the matching paths, in lexical order). A relative glob is where the
// versions differ: containerd 2.x joins it to parent's directory first
// (containerd #9746), containerd 1.6 and 1.7 glob it as it is, against their
// working directory, "/" under systemd (the backports #9834 and #9835 were
// not merged). The layout tells them apart: version 3 is 2.x's. Entries
// without "*" are returned whether they exist or not.
func (r *reader) resolveImport(parent, imp string, layoutVersion int) []string {
	glob := strings.Contains(imp, "*")
	p := path.Clean(imp)
	if !path.IsAbs(p) {
		base := path.Dir(parent)
		if glob && layoutVersion < 3 {
			base = "/"
		}
		p = path.Join(base, p)
	}
	if !glob {
		return []string{p}
	}
	return r.glob(p)
}

// glob is filepath.Glob over the host: every component may be a pattern;
// directories that cannot be listed match nothing (as filepath.Glob ignores
// I/O errors), but are recorded as unreadable when the error is not absence.
func (r *reader) glob(pattern string) []string {
	if _, err := path.Match(pattern, ""); err != nil {
		return nil // malformed pattern: containerd fails on it, nothing to read
	}
	parts := strings.Split(strings.TrimPrefix(pattern, "/"), "/")
	dirs := []string{"/"}
	for i, part := range parts {
		last := i == len(parts)-1
		var next []string
		for _, dir := range dirs {
			if !hasMeta(part) {
				p := path.Join(dir, part)
				if ok, err := r.h.Exists(p); err == nil && ok {
					next = append(next, p)
				}
				continue
			}
			ents, err := r.h.ReadDir(dir)
			if err != nil {
				if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, host.ErrNotRegular) {
					r.cannotRead(dir, err)
				}
				continue
			}
			for _, e := range ents {
				if ok, _ := path.Match(part, e.Name()); ok {
					if !last && !r.isDir(path.Join(dir, e.Name())) {
						continue
					}
					next = append(next, path.Join(dir, e.Name()))
				}
			}
		}
		dirs = next
	}
	return dirs
}

func hasMeta(s string) bool { return strings.ContainsAny(s, `*?[\`) }

func (r *reader) isDir(p string) bool {
	fi, err := r.h.Stat(p)
	return err == nil && fi.IsDir()
}

// hostsFiles reads <dir>/<registry>/hosts.toml for every directory of
// config_path (a list separated by ":", as containerd splits it with
// filepath.SplitList) and every registry directory in it. A directory
// without hosts.toml is skipped: containerd then uses the TLS files it holds
// (Docker's certs.d layout) and no endpoint of its own.
// MaxHostsFiles bounds the hosts.toml files read: a node configures a
// handful of registries; a directory of thousands is not read whole.
const MaxHostsFiles = 256

func (r *reader) hostsFiles(configPath string) []*nodediagv1.HostsFile {
	var out []*nodediagv1.HostsFile
	for _, dir := range strings.Split(configPath, ":") {
		if dir == "" {
			continue
		}
		if !path.IsAbs(dir) {
			// containerd would resolve it against its working directory (/).
			dir = "/" + dir
		}
		ents, err := r.h.ReadDir(dir)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				r.cannotRead(dir, err)
			}
			continue
		}
		for i, e := range ents {
			if len(out) == MaxHostsFiles {
				r.cannotRead(dir, fmt.Errorf("%d more entries not read: at most %d hosts.toml files are read", len(ents)-i, MaxHostsFiles))
				break
			}
			regDir := path.Join(dir, e.Name())
			if !r.isDir(regDir) {
				continue
			}
			if hf := r.hostsFile(path.Join(regDir, "hosts.toml"), e.Name()); hf != nil {
				out = append(out, hf)
			}
		}
	}
	return out
}

// hostsFile reads one hosts.toml; nil when there is none.
func (r *reader) hostsFile(name, registry string) *nodediagv1.HostsFile {
	b, err := r.h.ReadFile(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case errors.Is(err, host.ErrNotRegular):
		// containerd's os.ReadFile fails on it ("read <path>: is a
		// directory" for a directory) and does not use the file.
		return &nodediagv1.HostsFile{Path: name, Registry: registry, Error: err.Error()}
	case err != nil:
		r.cannotRead(name, err)
		return nil
	}
	return ParseHosts(name, registry, b)
}

// StripUserinfo drops "user:password@" from an endpoint: no password
// goes into evidence or is ever sent (containerd sends only the host), and
// the evidence holds the endpoint redacted ("robot:[REDACTED]@"), which
// net/url would refuse.
func StripUserinfo(s string) string {
	rest, scheme := s, ""
	if i := strings.Index(s, "://"); i >= 0 {
		scheme, rest = s[:i+3], s[i+3:]
	}
	authority := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority = rest[:i]
	}
	if i := strings.LastIndex(authority, "@"); i >= 0 {
		return scheme + rest[i+1:]
	}
	return s
}
