#!/usr/bin/env bash
# Offline checks of the deployment files (no cluster, no Docker engine needed):
#   1. YAML lint of deploy/ and the chart's plain YAML (duplicate keys, syntax, indentation);
#   2. `kubectl kustomize` renders deploy/ and deploy/example/;
#   3. with helm on PATH: `helm lint` and `helm template` of helm/packrat (helm is not packaged
#      for Debian 12, so this step is skipped where it is missing, and says so);
#   4. every rendered object validates against the Kubernetes OpenAPI schema (npm package
#      kubernetes-models, installed under build/check-deploy/ from scripts/k8s-validate/);
#   5. helm/packrat/values.yaml `config` equals deploy/config/packrat.yaml;
#   6. the Grafana dashboard is valid JSON, matches its generator, its PromQL parses
#      (promtool check rules) and it only uses metric names the agent exports.
# Exit 0 when all pass. Needs kubectl, node/npm, jq, yamllint, promtool, /usr/bin/python3.
set -euo pipefail
cd "$(dirname "$0")/.."

out=build/check-deploy
mkdir -p "$out"
step() { echo "check_deploy: $*"; }

step "yamllint"
yamllint -s -d '{extends: default, rules: {line-length: {max: 100},
  document-start: disable, comments: {min-spaces-from-content: 1},
  braces: {max-spaces-inside: 1}, truthy: {check-keys: false}}}' \
  deploy helm/packrat/Chart.yaml helm/packrat/values.yaml

step "kubectl kustomize deploy/ deploy/example/"
kubectl kustomize deploy > "$out/base.yaml"
kubectl kustomize deploy/example > "$out/example.yaml"
rendered=("$out/base.yaml" "$out/example.yaml")

if command -v helm > /dev/null; then
  step "helm lint / helm template helm/packrat"
  helm lint helm/packrat
  helm template packrat helm/packrat --namespace packrat > "$out/helm-default.yaml"
  helm template packrat helm/packrat --namespace packrat --set example.enabled=true \
    --set serviceMonitor.enabled=true > "$out/helm-all.yaml"
  helm template packrat helm/packrat --namespace packrat --set cgroups.enabled=false \
    --set hostPort=0 > "$out/helm-nocgroups.yaml"
  rendered+=("$out/helm-default.yaml" "$out/helm-all.yaml" "$out/helm-nocgroups.yaml")
else
  step "helm not installed: skipping helm lint/template (see docs/operations.md)"
fi

step "schema validation (kubernetes-models)"
json=()
for f in "${rendered[@]}"; do
  /usr/bin/python3 -c 'import json, sys, yaml
json.dump([d for d in yaml.safe_load_all(open(sys.argv[1])) if d], open(sys.argv[2], "w"))' \
    "$f" "${f%.yaml}.json"
  json+=("${f%.yaml}.json")
done
validator="$out/k8s-validate"
mkdir -p "$validator"
if ! cmp -s scripts/k8s-validate/package-lock.json "$validator/package-lock.json" \
    || [[ ! -d "$validator/node_modules" ]]; then
  cp scripts/k8s-validate/package.json scripts/k8s-validate/package-lock.json "$validator/"
  (cd "$validator" && npm ci --no-audit --no-fund --loglevel=error > /dev/null)
fi
cp scripts/k8s-validate/validate.mjs "$validator/"
node "$validator/validate.mjs" "${json[@]}"

step "helm values config == deploy/config/packrat.yaml"
/usr/bin/python3 - <<'PY'
import sys, yaml
base = yaml.safe_load(open("deploy/config/packrat.yaml"))
chart = yaml.safe_load(open("helm/packrat/values.yaml"))["config"]
if base != chart:
    sys.exit("helm/packrat/values.yaml config differs from deploy/config/packrat.yaml")
PY

step "grafana dashboard"
dashboard=deploy/grafana/packrat-dashboard.json
jq empty "$dashboard"
/usr/bin/python3 deploy/grafana/make_dashboard.py | cmp -s - "$dashboard" \
  || { echo "$dashboard is not what deploy/grafana/make_dashboard.py generates" >&2; exit 1; }
jq -r '[.. | .expr? // empty] | to_entries[]
       | "      - record: dashboard:expr_\(.key)\n        expr: \(.value | @json)"' "$dashboard" \
  | sed -e 's/\$__rate_interval/5m/g' -e 's/\$model/.*/g' -e 's/\$instance/.*/g' \
  | { printf 'groups:\n  - name: dashboard\n    rules:\n'; cat; } > "$out/dashboard-rules.yaml"
promtool check rules "$out/dashboard-rules.yaml" > /dev/null
missing=0
for name in $(grep -o '\(packrat\|process\)_[a-z_]*' "$dashboard" | sort -u); do
  base=$(sed -E 's/_(bucket|sum|count)$//' <<< "$name")
  if ! grep -q "\"$base\"" agent/metrics/agent_metrics.cc agent/metrics/process_metrics.cc \
      && ! grep -q "\"$name\"" agent/metrics/agent_metrics.cc agent/metrics/process_metrics.cc; then
    echo "dashboard uses $name, which agent/metrics does not export" >&2
    missing=1
  fi
done
((missing == 0))

echo "check_deploy: all checks passed"
