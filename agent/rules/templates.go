package rules

import (
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/nodediag/nodediag/agent/logline"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// The matcher's second half: the error lines that no problem signature
// claims, grouped by template, so that an error nobody wrote a signature
// for is still seen when it repeats (a failure no rule knows must not read
// as a healthy node). The grouping is a small Drain (He et al., "Drain: An
// Online Log Parsing Approach with Fixed Depth Tree", ICWS 2017): messages
// of the same length and first word fall in one group; a message joins the
// template it shares the most words with, when that is at least
// templateSimilarity of them, and the words where they differ become "<*>".

// A Template is a family of unclaimed error lines of one log.
type Template struct {
	Src *nodediagv1.LogExcerpt
	// Pattern is the template: the message's words, "<*>" where its lines
	// differ or where a word is a value (a number, an address, a path, an ID).
	Pattern string
	// Lines are the template's lines, in log order.
	Lines []*nodediagv1.LogLine
	words []string
}

// templateSimilarity is the share of words two messages must have in
// common to be one template (Drain's similarity threshold).
const templateSimilarity = 0.6

// mineTemplates groups the unclaimed error lines of every log.
func mineTemplates(in *Input, m *matched) []*Template {
	var out []*Template
	for _, src := range in.Logs() {
		groups := map[string][]*Template{}
		for _, l := range src.GetLines() {
			info := m.byLine[l]
			if info == nil || info.claim != nil || !errorLine(src, l, info) {
				continue
			}
			words := templateWords(logline.Parse(l.GetText(), time.Time{}).Message)
			if len(words) == 0 {
				continue
			}
			key := string(rune(len(words))) + "\x00" + words[0]
			var best *Template
			bestSim := 0.0
			for _, t := range groups[key] {
				if s := similarity(t.words, words); s > bestSim {
					best, bestSim = t, s
				}
			}
			if best == nil || bestSim < templateSimilarity {
				best = &Template{Src: src, words: words}
				groups[key] = append(groups[key], best)
				out = append(out, best)
			} else {
				for i, w := range words {
					if best.words[i] != w {
						best.words[i] = "<*>"
					}
				}
			}
			best.Lines = append(best.Lines, l)
		}
	}
	for _, t := range out {
		t.Pattern = strings.Join(t.words, " ")
	}
	return out
}

// errorLine says whether a line states an error: its own level (klog E or
// F, logrus error and above, cloud-init's ERROR), or, for logs whose lines
// carry no level (the kernel, a script's output), a word of failure. The
// boilerplate around an error (kubeadm's "To see the stack trace of this
// error ...") is not one.
func errorLine(src *nodediagv1.LogExcerpt, l *nodediagv1.LogLine, info *lineInfo) bool {
	if !info.notable || hasFact(info, "boilerplate") {
		return false
	}
	switch logline.Parse(l.GetText(), time.Time{}).Level {
	case logline.LevelError, logline.LevelFatal, logline.LevelPanic:
		return true
	case "":
		switch lineKind(src, l) {
		// containerd writes every line through logrus, with a level: a line
		// without one is Go's own output as it dies ("panic: ...",
		// "fatal error: ...").
		case "kernel", "cloud-init-output", "kubeadm", "pod", "containerd":
			return logline.Failure(l.GetText())
		}
	}
	return false
}

// warnedFailure says whether a line of cloud-init is a warning that
// reports a failure (see lineInfo.warnedFailure).
func warnedFailure(src *nodediagv1.LogExcerpt, l *nodediagv1.LogLine, info *lineInfo) bool {
	switch lineKind(src, l) {
	case "cloud-init", "cloud-init-output":
	default:
		return false
	}
	if c := info.claim; c != nil && catalog[c.Sig.ID] != nil && catalog[c.Sig.ID].Symptom {
		// cloud-init's own report that a module or script failed
		// ("Failed to run module scripts_user"): not the step's words.
		return false
	}
	return info.notable && !hasFact(info, "boilerplate") &&
		logline.Parse(l.GetText(), time.Time{}).Level == logline.LevelWarning && logline.Failure(l.GetText())
}

func hasFact(info *lineInfo, name string) bool {
	for _, f := range info.facts {
		if f.Sig.Fact == name {
			return true
		}
	}
	return false
}

// templateWords splits a message into words and masks the values.
func templateWords(msg string) []string {
	fields := strings.Fields(msg)
	if len(fields) > 40 {
		fields = fields[:40]
	}
	out := make([]string, len(fields))
	for i, f := range fields {
		if variableWord(f) {
			out[i] = "<*>"
		} else {
			out[i] = f
		}
	}
	return out
}

// variableWord says whether a word is a value rather than part of the
// message's wording: it holds a digit (numbers, times, addresses, versions,
// IDs), or is a path.
func variableWord(w string) bool {
	if strings.ContainsAny(w, "/\\") && len(w) > 1 {
		return true
	}
	for _, r := range w {
		if unicode.IsDigit(r) {
			return true
		}
	}
	return false
}

func similarity(a, b []string) float64 {
	if len(a) != len(b) || len(a) == 0 {
		return 0
	}
	same := 0
	for i := range a {
		if a[i] == b[i] || a[i] == "<*>" {
			same++
		}
	}
	return float64(same) / float64(len(a))
}

// persistingTemplates are the templates whose lines form a run of at least
// d that goes on to the end of their log (the persist rule of the
// signatures), most lines first.
func persistingTemplates(in *Input, d time.Duration) []*Template {
	d = in.persistFor(d)
	var out []*Template
	ends := map[*nodediagv1.LogExcerpt]time.Time{} // each source's end once
	for _, t := range in.m().templates {
		var timed []time.Time
		for _, l := range t.Lines {
			if l.GetTime() != nil && in.InWindow(l.GetTime()) {
				timed = append(timed, l.GetTime().AsTime())
			}
		}
		if len(timed) < 3 {
			continue
		}
		sort.Slice(timed, func(i, j int) bool { return timed[i].Before(timed[j]) })
		end, ok := ends[t.Src]
		if !ok {
			end = sourceEnd(t.Src)
			ends[t.Src] = end
		}
		start := 0
		for i := 1; i <= len(timed); i++ {
			if i < len(timed) && timed[i].Sub(timed[i-1]) <= d {
				continue
			}
			if timed[i-1].Sub(timed[start]) >= d && !timed[i-1].Before(end.Add(-d)) {
				out = append(out, t)
				break
			}
			start = i
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i].Lines) > len(out[j].Lines) })
	return out
}
