package ctdconfig

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pelletier/go-toml/v2"

	"github.com/nodediag/nodediag/agent/host/hosttest"
	"github.com/nodediag/nodediag/internal/testenv"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// effective is what the oracle and Read are compared on: the settings the
// rules and the other probes use, in containerd 1.x's version 2 layout.
type effective struct {
	Address, Sandbox, ConfigPath, CNIConfDir, CNIBinDir string
	Systemd                                             bool
	Disabled, Mirrors                                   []string
}

// sandbox16 is containerd 1.6's default pause image, which a dump shows
// when no file sets one (Read leaves it empty).
const sandbox16 = "registry.k8s.io/pause:3.6"

// TestReadAgreesWithContainerd checks Read against the real containerd
// (Debian's 1.6.20): `containerd --config FILE config dump` loads the file
// and its imports with containerd's own code and prints the merged
// configuration, or fails as containerd would at start. Imports are
// relative, and containerd runs in the test root, so that both resolve them
// inside it.
func TestReadAgreesWithContainerd(t *testing.T) {
	bin := testenv.RequireBinary(t, "containerd", "containerd")
	cases := []struct {
		name  string
		files map[string]string
		fails bool // containerd refuses the configuration
	}{
		{name: "kubeadm-style version 2", files: map[string]string{"etc/containerd/config.toml": v2Config}},
		{name: "legacy mirrors, the DKP endpoint included", files: map[string]string{"etc/containerd/config.toml": legacyConfig}},
		{name: "default_runtime_name and dotted keys", files: map[string]string{"etc/containerd/config.toml": `version = 2
disabled_plugins = ["io.containerd.internal.v1.tracing"]
grpc.address = "/run/x.sock"
[plugins."io.containerd.grpc.v1.cri".containerd]
  default_runtime_name = "nvidia"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  SystemdCgroup = false
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
  runtime_type = "io.containerd.runc.v2"
  options = { SystemdCgroup = true, BinaryName = "/usr/bin/nvidia-container-runtime" }
`}},
		{name: "imports: glob, relative, later CRI section replaces the earlier, lists appended", files: map[string]string{
			"etc/containerd/config.toml": `version = 2
imports = ["etc/containerd/conf.d/*.toml", "extra.toml"]
disabled_plugins = ["io.containerd.internal.v1.tracing"]
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.example/pause:3.9"
[plugins."io.containerd.grpc.v1.cri".registry]
  config_path = "/etc/containerd/certs.d"
`,
			"etc/containerd/conf.d/10-grpc.toml":   "[grpc]\n  address = \"/run/a.sock\"\n",
			"etc/containerd/conf.d/20-cgroup.toml": "disabled_plugins = [\"io.containerd.snapshotter.v1.btrfs\"]\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\n  SystemdCgroup = true\n",
			"etc/containerd/extra.toml":            "[grpc]\n  address = \"/run/b.sock\"\n",
		}},
		{name: "a relative glob is relative to the working directory (1.x): conf.d/*.toml imports nothing", files: map[string]string{
			"etc/containerd/config.toml":      "version = 2\nimports = [\"conf.d/*.toml\"]\n",
			"etc/containerd/conf.d/grpc.toml": "[grpc]\n  address = \"/run/a.sock\"\n",
			"etc/containerd/conf.d/bad.toml":  "[grpc\n",
		}},
		{name: "an import sets the version", files: map[string]string{
			"etc/containerd/config.toml":      "imports = [\"conf.d/v.toml\"]\n",
			"etc/containerd/conf.d/v.toml":    "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".cni]\n  conf_dir = \"/etc/cni/other\"\n  bin_dir = \"/usr/lib/cni\"\n",
			"etc/containerd/conf.d/README.md": "not imported",
		}},
		{name: "config_path with mirrors loads (the CRI plugin refuses it later)", files: map[string]string{"etc/containerd/config.toml": `version = 2
[plugins."io.containerd.grpc.v1.cri".registry]
  config_path = "/etc/containerd/certs.d"
  [plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]
    endpoint = ["https://mirror.example"]
`}},
		{name: "broken main file", fails: true, files: map[string]string{"etc/containerd/config.toml": "version = 2\n[plugins.\n"}},
		{name: "missing import", fails: true, files: map[string]string{"etc/containerd/config.toml": "version = 2\nimports = [\"nope.toml\"]\n"}},
		{name: "broken import", fails: true, files: map[string]string{
			"etc/containerd/config.toml":   "version = 2\nimports = [\"conf.d/x.toml\"]\n",
			"etc/containerd/conf.d/x.toml": "[grpc\n",
		}},
		{name: "import that is a directory", fails: true, files: map[string]string{
			"etc/containerd/config.toml": "version = 2\nimports = [\"conf.d\"]\n",
			"etc/containerd/conf.d/":     "",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := hosttest.Tree(t, tc.files)
			cfg, unreadable := Read(h)
			if len(unreadable) > 0 {
				t.Fatalf("unreadable: %v", unreadable)
			}
			// The working directory of containerd under systemd is "/":
			// the root of the test host.
			cmd := exec.Command(bin, "--config", filepath.Join(h.Root, "etc/containerd/config.toml"), "config", "dump")
			cmd.Dir = h.Root
			out, err := cmd.CombinedOutput()
			if tc.fails {
				if err == nil {
					t.Fatalf("containerd accepted the configuration:\n%s", out)
				}
				if cfg.ParseError == "" {
					t.Errorf("containerd refuses it (%s) and Read reports no parse_error", out)
				}
				return
			}
			if err != nil {
				t.Fatalf("containerd config dump: %v\n%s", err, out)
			}
			if cfg.ParseError != "" {
				t.Fatalf("Read: %s; containerd loads it", cfg.ParseError)
			}
			want := dumpEffective(t, out)
			got := readEffective(cfg)
			if got.Sandbox == "" {
				got.Sandbox = sandbox16
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Read disagrees with containerd (-containerd +Read):\n%s", diff)
			}
		})
	}
}

