package probes

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/nodediag/nodediag/agent/ctdconfig"
	"github.com/nodediag/nodediag/agent/host/hosttest"
	"github.com/nodediag/nodediag/agent/probe"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// A containerd 1.x node with config_path and hosts files of every kind:
// a working mirror, broken TOML, a hosts.toml that is a directory, a
// server-only file, and a Docker-style certs directory without hosts.toml.
var ctdNodeFiles = map[string]string{
	"etc/containerd/config.toml": `version = 2
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.9"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
    SystemdCgroup = true
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "/etc/containerd/certs.d"
`,
	"etc/containerd/certs.d/registry.k8s.io/hosts.toml":  "server = \"https://registry.k8s.io\"\n[host.\"http://127.0.0.1:5000\"]\n  capabilities = [\"pull\", \"resolve\"]\n",
	"etc/containerd/certs.d/docker.io/hosts.toml":        "server = \"https://registry-1.docker.io\n",
	"etc/containerd/certs.d/127.0.0.1_5000_/hosts.toml/": "",
	"etc/containerd/certs.d/quay.io/ca.crt":              "not read",
	"etc/containerd/certs.d/ghcr.io/hosts.toml":          "server = \"https://ghcr-mirror.internal\"\n",
	"usr/bin/containerd":                                 "#!/bin/sh\necho containerd github.com/containerd/containerd 1.6.20\n",
}

func runContainerdProbe(t *testing.T, files map[string]string, maxRead int64) (*nodediagv1.ProbeEvidence, error) {
	t.Helper()
	h := hosttest.Tree(t, files)
	h.MaxRead = maxRead
	return containerdConfig{}.Run(context.Background(), h)
}

