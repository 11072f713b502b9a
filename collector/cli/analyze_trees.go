package cli

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/nodediag/nodediag/collector/artifacts"
	"github.com/nodediag/nodediag/collector/incident"
)

// kindArtifacts is the kind of the inputs read from a CI artifact tree.
const kindArtifacts = "ci artifacts"

// isArtifactTree says whether path is a CI artifact tree (and not a host
// root: a directory with etc/ or var/).
func isArtifactTree(path string) bool {
	fi, err := os.Stat(path)
	if err != nil || !fi.IsDir() {
		return false
	}
	for _, d := range []string{"etc", "var"} {
		if fi, err := os.Stat(filepath.Join(path, d)); err == nil && fi.IsDir() {
			return false
		}
	}
	return artifacts.IsTree(path)
}

// treeJSON is an artifact tree in analyze's JSON output.
type treeJSON struct {
	Path      string                  `json:"path"`
	BuildLog  *artifacts.BuildFailure `json:"build_log_failure,omitempty"`
	BuildNote string                  `json:"build_log_note,omitempty"`
	Incidents []*incident.Incident    `json:"incidents,omitempty"`
	Errors    []string                `json:"errors,omitempty"`
	Problems  []string                `json:"problems,omitempty"`
}

func treesJSON(trees []*artifacts.Result) []treeJSON {
	var out []treeJSON
	for _, t := range trees {
		j := treeJSON{Path: t.Tree.Root, BuildLog: t.Build, Problems: t.Problems}
		if t.BuildErr != nil {
			j.BuildNote = t.BuildErr.Error()
		}
		for _, c := range t.Clusters {
			if c.Err != nil {
				j.Errors = append(j.Errors, fmt.Sprintf("Cluster %s/%s: %v", c.Namespace, c.Name, c.Err))
				continue
			}
			j.Incidents = append(j.Incidents, c.Incident)
		}
		out = append(out, j)
	}
	return out
}

// writeTreesMarkdown writes, for each tree, the build log's first failure
// and the incident report of each Cluster of its resource dumps; the
// machines' own reports follow with the other inputs.
func writeTreesMarkdown(w io.Writer, trees []*artifacts.Result) error {
	for _, t := range trees {
		fmt.Fprintf(w, "# CI artifact tree %s\n\n", t.Tree.Root)
		writeTreeHeader(w, t)
		for _, c := range t.Clusters {
			if c.Err != nil {
				fmt.Fprintf(w, "Cluster %s/%s: not diagnosed: %s\n\n", c.Namespace, c.Name, oneLine(c.Err.Error()))
				continue
			}
			if err := incident.RenderMarkdown(w, c.Incident); err != nil {
				return err
			}
			fmt.Fprintln(w)
		}
	}
	return nil
}

// writeTreeHeader writes what comes before a tree's incident reports: the
// build log's first failure, the tree's problems, a missing dump.
func writeTreeHeader(w io.Writer, t *artifacts.Result) {
	writeBuildFailure(w, t)
	for _, p := range t.Problems {
		fmt.Fprintf(w, "- input problem: %s\n", oneLine(p))
	}
	if len(t.Problems) > 0 {
		fmt.Fprintln(w)
	}
	if len(t.Tree.Resources) == 0 {
		fmt.Fprintf(w, "No resource dumps (resources/NAMESPACE/KIND/NAME.yaml): the machines are judged on their own.\n\n")
	}
}

// writeBuildFailure says what failed first in the build log.
func writeBuildFailure(w io.Writer, t *artifacts.Result) {
	switch {
	case t.Build != nil:
		b := t.Build
		fmt.Fprintf(w, "## Build log: first %s at %s:%d\n\n", b.Kind, b.Path, b.Line)
		if b.Spec != "" {
			fmt.Fprintf(w, "- Spec: %s\n", b.Spec)
		}
		if b.Location != "" {
			fmt.Fprintf(w, "- Where: %s\n", b.Location)
		}
		fmt.Fprintf(w, "- Failing lines in the log: %d\n\n", b.Failures)
		fmt.Fprintf(w, "```text\n%s\n```\n\n", strings.ReplaceAll(strings.Join(b.Context, "\n"), "```", "'''"))
	case t.BuildErr != nil && artifacts.IsNoFailure(t.BuildErr):
		fmt.Fprintf(w, "## Build log: %s has no fatal error or timeout\n\n", t.Tree.BuildLog)
	case t.BuildErr != nil:
		fmt.Fprintf(w, "## Build log: not read: %s\n\n", oneLine(t.BuildErr.Error()))
	}
}

// writeAnalysisHTML writes one page: each tree's build failure and
// incident reports (their own HTML, whose values html/template escaped),
// then the inputs' table and reports.
func writeAnalysisHTML(w io.Writer, trees []*artifacts.Result, out []*analyzed) error {
	fmt.Fprint(w, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>nodediag analyze</title>\n"+
		"<style>body{font-family:system-ui,sans-serif;max-width:72rem;margin:2rem auto;padding:0 1rem}pre{background:#f5f5f5;padding:.5rem;white-space:pre-wrap}"+
		".incident{border-top:2px solid #888;margin-top:2rem}</style></head>\n<body>\n")
	for _, t := range trees {
		var md bytes.Buffer
		writeTreeHeader(&md, t)
		fmt.Fprintf(w, "<h1>CI artifact tree %s</h1>\n", html.EscapeString(t.Tree.Root))
		if md.Len() > 0 {
			fmt.Fprintf(w, "<pre>%s</pre>\n", html.EscapeString(md.String()))
		}
		for _, c := range t.Clusters {
			if c.Err != nil {
				fmt.Fprintf(w, "<p>Cluster %s/%s: not diagnosed: %s</p>\n", html.EscapeString(c.Namespace), html.EscapeString(c.Name), html.EscapeString(c.Err.Error()))
				continue
			}
			var page bytes.Buffer
			if err := incident.RenderHTML(&page, c.Incident); err != nil {
				return err
			}
			fmt.Fprintf(w, "<div class=\"incident\">%s</div>\n", body(page.String()))
		}
	}
	var md bytes.Buffer
	writeAnalysisMarkdown(&md, out)
	fmt.Fprintf(w, "<h1>Inputs</h1>\n<pre>%s</pre>\n</body></html>\n", html.EscapeString(md.String()))
	return nil
}

// body is what is between <body> and </body> of a page.
func body(page string) string {
	if _, rest, ok := strings.Cut(page, "<body>"); ok {
		page = rest
	}
	if b, _, ok := strings.Cut(page, "</body>"); ok {
		page = b
	}
	return page
}
