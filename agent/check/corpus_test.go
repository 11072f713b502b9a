package check

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/nodediag/nodediag/agent/corpus"
	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/journal/journaltest"
	"github.com/nodediag/nodediag/agent/report"
	"github.com/nodediag/nodediag/agent/rules"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

var update = flag.Bool("update", false, "rewrite the corpus results and the README's score table")

const (
	corpusDir     = "../testdata/real"
	corpusGolden  = "testdata/corpus.golden"
	readmePath    = "../../README.md"
	scoreBegin    = "<!-- corpus-score: written by go test ./agent/check -run TestCorpus -update -->"
	scoreEnd      = "<!-- /corpus-score -->"
	outcomeNamed  = "named"    // the first finding: the expected category, quoting the evidence where it is
	outcomeCat    = "category" // the first finding's category, without the expected quote or place
	outcomeSurf   = "surfaced" // another finding (warning or above) quotes the evidence
	outcomeMissed = "missed"
	outcomeQuiet  = "quiet" // a negative: nothing at error or above (and the expected verdict)
	outcomeAlarm  = "false-alarm"
)

// scored is one case's outcome.
type scored struct {
	c       *corpus.Case
	outcome string
	// top is the first finding, as "ID category"; "-" without findings.
	top string
	// why says what is missing when the outcome is not named or quiet.
	why string
}

func (s scored) pass() bool { return s.outcome == outcomeNamed || s.outcome == outcomeQuiet }

// TestCorpus runs the agent on every real-failure case as on a copy of a
// host (its binaries' versions recorded, no network) and scores its first
// finding against the expectation written from the source. The per-case
// outcomes are a golden file, reviewed like code; the README's table is
// the summary. A case's expectation is never changed to make the agent
// pass (agent/testdata/real/README.md).
func TestCorpus(t *testing.T) {
	journaltest.NeedJournalRemote(t)
	cases, err := corpus.Load(corpusDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Skip("no cases")
	}
	results := make([]scored, len(cases))
	// Two at a time: the machine this runs on has two cores, and each case
	// starts systemd-journal-remote.
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for i, c := range cases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			results[i] = scoreCase(t, c)
		}()
	}
	wg.Wait()

	var golden bytes.Buffer
	fmt.Fprintf(&golden, "# The agent's outcome on each case of agent/testdata/real (go test ./agent/check -run TestCorpus -update).\n")
	fmt.Fprintf(&golden, "# case\toutcome\tfirst finding\twhat is missing\n")
	for _, r := range results {
		fmt.Fprintf(&golden, "%s\t%s\t%s\t%s\n", r.c.Name, r.outcome, r.top, r.why)
	}
	table := scoreTable(results)
	if *update {
		if err := os.WriteFile(corpusGolden, golden.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := writeReadmeTable(table); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(corpusGolden)
	if err != nil {
		t.Fatalf("%v (go test ./agent/check -run TestCorpus -update writes it)", err)
	}
	if diff := lineDiff(string(want), golden.String()); diff != "" {
		t.Errorf("the corpus outcomes changed (review, then -update):\n%s", diff)
	}
	readme, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), scoreBegin+"\n"+table+scoreEnd) {
		t.Errorf("README.md's corpus table is not the measured one (go test ./agent/check -run TestCorpus -update):\n%s", table)
	}
}

