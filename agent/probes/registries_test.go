package probes

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/host/hosttest"
	"github.com/nodediag/nodediag/agent/probe"
	"github.com/nodediag/nodediag/internal/testenv"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

func TestRegTargetOf(t *testing.T) {
	hostsLine := &nodediagv1.SourceLine{Path: "/etc/containerd/certs.d/registry.k8s.io/hosts.toml", Line: 3}
	for _, tc := range []struct {
		name string
		ep   *nodediagv1.RegistryEndpoint
		// ping is the URL of GET /v2/; dialled what the check records.
		ping, dialled string
		skipVerify    bool
		ca            []string
		err           string
	}{
		{
			name: "legacy mirror without scheme on loopback: http",
			ep:   &nodediagv1.RegistryEndpoint{Url: "127.0.0.1:5000", Kind: "mirrors"},
			ping: "http://127.0.0.1:5000/v2/", dialled: "http://127.0.0.1:5000",
		},
		{
			name: "legacy mirror localhost: http",
			ep:   &nodediagv1.RegistryEndpoint{Url: "localhost:5000", Kind: "mirrors"},
			ping: "http://localhost:5000/v2/", dialled: "http://localhost:5000",
		},
		{
			name: "legacy mirror [::1]",
			ep:   &nodediagv1.RegistryEndpoint{Url: "[::1]:5000", Kind: "mirrors"},
			ping: "http://[::1]:5000/v2/", dialled: "http://[::1]:5000",
		},
		{
			name: "legacy mirror without scheme elsewhere: https",
			ep:   &nodediagv1.RegistryEndpoint{Url: "mirror.example:5000", Kind: "mirrors"},
			ping: "https://mirror.example:5000/v2/", dialled: "https://mirror.example:5000",
		},
		{
			name: "legacy mirror with a path: the path is the API root",
			ep:   &nodediagv1.RegistryEndpoint{Url: "https://mirror.example/dkp", Kind: "mirrors"},
			ping: "https://mirror.example/dkp/", dialled: "https://mirror.example/dkp",
		},
		{
			name:    "legacy mirror with an empty scheme (DKP): url.Parse's error",
			ep:      &nodediagv1.RegistryEndpoint{Url: "://127.0.0.1:5000", Kind: "mirrors"},
			dialled: "://127.0.0.1:5000",
			err:     `parse "://127.0.0.1:5000": missing protocol scheme`,
		},
		{
			name:    "legacy mirror with another scheme",
			ep:      &nodediagv1.RegistryEndpoint{Url: "ftp://mirror.example", Kind: "mirrors"},
			dialled: "ftp://mirror.example",
			err:     `unsupported protocol scheme "ftp"`,
		},
		{
			name:    "legacy mirror without a host name",
			ep:      &nodediagv1.RegistryEndpoint{Url: ":5000", Kind: "mirrors"},
			dialled: "https://:5000",
			err:     `no host name in "https://:5000"`,
		},
		{
			name: "legacy mirror with the registry's TLS settings",
			ep:   &nodediagv1.RegistryEndpoint{Url: "https://mirror.example", Kind: "mirrors", SkipVerify: true, Ca: []string{"/etc/pki/mirror.pem", "relative.pem"}},
			ping: "https://mirror.example/v2/", dialled: "https://mirror.example",
			skipVerify: true, ca: []string{"/etc/pki/mirror.pem", "/relative.pem"},
		},
		{
			name: "hosts.toml host without scheme: https even on loopback",
			ep:   &nodediagv1.RegistryEndpoint{Url: "127.0.0.1:5000", Kind: "host", Line: hostsLine},
			ping: "https://127.0.0.1:5000/v2/", dialled: "https://127.0.0.1:5000",
		},
		{
			name: "hosts.toml host http",
			ep:   &nodediagv1.RegistryEndpoint{Url: "http://127.0.0.1:5000", Kind: "host", PlainHttp: true, Line: hostsLine},
			ping: "http://127.0.0.1:5000/v2/", dialled: "http://127.0.0.1:5000",
		},
		{
			name: "hosts.toml host with a path: /v2 appended",
			ep:   &nodediagv1.RegistryEndpoint{Url: "https://mirror.example/dkp/", Kind: "host", Line: hostsLine},
			ping: "https://mirror.example/dkp/v2/", dialled: "https://mirror.example/dkp/",
		},
		{
			name: "hosts.toml server ending in /v2",
			ep:   &nodediagv1.RegistryEndpoint{Url: "https://mirror.example/v2", Kind: "server", Line: hostsLine},
			ping: "https://mirror.example/v2/", dialled: "https://mirror.example/v2",
		},
		{
			name: "hosts.toml host with a doubled scheme: a host named https",
			ep:   &nodediagv1.RegistryEndpoint{Url: "https://https://127.0.0.1:5000", Kind: "host", Line: hostsLine},
			ping: "https://https:/127.0.0.1:5000/v2/", dialled: "https://https://127.0.0.1:5000",
		},
		{
			name: "hosts.toml relative ca: from the file's directory",
			ep:   &nodediagv1.RegistryEndpoint{Url: "https://mirror.example", Kind: "host", Line: hostsLine, Ca: []string{"ca.crt", "/etc/pki/other.pem"}},
			ping: "https://mirror.example/v2/", dialled: "https://mirror.example",
			ca: []string{"/etc/containerd/certs.d/registry.k8s.io/ca.crt", "/etc/pki/other.pem"},
		},
		{
			name: "user information, as the evidence holds it (redacted): dropped",
			ep:   &nodediagv1.RegistryEndpoint{Url: "https://robot:[REDACTED]@mirror.example:5000/dkp", Kind: "mirrors"},
			ping: "https://mirror.example:5000/dkp/", dialled: "https://mirror.example:5000/dkp",
		},
		{
			name: "user information without scheme",
			ep:   &nodediagv1.RegistryEndpoint{Url: "robot:pw@127.0.0.1:5000", Kind: "mirrors"},
			ping: "http://127.0.0.1:5000/v2/", dialled: "http://127.0.0.1:5000",
		},
		{
			name: "user information is neither kept nor sent",
			ep:   &nodediagv1.RegistryEndpoint{Url: "https://robot:secret@mirror.example", Kind: "host", Line: hostsLine},
			ping: "https://mirror.example/v2/", dialled: "https://mirror.example",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tgt, dialled, err := regTargetOf(tc.ep)
			if dialled != tc.dialled {
				t.Errorf("dialled = %q, want %q", dialled, tc.dialled)
			}
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := tgt.ping(); got != tc.ping {
				t.Errorf("ping = %q, want %q", got, tc.ping)
			}
			if tgt.skipVerify != tc.skipVerify {
				t.Errorf("skipVerify = %v", tgt.skipVerify)
			}
			if diff := cmp.Diff(tc.ca, tgt.ca); diff != "" {
				t.Errorf("ca (-want +got):\n%s", diff)
			}
		})
	}
}

