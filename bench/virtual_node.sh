#!/usr/bin/env bash
# The virtual node (server.virtual_cpus, `emulate:`) against real runs, and at 16 cores.
#
#   bench/virtual_node.sh step real [LOW HIGH LOW_S HIGH_S]
#   bench/virtual_node.sh step emulated PROFILE.csv [LOW HIGH LOW_S HIGH_S]
#       The load step of bench/fig6.sh (ResNet-18, `instances: auto`, the paper's estimator
#       settings, 30 s of settling then LOW req/s for LOW_S s and HIGH req/s for HIGH_S s,
#       Poisson, seed 1) with real runtimes on this machine's CPUs, or with emulated runtimes
#       on the same CPU ids lasting PROFILE's latencies (the real run's stored profile:
#       bench/results/virtual-node/profiles/). LOAD_S: the emulated model load, seconds of one
#       CPU (default 0.6, measured: see docs/benchmarks.md). Writes
#       bench/results/virtual-node/step-{real,emulated}.{csv,log,txt}.
#   bench/virtual_node.sh t16 [RATE] [SECONDS] [SWITCH_AT]
#       The recorded 16-core failure in emulation: a virtual node of 16 CPUs, ResNet-50 with the
#       published 16-core profile (data/profiles), `instances: auto`, serving RATE req/s
#       (default 27); at SWITCH_AT s (default 20) the management API moves it from its plan for
#       B = 8 to its plan for B = 16 — the switch the estimator made in the recorded run — so
#       that the shadow set starts on CPUs the serving set runs on. Runs it unloaded, then at
#       normal priority (idle_start_s: 0) with reconfiguration.skip_warmup_on_busy_cpus false
#       (the recorded run) and true (cold), then at idle priority (idle_start_s: 3) warming up
#       only while there (the default) and always; writes bench/results/virtual-node/
#       t16-{idle,warm,cold,idle-priority,idle-priority-warm}.{csv,log,txt}.
#   bench/virtual_node.sh switch real [RATE SECONDS SWITCH_AT]
#   bench/virtual_node.sh switch emulated PROFILE.csv [RATE SECONDS SWITCH_AT]
#       ResNet-18 at T = 2 serving <1,2,4> under RATE req/s (default 2) for SECONDS (60); at
#       SWITCH_AT (20) the management API asks for 2x<1,1,2>, whose shadow runtimes start on
#       the serving runtime's CPUs. COLD=false warms them up; IDLE_START=0 starts them at
#       normal priority (default 3: idle priority for at most 3 s); TAG names the output,
#       bench/results/virtual-node/switch-{real,emulated}[-TAG].{csv,log,txt}.
#
#   bench/virtual_node.sh overhead [N] [RATE] [SECONDS]
#       The emulators' own cost on the two real cores: N one-thread emulated runtimes (default
#       128) under RATE one-row req/s (default 640: each half busy); every slice's reported time
#       against its L = 100 ms, and the CPU time of the emulators and of the agent.
#
# BUILD: the build folder (default build). The emulated runs need packrat-emulated-runtime
# there; the real run needs packrat-runtime.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
work=bench/results/virtual-node
mkdir -p "$work/profiles"
tmp=$(mktemp -d)
trap 'kill $(cat "$tmp/pid" 2>/dev/null) 2>/dev/null || true; rm -rf "$tmp"' EXIT

# One 3x224x224 image as a binary-extension request, in $tmp/body (header length in .len).
make_body() {
  python3 - "$tmp/body" <<'PY'
import json, os, struct, sys
header = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 3, 224, 224],
                                 "parameters": {"binary_data_size": 3 * 224 * 224 * 4}}]})
