package workload

import (
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Bounds of what State keeps: a 1,000-node DaemonSet is 1,000 pods, of
// which the report quotes a few.
const (
	// maxBadPods are the pods kept per workload that are not ready, and
	// maxGoodPods those that are (to show where it works).
	maxBadPods  = 20
	maxGoodPods = 3
	// maxMessage bounds a condition's or container's message (a
	// termination message may be 4 KiB).
	maxMessage = 1024
)

// Objects are the workload cluster's objects as read, before reduction.
type Objects struct {
	Nodes       []corev1.Node
	DaemonSets  []appsv1.DaemonSet
	Deployments []appsv1.Deployment
	Pods        []corev1.Pod
}

// Reduce turns the objects into the Nodes and chain Workloads of s.
func (s *State) Reduce(o Objects) {
	for i := range o.Nodes {
		s.Nodes = append(s.Nodes, node(&o.Nodes[i]))
	}
	sort.Slice(s.Nodes, func(i, j int) bool { return s.Nodes[i].Name < s.Nodes[j].Name })
	add := func(kind string, meta metav1.ObjectMeta, sel *metav1.LabelSelector, tmpl corev1.PodTemplateSpec, desired, ready int32) {
		link := LinkOf(meta.Name, tmpl.Labels)
		if link == "" {
			return
		}
		w := Workload{Link: link, Kind: kind, Namespace: meta.Namespace, Name: meta.Name, Desired: desired, Ready: ready}
		for _, c := range tmpl.Spec.Containers {
			w.Images = append(w.Images, c.Image)
		}
		selector, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil || sel == nil {
			selector = labels.Nothing()
		}
		var mine []*corev1.Pod
		for i := range o.Pods {
			if p := &o.Pods[i]; p.Namespace == meta.Namespace && selector.Matches(labels.Set(p.Labels)) {
				mine = append(mine, p)
			}
		}
		w.keepPods(mine)
		s.Workloads = append(s.Workloads, w)
	}
	for i := range o.DaemonSets {
		d := &o.DaemonSets[i]
		add("DaemonSet", d.ObjectMeta, d.Spec.Selector, d.Spec.Template, d.Status.DesiredNumberScheduled, d.Status.NumberReady)
	}
	for i := range o.Deployments {
		d := &o.Deployments[i]
		desired := int32(1)
		if d.Spec.Replicas != nil {
			desired = *d.Spec.Replicas
		}
		add("Deployment", d.ObjectMeta, d.Spec.Selector, d.Spec.Template, desired, d.Status.ReadyReplicas)
	}
	sortWorkloads(s.Workloads)
}

// sortWorkloads orders workloads by chain link, then namespace and name.
func sortWorkloads(ws []Workload) {
	order := map[string]int{}
	for i, l := range Links {
		order[l] = i
	}
	sort.SliceStable(ws, func(i, j int) bool {
		a, b := ws[i], ws[j]
		if order[a.Link] != order[b.Link] {
			return order[a.Link] < order[b.Link]
		}
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
}

// keepPods keeps the pods of w that are not ready (at most maxBadPods)
// and a few ready ones, counting the rest in PodsOmitted.
func (w *Workload) keepPods(pods []*corev1.Pod) {
	var good []Pod
	for _, p := range pods {
		switch {
		case podReady(p):
			good = append(good, pod(p))
		case len(w.Pods) < maxBadPods:
			w.Pods = append(w.Pods, pod(p))
		default:
			w.PodsOmitted++
		}
	}
	if len(good) > maxGoodPods {
		w.PodsOmitted += len(good) - maxGoodPods
		good = good[:maxGoodPods]
	}
	w.Pods = append(w.Pods, good...)
}

func clip(s string) string {
	s = strings.TrimSpace(s)
	if len(s) <= maxMessage {
		return s
	}
	n := maxMessage
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

func node(n *corev1.Node) Node {
	out := Node{Name: n.Name, ProviderID: n.Spec.ProviderID, KubeletVersion: n.Status.NodeInfo.KubeletVersion, Created: n.CreationTimestamp.Time.UTC()}
	_, out.ControlPlane = n.Labels["node-role.kubernetes.io/control-plane"]
	for _, c := range n.Status.Conditions {
		out.Conditions = append(out.Conditions, Condition{Type: string(c.Type), Status: string(c.Status), Reason: c.Reason, Message: clip(c.Message), LastTransitionTime: c.LastTransitionTime.Time.UTC()})
	}
	for _, t := range n.Spec.Taints {
		out.Taints = append(out.Taints, Taint{Key: t.Key, Value: t.Value, Effect: string(t.Effect)})
	}
	return out
}

func podReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func pod(p *corev1.Pod) Pod {
	out := Pod{Name: p.Name, Node: p.Spec.NodeName, Phase: string(p.Status.Phase), Created: p.CreationTimestamp.Time.UTC()}
	for _, c := range p.Status.Conditions {
		if c.Status == corev1.ConditionTrue {
			continue
		}
		out.Conditions = append(out.Conditions, Condition{Type: string(c.Type), Status: string(c.Status), Reason: c.Reason, Message: clip(c.Message), LastTransitionTime: c.LastTransitionTime.Time.UTC()})
	}
	images := map[string]string{}
	for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		images[c.Name] = c.Image
	}
	for i, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, cs := range list {
			c := Container{Name: cs.Name, Image: cs.Image, Init: i == 0, Ready: cs.Ready, Restarts: cs.RestartCount}
			if c.Image == "" {
				c.Image = images[cs.Name]
			}
			switch st := cs.State; {
			case st.Waiting != nil:
				c.State, c.Reason, c.Message = "waiting", st.Waiting.Reason, clip(st.Waiting.Message)
			case st.Terminated != nil:
				c.State, c.Reason, c.Message = "terminated", st.Terminated.Reason, clip(st.Terminated.Message)
			case st.Running != nil:
				c.State = "running"
			}
			if t := cs.LastTerminationState.Terminated; t != nil {
				c.Last = &Termination{Reason: t.Reason, Message: clip(t.Message), ExitCode: t.ExitCode, Finished: t.FinishedAt.Time.UTC()}
			}
			out.Containers = append(out.Containers, c)
		}
	}
	return out
}
