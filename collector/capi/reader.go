package capi

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// The kinds the reader knows by name. Every other kind (infrastructure
// providers, other control plane or bootstrap providers) is read
// generically from the group and kind of a reference.
var (
	ClusterKind             = schema.GroupKind{Group: "cluster.x-k8s.io", Kind: "Cluster"}
	MachineKind             = schema.GroupKind{Group: "cluster.x-k8s.io", Kind: "Machine"}
	MachineSetKind          = schema.GroupKind{Group: "cluster.x-k8s.io", Kind: "MachineSet"}
	MachineDeploymentKind   = schema.GroupKind{Group: "cluster.x-k8s.io", Kind: "MachineDeployment"}
	MachinePoolKind         = schema.GroupKind{Group: "cluster.x-k8s.io", Kind: "MachinePool"}
	MachineHealthCheckKind  = schema.GroupKind{Group: "cluster.x-k8s.io", Kind: "MachineHealthCheck"}
	KubeadmControlPlaneKind = schema.GroupKind{Group: "controlplane.cluster.x-k8s.io", Kind: "KubeadmControlPlane"}
	KubeadmConfigKind       = schema.GroupKind{Group: "bootstrap.cluster.x-k8s.io", Kind: "KubeadmConfig"}
	HelmChartProxyKind      = schema.GroupKind{Group: "addons.cluster.x-k8s.io", Kind: "HelmChartProxy"}
	HelmReleaseProxyKind    = schema.GroupKind{Group: "addons.cluster.x-k8s.io", Kind: "HelmReleaseProxy"}
)

// preferredVersion is the Cluster API version asked for first; a kind that
// does not serve it is read in the version discovery prefers (v1beta1 on
// an older management cluster, a provider's own version otherwise).
const preferredVersion = "v1beta2"

// byNameGetLimit: up to this many objects of one kind are fetched with
// GETs, more with one list of the namespace (1,000 Machines make one list
// of AzureMachines, not 1,000 GETs).
const byNameGetLimit = 4

// listPageSize bounds each list response (the API server pages with
// continue tokens).
const listPageSize = 500

// readConcurrency bounds the requests the Reader has in flight at once.
const readConcurrency = 4

// clients are what both Reader and Cache talk to the API server with.
type clients struct {
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
	id     *identity
}

func newClients(cfg *rest.Config) (*clients, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 && cfg.Burst == 0 {
		// client-go's default (5 QPS) would make discovery and the lists
		// of a large cluster wait on the client's own rate limiter.
		cfg.QPS, cfg.Burst = 50, 100
	}
	// v1beta1 reads draw deprecation warnings; the reader chooses the
	// version on purpose, the operator can do nothing about them.
	cfg.WarningHandler = rest.NoWarnings{}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dynamic client for %s: %w", cfg.Host, err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery client for %s: %w", cfg.Host, err)
	}
	return &clients{
		dyn:    dyn,
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)),
		id:     &identity{dyn: dyn},
	}, nil
}

// resource maps a kind to the resource to read it from: v1beta2 when
// served, else the version discovery prefers. A kind the server does not
// serve gives an error for which meta.IsNoMatchError holds.
func (c *clients) resource(gk schema.GroupKind) (schema.GroupVersionResource, error) {
	m, err := c.mapper.RESTMapping(gk, preferredVersion)
	if meta.IsNoMatchError(err) {
		m, err = c.mapper.RESTMapping(gk)
	}
	if err != nil {
		return schema.GroupVersionResource{}, err
	}
	return m.Resource, nil
}

// source is where assemble takes objects from: the API server (Reader) or
// informer stores (Cache). Failures are returned as ReadProblems, never as
// an empty result.
type source interface {
	// list returns the objects of gk in ns, only those labelled for
	// cluster clusterName when it is not empty.
	list(ctx context.Context, gk schema.GroupKind, ns, clusterName string) ([]*unstructured.Unstructured, []ReadProblem)
	// byName returns the objects of gk in ns with the given names; a name
	// that does not exist is a NotFound problem.
	byName(ctx context.Context, gk schema.GroupKind, ns string, names []string) (map[string]*unstructured.Unstructured, []ReadProblem)
	// parallel is how many reads may run at once.
	parallel() int
}

