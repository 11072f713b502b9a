package ctdconfig

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

const cfgPath = "/etc/containerd/config.toml"

// sl is the SourceLine of line n of src in path.
func sl(path, src string, n int) *nodediagv1.SourceLine {
	return &nodediagv1.SourceLine{Path: path, Line: int32(n), Text: strings.Split(src, "\n")[n-1]}
}

func boolp(b bool) *bool { return &b }

// defaults is what Build reports for a present file that sets nothing.
func defaults(version int32) *nodediagv1.Containerd {
	return &nodediagv1.Containerd{
		ConfigFile: cfgPath, ConfigPresent: true, Version: version,
		GrpcAddress: DefaultGRPCAddress, CniConfDir: DefaultCNIConfDir, CniBinDir: DefaultCNIBinDir,
	}
}

// with returns defaults(version) changed by f.
func with(version int32, f func(c *nodediagv1.Containerd)) *nodediagv1.Containerd {
	c := defaults(version)
	f(c)
	return c
}

// A kubeadm-style containerd 1.x configuration (version 2).
const v2Config = `version = 2
root = "/var/lib/containerd"

[grpc]
  address = "/run/containerd/containerd.sock"

[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "registry.k8s.io/pause:3.9"
    [plugins."io.containerd.grpc.v1.cri".containerd]
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = true
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = "/etc/cni/net.d"
    [plugins."io.containerd.grpc.v1.cri".registry]
      config_path = "/etc/containerd/certs.d"
`

// The containerd 2.x layout (version 3), as EKS AL2023 and
// "containerd config default" of 2.x write it.
const v3Config = `version = 3
[grpc]
address = "/run/k8s/containerd.sock"

[plugins.'io.containerd.cri.v1.images'.pinned_images]
sandbox = "localhost/kubernetes/pause"

[plugins."io.containerd.cri.v1.images".registry]
config_path = "/etc/containerd/certs.d:/etc/docker/certs.d"

[plugins.'io.containerd.cri.v1.runtime'.containerd]
default_runtime_name = "runc"

[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
BinaryName = "/usr/sbin/runc"
SystemdCgroup = false

[plugins.'io.containerd.cri.v1.runtime'.cni]
bin_dirs = ["/opt/cni/bin", "/usr/libexec/cni"]
conf_dir = "/etc/cni/net.d"
`

// The config.toml of the containerd.io package (Docker's repository): no
// version key, the CRI plugin disabled.
const dockerPackageConfig = `#   Copyright 2018-2022 Docker Inc.

disabled_plugins = ["cri"]

#root = "/var/lib/containerd"
`

// Legacy mirrors (no config_path) with the DKP endpoint without scheme, a
// localhost endpoint, and TLS and credentials in registry.configs.
const legacyConfig = `version = 2
[plugins."io.containerd.grpc.v1.cri".registry]
  [plugins."io.containerd.grpc.v1.cri".registry.mirrors]
    [plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]
      endpoint = [
        "://10.0.0.4:5000",
        "https://registry-1.docker.io",
      ]
    [plugins."io.containerd.grpc.v1.cri".registry.mirrors."127.0.0.1:5001"]
      endpoint = ["127.0.0.1:5000"]
  [plugins."io.containerd.grpc.v1.cri".registry.configs."registry-1.docker.io".tls]
    insecure_skip_verify = true
    ca_file = "/etc/ssl/mirror.pem"
  [plugins."io.containerd.grpc.v1.cri".registry.configs."registry-1.docker.io".auth]
    username = "robot"
    password = "s3cr3t-value"
`

