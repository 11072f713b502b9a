// Package hostgen writes the trees of example nodes: the host roots of
// agent/testdata/hosts (hack/genhosts) and of the real-failure corpus
// (agent/corpus). A node is shaped like a CAPZ/CAPI or kubeadm node: OS
// identity, the kubelet unit and its drop-in, binaries, kubeadm's files,
// PKI from a deterministic example CA, CNI, cloud-init's state.
package hostgen

import (
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// tree is a host root: host path (without the leading slash) → content, with
// the conventions of agent/host/hosttest: "->target" is a symlink, content
// starting with "#!" an executable script, a name ending in "/" an empty
// directory.
type Tree map[string]string

func (t Tree) Add(o Tree) Tree {
	for k, v := range o {
		t[k] = v
	}
	return t
}

// node describes the node a scenario starts from.
type Node struct {
	OS       string // "ubuntu-24.04", "ubuntu-22.04", "azurelinux-3"
	Hostname string
	// versions of the binaries the node carries ("" = absent).
	Kubelet, Kubeadm, Kubectl, Containerd, Crictl, Runc string
	// controlPlane nodes get static pod manifests and kubeadm.yaml.
	ControlPlane bool
	// cpVersion is the control plane's kubernetesVersion (kubeadm.yaml).
	CPVersion string
	// endpoint is the control plane endpoint.
	Endpoint string
	// joined nodes have kubelet.conf, kubeadm-flags.env, config.yaml and a
	// kubelet client certificate.
	Joined bool
	// boot is when the VM booted (cloud-init stages follow).
	Boot time.Time
	// CA is the cluster's CA; nil is the example hosts' (made on CAStart).
	CA *CA
	// JoinedAt is when the kubelet got its client certificate; zero is 45
	// seconds after Boot.
	JoinedAt time.Time
}

func (n Node) ca() *CA {
	if n.CA != nil {
		return n.CA
	}
	return exampleCA
}

func (n Node) Deb() bool {
	return strings.HasPrefix(n.OS, "ubuntu") || strings.HasPrefix(n.OS, "debian")
}

// files returns the node's base tree: OS identity, kubelet unit wiring,
// binaries, kubeadm bootstrap files, PKI and CNI as a CAPZ node has them.
func (n Node) Files() Tree {
	t := Tree{}
	t.Add(n.osFiles())
	t.Add(n.kubeletUnit())
	t.Add(n.binaries())
	t.Add(n.kubeadmFiles())
	if n.Joined {
		t.Add(n.joinedFiles())
	}
	t["var/lib/containerd/"] = ""
	t["var/lib/kubelet/pki/"] = ""
	t["etc/kubernetes/manifests/"] = ""
	t["proc/swaps"] = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
	return t
}

// MachineID is the node's /etc/machine-id (derived from its host name).
func (n Node) MachineID() string {
	return fmt.Sprintf("%x", sha256.Sum256([]byte(n.Hostname)))[:32]
}

// OSFiles are the files that identify the machine: host name, machine ID,
// os-release, the kernel's release.
func (n Node) OSFiles() Tree { return n.osFiles() }

func (n Node) osFiles() Tree {
	t := Tree{"etc/hostname": n.Hostname + "\n", "etc/machine-id": n.MachineID() + "\n"}
	switch n.OS {
	case "ubuntu-20.04":
		t["usr/lib/os-release"] = `NAME="Ubuntu"
VERSION="20.04.6 LTS (Focal Fossa)"
ID=ubuntu
ID_LIKE=debian
PRETTY_NAME="Ubuntu 20.04.6 LTS"
VERSION_ID="20.04"
VERSION_CODENAME=focal
`
		t["etc/os-release"] = "->../usr/lib/os-release"
		t["proc/sys/kernel/osrelease"] = "5.4.0-182-generic\n"
	case "debian-12":
		t["usr/lib/os-release"] = `PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
NAME="Debian GNU/Linux"
VERSION_ID="12"
VERSION="12 (bookworm)"
VERSION_CODENAME=bookworm
ID=debian
`
		t["etc/os-release"] = "->../usr/lib/os-release"
		t["proc/sys/kernel/osrelease"] = "6.1.0-21-amd64\n"
	case "flatcar":
		t["usr/lib/os-release"] = `NAME="Flatcar Container Linux by Kinvolk"
ID=flatcar
ID_LIKE=coreos
VERSION=3815.2.2
VERSION_ID=3815.2.2
PRETTY_NAME="Flatcar Container Linux by Kinvolk 3815.2.2 (Oklo)"
`
		t["etc/os-release"] = "->../usr/lib/os-release"
		t["proc/sys/kernel/osrelease"] = "6.1.85-flatcar\n"
	case "ubuntu-24.04":
		t["usr/lib/os-release"] = `PRETTY_NAME="Ubuntu 24.04.1 LTS"
NAME="Ubuntu"
VERSION_ID="24.04"
VERSION="24.04.1 LTS (Noble Numbat)"
VERSION_CODENAME=noble
ID=ubuntu
ID_LIKE=debian
HOME_URL="https://www.ubuntu.com/"
`
		t["etc/os-release"] = "->../usr/lib/os-release"
		t["proc/sys/kernel/osrelease"] = "6.8.0-1017-azure\n"
	case "ubuntu-22.04":
		t["usr/lib/os-release"] = `PRETTY_NAME="Ubuntu 22.04.5 LTS"
NAME="Ubuntu"
VERSION_ID="22.04"
VERSION="22.04.5 LTS (Jammy Jellyfish)"
ID=ubuntu
ID_LIKE=debian
`
		t["etc/os-release"] = "->../usr/lib/os-release"
		t["proc/sys/kernel/osrelease"] = "5.15.0-1073-azure\n"
	case "azurelinux-3":
		t["etc/os-release"] = `NAME="Microsoft Azure Linux"
VERSION="3.0.20241101"
ID=azurelinux
VERSION_ID="3.0"
PRETTY_NAME="Microsoft Azure Linux 3.0"
ANSI_COLOR="1;34"
HOME_URL="https://aka.ms/azurelinux"
`
		t["proc/sys/kernel/osrelease"] = "6.6.57.1-1.azl3\n"
	case "rhel-9":
		t["etc/os-release"] = `NAME="Red Hat Enterprise Linux"
VERSION="9.4 (Plow)"
ID="rhel"
ID_LIKE="fedora"
VERSION_ID="9.4"
PRETTY_NAME="Red Hat Enterprise Linux 9.4 (Plow)"
`
		t["proc/sys/kernel/osrelease"] = "5.14.0-427.13.1.el9_4.x86_64\n"
	case "rhel-8":
		t["etc/os-release"] = `NAME="Red Hat Enterprise Linux"
VERSION="8.6 (Ootpa)"
ID="rhel"
ID_LIKE="fedora"
VERSION_ID="8.6"
PRETTY_NAME="Red Hat Enterprise Linux 8.6 (Ootpa)"
`
		t["proc/sys/kernel/osrelease"] = "4.18.0-372.9.1.el8.x86_64\n"
	}
	return t
}

// kubeletUnit is the kubelet.service and 10-kubeadm.conf of the kubernetes
// packages (deb: /etc/default/kubelet; rpm: /etc/sysconfig/kubelet).
func (n Node) kubeletUnit() Tree {
	envFile := "/etc/sysconfig/kubelet"
	if n.Deb() {
		envFile = "/etc/default/kubelet"
	}
	return Tree{
		// systemctl enable kubelet, as the kubeadm install guide has it.
		"etc/systemd/system/multi-user.target.wants/kubelet.service": "->/usr/lib/systemd/system/kubelet.service",
		"usr/lib/systemd/system/kubelet.service": `[Unit]
Description=kubelet: The Kubernetes Node Agent
Documentation=https://kubernetes.io/docs/
Wants=network-online.target
After=network-online.target

[Service]
ExecStart=/usr/bin/kubelet
Restart=always
StartLimitInterval=0
RestartSec=10

[Install]
WantedBy=multi-user.target
`,
		"usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf": `# Note: This dropin only works with kubeadm and kubelet v1.11+
[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
# This is a file that "kubeadm init" and "kubeadm join" generates at runtime, populating the KUBELET_KUBEADM_ARGS variable dynamically
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
# This is a file that the user can use for overrides of the kubelet args as a last resort. Preferably, the user should use
# the .NodeRegistration.KubeletExtraArgs object in the configuration files instead. KUBELET_EXTRA_ARGS should be sourced from this file.
EnvironmentFile=-` + envFile + `
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
`,
	}
}

// An Answer is what one of the node's binaries prints when asked its
// version the way the agent asks it.
type Answer struct {
	Path string   // host path, without the leading slash
	Args []string // the arguments of the question
	Out  string   // the output, without its last newline
}

// Answers are the version answers of the binaries the node carries.
func (n Node) Answers() []Answer {
	var out []Answer
	add := func(v, path, args, text string) {
		if v != "" {
			out = append(out, Answer{Path: path, Args: strings.Fields(args), Out: text})
		}
	}
	add(n.Kubelet, "usr/bin/kubelet", "--version", "Kubernetes "+n.Kubelet)
	add(n.Kubeadm, "usr/bin/kubeadm", "version -o short", n.Kubeadm)
	if n.Kubectl != "" { // kubectlJSON needs a version
		add(n.Kubectl, "usr/bin/kubectl", "version --client -o json", kubectlJSON(n.Kubectl))
	}
	add(n.Containerd, "usr/bin/containerd", "--version", "containerd github.com/containerd/containerd "+n.Containerd+" 88bf19b2105c8b17560993bee28a01ddc2f97182")
	add(n.Crictl, "usr/local/bin/crictl", "--version", "crictl version "+n.Crictl)
	add(n.Runc, "usr/bin/runc", "--version", "runc version "+strings.TrimPrefix(n.Runc, "v")+"\ncommit: "+n.Runc+"-0-g6c52b3fc\nspec: 1.2.0\ngo: go1.22.10\nlibseccomp: 2.5.5")
	return out
}

// binaries are shell scripts that answer like the real binaries.
func (n Node) binaries() Tree {
	t := Tree{}
	for _, a := range n.Answers() {
		t[a.Path] = Script(strings.Join(a.Args, " "), a.Out)
	}
	return t
}

// Script answers args (space-joined) with out, and anything else with an
// error, as a real binary asked something unexpected would.
func Script(args, out string) string {
	return scriptHead + args + "\" ]; then\n  cat <<'EOF'\n" + out + "\nEOF\n  exit 0\nfi\necho \"unexpected arguments: $*\" >&2\nexit 1\n"
}

const scriptHead = "#!/bin/sh\n# A stand-in for the real binary: it answers the version query the way the real one does.\n" +
	"if [ \"$*\" = \""

// ParseScript is Script's inverse: the question and the answer of a
// stand-in written by Script, ok false for any other content.
func ParseScript(content string) (args []string, out string, ok bool) {
	rest, found := strings.CutPrefix(content, scriptHead)
	if !found {
		return nil, "", false
	}
	a, rest, found := strings.Cut(rest, "\" ]; then\n  cat <<'EOF'\n")
	if !found {
		return nil, "", false
	}
	o, tail, found := strings.Cut(rest, "\nEOF\n  exit 0\nfi\n")
	if !found || !strings.HasPrefix(tail, "echo ") {
		return nil, "", false
	}
	return strings.Fields(a), o, true
}

func kubectlJSON(v string) string {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	return fmt.Sprintf(`{
  "clientVersion": {
    "major": "%s",
    "minor": "%s",
    "gitVersion": "%s",
    "gitCommit": "8adc0f041b8e7ad1d30e29cc59c6ae7a15e19828",
    "gitTreeState": "clean",
    "buildDate": "2024-04-17T17:36:05Z",
    "goVersion": "go1.22.2",
    "compiler": "gc",
    "platform": "linux/amd64"
  },
  "kustomizeVersion": "v5.4.2"
}`, parts[0], parts[1], v)
}

// kubeadmFiles are what the CAPI kubeadm bootstrap provider writes
// (cluster-api bootstrap/kubeadm/internal/cloudinit): /run/kubeadm/kubeadm.yaml
// on the first control plane node, kubeadm-join-config.yaml elsewhere.
func (n Node) kubeadmFiles() Tree {
	if n.Kubeadm == "" && n.CPVersion == "" {
		return Tree{}
	}
	if n.ControlPlane {
		return Tree{"run/kubeadm/kubeadm.yaml": `---
apiServer:
  certSANs:
  - localhost
  - 127.0.0.1
  extraArgs:
    cloud-provider: external
apiVersion: kubeadm.k8s.io/v1beta3
clusterName: ` + clusterName(n) + `
controlPlaneEndpoint: ` + n.Endpoint + `
controllerManager:
  extraArgs:
    cloud-provider: external
dns: {}
etcd:
  local:
    dataDir: /var/lib/etcddisk/etcd
imageRepository: registry.k8s.io
kind: ClusterConfiguration
kubernetesVersion: ` + n.CPVersion + `
networking:
  dnsDomain: cluster.local
  podSubnet: 192.168.0.0/16
scheduler: {}

---
apiVersion: kubeadm.k8s.io/v1beta3
bootstrapTokens:
- groups:
  - system:bootstrappers:kubeadm:default-node-token
  token: u5x7ph.ivq4oz3bz2r7cthk
  ttl: 24h0m0s
  usages:
  - signing
  - authentication
kind: InitConfiguration
localAPIEndpoint: {}
nodeRegistration:
  imagePullPolicy: IfNotPresent
  kubeletExtraArgs:
    cloud-provider: external
  name: '{{ ds.meta_data["local_hostname"] }}'
`}
	}
	return Tree{"run/kubeadm/kubeadm-join-config.yaml": `---
apiVersion: kubeadm.k8s.io/v1beta3
discovery:
  bootstrapToken:
    apiServerEndpoint: ` + n.Endpoint + `
    caCertHashes:
    - sha256:8c62b24d4b1f4a4c2f1b0b6e0d8b9a1e6a5b2c3d4e5f60718293a4b5c6d7e8f9
    token: 5xf60f.jlq4b8e3ns7kz2rd
kind: JoinConfiguration
nodeRegistration:
  imagePullPolicy: IfNotPresent
  kubeletExtraArgs:
    cloud-provider: external
  name: '{{ ds.meta_data["local_hostname"] }}'
`}
}

func clusterName(n Node) string {
	parts := strings.SplitN(n.Hostname, "-", 3)
	if len(parts) < 2 {
		return n.Hostname
	}
	return parts[0] + "-" + parts[1]
}

// joinedFiles are what kubeadm init/join leave on a node that got that far.
func (n Node) joinedFiles() Tree {
	t := Tree{
		"var/lib/kubelet/kubeadm-flags.env": `KUBELET_KUBEADM_ARGS="--cloud-provider=external --container-runtime-endpoint=unix:///var/run/containerd/containerd.sock"` + "\n",
		"var/lib/kubelet/config.yaml":       KubeletConfigYAML("systemd", ""),
		"etc/kubernetes/kubelet.conf": `apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: ` + base64.StdEncoding.EncodeToString(n.ca().PEM) + `
    server: https://` + n.Endpoint + `
  name: default-cluster
contexts:
- context:
    cluster: default-cluster
    namespace: default
    user: default-auth
  name: default-context
current-context: default-context
kind: Config
preferences: {}
users:
- name: default-auth
  user:
    client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem
    client-key: /var/lib/kubelet/pki/kubelet-client-current.pem
`,
		"etc/kubernetes/pki/ca.crt": string(n.ca().PEM),
	}
	// The kubelet gets its client certificate during the join (TLS bootstrap).
	stamp := n.Boot.Add(45 * time.Second)
	if !n.JoinedAt.IsZero() {
		stamp = n.JoinedAt
	}
	name := "kubelet-client-" + stamp.Format("2006-01-02-15-04-05") + ".pem"
	t["var/lib/kubelet/pki/"+name] = string(n.ca().ClientPEM("system:node:"+n.Hostname, stamp, stamp.AddDate(1, 0, 0)))
	t["var/lib/kubelet/pki/kubelet-client-current.pem"] = "->/var/lib/kubelet/pki/" + name
	t["var/lib/kubelet/pki/kubelet.crt"] = string(n.ca().CertPEM(n.Hostname+"@"+fmt.Sprint(stamp.Unix()), stamp, stamp.AddDate(1, 0, 0), true, 11))
	t["etc/cni/net.d/10-calico.conflist"] = calicoConflist
	for _, p := range []string{"bandwidth", "calico", "calico-ipam", "flannel", "host-local", "loopback", "portmap", "tuning"} {
		t["opt/cni/bin/"+p] = "#!/bin/sh\n# CNI plugin stand-in: never run by the agent.\nexit 1\n"
	}
	return t
}

func KubeletConfigYAML(cgroupDriver, extra string) string {
	return `apiVersion: kubelet.config.k8s.io/v1beta1
authentication:
  anonymous:
    enabled: false
  webhook:
    cacheTTL: 0s
    enabled: true
  x509:
    clientCAFile: /etc/kubernetes/pki/ca.crt
authorization:
  mode: Webhook
cgroupDriver: ` + cgroupDriver + `
clusterDNS:
- 10.96.0.10
clusterDomain: cluster.local
containerRuntimeEndpoint: ""
cpuManagerReconcilePeriod: 0s
evictionPressureTransitionPeriod: 0s
fileCheckFrequency: 0s
healthzBindAddress: 127.0.0.1
healthzPort: 10248
httpCheckFrequency: 0s
imageMaximumGCAge: 0s
imageMinimumGCAge: 0s
kind: KubeletConfiguration
logging:
  flushFrequency: 0
  options:
    json:
      infoBufferSize: "0"
  verbosity: 0
memorySwap: {}
nodeStatusReportFrequency: 0s
nodeStatusUpdateFrequency: 0s
rotateCertificates: true
runtimeRequestTimeout: 0s
shutdownGracePeriod: 0s
shutdownGracePeriodCriticalPods: 0s
staticPodPath: /etc/kubernetes/manifests
streamingConnectionIdleTimeout: 0s
syncFrequency: 0s
volumeStatsAggPeriod: 0s
` + extra
}

const calicoConflist = `{
  "name": "k8s-pod-network",
  "cniVersion": "0.3.1",
  "plugins": [
    {
      "type": "calico",
      "datastore_type": "kubernetes",
      "mtu": 0,
      "nodename_file_optional": false,
      "log_level": "Info",
      "log_file_path": "/var/log/calico/cni/cni.log",
      "ipam": { "type": "calico-ipam", "assign_ipv4" : "true", "assign_ipv6" : "false"},
      "container_settings": {
          "allow_ip_forwarding": false
      },
      "policy": {
          "type": "k8s"
      },
      "kubernetes": {
          "k8s_api_root":"https://10.96.0.1:443",
          "kubeconfig": "/etc/cni/net.d/calico-kubeconfig"
      }
    },
    {
      "type": "bandwidth",
      "capabilities": {"bandwidth": true}
    },
    {"type": "portmap", "snat": true, "capabilities": {"portMappings": true}}
  ]
}
`

// Deterministic keys: ed25519 from fixed seeds, so regenerating the trees
// gives the same bytes.
func Key(seed string) ed25519.PrivateKey {
	s := sha256.Sum256([]byte(seed))
	return ed25519.NewKeyFromSeed(s[:])
}

// A CA is a cluster's certificate authority.
type CA struct {
	cert *x509.Certificate
	key  ed25519.PrivateKey
	// PEM is ca.crt.
	PEM []byte
}

// NewCA returns a deterministic CA valid for ten years from start.
func NewCA(seed string, start time.Time) *CA {
	k := Key(seed)
	c := mustCert(&x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kubernetes"},
		NotBefore:             start,
		NotAfter:              start.AddDate(10, 0, 0),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
	}, nil, k)
	return &CA{cert: c, key: k, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})}
}

