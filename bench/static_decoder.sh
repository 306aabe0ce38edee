#!/usr/bin/env bash
# One static decoder plan under bench/run's decoder throughput probes: the GPT-2-like decoder
# served by INSTANCES (a YAML instance list; `batch` = decode slots), open-loop Poisson
# generate requests (16-token prompt, 32 new tokens, bench/loadgen with bench/run's seed) at
# each RATE for SECONDS, the first DISCARD seconds left out (default SECONDS / 3, as bench/run).
# Per rate: the answered requests' p50 and p99, then the probe's decode steps (how many, their
# mean time and sequences). For plans bench/run's static peers do not take (they serve
# B_tp = 8 slots), such as fat or per core with as many slots as Packrat's max_batch.
#
#   [DISCARD=S] [REFILL=step|half|static] bench/static_decoder.sh "[{count: 1, threads: 2, batch: 16}]" SECONDS RATE...
set -euo pipefail
cd "$(dirname "$0")/.."
instances=$1; seconds=$2; shift 2
discard=${DISCARD:-$(( (seconds + 1) / 3 ))}
work=bench/results/static-decoder; mkdir -p "$work"
model=$PWD/models/gpt2_like.pt
[ -f "$model" ] || { echo "run scripts/setup.sh --bench first (needs $model)" >&2; exit 2; }
tmp=$(mktemp -d); trap 'kill $(cat "$tmp/pid" 2>/dev/null) 2>/dev/null || true; rm -rf "$tmp"' EXIT
cat > "$tmp/agent.yaml" <<YAML
server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0}
models:
  - name: m
    path: $model
    generation: {refill: ${REFILL:-step}, max_tokens: 512}
    instances: $instances
    warmup_iterations: 2
YAML
echo '{"input_ids": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16], "parameters": {"max_tokens": 32}}' \
  > "$tmp/body.json"
build/bin/packrat-agent --config "$tmp/agent.yaml" --port-file "$tmp/ports.json" \
  2> "$work/agent.log" &
echo $! > "$tmp/pid"
for _ in $(seq 6000); do
  grep -q "models loaded" "$work/agent.log" && break
  kill -0 "$(cat "$tmp/pid")" 2>/dev/null || { echo "the agent exited: $work/agent.log" >&2; exit 1; }
  sleep 0.1
done
port=$(jq .http "$tmp/ports.json")
metrics_port=$(jq .metrics "$tmp/ports.json")
# So far: "steps step_seconds step_sequences sequences ttft_seconds" from the agent's
# histograms (decode steps; the sequences' times to first token).
steps() {
  curl -s "127.0.0.1:$metrics_port/metrics" | awk '
    /^packrat_compute_duration_seconds_count\{model="m"\}/ { n = $2 }
    /^packrat_compute_duration_seconds_sum\{model="m"\}/ { s = $2 }
    /^packrat_batch_size_rows_sum\{model="m"\}/ { r = $2 }
    /^packrat_time_to_first_token_seconds_count\{model="m"\}/ { q = $2 }
    /^packrat_time_to_first_token_seconds_sum\{model="m"\}/ { t = $2 }
    END { print n + 0, s + 0, r + 0, q + 0, t + 0 }'
}
echo "instances: $instances; ${seconds}-s probes, the first ${discard} s left out"
for rate in "$@"; do
  read -r n0 s0 r0 q0 t0 < <(steps)
  build/bin/loadgen --port "$port" --target /v2/models/m/generate --body "$tmp/body.json" \
    --schedule "$rate:$seconds" --out "$work/$rate.csv" --seed 7 \
    --header Content-Type:application/json > /dev/null
  # After the warm-up: answered requests' p50 and p99 (nearest rank), and the errors.
  errors=$(awk -F, -v d="$discard" 'NR > 1 && $1 >= d && $3 != 200' "$work/$rate.csv" | wc -l)
  awk -F, -v d="$discard" 'NR > 1 && $1 >= d && $3 == 200 { print $2 }' "$work/$rate.csv" |
    sort -g | awk -v rate="$rate" -v errors="$errors" '{ ms[n++] = $1 }
      END { if (n == 0) { printf "%s req/s: none answered, %d errors\n", rate, errors; exit }
            printf "%s req/s: %d answered, %d errors, p50 %.0f ms, p99 %.0f ms\n", rate, n,
            errors, ms[int(0.5 * (n - 1) + 0.5)], ms[int(0.99 * (n - 1) + 0.5)] }'
  # The whole probe's decode steps (warm-up included): their mean time and sequences; the
  # sequences' mean time to first token (queueing and prefill).
  read -r n1 s1 r1 q1 t1 < <(steps)
  awk -v n=$((n1 - n0)) -v s="$s1" -v s0="$s0" -v r="$r1" -v r0="$r0" -v q=$((q1 - q0)) \
      -v t="$t1" -v t0="$t0" 'BEGIN {
    if (n > 0) printf "  %d decode steps, mean %.0f ms, %.1f sequences", n, 1000 * (s - s0) / n,
                      (r - r0) / n
    if (q > 0) printf "; first token after %.0f ms on average", 1000 * (t - t0) / q
    print "" }'
done
