package kubeenv

import (
	"context"
	"fmt"
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

// Load creates the objects of a YAML file as LoadFile does and fails the
// test at the first error.
func Load(t testing.TB, cfg *rest.Config, path string) {
	t.Helper()
	if err := LoadFile(context.Background(), cfg, path); err != nil {
		t.Fatal(err)
	}
}

// LoadFile creates the objects of a YAML file (documents separated by
// "---") as the controllers would have left them: each object without its
// status first, then its status through the /status subresource. Namespaces
// are created as needed. It stops at the first error, which names the file
// and the object; the objects created before it stay.
func LoadFile(ctx context.Context, cfg *rest.Config, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	rm := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	nsRes := dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"})
	for _, doc := range strings.Split(string(b), "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if ns := u.GetNamespace(); ns != "" {
			n := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}
			if _, err := nsRes.Create(ctx, n, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("%s: namespace %s: %w", path, ns, err)
			}
		}
		gvk := u.GroupVersionKind()
		m, err := rm.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", path, gvk, err)
		}
		ri := dyn.Resource(m.Resource).Namespace(u.GetNamespace())
		status, hasStatus := u.Object["status"]
		created, err := ri.Create(ctx, u, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("%s: create %s %s/%s: %w", path, u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
		if !hasStatus {
			continue
		}
		created.Object["status"] = status
		if _, err := ri.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("%s: status of %s %s/%s: %w", path, u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
	}
	return nil
}
