package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nodediag/nodediag/agent/rules"
	"github.com/nodediag/nodediag/collector/capi"
	"github.com/nodediag/nodediag/collector/incident"
	"github.com/nodediag/nodediag/collector/store"
	"github.com/nodediag/nodediag/collector/workload"
	"github.com/nodediag/nodediag/internal/version"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// Clusters is the Cluster API state the collector reads (serve
// --kubeconfig): a capi.Cache, whose informers keep it current.
type Clusters interface {
	// WaitForSync returns once the state is complete enough to read, or
	// with ctx's end.
	WaitForSync(ctx context.Context) error
	Cluster(ctx context.Context, namespace, name string) (*capi.Cluster, error)
}

// ErrorDomain and ReasonClusterAPIForbidden mark, in a status's
// ErrorInfo, a PermissionDenied that is the collector's (its identity in
// the management cluster lacks a role), not the caller's.
const (
	ErrorDomain               = "nodediag.io"
	ReasonClusterAPIForbidden = "CLUSTER_API_FORBIDDEN"
)

// syncWait bounds how long a DiagnoseCluster waits for the informers of a
// collector that has just started.
const syncWait = 30 * time.Second

// diagnoser holds what DiagnoseCluster keeps between calls: one rule engine
// and the re-judged reports (a cluster diagnosed again re-judges only the
// nodes whose report or Machine changed).
type diagnoser struct {
	once    sync.Once
	engine  *rules.Engine
	err     error
	rejudge *incident.RejudgeCache
}

func (d *diagnoser) init() error {
	d.once.Do(func() {
		d.engine, d.err = rules.NewEngine()
		d.rejudge = incident.NewRejudgeCache()
	})
	return d.err
}

