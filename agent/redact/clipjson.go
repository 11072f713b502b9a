package redact

import (
	"fmt"
	"unicode/utf8"
)

// ClipJSON returns the JSON text b with every string longer than max bytes
// (as written, escapes included) cut at max on a character boundary, with a
// note of how many bytes were cut inside the string: what a JSON report from
// another machine holds can then be decoded without holding its huge strings
// twice (a 60 MiB node name). Anything that is not a string is copied as it
// is; b is returned unchanged when no string is over max. Malformed JSON
// stays malformed: the decoder says why.
func ClipJSON(b []byte, max int) []byte {
	if len(b) <= max {
		return b
	}
	var out []byte
	last := 0 // b[last:] is not copied to out yet
	for i := 0; i < len(b); i++ {
		if b[i] != '"' {
			continue
		}
		start := i + 1
		j := start
		cut := -1
		for j < len(b) && b[j] != '"' {
			// j is at the start of a character or an escape.
			if cut < 0 && j-start >= max && utf8.RuneStart(b[j]) {
				cut = j
			}
			switch {
			case b[j] == '\\' && j+1 < len(b) && b[j+1] == 'u':
				j += 6
			case b[j] == '\\':
				j += 2
			default:
				j++
			}
		}
		if cut >= 0 {
			if out == nil {
				out = make([]byte, 0, len(b)/2)
			}
			out = append(out, b[last:cut]...)
			out = fmt.Appendf(out, "…[%d bytes clipped]", min(j, len(b))-cut)
			last = min(j, len(b))
		}
		i = j
	}
	if out == nil {
		return b
	}
	return append(out, b[last:]...)
}
