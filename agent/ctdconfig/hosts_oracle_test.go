//go:build linux

package ctdconfig

// A differential test of ParseHosts against containerd 2.x's own reader of
// hosts.toml (github.com/containerd/containerd/v2, core/remotes/docker/
// config), used as an oracle in this test only: the agent never imports
// containerd (go list -deps ./cmd/nodediag-agent shows no containerd/v2).
//
// The oracle's only exported entry is ConfigureHosts: it is given the
// directory of a hosts.toml and returns the []docker.RegistryHost containerd
// pulls a registry from (scheme, host, API path, capabilities, headers and
// an HTTP client per host). containerd reads the TLS files a host names
// (ca, client) while it builds that client, and fails on the first that
// does not exist: the oracle runs in a child process (one for all files)
// chrooted into an empty directory (as root, or as root of a user namespace
// of its own), where every file containerd asks for is created on demand (a
// certificate whose common name is the path it was read from, with one
// shared key), so that the CA pool and client certificates of each host say
// which files containerd read, relative paths resolved as on a node
// (/etc/containerd/certs.d/<registry>/); they are removed before the next
// file. A file containerd rejects is not an
// error of ConfigureHosts: it logs "failed to decode .../hosts.toml" and
// falls back to the registry itself; the log is captured to tell.
//
// The project's side is its evidence (ParseHosts: endpoints in order, kind,
// capabilities, skip_verify, ca as written, plain_http, the error) read the
// way the registries probe dials it (agent/probes regTargetOf: https:// for
// an endpoint without a scheme, /v2 appended to the path, override_path
// taken as false, a relative ca from the file's directory), and for what the
// evidence does not carry (header names, client certificate and key paths)
// the project's own parse of the file (parseDoc), at the tables ParseHosts
// checks them. This test reads no header value on either side and prints
// none (an error of containerd's about a header is withheld: it may quote
// one).
//
// The corpus is every hosts.toml of the repository: files named hosts.toml,
// the files: of the corpus cases (agent/testdata/real), the hosts.toml
// blocks of docs/, and the constant hosts.toml strings of Go files (map
// entries keyed by a .../hosts.toml path, TestParseHosts' cases,
// FuzzParseHosts' seeds), and oracleEdgeCases for what none of them
// exercises.
//
// Every disagreement fails the test unless knownHostsDisagreements lists it
// (file and field, with the reason); an entry no longer seen fails it too.

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/remotes/docker"
	ctdhosts "github.com/containerd/containerd/v2/core/remotes/docker/config"
	"github.com/containerd/log"
	"github.com/sirupsen/logrus"
	"go.yaml.in/yaml/v3"
)

// Reasons of the known disagreements, one per kind.
const (
	whyNoHostTree = "the project reports containerd 1.x's rejection of a file without a [host] table (ErrInvalidHostTree, 1.6/1.7 before 1.7.32); containerd 2.x reads it"
	whyImplicit   = "without server =, containerd appends the registry itself (https://<registry>/v2, every capability, the root's TLS and headers); the evidence lists no such endpoint (the probes do not model upstream registries)"
	whyOverride   = "override_path = true: containerd keeps the path as written; override_path is not in the evidence and the probes take it as false (/v2 appended)"
	whyFallback   = "an http:// host with TLS settings (skip_verify, ca, client) on a port other than 80: containerd 2.x tries https first (HTTPFallback); the probes dial http (documented in agent/probes/registries.go)"
	whySplitHost  = "a host whose tables are apart ([host.a], [host.b], [host.a.header]): containerd's getSortedHosts drops only consecutive repeats and lists a twice; ParseHosts lists each host once"
	whyEmptyFile  = "an empty hosts.toml: containerd (1.x and 2.x, loadHostDir: len(b) == 0) takes it as absent and logs nothing; ParseHosts reports invalid `host` tree (the outcome, the upstream registry, is the same)"
)

// Where the known disagreements are (oracleCase.Source).
const (
	srcKubeclipper = "agent/testdata/real/holdout2-registry-endpoint-hosts-toml-scheme-less-server-http-registry-kubeclipper.yaml#/etc/containerd/certs.d/172.20.151.5:5000/hosts.toml"
	srcKubeasz     = "agent/testdata/real/registry-endpoint-config-path-and-mirrors-kubeasz.yaml#/etc/containerd/certs.d/harbor.easzlab.io.local:8443/hosts.toml"
	srcBundle      = "agent/bundle/bundle_test.go#etc/containerd/certs.d/reg.example/hosts.toml"
	srcFuzz        = "agent/ctdconfig/fuzz_test.go#FuzzParseHosts/"
	srcParseHosts  = "agent/ctdconfig/hosts_test.go#TestParseHosts/"
	srcProbes      = "agent/probes/containerd_test.go#etc/containerd/certs.d/"
	srcEdge        = "agent/ctdconfig/hosts_oracle_test.go#"
)

