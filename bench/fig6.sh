#!/usr/bin/env bash
# The paper's Figure 6 on this machine: a step in the request rate, and the latency of every
# request before, during and after the automatic reconfiguration that follows it.
#
# The agent serves ResNet-18 with `instances: auto` and the paper's estimator settings (100 ms
# samples, a window of 50, a decision every 10 s). Open-loop Poisson arrivals (bench/loadgen):
# LOW req/s for LOW_S seconds, then HIGH req/s for HIGH_S seconds. Writes
# bench/results/fig6.{csv,log,txt} and docs/fig6.png, and prints the summary.
#
#   bench/fig6.sh [LOW] [HIGH] [LOW_S] [HIGH_S]
#
# WARM_SHADOW=1 sets reconfiguration.skip_warmup_on_busy_cpus: false (the shadow set warms up
# on the CPUs the serving set runs on, as before that setting existed), for comparison.
# PARKED=N sets reconfiguration.parked_runtimes (default auto; 0: a dropped runtime stops, and
# a move back to its shape starts a new one, as before parking existed).
set -euo pipefail
cd "$(dirname "$0")/.."
low=${1:-4}; high=${2:-40}; low_s=${3:-40}; high_s=${4:-50}
T=$(nproc)
work=bench/results; mkdir -p "$work/profiles"
tmp=$(mktemp -d); trap 'kill $(cat "$tmp/pid" 2>/dev/null) 2>/dev/null || true; rm -rf "$tmp"' EXIT

cat > "$tmp/agent.yaml" <<YAML
server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0,
         profile_dir: $PWD/$work/profiles}
models:
  - name: m
    path: $PWD/models/resnet18.pt
    inputs: [{name: x, datatype: FP32, shape: [-1, 3, 224, 224]}]
    outputs: [{name: y, datatype: FP32, shape: [-1, 1000]}]
    batching: {max_batch: 8, max_delay_us: 5000}
    instances: auto
    warmup_iterations: 2
    reconfiguration: {skip_warmup_on_busy_cpus: $([ "${WARM_SHADOW:-0}" = 1 ] && echo false || echo true),
                      parked_runtimes: ${PARKED:-auto}}
YAML
# One image as a binary-extension request.
python3 - "$tmp/body" <<'PY'
import json, os, struct, sys
header = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 3, 224, 224],
                                 "parameters": {"binary_data_size": 3 * 224 * 224 * 4}}]})
with open(sys.argv[1] + ".len", "w") as f: f.write(str(len(header)))
with open(sys.argv[1], "wb") as f: f.write(header.encode() + os.urandom(3 * 224 * 224 * 4 // 8) * 8)
PY

PACKRAT_LOG_LEVEL=INFO build/bin/packrat-agent --config "$tmp/agent.yaml" \
  --port-file "$tmp/ports.json" 2> "$work/fig6.log" &
echo $! > "$tmp/pid"
for _ in $(seq 6000); do grep -q "models loaded" "$work/fig6.log" && break; sleep 0.1; done
port=$(jq .http "$tmp/ports.json")
# Let the estimator settle at the low rate's B before the step (the agent starts at max_batch).
build/bin/loadgen --port "$port" --target /v2/models/m/infer --body "$tmp/body" \
  --header "Inference-Header-Content-Length:$(cat "$tmp/body.len")" \
  --header "Content-Type:application/octet-stream" \
  --schedule "$low:30,$low:$low_s,$high:$high_s" --out "$tmp/all.csv" > "$tmp/loadgen.txt"
kill -TERM "$(cat "$tmp/pid")"; wait "$(cat "$tmp/pid")" 2>/dev/null || true

# Keep the measured part (after the 30 s settling step), time 0 = its start.
start=$(awk '/start_utc_seconds_of_day/ {print $2 + 30}' "$tmp/loadgen.txt")
awk -F, 'NR > 1 && $1 >= 30 {printf "%.4f,%.3f,%d\n", $1 - 30, $2, $3}' "$tmp/all.csv" \
  > "$work/fig6.csv"
# Reconfiguration events after the step, in the same time base.
to_s() { awk -v s="$start" '{split($2, t, ":"); printf "%.3f\n", t[1]*3600 + t[2]*60 + t[3] - s}'; }
grep -E "reconfiguring \((estimator|overloaded)" "$work/fig6.log" | to_s > "$tmp/decisions"
grep -E "generation [0-9]+ serving" "$work/fig6.log" | to_s > "$tmp/serving"
grep -E "generation [0-9]+ drained" "$work/fig6.log" | to_s > "$tmp/drained"
paste -d' ' "$tmp/decisions" "$tmp/serving" "$tmp/drained" | awk '$1 > 0' > "$work/fig6-events.txt"

{
  echo "rates: $low req/s for ${low_s} s, then $high req/s for ${high_s} s (Poisson), T=$T"
  echo "parked_runtimes: ${PARKED:-auto}"
  grep -E "reconfiguring \((estimator|overloaded)|generation [0-9]+ serving" "$work/fig6.log" |
    sed 's/^[^]]*] //'
  while read -r d s e; do
    echo "decision at t=${d} s, new set serving at t=${s} s ($(awk -v d="$d" -v s="$s" 'BEGIN{printf "%.2f", s-d}') s), old set drained at t=${e} s"
  done < "$work/fig6-events.txt"
  /usr/bin/python3 bench/fig6_summary.py "$work/fig6.csv" "$low_s" "$work/fig6-events.txt"
} | tee "$work/fig6.txt"

# The plot: every request's latency over time, the step and the reconfiguration marked.
{
  echo "set terminal pngcairo size 1100,500 font ',10'"
  echo "set output 'docs/fig6.png'"
  echo "set datafile separator ','"
  echo "set title 'ResNet-18, T=$T: rate step $low -> $high req/s at t=${low_s} s, automatic reconfiguration'"
  echo "set xlabel 'time (s)'; set ylabel 'latency (ms)'; set logscale y; set grid"
  echo "set arrow from $low_s, graph 0 to $low_s, graph 1 nohead lc rgb 'gray' dt 2"
  while read -r d s e; do
    echo "set arrow from $d, graph 0 to $d, graph 1 nohead lc rgb 'red' dt 3"
    echo "set arrow from $s, graph 0 to $s, graph 1 nohead lc rgb 'dark-green' dt 1"
  done < "$work/fig6-events.txt"
  echo "plot '$work/fig6.csv' using 1:2 with points pt 7 ps 0.3 lc rgb '#1f77b4' title 'request latency', \
        NaN with lines lc rgb 'gray' dt 2 title 'rate step', \
        NaN with lines lc rgb 'red' dt 3 title 'decision (estimator or overload path)', \
        NaN with lines lc rgb 'dark-green' title 'new set serving'"
} | gnuplot
echo "wrote docs/fig6.png"
