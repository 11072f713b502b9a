package deploy

import (
	"bufio"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nodediag/nodediag/internal/testenv"
)

// docPath is the page whose commands TestManifestsOnAPIServer runs.
const docPath = "../docs/daemonset.md"

// docMarker precedes each fenced block of commands that the test runs:
// <!-- deploy_test: NAME --> on the line before ```sh.
const docMarker = "<!-- deploy_test: "

// docCmd is one command of a block: continuation lines joined, split into
// words (the doc's commands are kept free of quoting and expansion so that
// this split is exact).
type docCmd struct {
	line       int
	argv       []string
	background bool // ends with &
}

func (c docCmd) String() string {
	return fmt.Sprintf("docs/daemonset.md:%d: %s", c.line, strings.Join(c.argv, " "))
}

type docFile struct {
	blocks map[string][]docCmd
	ran    map[string]bool
}

// readDoc reads the marked blocks of docs/daemonset.md.
func readDoc(t *testing.T) *docFile {
	t.Helper()
	f, err := os.Open(docPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := &docFile{blocks: map[string][]docCmd{}, ran: map[string]bool{}}
	sc := bufio.NewScanner(f)
	n := 0
	var name string // the block being read
	inBlock := false
	var pending *docCmd
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case !inBlock && strings.HasPrefix(line, docMarker):
			name = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(line, docMarker), "-->"))
			if _, dup := d.blocks[name]; dup {
				t.Fatalf("%s:%d: block %q marked twice", docPath, n, name)
			}
			d.blocks[name] = nil
		case name != "" && !inBlock:
			if line != "```sh" {
				t.Fatalf("%s:%d: the line after the marker of block %q must open a ```sh block", docPath, n, name)
			}
			inBlock = true
		case inBlock && line == "```":
			if pending != nil {
				t.Fatalf("%s:%d: block %q ends in a continuation", docPath, n, name)
			}
			inBlock, name = false, ""
		case inBlock:
			text := strings.TrimSpace(line)
			if pending == nil && (text == "" || strings.HasPrefix(text, "#")) {
				continue
			}
			if strings.ContainsAny(text, "'\"`$|;<>*") {
				t.Fatalf("%s:%d: %q: the tested commands use no quoting, expansion, pipes or redirections (the test splits words on spaces)", docPath, n, text)
			}
			cont := strings.HasSuffix(text, "\\")
			text = strings.TrimSpace(strings.TrimSuffix(text, "\\"))
			if pending == nil {
				pending = &docCmd{line: n}
			}
			pending.argv = append(pending.argv, strings.Fields(text)...)
			if cont {
				continue
			}
			if last := len(pending.argv) - 1; pending.argv[last] == "&" {
				pending.argv, pending.background = pending.argv[:last], true
			}
			d.blocks[name] = append(d.blocks[name], *pending)
			pending = nil
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if inBlock {
		t.Fatalf("%s: block %q is not closed", docPath, name)
	}
	return d
}

func (d *docFile) checkAllRun(t *testing.T) {
	for name := range d.blocks {
		if !d.ran[name] {
			t.Errorf("%s: block %q is marked but no test runs it", docPath, name)
		}
	}
}

// docEnv is the operator's working directory: the repository's deploy/ and
// the certificates the doc's `nodediag certs` writes (in a temporary
// directory), and the nodediag binary of this tree.
type docEnv struct {
	work     string // where pki/ is written
	repo     string // the repository's root: deploy/... is read from it
	nodediag string
	agent    string
}

func newDocEnv(t *testing.T) *docEnv {
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return &docEnv{
		work:     t.TempDir(),
		repo:     repo,
		nodediag: testenv.Build(t, collectorPkg),
		agent:    testenv.Build(t, agentPkg),
	}
}

// path resolves a relative path of a command: the manifests from the
// repository, the rest (pki/) in the working directory.
func (e *docEnv) path(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	if p == "deploy" || strings.HasPrefix(p, "deploy/") {
		return filepath.Join(e.repo, p)
	}
	return filepath.Join(e.work, p)
}

