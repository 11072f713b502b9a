package redact

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A secret can sit inside an encoding the rules do not read: a log line
// inside a JSON string (\u0026, \u003c, \n), a line URL-encoded into a query
// (password%3DHunter2), a file written as base64 (a Secret's data, a
// cloud-init write_files, echo ... | base64 -d). nested decodes each such
// part, redacts the decoded text, and when that changed something writes the
// change back in the part's own encoding: a JSON string or a URL keeps its
// shape, a base64 text is replaced whole (a part of it would not decode).

// maxDepth bounds how many encodings inside one another are decoded.
const maxDepth = 3

// minBase64 is the shortest base64 run decoded: 18 bytes of text.
const minBase64 = 24

func nested(s string, depth int) string {
	if depth >= maxDepth {
		return s
	}
	if strings.IndexByte(s, '\\') >= 0 {
		s = jsonStrings(s, depth)
	}
	if strings.IndexByte(s, '%') >= 0 || strings.IndexByte(s, '+') >= 0 {
		s = urlParts(s, depth)
	}
	return base64Runs(s, depth)
}

// span maps decoded text to its source: byte i of text came from
// src[start[i]:end[i]].
type span struct {
	text       []byte
	start, end []int
}

func (d *span) add(b byte, start, end int) {
	d.text = append(d.text, b)
	d.start = append(d.start, start)
	d.end = append(d.end, end)
}

// rewrite redacts d's text and, if that changed it, returns src with the
// changed source bytes replaced by encode of the redacted ones.
func (d *span) rewrite(src string, depth int, encode func(string) string) (string, bool) {
	text := string(d.text)
	red := redact(text, depth+1)
	if red == text {
		return src, false
	}
	p := 0
	for p < len(text) && p < len(red) && text[p] == red[p] {
		p++
	}
	q := 0
	for q < len(text)-p && q < len(red)-p && text[len(text)-1-q] == red[len(red)-1-q] {
		q++
	}
	from := len(src)
	if p < len(text) {
		from = d.start[p]
	}
	to := from
	if last := len(text) - q - 1; last >= p {
		to = d.end[last]
	}
	return src[:from] + encode(red[p:len(red)-q]) + src[to:], true
}

// splice builds a copy of a text with some of its parts replaced, left to
// right; the text itself when nothing was.
type splice struct {
	b       strings.Builder
	last    int
	changed bool
}

// replace puts with in place of s[i:j] (i at or after the previous j).
func (p *splice) replace(s string, i, j int, with string) {
	p.b.WriteString(s[p.last:i])
	p.b.WriteString(with)
	p.last, p.changed = j, true
}

// result is s with the replacements made.
func (p *splice) result(s string) string {
	if !p.changed {
		return s
	}
	p.b.WriteString(s[p.last:])
	return p.b.String()
}

// jsonStrings redacts the decoded text of every double-quoted string that
// holds a backslash escape.
func jsonStrings(s string, depth int) string {
	var p splice
	for i := 0; i < len(s); i++ {
		if s[i] != '"' {
			continue
		}
		// A string runs to the next unescaped quote on the line.
		j, escaped := i+1, false
		for ; j < len(s) && s[j] != '"' && s[j] != '\n'; j++ {
			if s[j] == '\\' {
				escaped = true
				j++
			}
		}
		if j >= len(s) || s[j] != '"' {
			j = min(j, len(s))
		}
		if escaped {
			d := decodeJSON(s, i+1, j)
			if out, ok := d.rewrite(s[i+1:j], depth, jsonEscape); ok {
				p.replace(s, i+1, j, out)
			}
		}
		i = j
	}
	return p.result(s)
}

