#!/usr/bin/env bash
# nodediag-az.sh: run nodediag-agent on Azure VMs through `az vm run-command`,
# from the operator's machine (bash >= 4.3 and the az CLI, logged in).
#
#   nodediag-az.sh [check] -g RG [-n VM]... [-j N] [--subscription SUB]
#                  [--agent PATH | --agent-url URL --agent-sha256 HEX]
#                  [--tmpdir DIR] [--out DIR] [--script FILE] [-- AGENT-ARGS...]
#
# check (the default) runs nodediag-vm.sh (next to this script, or --script)
# on one VM (-n, repeatable) or on every VM of the resource group (az vm list
# -g RG), N at a time (-j, default 4), with
#
#   az vm run-command invoke -g RG -n VM --command-id RunShellScript \
#     --scripts @nodediag-vm.sh --parameters NODEDIAG_MODE=check ... \
#     --query 'value[0].message' -o tsv
#
# shows progress on stderr and prints a table on stdout: each VM, the exit
# code of nodediag-vm.sh (read from its last stderr line: Action Run Command
# does not report exit codes), the verdict of the agent's SUMMARY line and
# the most likely root cause. --out DIR keeps each VM's whole answer in
# DIR/VM.txt.
#
# The settings reach the VM as run-command named parameters (NAME=VALUE:
# environment variables of the script). A value run-command parameters cannot
# carry safely (the az CLI splits on '=', the VM side writes them into the
# script unquoted: a SAS URL's '?' and '&') is sent instead as a quoted
# assignment at the top of a copy of nodediag-vm.sh. Agent arguments travel
# in NODEDIAG_ARGS, separated by commas (so none may contain a comma).
#
#   nodediag-az.sh bundle -g RG -n VM --output-blob-uri SAS-URL
#                  [--error-blob-uri SAS-URL] [--download FILE]
#                  [--run-command-name NAME] [--keep] [--subscription SUB]
#                  [--agent PATH | --agent-url URL --agent-sha256 HEX]
#                  [--tmpdir DIR] [--script FILE] [-- AGENT-ARGS...]
#
# bundle collects a full bundle (nodediag-agent collect --bundle) with a
# Managed Run Command, whose stdout goes to an append blob:
#
#   az vm run-command create -g RG --vm-name VM --name NAME --script @nodediag-vm.sh \
#     --parameters NODEDIAG_MODE=bundle ... --protected-parameters NODEDIAG_AGENT_URL=... \
#     --output-blob-uri SAS-URL --timeout-in-seconds 3600
#
# then reads the exit code from the instance view, downloads the blob
# (--download FILE: az storage blob download, then the bundle is decoded
# and its SHA-256 checked) and deletes the run command (unless --keep): it is
# an Azure resource of the VM, created and deleted by this command.
#
# Exit codes:
#   0 every VM answered; no finding at error or above
#   1 every VM answered; at least one has a finding at error or above
#   2 usage, az missing, the VM list could not be read, or no VM
#   3 at least one VM did not answer properly: az failed, no exit line in its
#     answer, the agent could not run (2) or nodediag-vm.sh failed (10-14);
#     bundle: the bundle could not be downloaded, decoded or verified
set -u -o pipefail

PROG=nodediag-az
say() { printf '%s: %s\n' "$PROG" "$*" >&2; }
usage() {
	say "$*"
	say "usage: $PROG [check] -g RG [-n VM]... [-j N] [--agent PATH | --agent-url URL --agent-sha256 HEX] [--out DIR] [-- AGENT-ARGS...]"
	say "       $PROG bundle -g RG -n VM --output-blob-uri SAS-URL [--download FILE] [--agent-url URL --agent-sha256 HEX] [-- AGENT-ARGS...]"
	exit 2
}

mode=check
case ${1-} in
check | bundle)
	mode=$1
	shift
	;;
esac

