package rules

import (
	"regexp/syntax"
	"strings"
)

// Matching every log line against every signature's regular expression is
// the agent's hot loop. requiredLiterals derives, from a pattern, a set of
// lower-cased literals one of which any match must contain (nil when the
// pattern guarantees none), so that a line containing none of them is
// skipped without running the regular expression. The derivation is
// conservative: when in doubt it returns nil and the pattern always runs.
func requiredLiterals(pattern string) []string {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil
	}
	lits := required(re.Simplify())
	for _, l := range lits {
		if len(l) < 3 {
			return nil // too short to be worth a check
		}
		for i := 0; i < len(l); i++ {
			if l[i] >= 0x80 {
				return nil // lines are compared in ASCII lower case
			}
		}
	}
	return lits
}

// required returns literals (lower case) one of which every match of re
// contains, or nil.
func required(re *syntax.Regexp) []string {
	switch re.Op {
	case syntax.OpLiteral:
		return []string{strings.ToLower(string(re.Rune))}
	case syntax.OpCapture:
		return required(re.Sub[0])
	case syntax.OpPlus:
		return required(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return required(re.Sub[0])
		}
		return nil
	case syntax.OpConcat:
		// The longest literal run of the concatenation, else the best
		// requirement of one of its parts.
		var best []string
		var run strings.Builder
		flush := func() {
			if run.Len() > 0 && (best == nil || (len(best) == 1 && run.Len() > len(best[0]))) {
				best = []string{run.String()}
			}
			run.Reset()
		}
		for _, sub := range re.Sub {
			if sub.Op == syntax.OpLiteral {
				run.WriteString(strings.ToLower(string(sub.Rune)))
				continue
			}
			flush()
			if r := required(sub); r != nil && best == nil {
				best = r
			} else if r != nil && len(r) == 1 && len(best) == 1 && len(r[0]) > len(best[0]) {
				best = r
			}
		}
		flush()
		return best
	case syntax.OpAlternate:
		var all []string
		for _, sub := range re.Sub {
			r := required(sub)
			if r == nil {
				return nil
			}
			all = append(all, r...)
		}
		return all
	}
	return nil
}

// lowerASCII lower-cases an ASCII line for the hint check. A line with any
// non-ASCII byte returns "" and false: case folding beyond ASCII (the Kelvin
// sign folds to k) is left to the regular expression.
func lowerASCII(s string) (string, bool) {
	upper := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 {
			return "", false
		}
		upper = upper || (c >= 'A' && c <= 'Z')
	}
	if !upper {
		return s, true
	}
	return strings.ToLower(s), true
}

// mayMatch says whether a line may match a pattern with these hints.
func mayMatch(hints []string, lower string, ascii bool) bool {
	if hints == nil || !ascii {
		return true
	}
	for _, h := range hints {
		if strings.Contains(lower, h) {
			return true
		}
	}
	return false
}