with open(sys.argv[1] + ".len", "w") as f: f.write(str(len(header)))
with open(sys.argv[1], "wb") as f: f.write(header.encode() + os.urandom(3 * 224 * 224 * 4 // 8) * 8)
PY
}

# Starts the agent on $tmp/agent.yaml, logging to $1; waits until its models are loaded.
start_agent() {
  PACKRAT_LOG_LEVEL=INFO "$build/bin/packrat-agent" --config "$tmp/agent.yaml" \
    --port-file "$tmp/ports.json" 2> "$1" &
  echo $! > "$tmp/pid"
  for _ in $(seq 12000); do grep -q "models loaded" "$1" && break; sleep 0.1; done
}

stop_agent() {
  kill -TERM "$(cat "$tmp/pid")"; wait "$(cat "$tmp/pid")" 2>/dev/null || true
}

# loadgen with the body; $1 = schedule, $2 = csv, $3 = stdout file.
load() {
  "$build/bin/loadgen" --port "$(jq .http "$tmp/ports.json")" --target /v2/models/m/infer \
    --body "$tmp/body" --header "Inference-Header-Content-Length:$(cat "$tmp/body.len")" \
    --header "Content-Type:application/octet-stream" --seed 1 \
    --schedule "$1" --out "$2" > "$3"
}

# Seconds since the start of the day of every log line matching $2 in $1, minus $3.
log_times() {
  grep -E "$2" "$1" | awk -v s="$3" '{split($2, t, ":"); printf "%.3f\n", t[1]*3600 + t[2]*60 + t[3] - s}'
}

step() {
  local mode=$1; shift
  local profile=""
  if [ "$mode" = emulated ]; then profile=$(realpath "$1"); shift; fi
  local low=${1:-4} high=${2:-40} low_s=${3:-40} high_s=${4:-50}
  local emulate=""
  [ "$mode" = emulated ] && emulate="    emulate: {profile: $profile, load_s: ${LOAD_S:-0.6}}"
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
$emulate
YAML
  make_body
  local out="$work/step-$mode${TAG:+-$TAG}"
  start_agent "$out.log"
  load "$low:30,$low:$low_s,$high:$high_s" "$tmp/all.csv" "$tmp/loadgen.txt"
  stop_agent
  local start
  start=$(awk '/start_utc_seconds_of_day/ {print $2 + 30}' "$tmp/loadgen.txt")
  awk -F, 'NR > 1 && $1 >= 30 {printf "%.4f,%.3f,%d\n", $1 - 30, $2, $3}' "$tmp/all.csv" > "$out.csv"
  log_times "$out.log" "reconfiguring \((estimator|overloaded)" "$start" > "$tmp/decisions"
  log_times "$out.log" "generation [0-9]+ serving" "$start" > "$tmp/serving"
  log_times "$out.log" "generation [0-9]+ drained" "$start" > "$tmp/drained"
  paste -d' ' "$tmp/decisions" "$tmp/serving" "$tmp/drained" | awk '$1 > 0' > "$out-events.txt"
  {
    echo "$mode: rates $low req/s for ${low_s} s, then $high req/s for ${high_s} s (Poisson, seed 1)"
    grep -E "plan for T=|reconfiguring \((estimator|overloaded)|generation [0-9]+ serving" "$out.log" |
      sed 's/^[^]]*] //'
    while read -r d s e; do
      echo "decision at t=${d} s, new set serving at t=${s} s ($(awk -v d="$d" -v s="$s" 'BEGIN{printf "%.2f", s-d}') s), old set drained at t=${e} s"
    done < "$out-events.txt"
    /usr/bin/python3 bench/fig6_summary.py "$out.csv" "$low_s" "$out-events.txt"
  } | tee "$out.txt"
}

# A switch of instance sets under load: the agent on $tmp/agent.yaml serves FROM (a management
# API body), RATE req/s arrive for SECONDS s, and at SWITCH_AT s the management API asks for TO
# (answered once the new set serves: its duration is the switch). $1 = output prefix.
switch_run() {
  local out=$1 from=$2 to=$3 rate=$4 seconds=$5 switch_at=$6
  start_agent "$out.log"
  local mgmt; mgmt=$(jq .management "$tmp/ports.json")
  curl -s -X PUT "localhost:$mgmt/v2/models/m/config" -d "$from" > "$tmp/from.json"
  load "$rate:$seconds" "$tmp/all.csv" "$tmp/loadgen.txt" &
  local lg=$!
  sleep "$switch_at"
  local before after
  before=$(date -u +%s.%N)
  curl -s -X PUT "localhost:$mgmt/v2/models/m/config" -d "$to" > "$tmp/put.json"
  after=$(date -u +%s.%N)
  wait $lg
  curl -s "localhost:$mgmt/v2/models/m/config" > "$out-config.json"
  stop_agent
  awk -F, 'NR > 1' "$tmp/all.csv" > "$out.csv"
  # The switch in the load's time base: the agent's "reconfiguring" and "serving" log lines.
  local start
  start=$(awk '/start_utc_seconds_of_day/ {print $2}' "$tmp/loadgen.txt")
  log_times "$out.log" "reconfiguring \\(management" "$start" | tail -1 > "$tmp/decisions"
  log_times "$out.log" "generation [0-9]+ serving" "$start" | tail -1 > "$tmp/serving"
  log_times "$out.log" "generation [0-9]+ drained" "$start" | tail -1 > "$tmp/drained"
  paste -d' ' "$tmp/decisions" "$tmp/serving" "$tmp/drained" > "$out-events.txt"
  {
    echo "$(basename "$out"): $rate req/s for $seconds s (Poisson, seed 1); at ${switch_at} s: $from -> $to"
    grep -E "plan for T=|starts (cold|at idle)|reconfiguring|generation [0-9]+ (serving|drained)" "$out.log" |
      sed 's/^[^]]*] //'
    read -r d v e < "$out-events.txt"
    echo "switch under load: asked at t=$d s, new set serving at t=$v s" \
      "($(awk -v d="$d" -v v="$v" 'BEGIN{printf "%.2f", v-d}') s), old set drained at t=$e s;" \
      "the PUT took $(awk -v a="$before" -v b="$after" 'BEGIN{printf "%.2f", b-a}') s"
    /usr/bin/python3 bench/fig6_summary.py "$out.csv" "$d" "$out-events.txt"
  } | tee "$out.txt"
}

# ResNet-18 on this machine's CPUs, real or emulated (PROFILE), a static plan switched under load.
switch2() {
  local mode=$1; shift
  local emulate=""
  if [ "$mode" = emulated ]; then
    emulate="    emulate: {profile: $(realpath "$1"), load_s: ${LOAD_S:-0.6}}"
    shift
  fi
  local rate=${1:-2} seconds=${2:-60} switch_at=${3:-20}
  cat > "$tmp/agent.yaml" <<YAML
server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0}
models:
  - name: m
    path: $PWD/models/resnet18.pt
    inputs: [{name: x, datatype: FP32, shape: [-1, 3, 224, 224]}]
    outputs: [{name: y, datatype: FP32, shape: [-1, 1000]}]
    batching: {max_batch: 8, max_delay_us: 5000}
    instances: [{count: 1, threads: ${FROM_T:-2}, batch: 4}]
    warmup_iterations: 2
    reconfiguration: {skip_warmup_on_busy_cpus: ${COLD:-true}, parked_runtimes: 0, idle_start_s: ${IDLE_START:-3}}
$emulate
YAML
  make_body
  switch_run "$work/switch-$mode${TAG:+-$TAG}" '{"instances":[{"count":1,"threads":'"${FROM_T:-2}"',"batch":4}]}' \
    '{"instances":[{"count":2,"threads":1,"batch":2}]}' "$rate" "$seconds" "$switch_at"
}

