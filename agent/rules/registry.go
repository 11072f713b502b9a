package rules

import (
	"fmt"
	"net/url"
	"strings"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// Registry rules judge the registries probe: whether each endpoint of
// containerd's configuration answered GET /v2/ from the node.
//
// containerd pulls a registry's images from its hosts in order (the legacy
// registry.mirrors endpoints, then the upstream registry; the [host] tables
// of its hosts.toml, then its server, which is the upstream registry when
// unset) and moves on to the next host when one fails. A failed endpoint is
// judged by the registry's other endpoints:
//   - none answered: the registry's pulls fail. RegistryUnreachable, or
//     RegistryEndpointInvalid when the endpoint answered plain HTTP to
//     HTTPS (a scheme written wrong, not a network problem: the log
//     signatures name the same text so). When the upstream registry is not
//     configured it was not checked, and pulls may still succeed through
//     it: medium confidence, and the title says so.
//   - a later one answered: pulls work, each after waiting for this one
//     (RegistryMirrorUnreachable, a warning).
//   - an earlier one answered: containerd reaches this one only for an
//     image the earlier one lacks; nothing is raised (an air-gapped node
//     with a working mirror and an unreachable upstream server is healthy).
//
// A check that failed at "url" is not judged: the endpoint does not parse,
// which the containerd rules report from its configuration line
// (RegistryEndpointInvalid); raising that ID again would keep merge from
// lending the log line of the failed pull to either finding.
//
// One finding per failed endpoint URL, naming every registry and quoting
// every configuration line that uses it (one mirror for docker.io,
// registry.k8s.io and quay.io is one finding): when a single endpoint is
// down, the log lines of the failed pulls join its finding (merge).
var registryRules = []Rule{
	{Name: "registry-reachability", Fn: registryReachabilityRule},
}

// regPlainHTTP is net/http's error (as the registries probe records it at
// the tls step) for an endpoint that answers plain HTTP to a TLS handshake.
const regPlainHTTP = "http: server gave HTTP response to HTTPS client"

// regStepNames name the steps of a check in titles.
var regStepNames = map[string]string{
	"dns":  "name resolution",
	"tcp":  "TCP connect",
	"tls":  "TLS handshake",
	"http": "GET /v2/",
}

// How a failed endpoint matters, least first.
const (
	regUnused   = iota // an earlier endpoint of each of its registries answered
	regDelaying        // a later endpoint answered: pulls wait for it first
	regBlocking        // no endpoint of a registry it serves answered
)

func registryReachabilityRule(in *Input) []*nodediagv1.Finding {
	checks := in.Registries().GetChecks()
	answered := map[string][]int{} // registry → indexes of its checks that answered
	for i, c := range checks {
		if c.GetFailedStep() == "" {
			answered[c.GetRegistry()] = append(answered[c.GetRegistry()], i)
		}
	}

	// Failed checks by what failed: the URL dialled, the step, the error.
	type group struct {
		checks []*nodediagv1.RegistryCheck
		class  int
		// fallback is the first endpoint answering after a delaying check.
		fallback *nodediagv1.RegistryCheck
		// implicit are the registries with no answer whose upstream was
		// not configured, so not checked.
		implicit []string
	}
	groups := map[string]*group{}
	var order []*group
	for i, c := range checks {
		if c.GetFailedStep() == "" || c.GetFailedStep() == "url" {
			continue
		}
		key := strings.Join([]string{c.GetUrl(), c.GetFailedStep(), c.GetError()}, "\x00")
		g := groups[key]
		if g == nil {
			g = &group{}
			groups[key] = g
			order = append(order, g)
		}
		g.checks = append(g.checks, c)
		ok := answered[c.GetRegistry()]
		class := regBlocking
		switch {
		case len(ok) > 0 && ok[0] < i:
			class = regUnused
		case len(ok) > 0:
			class = regDelaying
			if g.fallback == nil {
				g.fallback = checks[ok[0]]
			}
		default:
			if !regUpstreamConfigured(checks, c.GetRegistry()) {
				g.implicit = regAppendUnique(g.implicit, c.GetRegistry())
			}
		}
		g.class = max(g.class, class)
	}

	var out []*nodediagv1.Finding
	for _, g := range order {
		c := g.checks[0]
		role := regRole(g.checks)
		step := regStepNames[c.GetFailedStep()]
		quotes := regQuotes(g.checks)
		switch g.class {
		case regBlocking:
			if c.GetFailedStep() == "tls" && c.GetError() == regPlainHTTP {
				out = append(out, RegistryEndpointInvalid.Finding(Params{
					"detail": fmt.Sprintf("%s (%s) answers plain HTTP, but containerd talks HTTPS to it", c.GetEndpoint(), role),
				}, quotes...))
				continue
			}
			detail := fmt.Sprintf("%s (%s) fails at %s", c.GetEndpoint(), role, step)
			if len(g.implicit) > 0 {
				detail += fmt.Sprintf("; containerd then tries the upstream %s, which was not checked", strings.Join(regUpstreams(g.implicit), ", "))
			}
			f := RegistryUnreachable.Finding(Params{"detail": detail}, quotes...)
			if len(g.implicit) > 0 {
				f.Confidence = Medium
			}
			out = append(out, f)
		case regDelaying:
			out = append(out, RegistryMirrorUnreachable.Finding(Params{
				"endpoint": c.GetEndpoint(),
				"role":     role,
				"step":     step,
				"fallback": g.fallback.GetEndpoint(),
				"file":     c.GetLine().GetPath(),
			}, quotes...))
		}
	}
	return out
}

// regUpstreamConfigured says whether the registry's last resort is in its
// checks: a hosts.toml server, or a legacy mirror on the registry's own
// host (containerd then adds no upstream of its own).
func regUpstreamConfigured(checks []*nodediagv1.RegistryCheck, registry string) bool {
	for _, c := range checks {
		if c.GetRegistry() != registry {
			continue
		}
		if c.GetKind() == "server" {
			return true
		}
		if u, err := url.Parse(c.GetUrl()); err == nil && c.GetKind() == "mirrors" && u.Host == registry {
			return true
		}
	}
	return false
}

// regDefaultHosts is the certs.d directory containerd (1.7 and later) uses
// for every registry that has none of its own: not a registry.
const regDefaultHosts = "_default"

// regUpstreams are the hosts containerd falls back to for registries
// (remotes/docker DefaultHost: docker.io is served by registry-1.docker.io).
func regUpstreams(registries []string) []string {
	var out []string
	for _, r := range registries {
		switch r {
		case regDefaultHosts:
			out = append(out, "each registry's own host")
			continue
		case "docker.io":
			r = "registry-1.docker.io"
		}
		out = append(out, "https://"+r)
	}
	return out
}

// regRole says what the endpoint is to the registries it serves:
// "mirror of registry.k8s.io", "server of docker.io".
func regRole(checks []*nodediagv1.RegistryCheck) string {
	var regs []string
	server := true
	for _, c := range checks {
		regs = regAppendUnique(regs, c.GetRegistry())
		server = server && c.GetKind() == "server"
	}
	if server {
		return "server of " + strings.Join(regs, ", ")
	}
	return "mirror of " + strings.Join(regs, ", ")
}

// regQuotes are the configuration lines of the checks, then what the
// check of the endpoint met.
func regQuotes(checks []*nodediagv1.RegistryCheck) []*nodediagv1.Quote {
	var out []*nodediagv1.Quote
	seen := map[string]bool{}
	for _, c := range checks {
		if q := QuoteLine(c.GetLine()); q != nil && !seen[fmt.Sprint(q.Source, ":", q.Line)] {
			seen[fmt.Sprint(q.Source, ":", q.Line)] = true
			out = append(out, q)
		}
	}
	c := checks[0]
	return append(out, QuoteText("net:"+c.GetUrl(), c.GetFailedStep()+": "+c.GetError()))
}

func regAppendUnique(ss []string, s string) []string {
	for _, x := range ss {
		if x == s {
			return ss
		}
	}
	return append(ss, s)
}
