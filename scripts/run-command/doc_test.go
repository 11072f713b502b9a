package runcommand

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodediag/nodediag/internal/testenv"
)

const docPage = "../../docs/run-command.md"

// docAgent stands in for the agent in TestDocCommands: the documented
// commands carry no --root, and the real agent would read this machine.
const docAgent = `#!/bin/sh
cmd=$1
shift
case $cmd in
check)
	echo "SUMMARY error capz-e2e-control-plane-9hx2q KubeletRemovedFlag: kubelet v1.35.0 rejects --pod-infra-container-image set in /etc/sysconfig/kubelet (5 error)"
	exit 1
	;;
collect)
	while [ $# -gt 0 ]; do
		[ "$1" = --bundle ] && out=$2
		shift
	done
	printf 'a stand-in bundle\n' >"$out"
	echo "bundle: $out (1 members)"
	exit 1
	;;
esac
exit 2
`

// docCommands returns the commands of the page's sh blocks that start with
// prefix, continuation lines joined.
func docCommands(t *testing.T, prefixes ...string) []string {
	t.Helper()
	var cmds []string
	in := false
	cur := ""
	for _, l := range strings.Split(string(readFile(t, docPage)), "\n") {
		switch {
		case !in && l == "```sh":
			in = true
			continue
		case in && l == "```":
			in = false
			continue
		case !in:
			continue
		}
		if strings.HasSuffix(l, "\\") {
			cur += strings.TrimSuffix(l, "\\")
			continue
		}
		cur += l
		for _, p := range prefixes {
			if strings.HasPrefix(strings.TrimSpace(cur), p) {
				cmds = append(cmds, strings.TrimSpace(cur))
			}
		}
		cur = ""
	}
	return cmds
}

// TestDocCommands runs the nodediag-az.sh and `az vm run-command invoke`
// commands of docs/run-command.md as written (with bash, from a directory
// where scripts/ is this repository's), against the stand-in az (Azure
// itself cannot run here) and a stand-in agent served on 127.0.0.1.
func TestDocCommands(t *testing.T) {
	sh := testenv.RequireBinary(t, "sh", "dash")
	testenv.RequireBinary(t, "bash", "bash")
	agent := []byte(docAgent)
	srv := serve(t, map[string][]byte{"/nodediag-agent": agent})
	agentURL := srv.URL + "/nodediag-agent"
	sum := sha256Hex(agent)

	cmds := docCommands(t, "scripts/run-command/nodediag-az.sh", "az vm run-command invoke")
	if len(cmds) < 4 {
		t.Fatalf("found %d commands in %s, want the four of sections 2 to 5: %q", len(cmds), docPage, cmds)
	}

	const rg, vm = "capz-e2e", "capz-e2e-control-plane-9hx2q"
	vms := []string{vm, "capz-e2e-md-0-7xk2p"}
	answer := run(t, []string{"TMPDIR=" + t.TempDir()}, sh, vmScript, "--agent-url", agentURL, "--agent-sha256", sum)
	if answer.code != 1 {
		t.Fatalf("the stand-in agent through nodediag-vm.sh: exit %d: %s", answer.code, answer.stderr)
	}
	scripts, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cmds {
		t.Run(strings.Fields(c)[0]+"#"+string(rune('1'+i)), func(t *testing.T) {
			s := newStandIn(t, vms)
			for _, v := range vms {
				s.write(t, "canned/"+v+".msg", actionMessage(answer))
			}
			work, tmp := t.TempDir(), t.TempDir()
			if err := os.Symlink(scripts, filepath.Join(work, "scripts")); err != nil {
				t.Fatal(err)
			}
			env := append(s.env(tmp, 1, len(vms)),
				"RG="+rg, "VM="+vm, "ACCOUNT=stnodediag",
				"AGENT_URL="+agentURL, "AGENT_SHA256="+sum, "KUBERNETES_VERSION=v1.32.0",
				"BLOB_URL=https://stnodediag.blob.core.windows.net/bundles/"+vm+".txt?sp=racw&se=2030-01-01&sig=c2ln%3D")
			got := runIn(t, work, env, "bash", "-c", c)
			t.Logf("%s\nexit %d\nstdout:\n%s\nstderr:\n%s", c, got.code, got.stdout, got.stderr)
			want := 1 // nodediag-az.sh: the stand-in agent reports an error
			if strings.HasPrefix(c, "az ") {
				want = 0
				if got.stdout != actionMessage(answer)+"\n" {
					t.Errorf("az answered %q", got.stdout)
				}
			}
			if got.code != want {
				t.Errorf("exit %d, want %d", got.code, want)
			}
			cs := calls(t, s.dir)
			if len(cs) == 0 {
				t.Fatal("az was not called")
			}
			for _, call := range cs {
				if call.argv[0] == "storage" {
					continue
				}
				if g := optValue(call.argv, "-g"); g != rg {
					t.Errorf("az %s: resource group %q, want %q", strings.Join(call.argv[:3], " "), g, rg)
				}
			}
			if strings.Contains(c, " bundle ") {
				if b := readFile(t, filepath.Join(work, vm+".tar.gz")); string(b) != "a stand-in bundle\n" {
					t.Errorf("the downloaded bundle is %q", b)
				}
			}
			assertEmpty(t, tmp)
		})
	}
}