// regListener serves raw TCP on loopback with handle and counts the
// connections it accepts. handle's connection is closed when it returns;
// done is closed when the test ends.
func regListener(t *testing.T, handle func(c net.Conn, done <-chan struct{})) (addr string, accepts *atomic.Int64) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done); l.Close() })
	accepts = &atomic.Int64{}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepts.Add(1)
			go func() {
				defer c.Close()
				handle(c, done)
			}()
		}
	}()
	return l.Addr().String(), accepts
}

// Listeners that are not registries.
var (
	// regGarbage answers what an SSH server says, once it has been sent
	// something (answering first makes net/http's error text depend on
	// whether the request was written yet).
	regGarbage = func(c net.Conn, done <-chan struct{}) {
		c.Read(make([]byte, 4096))
		io.WriteString(c, "SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n")
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		io.Copy(io.Discard, c)
	}
	// regHung accepts and never answers.
	regHung = func(c net.Conn, done <-chan struct{}) { <-done }
)

// regHTTP serves handler over plain HTTP on loopback and counts requests.
func regHTTP(t *testing.T, handler http.HandlerFunc) (url string, requests *atomic.Int64) {
	t.Helper()
	requests = &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if r.Header.Get("Authorization") != "" {
			t.Errorf("request carries credentials: %q", r.Header.Get("Authorization"))
		}
		handler(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, requests
}

// regCheckTree is a node with the CA files the checks read: the right CA in
// a hosts.toml directory, another CA, a file that holds no certificate, and,
// with bundle, a CA bundle of the distribution holding the right CA.
func regCheckTree(t *testing.T, right, wrong *testenv.CA, bundle bool) *host.Host {
	files := map[string]string{
		"etc/containerd/certs.d/127.0.0.1/ca.crt": string(right.PEM),
		"etc/pki/wrong-ca.pem":                    string(wrong.PEM),
		"etc/pki/not-a-cert.pem":                  "hello\n",
	}
	if bundle {
		files["etc/pki/tls/certs/ca-bundle.crt"] = string(wrong.PEM) + string(right.PEM)
	}
	return hosttest.Tree(t, files)
}

// The checks against a real docker-registry (plain, with auth, with TLS)
// and against listeners that are not registries. Everything is on
// 127.0.0.1; names are resolved by a stub that answers NXDOMAIN.
func TestRegistryChecks(t *testing.T) {
	testenv.RequireBinary(t, "docker-registry", "docker-registry")
	rightCA, wrongCA := testenv.NewCA(t, "nodediag registry CA"), testenv.NewCA(t, "another CA")
	plain := testenv.StartRegistry(t, testenv.RegistryOptions{})
	auth := testenv.StartRegistry(t, testenv.RegistryOptions{Auth: true})
	secure := testenv.StartRegistry(t, testenv.RegistryOptions{TLS: rightCA})
	closed := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	garbage, _ := regListener(t, regGarbage)
	hung, _ := regListener(t, regHung)
	elsewhere, elsewhereAccepts := regListener(t, regGarbage)
	notFound, _ := regHTTP(t, http.NotFound)
	redirect, _ := regHTTP(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://"+elsewhere+"/v2/", http.StatusMovedPermanently)
	})
	bare401, _ := regHTTP(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusUnauthorized) })
	resolver, queries := testenv.NXDomainResolver(t)

	const step = 2 * time.Second
	h, hBundle := regCheckTree(t, rightCA, wrongCA, false), regCheckTree(t, rightCA, wrongCA, true)
	hostsLine := &nodediagv1.SourceLine{Path: "/etc/containerd/certs.d/127.0.0.1/hosts.toml", Line: 2}
	mirror := func(u string) *nodediagv1.RegistryEndpoint {
		return &nodediagv1.RegistryEndpoint{Registry: "registry.k8s.io", Url: u, Kind: "mirrors"}
	}
	hostEp := func(u string, skipVerify bool, ca ...string) *nodediagv1.RegistryEndpoint {
		return &nodediagv1.RegistryEndpoint{Registry: "registry.k8s.io", Url: u, Kind: "host", Line: hostsLine, SkipVerify: skipVerify, Ca: ca}
	}
	for _, tc := range []struct {
		name string
		ep   *nodediagv1.RegistryEndpoint
		// A check that passes has no step; errRE matches the whole error.
		step, errRE string
		// hangs: the endpoint never answers, so the check takes the step
		// bound; the other cases get a bound they never come near, so that
		// a loaded machine cannot fail them.
		hangs     bool
		status    int32
		addresses []string
		// bundle: the node's CA bundle holds the registry's CA.
		bundle bool
	}{
		{name: "healthy registry", ep: mirror(plain.URL), status: 200, addresses: []string{"127.0.0.1"}},
		{name: "healthy registry, no scheme: http on loopback", ep: mirror(plain.Addr), status: 200, addresses: []string{"127.0.0.1"}},
		{name: "registry that wants a login: 401 with a challenge", ep: mirror(auth.URL), status: 401, addresses: []string{"127.0.0.1"}},
		{
			name: "closed port", ep: mirror("http://" + closed),
			step: "tcp", errRE: q("dial tcp " + closed + ": connect: connection refused"), addresses: []string{"127.0.0.1"},
		},
		{
			name: "https to a plain-http registry (hosts.toml host without scheme)", ep: hostEp(plain.Addr, false),
			step: "tls", errRE: q("http: server gave HTTP response to HTTPS client"), addresses: []string{"127.0.0.1"},
		},
		{name: "TLS with the configured CA", ep: hostEp(secure.URL, false, "ca.crt"), status: 200, addresses: []string{"127.0.0.1"}},
		{name: "TLS with the node's CA bundle", ep: hostEp(secure.URL, false), bundle: true, status: 200, addresses: []string{"127.0.0.1"}},
		{
			name: "TLS with no CA for the registry", ep: hostEp(secure.URL, false),
			step: "tls", errRE: q("tls: failed to verify certificate: x509: certificate signed by unknown authority"), addresses: []string{"127.0.0.1"},
		},
		{
			name: "TLS with the wrong CA", ep: hostEp(secure.URL, false, "/etc/pki/wrong-ca.pem"), bundle: false,
			step: "tls", errRE: q("tls: failed to verify certificate: x509: certificate signed by unknown authority"), addresses: []string{"127.0.0.1"},
		},
		{name: "TLS with skip_verify and the wrong CA", ep: hostEp(secure.URL, true, "/etc/pki/wrong-ca.pem"), status: 200, addresses: []string{"127.0.0.1"}},
		{
			name: "hosts.toml URL ending in /: the registry redirects //v2/ to /v2/ on its own host", ep: hostEp(plain.URL+"/", false),
			status: 301, addresses: []string{"127.0.0.1"},
		},
		{
			name: "TLS with a CA file that is missing", ep: hostEp(secure.URL, false, "missing.crt"),
			step: "tls", errRE: q(`unable to read CA cert "/etc/containerd/certs.d/127.0.0.1/missing.crt": open /etc/containerd/certs.d/127.0.0.1/missing.crt: no such file or directory`), addresses: []string{"127.0.0.1"},
		},
		{
			name: "TLS with a CA file that holds no certificate", ep: hostEp(secure.URL, false, "/etc/pki/not-a-cert.pem"),
			step: "tls", errRE: q(`unable to load CA cert "/etc/pki/not-a-cert.pem"`), addresses: []string{"127.0.0.1"},
		},
		{
			name: "listener that answers garbage", ep: mirror("http://" + garbage),
			step: "http", errRE: q(`Get "http://` + garbage + `/v2/": net/http: HTTP/1.x transport connection broken: malformed HTTP status code "Debian-2"`), addresses: []string{"127.0.0.1"},
		},
		{
			name: "https to a listener that answers garbage", ep: mirror("https://" + garbage),
			step: "tls", errRE: q("tls: first record does not look like a TLS handshake"), addresses: []string{"127.0.0.1"},
		},
		{
			name: "listener that never answers: http", ep: mirror("http://" + hung), hangs: true,
			step: "http", errRE: q(`Get "http://`+hung+`/v2/": context deadline exceeded (no answer within `) + step.String() + `\)`, addresses: []string{"127.0.0.1"},
		},
		{
			name: "listener that never answers: tls", ep: mirror("https://" + hung), hangs: true,
			step: "tls", errRE: q(`TLS handshake: context deadline exceeded (no answer within `) + step.String() + `\)`, addresses: []string{"127.0.0.1"},
		},
		{
			name: "not a registry: 404", ep: mirror(notFound),
			step: "http", errRE: q("unexpected status from GET request to " + notFound + "/v2/: 404 Not Found"), status: 404, addresses: []string{"127.0.0.1"},
		},
		{
			name: "redirect: reported, not followed", ep: mirror(redirect),
			step: "http", errRE: q("unexpected status from GET request to " + redirect + "/v2/: 301 Moved Permanently (redirect to http://" + elsewhere + "/v2/, not followed)"), status: 301, addresses: []string{"127.0.0.1"},
		},
		{
			name: "401 without a registry's headers", ep: mirror(bare401),
			step: "http", errRE: q("unexpected status from GET request to " + bare401 + "/v2/: 401 Unauthorized (no WWW-Authenticate or Docker-Distribution-API-Version header: not a registry)"), status: 401, addresses: []string{"127.0.0.1"},
		},
		{
			name: "unusable URL", ep: mirror("://127.0.0.1:5000"),
			step: "url", errRE: q(`parse "://127.0.0.1:5000": missing protocol scheme`),
		},
		{
			name: "name that does not resolve", ep: mirror("https://registry.nodediag-test.invalid:5000"),
			step: "dns", errRE: `lookup registry\.nodediag-test\.invalid on \S+: no such host`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			node := h
			if tc.bundle {
				node = hBundle
			}
			bound := 30 * time.Second
			if tc.hangs {
				bound = step
			}
			c := &regChecker{net: host.LocalNetwork{Resolver: resolver}, readFile: node.ReadFile, step: bound}
			got := c.checkAll(context.Background(), []*nodediagv1.RegistryEndpoint{tc.ep})[0]
			t.Logf("%dms %s %q", got.DurationMs, got.FailedStep, got.Error)
			if got.FailedStep != tc.step {
				t.Errorf("failed_step = %q (%s), want %q", got.FailedStep, got.Error, tc.step)
			}
			if tc.errRE == "" && got.Error != "" {
				t.Errorf("error = %q, want none", got.Error)
			}
			if tc.errRE != "" && !regexp.MustCompile("^"+tc.errRE+"$").MatchString(got.Error) {
				t.Errorf("error = %q, want %s", got.Error, tc.errRE)
			}
			if got.HttpStatus != tc.status {
				t.Errorf("http_status = %d, want %d", got.HttpStatus, tc.status)
			}
			if diff := cmp.Diff(tc.addresses, got.Addresses); diff != "" {
				t.Errorf("addresses (-want +got):\n%s", diff)
			}
			if got.Registry != "registry.k8s.io" || got.Endpoint != tc.ep.Url {
				t.Errorf("registry, endpoint = %q, %q", got.Registry, got.Endpoint)
			}
		})
	}
	t.Cleanup(func() {
		if n := elsewhereAccepts.Load(); n != 0 {
			t.Errorf("the redirect was followed: %d connections to its target", n)
		}
		if queries.Load() == 0 {
			t.Error("the DNS stub got no query")
		}
	})
}

