package main

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodediag/nodediag/internal/testenv"
)

// The commands of docs/air-gapped.md and docs/image.md, exactly as written
// there. TestDocCommands fails when a doc holds a command that is not one
// of these, or lacks one; the tests run each of them with sh.
const (
	cmdMakeBuild  = `make build`
	cmdSum        = `cd bin && sha256sum nodediag-agent > nodediag-agent.sha256`
	cmdSumCheck   = `sha256sum -c nodediag-agent.sha256`
	cmdChmod      = `chmod +x nodediag-agent`
	cmdVersion    = `./nodediag-agent version`
	cmdCheck      = `./nodediag-agent check`
	cmdCollect    = `./nodediag-agent collect --bundle "node-$(hostname).tar.gz"`
	cmdAnalyze    = `nodediag analyze node-*.tar.gz`
	cmdKeygen     = `age-keygen -o nodediag-key.txt`
	cmdKeyPub     = `age-keygen -y nodediag-key.txt > nodediag-key.pub`
	cmdCollectAge = `./nodediag-agent collect --bundle "node-$(hostname).tar.gz" --recipient "$(cat nodediag-key.pub)"`
	cmdAnalyzeAge = `nodediag analyze --identity nodediag-key.txt node-*.tar.gz`

	cmdMakeImage      = `make image`
	cmdCopyAgent      = `skopeo copy --dest-cert-dir "$REGISTRY_CA_DIR" oci-archive:bin/images/nodediag-agent.oci.tar "docker://$REGISTRY/nodediag/nodediag-agent:$TAG"`
	cmdCopyCollector  = `skopeo copy --dest-cert-dir "$REGISTRY_CA_DIR" oci-archive:bin/images/nodediag.oci.tar "docker://$REGISTRY/nodediag/nodediag:$TAG"`
	cmdMakeImageRepo  = `make image IMAGE_REPO="$REGISTRY/nodediag"`
	cmdImport         = `ctr -n k8s.io images import nodediag-agent.oci.tar`
	cmdCopyWithScheme = `skopeo copy oci-archive:bin/images/nodediag-agent.oci.tar "docker://https://$REGISTRY/nodediag/nodediag-agent:$TAG"`
	cmdInspect        = `skopeo inspect oci-archive:bin/images/nodediag-agent.oci.tar`
)

// docCommands are the commands each doc must hold.
var docCommands = map[string][]string{
	"air-gapped.md": {
		cmdMakeBuild, cmdSum, cmdSumCheck, cmdChmod, cmdVersion, cmdCheck, cmdCollect, cmdAnalyze,
		cmdKeygen, cmdKeyPub, cmdCollectAge, cmdAnalyzeAge,
		cmdMakeImage, cmdCopyAgent, cmdCopyCollector, cmdMakeImageRepo, cmdImport, cmdCopyWithScheme,
	},
	"image.md": {cmdMakeImage, cmdInspect},
}

// schemeError is skopeo's error for a scheme in a destination reference
// (registry, tag), quoted by docs/air-gapped.md with its example values.
const schemeError = "Invalid destination name docker://https://%s/nodediag/nodediag-agent:%s: invalid reference format"

// The example registry and tag of docs/air-gapped.md.
const (
	docRegistry = "registry.example.internal:5000"
	docTag      = "v0.1.0"
)

// A fenced block of a doc.
type docBlock struct {
	lang  string
	lines []string // trimmed of the block's indentation
}

func docBlocks(t testing.TB, name string) []docBlock {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot(t), "docs", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var blocks []docBlock
	var cur *docBlock
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		switch {
		case cur == nil && strings.HasPrefix(l, "```"):
			cur = &docBlock{lang: strings.TrimPrefix(l, "```")}
		case cur != nil && l == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.lines = append(cur.lines, l)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Fatalf("docs/%s: a block is not closed", name)
	}
	return blocks
}

