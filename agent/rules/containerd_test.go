package rules

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nodediag/nodediag/agent/ctdconfig"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

var ctClock = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

const ctCfg = "/etc/containerd/config.toml"

func ctLine(path string, n int32, text string) *nodediagv1.SourceLine {
	return &nodediagv1.SourceLine{Path: path, Line: n, Text: text}
}

// ctConfig is a loaded version 2 configuration with containerd's defaults,
// changed by f.
func ctConfig(f func(c *nodediagv1.Containerd)) *nodediagv1.Containerd {
	c := &nodediagv1.Containerd{ConfigFile: ctCfg, ConfigPresent: true, Version: 2,
		GrpcAddress: "/run/containerd/containerd.sock", CniConfDir: "/etc/cni/net.d", CniBinDir: "/opt/cni/bin"}
	if f != nil {
		f(c)
	}
	return c
}

// ctEvidence is the evidence of the cases: the containerd-config probe's,
// and what other probes say that the rules weigh.
type ctEvidence struct {
	containerd *nodediagv1.Containerd
	kubelet    *nodediagv1.KubeletConfig
	runtime    *nodediagv1.Runtime
	binaries   []*nodediagv1.Binary
	logs       []*nodediagv1.LogExcerpt
}

func (e ctEvidence) evidence() *nodediagv1.Evidence {
	ev := &nodediagv1.Evidence{CollectedAt: timestamppb.New(ctClock)}
	add := func(name string, pe *nodediagv1.ProbeEvidence) {
		pe.Name, pe.Status = name, "ok"
		ev.Probes = append(ev.Probes, pe)
	}
	if e.containerd != nil {
		add("containerd-config", &nodediagv1.ProbeEvidence{Data: &nodediagv1.ProbeEvidence_Containerd{Containerd: e.containerd}})
	}
	if e.kubelet != nil {
		add("kubelet-config", &nodediagv1.ProbeEvidence{Data: &nodediagv1.ProbeEvidence_KubeletConfig{KubeletConfig: e.kubelet}})
	}
	if e.runtime != nil {
		add("runtime", &nodediagv1.ProbeEvidence{Data: &nodediagv1.ProbeEvidence_Runtime{Runtime: e.runtime}})
	}
	if e.binaries != nil {
		add("binaries", &nodediagv1.ProbeEvidence{Data: &nodediagv1.ProbeEvidence_Binaries{Binaries: &nodediagv1.Binaries{Binaries: e.binaries}}})
	}
	if e.logs != nil {
		add("logs", &nodediagv1.ProbeEvidence{Data: &nodediagv1.ProbeEvidence_Logs{Logs: &nodediagv1.Logs{Sources: e.logs}}})
	}
	return ev
}

func (e ctEvidence) input() *Input {
	return &Input{Ev: e.evidence(), Clock: ctClock, Until: ctClock}
}

func runContainerdRules(in *Input) []*nodediagv1.Finding {
	var out []*nodediagv1.Finding
	for _, r := range containerdRules {
		out = append(out, r.Fn(in)...)
	}
	return out
}

func ctKubeletConfig(driver string, line int32) *nodediagv1.KubeletConfig {
	cf := &nodediagv1.KubeletConfigFile{Path: "/var/lib/kubelet/config.yaml", Present: true, CgroupDriver: driver}
	if driver != "" {
		cf.CgroupDriverLine = ctLine(cf.Path, line, "cgroupDriver: "+driver)
	}
	return &nodediagv1.KubeletConfig{Config: cf}
}

func ctBinary(name, v string) *nodediagv1.Binary {
	return &nodediagv1.Binary{Name: name, Path: "/usr/bin/" + name, Version: v, Command: "/usr/bin/" + name + " --version", Output: name + " " + v, Effective: true, Method: "exec"}
}

func boolPtr(b bool) *bool { return &b }

