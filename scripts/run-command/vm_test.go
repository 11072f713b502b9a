package runcommand

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodediag/nodediag/internal/testenv"
)

// fakeAgent is served in place of the agent where a test must know whether
// what was downloaded ran: it records its run in $NODEDIAG_TEST_MARKER.
const fakeAgent = "#!/bin/sh\necho ran >\"$NODEDIAG_TEST_MARKER\"\necho 'SUMMARY ok fake: no finding at error or above'\n"

// TestVMScript runs nodediag-vm.sh for real, with sh (dash here: POSIX, as on
// the VMs), against the example hosts and the agent built from this tree,
// served on 127.0.0.1 by a local HTTP server, and checks what run-command
// would return: the agent's compact output unchanged on stdout, within 4096
// bytes, the agent's exit code, the script's one line on stderr, and an empty
// temporary directory afterwards.
func TestVMScript(t *testing.T) {
	sh := testenv.RequireBinary(t, "sh", "dash")
	agent := testenv.Build(t, agentPkg)
	agentBytes := readFile(t, agent)
	sum := sha256Hex(agentBytes)
	fake := []byte(fakeAgent)
	srv := serve(t, map[string][]byte{
		"/nodediag-agent": agentBytes,
		"/fake-agent":     fake,
	})

	// vm runs the script with TMPDIR set to a fresh directory it returns.
	vm := func(t *testing.T, env []string, args ...string) (result, string) {
		t.Helper()
		tmp := t.TempDir()
		return run(t, append([]string{"TMPDIR=" + tmp}, env...), append([]string{sh, vmScript}, args...)...), tmp
	}

	t.Run("download", func(t *testing.T) {
		for _, h := range exampleHosts(t) {
			t.Run(h.name, func(t *testing.T) {
				want := agentCompact(t, agent, h)
				if want.code == 2 {
					t.Fatalf("the agent failed on %s: %s", h.name, want.stderr)
				}
				got, tmp := vm(t, nil, append([]string{"--agent-url", srv.URL + "/nodediag-agent", "--agent-sha256", sum, "--"}, h.args...)...)
				if diff := cmp.Diff(want.stdout, got.stdout); diff != "" {
					t.Errorf("stdout differs from the agent's check --output compact (-agent +script):\n%s", diff)
				}
				if got.code != want.code {
					t.Errorf("exit code %d, the agent's is %d", got.code, want.code)
				}
				if len(got.stdout) > outputLimit {
					t.Errorf("stdout is %d bytes, over run-command's %d", len(got.stdout), outputLimit)
				}
				if !strings.HasPrefix(got.stdout[strings.LastIndex(strings.TrimRight(got.stdout, "\n"), "\n")+1:], "SUMMARY ") {
					t.Errorf("the last line of stdout is not the SUMMARY:\n%s", got.stdout)
				}
				// stderr: the agent's (nothing, so far), then the script's one line.
				if !strings.HasPrefix(got.stderr, want.stderr) {
					t.Fatalf("stderr does not start with the agent's:\n%s", got.stderr)
				}
				assertExitLine(t, got.stderr[len(want.stderr):], got.code, "(downloaded, sha256 ok)")
				assertEmpty(t, tmp)
			})
		}
	})

	t.Run("checksum-mismatch", func(t *testing.T) {
		h := exampleHost(t, "disk-full")
		marker := filepath.Join(t.TempDir(), "ran")
		env := []string{"NODEDIAG_TEST_MARKER=" + marker}
		// The control: with its own checksum the fake runs, and the marker shows it.
		got, tmp := vm(t, env, append([]string{"--agent-url", srv.URL + "/fake-agent", "--agent-sha256", sha256Hex(fake), "--"}, h.args...)...)
		if got.code != 0 {
			t.Fatalf("the fake agent with its checksum: exit %d: %s", got.code, got.stderr)
		}
		if _, err := os.Stat(marker); err != nil {
			t.Fatalf("the fake agent did not record its run: %v", err)
		}
		assertEmpty(t, tmp)
		os.Remove(marker)

		// The agent's checksum for the fake's bytes: refused, never run.
		got, tmp = vm(t, env, append([]string{"--agent-url", srv.URL + "/fake-agent", "--agent-sha256", sum, "--"}, h.args...)...)
		if got.code != 13 {
			t.Errorf("exit %d, want 13 (checksum mismatch)", got.code)
		}
		if got.stdout != "" {
			t.Errorf("stdout %q, want nothing", got.stdout)
		}
		assertExitLine(t, got.stderr, got.code, "checksum mismatch: got "+sha256Hex(fake)[:12]+"..., want "+sum[:12]+"...")
		if _, err := os.Stat(marker); !os.IsNotExist(err) {
			t.Error("the download with the wrong checksum ran")
		}
		assertEmpty(t, tmp)

		// An upper-case checksum is the same checksum.
		got, tmp = vm(t, nil, append([]string{"--agent-url", srv.URL + "/nodediag-agent", "--agent-sha256", strings.ToUpper(sum), "--"}, h.args...)...)
		if got.code != 1 {
			t.Errorf("upper-case checksum: exit %d, want 1: %s", got.code, got.stderr)
		}
		assertEmpty(t, tmp)
	})

	t.Run("download-failure", func(t *testing.T) {
		refused := fmt.Sprintf("http://127.0.0.1:%d/nodediag-agent", testenv.FreePort(t))
		for _, tc := range []struct {
			name, url, why string
		}{
			{"404", srv.URL + "/no-such-agent", "curl: HTTP error"},
			{"connection-refused", refused, "curl: connection refused"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				got, tmp := vm(t, nil, "--agent-url", tc.url, "--agent-sha256", sum)
				if got.code != 12 {
					t.Errorf("exit %d, want 12 (download failed)", got.code)
				}
				if got.stdout != "" {
					t.Errorf("stdout %q, want nothing", got.stdout)
				}
				msg := assertExitLine(t, got.stderr, got.code, "download of the agent failed: "+tc.why)
				if strings.Contains(msg, "127.0.0.1") {
					t.Errorf("the exit line quotes the URL (it may carry a SAS token): %q", msg)
				}
				assertEmpty(t, tmp)
			})
		}
	})

	t.Run("wget-when-no-curl", func(t *testing.T) {
		// A VM with busybox's wget and no curl.
		busybox := testenv.RequireBinary(t, "busybox", "busybox-static")
		path := pathWithout(t, []string{"curl", "wget"}, map[string]string{"wget": busybox})
		h := exampleHost(t, "healthy-worker")
		want := agentCompact(t, agent, h)
		got, tmp := vm(t, []string{"PATH=" + path}, append([]string{"--agent-url", srv.URL + "/nodediag-agent", "--agent-sha256", sum, "--"}, h.args...)...)
		if got.stdout != want.stdout || got.code != want.code {
			t.Errorf("with wget: exit %d, stdout\n%s\nwant exit %d, stdout\n%s", got.code, got.stdout, want.code, want.stdout)
		}
		assertExitLine(t, got.stderr, got.code, "downloaded, sha256 ok")
		assertEmpty(t, tmp)

		got, tmp = vm(t, []string{"PATH=" + path}, "--agent-url", srv.URL+"/no-such-agent", "--agent-sha256", sum)
		if got.code != 12 {
			t.Errorf("404 with wget: exit %d, want 12", got.code)
		}
		assertExitLine(t, got.stderr, got.code, "download of the agent failed: wget exit")
		assertEmpty(t, tmp)

		// Neither curl nor wget.
		bare := pathWithout(t, []string{"curl", "wget"}, nil)
		got, tmp = vm(t, []string{"PATH=" + bare}, "--agent-url", srv.URL+"/nodediag-agent", "--agent-sha256", sum)
		if got.code != 12 {
			t.Errorf("no downloader: exit %d, want 12", got.code)
		}
		assertExitLine(t, got.stderr, got.code, "neither curl nor wget")
		assertEmpty(t, tmp)
	})

	t.Run("pre-staged", func(t *testing.T) {
		h := exampleHost(t, "azl3-stale-sysconfig-flag")
		want := agentCompact(t, agent, h)

		// --agent PATH, no temporary directory needed.
		got, tmp := vm(t, nil, append([]string{"--agent", agent, "--"}, h.args...)...)
		if got.stdout != want.stdout || got.code != want.code {
			t.Errorf("--agent: exit %d, stdout\n%s\nwant exit %d, stdout\n%s", got.code, got.stdout, want.code, want.stdout)
		}
		assertExitLine(t, got.stderr, got.code, "("+agent+")")
		assertEmpty(t, tmp)

		// With its checksum, checked.
		got, _ = vm(t, nil, append([]string{"--agent", agent, "--agent-sha256", sum, "--"}, h.args...)...)
		if got.code != want.code {
			t.Errorf("--agent with --agent-sha256: exit %d, want %d: %s", got.code, want.code, got.stderr)
		}
		assertExitLine(t, got.stderr, got.code, agent+", sha256 ok")

		// A pre-staged file that is not the agent the checksum names: not run.
		marker := filepath.Join(t.TempDir(), "ran")
		staged := filepath.Join(t.TempDir(), "nodediag-agent")
		if err := os.WriteFile(staged, fake, 0o755); err != nil {
			t.Fatal(err)
		}
		got, _ = vm(t, []string{"NODEDIAG_TEST_MARKER=" + marker}, "--agent", staged, "--agent-sha256", sum)
		if got.code != 13 {
			t.Errorf("pre-staged with the wrong checksum: exit %d, want 13", got.code)
		}
		assertExitLine(t, got.stderr, got.code, "checksum mismatch for "+staged)
		if _, err := os.Stat(marker); !os.IsNotExist(err) {
			t.Error("the pre-staged file with the wrong checksum ran")
		}

		// Found in PATH, no argument but the agent's.
		bin := t.TempDir()
		if err := os.Symlink(agent, filepath.Join(bin, "nodediag-agent")); err != nil {
			t.Fatal(err)
		}
		got, _ = vm(t, []string{"PATH=" + bin + ":" + os.Getenv("PATH")}, h.args...)
		if got.stdout != want.stdout || got.code != want.code {
			t.Errorf("agent in PATH: exit %d, stdout\n%s", got.code, got.stdout)
		}
		assertExitLine(t, got.stderr, got.code, "("+filepath.Join(bin, "nodediag-agent")+")")

		// Not where it was said to be.
		got, _ = vm(t, nil, "--agent", filepath.Join(t.TempDir(), "nodediag-agent"))
		if got.code != 11 {
			t.Errorf("missing --agent: exit %d, want 11", got.code)
		}
		assertExitLine(t, got.stderr, got.code, "no agent at ")

		// Not executable.
		noexec := filepath.Join(t.TempDir(), "nodediag-agent")
		if err := os.WriteFile(noexec, fake, 0o644); err != nil {
			t.Fatal(err)
		}
		got, _ = vm(t, nil, "--agent", noexec)
		if got.code != 14 {
			t.Errorf("non-executable agent: exit %d, want 14", got.code)
		}
		assertExitLine(t, got.stderr, got.code, "is not executable")

		// None anywhere.
		for _, p := range []string{"/usr/local/bin/nodediag-agent", "/opt/bin/nodediag-agent", "/usr/bin/nodediag-agent"} {
			if _, err := os.Stat(p); err == nil {
				t.Skipf("%s exists on this machine: cannot test the absence of an agent", p)
			}
		}
		got, _ = vm(t, nil, h.args...)
		if got.code != 11 {
			t.Errorf("no agent: exit %d, want 11", got.code)
		}
		assertExitLine(t, got.stderr, got.code, "no agent: none in PATH")
	})

	t.Run("usage", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			env  []string
			args []string
			want string
		}{
			{"url without sha256", nil, []string{"--agent-url", srv.URL + "/nodediag-agent"}, "a download needs its SHA-256"},
			{"short sha256", nil, []string{"--agent-url", srv.URL + "/nodediag-agent", "--agent-sha256", sum[:63]}, "64 hex digits"},
			{"sha256 not hex", nil, []string{"--agent-url", srv.URL + "/nodediag-agent", "--agent-sha256", strings.Repeat("g", 64)}, "64 hex digits"},
			{"ftp url", nil, []string{"--agent-url", "ftp://127.0.0.1/agent", "--agent-sha256", sum}, "http:// or https://"},
			{"both agent and url", nil, []string{"--agent", agent, "--agent-url", srv.URL + "/nodediag-agent", "--agent-sha256", sum}, "not both"},
			{"option without value", nil, []string{"--agent-url"}, "--agent-url needs a value"},
			{"unknown mode", []string{"NODEDIAG_MODE=sweep"}, nil, "unknown mode 'sweep'"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				got, tmp := vm(t, tc.env, tc.args...)
				if got.code != 10 {
					t.Errorf("exit %d, want 10", got.code)
				}
				assertExitLine(t, got.stderr, got.code, tc.want)
				assertEmpty(t, tmp)
			})
		}
	})

	t.Run("run-command-named-parameters", func(t *testing.T) {
		// What the Action Run Command does with --parameters NAME=VALUE on
		// Linux: it puts "export NAME=VALUE ..." and "set -- VALUE ..." at
		// the top of the script (Azure/azure-cli#10400) and the extension
		// runs the file with /bin/bash -c (Azure/run-command-extension-linux
		// main/exec.go). The settings arrive as variables and the values
		// again as arguments, which the script must ignore.
		bash := testenv.RequireBinary(t, "bash", "bash")
		h := exampleHost(t, "kubelet-client-cert-expired")
		want := agentCompact(t, agent, h)
		params := []string{
			"NODEDIAG_MODE=check",
			"NODEDIAG_AGENT_URL=" + srv.URL + "/nodediag-agent",
			"NODEDIAG_AGENT_SHA256=" + sum,
			"NODEDIAG_ARGS=" + strings.Join(h.args, ","),
		}
		var values []string
		for _, p := range params {
			values = append(values, p[strings.Index(p, "=")+1:])
		}
		script := "export " + strings.Join(params, " ") + "\nset -- " + strings.Join(values, " ") + "\n" + string(readFile(t, vmScript))
		file := filepath.Join(t.TempDir(), "script.sh")
		if err := os.WriteFile(file, []byte(script), 0o500); err != nil {
			t.Fatal(err)
		}
		tmp := t.TempDir()
		got := run(t, []string{"TMPDIR=" + tmp}, bash, "-c", file)
		if got.stdout != want.stdout || got.code != want.code {
			t.Errorf("exit %d, stdout\n%s\nwant exit %d, stdout\n%s\nstderr: %s", got.code, got.stdout, want.code, want.stdout, got.stderr)
		}
		assertExitLine(t, got.stderr, got.code, "downloaded, sha256 ok")
		assertEmpty(t, tmp)
	})

	t.Run("bundle", func(t *testing.T) {
		h := exampleHost(t, "disk-full")
		want := agentCompact(t, agent, h)
		got, tmp := vm(t, nil, append([]string{"--agent-url", srv.URL + "/nodediag-agent", "--agent-sha256", sum, "--bundle", "--"}, h.args...)...)
		if got.code != want.code {
			t.Errorf("exit %d, the agent's check says %d: %s", got.code, want.code, got.stderr)
		}
		bundle := decodeBundle(t, got.stdout)
		members := tarMembers(t, bundle)
		if len(members) < 2 || members[0] != "manifest.json" || members[1] != "report.json" {
			t.Errorf("bundle members %v, want manifest.json, report.json first", members)
		}
		// The agent's own lines (collect's "bundle: ..." and its SUMMARY)
		// went to stderr; the script's line is last.
		lines := strings.Split(strings.TrimRight(got.stderr, "\n"), "\n")
		assertExitLine(t, lines[len(lines)-1]+"\n", got.code, "bundle of ")
		if !strings.Contains(got.stderr, "bundle: ") {
			t.Errorf("collect's bundle line is not on stderr:\n%s", got.stderr)
		}
		assertEmpty(t, tmp)
	})
}

