package artifacts

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var updateDoc = flag.Bool("update-doc", false, "rewrite the machine file table of docs/ci-trees.md")

const (
	docPath  = "../../docs/ci-trees.md"
	docBegin = "<!-- machine files: generated from collector/artifacts/files.go by TestMachineFilesDoc -update-doc -->"
	docEnd   = "<!-- end of machine files -->"
)

// machineFilesTable is the doc's table of MachineFiles.
func machineFilesTable() string {
	var b strings.Builder
	b.WriteString("| file | written by | command | read | how, or why not |\n|---|---|---|---|---|\n")
	cell := func(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "|", "\\|"), "\\\\", "\\") }
	for _, f := range MachineFiles {
		read := "no"
		if f.Read {
			read = "yes"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", f.Name, f.Who, cell(f.Command), read, cell(f.Use))
	}
	return b.String()
}

// TestMachineFilesDoc: docs/ci-trees.md lists every machine file analyze
// knows, as files.go says it is used.
func TestMachineFilesDoc(t *testing.T) {
	b, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i, j := strings.Index(doc, docBegin), strings.Index(doc, docEnd)
	if i < 0 || j < i {
		t.Fatalf("%s: no %q ... %q section", docPath, docBegin, docEnd)
	}
	want := docBegin + "\n" + machineFilesTable() + docEnd
	got := doc[i : j+len(docEnd)]
	if got == want {
		return
	}
	if *updateDoc {
		if err := os.WriteFile(docPath, []byte(doc[:i]+want+doc[j+len(docEnd):]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's machine file table is not files.go's: run go test ./collector/artifacts -run TestMachineFilesDoc -update-doc", docPath)
}

// Every machine file is listed once, with all its columns.
func TestMachineFilesAreUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range MachineFiles {
		if seen[f.Name] {
			t.Errorf("%s listed twice", f.Name)
		}
		seen[f.Name] = true
		if f.Use == "" || f.Who == "" || f.Command == "" {
			t.Errorf("%s: an empty column", f.Name)
		}
	}
}