func TestContainerdRules(t *testing.T) {
	systemdOn := func(c *nodediagv1.Containerd) {
		c.SystemdCgroup = boolPtr(true)
		c.SystemdCgroupLine = ctLine(ctCfg, 12, "            SystemdCgroup = true")
	}
	legacyDKP := func(c *nodediagv1.Containerd) {
		c.LegacyMirrorsLine = ctLine(ctCfg, 3, `[plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]`)
		c.LegacyMirrors = []*nodediagv1.RegistryEndpoint{
			{Registry: "docker.io", Url: "://10.0.0.4:5000", Kind: "mirrors", Line: ctLine(ctCfg, 4, `  endpoint = ["://10.0.0.4:5000"]`)},
		}
	}
	configPath := func(c *nodediagv1.Containerd) {
		c.RegistryConfigPath = "/etc/containerd/certs.d"
		c.RegistryConfigPathLine = ctLine(ctCfg, 7, `    config_path = "/etc/containerd/certs.d"`)
	}
	hostsFile := func(reg string, errText string, errLine *nodediagv1.SourceLine, eps ...*nodediagv1.RegistryEndpoint) *nodediagv1.HostsFile {
		return &nodediagv1.HostsFile{Path: "/etc/containerd/certs.d/" + reg + "/hosts.toml", Registry: reg, Error: errText, ErrorLine: errLine, Endpoints: eps}
	}
	hostLine := func(reg string, n int32, text string) *nodediagv1.SourceLine {
		return ctLine("/etc/containerd/certs.d/"+reg+"/hosts.toml", n, text)
	}
	cases := []struct {
		name string
		ev   ctEvidence
		want []utGot
	}{
		{
			name: "a sound configuration: nothing",
			ev: ctEvidence{containerd: ctConfig(func(c *nodediagv1.Containerd) {
				systemdOn(c)
				configPath(c)
				c.HostsFiles = []*nodediagv1.HostsFile{hostsFile("registry.k8s.io", "", nil,
					&nodediagv1.RegistryEndpoint{Url: "http://127.0.0.1:5000", Kind: "host", Line: hostLine("registry.k8s.io", 2, `[host."http://127.0.0.1:5000"]`)},
					&nodediagv1.RegistryEndpoint{Url: "registry.k8s.io", Kind: "server", Line: hostLine("registry.k8s.io", 1, `server = "registry.k8s.io"`)})}
			}), kubelet: ctKubeletConfig("systemd", 5)},
		},
		{
			name: "config.toml does not parse: the cause, with its line",
			ev: ctEvidence{containerd: &nodediagv1.Containerd{ConfigFile: ctCfg, ConfigPresent: true, Version: 2,
				ParseError: "toml: expected '.' or ']' to end table name", ParseErrorLine: ctLine(ctCfg, 4, `[plugins."io.containerd.grpc.v1.cri"`)}},
			want: []utGot{{ID: "ContainerdConfigInvalid", Confidence: High,
				Title:  "containerd cannot load its configuration /etc/containerd/config.toml: toml: expected '.' or ']' to end table name",
				Quotes: []string{`/etc/containerd/config.toml: [plugins."io.containerd.grpc.v1.cri"`}}},
		},
		{
			name: "a missing import: the imports line",
			ev: ctEvidence{containerd: &nodediagv1.Containerd{ConfigFile: ctCfg, ConfigPresent: true, Version: 2,
				ParseError:     "import /etc/containerd/conf.d/x.toml: open /etc/containerd/conf.d/x.toml: no such file or directory",
				ParseErrorLine: ctLine(ctCfg, 2, `imports = ["conf.d/x.toml"]`)}},
			want: []utGot{{ID: "ContainerdConfigInvalid", Confidence: High,
				Title:  "containerd cannot load its configuration /etc/containerd/config.toml: import /etc/containerd/conf.d/x.toml: open /etc/containerd/conf.d/x.toml: no such file or directory",
				Quotes: []string{`/etc/containerd/config.toml: imports = ["conf.d/x.toml"]`}}},
		},
		{
			name: "containerd.io package: cri disabled in a version 1 file",
			ev: ctEvidence{containerd: ctConfig(func(c *nodediagv1.Containerd) {
				c.Version = 1
				c.DisabledPlugins = []string{"cri"}
				c.DisabledPluginsLine = ctLine(ctCfg, 15, `disabled_plugins = ["cri"]`)
			})},
			want: []utGot{{ID: "RuntimeCRIDisabled", Confidence: High, Title: "containerd runs but does not serve the CRI",
				Quotes: []string{`/etc/containerd/config.toml: disabled_plugins = ["cri"]`}}},
		},
		{
			name: `"cri" in a version 2 file: containerd refuses the file (entries are plugin URIs there)`,
			ev: ctEvidence{containerd: ctConfig(func(c *nodediagv1.Containerd) {
				c.DisabledPlugins = []string{"cri"}
				c.DisabledPluginsLine = ctLine(ctCfg, 2, `disabled_plugins = ["cri"]`)
			})},
			want: []utGot{{ID: "ContainerdConfigInvalid", Confidence: High,
				Title:  `containerd cannot load its configuration /etc/containerd/config.toml: invalid disabled plugin URI "cri" expect io.containerd.x.vx`,
				Quotes: []string{`/etc/containerd/config.toml: disabled_plugins = ["cri"]`}}},
		},
		{
			name: `"io.containerd.snapshotter" in a version 2 file: containerd 1.x wants four parts`,
			ev: ctEvidence{containerd: ctConfig(func(c *nodediagv1.Containerd) {
				c.DisabledPlugins = []string{"io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter"}
				c.DisabledPluginsLine = ctLine(ctCfg, 2, `disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter"]`)
			}), runtime: &nodediagv1.Runtime{State: "ok", RuntimeName: "containerd", RuntimeVersion: "1.7.24"}},
			want: []utGot{{ID: "ContainerdConfigInvalid", Confidence: High,
				Title:  `containerd cannot load its configuration /etc/containerd/config.toml: invalid disabled plugin URI "io.containerd.snapshotter" expect io.containerd.x.vx`,
				Quotes: []string{`/etc/containerd/config.toml: disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter"]`}}},
		},
		{
			name: "the same on containerd 2.x: a dot is enough",
			ev: ctEvidence{containerd: ctConfig(func(c *nodediagv1.Containerd) {
				c.DisabledPlugins = []string{"io.containerd.snapshotter"}
				c.DisabledPluginsLine = ctLine(ctCfg, 2, `disabled_plugins = ["io.containerd.snapshotter"]`)
			}), runtime: &nodediagv1.Runtime{State: "ok", RuntimeName: "containerd", RuntimeVersion: "2.1.4"}},
		},
		{
			name: "cri disabled in the file but the CRI answers: the file changed after the start, not judged",
			ev: ctEvidence{containerd: ctConfig(func(c *nodediagv1.Containerd) {
				c.Version = 1
				c.DisabledPlugins = []string{"cri"}
				c.DisabledPluginsLine = ctLine(ctCfg, 15, `disabled_plugins = ["cri"]`)
			}), runtime: &nodediagv1.Runtime{State: "ok", RuntimeName: "containerd", RuntimeVersion: "1.7.24"}},
		},
		{
			name: "version 3: disabling the images plugin stops the CRI",
			ev: ctEvidence{containerd: ctConfig(func(c *nodediagv1.Containerd) {
				c.Version = 3
				c.DisabledPlugins = []string{"io.containerd.cri.v1.images"}
				c.DisabledPluginsLine = ctLine(ctCfg, 2, `disabled_plugins = ["io.containerd.cri.v1.images"]`)
			})},
			want: []utGot{{ID: "RuntimeCRIDisabled", Confidence: High, Title: "containerd runs but does not serve the CRI",
				Quotes: []string{`/etc/containerd/config.toml: disabled_plugins = ["io.containerd.cri.v1.images"]`}}},
		},
		{
			name: "config_path with the old mirrors: CRI does not load (the registry section is the cause); the mirrors are not judged as endpoints",
			ev: ctEvidence{containerd: ctConfig(func(c *nodediagv1.Containerd) {
				configPath(c)
				legacyDKP(c)
			})},
			want: []utGot{{ID: "RegistryMirrorsWithConfigPath", Confidence: High, Title: "/etc/containerd/config.toml sets registry mirrors (or TLS configs) in the CRI plugin together with config_path: containerd refuses to load its CRI plugin",
				Quotes: []string{
					`/etc/containerd/config.toml: [plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]`,
					`/etc/containerd/config.toml:     config_path = "/etc/containerd/certs.d"`,
				}}},
		},
		{
			name: "config_path with configs.tls on containerd 1.x: CRI does not load",
			ev: ctEvidence{containerd: ctConfig(func(c *nodediagv1.Containerd) {
				configPath(c)
				c.LegacyConfigsTlsLine = ctLine(ctCfg, 9, `[plugins."io.containerd.grpc.v1.cri".registry.configs."r.io".tls]`)
			}), runtime: &nodediagv1.Runtime{State: "no-cri", RuntimeName: "containerd", RuntimeVersion: "1.6.20~ds1"}},
			want: []utGot{{ID: "RegistryMirrorsWithConfigPath", Confidence: High, Title: "/etc/containerd/config.toml sets registry mirrors (or TLS configs) in the CRI plugin together with config_path: containerd refuses to load its CRI plugin",
				Quotes: []string{
					`/etc/containerd/config.toml: [plugins."io.containerd.grpc.v1.cri".registry.configs."r.io".tls]`,
					`/etc/containerd/config.toml:     config_path = "/etc/containerd/certs.d"`,
				}}},
		},
		{
			name: "config_path with configs.tls on containerd 2.x: only a deprecation warning",
			ev: ctEvidence{containerd: ctConfig(func(c *nodediagv1.Containerd) {
				configPath(c)
				c.LegacyConfigsTlsLine = ctLine(ctCfg, 9, `[plugins."io.containerd.grpc.v1.cri".registry.configs."r.io".tls]`)
			}), binaries: []*nodediagv1.Binary{ctBinary("containerd", "v2.0.4")}},
		},
		{
			name: "DKP: legacy mirror with an empty scheme",
			ev:   ctEvidence{containerd: ctConfig(legacyDKP)},
			want: []utGot{{ID: "RegistryEndpointInvalid", Confidence: High,
				Title:  `a registry or mirror endpoint is malformed: mirror "://10.0.0.4:5000" of docker.io: containerd cannot parse it (parse "://10.0.0.4:5000": missing protocol scheme) and fails every pull of the registry`,
				Quotes: []string{`/etc/containerd/config.toml:   endpoint = ["://10.0.0.4:5000"]`}}},
		},
		{
			name: "legacy mirror host:port without scheme is fine (containerd adds one)",
			ev: ctEvidence{containerd: ctConfig(func(c *nodediagv1.Containerd) {
				c.LegacyMirrors = []*nodediagv1.RegistryEndpoint{{Registry: "docker.io", Url: "10.0.0.4:5000", Kind: "mirrors", Line: ctLine(ctCfg, 4, `endpoint = ["10.0.0.4:5000"]`)}}
			})},
		},
		{
			name: "hosts files: a broken one, a directory, and bad hosts: one finding with every line",
			ev: ctEvidence{containerd: ctConfig(func(c *nodediagv1.Containerd) {
				configPath(c)
				legacyDKP(c) // not in effect with config_path: not judged here
				c.LegacyMirrorsLine = nil
				c.HostsFiles = []*nodediagv1.HostsFile{
					hostsFile("127.0.0.1_5000_", "open /etc/containerd/certs.d/127.0.0.1_5000_/hosts.toml: not a regular file (a directory)", nil),
					hostsFile("docker.io", "failed to parse TOML: toml: basic strings cannot have new lines", hostLine("docker.io", 1, `server = "https://registry-1.docker.io`)),
					hostsFile("registry.k8s.io", "", nil,
						&nodediagv1.RegistryEndpoint{Url: "://127.0.0.1:5000", Kind: "host", Line: hostLine("registry.k8s.io", 2, `[host."://127.0.0.1:5000"]`)},
						&nodediagv1.RegistryEndpoint{Url: "https://https://127.0.0.1:5000", Kind: "host", Line: hostLine("registry.k8s.io", 4, `[host."https://https://127.0.0.1:5000"]`)},
						&nodediagv1.RegistryEndpoint{Url: "https://registry.k8s.io", Kind: "server", Line: hostLine("registry.k8s.io", 1, `server = "https://registry.k8s.io"`)}),
				}
			})},
			want: []utGot{{ID: "RegistryEndpointInvalid", Confidence: High,
				Title: "a registry or mirror endpoint is malformed: /etc/containerd/certs.d/127.0.0.1_5000_/hosts.toml is not a file: every pull of 127.0.0.1_5000_ fails (open /etc/containerd/certs.d/127.0.0.1_5000_/hosts.toml: not a regular file (a directory)) (and 3 more)",
				Quotes: []string{
					"/etc/containerd/certs.d/127.0.0.1_5000_/hosts.toml: open /etc/containerd/certs.d/127.0.0.1_5000_/hosts.toml: not a regular file (a directory)",
					`/etc/containerd/certs.d/docker.io/hosts.toml: server = "https://registry-1.docker.io`,
					`/etc/containerd/certs.d/registry.k8s.io/hosts.toml: [host."://127.0.0.1:5000"]`,
					`/etc/containerd/certs.d/registry.k8s.io/hosts.toml: [host."https://https://127.0.0.1:5000"]`,
				}}},
		},
		{
			name: "server-only hosts file on containerd 1.6: ignored",
			ev: ctEvidence{containerd: ctConfig(func(c *nodediagv1.Containerd) {
				configPath(c)
				c.HostsFiles = []*nodediagv1.HostsFile{hostsFile("10.0.0.4:5000", "invalid `host` tree", nil,
					&nodediagv1.RegistryEndpoint{Url: "http://10.0.0.4:5000", Kind: "server", Line: hostLine("10.0.0.4:5000", 1, `server = "http://10.0.0.4:5000"`)})}
			}), runtime: &nodediagv1.Runtime{State: "ok", RuntimeName: "containerd", RuntimeVersion: "1.6.20~ds1"}},
			want: []utGot{{ID: "RegistryEndpointInvalid", Confidence: High,
				Title:  "a registry or mirror endpoint is malformed: containerd 1.x ignores /etc/containerd/certs.d/10.0.0.4:5000/hosts.toml (no [host] table: \"invalid `host` tree\") and pulls 10.0.0.4:5000 from the upstream registry",
				Quotes: []string{"/etc/containerd/certs.d/10.0.0.4:5000/hosts.toml: invalid `host` tree"}}},
		},
		{
			name: "server-only hosts file on containerd 2.x (version 3 layout): used",
			ev: ctEvidence{containerd: ctConfig(func(c *nodediagv1.Containerd) {
				c.Version = 3
				configPath(c)
				c.HostsFiles = []*nodediagv1.HostsFile{hostsFile("10.0.0.4:5000", "invalid `host` tree", nil,
					&nodediagv1.RegistryEndpoint{Url: "http://10.0.0.4:5000", Kind: "server", Line: hostLine("10.0.0.4:5000", 1, `server = "http://10.0.0.4:5000"`)})}
			})},
		},
		{
			name: "server-only hosts file on containerd 1.7.32: used",
			ev: ctEvidence{containerd: ctConfig(func(c *nodediagv1.Containerd) {
				configPath(c)
				c.HostsFiles = []*nodediagv1.HostsFile{hostsFile("10.0.0.4:5000", "invalid `host` tree", nil)}
			}), binaries: []*nodediagv1.Binary{ctBinary("containerd", "v1.7.32")}},
		},
		{
			name: "the referrers capability on containerd 2.2: valid",
			ev: ctEvidence{containerd: ctConfig(func(c *nodediagv1.Containerd) {
				configPath(c)
				c.HostsFiles = []*nodediagv1.HostsFile{hostsFile("docker.io", "", nil,
					&nodediagv1.RegistryEndpoint{Url: "https://mirror.internal", Kind: "host", Capabilities: []string{"pull", "resolve", "referrers"}, Line: hostLine("docker.io", 1, `[host."https://mirror.internal"]`)})}
			}), binaries: []*nodediagv1.Binary{ctBinary("containerd", "v2.2.0")}},
		},
		{
			name: "the referrers capability with containerd's version unknown: not judged",
			ev: ctEvidence{containerd: ctConfig(func(c *nodediagv1.Containerd) {
				configPath(c)
				c.HostsFiles = []*nodediagv1.HostsFile{hostsFile("docker.io", "", nil,
					&nodediagv1.RegistryEndpoint{Url: "https://mirror.internal", Kind: "host", Capabilities: []string{"pull", "resolve", "referrers"}, Line: hostLine("docker.io", 1, `[host."https://mirror.internal"]`)})}
			})},
		},
		{
			name: "the referrers capability on containerd 1.7: the file is ignored",
			ev: ctEvidence{containerd: ctConfig(func(c *nodediagv1.Containerd) {
				configPath(c)
				c.HostsFiles = []*nodediagv1.HostsFile{hostsFile("docker.io", "", nil,
					&nodediagv1.RegistryEndpoint{Url: "https://mirror.internal", Kind: "host", Capabilities: []string{"pull", "resolve", "referrers"}, Line: hostLine("docker.io", 1, `[host."https://mirror.internal"]`)})}
			}), binaries: []*nodediagv1.Binary{ctBinary("containerd", "v1.7.27")}},
			want: []utGot{{ID: "RegistryEndpointInvalid", Confidence: High,
				Title:  `a registry or mirror endpoint is malformed: capability "referrers" of https://mirror.internal in /etc/containerd/certs.d/docker.io/hosts.toml: containerd 1.7.27 knows it only from 2.2, refuses it ("unknown capability referrers") and ignores the whole file`,
				Quotes: []string{`/etc/containerd/certs.d/docker.io/hosts.toml: [host."https://mirror.internal"]`}}},
		},
		{
			name: "cgroup drivers: kubelet systemd, containerd without SystemdCgroup (cgroupfs)",
			ev:   ctEvidence{containerd: ctConfig(nil), kubelet: ctKubeletConfig("systemd", 7)},
			want: []utGot{{ID: "KubeletCgroupDriverMismatch", Confidence: High, Title: "kubelet and the runtime disagree on the cgroup driver",
				Quotes: []string{
					"/var/lib/kubelet/config.yaml: cgroupDriver: systemd",
					"/etc/containerd/config.toml: SystemdCgroup not set in the default runtime's runc options: containerd uses cgroupfs",
				}}},
		},
		{
			name: "cgroup drivers: kubelet file without cgroupDriver (cgroupfs), containerd systemd",
			ev:   ctEvidence{containerd: ctConfig(systemdOn), kubelet: ctKubeletConfig("", 0)},
			want: []utGot{{ID: "KubeletCgroupDriverMismatch", Confidence: High, Title: "kubelet and the runtime disagree on the cgroup driver",
				Quotes: []string{
					"/var/lib/kubelet/config.yaml: cgroupDriver not set: the kubelet uses cgroupfs",
					"/etc/containerd/config.toml:             SystemdCgroup = true",
				}}},
		},
		{
			name: "cgroup drivers: an active --cgroup-driver flag wins over the file",
			ev: ctEvidence{containerd: ctConfig(systemdOn), kubelet: func() *nodediagv1.KubeletConfig {
				kc := ctKubeletConfig("cgroupfs", 4)
				kc.Flags = []*nodediagv1.KubeletFlag{{Name: "cgroup-driver", Value: "systemd", Active: true,
					Source: ctLine("/etc/default/kubelet", 1, "KUBELET_EXTRA_ARGS=--cgroup-driver=systemd")}}
				return kc
			}()},
		},
		{
			name: "cgroup drivers: kubelet 1.31+ with containerd 2.x takes the driver from the CRI",
			ev: ctEvidence{containerd: ctConfig(func(c *nodediagv1.Containerd) { c.Version = 3 }), kubelet: ctKubeletConfig("systemd", 7),
				binaries: []*nodediagv1.Binary{ctBinary("kubelet", "v1.31.2")}},
		},
		{
			name: "cgroup drivers: kubelet 1.30 with containerd 2.x still uses its own",
			ev: ctEvidence{containerd: ctConfig(func(c *nodediagv1.Containerd) { c.Version = 3 }), kubelet: ctKubeletConfig("systemd", 7),
				binaries: []*nodediagv1.Binary{ctBinary("kubelet", "v1.30.5")}},
			want: []utGot{{ID: "KubeletCgroupDriverMismatch", Confidence: High, Title: "kubelet and the runtime disagree on the cgroup driver",
				Quotes: []string{
					"/var/lib/kubelet/config.yaml: cgroupDriver: systemd",
					"/etc/containerd/config.toml: SystemdCgroup not set in the default runtime's runc options: containerd uses cgroupfs",
				}}},
		},
		{
			name: "cgroup drivers: no containerd config file: not judged",
			ev:   ctEvidence{containerd: &nodediagv1.Containerd{ConfigFile: ctCfg}, kubelet: ctKubeletConfig("systemd", 7)},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := utSummary(runContainerdRules(tc.ev.input()))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
		})
	}
}