// knownHostsDisagreements are the differences between ParseHosts and
// containerd 2.x that are known, by file (oracleCase.Source) and field (as
// compareViews names it), each with its reason: for review. Any other
// difference fails the test, and so does an entry that no longer differs.
var knownHostsDisagreements = []struct{ source, field, reason string }{
	// The corpus cases (agent/testdata/real).
	{srcKubeclipper, "rejected", whyNoHostTree},
	{srcKubeasz, "default_server", whyImplicit},
	// Go tests' hosts.toml strings.
	{srcBundle, "rejected", whyNoHostTree},
	{srcFuzz + "orderedHosts", "hosts[1].scheme", whyFallback},
	{srcFuzz + "orderedHosts", "hosts[1].path", whyOverride},
	{srcFuzz + "seed 2", "rejected", whyNoHostTree},
	{srcFuzz + "seed 3", "default_server", whyImplicit},
	{srcParseHosts + "hosts in file order with their TLS settings; header values never copied", "hosts[1].scheme", whyFallback},
	{srcParseHosts + "hosts in file order with their TLS settings; header values never copied", "hosts[1].path", whyOverride},
	{srcParseHosts + "server without a [host] table: containerd 1.x rejects it (invalid host tree)", "rejected", whyNoHostTree},
	{srcParseHosts + "a host with an empty scheme parses (https:// is prepended): the endpoint is judged, not the file", "default_server", whyImplicit},
	{srcParseHosts + "the referrers capability", "default_server", whyImplicit},
	{srcProbes + "ghcr.io/hosts.toml", "rejected", whyNoHostTree},
	{srcProbes + "ok.io/hosts.toml", "default_server", whyImplicit},
	// The edge cases of this file.
	{srcEdge + "http host with a ca on port 80", "default_server", whyImplicit},
	{srcEdge + "override_path with a path", "default_server", whyImplicit},
	{srcEdge + "override_path with a path", "hosts[0].path", whyOverride},
	{srcEdge + "a host whose header table comes after another host", "default_server", whyImplicit},
	{srcEdge + "a host whose header table comes after another host", "hosts", whySplitHost},
	{srcEdge + "an empty file", "rejected", whyEmptyFile},
}

const oracleEnv = "NODEDIAG_HOSTS_ORACLE_CHILD"

// oracleEdgeCases are not files of the repository: what no file of it
// exercises (client certificates in each form, a header list, dial_timeout,
// a host whose tables are apart), so that every field is compared.
var oracleEdgeCases = func() []oracleCase {
	const at = "/etc/containerd/certs.d/edge.example:5000/hosts.toml"
	var out []oracleCase
	for _, c := range []struct{ name, text string }{
		{"client in each form, a header list", `server = "https://edge.example:5000"
client = "/etc/pki/root-client.pem"
[header]
  X-Root = "r"

[host."https://m1.example"]
  capabilities = ["Pull", "RESOLVE"]
  ca = ["m1.crt", "/etc/pki/m1-extra.pem"]
  client = [["m1.cert", "m1.key"], "/etc/pki/m1-both.pem"]
  [host."https://m1.example".header]
    X-A = ["1", "2"]
    x-b = "3"

[host."https://m2.example/mirror/path/"]
  skip_verify = false
  client = [["/etc/pki/m2.cert", "/etc/pki/m2.key"]]
`},
		{"http host with a ca on port 80", "[host.\"http://m.example:80\"]\n  ca = \"m.crt\"\n"},
		{"override_path with a path", "[host.\"https://m.example/v1/api\"]\n  override_path = true\n"},
		{"dial_timeout that is not a duration", "[host.\"https://m.example\"]\n  dial_timeout = \"5\"\n"},
		{"dial_timeout that is not a string", "[host.\"https://m.example\"]\n  dial_timeout = 5\n"},
		{"a host whose header table comes after another host", "[host.\"https://a.example\"]\n[host.\"https://b.example\"]\n[host.\"https://a.example\".header]\n  X-A = \"1\"\n"},
		{"an empty file", ""},
	} {
		out = append(out, oracleCase{Source: "agent/ctdconfig/hosts_oracle_test.go#" + c.name, Path: at, Registry: "edge.example:5000", Text: c.text})
	}
	return out
}()

