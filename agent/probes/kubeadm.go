package probes

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/probe"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// What kubeadm and the Cluster API kubeadm bootstrap provider (CABPK) leave on
// a node.
const (
	// kubeadm's directory; its absence (with kubeadmRunDir's) means this is
	// not a kubeadm node.
	kubeadmEtcDir = "/etc/kubernetes"
	// CABPK's cloud-init writes the kubeadm configuration here (tmpfs: gone
	// after a reboot).
	kubeadmRunDir = "/run/kubeadm"
	// kubeadm init and join --control-plane write the control plane's static
	// pods here; it is the kubelet's staticPodPath.
	kubeadmManifestsDir = "/etc/kubernetes/manifests"
	// Written by kubeadm after the kubelet's TLS bootstrap: the API server
	// the kubelet talks to.
	kubeletKubeconfigPath = "/etc/kubernetes/kubelet.conf"
	// Written by kubeadm join for the TLS bootstrap (bootstrap token); it is
	// removed once kubelet.conf exists.
	bootstrapKubeletKubeconfigPath = "/etc/kubernetes/bootstrap-kubelet.conf"
)

// kubeadmConfigPaths are the kubeadm configuration files CABPK writes with
// cloud-init (kubernetes-sigs/cluster-api bootstrap/kubeadm/internal/cloudinit:
// controlplane_init.go writes /run/kubeadm/kubeadm.yaml with a
// ClusterConfiguration and an InitConfiguration; node.go and
// controlplane_join.go write /run/kubeadm/kubeadm-join-config.yaml with a
// JoinConfiguration). The v1alpha3-era provider wrote the same files in /tmp.
var kubeadmConfigPaths = []string{
	"/run/kubeadm/kubeadm.yaml",
	"/run/kubeadm/kubeadm-join-config.yaml",
	"/tmp/kubeadm.yaml",
	"/tmp/kubeadm-join-config.yaml",
}

// kubeadmMaxFile caps what is read of one manifest, configuration or
// kubeconfig: the real ones are a few KiB.
const kubeadmMaxFile = 1 << 20

// kubeadm reads what kubeadm configured on the node: the control plane's
// static pods, the bootstrap provider's kubeadm configuration and the
// kubelet's kubeconfigs. It never keeps a secret: of the configuration and
// the kubeconfigs it parses only the fields it reports (no token,
// certificate key, CA hash or client key is ever decoded), and the lines it
// quotes are checked to hold nothing but the quoted field.
type kubeadm struct{}

func (kubeadm) Name() string { return "kubeadm" }

// Run fills nodediagv1.Kubeadm. It is not applicable when neither
// /etc/kubernetes nor /run/kubeadm exists.
func (kubeadm) Run(_ context.Context, h *host.Host) (*nodediagv1.ProbeEvidence, error) {
	pe := &nodediagv1.ProbeEvidence{}
	present := false
	for _, d := range []string{kubeadmEtcDir, kubeadmRunDir} {
		ok, err := h.Exists(d)
		if err != nil {
			probe.Unreadable(pe, d, err)
			ok = true // there, but unreadable
		}
		present = present || ok
	}
	if !present {
		return nil, fmt.Errorf("neither %s nor %s exists: not a kubeadm node: %w", kubeadmEtcDir, kubeadmRunDir, probe.ErrNotApplicable)
	}

	k := &nodediagv1.Kubeadm{}
	k.StaticPods = readKubeadmStaticPods(h, pe)
	runDir, _ := h.Exists(kubeadmRunDir)
	for _, p := range kubeadmConfigPaths {
		if runDir && strings.HasPrefix(p, "/tmp/") {
			// /tmp/kubeadm.yaml is also what an operator names a file
			// written by hand: only the old provider's place when the
			// current one is not there.
			continue
		}
		b, ok := kubeadmRead(h, pe, p)
		if !ok {
			continue
		}
		k.ConfigFiles = append(k.ConfigFiles, parseKubeadmConfig(p, b))
	}
	k.KubeletConf = readKubeadmKubeconfig(h, pe, kubeletKubeconfigPath)
	k.BootstrapKubeletConf = readKubeadmKubeconfig(h, pe, bootstrapKubeletKubeconfigPath)
	deriveKubeadmControlPlane(k)
	pe.Data = &nodediagv1.ProbeEvidence_Kubeadm{Kubeadm: k}
	return pe, nil
}

