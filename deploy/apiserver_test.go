package deploy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/nodediag/nodediag/collector/capi"
	"github.com/nodediag/nodediag/internal/testenv/kubeenv"
)

// The objects and identities the manifests define.
const (
	namespace     = "nodediag"
	collectorSA   = "nodediag-collector"
	agentSA       = "nodediag-agent"
	collectorRole = "nodediag-collector-cluster-api"
)

// kube is a client of the test API server: what `kubectl apply` uses (a
// dynamic client and a RESTMapper from discovery), and the typed clientset
// for access reviews. Warnings the server sends (deprecations, Pod Security)
// are collected.
type kube struct {
	cfg    *rest.Config
	dyn    dynamic.Interface
	mapper meta.RESTMapper
	cs     kubernetes.Interface

	mu       sync.Mutex
	warnings []string
}

func (k *kube) HandleWarningHeader(_ int, _ string, text string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.warnings = append(k.warnings, text)
}

// takeWarnings returns the warnings received since the last call.
func (k *kube) takeWarnings() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	w := k.warnings
	k.warnings = nil
	return w
}

func newKube(t testing.TB, cfg *rest.Config) *kube {
	t.Helper()
	k := &kube{}
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = k
	k.cfg = cfg
	var err error
	if k.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if k.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	k.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	return k
}

// resource is where obj is served, namespaced or not.
func (k *kube) resource(obj *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := obj.GroupVersionKind()
	m, err := k.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("%s: the API server does not serve it: %w", gvk, err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			return nil, fmt.Errorf("%s %s: namespaced, but has no namespace", gvk.Kind, obj.GetName())
		}
		return k.dyn.Resource(m.Resource).Namespace(obj.GetNamespace()), nil
	}
	if obj.GetNamespace() != "" {
		return nil, fmt.Errorf("%s %s: cluster-scoped, but has namespace %s", gvk.Kind, obj.GetName(), obj.GetNamespace())
	}
	return k.dyn.Resource(m.Resource), nil
}

func objName(o *unstructured.Unstructured) string {
	if o.GetNamespace() == "" {
		return o.GetKind() + " " + o.GetName()
	}
	return o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
}

// namespacesFirst orders objects as kubectl applies them: Namespaces before
// the objects they hold.
func namespacesFirst(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	out := slices.Clone(objs)
	slices.SortStableFunc(out, func(a, b *unstructured.Unstructured) int {
		return boolInt(b.GetKind() == "Namespace") - boolInt(a.GetKind() == "Namespace")
	})
	return out
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// apply does what `kubectl apply` does to each object, server-side: create
// or update, validated and admitted by the API server like any write.
func (k *kube) apply(ctx context.Context, objs []*unstructured.Unstructured) error {
	for _, o := range namespacesFirst(objs) {
		ri, err := k.resource(o)
		if err != nil {
			return err
		}
		if _, err := ri.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: "kubectl", Force: true}); err != nil {
			return fmt.Errorf("apply %s: %w", objName(o), err)
		}
	}
	return nil
}

// TestManifestsOnAPIServer runs the manifests and docs/daemonset.md against a
// real kube-apiserver (kubeenv, with the Cluster API CRDs; RBAC on). kubectl
// is not on CI machines: the tests render with krusty (kustomize's library,
// what `kubectl apply -k` runs) and talk to the server with client-go, as
// kubectl would.
//
// There are no nodes and no controllers here: objects are validated,
// defaulted and admitted by the real server, and RBAC is decided by its
// real authorizer, but no pod runs.
func TestManifestsOnAPIServer(t *testing.T) {
	doc := readDoc(t)
	env := newDocEnv(t)
	ctx := context.Background()

	started := 0 // API servers started (StartAPIServer skips without one)
	t.Run("management cluster", func(t *testing.T) {
		cfg, _ := kubeenv.StartAPIServer(t)
		started++
		k := newKube(t, cfg)
		for _, b := range builds(t) {
			t.Run("server-side dry-run "+b.name, func(t *testing.T) {
				dryRunAll(ctx, t, k, render(t, b.dir))
			})
		}
		t.Run("pod security", func(t *testing.T) { podSecurity(ctx, t, k) })
		t.Run("install as documented", func(t *testing.T) { env.run(ctx, t, k, doc, "install") })
		t.Run("collector RBAC", func(t *testing.T) { collectorRBAC(ctx, t, k) })
		t.Run("read as documented", func(t *testing.T) { env.run(ctx, t, k, doc, "read") })
		t.Run("uninstall as documented", func(t *testing.T) { env.run(ctx, t, k, doc, "uninstall") })
	})
	t.Run("workload cluster", func(t *testing.T) {
		cfg, _ := kubeenv.StartAPIServer(t)
		started++
		k := newKube(t, cfg)
		env.run(ctx, t, k, doc, "workload")
	})
	if started == 2 {
		doc.checkAllRun(t)
	}
}