func scoreCase(t *testing.T, c *corpus.Case) scored {
	s := scored{c: c, top: "-"}
	b, err := c.Build(t.TempDir())
	if err != nil {
		t.Errorf("%s: %v", c.Name, err)
		s.outcome, s.why = outcomeMissed, "case not built"
		return s
	}
	h, err := host.New(b.Root, b.Runner)
	if err != nil {
		t.Errorf("%s: %v", c.Name, err)
		s.outcome, s.why = outcomeMissed, "host not opened"
		return s
	}
	h.Net = host.NoNetwork{}
	r, err := Host(context.Background(), h, Options{Context: rules.Context{Now: b.Now, ExpectVersion: b.ExpectVersion}, Root: "/"})
	if err != nil {
		t.Errorf("%s: %v", c.Name, err)
		s.outcome, s.why = outcomeMissed, "check failed"
		return s
	}
	fs := r.GetFindings()
	if len(fs) > 0 {
		s.top = fs[0].GetId() + " " + fs[0].GetCategory()
	}
	if c.Negative() {
		s.outcome = outcomeQuiet
		for _, f := range fs {
			if rules.SeverityAtLeast(f.GetSeverity(), rules.Error) {
				s.outcome, s.why = outcomeAlarm, f.GetSeverity()+" "+f.GetId()
				break
			}
		}
		if v := c.Expect.Verdict; v != "" && s.outcome == outcomeQuiet && verdictOf(r) != v {
			s.outcome, s.why = outcomeAlarm, "verdict "+orDash(verdictOf(r))+", not "+v
		}
		return s
	}
	e := c.Expect
	if len(fs) > 0 && fs[0].GetCategory() == e.Category {
		quoted, placed := quotes(fs[0], e.Evidence), pointsTo(fs[0], e.PointsTo)
		if quoted && placed {
			s.outcome = outcomeNamed
			return s
		}
		s.outcome = outcomeCat
		switch {
		case !quoted && !placed:
			s.why = "neither the evidence nor " + e.PointsTo + " quoted"
		case !quoted:
			s.why = "the evidence not quoted"
		default:
			s.why = e.PointsTo + " not quoted"
		}
		return s
	}
	s.outcome, s.why = outcomeMissed, "want "+e.Category
	for _, f := range fs {
		if rules.SeverityAtLeast(f.GetSeverity(), rules.Warning) && quotes(f, e.Evidence) {
			s.outcome = outcomeSurf
			s.why += "; quoted by " + f.GetId()
			break
		}
	}
	return s
}

// verdictOf is what the report says of the root as a whole.
func verdictOf(r *nodediagv1.Report) string { return r.GetVerdict() }

func quotes(f *nodediagv1.Finding, sub string) bool {
	for _, q := range f.GetEvidence() {
		if strings.Contains(q.GetExcerpt(), sub) {
			return true
		}
	}
	return false
}

// pointsTo says whether a quote of f comes from place. A binary's path is
// pointed to by what the binary answered too (exec:<path> --version): a
// case cannot name that source (points_to is a host path or a journal), and
// the evidence is the binary's.
func pointsTo(f *nodediagv1.Finding, place string) bool {
	for _, q := range f.GetEvidence() {
		if src := q.GetSource(); src == place || strings.HasPrefix(src, "exec:"+place+" ") {
			return true
		}
	}
	return false
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// scoreTable is the README's summary: the score, then a row per expected
// category.
func scoreTable(rs []scored) string {
	type row struct{ cases, named, cat, surf, missed, quiet, alarm int }
	rows := map[string]*row{}
	var total, pass, pos, named, neg, quiet int
	for _, r := range rs {
		k := r.c.Expect.Category
		if rows[k] == nil {
			rows[k] = &row{}
		}
		w := rows[k]
		w.cases++
		total++
		if r.pass() {
			pass++
		}
		switch r.outcome {
		case outcomeNamed:
			w.named++
		case outcomeCat:
			w.cat++
		case outcomeSurf:
			w.surf++
		case outcomeMissed:
			w.missed++
		case outcomeQuiet:
			w.quiet++
		case outcomeAlarm:
			w.alarm++
		}
		if r.c.Negative() {
			neg++
			if r.pass() {
				quiet++
			}
		} else {
			pos++
			if r.pass() {
				named++
			}
		}
	}
	cats := make([]string, 0, len(rows))
	for k := range rows {
		cats = append(cats, k)
	}
	sort.Slice(cats, func(i, j int) bool {
		if (cats[i] == corpus.None) != (cats[j] == corpus.None) {
			return cats[j] == corpus.None
		}
		return cats[i] < cats[j]
	})
	var b strings.Builder
	fmt.Fprintf(&b, "**%d of %d** cases right (%.0f%%): %d of %d failures named with their evidence, %d of %d healthy nodes left quiet.\n\n",
		pass, total, 100*float64(pass)/float64(max(total, 1)), named, pos, quiet, neg)
	b.WriteString("| expected category | cases | named | category only | surfaced | missed |\n|---|---|---|---|---|---|\n")
	for _, k := range cats {
		w := rows[k]
		if k == corpus.None {
			fmt.Fprintf(&b, "| none (healthy) | %d | %d quiet | | | %d false alarms |\n", w.cases, w.quiet, w.alarm)
			continue
		}
		fmt.Fprintf(&b, "| `%s` | %d | %d | %d | %d | %d |\n", k, w.cases, w.named, w.cat, w.surf, w.missed)
	}
	return b.String()
}

func writeReadmeTable(table string) error {
	b, err := os.ReadFile(readmePath)
	if err != nil {
		return err
	}
	s := string(b)
	i, j := strings.Index(s, scoreBegin), strings.Index(s, scoreEnd)
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %q ... %q section", readmePath, scoreBegin, scoreEnd)
	}
	s = s[:i] + scoreBegin + "\n" + table + s[j:]
	return os.WriteFile(readmePath, []byte(s), 0o644)
}

