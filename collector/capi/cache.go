package capi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// DefaultCacheKinds are the kinds a Cache watches from the start. Kinds
// that a Cluster references and that are not among them (another
// infrastructure provider) are watched from the first Cluster call that
// needs them.
var DefaultCacheKinds = []schema.GroupKind{
	ClusterKind, MachineKind, MachineSetKind, MachineDeploymentKind, MachinePoolKind,
	MachineHealthCheckKind, KubeadmControlPlaneKind, KubeadmConfigKind,
	HelmChartProxyKind, HelmReleaseProxyKind,
	{Group: "infrastructure.cluster.x-k8s.io", Kind: "AzureCluster"},
	{Group: "infrastructure.cluster.x-k8s.io", Kind: "AzureMachine"},
	{Group: "infrastructure.cluster.x-k8s.io", Kind: "AzureMachinePool"},
}

// clusterIndex indexes objects by "namespace/cluster-name label".
const clusterIndex = "cluster"

func clusterIndexFunc(obj any) ([]string, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, nil
	}
	if n, ok := m.GetLabels()[ClusterNameLabel]; ok {
		return []string{m.GetNamespace() + "/" + n}, nil
	}
	return nil, nil
}

// Cache is the long-running variant of Reader: one informer (list, then
// watch; no polling, no resync) per kind, in one namespace or all, and
// Cluster assembled from the informers' stores with the same conversion as
// Reader. Objects in the returned Cluster's Raw fields are the informers'
// and must not be modified.
type Cache struct {
	c         *clients
	namespace string

	ctx    context.Context
	cancel context.CancelFunc

	mu    sync.Mutex
	kinds map[schema.GroupKind]*watched
}

// watched is one kind: its informer, or why there is none.
type watched struct {
	gk       schema.GroupKind
	gvr      schema.GroupVersionResource
	informer cache.SharedIndexInformer // nil when unmapped
	unmapped error                     // the RESTMapper's error
	started  bool                      // under Cache.mu

	mu      sync.Mutex
	lastErr error // the reflector's last list/watch error
}

func (w *watched) err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lastErr
}

// NewCache prepares informers for DefaultCacheKinds in namespace ("" for
// all namespaces). They start with WaitForSync; Stop ends them. A kind the
// API server does not serve gets no informer and is reported as NotServed
// by Cluster when a Cluster needs it. The error is for a configuration
// that cannot make clients, or discovery failing.
func NewCache(cfg *rest.Config, namespace string) (*Cache, error) {
	cl, err := newClients(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Cache{c: cl, namespace: namespace, ctx: ctx, cancel: cancel, kinds: map[schema.GroupKind]*watched{}}
	for _, gk := range DefaultCacheKinds {
		if _, err := c.add(gk); err != nil {
			cancel()
			return nil, err
		}
	}
	return c, nil
}

// add registers an informer for gk (not started). Only a discovery failure
// other than "not served" is an error.
func (c *Cache) add(gk schema.GroupKind) (*watched, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w := c.kinds[gk]; w != nil {
		return w, nil
	}
	w := &watched{gk: gk}
	gvr, err := c.c.resource(gk)
	switch {
	case meta.IsNoMatchError(err):
		w.unmapped = err
	case err != nil:
		return nil, fmt.Errorf("discovery of %s: %w", gk, err)
	default:
		w.gvr = gvr
		w.informer = dynamicinformer.NewFilteredDynamicInformer(c.c.dyn, gvr, c.namespace, 0,
			cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc, clusterIndex: clusterIndexFunc}, nil).Informer()
		_ = w.informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
			w.mu.Lock()
			w.lastErr = err
			w.mu.Unlock()
			cache.DefaultWatchErrorHandler(ctx, r, err)
		})
	}
	c.kinds[gk] = w
	return w, nil
}

// start runs the informers not running yet.
func (c *Cache) start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.kinds {
		if w.informer != nil && !w.started {
			w.started = true
			go w.informer.RunWithContext(c.ctx)
		}
	}
}

// settled: synced, unmapped, or failing to list with a Forbidden or
// NotFound (which retrying will not fix by itself, and which Cluster
// reports as a problem).
func (w *watched) settled() bool {
	if w.informer == nil || w.informer.HasSynced() {
		return true
	}
	err := w.err()
	return err != nil && (apierrors.IsForbidden(err) || apierrors.IsNotFound(err))
}

// WaitForSync starts the informers and waits until each has listed its
// kind, or is settled in a failure Cluster reports (Forbidden, not served).
// It returns an error only when ctx ends first, naming the kinds still
// waiting and their last error.
func (c *Cache) WaitForSync(ctx context.Context) error {
	c.start()
	return c.wait(ctx, nil)
}