// dryRunAll creates the build's Namespaces for real (a namespaced dry-run
// needs its namespace to exist), then every object with a server-side
// dry-run: the API server validates, defaults and admits it, and stores
// nothing. Any warning (a deprecated API or field) is an error too.
func dryRunAll(ctx context.Context, t *testing.T, k *kube, objs []*unstructured.Unstructured) {
	t.Helper()
	kinds := map[string]int{}
	for _, o := range namespacesFirst(objs) {
		ri, err := k.resource(o)
		if err != nil {
			t.Error(err)
			continue
		}
		if o.GetKind() == "Namespace" {
			if _, err := ri.Create(ctx, o, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Errorf("create %s: %v", objName(o), err)
			}
		}
		if _, err := ri.Create(ctx, o, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			if !(o.GetKind() == "Namespace" && apierrors.IsAlreadyExists(err)) {
				t.Errorf("server-side dry-run of %s refused: %v", objName(o), err)
				continue
			}
		}
		kinds[o.GetKind()]++
	}
	if w := k.takeWarnings(); len(w) > 0 {
		t.Errorf("the API server warned:\n%s", strings.Join(w, "\n"))
	}
	t.Logf("accepted: %v", kinds)
}

// podSecurity checks the Pod Security claims of the manifests' comments
// with the API server's own PodSecurity admission: the collector meets the
// restricted profile, and the agent breaks the baseline profile only with
// its host network and hostPath volumes (why the nodediag Namespace is
// labelled privileged). Each is dry-run in a namespace that warns for the
// profile.
func podSecurity(ctx context.Context, t *testing.T, k *kube) {
	objs := render(t, overlaysDir+"/management")
	for _, c := range []struct {
		kind, profile string
		want          []string
	}{
		{"Deployment", "restricted", nil},
		{"DaemonSet", "baseline", []string{"hostNetwork=true", "hostPath volumes"}},
	} {
		ns := "psa-" + c.profile
		nsObj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Namespace",
			"metadata": map[string]any{"name": ns, "labels": map[string]any{"pod-security.kubernetes.io/warn": c.profile}},
		}}
		if _, err := k.dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}).Create(ctx, nsObj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		k.takeWarnings()
		for _, o := range objs {
			if o.GetKind() != c.kind {
				continue
			}
			o = o.DeepCopy()
			o.SetNamespace(ns)
			ri, err := k.resource(o)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ri.Create(ctx, o, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
				t.Fatalf("dry-run of %s: %v", objName(o), err)
			}
			warnings := strings.Join(k.takeWarnings(), "\n")
			if c.want == nil {
				if warnings != "" {
					t.Errorf("%s does not meet the %s Pod Security profile: %s", objName(o), c.profile, warnings)
				}
				continue
			}
			for _, w := range c.want {
				if !strings.Contains(warnings, w) {
					t.Errorf("%s: the %s profile's warning %q does not mention %q", objName(o), c.profile, warnings, w)
				}
			}
			// The baseline checks the agent must not break (k8s.io/pod-security-admission).
			for _, never := range []string{"privileged", "non-default capabilities", "hostPort", "procMount", "seccompProfile", "sysctls", "seLinuxOptions", "appArmor", "hostPID", "hostIPC"} {
				if strings.Contains(warnings, never) {
					t.Errorf("%s breaks the %s profile's %s check: %s", objName(o), c.profile, never, warnings)
				}
			}
			t.Logf("%s under %s: %s", objName(o), c.profile, warnings)
		}
	}
}

