package runcommand

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nodediag/nodediag/internal/testenv"
)

// repoRoot is the repository, from this package's directory.
const repoRoot = "../.."

// shellShebang matches the first line of a sh or bash script.
var shellShebang = regexp.MustCompile(`^#!\s*(/usr/bin/env\s+)?(/bin/|/usr/bin/)?(ba|da)?sh(\s|$)`)

// shellScripts lists the repository's shell scripts: every *.sh file git
// knows (tracked, or new and not ignored), and every file with a sh or bash
// shebang under scripts/, hack/ and .ci/ (.ci/run has no extension). The
// example hosts' fake binaries (agent/testdata) are fixtures, not scripts of
// the project.
func shellScripts(t *testing.T) []string {
	t.Helper()
	git := testenv.RequireBinary(t, "git", "git")
	out, err := exec.Command(git, "-C", repoRoot, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	var scripts []string
	seen := map[string]bool{}
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if f == "" || seen[f] {
			continue
		}
		seen[f] = true
		path := filepath.Join(repoRoot, f)
		if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
			continue // deleted in the work tree, or not a file
		}
		if strings.HasSuffix(f, ".sh") {
			scripts = append(scripts, f)
			continue
		}
		if !strings.HasPrefix(f, "scripts/") && !strings.HasPrefix(f, "hack/") && !strings.HasPrefix(f, ".ci/") {
			continue
		}
		fh, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		first, _ := bufio.NewReader(fh).ReadString('\n')
		fh.Close()
		if shellShebang.MatchString(first) {
			scripts = append(scripts, f)
		}
	}
	return scripts
}

// TestShellcheck runs shellcheck (the Debian package) on every shell script
// of the repository; any finding, at any severity, fails.
func TestShellcheck(t *testing.T) {
	shellcheck := testenv.RequireBinary(t, "shellcheck", "shellcheck")
	scripts := shellScripts(t)
	for _, want := range []string{"scripts/run-command/nodediag-vm.sh", "scripts/run-command/nodediag-az.sh", "scripts/demo.sh", ".ci/run"} {
		found := false
		for _, s := range scripts {
			found = found || s == want
		}
		if !found {
			t.Errorf("%s is not among the scripts checked: %v", want, scripts)
		}
	}
	for _, s := range scripts {
		t.Run(s, func(t *testing.T) {
			cmd := exec.Command(shellcheck, "--format=gcc", s)
			cmd.Dir = repoRoot
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("shellcheck %s: %v\n%s", s, err, out)
			}
		})
	}
}
