package probes

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/nodediag/nodediag/agent/host/hosttest"
	"github.com/nodediag/nodediag/agent/probe"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// Fixtures as kubeadm and CABPK write them. The secrets are made up but
// shaped like the real ones; kadmSecrets lists them so that a test can
// check none leaks into evidence.
const (
	kadmSecretToken     = "abcdef.0123456789abcdef"
	kadmSecretCertKey   = "9d7a3e5c1b2f4a6d8e0c2b4a6f8d0e1c3b5a7f9d1e3c5b7a9f1d3e5c7b9a1f3d"
	kadmSecretCAHash    = "sha256:7c8f1e0a2b4d6f8a0c2e4b6d8f0a2c4e6b8d0f2a4c6e8b0d2f4a6c8e0b2d4f6a"
	kadmSecretClientKey = "LS0tLS1CRUdJTiBFQyBQUklWQVRFIEtFWS0tLS0tCk1IY0NBUUVFSVBSSVZBVEVLRVlEQVRB"
	kadmSecretClientCrt = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUNMSUVOVENFUlREQVRB"
	kadmSecretCAData    = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUNBQ0VSVERBVEFDQQ"
	kadmSecretBootstrap = "07401b.f395accd246ae52d"
)

var kadmSecrets = []string{kadmSecretToken, "0123456789abcdef", kadmSecretCertKey, kadmSecretCAHash, kadmSecretClientKey, kadmSecretClientCrt, kadmSecretBootstrap}

const kadmAPIServerManifest = `apiVersion: v1
kind: Pod
metadata:
  annotations:
    kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint: 10.0.0.4:6443
  creationTimestamp: null
  labels:
    component: kube-apiserver
    tier: control-plane
  name: kube-apiserver
  namespace: kube-system
spec:
  containers:
  - command:
    - kube-apiserver
    - --advertise-address=10.0.0.4
    - --allow-privileged=true
    image: registry.k8s.io/kube-apiserver:v1.32.0
    imagePullPolicy: IfNotPresent
    name: kube-apiserver
  hostNetwork: true
  priorityClassName: system-node-critical
status: {}
`

const kadmEtcdManifest = `apiVersion: v1
kind: Pod
metadata:
  name: etcd
  namespace: kube-system
spec:
  containers:
  - command:
    - etcd
    image: registry.k8s.io/etcd:3.5.16-0
    name: etcd
`

const kadmInitConfig = `---
apiServer:
  certSANs:
  - localhost
  - 127.0.0.1
  extraArgs:
    cloud-provider: external
apiVersion: kubeadm.k8s.io/v1beta3
clusterName: capz-e2e
controlPlaneEndpoint: capz-e2e-abc.eastus.cloudapp.azure.com:6443
controllerManager:
  extraArgs:
    cloud-provider: external
dns: {}
etcd:
  local:
    dataDir: /var/lib/etcddisk/etcd
imageRepository: registry.k8s.io
kind: ClusterConfiguration
kubernetesVersion: v1.32.0
networking:
  dnsDomain: cluster.local
  podSubnet: 192.168.0.0/16
scheduler: {}

---
apiVersion: kubeadm.k8s.io/v1beta3
bootstrapTokens:
- token: ` + kadmSecretToken + `
  ttl: 15m0s
certificateKey: ` + kadmSecretCertKey + `
kind: InitConfiguration
localAPIEndpoint: {}
nodeRegistration:
  kubeletExtraArgs:
    cloud-provider: external
  name: '{{ ds.meta_data["local_hostname"] }}'
`

const kadmJoinConfig = `---
apiVersion: kubeadm.k8s.io/v1beta3
discovery:
  bootstrapToken:
    apiServerEndpoint: capz-e2e-abc.eastus.cloudapp.azure.com:6443
    caCertHashes:
    - ` + kadmSecretCAHash + `
    token: ` + kadmSecretToken + `
kind: JoinConfiguration
nodeRegistration:
  kubeletExtraArgs:
    cloud-provider: external
  name: '{{ ds.meta_data["local_hostname"] }}'
`

const kadmControlPlaneJoinConfig = kadmJoinConfig + `controlPlane:
  certificateKey: ` + kadmSecretCertKey + `
  localAPIEndpoint: {}
`