// collectorRBAC checks the collector's role on the real authorizer: the
// ClusterRole grants exactly get, list and watch on the resources of the
// kinds the collector's informers watch (capi.DefaultCacheKinds, mapped by
// discovery) and nothing else; the collector's ServiceAccount may read them
// and may not read Secrets or write anything; the agent's ServiceAccount
// may do none of it. Then the collector's own Cluster API code
// (capi.Cache), impersonating its ServiceAccount, assembles a Cluster with
// every kind readable: the role is enough for what the code does, not only
// for the list above.
func collectorRBAC(ctx context.Context, t *testing.T, k *kube) {
	// The resources the collector reads.
	var want []schema.GroupResource
	for _, gk := range capi.DefaultCacheKinds {
		m, err := k.mapper.RESTMapping(gk)
		if err != nil {
			t.Fatalf("%s: %v", gk, err)
		}
		want = append(want, m.Resource.GroupResource())
	}
	sortGR(want)

	// The ClusterRole as the server holds it.
	cr, err := k.cs.RbacV1().ClusterRoles().Get(ctx, collectorRole, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the collector's ClusterRole: %v", err)
	}
	var got []schema.GroupResource
	for _, r := range cr.Rules {
		if len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
			t.Errorf("rule %+v: resourceNames or nonResourceURLs", r)
		}
		verbs := slices.Clone(r.Verbs)
		slices.Sort(verbs)
		if !slices.Equal(verbs, []string{"get", "list", "watch"}) {
			t.Errorf("rule %+v: verbs %v, want exactly get, list, watch", r, r.Verbs)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				if g == "*" || res == "*" || strings.Contains(res, "/") {
					t.Errorf("rule %+v: wildcard or subresource", r)
				}
				got = append(got, schema.GroupResource{Group: g, Resource: res})
			}
		}
	}
	sortGR(got)
	if !slices.Equal(got, want) {
		t.Errorf("the ClusterRole grants %v,\nthe collector reads %v (capi.DefaultCacheKinds)", got, want)
	}

	type access struct {
		sa      string
		verb    string
		gr      schema.GroupResource
		ns      string
		allowed bool
	}
	var checks []access
	for _, gr := range want {
		for _, v := range []string{"get", "list", "watch"} {
			checks = append(checks, access{collectorSA, v, gr, "", true}, access{collectorSA, v, gr, "default", true})
			checks = append(checks, access{agentSA, v, gr, "", false})
		}
		for _, v := range []string{"create", "update", "patch", "delete", "deletecollection"} {
			checks = append(checks, access{collectorSA, v, gr, "", false})
		}
	}
	secrets := schema.GroupResource{Resource: "secrets"}
	for _, sa := range []string{collectorSA, agentSA} {
		for _, ns := range []string{"", namespace, "default"} {
			checks = append(checks, access{sa, "list", secrets, ns, false}, access{sa, "get", secrets, ns, false}, access{sa, "watch", secrets, ns, false})
		}
		for _, gr := range []schema.GroupResource{{Resource: "nodes"}, {Resource: "pods"}, {Resource: "configmaps"}, {Group: "cluster.x-k8s.io", Resource: "clusterclasses"}} {
			checks = append(checks, access{sa, "list", gr, "", false})
		}
		checks = append(checks, access{sa, "update", schema.GroupResource{Group: "cluster.x-k8s.io", Resource: "machines"}, "default", false},
			access{sa, "patch", schema.GroupResource{Group: "cluster.x-k8s.io", Resource: "machines/status"}, "default", false})
	}
	for _, c := range checks {
		res, sub, _ := strings.Cut(c.gr.Resource, "/")
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   "system:serviceaccount:" + namespace + ":" + c.sa,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: c.ns, Verb: c.verb, Group: c.gr.Group, Resource: res, Subresource: sub,
			},
		}}
		out, err := k.cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if out.Status.Allowed != c.allowed {
			where := "all namespaces"
			if c.ns != "" {
				where = "namespace " + c.ns
			}
			t.Errorf("%s may %s %s in %s: %v, want %v (%s)", c.sa, c.verb, c.gr, where, out.Status.Allowed, c.allowed, out.Status.Reason)
		}
	}
	t.Logf("%d access reviews", len(checks))

	// The collector's code, as the collector's ServiceAccount.
	kubeenv.Load(t, k.cfg, "../collector/capi/testdata/healthy.yaml")
	read := func(sa string) (*capi.Cluster, error) {
		cfg := rest.CopyConfig(k.cfg)
		cfg.WarningHandler = nil
		cfg.Impersonate = rest.ImpersonationConfig{
			UserName: "system:serviceaccount:" + namespace + ":" + sa,
			Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
		}
		c, err := capi.NewCache(cfg, "")
		if err != nil {
			return nil, err
		}
		defer c.Stop()
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := c.WaitForSync(wctx); err != nil {
			return nil, err
		}
		return c.Cluster(wctx, "healthy", "ok")
	}
	cl, err := read(collectorSA)
	if err != nil {
		t.Fatalf("the collector's ServiceAccount cannot read Cluster healthy/ok: %v", err)
	}
	for _, p := range cl.Problems {
		t.Errorf("the collector's ServiceAccount: %s", p.String())
	}
	if len(cl.Machines) != 3 {
		t.Errorf("read %d Machines of Cluster healthy/ok, want 3", len(cl.Machines))
	}
	// The same code as the agent's ServiceAccount is refused: the
	// impersonation above is not a no-op.
	_, err = read(agentSA)
	var fe *capi.ForbiddenError
	if !errors.As(err, &fe) {
		t.Errorf("the agent's ServiceAccount reading Cluster healthy/ok: %v, want a ForbiddenError", err)
	}
}

func sortGR(s []schema.GroupResource) {
	sort.Slice(s, func(i, j int) bool { return s[i].String() < s[j].String() })
}