// run runs block name of the doc against the API server of k: each command
// as kubectl or nodediag would do it, or as far as a cluster without nodes
// allows (said in the log).
func (e *docEnv) run(ctx context.Context, t *testing.T, k *kube, d *docFile, name string) {
	t.Helper()
	cmds, ok := d.blocks[name]
	if !ok || len(cmds) == 0 {
		t.Fatalf("%s has no block marked %s%s -->", docPath, docMarker, name)
	}
	d.ran[name] = true
	var applied []*unstructured.Unstructured
	for _, c := range cmds {
		switch c.argv[0] {
		case "nodediag", "nodediag-agent":
			e.nodediagCmd(t, c)
		case "kubectl":
			applied = append(applied, e.kubectl(ctx, t, k, c)...)
		default:
			t.Errorf("%s: the test does not know how to run %q", c, c.argv[0])
		}
	}
	if len(applied) > 0 {
		e.checkSecrets(ctx, t, k, applied)
	}
}

// nodediagCmd runs `nodediag certs` for real in the working directory;
// other commands need a running collector and agents, which the fleet's own
// tests start: here their flags are checked with the binary's parsing
// (--help), and the files they name must exist.
func (e *docEnv) nodediagCmd(t *testing.T, c docCmd) {
	t.Helper()
	bin := e.nodediag
	if c.argv[0] == "nodediag-agent" {
		bin = e.agent
	}
	if c.background {
		t.Errorf("%s: a nodediag command in the background", c)
	}
	if len(c.argv) > 1 && c.argv[1] == "certs" {
		cmd := exec.Command(bin, c.argv[1:]...)
		cmd.Dir = e.work
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", c, err, out)
		}
		t.Logf("%s:\n%s", c, out)
		return
	}
	if out, err := parseFlags(bin, c.argv[1:]); err != nil {
		t.Errorf("%s: %v\n%s", c, err, out)
	}
	for _, f := range []string{"tls-cert", "tls-key", "ca", "identity", "kubeconfig"} {
		if v, ok := flagValue(c.argv, f); ok {
			if _, err := os.Stat(e.path(v)); err != nil {
				t.Errorf("%s: --%s: %v", c, f, err)
			}
		}
	}
	if v, ok := flagValue(c.argv, "tls-server-name"); ok {
		if err := e.serverCert(t).VerifyHostname(v); err != nil {
			t.Errorf("%s: --tls-server-name %s is not a name of the collector's certificate: %v", c, v, err)
		}
	}
	t.Logf("%s: flags known to %s (needs a running collector: not run here)", c, filepath.Base(bin))
}

// serverCert is the collector's certificate that `nodediag certs` wrote.
func (e *docEnv) serverCert(t *testing.T) *x509.Certificate {
	t.Helper()
	return parseCert(t, e.path("pki/server.crt"))
}

func parseCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return parsePEMCert(t, path, b)
}

func parsePEMCert(t *testing.T, what string, b []byte) *x509.Certificate {
	t.Helper()
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		t.Fatalf("%s: no CERTIFICATE block", what)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return c
}