func TestContainerdProbeHostsFiles(t *testing.T) {
	pe, err := runContainerdProbe(t, ctdNodeFiles, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(pe.Unreadable) != 0 {
		t.Errorf("unreadable = %v, want none", pe.Unreadable)
	}
	c := pe.GetContainerd()
	if c.Version != 2 || c.SandboxImage != "registry.k8s.io/pause:3.9" || !c.GetSystemdCgroup() || c.RegistryConfigPath != "/etc/containerd/certs.d" {
		t.Errorf("config = %v", c)
	}
	type hostsFile struct{ Path, Registry, Error string }
	var got []hostsFile
	for _, hf := range c.HostsFiles {
		got = append(got, hostsFile{hf.Path, hf.Registry, hf.Error})
	}
	// By directory name; quay.io has no hosts.toml and is not listed.
	want := []hostsFile{
		{"/etc/containerd/certs.d/127.0.0.1_5000_/hosts.toml", "127.0.0.1_5000_", "open /etc/containerd/certs.d/127.0.0.1_5000_/hosts.toml: not a regular file (a directory)"},
		{"/etc/containerd/certs.d/docker.io/hosts.toml", "docker.io", "failed to parse TOML: toml: basic strings cannot have new lines"},
		{"/etc/containerd/certs.d/ghcr.io/hosts.toml", "ghcr.io", ctdconfig.ErrInvalidHostTree},
		{"/etc/containerd/certs.d/registry.k8s.io/hosts.toml", "registry.k8s.io", ""},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hosts files (-want +got):\n%s", diff)
	}
	var urls []string
	for _, ep := range ctdconfig.Endpoints(c) {
		urls = append(urls, ep.Kind+" "+ep.Url)
	}
	wantURLs := []string{"server https://ghcr-mirror.internal", "host http://127.0.0.1:5000", "server https://registry.k8s.io"}
	if diff := cmp.Diff(wantURLs, urls); diff != "" {
		t.Errorf("Endpoints (-want +got):\n%s", diff)
	}
}

func TestContainerdProbeScenarios(t *testing.T) {
	const badMain = "version = 2\n[grpc]\n  address = \"/run/ctd.sock\"\n[plugins.\"io.containerd.grpc.v1.cri\"\n  sandbox_image = \"x\"\n"
	const mainWithImports = `version = 2
imports = ["/etc/containerd/conf.d/*.toml", "extra.toml"]
[plugins."io.containerd.grpc.v1.cri".registry]
  config_path = "/etc/containerd/certs.d"
`
	cases := []struct {
		name    string
		files   map[string]string
		maxRead int64
		// check compares the parts of the evidence the case is about.
		want           *nodediagv1.Containerd
		wantUnreadable []string // sources
		wantSkip       bool
	}{
		{
			name:     "no sign of containerd: skipped",
			files:    map[string]string{"etc/hostname": "node\n", "usr/bin/kubelet": "#!/bin/sh\n"},
			wantSkip: true,
		},
		{
			name:  "binary without config: containerd's defaults",
			files: map[string]string{"usr/local/bin/containerd": "#!/bin/sh\n"},
			want: &nodediagv1.Containerd{ConfigFile: ctdconfig.ConfigFile, GrpcAddress: ctdconfig.DefaultGRPCAddress,
				CniConfDir: ctdconfig.DefaultCNIConfDir, CniBinDir: ctdconfig.DefaultCNIBinDir},
		},
		{
			name:  "unit without config or binary: still containerd's node",
			files: map[string]string{"lib/systemd/system/containerd.service": "[Service]\nExecStart=/usr/bin/containerd\n"},
			want: &nodediagv1.Containerd{ConfigFile: ctdconfig.ConfigFile, GrpcAddress: ctdconfig.DefaultGRPCAddress,
				CniConfDir: ctdconfig.DefaultCNIConfDir, CniBinDir: ctdconfig.DefaultCNIBinDir},
		},
		{
			name:  "malformed main config: parse error with its line, and what the lines before it say",
			files: map[string]string{"etc/containerd/config.toml": badMain},
			want: &nodediagv1.Containerd{ConfigFile: ctdconfig.ConfigFile, ConfigPresent: true, Version: 2,
				ParseError:      "toml: expected ']' to close table name",
				ParseErrorLine:  &nodediagv1.SourceLine{Path: ctdconfig.ConfigFile, Line: 4, Text: `[plugins."io.containerd.grpc.v1.cri"`},
				GrpcAddress:     "/run/ctd.sock",
				GrpcAddressLine: &nodediagv1.SourceLine{Path: ctdconfig.ConfigFile, Line: 3, Text: `  address = "/run/ctd.sock"`},
				CniConfDir:      ctdconfig.DefaultCNIConfDir, CniBinDir: ctdconfig.DefaultCNIBinDir},
		},
		{
			name:  "config.toml that is a directory: containerd cannot load it",
			files: map[string]string{"etc/containerd/config.toml/": ""},
			want: &nodediagv1.Containerd{ConfigFile: ctdconfig.ConfigFile, ConfigPresent: true,
				ParseError:  "open /etc/containerd/config.toml: not a regular file (a directory)",
				GrpcAddress: ctdconfig.DefaultGRPCAddress, CniConfDir: ctdconfig.DefaultCNIConfDir, CniBinDir: ctdconfig.DefaultCNIBinDir},
		},
		{
			name: "imports: glob in lexical order, then the relative one; a later section replaces an earlier",
			files: map[string]string{
				"etc/containerd/config.toml":           mainWithImports,
				"etc/containerd/conf.d/20-cgroup.toml": "[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n  SystemdCgroup = true\n",
				"etc/containerd/conf.d/10-grpc.toml":   "[grpc]\n  address = \"/run/a.sock\"\n",
				"etc/containerd/conf.d/README":         "not an import",
				"etc/containerd/extra.toml":            "[grpc]\n  address = \"/run/b.sock\"\n",
			},
			want: &nodediagv1.Containerd{ConfigFile: ctdconfig.ConfigFile, ConfigPresent: true, Version: 2,
				Imports:         []string{"/etc/containerd/conf.d/*.toml", "extra.toml"},
				GrpcAddress:     "/run/b.sock",
				GrpcAddressLine: &nodediagv1.SourceLine{Path: "/etc/containerd/extra.toml", Line: 2, Text: `  address = "/run/b.sock"`},
				// 20-cgroup.toml's CRI section replaced the main file's: its
				// config_path no longer applies.
				SystemdCgroup:     proto3Bool(true),
				SystemdCgroupLine: &nodediagv1.SourceLine{Path: "/etc/containerd/conf.d/20-cgroup.toml", Line: 2, Text: "  SystemdCgroup = true"},
				CniConfDir:        ctdconfig.DefaultCNIConfDir, CniBinDir: ctdconfig.DefaultCNIBinDir},
		},
		{
			name: "an import that does not exist stops containerd: parse error on the imports line",
			files: map[string]string{
				"etc/containerd/config.toml": "version = 2\nimports = [\"/etc/containerd/missing.toml\"]\n",
			},
			want: &nodediagv1.Containerd{ConfigFile: ctdconfig.ConfigFile, ConfigPresent: true, Version: 2,
				Imports:        []string{"/etc/containerd/missing.toml"},
				ParseError:     "import /etc/containerd/missing.toml: open /etc/containerd/missing.toml: no such file or directory",
				ParseErrorLine: &nodediagv1.SourceLine{Path: ctdconfig.ConfigFile, Line: 2, Text: `imports = ["/etc/containerd/missing.toml"]`},
				GrpcAddress:    ctdconfig.DefaultGRPCAddress, CniConfDir: ctdconfig.DefaultCNIConfDir, CniBinDir: ctdconfig.DefaultCNIBinDir},
		},
		{
			name: "a broken import (version 3: a relative glob is relative to the config's directory): its own line",
			files: map[string]string{
				"etc/containerd/config.toml":       "version = 3\nimports = [\"conf.d/*.toml\"]\n",
				"etc/containerd/conf.d/bad.toml":   "[grpc\n",
				"etc/containerd/conf.d/empty.toml": "",
			},
			want: &nodediagv1.Containerd{ConfigFile: ctdconfig.ConfigFile, ConfigPresent: true, Version: 3,
				Imports:        []string{"conf.d/*.toml"},
				ParseError:     "toml: expected ']' to close table name",
				ParseErrorLine: &nodediagv1.SourceLine{Path: "/etc/containerd/conf.d/bad.toml", Line: 1, Text: "[grpc"},
				GrpcAddress:    ctdconfig.DefaultGRPCAddress, CniConfDir: ctdconfig.DefaultCNIConfDir, CniBinDir: ctdconfig.DefaultCNIBinDir},
		},
		{
			name:           "unreadable config (over the read limit): recorded, the probe still reports",
			files:          map[string]string{"etc/containerd/config.toml": "version = 2\n" + strings.Repeat("# padding\n", 20)},
			maxRead:        64,
			wantUnreadable: []string{ctdconfig.ConfigFile},
			want: &nodediagv1.Containerd{ConfigFile: ctdconfig.ConfigFile, ConfigPresent: true,
				GrpcAddress: ctdconfig.DefaultGRPCAddress, CniConfDir: ctdconfig.DefaultCNIConfDir, CniBinDir: ctdconfig.DefaultCNIBinDir},
		},
		{
			name: "an unreadable hosts file is recorded; the others are still read",
			files: map[string]string{
				"etc/containerd/config.toml":               "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".registry]\nconfig_path = \"/etc/containerd/certs.d\"\n",
				"etc/containerd/certs.d/big.io/hosts.toml": "server = \"https://big.io\"\n" + strings.Repeat("# padding\n", 20),
				"etc/containerd/certs.d/ok.io/hosts.toml":  "[host.\"https://m.internal\"]\n",
			},
			maxRead:        100,
			wantUnreadable: []string{"/etc/containerd/certs.d/big.io/hosts.toml"},
			want: &nodediagv1.Containerd{ConfigFile: ctdconfig.ConfigFile, ConfigPresent: true, Version: 2,
				RegistryConfigPath:     "/etc/containerd/certs.d",
				RegistryConfigPathLine: &nodediagv1.SourceLine{Path: ctdconfig.ConfigFile, Line: 3, Text: `config_path = "/etc/containerd/certs.d"`},
				HostsFiles: []*nodediagv1.HostsFile{{
					Path: "/etc/containerd/certs.d/ok.io/hosts.toml", Registry: "ok.io",
					Endpoints: []*nodediagv1.RegistryEndpoint{{Registry: "ok.io", Url: "https://m.internal", Kind: "host",
						Line: &nodediagv1.SourceLine{Path: "/etc/containerd/certs.d/ok.io/hosts.toml", Line: 1, Text: `[host."https://m.internal"]`}}},
				}},
				GrpcAddress: ctdconfig.DefaultGRPCAddress, CniConfDir: ctdconfig.DefaultCNIConfDir, CniBinDir: ctdconfig.DefaultCNIBinDir},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pe, err := runContainerdProbe(t, tc.files, tc.maxRead)
			if tc.wantSkip {
				if !errors.Is(err, probe.ErrNotApplicable) {
					t.Fatalf("err = %v, want ErrNotApplicable", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// The plugin keys' lines are ctdconfig's to test (TestBuildPluginKeys).
			if diff := cmp.Diff(tc.want, pe.GetContainerd(), protocmp.Transform(), protocmp.IgnoreFields(&nodediagv1.Containerd{}, "plugin_keys")); diff != "" {
				t.Errorf("evidence (-want +got):\n%s", diff)
			}
			var sources []string
			for _, u := range pe.Unreadable {
				sources = append(sources, u.Source)
			}
			if diff := cmp.Diff(tc.wantUnreadable, sources); diff != "" {
				t.Errorf("unreadable (-want +got):\n%s", diff)
			}
		})
	}
}

func proto3Bool(b bool) *bool { return &b }