func q(s string) string { return regexp.QuoteMeta(s) }

// Endpoints with the same URL and TLS settings (one mirror for several
// registries) are checked with one request; each keeps its registry and
// line. A different TLS setting is another check.
func TestRegistryChecksDedupe(t *testing.T) {
	u, requests := regHTTP(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
	})
	eps := []*nodediagv1.RegistryEndpoint{
		{Registry: "docker.io", Url: u, Kind: "mirrors", Line: &nodediagv1.SourceLine{Path: "/etc/containerd/config.toml", Line: 10}},
		{Registry: "registry.k8s.io", Url: u, Kind: "host", Line: &nodediagv1.SourceLine{Path: "/etc/containerd/certs.d/registry.k8s.io/hosts.toml", Line: 2}},
		{Registry: "quay.io", Url: u, Kind: "mirrors", Line: &nodediagv1.SourceLine{Path: "/etc/containerd/config.toml", Line: 12}},
		{Registry: "ghcr.io", Url: u, Kind: "mirrors", SkipVerify: true, Line: &nodediagv1.SourceLine{Path: "/etc/containerd/config.toml", Line: 14}},
	}
	c := &regChecker{net: host.LocalNetwork{}, readFile: hosttest.Tree(t, nil).ReadFile, step: 5 * time.Second}
	got := c.checkAll(context.Background(), eps)
	if n := requests.Load(); n != 2 {
		t.Errorf("requests = %d, want 2 (one per distinct URL and TLS setting)", n)
	}
	for i, rc := range got {
		if rc.Registry != eps[i].Registry || rc.Line != eps[i].Line || rc.FailedStep != "" || rc.HttpStatus != 200 || rc.Url != u+"/v2/" {
			t.Errorf("check %d = %v", i, rc)
		}
	}
}

