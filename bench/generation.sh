#!/usr/bin/env bash
# Top-up batching for generation (amun-topup-batching-paper §6.1, §7.2) on this machine: the
# GPT-2-small-shaped decoder, one instance of T threads with SLOTS decode slots, a burst of
# REQUESTS greedy requests whose output lengths vary widely (uniform in [MIN, MAX] tokens, a
# 16-token prompt each). The same burst three times: static batching (new sequences join only
# when the batch has emptied), top-up when half the slots are free, top-up at every step.
# Then the fused output kernel against ATen's ops (runtime/output_kernel_bench).
#
#   bench/generation.sh [REQUESTS] [SLOTS] [MIN] [MAX]
set -euo pipefail
cd "$(dirname "$0")/.."
requests=${1:-48}; slots=${2:-16}; min=${3:-8}; max=${4:-200}
T=$(nproc)
work=bench/results/generation; mkdir -p "$work"
model=$PWD/models/gpt2_like.pt
[ -f "$model" ] || { echo "run scripts/setup.sh --bench first (needs $model)" >&2; exit 2; }
tmp=$(mktemp -d); trap 'kill $(cat "$tmp/pid" 2>/dev/null) 2>/dev/null || true; rm -rf "$tmp"' EXIT

echo "| policy | tokens | seconds | tokens/s | vs static | mean latency ms | p50 ms | p99 ms |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
static_rate=""
for refill in static half step; do
  cat > "$tmp/agent.yaml" <<YAML
server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0}
models:
  - name: gpt
    path: $model
    generation: {refill: $refill, max_tokens: 1024}
    instances: [{count: 1, threads: $T, batch: $slots}]
YAML
  rm -f "$tmp/ports.json"
  build/bin/packrat-agent --config "$tmp/agent.yaml" --port-file "$tmp/ports.json" \
    2> "$work/agent-$refill.log" &
  echo $! > "$tmp/pid"
  for _ in $(seq 6000); do grep -q "models loaded" "$work/agent-$refill.log" && break; sleep 0.1; done
  port=$(jq .http "$tmp/ports.json")
  line=$(build/bin/generate_load --port "$port" --requests "$requests" --min-tokens "$min" \
    --max-tokens "$max" --seed 1 --out "$work/$refill.csv")
  kill -TERM "$(cat "$tmp/pid")"; wait "$(cat "$tmp/pid")" 2>/dev/null || true
  read -r _ _ _ tokens _ seconds _ rate _ mean _ p50 _ p99 _ errors <<<"$line"
  [ "$errors" = 0 ] || { echo "errors in $refill run: $line" >&2; exit 1; }
  [ -n "$static_rate" ] || static_rate=$rate
  ratio=$(awk -v a="$rate" -v b="$static_rate" 'BEGIN {printf "%.2f×", a / b}')
  echo "| $refill | $tokens | $seconds | $rate | $ratio | $mean | $p50 | $p99 |"
done

echo
build/bin/output_kernel_bench --vocab 32000,50257 --batch 1,4,16,64 --k 1,5
