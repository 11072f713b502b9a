package rules

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nodediag/nodediag/agent/logline"
	"github.com/nodediag/nodediag/agent/redact"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// A Signature recognises log lines that prove a problem. Signatures are data
// (signatures/*.json): matching only, no meaning; the meaning is the catalog
// entry named by ID.
//
// Lines are matched against the signatures in order (files by name, entries
// in file order) and the first signature that matches a line claims it: put
// the specific before the generic.
type Signature struct {
	// ID of the catalog problem a match proves; or
	ID string `json:"id,omitempty"`
	// Fact names an observation a Go rule asks for (match.go): a fact
	// signature makes no finding of its own, claims no line, and is
	// matched on every line of its kinds.
	Fact string `json:"fact,omitempty"`
	// Kinds of log the signature applies to ("kubelet", "containerd",
	// "cloud-init-output", "cloud-init", "kubeadm", "syslog", "pod",
	// "kernel", "network"); empty means all.
	Kinds []string `json:"kinds,omitempty"`
	// Match is an RE2 regular expression. Named groups become parameters of
	// the finding's title and remediation ({flag}, {image}, ...).
	Match string `json:"match"`
	// Until names a fact whose line, after the last match, refutes a
	// transient (persist) that did not last: a pull retried and succeeded.
	// Without such a line the failure stands even when it stopped (its
	// client gave up: kubeadm's preflight pulls). Only with Persist.
	Until string `json:"until,omitempty"`
	// Persist, for a known bootstrap transient, is how long the matches must
	// span (on the lines' own timestamps) before they mean anything ("10m").
	Persist string `json:"persist,omitempty"`
	// Params are parameters of the finding that the line implies without
	// naming them ({"module": "br_netfilter"} for bridge-nf-call-iptables).
	Params map[string]string `json:"params,omitempty"`
	// Recent, for a one-shot event (a hung task, a full conntrack table), is
	// how long before the end of the evidence its last line may be and
	// still be the node's failure now ("15m"); an older one is a warning:
	// it happened, and the node went on. An event seen ten times or more
	// is never stale: the kernel stops reporting hung tasks after
	// hung_task_warnings (10), however long they hang.
	Recent string `json:"recent,omitempty"`
	// Confidence overrides the catalog's for findings of this signature.
	Confidence string `json:"confidence,omitempty"`
	// Examples are real lines the signature must claim; Counterexamples
	// are lines it must not match. Both are checked by the tests.
	Examples        []string `json:"examples"`
	Counterexamples []string `json:"counterexamples,omitempty"`
	// ContextBefore and ContextMatch quote, with the first matching line,
	// the nearest of the ContextBefore lines above it that matches
	// ContextMatch (the "+ curl ... URL" a script echoed above
	// "curl: (22) ... 404"); its named groups become parameters too.
	ContextBefore int    `json:"context_before,omitempty"`
	ContextMatch  string `json:"context_match,omitempty"`
	// Quotes is how many matching lines its findings quote (maxQuotes when
	// 0): more for a signature whose lines each name a different failure
	// (kubeadm's preflight errors).
	Quotes int `json:"quotes,omitempty"`
	// Join names the groups whose distinct values, over every match, make
	// the parameter ("Port-10250, FileAvailable--etc-kubernetes-kubelet.conf")
	// instead of the first match's.
	Join []string `json:"join,omitempty"`
	// Note says where the message comes from.
	Note string `json:"note,omitempty"`

	file    string
	re      *regexp.Regexp
	hints   []string // see requiredLiterals
	ctxRe   *regexp.Regexp
	persist time.Duration
	recent  time.Duration
	kinds   map[string]bool
}

// File is the file the signature was loaded from, for error messages.
func (s *Signature) File() string { return s.file }

// Matches says whether the signature claims line in a log of this kind,
// ignoring the others.
func (s *Signature) Matches(kind, line string) bool {
	lower, ascii := lowerASCII(line)
	return s.matches(kind, line, lower, ascii)
}

