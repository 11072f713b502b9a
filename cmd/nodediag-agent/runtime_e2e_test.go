package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	criv1 "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodediag/nodediag/internal/testenv"
)

// The runtime and registry failures of the field, produced for real: a
// containerd (Debian's) serving a node root's socket, a docker-registry on
// loopback, pulls made the way the kubelet makes them (CRI PullImage) and
// image seeding the way an air-gapped bootstrap does it (skopeo). The agent
// binary then examines that root as a live node (a procfs mounted under it
// in a private mount namespace), and must name the cause with the config
// line that makes it and the daemon's own log line that shows the effect.
//
// Every address in these configurations is on 127.0.0.1: containerd's
// fallbacks to an upstream registry never leave the machine.

// e2eNode is a node root for one case: the agent's --root.
type e2eNode struct {
	root string
}

// newE2ENode makes a root short enough for the socket under it
// (<root>/run/containerd/containerd.sock stays under 108 bytes).
func newE2ENode(t *testing.T) *e2eNode {
	t.Helper()
	root, err := os.MkdirTemp("", "node")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	n := &e2eNode{root: root}
	n.write(t, "/etc/os-release", "ID=ubuntu\nVERSION_ID=\"22.04\"\nPRETTY_NAME=\"Ubuntu 22.04.5 LTS\"\n")
	n.write(t, "/etc/hostname", "e2e-md-0-x1\n")
	// A node has a kubelet (a machine without one is judged not to be one).
	n.write(t, "/usr/lib/systemd/system/kubelet.service", "[Service]\nExecStart=/usr/bin/kubelet\n")
	return n
}

// path is the machine path of a host path under the root.
func (n *e2eNode) path(hostPath string) string { return filepath.Join(n.root, hostPath) }

func (n *e2eNode) write(t *testing.T, hostPath, content string) {
	t.Helper()
	p := n.path(hostPath)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// joined makes the node look joined (kubeadm wrote the kubelet's
// kubeconfig): a node that has not joined has no network add-on yet.
func (n *e2eNode) joined(t *testing.T) {
	n.write(t, "/etc/kubernetes/kubelet.conf", "apiVersion: v1\nkind: Config\nclusters:\n- name: default-cluster\n  cluster:\n    server: https://127.0.0.1:6443\n")
}

// startContainerd runs containerd with its socket, CNI conf dir and
// certs.d inside the root, and writes the node's view of the same
// configuration to /etc/containerd/config.toml: the daemon's file with the
// root prefix taken off its paths.
func (n *e2eNode) startContainerd(t *testing.T, o testenv.ContainerdOptions) *testenv.Containerd {
	t.Helper()
	o.Socket = n.path("/run/containerd/containerd.sock")
	if o.CNIConfDir == "" {
		o.CNIConfDir = n.path("/etc/cni/net.d")
	}
	c := testenv.StartContainerd(t, o)
	n.write(t, "/etc/containerd/config.toml", strings.ReplaceAll(c.Config, n.root, ""))
	return c
}

// keepLog copies containerd's log into the root, where a node without
// journald keeps it (/var/log/containerd.log, a source of the logs probe).
func (n *e2eNode) keepLog(t *testing.T, c *testenv.Containerd) {
	t.Helper()
	n.write(t, "/var/log/containerd.log", c.Log())
}

// pull asks for an image as the kubelet does and returns the CRI's error.
func pull(t *testing.T, c *testenv.Containerd, ref string) error {
	t.Helper()
	conn, err := testenv.DialUnix(c.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = criv1.NewImageServiceClient(conn).PullImage(ctx, &criv1.PullImageRequest{Image: &criv1.ImageSpec{Image: ref}})
	return err
}

// e2eReport is the part of the agent's JSON report the cases look at.
type e2eReport struct {
	Findings []struct {
		ID          string `json:"id"`
		Title       string `json:"title"`
		Consequence bool   `json:"consequence"`
		Severity    string `json:"severity"`
		Evidence    []struct {
			Source  string `json:"source"`
			Excerpt string `json:"excerpt"`
		} `json:"evidence"`
	} `json:"findings"`
	Probes []struct {
		Name, Status, Error string
		DurationMs          int `json:"duration_ms"`
	} `json:"probes"`
}

// check runs the agent binary over the root as a live node.
func (n *e2eNode) check(t *testing.T, args ...string) e2eReport {
	t.Helper()
	out, errb, code := testenv.RunLive(t, n.root, agentBinary(t), append([]string{"check", "--root", n.root, "--output", "json"}, args...)...)
	if code != 0 && code != 1 && code != 2 {
		t.Fatalf("agent exit %d\nstderr: %s", code, errb)
	}
	var r e2eReport
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("report: %v\n%s", err, out)
	}
	return r
}

// top is the first finding that no other explains.
func (r e2eReport) top() string {
	for _, f := range r.Findings {
		if !f.Consequence {
			return f.ID
		}
	}
	return ""
}

// quotes returns the evidence of the finding id, "source: excerpt" each.
func (r e2eReport) quotes(id string) []string {
	var out []string
	for _, f := range r.Findings {
		if f.ID == id {
			for _, e := range f.Evidence {
				out = append(out, e.Source+": "+e.Excerpt)
			}
		}
	}
	return out
}

func (r e2eReport) String() string {
	var b strings.Builder
	for _, f := range r.Findings {
		fmt.Fprintf(&b, "%s %s (consequence %v): %s\n", f.Severity, f.ID, f.Consequence, f.Title)
		for _, e := range f.Evidence {
			fmt.Fprintf(&b, "    %s: %s\n", e.Source, e.Excerpt)
		}
	}
	for _, p := range r.Probes {
		fmt.Fprintf(&b, "probe %s %s %d ms %s\n", p.Name, p.Status, p.DurationMs, p.Error)
	}
	return b.String()
}

var e2eBin string

// agentBinary builds the agent once, as the Makefile does.
func agentBinary(t *testing.T) string {
	t.Helper()
	if e2eBin != "" {
		return e2eBin
	}
	dir, err := os.MkdirTemp("", "nodediag-e2e")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "nodediag-agent")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the agent: %v\n%s", err, out)
	}
	e2eBin = bin
	return bin
}