// oracleCase is one hosts.toml of the repository.
type oracleCase struct {
	Source   string // repository path of the file that holds it, "#" and its name there
	Path     string // its host path: /etc/containerd/certs.d/<registry>/hosts.toml
	Registry string // its directory name
	Text     string
}

// hostView is one endpoint as containerd dials it.
type hostView struct {
	Scheme, Host, Path string
	Capabilities       []string
	SkipVerify         bool
	CA                 []string // absolute, in order, without repeats
	ClientCerts        []string // absolute, in order
	Headers            []string // names only, sorted
}

func (h hostView) String() string {
	return fmt.Sprintf("%s://%s%s capabilities=%v skip_verify=%v ca=%v client=%v header_names=%v",
		h.Scheme, h.Host, h.Path, h.Capabilities, h.SkipVerify, h.CA, h.ClientCerts, h.Headers)
}

// fileView is a hosts.toml as one reader takes it.
type fileView struct {
	Rejected bool
	// Why, for the messages: ParseHosts' error, or containerd's logged error
	// (withheld when it is about a header: it may quote a value).
	Reason     string
	Hosts      []hostView
	ClientKeys []string // the client key files (not the certificates), sorted
	// NoServer: the file sets no server (the project's side only).
	NoServer bool
}

type disagreement struct{ field, containerd, project string }

func TestHostsTOMLAgainstContainerd2(t *testing.T) {
	if os.Getenv(oracleEnv) != "" {
		t.Skip("the oracle's child process")
	}
	start := time.Now()
	root := repoRoot(t)
	cases := collectHostsCases(t, root)
	if len(cases) < 20 {
		t.Fatalf("only %d hosts.toml files found in %s", len(cases), root)
	}
	cases = append(cases, oracleEdgeCases...)
	known := map[[2]string]string{}
	for _, k := range knownHostsDisagreements {
		known[[2]string{k.source, k.field}] = k.reason
	}
	seen := map[[2]string]bool{}
	disagreeing := 0
	var endpoints, caFiles, clientCerts, headerNames int
	views := containerdViews(t, cases)
	for i, c := range cases {
		t.Run(c.Source, func(t *testing.T) {
			ctd := views[i]
			if ctd.Error != "" {
				t.Fatalf("containerd: %s", ctd.Error)
			}
			ds := compareViews(ctd.View, projectView(c))
			if len(ds) > 0 {
				disagreeing++
			}
			for _, h := range ctd.View.Hosts {
				endpoints++
				caFiles += len(h.CA)
				clientCerts += len(h.ClientCerts)
				headerNames += len(h.Headers)
			}
			for _, d := range ds {
				k := [2]string{c.Source, d.field}
				if why, ok := known[k]; ok {
					seen[k] = true
					t.Logf("known disagreement %s: containerd %s; project %s (%s)", d.field, d.containerd, d.project, why)
					continue
				}
				t.Errorf("%s: containerd 2.x %s; ParseHosts %s", d.field, d.containerd, d.project)
			}
		})
	}
	for _, k := range knownHostsDisagreements {
		if !seen[[2]string{k.source, k.field}] {
			t.Errorf("known disagreement not seen (fixed, or the file changed): %s %s", k.source, k.field)
		}
	}
	t.Logf("%d hosts.toml files (%d of the repository, %d edge cases) compared with containerd 2.x, %d disagree; containerd's side: %d endpoints, %d CA files, %d client certificates, %d header names; in %v",
		len(cases), len(cases)-len(oracleEdgeCases), len(oracleEdgeCases), disagreeing, endpoints, caFiles, clientCerts, headerNames, time.Since(start).Round(time.Millisecond))
	// The harness itself: the oracle saw TLS files and headers (a broken
	// reading of the clients would compare nothing).
	if caFiles == 0 || clientCerts == 0 || headerNames == 0 {
		t.Errorf("the oracle saw %d CA files, %d client certificates, %d header names: the harness reads nothing", caFiles, clientCerts, headerNames)
	}
}