// kubeadmRead reads a file that may be absent; ok is false when there is
// nothing to parse (absent, or recorded as unreadable). A file over the cap
// is returned cut, and parses as the malformed file it then is.
func kubeadmRead(h *host.Host, pe *nodediagv1.ProbeEvidence, p string) ([]byte, bool) {
	b, truncated, err := h.ReadFileLimit(p, kubeadmMaxFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false
	}
	if err != nil {
		probe.Unreadable(pe, p, err)
		return nil, false
	}
	if truncated {
		probe.Unreadable(pe, p, fmt.Errorf("larger than %d bytes: only the start was read", kubeadmMaxFile))
	}
	return b, true
}

// readKubeadmStaticPods parses every manifest of the static pod directory.
func readKubeadmStaticPods(h *host.Host, pe *nodediagv1.ProbeEvidence) []*nodediagv1.StaticPod {
	ents, err := h.ReadDir(kubeadmManifestsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		probe.Unreadable(pe, kubeadmManifestsDir, err)
		return nil
	}
	var out []*nodediagv1.StaticPod
	for _, e := range ents {
		name := e.Name()
		switch path.Ext(name) {
		case ".yaml", ".yml", ".json":
		default:
			continue
		}
		// The kubelet ignores hidden files (editor swap files, say).
		if strings.HasPrefix(name, ".") || e.IsDir() {
			continue
		}
		p := kubeadmManifestsDir + "/" + name
		b, truncated, err := h.ReadFileLimit(p, kubeadmMaxFile)
		if err != nil {
			probe.Unreadable(pe, p, err)
			out = append(out, &nodediagv1.StaticPod{Path: p, Name: kubeadmBaseName(p), ParseError: "cannot read: " + kubeadmValidUTF8(err.Error())})
			continue
		}
		sp := parseStaticPodManifest(p, b)
		if truncated && sp.ParseError == "" {
			sp.ParseError = fmt.Sprintf("larger than %d bytes: not read whole", kubeadmMaxFile)
		}
		out = append(out, sp)
	}
	return out
}

func readKubeadmKubeconfig(h *host.Host, pe *nodediagv1.ProbeEvidence, p string) *nodediagv1.KubeconfigFile {
	b, ok := kubeadmRead(h, pe, p)
	if !ok {
		return &nodediagv1.KubeconfigFile{Path: p}
	}
	return parseKubeconfigServer(p, b)
}

// deriveKubeadmControlPlane sets the control plane version, its source, and whether
// this node looks like a control plane node.
func deriveKubeadmControlPlane(k *nodediagv1.Kubeadm) {
	for _, sp := range k.StaticPods {
		if sp.Name == "kube-apiserver" || kubeadmBaseName(sp.Path) == "kube-apiserver" {
			k.ControlPlane = true
		}
		for _, img := range sp.Images {
			tag, ok := apiserverImageTag(img)
			if !ok {
				continue
			}
			k.ControlPlane = true
			if tag != "" && k.ControlPlaneVersion == "" {
				k.ControlPlaneVersion = tag
				k.ControlPlaneVersionSource = sp.ImageLine
				if k.ControlPlaneVersionSource == nil {
					k.ControlPlaneVersionSource = &nodediagv1.SourceLine{Path: sp.Path, Text: "image: " + img}
				}
			}
		}
	}
	for _, cf := range k.ConfigFiles {
		for _, kind := range cf.Kinds {
			if kind == "InitConfiguration" || kind == "ClusterConfiguration" {
				k.ControlPlane = true
			}
		}
		if cf.JoinControlPlane {
			k.ControlPlane = true
		}
		if k.ControlPlaneVersion == "" && cf.KubernetesVersion != "" {
			k.ControlPlaneVersion = cf.KubernetesVersion
			k.ControlPlaneVersionSource = cf.KubernetesVersionLine
		}
	}
}

