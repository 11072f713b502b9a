package kubeenv

import (
	"context"
	"os"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"
)

// Load creates the objects of a YAML file (documents separated by "---")
// as the controllers would have left them: each object without its status
// first, then its status through the /status subresource. Namespaces are
// created as needed.
func Load(t testing.TB, cfg *rest.Config, path string) {
	t.Helper()
	ctx := context.Background()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rm := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	nsRes := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"})
	for _, doc := range strings.Split(string(b), "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if ns := u.GetNamespace(); ns != "" {
			n := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}
			if _, err := nsRes.Create(ctx, n, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
		}
		gvk := u.GroupVersionKind()
		m, err := rm.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s: %s: %v", path, gvk, err)
		}
		ri := dyn.Resource(m.Resource).Namespace(u.GetNamespace())
		status, hasStatus := u.Object["status"]
		created, err := ri.Create(ctx, u, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("%s: create %s %s/%s: %v", path, u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
		if !hasStatus {
			continue
		}
		created.Object["status"] = status
		if _, err := ri.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("%s: status of %s %s/%s: %v", path, u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
	}
}