// TestJudgeEndpoint documents what containerd does with each form of
// endpoint (REPORT.md section 4 reproduced the errors with containerd
// 1.6.20; the code paths are the same in 2.x).
func TestJudgeEndpoint(t *testing.T) {
	cases := []struct {
		name string
		kind endpointKind
		raw  string
		want string
	}{
		// registry.mirrors endpoints (pkg/cri/server/image_pull.go).
		{"mirror with scheme", legacyMirror, "https://mirror.example:5000", ""},
		{"mirror host:port: addDefaultScheme adds https", legacyMirror, "mirror.example:5000", ""},
		{"mirror on localhost: addDefaultScheme adds http", legacyMirror, "127.0.0.1:5000", ""},
		{"DKP: empty scheme fails every pull", legacyMirror, "://10.0.0.4:5000",
			`containerd cannot parse it (parse "://10.0.0.4:5000": missing protocol scheme) and fails every pull of the registry`},
		{"DKP: empty scheme with a path", legacyMirror, ":///v2/registry.example/dkp",
			`containerd cannot parse it (parse ":///v2/registry.example/dkp": missing protocol scheme) and fails every pull of the registry`},
		{"no host name: https://:5000 (tls: either ServerName or InsecureSkipVerify)", legacyMirror, ":5000", "it has no host name"},
		{"scheme twice", legacyMirror, "https://https://10.0.0.4:5000", `its scheme is written twice: containerd dials a host named "https"`},
		{"not http", legacyMirror, "docker://10.0.0.4:5000", `its scheme "docker" is not http or https (unsupported protocol scheme)`},
		{"mirror with user info, as the evidence holds it (redacted)", legacyMirror, "https://robot:[REDACTED]@mirror.example:5000", ""},
		{"host with user info, redacted", hostsEntry, "https://robot:[REDACTED]@mirror.example:5000", ""},
		{"broken IPv6", legacyMirror, "https://[::1", `containerd cannot parse it (parse "https://[::1": missing ']' in host) and fails every pull of the registry`},
		// hosts.toml host and server (remotes/docker/config/hosts.go).
		{"host with scheme", hostsEntry, "http://127.0.0.1:5000", ""},
		{"host without scheme: https:// prepended (an http registry then fails with 'server gave HTTP response to HTTPS client')", hostsEntry, "127.0.0.1:5000", ""},
		{"server without scheme", hostsEntry, "registry.k8s.io", ""},
		{"host with an empty scheme: no Host in request URL", hostsEntry, "://127.0.0.1:5000", "its scheme is empty, so it has no host (http: no Host in request URL)"},
		{"host with the scheme twice: lookup https", hostsEntry, "https://https://127.0.0.1:5000", `its scheme is written twice: containerd dials a host named "https"`},
		{"host starting with http but no scheme", hostsEntry, "httpmirror:5000", `its scheme "httpmirror" is not http or https (unsupported protocol scheme)`},
		{"host that does not parse: the file's error, not the endpoint's", hostsEntry, "https://[::1", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := judgeEndpoint(tc.kind, tc.raw); got != tc.want {
				t.Errorf("judgeEndpoint(%q) = %q, want %q", tc.raw, got, tc.want)
			}
		})
	}
}

