package ctdconfig

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

const hostsPath = "/etc/containerd/certs.d/registry.k8s.io/hosts.toml"

// The mirror of REPORT.md section 4 (reproduced against containerd 1.6.20).
const mirrorHosts = `server = "https://registry.k8s.io"
[host."http://127.0.0.1:5000"]
  capabilities = ["pull", "resolve"]
`

// Several hosts, written in an order that is not alphabetical, with TLS
// settings and a header carrying a token.
const orderedHosts = `server = "registry.k8s.io"
ca = "/etc/pki/root.pem"

[host."https://mirror-b.internal:5000"]
  capabilities = ["pull"]
  ca = ["mirror-b.crt", "/etc/pki/extra.pem"]
  [host."https://mirror-b.internal:5000".header]
    Authorization = "Bearer tok3n-value"

[host."http://mirror-a.internal"]
  capabilities = ["pull", "resolve"]
  skip_verify = true
  override_path = true
`

func TestParseHosts(t *testing.T) {
	h := func(n int, src string) *nodediagv1.SourceLine { return sl(hostsPath, src, n) }
	cases := []struct {
		name string
		src  string
		want *nodediagv1.HostsFile
	}{
		{
			name: "mirror with upstream fallback: hosts first, then server",
			src:  mirrorHosts,
			want: &nodediagv1.HostsFile{Endpoints: []*nodediagv1.RegistryEndpoint{
				{Url: "http://127.0.0.1:5000", Line: h(2, mirrorHosts), Kind: "host", Capabilities: []string{"pull", "resolve"}, PlainHttp: true},
				{Url: "https://registry.k8s.io", Line: h(1, mirrorHosts), Kind: "server"},
			}},
		},
		{
			name: "hosts in file order with their TLS settings; header values never copied",
			src:  orderedHosts,
			want: &nodediagv1.HostsFile{Endpoints: []*nodediagv1.RegistryEndpoint{
				{Url: "https://mirror-b.internal:5000", Line: h(4, orderedHosts), Kind: "host", Capabilities: []string{"pull"},
					Ca: []string{"mirror-b.crt", "/etc/pki/extra.pem"}},
				{Url: "http://mirror-a.internal", Line: h(10, orderedHosts), Kind: "host", Capabilities: []string{"pull", "resolve"},
					SkipVerify: true, PlainHttp: true},
				{Url: "registry.k8s.io", Line: h(1, orderedHosts), Kind: "server", Ca: []string{"/etc/pki/root.pem"}},
			}},
		},
		{
			name: "server without a [host] table: containerd 1.x rejects it (invalid host tree)",
			src:  "server = \"127.0.0.1:5000\"\n",
			want: &nodediagv1.HostsFile{Error: ErrInvalidHostTree, Endpoints: []*nodediagv1.RegistryEndpoint{
				{Url: "127.0.0.1:5000", Line: h(1, "server = \"127.0.0.1:5000\""), Kind: "server"},
			}},
		},
		{
			name: "an empty [host] table is the accepted form of a server-only file",
			src:  "server = \"https://10.0.0.4:5000\"\n[host]\n",
			want: &nodediagv1.HostsFile{Endpoints: []*nodediagv1.RegistryEndpoint{
				{Url: "https://10.0.0.4:5000", Line: h(1, "server = \"https://10.0.0.4:5000\""), Kind: "server"},
			}},
		},
		{
			name: "broken TOML (REPORT.md: unescaped control character): the parser's line",
			src:  "server = \"http://127.0.0.1:5000\n[host.\"http://127.0.0.1:5000\"]\n",
			want: &nodediagv1.HostsFile{
				Error:     "failed to parse TOML: toml: basic strings cannot have new lines",
				ErrorLine: h(1, "server = \"http://127.0.0.1:5000"),
			},
		},
		{
			name: "a host that is not a URL: containerd rejects the whole file",
			src:  "[host.\"https://[::1\"]\n  capabilities = [\"pull\"]\n",
			want: &nodediagv1.HostsFile{
				Error:     `unable to parse server https://[::1: parse "https://[::1": missing ']' in host`,
				ErrorLine: h(1, "[host.\"https://[::1\"]"),
				Endpoints: []*nodediagv1.RegistryEndpoint{
					{Url: "https://[::1", Line: h(1, "[host.\"https://[::1\"]"), Kind: "host", Capabilities: []string{"pull"}},
				},
			},
		},
		{
			name: "a host with an empty scheme parses (https:// is prepended): the endpoint is judged, not the file",
			src:  "[host.\"://127.0.0.1:5000\"]\n",
			want: &nodediagv1.HostsFile{Endpoints: []*nodediagv1.RegistryEndpoint{
				{Url: "://127.0.0.1:5000", Line: h(1, "[host.\"://127.0.0.1:5000\"]"), Kind: "host"},
			}},
		},
		{
			name: "unknown capability",
			src:  "[host.\"https://m\"]\n  capabilities = [\"pul\"]\n",
			want: &nodediagv1.HostsFile{
				Error: "unknown capability pul", ErrorLine: h(2, "\n  capabilities = [\"pul\"]"),
				Endpoints: []*nodediagv1.RegistryEndpoint{
					{Url: "https://m", Line: h(1, "[host.\"https://m\"]"), Kind: "host", Capabilities: []string{"pul"}},
				},
			},
		},
		{
			// Valid since containerd 2.2: the rules judge the version.
			name: "the referrers capability",
			src:  "[host.\"https://m\"]\n  capabilities = [\"pull\", \"resolve\", \"referrers\"]\n",
			want: &nodediagv1.HostsFile{
				Endpoints: []*nodediagv1.RegistryEndpoint{
					{Url: "https://m", Line: h(1, "[host.\"https://m\"]"), Kind: "host", Capabilities: []string{"pull", "resolve", "referrers"}},
				},
			},
		},
		{
			name: "capabilities as a string",
			src:  "[host.\"https://m\"]\ncapabilities = \"pull\"\n",
			want: &nodediagv1.HostsFile{
				Error: "capabilities: not a list", ErrorLine: h(2, "\ncapabilities = \"pull\""),
				Endpoints: []*nodediagv1.RegistryEndpoint{{Url: "https://m", Line: h(1, "[host.\"https://m\"]"), Kind: "host"}},
			},
		},
		{
			name: "ca of the wrong type",
			src:  "[host.\"https://m\"]\nca = 5\n",
			want: &nodediagv1.HostsFile{
				Error: `invalid type 5 for "ca"`, ErrorLine: h(2, "\nca = 5"),
				Endpoints: []*nodediagv1.RegistryEndpoint{{Url: "https://m", Line: h(1, "[host.\"https://m\"]"), Kind: "host"}},
			},
		},
		{
			name: "host that is not a table",
			src:  "host = \"https://m\"\n",
			want: &nodediagv1.HostsFile{Error: "host: not a table of hosts", ErrorLine: h(1, "host = \"https://m\"")},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.want.Path, tc.want.Registry = hostsPath, "registry.k8s.io"
			for _, ep := range tc.want.Endpoints {
				ep.Registry = "registry.k8s.io"
			}
			got := ParseHosts(hostsPath, "registry.k8s.io", []byte(tc.src))
			if diff := cmp.Diff(tc.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("ParseHosts (-want +got):\n%s", diff)
			}
			if strings.Contains(got.String(), "tok3n") {
				t.Errorf("a header value reached the evidence: %v", got)
			}
		})
	}
}
