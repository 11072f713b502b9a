package workload

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Verbs is what the read-only identity needs (deploy/workload-reader).
const Verbs = "get, list, watch"

// DefaultTimeout bounds a whole Read: a workload API server that does not
// answer must not hold the incident report.
const DefaultTimeout = 20 * time.Second

// listPageSize bounds each list response.
const listPageSize = 500

// Read reads the workload cluster's Nodes and the chain's workloads of
// Namespaces with cfg, within timeout (DefaultTimeout when zero). It
// never fails: what cannot be read is in State.Problems, and an API server
// that cannot be reached at all leaves Reached false. source names where
// cfg came from, for the report.
func Read(ctx context.Context, cfg *rest.Config, source string, timeout time.Duration) *State {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	s := &State{Source: source, ReadAt: time.Now().UTC()}
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = rest.NoWarnings{}
	if cfg.Timeout == 0 || cfg.Timeout > timeout {
		cfg.Timeout = timeout
	}
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 20, 40
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		s.Problems = append(s.Problems, Problem{Resource: "the API server", Err: err.Error()})
		return s
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	r := &reader{cs: cs, s: s}

	var o Objects
	// Nodes first: an API server that does not answer this answers
	// nothing, and one error says so instead of one per namespace.
	nodes, err := list(ctx, func(opts metav1.ListOptions) (*corev1.NodeList, error) { return cs.CoreV1().Nodes().List(ctx, opts) },
		func(l *corev1.NodeList) ([]corev1.Node, string) { return l.Items, l.Continue })
	switch {
	case err == nil:
		s.Reached, o.Nodes = true, nodes
	case isStatus(err):
		s.Reached = true
		r.problem(ctx, "nodes", err)
	default:
		s.Problems = append(s.Problems, Problem{Resource: "the API server", Verb: "list", Err: fmt.Sprintf("%s did not answer: %v", cfg.Host, err)})
		return s
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, ns := range Namespaces {
		wg.Go(func() {
			ds, err1 := list(ctx, func(opts metav1.ListOptions) (*appsv1.DaemonSetList, error) {
				return cs.AppsV1().DaemonSets(ns).List(ctx, opts)
			}, func(l *appsv1.DaemonSetList) ([]appsv1.DaemonSet, string) { return l.Items, l.Continue })
			dp, err2 := list(ctx, func(opts metav1.ListOptions) (*appsv1.DeploymentList, error) {
				return cs.AppsV1().Deployments(ns).List(ctx, opts)
			}, func(l *appsv1.DeploymentList) ([]appsv1.Deployment, string) { return l.Items, l.Continue })
			pods, err3 := list(ctx, func(opts metav1.ListOptions) (*corev1.PodList, error) { return cs.CoreV1().Pods(ns).List(ctx, opts) },
				func(l *corev1.PodList) ([]corev1.Pod, string) { return l.Items, l.Continue })
			mu.Lock()
			defer mu.Unlock()
			for _, e := range []struct {
				what string
				err  error
			}{{"daemonsets.apps", err1}, {"deployments.apps", err2}, {"pods", err3}} {
				if e.err != nil {
					r.problem(ctx, e.what+" in "+ns, e.err)
					r.s.Problems[len(r.s.Problems)-1].Optional = ns != "kube-system"
				}
			}
			o.DaemonSets = append(o.DaemonSets, ds...)
			o.Deployments = append(o.Deployments, dp...)
			o.Pods = append(o.Pods, pods...)
		})
	}
	wg.Wait()
	s.Reduce(o)
	return s
}

// list pages through a list request.
func list[L any, T any](ctx context.Context, do func(metav1.ListOptions) (L, error), items func(L) ([]T, string)) ([]T, error) {
	var out []T
	opts := metav1.ListOptions{Limit: listPageSize}
	for {
		l, err := do(opts)
		if err != nil {
			return out, err
		}
		it, next := items(l)
		out = append(out, it...)
		if next == "" || ctx.Err() != nil {
			return out, ctx.Err()
		}
		opts.Continue = next
	}
}

func isStatus(err error) bool {
	var st apierrors.APIStatus
	return errors.As(err, &st)
}

type reader struct {
	cs       kubernetes.Interface
	s        *State
	once     sync.Once
	identity string
}

// problem records a failed read; a Forbidden names who asked, found with a
// SelfSubjectReview (the only non-read request, made once and only after a
// Forbidden).
func (r *reader) problem(ctx context.Context, resource string, err error) {
	p := Problem{Resource: resource, Verb: "list", Err: err.Error()}
	if apierrors.IsForbidden(err) {
		p.Forbidden = true
		r.once.Do(func() {
			r.identity = "unknown"
			rv, err := r.cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
			if err == nil && rv.Status.UserInfo.Username != "" {
				r.identity = fmt.Sprintf("user %q", rv.Status.UserInfo.Username)
				if g := rv.Status.UserInfo.Groups; len(g) > 0 {
					r.identity += " (groups " + strings.Join(g, ", ") + ")"
				}
			}
		})
		p.Identity = r.identity
	}
	r.s.Problems = append(r.s.Problems, p)
}
