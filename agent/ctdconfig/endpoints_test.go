package ctdconfig

import (
	"testing"

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
