package deploy

import (
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestWorkloadReaderClusterResourceSet: the management-side kustomization
// of deploy/workload-reader renders a ClusterResourceSet whose ConfigMap
// holds reader.yaml as it is in the repository (the file
// collector/workload's tests apply to a real workload API server), and
// selects Clusters by the label docs/workload.md tells to set.
func TestWorkloadReaderClusterResourceSet(t *testing.T) {
	objs := render(t, "workload-reader")
	want, err := os.ReadFile("workload-reader/reader.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cm, crs *unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "ConfigMap":
			cm = o
		case "ClusterResourceSet":
			crs = o
		}
	}
	if cm == nil || crs == nil || len(objs) != 2 {
		t.Fatalf("want a ConfigMap and a ClusterResourceSet, got %d objects", len(objs))
	}
	if got, _, _ := unstructured.NestedString(cm.Object, "data", "reader.yaml"); got != string(want) {
		t.Errorf("the ConfigMap's reader.yaml differs from workload-reader/reader.yaml")
	}
	res, _, _ := unstructured.NestedSlice(crs.Object, "spec", "resources")
	if len(res) != 1 || res[0].(map[string]any)["name"] != cm.GetName() || res[0].(map[string]any)["kind"] != "ConfigMap" {
		t.Errorf("spec.resources %v does not name ConfigMap %s", res, cm.GetName())
	}
	if sel, _, _ := unstructured.NestedString(crs.Object, "spec", "clusterSelector", "matchLabels", "nodediag.io/workload-reader"); sel != "enabled" {
		t.Errorf("clusterSelector: %q, want nodediag.io/workload-reader=enabled", sel)
	}
}
