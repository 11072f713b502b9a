#!/bin/sh
# nodediag-vm.sh: run nodediag-agent on this VM, for `az vm run-command`.
#
# It runs inside the VM (Ubuntu, Azure Linux, Flatcar: POSIX sh, sha256sum,
# curl or wget, mktemp), as root, sent there by run-command. It uses an agent
# already on the VM, or downloads one from the URL the operator gives (never
# from a URL found anywhere else) and refuses to run it unless its SHA-256 is
# the one the operator gives. It then runs
#
#   nodediag-agent check --output compact [AGENT-ARGS...]
#
# whose whole output fits in the 4096 bytes run-command keeps of stdout (the
# agent guarantees it: docs/CONTRACTS.md), the SUMMARY line last. The script
# adds nothing to stdout: its own words are ONE short line on stderr, last,
# which run-command keeps apart from stdout (its own 4096-byte tail):
#
#   nodediag-vm: exit N: what happened
#
# Action run-command does not report a script's exit code, so this line is how
# the operator side (nodediag-az.sh) learns it.
#
# With --bundle it runs `nodediag-agent collect --bundle` instead and writes
# the bundle to stdout, base64 between BEGIN/END lines, for a Managed Run
# Command whose stdout goes to a storage blob (docs/run-command.md).
#
# On the node it writes nothing but its temporary directory (mktemp -d under
# --tmpdir, $TMPDIR or /tmp: the download, the bundle), removed on exit. The
# agent only reads.
#
# Usage (arguments):
#   nodediag-vm.sh [--agent PATH] [--agent-url URL --agent-sha256 HEX]
#                  [--tmpdir DIR] [--bundle] [--] [AGENT-ARGS...]
#
# Usage (environment: what run-command's named parameters become):
#   NODEDIAG_AGENT, NODEDIAG_AGENT_URL, NODEDIAG_AGENT_SHA256, NODEDIAG_TMPDIR,
#   NODEDIAG_MODE (check or bundle), NODEDIAG_ARGS (agent arguments, separated
#   by commas: --expect-version,v1.32.0). When any of them is set, the
#   arguments are ignored: run-command passes named parameters both as
#   variables and again as positional arguments.
#
# Without --agent or --agent-url, the agent is looked up in PATH, then
# /usr/local/bin, /opt/bin (Flatcar: /usr is read-only) and /usr/bin.
# A pre-staged agent is checked against --agent-sha256 when one is given.
#
# Exit codes:
#   0  the agent: no finding at error or above
#   1  the agent: at least one finding at error or above
#   2  the agent could not run (usage, internal error)
#   10 this script's usage (e.g. a URL without its SHA-256)
#   11 no agent: none pre-staged, none given
#   12 the download failed (HTTP error, refused, timeout, no curl or wget), or
#      no temporary directory could be made
#   13 the SHA-256 does not match (or cannot be computed): the agent was not run
#   14 the agent could not be started (not executable, noexec temp dir, wrong
#      architecture)
#   other: the agent was killed by a signal (128+N)

umask 077
PROG=nodediag-vm

# finish prints the script's one line and exits; the EXIT trap removes the
# temporary directory.
finish() {
	printf '%s: exit %s: %s\n' "$PROG" "$1" "$2" >&2
	exit "$1"
}

tmp=""
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
	if [ -n "$tmp" ]; then
		rm -rf "$tmp"
	fi
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

agent="" url="" sha="" tmpdir="" mode=check

if [ -n "${NODEDIAG_AGENT-}${NODEDIAG_AGENT_URL-}${NODEDIAG_AGENT_SHA256-}${NODEDIAG_TMPDIR-}${NODEDIAG_MODE-}${NODEDIAG_ARGS-}" ]; then
	agent=${NODEDIAG_AGENT-}
	url=${NODEDIAG_AGENT_URL-}
	sha=${NODEDIAG_AGENT_SHA256-}
	tmpdir=${NODEDIAG_TMPDIR-}
	mode=${NODEDIAG_MODE:-check}
	# Agent arguments are separated by commas (a named parameter is one
	# word); globbing is off while they are split.
	set -f
	old_ifs=$IFS
	IFS=,
	# shellcheck disable=SC2086 # splitting on commas is the point
	set -- ${NODEDIAG_ARGS-}
	IFS=$old_ifs
	set +f
else
	while [ $# -gt 0 ]; do
		case $1 in
		--agent | --agent-url | --agent-sha256 | --tmpdir)
			[ $# -ge 2 ] || finish 10 "$1 needs a value"
			case $1 in
			--agent) agent=$2 ;;
			--agent-url) url=$2 ;;
			--agent-sha256) sha=$2 ;;
			--tmpdir) tmpdir=$2 ;;
			esac
			shift 2
			;;
		--agent=*) agent=${1#*=} && shift ;;
		--agent-url=*) url=${1#*=} && shift ;;
		--agent-sha256=*) sha=${1#*=} && shift ;;
		--tmpdir=*) tmpdir=${1#*=} && shift ;;
		--bundle) mode=bundle && shift ;;
		--)
			shift
			break
			;;
		*) break ;;
		esac
	done
fi