func (s *Signature) matches(kind, line, lower string, ascii bool) bool {
	return s.appliesTo(kind) && mayMatch(s.hints, lower, ascii) && s.re.MatchString(line)
}

type signatureFile struct {
	Description string       `json:"description"`
	Signatures  []*Signature `json:"signatures"`
}

//go:embed signatures/*.json
var embedded embed.FS

// LoadSignatures reads every *.json of dir (the embedded set when dir is
// nil) in name order, exactly as the agent does at startup. Unknown fields,
// bad regular expressions, unknown IDs and bad durations are errors.
func LoadSignatures(dir fs.FS) ([]*Signature, error) {
	root := "."
	if dir == nil {
		dir, root = embedded, "signatures"
	}
	names, err := fs.Glob(dir, path.Join(root, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no signature files in %s", root)
	}
	sort.Strings(names)
	var all []*Signature
	for _, name := range names {
		b, err := fs.ReadFile(dir, name)
		if err != nil {
			return nil, err
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		var f signatureFile
		if err := dec.Decode(&f); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		for i, s := range f.Signatures {
			s.file = path.Base(name)
			if err := s.compile(); err != nil {
				return nil, fmt.Errorf("%s: signature %d (%s): %w", name, i, s.ID, err)
			}
			all = append(all, s)
		}
	}
	facts := map[string]bool{}
	for _, s := range all {
		facts[s.Fact] = s.Fact != ""
	}
	for _, s := range all {
		if s.Until != "" && !facts[s.Until] {
			return nil, fmt.Errorf("%s: signature %s: until names no fact %q", s.file, s.ID, s.Until)
		}
	}
	return all, nil
}

func (s *Signature) compile() error {
	switch {
	case (s.ID == "") == (s.Fact == ""):
		return fmt.Errorf("a signature names either a problem (id) or a fact")
	case s.Fact != "":
		if !factShape.MatchString(s.Fact) {
			return fmt.Errorf("fact %q: want lower-kebab-case", s.Fact)
		}
		if s.Persist != "" || s.Until != "" || s.Recent != "" || s.Confidence != "" || s.ContextMatch != "" {
			return fmt.Errorf("fact %q: persist, until, recent, confidence and context are for problems", s.Fact)
		}
	default:
		if _, ok := catalog[s.ID]; !ok {
			return fmt.Errorf("unknown problem ID %q", s.ID)
		}
	}
	if s.Match == "" {
		return fmt.Errorf("empty match")
	}
	re, err := regexp.Compile(s.Match)
	if err != nil {
		return err
	}
	s.re = re
	s.hints = requiredLiterals(s.Match)
	if (s.ContextBefore > 0) != (s.ContextMatch != "") {
		return fmt.Errorf("context_before and context_match go together")
	}
	if s.ContextMatch != "" {
		if s.ctxRe, err = regexp.Compile(s.ContextMatch); err != nil {
			return fmt.Errorf("context_match: %w", err)
		}
	}
	if s.Until != "" && s.Persist == "" {
		return fmt.Errorf("until %q: only with persist", s.Until)
	}
	if s.Persist != "" {
		d, err := time.ParseDuration(s.Persist)
		if err != nil || d <= 0 {
			return fmt.Errorf("persist %q: not a positive duration", s.Persist)
		}
		s.persist = d
	}
	if s.Recent != "" {
		d, err := time.ParseDuration(s.Recent)
		if err != nil || d <= 0 {
			return fmt.Errorf("recent %q: not a positive duration", s.Recent)
		}
		s.recent = d
	}
	switch s.Confidence {
	case "", Low, Medium, High:
	default:
		return fmt.Errorf("confidence %q", s.Confidence)
	}
	if len(s.Examples) == 0 {
		return fmt.Errorf("no examples")
	}
	s.kinds = map[string]bool{}
	for _, k := range s.Kinds {
		s.kinds[k] = true
	}
	return nil
}

var factShape = regexp.MustCompile(`^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$`)

func (s *Signature) appliesTo(kind string) bool {
	return len(s.kinds) == 0 || s.kinds[kind]
}

// Claim returns the first problem signature of sigs that matches line in a
// log of this kind, or nil: what the matcher (match.go) decides of a line.
func Claim(sigs []*Signature, kind, line string) *Signature {
	lower, ascii := lowerASCII(line)
	for _, s := range sigs {
		if s.Fact == "" && s.matches(kind, line, lower, ascii) {
			return s
		}
	}
	return nil
}

// lineKind is the kind of log a line belongs to: the program that wrote it
// for syslog-style files, else the file's kind.
func lineKind(src *nodediagv1.LogExcerpt, l *nodediagv1.LogLine) string {
	switch l.GetProgram() {
	case "kubelet", "containerd", "kubeadm", "cloud-init", "kernel":
		return l.GetProgram()
	case "systemd-networkd", "NetworkManager":
		return "network"
	}
	return src.GetKind()
}

type sigMatch struct {
	sig  *Signature
	src  *nodediagv1.LogExcerpt
	line *nodediagv1.LogLine
	sub  []string
}

// signatureFindings makes one finding per problem ID of the lines the
// signatures claimed in the window.
func signatureFindings(in *Input) []*nodediagv1.Finding {
	var order []string
	byID := map[string][]sigMatch{}
	for _, m := range in.m().claims {
		if !in.InWindow(m.Line.GetTime()) {
			continue
		}
		id := m.Sig.ID
		if id == KubeadmFailed.ID {
			id = kubeadmFailure(in)
		}
		if _, ok := byID[id]; !ok {
			order = append(order, id)
		}
		byID[id] = append(byID[id], sigMatch{m.Sig, m.Src, m.Line, m.sub})
	}
	var out []*nodediagv1.Finding
	for _, id := range order {
		ms := persisting(byID[id], in.persistFor, in.unrefuted)
		if len(ms) == 0 {
			continue
		}
		f := sigFinding(id, ms)
		staleEvent(in, f, ms)
		overSinceRestart(in, f, ms)
		out = append(out, f)
	}
	return out
}

// stableRun is how long a unit must have run since its last start, without
// the error, for that error to be over.
const stableRun = 10 * time.Minute

// overSinceRestart lowers to info the finding of an error a unit logged
// before its last start, when it has run since for stableRun without it:
// the kubelet refused a flag, its configuration or swap, then was fixed and
// restarted. Its refutation ("a later kubelet start without the error") is
// in the evidence. Transients (persist) are judged by their own rule.
func overSinceRestart(in *Input, f *nodediagv1.Finding, ms []sigMatch) {
	kind := ""
	var last time.Time
	for _, m := range ms {
		k := lineKind(m.src, m.line)
		if m.sig.persist > 0 || (k != "kubelet" && k != "containerd") || (kind != "" && k != kind) {
			return
		}
		kind = k
		if t := m.line.GetTime(); t != nil && t.AsTime().After(last) {
			last = t.AsTime()
		}
	}
	if kind == "" || last.IsZero() {
		return
	}
	u := unitNamed(in, kind+".service")
	if u == nil || u.GetActiveState() != "active" {
		return
	}
	started := u.GetActiveEnter()
	if started == nil && u.GetSource() == unitSourceJournal {
		started = u.GetEvidence().GetTime()
	}
	if started == nil || !started.AsTime().After(last) || in.Clock.Sub(started.AsTime()) < stableRun {
		return
	}
	f.Severity, f.Confidence = Info, Low
	f.Title += fmt.Sprintf(" (over: %s has run since %s without it)", u.GetName(), started.AsTime().UTC().Format(time.RFC3339))
	if q := unitQuote(u); q != nil {
		f.Evidence = append(f.Evidence, q)
	}
}

// staleMaxEvents is the count from which an event is never judged stale
// (the kernel's hung_task_warnings).
const staleMaxEvents = 10

// staleEvent lowers a one-shot event's finding (its signature's Recent) to a
// warning when its last line is older than Recent on the evidence's clock.
func staleEvent(in *Input, f *nodediagv1.Finding, ms []sigMatch) {
	var recent time.Duration
	var last time.Time
	for _, m := range ms {
		if m.sig.recent > recent {
			recent = m.sig.recent
		}
		if t := m.line.GetTime(); t != nil && t.AsTime().After(last) {
			last = t.AsTime()
		}
	}
	if recent == 0 || last.IsZero() || in.Clock.IsZero() || len(ms) >= staleMaxEvents {
		return
	}
	if ago := in.Clock.Sub(last); ago > recent && SeverityAtLeast(f.Severity, Warning) {
		f.Severity, f.Confidence = Warning, Low
		f.Title += fmt.Sprintf(" (last seen %s before the evidence ends)", humanDuration(ago))
	}
}

// persisting keeps the matches of a transient signature only when some of
// them form a run that lasts its Persist duration and still goes on at the
// end of its log: timed matches no more than Persist apart, spanning at least
// Persist, the last within Persist of the log's newest line. A bootstrap
// transient is not a cause until it outlasts bootstrap, and two blips days
// apart on a long-running node (a control plane rollout, a CNI upgrade) are
// not an outage.
//
// A transient with Until that did not last still stands when nothing
// refutes it: no line of its Until fact after its last match.
func persisting(ms []sigMatch, persistFor func(time.Duration) time.Duration, unrefuted func(string, []sigMatch) bool) []sigMatch {
	bySig := map[*Signature][]sigMatch{}
	for _, m := range ms {
		bySig[m.sig] = append(bySig[m.sig], m)
	}
	keep := map[*Signature][]sigMatch{}
	for sig, group := range bySig {
		if sig.persist == 0 {
			keep[sig] = group
			continue
		}
		keep[sig] = persistingRun(group, persistFor(sig.persist))
		if keep[sig] == nil && sig.Until != "" && unrefuted(sig.Until, group) {
			keep[sig] = group
		}
	}
	var out []sigMatch
	for _, m := range ms {
		for _, k := range keep[m.sig] {
			if k.line == m.line {
				out = append(out, m)
				break
			}
		}
	}
	return out
}

// unrefuted says whether no line of the fact follows the last timed match
// (a pull that failed and was never retried with success).
func (in *Input) unrefuted(fact string, ms []sigMatch) bool {
	var last time.Time
	for _, m := range ms {
		if t := m.line.GetTime(); t != nil && t.AsTime().After(last) {
			last = t.AsTime()
		}
	}
	if last.IsZero() {
		return false
	}
	for _, r := range in.Matched(fact) {
		if r.Time().After(last) {
			return false
		}
	}
	return true
}

// persistFor is how long a transient must last in this window: its persist
// time, or, in a window the operator made shorter (--since 10m), the whole
// window but a minute: an error that fills the window the operator asked
// about persists in it.
func (in *Input) persistFor(d time.Duration) time.Duration {
	if in.Ctx.Since.IsZero() && in.Ctx.SinceAgo == 0 || in.Since.IsZero() {
		return d
	}
	if w := in.Until.Sub(in.Since) - time.Minute; w < d {
		return max(w, time.Minute)
	}
	return d
}

// persistingRun returns the matches of the last qualifying run, or nil.
func persistingRun(ms []sigMatch, d time.Duration) []sigMatch {
	timed := make([]sigMatch, 0, len(ms))
	var logEnd time.Time
	ended := map[*nodediagv1.LogExcerpt]bool{} // each source's end once: a source has thousands of lines
	for _, m := range ms {
		if t := m.line.GetTime(); t != nil {
			timed = append(timed, m)
		}
		if ended[m.src] {
			continue
		}
		ended[m.src] = true
		if e := sourceEnd(m.src); e.After(logEnd) {
			logEnd = e
		}
	}
	sort.SliceStable(timed, func(i, j int) bool { return timed[i].line.GetTime().AsTime().Before(timed[j].line.GetTime().AsTime()) })
	var best []sigMatch
	start := 0
	for i := 1; i <= len(timed); i++ {
		if i < len(timed) && timed[i].line.GetTime().AsTime().Sub(timed[i-1].line.GetTime().AsTime()) <= d {
			continue
		}
		run := timed[start:i]
		first, last := run[0].line.GetTime().AsTime(), run[len(run)-1].line.GetTime().AsTime()
		if last.Sub(first) >= d && !last.Before(logEnd.Add(-d)) {
			best = run
		}
		start = i
	}
	return best
}

// sourceEnd is the newest time a log shows.
func sourceEnd(src *nodediagv1.LogExcerpt) time.Time {
	var end time.Time
	if t := src.GetLastTime(); t != nil {
		end = t.AsTime()
	}
	for _, l := range src.GetLines() {
		if t := l.GetTime(); t != nil && t.AsTime().After(end) {
			end = t.AsTime()
		}
	}
	return end
}

// span is the time between the first and the last timed match.
func span(ms []sigMatch) time.Duration {
	var first, last time.Time
	for _, m := range ms {
		if m.line.GetTime() == nil {
			continue
		}
		t := m.line.GetTime().AsTime()
		if first.IsZero() || t.Before(first) {
			first = t
		}
		if t.After(last) {
			last = t
		}
	}
	if first.IsZero() {
		return 0
	}
	return last.Sub(first)
}

// maxQuotes is how many matching lines a signature finding quotes.
const maxQuotes = 3

// pickQuotes chooses which matches to quote, in evidence order: the first
// match of each source (the kubelet's line and the runtime's own, which
// says what it dialed) unless it repeats a message already picked, then of
// each distinct message (different lines
// prove different sides of the problem: kubeadm's preflight error and
// containerd's own refusal to load its config; an EOF and a timeout of the
// same API server), then the last matches (it still happens).
func pickQuotes(ms []sigMatch, limit int) []int {
	var picks []int
	picked := map[int]bool{}
	sources := map[string]bool{}
	seen := map[string]bool{}
	// Each line's template once: a persisting error has thousands of lines.
	keys := make([]string, len(ms))
	key := func(i int) string {
		if keys[i] == "" {
			keys[i] = messageTemplate(ms[i].line.GetText()) + "\x00"
		}
		return keys[i]
	}
	for i, m := range ms {
		if len(picks) == limit {
			break
		}
		// A source that repeats another's message (kern.log and the
		// kernel's journal) adds nothing.
		if src := m.src.GetSource(); !sources[src] && !seen[key(i)] {
			sources[src] = true
			seen[key(i)] = true
			picks = append(picks, i)
			picked[i] = true
		}
	}
	for i := range ms {
		if picked[i] {
			continue
		}
		if len(picks) == limit {
			break
		}
		if k := key(i); !seen[k] {
			seen[k] = true
			picks = append(picks, i)
			picked[i] = true
		}
	}
	for i := len(ms) - 1; i >= 0 && len(picks) < limit; i-- {
		if !picked[i] {
			picks = append(picks, i)
			picked[i] = true
		}
	}
	sort.Ints(picks)
	return picks
}

// messageTemplate is a line's message with its values masked (templates.go):
// lines of the same template say the same thing.
func messageTemplate(text string) string {
	return strings.Join(templateWords(logline.Parse(text, time.Time{}).Message), " ")
}

func sigFinding(id string, ms []sigMatch) *nodediagv1.Finding {
	p := catalog[id]
	params := Params{"count": strconv.Itoa(len(ms))}
	for _, m := range ms {
		for k, v := range m.sig.Params {
			if _, set := params[k]; !set {
				params[k] = v
			}
		}
		sub := m.sub
		for i, name := range m.sig.re.SubexpNames() {
			if name != "" && sub[i] != "" {
				if _, set := params[name]; !set {
					params[name] = strings.TrimSpace(sub[i])
				}
			}
		}
		if _, set := params["detail"]; !set {
			params["detail"] = clipDetail(sub[0])
		}
	}
	for _, name := range ms[0].sig.Join {
		if v := joinedGroup(ms, name); v != "" {
			params[name] = v
		}
	}
	for k, v := range params {
		// Messages quoted inside klog/logrus values escape their quotes.
		params[k] = strings.ReplaceAll(v, `\"`, `"`)
	}
	if d := span(ms); d >= time.Second {
		params["duration"] = humanDuration(d)
	}
	var quotes []*nodediagv1.Quote
	if q, groups := contextLine(ms[0]); q != nil {
		quotes = append(quotes, q)
		for k, v := range groups {
			if _, set := params[k]; !set {
				params[k] = v
			}
		}
	}
	limit := maxQuotes
	if n := ms[0].sig.Quotes; n > 0 {
		limit = n
	}
	picks := pickQuotes(ms, limit)
	for _, i := range picks {
		q := QuoteLog(ms[i].src, ms[i].line)
		if q != nil && len(ms[i].line.GetText()) > MaxExcerpt {
			q.Excerpt = clipAround(strings.TrimRight(ms[i].line.GetText(), "\r"), ms[i].sig.re)
		}
		quotes = append(quotes, q)
	}
	f := p.Finding(params, quotes...)
	if c := ms[0].sig.Confidence; c != "" {
		f.Confidence = c
	}
	return f
}

// joinedGroup is the distinct values of a named group over the matches, in
// evidence order, joined by ", " (at most maxJoined, then how many more).
func joinedGroup(ms []sigMatch, name string) string {
	var vals []string
	seen := map[string]bool{}
	for _, m := range ms {
		for i, n := range m.sig.re.SubexpNames() {
			if n == name && i < len(m.sub) && m.sub[i] != "" && !seen[m.sub[i]] {
				seen[m.sub[i]] = true
				vals = append(vals, strings.TrimSpace(m.sub[i]))
			}
		}
	}
	if len(vals) > maxJoined {
		vals = append(vals[:maxJoined], fmt.Sprintf("and %d more", len(vals)-maxJoined))
	}
	return strings.Join(vals, ", ")
}

// maxJoined is how many values a joined parameter lists.
const maxJoined = 6

func clipDetail(s string) string {
	// Redact before cutting: a secret cut in two escapes the patterns.
	s = redact.String(strings.TrimSpace(s))
	if len(s) > 200 {
		cut := 200
		for cut > 0 && (s[cut]&0xC0) == 0x80 {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// contextLine finds the context line of a match (see Signature.ContextBefore)
// among the lines the logs probe kept, with its named groups.
func contextLine(m sigMatch) (*nodediagv1.Quote, Params) {
	s, n := m.sig, m.line.GetN()
	if s.ctxRe == nil || n <= 0 {
		return nil, nil
	}
	byN := map[int32]*nodediagv1.LogLine{}
	for _, l := range m.src.GetLines() {
		if l.GetN() >= n-int32(s.ContextBefore) && l.GetN() < n {
			byN[l.GetN()] = l
		}
	}
	for k := n - 1; k >= n-int32(s.ContextBefore) && k > 0; k-- {
		l := byN[k]
		if l == nil {
			continue
		}
		sub := s.ctxRe.FindStringSubmatch(l.GetText())
		if sub == nil {
			continue
		}
		groups := Params{}
		for i, name := range s.ctxRe.SubexpNames() {
			if name != "" && sub[i] != "" {
				groups[name] = strings.TrimSpace(sub[i])
			}
		}
		return QuoteLog(m.src, l), groups
	}
	return nil, nil
}