// mountProc makes h's root live: a procfs at its /proc, unmounted when the
// test ends.
func mountProc(t *testing.T, h *host.Host) {
	t.Helper()
	testenv.RequireRoot(t, "mounting a procfs into the test tree makes it a live node")
	procDir := filepath.Join(h.Root, "proc")
	hosttest.Write(t, h.Root, map[string]string{"proc/": ""})
	if err := unix.Mount("proc", procDir, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		t.Fatalf("mount proc on %s: %v", procDir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(procDir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", procDir, err)
		}
	})
	if !h.Live() {
		t.Fatal("the tree is not live with a procfs at its /proc")
	}
}

const regConfigTOML = `version = 2
[plugins."io.containerd.grpc.v1.cri".registry]
  config_path = "/etc/containerd/certs.d"
`

// The probe end to end on a live node: the endpoints of the node's
// containerd configuration (hosts.toml files under config_path), checked
// against a real registry and a closed port.
func TestRegistriesProbe(t *testing.T) {
	plain := testenv.StartRegistry(t, testenv.RegistryOptions{})
	closed := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	k8sHosts := "server = \"http://" + closed + "\"\n\n[host.\"" + plain.URL + "\"]\n  capabilities = [\"pull\", \"resolve\"]\n"
	h := hosttest.Tree(t, map[string]string{
		"etc/containerd/config.toml":                        regConfigTOML,
		"etc/containerd/certs.d/registry.k8s.io/hosts.toml": k8sHosts,
		// containerd rejects this file (1.x: no [host] table): not checked.
		"etc/containerd/certs.d/docker.io/hosts.toml": "server = \"http://" + closed + "\"\n",
	})
	mountProc(t, h)

	pe := probe.RunAll(context.Background(), h, []probe.Probe{registriesProbe{}}).Probes[0]
	if pe.Status != probe.StatusOK {
		t.Fatalf("status = %s (%s)", pe.Status, pe.Error)
	}
	t.Logf("probe: %dms", pe.DurationMs)
	checks := pe.GetRegistries().GetChecks()
	for _, c := range checks {
		t.Logf("%s %s: step %q %q in %dms", c.Registry, c.Url, c.FailedStep, c.Error, c.DurationMs)
		c.DurationMs = 0
	}
	hostsPath := "/etc/containerd/certs.d/registry.k8s.io/hosts.toml"
	want := []*nodediagv1.RegistryCheck{
		{
			Registry: "registry.k8s.io", Endpoint: plain.URL, Kind: "host",
			Line: &nodediagv1.SourceLine{Path: hostsPath, Line: 3, Text: `[host."` + plain.URL + `"]`},
			Url:  plain.URL + "/v2/", Addresses: []string{"127.0.0.1"}, HttpStatus: 200,
		},
		{
			Registry: "registry.k8s.io", Endpoint: "http://" + closed, Kind: "server",
			Line: &nodediagv1.SourceLine{Path: hostsPath, Line: 1, Text: `server = "http://` + closed + `"`},
			Url:  "http://" + closed + "/v2/", Addresses: []string{"127.0.0.1"},
			FailedStep: "tcp", Error: "dial tcp " + closed + ": connect: connection refused",
		},
	}
	if diff := cmp.Diff(want, checks, protocmp.Transform()); diff != "" {
		t.Errorf("checks (-want +got):\n%s", diff)
	}
}

