#!/usr/bin/env bash
# Many models, one node (issue "joint multi-model core partition"): two emulated models on a
# virtual node of T CPUs whose traffic shifts between them, served with
#   joint       server.node_partition (the default): both `instances: auto`, the node controller
#               moves CPUs between them by load;
#   split-X-Y   node_partition off, models from a repository, A with `auto_threads: X` (a share
#               of X CPUs), B with `auto_threads: Y` (each still autoscales its own plan within
#               its CPUs): the static splits, X + Y = T.
# The peers are the equal split (T/2 each) and the best static split with hindsight (the split
# whose worst-model p99 over the whole run is lowest).
#
#   bench/partition.sh [T] [PHASE_S] [SPLITS...]
#       T: virtual CPUs (default 32); PHASE_S: seconds per phase (default 30); SPLITS: A's CPU
#       counts of the static splits (default T/4 T/2 3T/4). JOINT_ONLY=1: only the joint run;
#       SKIP_JOINT=1: only the splits.
#
# Models: A = ResNet-50, B = BERT-base, each with its published 16-core profile
# (data/profiles/, Xeon Gold 6142) as its emulated latencies; one-row requests with a [1,4]
# FP32 input (the emulator ignores the data). Phases (open-loop Poisson, seed 1 and 2):
#   1. A busy, B idle   (A_BUSY req/s, B_IDLE req/s)
#   2. A idle, B busy
#   3. both busy        (A_BOTH, B_BOTH)
# Rates (environment, defaults scaled by T/32): A_BUSY 250, B_BUSY 500, A_BOTH 120, B_BOTH 250,
# idle 2.
#
# REAL=1: the real-cores check instead (T = the machine's cores, 2 here): A = ResNet-18
# (models/resnet18.pt, one 3×224×224 image a request, binary extension) and B = the small CNN
# (models/small_cnn.pt, 3×32×32), both real runtimes with profiles measured on the first run
# (kept in bench/results/partition/profiles); rates default to A_BUSY 12, B_BUSY 150, A_BOTH 6,
# B_BOTH 75, idle 1 and the splits to T/2. Writes bench/results/partition/T<T>/<config>-{a,b}.csv, <config>.log, and prints one
# Markdown table row per config: per phase each model's p99 and the worst, failed requests, and
# whether two models' runtimes ever shared a CPU (sampled every 200 ms from the management API).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
real=${REAL:-0}
if [ "$real" = 1 ]; then T=$(nproc); else T=${1:-32}; fi
phase=${2:-30}
shift 2 || shift $#
splits=("$@")
scale() { awk -v r="$1" -v t="$T" 'BEGIN { printf "%g", r * t / 32 }'; }
if [ "$real" = 1 ]; then
  a_busy=${A_BUSY:-12} b_busy=${B_BUSY:-150} a_both=${A_BOTH:-6} b_both=${B_BOTH:-75}
  idle=${IDLE:-1}
  [ ${#splits[@]} -gt 0 ] || splits=($((T / 2)))
else
  [ ${#splits[@]} -gt 0 ] || splits=($((T / 4)) $((T / 2)) $((3 * T / 4)))
  a_busy=${A_BUSY:-$(scale 250)} b_busy=${B_BUSY:-$(scale 500)}
  a_both=${A_BOTH:-$(scale 120)} b_both=${B_BOTH:-$(scale 250)} idle=${IDLE:-2}
fi
out=bench/results/partition/T$T${real/#1/-real}
[ "$real" = 1 ] || out=bench/results/partition/T$T
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'kill $(cat "$tmp/pid" 2>/dev/null) 2>/dev/null || true; rm -rf "$tmp"' EXIT
# Each model's request body (binary extension: header, then the raw FP32 tensor); the header's
# length in body-M.len.
body() {  # MODEL NAME SHAPE...
  python3 - "$tmp/body-$1" "$2" "${@:3}" <<'PY'
import json, os, sys
path, name, shape = sys.argv[1], sys.argv[2], [int(d) for d in sys.argv[3:]]
n = 1
for d in shape: n *= d
header = json.dumps({"inputs": [{"name": name, "datatype": "FP32", "shape": shape,
                                 "parameters": {"binary_data_size": 4 * n}}]})
with open(path + ".len", "w") as f: f.write(str(len(header)))
with open(path, "wb") as f: f.write(header.encode() + os.urandom(4 * n))
PY
}
if [ "$real" = 1 ]; then
  body a x 1 3 224 224; body b image 1 3 32 32
  mkdir -p bench/results/partition/profiles
else
  body a x 1 4; body b x 1 4
fi

# A model's keys (without its name), indented by $3 spaces: model profile indent extra.
model_keys() {
  if [ "$real" = 1 ]; then
    if [ "$1" = a ]; then
      printf 'path: %s\ninputs: [{name: x, datatype: FP32, shape: [-1, 3, 224, 224]}]\n' \
        "$PWD/models/resnet18.pt"
      printf 'outputs: [{name: y, datatype: FP32, shape: [-1, 1000]}]\n'
      printf 'batching: {max_batch: 8, max_delay_us: 5000}\n'
    else
      printf 'path: %s\ninputs: [{name: image, datatype: FP32, shape: [-1, 3, 32, 32]}]\n' \
        "$PWD/models/small_cnn.pt"
      printf 'outputs: [{name: logits, datatype: FP32, shape: [-1, 10]}]\n'
      printf 'batching: {max_batch: 32, max_delay_us: 2000}\n'
    fi
    printf 'instances: auto\nwarmup_iterations: 1\n%s\n' "${4:-}"
  else
    cat <<YAML
emulate: {profile: $PWD/data/profiles/$2, load_s: 0.6}
inputs: [{name: x, datatype: FP32, shape: [-1, 4]}]
outputs: [{name: y, datatype: FP32, shape: [-1, 4]}]
batching: {max_batch: 64, max_delay_us: 2000, max_queue_rows: 20000}
instances: auto
warmup_iterations: 1
${4:-}
YAML
  fi | sed "s/^/$(printf '%*s' "$3" '')/"
}
# The server keys every configuration shares.
if [ "$real" = 1 ]; then
  node="profile_dir: $PWD/bench/results/partition/profiles"
else
  node="virtual_cpus: $T"
fi

# run CONFIG A_THREADS B_THREADS: 0 0 = the joint partition (both models in the main config);
# otherwise the static split, each model from a repository folder with `auto_threads`, so that
# each holds a share of that many CPUs of its own (main-config models with auto_threads would
# place anywhere, and share CPUs during their switches).
run() {
  local name=$1 at=$2 bt=$3
  if [ "$at" -eq 0 ]; then
    {
      echo "server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0,"
      echo "         $node, partition_interval_ms: 1000}"
      echo "models:"
      echo "  - name: a"; model_keys a resnet50-xeon6142-16c.csv 4
      echo "  - name: b"; model_keys b bert-base-xeon6142-16c.csv 4
    } > "$tmp/agent.yaml"
  else
    rm -rf "$tmp/repo"; mkdir -p "$tmp/repo/a" "$tmp/repo/b"
    model_keys a resnet50-xeon6142-16c.csv 0 "auto_threads: $at" > "$tmp/repo/a/model.yaml"
    model_keys b bert-base-xeon6142-16c.csv 0 "auto_threads: $bt" > "$tmp/repo/b/model.yaml"
    {
      echo "server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0,"
      echo "         $node, node_partition: false, model_repository: $tmp/repo}"
      :
    } > "$tmp/agent.yaml"
  fi
  PACKRAT_LOG_LEVEL=INFO "$build/bin/packrat-agent" --config "$tmp/agent.yaml" \
    --port-file "$tmp/ports.json" 2> "$out/$name.log" &
  echo $! > "$tmp/pid"
  for _ in $(seq 6000); do grep -q "models loaded" "$out/$name.log" && break; sleep 0.1; done
  local http mgmt
  http=$(jq .http "$tmp/ports.json"); mgmt=$(jq .management "$tmp/ports.json")
  # Which CPUs each model's runtimes are on, every 200 ms; a CPU in both is a shared one. The
  # reads are one model at a time, so A is read before and after B and a CPU counts only where
  # both of A's reads have it: a move between two reads (A's shrink read before it, B's growth
  # after) is not two models on one CPU.
  (
    while kill -0 "$(cat "$tmp/pid")" 2>/dev/null; do
      for m in a b a2; do
        curl -s "localhost:$mgmt/v2/models/${m%2}/config" |
          jq -r --arg m "$m" '[.workers[], .parked[]] | map(.cpus) | join(",") | "\($m) \(.)"'
      done | awk '
        function expand(list, set,   n, parts, i, r) {
          n = split(list, parts, ",")
          for (i = 1; i <= n; ++i) {
            if (parts[i] == "") continue
            if (split(parts[i], r, "-") == 2) { for (c = r[1]; c <= r[2]; ++c) set[c] = 1 }
            else set[parts[i]] = 1
          }
        }
        $1 == "a" { expand($2, A) } $1 == "b" { expand($2, B) } $1 == "a2" { expand($2, A2) }
        END { s = 0; for (c in A) if ((c in B) && (c in A2)) s++; print s }'
      sleep 0.2
    done
  ) > "$tmp/shared" 2>/dev/null &
  local watch=$!
  local sa="$a_busy:$phase,$idle:$phase,$a_both:$phase" sb="$idle:$phase,$b_busy:$phase,$b_both:$phase"
  "$build/bin/loadgen" --port "$http" --target /v2/models/a/infer --body "$tmp/body-a" \
    --header "Inference-Header-Content-Length:$(cat "$tmp/body-a.len")" \
    --seed 1 --connections 256 --schedule "$sa" --out "$out/$name-a.csv" > "$tmp/lg-a.txt" &
  local la=$!
  "$build/bin/loadgen" --port "$http" --target /v2/models/b/infer --body "$tmp/body-b" \
    --header "Inference-Header-Content-Length:$(cat "$tmp/body-b.len")" \
    --seed 2 --connections 256 --schedule "$sb" --out "$out/$name-b.csv" > "$tmp/lg-b.txt"
  wait $la
  curl -s "localhost:$mgmt/v2/node/partition" > "$out/$name-partition.json"
  kill -TERM "$(cat "$tmp/pid")"; wait "$(cat "$tmp/pid")" 2>/dev/null || true
  wait $watch 2>/dev/null || true
  local shared moves
  shared=$(sort -n "$tmp/shared" | tail -1)
  moves=$(grep -c "node partition: moving" "$out/$name.log" || true)
  /usr/bin/python3 - "$name" "$phase" "$out/$name-a.csv" "$out/$name-b.csv" "${shared:-0}" "$moves" <<'PY'
import csv, sys
name, phase, fa, fb, shared, moves = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
def load(f):
    rows = list(csv.reader(open(f)))[1:]
    return [(float(r[0]), float(r[1]), int(r[2])) for r in rows]
def p99(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * 0.99))] if xs else float("nan")
a, b = load(fa), load(fb)
cells, worst_all, failed = [], [], 0
for k in range(3):
    lo, hi = k * phase, (k + 1) * phase
    pa = p99([l for t, l, s in a if lo <= t < hi and s == 200])
    pb = p99([l for t, l, s in b if lo <= t < hi and s == 200])
    cells += ["%.0f" % pa, "%.0f" % pb, "**%.0f**" % max(pa, pb)]
failed = sum(1 for r in a + b if r[2] != 200)
whole = max(p99([l for t, l, s in a if s == 200]), p99([l for t, l, s in b if s == 200]))
print("| %s | %s | %.0f | %d | %s | %s |" % (name, " | ".join(cells), whole, failed, shared, moves))
PY
}

echo "T = $T, phases of $phase s: A busy $a_busy / B idle $idle req/s; A idle / B busy $b_busy; both $a_both / $b_both"
echo
echo "| config | 1: A p99 | 1: B p99 | 1: worst | 2: A p99 | 2: B p99 | 2: worst | 3: A p99 | 3: B p99 | 3: worst | whole run: worst p99 ms | failed | max CPUs shared | partition moves |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
[ "${SKIP_JOINT:-0}" = 1 ] || run joint 0 0
[ "${JOINT_ONLY:-0}" = 1 ] && exit 0
for x in "${splits[@]}"; do run "split-$x-$((T - x))" "$x" "$((T - x))"; done