// The journal line that shows the effect joins the configuration line that
// shows the cause: one finding, both quotes.
func TestContainerdFindingsTakeTheJournalLine(t *testing.T) {
	e, err := NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	journal := `time="2024-05-01T11:58:00Z" level=error msg="PullImage \"docker.io/library/nginx:1.25\" failed" error="failed to pull and unpack image \"docker.io/library/nginx:1.25\": failed to resolve reference \"docker.io/library/nginx:1.25\": get registry endpoints: parse endpoint url: parse \"://10.0.0.4:5000\": missing protocol scheme"`
	ev := ctEvidence{
		containerd: ctConfig(func(c *nodediagv1.Containerd) {
			c.LegacyMirrors = []*nodediagv1.RegistryEndpoint{{Registry: "docker.io", Url: "://10.0.0.4:5000", Kind: "mirrors", Line: ctLine(ctCfg, 4, `  endpoint = ["://10.0.0.4:5000"]`)}}
		}),
		logs: []*nodediagv1.LogExcerpt{{Source: "journal:containerd.service", Kind: "containerd", Lines: []*nodediagv1.LogLine{
			{N: 12, Text: journal, Time: timestamppb.New(ctClock.Add(-2 * time.Minute))},
		}}},
	}.evidence()
	res := e.Analyze(ev, Context{Now: ctClock})
	var got []utGot
	for _, f := range res.Findings {
		if f.Id == "RegistryEndpointInvalid" {
			got = append(got, utSummary([]*nodediagv1.Finding{f})...)
		}
	}
	if len(got) != 1 || len(got[0].Quotes) != 2 {
		t.Fatalf("RegistryEndpointInvalid findings = %+v, want one with the config line and the journal line", got)
	}
	if got[0].Quotes[0] != `/etc/containerd/config.toml:   endpoint = ["://10.0.0.4:5000"]` {
		t.Errorf("first quote = %q, want the configuration line", got[0].Quotes[0])
	}
}