t16_run() {
  local tag=$1 warm=$2 rate=$3 seconds=$4 switch_at=$5
  cat > "$tmp/agent.yaml" <<YAML
server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0, virtual_cpus: 16}
models:
  - name: m
    emulate: {profile: $PWD/data/profiles/resnet50-xeon6142-16c.csv, load_s: ${LOAD_S:-0.6}}
    inputs: [{name: x, datatype: FP32, shape: [-1, 3, 224, 224]}]
    outputs: [{name: y, datatype: FP32, shape: [-1, 1000]}]
    batching: {max_batch: 64, max_delay_us: 2000}
    instances: auto
    warmup_iterations: 2
    reconfiguration: {adaptive: false, skip_warmup_on_busy_cpus: $warm, parked_runtimes: 0, idle_start_s: ${IDLE_START:-3}}
YAML
  switch_run "$work/t16-$tag" '{"batch": 8}' '{"batch": 4}' "$rate" "$seconds" "$switch_at"
}

# The emulators' own cost: N emulated runtimes of one thread on a virtual node of N CPUs, each
# slice L = 100 ms, under RATE req/s of one-row requests. Every slice's reported time against
# L (the excess is wake-up lateness on the two real cores) and the CPU time the emulators and
# the agent used.
overhead() {
  local n=${1:-128} rate=${2:-640} seconds=${3:-30}
  printf 'threads,batch,latency_ms\n1,1,100\n1,2,200\n' > "$tmp/flat.csv"
  cat > "$tmp/agent.yaml" <<YAML
server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0, virtual_cpus: $n,
         io_threads: 2, runtime_idle_spin_us: ${SPIN:-100}}
