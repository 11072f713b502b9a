package incident

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"strings"
	"time"
)

// Formats of RenderTo.
const (
	FormatMarkdown = "markdown"
	FormatJSON     = "json"
	FormatHTML     = "html"
)

// RenderTo writes inc in format (markdown when empty).
func RenderTo(w io.Writer, inc *Incident, format string) error {
	switch format {
	case "", FormatMarkdown, "md":
		return RenderMarkdown(w, inc)
	case FormatJSON:
		return RenderJSON(w, inc)
	case FormatHTML:
		return RenderHTML(w, inc)
	}
	return fmt.Errorf("unknown report format %q (markdown, json, html)", format)
}

// safe returns a redacted copy of inc: the renderers never write a string
// that did not pass through agent/redact, even for an Incident built by
// hand, and never change the caller's value.
func safe(inc *Incident) (*Incident, error) {
	b, err := json.Marshal(inc)
	if err != nil {
		return nil, fmt.Errorf("copying the incident: %w", err)
	}
	var c Incident
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("copying the incident: %w", err)
	}
	redactIncident(&c)
	return &c, nil
}

// RenderJSON writes the incident as indented JSON with snake_case field
// names; the order of everything is the report's, so the output is stable.
func RenderJSON(w io.Writer, inc *Incident) error {
	c, err := safe(inc)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("rendering JSON: %w", err)
	}
	b = append(b, '\n')
	_, err = w.Write(b)
	return err
}

// RenderMarkdown writes the incident report as Markdown.
func RenderMarkdown(w io.Writer, inc *Incident) error {
	c, err := safe(inc)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("# %s\n\n", mdInline(c.Title))
	p("Generated %s by nodediag for cluster `%s`.\n\n", c.GeneratedAt.Format(time.RFC3339), c.Cluster)

	p("## Symptom and impact\n\n")
	for _, s := range c.Symptoms {
		p("- %s\n", mdInline(s))
	}
	p("\n**Impact:** %s\n\n", mdInline(c.Impact))

	p("## Root cause\n\n")
	if c.RootCause == nil {
		p("None found.")
		if len(c.Gaps) > 0 {
			p(" Some evidence could not be read: see Gaps; that is not a negative result.")
		}
		p("\n\n")
	} else {
		p("**%s**\n\n", mdInline(c.RootCause.Summary))
		p("- Failure domain: **%s**\n", c.FailureDomain)
		p("- Confidence: **%s** — %s\n", c.Confidence, mdInline(c.ConfidenceReason))
		p("- Finding: `%s`\n\n", c.RootCause.Finding)
		p("Evidence:\n\n")
		mdEvidence(&b, c.RootCause.Evidence)
	}

	p("## Remediation\n\n")
	if len(c.Remediation) == 0 {
		p("Nothing to do.\n\n")
	}
	for i, r := range c.Remediation {
		p("%d. %s\n", i+1, mdInline(r))
	}
	if len(c.Remediation) > 0 {
		p("\n")
	}

	p("## Escalation\n\n")
	if len(c.Escalation) == 0 {
		p("Not needed: the cause is in the cluster's own configuration or nodes.\n\n")
	} else {
		for _, e := range c.Escalation {
			p("- %s\n", mdInline(e))
		}
		p("\n")
	}

	p("## Findings\n\n")
	if len(c.Findings) == 0 {
		p("None.\n\n")
	}
	for i, f := range c.Findings {
		indent := ""
		mark := fmt.Sprintf("%d.", i+1)
		if f.Consequence {
			mark = "↳"
			indent = "> "
		}
		p("### %s [%s] %s\n\n", mark, f.Severity, mdInline(f.Title))
		line := func(format string, a ...any) { p(indent+format, a...) }
		line("- `%s` · %s · %s · domain: %s\n", f.ID, f.Category, mdInline(f.Subject), f.Domain)
		line("- Confidence: %s — %s\n", f.Confidence, mdInline(f.ConfidenceReason))
		if len(f.ExplainedBy) > 0 {
			line("- Consequence of: %s\n", codeList(f.ExplainedBy))
		}
		if len(f.Explains) > 0 {
			line("- Explains: %s\n", codeList(f.Explains))
		}
		if f.NodeCause != nil {
			n := f.NodeCause
			line("- Node cause: node `%s`: `%s` (%s, %s) %s", n.Node, n.ID, n.Category, n.Severity, mdInline(n.Title))
			if len(n.Consequences) > 0 {
				p("; on the node it explains %s", codeList(n.Consequences))
			}
			p("\n")
		}
		if f.Remediation != "" {
			line("- Remediation: %s\n", mdInline(f.Remediation))
		}
		if f.MissingEvidence != "" {
			line("- Missing evidence: %s\n", mdInline(f.MissingEvidence))
		}
		if f.Escalation != "" {
			line("- Escalation: %s\n", mdInline(f.Escalation))
		}
		line("- Refuted by: %s\n\n", mdInline(f.RefutedBy))
		switch {
		case c.RootCause != nil && f.Key == c.RootCause.Finding:
			p("Evidence: see Root cause above.\n\n")
		case !f.Consequence:
			mdEvidence(&b, f.Evidence)
		}
	}

	p("## Dependency chain\n\n")
	var links []string
	for _, l := range c.Chain {
		s := l.Name + " (" + l.State + ")"
		if l.State == "broken" {
			s = "**" + s + "**"
		}
		links = append(links, s)
	}
	p("%s\n\n", strings.Join(links, " → "))
	if c.FirstBrokenLink != "" {
		p("First broken link: **%s**.\n\n", c.FirstBrokenLink)
	} else if len(c.Findings) > 0 {
		p("No link before Machine Running is known to be broken: the cause is on the nodes or the control plane (see Root cause).\n\n")
	}

	p("## Machines\n\n")
	p("| Machine | Role | Phase | Version | Node | Matched by | Top finding |\n")
	p("|---|---|---|---|---|---|---|\n")
	for _, m := range c.Machines {
		top := m.TopFinding
		if top == "" {
			top = "no report"
		}
		if m.Severity != "" {
			top = "[" + m.Severity + "] " + top
		}
		p("| %s | %s | %s | %s | %s | %s | %s |\n", mdCell(m.Machine), m.Role, mdCell(m.Phase), mdCell(m.Version), mdCell(m.Node), mdCell(m.MatchedBy), mdCell(top))
	}
	p("\n")
	if len(c.UnmatchedReports) > 0 {
		p("Reports that match no Machine of the cluster: %s.\n\n", codeList(c.UnmatchedReports))
	}
	if len(c.Rejudged) > 0 {
		p("## Re-judged with cluster context\n\n")
		for _, r := range c.Rejudged {
			p("- node `%s` (%s): top finding %s → %s", r.Node, rejudgedBy(r), r.Before, r.After)
			if len(r.Added) > 0 {
				p("; added: %s", mdInline(strings.Join(r.Added, "; ")))
			}
			if len(r.Removed) > 0 {
				p("; removed: %s", mdInline(strings.Join(r.Removed, "; ")))
			}
			p("\n")
		}
		p("\n")
	}
	if len(c.Gaps) > 0 {
		p("## Gaps\n\n")
		for _, g := range c.Gaps {
			p("- %s\n", mdInline(g.Sentence))
		}
		p("\n")
	}
	_, err = w.Write(b.Bytes())
	return err
}