func dumpEffective(t *testing.T, dump []byte) effective {
	t.Helper()
	var m map[string]any
	if err := toml.Unmarshal(dump, &m); err != nil {
		t.Fatalf("dump: %v", err)
	}
	d := &doc{tree: m}
	var e effective
	e.Address, _ = d.str("grpc", "address")
	cri := []string{"plugins", PluginCRI}
	at := func(k ...string) []string { return append(append([]string{}, cri...), k...) }
	e.Sandbox, _ = d.str(at("sandbox_image")...)
	e.ConfigPath, _ = d.str(at("registry", "config_path")...)
	e.CNIConfDir, _ = d.str(at("cni", "conf_dir")...)
	e.CNIBinDir, _ = d.str(at("cni", "bin_dir")...)
	name, _ := d.str(at("containerd", "default_runtime_name")...)
	if v, ok := d.get(at("containerd", "runtimes", name, "options", "SystemdCgroup")...); ok {
		e.Systemd, _ = v.(bool)
	}
	if v, ok := d.get("disabled_plugins"); ok {
		for _, p := range v.([]any) {
			e.Disabled = append(e.Disabled, p.(string))
		}
	}
	mirrors, _ := d.table(at("registry", "mirrors")...)
	for reg := range mirrors {
		v, _ := d.get(at("registry", "mirrors", reg, "endpoint")...)
		for _, u := range v.([]any) {
			e.Mirrors = append(e.Mirrors, reg+" "+u.(string))
		}
	}
	sort.Strings(e.Mirrors)
	return e
}

func readEffective(c *nodediagv1.Containerd) effective {
	e := effective{Address: c.GrpcAddress, Sandbox: c.SandboxImage, ConfigPath: c.RegistryConfigPath,
		CNIConfDir: c.CniConfDir, CNIBinDir: c.CniBinDir, Systemd: c.GetSystemdCgroup(), Disabled: c.DisabledPlugins}
	for _, ep := range c.LegacyMirrors {
		e.Mirrors = append(e.Mirrors, ep.Registry+" "+ep.Url)
	}
	sort.Strings(e.Mirrors)
	return e
}

