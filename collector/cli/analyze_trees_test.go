package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// artifactTree is the example CI artifact tree (go run ./hack/genartifacts).
var artifactTree = filepath.Join("..", "artifacts", "testdata", "capz-e2e")

// TestAnalyzeArtifactTree: `nodediag analyze TREE` writes the incident
// report of the tree's cluster, names the build log's first failure, and
// lists each machine directory's report, in every output format.
func TestAnalyzeArtifactTree(t *testing.T) {
	r := run(t, "analyze", artifactTree, "-o", "json")
	if r.code() != ExitFindings {
		t.Fatalf("exit %d, want %d (the worker has an error)\n%s", r.code(), ExitFindings, r.stderr)
	}
	var doc struct {
		analyzeJSON
		Trees []struct {
			BuildLog struct {
				Kind string `json:"kind"`
				Line int    `json:"line"`
			} `json:"build_log_failure"`
			Incidents []struct {
				Title     string `json:"title"`
				RootCause struct {
					Finding string `json:"finding"`
				} `json:"root_cause"`
			} `json:"incidents"`
		} `json:"artifact_trees"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("JSON: %v\n%s", err, r.stdout)
	}
	if len(doc.Inputs) != 2 || doc.Inputs[1].Kind != kindArtifacts || doc.Inputs[1].Report == nil || doc.Inputs[1].Report.Findings[0].ID != "JoinTokenInvalid" {
		t.Errorf("inputs %+v", doc.Inputs)
	}
	if len(doc.Trees) != 1 || len(doc.Trees[0].Incidents) != 1 {
		t.Fatalf("trees %+v", doc.Trees)
	}
	tr := doc.Trees[0]
	if tr.BuildLog.Kind != "timeout" || tr.BuildLog.Line != 31 {
		t.Errorf("build log failure %+v", tr.BuildLog)
	}
	if inc := tr.Incidents[0]; inc.RootCause.Finding != "MachineNotRunning/Machine/capz-e2e-md-0-6b8f9-x7k2l" || !strings.Contains(inc.Title, "bootstrap token") {
		t.Errorf("incident %+v", inc)
	}

	md := run(t, "analyze", artifactTree)
	for _, want := range []string{
		"## Build log: first timeout at",
		"# Cluster demo/capz-e2e: kubeadm join was refused",
		"joined by artifact-directory",
		"| capz-e2e-md-0-6b8f9-x7k2l | worker | Provisioned |",
	} {
		if !strings.Contains(md.stdout, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	h := run(t, "analyze", artifactTree, "-o", "html")
	if !strings.HasPrefix(h.stdout, "<!DOCTYPE html>") || strings.Count(h.stdout, "<body>") != 1 || !strings.Contains(h.stdout, `<div class="incident">`) {
		t.Errorf("html is not one page with the incident in it:\n%.400s", h.stdout)
	}
	if strings.Contains(h.stdout, "<int>") {
		t.Error("the build log's text was not escaped in HTML")
	}
}
