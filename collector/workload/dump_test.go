package workload

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestFromDump: pods become their owners' workloads (a DaemonSet, or the
// Deployment of a ReplicaSet), a dump that does not convert is a Problem
// and the rest is used, and dumps without Node or Pod are not reached.
func TestFromDump(t *testing.T) {
	pod := func(name, ownerKind, owner, hash string, ready bool) *unstructured.Unstructured {
		labels := map[string]any{"k8s-app": "kube-dns"}
		if hash != "" {
			labels["pod-template-hash"] = hash
		}
		st := "False"
		if ready {
			st = "True"
		}
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": name, "namespace": "kube-system", "labels": labels,
				"ownerReferences": []any{map[string]any{"apiVersion": "apps/v1", "kind": ownerKind, "name": owner, "uid": "u", "controller": true}}},
			"status": map[string]any{"phase": "Running", "conditions": []any{map[string]any{"type": "Ready", "status": st}},
				"containerStatuses": []any{map[string]any{"name": "coredns", "ready": ready, "state": map[string]any{"running": map[string]any{}}}}},
		}}
	}
	broken := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "bad", "namespace": "kube-system"}, "status": map[string]any{"containerStatuses": "not a list"}}}
	other := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x"}}}
	s := FromDump("test", []*unstructured.Unstructured{
		pod("coredns-66f779496c-a", "ReplicaSet", "coredns-66f779496c", "66f779496c", true),
		pod("coredns-66f779496c-b", "ReplicaSet", "coredns-66f779496c", "66f779496c", false),
		broken, other,
	}, time.Now())
	if !s.Reached {
		t.Fatal("not reached")
	}
	if len(s.Problems) != 1 || !strings.Contains(s.Problems[0].Err, "Pod kube-system/bad does not convert") {
		t.Errorf("problems %+v", s.Problems)
	}
	ws := s.LinkWorkloads(LinkCoreDNS)
	if len(ws) != 1 || ws[0].Kind != "Deployment" || ws[0].Name != "coredns" || ws[0].Desired != 2 || ws[0].Ready != 1 || len(ws[0].Pods) != 2 {
		t.Errorf("coredns workloads %+v", ws)
	}
	if s := FromDump("empty", []*unstructured.Unstructured{other}, time.Now()); s.Reached || len(s.Problems) != 1 {
		t.Errorf("no Node nor Pod: reached %v problems %+v", s.Reached, s.Problems)
	}
}