var (
	// CAStart is when the example hosts' cluster CA was made.
	CAStart   = time.Date(2024, 4, 30, 23, 50, 0, 0, time.UTC)
	exampleCA = NewCA("nodediag example cluster CA", CAStart)
	// CAPEM is the example hosts' ca.crt.
	CAPEM = exampleCA.PEM
)

func mustCert(tmpl, parent *x509.Certificate, signer ed25519.PrivateKey) *x509.Certificate {
	if parent == nil {
		parent = tmpl
	}
	der, err := x509.CreateCertificate(nil, tmpl, parent, signer.Public(), signer)
	if err != nil {
		panic(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		panic(err)
	}
	return c
}

// certPEM is a certificate signed by the example CA (or self-signed).
func CertPEM(cn string, notBefore, notAfter time.Time, selfSigned bool, serial int64) []byte {
	return exampleCA.CertPEM(cn, notBefore, notAfter, selfSigned, serial)
}

// CertPEM is a certificate signed by ca (or self-signed).
func (ca *CA) CertPEM(cn string, notBefore, notAfter time.Time, selfSigned bool, serial int64) []byte {
	k := Key(cn)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	parent, signer := ca.cert, ca.key
	if selfSigned {
		parent, signer = tmpl, k
	}
	der, err := x509.CreateCertificate(nil, tmpl, parent, k.Public(), signer)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// clientPEM is a kubelet client certificate file: the certificate and its
// private key, as the kubelet's certificate manager writes them.
func ClientPEM(cn string, notBefore, notAfter time.Time) []byte {
	return exampleCA.ClientPEM(cn, notBefore, notAfter)
}

// ClientPEM is a kubelet client certificate file signed by ca.
func (ca *CA) ClientPEM(cn string, notBefore, notAfter time.Time) []byte {
	k := Key(cn)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(notBefore.Unix()),
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"system:nodes"}},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(nil, tmpl, ca.cert, k.Public(), ca.key)
	if err != nil {
		panic(err)
	}
	pk, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		panic(err)
	}
	return append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk})...)
}