func TestParseConfigAndBuild(t *testing.T) {
	cases := []struct {
		name string
		src  string
		want *nodediagv1.Containerd
	}{
		{
			name: "empty file: layout 1, containerd's defaults",
			src:  "",
			want: defaults(1),
		},
		{
			name: "version 2 (containerd 1.x) as kubeadm guides write it",
			src:  v2Config,
			want: with(2, func(c *nodediagv1.Containerd) {
				c.GrpcAddressLine = sl(cfgPath, v2Config, 5)
				c.SandboxImage, c.SandboxImageLine = "registry.k8s.io/pause:3.9", sl(cfgPath, v2Config, 9)
				c.SystemdCgroup, c.SystemdCgroupLine = boolp(true), sl(cfgPath, v2Config, 15)
				c.CniBinDir = "/usr/lib/cni"
				c.RegistryConfigPath, c.RegistryConfigPathLine = "/etc/containerd/certs.d", sl(cfgPath, v2Config, 20)
			}),
		},
		{
			name: "version 3 (containerd 2.x): images and runtime plugins, bin_dirs",
			src:  v3Config,
			want: with(3, func(c *nodediagv1.Containerd) {
				c.GrpcAddress, c.GrpcAddressLine = "/run/k8s/containerd.sock", sl(cfgPath, v3Config, 3)
				c.SandboxImage, c.SandboxImageLine = "localhost/kubernetes/pause", sl(cfgPath, v3Config, 6)
				c.RegistryConfigPath, c.RegistryConfigPathLine = "/etc/containerd/certs.d:/etc/docker/certs.d", sl(cfgPath, v3Config, 9)
				c.SystemdCgroup, c.SystemdCgroupLine = boolp(false), sl(cfgPath, v3Config, 16)
			}),
		},
		{
			name: "version 3 ignores the version 2 sections (containerd 2.x reads only the new plugin IDs)",
			src:  "version = 3\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"x/pause:1\"\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n  SystemdCgroup = true\n",
			want: defaults(3),
		},
		{
			name: "containerd.io package: no version key, cri disabled",
			src:  dockerPackageConfig,
			want: with(1, func(c *nodediagv1.Containerd) {
				c.DisabledPlugins = []string{"cri"}
				c.DisabledPluginsLine = sl(cfgPath, dockerPackageConfig, 3)
			}),
		},
		{
			name: "version 1 layout keys the CRI plugin by ID",
			src:  "[plugins.cri]\n  sandbox_image = \"k8s.gcr.io/pause:3.2\"\n[plugins.cri.containerd.runtimes.runc.options]\n  SystemdCgroup = true\n",
			want: with(1, func(c *nodediagv1.Containerd) {
				c.SandboxImage = "k8s.gcr.io/pause:3.2"
				c.SandboxImageLine = &nodediagv1.SourceLine{Path: cfgPath, Line: 2, Text: `  sandbox_image = "k8s.gcr.io/pause:3.2"`}
				c.SystemdCgroup = boolp(true)
				c.SystemdCgroupLine = &nodediagv1.SourceLine{Path: cfgPath, Line: 4, Text: "  SystemdCgroup = true"}
			}),
		},
		{
			name: "legacy mirrors in file order, one endpoint per array line, TLS from configs, never the auth",
			src:  legacyConfig,
			want: with(2, func(c *nodediagv1.Containerd) {
				c.LegacyMirrorsLine = sl(cfgPath, legacyConfig, 4)
				c.LegacyConfigsTlsLine = sl(cfgPath, legacyConfig, 11)
				c.LegacyMirrors = []*nodediagv1.RegistryEndpoint{
					{Registry: "docker.io", Url: "://10.0.0.4:5000", Line: sl(cfgPath, legacyConfig, 6), Kind: "mirrors"},
					{Registry: "docker.io", Url: "https://registry-1.docker.io", Line: sl(cfgPath, legacyConfig, 7), Kind: "mirrors",
						SkipVerify: true, Ca: []string{"/etc/ssl/mirror.pem"}},
					{Registry: "127.0.0.1:5001", Url: "127.0.0.1:5000", Line: sl(cfgPath, legacyConfig, 10), Kind: "mirrors", PlainHttp: true},
				}
			}),
		},
		{
			name: "a mirror entry without endpoints still counts as mirrors",
			src:  "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = \"/etc/containerd/certs.d\"\n[plugins.\"io.containerd.grpc.v1.cri\".registry.mirrors.\"docker.io\"]\n",
			want: with(2, func(c *nodediagv1.Containerd) {
				c.RegistryConfigPath = "/etc/containerd/certs.d"
				c.RegistryConfigPathLine = &nodediagv1.SourceLine{Path: cfgPath, Line: 3, Text: `  config_path = "/etc/containerd/certs.d"`}
				c.LegacyMirrorsLine = &nodediagv1.SourceLine{Path: cfgPath, Line: 4, Text: `[plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]`}
			}),
		},
		{
			name: "default_runtime_name picks the runtime whose SystemdCgroup counts",
			src:  "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n  default_runtime_name = \"nvidia\"\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n  SystemdCgroup = false\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.nvidia.options]\n  SystemdCgroup = true\n",
			want: with(2, func(c *nodediagv1.Containerd) {
				c.SystemdCgroup = boolp(true)
				c.SystemdCgroupLine = &nodediagv1.SourceLine{Path: cfgPath, Line: 7, Text: "  SystemdCgroup = true"}
			}),
		},
		{
			name: "dotted keys and inline tables have lines too",
			src:  "version = 2\nplugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc = { options = { SystemdCgroup = true } }\ngrpc.address = \"/x.sock\"\n",
			want: with(2, func(c *nodediagv1.Containerd) {
				c.SystemdCgroup = boolp(true)
				c.SystemdCgroupLine = &nodediagv1.SourceLine{Path: cfgPath, Line: 2, Text: `plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc = { options = { SystemdCgroup = true } }`}
				c.GrpcAddress = "/x.sock"
				c.GrpcAddressLine = &nodediagv1.SourceLine{Path: cfgPath, Line: 3, Text: `grpc.address = "/x.sock"`}
			}),
		},
		{
			name: "a password in an endpoint URL is redacted from the evidence",
			src:  "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".registry.mirrors.\"docker.io\"]\n  endpoint = [\"https://robot:hunter2@mirror.example:5000\"]\n",
			want: with(2, func(c *nodediagv1.Containerd) {
				c.LegacyMirrorsLine = &nodediagv1.SourceLine{Path: cfgPath, Line: 2, Text: `[plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]`}
				c.LegacyMirrors = []*nodediagv1.RegistryEndpoint{{
					Registry: "docker.io", Url: "https://robot:[REDACTED]@mirror.example:5000", Kind: "mirrors",
					Line: &nodediagv1.SourceLine{Path: cfgPath, Line: 3, Text: `  endpoint = ["https://robot:[REDACTED]@mirror.example:5000"]`},
				}}
			}),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ParseConfig(cfgPath, []byte(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			got := Build([]*File{f})
			// The plugin keys' lines have a test of their own.
			if diff := cmp.Diff(tc.want, got, protocmp.Transform(), protocmp.IgnoreFields(&nodediagv1.Containerd{}, "plugin_keys")); diff != "" {
				t.Errorf("Build (-want +got):\n%s", diff)
			}
			if strings.Contains(got.String(), "s3cr3t") || strings.Contains(got.String(), "hunter2") {
				t.Errorf("a credential reached the evidence: %v", got)
			}
		})
	}
}

func TestParseConfigErrors(t *testing.T) {
	cases := []struct {
		name     string
		src      string
		wantLine int
		wantMsg  string
	}{
		{"unclosed table key", "version = 2\n[plugins\n", 2, "toml:"},
		{"duplicated table", "version = 2\n[grpc]\n[grpc]\n", 3, "toml:"},
		{"control character in a string", "version = 2\nroot = \"/var\n/lib\"\n", 2, "toml:"},
		{"table redefines a key", "a = 1\n[a]\n", 2, "toml:"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig(cfgPath, []byte(tc.src))
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("ParseConfig error = %v, want a *ParseError", err)
			}
			if pe.Line != tc.wantLine || !strings.Contains(pe.Msg, tc.wantMsg) || pe.Path != cfgPath {
				t.Errorf("ParseError = %+v, want line %d and a message with %q", pe, tc.wantLine, tc.wantMsg)
			}
		})
	}
}

