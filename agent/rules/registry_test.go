package rules

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

var rgClock = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

const (
	rgConfig = "/etc/containerd/config.toml"
	rgK8s    = "/etc/containerd/certs.d/registry.k8s.io/hosts.toml"
	rgDocker = "/etc/containerd/certs.d/docker.io/hosts.toml"
)

// rgCheck is a check as the registries probe reports it: kind, registry,
// the endpoint as written on line n of file, and what failed ("" when it
// answered).
func rgCheck(kind, registry, file string, n int32, text, endpoint, url, step, err string) *nodediagv1.RegistryCheck {
	c := &nodediagv1.RegistryCheck{
		Registry: registry, Endpoint: endpoint, Kind: kind, Url: url,
		Line:       &nodediagv1.SourceLine{Path: file, Line: n, Text: text},
		FailedStep: step, Error: err, DurationMs: 3,
	}
	if step != "url" && step != "dns" {
		c.Addresses = []string{"127.0.0.1"}
	}
	if step == "" {
		c.HttpStatus = 200
	}
	return c
}

const (
	rgRefused   = "dial tcp 127.0.0.1:5999: connect: connection refused"
	rgPlainHTTP = "http: server gave HTTP response to HTTPS client"
)

// Checks of the usual layouts.
var (
	// A legacy mirror that is down, for registry.k8s.io only.
	rgLegacyDown = rgCheck("mirrors", "registry.k8s.io", rgConfig, 4, `  endpoint = ["http://127.0.0.1:5999"]`, "http://127.0.0.1:5999", "http://127.0.0.1:5999/v2/", "tcp", rgRefused)
	// hosts.toml of registry.k8s.io: a [host] mirror (line 3) and the server (line 1).
	rgHostOK     = rgCheck("host", "registry.k8s.io", rgK8s, 3, `[host."http://127.0.0.1:5000"]`, "http://127.0.0.1:5000", "http://127.0.0.1:5000/v2/", "", "")
	rgHostDown   = rgCheck("host", "registry.k8s.io", rgK8s, 3, `[host."http://127.0.0.1:5999"]`, "http://127.0.0.1:5999", "http://127.0.0.1:5999/v2/", "tcp", rgRefused)
	rgServerOK   = rgCheck("server", "registry.k8s.io", rgK8s, 1, `server = "https://registry.k8s.io"`, "https://registry.k8s.io", "https://registry.k8s.io/v2/", "", "")
	rgServerDown = rgCheck("server", "registry.k8s.io", rgK8s, 1, `server = "https://registry.k8s.io"`, "https://registry.k8s.io", "https://registry.k8s.io/v2/", "tcp", "dial tcp 34.96.108.209:443: i/o timeout (no answer within 5s)")
)

type rgGot struct {
	ID, Severity, Confidence, Title string
	Quotes                          []string // source:line: excerpt
}

func rgSummary(fs []*nodediagv1.Finding) []rgGot {
	var out []rgGot
	for _, f := range fs {
		g := rgGot{ID: f.Id, Severity: f.Severity, Confidence: f.Confidence, Title: f.Title}
		for _, q := range f.Evidence {
			g.Quotes = append(g.Quotes, fmt.Sprintf("%s:%d: %s", q.Source, q.Line, q.Excerpt))
		}
		out = append(out, g)
	}
	return out
}

func rgInput(regs *nodediagv1.Registries) *Input {
	ev := &nodediagv1.Evidence{CollectedAt: timestamppb.New(rgClock)}
	if regs != nil {
		ev.Probes = append(ev.Probes, &nodediagv1.ProbeEvidence{Name: "registries", Status: "ok", Data: &nodediagv1.ProbeEvidence_Registries{Registries: regs}})
	}
	return newInput(ev, Context{})
}

