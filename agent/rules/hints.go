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
		// Every part's requirement is one of the concatenation's, and so is
		// each run of literals: keep the best (see better).
		var best []string
		var run strings.Builder
		consider := func(r []string) {
			if r != nil && better(r, best) {
				best = r
			}
		}
		for _, sub := range re.Sub {
			if sub.Op == syntax.OpLiteral {
				run.WriteString(strings.ToLower(string(sub.Rune)))
				continue
			}
			if run.Len() > 0 {
				consider([]string{run.String()})
				run.Reset()
			}
			consider(required(sub))
		}
		if run.Len() > 0 {
			consider([]string{run.String()})
		}
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

// better says whether requirement a filters better than b: its shortest
// literal is longer (a set is as selective as its weakest member), or as
// long with fewer literals to look for.
func better(a, b []string) bool {
	if b == nil {
		return true
	}
	shortest := func(ls []string) int {
		n := -1
		for _, l := range ls {
			if n < 0 || len(l) < n {
				n = len(l)
			}
		}
		return n
	}
	if sa, sb := shortest(a), shortest(b); sa != sb {
		return sa > sb
	}
	return len(a) < len(b)
}
