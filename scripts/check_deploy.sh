#!/usr/bin/env bash
# Offline checks of the deployment files (no cluster, no Docker engine, no helm needed):
#   1. YAML lint of deploy/ and the chart's plain YAML (duplicate keys, syntax, indentation);
#      values.schema.json is valid JSON;
#   2. `kubectl kustomize` renders deploy/, deploy/example/ and overlays of deploy/ with each
#      component of deploy/components/;
#   3. the Helm chart is rendered with scripts/helm-render (a `helm template` built here from
#      Debian's Go and Debian-packaged Go libraries, since helm is not packaged for Debian 12;
#      build/check-deploy/helm-render, rebuilt when its source changes), which also validates
#      the values against helm/packrat/values.schema.json: with the default values and every
#      variant below; values that must be refused (schema or render-time `fail`) are refused;
#      where a real helm is on PATH, also `helm lint`, and `helm template` must give the same
#      objects as helm-render;
#   4. every rendered object validates against the Kubernetes OpenAPI schema (npm package
#      kubernetes-models, installed under build/check-deploy/ from scripts/k8s-validate/);
#   5. helm/packrat/values.yaml `config` equals deploy/config/packrat.yaml, and the chart's agent
#      pod spec, NetworkPolicy rules, Service ports and config equal Kustomize's in each mode:
#      the default values (non-root) those of the base with components/non-root, and
#      cgroups.enabled=true those of the base;
#   6. the Grafana dashboard is valid JSON, matches its generator, its PromQL parses
#      (promtool check rules) and it only uses metric names the agent exports;
#   7. the agent itself (`packrat-agent --check-config`; $PACKRAT_AGENT, else build/bin's, else
#      skipped with a note) accepts deploy/config/*.yaml and the config of every rendered
#      ConfigMap, and the chart's pre-install hook checks the release's own config;
#   8. the KServe runtime (deploy/kserve/) and its example InferenceService validate against
#      KServe's published CRDs (deploy/kserve/crds/), strictly (an unknown field fails), and
#      manifests with a misspelt field or a wrong type are refused; the runtime starts the
#      agent with deploy/config/kserve.yaml's ports, which the image holds.
# Exit 0 when all pass. Needs kubectl, node/npm, jq, yamllint, promtool, /usr/bin/python3 and go
# with the Go libraries of scripts/packages.txt (golang-go, golang-github-masterminds-sprig-dev,
# golang-github-ghodss-yaml-dev, golang-github-xeipuuv-gojsonschema-dev).
set -euo pipefail
cd "$(dirname "$0")/.."

out=build/check-deploy
mkdir -p "$out"
step() { echo "check_deploy: $*"; }
fail() { echo "check_deploy: FAIL: $*" >&2; exit 1; }

step "yamllint"
yamllint -s -d '{extends: default, rules: {line-length: {max: 100},
  document-start: disable, comments: {min-spaces-from-content: 1},
  braces: {max-spaces-inside: 1}, truthy: {check-keys: false}},
  ignore: deploy/kserve/crds/}' \
  deploy helm/packrat/Chart.yaml helm/packrat/values.yaml
jq empty helm/packrat/values.schema.json