// ---- parsers -----------------------------------------------------------------

// kubeadmPodManifest holds the fields of a static pod that are reported.
type kubeadmPodManifest struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		InitContainers []struct {
			Image string `json:"image"`
		} `json:"initContainers"`
		Containers []podContainer `json:"containers"`
	} `json:"spec"`
}

// podContainer is what is read of a manifest's container.
type podContainer struct {
	Image   string   `json:"image"`
	Command []string `json:"command"`
	Args    []string `json:"args"`
}

// parseStaticPodManifest reads a static pod manifest (YAML or JSON) at the host
// path p: its name (metadata.name, else the file's name), the images of its
// containers and init containers, and the line of its kube-apiserver image
// (else of its first image). A malformed file gets a parse error and what
// could be learnt (the name from the file name).
func parseStaticPodManifest(p string, b []byte) *nodediagv1.StaticPod {
	sp := &nodediagv1.StaticPod{Path: p, Name: kubeadmBaseName(p)}
	var m kubeadmPodManifest
	if err := yaml.Unmarshal(b, &m); err != nil {
		sp.ParseError = kubeadmValidUTF8(err.Error())
		return sp
	}
	if m.Kind != "" && m.Kind != "Pod" {
		sp.ParseError = fmt.Sprintf("kind %q, not Pod", kubeadmValidUTF8(m.Kind))
	}
	if m.Metadata.Name != "" {
		sp.Name = kubeadmValidUTF8(m.Metadata.Name)
	}
	for _, c := range m.Spec.InitContainers {
		if c.Image != "" {
			sp.Images = append(sp.Images, kubeadmValidUTF8(c.Image))
		}
	}
	for _, c := range m.Spec.Containers {
		if c.Image != "" {
			sp.Images = append(sp.Images, kubeadmValidUTF8(c.Image))
		}
	}
	quoted := ""
	for _, img := range sp.Images {
		if _, ok := apiserverImageTag(img); ok {
			quoted = img
			break
		}
	}
	if quoted == "" && len(sp.Images) > 0 {
		quoted = sp.Images[0]
	}
	if quoted != "" {
		sp.ImageLine = kubeadmFieldLine(p, b, 1, "image", quoted)
	}
	sp.FlagLines = manifestFlagLines(p, b, m)
	return sp
}

// maxManifestFlags bounds the flag lines kept of a manifest.
const maxManifestFlags = 100

// manifestFlagLines finds the lines of the flags the containers' command
// and args set: each "--name[=value]" item, as the YAML list writes it
// ("- --address=0.0.0.0", quoted or not) or as a JSON array element.
func manifestFlagLines(p string, b []byte, m kubeadmPodManifest) []*nodediagv1.SourceLine {
	want := map[string]bool{}
	for _, c := range m.Spec.Containers {
		for _, a := range append(append([]string(nil), c.Command...), c.Args...) {
			if strings.HasPrefix(a, "-") {
				want[a] = true
			}
		}
	}
	if len(want) == 0 {
		return nil
	}
	var out []*nodediagv1.SourceLine
	for i, l := range strings.Split(string(b), "\n") {
		l = strings.TrimRight(l, "\r")
		t := strings.TrimSpace(l)
		t = strings.TrimSpace(strings.TrimPrefix(t, "- "))
		t = strings.TrimSuffix(t, ",")
		t = strings.Trim(t, `"'`)
		if want[t] {
			out = append(out, &nodediagv1.SourceLine{Path: p, Line: int32(i + 1), Text: kubeadmValidUTF8(l)})
			if len(out) == maxManifestFlags {
				break
			}
		}
	}
	return out
}

// kubeadmDoc holds the fields of a kubeadm configuration document that are
// reported, and nothing else: bootstrap tokens, certificate keys, CA cert
// hashes and the discovery token are never decoded.
type kubeadmDoc struct {
	Kind                 string `json:"kind"`
	KubernetesVersion    string `json:"kubernetesVersion"`
	ImageRepository      string `json:"imageRepository"`
	ControlPlaneEndpoint string `json:"controlPlaneEndpoint"`
	Discovery            struct {
		BootstrapToken *struct {
			APIServerEndpoint string `json:"apiServerEndpoint"`
		} `json:"bootstrapToken"`
	} `json:"discovery"`
	// Only whether it is set: it holds the certificate key.
	ControlPlane *struct{} `json:"controlPlane"`
}

