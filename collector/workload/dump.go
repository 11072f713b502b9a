package workload

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// FromDump is the State of the resource dumps a CI tree holds for a
// workload cluster: Cluster API's test framework writes every Node
// (clusters/CLUSTER/resources/Node/NAME.yaml) and Pod
// (clusters/CLUSTER/resources/NS/Pod/NAME.yaml) of the workload cluster, but
// no DaemonSet or Deployment. The chain's workloads are therefore made from
// their pods' owners (a DaemonSet, or the Deployment of a ReplicaSet), and
// their desired and ready counts are the pods dumped: a pod that was never
// created is not seen. Objects of other kinds are ignored; one that does
// not convert is a Problem. With neither Nodes nor Pods the State is not
// reached.
func FromDump(source string, objs []*unstructured.Unstructured, readAt time.Time) *State {
	s := &State{Source: source, ReadAt: readAt}
	var o Objects
	for _, u := range objs {
		var err error
		switch u.GetKind() {
		case "Node":
			var n corev1.Node
			if err = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &n); err == nil {
				o.Nodes = append(o.Nodes, n)
			}
		case "Pod":
			var p corev1.Pod
			if err = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p); err == nil {
				o.Pods = append(o.Pods, p)
			}
		default:
			continue
		}
		if err != nil {
			s.Problems = append(s.Problems, Problem{Resource: strings.ToLower(u.GetKind()) + "s", Verb: "read", Err: fmt.Sprintf("%s %s/%s does not convert: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)})
		}
	}
	s.Reached = len(o.Nodes)+len(o.Pods) > 0
	if !s.Reached {
		s.Problems = append(s.Problems, Problem{Resource: "the API server", Verb: "read", Err: "the dumps hold no Node and no Pod of the workload cluster"})
		return s
	}
	s.Reduce(o)
	s.Workloads = append(s.Workloads, podWorkloads(o.Pods)...)
	sortWorkloads(s.Workloads)
	return s
}

// podWorkloads groups the chain's pods by the workload that owns them.
func podWorkloads(pods []corev1.Pod) []Workload {
	type key struct{ kind, ns, name string }
	groups := map[key][]*corev1.Pod{}
	var order []key
	for i := range pods {
		p := &pods[i]
		kind, name := owner(p)
		if kind == "" || LinkOf(name, p.Labels) == "" {
			continue
		}
		k := key{kind, p.Namespace, name}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], p)
	}
	var out []Workload
	for _, k := range order {
		ps := groups[k]
		w := Workload{Link: LinkOf(k.name, ps[0].Labels), Kind: k.kind, Namespace: k.ns, Name: k.name, Desired: int32(len(ps))}
		for _, c := range ps[0].Spec.Containers {
			w.Images = append(w.Images, c.Image)
		}
		sort.Slice(ps, func(i, j int) bool { return ps[i].Name < ps[j].Name })
		for _, p := range ps {
			if podReady(p) {
				w.Ready++
			}
		}
		w.keepPods(ps)
		out = append(out, w)
	}
	return out
}

// owner is the DaemonSet or Deployment a pod belongs to, from its
// controller reference (a ReplicaSet's name is its Deployment's and the
// pod-template-hash).
func owner(p *corev1.Pod) (kind, name string) {
	for _, r := range p.OwnerReferences {
		switch r.Kind {
		case "DaemonSet":
			return "DaemonSet", r.Name
		case "ReplicaSet":
			if h := p.Labels["pod-template-hash"]; h != "" && strings.HasSuffix(r.Name, "-"+h) {
				return "Deployment", strings.TrimSuffix(r.Name, "-"+h)
			}
			if i := strings.LastIndex(r.Name, "-"); i > 0 {
				return "Deployment", r.Name[:i]
			}
		}
	}
	return "", ""
}