// mdEvidence writes quotes as fenced blocks (a fence longer than any run of
// backticks in the text, so a quote cannot close it).
func mdEvidence(b *bytes.Buffer, ev []Evidence) {
	for _, e := range ev {
		head := e.Source
		if e.Line > 0 {
			head += fmt.Sprintf(":%d", e.Line)
		}
		if e.Time != nil {
			head += " @ " + e.Time.Format(time.RFC3339)
		}
		fence := "```"
		for strings.Contains(e.Excerpt, fence) {
			fence += "`"
		}
		fmt.Fprintf(b, "%s\n", mdInline(head))
		fmt.Fprintf(b, "%stext\n%s\n%s\n", fence, e.Excerpt, fence)
		if e.More != "" {
			fmt.Fprintf(b, "(%s)\n", mdInline(e.More))
		}
		b.WriteString("\n")
	}
}

// mdInline keeps text from a node or an object from being read as Markdown
// structure or HTML: one line, HTML special characters escaped.
func mdInline(s string) string {
	s = strings.ReplaceAll(s, "\r", " ")
	s = strings.ReplaceAll(s, "\n", " ")
	return mdEscaper.Replace(s)
}

// mdEscaper neutralises HTML in Markdown text (renderers pass raw HTML
// through); quotes and apostrophes stay readable.
var mdEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

func mdCell(s string) string { return strings.ReplaceAll(mdInline(s), "|", `\|`) }

func codeList(ks []string) string {
	var out []string
	for _, k := range ks {
		out = append(out, "`"+strings.ReplaceAll(k, "`", "'")+"`")
	}
	return strings.Join(out, ", ")
}

//go:embed report.html.tmpl
var htmlFS embed.FS

var htmlTmpl = template.Must(template.New("report.html.tmpl").Funcs(template.FuncMap{
	"rfc3339": func(t time.Time) string { return t.Format(time.RFC3339) },
	"tptr": func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return t.Format(time.RFC3339)
	},
	"inc": func(i int) int { return i + 1 },
}).ParseFS(htmlFS, "report.html.tmpl"))

// RenderHTML writes the incident report as one self-contained HTML page
// (inline style, no script, no external asset); html/template escapes every
// value.
func RenderHTML(w io.Writer, inc *Incident) error {
	c, err := safe(inc)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := htmlTmpl.Execute(&b, c); err != nil {
		return fmt.Errorf("rendering HTML: %w", err)
	}
	_, err = w.Write(b.Bytes())
	return err
}

// rejudgedBy says what the node was judged again with: its Machine, the
// role and the version the Machine expects.
func rejudgedBy(r Rejudgement) string {
	parts := []string{"Machine `" + r.Machine + "`"}
	if r.Role != "" {
		parts = append(parts, r.Role)
	}
	if r.ExpectVersion != "" {
		parts = append(parts, "expects "+r.ExpectVersion)
	}
	return strings.Join(parts, ", ")
}