// commandsOf returns the commands of a doc: every line of its sh blocks
// (a line ending in \ continues), the $-lines of its console blocks.
func commandsOf(blocks []docBlock) []string {
	var cmds []string
	for _, b := range blocks {
		switch b.lang {
		case "sh":
			cont := ""
			for _, l := range b.lines {
				if l == "" || strings.HasPrefix(l, "#") {
					continue
				}
				if strings.HasSuffix(l, `\`) {
					cont += strings.TrimSuffix(l, `\`)
					continue
				}
				cmds = append(cmds, cont+l)
				cont = ""
			}
		case "console":
			for _, l := range b.lines {
				if strings.HasPrefix(l, "$ ") {
					cmds = append(cmds, strings.TrimPrefix(l, "$ "))
				}
			}
		}
	}
	return cmds
}

// Each doc holds exactly the commands the tests run; the error the
// air-gapped doc quotes is skopeo's (TestImagesThroughRegistry meets it).
func TestDocCommands(t *testing.T) {
	for doc, want := range docCommands {
		blocks := docBlocks(t, doc)
		got := commandsOf(blocks)
		sort.Strings(got)
		w := append([]string(nil), want...)
		sort.Strings(w)
		if diff := cmp.Diff(w, got); diff != "" {
			t.Errorf("docs/%s: commands (-tested +in the doc): a command the tests do not run must not be in the doc\n%s", doc, diff)
		}
		if doc != "air-gapped.md" {
			continue
		}
		quoted := false
		for _, b := range blocks {
			if b.lang == "console" && strings.Contains(strings.Join(b.lines, "\n"), fmt.Sprintf(schemeError, docRegistry, docTag)) {
				quoted = true
			}
		}
		if !quoted {
			t.Errorf("docs/%s does not quote skopeo's error %q", doc, fmt.Sprintf(schemeError, docRegistry, docTag))
		}
	}
}

// docHostsTOML is the hosts.toml of docs/air-gapped.md.
func docHostsTOML(t testing.TB) string {
	t.Helper()
	for _, b := range docBlocks(t, "air-gapped.md") {
		if b.lang == "toml" {
			return strings.Join(b.lines, "\n") + "\n"
		}
	}
	t.Fatal("docs/air-gapped.md has no toml block")
	return ""
}

func tlsConfig(ca *testenv.CA) *tls.Config { return &tls.Config{RootCAs: ca.Pool()} }

var topFinding = regexp.MustCompile(`(?m)^1\. [A-Z]+ (\w+) \[`)

// exampleHost is an example host of agent/testdata/hosts: its root, the
// arguments of its args file, and what the agent's golden output says.
type exampleHost struct {
	name, root string
	args       []string
	top        string // the first finding's ID in want.json
	exit       int
}

func loadHost(t *testing.T, name string) exampleHost {
	t.Helper()
	dir := filepath.Join(repoRoot(t), "agent", "testdata", "hosts", name)
	h := exampleHost{name: name, root: filepath.Join(dir, "root")}
	if b, err := os.ReadFile(filepath.Join(dir, "args")); err == nil {
		h.args = strings.Fields(string(b))
	} else if !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var want struct {
		Findings []struct{ ID string } `json:"findings"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "want.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &want); err != nil || len(want.Findings) == 0 {
		t.Fatalf("%s/want.json: %v, %d findings", name, err, len(want.Findings))
	}
	h.top = want.Findings[0].ID
	b, err = os.ReadFile(filepath.Join(dir, "exit"))
	if err != nil {
		t.Fatal(err)
	}
	if h.exit, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
		t.Fatal(err)
	}
	return h
}

// The air-gapped door, as docs/air-gapped.md tells it: the agent built and
// checksummed, carried (without its executable bit, as a FAT stick carries
// it) to a host, verified, run (check, collect, collect encrypted to an
// age key made with age-keygen), the bundles carried out and analysed by
// nodediag with the root cause the agent's golden output names. The hosts
// are copies of example hosts: the test adds --root (and the --now of the
// host's args file) to the agent's commands, which on a node run as
// written.
func TestAirGappedAgent(t *testing.T) {
	m := makeImages(t)
	testenv.RequireBinary(t, "sha256sum", "coreutils")
	testenv.RequireBinary(t, "hostname", "hostname")
	testenv.RequireBinary(t, "age-keygen", "age")
	for _, line := range []string{cmdMakeBuild, cmdSum} {
		if out, code := runIn(t, m.Dir, nil, line); code != 0 {
			t.Fatalf("%s: exit %d\n%s", line, code, out)
		}
	}
	agent := filepath.Join(m.Dir, "bin", "nodediag-agent")
	sum := agent + ".sha256"
	hostname, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	bundleName := "node-" + hostname + ".tar.gz"
	// The analyst's PATH holds the nodediag that make build built.
	analystEnv := []string{"PATH=" + filepath.Join(m.Dir, "bin") + string(os.PathListSeparator) + os.Getenv("PATH")}

	// carry copies the agent and files onto a fresh "medium".
	carry := func(t *testing.T, files ...string) string {
		t.Helper()
		dir := t.TempDir()
		for _, f := range append([]string{agent, sum}, files...) {
			if err := copyFile(f, filepath.Join(dir, filepath.Base(f)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	mustRun := func(t *testing.T, dir string, env []string, wantCode int, line string, args ...string) string {
		t.Helper()
		out, code := runIn(t, dir, env, line, args...)
		if code != wantCode {
			t.Fatalf("%s %s: exit %d, want %d\n%s", line, strings.Join(args, " "), code, wantCode, out)
		}
		return out
	}
	top := func(t *testing.T, what, out string) string {
		t.Helper()
		mm := topFinding.FindStringSubmatch(out)
		if mm == nil {
			t.Fatalf("%s: no first finding in\n%s", what, out)
		}
		return mm[1]
	}

	t.Run("damaged copy", func(t *testing.T) {
		dir := carry(t)
		b, _ := os.ReadFile(filepath.Join(dir, "nodediag-agent"))
		b[len(b)/2] ^= 0xff
		os.WriteFile(filepath.Join(dir, "nodediag-agent"), b, 0o644)
		if out := mustRun(t, dir, nil, 1, cmdSumCheck); !strings.Contains(out, "nodediag-agent: FAILED") {
			t.Errorf("sha256sum -c of a damaged copy:\n%s", out)
		}
	})

	for _, name := range []string{"dkp-registry-missing-scheme", "kubelet-client-cert-expired"} {
		h := loadHost(t, name)
		// The example host is a copy whose stand-in binaries answer
		// --version; want.json was made running them (--exec local, an
		// opt-in on a copy; on the air-gapped node itself the root is live).
		hostArgs := append([]string{"--root", h.root, "--exec", "local"}, h.args...)
		t.Run(name, func(t *testing.T) {
			media := carry(t)
			if out := mustRun(t, media, nil, 0, cmdSumCheck); strings.TrimSpace(out) != "nodediag-agent: OK" {
				t.Errorf("sha256sum -c: %q", out)
			}
			mustRun(t, media, nil, 0, cmdChmod)
			if out := mustRun(t, media, nil, 0, cmdVersion); strings.TrimSpace(out) != fmt.Sprintf("nodediag-agent %s (%s)", testVersion, testRevision) {
				t.Errorf("version: %q", out)
			}
			if got := top(t, "check", mustRun(t, media, nil, h.exit, cmdCheck, hostArgs...)); got != h.top {
				t.Errorf("check: first finding %s, want.json %s", got, h.top)
			}
			out := mustRun(t, media, nil, h.exit, cmdCollect, hostArgs...)
			if !regexp.MustCompile(`(?m)^bundle: (\S*/)?` + regexp.QuoteMeta(bundleName) + ` \(`).MatchString(out) {
				t.Errorf("collect names no bundle %s:\n%s", bundleName, out)
			}

			// Out, and analysed.
			analyst := t.TempDir()
			if err := copyFile(filepath.Join(media, bundleName), filepath.Join(analyst, bundleName), 0o644); err != nil {
				t.Fatal(err)
			}
			out = mustRun(t, analyst, analystEnv, h.exit, cmdAnalyze)
			if got := top(t, "analyze", out); got != h.top || !strings.Contains(out, "| "+bundleName+" | bundle |") {
				t.Errorf("analyze: first finding %s (want %s)\n%s", got, h.top, out)
			}

			// Encrypted: the key pair made on the analyst's side, the
			// public key carried in with the agent.
			keys := t.TempDir()
			mustRun(t, keys, nil, 0, cmdKeygen)
			mustRun(t, keys, nil, 0, cmdKeyPub)
			media = carry(t, filepath.Join(keys, "nodediag-key.pub"))
			mustRun(t, media, nil, 0, cmdChmod)
			mustRun(t, media, nil, h.exit, cmdCollectAge, hostArgs...)
			b, err := os.ReadFile(filepath.Join(media, bundleName))
			if err != nil || !strings.HasPrefix(string(b), "age-encryption.org/v1\n") {
				t.Fatalf("encrypted bundle: %v, starts %q", err, b[:min(len(b), 40)])
			}
			if strings.Contains(string(b), h.top) {
				t.Errorf("the encrypted bundle shows %s in clear", h.top)
			}
			analyst = t.TempDir()
			for _, f := range []string{filepath.Join(media, bundleName), filepath.Join(keys, "nodediag-key.txt")} {
				if err := copyFile(f, filepath.Join(analyst, filepath.Base(f)), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if out := mustRun(t, analyst, analystEnv, 2, cmdAnalyze); topFinding.MatchString(out) {
				t.Errorf("analyze without the identity gave a verdict:\n%s", out)
			}
			if got := top(t, "analyze --identity", mustRun(t, analyst, analystEnv, h.exit, cmdAnalyzeAge)); got != h.top {
				t.Errorf("analyze --identity: first finding %s, want %s", got, h.top)
			}
		})
	}
}
