package docscheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// securityDoc is SECURITY.md, from this package's directory.
const securityDoc = "../../SECURITY.md"

// moduleRoot is the module's root, from this package's directory: the
// directories of references are relative to it.
const moduleRoot = "../.."

// minReferences is the fewest test references SECURITY.md may hold: fewer
// means references were lost (reworded out of the checked form), not that
// the promises need fewer proofs.
const minReferences = 20

// reference is `package/path: TestName` in backticks: a directory of the
// module, relative to its root, and a Test, Fuzz or Benchmark function.
var reference = regexp.MustCompile("^`([A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)*): ((?:Test|Fuzz|Benchmark)[A-Za-z0-9_]*)`$")

// codeSpan is a Markdown code span on one line.
var codeSpan = regexp.MustCompile("`[^`\n]+`")

// namesTest says whether a code span looks like it cites a test (a colon,
// then a Test, Fuzz or Benchmark name): such a span must be a reference in
// the checked form, so that a typo cannot make a citation unchecked.
var namesTest = regexp.MustCompile(`:\s*(?:Test|Fuzz|Benchmark)[A-Z0-9_]`)

type ref struct {
	dir, name string
	line      int
}

// references returns the references of doc, and the code spans that cite a
// test without being in the checked form.
func references(doc string) (refs []ref, malformed []string) {
	for i, line := range strings.Split(doc, "\n") {
		for _, span := range codeSpan.FindAllString(line, -1) {
			m := reference.FindStringSubmatch(span)
			switch {
			case m != nil:
				refs = append(refs, ref{dir: m[1], name: m[2], line: i + 1})
			case namesTest.MatchString(span):
				malformed = append(malformed, fmt.Sprintf("SECURITY.md:%d: %s", i+1, span))
			}
		}
	}
	return refs, malformed
}

// testFuncs returns the top-level functions (no receiver) declared in the
// _test.go files of dir, whatever their build constraints, and how many
// such files there are.
func testFuncs(dir string) (map[string]bool, int, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, 0, err
	}
	funcs := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, 0, err
		}
		for _, d := range file.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil {
				funcs[fd.Name.Name] = true
			}
		}
	}
	return funcs, len(files), nil
}

// TestSecurityDocReferencesExist: every test SECURITY.md cites as the proof
// of a promise is declared in a _test.go file of the directory it names, so
// that renaming or removing one fails here until the document follows.
func TestSecurityDocReferencesExist(t *testing.T) {
	b, err := os.ReadFile(securityDoc)
	if err != nil {
		t.Fatal(err)
	}
	refs, malformed := references(string(b))
	for _, m := range malformed {
		t.Errorf("%s cites a test but is not of the form `package/path: TestName`", m)
	}
	if len(refs) < minReferences {
		t.Fatalf("SECURITY.md cites %d tests as `package/path: TestName`, want at least %d", len(refs), minReferences)
	}
	byDir := map[string][]ref{}
	for _, r := range refs {
		byDir[r.dir] = append(byDir[r.dir], r)
	}
	dirs := make([]string, 0, len(byDir))
	for d := range byDir {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	for _, d := range dirs {
		funcs, n, err := testFuncs(filepath.Join(moduleRoot, filepath.FromSlash(d)))
		if err != nil {
			t.Errorf("%s: %v", d, err)
			continue
		}
		for _, r := range byDir[d] {
			switch {
			case n == 0:
				t.Errorf("SECURITY.md:%d: `%s: %s`: %s has no _test.go file", r.line, r.dir, r.name, d)
			case !funcs[r.name]:
				t.Errorf("SECURITY.md:%d: `%s: %s`: no such function in the _test.go files of %s (renamed or removed? update SECURITY.md)", r.line, r.dir, r.name, d)
			}
		}
	}
	t.Logf("%d references to tests in %d packages checked", len(refs), len(dirs))
}

// TestReferenceCheckCanFail: the parser of references sees the checked
// form and only it, a span that cites a test in another form is reported,
// and a function that is declared nowhere is not found: the check above
// can fail.
func TestReferenceCheckCanFail(t *testing.T) {
	doc := "- `agent/cli: TestExecNone`, `agent/redact: FuzzPlantedSecret`; not `--exec auto`, `nodediag:agents`, `a: b`.\n" +
		"- `agent/cli:TestExecNone` and `see agent/cli: TestExecNone`.\n"
	refs, malformed := references(doc)
	want := []ref{{"agent/cli", "TestExecNone", 1}, {"agent/redact", "FuzzPlantedSecret", 1}}
	if len(refs) != len(want) || refs[0] != want[0] || refs[1] != want[1] {
		t.Errorf("references = %+v, want %+v", refs, want)
	}
	if len(malformed) != 2 {
		t.Errorf("malformed = %q, want the two spans of line 2", malformed)
	}

	funcs, n, err := testFuncs(".")
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 || !funcs["TestSecurityDocReferencesExist"] || !funcs["TestReferenceCheckCanFail"] {
		t.Errorf("this package's own tests not found in %d file(s): %v", n, funcs)
	}
	if funcs["TestRenamedAway"] {
		t.Error("a function that is declared nowhere was found")
	}
}
