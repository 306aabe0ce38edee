#!/usr/bin/env bash
# Throughput of the tiny MLP through the agent under a closed-loop load (wrk, keep-alive,
# binary tensor extension), one row per request.
#   bench/throughput.sh [CONNECTIONS] [SECONDS] [INSTANCES] [BATCH] [MAX_DELAY_US]
set -euo pipefail
cd "$(dirname "$0")/.."
conns=${1:-16}; secs=${2:-10}; count=${3:-2}; batch=${4:-8}; delay=${5:-200}
dir=$(mktemp -d)
trap 'kill $(cat "$dir/pid") 2>/dev/null || true; rm -rf "$dir"' EXIT
cat > "$dir/config.yaml" <<YAML
server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0, io_threads: 1,
         runtime_idle_spin_us: ${PACKRAT_IDLE_SPIN_US:-100}}
models:
  - name: tiny
    path: $PWD/models/tiny_mlp.pt
    inputs:  [{name: x, datatype: FP32, shape: [-1, 16]}]
    outputs: [{name: y, datatype: FP32, shape: [-1, 8]}]
    batching: {max_batch: 64, max_delay_us: $delay, max_inflight_batches: 2}
    instances: [{count: $count, threads: 1, batch: $batch}]
YAML
build/bin/packrat-agent --config "$dir/config.yaml" --port-file "$dir/ports.json" \
  2> "$dir/agent.log" & echo $! > "$dir/pid"
for _ in $(seq 600); do grep -q "models loaded" "$dir/agent.log" && break; sleep 0.1; done
port=$(jq .http "$dir/ports.json")
echo "config: $count x <1 thread, batch $batch>, max_delay_us $delay; wrk -c$conns -d${secs}s"
wrk -t1 -c"$conns" -d"${secs}s" -s bench/tiny_infer.lua "http://127.0.0.1:$port/v2/models/tiny/infer"
