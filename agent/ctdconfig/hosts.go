package ctdconfig

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/nodediag/nodediag/agent/redact"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// CapabilityReferrers is the hosts.toml capability containerd 2.2 added
// (an endpoint that serves the OCI referrers API); earlier releases refuse
// it as an unknown capability and ignore the whole file.
const CapabilityReferrers = "referrers"

// ErrInvalidHostTree is the error containerd 1.6 and 1.7 (before 1.7.32)
// log for a hosts.toml without a [host."..."] table ("failed to decode
// hosts.toml" error="invalid `host` tree"), after which they ignore the file
// and pull from the upstream registry (remotes/docker/config/hosts.go
// getSortedHosts, go-toml v1). containerd 2.x (go-toml v2, unstable parser)
// and 1.7.32 (#10028) accept such a file: a reader must weigh this error
// against the containerd version.
const ErrInvalidHostTree = "invalid `host` tree"

// ParseHosts describes one <config_path>/<registry>/hosts.toml as containerd
// reads it (remotes/docker/config/hosts.go in 1.6/1.7, core/remotes/docker/
// config/hosts.go in 2.x): the [host."<url>"] tables in file order, then the
// root-level server. It never fails: what containerd would reject is the
// HostsFile's error, with the line it is about.
//
// containerd rejects the whole file, logs "failed to decode hosts.toml" and
// pulls as if it did not exist (from the upstream registry, with the TLS
// files of the directory), when the TOML does not parse, when a value has
// the wrong type, when a host or server does not parse as a URL ("unable to
// parse server ..."), when a capability is unknown, and when ca, client or a
// header is neither a string nor a list of strings, when dial_timeout is
// not a duration string; containerd 1.x also
// rejects a file without a [host] table (ErrInvalidHostTree). The endpoints
// are listed even for a rejected file, as written, so that a reader can say
// what containerd ignored.
//
// Only what the checks need is kept: header values and client key pairs are
// never copied (they may carry credentials).
func ParseHosts(path, registry string, b []byte) *nodediagv1.HostsFile {
	hf := &nodediagv1.HostsFile{Path: path, Registry: registry}
	d, err := parseDoc(path, b)
	if err != nil {
		pe := err.(*ParseError)
		hf.Error = "failed to parse TOML: " + pe.Msg
		hf.ErrorLine = d.sourceLine(pe.Line)
		return hf
	}
	fail := func(line *nodediagv1.SourceLine, format string, args ...any) {
		if hf.Error == "" {
			hf.Error = fmt.Sprintf(format, args...)
			hf.ErrorLine = line
		}
	}

	// The hosts, in the order of their [host."..."] headers (2.x reads the
	// order from the table headers; 1.x sorts by line: the same order).
	var hosts []string
	seen := map[string]bool{}
	for _, t := range d.tables {
		if len(t.key) >= 2 && t.key[0] == "host" && !seen[t.key[1]] {
			seen[t.key[1]] = true
			hosts = append(hosts, t.key[1])
		}
	}
	switch v, ok := d.get("host"); {
	case !ok:
		fail(nil, "%s", ErrInvalidHostTree)
	default:
		m, isTable := v.(map[string]any)
		if !isTable {
			fail(d.line("host"), "host: not a table of hosts")
			break
		}
		for _, k := range d.keysInOrder("host") {
			if _, isTable := m[k].(map[string]any); !isTable {
				fail(d.line("host", k), "host %q: not a table", k)
			}
		}
	}

	for _, h := range hosts {
		ep := endpoint(d, []string{"host", h}, registry, h, "host", d.line("host", h), fail)
		hf.Endpoints = append(hf.Endpoints, ep)
	}
	server, hasServer := d.get("server")
	s, isString := server.(string)
	switch {
	case hasServer && !isString:
		fail(d.line("server"), "server: not a string")
	case s != "":
		ep := endpoint(d, nil, registry, s, "server", d.line("server"), fail)
		hf.Endpoints = append(hf.Endpoints, ep)
	default:
		// The root's settings still apply to the implicit server (the
		// registry itself): containerd checks them the same way.
		endpoint(d, nil, registry, "", "server", nil, fail)
	}
	return hf
}

