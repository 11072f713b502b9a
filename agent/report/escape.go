package report

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// terminalSafe returns s with every character that a terminal would act on
// instead of print made visible: C0 controls but tab (ESC begins the ANSI
// and OSC sequences that recolour, retitle or rewrite the screen; CR
// overwrites the line already printed; BS erases), DEL, C1 controls (U+0080
// to U+009F: U+009B is a CSI on some terminals), the Unicode bidirectional
// overrides and isolates (they reorder what the operator reads), and bytes
// that are not UTF-8. Each becomes a Go-style escape: \x1b, \r, \u009b,
// \u202e, \xff.
//
// Text and compact output quote the node's files and logs to the operator's
// terminal (az vm run-command, kubectl logs, an SSH session): a log line must
// not be able to hide, fake or reorder what the report says. The renderers
// write their own newlines between the lines of a multi-line excerpt, after
// escaping each line.
func terminalSafe(s string) string {
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if needsEscape(r, size) {
			break
		}
		i += size
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case !needsEscape(r, size):
			b.WriteString(s[i : i+size])
		case r == utf8.RuneError:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += size
	}
	return b.String()
}

// needsEscape reports whether the rune r, size bytes long, must not reach a
// terminal as it is.
func needsEscape(r rune, size int) bool {
	switch {
	case r == '\t':
		return false
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r == utf8.RuneError && size == 1:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}