// lineDiff lists the lines only in want (-) and only in got (+).
func lineDiff(want, got string) string {
	w, g := map[string]bool{}, map[string]bool{}
	for _, l := range strings.Split(want, "\n") {
		w[l] = true
	}
	for _, l := range strings.Split(got, "\n") {
		g[l] = true
	}
	var out []string
	for _, l := range strings.Split(want, "\n") {
		if !g[l] {
			out = append(out, "- "+l)
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if !w[l] {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}

// TestCorpusShow prints the agent's text report of the cases named in
// $CORPUS_SHOW (comma-separated), for working on a rule: it asserts nothing
// and is skipped without the variable.
func TestCorpusShow(t *testing.T) {
	names := os.Getenv("CORPUS_SHOW")
	if names == "" {
		t.Skip("set CORPUS_SHOW=case[,case...]")
	}
	for _, name := range strings.Split(names, ",") {
		c, err := corpus.LoadFile(corpusDir + "/" + name + ".yaml")
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.Build(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		h, err := host.New(b.Root, b.Runner)
		if err != nil {
			t.Fatal(err)
		}
		h.Net = host.NoNetwork{}
		r, err := Host(context.Background(), h, Options{Context: rules.Context{Now: b.Now, ExpectVersion: b.ExpectVersion}, Root: "/"})
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := report.WriteText(&out, r); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: expect %s %q at %s\n%s", name, c.Expect.Category, c.Expect.Evidence, c.Expect.PointsTo, out.String())
	}
}

// TestCorpusBrief prints, for the cases of $CORPUS_BRIEF ("fail" for every
// case the golden file does not count as right), the expectation and the
// first findings with the sources they quote: a page to read when working
// on the rules. It asserts nothing and is skipped without the variable.
func TestCorpusBrief(t *testing.T) {
	sel := os.Getenv("CORPUS_BRIEF")
	if sel == "" {
		t.Skip("set CORPUS_BRIEF=fail or case[,case...]")
	}
	want := map[string]bool{}
	if sel == "fail" {
		b, _ := os.ReadFile(corpusGolden)
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Split(l, "\t")
			if len(f) > 1 && f[1] != outcomeNamed && f[1] != outcomeQuiet && !strings.HasPrefix(l, "#") {
				want[f[0]] = true
			}
		}
	} else {
		for _, n := range strings.Split(sel, ",") {
			want[n] = true
		}
	}
	cases, _ := corpus.Load(corpusDir)
	var out strings.Builder
	for _, c := range cases {
		if !want[c.Name] {
			continue
		}
		b, err := c.Build(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		h, _ := host.New(b.Root, b.Runner)
		h.Net = host.NoNetwork{}
		r, err := Host(context.Background(), h, Options{Context: rules.Context{Now: b.Now, ExpectVersion: b.ExpectVersion}, Root: "/"})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&out, "## %s\n   want %s %q @ %s\n", c.Name, c.Expect.Category, c.Expect.Evidence, c.Expect.PointsTo)
		for i, f := range r.GetFindings() {
			if i == 4 {
				break
			}
			var srcs []string
			for _, q := range f.GetEvidence() {
				srcs = append(srcs, q.GetSource())
			}
			fmt.Fprintf(&out, "   %d %s %s %s: %s [%s]\n", i+1, f.GetSeverity(), f.GetId(), f.GetCategory(), clipTo(f.GetTitle(), 90), strings.Join(srcs, " "))
		}
	}
	t.Log("\n" + out.String())
}

func clipTo(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
