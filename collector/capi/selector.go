package capi

import (
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// LabelSelector is spec.clusterSelector of a HelmChartProxy as CAAPH reads
// it: matchLabels and matchExpressions, all of which must hold. An empty
// selector selects every cluster (CAAPH converts the struct, not a nil
// pointer).
func (h *HelmChartProxy) LabelSelector() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: h.ClusterSelector, MatchExpressions: h.MatchExpressions}
}

// SelectorString is the selector as kubectl writes one ("cni=calico,env in
// (prod)"), "<everything>" for an empty one.
func (h *HelmChartProxy) SelectorString() string {
	s := metav1.FormatLabelSelector(h.LabelSelector())
	if s == "<none>" {
		return "<everything>"
	}
	return s
}

// Selects says whether a cluster with these labels is selected. A selector
// the API machinery cannot parse (an operator it does not know, an In
// without values) selects nothing, as in CAAPH, and is returned as the
// error.
func (h *HelmChartProxy) Selects(l map[string]string) (bool, error) {
	sel, err := metav1.LabelSelectorAsSelector(h.LabelSelector())
	if err != nil {
		return false, fmt.Errorf("HelmChartProxy %s: spec.clusterSelector: %w", h.Name, err)
	}
	return sel.Matches(labels.Set(l)), nil
}

// Unmet are the selector's requirements the labels do not meet, each as the
// change that would meet it: "cni=calico" (add or set the label), "env=prod
// (or another of: staging)" for an In, "flavor=<any value>" for an Exists,
// "remove label legacy" for a DoesNotExist, "env must not be dev" for a
// NotIn. Sorted.
func (h *HelmChartProxy) Unmet(l map[string]string) []string {
	sel, err := metav1.LabelSelectorAsSelector(h.LabelSelector())
	if err != nil {
		return nil
	}
	reqs, _ := sel.Requirements()
	var out []string
	for _, r := range reqs {
		if r.Matches(labels.Set(l)) {
			continue
		}
		vals := r.Values().List() // sorted
		key := r.Key()
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			s := key + "=" + vals[0]
			if len(vals) > 1 {
				s += " (or another of: " + strings.Join(vals[1:], ", ") + ")"
			}
			out = append(out, s)
		case selection.Exists:
			out = append(out, key+"=<any value>")
		case selection.DoesNotExist:
			out = append(out, "remove label "+key)
		case selection.NotEquals, selection.NotIn:
			out = append(out, key+" must not be "+strings.Join(vals, " or "))
		default:
			out = append(out, r.String())
		}
	}
	sort.Strings(out)
	return out
}