// missing returns the strings of want that no quote contains.
func missing(quotes []string, want ...string) []string {
	var out []string
	for _, w := range want {
		found := false
		for _, q := range quotes {
			if strings.Contains(q, w) {
				found = true
				break
			}
		}
		if !found {
			out = append(out, w)
		}
	}
	return out
}

func TestRuntimeAndRegistryFailuresEndToEnd(t *testing.T) {
	testenv.RequireRoot(t, "containerd and a procfs under the node root")
	cases := []struct {
		name string
		// setup makes the node, and returns what the daemon said to the
		// "kubelet" (for the log of the test).
		setup func(t *testing.T, n *e2eNode)
		args  []string
		// The finding that comes first, and what its evidence must quote
		// (substrings of "source: excerpt").
		top    string
		quotes []string
		// Other findings that must be raised, with their quotes.
		also map[string][]string
		// Findings that must not be raised.
		absent []string
	}{
		{
			// DKP error 1: the mirror endpoint written from an empty
			// ${SCHEME}. containerd refuses the endpoint on every pull.
			name: "mirror endpoint without a scheme",
			setup: func(t *testing.T, n *e2eNode) {
				reg, closed := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)), testenv.FreePort(t)
				c := n.startContainerd(t, testenv.ContainerdOptions{Mirrors: map[string][]string{reg: {fmt.Sprintf("://127.0.0.1:%d", closed)}}})
				err := pull(t, c, reg+"/kube-proxy:v1.30.0")
				if err == nil || !strings.Contains(err.Error(), "missing protocol scheme") {
					t.Fatalf("pull: %v, want the missing protocol scheme", err)
				}
				n.keepLog(t, c)
			},
			top:    "RegistryEndpointInvalid",
			quotes: []string{"/etc/containerd/config.toml: ", `endpoint = ["://127.0.0.1:`, "/var/log/containerd.log: ", "missing protocol scheme"},
		},
		{
			// DKP error 2: the registry variable written with its scheme
			// where an image reference is built from it. The bootstrap's
			// seeding (skopeo) and the kubelet's pull both refuse it.
			name: "image reference with a scheme",
			setup: func(t *testing.T, n *e2eNode) {
				skopeo := testenv.RequireBinary(t, "skopeo", "skopeo")
				r := testenv.StartRegistry(t, testenv.RegistryOptions{})
				archive := filepath.Join(t.TempDir(), "kp.oci.tar")
				testenv.BusyboxImage(t, "registry.k8s.io/kube-proxy:v1.30.0").WriteOCIArchive(t, archive)
				out, err := exec.Command(skopeo, "copy", "--dest-tls-verify=false", "oci-archive:"+archive, "docker://https://"+r.Addr+"/dkp/kube-proxy:v1.30.0").CombinedOutput()
				if err == nil {
					t.Fatalf("skopeo accepted a reference with a scheme:\n%s", out)
				}
				n.write(t, "/var/log/cloud-init-output.log", "+ skopeo copy --dest-tls-verify=false oci-archive:/opt/dkp/images/kube-proxy.tar docker://https://"+r.Addr+"/dkp/kube-proxy:v1.30.0\n"+string(out))
				c := n.startContainerd(t, testenv.ContainerdOptions{})
				if err := pull(t, c, "https://"+r.Addr+"/dkp/kube-proxy:v1.30.0"); err == nil || !strings.Contains(err.Error(), "invalid reference format") {
					t.Fatalf("pull: %v, want an invalid reference", err)
				}
				n.keepLog(t, c)
			},
			top:    "RegistryEndpointInvalid",
			quotes: []string{"/var/log/cloud-init-output.log: ", "invalid reference format"},
		},
		{
			// An air-gapped mirror that is down: hosts.toml names two
			// endpoints on closed loopback ports.
			name: "mirror on a closed port",
			setup: func(t *testing.T, n *e2eNode) {
				reg := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
				mirror, server := testenv.FreePort(t), testenv.FreePort(t)
				n.write(t, "/etc/containerd/certs.d/"+reg+"/hosts.toml", fmt.Sprintf("server = \"http://127.0.0.1:%d\"\n\n[host.\"http://127.0.0.1:%d\"]\n  capabilities = [\"pull\", \"resolve\"]\n", server, mirror))
				c := n.startContainerd(t, testenv.ContainerdOptions{RegistryConfigPath: n.path("/etc/containerd/certs.d")})
				if err := pull(t, c, reg+"/kube-proxy:v1.30.0"); err == nil || !strings.Contains(err.Error(), "connection refused") {
					t.Fatalf("pull: %v, want connection refused", err)
				}
				n.keepLog(t, c)
			},
			top:    "RegistryUnreachable",
			quotes: []string{"hosts.toml: ", "net:http://127.0.0.1:", "connection refused"},
		},
		{
			name: "CRI plugin disabled",
			setup: func(t *testing.T, n *e2eNode) {
				c := n.startContainerd(t, testenv.ContainerdOptions{DisabledPlugins: []string{"io.containerd.grpc.v1.cri"}})
				n.keepLog(t, c)
			},
			top:    "RuntimeCRIDisabled",
			quotes: []string{`/etc/containerd/config.toml: disabled_plugins = ["io.containerd.grpc.v1.cri"]`},
		},
		{
			// The containerd.io package's way: mirrors kept from an old
			// config next to config_path. The CRI plugin does not load.
			name: "config_path together with registry.mirrors",
			setup: func(t *testing.T, n *e2eNode) {
				c := n.startContainerd(t, testenv.ContainerdOptions{
					RegistryConfigPath: n.path("/etc/containerd/certs.d"),
					Mirrors:            map[string][]string{"docker.io": {fmt.Sprintf("http://127.0.0.1:%d", testenv.FreePort(t))}},
				})
				n.keepLog(t, c)
			},
			top:    "RegistryMirrorsWithConfigPath",
			quotes: []string{"config_path = ", `registry.mirrors."docker.io"`, "/var/log/containerd.log: ", "`mirrors` cannot be set when `config_path` is provided"},
		},
		{
			name: "containerd stopped",
			setup: func(t *testing.T, n *e2eNode) {
				c := n.startContainerd(t, testenv.ContainerdOptions{})
				c.Stop()
				n.keepLog(t, c)
			},
			top:    "RuntimeNotRunning",
			quotes: []string{"/run/containerd/containerd.sock"},
		},
		{
			// A joined node whose network add-on never wrote its config.
			name: "no CNI config: NetworkReady=false",
			setup: func(t *testing.T, n *e2eNode) {
				n.joined(t)
				c := n.startContainerd(t, testenv.ContainerdOptions{})
				n.keepLog(t, c)
			},
			top:  "CNIConfigMissing",
			also: map[string][]string{"CNINotInitialized": {"cri:/run/containerd/containerd.sock: ", "NetworkReady=false", "cni plugin not initialized"}},
		},
		{
			// The control: a mirror that serves the image. The pull works,
			// and nothing about the runtime or the registries is raised.
			name: "healthy mirror (control)",
			setup: func(t *testing.T, n *e2eNode) {
				skopeo := testenv.RequireBinary(t, "skopeo", "skopeo")
				r := testenv.StartRegistry(t, testenv.RegistryOptions{})
				archive := filepath.Join(t.TempDir(), "kp.oci.tar")
				testenv.BusyboxImage(t, "registry.k8s.io/kube-proxy:v1.30.0").WriteOCIArchive(t, archive)
				if out, err := exec.Command(skopeo, "copy", "--dest-tls-verify=false", "oci-archive:"+archive, "docker://"+r.Addr+"/kube-proxy:v1.30.0").CombinedOutput(); err != nil {
					t.Fatalf("seeding the registry: %v\n%s", err, out)
				}
				reg := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
				n.write(t, "/etc/containerd/certs.d/"+reg+"/hosts.toml", fmt.Sprintf("server = \"http://%s\"\n\n[host.\"http://%s\"]\n  capabilities = [\"pull\", \"resolve\"]\n", reg, r.Addr))
				n.write(t, "/etc/cni/net.d/10-bridge.conflist", `{"cniVersion": "1.0.0", "name": "bridge", "plugins": [{"type": "bridge"}]}`)
				c := n.startContainerd(t, testenv.ContainerdOptions{RegistryConfigPath: n.path("/etc/containerd/certs.d")})
				if err := pull(t, c, reg+"/kube-proxy:v1.30.0"); err != nil {
					t.Fatalf("pull through the mirror: %v", err)
				}
				n.keepLog(t, c)
			},
			absent: []string{"RegistryEndpointInvalid", "RegistryUnreachable", "RegistryMirrorUnreachable", "RuntimeNotRunning", "RuntimeCRIDisabled", "ContainerdConfigInvalid", "ImagePullFailed", "CNINotInitialized"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := newE2ENode(t)
			tc.setup(t, n)
			r := n.check(t, tc.args...)
			t.Logf("report:\n%s", r)
			if tc.top != "" && r.top() != tc.top {
				t.Errorf("top finding = %q, want %q\n%s", r.top(), tc.top, r)
			}
			if m := missing(r.quotes(tc.top), tc.quotes...); len(m) > 0 {
				t.Errorf("%s does not quote %q\n%s", tc.top, m, r)
			}
			for id, want := range tc.also {
				q := r.quotes(id)
				if len(q) == 0 {
					t.Errorf("%s not raised\n%s", id, r)
				} else if m := missing(q, want...); len(m) > 0 {
					t.Errorf("%s does not quote %q\n%s", id, m, r)
				}
			}
			for _, id := range tc.absent {
				if len(r.quotes(id)) > 0 || strings.Contains(r.String(), " "+id+" ") {
					t.Errorf("%s raised\n%s", id, r)
				}
			}
		})
	}
}