case $mode in
check | bundle) ;;
*) finish 10 "unknown mode '$mode' (check or bundle)" ;;
esac
if [ -n "$sha" ]; then
	sha=$(printf '%s' "$sha" | tr 'A-F' 'a-f')
	case $sha in
	*[!0-9a-f]*) finish 10 "the SHA-256 must be 64 hex digits" ;;
	esac
	[ ${#sha} -eq 64 ] || finish 10 "the SHA-256 must be 64 hex digits"
fi
if [ -n "$url" ]; then
	[ -n "$sha" ] || finish 10 "a download needs its SHA-256 (--agent-sha256)"
	case $url in
	http://* | https://*) ;;
	*) finish 10 "the agent URL must be http:// or https://" ;;
	esac
	[ -z "$agent" ] || finish 10 "give --agent or --agent-url, not both"
fi

# maketmp creates the temporary directory once.
maketmp() {
	[ -z "$tmp" ] || return 0
	base=${tmpdir:-${TMPDIR:-/tmp}}
	tmp=$(mktemp -d "$base/nodediag.XXXXXX" 2>/dev/null) || {
		tmp=""
		finish "$1" "cannot create a temporary directory in $base"
	}
}

# sha256of prints the SHA-256 of a file, or nothing.
sha256of() {
	if command -v sha256sum >/dev/null 2>&1; then
		sha256sum "$1" 2>/dev/null | cut -d' ' -f1
	fi
}

# download fetches $1 into $2; on failure it says why in $why. The URL is
# never printed: it may carry a SAS token.
download() {
	why=""
	if command -v curl >/dev/null 2>&1; then
		curl -fsSL --proto '=http,https' --retry 2 --connect-timeout 15 --max-time 900 -o "$2" "$1" 2>/dev/null
		rc=$?
		[ $rc -eq 0 ] && return 0
		case $rc in
		6) why="curl: host not resolved" ;;
		7) why="curl: connection refused" ;;
		22) why="curl: HTTP error (404, 403, ...)" ;;
		28) why="curl: timeout" ;;
		35 | 51 | 58 | 60) why="curl: TLS error ($rc)" ;;
		*) why="curl exit $rc" ;;
		esac
		return 1
	fi
	if command -v wget >/dev/null 2>&1; then
		# No -T: busybox 1.35's wget crashes with it.
		wget -q -O "$2" "$1" 2>/dev/null && return 0
		why="wget exit $?"
		return 1
	fi
	why="neither curl nor wget on the VM"
	return 1
}

from=""
if [ -n "$url" ]; then
	maketmp 12
	agent=$tmp/nodediag-agent
	download "$url" "$agent" || {
		rm -f "$agent"
		finish 12 "download of the agent failed: $why"
	}
	got=$(sha256of "$agent")
	if [ -z "$got" ]; then
		rm -f "$agent"
		finish 13 "cannot compute the SHA-256 (no sha256sum): the agent was not run"
	fi
	if [ "$got" != "$sha" ]; then
		rm -f "$agent"
		finish 13 "checksum mismatch: got $(printf '%.12s' "$got")..., want $(printf '%.12s' "$sha")...: the agent was removed, not run"
	fi
	chmod 0700 "$agent"
	from="downloaded, sha256 ok"
else
	if [ -z "$agent" ]; then
		for c in "$(command -v nodediag-agent 2>/dev/null)" /usr/local/bin/nodediag-agent /opt/bin/nodediag-agent /usr/bin/nodediag-agent; do
			if [ -n "$c" ] && [ -f "$c" ]; then
				agent=$c
				break
			fi
		done
		[ -n "$agent" ] || finish 11 "no agent: none in PATH, /usr/local/bin, /opt/bin; give --agent-url and --agent-sha256"
	fi
	[ -f "$agent" ] || finish 11 "no agent at $agent"
	from=$agent
	if [ -n "$sha" ]; then
		got=$(sha256of "$agent")
		[ -n "$got" ] || finish 13 "cannot compute the SHA-256 (no sha256sum): the agent was not run"
		[ "$got" = "$sha" ] || finish 13 "checksum mismatch for $agent: got $(printf '%.12s' "$got")..., want $(printf '%.12s' "$sha")...: not run"
		from="$agent, sha256 ok"
	fi
fi
[ -x "$agent" ] || finish 14 "the agent $agent is not executable"

# meaning says what the agent's exit code means.
meaning() {
	case $1 in
	0) echo "no finding at error or above" ;;
	1) echo "at least one finding at error or above" ;;
	2) echo "the agent could not run" ;;
	*) echo "the agent ended with $1" ;;
	esac
}

if [ "$mode" = check ]; then
	"$agent" check --output compact "$@"
	rc=$?
	case $rc in
	126 | 127) finish 14 "the agent could not be started (exit $rc: noexec temp dir or wrong architecture? try --tmpdir)" ;;
	esac
	finish "$rc" "$(meaning "$rc") ($from)"
fi

# bundle: collect into the temporary directory, then write it to stdout.
maketmp 12
command -v base64 >/dev/null 2>&1 || finish 10 "--bundle needs base64 on the VM"
bundle=$tmp/node.tar.gz
# collect's own stdout line ("bundle: PATH ...") goes to stderr: stdout is
# the bundle.
"$agent" collect --bundle "$bundle" "$@" >&2
rc=$?
case $rc in
126 | 127) finish 14 "the agent could not be started (exit $rc: noexec temp dir or wrong architecture? try --tmpdir)" ;;
esac
if [ ! -f "$bundle" ]; then
	finish "$rc" "no bundle written: $(meaning "$rc") ($from)"
fi
size=$(wc -c <"$bundle" | tr -d ' ')
sum=$(sha256of "$bundle")
echo "nodediag-bundle: node.tar.gz $size bytes sha256 $sum"
echo "-----BEGIN NODEDIAG BUNDLE-----"
base64 <"$bundle"
echo "-----END NODEDIAG BUNDLE-----"
finish "$rc" "bundle of $size bytes written to stdout; $(meaning "$rc") ($from)"
