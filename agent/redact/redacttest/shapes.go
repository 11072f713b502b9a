// Package redacttest is the secret-shapes corpus of the tests: realistic
// lines of logs and configuration files that carry a secret, each in the
// forms it reaches evidence in (plain, inside a JSON string, URL-encoded,
// base64), and lines that look like secrets and are not. Tests plant the
// corpus in a host, a bundle or a report and assert, with Leaks, that no
// secret reaches any output in any encoding.
//
// The corpus is testdata/shapes.txt: one line per shape, every secret in it
// written between ⟦ and ⟧, "⏎" for a line break inside one line (a journal
// message holding a PEM block), "[name]" opening a section, "= " opening a
// line that holds no secret and must come out of redaction unchanged.
package redacttest

import (
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
)

//go:embed testdata/shapes.txt
var shapesFile string

// MinSecret is the shortest secret the corpus may hold: shorter ones would
// be found by chance in a base64 encoding of other text.
const MinSecret = 10

// MinShapes is the fewest lines with secrets the corpus may hold.
const MinShapes = 150

// A Shape is one line of the corpus.
type Shape struct {
	Section string
	Line    int    // in testdata/shapes.txt
	Text    string // the line, markers removed
	// Secrets are the values that must never leave; empty for an innocent
	// line, which must come out of redaction unchanged.
	Secrets []string
}

func (s Shape) String() string { return fmt.Sprintf("shapes.txt:%d [%s]", s.Line, s.Section) }

// LineByLineLimit says whether the shape is the known limit of evidence
// read line by line (SECURITY.md): the body of a private key whose BEGIN line
// is not in the text, whose lines are known as a key's only at its END.
func (s Shape) LineByLineLimit() bool {
	return strings.Contains(s.Text, "-----END") && !strings.Contains(s.Text, "-----BEGIN")
}

// Form is a way a line reaches evidence.
type Form int

const (
	Plain  Form = iota
	JSON        // inside a JSON string: a JSON log line, a JSON config value
	URL         // URL-encoded in a query: a proxied or reported URL
	Base64      // base64: a Secret's data, a cloud-init write_files, echo | base64 -d
)

var Forms = []Form{Plain, JSON, URL, Base64}

func (f Form) String() string {
	return [...]string{"plain", "json", "url", "base64"}[f]
}

// In returns text as it appears in form f: a whole log line.
func (f Form) In(text string) string {
	switch f {
	case JSON:
		b, _ := json.Marshal(text)
		return `{"level":"error","msg":` + string(b) + `}`
	case URL:
		return "error: GET https://proxy.example/report?line=" + url.QueryEscape(text) + " failed"
	case Base64:
		return "error: write_files: echo " + base64.StdEncoding.EncodeToString([]byte(text)) + " | base64 -d > /etc/nodeconf"
	}
	return text
}

// Shapes parses the corpus. It panics on a malformed corpus (TestCorpusWellFormed
// says where).
func Shapes() []Shape {
	s, err := parse(shapesFile)
	if err != nil {
		panic(err)
	}
	return s
}

func parse(file string) ([]Shape, error) {
	var out []Shape
	section := ""
	for i, raw := range strings.Split(file, "\n") {
		n := i + 1
		line := strings.TrimRight(raw, " \t\r")
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
			continue
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") && !strings.ContainsAny(line, "⟦⟧= "):
			section = line[1 : len(line)-1]
			continue
		}
		if section == "" {
			return nil, fmt.Errorf("shapes.txt:%d: a shape before any [section]", n)
		}
		sh := Shape{Section: section, Line: n}
		innocent := strings.HasPrefix(line, "= ")
		if innocent {
			line = line[2:]
		}
		line = strings.ReplaceAll(line, "⏎", "\n")
		var b strings.Builder
		for {
			open := strings.Index(line, "⟦")
			if open < 0 {
				if strings.Contains(line, "⟧") {
					return nil, fmt.Errorf("shapes.txt:%d: ⟧ without ⟦", n)
				}
				b.WriteString(line)
				break
			}
			end := strings.Index(line[open:], "⟧")
			if end < 0 {
				return nil, fmt.Errorf("shapes.txt:%d: ⟦ without ⟧", n)
			}
			secret := line[open+len("⟦") : open+end]
			if strings.Contains(secret, "⟦") {
				return nil, fmt.Errorf("shapes.txt:%d: nested ⟦", n)
			}
			if len(secret) < MinSecret {
				return nil, fmt.Errorf("shapes.txt:%d: secret %q is shorter than %d bytes", n, secret, MinSecret)
			}
			b.WriteString(line[:open])
			b.WriteString(secret)
			sh.Secrets = append(sh.Secrets, secret)
			line = line[open+end+len("⟧"):]
		}
		sh.Text = b.String()
		if innocent == (len(sh.Secrets) > 0) {
			if innocent {
				return nil, fmt.Errorf("shapes.txt:%d: an innocent line (= ) holds a ⟦secret⟧", n)
			}
			return nil, fmt.Errorf("shapes.txt:%d: no ⟦secret⟧ (write an innocent line as \"= ...\")", n)
		}
		out = append(out, sh)
	}
	return out, nil
}