func TestRegistryRules(t *testing.T) {
	for _, tc := range []struct {
		name   string
		checks []*nodediagv1.RegistryCheck
		want   []rgGot
	}{
		{name: "every endpoint answers", checks: []*nodediagv1.RegistryCheck{rgHostOK, rgServerOK}},
		{
			name:   "the only mirror is down: the upstream containerd falls back to was not checked",
			checks: []*nodediagv1.RegistryCheck{rgLegacyDown},
			want: []rgGot{{
				ID: "RegistryUnreachable", Severity: Error, Confidence: Medium,
				Title: "a registry cannot be reached: http://127.0.0.1:5999 (mirror of registry.k8s.io) fails at TCP connect; containerd then tries the upstream https://registry.k8s.io, which was not checked",
				Quotes: []string{
					`/etc/containerd/config.toml:4:   endpoint = ["http://127.0.0.1:5999"]`,
					"net:http://127.0.0.1:5999/v2/:0: tcp: " + rgRefused,
				},
			}},
		},
		{
			name: "a legacy mirror on the registry's own host replaces the upstream",
			checks: []*nodediagv1.RegistryCheck{
				rgCheck("mirrors", "127.0.0.1:5999", rgConfig, 4, `  endpoint = ["http://127.0.0.1:5999"]`, "http://127.0.0.1:5999", "http://127.0.0.1:5999/v2/", "tcp", rgRefused),
			},
			want: []rgGot{{
				ID: "RegistryUnreachable", Severity: Error, Confidence: High,
				Title: "a registry cannot be reached: http://127.0.0.1:5999 (mirror of 127.0.0.1:5999) fails at TCP connect",
				Quotes: []string{
					`/etc/containerd/config.toml:4:   endpoint = ["http://127.0.0.1:5999"]`,
					"net:http://127.0.0.1:5999/v2/:0: tcp: " + rgRefused,
				},
			}},
		},
		{
			name:   "air-gapped: the mirror answers, the upstream server does not: healthy",
			checks: []*nodediagv1.RegistryCheck{rgHostOK, rgServerDown},
		},
		{
			name:   "the mirror is down, the server answers: pulls wait for the mirror",
			checks: []*nodediagv1.RegistryCheck{rgHostDown, rgServerOK},
			want: []rgGot{{
				ID: "RegistryMirrorUnreachable", Severity: Warning, Confidence: High,
				Title: "registry endpoint http://127.0.0.1:5999 (mirror of registry.k8s.io) fails at TCP connect; pulls fall back to https://registry.k8s.io",
				Quotes: []string{
					rgK8s + `:3: [host."http://127.0.0.1:5999"]`,
					"net:http://127.0.0.1:5999/v2/:0: tcp: " + rgRefused,
				},
			}},
		},
		{
			name:   "mirror and server both down: one finding each, nothing left to fall back to",
			checks: []*nodediagv1.RegistryCheck{rgHostDown, rgServerDown},
			want: []rgGot{
				{
					ID: "RegistryUnreachable", Severity: Error, Confidence: High,
					Title: "a registry cannot be reached: http://127.0.0.1:5999 (mirror of registry.k8s.io) fails at TCP connect",
					Quotes: []string{
						rgK8s + `:3: [host."http://127.0.0.1:5999"]`,
						"net:http://127.0.0.1:5999/v2/:0: tcp: " + rgRefused,
					},
				},
				{
					ID: "RegistryUnreachable", Severity: Error, Confidence: High,
					Title: "a registry cannot be reached: https://registry.k8s.io (server of registry.k8s.io) fails at TCP connect",
					Quotes: []string{
						rgK8s + `:1: server = "https://registry.k8s.io"`,
						"net:https://registry.k8s.io/v2/:0: tcp: dial tcp 34.96.108.209:443: i/o timeout (no answer within 5s)",
					},
				},
			},
		},
		{
			name: "one mirror for two registries: one finding naming both, with both lines",
			checks: []*nodediagv1.RegistryCheck{
				rgLegacyDown,
				rgCheck("mirrors", "docker.io", rgConfig, 6, `  endpoint = ["127.0.0.1:5999"]`, "127.0.0.1:5999", "http://127.0.0.1:5999/v2/", "tcp", rgRefused),
			},
			want: []rgGot{{
				ID: "RegistryUnreachable", Severity: Error, Confidence: Medium,
				Title: "a registry cannot be reached: http://127.0.0.1:5999 (mirror of registry.k8s.io, docker.io) fails at TCP connect; containerd then tries the upstream https://registry.k8s.io, https://registry-1.docker.io, which was not checked",
				Quotes: []string{
					`/etc/containerd/config.toml:4:   endpoint = ["http://127.0.0.1:5999"]`,
					`/etc/containerd/config.toml:6:   endpoint = ["127.0.0.1:5999"]`,
					"net:http://127.0.0.1:5999/v2/:0: tcp: " + rgRefused,
				},
			}},
		},
		{
			name: "a host written without scheme for an http registry: https to plain HTTP is a malformed endpoint",
			checks: []*nodediagv1.RegistryCheck{
				rgCheck("host", "registry.k8s.io", rgK8s, 3, `[host."127.0.0.1:5000"]`, "127.0.0.1:5000", "https://127.0.0.1:5000/v2/", "tls", rgPlainHTTP),
				rgServerDown,
			},
			want: []rgGot{
				{
					ID: "RegistryEndpointInvalid", Severity: Error, Confidence: High,
					Title: "a registry or mirror endpoint is malformed: 127.0.0.1:5000 (mirror of registry.k8s.io) answers plain HTTP, but containerd talks HTTPS to it",
					Quotes: []string{
						rgK8s + `:3: [host."127.0.0.1:5000"]`,
						"net:https://127.0.0.1:5000/v2/:0: tls: " + rgPlainHTTP,
					},
				},
				{
					ID: "RegistryUnreachable", Severity: Error, Confidence: High,
					Title: "a registry cannot be reached: https://registry.k8s.io (server of registry.k8s.io) fails at TCP connect",
					Quotes: []string{
						rgK8s + `:1: server = "https://registry.k8s.io"`,
						"net:https://registry.k8s.io/v2/:0: tcp: dial tcp 34.96.108.209:443: i/o timeout (no answer within 5s)",
					},
				},
			},
		},
		{
			name: "a name that does not resolve, the only endpoint of docker.io",
			checks: []*nodediagv1.RegistryCheck{
				rgCheck("server", "docker.io", rgDocker, 1, `server = "https://mirror.corp.example"`, "https://mirror.corp.example", "https://mirror.corp.example/v2/", "dns", "lookup mirror.corp.example on 10.0.0.10:53: no such host"),
			},
			want: []rgGot{{
				ID: "RegistryUnreachable", Severity: Error, Confidence: High,
				Title: "a registry cannot be reached: https://mirror.corp.example (server of docker.io) fails at name resolution",
				Quotes: []string{
					rgDocker + `:1: server = "https://mirror.corp.example"`,
					"net:https://mirror.corp.example/v2/:0: dns: lookup mirror.corp.example on 10.0.0.10:53: no such host",
				},
			}},
		},
		{
			name: "not a registry at /v2/",
			checks: []*nodediagv1.RegistryCheck{
				rgCheck("server", "docker.io", rgDocker, 1, `server = "https://web.corp.example"`, "https://web.corp.example", "https://web.corp.example/v2/", "http", "unexpected status from GET request to https://web.corp.example/v2/: 404 Not Found"),
			},
			want: []rgGot{{
				ID: "RegistryUnreachable", Severity: Error, Confidence: High,
				Title: "a registry cannot be reached: https://web.corp.example (server of docker.io) fails at GET /v2/",
				Quotes: []string{
					rgDocker + `:1: server = "https://web.corp.example"`,
					"net:https://web.corp.example/v2/:0: http: unexpected status from GET request to https://web.corp.example/v2/: 404 Not Found",
				},
			}},
		},
		{
			name: "an endpoint that does not parse: the containerd rules' finding, not raised again",
			checks: []*nodediagv1.RegistryCheck{
				rgCheck("mirrors", "127.0.0.1:5001", rgConfig, 4, `  endpoint = ["://127.0.0.1:5000"]`, "://127.0.0.1:5000", "://127.0.0.1:5000", "url", `parse "://127.0.0.1:5000": missing protocol scheme`),
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := rgSummary(registryReachabilityRule(rgInput(&nodediagv1.Registries{Checks: tc.checks})))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
		})
	}
}