// Reader reads a Cluster and its objects from the API server with get and
// list requests (one list per kind and namespace), for one-shot commands.
// It is safe for concurrent use.
type Reader struct {
	c *clients
}

// NewReader returns a Reader for the API server of cfg. Nothing is
// requested until Cluster is called; discovery is cached for the Reader's
// lifetime (a CRD installed later is seen by a new Reader).
func NewReader(cfg *rest.Config) (*Reader, error) {
	c, err := newClients(cfg)
	if err != nil {
		return nil, err
	}
	return &Reader{c: c}, nil
}

// Cluster reads the Cluster namespace/name and everything of it (see
// assemble). Errors: the Cluster does not exist (errors.Is ErrClusterNotFound),
// Cluster API is not served (ErrCAPINotServed), reading the Cluster is
// forbidden (*ForbiddenError naming the identity and the role needed), or
// the API server cannot be reached. Everything else that cannot be read is
// in Cluster.Problems.
func (r *Reader) Cluster(ctx context.Context, namespace, name string) (*Cluster, error) {
	gvr, err := r.c.resource(ClusterKind)
	if err != nil {
		if meta.IsNoMatchError(err) {
			return nil, fmt.Errorf("reading Cluster %s/%s: %w", namespace, name, ErrCAPINotServed)
		}
		return nil, fmt.Errorf("reading Cluster %s/%s: discovery: %w", namespace, name, err)
	}
	u, err := r.c.dyn.Resource(gvr).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, clusterError(ctx, r.c.id, gvr, "get", namespace, namespace, name, err)
	}
	return assemble(ctx, readerSource{r.c}, u), nil
}

// clusterError is the error for a Cluster that could not be read; the role
// it names is for roleNamespace.
func clusterError(ctx context.Context, id *identity, gvr schema.GroupVersionResource, verb, roleNamespace, namespace, name string, err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%w: no Cluster %s/%s", ErrClusterNotFound, namespace, name)
	case apierrors.IsForbidden(err):
		p := problem(ctx, id, gvr, ClusterKind, verb, roleNamespace, name, err)
		p.Name = namespace + "/" + name
		return &ForbiddenError{Problem: p, Err: err}
	}
	return fmt.Errorf("reading Cluster %s/%s: %w", namespace, name, err)
}

type readerSource struct{ c *clients }

func (readerSource) parallel() int { return readConcurrency }

func (s readerSource) list(ctx context.Context, gk schema.GroupKind, ns, clusterName string) ([]*unstructured.Unstructured, []ReadProblem) {
	gvr, err := s.c.resource(gk)
	if err != nil {
		return nil, []ReadProblem{problem(ctx, s.c.id, gvr, gk, "list", ns, "", err)}
	}
	opts := metav1.ListOptions{Limit: listPageSize}
	if clusterName != "" {
		opts.LabelSelector = ClusterNameLabel + "=" + clusterName
	}
	var out []*unstructured.Unstructured
	for {
		l, err := s.c.dyn.Resource(gvr).Namespace(ns).List(ctx, opts)
		if err != nil {
			return nil, []ReadProblem{problem(ctx, s.c.id, gvr, gk, "list", ns, "", err)}
		}
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
		if opts.Continue = l.GetContinue(); opts.Continue == "" {
			return out, nil
		}
	}
}

func (s readerSource) byName(ctx context.Context, gk schema.GroupKind, ns string, names []string) (map[string]*unstructured.Unstructured, []ReadProblem) {
	gvr, err := s.c.resource(gk)
	if err != nil {
		return nil, []ReadProblem{problem(ctx, s.c.id, gvr, gk, "get", ns, "", err)}
	}
	out := make(map[string]*unstructured.Unstructured, len(names))
	var probs []ReadProblem
	if len(names) <= byNameGetLimit {
		for _, n := range names {
			u, err := s.c.dyn.Resource(gvr).Namespace(ns).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				probs = append(probs, problem(ctx, s.c.id, gvr, gk, "get", ns, n, err))
				continue
			}
			out[n] = u
		}
		return out, probs
	}
	all, probs := s.list(ctx, gk, ns, "")
	if probs != nil {
		return nil, probs
	}
	want := make(map[string]bool, len(names))
	for _, n := range names {
		want[n] = true
	}
	for _, u := range all {
		if want[u.GetName()] {
			out[u.GetName()] = u
		}
	}
	return out, missing(gvr, ns, names, out)
}

