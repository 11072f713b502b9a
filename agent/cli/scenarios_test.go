package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/nodediag/nodediag/agent/report"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

var update = flag.Bool("update", false, "rewrite the golden outputs of the scenarios (review the diff!)")

// scenarioDir holds the example hosts: each is a fake node.
//
//	<name>/root/...   the host's files, relative symlinks and fake binaries (shell scripts) included
//	<name>/args       extra arguments of `nodediag-agent check`, one per line (optional)
//	<name>/want.txt   golden --output text
//	<name>/want.json  golden --output json (probe durations zeroed)
//	<name>/want.compact golden --output compact
//	<name>/exit       expected exit code
//
// Adding a regression test for a field incident is adding a directory.
const scenarioDir = "../testdata/hosts"

type scenario struct {
	name, dir string
	args      []string
}

func scenarios(t *testing.T) []scenario {
	t.Helper()
	ents, err := os.ReadDir(scenarioDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []scenario
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(scenarioDir, e.Name())
		// The example hosts' binaries are the project's stand-in scripts:
		// running them is an explicit opt-in on a copy (--exec local).
		s := scenario{name: e.Name(), dir: dir, args: []string{"check", "--root", filepath.Join(dir, "root"), "--exec", "local"}}
		if b, err := os.ReadFile(filepath.Join(dir, "args")); err == nil {
			for _, l := range strings.Split(string(b), "\n") {
				if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
					s.args = append(s.args, l)
				}
			}
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		t.Fatal("no scenarios")
	}
	return out
}

func run(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	code = Run(context.Background(), args, &o, &e)
	return o.String(), e.String(), code
}

// TestScenarios runs the agent on every example host and compares its three
// outputs and its exit code with the goldens. It also checks that the agent
// left the host tree exactly as it found it.
func TestScenarios(t *testing.T) {
	for _, s := range scenarios(t) {
		t.Run(s.name, func(t *testing.T) {
			before := hashTree(t, filepath.Join(s.dir, "root"))

			text, stderr, code := run(t, append(s.args, "--output", "text")...)
			if code == ExitUsage {
				t.Fatalf("agent failed (exit 2): %s", stderr)
			}
			js, _, jcode := run(t, append(s.args, "--output", "json")...)
			compact, _, ccode := run(t, append(s.args, "--output", "compact")...)
			if jcode != code || ccode != code {
				t.Errorf("exit codes differ between outputs: text %d, json %d, compact %d", code, jcode, ccode)
			}
			js = normalizeJSON(t, js)

			golden(t, filepath.Join(s.dir, "want.txt"), text)
			golden(t, filepath.Join(s.dir, "want.json"), js)
			golden(t, filepath.Join(s.dir, "want.compact"), compact)
			golden(t, filepath.Join(s.dir, "exit"), strconv.Itoa(code)+"\n")

			if len(compact) > report.MaxCompact {
				t.Errorf("compact output is %d bytes, over %d", len(compact), report.MaxCompact)
			}
			lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
			if last := lines[len(lines)-1]; !strings.HasPrefix(last, "SUMMARY ") {
				t.Errorf("the last line of text output is %q, want SUMMARY ...", last)
			}
			if after := hashTree(t, filepath.Join(s.dir, "root")); after != before {
				t.Error("the agent changed the host tree")
			}
		})
	}
}

// normalizeJSON zeroes what changes from run to run (probe durations).
func normalizeJSON(t *testing.T, js string) string {
	t.Helper()
	var r nodediagv1.Report
	if err := protojson.Unmarshal([]byte(js), &r); err != nil {
		t.Fatalf("--output json is not a Report: %v\n%s", err, js)
	}
	for _, p := range r.Probes {
		p.DurationMs = 0
	}
	b, err := report.MarshalJSON(&r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./agent/cli -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got):\n%s", path, diff)
	}
}

// hashTree hashes names, modes, link targets and contents of a tree.
func hashTree(t *testing.T, root string) string {
	t.Helper()
	h := sha256.New()
	var paths []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		paths = append(paths, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(paths)
	for _, p := range paths {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(h, p+"\x00"+fi.Mode().String()+"\x00")
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			io.WriteString(h, target)
		case fi.Mode().IsRegular():
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(h, f)
			f.Close()
			io.WriteString(h, "\x00"+fi.ModTime().String())
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}