rg="" sub="" jobs_max=4 agent="" url="" sha="" vmtmp="" out=""
script="$(dirname "$0")/nodediag-vm.sh"
outblob="" errblob="" download="" rcname="" keep=0
vms=()
agent_args=()
while [ $# -gt 0 ]; do
	case $1 in
	-g | --resource-group | -n | --name | -j | --jobs | --subscription | --agent | --agent-url | --agent-sha256 | --tmpdir | --out | --script | --output-blob-uri | --error-blob-uri | --download | --run-command-name)
		[ $# -ge 2 ] || usage "$1 needs a value"
		case $1 in
		-g | --resource-group) rg=$2 ;;
		-n | --name) vms+=("$2") ;;
		-j | --jobs) jobs_max=$2 ;;
		--subscription) sub=$2 ;;
		--agent) agent=$2 ;;
		--agent-url) url=$2 ;;
		--agent-sha256) sha=$2 ;;
		--tmpdir) vmtmp=$2 ;;
		--out) out=$2 ;;
		--script) script=$2 ;;
		--output-blob-uri) outblob=$2 ;;
		--error-blob-uri) errblob=$2 ;;
		--download) download=$2 ;;
		--run-command-name) rcname=$2 ;;
		esac
		shift 2
		;;
	--keep)
		keep=1
		shift
		;;
	--)
		shift
		agent_args=("$@")
		break
		;;
	-h | --help) usage "runs nodediag-agent on Azure VMs with az vm run-command" ;;
	*) usage "unknown argument: $1" ;;
	esac
done

[ -n "$rg" ] || usage "-g RG is required"
[[ $jobs_max =~ ^[1-9][0-9]*$ ]] || usage "-j needs a positive number"
[ -f "$script" ] || usage "no in-VM script at $script (--script)"
if [ -n "$url" ]; then
	[[ $sha =~ ^[0-9a-fA-F]{64}$ ]] || usage "--agent-url needs --agent-sha256 (64 hex digits)"
	[ -z "$agent" ] || usage "give --agent or --agent-url, not both"
elif [ -n "$sha" ]; then
	[[ $sha =~ ^[0-9a-fA-F]{64}$ ]] || usage "--agent-sha256 needs 64 hex digits"
fi
for a in "${agent_args[@]}"; do
	case $a in
	*,*) usage "agent arguments travel separated by commas: '$a' has one (use --probe a --probe b, not --probe a,b)" ;;
	"") usage "agent arguments cannot be empty" ;;
	esac
done
command -v az >/dev/null 2>&1 || usage "az (the Azure CLI) is not in PATH"

subargs=()
[ -z "$sub" ] || subargs=(--subscription "$sub")

work=$(mktemp -d "${TMPDIR:-/tmp}/nodediag-az.XXXXXX") || {
	say "cannot create a temporary directory"
	exit 2
}
trap 'rm -rf "$work"' EXIT