// containerd's refusal of a plugin key is quoted with the line that writes
// the key; a key it names that no file writes leaves the journal's line alone.
func TestContainerdRefusedPluginKey(t *testing.T) {
	e, err := NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	journal := `containerd: failed to load TOML from /etc/containerd/config.toml: invalid plugin key URI "containerd.runtime.v1.linux" expect io.containerd.x.vx`
	run := func(keys ...*nodediagv1.SourceLine) []string {
		ev := ctEvidence{
			containerd: ctConfig(func(c *nodediagv1.Containerd) { c.PluginKeys = keys }),
			logs: []*nodediagv1.LogExcerpt{{Source: "journal:containerd.service", Kind: "containerd", Lines: []*nodediagv1.LogLine{
				{N: 3, Text: journal, Time: timestamppb.New(ctClock.Add(-2 * time.Minute))},
			}}},
		}.evidence()
		for _, f := range e.Analyze(ev, Context{Now: ctClock}).Findings {
			if f.Id == "ContainerdConfigInvalid" {
				return utSummary([]*nodediagv1.Finding{f})[0].Quotes
			}
		}
		return nil
	}
	header := ctLine(ctCfg, 33, `    [plugins."containerd.runtime.v1.linux"]`)
	got := run(ctLine(ctCfg, 5, `[plugins."io.containerd.grpc.v1.cri"]`), header)
	if len(got) != 2 || got[0] != ctCfg+`:     [plugins."containerd.runtime.v1.linux"]` || !strings.Contains(got[1], "invalid plugin key URI") {
		t.Errorf("quotes = %q, want the key's line, then containerd's", got)
	}
	if got := run(ctLine(ctCfg, 5, `[plugins."io.containerd.grpc.v1.cri"]`)); len(got) != 1 || !strings.Contains(got[0], "invalid plugin key URI") {
		t.Errorf("no file writes the key: quotes = %q, want containerd's line only", got)
	}
}