// compareViews lists the fields where the two readers differ.
func compareViews(ctd, prj fileView) []disagreement {
	if ctd.Rejected != prj.Rejected {
		say := func(v fileView) string {
			if v.Rejected {
				return "rejects the file (" + v.Reason + ")"
			}
			return "reads the file"
		}
		return []disagreement{{"rejected", say(ctd), say(prj)}}
	}
	if ctd.Rejected {
		return nil
	}
	var out []disagreement
	hosts := ctd.Hosts
	if prj.NoServer && len(hosts) > 0 {
		last := hosts[len(hosts)-1]
		hosts = hosts[:len(hosts)-1]
		out = append(out, disagreement{"default_server", "ends with the implicit server " + last.String(), "lists none"})
	}
	if len(hosts) != len(prj.Hosts) {
		return append(out, disagreement{"hosts", fmt.Sprint(hosts), fmt.Sprint(prj.Hosts)})
	}
	for i := range hosts {
		c, p := hosts[i], prj.Hosts[i]
		field := func(name string, cv, pv any) {
			if !equalJSON(cv, pv) {
				out = append(out, disagreement{fmt.Sprintf("hosts[%d].%s", i, name), fmt.Sprintf("%v (%s)", cv, c), fmt.Sprintf("%v (%s)", pv, p)})
			}
		}
		field("scheme", c.Scheme, p.Scheme)
		field("host", c.Host, p.Host)
		field("path", c.Path, p.Path)
		field("capabilities", c.Capabilities, p.Capabilities)
		field("skip_verify", c.SkipVerify, p.SkipVerify)
		field("ca", c.CA, p.CA)
		field("client", c.ClientCerts, p.ClientCerts)
		field("header_names", c.Headers, p.Headers)
	}
	if !equalJSON(ctd.ClientKeys, prj.ClientKeys) {
		out = append(out, disagreement{"client_keys", fmt.Sprint(ctd.ClientKeys), fmt.Sprint(prj.ClientKeys)})
	}
	return out
}

func equalJSON(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// ---- the project's side ----------------------------------------------------

// projectView is c as the project reads it: ParseHosts' evidence, the way
// the registries probe dials an endpoint, and the header names and client
// files of its parse of the file.
func projectView(c oracleCase) fileView {
	hf := ParseHosts(c.Path, c.Registry, []byte(c.Text))
	if hf.Error != "" {
		return fileView{Rejected: true, Reason: hf.Error}
	}
	d, err := parseDoc(c.Path, []byte(c.Text))
	if err != nil {
		return fileView{Rejected: true, Reason: err.Error()}
	}
	dir := path.Dir(c.Path)
	// The [host."..."] tables, in the order ParseHosts lists them.
	var hostKeys []string
	for _, t := range d.tables {
		if len(t.key) >= 2 && t.key[0] == "host" && !slices.Contains(hostKeys, t.key[1]) {
			hostKeys = append(hostKeys, t.key[1])
		}
	}
	v := fileView{NoServer: true}
	keys := map[string]bool{}
	for i, ep := range hf.Endpoints {
		var at []string
		switch ep.Kind {
		case "host":
			if i >= len(hostKeys) {
				return fileView{Rejected: true, Reason: "ParseHosts lists more hosts than the file has [host] tables"}
			}
			at = []string{"host", hostKeys[i]}
		case "server":
			v.NoServer = false
		}
		h := dialled(ep.Url, ep.PlainHttp)
		h.SkipVerify = ep.SkipVerify
		h.Capabilities = capabilityNames(ep.Capabilities)
		for _, ca := range ep.Ca {
			if p := absFrom(dir, ca); !slices.Contains(h.CA, p) {
				h.CA = append(h.CA, p)
			}
		}
		key := func(k string) []string { return append(append([]string{}, at...), k) }
		if cl, ok := d.get(key("client")...); ok {
			var pairs []any
			switch x := cl.(type) {
			case string:
				pairs = []any{x}
			case []any:
				pairs = x
			}
			for _, p := range pairs {
				switch pair := p.(type) {
				case string:
					h.ClientCerts = append(h.ClientCerts, absFrom(dir, pair))
				case []any:
					h.ClientCerts = append(h.ClientCerts, absFrom(dir, pair[0].(string)))
					keys[absFrom(dir, pair[1].(string))] = true
				}
			}
		}
		h.Headers = d.keysInOrder(key("header")...)
		sort.Strings(h.Headers)
		v.Hosts = append(v.Hosts, h)
	}
	for k := range keys {
		v.ClientKeys = append(v.ClientKeys, k)
	}
	sort.Strings(v.ClientKeys)
	return v
}

// dialled is the scheme, host and API path the registries probe takes from
// a hosts.toml endpoint (agent/probes/registries.go regTargetOf, hosts
// branch): https:// (http:// with plain_http) before an endpoint that does
// not start with "http", the path cleaned and /v2 appended to it unless it
// ends with /v2.
func dialled(raw string, plainHTTP bool) hostView {
	raw = StripUserinfo(raw)
	if !strings.HasPrefix(raw, "http") {
		if plainHTTP {
			raw = "http://" + raw
		} else {
			raw = "https://" + raw
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return hostView{Host: "unparsable " + raw}
	}
	p := "/v2"
	if u.Path != "" {
		p = path.Clean(u.Path)
		if !strings.HasSuffix(p, "/v2") {
			p += "/v2"
		}
	}
	return hostView{Scheme: u.Scheme, Host: u.Host, Path: p}
}

// capabilityNames are the capabilities containerd grants for a list as
// written: all of them when it is empty, in containerd's order.
func capabilityNames(written []string) []string {
	if len(written) == 0 {
		return []string{"pull", "resolve", "push", "referrers"}
	}
	var caps docker.HostCapabilities
	for _, c := range written {
		switch strings.ToLower(c) {
		case "pull":
			caps |= docker.HostCapabilityPull
		case "resolve":
			caps |= docker.HostCapabilityResolve
		case "push":
			caps |= docker.HostCapabilityPush
		case "referrers":
			caps |= docker.HostCapabilityReferrers
		}
	}
	return capabilityList(caps)
}

func capabilityList(caps docker.HostCapabilities) []string {
	var out []string
	for _, c := range []struct {
		bit  docker.HostCapabilities
		name string
	}{{docker.HostCapabilityPull, "pull"}, {docker.HostCapabilityResolve, "resolve"}, {docker.HostCapabilityPush, "push"}, {docker.HostCapabilityReferrers, "referrers"}} {
		if caps.Has(c.bit) {
			out = append(out, c.name)
		}
	}
	return out
}

// absFrom is a path of a hosts.toml read from its directory, as containerd
// (makeAbsPath) and the probes take it.
func absFrom(dir, p string) string {
	if path.IsAbs(p) {
		return p
	}
	return path.Join(dir, p)
}

// ---- containerd's side -----------------------------------------------------

// oracleRequest is one file the child process is asked about.
type oracleRequest struct {
	Path     string // the hosts.toml, in the chroot
	Text     string
	Registry string // the registry host ConfigureHosts is asked for
}

// oracleResult is the child's answer for one file.
type oracleResult struct {
	View  fileView
	Error string // the oracle failed (not: containerd rejects the file)
}

// containerdViews runs the oracle on every case, in one child process
// chrooted into a new empty directory: the child writes each case's
// hosts.toml, asks containerd, and removes what it wrote before the next.
func containerdViews(t *testing.T, cases []oracleCase) []oracleResult {
	t.Helper()
	sandbox := t.TempDir()
	var reqs []oracleRequest
	for _, c := range cases {
		reqs = append(reqs, oracleRequest{Path: c.Path, Text: c.Text, Registry: registryHost(c.Registry)})
	}
	b, _ := json.Marshal(reqs)
	if err := os.WriteFile(filepath.Join(sandbox, oracleRequests), b, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestContainerdHostsOracleChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), oracleEnv+"="+sandbox)
	if os.Geteuid() != 0 {
		// chroot needs CAP_SYS_CHROOT: root in a user namespace of its own.
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}},
		}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "oracle chroot:") || errors.Is(err, syscall.EPERM) {
			t.Skipf("the oracle cannot chroot here (it needs root or a user namespace): %v\n%s", err, out)
		}
		t.Fatalf("the oracle's child: %v\n%s", err, out)
	}
	b, err = os.ReadFile(filepath.Join(sandbox, oracleResults))
	if err != nil {
		t.Fatalf("the oracle's child wrote no result: %v\n%s", err, out)
	}
	var res []oracleResult
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if len(res) != len(cases) {
		t.Fatalf("the oracle answered %d of %d files", len(res), len(cases))
	}
	return res
}