// A Leak is a secret found in an output.
type Leak struct {
	Shape    Shape
	Secret   string
	Encoding string // how it was found: plain, json, url, base64
}

func (l Leak) String() string {
	return fmt.Sprintf("%s: %q leaked (%s)", l.Shape, l.Secret, l.Encoding)
}

// Leaks returns every secret of shapes found in out, in any encoding: as is,
// JSON-escaped, URL-encoded (query and path escaping) and base64 (standard
// and URL alphabets, at each of the three alignments a secret can have in a
// longer encoded text).
func Leaks(out string, shapes []Shape) []Leak {
	var leaks []Leak
	for _, sh := range shapes {
		for _, s := range sh.Secrets {
			for _, enc := range encodings(s) {
				if strings.Contains(out, enc.text) {
					leaks = append(leaks, Leak{sh, s, enc.name})
					break
				}
			}
		}
	}
	return leaks
}

type encoded struct{ name, text string }

func encodings(s string) []encoded {
	out := []encoded{{"plain", s}}
	if b, _ := json.Marshal(s); string(b[1:len(b)-1]) != s {
		out = append(out, encoded{"json", string(b[1 : len(b)-1])})
	}
	for _, e := range []string{url.QueryEscape(s), url.PathEscape(s)} {
		if e != s {
			out = append(out, encoded{"url", e})
		}
	}
	// Inside the JSON form of a URL-encoded line and the like, one level
	// of each is enough: the forms above nest one encoding at a time.
	for _, alphabet := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		for shift := range 3 {
			out = append(out, encoded{"base64", stableBase64(alphabet, s, shift)})
		}
	}
	return out
}

// stableBase64 is the part of the base64 encoding of s, preceded by shift
// bytes of anything, that does not depend on those bytes or on what follows
// s: what any base64 text holding s at that alignment contains.
func stableBase64(enc *base64.Encoding, s string, shift int) string {
	pad := strings.Repeat("\x00", shift)
	full := enc.EncodeToString([]byte(pad + s))
	// Characters before the first full group that starts at or after
	// the shift depend on the pad; the last group depends on what follows.
	start := 0
	if shift > 0 {
		start = 4 // the first group mixes pad and s
	}
	n := shift + len(s)
	end := (n / 3) * 4 // whole groups of input only
	if end <= start {
		return s // too short to say: fall back to the plain text
	}
	return full[start:end]
}

// PlantedLog is where Plant writes the corpus in a host: a log the agent
// reads and the bundle carries.
const PlantedLog = "var/log/cloud-init-output.log"

// Marker is the tag Plant writes before the line of shape sh in form f: a
// test that finds it in the evidence knows that the line was read and kept.
func Marker(sh Shape, f Form) string { return fmt.Sprintf("nd-shape-%04d-%s", sh.Line, f) }

// Plant returns the text of a cloud-init output log that holds every shape
// in every form, each line tagged with its Marker and stated as an error (so
// that the agent keeps it as evidence), the lines of a multi-line shape
// following its tagged first line (and a key cut off by an END line of the
// test's).
func Plant(shapes []Shape) string {
	var b strings.Builder
	b.WriteString("Cloud-init v. 24.4-0ubuntu1~24.04.1 running 'modules:final' at Mon, 01 Dec 2026 10:00:00 +0000. Up 20.00 seconds.\n")
	for _, sh := range shapes {
		for _, f := range Forms {
			fmt.Fprintf(&b, "%s error: %s\n", Marker(sh, f), f.In(sh.Text))
			if in := f.In(sh.Text); strings.LastIndex(in, "-----BEGIN ") > strings.LastIndex(in, "-----END ") {
				// A key cut off: a reader takes every line after it
				// for the key's until an END line; end it here so that
				// the next shapes are read as themselves.
				fmt.Fprintf(&b, "%s-end -----END PRIVATE KEY-----\n", Marker(sh, f))
			}
		}
	}
	b.WriteString("Cloud-init v. 24.4-0ubuntu1~24.04.1 finished at Mon, 01 Dec 2026 10:05:00 +0000. Datasource DataSourceAzure [seed=/dev/sr0].  Up 320.00 seconds\n")
	return b.String()
}