# The settings of nodediag-vm.sh, as NAME=VALUE.
settings=("NODEDIAG_MODE=$mode")
[ -z "$agent" ] || settings+=("NODEDIAG_AGENT=$agent")
[ -z "$url" ] || settings+=("NODEDIAG_AGENT_URL=$url")
[ -z "$sha" ] || settings+=("NODEDIAG_AGENT_SHA256=$sha")
[ -z "$vmtmp" ] || settings+=("NODEDIAG_TMPDIR=$vmtmp")
if [ ${#agent_args[@]} -gt 0 ]; then
	joined=$(
		IFS=,
		printf '%s' "${agent_args[*]}"
	)
	settings+=("NODEDIAG_ARGS=$joined")
fi

# shquote quotes a word for sh: 'it'\''s'.
shquote() { printf "'%s'" "${1//\'/\'\\\'\'}"; }

# embed writes a copy of the in-VM script with the settings assigned at its
# top (after the shebang), for values --parameters cannot carry.
embed() {
	local f=$work/nodediag-vm.sh s
	{
		head -n 1 "$script"
		echo "# Settings added by nodediag-az.sh (values run-command parameters cannot carry):"
		for s in "${settings[@]}"; do
			printf 'export %s=%s\n' "${s%%=*}" "$(shquote "${s#*=}")"
		done
		tail -n +2 "$script"
	} >"$f"
	echo "$f"
}

# collected reads the instance view of run command $2 on VM $1 into rc and,
# with --download, fetches and checks the bundle.
collected() {
	local vm=$1 name=$2 view showrc code state last header want got
	view=$(az vm run-command show -g "$rg" --vm-name "$vm" --name "$name" --instance-view \
		--query '[instanceView.exitCode, instanceView.executionState, instanceView.error]' -o tsv "${subargs[@]}" 2>"$work/show.err")
	showrc=$?
	code=$(printf '%s\n' "$view" | head -n 1 | cut -f1)
	state=$(printf '%s\n' "$view" | head -n 1 | cut -f2)
	last=$(printf '%s\n' "$view" | grep -o 'nodediag-vm: exit [0-9][0-9]*: .*' | tail -n 1)
	if [ $showrc -ne 0 ]; then
		say "$vm: az vm run-command show failed: $(tail -n 1 "$work/show.err")"
	else
		say "$vm: run command $state, exit ${code:-?}${last:+: ${last#nodediag-vm: }}"
		case $code in
		0 | 1) rc=$code ;;
		esac
	fi
	if [ -n "$download" ] && [ "$rc" -le 1 ]; then
		if ! az storage blob download --blob-url "$outblob" --file "$work/output.txt" "${subargs[@]}" -o none 2>"$work/dl.err"; then
			say "$vm: downloading the output blob failed: $(tail -n 1 "$work/dl.err")"
			rc=3
		else
			header=$(grep '^nodediag-bundle: ' "$work/output.txt" | tail -n 1)
			want=${header##* }
			sed -n '/^-----BEGIN NODEDIAG BUNDLE-----$/,/^-----END NODEDIAG BUNDLE-----$/p' "$work/output.txt" |
				sed '1d;$d' | base64 -d >"$work/bundle.tar.gz" 2>/dev/null
			got=$(sha256sum "$work/bundle.tar.gz" | cut -d' ' -f1)
			if [ -z "$header" ] || [ "$got" != "$want" ]; then
				say "$vm: the output blob holds no intact bundle (sha256 ${got:0:12}..., header says ${want:0:12}...)"
				rc=3
			elif ! cp "$work/bundle.tar.gz" "$download"; then
				say "$vm: cannot write $download"
				rc=3
			else
				say "$vm: bundle $download ($(wc -c <"$download" | tr -d ' ') bytes, sha256 ok): nodediag analyze $download"
			fi
		fi
	fi
}

if [ "$mode" = bundle ]; then
	[ ${#vms[@]} -eq 1 ] || usage "bundle needs exactly one -n VM"
	[ -n "$outblob" ] || usage "bundle needs --output-blob-uri (a SAS URL of an append blob with read, add, create, write)"
	vm=${vms[0]}
	name=${rcname:-nodediag-bundle-$(date -u +%Y%m%d%H%M%S)}
	# Managed Run Command sets named parameters as environment variables
	# (no shell in between): any value is safe. The agent URL may carry a
	# SAS token: it is a protected parameter.
	params=() protected=()
	for s in "${settings[@]}"; do
		case $s in
		NODEDIAG_AGENT_URL=*) protected+=("$s") ;;
		*) params+=("$s") ;;
		esac
	done
	cmd=(az vm run-command create -g "$rg" --vm-name "$vm" --name "$name" --script "@$script"
		--parameters "${params[@]}" --output-blob-uri "$outblob" --timeout-in-seconds 3600)
	[ ${#protected[@]} -eq 0 ] || cmd+=(--protected-parameters "${protected[@]}")
	[ -z "$errblob" ] || cmd+=(--error-blob-uri "$errblob")
	cmd+=("${subargs[@]}" -o none)
	say "$vm: collecting a bundle with the managed run command $name (its stdout goes to the output blob)"
	rc=3
	if ! "${cmd[@]}" 2>"$work/create.err"; then
		say "$vm: az vm run-command create failed: $(grep -v '^[[:space:]]*$' "$work/create.err" | tail -n 1)"
		download=""
	else
		collected "$vm" "$name"
	fi
	if [ $keep -eq 0 ]; then
		az vm run-command delete -g "$rg" --vm-name "$vm" --name "$name" --yes "${subargs[@]}" -o none 2>"$work/del.err" ||
			say "$vm: deleting the run command $name failed (delete it by hand): $(tail -n 1 "$work/del.err")"
	fi
	exit "$rc"
fi

# check: the VMs.
if [ ${#vms[@]} -eq 0 ]; then
	if ! list=$(az vm list -g "$rg" --query "[].name" -o tsv "${subargs[@]}" 2>"$work/list.err"); then
		say "cannot list the VMs of $rg: $(grep -v '^[[:space:]]*$' "$work/list.err" | tail -n 1)"
		exit 2
	fi
	while IFS= read -r v; do
		v=${v%$'\r'}
		[ -z "$v" ] || vms+=("$v")
	done <<<"$list"
	[ ${#vms[@]} -gt 0 ] || {
		say "no VM in resource group $rg"
		exit 2
	}
fi

# --parameters when every value is safe for it; the embedded copy otherwise.
safe=1
for s in "${settings[@]}"; do
	[[ ${s#*=} =~ ^[A-Za-z0-9._~:/@%+,-]*$ ]] || safe=0
done
if [ $safe -eq 1 ]; then
	sendargs=(--scripts "@$script" --parameters "${settings[@]}")
else
	sendargs=(--scripts "@$(embed)")
	say "a setting has characters run-command parameters do not carry safely (a SAS URL?): sending the settings inside the script"
fi

# parse reads answer $1 (the message: "Enable succeeded: \n[stdout]\n...\n[stderr]\n...")
# into the result line $2: exit, verdict, cause, separated by tabs.
parse() {
	local msg=$1 res=$2 stdout stderr summary code verdict cause last
	stdout=$(awk '{l[NR]=$0} $0=="[stdout]" && !s {s=NR} $0=="[stderr]" {e=NR} END{if (s && e) for (i=s+1; i<e; i++) print l[i]}' "$msg")
	stderr=$(awk '{l[NR]=$0} $0=="[stderr]" {e=NR} END{if (e) for (i=e+1; i<=NR; i++) print l[i]}' "$msg")
	last=$(printf '%s\n' "$stderr" | grep '^nodediag-vm: exit [0-9][0-9]*: ' | tail -n 1)
	summary=$(printf '%s\n' "$stdout" | grep '^SUMMARY ' | tail -n 1)
	code="?" verdict="-" cause="-"
	if [ -n "$last" ]; then
		code=${last#nodediag-vm: exit }
		code=${code%%:*}
	fi
	if [ -n "$summary" ]; then
		read -r _ verdict _ cause <<<"$summary"
		if [ "$verdict" = ok ]; then
			cause="-"
		else
			cause=$(printf '%s' "$cause" | sed 's/ ([0-9][^()]*)$//')
		fi
	elif [ -n "$last" ]; then
		cause=${last#nodediag-vm: exit *: }
	else
		cause="no nodediag-vm exit line in the answer (the script did not finish?)"
	fi
	printf '%s\t%s\t%s\n' "$code" "$verdict" "$cause" >"$res"
}

# one runs the script on VM number $1.
one() {
	local i=$1 vm=${vms[$1]} rc code verdict cause
	az vm run-command invoke -g "$rg" -n "$vm" --command-id RunShellScript "${sendargs[@]}" \
		--query 'value[0].message' -o tsv "${subargs[@]}" >"$work/$i.msg" 2>"$work/$i.err"
	rc=$?
	if [ $rc -ne 0 ]; then
		printf 'az:%s\t-\t%s\n' "$rc" "$(grep -v '^[[:space:]]*$' "$work/$i.err" | tail -n 1 | cut -c1-200)" >"$work/$i.res"
	else
		parse "$work/$i.msg" "$work/$i.res"
		if [ -n "$out" ]; then
			cp "$work/$i.msg" "$out/$vm.txt"
		fi
	fi
	IFS=$'\t' read -r code verdict cause <"$work/$i.res"
	[ "$cause" != "-" ] || cause=""
	say "$vm: exit $code, $verdict${cause:+: ${cause:0:80}}"
}

if [ -n "$out" ]; then
	mkdir -p "$out" || {
		say "cannot create $out"
		exit 2
	}
fi
n=${#vms[@]}
say "running nodediag-vm.sh on $n VM(s) of $rg, $jobs_max at a time"
for i in "${!vms[@]}"; do
	while [ "$(jobs -pr | wc -l)" -ge "$jobs_max" ]; do
		wait -n
	done
	say "[$((i + 1))/$n] ${vms[$i]}: started"
	one "$i" &
done
wait

# The table.
w=2
for vm in "${vms[@]}"; do
	[ "${#vm}" -le "$w" ] || w=${#vm}
done
printf '%-*s  %-6s  %-8s  %s\n' "$w" VM EXIT VERDICT "ROOT CAUSE"
okn=0 errn=0 failn=0
for i in "${!vms[@]}"; do
	IFS=$'\t' read -r code verdict cause <"$work/$i.res"
	printf '%-*s  %-6s  %-8s  %s\n' "$w" "${vms[$i]}" "$code" "$verdict" "${cause:0:120}"
	case $code in
	0) okn=$((okn + 1)) ;;
	1) errn=$((errn + 1)) ;;
	*) failn=$((failn + 1)) ;;
	esac
done
say "$n VM(s): $okn without error, $errn with errors, $failn without an answer"
if [ $failn -gt 0 ]; then
	exit 3
elif [ $errn -gt 0 ]; then
	exit 1
fi
exit 0