// The child's input and output, at the top of the chroot.
const (
	oracleRequests = "oracle-requests.json"
	oracleResults  = "oracle-results.json"
)

// registryHost is the registry a certs.d directory name configures
// (containerd's hostDirectory, reversed: "host_port_" is host:port).
func registryHost(dirName string) string {
	if m := regexp.MustCompile(`^(.+)_([0-9]+)_$`).FindStringSubmatch(dirName); m != nil {
		return m[1] + ":" + m[2]
	}
	return dirName
}

// TestContainerdHostsOracleChild is the oracle's child process: it does
// nothing unless containerdViews started it.
func TestContainerdHostsOracleChild(t *testing.T) {
	root := os.Getenv(oracleEnv)
	if root == "" {
		return
	}
	if err := syscall.Chroot(root); err != nil {
		t.Fatalf("oracle chroot: %v", err)
	}
	if err := os.Chdir("/"); err != nil {
		t.Fatal(err)
	}
	// From here on every path is inside root.
	b, err := os.ReadFile("/" + oracleRequests)
	if err != nil {
		t.Fatal(err)
	}
	var reqs []oracleRequest
	if err := json.Unmarshal(b, &reqs); err != nil {
		t.Fatal(err)
	}
	var res []oracleResult
	for _, req := range reqs {
		var r oracleResult
		created, err := oracleOne(req, &r.View)
		if err != nil {
			r.Error = err.Error()
		}
		res = append(res, r)
		// Leave the tree as it was (but directories) for the next file.
		for _, p := range append(created, req.Path) {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Fatal(err)
			}
		}
	}
	b, _ = json.Marshal(res)
	if err := os.WriteFile("/"+oracleResults, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// oracleOne writes req's hosts.toml and asks containerd about it; created
// are the files it wrote.
func oracleOne(req oracleRequest, v *fileView) (created []string, err error) {
	if err := os.MkdirAll(path.Dir(req.Path), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(req.Path, []byte(req.Text), 0o644); err != nil {
		return nil, err
	}
	return oracleConfigureHosts(path.Dir(req.Path), req.Registry, v)
}

var missingTLSFile = regexp.MustCompile(`unable to read (?:CA cert|CERT file) ("(?:[^"\\]|\\.)*"): .*no such file or directory`)

// oracleConfigureHosts asks containerd for the hosts of registry configured
// by dir/hosts.toml, creating each TLS file it reads (createdFiles). It runs
// chrooted.
func oracleConfigureHosts(dir, registry string, out *fileView) (createdFiles []string, _ error) {
	created := map[string]bool{}
	defer func() {
		for p := range created {
			createdFiles = append(createdFiles, p)
		}
	}()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	keyPEM := pemBytes("PRIVATE KEY", keyDER)
	for try := 0; try < 100; try++ {
		var logs bytes.Buffer
		logger := logrus.New()
		logger.SetOutput(&logs)
		logger.SetFormatter(&logrus.JSONFormatter{})
		ctx := log.WithLogger(context.Background(), logrus.NewEntry(logger))
		transports := map[*http.Client]*http.Transport{}
		hosts, err := ctdhosts.ConfigureHosts(ctx, ctdhosts.HostOptions{
			HostDir: func(string) (string, error) { return dir, nil },
			// Called with each host's own client before any HTTPFallback
			// wraps its transport: its TLS configuration.
			UpdateClient: func(c *http.Client) error {
				if tr, ok := c.Transport.(*http.Transport); ok {
					transports[c] = tr
				}
				return nil
			},
		})(registry)
		if err != nil {
			m := missingTLSFile.FindStringSubmatch(err.Error())
			if m == nil {
				return nil, err
			}
			p, uerr := strconv.Unquote(m[1])
			if uerr != nil || created[p] || !filepath.IsAbs(p) {
				return nil, err
			}
			if err := createTLSFile(p, int64(len(created)+1), key, keyPEM); err != nil {
				return nil, fmt.Errorf("creating %s for containerd: %w", p, err)
			}
			created[p] = true
			continue
		}
		var v fileView
		for _, line := range bytes.Split(logs.Bytes(), []byte("\n")) {
			var e struct{ Level, Msg, Error string }
			if json.Unmarshal(line, &e) == nil && e.Level == "error" && strings.HasPrefix(e.Msg, "failed to decode") {
				v.Rejected = true
				v.Reason = e.Error
				if strings.Contains(strings.ToLower(e.Error), "header") {
					v.Reason = "an error about a header (not shown: it may quote a value)"
				}
			}
		}
		used := map[string]bool{}
		for _, h := range hosts {
			hv := hostView{Scheme: h.Scheme, Host: h.Host, Path: h.Path, Capabilities: capabilityList(h.Capabilities)}
			for name := range h.Header {
				hv.Headers = append(hv.Headers, name)
			}
			sort.Strings(hv.Headers)
			if tr := transports[h.Client]; tr != nil && tr.TLSClientConfig != nil {
				tc := tr.TLSClientConfig
				hv.SkipVerify = tc.InsecureSkipVerify
				hv.CA = poolFiles(tc, created)
				for _, cert := range tc.Certificates {
					leaf := cert.Leaf
					if leaf == nil {
						if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
							return nil, err
						}
					}
					hv.ClientCerts = append(hv.ClientCerts, leaf.Subject.CommonName)
				}
			}
			for _, p := range append(append([]string{}, hv.CA...), hv.ClientCerts...) {
				used[p] = true
			}
			v.Hosts = append(v.Hosts, hv)
		}
		// What containerd read and holds as neither a CA nor a client
		// certificate: the key files of client pairs.
		for p := range created {
			if !used[p] {
				v.ClientKeys = append(v.ClientKeys, p)
			}
		}
		sort.Strings(v.ClientKeys)
		*out = v
		return nil, nil
	}
	return nil, errors.New("containerd read more than 100 TLS files")
}

// poolFiles are the files created for containerd whose certificate is in the
// CA pool of tc, in the order containerd added them.
func poolFiles(tc *tls.Config, created map[string]bool) []string {
	if tc.RootCAs == nil {
		return nil
	}
	var out []string
	//lint:ignore SA1019 the pool holds only the certificates created here (the chroot has no system roots)
	for _, raw := range tc.RootCAs.Subjects() {
		var rdn pkix.RDNSequence
		if _, err := asn1.Unmarshal(raw, &rdn); err != nil {
			continue
		}
		var n pkix.Name
		n.FillFromRDNSequence(&rdn)
		if created[n.CommonName] {
			out = append(out, n.CommonName)
		}
	}
	return out
}

// createTLSFile writes p: a certificate named p (its common name) and the
// shared key, so that p serves as a CA file, a client certificate with its
// key, and a key file.
func createTLSFile(p string, serial int64, key *ecdsa.PrivateKey, keyPEM []byte) error {
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial),
		Subject:               pkix.Name{CommonName: p},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, append(pemBytes("CERTIFICATE", der), keyPEM...), 0o600)
}

