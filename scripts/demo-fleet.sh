#!/usr/bin/env bash
# make demo, second part: a fleet on loopback. It issues certificates with
# `nodediag certs`, starts the collector (`nodediag serve`, mutual TLS, its
# store in a temporary directory), one `nodediag-agent run` per example host
# (each host's tree plays a node), waits until every agent has reported,
# then sweeps the fleet and prints the fleet table and one node's report.
# Everything it starts is stopped and removed on exit.
set -euo pipefail
collector=${1:-bin/nodediag}
agent=${2:-bin/nodediag-agent}
cd "$(dirname "$0")/.."
collector=$(realpath "$collector")
agent=$(realpath "$agent")
hosts=agent/testdata/hosts
nodes=(healthy-worker healthy-control-plane disk-full swap-enabled kubelet-client-cert-expired containerd-broken-config join-token-expired cni-not-installed)

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

"$collector" certs --dir "$work/pki" >/dev/null
pki=$work/pki

"$collector" serve --listen 127.0.0.1:0 --data-dir "$work/data" \
  --tls-cert "$pki/server.crt" --tls-key "$pki/server.key" --client-ca "$pki/ca.crt" \
  --log-level warn 2>"$work/serve.log" &
pids+=($!)
addr=""
for _ in $(seq 100); do
  addr=$(sed -n 's/^nodediag: serving on \([^ ]*\).*/\1/p' "$work/serve.log" | head -n 1)
  [ -n "$addr" ] && break
  sleep 0.1
done
if [ -z "$addr" ]; then
  echo "demo: the collector did not start:" >&2
  cat "$work/serve.log" >&2
  exit 2
fi
echo "collector serving on $addr (mutual TLS, certificates from \`nodediag certs\`)"

op=(--collector "$addr" --tls-cert "$pki/operator.crt" --tls-key "$pki/operator.key" --ca "$pki/ca.crt")
for n in "${nodes[@]}"; do
  # The host's check flags, but --now: a running agent judges as of now.
  args=()
  skip=0
  if [ -f "$hosts/$n/args" ]; then
    while IFS= read -r line; do
      if [ "$skip" -eq 1 ]; then skip=0; continue; fi
      case "$line" in
        ''|'#'*) ;;
        --now) skip=1 ;;
        *) args+=("$line") ;;
      esac
    done < "$hosts/$n/args"
  fi
  "$agent" run --collector "$addr" --tls-cert "$pki/agent.crt" --tls-key "$pki/agent.key" --ca "$pki/ca.crt" \
    --node-name "$n" --root "$hosts/$n/root" --spool-dir "$work/spool/$n" --interval 1h "${args[@]}" \
    2>"$work/agent-$n.log" &
  pids+=($!)
done
echo "started ${#nodes[@]} agents, one per example host"

reported=0
for _ in $(seq 150); do
  reported=$("$collector" nodes "${op[@]}" -o json | grep -c '"reported_at"' || true)
  [ "$reported" -ge "${#nodes[@]}" ] && break
  sleep 0.2
done
if [ "$reported" -lt "${#nodes[@]}" ]; then
  echo "demo: only $reported of ${#nodes[@]} agents reported:" >&2
  tail -n 5 "$work"/agent-*.log >&2
  exit 2
fi

printf '\n================ nodediag sweep ================\n'
code=0
"$collector" sweep "${op[@]}" --timeout 30s || code=$?
if [ "$code" -ge 2 ]; then
  echo "demo: the sweep failed (exit $code)" >&2
  tail -n 20 "$work"/*.log >&2
  exit 2
fi
printf '\n================ nodediag nodes ================\n'
"$collector" nodes "${op[@]}" || true
printf '\n================ nodediag node disk-full ================\n'
"$collector" node disk-full "${op[@]}" || true
