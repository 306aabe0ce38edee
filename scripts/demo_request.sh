#!/usr/bin/env bash
# Sends one 3x224x224 FP32 image (constant 0.5) to the demo model with the KServe v2 binary
# tensor extension, asks for the output as JSON, and prints the top-5 class ids.
#   scripts/demo_request.sh [HOST:PORT]
set -euo pipefail
addr="${1:-127.0.0.1:8080}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bytes=$((3 * 224 * 224 * 4))
header='{"inputs":[{"name":"input__0","shape":[1,3,224,224],"datatype":"FP32","parameters":{"binary_data_size":'$bytes'}}],"outputs":[{"name":"output__0","parameters":{"binary_data":false}}]}'
printf '%s' "$header" > "$tmp/body"
# 0.5f is 0x3f000000, little endian: 00 00 00 3f
/usr/bin/python3 -c "import sys; sys.stdout.buffer.write(b'\x00\x00\x00\x3f' * $((bytes / 4)))" >> "$tmp/body"
curl -sS -X POST "http://$addr/v2/models/demo/infer" \
  -H "Content-Type: application/octet-stream" \
  -H "Inference-Header-Content-Length: ${#header}" \
  --data-binary @"$tmp/body" > "$tmp/out"
jq -c '{model_name, outputs: [.outputs[] | {name, shape,
        top5: (.data | to_entries | sort_by(-.value) | .[:5] | map(.key))}]}' "$tmp/out"