// The legacy registry.mirrors form, with the DKP endpoint that has lost its
// scheme: the "url" step fails with containerd's own parse error, and the
// good mirror is still checked.
func TestRegistriesProbeLegacyMirrors(t *testing.T) {
	plain := testenv.StartRegistry(t, testenv.RegistryOptions{})
	h := hosttest.Tree(t, map[string]string{
		"etc/containerd/config.toml": `version = 2
[plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]
  endpoint = ["` + plain.Addr + `"]
[plugins."io.containerd.grpc.v1.cri".registry.mirrors."127.0.0.1:5001"]
  endpoint = ["://127.0.0.1:5000"]
`,
	})
	mountProc(t, h)
	pe := probe.RunAll(context.Background(), h, []probe.Probe{registriesProbe{}}).Probes[0]
	if pe.Status != probe.StatusOK {
		t.Fatalf("status = %s (%s)", pe.Status, pe.Error)
	}
	var got []string
	for _, c := range pe.GetRegistries().GetChecks() {
		got = append(got, fmt.Sprintf("%s %s line %d: %s %q %d", c.Registry, c.Url, c.GetLine().GetLine(), c.FailedStep, c.Error, c.HttpStatus))
	}
	want := []string{
		fmt.Sprintf(`docker.io http://%s/v2/ line 3:  "" 200`, plain.Addr),
		`127.0.0.1:5001 ://127.0.0.1:5000 line 5: url "parse \"://127.0.0.1:5000\": missing protocol scheme" 0`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("checks (-want +got):\n%s", diff)
	}
}