// missing returns a NotFound problem for each of names not in found.
func missing(gvr schema.GroupVersionResource, ns string, names []string, found map[string]*unstructured.Unstructured) []ReadProblem {
	var probs []ReadProblem
	for _, n := range names {
		if _, ok := found[n]; !ok {
			probs = append(probs, ReadProblem{
				Verb: "get", Resource: resourceName(gvr), Name: ns + "/" + n, NotFound: true,
				Err: fmt.Sprintf("%s %q not found", resourceName(gvr), n),
			})
		}
	}
	return probs
}

// problems collects ReadProblems from concurrent reads.
type problems struct {
	mu sync.Mutex
	ps []ReadProblem
}

func (p *problems) add(ps ...ReadProblem) {
	if len(ps) == 0 {
		return
	}
	p.mu.Lock()
	p.ps = append(p.ps, ps...)
	p.mu.Unlock()
}

// run calls fns with at most n running at once (inline when n <= 1).
func run(n int, fns ...func()) {
	if n <= 1 {
		for _, f := range fns {
			f()
		}
		return
	}
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	for _, f := range fns {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			f()
		})
	}
	wg.Wait()
}

// assemble reads everything of the Cluster u from src:
//
//   - Machines, MachineSets, MachineDeployments, MachinePools and
//     MachineHealthChecks labelled cluster.x-k8s.io/cluster-name=NAME in the
//     Cluster's namespace;
//   - the control plane (spec.controlPlaneRef) and the infrastructure
//     cluster (spec.infrastructureRef);
//   - the infrastructure object of each Machine and MachinePool and the
//     bootstrap config of each Machine, by the group and kind of the
//     reference, one read per kind (not per Machine);
//   - every HelmChartProxy of the namespace, and the HelmReleaseProxies of
//     this cluster.
//
// Lists come back sorted by name.
func assemble(ctx context.Context, src source, u *unstructured.Unstructured) *Cluster {
	c := ConvertCluster(u)
	ns, name := c.Namespace, c.Name
	var probs problems

	run(src.parallel(),
		func() {
			us, ps := src.list(ctx, MachineKind, ns, name)
			probs.add(ps...)
			for _, u := range us {
				c.Machines = append(c.Machines, ConvertMachine(u))
			}
		},
		func() {
			us, ps := src.list(ctx, MachineSetKind, ns, name)
			probs.add(ps...)
			for _, u := range us {
				c.MachineSets = append(c.MachineSets, ConvertMachineSet(u))
			}
		},
		func() {
			us, ps := src.list(ctx, MachineDeploymentKind, ns, name)
			probs.add(ps...)
			for _, u := range us {
				c.MachineDeployments = append(c.MachineDeployments, ConvertMachineDeployment(u))
			}
		},
		func() {
			us, ps := src.list(ctx, MachinePoolKind, ns, name)
			probs.add(ps...)
			for _, u := range us {
				c.MachinePools = append(c.MachinePools, ConvertMachinePool(u))
			}
		},
		func() {
			us, ps := src.list(ctx, MachineHealthCheckKind, ns, name)
			probs.add(ps...)
			for _, u := range us {
				c.MachineHealthChecks = append(c.MachineHealthChecks, ConvertMachineHealthCheck(u))
			}
		},
		func() {
			us, ps := src.list(ctx, HelmChartProxyKind, ns, "")
			probs.add(ps...)
			for _, u := range us {
				c.HelmChartProxies = append(c.HelmChartProxies, ConvertHelmChartProxy(u))
			}
		},
		func() {
			// CAAPH labels its releases with the cluster name; a release
			// naming the cluster only in spec.clusterRef counts too.
			us, ps := src.list(ctx, HelmReleaseProxyKind, ns, "")
			probs.add(ps...)
			for _, u := range us {
				if h := ConvertHelmReleaseProxy(u); h.ClusterName == name || h.Labels[ClusterNameLabel] == name {
					c.HelmReleaseProxies = append(c.HelmReleaseProxies, h)
				}
			}
		},
		func() {
			r := c.ControlPlaneRef
			if r.Name == "" {
				return
			}
			us, ps := src.byName(ctx, r.groupKind(), r.Namespace, []string{r.Name})
			probs.add(ps...)
			if u := us[r.Name]; u != nil {
				if r.groupKind() == KubeadmControlPlaneKind {
					c.ControlPlane = ConvertKubeadmControlPlane(u)
				} else {
					o := ConvertObject(u)
					c.OtherControlPlane = &o
				}
			}
		},
		func() {
			r := c.InfraRef
			if r.Name == "" {
				return
			}
			us, ps := src.byName(ctx, r.groupKind(), r.Namespace, []string{r.Name})
			probs.add(ps...)
			if u := us[r.Name]; u != nil {
				o := ConvertObject(u)
				c.Infra = &o
			}
		},
	)

	// The objects Machines and MachinePools reference, grouped by kind so
	// that each kind is one read.
	byKind := map[schema.GroupKind]map[string][]func(*unstructured.Unstructured){}
	var kinds []schema.GroupKind
	need := func(r Ref, set func(*unstructured.Unstructured)) {
		if r.Name == "" || r.Kind == "" {
			return
		}
		gk := r.groupKind()
		setters := byKind[gk]
		if setters == nil {
			setters = map[string][]func(*unstructured.Unstructured){}
			byKind[gk] = setters
			kinds = append(kinds, gk)
		}
		setters[r.Name] = append(setters[r.Name], set)
	}
	for _, m := range c.Machines {
		need(m.InfraRef, func(u *unstructured.Unstructured) { m.Infra = ConvertInfraMachine(u) })
		need(m.BootstrapRef, func(u *unstructured.Unstructured) {
			if c.KubeadmConfigs == nil {
				c.KubeadmConfigs = map[string]*Object{}
			}
			o := ConvertObject(u)
			c.KubeadmConfigs[u.GetName()] = &o
		})
	}
	for _, mp := range c.MachinePools {
		need(mp.InfraRef, func(u *unstructured.Unstructured) { mp.Infra = ConvertInfraMachine(u) })
	}
	results := make([]map[string]*unstructured.Unstructured, len(kinds))
	fns := make([]func(), 0, len(kinds))
	for i, gk := range kinds {
		fns = append(fns, func() {
			names := slices.Sorted(maps.Keys(byKind[gk]))
			us, ps := src.byName(ctx, gk, ns, names)
			probs.add(ps...)
			results[i] = us
		})
	}
	run(src.parallel(), fns...)
	// The setters write into c: called here, after the concurrent reads.
	for i, gk := range kinds {
		for name, setters := range byKind[gk] {
			if u := results[i][name]; u != nil {
				for _, set := range setters {
					set(u)
				}
			}
		}
	}

	sortByName(c.Machines, func(m *Machine) string { return m.Name })
	sortByName(c.MachineSets, func(m *MachineSet) string { return m.Name })
	sortByName(c.MachineDeployments, func(m *MachineDeployment) string { return m.Name })
	sortByName(c.MachinePools, func(m *MachinePool) string { return m.Name })
	sortByName(c.MachineHealthChecks, func(m *MachineHealthCheck) string { return m.Name })
	sortByName(c.HelmChartProxies, func(m *HelmChartProxy) string { return m.Name })
	sortByName(c.HelmReleaseProxies, func(m *HelmReleaseProxy) string { return m.Name })
	c.Problems = probs.ps
	slices.SortFunc(c.Problems, func(a, b ReadProblem) int {
		return cmp.Or(cmp.Compare(a.Resource, b.Resource), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Verb, b.Verb))
	})
	return c
}

func sortByName[T any](s []T, name func(T) string) {
	slices.SortFunc(s, func(a, b T) int { return cmp.Compare(name(a), name(b)) })
}
