package corpus

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/journal"
	"github.com/nodediag/nodediag/agent/journal/journaltest"
	"github.com/nodediag/nodediag/agent/rules"
)

// Dir is the corpus, from this package.
const Dir = "../testdata/real"

// formatExample is the format's example (not a case of the corpus).
const formatExample = "testdata/format-example.yaml"

// TestCasesWellFormed loads every case as the scoring test does and checks
// what can be checked without the agent: sources, expectation, node, the
// evidence being a line of the case and pointing where the case has it.
func TestCasesWellFormed(t *testing.T) {
	cases := loadAll(t)
	urls := map[string]string{}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			if err := c.Validate(rules.Categories); err != nil {
				t.Fatal(err)
			}
			tree, lines, err := c.Tree()
			if err != nil {
				t.Fatal(err)
			}
			if err := c.CheckExpectation(tree, lines); err != nil {
				t.Fatal(err)
			}
		})
		if c.Path == formatExample {
			continue
		}
		for _, s := range c.Sources {
			// A thread may back one failure and one healthy case: the normal
			// lines it shows before its failure are an observation too.
			key := s.URL + " " + fmt.Sprint(c.Negative())
			if other, dup := urls[key]; dup && other != c.Name && !sharedSource(s) {
				t.Errorf("%s and %s are built on the same source %s: one failure, one case", other, c.Name, s.URL)
			}
			urls[key] = c.Name
		}
	}
}

// loadAll loads the corpus and the format's example.
func loadAll(t *testing.T) []*Case {
	t.Helper()
	cases, err := Load(Dir)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := LoadFile(formatExample)
	if err != nil {
		t.Fatal(err)
	}
	return append(cases, ex)
}

// sharedSource allows a documentation page (not a thread) to back several
// cases: a page of the kubeadm docs shows several normal lines.
func sharedSource(s Source) bool {
	return !strings.Contains(s.URL, "/issues/") && !strings.Contains(s.URL, "/pull/") && !strings.Contains(s.URL, "/discussions/")
}

