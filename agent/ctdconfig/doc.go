package ctdconfig

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/nodediag/nodediag/agent/redact"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// doc is a TOML file as values (what toml.Unmarshal gives) and as positions
// (the line that writes each key, table header and array element), so that
// every value reported can be quoted with its line.
type doc struct {
	path  string
	lines []string
	tree  map[string]any
	// pos maps a key path (joined with keySep; array elements and array
	// tables by their index) to the 1-based line that writes it.
	pos map[string]int
	// tables are the [table] and [[array table]] headers in file order.
	tables []header
}

// header is a [table] or [[array table]] header.
type header struct {
	key  []string
	line int
}

const keySep = "\x00"

// ParseError is a file that is not valid TOML: what the parser says and the
// line it names (0 when it names none).
type ParseError struct {
	Path string
	Line int
	Msg  string
}

func (e *ParseError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s: line %d: %s", e.Path, e.Line, e.Msg)
	}
	return e.Path + ": " + e.Msg
}

// parseDoc parses b. A document that is not TOML gives a *ParseError.
func parseDoc(path string, b []byte) (*doc, error) {
	d := &doc{path: path, lines: splitLines(b), pos: map[string]int{}}
	if err := toml.Unmarshal(b, &d.tree); err != nil {
		pe := &ParseError{Path: path, Msg: err.Error()}
		var de *toml.DecodeError
		if errors.As(err, &de) {
			pe.Line, _ = de.Position()
		}
		return d, pe
	}
	if d.tree == nil {
		d.tree = map[string]any{}
	}
	d.positions(b)
	return d, nil
}

func splitLines(b []byte) []string {
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	return lines
}

// positions walks the document's expressions and records where each key is.
func (d *doc) positions(b []byte) {
	var p unstable.Parser
	p.Reset(b)
	var prefix []string
	arrays := map[string]int{} // array table path → elements seen
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			key, line := keyOf(&p, e.Key())
			if e.Kind == unstable.ArrayTable {
				j := strings.Join(key, keySep)
				n := arrays[j]
				arrays[j] = n + 1
				d.see(key, line)
				key = append(key, strconv.Itoa(n))
			}
			d.see(key, line)
			d.tables = append(d.tables, header{key: key, line: line})
			prefix = key
		case unstable.KeyValue:
			d.keyValue(&p, prefix, e)
		}
	}
}

// keyValue records a key = value expression under prefix.
func (d *doc) keyValue(p *unstable.Parser, prefix []string, e *unstable.Node) {
	key, line := keyOf(p, e.Key())
	full := append(append([]string{}, prefix...), key...)
	d.see(full, line)
	d.value(p, full, e.Value(), line)
}

// value records the positions inside an array or inline table value.
func (d *doc) value(p *unstable.Parser, at []string, v *unstable.Node, line int) {
	switch v.Kind {
	case unstable.Array:
		i := 0
		for it := v.Children(); it.Next(); {
			n := it.Node()
			if n.Kind == unstable.Comment {
				continue
			}
			el := append(append([]string{}, at...), strconv.Itoa(i))
			l := nodeLine(p, n, line)
			d.see(el, l)
			d.value(p, el, n, l)
			i++
		}
	case unstable.InlineTable:
		for it := v.Children(); it.Next(); {
			n := it.Node()
			if n.Kind == unstable.KeyValue {
				d.keyValue(p, at, n)
			}
		}
	}
}

// see records the first line that writes key and each of its parents (a
// dotted key or a table header also writes the tables it names).
func (d *doc) see(key []string, line int) {
	if line <= 0 {
		return
	}
	for i := 1; i <= len(key); i++ {
		j := strings.Join(key[:i], keySep)
		if _, ok := d.pos[j]; !ok {
			d.pos[j] = line
		}
	}
}

// keyOf returns a key's parts and the line of its first part.
func keyOf(p *unstable.Parser, it unstable.Iterator) ([]string, int) {
	var parts []string
	line := 0
	for it.Next() {
		n := it.Node()
		if line == 0 {
			line = nodeLine(p, n, 0)
		}
		parts = append(parts, string(n.Data))
	}
	return parts, line
}

