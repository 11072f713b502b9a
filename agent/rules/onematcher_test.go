package rules

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// matcherFiles are the only files of the package that read a log line's
// text: the matcher, its grouping of unclaimed error lines by template, the
// signatures it runs (their context lines) and the quoting of a line.
var matcherFiles = map[string]bool{"match.go": true, "templates.go": true, "signatures.go": true, "quote.go": true}

// TestRulesDoNotReadLogText: a log line is recognised once, by the matcher
// (match.go), and its matches are handed to the Go rules. A Go rule that
// reads a LogLine's text, or runs logline's parsing or word scan itself, is
// a second matcher that can disagree with the signatures and that
// --rules-dir cannot change.
func TestRulesDoNotReadLogText(t *testing.T) {
	fset := token.NewFileSet()
	var files []*ast.File
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	exports := exportData(t)
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		p, ok := exports[path]
		if !ok {
			return nil, os.ErrNotExist
		}
		return os.Open(p)
	})}
	info := &types.Info{Selections: map[*ast.SelectorExpr]*types.Selection{}, Uses: map[*ast.Ident]types.Object{}}
	if _, err := conf.Check("github.com/nodediag/nodediag/agent/rules", fset, files, info); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := filepath.Base(fset.Position(f.Pos()).Filename)
		if matcherFiles[name] {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if obj := info.Uses[sel.Sel]; obj != nil && obj.Pkg() != nil && obj.Pkg().Path() == "github.com/nodediag/nodediag/agent/logline" {
				t.Errorf("%s: a Go rule calls logline.%s: let the matcher (match.go) read the line", fset.Position(sel.Pos()), sel.Sel.Name)
			}
			s := info.Selections[sel]
			if s == nil || (sel.Sel.Name != "GetText" && sel.Sel.Name != "Text") {
				return true
			}
			recv := s.Recv()
			if p, ok := recv.(*types.Pointer); ok {
				recv = p.Elem()
			}
			if named, ok := recv.(*types.Named); ok && named.Obj().Name() == "LogLine" {
				t.Errorf("%s: a Go rule reads a log line's text: use the matcher's Input.Matched, MatchedIn, Claim, HasFact or Notable", fset.Position(sel.Pos()))
			}
			return true
		})
	}
}

// exportData maps the package's dependencies to their compiled export data
// (go list -export), so that the package can be type-checked in the test.
func exportData(t *testing.T) map[string]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-export", "-deps", "-json=ImportPath,Export", ".")
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list -export: %v\n%s", err, stderr.String())
	}
	m := map[string]string{}
	dec := json.NewDecoder(&out)
	for dec.More() {
		var p struct{ ImportPath, Export string }
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if p.Export != "" {
			m[p.ImportPath] = p.Export
		}
	}
	return m
}
