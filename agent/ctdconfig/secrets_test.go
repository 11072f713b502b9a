package ctdconfig

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/nodediag/nodediag/agent/host/hosttest"
)

func TestQuotableLine(t *testing.T) {
	tests := []struct {
		name  string
		lines []string
		want  string
	}{
		{"an endpoint is shown", []string{`[host."http://10.0.0.4:5000"]`, `  capabilities = ["pull"]`}, `  capabilities = ["pull"]`},
		{"a table header is shown", []string{`[host."https://m".header]`}, `[host."https://m".header]`},
		{"a header's value is not", []string{`[host."https://m".header]`, `  X-JFrog-Art-Api = "AKCp8secret`}, `  X-JFrog-Art-Api = [value not shown]`},
		{"nor a line in it without a value", []string{`[host."https://m".header]`, `  "AKCp8secret`}, `[value not shown]`},
		{"a header written inline", []string{`[host."https://m"]`, `  header = {Authorization = "Basic dXNlcjpwYXNzd29yZA=="}`}, `  header = [value not shown]`},
		{"a legacy auth table", []string{`[plugins."io.containerd.grpc.v1.cri".registry.configs."r.io".auth]`, `  username = "robot"`}, `  username = [value not shown]`},
		{"a credential key with dotted keys", []string{`[plugins."io.containerd.grpc.v1.cri".registry.configs]`, `  "r.io".auth.password = "hunter2"`}, `  "r.io".auth.password = [value not shown]`},
		{"a tls table is not a credential", []string{`[plugins."io.containerd.grpc.v1.cri".registry.configs."r.io".tls]`, `  ca_file = "/etc/ssl/r.pem"`}, `  ca_file = "/etc/ssl/r.pem"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := quotableLine(tt.lines, len(tt.lines)); got != tt.want {
				t.Errorf("quotableLine = %q, want %q", got, tt.want)
			}
		})
	}
}

// No credential of a hosts.toml or config.toml reaches the evidence, whether
// the file parses or the parser stops on the very line that holds it.
func TestNoCredentialInEvidence(t *testing.T) {
	const secret = "AKCp8secretZZ"
	hosts := map[string]string{
		"unterminated header value":  "server = \"https://r.io\"\n[host.\"https://m\"]\n[host.\"https://m\".header]\n  X-JFrog-Art-Api = \"" + secret + "\n",
		"header of the wrong type":   "[host.\"https://m\"]\n[host.\"https://m\".header]\n  Authorization = [\"Basic " + secret + "\", 1]\n",
		"api key of the wrong type":  "[host.\"https://m\"]\n  header = {x-api-key = [\"" + secret + "\", 1]}\n",
		"user info in a host":        "[host.\"https://robot:" + secret + "@m:5000\"]\n",
		"user info in a server":      "server = \"https://robot:" + secret + "@r.io\"\n[host.\"https://m\"]\n",
		"a valid header":             "[host.\"https://m\"]\n[host.\"https://m\".header]\n  Authorization = \"Bearer " + secret + "\"\n",
		"a header that is not table": "[host.\"https://m\"]\n  header = \"" + secret + "\"\n",
	}
	for name, text := range hosts {
		t.Run("hosts.toml: "+name, func(t *testing.T) {
			hf := ParseHosts("/etc/containerd/certs.d/r.io/hosts.toml", "r.io", []byte(text))
			if b, _ := protojson.Marshal(hf); strings.Contains(string(b), secret) {
				t.Errorf("the credential reached the evidence:\n%s", b)
			}
		})
	}
	configs := map[string]string{
		"unterminated password":      "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".registry.configs.\"r.io\".auth]\n  password = \"" + secret + "\n",
		"password of the wrong type": "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".registry.configs.\"r.io\".auth]\n  password = [\"" + secret + "\"\n",
		"auth in a mirror endpoint":  "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".registry.mirrors.\"docker.io\"]\n  endpoint = [\"https://robot:" + secret + "@m:5000\"]\n",
	}
	for name, text := range configs {
		t.Run("config.toml: "+name, func(t *testing.T) {
			h := hosttest.Tree(t, map[string]string{"etc/containerd/config.toml": text})
			cfg, unreadable := Read(h)
			b, _ := protojson.Marshal(cfg)
			for _, u := range unreadable {
				b = append(b, u.String()...)
			}
			if strings.Contains(string(b), secret) {
				t.Errorf("the credential reached the evidence:\n%s", b)
			}
		})
	}
}
