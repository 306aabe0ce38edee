#!/usr/bin/env bash
# gRPC ModelInfer vs REST with the binary tensor extension vs REST JSON, through one agent:
# the tiny MLP (one row of 16 floats) and ResNet-18 (one 3x224x224 image, 602 KB), each alone
# on the node, with closed-loop clients of bench/grpc_load.cc (C++: gRPC stubs, a keep-alive
# HTTP client). Per model: the health-check round trip of each protocol (the floor), then each
# protocol at 1 client (latency) and 16 clients (throughput). Prints Markdown table rows, with
# the CPU time the agent process (not its runtimes) and the client spent per request.
#   bench/grpc_vs_rest.sh [SECONDS] [ROUNDS]          (BUILD_DIR=build by default)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}; rounds=${2:-1}
build=${BUILD_DIR:-build}
dir=$(mktemp -d)
cleanup() { [ -f "$dir/pid" ] && kill "$(cat "$dir/pid")" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT

# start_agent NAME FILE INPUT SHAPE OUTPUT OUTSHAPE INSTANCES
start_agent() {
  cat > "$dir/config.yaml" <<YAML
server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0, grpc: 127.0.0.1:0}
models:
  - name: $1
    path: $PWD/models/$2
    inputs:  [{name: $3, datatype: FP32, shape: $4}]
    outputs: [{name: $5, datatype: FP32, shape: $6}]
    batching: {max_batch: 16, max_delay_us: 0}
    instances: $7
YAML
  rm -f "$dir/ports.json"
  "$build/bin/packrat-agent" --config "$dir/config.yaml" --port-file "$dir/ports.json" \
    2> "$dir/agent.log" & echo $! > "$dir/pid"
  for _ in $(seq 1200); do grep -q "models loaded" "$dir/agent.log" && break; sleep 0.1; done
  grep -q "1 of 1 ready" "$dir/agent.log" || { tail "$dir/agent.log"; exit 1; }
}

stop_agent() { kill "$(cat "$dir/pid")"; wait "$(cat "$dir/pid")" || true; rm -f "$dir/pid"; }

# CPU time (user + system) of the agent process so far, in clock ticks (runtimes not included).
agent_ticks() { awk '{ print $14 + $15 }' "/proc/$(cat "$dir/pid")/stat"; }

# row MODEL PROTOCOL CLIENTS [grpc_load args...]
row() {
  local model=$1 protocol=$2 clients=$3; shift 3
  local port; port=$(jq -r "if \"$protocol\" == \"grpc\" then .grpc else .http end" "$dir/ports.json")
  local before; before=$(agent_ticks)
  "$build/bin/grpc_load" --protocol "$protocol" --port "$port" --concurrency "$clients" \
    --seconds "$secs" --warmup 2 "$@" > "$dir/row.txt"
  awk -v m="$model" -v ticks=$(( $(agent_ticks) - before )) -v hz="$(getconf CLK_TCK)" '{
      for (i = 1; i <= NF; ++i) { split($i, kv, "="); v[kv[1]] = kv[2] }
      printf "| %s | %s | %d | %s | %.0f | %.0f | %.0f | %.0f | %.0f | %s |\n", m, v["protocol"],
        v["concurrency"], v["rps"], v["p50_us"], v["p90_us"], v["p99_us"],
        ticks * 1e6 / hz / v["sent"], v["client_cpu_us"], v["errors"] }' "$dir/row.txt"
}

echo "| model | protocol | clients | requests/s | p50 µs | p90 µs | p99 µs | agent CPU µs/req | client CPU µs/req | errors |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for round in $(seq "$rounds"); do
  start_agent tiny tiny_mlp.pt x "[-1, 16]" y "[-1, 8]" "[{count: 2, threads: 1, batch: 8}]"
  for p in grpc rest-binary; do row "health check" "$p" 1 --health; done
  for c in 1 16; do
    for p in grpc rest-binary rest-json; do
      row tiny_mlp "$p" "$c" --model tiny --input x --shape 1,16
    done
  done
  stop_agent
  start_agent resnet18 resnet18.pt input__0 "[-1, 3, 224, 224]" output__0 "[-1, 1000]" \
    "[{count: 2, threads: 1, batch: 8}]"
  for c in 1 16; do
    for p in grpc rest-binary rest-json; do
      row resnet18 "$p" "$c" --model resnet18 --input input__0 --shape 1,3,224,224
    done
  done
  stop_agent
done
