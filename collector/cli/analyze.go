package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"filippo.io/age"
	"github.com/spf13/cobra"

	"github.com/nodediag/nodediag/agent/report"
	"github.com/nodediag/nodediag/agent/rules"
	"github.com/nodediag/nodediag/collector/artifacts"
	"github.com/nodediag/nodediag/collector/reports"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

const analyzeLong = `Analyse node evidence offline: agent bundles (nodediag-agent collect --bundle,
encrypted ones with --identity), agent JSON reports and node records, host
roots (a node's / or a copy of it, checked here read-only: no binary of the
copy is run, no network touched), and CI artifact trees as the Cluster API and
CAPZ e2e tests leave them (clusters/CLUSTER/machines/MACHINE/{journal.log,
kubelet.log, cloud-init-output.log, ...}, resources/NS/KIND/NAME.yaml,
build-log.txt). Every node's evidence is judged again with this nodediag's
rules, the agent's own, so an old bundle gets today's verdict.

A CI artifact tree gives: the build log's first fatal error or timeout; the
incident report of each Cluster its resource dumps hold, joined with the
reports of its machine directories (journalctl's text exports read as the
journal); and each machine's report. Symlinks in a tree are never followed.

What is wrong with an input (a bundle cut short, a member that fails its
hash, a bundle of a newer format, a path that is no report) is said, and the
rest is analysed.

Output: -o markdown (default) a summary table and each node's report; -o json
{"inputs": [{"path", "kind", "problems", "report"}]} with each report in the
agent's JSON form; -o html the same as a page; -o text the agents' text
reports one after the other.

Exit codes: 0 no finding at error or above; 1 at least one; 2 usage, or no
input could be analysed.`

type analyzeOptions struct {
	output     string
	identities []string
}

func newAnalyzeCommand() *cobra.Command {
	o := &analyzeOptions{}
	cmd := &cobra.Command{
		Use:   "analyze PATH... [-o markdown|json|html|text] [--identity FILE]",
		Short: "Analyse agent bundles, reports, host roots and CI artifact trees offline",
		Long:  analyzeLong,
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAnalyze(contextOf(cmd), cmd.OutOrStdout(), o, args)
		},
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "markdown", "output format: markdown, json, html or text")
	cmd.Flags().StringSliceVar(&o.identities, "identity", nil, "age identity `FILE` that opens encrypted bundles (repeatable)")
	return cmd
}

// analyzed is one input and what came of it.
type analyzed struct {
	Path     string   `json:"path"`
	Kind     string   `json:"kind,omitempty"`
	Problems []string `json:"problems,omitempty"`
	// Skipped are the files of a CI tree's machine knowingly not read.
	Skipped []string        `json:"skipped,omitempty"`
	Error   string          `json:"error,omitempty"`
	Report  json.RawMessage `json:"report,omitempty"`
	report  *nodediagv1.Report
}

