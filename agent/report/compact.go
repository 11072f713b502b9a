package report

import (
	"fmt"
	"io"
	"sort"
	"strings"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// MaxCompact is the size limit of compact output: `az vm run-command` keeps
// only the last 4096 bytes of a script's output.
const MaxCompact = 4096

// Per-line caps of compact output, so that one huge excerpt cannot crowd out
// the remediation and the summary.
const (
	maxSummaryLine = 700
	maxLine        = 600
)

// WriteCompact writes at most MaxCompact bytes: the top cause, its evidence,
// its fix, where to look, the other findings one per line as room allows, and
// the SUMMARY line last.
func WriteCompact(w io.Writer, r *nodediagv1.Report) error {
	_, err := io.WriteString(w, Compact(r))
	return err
}

// Compact renders the compact text; len(Compact(r)) <= MaxCompact always,
// and no line carries a terminal control (terminalSafe).
//
// Lines are chosen by priority (the top cause's title, its first evidence,
// its fix, where to look, its other evidence, the other findings, the gaps)
// and printed in reading order, so a small budget drops the least useful
// lines, never the fix or the summary.
func Compact(r *nodediagv1.Report) string {
	summary := clipBytes(oneLine(Summary(r)), maxSummaryLine) + "\n" // Summary is terminal-safe
	type line struct {
		order, prio int
		text        string
	}
	var cand []line
	put := func(order, prio int, s string) {
		cand = append(cand, line{order, prio, clipBytes(terminalSafe(oneLine(s)), maxLine) + "\n"})
	}
	fs := r.GetFindings()
	if len(fs) > 0 {
		top := fs[0]
		put(0, 0, fmt.Sprintf("nodediag: %s %s [%s]: %s", strings.ToUpper(top.GetSeverity()), top.GetId(), top.GetCategory(), top.GetTitle()))
		for i, q := range top.GetEvidence() {
			prio := 4
			if i == 0 {
				prio = 1
			}
			put(1+i, prio, "evidence: "+quoteHead(q)+": "+q.GetExcerpt())
		}
		put(1000, 2, "fix: "+top.GetRemediation())
		if look := whereToLook(top); look != "" {
			put(1001, 3, "look: "+look)
		}
		for i, f := range fs[1:] {
			tag := f.GetSeverity()
			if f.GetConsequence() {
				tag += ", consequence"
			}
			put(2000+i, 10+i, fmt.Sprintf("also: %s (%s): %s", f.GetId(), tag, f.GetTitle()))
		}
	}
	if gaps := r.GetGaps(); len(gaps) > 0 {
		put(9000, 5, fmt.Sprintf("not seen: %d source(s), first: %s", len(gaps), gaps[0]))
	}
	sort.SliceStable(cand, func(i, j int) bool { return cand[i].prio < cand[j].prio })
	budget := MaxCompact - len(summary)
	var chosen []line
	for _, c := range cand {
		if len(c.text) <= budget {
			chosen = append(chosen, c)
			budget -= len(c.text)
		}
	}
	sort.Slice(chosen, func(i, j int) bool { return chosen[i].order < chosen[j].order })
	var b strings.Builder
	for _, c := range chosen {
		b.WriteString(c.text)
	}
	b.WriteString(summary)
	return b.String()
}

// whereToLook lists the files and commands the top finding quotes.
func whereToLook(f *nodediagv1.Finding) string {
	seen := map[string]bool{}
	var out []string
	for _, q := range f.GetEvidence() {
		s := q.GetSource()
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// clipBytes cuts s to at most max bytes on a rune boundary, marking the cut.
func clipBytes(s string, max int) string {
	if len(s) <= max {
		return s
	}
	const mark = "…"
	cut := max - len(mark)
	for cut > 0 && (s[cut]&0xC0) == 0x80 {
		cut--
	}
	return s[:cut] + mark
}