// --offline, or no registries probe: nothing is judged.
func TestRegistryRulesNoChecks(t *testing.T) {
	for name, regs := range map[string]*nodediagv1.Registries{
		"offline":   {Offline: true},
		"no probe":  nil,
		"no checks": {},
	} {
		if fs := registryReachabilityRule(rgInput(regs)); len(fs) != 0 {
			t.Errorf("%s: %v", name, rgSummary(fs))
		}
	}
}

// The log line of a failed pull joins the finding of the one endpoint that
// is down; with two endpoints down, which one it is about is not known and
// it stays a finding of its own.
func TestRegistryFindingTakesThePullError(t *testing.T) {
	e, err := NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	pull := `[ERROR ImagePull]: failed to pull image registry.k8s.io/kube-apiserver:v1.30.0: output: time="2024-05-01T11:58:00Z" level=fatal msg="pulling image: rpc error: code = Unavailable desc = failed to pull and unpack image \"registry.k8s.io/kube-apiserver:v1.30.0\": failed to resolve reference \"registry.k8s.io/kube-apiserver:v1.30.0\": failed to do request: Head \"http://127.0.0.1:5999/v2/kube-apiserver/manifests/v1.30.0?ns=registry.k8s.io\": dial tcp 127.0.0.1:5999: connect: connection refused"`
	evidence := func(checks ...*nodediagv1.RegistryCheck) *nodediagv1.Evidence {
		src := &nodediagv1.LogExcerpt{Source: "/var/log/cloud-init-output.log", Kind: "cloud-init-output", Lines: []*nodediagv1.LogLine{{N: 41, Text: pull}}}
		return &nodediagv1.Evidence{CollectedAt: timestamppb.New(rgClock), Probes: []*nodediagv1.ProbeEvidence{
			{Name: "logs", Status: "ok", Data: &nodediagv1.ProbeEvidence_Logs{Logs: &nodediagv1.Logs{Sources: []*nodediagv1.LogExcerpt{src}}}},
			{Name: "registries", Status: "ok", Data: &nodediagv1.ProbeEvidence_Registries{Registries: &nodediagv1.Registries{Checks: checks}}},
		}}
	}
	unreachable := func(fs []*nodediagv1.Finding) []rgGot {
		var out []rgGot
		for _, g := range rgSummary(fs) {
			if g.ID == "RegistryUnreachable" {
				g.Title = ""
				out = append(out, g)
			}
		}
		return out
	}

	res := e.Analyze(evidence(rgHostDown), Context{Now: rgClock})
	want := []rgGot{{ID: "RegistryUnreachable", Severity: Error, Confidence: Medium, Quotes: []string{
		rgK8s + `:3: [host."http://127.0.0.1:5999"]`,
		"net:http://127.0.0.1:5999/v2/:0: tcp: " + rgRefused,
		"/var/log/cloud-init-output.log:41: " + pull,
	}}}
	if diff := cmp.Diff(want, unreachable(res.Findings)); diff != "" {
		t.Errorf("one endpoint down (-want +got):\n%s", diff)
	}

	res = e.Analyze(evidence(rgHostDown, rgServerDown), Context{Now: rgClock})
	got := unreachable(res.Findings)
	withLog := 0
	for _, g := range got {
		for _, q := range g.Quotes {
			if q == "/var/log/cloud-init-output.log:41: "+pull {
				withLog++
				if len(g.Quotes) != 1 {
					t.Errorf("the log line joined a finding of a check: %+v", g)
				}
			}
		}
	}
	if len(got) != 3 || withLog != 1 {
		t.Errorf("two endpoints down: want two findings of the checks and the log line's own, got %+v", got)
	}
}

// containerd's fallbacks: docker.io is served by registry-1.docker.io, and
// certs.d/_default stands for every registry, not a host named _default.
func TestRegUpstreams(t *testing.T) {
	got := regUpstreams([]string{"docker.io", "registry.k8s.io", "_default"})
	want := []string{"https://registry-1.docker.io", "https://registry.k8s.io", "each registry's own host"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("regUpstreams (-want +got):\n%s", diff)
	}
}