step "kubectl kustomize deploy/, deploy/example/ and deploy/components/*"
kubectl kustomize deploy > "$out/base.yaml"
kubectl kustomize deploy/example > "$out/example.yaml"
kubectl kustomize deploy/grafana > "$out/grafana.yaml"
rendered=("$out/base.yaml" "$out/example.yaml" "$out/grafana.yaml")
# One overlay per models component (they all define the volume `models`), the others together.
overlays=(
  "non-root"
  "models-pvc management-token non-root grpc"
  "models-hostpath"
  "models-image"
)
rm -rf "$out/overlays"
for components in "${overlays[@]}"; do
  name=${components// /+}
  mkdir -p "$out/overlays/$name"
  {
    echo "resources: [../../../../deploy]"
    echo "components:"
    for c in $components; do echo "  - ../../../../deploy/components/$c"; done
  } > "$out/overlays/$name/kustomization.yaml"
  kubectl kustomize "$out/overlays/$name" > "$out/kustomize-$name.yaml"
  rendered+=("$out/kustomize-$name.yaml")
done

step "build scripts/helm-render"
render="$out/helm-render"
export GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE="$PWD/$out/go-cache" GOFLAGS=
stamp=$( (go version; cat scripts/helm-render/*.go) | sha256sum | cut -d' ' -f1)
if [[ ! -x "$render" || "$(cat "$render.stamp" 2>/dev/null)" != "$stamp" ]]; then
  unformatted=$(gofmt -l scripts/helm-render)
  [[ -z "$unformatted" ]] || fail "gofmt: $unformatted"
  (cd scripts/helm-render && go vet . && go test -count=1 . > /dev/null \
    && go build -o "../../$render" .)
  echo "$stamp" > "$render.stamp"
fi

step "helm-render helm/packrat (values.schema.json, templates, variants)"
# A values file (-f), as a user would bring their own models.
cat > "$out/values-own-models.yaml" <<'EOF'
models:
  volume:
    type: hostPath
    hostPath: {path: /srv/models, type: Directory}
config:
  models:
    - name: resnet50
      path: /models/resnet50.pt
      inputs: [{name: input__0, datatype: FP32, shape: [-1, 3, 224, 224]}]
      outputs: [{name: output__0, datatype: FP32, shape: [-1, 1000]}]
      batching: {max_batch: 32}
      instances: auto
EOF
variants=(
  "default|"
  "all|--set example.enabled=true --set serviceMonitor.enabled=true --set prometheusRule.enabled=true
     --set grafanaDashboard.enabled=true"
  "cgroups|--set cgroups.enabled=true"
  "cgroups-no-hostport|--set cgroups.enabled=true --set hostPort=0"
  "cgroups-token|--set cgroups.enabled=true --set managementToken.enabled=true"
  "nonroot-token|--set nonRoot.prepareHostPaths=false --set managementToken.enabled=true"
  "models-pvc|--set models.volume.type=pvc --set models.volume.pvc.claimName=packrat-models"
  "models-hostpath|--set models.volume.type=hostPath"
  "models-image|--set models.volume.type=image
     --set models.volume.image.reference=registry.example.com/packrat-models:1"
  "models-file|-f $out/values-own-models.yaml"
  "no-networkpolicy|--set networkPolicy.enabled=false"
  "token-open|--set managementToken.enabled=true --set config.server.management=0.0.0.0:8081
     --set networkPolicy.managementFrom[0].namespaceSelector.matchLabels.kubernetes\.io/metadata\.name=ops
     --set networkPolicy.managementFrom[0].podSelector.matchLabels.app=operator"
  "grpc-published|--set managementToken.enabled=true --set config.server.grpc=0.0.0.0:8001"
  "grpc-off|--set config.server.grpc=off"
  "grpc-unix|--set config.server.grpc_unix_socket=/run/packrat/grpc.sock"
  "token-existing|--set managementToken.enabled=true --set managementToken.existingSecret=mine
     --set managementToken.secretKey=mgmt"
  "existing-configmap|--set existingConfigMap.name=my-packrat-config"
  "client-shm|--set clientSharedMemory.hostPath=/run/packrat-shm --set example.enabled=true"
)
for variant in "${variants[@]}"; do
  name=${variant%%|*}
  read -r -a args <<< "$(tr '\n' ' ' <<< "${variant#*|}")"
  "$render" -n packrat packrat helm/packrat "${args[@]}" > "$out/helm-$name.yaml" \
    || fail "helm-render ${args[*]}"
  rendered+=("$out/helm-$name.yaml")
done
for cgroups in false true; do
  "$render" -n packrat packrat helm/packrat --notes --set managementToken.enabled=true \
    --set cgroups.enabled=$cgroups > /dev/null || fail "NOTES.txt (cgroups.enabled=$cgroups)"
done
# Values the chart must refuse, each with the reason it must give.
refused=(
  "must be one of the following|--set models.volume.type=nfs"
  "Additional property hostport is not allowed|--set hostport=0"
  "String length must be greater than or equal to 1|--set models.volume.type=image"
  "claimName: String length|--set models.volume.type=pvc"
  "is not loopback|--set config.server.management=0.0.0.0:8081"
  "grpc 0.0.0.0:8001 is not loopback|--set config.server.grpc=0.0.0.0:8001"
  "and ports.grpc (9001) differ|--set managementToken.enabled=true --set config.server.grpc=0.0.0.0:8001 --set ports.grpc=9001"
  "managementFrom needs managementToken.enabled|--set config.server.management=127.0.0.1:8081
     --set networkPolicy.managementFrom[0].podSelector.matchLabels.app=x"
  "listens on loopback only|--set managementToken.enabled=true
     --set networkPolicy.managementFrom[0].podSelector.matchLabels.app=x"
  "and ports.metrics (9999) differ|--set ports.metrics=9999"
  "must exceed preStopDelaySeconds|--set terminationGracePeriodSeconds=30"
  "unix_socket: Does not match pattern '^/run/packrat/|--set config.server.unix_socket=/tmp/agent.sock"
  "grpc_unix_socket: Does not match pattern '^/run/packrat/|--set config.server.grpc_unix_socket=/tmp/grpc.sock"
  "Must not validate the schema|--set config.server.cgroups=false"
  "Must be greater than or equal to 1|--set ports.http=0"
)
for case in "${refused[@]}"; do
  want=${case%%|*}
  read -r -a args <<< "$(tr '\n' ' ' <<< "${case#*|}")"
  if "$render" -n packrat packrat helm/packrat "${args[@]}" > /dev/null 2> "$out/refused.err"; then
    fail "helm-render accepted ${args[*]}"
  fi
  grep -qF -- "$want" "$out/refused.err" \
    || fail "helm-render ${args[*]}: expected '$want', got: $(cat "$out/refused.err")"
done

if command -v helm > /dev/null; then
  step "helm lint / helm template helm/packrat (helm is on PATH)"
  helm lint helm/packrat
  for variant in "${variants[@]}"; do
    name=${variant%%|*}
    [[ $name == token-open || $name == *-token ]] && continue  # random token
    read -r -a args <<< "$(tr '\n' ' ' <<< "${variant#*|}")"
    helm template packrat helm/packrat --namespace packrat "${args[@]}" \
      > "$out/real-helm-$name.yaml"
    /usr/bin/python3 - "$out/real-helm-$name.yaml" "$out/helm-$name.yaml" <<'PY'
import sys, yaml
def objects(path):
    return sorted((d for d in yaml.safe_load_all(open(path)) if d),
                  key=lambda d: (d["kind"], d["metadata"]["name"]))
if objects(sys.argv[1]) != objects(sys.argv[2]):
    sys.exit(f"helm template ({sys.argv[1]}) and helm-render ({sys.argv[2]}) differ")
PY
  done
fi

step "schema validation (kubernetes-models)"
json=()
for f in "${rendered[@]}"; do
  json+=("${f%.yaml}.json")
done
/usr/bin/python3 -c 'import json, sys, yaml
files = sys.argv[1:]
for src, dst in zip(files[::2], files[1::2]):
    json.dump([d for d in yaml.safe_load_all(open(src)) if d], open(dst, "w"))' \
  $(for f in "${rendered[@]}"; do echo "$f" "${f%.yaml}.json"; done)
validator="$out/k8s-validate"
mkdir -p "$validator"
if ! cmp -s scripts/k8s-validate/package-lock.json "$validator/package-lock.json" \
    || [[ ! -d "$validator/node_modules" ]]; then
  cp scripts/k8s-validate/package.json scripts/k8s-validate/package-lock.json "$validator/"
  (cd "$validator" && npm ci --no-audit --no-fund --loglevel=error > /dev/null)
fi
cp scripts/k8s-validate/validate.mjs "$validator/"
node "$validator/validate.mjs" "${json[@]}" > "$out/validate.log" \
  || { grep -v '^ok ' "$out/validate.log" >&2; fail "schema validation"; }
echo "check_deploy: $(grep -c '^ok ' "$out/validate.log") objects valid"

step "packrat-agent --check-config on every config (deploy/config, each rendered ConfigMap)"
agent=${PACKRAT_AGENT:-build/bin/packrat-agent}
if [[ -x $agent ]]; then
  rm -rf "$out/configs" && mkdir -p "$out/configs"
  cp deploy/config/*.yaml "$out/configs/"
  /usr/bin/python3 - "$out/configs" "${rendered[@]}" <<'PY'
import os, sys, yaml
folder, files = sys.argv[1], sys.argv[2:]
for path in files:
    for o in yaml.safe_load_all(open(path)):
        if not o or o["kind"] != "ConfigMap" or "packrat.yaml" not in o.get("data", {}):
            continue
        name = f"{os.path.basename(path)[:-5]}-{o['metadata']['name']}.yaml"
        open(os.path.join(folder, name), "w").write(o["data"]["packrat.yaml"])
PY
  checked=0
  for config in "$out"/configs/*.yaml; do
    "$agent" --check-config "$config" > /dev/null 2> "$out/check-config.err" ||
      fail "packrat-agent --check-config $config: $(grep -v ': note: ' "$out/check-config.err")"
    checked=$((checked + 1))
  done
  echo "check_deploy: $checked configs valid"
else
  echo "check_deploy: note: $agent is not built: the configs are not checked by the agent"
fi
# The chart's hook checks the config the release's agents get.
/usr/bin/python3 - "$out/helm-default.yaml" <<'PY'
import sys, yaml
maps = {o["metadata"]["name"]: o for o in yaml.safe_load_all(open(sys.argv[1]))
        if o and o["kind"] == "ConfigMap"}
if maps["packrat-check-config"]["data"] != maps["packrat-config"]["data"]:
    sys.exit("the check-config hook's ConfigMap differs from the agents' packrat-config")
PY

step "KServe: deploy/kserve against KServe's CRDs (deploy/kserve/crds)"
kubectl kustomize deploy/kserve > "$out/kserve.yaml"
cp scripts/k8s-validate/crd-validate.mjs "$validator/"
/usr/bin/python3 - "$out" <<'PY'
import copy, json, sys, yaml
out = sys.argv[1]
def load(path):
    return [d for d in yaml.safe_load_all(open(path)) if d]
crds = load("deploy/kserve/crds/serving.kserve.io_clusterservingruntimes.yaml") + \
    load("deploy/kserve/crds/serving.kserve.io_inferenceservices.yaml")
json.dump(crds, open(f"{out}/kserve-crds.json", "w"))
runtime = load(f"{out}/kserve.yaml")
isvc = load("deploy/kserve/example/inferenceservice.yaml")
json.dump(runtime + isvc, open(f"{out}/kserve-objects.json", "w"))

# What the runtime must say to KServe and to the agent in the image.
[rt] = [o for o in runtime if o["kind"] == "ClusterServingRuntime"]
[container] = rt["spec"]["containers"]
config = yaml.safe_load(open("deploy/config/kserve.yaml"))["server"]
port = lambda key: int(config[key].rsplit(":", 1)[1])
checks = [
    (container["name"] == "kserve-container", "the container is not named kserve-container"),
    (container["args"] == ["--config", "/etc/packrat/kserve.yaml"],
     "the runtime does not start the agent with /etc/packrat/kserve.yaml"),
    (port("http") == 8080 and config["http"].startswith("0.0.0.0:"),
     "kserve.yaml's http is not 0.0.0.0:8080 (KServe's port)"),
    (rt["spec"]["annotations"]["prometheus.kserve.io/port"] == str(port("metrics")),
     "prometheus.kserve.io/port is not kserve.yaml's metrics port"),
    (config["model_repository"] == "/mnt/models", "kserve.yaml does not read /mnt/models"),
    ({"name": "pytorch", "version": "1", "autoSelect": True, "priority": 3}
     in rt["spec"]["supportedModelFormats"], "pytorch is not auto-selected"),
    ("v2" in rt["spec"]["protocolVersions"], "protocol v2 is not listed"),
]
for ok, what in checks:
    if not ok:
        sys.exit(f"deploy/kserve: {what}")

# Manifests the validation must refuse, each for its reason.
bad = []
o = copy.deepcopy(rt); o["spec"]["supportedModelFormat"] = o["spec"].pop("supportedModelFormats")
bad.append(("additional properties 'supportedModelFormat'", o))
o = copy.deepcopy(rt); o["spec"]["containers"][0]["args"] = "--config"
bad.append(("/spec/containers/0/args must be array", o))
o = copy.deepcopy(isvc[0]); del o["spec"]["predictor"]["model"]["modelFormat"]["name"]
bad.append(("modelFormat must have required property 'name'", o))
o = copy.deepcopy(isvc[0]); o["spec"]["predictor"]["model"]["storageURI"] = "gs://x"
bad.append(("additional properties 'storageURI'", o))
for i, (want, o) in enumerate(bad):
    json.dump([o], open(f"{out}/kserve-bad-{i}.json", "w"))
    open(f"{out}/kserve-bad-{i}.want", "w").write(want)
PY
node "$validator/crd-validate.mjs" "$out/kserve-crds.json" "$out/kserve-objects.json" \
  > "$out/kserve-validate.log" || { grep -v '^ok ' "$out/kserve-validate.log" >&2; fail "KServe CRD validation"; }
echo "check_deploy: $(grep -c '^ok ' "$out/kserve-validate.log") KServe objects valid"
for bad in "$out"/kserve-bad-*.json; do
  if node "$validator/crd-validate.mjs" "$out/kserve-crds.json" "$bad" > "$out/kserve-bad.log"; then
    fail "the KServe CRD validation accepted $bad"
  fi
  grep -qF -- "$(cat "${bad%.json}.want")" "$out/kserve-bad.log" ||
    fail "$bad: expected '$(cat "${bad%.json}.want")', got: $(cat "$out/kserve-bad.log")"
done

step "helm values config == deploy/config/packrat.yaml; the chart == Kustomize, in each mode"
# The chart's default (non-root) against the base with components/non-root, and the chart's
# cgroups mode against the base.
/usr/bin/python3 - "$out/kustomize-non-root.json" "$out/helm-default.json" \
  "$out/base.json" "$out/helm-cgroups.json" <<'PY'
import difflib, json, sys, yaml
base = yaml.safe_load(open("deploy/config/packrat.yaml"))
chart = yaml.safe_load(open("helm/packrat/values.yaml"))["config"]
if base != chart:
    sys.exit("helm/packrat/values.yaml config differs from deploy/config/packrat.yaml")

def objects(path):  # the release's objects, not its hooks'
    return {o["kind"]: o for o in json.load(open(path))
            if "helm.sh/hook" not in o["metadata"].get("annotations", {})}
def pod_spec(o):
    spec = o["spec"]["template"]["spec"]
    for v in spec["volumes"]:
        if "configMap" in v:
            v["configMap"]["name"] = "CONFIG"  # packrat-config-<hash> vs packrat-config
    return spec
def agent_config(o, non_root):
    config = yaml.safe_load(o["ConfigMap"]["data"]["packrat.yaml"])
    if non_root:  # the chart adds it; Kustomize's agent falls back by itself
        assert config["server"].pop("cgroups") is False
    return config
for kustomize_path, helm_path, mode in [(sys.argv[1], sys.argv[2], "non-root"),
                                         (sys.argv[3], sys.argv[4], "cgroups")]:
    kustomize, helm = objects(kustomize_path), objects(helm_path)
    pairs = [
        ("agent pod spec", pod_spec(kustomize["DaemonSet"]), pod_spec(helm["DaemonSet"])),
        ("NetworkPolicy rules", kustomize["NetworkPolicy"]["spec"]["ingress"],
         helm["NetworkPolicy"]["spec"]["ingress"]),
        ("Service ports", kustomize["Service"]["spec"]["ports"],
         helm["Service"]["spec"]["ports"]),
        ("agent config", agent_config(kustomize, False), agent_config(helm, mode == "non-root")),
    ]
    for what, a, b in pairs:
        if a != b:
            diff = difflib.unified_diff(json.dumps(a, indent=1, sort_keys=True).splitlines(),
                                        json.dumps(b, indent=1, sort_keys=True).splitlines(),
                                        "kustomize", "helm", lineterm="")
            sys.exit(f"{what} ({mode}): the chart differs from deploy/\n" + "\n".join(diff))
PY

step "alert rules (the chart's PrometheusRule)"
/usr/bin/python3 - "$out/helm-all.yaml" "$out/alert-rules.yaml" <<'PY'
import sys, yaml
rules = [o for o in yaml.safe_load_all(open(sys.argv[1])) if o and o.get("kind") == "PrometheusRule"]
if len(rules) != 1:
    sys.exit("the chart with prometheusRule.enabled renders %d PrometheusRules" % len(rules))
yaml.safe_dump({"groups": rules[0]["spec"]["groups"]}, open(sys.argv[2], "w"))
PY
promtool check rules "$out/alert-rules.yaml" > /dev/null || fail "promtool check rules"
cp tests/deploy/alert_rules_test.yaml "$out/alert_rules_test.yaml"
promtool test rules "$out/alert_rules_test.yaml" > "$out/alert-rules-test.log" 2>&1 \
  || { cat "$out/alert-rules-test.log" >&2; fail "promtool test rules (tests/deploy/alert_rules_test.yaml)"; }
for name in $(grep -o 'packrat_[a-z_]*' "$out/alert-rules.yaml" | sort -u); do
  base=$(sed -E 's/_(bucket|sum|count)$//' <<< "$name")
  grep -q "\"$base\"" agent/metrics/agent_metrics.cc \
    || fail "the alert rules use $name, which agent/metrics does not export"
done

step "grafana dashboard"
dashboard=deploy/grafana/packrat-dashboard.json
jq empty "$dashboard"
/usr/bin/python3 deploy/grafana/make_dashboard.py | cmp -s - "$dashboard" \
  || { echo "$dashboard is not what deploy/grafana/make_dashboard.py generates" >&2; exit 1; }
cmp -s "$dashboard" helm/packrat/dashboards/packrat-dashboard.json ||
  fail "helm/packrat/dashboards/packrat-dashboard.json differs from $dashboard (copy it)"
# The ConfigMaps of the chart and of deploy/grafana hold the dashboard as it is.
/usr/bin/python3 - "$dashboard" "$out/helm-all.yaml" "$out/grafana.yaml" <<'PY'
import json, sys, yaml
want = json.load(open(sys.argv[1]))
for path in sys.argv[2:]:
    maps = [o for o in yaml.safe_load_all(open(path)) if o and o["kind"] == "ConfigMap"
            and "packrat-dashboard.json" in o.get("data", {})]
    if len(maps) != 1 or maps[0]["metadata"]["labels"].get("grafana_dashboard") != "1":
        sys.exit(f"{path}: no one dashboard ConfigMap labelled grafana_dashboard: \"1\"")
    if json.loads(maps[0]["data"]["packrat-dashboard.json"]) != want:
        sys.exit(f"{path}: the dashboard ConfigMap differs from {sys.argv[1]}")
PY
jq -r '[.. | .expr? // empty] | to_entries[]
       | "      - record: dashboard:expr_\(.key)\n        expr: \(.value | @json)"' "$dashboard" \
  | sed -e 's/\$__rate_interval/5m/g' -e 's/\$model/.*/g' -e 's/\$instance/.*/g' -e 's/\$node/.*/g' \
  | { printf 'groups:\n  - name: dashboard\n    rules:\n'; cat; } > "$out/dashboard-rules.yaml"
promtool check rules "$out/dashboard-rules.yaml" > /dev/null
missing=0
for name in $(grep -o '\(packrat\|process\)_[a-z_]*' "$dashboard" | sort -u); do
  base=$(sed -E 's/_(bucket|sum|count)$//' <<< "$name")
  sources=(agent/metrics/agent_metrics.cc agent/metrics/process_metrics.cc
           agent/metrics/runtime_process_metrics.cc)
  if ! grep -q "\"$base\"" "${sources[@]}" && ! grep -q "\"$name\"" "${sources[@]}"; then
    echo "dashboard uses $name, which agent/metrics does not export" >&2
    missing=1
  fi
done
((missing == 0))

echo "check_deploy: all checks passed"