func (c *Cache) wait(ctx context.Context, only []schema.GroupKind) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		var pending []string
		c.mu.Lock()
		for gk, w := range c.kinds {
			if only != nil && !slices.Contains(only, gk) {
				continue
			}
			if !w.settled() {
				s := gk.String()
				if err := w.err(); err != nil {
					s += " (" + err.Error() + ")"
				}
				pending = append(pending, s)
			}
		}
		c.mu.Unlock()
		if len(pending) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			slices.Sort(pending)
			return fmt.Errorf("informers not synced: %s: %w", strings.Join(pending, "; "), ctx.Err())
		case <-t.C:
		}
	}
}

// Stop ends the informers.
func (c *Cache) Stop() { c.cancel() }

// Cluster assembles the Cluster namespace/name from the informers' stores,
// with the same errors as Reader.Cluster. A referenced kind not watched yet
// is watched from now on: Cluster starts its informer and waits (bounded
// by ctx) for it to sync.
func (c *Cache) Cluster(ctx context.Context, namespace, name string) (*Cluster, error) {
	w, err := c.ready(ctx, ClusterKind)
	if err != nil {
		return nil, fmt.Errorf("reading Cluster %s/%s: %w", namespace, name, err)
	}
	if w.informer == nil {
		return nil, fmt.Errorf("reading Cluster %s/%s: %w", namespace, name, ErrCAPINotServed)
	}
	if !w.informer.HasSynced() {
		err := w.err()
		if err == nil {
			err = errors.New("informer not synced")
		}
		return nil, clusterError(ctx, c.c.id, w.gvr, "list", c.namespace, namespace, name, err)
	}
	obj, ok, err := w.informer.GetStore().GetByKey(namespace + "/" + name)
	if err != nil {
		return nil, fmt.Errorf("reading Cluster %s/%s from the cache: %w", namespace, name, err)
	}
	if !ok {
		return nil, fmt.Errorf("%w: no Cluster %s/%s", ErrClusterNotFound, namespace, name)
	}
	return assemble(ctx, cacheSource{c}, obj.(*unstructured.Unstructured)), nil
}

// ready returns the kind's informer, adding and syncing it first if needed.
func (c *Cache) ready(ctx context.Context, gk schema.GroupKind) (*watched, error) {
	c.mu.Lock()
	w := c.kinds[gk]
	c.mu.Unlock()
	if w != nil {
		return w, nil
	}
	w, err := c.add(gk)
	if err != nil {
		return nil, err
	}
	c.start()
	if err := c.wait(ctx, []schema.GroupKind{gk}); err != nil {
		return nil, err
	}
	return w, nil
}

type cacheSource struct{ c *Cache }

// parallel: the stores are in memory, goroutines would only cost.
func (cacheSource) parallel() int { return 1 }

// usable returns the informer of gk, or the problem that stands for it.
// The role a problem names is for the Cache's namespace (all namespaces: a
// ClusterRole), where the informer lists.
func (s cacheSource) usable(ctx context.Context, gk schema.GroupKind) (*watched, []ReadProblem) {
	w, err := s.c.ready(ctx, gk)
	if err != nil {
		return nil, []ReadProblem{problem(ctx, s.c.c.id, schema.GroupVersionResource{}, gk, "list", s.c.namespace, "", err)}
	}
	if w.informer == nil {
		return nil, []ReadProblem{problem(ctx, s.c.c.id, w.gvr, gk, "list", s.c.namespace, "", w.unmapped)}
	}
	if !w.informer.HasSynced() {
		err := w.err()
		if err == nil {
			err = errors.New("informer not synced yet")
		}
		verb := "list"
		if strings.Contains(err.Error(), "watch") {
			verb = "watch"
		}
		return nil, []ReadProblem{problem(ctx, s.c.c.id, w.gvr, gk, verb, s.c.namespace, "", err)}
	}
	return w, nil
}

func (s cacheSource) list(ctx context.Context, gk schema.GroupKind, ns, clusterName string) ([]*unstructured.Unstructured, []ReadProblem) {
	w, probs := s.usable(ctx, gk)
	if w == nil {
		return nil, probs
	}
	var objs []any
	var err error
	if clusterName != "" {
		objs, err = w.informer.GetIndexer().ByIndex(clusterIndex, ns+"/"+clusterName)
	} else {
		objs, err = w.informer.GetIndexer().ByIndex(cache.NamespaceIndex, ns)
	}
	if err != nil {
		return nil, []ReadProblem{{Verb: "list", Resource: resourceName(w.gvr), Err: err.Error()}}
	}
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		if u, ok := o.(*unstructured.Unstructured); ok {
			out = append(out, u)
		}
	}
	return out, nil
}

func (s cacheSource) byName(ctx context.Context, gk schema.GroupKind, ns string, names []string) (map[string]*unstructured.Unstructured, []ReadProblem) {
	w, probs := s.usable(ctx, gk)
	if w == nil {
		return nil, probs
	}
	out := make(map[string]*unstructured.Unstructured, len(names))
	store := w.informer.GetStore()
	for _, n := range names {
		if o, ok, _ := store.GetByKey(ns + "/" + n); ok {
			if u, ok := o.(*unstructured.Unstructured); ok {
				out[n] = u
			}
		}
	}
	return out, missing(w.gvr, ns, names, out)
}
