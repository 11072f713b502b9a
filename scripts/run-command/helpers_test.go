package runcommand

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const (
	vmScript = "nodediag-vm.sh"
	azScript = "nodediag-az.sh"
	agentPkg = "github.com/nodediag/nodediag/cmd/nodediag-agent"
	hostsDir = "../../agent/testdata/hosts"
	// outputLimit is what run-command keeps of each stream: the Linux
	// extensions tail stdout and stderr to 4 KiB each (maxTailLen in
	// Azure/run-command-extension-linux main/cmds.go).
	outputLimit = 4096
)

// host is an example host of agent/testdata/hosts: its absolute root and the
// agent arguments it needs (its args file, then --offline: nothing in these
// tests may leave the machine).
type host struct {
	name string
	root string
	args []string // --root ROOT, the args file, --offline
}

func exampleHosts(t *testing.T) []host {
	t.Helper()
	ents, err := os.ReadDir(hostsDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []host
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		out = append(out, exampleHost(t, e.Name()))
	}
	if len(out) == 0 {
		t.Fatal("no example hosts")
	}
	return out
}

func exampleHost(t *testing.T, name string) host {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join(hostsDir, name))
	if err != nil {
		t.Fatal(err)
	}
	h := host{name: name, root: filepath.Join(dir, "root")}
	h.args = []string{"--root", h.root}
	if b, err := os.ReadFile(filepath.Join(dir, "args")); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				h.args = append(h.args, l)
			}
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	h.args = append(h.args, "--offline")
	return h
}

// result is what a process printed and its exit code.
type result struct {
	stdout, stderr string
	code           int
}

// run runs argv with the test's environment minus every NODEDIAG_* variable,
// plus env, and returns what it printed and its exit code.
func run(t *testing.T, env []string, argv ...string) result {
	t.Helper()
	return runIn(t, "", env, argv...)
}

// runIn is run in directory dir.
func runIn(t *testing.T, dir string, env []string, argv ...string) result {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NODEDIAG_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var exitErr *exec.ExitError
	code := 0
	switch {
	case errors.As(err, &exitErr):
		code = exitErr.ExitCode()
	case err != nil:
		t.Fatalf("running %s: %v", strings.Join(argv, " "), err)
	}
	return result{o.String(), e.String(), code}
}

// agentCompact is what the agent itself prints with check --output compact.
func agentCompact(t *testing.T, agent string, h host) result {
	t.Helper()
	return run(t, nil, append([]string{agent, "check", "--output", "compact"}, h.args...)...)
}

// serve serves files (URL path → content) on 127.0.0.1; any other path is a 404.
func serve(t *testing.T, files map[string][]byte) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// assertEmpty fails unless dir holds nothing: what the scripts download or
// write is removed before they exit.
func assertEmpty(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if len(names) > 0 {
		t.Errorf("left behind in %s: %v", dir, names)
	}
}

// exitLine is nodediag-vm.sh's own (and only) line.
var exitLine = regexp.MustCompile(`^nodediag-vm: exit ([0-9]+): ([^\n]+)\n$`)

// assertExitLine checks that stderr is exactly the script's one line, with
// code, and that it contains want; it returns the message.
func assertExitLine(t *testing.T, stderr string, code int, want string) string {
	t.Helper()
	m := exitLine.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("stderr is not one nodediag-vm line:\n%s", stderr)
	}
	if m[1] != strconv.Itoa(code) {
		t.Errorf("the exit line says %s, the exit code is %d: %q", m[1], code, stderr)
	}
	if !strings.Contains(m[2], want) {
		t.Errorf("exit line %q does not say %q", m[2], want)
	}
	if len(stderr) > 300 {
		t.Errorf("the exit line is %d bytes, want a short line", len(stderr))
	}
	return m[2]
}

// tail is the last n bytes of s, as run-command keeps them.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// actionMessage is value[0].message of `az vm run-command invoke` for a
// Linux VM: the RunCommandLinux extension's "Enable succeeded: " status with
// "\n[stdout]\n%s\n[stderr]\n%s" of the tails (Azure/run-command-extension-linux
// main/cmds.go; the shape az returns is quoted in Azure/azure-cli#7505).
func actionMessage(r result) string {
	return "Enable succeeded: \n[stdout]\n" + tail(r.stdout, outputLimit) + "\n[stderr]\n" + tail(r.stderr, outputLimit)
}

// summaryCause is the verdict and the root cause the operator's table should
// show for the agent output out: read here from the SUMMARY line
// independently of nodediag-az.sh's own parsing.
func summaryCause(t *testing.T, out string) (verdict, cause string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	last := lines[len(lines)-1]
	f := strings.SplitN(last, " ", 4)
	if len(f) < 3 || f[0] != "SUMMARY" {
		t.Fatalf("no SUMMARY line last: %q", last)
	}
	if f[1] == "ok" {
		return "ok", "-"
	}
	cause = f[3]
	if i := strings.LastIndex(cause, " ("); i > 0 && strings.HasSuffix(cause, ")") {
		cause = cause[:i]
	}
	return f[1], cause
}

// pathWithout is a directory of symlinks to every command of /usr/bin and
// /bin but the ones named, plus extra (name → target): a PATH for testing
// what the scripts do on a VM that lacks a tool.
func pathWithout(t *testing.T, without []string, extra map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	skip := map[string]bool{}
	for _, n := range without {
		skip[n] = true
	}
	for _, src := range []string{"/usr/bin", "/bin", "/usr/sbin", "/sbin"} {
		ents, err := os.ReadDir(src)
		if err != nil {
			continue
		}
		for _, e := range ents {
			n := e.Name()
			if skip[n] {
				continue
			}
			if _, err := os.Lstat(filepath.Join(dir, n)); err == nil {
				continue
			}
			if err := os.Symlink(filepath.Join(src, n), filepath.Join(dir, n)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for n, target := range extra {
		os.Remove(filepath.Join(dir, n))
		if err := os.Symlink(target, filepath.Join(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// call is one recorded invocation of the stand-in az.
type call struct {
	argv   []string
	script string // the content of an @file argument, if any
}

// calls reads what the stand-in az recorded, sorted by argv.
func calls(t *testing.T, dir string) []call {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "calls", "call.*"))
	if err != nil {
		t.Fatal(err)
	}
	var out []call
	for _, p := range paths {
		if strings.HasSuffix(p, ".script") {
			continue
		}
		b := readFile(t, p)
		c := call{argv: strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")}
		if s, err := os.ReadFile(p + ".script"); err == nil {
			c.script = string(s)
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return strings.Join(out[i].argv, " ") < strings.Join(out[j].argv, " ") })
	return out
}

// optValue is the value after option opt in argv.
func optValue(argv []string, opt string) string {
	for i, a := range argv {
		if a == opt && i+1 < len(argv) {
			return argv[i+1]
		}
	}
	return ""
}
