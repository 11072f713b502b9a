#!/usr/bin/env bash
# make demo: run the agent on every example host shipped in the repo and print
# what it finds. No cluster needed: each example is a directory tree shaped
# like a node's root (agent/testdata/hosts/<name>/root), with fake binaries
# that answer --version like the real ones.
set -u
agent=${1:-bin/nodediag-agent}
cd "$(dirname "$0")/.." || exit 2
hosts=agent/testdata/hosts
summaries=()
# The example hosts are copies, whose binaries the agent never runs by
# default (--exec auto): running the project's own stand-in scripts is an
# explicit opt-in, and the agent's warning about it is said once here.
echo "demo: the example hosts' stand-in binaries answer --version: --exec local (the agent's warning about running a copy's code is left out)"
for dir in "$hosts"/*/; do
  name=$(basename "$dir")
  args=()
  if [ -f "$dir/args" ]; then
    while IFS= read -r line; do
      case "$line" in ''|'#'*) ;; *) args+=("$line") ;; esac
    done < "$dir/args"
  fi
  printf '\n================ %s ================\n' "$name"
  out=$("$agent" check --root "$dir/root" --exec local "${args[@]}" --output text 2> >(grep -v 'warning: --exec local runs' >&2))
  code=$?
  printf '%s\n' "$out"
  if [ "$code" -eq 2 ]; then
    echo "demo: the agent failed on $name" >&2
    exit 2
  fi
  summaries+=("$(printf '%-28s exit %d  %s' "$name" "$code" "$(printf '%s\n' "$out" | tail -n 1)")")
done
printf '\n================ summary ================\n'
printf '%s\n' "${summaries[@]}"

# Air-gapped: one host's bundle carried out and analysed elsewhere.
bundle_dir=$(mktemp -d)
trap 'rm -rf "$bundle_dir"' EXIT
host=dkp-registry-missing-scheme
hargs=()
if [ -f "$hosts/$host/args" ]; then
  while IFS= read -r line; do
    case "$line" in ''|'#'*) ;; *) hargs+=("$line") ;; esac
  done < "$hosts/$host/args"
fi
printf '
================ air-gapped: nodediag-agent collect --bundle; nodediag analyze ================
'
"$agent" collect --root "$hosts/$host/root" --exec none --offline "${hargs[@]}" --bundle "$bundle_dir/$host.tar.gz"
if [ $? -eq 2 ]; then
  echo "demo: collect failed on $host" >&2
  exit 2
fi
collector=$(dirname "$agent")/nodediag
if [ -x "$collector" ]; then
  "$collector" analyze "$bundle_dir/$host.tar.gz" 2>/dev/null | sed -n '1,8p'
  echo "..."
  # CI triage: the artifact tree a failed CAPZ e2e job leaves (build log,
  # machines' journal exports and cloud-init logs, resource dumps).
  tree=$(dirname "$0")/../collector/artifacts/testdata/capz-e2e
  printf '\n================ CI artifact tree: nodediag analyze %s ================\n' "collector/artifacts/testdata/capz-e2e"
  "$collector" analyze "$tree" 2>/dev/null | sed -n '1,30p'
  echo "..."
fi

