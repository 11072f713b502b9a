package ctdconfig

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nodediag/nodediag/agent/host/hosttest"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// Endpoints are the ones containerd pulls from: hosts files with
// config_path, the legacy mirrors without it; never both.
func TestEndpoints(t *testing.T) {
	mirror := &nodediagv1.RegistryEndpoint{Registry: "docker.io", Url: "http://10.0.0.4:5000", Kind: "mirrors"}
	host := &nodediagv1.RegistryEndpoint{Registry: "registry.k8s.io", Url: "http://10.0.0.4:5000", Kind: "host"}
	server := &nodediagv1.RegistryEndpoint{Registry: "registry.k8s.io", Url: "https://registry.k8s.io", Kind: "server"}
	hosts := []*nodediagv1.HostsFile{{Registry: "registry.k8s.io", Endpoints: []*nodediagv1.RegistryEndpoint{host, server}}}
	tests := []struct {
		name string
		cfg  *nodediagv1.Containerd
		want []*nodediagv1.RegistryEndpoint
	}{
		{"no configuration", nil, nil},
		{"legacy mirrors only", &nodediagv1.Containerd{LegacyMirrors: []*nodediagv1.RegistryEndpoint{mirror}}, []*nodediagv1.RegistryEndpoint{mirror}},
		{"config_path: the hosts files, in order", &nodediagv1.Containerd{RegistryConfigPath: "/etc/containerd/certs.d", HostsFiles: hosts}, []*nodediagv1.RegistryEndpoint{host, server}},
		{"config_path with mirrors: containerd ignores the mirrors (its CRI does not even load)",
			&nodediagv1.Containerd{RegistryConfigPath: "/etc/containerd/certs.d", HostsFiles: hosts, LegacyMirrors: []*nodediagv1.RegistryEndpoint{mirror}},
			[]*nodediagv1.RegistryEndpoint{host, server}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Endpoints(tt.cfg)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d endpoints %v, want %v", len(got), got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("endpoint %d = %v, want %v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

// A certs.d of more registries than MaxHostsFiles is read up to the bound,
// and the rest is reported as not read.
func TestHostsFilesBounded(t *testing.T) {
	files := map[string]string{"etc/containerd/config.toml": "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = \"/etc/containerd/certs.d\"\n"}
	for i := 0; i < MaxHostsFiles+10; i++ {
		files[fmt.Sprintf("etc/containerd/certs.d/r%03d.example/hosts.toml", i)] = "[host.\"https://m.example\"]\n"
	}
	cfg, unreadable := Read(hosttest.Tree(t, files))
	if got := len(cfg.GetHostsFiles()); got != MaxHostsFiles {
		t.Errorf("read %d hosts files, want %d", got, MaxHostsFiles)
	}
	if len(unreadable) != 1 || !strings.Contains(unreadable[0].GetError(), "10 more entries not read") {
		t.Errorf("unreadable = %v, want the 10 entries not read", unreadable)
	}
}