// parseKubeadmConfig reads a kubeadm configuration file (several YAML
// documents) at the host path p. A malformed document is recorded in
// parse_error (the first one) and the other documents are still read.
func parseKubeadmConfig(p string, b []byte) *nodediagv1.KubeadmConfigFile {
	cf := &nodediagv1.KubeadmConfigFile{Path: p}
	for _, d := range kubeadmSplitDocuments(b) {
		var doc kubeadmDoc
		if err := yaml.Unmarshal(d.text, &doc); err != nil {
			if cf.ParseError == "" {
				cf.ParseError = fmt.Sprintf("document at line %d: %s", d.line, fileLineInYAMLError(err.Error(), d.line))
			}
			continue
		}
		if doc.Kind != "" {
			cf.Kinds = append(cf.Kinds, kubeadmValidUTF8(doc.Kind))
		}
		if doc.KubernetesVersion != "" && cf.KubernetesVersion == "" {
			cf.KubernetesVersion = kubeadmValidUTF8(doc.KubernetesVersion)
			cf.KubernetesVersionLine = kubeadmFieldLine(p, d.text, d.line, "kubernetesVersion", doc.KubernetesVersion)
		}
		if doc.ImageRepository != "" && cf.ImageRepository == "" {
			cf.ImageRepository = kubeadmValidUTF8(doc.ImageRepository)
		}
		if doc.ControlPlaneEndpoint != "" && cf.ControlPlaneEndpoint == "" {
			cf.ControlPlaneEndpoint = kubeadmValidUTF8(doc.ControlPlaneEndpoint)
		}
		if doc.Kind == "JoinConfiguration" {
			if bt := doc.Discovery.BootstrapToken; bt != nil && cf.JoinApiServerEndpoint == "" {
				cf.JoinApiServerEndpoint = kubeadmValidUTF8(bt.APIServerEndpoint)
			}
			cf.JoinControlPlane = cf.JoinControlPlane || doc.ControlPlane != nil
		}
	}
	return cf
}

// kubeadmKubeconfigDoc holds the fields of a kubeconfig that are reported: no
// user (client key, certificate, token) is ever decoded.
type kubeadmKubeconfigDoc struct {
	CurrentContext string `json:"current-context"`
	Clusters       []struct {
		Name    string `json:"name"`
		Cluster struct {
			Server string `json:"server"`
		} `json:"cluster"`
	} `json:"clusters"`
	Contexts []struct {
		Name    string `json:"name"`
		Context struct {
			Cluster string `json:"cluster"`
		} `json:"context"`
	} `json:"contexts"`
}

// parseKubeconfigServer reads the API server URL of a kubeconfig at the host
// path p: the current context's cluster, else the first cluster.
func parseKubeconfigServer(p string, b []byte) *nodediagv1.KubeconfigFile {
	kf := &nodediagv1.KubeconfigFile{Path: p, Present: true}
	var kc kubeadmKubeconfigDoc
	if err := yaml.Unmarshal(b, &kc); err != nil {
		kf.ParseError = kubeadmValidUTF8(err.Error())
		return kf
	}
	server := ""
	cluster := ""
	for _, c := range kc.Contexts {
		if c.Name == kc.CurrentContext && kc.CurrentContext != "" {
			cluster = c.Context.Cluster
			break
		}
	}
	for _, c := range kc.Clusters {
		if cluster != "" && c.Name == cluster {
			server = c.Cluster.Server
			break
		}
	}
	if server == "" && len(kc.Clusters) > 0 {
		server = kc.Clusters[0].Cluster.Server
	}
	if server == "" {
		kf.ParseError = "no cluster with a server"
		return kf
	}
	kf.Server = kubeadmValidUTF8(server)
	kf.ServerLine = kubeadmFieldLine(p, b, 1, "server", server)
	return kf
}