// endpoint reads the settings of a host table (at) or of the root (at nil)
// for the URL raw, and reports through fail what containerd's
// parseHostConfig rejects.
func endpoint(d *doc, at []string, registry, raw, kind string, urlLine *nodediagv1.SourceLine, fail func(*nodediagv1.SourceLine, string, ...any)) *nodediagv1.RegistryEndpoint {
	key := func(k ...string) []string { return append(append([]string{}, at...), k...) }
	line := func(k ...string) *nodediagv1.SourceLine {
		if l := d.line(key(k...)...); l != nil {
			return l
		}
		return urlLine
	}
	ep := &nodediagv1.RegistryEndpoint{Registry: registry, Url: redact.String(raw), Kind: kind, Line: urlLine}
	if raw != "" {
		server := raw
		if !strings.HasPrefix(server, "http") {
			server = "https://" + server
		}
		u, err := url.Parse(server)
		if err != nil {
			fail(urlLine, "unable to parse server %v: %v", redact.String(server), err)
		} else {
			ep.PlainHttp = u.Scheme == "http"
		}
	}
	if v, ok := d.get(key("capabilities")...); ok {
		arr, isList := v.([]any)
		if !isList {
			fail(line("capabilities"), "capabilities: not a list")
		}
		for _, c := range arr {
			s, isStr := c.(string)
			switch strings.ToLower(s) {
			// referrers: containerd 2.2 and later (the rules judge it
			// against the running containerd's version).
			case "pull", "resolve", "push", CapabilityReferrers:
			default:
				if isStr {
					fail(line("capabilities"), "unknown capability %v", s)
				} else {
					fail(line("capabilities"), "unknown capability %v", c)
				}
			}
			if isStr {
				ep.Capabilities = append(ep.Capabilities, s)
			}
		}
	}
	if v, ok := d.get(key("skip_verify")...); ok {
		b, isBool := v.(bool)
		if !isBool {
			fail(line("skip_verify"), "skip_verify: not a boolean")
		}
		ep.SkipVerify = b
	}
	if v, ok := d.get(key("dial_timeout")...); ok {
		// containerd 1.7 and 2.x: a Go duration string ("5s"); a number
		// or a string without a unit rejects the whole file.
		str, isStr := v.(string)
		if !isStr {
			fail(line("dial_timeout"), "dial_timeout: not a string (a duration such as \"5s\")")
		} else if _, err := time.ParseDuration(str); str != "" && err != nil {
			fail(line("dial_timeout"), "%v", err)
		}
	}
	if v, ok := d.get(key("override_path")...); ok {
		if _, isBool := v.(bool); !isBool {
			fail(line("override_path"), "override_path: not a boolean")
		}
	}
	if v, ok := d.get(key("ca")...); ok {
		switch ca := v.(type) {
		case string:
			ep.Ca = []string{ca}
		case []any:
			for _, e := range ca {
				s, isStr := e.(string)
				if !isStr {
					fail(line("ca"), "unable to cast %v to string", e)
					continue
				}
				ep.Ca = append(ep.Ca, s)
			}
		default:
			fail(line("ca"), "invalid type %v for \"ca\"", v)
		}
	}
	if v, ok := d.get(key("client")...); ok {
		// Checked, never copied: a client entry names a private key file.
		switch cl := v.(type) {
		case string:
		case []any:
			for _, p := range cl {
				switch pair := p.(type) {
				case string:
				case []any:
					if len(pair) != 2 || !allStrings(pair) {
						fail(line("client"), "invalid pair for \"client\"")
					}
				default:
					fail(line("client"), "invalid type %T for \"client\"", p)
				}
			}
		default:
			fail(line("client"), "invalid type for \"client\"")
		}
	}
	if v, ok := d.get(key("header")...); ok {
		// Checked, never copied: headers carry tokens.
		m, isTable := v.(map[string]any)
		if !isTable {
			fail(line("header"), "header: not a table")
		}
		for _, k := range d.keysInOrder(key("header")...) {
			switch x := m[k].(type) {
			case string:
			case []any:
				if !allStrings(x) {
					fail(line("header", k), "invalid header %q: not a string", k)
				}
			default:
				fail(line("header", k), "invalid type for header %q", k)
			}
		}
	}
	return ep
}

func allStrings(vs []any) bool {
	for _, v := range vs {
		if _, ok := v.(string); !ok {
			return false
		}
	}
	return true
}
