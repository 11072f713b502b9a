package probes

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/nodediag/nodediag/agent/host/hosttest"
	"github.com/nodediag/nodediag/agent/probe"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// calicoConflist is the config Calico's install-cni container writes (shortened).
const calicoConflist = `{
  "name": "k8s-pod-network",
  "cniVersion": "0.3.1",
  "plugins": [
    {
      "type": "calico",
      "log_level": "info",
      "datastore_type": "kubernetes",
      "ipam": { "type": "calico-ipam" },
      "kubernetes": { "kubeconfig": "/etc/cni/net.d/calico-kubeconfig" }
    },
    { "type": "bandwidth", "capabilities": { "bandwidth": true } },
    { "type": "portmap", "snat": true, "capabilities": { "portMappings": true } }
  ]
}
`

const bridgeConf = `{"cniVersion": "1.0.0", "name": "bridge", "type": "bridge", "bridge": "cni0", "ipam": {"type": "host-local"}}`

var cniConfigTests = []struct {
	name, file, in string
	want           *nodediagv1.CNIConfig
}{
	{
		name: "calico conflist", file: "10-calico.conflist", in: calicoConflist,
		want: &nodediagv1.CNIConfig{Name: "k8s-pod-network", CniVersion: "0.3.1", Types: []string{"calico", "bandwidth", "portmap"}},
	},
	{
		name: "single conf", file: "10-bridge.conf", in: bridgeConf,
		want: &nodediagv1.CNIConfig{Name: "bridge", CniVersion: "1.0.0", Types: []string{"bridge"}},
	},
	{
		name: ".json is one network", file: "99-loopback.json", in: `{"cniVersion":"0.4.0","name":"lo","type":"loopback"}`,
		want: &nodediagv1.CNIConfig{Name: "lo", CniVersion: "0.4.0", Types: []string{"loopback"}},
	},
	{
		name: "truncated", file: "10-calico.conflist", in: calicoConflist[:120],
		want: &nodediagv1.CNIConfig{ParseError: "truncated JSON: …"},
	},
	{
		name: "syntax error names its line", file: "10-calico.conflist", in: "{\n  \"name\": \"x\",\n  \"plugins\": [,]\n}",
		want: &nodediagv1.CNIConfig{ParseError: "invalid JSON at line 3: …"},
	},
	{
		name: "wrong type", file: "10-x.conflist", in: `{"name": 5, "plugins": []}`,
		want: &nodediagv1.CNIConfig{ParseError: "invalid JSON at line 1: …"},
	},
	{name: "empty", file: "10-x.conf", in: "", want: &nodediagv1.CNIConfig{ParseError: "empty file"}},
	{name: "two values", file: "10-x.conf", in: bridgeConf + bridgeConf, want: &nodediagv1.CNIConfig{ParseError: "invalid JSON: data after the top-level value"}},
	{
		name: "conflist without name", file: "10-x.conflist", in: `{"plugins":[{"type":"bridge"}]}`,
		want: &nodediagv1.CNIConfig{Types: []string{"bridge"}, ParseError: "error parsing configuration list: no name"},
	},
	{
		name: "conflist without plugins", file: "10-x.conflist", in: `{"name":"n","cniVersion":"1.0.0"}`,
		want: &nodediagv1.CNIConfig{Name: "n", CniVersion: "1.0.0", ParseError: "no plugins in the list"},
	},
	{
		name: "plugin without type", file: "10-x.conflist", in: `{"name":"n","plugins":[{"type":"bridge"},{"snat":true}]}`,
		want: &nodediagv1.CNIConfig{Name: "n", Types: []string{"bridge", ""}, ParseError: "plugin #1 has no type"},
	},
	{
		name: "a conflist in a .conf file", file: "10-calico.conf", in: calicoConflist,
		want: &nodediagv1.CNIConfig{Name: "k8s-pod-network", CniVersion: "0.3.1", ParseError: "network type not found (a plugin list in a .conf file: name it *.conflist)"},
	},
}

// cniSameError compares parse errors; a want ending in "…" is a prefix (the
// rest is encoding/json's own wording, which Go versions change).
func cniSameError(t *testing.T, want, got *nodediagv1.CNIConfig) {
	t.Helper()
	if prefix, ok := strings.CutSuffix(want.GetParseError(), "…"); ok {
		if !strings.HasPrefix(got.GetParseError(), prefix) {
			t.Errorf("parse error = %q, want %q...", got.GetParseError(), prefix)
		}
		want.ParseError, got.ParseError = "", ""
	}
}

