package report

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nodediag/nodediag/agent/rules"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// WriteText writes the report for a person: each finding with its quoted
// evidence, what it explains and its fix; then gaps and probes; then one
// SUMMARY line, last. Every string of the report is made terminal-safe
// (terminalSafe): the report quotes the node, and the node must not drive
// the operator's terminal.
func WriteText(w io.Writer, r *nodediagv1.Report) error {
	bw := bufio.NewWriter(w)
	h := r.GetHost()
	fmt.Fprintf(bw, "nodediag-agent %s: node %s", terminalSafe(r.GetAgent().GetVersion()), terminalSafe(orDash(h.GetNodeName())))
	if h.GetOs() != "" {
		fmt.Fprintf(bw, " (%s", terminalSafe(h.GetOs()))
		if h.GetKernel() != "" {
			fmt.Fprintf(bw, ", kernel %s", terminalSafe(h.GetKernel()))
		}
		fmt.Fprint(bw, ")")
	}
	fmt.Fprintf(bw, ", root %s\n", terminalSafe(h.GetRoot()))
	if win := r.GetWindow(); win != nil {
		fmt.Fprintf(bw, "window %s .. %s\n", fmtTS(win.GetSince(), "start of evidence"), fmtTS(win.GetUntil(), "now"))
	}
	if v := r.GetVerdict(); v != "" {
		fmt.Fprintf(bw, "verdict: %s: %s\n", terminalSafe(v), terminalSafe(oneLine(r.GetVerdictReason())))
	}
	for i, f := range r.GetFindings() {
		fmt.Fprintln(bw)
		writeFinding(bw, i+1, f)
	}
	if len(r.GetGaps()) > 0 {
		fmt.Fprintln(bw, "\nnot seen (missing evidence is not a negative result):")
		for _, g := range r.GetGaps() {
			fmt.Fprintf(bw, "  - %s\n", terminalSafe(oneLine(g)))
		}
	}
	fmt.Fprintf(bw, "\nprobes: %s\n", probeLine(r))
	fmt.Fprintln(bw, Summary(r))
	return bw.Flush()
}

func writeFinding(w io.Writer, n int, f *nodediagv1.Finding) {
	tag := f.GetCategory() + ", confidence " + f.GetConfidence()
	if f.GetConsequence() {
		tag += ", consequence"
	}
	fmt.Fprintf(w, "%d. %s %s [%s]\n", n, terminalSafe(strings.ToUpper(f.GetSeverity())), terminalSafe(f.GetId()), terminalSafe(tag))
	fmt.Fprintf(w, "   %s\n", terminalSafe(f.GetTitle()))
	if len(f.GetEvidence()) > 0 {
		fmt.Fprintln(w, "   evidence:")
		for _, q := range f.GetEvidence() {
			fmt.Fprintf(w, "     %s\n", terminalSafe(quoteHead(q)))
			// The excerpt's own newlines become the renderer's: each line
			// is escaped on its own, indented under the quote's head.
			for _, l := range strings.Split(strings.TrimRight(q.GetExcerpt(), "\n"), "\n") {
				fmt.Fprintf(w, "       %s\n", terminalSafe(l))
			}
		}
	}
	if len(f.GetExplains()) > 0 {
		fmt.Fprintf(w, "   explains: %s\n", terminalSafe(strings.Join(f.GetExplains(), ", ")))
	}
	if f.GetRemediation() != "" {
		fmt.Fprintf(w, "   fix: %s\n", terminalSafe(f.GetRemediation()))
	}
	if f.GetRefutedBy() != "" {
		fmt.Fprintf(w, "   refuted by: %s\n", terminalSafe(f.GetRefutedBy()))
	}
}

// quoteHead names where a quote comes from: "path:line (time)".
func quoteHead(q *nodediagv1.Quote) string {
	s := q.GetSource()
	if q.GetLine() > 0 {
		s += fmt.Sprintf(":%d", q.GetLine())
	}
	if q.GetTime() != nil {
		s += " (" + q.GetTime().AsTime().UTC().Format(time.RFC3339) + ")"
	}
	return s
}

func probeLine(r *nodediagv1.Report) string {
	var parts []string
	for _, p := range r.GetProbes() {
		s := p.GetName() + " " + p.GetStatus()
		parts = append(parts, s)
	}
	return terminalSafe(strings.Join(parts, ", "))
}

// Summary is the last line of text and compact output (terminal-safe):
// "SUMMARY <worst severity> <node> <top ID>: <top title> (<tally>)", or
// "SUMMARY ok <node>: ..." when nothing is at error or above.
func Summary(r *nodediagv1.Report) string {
	counts := map[string]int{}
	for _, f := range r.GetFindings() {
		counts[f.GetSeverity()]++
	}
	var tally []string
	for _, s := range []string{rules.Critical, rules.Error, rules.Warning, rules.Info} {
		if n := counts[s]; n > 0 {
			tally = append(tally, fmt.Sprintf("%d %s", n, s))
		}
	}
	node := r.GetHost().GetNodeName()
	switch v := r.GetVerdict(); {
	case v == rules.VerdictIncomplete && ExitCode(r) == 1:
		// Below: the error found, then what was not read.
	case v != "":
		msg := "SUMMARY " + v + " " + orDash(node) + ": " + oneLine(r.GetVerdictReason())
		if len(tally) > 0 {
			msg += " (" + strings.Join(tally, ", ") + ")"
		}
		return terminalSafe(msg)
	}
	if ExitCode(r) == 0 {
		msg := "SUMMARY ok " + orDash(node) + ": no finding at error or above"
		if len(tally) > 0 {
			msg += " (" + strings.Join(tally, ", ") + ")"
		}
		if fs := r.GetFindings(); len(fs) > 0 && rules.SeverityAtLeast(fs[0].GetSeverity(), rules.Warning) {
			msg += "; top: " + fs[0].GetId() + ": " + oneLine(fs[0].GetTitle())
		}
		return terminalSafe(msg)
	}
	// The first word is the worst severity (what scripts grep for); the
	// finding named is the most likely root cause, whatever its severity.
	worst := rules.Info
	for _, f := range r.GetFindings() {
		if rules.SeverityAtLeast(f.GetSeverity(), worst) {
			worst = f.GetSeverity()
		}
	}
	top := r.GetFindings()[0]
	msg := fmt.Sprintf("SUMMARY %s %s %s: %s (%s)", worst, orDash(node), top.GetId(), oneLine(top.GetTitle()), strings.Join(tally, ", "))
	if r.GetVerdict() == rules.VerdictIncomplete {
		msg += "; incomplete: " + oneLine(r.GetVerdictReason())
	}
	return terminalSafe(msg)
}

func fmtTS(t *timestamppb.Timestamp, zero string) string {
	if t == nil {
		return zero
	}
	return t.AsTime().UTC().Format(time.RFC3339)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
