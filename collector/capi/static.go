package capi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Objects is Cluster API state read from somewhere else than an API server:
// the resource YAML dumps of a CI artifact tree (the e2e framework's
// DumpAllResources writes resources/NAMESPACE/KIND/NAME.yaml). A Cluster is
// assembled from them as Reader and Cache assemble it, with the same
// conversions, so the incident is the one a live cluster would give.
type Objects struct {
	byKind map[schema.GroupKind][]*unstructured.Unstructured
}

// NewObjects indexes objects by group and kind. An object without a kind or
// a name is left out.
func NewObjects(objs []*unstructured.Unstructured) *Objects {
	o := &Objects{byKind: map[schema.GroupKind][]*unstructured.Unstructured{}}
	for _, u := range objs {
		gk := u.GroupVersionKind().GroupKind()
		if gk.Kind == "" || u.GetName() == "" {
			continue
		}
		o.byKind[gk] = append(o.byKind[gk], u)
	}
	for _, us := range o.byKind {
		slices.SortFunc(us, func(a, b *unstructured.Unstructured) int {
			return cmp.Or(cmp.Compare(a.GetNamespace(), b.GetNamespace()), cmp.Compare(a.GetName(), b.GetName()))
		})
	}
	return o
}

// Clusters names the Clusters present, as namespace/name pairs, sorted.
func (o *Objects) Clusters() [][2]string {
	var out [][2]string
	for _, u := range o.byKind[ClusterKind] {
		out = append(out, [2]string{u.GetNamespace(), u.GetName()})
	}
	return out
}

// Cluster assembles the Cluster namespace/name (errors.Is ErrClusterNotFound
// when there is none). What the dump lacks (an AzureMachine not dumped) is
// in Cluster.Problems, as a live reader's not-found.
func (o *Objects) Cluster(ctx context.Context, namespace, name string) (*Cluster, error) {
	for _, u := range o.byKind[ClusterKind] {
		if u.GetNamespace() == namespace && u.GetName() == name {
			return assemble(ctx, objectsSource{o}, u), nil
		}
	}
	return nil, fmt.Errorf("%w: no Cluster %s/%s in the objects read", ErrClusterNotFound, namespace, name)
}

type objectsSource struct{ o *Objects }

func (objectsSource) parallel() int { return 1 }

func (s objectsSource) list(_ context.Context, gk schema.GroupKind, ns, clusterName string) ([]*unstructured.Unstructured, []ReadProblem) {
	var out []*unstructured.Unstructured
	for _, u := range s.o.byKind[gk] {
		if u.GetNamespace() != ns {
			continue
		}
		if clusterName != "" && u.GetLabels()[ClusterNameLabel] != clusterName {
			continue
		}
		out = append(out, u)
	}
	return out, nil
}

func (s objectsSource) byName(_ context.Context, gk schema.GroupKind, ns string, names []string) (map[string]*unstructured.Unstructured, []ReadProblem) {
	out := map[string]*unstructured.Unstructured{}
	for _, u := range s.o.byKind[gk] {
		if u.GetNamespace() == ns && slices.Contains(names, u.GetName()) {
			out[u.GetName()] = u
		}
	}
	// The resource's name as the API server would give it (apimachinery's
	// guess from the kind: AzureMachine → azuremachines), for the problems.
	gvr, _ := meta.UnsafeGuessKindToResource(gk.WithVersion(""))
	return out, missing(gvr, ns, names, out)
}

// DecodeObjects reads the Kubernetes objects of a YAML stream (documents
// separated by "---", as kubectl get -o yaml and the e2e dumps write them)
// or JSON. A List is unpacked into its items. An empty document is skipped;
// a document that is no object is an error naming its number, and the
// objects before it are returned with it.
func DecodeObjects(r io.Reader) ([]*unstructured.Unstructured, error) {
	d := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	var out []*unstructured.Unstructured
	for n := 1; ; n++ {
		var obj map[string]any
		if err := d.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, fmt.Errorf("document %d: %w", n, err)
		}
		if len(obj) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		if u.GetKind() == "" {
			return out, fmt.Errorf("document %d: no kind", n)
		}
		if u.IsList() {
			l, err := u.ToList()
			if err != nil {
				return out, fmt.Errorf("document %d: %w", n, err)
			}
			for i := range l.Items {
				out = append(out, &l.Items[i])
			}
			continue
		}
		out = append(out, u)
	}
}