// TestParseHostsAgreesWithContainerd checks which hosts files containerd
// rejects against the real one (Debian's 1.6.20): `ctr images pull
// --hosts-dir` resolves the registry with containerd's own hosts.toml code
// (remotes/docker/config), which logs "failed to decode hosts.toml" for a
// file it ignores. Every registry, host and server is a closed port on
// 127.0.0.1: nothing leaves the machine, every pull fails.
func TestParseHostsAgreesWithContainerd(t *testing.T) {
	ctd := testenv.StartContainerd(t, testenv.ContainerdOptions{})
	closed := func() string { return "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t)) }
	cases := []struct {
		name string
		src  func(host string) string
	}{
		{"mirror and server", func(h string) string {
			return "server = \"http://" + h + "\"\n[host.\"http://" + closed() + "\"]\n  capabilities = [\"pull\", \"resolve\"]\n"
		}},
		{"server only (no [host] table)", func(h string) string { return "server = \"http://" + h + "\"\n" }},
		{"empty [host] table", func(h string) string { return "server = \"http://" + h + "\"\n[host]\n" }},
		{"broken TOML", func(h string) string { return "server = \"http://" + h + "\n" }},
		{"host that is not a URL", func(string) string { return "[host.\"http://[::1\"]\n" }},
		{"host with an empty scheme (used, and fails at request time)", func(string) string { return "[host.\"://" + closed() + "\"]\n" }},
		{"unknown capability", func(string) string { return "[host.\"http://" + closed() + "\"]\n  capabilities = [\"pul\"]\n" }},
		{"ca of the wrong type", func(string) string { return "[host.\"http://" + closed() + "\"]\n  ca = 5\n" }},
		{"skip_verify of the wrong type", func(string) string { return "[host.\"http://" + closed() + "\"]\n  skip_verify = \"yes\"\n" }},
		{"header of the wrong type", func(string) string {
			return "[host.\"http://" + closed() + "\"]\n  [host.\"http://" + closed() + "\".header]\n    x-a = 5\n"
		}},
	}
	t.Run("hosts.toml that is a directory: every pull of the registry fails", func(t *testing.T) {
		registry := closed()
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, registry, "hosts.toml"), 0o755); err != nil {
			t.Fatal(err)
		}
		out, _ := exec.Command("ctr", "-a", ctd.Socket, "-n", "nodediag-test", "images", "pull", "--hosts-dir", dir, registry+"/x:1").CombinedOutput()
		if !strings.Contains(string(out), "hosts.toml: is a directory") {
			t.Errorf("ctr said %s, want the read error of the directory", out)
		}
		h := hosttest.Tree(t, map[string]string{
			"etc/containerd/config.toml":                          "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".registry]\n  config_path = \"/etc/containerd/certs.d\"\n",
			"etc/containerd/certs.d/" + registry + "/hosts.toml/": "",
		})
		cfg, _ := Read(h)
		if len(cfg.HostsFiles) != 1 || !strings.Contains(cfg.HostsFiles[0].Error, "not a regular file") {
			t.Errorf("Read: hosts files %v, want the directory's error", cfg.HostsFiles)
		}
	})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			registry := closed()
			src := tc.src(registry)
			dir := t.TempDir()
			hostsFile := filepath.Join(dir, registry, "hosts.toml")
			if err := os.MkdirAll(filepath.Dir(hostsFile), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(hostsFile, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, "ctr", "-a", ctd.Socket, "-n", "nodediag-test", "images", "pull", "--hosts-dir", dir, registry+"/x:1").CombinedOutput()
			if err == nil {
				t.Fatalf("the pull succeeded:\n%s", out)
			}
			rejected := strings.Contains(string(out), "failed to decode hosts.toml")
			hf := ParseHosts(hostsFile, registry, []byte(src))
			if rejected != (hf.Error != "") {
				t.Errorf("containerd rejects the file: %v; ParseHosts error: %q\n%s\nctr said:\n%s", rejected, hf.Error, src, out)
			}
		})
	}
}
