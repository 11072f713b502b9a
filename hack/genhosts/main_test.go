package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommittedHostsMatchTheGenerator regenerates every example host into a
// temporary directory and compares it with agent/testdata/hosts: a tree
// edited by hand, or a generator change not followed by `make hosts`, fails.
func TestCommittedHostsMatchTheGenerator(t *testing.T) {
	committed := filepath.Join("..", "..", "agent", "testdata", "hosts")
	tmp := t.TempDir()
	for _, s := range scenarios() {
		if err := write(tmp, s); err != nil {
			t.Fatal(err)
		}
		want := snapshot(t, filepath.Join(tmp, s.name))
		got := snapshot(t, filepath.Join(committed, s.name))
		for name, w := range want {
			g, ok := got[name]
			switch {
			case !ok:
				t.Errorf("%s/%s: missing from the committed tree (run make hosts)", s.name, name)
			case g != w:
				t.Errorf("%s/%s: differs from the generator (run make hosts)", s.name, name)
			}
		}
		for name := range got {
			if _, ok := want[name]; !ok && !golden(name) {
				t.Errorf("%s/%s: not produced by the generator (run make hosts, or move a hand-made host out of the generator's list)", s.name, name)
			}
		}
	}
}

// golden files sit next to the trees; the agent's test owns them.
func golden(name string) bool {
	return !strings.HasPrefix(name, "root/") && name != "args"
}

// snapshot maps each path under dir to its kind, mode and content.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." || d.IsDir() {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "link:" + target
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			// Git keeps only the executable bit; the rest depends on umask.
			kind := "file:"
			if fi.Mode()&0o111 != 0 {
				kind = "exec:"
			}
			out[rel] = kind + string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