// cloudInit writes cloud-init's state files for a run that started at
// boot: status.json and (when finished) result.json, as cloud-init 24.x
// writes them, with /run links, boot-finished, and the CAPI sentinel when
// bootstrap succeeded.
type CIRun struct {
	Boot       time.Time
	FinalStart time.Time
	FinalEnd   time.Time // zero: modules-final still running
	Errors     []string  // modules-final errors
	Sentinel   bool
}

func (c CIRun) Files() Tree {
	epoch := func(t time.Time) string {
		if t.IsZero() {
			return "null"
		}
		return fmt.Sprintf("%.3f", float64(t.UnixMilli())/1000)
	}
	stage := func(name string, start, end time.Time, errs []string) string {
		q := make([]string, len(errs))
		for i, e := range errs {
			q[i] = fmt.Sprintf("%q", e)
		}
		return fmt.Sprintf(`  %q: {
   "errors": [%s],
   "finished": %s,
   "recoverable_errors": {},
   "start": %s
  }`, name, strings.Join(q, ", "), epoch(end), epoch(start))
	}
	b := c.Boot
	running := "null"
	if c.FinalEnd.IsZero() {
		running = `"modules-final"`
	}
	status := "{\n \"v1\": {\n  \"datasource\": \"DataSourceAzure [seed=/dev/sr0]\",\n" +
		stage("init", b.Add(16*time.Second), b.Add(21*time.Second), nil) + ",\n" +
		stage("init-local", b.Add(8*time.Second), b.Add(12*time.Second), nil) + ",\n" +
		stage("modules-config", b.Add(26*time.Second), b.Add(28*time.Second), nil) + ",\n" +
		stage("modules-final", c.FinalStart, c.FinalEnd, c.Errors) + ",\n" +
		stage("modules-init", b.Add(22*time.Second), b.Add(25*time.Second), nil) + ",\n" +
		"  \"stage\": " + running + "\n }\n}\n"
	t := Tree{
		"var/lib/cloud/data/status.json": status,
		"run/cloud-init/status.json":     "->../../var/lib/cloud/data/status.json",
		"run/cloud-init/enabled":         "",
		"var/lib/cloud/instance":         "->/var/lib/cloud/instances/7d3c6a2e-5b1f-4c8e-9a4d-2f6b8e1c0a93",
		"var/lib/cloud/instances/7d3c6a2e-5b1f-4c8e-9a4d-2f6b8e1c0a93/sem/config_scripts_user": fmt.Sprintf("%d: %d\n", 1342, c.FinalStart.Add(2*time.Second).Unix()),
		"var/lib/cloud/instances/7d3c6a2e-5b1f-4c8e-9a4d-2f6b8e1c0a93/scripts/runcmd":          runcmdScript,
	}
	if !c.FinalEnd.IsZero() {
		q := make([]string, len(c.Errors))
		for i, e := range c.Errors {
			q[i] = fmt.Sprintf("%q", e)
		}
		t["var/lib/cloud/data/result.json"] = "{\n \"v1\": {\n  \"datasource\": \"DataSourceAzure [seed=/dev/sr0]\",\n  \"errors\": [" + strings.Join(q, ", ") + "]\n }\n}\n"
		t["run/cloud-init/result.json"] = "->../../var/lib/cloud/data/result.json"
		t["var/lib/cloud/instances/7d3c6a2e-5b1f-4c8e-9a4d-2f6b8e1c0a93/boot-finished"] = fmt.Sprintf("%.2f - %s - v. 24.4.1-0ubuntu0~24.04.1\n", c.FinalEnd.Sub(b).Seconds(), c.FinalEnd.Format("Mon, 02 Jan 2006 15:04:05 -0700"))
	}
	if c.Sentinel {
		t["run/cluster-api/bootstrap-success.complete"] = "success\n"
	} else {
		t["run/cluster-api/"] = ""
	}
	return t
}