// --offline: nothing is tried, and the evidence says so. The same node
// without --offline connects, so the listener would have seen the checks.
func TestRegistriesProbeOffline(t *testing.T) {
	addr, accepts := regListener(t, regGarbage)
	h := hosttest.Tree(t, map[string]string{
		"etc/containerd/config.toml": `version = 2
[plugins."io.containerd.grpc.v1.cri".registry.mirrors."registry.k8s.io"]
  endpoint = ["http://` + addr + `", "https://` + addr + `"]
`,
	})
	mountProc(t, h)

	h.Net = host.NoNetwork{}
	pe := probe.RunAll(context.Background(), h, []probe.Probe{registriesProbe{}}).Probes[0]
	if pe.Status != probe.StatusSkipped || !strings.Contains(pe.Error, "--offline") {
		t.Errorf("status = %s (%s), want skipped for --offline", pe.Status, pe.Error)
	}
	want := &nodediagv1.Registries{Offline: true}
	if diff := cmp.Diff(want, pe.GetRegistries(), protocmp.Transform()); diff != "" {
		t.Errorf("registries (-want +got):\n%s", diff)
	}
	if n := accepts.Load(); n != 0 {
		t.Fatalf("offline: %d connections", n)
	}

	h.Net = nil
	pe = probe.RunAll(context.Background(), h, []probe.Probe{registriesProbe{}}).Probes[0]
	if n := accepts.Load(); n != 2 || len(pe.GetRegistries().GetChecks()) != 2 {
		t.Errorf("online: %d connections, %d checks; want 2 and 2", n, len(pe.GetRegistries().GetChecks()))
	}
}

