#!/usr/bin/env bash
# The lbci-paper's Figure 5 on this machine: single-sample requests with Poisson arrivals at four
# rates, served four ways on the same instance (one runtime, T threads, a staged image model:
# ResNet-50 or the paper's AlexNet):
#
#   layered  batching {mode: layered, latency_budget_ms: BUDGET}: a free instance starts at once
#            with up to N_opt queued rows; rows arriving meanwhile join at stage boundaries
#   serial   one request at a time (batch 1, no delay)
#   fixed    Batchsize(10) with a window: wait for 10 rows or WINDOW ms
#   packrat  Packrat's normal batching: up to B = N_opt rows, whatever is queued when the
#            instance frees (max_delay_us 2000, one batch in flight)
#
# Reports mean and p99 latency, throughput and the share of requests over the budget per rate;
# writes bench/results/layered-MODEL/ (per-run CSVs, agent logs, summary.md) and
# docs/layered-MODEL.png.
#
#   bench/layered.sh [RATES] [SECONDS] [BUDGET_MS] [WINDOW_MS] [MODEL]
#   MODEL: resnet50 (default) or alexnet. MODES="layered packrat" runs only those (the others'
#   results from an earlier run are kept and summarised).
set -euo pipefail
cd "$(dirname "$0")/.."
rates=${1:-4,8,12,16}; seconds=${2:-60}; budget=${3:-500}; window=${4:-100}; name=${5:-resnet50}
T=$(nproc)
work=bench/results/layered-$name; mkdir -p "$work/profiles"
model=$PWD/models/${name}_staged.pt
[ -f "$model" ] || { echo "run scripts/setup.sh --bench first (needs $model)" >&2; exit 2; }
tmp=$(mktemp -d); trap 'kill $(cat "$tmp/pid" 2>/dev/null) 2>/dev/null || true; rm -rf "$tmp"' EXIT

# One image as a binary-extension request.
/usr/bin/python3 - "$tmp/body" <<'PY'
import json, os, sys
header = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 3, 224, 224],
                                 "parameters": {"binary_data_size": 3 * 224 * 224 * 4}}]})
with open(sys.argv[1] + ".len", "w") as f: f.write(str(len(header)))
with open(sys.argv[1], "wb") as f: f.write(header.encode() + os.urandom(3 * 224 * 224 * 4))
PY

start_agent() {  # $1 = batching yaml, $2 = instances yaml, $3 = log
  cat > "$tmp/agent.yaml" <<YAML
server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0,
         profile_dir: $PWD/$work/profiles}
models:
  - name: m
    path: $model
    inputs: [{name: x, datatype: FP32, shape: [-1, 3, 224, 224]}]
    outputs: [{name: y, datatype: FP32, shape: [-1, 1000]}]
    batching: $1
    instances: $2
    warmup_iterations: 2
YAML
  rm -f "$tmp/ports.json"
  PACKRAT_LOG_LEVEL=${LOG_LEVEL:-INFO} build/bin/packrat-agent --config "$tmp/agent.yaml" \
    --port-file "$tmp/ports.json" 2> "$3" &
  echo $! > "$tmp/pid"
  for _ in $(seq 6000); do grep -q "models loaded" "$3" && break; sleep 0.1; done
  grep -q "model 'm' ready" "$3" || { echo "agent failed to start, see $3" >&2; exit 1; }
}
stop_agent() { kill -TERM "$(cat "$tmp/pid")"; wait "$(cat "$tmp/pid")" 2>/dev/null || true; }

# N_opt for the budget, from the layered agent's stage profile (measured once, then stored).
start_agent "{mode: layered, latency_budget_ms: $budget, profile_repeats: 3}" \
  "[{count: 1, threads: $T, batch: 16}]" "$work/init.log"
n_opt=$(curl -s "localhost:$(jq .management "$tmp/ports.json")/v2/models/m" |
  jq '.parameters.layered[0].optimal_batch')
curl -s "localhost:$(jq .management "$tmp/ports.json")/v2/models/m" | jq '.parameters.layered[0]' \
  > "$work/layered-init.json"
stop_agent
echo "N_opt = $n_opt for a $budget ms budget (T=$T)"

declare -A batching instances
batching[layered]="{mode: layered, latency_budget_ms: $budget, profile_repeats: 3}"
instances[layered]="[{count: 1, threads: $T, batch: 16}]"
batching[serial]="{max_delay_us: 0, max_inflight_batches: 1}"
instances[serial]="[{count: 1, threads: $T, batch: 1}]"
batching[fixed]="{max_delay_us: $((window * 1000)), max_inflight_batches: 1}"
instances[fixed]="[{count: 1, threads: $T, batch: 10}]"
batching[packrat]="{max_delay_us: 2000, max_inflight_batches: 1}"
instances[packrat]="[{count: 1, threads: $T, batch: $n_opt}]"
read -r -a modes <<<"${MODES:-layered serial fixed packrat}"

for rate in ${rates//,/ }; do
  for mode in "${modes[@]}"; do
    echo "== $mode at $rate req/s"
    start_agent "${batching[$mode]}" "${instances[$mode]}" "$work/$mode-$rate.log"
    port=$(jq .http "$tmp/ports.json")
    metrics=$(jq .metrics "$tmp/ports.json")
    build/bin/loadgen --port "$port" --target /v2/models/m/infer --body "$tmp/body" \
      --header "Inference-Header-Content-Length:$(cat "$tmp/body.len")" \
      --header "Content-Type:application/octet-stream" --seed "$rate" \
      --schedule "$rate:$seconds" --out "$work/$mode-$rate.csv" | tail -2
    curl -s "localhost:$metrics/metrics" | grep -E '^packrat_(topup|batch_size_rows_(sum|count))' \
      > "$work/$mode-$rate.metrics" || true
    stop_agent
  done
done

/usr/bin/python3 bench/layered_summary.py "$work" "$rates" "$budget" "$n_opt" "$T" "$window" "$name" \
  | tee "$work/summary.md"