// apiserverImageTag says whether image is a kube-apiserver image (any
// registry or mirror: the repository's last path element is kube-apiserver,
// or the per-architecture name older kubeadm used) and returns its tag as a
// Kubernetes version: a digest is dropped, and the '_' that kubeadm writes
// for '+' (KubernetesVersionToImageTag) is turned back.
func apiserverImageTag(image string) (tag string, ok bool) {
	if i := strings.IndexByte(image, '@'); i >= 0 {
		image = image[:i]
	}
	repo := image
	if colon := strings.LastIndexByte(image, ':'); colon > strings.LastIndexByte(image, '/') {
		repo, tag = image[:colon], image[colon+1:]
	}
	if !apiserverRepoName.MatchString(repo[strings.LastIndexByte(repo, '/')+1:]) {
		return "", false
	}
	return strings.ReplaceAll(tag, "_", "+"), true
}

var apiserverRepoName = regexp.MustCompile(`^kube-apiserver(?:-(?:amd64|arm64|arm|ppc64le|s390x))?$`)

// ---- text helpers ------------------------------------------------------------

// kubeadmYAMLDoc is one document of a multi-document YAML file and the 1-based
// line it starts on.
type kubeadmYAMLDoc struct {
	text []byte
	line int
}

// kubeadmSplitDocuments splits b on "---" separator lines. Documents that hold
// nothing are dropped.
func kubeadmSplitDocuments(b []byte) []kubeadmYAMLDoc {
	var out []kubeadmYAMLDoc
	lines := strings.SplitAfter(string(b), "\n")
	start := 0
	flush := func(end int) {
		text := strings.Join(lines[start:end], "")
		if strings.TrimSpace(text) != "" {
			out = append(out, kubeadmYAMLDoc{text: []byte(text), line: start + 1})
		}
	}
	for i, l := range lines {
		if kubeadmDocSeparator.MatchString(strings.TrimRight(l, "\r\n")) {
			flush(i)
			start = i + 1
		}
	}
	flush(len(lines))
	return out
}

var kubeadmDocSeparator = regexp.MustCompile(`^(?:---|\.\.\.)\s*(?:#.*)?$`)

// kubeadmFieldLine finds the line of b (which starts at line first of the file)
// that sets key to value, in YAML ("key: value", "- key: 'value'") or JSON
// ("\"key\": \"value\","), and returns it for quoting. Only a line that holds
// nothing but that key and value is returned (not even a comment), so a quote can
// never carry another field of the file, such as a secret on the same line of
// a one-line JSON kubeconfig.
func kubeadmFieldLine(p string, b []byte, first int, key, value string) *nodediagv1.SourceLine {
	re, err := regexp.Compile(`^\s*(?:-\s+)?["']?` + regexp.QuoteMeta(key) + `["']?\s*:\s*["']?` + regexp.QuoteMeta(value) + `["']?\s*,?\s*$`)
	if err != nil {
		return nil
	}
	for i, l := range strings.Split(string(b), "\n") {
		l = strings.TrimRight(l, "\r")
		if re.MatchString(l) {
			return &nodediagv1.SourceLine{Path: p, Line: int32(first + i), Text: kubeadmValidUTF8(l)}
		}
	}
	return nil
}

var kubeadmYAMLErrorLine = regexp.MustCompile(`\bline (\d+)\b`)

// fileLineInYAMLError rewrites the line numbers of a YAML error about a
// document that starts at line first of its file so that they count from the
// top of the file, as an operator opening it does.
func fileLineInYAMLError(msg string, first int) string {
	msg = kubeadmYAMLErrorLine.ReplaceAllStringFunc(msg, func(m string) string {
		var n int
		if _, err := fmt.Sscanf(m, "line %d", &n); err != nil {
			return m
		}
		return fmt.Sprintf("line %d", n+first-1)
	})
	return kubeadmValidUTF8(msg)
}

// kubeadmBaseName is the file name without its extension.
func kubeadmBaseName(p string) string {
	base := path.Base(p)
	return strings.TrimSuffix(base, path.Ext(base))
}

func kubeadmValidUTF8(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