// A copy of a host is never checked from here: the analyst's network is not
// the node's. A live node without any configured endpoint is skipped too.
func TestRegistriesProbeSkipped(t *testing.T) {
	addr, accepts := regListener(t, regGarbage)
	cfg := map[string]string{
		"etc/containerd/config.toml": `version = 2
[plugins."io.containerd.grpc.v1.cri".registry.mirrors."registry.k8s.io"]
  endpoint = ["http://` + addr + `"]
`,
	}
	pe := probe.RunAll(context.Background(), hosttest.Tree(t, cfg), []probe.Probe{registriesProbe{}}).Probes[0]
	if pe.Status != probe.StatusSkipped || pe.Data != nil || !strings.Contains(pe.Error, "copy of a host") {
		t.Errorf("copy: status = %s (%s), data %v", pe.Status, pe.Error, pe.Data)
	}
	if n := accepts.Load(); n != 0 {
		t.Errorf("copy: %d connections", n)
	}

	for name, files := range map[string]map[string]string{
		"no config.toml": {"etc/hostname": "node-1\n"},
		"no registry":    {"etc/containerd/config.toml": "version = 2\n"},
		"broken TOML":    {"etc/containerd/config.toml": "version = 2\n[plugins\n"},
		"rejected hosts": {"etc/containerd/config.toml": regConfigTOML, "etc/containerd/certs.d/docker.io/hosts.toml": "server = \"http://" + addr + "\"\n"},
	} {
		t.Run(name, func(t *testing.T) {
			h := hosttest.Tree(t, files)
			mountProc(t, h)
			pe := probe.RunAll(context.Background(), h, []probe.Probe{registriesProbe{}}).Probes[0]
			if pe.Status != probe.StatusSkipped || pe.Data != nil {
				t.Errorf("status = %s (%s), data %v; want skipped", pe.Status, pe.Error, pe.Data)
			}
			t.Log(pe.Error)
		})
	}
	if n := accepts.Load(); n != 0 {
		t.Errorf("%d connections", n)
	}
}