// TestBuildWritesWhatTheCaseSays builds every case's root and reads its
// journal back with the agent's reader: the entries, their units and
// boots are the case's.
func TestBuildWritesWhatTheCaseSays(t *testing.T) {
	journaltest.NeedJournalRemote(t)
	for _, c := range loadAll(t) {
		t.Run(c.Name, func(t *testing.T) {
			b, err := c.Build(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			lines, _ := c.JournalLines()
			if len(lines) == 0 {
				return
			}
			h, err := host.New(b.Root, host.NoExec{})
			if err != nil {
				t.Fatal(err)
			}
			j, err := journal.Open(h, "/var/log/journal")
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			boots, err := j.Boots()
			if err != nil {
				t.Fatal(err)
			}
			if want := lines[len(lines)-1].Boot + 1; len(boots) != want {
				t.Errorf("%d boots read, the case has %d", len(boots), want)
			}
			n := 0
			err = j.Query(journal.Query{Fields: []string{"MESSAGE", "_SYSTEMD_UNIT", "UNIT", "_TRANSPORT"}}, func(e *journal.Entry) bool {
				if n < len(lines) {
					l := lines[n]
					if e.Fields["MESSAGE"] != l.Message || !e.Realtime.Equal(l.Time) {
						t.Errorf("entry %d: %s %q, the case has %s %q", n, e.Realtime.Format(time.RFC3339Nano), e.Fields["MESSAGE"], l.Time.Format(time.RFC3339Nano), l.Message)
					}
				}
				n++
				return true
			})
			if err != nil {
				t.Fatal(err)
			}
			if n != len(lines) {
				t.Errorf("%d entries read, the case has %d", n, len(lines))
			}
		})
	}
}

func TestJournalLines(t *testing.T) {
	c := &Case{Name: "x", Journal: []string{
		"2024-05-01T10:00:00Z kubelet[12]: E0501 failed",
		"2024-05-01T10:00:01Z kubelet.service systemd[1]: kubelet.service: Main process exited, code=exited, status=1/FAILURE",
		"2024-05-01T10:00:01Z systemd[1]: Started kubelet.service - kubelet: The Kubernetes Node Agent.",
		"-- boot --",
		"2024-05-02T10:00:00Z kernel: Out of memory: Killed process 12 (kubelet)",
		"2024-05-02T10:00:01Z sshd.service sshd[99]: Accepted publickey\nsecond line",
	}}
	ls, err := c.JournalLines()
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		unit, src string
		boot      int
	}{{"kubelet.service", "journal:kubelet.service", 0}, {"kubelet.service", "journal:kubelet.service", 0}, {"kubelet.service", "journal:kubelet.service", 0}, {"", "journal:kernel", 1}, {"sshd.service", "journal:sshd.service", 1}}
	if len(ls) != len(want) {
		t.Fatalf("%d lines, want %d", len(ls), len(want))
	}
	for i, w := range want {
		if ls[i].Unit != w.unit || ls[i].Source() != w.src || ls[i].Boot != w.boot {
			t.Errorf("line %d: unit %q source %q boot %d, want %+v", i, ls[i].Unit, ls[i].Source(), ls[i].Boot, w)
		}
	}
	if ls[4].Message != "Accepted publickey\nsecond line" {
		t.Errorf("multi-line message %q", ls[4].Message)
	}
	for _, bad := range [][]string{
		{"yesterday kubelet[1]: x"},
		{"2024-05-01T10:00:01Z kubelet[1]: x", "2024-05-01T10:00:00Z kubelet[1]: y"},
		{"2024-05-01T10:00:00Z sshd[1]: no unit"},
		{"2024-05-01T10:00:00Z kubelet: no pid"},
	} {
		if _, err := (&Case{Journal: bad}).JournalLines(); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestValidateNamesWhatIsWrong(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "bad-case.yaml")
	os.WriteFile(p, []byte(`title: x
sources: [{url: "not a url", quote: ""}]
node: {os: beos, role: worker, now: 2024-05-01T00:00:00Z}
expect: {category: kubelet.no-such, evidence: "", points_to: "kubelet.service"}
`), 0o644)
	c, err := LoadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Validate(rules.Categories)
	for _, want := range []string{"not a URL", "no verbatim quote", "not a category", "expect.evidence is empty", "points_to", "node.os"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
	os.WriteFile(p, []byte("title: x\nnode: {rol: worker}\n"), 0o644)
	if _, err := LoadFile(p); err == nil || !strings.Contains(err.Error(), "rol") {
		t.Errorf("an unknown field: %v", err)
	}
}

// TestJournalForms: a list whose unquoted items YAML reads as one-key
// mappings, and a block, give the same lines, byte for byte.
func TestJournalForms(t *testing.T) {
	head := "title: x\nnode: {os: debian-12, role: none, now: 2024-05-01T11:00:00Z}\nexpect: {category: none, evidence: '', points_to: ''}\n"
	list, err := parse([]byte(head + `journal:
  - 2024-05-01T10:00:05Z kubelet[1234]: E0501 10:00:05.1  1234 run.go:74] failed  to run  # not a comment
  - "2024-05-01T10:00:06Z systemd[1]: Started kubelet.service - kubelet: The Kubernetes Node Agent."
  - -- boot --
`))
	if err != nil {
		t.Fatal(err)
	}
	block, err := parse([]byte(head + `journal: |
  2024-05-01T10:00:05Z kubelet[1234]: E0501 10:00:05.1  1234 run.go:74] failed  to run  # not a comment
  2024-05-01T10:00:06Z systemd[1]: Started kubelet.service - kubelet: The Kubernetes Node Agent.
  -- boot --
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"2024-05-01T10:00:05Z kubelet[1234]: E0501 10:00:05.1  1234 run.go:74] failed  to run  # not a comment",
		"2024-05-01T10:00:06Z systemd[1]: Started kubelet.service - kubelet: The Kubernetes Node Agent.",
		"-- boot --",
	}
	for name, c := range map[string]*Case{"list": list, "block": block} {
		if strings.Join(c.Journal, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: %q", name, c.Journal)
		}
	}
}

// A node whose kubelet has no version has no kubernetes packages: no
// kubelet binary, unit, drop-in or environment file; one with a version has
// them all.
func TestNoKubeletNoUnit(t *testing.T) {
	c, err := LoadFile(formatExample)
	if err != nil {
		t.Fatal(err)
	}
	tree, _, err := c.Tree()
	if err != nil {
		t.Fatal(err)
	}
	unit := "usr/lib/systemd/system/kubelet.service"
	if _, ok := tree[unit]; !ok {
		t.Fatalf("a node with kubelet %s has no %s", c.Node.Versions["kubelet"], unit)
	}
	c.Node.Versions["kubelet"] = ""
	tree, _, err = c.Tree()
	if err != nil {
		t.Fatal(err)
	}
	for p := range tree {
		if strings.Contains(p, "kubelet.service") || p == "etc/default/kubelet" || p == "etc/sysconfig/kubelet" || p == "usr/bin/kubelet" {
			t.Errorf("a node without a kubelet has %s", p)
		}
	}
}
