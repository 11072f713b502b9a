package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Where the manifests are, relative to this package's directory (tests run
// in it).
const (
	daemonsetDir  = "daemonset"
	overlaysDir   = "daemonset/overlays"
	componentsDir = "daemonset/components"
)

// Images of the manifests and the commands whose binaries they run.
const (
	agentImage     = "ghcr.io/nodediag/nodediag-agent"
	collectorImage = "ghcr.io/nodediag/nodediag"
	agentPkg       = "github.com/nodediag/nodediag/cmd/nodediag-agent"
	collectorPkg   = "github.com/nodediag/nodediag/cmd/nodediag"
)

// build is one kustomization to render: every overlay, and every component
// on top of the management overlay (as docs/daemonset.md tells to use it).
type build struct {
	name string
	dir  string
}

// builds lists the overlays under daemonset/overlays (so that a new overlay
// is tested without being listed here) and, for each component, a
// kustomization in a temporary directory that adds it to the management
// overlay.
func builds(t *testing.T) []build {
	t.Helper()
	var out []build
	ents, err := os.ReadDir(overlaysDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, build{name: e.Name(), dir: filepath.Join(overlaysDir, e.Name())})
		}
	}
	if len(out) < 2 {
		t.Fatalf("want the management and workload overlays under %s, found %v", overlaysDir, out)
	}
	comps, err := os.ReadDir(componentsDir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, c := range comps {
		if !c.IsDir() {
			continue
		}
		mgmt, err := filepath.Abs(filepath.Join(overlaysDir, "management"))
		if err != nil {
			t.Fatal(err)
		}
		comp, err := filepath.Abs(filepath.Join(componentsDir, c.Name()))
		if err != nil {
			t.Fatal(err)
		}
		// kustomize refuses absolute paths of bases and components.
		dir := t.TempDir()
		relMgmt, err := filepath.Rel(dir, mgmt)
		if err != nil {
			t.Fatal(err)
		}
		relComp, err := filepath.Rel(dir, comp)
		if err != nil {
			t.Fatal(err)
		}
		k := fmt.Sprintf("resources: [%s]\ncomponents: [%s]\n", relMgmt, relComp)
		if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
			t.Fatal(err)
		}
		out = append(out, build{name: "management+" + c.Name(), dir: dir})
	}
	return out
}

// render runs kustomize (krusty, the library behind `kubectl apply -k` and
// `kustomize build`) on dir and returns the objects in their output order.
func render(t testing.TB, dir string) []*unstructured.Unstructured {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var objs []*unstructured.Unstructured
	for _, r := range rm.Resources() {
		// Through JSON, as kubectl reads it: numbers become int64, which
		// the unstructured helpers expect (r.Map has ints).
		b, err := r.MarshalJSON()
		if err != nil {
			t.Fatalf("kustomize build %s: %s: %v", dir, r.CurId(), err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(b); err != nil {
			t.Fatalf("kustomize build %s: %s: %v", dir, r.CurId(), err)
		}
		objs = append(objs, u)
	}
	if len(objs) == 0 {
		t.Fatalf("kustomize build %s: no objects", dir)
	}
	return objs
}

// rendered is the typed view of a build's objects that the tests look into.
type rendered struct {
	objs         []*unstructured.Unstructured
	daemonSets   []*appsv1.DaemonSet
	deployments  []*appsv1.Deployment
	services     []*corev1.Service
	configMaps   []*corev1.ConfigMap
	clusterRoles []*rbacv1.ClusterRole
	bindings     []*rbacv1.ClusterRoleBinding
	roles        []*rbacv1.Role
	roleBindings []*rbacv1.RoleBinding
}

func typed(t testing.TB, objs []*unstructured.Unstructured) *rendered {
	t.Helper()
	r := &rendered{objs: objs}
	conv := func(u *unstructured.Unstructured, into any) {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, into, true); err != nil {
			t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	for _, u := range objs {
		switch u.GroupVersionKind().GroupKind().String() {
		case "DaemonSet.apps":
			var o appsv1.DaemonSet
			conv(u, &o)
			r.daemonSets = append(r.daemonSets, &o)
		case "Deployment.apps":
			var o appsv1.Deployment
			conv(u, &o)
			r.deployments = append(r.deployments, &o)
		case "Service":
			var o corev1.Service
			conv(u, &o)
			r.services = append(r.services, &o)
		case "ConfigMap":
			var o corev1.ConfigMap
			conv(u, &o)
			r.configMaps = append(r.configMaps, &o)
		case "ClusterRole.rbac.authorization.k8s.io":
			var o rbacv1.ClusterRole
			conv(u, &o)
			r.clusterRoles = append(r.clusterRoles, &o)
		case "ClusterRoleBinding.rbac.authorization.k8s.io":
			var o rbacv1.ClusterRoleBinding
			conv(u, &o)
			r.bindings = append(r.bindings, &o)
		case "Role.rbac.authorization.k8s.io":
			var o rbacv1.Role
			conv(u, &o)
			r.roles = append(r.roles, &o)
		case "RoleBinding.rbac.authorization.k8s.io":
			var o rbacv1.RoleBinding
			conv(u, &o)
			r.roleBindings = append(r.roleBindings, &o)
		}
	}
	return r
}

// podSpecs are the pod templates of the build's workloads, by "Kind/name".
func (r *rendered) podSpecs() map[string]*corev1.PodSpec {
	m := map[string]*corev1.PodSpec{}
	for _, d := range r.daemonSets {
		m["DaemonSet/"+d.Name] = &d.Spec.Template.Spec
	}
	for _, d := range r.deployments {
		m["Deployment/"+d.Name] = &d.Spec.Template.Spec
	}
	return m
}

func (r *rendered) configMap(name string) *corev1.ConfigMap {
	for _, c := range r.configMaps {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// imageRepo is an image reference without its tag or digest.
func imageRepo(image string) string {
	if i := strings.IndexByte(image, '@'); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndexByte(image, ':'); i > strings.LastIndexByte(image, '/') {
		image = image[:i]
	}
	return image
}

// expandArgs resolves the $(VAR) references of a container's arguments as
// the kubelet does, from the container's env: literal values, the node's
// name for fieldRef spec.nodeName (node), and ConfigMap keys looked up in
// the build (a missing ConfigMap or key is an error: the pod would not
// start). A reference left unresolved is an error too: the kubelet would
// pass it to the binary as is.
func expandArgs(r *rendered, c *corev1.Container, node string) ([]string, error) {
	vals := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			vals[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName":
			vals[e.Name] = node
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			cm := r.configMap(ref.Name)
			if cm == nil {
				return nil, fmt.Errorf("env %s: ConfigMap %s is not in the manifests", e.Name, ref.Name)
			}
			v, ok := cm.Data[ref.Key]
			if !ok {
				return nil, fmt.Errorf("env %s: ConfigMap %s has no key %q", e.Name, ref.Name, ref.Key)
			}
			vals[e.Name] = v
		}
	}
	var out []string
	for _, a := range c.Args {
		for k, v := range vals {
			a = strings.ReplaceAll(a, "$("+k+")", v)
		}
		if strings.Contains(a, "$(") {
			return nil, fmt.Errorf("argument %q refers to a variable the container does not define", a)
		}
		out = append(out, a)
	}
	return out, nil
}

// flagValue is the value of --name=VALUE (or --name VALUE) in args.
func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
		if a == "--"+name && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}

func hasFlag(args []string, name string) bool {
	_, ok := flagValue(args, name)
	return ok || slices.Contains(args, "--"+name)
}