func pemBytes(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// ---- the corpus ------------------------------------------------------------

// repoRoot is the repository's top directory (the tests run in the
// package's directory).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "go.mod")); err != nil || !bytes.Contains(b, []byte("module github.com/nodediag/nodediag\n")) {
		t.Fatalf("%s is not the repository's root: %v", root, err)
	}
	return root
}

// collectHostsCases finds every hosts.toml of the repository.
func collectHostsCases(t *testing.T, root string) []oracleCase {
	t.Helper()
	var cases []oracleCase
	names := map[string]int{}
	add := func(source, hostPath, text string) {
		if n := names[source]; n > 0 {
			names[source] = n + 1
			source += "#" + strconv.Itoa(n+1)
		} else {
			names[source] = 1
		}
		if !path.IsAbs(hostPath) {
			hostPath = "/" + hostPath
		}
		cases = append(cases, oracleCase{Source: source, Path: hostPath, Registry: path.Base(path.Dir(hostPath)), Text: text})
	}
	goDirs := map[string][]string{}
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(p, root+string(filepath.Separator)))
		if e.IsDir() {
			if p != root && (strings.HasPrefix(e.Name(), ".") || e.Name() == "bin" || e.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !e.Type().IsRegular() {
			return nil
		}
		switch {
		case e.Name() == "hosts.toml":
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			hostPath := "/etc/containerd/certs.d/" + path.Base(path.Dir(rel)) + "/hosts.toml"
			if i := strings.Index(rel, "/root/etc/"); i >= 0 {
				hostPath = rel[i+len("/root"):] // an example host's tree
			}
			add(rel, hostPath, string(b))
		case strings.HasSuffix(e.Name(), ".yaml") || strings.HasSuffix(e.Name(), ".yml"):
			b, err := os.ReadFile(p)
			if err != nil || !bytes.Contains(b, []byte("/hosts.toml:")) {
				return err
			}
			// A corpus case (agent/corpus): files: maps host paths to contents.
			var c struct {
				Files map[string]string `yaml:"files"`
			}
			if err := yaml.Unmarshal(b, &c); err != nil {
				t.Errorf("%s: %v", rel, err)
				return nil
			}
			for _, k := range slices.Sorted(mapKeys(c.Files)) {
				if strings.HasSuffix(k, "/hosts.toml") {
					add(rel+"#"+k, k, c.Files[k])
				}
			}
		case strings.HasSuffix(e.Name(), ".md"):
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, blk := range markdownHostsBlocks(string(b)) {
				add(rel+"#"+blk[0], blk[0], blk[1])
			}
		case strings.HasSuffix(e.Name(), ".go") && !strings.HasSuffix(e.Name(), ".pb.go") && rel != "agent/ctdconfig/hosts_oracle_test.go":
			goDirs[path.Dir(rel)] = append(goDirs[path.Dir(rel)], rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range slices.Sorted(mapKeys(goDirs)) {
		for _, gc := range goHostsStrings(t, root, goDirs[dir]) {
			add(gc.Source, gc.Path, gc.Text)
		}
	}
	return cases
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

var hostsComment = regexp.MustCompile(`^#\s*(/\S*/hosts\.toml)\s*$`)

// markdownHostsBlocks are the ```toml blocks whose first line is a comment
// naming a hosts.toml: its path and the block.
func markdownHostsBlocks(md string) [][2]string {
	var out [][2]string
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```toml" {
			continue
		}
		j := i + 1
		for j < len(lines) && strings.TrimSpace(lines[j]) != "```" {
			j++
		}
		if j > i+1 {
			if m := hostsComment.FindStringSubmatch(strings.TrimSpace(lines[i+1])); m != nil {
				out = append(out, [2]string{m[1], strings.Join(lines[i+1:j], "\n") + "\n"})
			}
		}
		i = j
	}
	return out
}

// goHostsStrings are the hosts.toml strings of the Go files of one package
// directory that are constants (literals, concatenations and named
// constants): map entries keyed by a .../hosts.toml path, the src of
// TestParseHosts' cases and FuzzParseHosts' seeds. Strings built at run
// time (a free port, a closure) are not read.
func goHostsStrings(t *testing.T, root string, files []string) []oracleCase {
	t.Helper()
	fset := token.NewFileSet()
	parsed := map[string]*ast.File{}
	defs := map[string][]ast.Expr{}
	for _, rel := range files {
		f, err := parser.ParseFile(fset, filepath.Join(root, rel), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			continue
		}
		parsed[rel] = f
		ast.Inspect(f, func(n ast.Node) bool {
			gd, ok := n.(*ast.GenDecl)
			if !ok || (gd.Tok != token.CONST && gd.Tok != token.VAR) {
				return true
			}
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				if len(vs.Names) != len(vs.Values) {
					continue
				}
				for i, name := range vs.Names {
					defs[name.Name] = append(defs[name.Name], vs.Values[i])
				}
			}
			return true
		})
	}
	var eval func(e ast.Expr, depth int) (string, bool)
	eval = func(e ast.Expr, depth int) (string, bool) {
		if depth > 20 {
			return "", false
		}
		switch x := e.(type) {
		case *ast.BasicLit:
			if x.Kind != token.STRING {
				return "", false
			}
			s, err := strconv.Unquote(x.Value)
			return s, err == nil
		case *ast.ParenExpr:
			return eval(x.X, depth+1)
		case *ast.BinaryExpr:
			if x.Op != token.ADD {
				return "", false
			}
			a, ok := eval(x.X, depth+1)
			b, ok2 := eval(x.Y, depth+1)
			return a + b, ok && ok2
		case *ast.Ident:
			// A name defined once (or always with the same value).
			var v string
			for i, d := range defs[x.Name] {
				s, ok := eval(d, depth+1)
				if !ok || (i > 0 && s != v) {
					return "", false
				}
				v = s
			}
			return v, len(defs[x.Name]) > 0
		}
		return "", false
	}
	var out []oracleCase
	for _, rel := range files {
		f := parsed[rel]
		if f == nil {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.KeyValueExpr:
				if k, ok := x.Key.(*ast.BasicLit); ok && k.Kind == token.STRING {
					key, _ := strconv.Unquote(k.Value)
					if strings.HasSuffix(key, "/hosts.toml") {
						if v, ok := eval(x.Value, 0); ok {
							out = append(out, oracleCase{Source: rel + "#" + key, Path: key, Text: v})
						}
					}
				}
			case *ast.FuncDecl:
				switch x.Name.Name {
				case "TestParseHosts":
					ast.Inspect(x.Body, func(n ast.Node) bool {
						cl, ok := n.(*ast.CompositeLit)
						if !ok {
							return true
						}
						var name, src string
						var hasSrc bool
						for _, el := range cl.Elts {
							kv, ok := el.(*ast.KeyValueExpr)
							if !ok {
								continue
							}
							switch id, _ := kv.Key.(*ast.Ident); {
							case id == nil:
							case id.Name == "name":
								name, _ = eval(kv.Value, 0)
							case id.Name == "src":
								src, hasSrc = eval(kv.Value, 0)
							}
						}
						if hasSrc {
							out = append(out, oracleCase{Source: rel + "#TestParseHosts/" + name, Path: hostsPath, Text: src})
						}
						return true
					})
					return false
				case "FuzzParseHosts":
					ast.Inspect(x.Body, func(n ast.Node) bool {
						cl, ok := n.(*ast.CompositeLit)
						if !ok {
							return true
						}
						if at, isArr := cl.Type.(*ast.ArrayType); !isArr || fmt.Sprint(at.Elt) != "string" {
							return true
						}
						for i, el := range cl.Elts {
							name := fmt.Sprintf("seed %d", i)
							if id, ok := el.(*ast.Ident); ok {
								name = id.Name
							}
							if v, ok := eval(el, 0); ok {
								out = append(out, oracleCase{Source: rel + "#FuzzParseHosts/" + name, Path: hostsPath, Text: v})
							}
						}
						return false
					})
					return false
				}
			}
			return true
		})
	}
	return out
}
