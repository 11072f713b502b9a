package rules

import (
	"strings"

	"github.com/nodediag/nodediag/agent/redact"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// MaxExcerpt caps a quoted excerpt: a line long enough to prove the point,
// short enough that a report stays readable.
const MaxExcerpt = 1000

// clip redacts s, then cuts it to MaxExcerpt bytes on a rune boundary.
// Redaction comes first: a secret cut in two by the clip (a bootstrap token
// shortened below its 16 characters, a certificate key below 32) no longer
// matches the patterns and would leak in part; report.Build's redaction of
// the whole report stays the backstop.
func clip(s string) string {
	s = redact.String(s)
	if len(s) <= MaxExcerpt {
		return s
	}
	// Cut on a rune boundary.
	cut := MaxExcerpt
	for cut > 0 && (s[cut]&0xC0) == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}

// clipAround is clip for a line whose proof is the span re matches: a line
// over MaxExcerpt keeps the match, a quarter of the excerpt before it and
// what follows, not the line's start ("...: not found" at the end of a long
// kubelet error is what proves it). Without a match it is clip.
func clipAround(s string, re interface{ FindStringIndex(string) []int }) string {
	s = redact.String(s)
	if len(s) <= MaxExcerpt {
		return s
	}
	loc := re.FindStringIndex(s)
	if loc == nil || loc[0] < MaxExcerpt/4 {
		return clip(s)
	}
	start := loc[0] - MaxExcerpt/4
	end := start + MaxExcerpt
	if end > len(s) {
		end = len(s)
		start = end - MaxExcerpt
	}
	for start < len(s) && (s[start]&0xC0) == 0x80 {
		start++
	}
	for end > start && end < len(s) && (s[end]&0xC0) == 0x80 {
		end--
	}
	out := "…" + s[start:end]
	if end < len(s) {
		out += "…"
	}
	return out
}

// QuoteLine quotes a line of a file.
func QuoteLine(sl *nodediagv1.SourceLine) *nodediagv1.Quote {
	if sl == nil || sl.Text == "" {
		return nil
	}
	return &nodediagv1.Quote{Source: sl.Path, Line: sl.Line, Excerpt: clip(sl.Text)}
}

// QuoteExec quotes what a binary answered when asked its version: the line
// that carries the version (the gitVersion line of kubectl's JSON, not its
// "{"), else the first line of the answer or of the error.
func QuoteExec(b *nodediagv1.Binary) *nodediagv1.Quote {
	if b == nil {
		return nil
	}
	out := firstLine(b.Output)
	if raw := strings.TrimPrefix(b.GetVersion(), "v"); raw != "" {
		for _, l := range strings.Split(b.GetOutput(), "\n") {
			if strings.Contains(l, raw) {
				out = strings.TrimSpace(l)
				break
			}
		}
	}
	if out == "" {
		out = firstLine(b.Error)
	}
	source := "exec:" + b.Command
	switch b.Method {
	case "buildinfo":
		source = "buildinfo:" + b.Path
	case "dpkg":
		// The package database's lines about the binary, nothing run.
		source = "dpkg:" + b.Path
	}
	return &nodediagv1.Quote{Source: source, Excerpt: clip(out)}
}

// QuoteLog quotes a log line.
func QuoteLog(src *nodediagv1.LogExcerpt, l *nodediagv1.LogLine) *nodediagv1.Quote {
	if l == nil {
		return nil
	}
	q := &nodediagv1.Quote{Source: src.GetSource(), Line: l.N, Excerpt: clip(strings.TrimRight(l.Text, "\r"))}
	// A time inferred from an earlier line is good enough to place the line
	// in the window, not to be quoted as when it was written.
	if !l.TimeInferred {
		q.Time = l.Time
	}
	return q
}

// QuoteText quotes a fact that has no line of its own (a file's absence, a
// computed value), naming where it was observed.
func QuoteText(source, text string) *nodediagv1.Quote {
	return &nodediagv1.Quote{Source: source, Excerpt: clip(text)}
}