func runAnalyze(ctx context.Context, w io.Writer, o *analyzeOptions, paths []string) error {
	switch o.output {
	case "markdown", "json", "html", "text":
	default:
		return exitf(ExitUsage, "--output %q: want markdown, json, html or text", o.output)
	}
	var ids []age.Identity
	for _, p := range o.identities {
		f, err := os.Open(p)
		if err != nil {
			return exitf(ExitUsage, "--identity: %v", err)
		}
		got, err := age.ParseIdentities(f)
		f.Close()
		if err != nil {
			return exitf(ExitUsage, "--identity %s: %v", p, err)
		}
		ids = append(ids, got...)
	}
	e, err := rules.NewEngine()
	if err != nil {
		return exitf(ExitUsage, "loading the rules: %v", err)
	}
	var out []*analyzed
	var trees []*artifacts.Result
	usable, failing := 0, false
	// judged records an input's report, in the agent's JSON form.
	judged := func(a *analyzed, r *nodediagv1.Report) {
		a.report = r
		var err error
		if a.Report, err = report.MarshalJSON(r); err != nil {
			a.Error, a.report = err.Error(), nil
			return
		}
		usable++
		failing = failing || report.ExitCode(r) != 0
	}
	for _, p := range paths {
		if isArtifactTree(p) {
			res, err := artifacts.Analyze(ctx, p, e)
			if err != nil {
				out = append(out, &analyzed{Path: p, Kind: kindArtifacts, Error: err.Error()})
				continue
			}
			trees = append(trees, res)
			for _, m := range res.Machines {
				a := &analyzed{Path: m.Machine.Dir, Kind: kindArtifacts}
				out = append(out, a)
				if m.Err != nil {
					a.Error = m.Err.Error()
					continue
				}
				a.Problems, a.Skipped = m.Checked.Problems, m.Checked.Skipped
				judged(a, m.Checked.Report)
			}
			for _, c := range res.Clusters {
				if c.Incident != nil {
					usable++
					failing = failing || incidentHasErrors(c.Incident)
				}
			}
			if res.Build != nil {
				usable++
			}
			if len(res.Machines) == 0 && len(res.Clusters) == 0 && res.Build == nil {
				out = append(out, &analyzed{Path: p, Kind: kindArtifacts, Problems: res.Problems,
					Error: "an artifact tree without machine directories, resource dumps or a build log with a failure"})
			}
			continue
		}
		a := &analyzed{Path: p}
		out = append(out, a)
		l, err := reports.Read(ctx, p, reports.Options{Identities: ids})
		if err != nil {
			a.Error = err.Error()
			continue
		}
		a.Kind, a.Problems = l.Kind, l.Problems
		r, err := reports.Rejudge(e, l.Report)
		if err != nil {
			a.Error = err.Error()
			continue
		}
		judged(a, r)
	}
	var buf bytes.Buffer
	switch o.output {
	case "json":
		doc := map[string]any{"inputs": out}
		if len(trees) > 0 {
			doc["artifact_trees"] = treesJSON(trees)
		}
		b, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			return exitf(ExitUsage, "%v", err)
		}
		buf.Write(append(b, '\n'))
	case "text":
		for _, a := range out {
			if a.report == nil {
				fmt.Fprintf(&buf, "nodediag analyze: %s: %s\n\n", a.Path, oneLine(a.Error))
				continue
			}
			for _, p := range a.Problems {
				fmt.Fprintf(&buf, "nodediag analyze: %s: %s\n", a.Path, oneLine(p))
			}
			if err := report.WriteText(&buf, a.report); err != nil {
				return exitf(ExitUsage, "%v", err)
			}
			buf.WriteString("\n")
		}
	case "markdown":
		if err := writeTreesMarkdown(&buf, trees); err != nil {
			return exitf(ExitUsage, "%v", err)
		}
		writeAnalysisMarkdown(&buf, out)
	case "html":
		if err := writeAnalysisHTML(&buf, trees, out); err != nil {
			return exitf(ExitUsage, "%v", err)
		}
	}
	if _, err := w.Write(buf.Bytes()); err != nil {
		return err
	}
	switch {
	case usable == 0:
		return exitf(ExitUsage, "no input could be analysed")
	case failing:
		return &ExitError{Code: ExitFindings, Err: fmt.Errorf("a node has a finding at error or above")}
	}
	return nil
}

// writeAnalysisMarkdown: a table of the inputs, then each node's report.
func writeAnalysisMarkdown(w io.Writer, out []*analyzed) {
	fmt.Fprintf(w, "# nodediag analyze: %d input(s)\n\n", len(out))
	fmt.Fprintf(w, "| input | kind | node | verdict |\n|---|---|---|---|\n")
	for _, a := range out {
		node, verdict := "-", "not analysed: "+oneLine(a.Error)
		if a.report != nil {
			node = a.report.GetHost().GetNodeName()
			verdict = report.Summary(a.report)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", mdCell(a.Path), mdCell(a.Kind), mdCell(node), mdCell(verdict))
	}
	for _, a := range out {
		fmt.Fprintf(w, "\n## %s\n\n", a.Path)
		if a.report == nil {
			fmt.Fprintf(w, "Not analysed: %s\n", oneLine(a.Error))
			continue
		}
		for _, p := range a.Problems {
			fmt.Fprintf(w, "- input problem: %s\n", oneLine(p))
		}
		for _, s := range a.Skipped {
			fmt.Fprintf(w, "- %s\n", oneLine(s))
		}
		if len(a.Problems)+len(a.Skipped) > 0 {
			fmt.Fprintln(w)
		}
		var t bytes.Buffer
		_ = report.WriteText(&t, a.report)
		fmt.Fprintf(w, "```text\n%s```\n", strings.ReplaceAll(t.String(), "```", "'''"))
	}
}

// mdCell makes s safe in a Markdown table cell.
func mdCell(s string) string {
	s = strings.ReplaceAll(oneLine(s), "|", `\|`)
	if len(s) > 160 {
		s = s[:157] + "..."
	}
	return s
}