func TestParseCNIConfig(t *testing.T) {
	for _, tt := range cniConfigTests {
		t.Run(tt.name, func(t *testing.T) {
			got := &nodediagv1.CNIConfig{}
			parseCNIConfig(tt.file, []byte(tt.in), got)
			want := proto.Clone(tt.want).(*nodediagv1.CNIConfig)
			cniSameError(t, want, got)
			if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
				t.Errorf("parseCNIConfig (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParseCNIConfig(f *testing.F) {
	for _, tt := range cniConfigTests {
		f.Add(tt.file, tt.in)
	}
	f.Fuzz(func(t *testing.T, file, in string) {
		c := &nodediagv1.CNIConfig{}
		parseCNIConfig(file, []byte(in), c)
	})
}

func TestCNIProbe(t *testing.T) {
	const exe = "#!/bin/sh\nexit 0\n"
	tests := []struct {
		name       string
		files      map[string]string
		setup      func(t *testing.T, root string)
		wantStatus string
		want       *nodediagv1.CNI
		unreadable int
	}{
		{
			name: "calico installed",
			files: map[string]string{
				"etc/kubernetes/kubelet.conf":        "apiVersion: v1\n",
				"etc/cni/net.d/10-calico.conflist":   calicoConflist,
				"etc/cni/net.d/calico-kubeconfig":    "apiVersion: v1\n",
				"etc/cni/net.d/calico-tls/":          "",
				"opt/cni/bin/calico":                 exe,
				"opt/cni/bin/calico-ipam":            exe,
				"opt/cni/bin/portmap":                exe,
				"opt/cni/bin/bandwidth":              "->/opt/cni/bin/portmap",
				"opt/cni/bin/README.md":              "not a plugin",
				"opt/cni/bin/subdir/":                "",
				"opt/cni/bin/dangling":               "->/nowhere",
				"etc/cni/net.d/99-dangling.conflist": "->/nowhere",
			},
			wantStatus: probe.StatusOK,
			want: &nodediagv1.CNI{
				ConfDir: "/etc/cni/net.d", ConfDirPresent: true, BinDir: "/opt/cni/bin", BinDirPresent: true,
				Configs: []*nodediagv1.CNIConfig{{
					Path: "/etc/cni/net.d/10-calico.conflist", Name: "k8s-pod-network", CniVersion: "0.3.1",
					Types: []string{"calico", "bandwidth", "portmap"},
				}},
				Plugins: []string{"bandwidth", "calico", "calico-ipam", "portmap"},
			},
			unreadable: 1, // the dangling 99-dangling.conflist
		},
		{
			name:       "kubeadm node before the CNI add-on: no conf dir",
			files:      map[string]string{"var/lib/kubelet/config.yaml": "kind: KubeletConfiguration\n"},
			wantStatus: probe.StatusOK,
			want:       &nodediagv1.CNI{ConfDir: "/etc/cni/net.d", BinDir: "/opt/cni/bin"},
		},
		{
			name:       "empty conf dir, bin dir from the image",
			files:      map[string]string{"etc/kubernetes/manifests/": "", "etc/cni/net.d/": "", "opt/cni/bin/bridge": exe, "opt/cni/bin/host-local": exe},
			wantStatus: probe.StatusOK,
			want: &nodediagv1.CNI{
				ConfDir: "/etc/cni/net.d", ConfDirPresent: true, BinDir: "/opt/cni/bin", BinDirPresent: true,
				Plugins: []string{"bridge", "host-local"},
			},
		},
		{
			name: "a malformed config is reported with the valid one",
			files: map[string]string{
				"etc/kubernetes/kubelet.conf":      "apiVersion: v1\n",
				"etc/cni/net.d/05-broken.conf":     "{\"type\": ",
				"etc/cni/net.d/10-calico.conflist": calicoConflist,
			},
			wantStatus: probe.StatusOK,
			want: &nodediagv1.CNI{
				ConfDir: "/etc/cni/net.d", ConfDirPresent: true, BinDir: "/opt/cni/bin",
				Configs: []*nodediagv1.CNIConfig{
					{Path: "/etc/cni/net.d/05-broken.conf", ParseError: "truncated JSON: …"},
					{Path: "/etc/cni/net.d/10-calico.conflist", Name: "k8s-pod-network", CniVersion: "0.3.1", Types: []string{"calico", "bandwidth", "portmap"}},
				},
			},
		},
		{
			name:       "no Kubernetes on this root: skipped",
			files:      map[string]string{"etc/hostname": "laptop\n"},
			wantStatus: probe.StatusSkipped,
		},
		{
			name:  "a non-executable file in the bin dir is not a plugin",
			files: map[string]string{"etc/kubernetes/": "", "opt/cni/bin/calico": "not executable"},
			setup: func(t *testing.T, root string) {
				if err := os.Chmod(filepath.Join(root, "opt/cni/bin/calico"), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			wantStatus: probe.StatusOK,
			want:       &nodediagv1.CNI{ConfDir: "/etc/cni/net.d", BinDir: "/opt/cni/bin", BinDirPresent: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := hosttest.Tree(t, tt.files)
			if tt.setup != nil {
				tt.setup(t, h.Root)
			}
			pe := probe.RunAll(context.Background(), h, []probe.Probe{cni{}}).Probes[0]
			if pe.Status != tt.wantStatus {
				t.Fatalf("status = %q (%s), want %q", pe.Status, pe.Error, tt.wantStatus)
			}
			want := proto.Clone(tt.want).(*nodediagv1.CNI)
			for i, c := range want.GetConfigs() {
				if i < len(pe.GetCni().GetConfigs()) {
					cniSameError(t, c, pe.GetCni().GetConfigs()[i])
				}
			}
			if diff := cmp.Diff(want, pe.GetCni(), protocmp.Transform()); diff != "" {
				t.Errorf("cni (-want +got):\n%s", diff)
			}
			if len(pe.Unreadable) != tt.unreadable {
				t.Errorf("unreadable = %v, want %d", pe.Unreadable, tt.unreadable)
			}
		})
	}
}
