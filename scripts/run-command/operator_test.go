package runcommand

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodediag/nodediag/internal/testenv"
)

// standInAz is written on PATH as `az` by the operator tests: Azure itself
// cannot run here (no subscription, no VM, nothing may leave the machine), so
// this stand-in takes its place. It records every invocation (argv, NUL
// separated, in $AZ_STANDIN_DIR/calls/, with a copy of any @file argument)
// and answers as the real az does for the calls nodediag-az.sh makes:
//
//   - vm list --query "[].name" -o tsv: the names in vms.tsv;
//   - vm run-command invoke --query value[0].message -o tsv: the canned
//     message of the VM (canned/VM.msg, made by the test from real runs of
//     nodediag-vm.sh), or, when canned/VM.azerr exists, that error and exit
//     1. It counts the invocations running at once (concurrency) and holds
//     each until AZ_STANDIN_BARRIER of them run together or every VM has
//     started, so that a serial operator would be caught (barrier-timeouts);
//   - vm run-command create (Managed Run Command): it plays the VM's
//     run-command handler (Azure/run-command-handler-linux internal/exec):
//     named parameters become environment variables, unnamed ones arguments,
//     and the script's stdout goes to the output blob (blobs/), its exit
//     code to the instance view; vm run-command show --instance-view answers
//     [exitCode, executionState, error] as tsv; storage blob download copies
//     the blob; vm run-command delete forgets the run command.
const standInAz = `#!/bin/bash
set -u
dir=$AZ_STANDIN_DIR
call=$(mktemp "$dir/calls/call.XXXXXX")
printf '%s\0' "$@" >"$call"
for a in "$@"; do
	case $a in @*) cp "${a#@}" "$call.script" ;; esac
done
opt() {
	local want=$1
	shift
	while [ $# -gt 0 ]; do
		if [ "$1" = "$want" ]; then
			printf '%s' "${2-}"
			return
		fi
		shift
	done
}
# values of a multi-value option: the words after it up to the next option
values() {
	local want=$1 on=0
	shift
	for a in "$@"; do
		if [ $on = 1 ]; then
			case $a in -*) return ;; esac
			printf '%s\n' "$a"
		fi
		[ "$a" = "$want" ] && on=1
	done
}
key() { printf '%s' "$1" | sha256sum | cut -c1-16; }
case "${1-} ${2-} ${3-}" in
"vm list "*)
	cat "$dir/vms.tsv"
	;;
"vm run-command invoke")
	vm=$(opt -n "$@")
	mkdir "$dir/active/$vm"
	touch "$dir/started/$vm"
	ls "$dir/active" | wc -l >>"$dir/concurrency"
	passed=0
	for _ in $(seq 400); do
		if [ "$(ls "$dir/active" | wc -l)" -ge "$AZ_STANDIN_BARRIER" ] || [ "$(ls "$dir/started" | wc -l)" -ge "$AZ_STANDIN_TOTAL" ]; then
			passed=1
			break
		fi
		sleep 0.05
	done
	[ $passed = 1 ] || echo "$vm" >>"$dir/barrier-timeouts"
	rc=0
	if [ -f "$dir/canned/$vm.azerr" ]; then
		cat "$dir/canned/$vm.azerr" >&2
		rc=1
	elif [ "$(opt --query "$@")" = "value[0].message" ] && [ "$(opt -o "$@")" = tsv ]; then
		cat "$dir/canned/$vm.msg"
		echo
	else
		echo "az stand-in: only --query value[0].message -o tsv is answered" >&2
		rc=2
	fi
	rmdir "$dir/active/$vm"
	exit $rc
	;;
"vm run-command create")
	name=$(opt --name "$@")
	script=$(opt --script "$@")
	script=${script#@}
	blob=$dir/blobs/$(key "$(opt --output-blob-uri "$@")")
	cp "$script" "$dir/runcommands/$name.sh"
	case $(opt --output-blob-uri "$@") in
	*bad-sas*)
		echo "ERROR: (VMExtensionProvisioningError) Error creating AppendBlob using SAS token (a stand-in's answer)" >&2
		exit 1
		;;
	esac
	env=() args=""
	while IFS= read -r p; do
		[ -n "$p" ] || continue
		case $p in
		*=*) env+=("$p") ;;
		*) args="$args $p" ;;
		esac
	done < <(values --parameters "$@"; values --protected-parameters "$@")
	env "${env[@]}" /bin/bash -c "$dir/runcommands/$name.sh$args" >"$blob" 2>"$dir/runcommands/$name.err"
	code=$?
	echo $code >"$dir/runcommands/$name.exit"
	;;
"vm run-command show")
	name=$(opt --name "$@")
	[ -f "$dir/runcommands/$name.exit" ] || { echo "ERROR: (ResourceNotFound) run command $name" >&2; exit 3; }
	code=$(cat "$dir/runcommands/$name.exit")
	state=Succeeded
	[ "$code" = 0 ] || state=Failed
	printf '%s\t%s\t%s\n' "$code" "$state" "$(tail -c 4096 "$dir/runcommands/$name.err")"
	;;
"vm run-command delete")
	name=$(opt --name "$@")
	rm -f "$dir/runcommands/$name".*
	;;
"storage blob download")
	blob=$dir/blobs/$(key "$(opt --blob-url "$@")")
	[ -f "$blob" ] || { echo "ERROR: The specified blob does not exist." >&2; exit 3; }
	cp "$blob" "$(opt --file "$@")"
	;;
*)
	echo "az stand-in: not answered: $*" >&2
	exit 2
	;;
esac
`

