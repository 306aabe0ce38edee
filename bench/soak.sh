#!/usr/bin/env bash
# Soak: at least REQUESTS (default 1,000,000) requests of the tiny MLP through the agent
# (wrk, keep-alive, binary tensors), in rounds of ROUND_S seconds. After each round it records
# the agent's and the runtimes' resident memory, open file descriptors and threads, and the
# bytes of the agent's shared-memory segments, into bench/results/soak.csv. Flat columns =
# no leak. Prints a Markdown table.
#
#   bench/soak.sh [REQUESTS] [ROUND_S]
set -euo pipefail
cd "$(dirname "$0")/.."
want=${1:-1000000}; round=${2:-20}
dir=$(mktemp -d)
trap 'kill $(cat "$dir/pid") 2>/dev/null || true; rm -rf "$dir"' EXIT
cat > "$dir/config.yaml" <<YAML
server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0, io_threads: 1}
models:
  - name: tiny
    path: $PWD/models/tiny_mlp.pt
    inputs:  [{name: x, datatype: FP32, shape: [-1, 16]}]
    outputs: [{name: y, datatype: FP32, shape: [-1, 8]}]
    batching: {max_batch: 64, max_delay_us: 200, max_inflight_batches: 2}
    instances: [{count: 2, threads: 1, batch: 8}]
YAML
PACKRAT_LOG_LEVEL=INFO build/bin/packrat-agent --config "$dir/config.yaml" \
  --port-file "$dir/ports.json" 2> "$dir/agent.log" & echo $! > "$dir/pid"
agent=$(cat "$dir/pid")
for _ in $(seq 600); do grep -q "models loaded" "$dir/agent.log" && break; sleep 0.1; done
port=$(jq .http "$dir/ports.json")
runtimes=$(pgrep -P "$agent" | tr '\n' ' ')

kb() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
fds() { ls "/proc/$1/fd" | wc -l; }
threads() { awk '/Threads/ {print $2}' "/proc/$1/status"; }
shm_bytes() { du -cb /dev/shm/packrat."$agent".* 2>/dev/null | tail -1 | cut -f1; }
sample() {  # $1 = requests so far
  local rt_kb=0 rt_fds=0
  for r in $runtimes; do rt_kb=$((rt_kb + $(kb "$r"))); rt_fds=$((rt_fds + $(fds "$r"))); done
  echo "$1,$(kb "$agent"),$(fds "$agent"),$(threads "$agent"),$rt_kb,$rt_fds,$(shm_bytes)"
}
out=bench/results/soak.csv
echo "requests,agent_rss_kb,agent_fds,agent_threads,runtimes_rss_kb,runtimes_fds,shm_bytes" > "$out"
sample 0 >> "$out"
total=0; errors=0
while [ "$total" -lt "$want" ]; do
  wrk -t1 -c16 -d"${round}s" -s bench/tiny_infer.lua \
    "http://127.0.0.1:$port/v2/models/tiny/infer" > "$dir/wrk.txt"
  n=$(awk '/requests in/ {print $1}' "$dir/wrk.txt")
  e=$(awk '/non-200 responses/ {print $3}' "$dir/wrk.txt")
  total=$((total + n)); errors=$((errors + e))
  sample "$total" >> "$out"
done
kill -TERM "$agent"; wait "$agent" 2>/dev/null || true
left=$(ls /dev/shm | grep -c "^packrat\.$agent\." || true)
echo "| requests | agent RSS (KiB) | agent fds | agent threads | runtimes RSS (KiB) | runtimes fds | shm bytes |"
echo "|---:|---:|---:|---:|---:|---:|---:|"
tail -n +2 "$out" | awk -F, '{printf "| %d | %d | %d | %d | %d | %d | %d |\n", $1, $2, $3, $4, $5, $6, $7}'
echo
echo "total: $total requests, $errors non-200; segments left after SIGTERM: $left"