func TestBuildMergesImports(t *testing.T) {
	const main = `version = 2
imports = ["/etc/containerd/conf.d/*.toml"]
disabled_plugins = ["io.containerd.internal.v1.tracing"]
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.9"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
    SystemdCgroup = true
`
	const dropIn = `disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "/run/other.sock"
[plugins."io.containerd.grpc.v1.cri".registry]
  config_path = "/etc/containerd/certs.d"
`
	const dropInPath = "/etc/containerd/conf.d/10-registry.toml"
	m, err := ParseConfig(cfgPath, []byte(main))
	if err != nil {
		t.Fatal(err)
	}
	d, err := ParseConfig(dropInPath, []byte(dropIn))
	if err != nil {
		t.Fatal(err)
	}
	// The drop-in's CRI section replaces the main file's whole: its
	// sandbox_image and SystemdCgroup no longer apply (containerd's
	// mergeConfig replaces a plugin's section).
	want := with(2, func(c *nodediagv1.Containerd) {
		c.Imports = []string{"/etc/containerd/conf.d/*.toml"}
		c.GrpcAddress, c.GrpcAddressLine = "/run/other.sock", sl(dropInPath, dropIn, 3)
		c.DisabledPlugins = []string{"io.containerd.internal.v1.tracing", "io.containerd.grpc.v1.cri"}
		c.DisabledPluginsLine = sl(dropInPath, dropIn, 1)
		c.RegistryConfigPath, c.RegistryConfigPathLine = "/etc/containerd/certs.d", sl(dropInPath, dropIn, 5)
		// Each file's plugin keys, where they are written.
		c.PluginKeys = []*nodediagv1.SourceLine{sl(cfgPath, main, 4), sl(dropInPath, dropIn, 4)}
	})
	got := Build([]*File{m, d})
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("Build (-want +got):\n%s", diff)
	}
}

