package rules

import (
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRequiredLiterals(t *testing.T) {
	tests := []struct {
		pattern string
		want    []string
	}{
		{`failed to parse kubelet flag: unknown flag: (?P<flag>--[\w-]+)`, []string{"failed to parse kubelet flag: unknown flag: "}},
		{`(?i)no space left on device`, []string{"no space left on device"}},
		{`curl: \((?:6|7|22)\) .*`, []string{"curl: ("}},
		{`E: Unable to locate package|dpkg: error processing (?:archive|package)`, []string{"e: unable to locate package", "dpkg: error processing "}},
		{`\[ERROR (?P<check>[\w-]+)\]`, []string{"[error "}},
		{`a|bc`, nil}, // too short to help
		{`(?:x509)?cert`, []string{"cert"}},
		{`.*`, nil},
		// A part whose own requirement has a short member ("c" of
		// cannot|could) loses to a longer literal run of the same
		// concatenation: every branch of the disk signature then keeps
		// its "no space left on device".
		{`(?:failed to|cannot|could not) [^:]*: no space left on device`, []string{": no space left on device"}},
		{`(?i)(?:'[^']+': no space left on device|(?:failed to|cannot) [^:]*: no space left on device)`, []string{"': no space left on device", ": no space left on device"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, requiredLiterals(tt.pattern)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.pattern, diff)
		}
	}
}

// TestHintsNeverLoseAMatch checks, for every shipped signature, that every
// example and counterexample gets the same answer with and without the hint
// check: hints are an optimisation, never a change of meaning.
func TestHintsNeverLoseAMatch(t *testing.T) {
	sigs, err := LoadSignatures(nil)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, s := range sigs {
		lines = append(lines, s.Examples...)
		lines = append(lines, s.Counterexamples...)
	}
	for _, s := range sigs {
		re := regexp.MustCompile(s.Match)
		for _, l := range lines {
			lower, ascii := lowerASCII(l)
			if got, want := mayMatch(s.hints, lower, ascii) && re.MatchString(l), re.MatchString(l); got != want {
				t.Errorf("%s/%s: hints %q change the answer for %q", s.File(), s.ID, s.hints, l)
			}
		}
	}
}

func FuzzHints(f *testing.F) {
	f.Add(`unknown flag: (?P<flag>--[\w-]+)`, "E0501 unknown flag: --network-plugin")
	f.Add(`(?i)No Space left`, "write x: NO SPACE LEFT on device")
	f.Fuzz(func(t *testing.T, pattern, line string) {
		re, err := regexp.Compile(pattern)
		if err != nil {
			return
		}
		lower, ascii := lowerASCII(line)
		if re.MatchString(line) && !mayMatch(requiredLiterals(pattern), lower, ascii) {
			t.Errorf("pattern %q matches %q but its hints %q say it cannot", pattern, line, requiredLiterals(pattern))
		}
	})
}