// standIn is a directory with the stand-in az and its state.
type standIn struct {
	dir  string // $AZ_STANDIN_DIR
	path string // the directory to put first in PATH
}

func newStandIn(t *testing.T, vms []string) standIn {
	t.Helper()
	s := standIn{dir: t.TempDir(), path: t.TempDir()}
	for _, d := range []string{"calls", "active", "started", "canned", "blobs", "runcommands"} {
		if err := os.Mkdir(filepath.Join(s.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(s.path, "az"), []byte(standInAz), 0o755); err != nil {
		t.Fatal(err)
	}
	s.write(t, "vms.tsv", strings.Join(vms, "\n")+"\n")
	return s
}

func (s standIn) write(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(s.dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// env is the operator's environment: the stand-in first in PATH.
func (s standIn) env(tmp string, barrier, total int) []string {
	return []string{
		"PATH=" + s.path + ":" + os.Getenv("PATH"),
		"TMPDIR=" + tmp,
		"AZ_STANDIN_DIR=" + s.dir,
		"AZ_STANDIN_BARRIER=" + strconv.Itoa(barrier),
		"AZ_STANDIN_TOTAL=" + strconv.Itoa(total),
	}
}

// row is a line of the operator's table.
type row struct{ exit, verdict, cause string }

// table reads the operator's result table: a header, then one row per VM.
func table(t *testing.T, stdout string) map[string]row {
	t.Helper()
	lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "VM ") || !strings.Contains(lines[0], "ROOT CAUSE") {
		t.Fatalf("no table header:\n%s", stdout)
	}
	out := map[string]row{}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) < 4 {
			t.Fatalf("table row %q has fewer than 4 columns", l)
		}
		// The cause is the rest of the line after the third column.
		rest := l
		for i := 0; i < 3; i++ {
			rest = strings.TrimLeft(rest, " ")
			rest = rest[strings.Index(rest, " "):]
		}
		out[f[0]] = row{f[1], f[2], strings.TrimLeft(rest, " ")}
	}
	return out
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// TestOperator runs nodediag-az.sh with a stand-in for the az CLI on PATH
// (standInAz): Azure itself cannot run here. The answers of the VMs are
// canned from real runs of nodediag-vm.sh on example hosts, shaped as az
// returns them; the test checks what nodediag-az.sh asked az (resource group,
// VM names, command id, the script, the parameters), how many VMs it ran at
// once, its table and its exit code.
func TestOperator(t *testing.T) {
	sh := testenv.RequireBinary(t, "sh", "dash")
	testenv.RequireBinary(t, "bash", "bash")
	agent := testenv.Build(t, agentPkg)
	agentBytes := readFile(t, agent)
	sum := sha256Hex(agentBytes)
	srv := serve(t, map[string][]byte{"/nodediag-agent": agentBytes})
	vmScriptBytes := readFile(t, vmScript)

	// The VMs of the resource group and what nodediag-vm.sh really prints
	// on each (a pre-staged agent on the example host).
	type vmCase struct {
		name, host string
		answer     result
		azErr      string
	}
	vms := []*vmCase{
		{name: "capz-e2e-control-plane-9hx2q", host: "azl3-stale-sysconfig-flag"},
		{name: "capz-e2e-md-0-7xk2p", host: "healthy-worker"},
		{name: "capz-e2e-md-0-6hj8k", host: "disk-full"},
		{name: "capz-e2e-md-0-k2v8n", host: "kubelet-client-cert-expired"},
		{name: "capz-e2e-md-0-badsum"},  // the agent's download fails its checksum
		{name: "capz-e2e-md-0-stopped"}, // az itself fails
	}
	byName := map[string]*vmCase{}
	var names []string
	for _, v := range vms {
		byName[v.name] = v
		names = append(names, v.name)
		switch {
		case v.host != "":
			h := exampleHost(t, v.host)
			v.answer = run(t, []string{"TMPDIR=" + t.TempDir()}, append([]string{sh, vmScript, "--agent", agent, "--"}, h.args...)...)
		case strings.HasSuffix(v.name, "badsum"):
			v.answer = run(t, []string{"TMPDIR=" + t.TempDir()}, sh, vmScript, "--agent-url", srv.URL+"/nodediag-agent", "--agent-sha256", strings.Repeat("0", 64))
			if v.answer.code != 13 {
				t.Fatalf("the bad-checksum run exited %d", v.answer.code)
			}
		default:
			v.azErr = "ERROR: (OperationNotAllowed) Operation 'RunCommand' is not allowed on VM '" + v.name + "' since the VM is deallocated (a stand-in's answer)."
		}
	}
	canned := func(s standIn) {
		for _, v := range vms {
			if v.azErr != "" {
				s.write(t, "canned/"+v.name+".azerr", v.azErr+"\n")
			} else {
				s.write(t, "canned/"+v.name+".msg", actionMessage(v.answer))
			}
		}
	}
	// wantRow is the table row of a VM, from its canned answer.
	wantRow := func(v *vmCase) row {
		if v.azErr != "" {
			return row{"az:1", "-", clip(v.azErr, 120)}
		}
		if v.answer.code >= 10 {
			m := exitLine.FindStringSubmatch(v.answer.stderr)
			return row{strconv.Itoa(v.answer.code), "-", clip(m[2], 120)}
		}
		verdict, cause := summaryCause(t, v.answer.stdout)
		return row{strconv.Itoa(v.answer.code), verdict, clip(cause, 120)}
	}
	invokes := func(cs []call) []call {
		var out []call
		for _, c := range cs {
			if len(c.argv) > 2 && c.argv[0] == "vm" && c.argv[2] == "invoke" {
				out = append(out, c)
			}
		}
		return out
	}
	// normalize replaces the temporary path of the script in argv.
	normalize := func(argv []string) []string {
		out := append([]string(nil), argv...)
		for i, a := range out {
			if strings.HasPrefix(a, "@") {
				out[i] = "@SCRIPT"
			}
		}
		return out
	}

	t.Run("resource-group", func(t *testing.T) {
		s := newStandIn(t, names)
		canned(s)
		tmp, out := t.TempDir(), t.TempDir()
		got := run(t, s.env(tmp, 2, len(vms)), "bash", azScript, "-g", "rg-capz-e2e", "--subscription", "sub-1", "-j", "2",
			"--agent-url", srv.URL+"/nodediag-agent", "--agent-sha256", sum, "--out", out,
			"--", "--expect-version", "v1.32.0")
		t.Logf("nodediag-az.sh stdout:\n%s\nstderr:\n%s", got.stdout, got.stderr)
		if got.code != 3 {
			t.Errorf("exit %d, want 3 (a VM did not answer properly)\nstderr:\n%s", got.code, got.stderr)
		}

		cs := calls(t, s.dir)
		var lists []call
		for _, c := range cs {
			if c.argv[0] == "vm" && c.argv[1] == "list" {
				lists = append(lists, c)
			}
		}
		if len(lists) != 1 {
			t.Fatalf("az vm list called %d times, want once", len(lists))
		}
		if diff := cmp.Diff([]string{"vm", "list", "-g", "rg-capz-e2e", "--query", "[].name", "-o", "tsv", "--subscription", "sub-1"}, lists[0].argv); diff != "" {
			t.Errorf("az vm list argv (-want +got):\n%s", diff)
		}
		inv := invokes(cs)
		var invoked []string
		for _, c := range inv {
			vm := optValue(c.argv, "-n")
			invoked = append(invoked, vm)
			want := []string{"vm", "run-command", "invoke", "-g", "rg-capz-e2e", "-n", vm, "--command-id", "RunShellScript",
				"--scripts", "@SCRIPT", "--parameters",
				"NODEDIAG_MODE=check",
				"NODEDIAG_AGENT_URL=" + srv.URL + "/nodediag-agent",
				"NODEDIAG_AGENT_SHA256=" + sum,
				"NODEDIAG_ARGS=--expect-version,v1.32.0",
				"--query", "value[0].message", "-o", "tsv", "--subscription", "sub-1"}
			if diff := cmp.Diff(want, normalize(c.argv)); diff != "" {
				t.Errorf("az vm run-command invoke argv for %s (-want +got):\n%s", vm, diff)
			}
			if c.script != string(vmScriptBytes) {
				t.Errorf("the script sent to %s is not nodediag-vm.sh", vm)
			}
		}
		sort.Strings(invoked)
		wantNames := append([]string(nil), names...)
		sort.Strings(wantNames)
		if diff := cmp.Diff(wantNames, invoked); diff != "" {
			t.Errorf("VMs run (-want +got):\n%s", diff)
		}

		// At most 2 at once (-j 2), and 2 at once indeed (the barrier).
		maxAtOnce := 0
		for _, l := range strings.Fields(string(readFile(t, filepath.Join(s.dir, "concurrency")))) {
			n, _ := strconv.Atoi(l)
			maxAtOnce = max(maxAtOnce, n)
		}
		if maxAtOnce != 2 {
			t.Errorf("at most %d VMs ran at once, want 2 (-j 2)", maxAtOnce)
		}
		if b, err := os.ReadFile(filepath.Join(s.dir, "barrier-timeouts")); err == nil {
			t.Errorf("VMs waited alone for a second one (the operator ran them one by one?): %s", b)
		}

		rows := table(t, got.stdout)
		for _, v := range vms {
			if diff := cmp.Diff(wantRow(v), rows[v.name], cmp.AllowUnexported(row{})); diff != "" {
				t.Errorf("table row of %s (-want +got):\n%s", v.name, diff)
			}
		}
		if len(rows) != len(vms) {
			t.Errorf("%d table rows, want %d:\n%s", len(rows), len(vms), got.stdout)
		}
		// Progress on stderr: each VM started and finished.
		for _, v := range vms {
			if !strings.Contains(got.stderr, v.name+": started") || !strings.Contains(got.stderr, "nodediag-az: "+v.name+": exit ") {
				t.Errorf("no progress lines for %s on stderr:\n%s", v.name, got.stderr)
			}
		}
		// --out keeps each answer.
		for _, v := range vms {
			b, err := os.ReadFile(filepath.Join(out, v.name+".txt"))
			if v.azErr != "" {
				if err == nil {
					t.Errorf("%s has an answer file though az failed", v.name)
				}
				continue
			}
			if err != nil || string(b) != actionMessage(v.answer)+"\n" {
				t.Errorf("%s.txt is not the VM's answer (%v)", v.name, err)
			}
		}
		assertEmpty(t, tmp)
	})

	t.Run("named-vms", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			vms  []string
			code int
		}{
			{"healthy", []string{"capz-e2e-md-0-7xk2p"}, 0},
			{"with-errors", []string{"capz-e2e-md-0-7xk2p", "capz-e2e-control-plane-9hx2q"}, 1},
		} {
			t.Run(tc.name, func(t *testing.T) {
				s := newStandIn(t, names)
				canned(s)
				tmp := t.TempDir()
				args := []string{"bash", azScript, "-g", "rg-capz-e2e"}
				for _, vm := range tc.vms {
					args = append(args, "-n", vm)
				}
				got := run(t, s.env(tmp, 1, len(tc.vms)), args...)
				if got.code != tc.code {
					t.Errorf("exit %d, want %d\nstderr:\n%s", got.code, tc.code, got.stderr)
				}
				cs := calls(t, s.dir)
				if len(cs) != len(tc.vms) || len(invokes(cs)) != len(tc.vms) {
					t.Errorf("az calls %v, want only %d invoke(s): the VMs were named", cs, len(tc.vms))
				}
				for _, c := range cs {
					// No agent settings: the pre-staged agent, found on the VM.
					p, q := indexOf(c.argv, "--parameters"), indexOf(c.argv, "--query")
					if p < 0 || q < p {
						t.Fatalf("no --parameters before --query: %q", c.argv)
					}
					if diff := cmp.Diff([]string{"NODEDIAG_MODE=check"}, c.argv[p+1:q]); diff != "" {
						t.Errorf("parameters (-want +got):\n%s", diff)
					}
				}
				rows := table(t, got.stdout)
				for _, vm := range tc.vms {
					if diff := cmp.Diff(wantRow(byName[vm]), rows[vm], cmp.AllowUnexported(row{})); diff != "" {
						t.Errorf("table row of %s (-want +got):\n%s", vm, diff)
					}
				}
				assertEmpty(t, tmp)
			})
		}
	})

	t.Run("sas-url-sent-inside-the-script", func(t *testing.T) {
		// A URL with a query string ('?', '&', '='): --parameters cannot
		// carry it (az splits on '=', the VM side writes values unquoted),
		// so the settings travel as quoted assignments in a copy of the
		// script. The copy az received is then run as the extension would,
		// to show the quoting survives.
		h := exampleHost(t, "swap-enabled")
		s := newStandIn(t, names)
		canned(s)
		tmp := t.TempDir()
		url := srv.URL + "/nodediag-agent?sv=2024-11-04&sr=b&sig=a%2Bb%3D&x='y'"
		got := run(t, s.env(tmp, 1, 1), append([]string{"bash", azScript, "-g", "rg-capz-e2e", "-n", "capz-e2e-md-0-7xk2p",
			"--agent-url", url, "--agent-sha256", sum, "--"}, h.args...)...)
		if got.code != 0 {
			t.Errorf("exit %d, want 0 (the canned answer is healthy)\nstderr:\n%s", got.code, got.stderr)
		}
		inv := invokes(calls(t, s.dir))
		if len(inv) != 1 {
			t.Fatalf("%d invoke calls, want 1", len(inv))
		}
		if indexOf(inv[0].argv, "--parameters") >= 0 {
			t.Errorf("--parameters used for an unsafe value: %q", inv[0].argv)
		}
		lines := strings.Split(inv[0].script, "\n")
		if lines[0] != "#!/bin/sh" || !strings.Contains(inv[0].script, "export NODEDIAG_AGENT_URL='"+strings.ReplaceAll(url, "'", `'\''`)+"'\n") {
			t.Errorf("the script sent does not start with the quoted settings:\n%.600s", inv[0].script)
		}
		if !strings.HasSuffix(inv[0].script, string(vmScriptBytes[strings.Index(string(vmScriptBytes), "\n")+1:])) {
			t.Error("the script sent does not end with nodediag-vm.sh")
		}
		file := filepath.Join(t.TempDir(), "script.sh")
		if err := os.WriteFile(file, []byte(inv[0].script), 0o500); err != nil {
			t.Fatal(err)
		}
		vmTmp := t.TempDir()
		ran := run(t, []string{"TMPDIR=" + vmTmp}, "/bin/bash", "-c", file)
		want := agentCompact(t, agent, h)
		if ran.stdout != want.stdout || ran.code != want.code {
			t.Errorf("the script sent, run: exit %d, stdout\n%s\nwant exit %d, stdout\n%s\nstderr: %s", ran.code, ran.stdout, want.code, want.stdout, ran.stderr)
		}
		assertEmpty(t, vmTmp)
		assertEmpty(t, tmp)
	})

	t.Run("usage", func(t *testing.T) {
		s := newStandIn(t, names)
		for _, tc := range []struct {
			name string
			args []string
			want string
		}{
			{"no resource group", []string{"-n", "vm"}, "-g RG is required"},
			{"url without sha256", []string{"-g", "rg", "--agent-url", srv.URL}, "--agent-sha256"},
			{"comma in an agent argument", []string{"-g", "rg", "--", "--probe", "kubelet-config,os"}, "separated by commas"},
			{"bad -j", []string{"-g", "rg", "-j", "0"}, "-j needs a positive number"},
			{"bundle of a group", []string{"bundle", "-g", "rg", "--output-blob-uri", "https://x/y"}, "exactly one -n VM"},
			{"bundle without blob", []string{"bundle", "-g", "rg", "-n", "vm"}, "--output-blob-uri"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				got := run(t, s.env(t.TempDir(), 1, 1), append([]string{"bash", azScript}, tc.args...)...)
				if got.code != 2 || !strings.Contains(got.stderr, tc.want) {
					t.Errorf("exit %d, stderr %q; want 2 and %q", got.code, got.stderr, tc.want)
				}
			})
		}
		if cs := calls(t, s.dir); len(cs) != 0 {
			t.Errorf("az called on usage errors: %v", cs)
		}

		// No VM in the group.
		s = newStandIn(t, nil)
		s.write(t, "vms.tsv", "")
		got := run(t, s.env(t.TempDir(), 1, 1), "bash", azScript, "-g", "rg-empty")
		if got.code != 2 || !strings.Contains(got.stderr, "no VM in resource group rg-empty") {
			t.Errorf("empty group: exit %d, stderr %q", got.code, got.stderr)
		}
	})

	t.Run("bundle-managed-run-command", func(t *testing.T) {
		// The stand-in plays the VM's run-command handler for real: it
		// runs the script it was given with the named parameters as
		// variables, its stdout into the output blob.
		h := exampleHost(t, "disk-full")
		want := agentCompact(t, agent, h)
		s := newStandIn(t, names)
		tmp, outDir := t.TempDir(), t.TempDir()
		blobURL := "https://stnodediag.blob.core.windows.net/bundles/capz-e2e-md-0-6hj8k.txt?sp=racw&se=2030-01-01&sig=c2lnCg%3D%3D"
		bundle := filepath.Join(outDir, "node.tar.gz")
		got := run(t, s.env(tmp, 1, 1), append([]string{"bash", azScript, "bundle", "-g", "rg-capz-e2e", "-n", "capz-e2e-md-0-6hj8k",
			"--output-blob-uri", blobURL, "--download", bundle, "--run-command-name", "nodediag-bundle-test",
			"--agent-url", srv.URL + "/nodediag-agent", "--agent-sha256", sum, "--"}, h.args...)...)
		if got.code != want.code {
			t.Errorf("exit %d, want %d (the agent's)\nstderr:\n%s", got.code, want.code, got.stderr)
		}
		cs := calls(t, s.dir)
		var verbs []string
		for _, c := range cs {
			verbs = append(verbs, strings.Join(c.argv[:3], " "))
			if c.argv[2] == "create" {
				wantArgv := []string{"vm", "run-command", "create", "-g", "rg-capz-e2e", "--vm-name", "capz-e2e-md-0-6hj8k",
					"--name", "nodediag-bundle-test", "--script", "@SCRIPT",
					"--parameters", "NODEDIAG_MODE=bundle", "NODEDIAG_AGENT_SHA256=" + sum, "NODEDIAG_ARGS=" + strings.Join(h.args, ","),
					"--output-blob-uri", blobURL, "--timeout-in-seconds", "3600",
					"--protected-parameters", "NODEDIAG_AGENT_URL=" + srv.URL + "/nodediag-agent",
					"-o", "none"}
				if diff := cmp.Diff(wantArgv, normalize(c.argv)); diff != "" {
					t.Errorf("az vm run-command create argv (-want +got):\n%s", diff)
				}
				if c.script != string(vmScriptBytes) {
					t.Error("the script of the run command is not nodediag-vm.sh")
				}
			}
		}
		sort.Strings(verbs)
		if diff := cmp.Diff([]string{"storage blob download", "vm run-command create", "vm run-command delete", "vm run-command show"}, verbs); diff != "" {
			t.Errorf("az calls (-want +got):\n%s", diff)
		}
		members := tarMembers(t, readFile(t, bundle))
		if len(members) < 2 || members[0] != "manifest.json" {
			t.Errorf("the downloaded bundle's members: %v", members)
		}
		if ents, _ := os.ReadDir(filepath.Join(s.dir, "runcommands")); len(ents) != 0 {
			t.Error("the run command was not deleted")
		}
		assertEmpty(t, tmp)
	})

	t.Run("bundle-create-fails", func(t *testing.T) {
		// The run command exists even when its creation failed: it is
		// deleted all the same, and nothing is downloaded.
		s := newStandIn(t, names)
		tmp, outDir := t.TempDir(), t.TempDir()
		bundle := filepath.Join(outDir, "node.tar.gz")
		got := run(t, s.env(tmp, 1, 1), "bash", azScript, "bundle", "-g", "rg-capz-e2e", "-n", "capz-e2e-md-0-6hj8k",
			"--output-blob-uri", "https://stnodediag.blob.core.windows.net/bundles/x.txt?sig=bad-sas", "--download", bundle)
		if got.code != 3 || !strings.Contains(got.stderr, "az vm run-command create failed: ERROR: (VMExtensionProvisioningError)") {
			t.Errorf("exit %d, want 3 and the az error\nstderr:\n%s", got.code, got.stderr)
		}
		var verbs []string
		for _, c := range calls(t, s.dir) {
			verbs = append(verbs, strings.Join(c.argv[:3], " "))
		}
		sort.Strings(verbs)
		if diff := cmp.Diff([]string{"vm run-command create", "vm run-command delete"}, verbs); diff != "" {
			t.Errorf("az calls (-want +got):\n%s", diff)
		}
		if _, err := os.Stat(bundle); !os.IsNotExist(err) {
			t.Error("a bundle file was written")
		}
		if ents, _ := os.ReadDir(filepath.Join(s.dir, "runcommands")); len(ents) != 0 {
			t.Error("the run command was not deleted")
		}
		assertEmpty(t, tmp)
	})
}

func indexOf(ss []string, s string) int {
	for i, x := range ss {
		if x == s {
			return i
		}
	}
	return -1
}
