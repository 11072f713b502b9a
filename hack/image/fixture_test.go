package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodediag/nodediag/internal/testenv"
)

// What the tests build with: `make image` is run with these in its
// environment (the Makefile's VERSION, REVISION and SOURCE_DATE_EPOCH are
// `?=`, so the environment wins), exactly as written in the docs.
const (
	testVersion  = "v0.0.0-imagetest"
	testRevision = "0123456789abcdef0123456789abcdef01234567"
	testEpoch    = 1700000000 // 2023-11-14T22:13:20Z
)

// makeEnv is the environment of every make run of the tests: the build
// stamps, and none of an outer make's variables.
func makeEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "VERSION", "REVISION", "SOURCE_DATE_EPOCH", "IMAGE_REPO", "IMAGE_ARCHES":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "VERSION="+testVersion, "REVISION="+testRevision, "SOURCE_DATE_EPOCH="+strconv.Itoa(testEpoch))
}

// shared is the directory of the fixtures every test of the package uses,
// removed by TestMain.
var shared string

func TestMain(m *testing.M) {
	var err error
	if shared, err = os.MkdirTemp("", "ndimage"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	code := m.Run()
	os.RemoveAll(shared)
	os.Exit(code)
}

// repoRoot is this repository's working tree.
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// copyRepo copies the repository's working tree (tracked files and
// untracked ones git does not ignore: no bin/, no .git) to dst, as a fresh
// checkout would have it, so that `make` can run there without touching
// the repository's own bin/.
func copyRepo(t testing.TB, dst string) {
	t.Helper()
	testenv.RequireBinary(t, "git", "git")
	root := repoRoot(t)
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, rel := range strings.Split(string(out), "\x00") {
		if rel == "" {
			continue
		}
		src, to := filepath.Join(root, rel), filepath.Join(dst, rel)
		fi, err := os.Lstat(src)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the working tree
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(src)
			if err == nil {
				err = os.Symlink(target, to)
			}
			if err != nil {
				t.Fatal(err)
			}
		case fi.Mode().IsRegular():
			if err := copyFile(src, to, fi.Mode().Perm()); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// copyTree copies the tree under src to dst but src's top-level bin/: a
// second checkout of the same source.
func copyTree(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if rel == "bin" && d.IsDir() {
			return filepath.SkipDir
		}
		to := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(to, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		case d.Type().IsRegular():
			return copyFile(p, to, info.Mode().Perm())
		}
		return nil
	})
	if err != nil {
		t.Fatalf("copying %s: %v", src, err)
	}
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// A built archive, as the image builder prints it.
type built struct {
	Archive, Ref, Digest, Platforms string
	Size                            int64
}

// parseBuilt reads the builder's lines ("ARCHIVE  REF  DIGEST  PLATFORMS
// N bytes") among make's, by image name.
func parseBuilt(out string) (map[string]built, error) {
	res := map[string]built{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) != 6 || !strings.HasSuffix(f[0], ".oci.tar") || f[5] != "bytes" {
			continue
		}
		n, err := strconv.ParseInt(f[4], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("size in %q: %v", l, err)
		}
		res[strings.TrimSuffix(filepath.Base(f[0]), ".oci.tar")] = built{Archive: f[0], Ref: f[1], Digest: f[2], Platforms: f[3], Size: n}
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("no archive line in\n%s", out)
	}
	return res, nil
}

// runIn runs a shell command line in dir with env added to makeEnv's, and
// returns its combined output and exit code; args are appended to the line
// as "$@". A command that cannot start fails the test.
func runIn(t testing.TB, dir string, env []string, line string, args ...string) (string, int) {
	t.Helper()
	script := line
	if len(args) > 0 {
		script += ` "$@"`
	}
	cmd := exec.Command("/bin/sh", append([]string{"-c", script, "sh"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(makeEnv(), env...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	}
	t.Fatalf("%s: %v\n%s", line, err, out)
	return "", -1
}

// The fixture: `make image` run once in a copy of the repository.
type madeImages struct {
	Dir    string           // the copy; its bin/ holds the binaries, bin/images the archives
	Built  map[string]built // by image name
	Output string           // what make printed
	took   time.Duration
}

var (
	madeOnce sync.Once
	made     *madeImages
	madeErr  error
)

// makeImages builds the images once for all the tests: `make image`, as the docs
// say, in a copy of the repository (the first call copies and builds; the
// Go build cache makes the binaries a link step when they were built before).
func makeImages(t testing.TB) *madeImages {
	t.Helper()
	testenv.RequireBinary(t, "make", "make")
	testenv.RequireBinary(t, "go", "golang")
	madeOnce.Do(func() {
		// Replaced below on success; stays if copyRepo ends the test.
		madeErr = errors.New("building the images failed in an earlier test")
		dir := filepath.Join(shared, "repo")
		copyRepo(t, dir)
		start := time.Now()
		out, code := runIn(t, dir, nil, cmdMakeImage)
		if code != 0 {
			madeErr = fmt.Errorf("make image: exit %d\n%s", code, out)
			return
		}
		b, err := parseBuilt(out)
		if err != nil {
			madeErr = err
			return
		}
		made, madeErr = &madeImages{Dir: dir, Built: b, Output: out, took: time.Since(start)}, nil
	})
	if madeErr != nil {
		t.Fatal(madeErr)
	}
	return made
}
