package capi

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func proxyFrom(t *testing.T, selector string) *HelmChartProxy {
	t.Helper()
	doc := `apiVersion: addons.cluster.x-k8s.io/v1alpha1
kind: HelmChartProxy
metadata: {name: calico, namespace: default}
spec:
  chartName: tigera-operator
  clusterSelector:
` + selector
	m := map[string]any{}
	if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatal(err)
	}
	return ConvertHelmChartProxy(&unstructured.Unstructured{Object: m})
}

func TestHelmChartProxySelector(t *testing.T) {
	for _, tc := range []struct {
		name, selector string
		labels         map[string]string
		selects        bool
		str            string
		unmet          []string
		err            string
	}{
		{
			name: "matchLabels met", selector: "    matchLabels: {cni: calico}\n",
			labels: map[string]string{"cni": "calico", "other": "x"}, selects: true, str: "cni=calico",
		},
		{
			name: "matchLabels unmet", selector: "    matchLabels: {cni: calico, cloud-provider: azure}\n",
			labels: map[string]string{"cni": "cilium"}, str: "cloud-provider=azure,cni=calico",
			unmet: []string{"cloud-provider=azure", "cni=calico"},
		},
		{
			name:     "In met",
			selector: "    matchExpressions:\n    - {key: cni, operator: In, values: [calico, calico-ebpf]}\n",
			labels:   map[string]string{"cni": "calico-ebpf"}, selects: true, str: "cni in (calico,calico-ebpf)",
		},
		{
			name:     "In unmet with labels met",
			selector: "    matchLabels: {cloud-provider: azure}\n    matchExpressions:\n    - {key: cni, operator: In, values: [calico-ebpf, calico]}\n",
			labels:   map[string]string{"cloud-provider": "azure", "cni": "cilium"}, str: "cloud-provider=azure,cni in (calico,calico-ebpf)",
			unmet: []string{"cni=calico (or another of: calico-ebpf)"},
		},
		{
			name:     "Exists, DoesNotExist, NotIn",
			selector: "    matchExpressions:\n    - {key: flavor, operator: Exists}\n    - {key: legacy, operator: DoesNotExist}\n    - {key: env, operator: NotIn, values: [dev]}\n",
			labels:   map[string]string{"legacy": "true", "env": "dev"}, str: "env notin (dev),flavor,!legacy",
			unmet: []string{"env must not be dev", "flavor=<any value>", "remove label legacy"},
		},
		{
			name: "empty selects everything", selector: "    {}\n",
			labels: map[string]string{}, selects: true, str: "<everything>",
		},
		{
			name:     "unknown operator selects nothing",
			selector: "    matchExpressions:\n    - {key: cni, operator: Like, values: [cal]}\n",
			labels:   map[string]string{"cni": "calico"}, err: `"Like" is not a valid label selector operator`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := proxyFrom(t, tc.selector)
			ok, err := h.Selects(tc.labels)
			if ok != tc.selects {
				t.Errorf("Selects = %v, want %v", ok, tc.selects)
			}
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("Selects error %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("Selects error %v, want it to say %q", err, tc.err)
			}
			if tc.err != "" {
				return
			}
			if s := h.SelectorString(); s != tc.str {
				t.Errorf("SelectorString = %q, want %q", s, tc.str)
			}
			if u := h.Unmet(tc.labels); !reflect.DeepEqual(u, tc.unmet) {
				t.Errorf("Unmet = %q, want %q", u, tc.unmet)
			}
		})
	}
}
