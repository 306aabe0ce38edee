#!/usr/bin/env bash
# Kernel settings side by side (channels-last, bf16, freezing) for ResNet-50 and the BERT-like
# encoder at B = 1..16, each setting applied by the runtime to the same FP32 TorchScript file:
#
#  - accuracy: what the agent's accuracy guard measured when it loaded the setting;
#  - profile: `packrat profile` (t = 1..T, real pinned runtimes) and the optimizer's plan for
#    every B under that setting;
#  - served: the agent serves the fat instance <1,T,B> and the thin <T,1,B/T> for each B (plan
#    changes through the management API) and one request of B rows is timed (p50 of 6 after 2
#    warm-up, bench/batch_latency); the plan is checked against the measured-best of the two.
#
# Prints Markdown; profiles and raw numbers go to bench/results/kernels/.
#
#   bench/kernels.sh [resnet50|bert_like ...]
set -euo pipefail
cd "$(dirname "$0")/.."
models=("$@"); [ ${#models[@]} -gt 0 ] || models=(resnet50 bert_like)
T=$(nproc); batches=1,2,4,8,16; iterations=6
work=bench/results/kernels; mkdir -p "$work"
tmp=$(mktemp -d); trap 'kill $(cat "$tmp/pid" 2>/dev/null) 2>/dev/null || true; rm -rf "$tmp"' EXIT

for model in "${models[@]}"; do
  case "$model" in
    resnet50) input="x:FP32:3,224,224"
              in_yaml="[{name: x, datatype: FP32, shape: [-1, 3, 224, 224]}]"
              out_yaml="[{name: y, datatype: FP32, shape: [-1, 1000]}]"
              settings=("fp32:{}" "fp32+cl:{memory_format: channels_last}"
                        "bf16:{precision: bf16, allow_emulated_bf16: true}" "bf16+cl:{precision: bf16, memory_format: channels_last, allow_emulated_bf16: true}"
                        "bf16+cl+frozen:{precision: bf16, memory_format: channels_last, freeze: true, allow_emulated_bf16: true}") ;;
    bert_like) input="ids:INT64:128"
               in_yaml="[{name: ids, datatype: INT64, shape: [-1, 128]}]"
               out_yaml="[{name: y, datatype: FP32, shape: [-1, 768]}]"
               settings=("fp32:{}" "fp32+frozen:{freeze: true}" "bf16:{precision: bf16, allow_emulated_bf16: true}"
                         "bf16+frozen:{precision: bf16, freeze: true, allow_emulated_bf16: true}") ;;
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

  # Profiles first, with no agent running beside them.
  for s in "${settings[@]}"; do
    name=${s%%:*}
    build/bin/packrat profile --config "$tmp/$model.yaml" --model "m-${name//+/-}" \
      --threads 1-"$T" --batches "$batches" --out "$work/$model-$name.csv" \
      --max-seconds-per-point 30 > /dev/null 2>&1
  done

  build/bin/packrat-agent --config "$tmp/$model.yaml" --port-file "$tmp/ports.json" \
    2> "$work/$model-agent.log" & echo $! > "$tmp/pid"
  for _ in $(seq 6000); do grep -q "models loaded" "$work/$model-agent.log" && break; sleep 0.1; done
  http=$(jq .http "$tmp/ports.json"); mgmt=$(jq .management "$tmp/ports.json")
  declare -A accuracy=() fat=() thin=()
  for s in "${settings[@]}"; do
    name=${s%%:*}; m=m-${name//+/-}
    accuracy[$name]=$(curl -s "localhost:$mgmt/v2/models/$m" |
      jq -r '.parameters.load_report | if .checked == 1 then
        "\(.max_rel_error * 1e4 | round / 1e4) / \(if .top1_agreement < 0 then "–" else .top1_agreement end)"
        else "reference" end')
    for B in ${batches//,/ }; do
      curl -s -X PUT "localhost:$mgmt/v2/models/$m/config" \
        -d "{\"instances\":[{\"count\":1,\"threads\":$T,\"batch\":$B}]}" > /dev/null
      read -r p50 _ < <(build/bin/batch_latency --port "$http" --model "$m" --input "$input" \
        --batch "$B" --iterations "$iterations")
      fat[$name:$B]=$p50
      if [ $((B % T)) -eq 0 ]; then
        curl -s -X PUT "localhost:$mgmt/v2/models/$m/config" \
          -d "{\"instances\":[{\"count\":$T,\"threads\":1,\"batch\":$((B / T))}]}" > /dev/null
        read -r p50 _ < <(build/bin/batch_latency --port "$http" --model "$m" --input "$input" \
          --batch "$B" --iterations "$iterations")
        thin[$name:$B]=$p50
      fi
      echo "$model $name B=$B fat=${fat[$name:$B]} thin=${thin[$name:$B]:-}" >> "$work/served.txt"
    done
  done
  kill -TERM "$(cat "$tmp/pid")"; wait "$(cat "$tmp/pid")" 2>/dev/null || true

  echo "### $model (T=$T)"
  echo
  echo "Served latency of one request of B rows (p50 ms): the fat instance ⟨1,$T,B⟩ / the thin"
  echo "⟨$T,1,B/$T⟩; then the optimizer's plan from the setting's own profile, ✓ when it is the"
  echo "measured-faster of the two (within 3%: a tie)."
  echo
  header="| setting | max rel. error / top-1 agreement |"; rule="|---|---|"
  for B in ${batches//,/ }; do header+=" B=$B |"; rule+="---|"; done
  echo "$header"; echo "$rule"
  for s in "${settings[@]}"; do
    name=${s%%:*}
    row="| $name | ${accuracy[$name]} |"
    for B in ${batches//,/ }; do
      plan=$(build/bin/packrat plan --json --profile "$work/$model-$name.csv" --threads "$T" \
        --batch "$B")
      config=$(jq -r '[.instances[] | "⟨\(.count),\(.threads),\(.batch)⟩"] | join("+")' <<<"$plan")
      f=${fat[$name:$B]}; t=${thin[$name:$B]:-}
      cell=$(awk -v f="$f" 'BEGIN {printf "%.1f", f}')
      [ -n "$t" ] && cell+=$(awk -v t="$t" 'BEGIN {printf " / %.1f", t}')
      verdict=""
      if [ -n "$t" ]; then
        best=$(awk -v f="$f" -v t="$t" 'BEGIN {print (f <= t ? "fat" : "thin")}')
        tie=$(awk -v f="$f" -v t="$t" 'BEGIN {d = f > t ? f - t : t - f; m = f < t ? f : t;
                                             print (d <= 0.03 * m ? 1 : 0)}')
        chose=$(jq -r 'if (.instances | length) == 1 and .instances[0].count == 1 then "fat"
                       else "thin" end' <<<"$plan")
        if [ "$chose" = "$best" ] || [ "$tie" = 1 ]; then verdict=" ✓"; else verdict=" ✗"; fi
      fi
      row+=" $cell; $config$verdict |"
    done
    echo "$row"
  done
  fp32_8=${fat[fp32:8]}
  best_name=""; best_ms=""
  for s in "${settings[@]}"; do
    name=${s%%:*}
    for v in ${fat[$name:8]} ${thin[$name:8]:-}; do
      if [ -z "$best_ms" ] || awk -v a="$v" -v b="$best_ms" 'BEGIN {exit !(a < b)}'; then
        best_ms=$v; best_name=$name
      fi
    done
  done
  echo
  echo "B=8: FP32 fat $(awk -v v="$fp32_8" 'BEGIN {printf "%.1f", v}') ms; fastest served: $best_name" \
       "$(awk -v v="$best_ms" 'BEGIN {printf "%.1f", v}') ms" \
       "($(awk -v a="$fp32_8" -v b="$best_ms" 'BEGIN {printf "%.2f", a / b}')× lower latency)."
  echo
  unset accuracy fat thin
done