// kubectl does what the kubectl command c does, with k; it returns the
// objects it applied.
func (e *docEnv) kubectl(ctx context.Context, t *testing.T, k *kube, c docCmd) []*unstructured.Unstructured {
	t.Helper()
	// Global flags, wherever they are: the namespace is used, the
	// kubeconfig and context name the cluster (here: k).
	ns := ""
	var args []string
	for i := 1; i < len(c.argv); i++ {
		a := c.argv[i]
		switch {
		case (a == "-n" || a == "--namespace" || a == "--kubeconfig" || a == "--context") && i+1 < len(c.argv):
			if a == "-n" || a == "--namespace" {
				ns = c.argv[i+1]
			}
			i++
		case strings.HasPrefix(a, "--namespace="):
			ns = strings.TrimPrefix(a, "--namespace=")
		case strings.HasPrefix(a, "--kubeconfig="), strings.HasPrefix(a, "--context="):
		default:
			args = append(args, a)
		}
	}
	if len(args) == 0 {
		t.Fatalf("%s: no kubectl verb", c)
	}
	fail := func(format string, a ...any) {
		t.Helper()
		t.Errorf("%s: "+format, append([]any{c}, a...)...)
	}
	if c.background && args[0] != "port-forward" {
		fail("only port-forward runs in the background")
	}
	switch {
	case len(args) == 3 && args[0] == "apply" && args[1] == "-k":
		objs := render(t, e.path(args[2]))
		if err := k.apply(ctx, objs); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		t.Logf("%s: %d objects applied", c, len(objs))
		return objs
	case len(args) == 3 && args[0] == "delete" && args[1] == "-k":
		e.deleteK(ctx, t, k, c, render(t, e.path(args[2])))
	case len(args) >= 4 && args[0] == "create" && args[1] == "secret" && args[2] == "generic":
		e.createSecret(ctx, t, k, c, ns, args[3], args[4:])
	case len(args) == 3 && args[0] == "rollout" && args[1] == "status":
		e.get(ctx, t, k, c, ns, args[2])
		t.Logf("%s: the object exists; no kubelet runs its pods here", c)
	case len(args) >= 2 && args[0] == "logs":
		e.get(ctx, t, k, c, ns, args[1])
		t.Logf("%s: the object exists; no kubelet runs its pods here", c)
	case len(args) == 3 && args[0] == "port-forward":
		svc := e.get(ctx, t, k, c, ns, args[1])
		_, remote, _ := strings.Cut(args[2], ":")
		ok := false
		ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
		for _, p := range ports {
			if pm, _ := p.(map[string]any); fmt.Sprint(pm["port"]) == remote {
				ok = true
			}
		}
		if !ok {
			fail("%s has no port %s", args[1], remote)
		}
		t.Logf("%s: the Service and its port exist; nothing to forward to here", c)
	case len(args) == 2 && args[0] == "get":
		e.get(ctx, t, k, c, ns, args[1])
	default:
		fail("the test does not know this kubectl command")
	}
	return nil
}

// get reads KIND/NAME (kubectl's form) from the server; it must exist.
func (e *docEnv) get(ctx context.Context, t *testing.T, k *kube, c docCmd, ns, ref string) *unstructured.Unstructured {
	t.Helper()
	kind, name, ok := strings.Cut(ref, "/")
	if !ok {
		t.Fatalf("%s: %q: want KIND/NAME", c, ref)
	}
	gvr, err := k.mapper.ResourceFor(schema.GroupVersionResource{Resource: kind})
	if err != nil {
		t.Fatalf("%s: %s: %v", c, kind, err)
	}
	u, err := k.dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("%s: %v", c, err)
	}
	return u
}

// createSecret is `kubectl create secret generic NAME --from-file=KEY=PATH...`.
func (e *docEnv) createSecret(ctx context.Context, t *testing.T, k *kube, c docCmd, ns, name string, flags []string) {
	t.Helper()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{},
	}
	for _, f := range flags {
		kv, ok := strings.CutPrefix(f, "--from-file=")
		key, p, ok2 := strings.Cut(kv, "=")
		if !ok || !ok2 {
			t.Fatalf("%s: %q: the test knows --from-file=KEY=PATH only", c, f)
		}
		b, err := os.ReadFile(e.path(p))
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		s.Data[key] = b
	}
	if _, err := k.cs.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
		t.Fatalf("%s: %v", c, err)
	}
}