// nodeLine is the line a node starts on; def when the node has no bytes of
// its own (arrays).
func nodeLine(p *unstable.Parser, n *unstable.Node, def int) int {
	if n.Raw.Length == 0 && n.Raw.Offset == 0 {
		if c := n.Child(); c != nil {
			return nodeLine(p, c, def)
		}
		return def
	}
	return p.Shape(n.Raw).Start.Line
}

// get returns the value at a key path (array elements by index).
func (d *doc) get(key ...string) (any, bool) {
	var cur any = d.tree
	for _, k := range key {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[k]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

func (d *doc) has(key ...string) bool {
	_, ok := d.get(key...)
	return ok
}

func (d *doc) str(key ...string) (string, bool) {
	v, ok := d.get(key...)
	s, isStr := v.(string)
	return s, ok && isStr
}

func (d *doc) table(key ...string) (map[string]any, bool) {
	v, ok := d.get(key...)
	m, isMap := v.(map[string]any)
	return m, ok && isMap
}

// line is the SourceLine that writes key, or nil when the key is not
// written with a line (or not at all).
func (d *doc) line(key ...string) *nodediagv1.SourceLine {
	n, ok := d.pos[strings.Join(key, keySep)]
	if !ok {
		return nil
	}
	return d.sourceLine(n)
}

// sourceLine quotes line n of the file. The text is the line as written,
// with any secret on it (a URL's user info, a password) redacted, and the
// value not shown at all on a line that can hold a credential
// (quotableLine): evidence never carries one, whatever its shape.
func (d *doc) sourceLine(n int) *nodediagv1.SourceLine {
	if n < 1 || n > len(d.lines) {
		return nil
	}
	return &nodediagv1.SourceLine{Path: d.path, Line: int32(n), Text: redact.String(quotableLine(d.lines, n))}
}

// valueNotShown replaces the value of a line that can hold a credential.
const valueNotShown = "[value not shown]"

var (
	// credentialSection matches the table headers whose keys are
	// credentials: hosts.toml's [host."...".header] and the legacy
	// registry.configs."<host>".auth of config.toml.
	credentialSection = regexp.MustCompile(`(?i)\.\s*"?(?:header|auth)"?\s*\]`)
	// credentialKey matches keys that name a credential, wherever they are
	// (a header written inline, an auth table written with dotted keys).
	credentialKey = regexp.MustCompile(`(?i)pass|token|secret|auth|identity|header|api[-_]?key|credential|cookie`)
)

// quotableLine is line n (1-based) of lines as it may be quoted. Its value
// is replaced by valueNotShown when the line is in a credential table or
// its key names a credential: the value of a header (a registry's API key,
// "Authorization: Basic ...") has no shape a redactor could recognise. A
// line is judged by its own text and the nearest table header above it, so
// that a line the TOML parser stopped at (an unterminated string) is judged
// too.
func quotableLine(lines []string, n int) string {
	line := lines[n-1]
	t := strings.TrimSpace(line)
	if strings.HasPrefix(t, "[") {
		return line // a table header: keys only
	}
	section := ""
	for i := n - 2; i >= 0; i-- {
		if h := strings.TrimSpace(lines[i]); strings.HasPrefix(h, "[") {
			section = h
			break
		}
	}
	key, _, hasValue := strings.Cut(line, "=")
	switch {
	case credentialSection.MatchString(section):
	case hasValue && credentialKey.MatchString(key):
	default:
		return line
	}
	if !hasValue {
		return valueNotShown
	}
	return strings.TrimRight(key, " \t") + " = " + valueNotShown
}

// keysInOrder returns the keys of the table at key in the order the file
// writes them (by line), then any key without a position by name.
func (d *doc) keysInOrder(key ...string) []string {
	m, ok := d.table(key...)
	if !ok {
		return nil
	}
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	lineOf := func(k string) int {
		if n, ok := d.pos[strings.Join(append(append([]string{}, key...), k), keySep)]; ok {
			return n
		}
		return int(^uint(0) >> 1)
	}
	sort.Slice(ks, func(i, j int) bool {
		li, lj := lineOf(ks[i]), lineOf(ks[j])
		if li != lj {
			return li < lj
		}
		return ks[i] < ks[j]
	})
	return ks
}
