#!/usr/bin/env bash
# Heap allocations per request of the agent under the tiny model's closed-loop load (wrk, 16
# keep-alive connections, the binary tensor extension; the config of bench/throughput.sh):
# heaptrack attaches to the running agent, wrk runs, and the allocation calls heaptrack counted
# are divided by the requests wrk completed (an idle agent makes ~40 a second: negligible).
#
#   bench/alloc_per_request.sh [AGENT] [SECONDS]
#     AGENT    default build/bin/packrat-agent. To see where the allocations come from, build
#              RelWithDebInfo (cmake -B build-prof -DCMAKE_BUILD_TYPE=RelWithDebInfo
#              -DPACKRAT_BUILD_TESTS=OFF), attach heaptrack the same way and read
#              heaptrack_print's "MOST CALLS TO ALLOCATION FUNCTIONS"
#     SECONDS  wrk's duration, default 5
# Needs heaptrack and wrk (scripts/packages.txt), models/tiny_mlp.pt (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
agent=${1:-build/bin/packrat-agent}
secs=${2:-5}
dir=$(mktemp -d)
trap 'kill "$apid" 2>/dev/null || true; rm -rf "$dir"' EXIT
cat >"$dir/config.yaml" <<YAML
server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0, io_threads: 1}
models:
  - name: tiny
    path: $PWD/models/tiny_mlp.pt
    inputs:  [{name: x, datatype: FP32, shape: [-1, 16]}]
    outputs: [{name: y, datatype: FP32, shape: [-1, 8]}]
    batching: {max_batch: 64, max_delay_us: 200, max_inflight_batches: 2}
    instances: [{count: 2, threads: 1, batch: 8}]
YAML
"$agent" --config "$dir/config.yaml" --port-file "$dir/ports.json" 2>"$dir/agent.log" &
apid=$!
for _ in $(seq 600); do grep -q "models loaded" "$dir/agent.log" && break; sleep 0.1; done
port=$(jq .http "$dir/ports.json")
(cd "$dir" && exec timeout 120 heaptrack -p "$apid" >"$dir/heaptrack.log" 2>&1) &
tracer=$!
sleep 6  # heaptrack injects itself into the agent
wrk -t1 -c16 -d"${secs}s" -s bench/tiny_infer.lua "http://127.0.0.1:$port/v2/models/tiny/infer" \
  >"$dir/wrk.txt" 2>&1
requests=$(awk '/requests in/ {print $1}' "$dir/wrk.txt")
kill "$apid"
wait "$apid" 2>/dev/null || true
wait "$tracer" 2>/dev/null || true
file=$(ls "$dir"/heaptrack.*.zst)
calls=$(heaptrack_print -f "$file" 2>/dev/null | awk '/^calls to allocation/ {print $5}')
echo "requests $requests, allocation calls $calls, per request $((calls / requests))"