// decodeJSON decodes the JSON string escapes of s[from:to]; offsets are
// relative to from. An escape that is not JSON stays as it is.
func decodeJSON(s string, from, to int) *span {
	d := &span{}
	for i := from; i < to; {
		if s[i] != '\\' || i+1 >= to {
			d.add(s[i], i-from, i-from+1)
			i++
			continue
		}
		c := s[i+1]
		switch c {
		case '"', '\\', '/':
			d.add(c, i-from, i-from+2)
			i += 2
		case 'n', 't', 'r', 'b', 'f':
			d.add(map[byte]byte{'n': '\n', 't': '\t', 'r': '\r', 'b': '\b', 'f': '\f'}[c], i-from, i-from+2)
			i += 2
		case 'u':
			if r, ok := hex4(s, i+2, to); ok && r < utf8.RuneSelf {
				d.add(byte(r), i-from, i-from+6)
				i += 6
				continue
			} else if ok {
				var buf [4]byte
				n := utf8.EncodeRune(buf[:], rune(r))
				for k := range n {
					d.add(buf[k], i-from, i-from+6)
				}
				i += 6
				continue
			}
			d.add(s[i], i-from, i-from+1)
			i++
		default:
			d.add(s[i], i-from, i-from+1)
			i++
		}
	}
	return d
}

func hex4(s string, i, to int) (int, bool) {
	if i+4 > to {
		return 0, false
	}
	v := 0
	for _, c := range []byte(s[i : i+4]) {
		v <<= 4
		switch {
		case '0' <= c && c <= '9':
			v |= int(c - '0')
		case 'a' <= c && c <= 'f':
			v |= int(c-'a') + 10
		case 'A' <= c && c <= 'F':
			v |= int(c-'A') + 10
		default:
			return 0, false
		}
	}
	return v, true
}

// jsonEscape writes s as the inside of a JSON string, as encoding/json does.
func jsonEscape(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// urlParts redacts the decoded text of every blank-separated part that holds
// a %XX escape.
func urlParts(s string, depth int) string {
	var p splice
	for i := 0; i < len(s); {
		if isURLBreak(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && !isURLBreak(s[j]) {
			j++
		}
		if hasEscape(s[i:j]) {
			d := decodeURL(s[i:j])
			if out, ok := d.rewrite(s[i:j], depth, url.QueryEscape); ok {
				p.replace(s, i, j, out)
			}
		}
		i = j
	}
	return p.result(s)
}

func isURLBreak(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '"' || c == '\'' || c == '<' || c == '>' || c == '`'
}

func hasEscape(s string) bool {
	if strings.IndexByte(s, '+') >= 0 && strings.IndexByte(s, '=') >= 0 {
		return true // a query whose blanks are "+"
	}
	for i := 0; i+2 < len(s); i++ {
		if s[i] == '%' && isHex(s[i+1]) && isHex(s[i+2]) {
			return true
		}
	}
	return false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func decodeURL(s string) *span {
	d := &span{}
	for i := 0; i < len(s); {
		switch {
		case s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			v, _ := hex4("00"+s[i+1:i+3], 0, 4)
			d.add(byte(v), i, i+3)
			i += 3
		case s[i] == '+':
			d.add(' ', i, i+1)
			i++
		default:
			d.add(s[i], i, i+1)
			i++
		}
	}
	return d
}

// base64Runs replaces with Mark every run of base64 that decodes to text
// holding a secret.
func base64Runs(s string, depth int) string {
	var p splice
	for i := 0; i < len(s); {
		if !isBase64(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && isBase64(s[j]) {
			j++
		}
		k := j
		for k < len(s) && k < j+2 && s[k] == '=' {
			k++
		}
		if j-i >= minBase64 {
			if text, ok := decodeBase64(s[i:j]); ok && redact(text, depth+1) != text {
				p.replace(s, i, k, Mark)
			}
		}
		i = k
	}
	return p.result(s)
}

func isBase64(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '/' || c == '-' || c == '_'
}

// decodeBase64 decodes a run of the standard or the URL alphabet (not both)
// and says whether it is text: valid UTF-8, almost all printable.
func decodeBase64(run string) (string, bool) {
	std := strings.ContainsAny(run, "+/")
	urlsafe := strings.ContainsAny(run, "-_")
	enc := base64.RawStdEncoding
	switch {
	case std && urlsafe:
		return "", false
	case urlsafe:
		enc = base64.RawURLEncoding
	}
	if len(run)%4 == 1 {
		run = run[:len(run)-1]
	}
	b, err := enc.DecodeString(run)
	if err != nil || !utf8.Valid(b) {
		return "", false
	}
	text := string(b)
	bad := 0
	for _, r := range text {
		if !unicode.IsPrint(r) && r != '\n' && r != '\t' && r != '\r' {
			bad++
		}
	}
	return text, bad*10 <= utf8.RuneCountInString(text)
}
