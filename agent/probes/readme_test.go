package probes

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeNamesEveryProbe: the README's "What it looks at" table names
// every probe the agent runs, in backticks.
func TestReadmeNamesEveryProbe(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	start := strings.Index(s, "## What it looks at")
	if start < 0 {
		t.Fatal(`README.md has no "## What it looks at" section`)
	}
	table := s[start:]
	if end := strings.Index(table[3:], "\n## "); end >= 0 {
		table = table[:end+3]
	}
	for _, p := range All() {
		if !strings.Contains(table, "`"+p.Name()+"`") {
			t.Errorf("README.md's What it looks at does not name the probe %s", p.Name())
		}
	}
}
