#!/usr/bin/env bash
# The paper's Figure 4 on this machine: for each B, the optimizer's plan (from a profile
# measured here) against the fat instance <1, T, B>: predicted and measured batch latency,
# expected and actual speedup. Prints a Markdown table.
#
#   bench/plan_vs_fat.sh resnet50|bert_like [BATCHES] [ITERATIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:?model}; batches=${2:-1,2,4,8,16,32}; iterations=${3:-8}
case "$model" in
  resnet50)  input="x:FP32:3,224,224"; in_yaml="[{name: x, datatype: FP32, shape: [-1, 3, 224, 224]}]"
             out_yaml="[{name: y, datatype: FP32, shape: [-1, 1000]}]" ;;
  bert_like) input="ids:INT64:128"; in_yaml="[{name: ids, datatype: INT64, shape: [-1, 128]}]"
             out_yaml="[{name: y, datatype: FP32, shape: [-1, 768]}]" ;;
  *) echo "unknown model $model" >&2; exit 2 ;;
esac
T=$(nproc)
max_b=${batches##*,}
work=bench/results; mkdir -p "$work"
tmp=$(mktemp -d); trap 'kill $(cat "$tmp/pid" 2>/dev/null) 2>/dev/null || true; rm -rf "$tmp"' EXIT

config() {  # $1 = instances yaml
  cat <<YAML
server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0}
models:
  - name: m
    path: $PWD/models/$model.pt
    inputs: $in_yaml
    outputs: $out_yaml
    batching: {max_batch: $max_b, max_delay_us: 0}
    instances: $1
    warmup_iterations: 2
YAML
}

profile="$work/$model-profile.csv"
config "[{count: 1, threads: 1, batch: 1}]" > "$tmp/profile.yaml"
build/bin/packrat profile --config "$tmp/profile.yaml" --model m --threads 1-"$T" \
  --batches "$batches" --out "$profile" --max-seconds-per-point 60 >&2

measure() {  # $1 = instances yaml, $2 = a name -> "p50 mean min" of B-row requests
  local run="$tmp/$B-$2"
  config "$1" > "$run.yaml"
  build/bin/packrat-agent --config "$run.yaml" --port-file "$run.json" 2> "$run.log" &
  local agent=$!
  echo $agent > "$tmp/pid"
  for _ in $(seq 1200); do grep -q "models loaded" "$run.log" && break; sleep 0.1; done
  build/bin/batch_latency --port "$(jq .http "$run.json")" --model m --input "$input" \
    --batch "$B" --iterations "$iterations"
  kill -TERM $agent; wait $agent 2>/dev/null || true
}

echo "| B | plan <i,t,b> | predicted ms | measured ms (p50) | fat <1,$T,B> predicted ms | fat measured ms (p50) | expected speedup | actual speedup |"
echo "|---:|---|---:|---:|---:|---:|---:|---:|"
for B in ${batches//,/ }; do
  plan=$(build/bin/packrat plan --json --profile "$profile" --threads "$T" --batch "$B")
  groups=$(jq -c '[.instances[] | {count, threads, batch}]' <<<"$plan" | sed 's/"//g; s/:/: /g')
  config_str=$(jq -r '[.instances[] | "<\(.count),\(.threads),\(.batch)>"] | join(" ")' <<<"$plan")
  predicted=$(jq .latency_ms <<<"$plan"); fat_predicted=$(jq .fat_latency_ms <<<"$plan")
  read -r plan_p50 _ _ <<<"$(measure "$groups" plan)"
  read -r fat_p50 _ _ <<<"$(measure "[{count: 1, threads: $T, batch: $B}]" fat)"
  printf "| %d | %s | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f |\n" "$B" "$config_str" \
    "$predicted" "$plan_p50" "$fat_predicted" "$fat_p50" \
    "$(jq -n "$fat_predicted / $predicted")" "$(jq -n "$fat_p50 / $plan_p50")"
done