// runcmdScript is the runcmd cloud-init renders from CAPI's kubeadm bootstrap.
const runcmdScript = `#!/bin/sh
'/tmp/kubeadm-bootstrap.sh'
kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml  && echo success > /run/cluster-api/bootstrap-success.complete
`

// ciHeader is cloud-init's stage banner in cloud-init-output.log.
func ciHeader(version, stage string, at time.Time, up float64) string {
	return fmt.Sprintf("Cloud-init v. %s running '%s' at %s. Up %.2f seconds.", version, stage, at.Format("Mon, 02 Jan 2006 15:04:05 -0700"), up)
}

func ciFooter(version string, at time.Time, up float64) string {
	return fmt.Sprintf("Cloud-init v. %s finished at %s. Datasource DataSourceAzure [seed=/dev/sr0].  Up %.2f seconds", version, at.Format("Mon, 02 Jan 2006 15:04:05 -0700"), up)
}

// outputLog renders cloud-init-output.log: the banners of the first stages,
// then the final stage's output, then (if finished) the footer.
func OutputLog(c CIRun, version string, final string) string {
	b := c.Boot
	var s strings.Builder
	s.WriteString(ciHeader(version, "init-local", b.Add(8*time.Second), 8.05) + "\n")
	s.WriteString(ciHeader(version, "init", b.Add(16*time.Second), 15.97) + "\n")
	s.WriteString(`ci-info: ++++++++++++++++++++++++++++++++++++++Net device info+++++++++++++++++++++++++++++++++++++++
ci-info: +--------+------+------------------------------+---------------+--------+-------------------+
ci-info: | Device |  Up  |           Address            |      Mask     | Scope  |     Hw-Address    |
ci-info: +--------+------+------------------------------+---------------+--------+-------------------+
ci-info: |  eth0  | True |          10.1.0.4            | 255.255.0.0   | global | 60:45:bd:8a:2c:11 |
ci-info: +--------+------+------------------------------+---------------+--------+-------------------+
`)
	s.WriteString(ciHeader(version, "modules:config", b.Add(26*time.Second), 26.12) + "\n")
	s.WriteString(ciHeader(version, "modules:final", c.FinalStart, c.FinalStart.Sub(b).Seconds()) + "\n")
	s.WriteString(strings.TrimLeft(final, "\n"))
	if !c.FinalEnd.IsZero() {
		s.WriteString(ciFooter(version, c.FinalEnd, c.FinalEnd.Sub(b).Seconds()) + "\n")
	}
	return s.String()
}