models:
  - name: m
    emulate: {profile: $tmp/flat.csv, load_s: 0.1}
    inputs: [{name: x, datatype: FP32, shape: [-1, 4]}]
    outputs: [{name: y, datatype: FP32, shape: [-1, 10]}]
    batching: {max_batch: $n, max_delay_us: 20000, max_inflight_batches: 64}
    instances: [{count: $n, threads: 1, batch: 1}]
    warmup_iterations: 1
YAML
  printf '{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}]}' > "$tmp/body"
  local out="$work/overhead-$n"
  PACKRAT_LOG_LEVEL=DEBUG "$build/bin/packrat-agent" --config "$tmp/agent.yaml" \
    --port-file "$tmp/ports.json" 2> "$out.log" &
  echo $! > "$tmp/pid"
  for _ in $(seq 12000); do grep -q "models loaded" "$out.log" && break; sleep 0.1; done
  local agent; agent=$(cat "$tmp/pid")
  local runtimes; runtimes=$(pgrep -P "$agent" | tr '\n' ' ')
  cpu() { for p in "$@"; do awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null; done | awk '{s += $1} END {print s + 0}'; }
  local r0 a0; r0=$(cpu $runtimes); a0=$(cpu "$agent")
  "$build/bin/loadgen" --port "$(jq .http "$tmp/ports.json")" --target /v2/models/m/infer \
    --body "$tmp/body" --seed 1 --connections 256 --schedule "$rate:$seconds" \
    --out "$tmp/all.csv" > "$tmp/loadgen.txt"
  local r1 a1; r1=$(cpu $runtimes); a1=$(cpu "$agent")
  stop_agent
  {
    echo "overhead: $n emulated runtimes of 1 thread on $n virtual CPUs, L = 100 ms, $rate req/s for $seconds s"
    cat "$tmp/loadgen.txt"
    echo "CPU time over the load: emulated runtimes $(( (r1 - r0) )) ticks, agent $(( (a1 - a0) )) ticks ($(getconf CLK_TCK)/s)"
    grep -oE "batch of 1 row\(s\) computed in [0-9]+ us" "$out.log" | awk '{print $7 / 100000}' |
      sort -n | awk '{v[NR] = $1} END {
        if (NR == 0) { print "no slices"; exit }
        printf "slices: %d; reported / L: p50 %.4f, p90 %.4f, p99 %.4f, max %.4f, min %.4f\n",
          NR, v[int(NR * 0.5) + 1], v[int(NR * 0.9) + 1], v[int(NR * 0.99) + 1], v[NR], v[1] }'
  } | tee "$out.txt"
}

case "${1:-}" in
  overhead) shift; overhead "$@" ;;
  step) shift; step "$@" ;;
  switch) shift; switch2 "$@" ;;
  t16)
    shift
    make_body
    rate=${1:-27}; seconds=${2:-60}; switch_at=${3:-20}
    IDLE_START=0 t16_run idle false 0.2 "$seconds" "$switch_at"
    IDLE_START=0 t16_run warm false "$rate" "$seconds" "$switch_at"
    IDLE_START=0 t16_run cold true "$rate" "$seconds" "$switch_at"
    IDLE_START=3 t16_run idle-priority true "$rate" "$seconds" "$switch_at"
    IDLE_START=3 t16_run idle-priority-warm false "$rate" "$seconds" "$switch_at"
    ;;
  *) sed -n '2,30p' "$0"; exit 2 ;;
esac