// deleteK is `kubectl delete -k`: every object of the build is deleted; the
// Namespace goes Terminating (no namespace controller runs here to finish
// it, and with it the Secrets it holds), everything else must be gone,
// the cluster-scoped objects first of all.
func (e *docEnv) deleteK(ctx context.Context, t *testing.T, k *kube, c docCmd, objs []*unstructured.Unstructured) {
	t.Helper()
	bg := metav1.DeletePropagationBackground
	for _, o := range slices.Backward(namespacesFirst(objs)) {
		ri, err := k.resource(o)
		if err != nil {
			t.Fatal(err)
		}
		if err := ri.Delete(ctx, o.GetName(), metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
			t.Errorf("%s: delete %s: %v", c, objName(o), err)
		}
	}
	for _, o := range objs {
		ri, _ := k.resource(o)
		got, err := ri.Get(ctx, o.GetName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			t.Errorf("%s: %s: %v", c, objName(o), err)
		case o.GetKind() == "Namespace" && got.GetDeletionTimestamp() != nil:
			t.Logf("%s: %s is Terminating (no namespace controller here to remove it and its Secrets)", c, objName(o))
		default:
			t.Errorf("%s: %s still there", c, objName(o))
		}
	}
}

// checkSecrets: every Secret the applied workloads mount exists, holds each
// file the containers' flags name under its mount, and the certificates
// fit together: the collector's server certificate is valid for every
// address the agents of every overlay dial, the agents' client certificate
// chains to the CA the collector trusts.
func (e *docEnv) checkSecrets(ctx context.Context, t *testing.T, k *kube, applied []*unstructured.Unstructured) {
	t.Helper()
	r := typed(t, applied)
	secrets := map[string]*corev1.Secret{}
	for w, spec := range r.podSpecs() {
		ns := namespace
		for _, v := range spec.Volumes {
			if v.Secret == nil {
				continue
			}
			s, err := k.cs.CoreV1().Secrets(ns).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
			if err != nil {
				t.Errorf("%s mounts Secret %s: %v (the doc's commands do not create it)", w, v.Secret.SecretName, err)
				continue
			}
			secrets[s.Name] = s
			for _, c := range spec.Containers {
				for _, m := range c.VolumeMounts {
					if m.Name != v.Name {
						continue
					}
					for _, a := range c.Args {
						_, val, ok := strings.Cut(a, "=")
						if !ok || !strings.HasPrefix(val, m.MountPath+"/") {
							continue
						}
						key := strings.TrimPrefix(val, m.MountPath+"/")
						if _, ok := s.Data[key]; !ok {
							t.Errorf("%s container %s: %s names %s, but Secret %s has no key %q (keys: %v)", w, c.Name, a, val, s.Name, key, keys(s.Data))
						}
					}
				}
			}
		}
	}
	if agent, ok := secrets["nodediag-agent"]; ok {
		ca := x509.NewCertPool()
		ca.AppendCertsFromPEM(agent.Data["ca.crt"])
		cert := parsePEMCert(t, "Secret nodediag-agent tls.crt", agent.Data["tls.crt"])
		if _, err := cert.Verify(x509.VerifyOptions{Roots: ca, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("Secret nodediag-agent: tls.crt is not a client certificate of its ca.crt: %v", err)
		}
		if !slices.Contains(cert.Subject.Organization, "nodediag:agents") {
			t.Errorf("Secret nodediag-agent: tls.crt has organization %v, want nodediag:agents", cert.Subject.Organization)
		}
	}
	// The addresses the agents dial, in every build.
	server := e.serverCert(t)
	for _, b := range builds(t) {
		br := typed(t, render(t, b.dir))
		for _, ds := range br.daemonSets {
			for _, c := range ds.Spec.Template.Spec.Containers {
				args, err := expandArgs(br, &c, "node-a")
				if err != nil {
					t.Fatal(err)
				}
				addr, ok := flagValue(args, "collector")
				if !ok {
					continue
				}
				host, _, err := net.SplitHostPort(addr)
				if err != nil {
					t.Errorf("%s: --collector %q: %v", b.name, addr, err)
					continue
				}
				if err := server.VerifyHostname(host); err != nil {
					t.Errorf("%s: the agents dial %s, which the certificate of the doc's `nodediag certs` does not name: %v", b.name, host, err)
				}
			}
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