// WriteTree writes t under root: directories for names ending in "/" (with
// a .keep file, since git keeps no empty directory), symlinks for "->target",
// mode 0755 for scripts ("#!"), 0644 for the rest.
func WriteTree(root string, t Tree) error {
	names := make([]string, 0, len(t))
	for n := range t {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		content := t[name]
		p := filepath.Join(root, name)
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
			// git keeps no empty directory.
			if err := os.WriteFile(filepath.Join(p, ".keep"), nil, 0o644); err != nil {
				return err
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if target, ok := strings.CutPrefix(content, "->"); ok {
			// A YAML block scalar ends in a newline, which no link target
			// of a node holds.
			target = strings.TrimRight(target, "\n")
			if err := os.Symlink(target, p); err != nil {
				return err
			}
			continue
		}
		mode := os.FileMode(0o644)
		if strings.HasPrefix(content, "#!") {
			mode = 0o755
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			return err
		}
	}
	return nil
}

// StaticPod is a kubeadm control plane's static pod manifest.
func StaticPod(name, image string) string {
	return `apiVersion: v1
kind: Pod
metadata:
  creationTimestamp: null
  labels:
    component: ` + name + `
    tier: control-plane
  name: ` + name + `
  namespace: kube-system
spec:
  containers:
  - command:
    - ` + name + `
    image: ` + image + `
    imagePullPolicy: IfNotPresent
    name: ` + name + `
    resources:
      requests:
        cpu: 250m
  hostNetwork: true
  priorityClassName: system-node-critical
status: {}
`
}