// bundleHeader is the line nodediag-vm.sh writes before a bundle.
var bundleHeader = regexp.MustCompile(`(?m)^nodediag-bundle: node\.tar\.gz ([0-9]+) bytes sha256 ([0-9a-f]{64})$`)

// decodeBundle reads the bundle out of nodediag-vm.sh --bundle's stdout and
// checks its size and SHA-256 against the header line.
func decodeBundle(t *testing.T, stdout string) []byte {
	t.Helper()
	m := bundleHeader.FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("no nodediag-bundle header line in:\n%.500s", stdout)
	}
	const begin, end = "-----BEGIN NODEDIAG BUNDLE-----\n", "-----END NODEDIAG BUNDLE-----\n"
	i, j := strings.Index(stdout, begin), strings.Index(stdout, end)
	if i < 0 || j < i {
		t.Fatalf("no BEGIN/END lines in:\n%.500s", stdout)
	}
	b, err := base64.StdEncoding.DecodeString(strings.ReplaceAll(stdout[i+len(begin):j], "\n", ""))
	if err != nil {
		t.Fatalf("the bundle is not base64: %v", err)
	}
	if fmt.Sprint(len(b)) != m[1] || sha256Hex(b) != m[2] {
		t.Errorf("bundle of %d bytes, sha256 %s; the header says %s bytes, sha256 %s", len(b), sha256Hex(b), m[1], m[2])
	}
	return b
}

// tarMembers lists the members of a gzip'd tar.
func tarMembers(t *testing.T, b []byte) []string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("the bundle is not gzip: %v", err)
	}
	tr := tar.NewReader(zr)
	var names []string
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the bundle is not a tar: %v", err)
		}
		names = append(names, hdr.Name)
	}
	return names
}