// The rules' copies of the probe's words agree with the probe.
func TestContainerdConstantsMatchTheProbe(t *testing.T) {
	pairs := [][2]string{
		{pluginCRIv1, ctdconfig.PluginCRIv1}, {pluginCRI, ctdconfig.PluginCRI},
		{pluginCRIImages, ctdconfig.PluginCRIImages}, {pluginCRIRuntime, ctdconfig.PluginCRIRuntime},
		{errInvalidHostTree, ctdconfig.ErrInvalidHostTree},
	}
	for _, p := range pairs {
		if p[0] != p[1] {
			t.Errorf("rules say %q, ctdconfig says %q", p[0], p[1])
		}
	}
	for _, h := range []string{"localhost:5000", "127.0.0.1", "[::1]:5000", "10.0.0.4:5000", "registry.k8s.io"} {
		if isLocalhost(h) != ctdconfig.IsLocalhost(h) {
			t.Errorf("isLocalhost(%q) disagrees with ctdconfig", h)
		}
	}
}

// A registry that answers plain HTTP is pointed at the configuration that
// makes containerd speak HTTPS to it.
func TestPlainHTTPConfig(t *testing.T) {
	line := func(p string, n int32, text string) *nodediagv1.SourceLine {
		return &nodediagv1.SourceLine{Path: p, Line: n, Text: text}
	}
	hosts := "/etc/containerd/certs.d/10.0.0.4:5000/hosts.toml"
	server := &nodediagv1.RegistryEndpoint{Registry: "10.0.0.4:5000", Url: "10.0.0.4:5000", Kind: "server", Line: line(hosts, 1, `server = "10.0.0.4:5000"`)}
	httpServer := &nodediagv1.RegistryEndpoint{Registry: "10.0.0.4:5000", Url: "http://10.0.0.4:5000", Kind: "server", Line: line(hosts, 1, `server = "http://10.0.0.4:5000"`)}
	configPath := func(eps ...*nodediagv1.RegistryEndpoint) *nodediagv1.Containerd {
		c := &nodediagv1.Containerd{ConfigFile: ctCfg, ConfigPresent: true, Version: 2, RegistryConfigPath: "/etc/containerd/certs.d",
			RegistryConfigPathLine: line(ctCfg, 9, `      config_path = "/etc/containerd/certs.d"`)}
		if len(eps) > 0 {
			c.HostsFiles = []*nodediagv1.HostsFile{{Path: hosts, Registry: "10.0.0.4:5000", Endpoints: eps}}
		}
		return c
	}
	mirror := func(key, url string) *nodediagv1.RegistryEndpoint {
		return &nodediagv1.RegistryEndpoint{Registry: key, Url: url, Kind: "mirrors", Line: line(ctCfg, 12, `  endpoint = ["`+url+`"]`)}
	}
	legacy := func(eps ...*nodediagv1.RegistryEndpoint) *nodediagv1.Containerd {
		return &nodediagv1.Containerd{ConfigFile: ctCfg, ConfigPresent: true, Version: 2, LegacyMirrors: eps}
	}
	typo := legacy()
	typo.UnknownTables = []*nodediagv1.SourceLine{line(ctCfg, 19, `[plugin."io.containerd.grpc.v1.cri".registry.mirrors."10.0.0.4"]`)}
	tests := []struct {
		name      string
		c         *nodediagv1.Containerd
		want      string // a substring of the detail; "" for none
		quoteLine int32
	}{
		{"server without a scheme", configPath(server), `server "10.0.0.4:5000" of 10.0.0.4:5000 in ` + hosts + ` (without a scheme it means https)`, 1},
		{"server already http", configPath(httpServer), "", 0},
		{"no hosts file for it", configPath(), "no hosts file of 10.0.0.4:5000 under /etc/containerd/certs.d", 9},
		{"legacy mirror with https", legacy(mirror("10.0.0.4:5000", "https://10.0.0.4:5000")), "(it says https)", 12},
		{"legacy mirror key without the port", legacy(mirror("10.0.0.4", "http://10.0.0.4:5000")), `the registry.mirrors key "10.0.0.4" in ` + ctCfg + ` has no port`, 12},
		{"legacy mirror with http", legacy(mirror("10.0.0.4:5000", "http://10.0.0.4:5000")), "", 0},
		{"a misspelt section names it", typo, `containerd does not read the table at ` + ctCfg + `:19`, 19},
		{"no configuration for it", legacy(), "nothing in " + ctCfg + " tells containerd to use http for it", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			detail, q := plainHTTPConfig(tt.c, "10.0.0.4:5000")
			if tt.want == "" {
				if detail != "" {
					t.Fatalf("detail %q, want none", detail)
				}
				return
			}
			if !strings.Contains(detail, tt.want) || !strings.HasPrefix(detail, "10.0.0.4:5000 answers plain HTTP") {
				t.Errorf("detail %q, want it to contain %q", detail, tt.want)
			}
			if q == nil || q.GetLine() != tt.quoteLine {
				t.Errorf("quote %v, want line %d", q, tt.quoteLine)
			}
		})
	}
}