// DiagnoseCluster joins the cluster the collector's informers hold with the
// stored reports of its nodes (see the proto for the codes).
func (f *fleetService) DiagnoseCluster(ctx context.Context, req *nodediagv1.DiagnoseClusterRequest) (*nodediagv1.DiagnoseClusterResponse, error) {
	s := f.s
	ns, name := req.GetNamespace(), req.GetName()
	if ns == "" || name == "" || len(ns)+len(name) > 512 {
		return nil, status.Error(codes.InvalidArgument, "a cluster namespace and name are required")
	}
	if s.o.Clusters == nil {
		return nil, status.Error(codes.FailedPrecondition, "this collector reads no management cluster: start it with nodediag serve --kubeconfig FILE (or in-cluster with its ServiceAccount), or run nodediag diagnose with --kubeconfig here")
	}
	if err := s.diag.init(); err != nil {
		return nil, status.Errorf(codes.Internal, "loading the rules: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, syncWait)
	err := s.o.Clusters.WaitForSync(wctx)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		return nil, status.Errorf(codes.Unavailable, "the collector's view of the management cluster is not ready: %v", err)
	}
	c, err := s.o.Clusters.Cluster(ctx, ns, name)
	if err != nil {
		var fe *capi.ForbiddenError
		switch {
		case errors.Is(err, capi.ErrClusterNotFound):
			return nil, status.Errorf(codes.NotFound, "cluster %s/%s not found in the management cluster the collector reads", ns, name)
		case errors.As(err, &fe):
			// The collector's identity, not the caller, lacks the
			// right: the ErrorInfo tells the CLI so.
			st := status.Newf(codes.PermissionDenied, "the collector's own identity may not read the cluster: %v", err)
			if d, derr := st.WithDetails(&errdetails.ErrorInfo{Reason: ReasonClusterAPIForbidden, Domain: ErrorDomain}); derr == nil {
				st = d
			}
			return nil, st.Err()
		case ctx.Err() != nil:
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		return nil, status.Errorf(codes.Unavailable, "reading cluster %s/%s: %v", ns, name, err)
	}
	reps, err := s.clusterReports(ctx, c)
	if err != nil {
		return nil, err
	}
	var wl *workload.State
	if s.o.Workload != nil {
		wl = s.o.Workload(ctx, ns, name)
	}
	inc, err := incident.Diagnose(c, reps, incident.Options{Engine: s.diag.engine, Cache: s.diag.rejudge, Workload: wl})
	if err != nil {
		return nil, status.Errorf(codes.Internal, "diagnosing %s/%s: %v", ns, name, err)
	}
	var ib bytes.Buffer
	if err := incident.RenderJSON(&ib, inc); err != nil {
		return nil, status.Errorf(codes.Internal, "encoding the incident: %v", err)
	}
	cb, err := json.Marshal(withoutRaw(c))
	if err != nil {
		return nil, status.Errorf(codes.Internal, "encoding the cluster: %v", err)
	}
	return &nodediagv1.DiagnoseClusterResponse{IncidentJson: ib.Bytes(), ClusterJson: cb, CollectorVersion: version.Get().Version}, nil
}

// clusterReports are the latest stored reports of the nodes that may join
// the cluster's Machines, with their live state (as GetNode gives it).
func (s *Server) clusterReports(ctx context.Context, c *capi.Cluster) ([]incident.NodeReport, error) {
	sums, err := s.o.Store.Nodes(ctx)
	if err != nil {
		return nil, s.storeStatus("listing nodes", err)
	}
	var out []incident.NodeReport
	for _, sum := range incident.Candidates(c, sums) {
		rec, err := s.o.Store.Latest(ctx, sum.GetNodeName())
		if errors.Is(err, store.ErrNotFound) {
			continue // forgotten since Nodes
		}
		if err != nil {
			return nil, s.storeStatus("reading the node's report", err)
		}
		out = append(out, incident.NodeReport{Report: rec.Report, Summary: s.liveSummary(rec.Summary)})
	}
	return out, nil
}

// withoutRaw is a copy of c whose objects carry no Raw (the tree needs the
// model only; the raw objects would multiply the response).
func withoutRaw(c *capi.Cluster) *capi.Cluster {
	cc := *c
	cc.Raw = nil
	if c.Infra != nil {
		o := *c.Infra
		o.Raw = nil
		cc.Infra = &o
	}
	if c.ControlPlane != nil {
		k := *c.ControlPlane
		k.Raw = nil
		cc.ControlPlane = &k
	}
	if c.OtherControlPlane != nil {
		o := *c.OtherControlPlane
		o.Raw = nil
		cc.OtherControlPlane = &o
	}
	cc.Machines = make([]*capi.Machine, len(c.Machines))
	for i, m := range c.Machines {
		mm := *m
		mm.Raw = nil
		if m.Infra != nil {
			im := *m.Infra
			im.Raw = nil
			mm.Infra = &im
		}
		cc.Machines[i] = &mm
	}
	cc.MachineSets = stripAll(c.MachineSets, func(x *capi.MachineSet) *capi.Object { return &x.Object })
	cc.MachineDeployments = stripAll(c.MachineDeployments, func(x *capi.MachineDeployment) *capi.Object { return &x.Object })
	cc.MachinePools = stripAll(c.MachinePools, func(x *capi.MachinePool) *capi.Object { return &x.Object })
	cc.MachineHealthChecks = stripAll(c.MachineHealthChecks, func(x *capi.MachineHealthCheck) *capi.Object { return &x.Object })
	cc.HelmChartProxies = stripAll(c.HelmChartProxies, func(x *capi.HelmChartProxy) *capi.Object { return &x.Object })
	cc.HelmReleaseProxies = stripAll(c.HelmReleaseProxies, func(x *capi.HelmReleaseProxy) *capi.Object { return &x.Object })
	if c.KubeadmConfigs != nil {
		cc.KubeadmConfigs = make(map[string]*capi.Object, len(c.KubeadmConfigs))
		for k, o := range c.KubeadmConfigs {
			oo := *o
			oo.Raw = nil
			cc.KubeadmConfigs[k] = &oo
		}
	}
	return &cc
}

// stripAll copies each element with its object's Raw cleared.
func stripAll[T any](xs []*T, obj func(*T) *capi.Object) []*T {
	if xs == nil {
		return nil
	}
	out := make([]*T, len(xs))
	for i, x := range xs {
		y := *x
		obj(&y).Raw = nil
		out[i] = &y
	}
	return out
}