const kadmKubeletConf = `apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: ` + kadmSecretCAData + `
    server: https://capz-e2e-abc.eastus.cloudapp.azure.com:6443
  name: capz-e2e
contexts:
- context:
    cluster: capz-e2e
    user: system:node:node-1
  name: system:node:node-1@capz-e2e
current-context: system:node:node-1@capz-e2e
kind: Config
preferences: {}
users:
- name: system:node:node-1
  user:
    client-certificate-data: ` + kadmSecretClientCrt + `
    client-key-data: ` + kadmSecretClientKey + `
`

const kadmBootstrapKubeletConf = `apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: ` + kadmSecretCAData + `
    server: https://capz-e2e-abc.eastus.cloudapp.azure.com:6443
  name: capz-e2e
contexts:
- context:
    cluster: capz-e2e
    user: tls-bootstrap-token-user
  name: tls-bootstrap-token-user@capz-e2e
current-context: tls-bootstrap-token-user@capz-e2e
kind: Config
preferences: {}
users:
- name: tls-bootstrap-token-user
  user:
    token: ` + kadmSecretBootstrap + `
`

// ---- parsers -------------------------------------------------------------

var kadmStaticPodCases = []struct {
	name string
	path string
	in   string
	want *nodediagv1.StaticPod
}{
	{
		name: "kubeadm kube-apiserver",
		path: "/etc/kubernetes/manifests/kube-apiserver.yaml",
		in:   kadmAPIServerManifest,
		want: &nodediagv1.StaticPod{
			Path: "/etc/kubernetes/manifests/kube-apiserver.yaml", Name: "kube-apiserver",
			Images:    []string{"registry.k8s.io/kube-apiserver:v1.32.0"},
			ImageLine: &nodediagv1.SourceLine{Path: "/etc/kubernetes/manifests/kube-apiserver.yaml", Line: 18, Text: "    image: registry.k8s.io/kube-apiserver:v1.32.0"},
			FlagLines: []*nodediagv1.SourceLine{
				{Path: "/etc/kubernetes/manifests/kube-apiserver.yaml", Line: 16, Text: "    - --advertise-address=10.0.0.4"},
				{Path: "/etc/kubernetes/manifests/kube-apiserver.yaml", Line: 17, Text: "    - --allow-privileged=true"},
			},
		},
	},
	{
		name: "etcd: first image quoted",
		path: "/etc/kubernetes/manifests/etcd.yaml",
		in:   kadmEtcdManifest,
		want: &nodediagv1.StaticPod{
			Path: "/etc/kubernetes/manifests/etcd.yaml", Name: "etcd",
			Images:    []string{"registry.k8s.io/etcd:3.5.16-0"},
			ImageLine: &nodediagv1.SourceLine{Path: "/etc/kubernetes/manifests/etcd.yaml", Line: 10, Text: "    image: registry.k8s.io/etcd:3.5.16-0"},
		},
	},
	{
		name: "json, init containers, mirror registry",
		path: "/etc/kubernetes/manifests/apiserver.json",
		in: `{
  "apiVersion": "v1",
  "kind": "Pod",
  "metadata": {"name": "kube-apiserver"},
  "spec": {
    "initContainers": [{"name": "wait", "image": "busybox:1.36"}],
    "containers": [
      {
        "name": "kube-apiserver",
        "image": "mirror.example.com:5000/google_containers/kube-apiserver:v1.30.4",
        "command": ["kube-apiserver"]
      }
    ]
  }
}
`,
		want: &nodediagv1.StaticPod{
			Path: "/etc/kubernetes/manifests/apiserver.json", Name: "kube-apiserver",
			Images:    []string{"busybox:1.36", "mirror.example.com:5000/google_containers/kube-apiserver:v1.30.4"},
			ImageLine: &nodediagv1.SourceLine{Path: "/etc/kubernetes/manifests/apiserver.json", Line: 10, Text: `        "image": "mirror.example.com:5000/google_containers/kube-apiserver:v1.30.4",`},
		},
	},
	{
		name: "no name: the file's",
		path: "/etc/kubernetes/manifests/kube-scheduler.yml",
		in:   "kind: Pod\nspec:\n  containers:\n  - image: \"registry.k8s.io/kube-scheduler:v1.32.0\"\n",
		want: &nodediagv1.StaticPod{
			Path: "/etc/kubernetes/manifests/kube-scheduler.yml", Name: "kube-scheduler",
			Images:    []string{"registry.k8s.io/kube-scheduler:v1.32.0"},
			ImageLine: &nodediagv1.SourceLine{Path: "/etc/kubernetes/manifests/kube-scheduler.yml", Line: 4, Text: `  - image: "registry.k8s.io/kube-scheduler:v1.32.0"`},
		},
	},
	{
		name: "malformed",
		path: "/etc/kubernetes/manifests/kube-apiserver.yaml",
		in:   "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - image: registry.k8s.io/kube-apiserver:v1.32.0\n   name: broken\n",
		want: &nodediagv1.StaticPod{
			Path: "/etc/kubernetes/manifests/kube-apiserver.yaml", Name: "kube-apiserver",
			ParseError: "error converting YAML to JSON: yaml: line 5: did not find expected key",
		},
	},
	{
		name: "wrong type",
		path: "/etc/kubernetes/manifests/x.yaml",
		in:   "kind: Pod\nspec:\n  containers: registry.k8s.io/kube-apiserver:v1.32.0\n",
		want: &nodediagv1.StaticPod{
			Path: "/etc/kubernetes/manifests/x.yaml", Name: "x",
			ParseError: "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal string into Go struct field .spec.containers of type []probes.podContainer",
		},
	},
	{
		name: "not a pod",
		path: "/etc/kubernetes/manifests/dep.yaml",
		in:   "kind: Deployment\nmetadata:\n  name: web\n",
		want: &nodediagv1.StaticPod{Path: "/etc/kubernetes/manifests/dep.yaml", Name: "web", ParseError: `kind "Deployment", not Pod`},
	},
	{
		name: "empty",
		path: "/etc/kubernetes/manifests/empty.yaml",
		in:   "",
		want: &nodediagv1.StaticPod{Path: "/etc/kubernetes/manifests/empty.yaml", Name: "empty"},
	},
}

