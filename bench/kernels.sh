#!/usr/bin/env bash
# Kernel settings side by side (issue: channels-last, bf16, freezing): for ResNet-50 and the
# BERT-like encoder, each setting is profiled with real pinned runtimes (t = 1..T, B = 1..16),
# giving the fat instance's latency L[T,B] and the optimizer's plan for every B under that
# setting; the accuracy guard's figures come from the agent loading each setting. Prints
# Markdown tables; profiles go to bench/results/kernels/.
#
#   bench/kernels.sh [resnet50|bert_like ...]
set -euo pipefail
cd "$(dirname "$0")/.."
models=("$@"); [ ${#models[@]} -gt 0 ] || models=(resnet50 bert_like)
T=$(nproc); batches=1,2,4,8,16
work=bench/results/kernels; mkdir -p "$work"
tmp=$(mktemp -d); trap 'kill $(cat "$tmp/pid" 2>/dev/null) 2>/dev/null || true; rm -rf "$tmp"' EXIT

for model in "${models[@]}"; do
  case "$model" in
    resnet50) in_yaml="[{name: x, datatype: FP32, shape: [-1, 3, 224, 224]}]"
              out_yaml="[{name: y, datatype: FP32, shape: [-1, 1000]}]"
              settings=("fp32:{}" "fp32+cl:{memory_format: channels_last}"
                        "bf16:{precision: bf16}" "bf16+cl:{precision: bf16, memory_format: channels_last}"
                        "bf16+cl+frozen:{precision: bf16, memory_format: channels_last, freeze: true}") ;;
    bert_like) in_yaml="[{name: ids, datatype: INT64, shape: [-1, 128]}]"
               out_yaml="[{name: y, datatype: FP32, shape: [-1, 768]}]"
               settings=("fp32:{}" "fp32+frozen:{freeze: true}" "bf16:{precision: bf16}"
                         "bf16+frozen:{precision: bf16, freeze: true}") ;;
    *) echo "unknown model $model" >&2; exit 2 ;;
  esac
  # One agent config with the model once per setting.
  {
    echo "server: {http: 127.0.0.1:0, management: 127.0.0.1:0, metrics: 127.0.0.1:0}"
    echo "models:"
    for s in "${settings[@]}"; do
      name=${s%%:*}; opt=${s#*:}
      cat <<YAML
  - name: m-${name//+/-}
    path: $PWD/models/$model.pt
    inputs: $in_yaml
    outputs: $out_yaml
    batching: {max_batch: 16, max_delay_us: 0}
    instances: [{count: 1, threads: 1, batch: 1}]
    warmup_iterations: 1
    optimize: $opt
    accuracy: {samples: 8, min_top1_agreement: 0}
YAML
    done
  } > "$tmp/$model.yaml"

  # Accuracy: what each runtime's guard measured at load.
  build/bin/packrat-agent --config "$tmp/$model.yaml" --port-file "$tmp/ports.json" \
    2> "$tmp/agent.log" & echo $! > "$tmp/pid"
  for _ in $(seq 3000); do grep -q "models loaded" "$tmp/agent.log" && break; sleep 0.1; done
  port=$(jq .management "$tmp/ports.json")
  declare -A accuracy=()
  for s in "${settings[@]}"; do
    name=${s%%:*}
    accuracy[$name]=$(curl -s "localhost:$port/v2/models/m-${name//+/-}" |
      jq -r '.parameters.load_report | if .checked == 1 then
        "\(.max_rel_error * 1e4 | round / 1e4) / \(if .top1_agreement < 0 then "–" else .top1_agreement end)"
        else "reference" end')
  done
  kill -TERM "$(cat "$tmp/pid")"; wait "$(cat "$tmp/pid")" 2>/dev/null || true

  echo "### $model (T=$T)"
  echo
  echo "Fat instance ⟨1,$T,B⟩ latency in ms, measured (profile L[$T,B]); in brackets the optimizer's plan for the same setting and its predicted latency."
  echo
  header="| setting | max rel. error / top-1 agreement |"; rule="|---|---|"
  for B in ${batches//,/ }; do header+=" B=$B |"; rule+="---:|"; done
  echo "$header"; echo "$rule"
  for s in "${settings[@]}"; do
    name=${s%%:*}
    profile="$work/$model-$name.csv"
    build/bin/packrat profile --config "$tmp/$model.yaml" --model "m-${name//+/-}" \
      --threads 1-"$T" --batches "$batches" --out "$profile" --max-seconds-per-point 30 \
      > /dev/null 2>&1
    row="| $name | ${accuracy[$name]} |"
    for B in ${batches//,/ }; do
      plan=$(build/bin/packrat plan --json --profile "$profile" --threads "$T" --batch "$B")
      row+=$(jq -r '" \(.fat_latency_ms * 10 | round / 10) [\([.instances[] | "⟨\(.count),\(.threads),\(.batch)⟩"] | join("+")) \(.latency_ms * 10 | round / 10)] |"' <<<"$plan")
    done
    echo "$row"
  done
  echo
done
