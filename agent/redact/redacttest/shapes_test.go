package redacttest

import (
	"encoding/base64"
	"strings"
	"testing"
)

// TestCorpusWellFormed: the corpus parses, is as large as SECURITY.md says,
// and every section holds shapes.
func TestCorpusWellFormed(t *testing.T) {
	shapes, err := parse(shapesFile)
	if err != nil {
		t.Fatal(err)
	}
	secret, innocent := 0, 0
	sections := map[string]int{}
	seen := map[string]int{}
	for _, s := range shapes {
		sections[s.Section]++
		if len(s.Secrets) > 0 {
			secret++
		} else {
			innocent++
		}
		if prev, ok := seen[s.Text]; ok {
			t.Errorf("%s repeats line %d", s, prev)
		}
		seen[s.Text] = s.Line
	}
	t.Logf("%d shapes with secrets, %d innocent lines, %d sections", secret, innocent, len(sections))
	if secret < MinShapes {
		t.Errorf("%d shapes with secrets, want at least %d", secret, MinShapes)
	}
}

func TestParseErrors(t *testing.T) {
	for _, bad := range []string{
		"no section ⟦0123456789⟧",
		"[s]\nopen ⟦0123456789",
		"[s]\nclose 0123456789⟧",
		"[s]\nshort ⟦abc⟧",
		"[s]\nno secret at all",
		"[s]\n= innocent with ⟦0123456789⟧",
	} {
		if _, err := parse(bad); err == nil {
			t.Errorf("parse(%q) accepted it", bad)
		}
	}
}

// TestLeaksFindsEveryEncoding: a check that cannot see a leak proves
// nothing.
func TestLeaksFindsEveryEncoding(t *testing.T) {
	sh := Shape{Section: "t", Text: "password=Hunter2&Secret/x", Secrets: []string{"Hunter2&Secret/x"}}
	for _, f := range Forms {
		if got := Leaks(f.In(sh.Text), []Shape{sh}); len(got) != 1 {
			t.Errorf("%s form: %d leaks found in %q, want 1", f, len(got), f.In(sh.Text))
		}
	}
	for _, prefix := range []string{"", "a", "ab", "abc"} {
		enc := base64.StdEncoding.EncodeToString([]byte(prefix + sh.Secrets[0] + "tail"))
		if got := Leaks(enc, []Shape{sh}); len(got) != 1 {
			t.Errorf("base64 after %d bytes: not found in %q", len(prefix), enc)
		}
	}
	if got := Leaks(strings.ReplaceAll(Plain.In(sh.Text), "Hunter2", "[REDACTED]"), []Shape{sh}); len(got) != 0 {
		t.Errorf("a redacted line leaks: %v", got)
	}
}