// A cgroup driver contradiction read from files folds into the runtime's
// own refusal: one finding, the runtime's line first, the files after it.
func TestAbsorbPredicted(t *testing.T) {
	refusal := &nodediagv1.Finding{Id: "RuntimeCgroupParentRefused", Evidence: []*nodediagv1.Quote{{Source: "journal:containerd.service", Excerpt: "expected cgroupsPath to be of format"}}}
	files := &nodediagv1.Finding{Id: "KubeletCgroupDriverMismatch", Evidence: []*nodediagv1.Quote{{Source: "/var/lib/kubelet/config.yaml", Line: 3, Excerpt: "cgroupDriver: cgroupfs"}}}
	other := &nodediagv1.Finding{Id: "SwapEnabled"}
	got := absorbPredicted([]*nodediagv1.Finding{files, other, refusal})
	if len(got) != 2 || got[0] != other || got[1] != refusal {
		t.Fatalf("findings %v, want the swap finding and the refusal", got)
	}
	if len(refusal.Evidence) != 2 || refusal.Evidence[1].GetSource() != "/var/lib/kubelet/config.yaml" {
		t.Errorf("refusal evidence %v, want its line then the file's", refusal.Evidence)
	}
	// Without a refusal the contradiction stands.
	files2 := &nodediagv1.Finding{Id: "KubeletCgroupDriverMismatch"}
	if got := absorbPredicted([]*nodediagv1.Finding{files2}); len(got) != 1 || got[0] != files2 {
		t.Errorf("findings %v, want the contradiction kept", got)
	}
}
