#!/usr/bin/env bash
# make demo, third part: a Cluster API diagnosis. It starts a real
# kube-apiserver and etcd (the collector tests' server, built by `make
# testbin`) holding a CAPZ cluster whose only worker is stuck in Provisioned
# (hack/democluster/cluster.yaml), writes the reports of two example hosts
# as their agents would (the healthy control plane, and a worker whose
# kubeadm join was refused), and runs `nodediag describe cluster` and
# `nodediag diagnose cluster` against it. Without .testbin it says how to
# build it and exits 0. Then the same through a collector that watches the
# management cluster itself (`nodediag serve --kubeconfig`), the two agents
# streaming to it (`nodediag-agent run --once`), and `nodediag diagnose
# cluster --collector` with no kubeconfig on the operator's side.
# Everything it starts is stopped and removed on exit.
set -euo pipefail
collector=${1:-bin/nodediag}
agent=${2:-bin/nodediag-agent}
cd "$(dirname "$0")/.."
collector=$(realpath "$collector")
agent=$(realpath "$agent")
hosts=agent/testdata/hosts
cluster=demo/capz-e2e
# Each example host plays one VM of the fixture: the node name its agent
# reports is the VM's (the AzureMachine's) name, which is how the collector
# joins a report to its Machine when the node never registered.
nodes=(healthy-control-plane:capz-e2e-control-plane-t8x5m join-token-expired:capz-e2e-md-0-p9s2d)

work=$(mktemp -d)
pid=""
serve_pid=""
cleanup() {
  if [ -n "$serve_pid" ]; then
    kill -TERM "$serve_pid" 2>/dev/null || true
    wait "$serve_pid" 2>/dev/null || true
  fi
  if [ -n "$pid" ]; then
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
# A signal ends the script through exit, hence through cleanup, once the
# command in the foreground (go build, the agent) has finished.
trap 'exit 130' INT
trap 'exit 143' TERM

go build -o "$work/democluster" ./hack/democluster
code=0
"$work/democluster" --kubeconfig-out "$work/kubeconfig" --load hack/democluster/cluster.yaml \
  >"$work/democluster.out" 2>"$work/democluster.log" &
pid=$!

ready=0
for _ in $(seq 600); do # 2 minutes: envtest's own start bound is one
  if grep -qx 'democluster: ready' "$work/democluster.out"; then ready=1; break; fi
  if ! kill -0 "$pid" 2>/dev/null; then
    wait "$pid" || code=$?
    pid=""
    break
  fi
  sleep 0.2
done
if [ "$code" -eq 3 ]; then
  printf '\n================ Cluster API ================\n'
  echo "demo: no test API server here: \`make testbin\`, then \`make demo\`, adds the Cluster API part (building kube-apiserver and etcd takes a few minutes)."
  exit 0
fi
if [ "$ready" -ne 1 ]; then
  echo "demo: the test API server did not start (exit $code):" >&2
  tail -n 30 "$work/democluster.log" >&2
  exit 2
fi
echo "management cluster: kube-apiserver and etcd on loopback, $(grep -c '^kind:' hack/democluster/cluster.yaml) objects of hack/democluster/cluster.yaml"

reports=()
for pair in "${nodes[@]}"; do
  host=${pair%%:*} vm=${pair#*:}
  # The agent's JSON report of the host, as `nodediag-agent check` would
  # write it on the VM (exit 1 is "findings").
  c=0
  "$agent" check --root "$hosts/$host/root" --exec none --offline --node-name "$vm" --output json \
    >"$work/$vm.json" || c=$?
  if [ "$c" -ge 2 ]; then
    echo "demo: the agent failed on $host (exit $c)" >&2
    exit 2
  fi
  reports+=("$work/$vm.json")
  echo "node report $vm.json: the example host $host"
done
joined=$(IFS=,; echo "${reports[*]}")

printf '\n================ nodediag describe cluster %s ================\n' "$cluster"
"$collector" describe cluster "$cluster" --kubeconfig "$work/kubeconfig" --reports "$joined"

printf '\n================ nodediag diagnose cluster %s -o markdown ================\n' "$cluster"
c=0
"$collector" diagnose cluster "$cluster" --kubeconfig "$work/kubeconfig" --reports "$joined" -o markdown || c=$?
if [ "$c" -ge 2 ]; then
  echo "demo: diagnose failed (exit $c)" >&2
  exit 2
fi

printf '\n================ through a collector: nodediag serve --kubeconfig; diagnose --collector ================\n'
"$collector" serve --listen 127.0.0.1:0 --insecure --data-dir "$work/collector" --kubeconfig "$work/kubeconfig" \
  2>"$work/serve.log" &
serve_pid=$!
addr=""
for _ in $(seq 150); do
  addr=$(sed -n 's/^nodediag: serving on //p' "$work/serve.log" | head -n1)
  [ -n "$addr" ] && break
  if ! kill -0 "$serve_pid" 2>/dev/null; then break; fi
  sleep 0.2
done
if [ -z "$addr" ]; then
  echo "demo: the collector did not start:" >&2
  tail -n 20 "$work/serve.log" >&2
  exit 2
fi
for pair in "${nodes[@]}"; do
  host=${pair%%:*} vm=${pair#*:}
  "$agent" run --once --collector "$addr" --insecure --root "$hosts/$host/root" --exec none --offline \
    --node-name "$vm" --spool-dir "$work/spool-$vm" 2>>"$work/agents.log"
done
echo "collector on $addr (watching the management cluster); ${#nodes[@]} agents reported to it"
c=0
"$collector" diagnose cluster "$cluster" --collector "$addr" --insecure -o markdown >"$work/remote.md" 2>"$work/remote.err" || c=$?
if [ "$c" -ge 2 ]; then
  echo "demo: diagnose through the collector failed (exit $c)" >&2
  cat "$work/remote.err" >&2
  exit 2
fi
sed -n '1,/^## Root cause/p' "$work/remote.md"
grep -m1 -A3 '^- Failure domain' "$work/remote.md" || true
echo "(the whole report: the same as above, made by the collector from its informers and stored reports)"
cat "$work/remote.err"