// A top-level table containerd has no section for is recorded with its
// line: a misspelt [plugin....] configures nothing. Known sections and
// scalar keys are not.
func TestBuildUnknownTables(t *testing.T) {
	src := `version = 2
root = "/var/lib/containerd"
[grpc]
  address = "/run/containerd/containerd.sock"
[plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]
  endpoint = ["https://registry-1.docker.io"]
[plugin."io.containerd.grpc.v1.cri".registry.mirrors."reg.example"]
  endpoint = ["http://reg.example:5000"]
[proxy_plugins.stargz]
  type = "snapshot"
[ttrpc]
[metric]
  address = "127.0.0.1:1338"
`
	f, err := ParseConfig(cfgPath, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	got := Build([]*File{f}).GetUnknownTables()
	want := []*nodediagv1.SourceLine{sl(cfgPath, src, 7), sl(cfgPath, src, 12)}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("unknown tables (-want +got):\n%s", diff)
	}
}

// Every key under [plugins] is recorded with the line that writes it, so
// that a key containerd refuses can be quoted.
func TestBuildPluginKeys(t *testing.T) {
	src := `version = 2
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.9"
[plugins."containerd.runtime.v1.linux"]
  shim_debug = true
[plugins.cri.containerd]
  snapshotter = "overlayfs"
`
	f, err := ParseConfig(cfgPath, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	got := Build([]*File{f}).GetPluginKeys()
	want := []*nodediagv1.SourceLine{sl(cfgPath, src, 2), sl(cfgPath, src, 4), sl(cfgPath, src, 6)}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("plugin keys (-want +got):\n%s", diff)
	}
}