// FuzzRegTargetOf: any endpoint as written gives a target or an error,
// never a panic; a target is http(s), pings the API root and carries no
// user information.
func FuzzRegTargetOf(f *testing.F) {
	for _, s := range []string{"127.0.0.1:5000", "://127.0.0.1:5000", ":///v2/reg/dkp", "https://https://x", "https://u:p@m.example/dkp/", "[::1]:5000", "ftp://x", ":5000", "https://[::1", "http://%zz"} {
		for _, kind := range []string{"mirrors", "host", "server"} {
			f.Add(s, kind, false)
		}
	}
	f.Fuzz(func(t *testing.T, raw, kind string, plain bool) {
		tgt, _, err := regTargetOf(&nodediagv1.RegistryEndpoint{Url: raw, Kind: kind, PlainHttp: plain, Line: &nodediagv1.SourceLine{Path: "/etc/containerd/certs.d/x/hosts.toml"}})
		if err != nil {
			return
		}
		ping := tgt.ping()
		if !strings.HasPrefix(ping, "http://") && !strings.HasPrefix(ping, "https://") || !strings.HasSuffix(ping, "/") {
			t.Errorf("ping %q of %q", ping, raw)
		}
		if tgt.base.User != nil || tgt.base.Hostname() == "" {
			t.Errorf("target %v of %q", tgt.base, raw)
		}
	})
}

// A redirect's target is quoted without what can carry a credential.
func TestRegRedirectTarget(t *testing.T) {
	tests := map[string]string{
		"https://blob.example/v2/x?X-Amz-Signature=abc123&X-Amz-Credential=AKIA": "https://blob.example/v2/x",
		"https://user:pw@mirror.example/v2/#frag":                                "https://mirror.example/v2/",
		"/v2/":        "/v2/",
		"http://[::1": "an unparsable location",
	}
	for loc, want := range tests {
		if got := regRedirectTarget(loc); got != want {
			t.Errorf("regRedirectTarget(%q) = %q, want %q", loc, got, want)
		}
	}
}