func TestParseStaticPodManifest(t *testing.T) {
	for _, tt := range kadmStaticPodCases {
		t.Run(tt.name, func(t *testing.T) {
			got := parseStaticPodManifest(tt.path, []byte(tt.in))
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("parseStaticPodManifest (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAPIServerImageTag(t *testing.T) {
	tests := []struct {
		image  string
		tag    string
		isAPIS bool
	}{
		{"registry.k8s.io/kube-apiserver:v1.30.4", "v1.30.4", true},
		{"registry.aliyuncs.com/google_containers/kube-apiserver:v1.32.0", "v1.32.0", true},
		{"mirror.example.com:5000/kube-apiserver:v1.31.100", "v1.31.100", true},
		{"registry.k8s.io/kube-apiserver:v1.33.0-alpha.1.123_abcdef012345", "v1.33.0-alpha.1.123+abcdef012345", true},
		{"registry.k8s.io/kube-apiserver:v1.30.4@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "v1.30.4", true},
		{"registry.k8s.io/kube-apiserver@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "", true},
		{"mirror.example.com:5000/kube-apiserver", "", true},
		{"kube-apiserver:v1.29.0", "v1.29.0", true},
		{"k8s.gcr.io/kube-apiserver-amd64:v1.11.3", "v1.11.3", true},
		{"registry.k8s.io/kube-controller-manager:v1.30.4", "", false},
		{"registry.k8s.io/etcd:3.5.16-0", "", false},
		{"example.com/kube-apiserver-proxy:v1", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.image, func(t *testing.T) {
			tag, ok := apiserverImageTag(tt.image)
			if tag != tt.tag || ok != tt.isAPIS {
				t.Errorf("apiserverImageTag(%q) = %q, %v; want %q, %v", tt.image, tag, ok, tt.tag, tt.isAPIS)
			}
		})
	}
}

var kadmConfigCases = []struct {
	name string
	in   string
	want *nodediagv1.KubeadmConfigFile
}{
	{
		name: "CABPK init",
		in:   kadmInitConfig,
		want: &nodediagv1.KubeadmConfigFile{
			Path: "/run/kubeadm/kubeadm.yaml", Kinds: []string{"ClusterConfiguration", "InitConfiguration"},
			KubernetesVersion:     "v1.32.0",
			KubernetesVersionLine: &nodediagv1.SourceLine{Path: "/run/kubeadm/kubeadm.yaml", Line: 20, Text: "kubernetesVersion: v1.32.0"},
			ImageRepository:       "registry.k8s.io", ControlPlaneEndpoint: "capz-e2e-abc.eastus.cloudapp.azure.com:6443",
		},
	},
	{
		name: "CABPK worker join",
		in:   kadmJoinConfig,
		want: &nodediagv1.KubeadmConfigFile{
			Path: "/run/kubeadm/kubeadm.yaml", Kinds: []string{"JoinConfiguration"},
			JoinApiServerEndpoint: "capz-e2e-abc.eastus.cloudapp.azure.com:6443",
		},
	},
	{
		name: "CABPK control plane join",
		in:   kadmControlPlaneJoinConfig,
		want: &nodediagv1.KubeadmConfigFile{
			Path: "/run/kubeadm/kubeadm.yaml", Kinds: []string{"JoinConfiguration"},
			JoinApiServerEndpoint: "capz-e2e-abc.eastus.cloudapp.azure.com:6443", JoinControlPlane: true,
		},
	},
	{
		name: "quoted version, CRLF",
		in:   "apiVersion: kubeadm.k8s.io/v1beta4\r\nkind: ClusterConfiguration\r\nkubernetesVersion: \"v1.31.100\"\r\n",
		want: &nodediagv1.KubeadmConfigFile{
			Path: "/run/kubeadm/kubeadm.yaml", Kinds: []string{"ClusterConfiguration"},
			KubernetesVersion:     "v1.31.100",
			KubernetesVersionLine: &nodediagv1.SourceLine{Path: "/run/kubeadm/kubeadm.yaml", Line: 3, Text: `kubernetesVersion: "v1.31.100"`},
		},
	},
	{
		name: "malformed document among good ones",
		in:   "kind: InitConfiguration\nbootstrapTokens:\n- token: " + kadmSecretToken + "\n---\nkind: ClusterConfiguration\nkubernetesVersion: v1.32.0\n  networking: [\n---\nkind: JoinConfiguration\n",
		want: &nodediagv1.KubeadmConfigFile{
			Path: "/run/kubeadm/kubeadm.yaml", Kinds: []string{"InitConfiguration", "JoinConfiguration"},
			ParseError: "document at line 5: error converting YAML to JSON: yaml: line 7: mapping values are not allowed in this context",
		},
	},
	{
		name: "version label, not a version",
		in:   "kind: ClusterConfiguration\nkubernetesVersion: stable-1.32\n",
		want: &nodediagv1.KubeadmConfigFile{
			Path: "/run/kubeadm/kubeadm.yaml", Kinds: []string{"ClusterConfiguration"},
			KubernetesVersion:     "stable-1.32",
			KubernetesVersionLine: &nodediagv1.SourceLine{Path: "/run/kubeadm/kubeadm.yaml", Line: 2, Text: "kubernetesVersion: stable-1.32"},
		},
	},
	{
		name: "empty",
		in:   "---\n\n---\n",
		want: &nodediagv1.KubeadmConfigFile{Path: "/run/kubeadm/kubeadm.yaml"},
	},
}

func TestParseKubeadmConfig(t *testing.T) {
	for _, tt := range kadmConfigCases {
		t.Run(tt.name, func(t *testing.T) {
			got := parseKubeadmConfig("/run/kubeadm/kubeadm.yaml", []byte(tt.in))
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("parseKubeadmConfig (-want +got):\n%s", diff)
			}
			kadmAssertNoSecret(t, got)
		})
	}
}

var kadmKubeconfigCases = []struct {
	name string
	in   string
	want *nodediagv1.KubeconfigFile
}{
	{
		name: "kubelet.conf",
		in:   kadmKubeletConf,
		want: &nodediagv1.KubeconfigFile{
			Path: "/etc/kubernetes/kubelet.conf", Present: true, Server: "https://capz-e2e-abc.eastus.cloudapp.azure.com:6443",
			ServerLine: &nodediagv1.SourceLine{Path: "/etc/kubernetes/kubelet.conf", Line: 5, Text: "    server: https://capz-e2e-abc.eastus.cloudapp.azure.com:6443"},
		},
	},
	{
		name: "current context's cluster, not the first",
		in: `clusters:
- name: old
  cluster:
    server: https://old.example.com:6443
- name: new
  cluster:
    server: "https://new.example.com:6443"
contexts:
- name: ctx
  context:
    cluster: new
current-context: ctx
`,
		want: &nodediagv1.KubeconfigFile{
			Path: "/etc/kubernetes/kubelet.conf", Present: true, Server: "https://new.example.com:6443",
			ServerLine: &nodediagv1.SourceLine{Path: "/etc/kubernetes/kubelet.conf", Line: 7, Text: `    server: "https://new.example.com:6443"`},
		},
	},
	{
		name: "no current context: first cluster",
		in:   "clusters:\n- name: a\n  cluster:\n    server: https://10.0.0.4:6443\n",
		want: &nodediagv1.KubeconfigFile{
			Path: "/etc/kubernetes/kubelet.conf", Present: true, Server: "https://10.0.0.4:6443",
			ServerLine: &nodediagv1.SourceLine{Path: "/etc/kubernetes/kubelet.conf", Line: 4, Text: "    server: https://10.0.0.4:6443"},
		},
	},
	{
		name: "one-line JSON: server but no line (it holds the secrets too)",
		in:   `{"clusters":[{"name":"a","cluster":{"server":"https://10.0.0.4:6443"}}],"users":[{"name":"u","user":{"client-key-data":"` + kadmSecretClientKey + `"}}]}`,
		want: &nodediagv1.KubeconfigFile{Path: "/etc/kubernetes/kubelet.conf", Present: true, Server: "https://10.0.0.4:6443"},
	},
	{
		name: "no cluster",
		in:   "apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user:\n    token: " + kadmSecretBootstrap + "\n",
		want: &nodediagv1.KubeconfigFile{Path: "/etc/kubernetes/kubelet.conf", Present: true, ParseError: "no cluster with a server"},
	},
	{
		name: "malformed",
		in:   "clusters:\n- cluster:\n    server: https://10.0.0.4:6443\n   name: x\nusers:\n- user:\n    token: " + kadmSecretBootstrap + "\n",
		want: &nodediagv1.KubeconfigFile{Path: "/etc/kubernetes/kubelet.conf", Present: true, ParseError: "error converting YAML to JSON: yaml: line 3: did not find expected key"},
	},
}

func TestParseKubeconfigServer(t *testing.T) {
	for _, tt := range kadmKubeconfigCases {
		t.Run(tt.name, func(t *testing.T) {
			got := parseKubeconfigServer("/etc/kubernetes/kubelet.conf", []byte(tt.in))
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("parseKubeconfigServer (-want +got):\n%s", diff)
			}
			kadmAssertNoSecret(t, got)
		})
	}
}

func TestKubeadmSplitDocuments(t *testing.T) {
	in := "---\na: 1\n--- # second\nb: 2\n\n---\n\n...\nc: 3\n"
	got := kubeadmSplitDocuments([]byte(in))
	var lines []int
	var texts []string
	for _, d := range got {
		lines = append(lines, d.line)
		texts = append(texts, string(d.text))
	}
	if diff := cmp.Diff([]int{2, 4, 9}, lines); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a: 1\n", "b: 2\n\n", "c: 3\n"}, texts); diff != "" {
		t.Errorf("texts (-want +got):\n%s", diff)
	}
}

func FuzzParseStaticPodManifest(f *testing.F) {
	for _, c := range kadmStaticPodCases {
		f.Add([]byte(c.in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		sp := parseStaticPodManifest("/etc/kubernetes/manifests/x.yaml", b)
		if _, err := protojson.Marshal(sp); err != nil {
			t.Errorf("evidence does not marshal: %v", err)
		}
	})
}

func FuzzParseKubeadmConfig(f *testing.F) {
	for _, c := range kadmConfigCases {
		f.Add([]byte(c.in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		cf := parseKubeadmConfig("/run/kubeadm/kubeadm.yaml", b)
		if _, err := protojson.Marshal(cf); err != nil {
			t.Errorf("evidence does not marshal: %v", err)
		}
	})
}

func FuzzParseKubeconfigServer(f *testing.F) {
	for _, c := range kadmKubeconfigCases {
		f.Add([]byte(c.in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		kf := parseKubeconfigServer("/etc/kubernetes/kubelet.conf", b)
		if _, err := protojson.Marshal(kf); err != nil {
			t.Errorf("evidence does not marshal: %v", err)
		}
	})
}

// kadmAssertNoSecret fails when any secret of the fixtures appears in m.
func kadmAssertNoSecret(t *testing.T, m proto.Message) {
	t.Helper()
	b, err := protojson.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range kadmSecrets {
		if strings.Contains(string(b), s) {
			t.Errorf("evidence holds the secret %q:\n%s", s, b)
		}
	}
}

// ---- probe wiring ------------------------------------------------------------

func runKubeadm(t *testing.T, files map[string]string) *nodediagv1.ProbeEvidence {
	t.Helper()
	h := hosttest.Tree(t, files)
	pe, err := kubeadm{}.Run(context.Background(), h)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if pe.GetKubeadm() == nil {
		t.Fatal("no Kubeadm data")
	}
	kadmAssertNoSecret(t, pe)
	return pe
}

func TestKubeadmControlPlaneNode(t *testing.T) {
	pe := runKubeadm(t, map[string]string{
		"etc/kubernetes/manifests/kube-apiserver.yaml":      kadmAPIServerManifest,
		"etc/kubernetes/manifests/etcd.yaml":                kadmEtcdManifest,
		"etc/kubernetes/manifests/.kube-apiserver.yaml.swp": "binary junk",
		"etc/kubernetes/manifests/README":                   "not a manifest",
		"etc/kubernetes/kubelet.conf":                       kadmKubeletConf,
		"run/kubeadm/kubeadm.yaml":                          kadmInitConfig,
	})
	apiserverLine := &nodediagv1.SourceLine{Path: "/etc/kubernetes/manifests/kube-apiserver.yaml", Line: 18, Text: "    image: registry.k8s.io/kube-apiserver:v1.32.0"}
	want := &nodediagv1.Kubeadm{
		StaticPods: []*nodediagv1.StaticPod{
			{Path: "/etc/kubernetes/manifests/etcd.yaml", Name: "etcd", Images: []string{"registry.k8s.io/etcd:3.5.16-0"},
				ImageLine: &nodediagv1.SourceLine{Path: "/etc/kubernetes/manifests/etcd.yaml", Line: 10, Text: "    image: registry.k8s.io/etcd:3.5.16-0"}},
			{Path: "/etc/kubernetes/manifests/kube-apiserver.yaml", Name: "kube-apiserver", Images: []string{"registry.k8s.io/kube-apiserver:v1.32.0"}, ImageLine: apiserverLine,
				FlagLines: []*nodediagv1.SourceLine{
					{Path: "/etc/kubernetes/manifests/kube-apiserver.yaml", Line: 16, Text: "    - --advertise-address=10.0.0.4"},
					{Path: "/etc/kubernetes/manifests/kube-apiserver.yaml", Line: 17, Text: "    - --allow-privileged=true"},
				}},
		},
		ConfigFiles: []*nodediagv1.KubeadmConfigFile{{
			Path: "/run/kubeadm/kubeadm.yaml", Kinds: []string{"ClusterConfiguration", "InitConfiguration"},
			KubernetesVersion:     "v1.32.0",
			KubernetesVersionLine: &nodediagv1.SourceLine{Path: "/run/kubeadm/kubeadm.yaml", Line: 20, Text: "kubernetesVersion: v1.32.0"},
			ImageRepository:       "registry.k8s.io", ControlPlaneEndpoint: "capz-e2e-abc.eastus.cloudapp.azure.com:6443",
		}},
		KubeletConf: &nodediagv1.KubeconfigFile{
			Path: "/etc/kubernetes/kubelet.conf", Present: true, Server: "https://capz-e2e-abc.eastus.cloudapp.azure.com:6443",
			ServerLine: &nodediagv1.SourceLine{Path: "/etc/kubernetes/kubelet.conf", Line: 5, Text: "    server: https://capz-e2e-abc.eastus.cloudapp.azure.com:6443"},
		},
		BootstrapKubeletConf:      &nodediagv1.KubeconfigFile{Path: "/etc/kubernetes/bootstrap-kubelet.conf"},
		ControlPlaneVersion:       "v1.32.0",
		ControlPlaneVersionSource: apiserverLine,
		ControlPlane:              true,
	}
	if diff := cmp.Diff(want, pe.GetKubeadm(), protocmp.Transform()); diff != "" {
		t.Errorf("Kubeadm (-want +got):\n%s", diff)
	}
	if len(pe.GetUnreadable()) != 0 {
		t.Errorf("unreadable = %v", pe.GetUnreadable())
	}
}

// After `kubeadm upgrade apply` the manifests run a newer version than the
// configuration CABPK wrote at init: the manifest is what runs.
func TestKubeadmManifestWinsOverConfig(t *testing.T) {
	pe := runKubeadm(t, map[string]string{
		"etc/kubernetes/manifests/kube-apiserver.yaml": strings.Replace(kadmAPIServerManifest, "v1.32.0", "v1.33.1", 1),
		"run/kubeadm/kubeadm.yaml":                     kadmInitConfig,
	})
	k := pe.GetKubeadm()
	if k.ControlPlaneVersion != "v1.33.1" || k.ControlPlaneVersionSource.GetPath() != "/etc/kubernetes/manifests/kube-apiserver.yaml" {
		t.Errorf("control plane version = %q from %v, want v1.33.1 from the manifest", k.ControlPlaneVersion, k.ControlPlaneVersionSource)
	}
}

func TestKubeadmWorkerJoin(t *testing.T) {
	pe := runKubeadm(t, map[string]string{
		"etc/kubernetes/manifests/":              "",
		"etc/kubernetes/bootstrap-kubelet.conf":  kadmBootstrapKubeletConf,
		"run/kubeadm/kubeadm-join-config.yaml":   kadmJoinConfig,
		"run/cluster-api/placeholder-for-layout": "",
	})
	want := &nodediagv1.Kubeadm{
		ConfigFiles: []*nodediagv1.KubeadmConfigFile{{
			Path: "/run/kubeadm/kubeadm-join-config.yaml", Kinds: []string{"JoinConfiguration"},
			JoinApiServerEndpoint: "capz-e2e-abc.eastus.cloudapp.azure.com:6443",
		}},
		KubeletConf: &nodediagv1.KubeconfigFile{Path: "/etc/kubernetes/kubelet.conf"},
		BootstrapKubeletConf: &nodediagv1.KubeconfigFile{
			Path: "/etc/kubernetes/bootstrap-kubelet.conf", Present: true, Server: "https://capz-e2e-abc.eastus.cloudapp.azure.com:6443",
			ServerLine: &nodediagv1.SourceLine{Path: "/etc/kubernetes/bootstrap-kubelet.conf", Line: 5, Text: "    server: https://capz-e2e-abc.eastus.cloudapp.azure.com:6443"},
		},
	}
	if diff := cmp.Diff(want, pe.GetKubeadm(), protocmp.Transform()); diff != "" {
		t.Errorf("Kubeadm (-want +got):\n%s", diff)
	}
}

func TestKubeadmControlPlaneJoinOldCABPK(t *testing.T) {
	pe := runKubeadm(t, map[string]string{
		"etc/kubernetes/":              "",
		"tmp/kubeadm-join-config.yaml": kadmControlPlaneJoinConfig,
	})
	k := pe.GetKubeadm()
	if !k.ControlPlane || k.ControlPlaneVersion != "" {
		t.Errorf("control plane = %v, version %q; want a control plane of unknown version", k.ControlPlane, k.ControlPlaneVersion)
	}
	if len(k.ConfigFiles) != 1 || k.ConfigFiles[0].Path != "/tmp/kubeadm-join-config.yaml" {
		t.Errorf("config files = %v", k.ConfigFiles)
	}
}

// A malformed kube-apiserver manifest is recorded, the rest still read, and
// the version falls back to the kubeadm configuration.
func TestKubeadmMalformedManifest(t *testing.T) {
	pe := runKubeadm(t, map[string]string{
		"etc/kubernetes/manifests/kube-apiserver.yaml": "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - image: registry.k8s.io/kube-apiserver:v1.32.0\n   name: broken\n",
		"etc/kubernetes/manifests/etcd.yaml":           kadmEtcdManifest,
		"run/kubeadm/kubeadm.yaml":                     kadmInitConfig,
	})
	k := pe.GetKubeadm()
	if len(k.StaticPods) != 2 {
		t.Fatalf("static pods = %v, want both", k.StaticPods)
	}
	if sp := k.StaticPods[1]; sp.Name != "kube-apiserver" || sp.ParseError == "" {
		t.Errorf("kube-apiserver = %v, want its parse error", sp)
	}
	if k.StaticPods[0].ParseError != "" || len(k.StaticPods[0].Images) != 1 {
		t.Errorf("etcd = %v, want it read", k.StaticPods[0])
	}
	if !k.ControlPlane || k.ControlPlaneVersion != "v1.32.0" || k.ControlPlaneVersionSource.GetPath() != "/run/kubeadm/kubeadm.yaml" || k.ControlPlaneVersionSource.GetLine() != 20 {
		t.Errorf("control plane = %v %q %v, want v1.32.0 from kubeadm.yaml:20", k.ControlPlane, k.ControlPlaneVersion, k.ControlPlaneVersionSource)
	}
}

// Every secret of every file the probe reads stays out of the evidence, even
// from files it cannot parse.
func TestKubeadmNeverStoresSecrets(t *testing.T) {
	brokenWithSecrets := "users:\n- user:\n    client-key-data: " + kadmSecretClientKey + "\n   token: " + kadmSecretBootstrap + "\n"
	pe := runKubeadm(t, map[string]string{
		"etc/kubernetes/kubelet.conf":           `{"clusters":[{"name":"a","cluster":{"server":"https://10.0.0.4:6443","certificate-authority-data":"` + kadmSecretCAData + `"}}],"users":[{"name":"u","user":{"client-certificate-data":"` + kadmSecretClientCrt + `","client-key-data":"` + kadmSecretClientKey + `"}}]}`,
		"etc/kubernetes/bootstrap-kubelet.conf": brokenWithSecrets,
		"run/kubeadm/kubeadm.yaml":              kadmInitConfig + "---\nkind: JoinConfiguration\ndiscovery: {bootstrapToken: {token: " + kadmSecretToken + ", caCertHashes: [" + kadmSecretCAHash + "]\n",
		"run/kubeadm/kubeadm-join-config.yaml":  kadmControlPlaneJoinConfig,
		"tmp/kubeadm.yaml":                      "certificateKey: [" + kadmSecretCertKey + "\n",
	})
	k := pe.GetKubeadm()
	if k.KubeletConf.Server != "https://10.0.0.4:6443" || k.KubeletConf.ServerLine != nil {
		t.Errorf("kubelet.conf = %v, want the server without a line", k.KubeletConf)
	}
	if k.BootstrapKubeletConf.ParseError == "" || len(k.ConfigFiles) != 2 || k.ConfigFiles[0].ParseError == "" {
		t.Errorf("want parse errors for the malformed files, and /tmp/kubeadm.yaml ignored beside /run/kubeadm: %v", k)
	}
	// runKubeadm checked the whole evidence, marshalled, for every secret.
}

func TestKubeadmNotApplicable(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{"tmp/kubeadm.yaml": kadmInitConfig, "usr/bin/": ""})
	_, err := kubeadm{}.Run(context.Background(), h)
	if !errors.Is(err, probe.ErrNotApplicable) {
		t.Fatalf("Run error = %v, want ErrNotApplicable", err)
	}
}

func TestKubeadmUnreadable(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{
		"etc/kubernetes/manifests":    "a file where the directory should be",
		"etc/kubernetes/kubelet.conf": "->/etc/kubernetes/kubelet.conf",
		"run/kubeadm/kubeadm.yaml":    kadmInitConfig,
	})
	pe, err := kubeadm{}.Run(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	var sources []string
	for _, u := range pe.GetUnreadable() {
		sources = append(sources, u.GetSource())
	}
	if diff := cmp.Diff([]string{"/etc/kubernetes/manifests", "/etc/kubernetes/kubelet.conf"}, sources); diff != "" {
		t.Errorf("unreadable (-want +got):\n%s", diff)
	}
	if k := pe.GetKubeadm(); k.ControlPlaneVersion != "v1.32.0" {
		t.Errorf("control plane version = %q, want the rest still read", k.ControlPlaneVersion)
	}
}
