#!/usr/bin/env bash
# Builds the container images (Dockerfile) from a clean copy of the sources with buildah, no
# Docker engine and no registry, and checks them:
#   - sizes: the agent's image at most 550 MB, the sidecar's (`--target forwarder`) at most
#     30 MB (decimal, the layers as stored, as `buildah images` shows them);
#   - the images' metadata: OCI labels, HEALTHCHECK, non-root user, entrypoint;
#   - the agent's image holds no compiler, no Python, no sources, no -dev package and none of the
#     libraries libtorch's package drags in unused (OpenCV, FFmpeg, Qt, GDAL); every library the
#     four binaries need resolves (ldd), BLAS to OpenBLAS; the license and the list of copied
#     files with their packages are there; the KServe runtime's config in it reads a model
#     repository mounted at /mnt/models (packrat-agent --check-config);
#   - packrat-agent started inside the image with its default config (/etc/packrat/packrat.yaml)
#     is live and ready, shows the demo model's metadata, answers one inference as
#     build/bin/packrat-agent does with the same config and model file (same output tensor),
#     exports packrat_ series on /metrics, and exits 0 within its shutdown timeout on SIGTERM;
#   - packrat-forward started in the sidecar's image in front of that agent answers readiness
#     and the same inference through it, its probe command (curl) runs in that image, and it
#     exits 0 on SIGTERM.
#     Two changes to that config, each said in the output: `instances: auto` becomes a fixed
#     plan (one instance, 1 thread, batch 4), since profiling on first start takes about 6
#     minutes on 2 cores (--auto keeps it); and where 8080-8082 are taken on this machine the
#     agent listens on free ports instead (read from --port-file).
#
#   scripts/check_image.sh [--auto] [--keep] [--tag NAME]
#     --auto      serve the default config unchanged: profile on first start (the profile is
#                 kept in build/image-cache/profiles/ and reused while model file and machine
#                 stay the same)
#     --keep      keep the images (tags localhost/packrat:VERSION and
#                 localhost/packrat-forward:VERSION) instead of removing them
#     --tag NAME  the agent image's name (default localhost/packrat:check-PID, removed at the
#                 end); the sidecar's is the same with packrat-forward for packrat
#
# Time on the 2-core development machine (docs/operations.md, "Container image"): about
# 5 minutes warm (base image cached in build/image-cache/, the host's ccache holding the
# objects of a build of the same sources, the .deb files in /var/cache/apt/archives), about
# 30 minutes cold (nothing cached: every object compiled). Most of a warm run is apt inside the
# two stages, the model generation and the first start's profile (`instances: auto`).
#
# Needs root, buildah and mmdebstrap (scripts/packages.txt), Debian's mirror (apt inside the
# build), build/bin/packrat-agent (scripts/setup.sh) and the host's ports on loopback. The
# Debian 12 base is made with mmdebstrap (like debian:bookworm-slim: minbase, no docs) and
# kept in build/image-cache/ (remade after 7 days); it is imported as
# localhost/debian:bookworm-slim, which the build uses as BASE_IMAGE, so nothing is pulled.
# /etc/containers/containers.conf is written when absent (buildah's default ulimits ask more
# than this machine allows, and there is no systemd for cgroups). Containers run with
# buildah's chroot isolation on the host's network and PID namespace; podman/crun do not run
# here (cgroups in hybrid mode).
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD

keep=0 tag="" auto=0
while (($#)); do
  case "$1" in
    --auto) auto=1 ;;
    --keep) keep=1 ;;
    --tag) tag=${2:?--tag needs a name}; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "check_image: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

fail() { echo "check_image: FAIL: $*" >&2; exit 1; }
note() { echo "check_image: $*"; }
t0=$SECONDS
phase() { note "[$((SECONDS - t0)) s] $*"; }

[[ $(id -u) -eq 0 ]] || fail "needs root (buildah with storage in /var/lib/containers)"
for tool in buildah mmdebstrap curl jq python3 git; do
  command -v "$tool" >/dev/null || fail "'$tool' is not installed: run scripts/setup.sh"
done
host_agent=$src/build/bin/packrat-agent
[[ -x $host_agent && -x $src/build/bin/packrat-runtime ]] ||
  fail "$host_agent is missing (the reference for the inference check): run scripts/setup.sh"

version=$(sed -n 's/^project(packrat VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
[[ -n $version ]] || fail "no project version in CMakeLists.txt"
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
if [[ -n $(git status --porcelain --untracked-files=no 2>/dev/null) ]]; then
  revision="$revision-dirty"
fi
source_url=$(git remote get-url origin 2>/dev/null || echo unknown)
[[ -n $tag ]] || { ((keep)) && tag=localhost/packrat:$version || tag=localhost/packrat:check-$$; }
forward_tag=${tag/packrat:/packrat-forward:}
[[ $forward_tag != "$tag" ]] || forward_tag=$tag-forward
created=$(date -u +%Y-%m-%dT%H:%M:%SZ)
base_image=localhost/debian:bookworm-slim
cache=$src/build/image-cache
mkdir -p "$cache"

# The Dockerfile's build packages come from the one list of packages.
for p in $(sed -n '/^FROM .* AS build/,/^FROM /p' Dockerfile | sed -n '/apt-get install/,/[^\\]$/p' |
           tr -s ' \\' '\n' | grep -E '^[a-z0-9][a-z0-9.+-]+$' | grep -vx -e apt-get -e install); do
  grep -qx "$p" scripts/packages.txt || fail "the Dockerfile's build package $p is not in scripts/packages.txt"
done

# The image's build stage runs ccache as scripts/ccache_env.sh sets it, or they share no objects.
ignore_headers() { sed -n 's/.*CCACHE_IGNOREHEADERS=\([^ "]*\).*/\1/p' "$1"; }
[[ -n $(ignore_headers Dockerfile) && $(ignore_headers Dockerfile) == "$(ignore_headers scripts/ccache_env.sh)" ]] ||
  fail "CCACHE_IGNOREHEADERS differs between the Dockerfile and scripts/ccache_env.sh"

# buildah needs these settings on this machine; an existing file is the administrator's.
conf=/etc/containers/containers.conf
if [[ ! -e $conf ]]; then
  mkdir -p /etc/containers
  cat >"$conf" <<'EOF'
# Written by Packrat's scripts/check_image.sh: buildah's default ulimits ask more than this
# machine allows, and there is no systemd to manage cgroups.
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]

[engine]
cgroup_manager = "cgroupfs"
EOF
  note "wrote $conf"
fi

work=$(mktemp -d /tmp/packrat-check-image.XXXXXX)
chmod 0755 "$work"
ctr="" fctr="" image_agent_pid="" forward_pid="" host_agent_pid="" built=0
cleanup() {
  local rc=$?
  set +e
  # Agents still running after a failure: SIGTERM, then SIGKILL after the shutdown timeout.
  local pids="" pid i
  [[ -n $image_agent_pid ]] && pids="$(agent_of "$image_agent_pid") $image_agent_pid"
  [[ -n $host_agent_pid ]] && pids="$pids $host_agent_pid"
  [[ -n $forward_pid ]] && pids="$pids $(forward_of "$forward_pid") $forward_pid"
  for pid in $pids; do kill -TERM "$pid" 2>/dev/null; done
  for ((i = 0; i < 60; i++)); do
    local alive=0
    for pid in $pids; do kill -0 "$pid" 2>/dev/null && alive=1; done
    ((alive)) || break
    sleep 0.5
  done
  for pid in $pids; do kill -KILL "$pid" 2>/dev/null; done
  for c in $ctr $fctr; do
    buildah umount "$c" >/dev/null 2>&1
    buildah rm "$c" >/dev/null 2>&1
  done
  if ((built && !keep)); then buildah rmi "$tag" "$forward_tag" >/dev/null 2>&1; fi
  # The intermediate images of --layers (the build stage, shared by both builds).
  ((built)) && buildah rmi --prune >/dev/null 2>&1
  rm -rf "$work"
  if ((rc)); then echo "check_image: failed after $((SECONDS - t0)) s" >&2; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Containers of earlier runs that died before their cleanup (named after their process id).
for old in $(buildah containers --format '{{.ContainerName}}' 2>/dev/null | grep '^packrat-check-' || true); do
  kill -0 "${old#packrat-check-}" 2>/dev/null && continue
  buildah rm "$old" >/dev/null 2>&1 || true
done

# Images of earlier runs that died before their cleanup (tagged check-<their process id>).
for old in $(buildah images --format '{{.Name}}:{{.Tag}}' 2>/dev/null |
             grep -E '^localhost/packrat(-forward)?:check-' || true); do
  kill -0 "${old##*:check-}" 2>/dev/null && continue
  buildah rmi "$old" >/dev/null 2>&1 || true
done

# --- the base image ------------------------------------------------------------------------
base_tar=$cache/debian-bookworm-slim.tar
if [[ -f $base_tar ]] && [[ -n $(find "$base_tar" -mtime +7) ]]; then
  note "the cached base is older than 7 days: remaking it"
  rm -f "$base_tar"
  buildah rmi "$base_image" >/dev/null 2>&1 || true
fi
if [[ ! -f $base_tar ]]; then
  phase "making the Debian 12 base with mmdebstrap (minbase, without docs: like bookworm-slim)"
  # debian:bookworm-slim's dpkg excludes and the three suites it uses. Not its apt hook
  # docker-clean, which deletes /var/cache/apt/archives/*.deb after every install: the builds
  # here bind-mount the host's archive folder there.
  excludes=()
  for e in path-exclude=/usr/share/doc/* path-include=/usr/share/doc/*/copyright \
           path-exclude=/usr/share/man/* path-exclude=/usr/share/groff/* \
           path-exclude=/usr/share/info/* path-exclude=/usr/share/lintian/overrides/* \
           path-exclude=/usr/share/linda/* path-exclude=/usr/share/locale/* \
           path-include=/usr/share/locale/locale.alias; do
    excludes+=(--dpkgopt="$e")
  done
  if ! nice -n 10 mmdebstrap --quiet --variant=minbase \
      --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr "${excludes[@]}" \
      --customize-hook='rm -f "$1"/var/cache/apt/*.bin' \
      bookworm "$work/base.tar" \
      "deb http://deb.debian.org/debian bookworm main" \
      "deb http://deb.debian.org/debian bookworm-updates main" \
      "deb http://deb.debian.org/debian-security bookworm-security main" >"$work/mmdebstrap.log" 2>&1; then
    tail -20 "$work/mmdebstrap.log" >&2
    fail "mmdebstrap could not make the base (is the Debian mirror reachable?)"
  fi
  mv "$work/base.tar" "$base_tar"
  buildah rmi "$base_image" >/dev/null 2>&1 || true
fi
if ! buildah inspect --type image "$base_image" >/dev/null 2>&1; then
  phase "importing $base_tar as $base_image"
  c=$(buildah from --pull=never scratch)
  buildah add --quiet "$c" "$base_tar" / >/dev/null
  # Never an apt hook that empties the bind-mounted archive folder, whatever the tar holds.
  rm -f "$(buildah mount "$c")/etc/apt/apt.conf.d/docker-clean"
  buildah umount "$c" >/dev/null
  buildah config --cmd '["bash"]' --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$c"
  buildah commit --quiet --rm "$c" "$base_image" >/dev/null
fi

# --- the build -------------------------------------------------------------------------------
# A clean tree: only the files git knows, tracked or untracked but not ignored, as they are in
# the working tree (no build trees, models or caches, whatever .dockerignore says).
mkdir "$work/context"
git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do [[ -e $f || -L $f ]] && printf '%s\0' "$f"; done |
  tar --null -T - -cf - | tar -x -C "$work/context"

ccache_dir=$(ccache -k cache_dir 2>/dev/null || echo "$HOME/.cache/ccache")
mkdir -p "$ccache_dir"
ccache_stat() { CCACHE_DIR=$ccache_dir ccache --print-stats 2>/dev/null | awk -v k="$1" '$1 == k {print $2}'; }
hits0=$(( $(ccache_stat direct_cache_hit) + $(ccache_stat preprocessed_cache_hit) ))
miss0=$(ccache_stat cache_miss)
mkdir -p /var/cache/apt/archives/partial

# Both images from one build stage: --layers keeps its layers for the second build (the
# intermediate images are removed at the end).
bud=(buildah bud --isolation=chroot --format docker --layers --force-rm --pull=never
     --build-arg BASE_IMAGE="$base_image" --build-arg VERSION="$version"
     --build-arg REVISION="$revision" --build-arg SOURCE="$source_url" --build-arg CREATED="$created"
     --volume "$ccache_dir:/mnt" --volume /var/cache/apt/archives:/var/cache/apt/archives
     --file "$work/context/Dockerfile")
phase "building $tag and $forward_tag (buildah bud; log: $work/build.log)"
built=1
if ! nice -n 10 "${bud[@]}" --tag "$tag" "$work/context" >"$work/build.log" 2>&1 ||
   ! nice -n 10 "${bud[@]}" --target forwarder --tag "$forward_tag" "$work/context" >>"$work/build.log" 2>&1; then
  tail -40 "$work/build.log" >&2
  fail "buildah bud failed (the last lines of its log are above)"
fi
hits=$(( $(ccache_stat direct_cache_hit) + $(ccache_stat preprocessed_cache_hit) - hits0 ))
miss=$(( $(ccache_stat cache_miss) - miss0 ))
# An image's size: its layers, uncompressed, as they are stored.
image_size() { buildah inspect --type image "$1" | jq '.Manifest | fromjson | [.layers[].size] | add'; }
size=$(image_size "$tag")
forward_size=$(image_size "$forward_tag")
phase "built: $(numfmt --to=si --round=nearest --suffix=B "$size") ($size bytes) and $(numfmt --to=si --round=nearest --suffix=B "$forward_size") ($forward_size bytes); ccache in the build: $hits hits, $miss misses"
((size <= 550000000)) || fail "the agent's image is $size bytes, over its 550 MB budget"
((forward_size <= 30000000)) || fail "the forwarder's image is $forward_size bytes, over its 30 MB budget"

# --- metadata ----------------------------------------------------------------------------------
for image in "$tag" "$forward_tag"; do
  config=$(buildah inspect --type image "$image" | jq '.Docker.config')
  for key in title description version revision created source url documentation vendor authors licenses; do
    value=$(jq -r --arg k "org.opencontainers.image.$key" '.Labels[$k] // empty' <<<"$config")
    [[ -n $value ]] || fail "$image: label org.opencontainers.image.$key is missing"
  done
  [[ $(jq -r '.Labels["org.opencontainers.image.revision"]' <<<"$config") == "$revision" ]] ||
    fail "$image: label revision is not $revision"
  [[ $(jq -r '.Labels["org.opencontainers.image.created"]' <<<"$config") == "$created" ]] ||
    fail "$image: label created is not $created"
  [[ $(jq -r '.User' <<<"$config") == 10001:10001 ]] || fail "$image: the default user is not 10001:10001"
done
config=$(buildah inspect --type image "$forward_tag" | jq '.Docker.config')
jq -e '.Entrypoint == ["/opt/packrat/bin/packrat-forward"]' <<<"$config" >/dev/null ||
  fail "$forward_tag: the entrypoint is not /opt/packrat/bin/packrat-forward"
config=$(buildah inspect --type image "$tag" | jq '.Docker.config')
jq -e '.Healthcheck.Test | join(" ") | test("curl .*/v2/health/(live|ready)")' <<<"$config" >/dev/null ||
  fail "no HEALTHCHECK with curl on /v2/health/live or ready"
jq -e '.Entrypoint == ["/opt/packrat/bin/packrat-agent"]' <<<"$config" >/dev/null ||
  fail "the entrypoint is not /opt/packrat/bin/packrat-agent"

# --- contents ----------------------------------------------------------------------------------
ctr=$(buildah from --pull=never --name "packrat-check-$$" "$tag")
mnt=$(buildah mount "$ctr")
for path in /src /usr/bin/g++ /usr/bin/gcc /usr/bin/c++ /usr/bin/cc /usr/bin/cmake /usr/bin/python3 \
            /usr/lib/python3 /usr/include/torch; do
  [[ -e $mnt$path || -L $mnt$path ]] && fail "the image has $path"
done
[[ -z $(ls -A "$mnt/mnt") ]] || fail "/mnt (the build's ccache mount point) is not empty"
# `buildah run` in the container, its stdout on stdout. buildah's chroot isolation copies its own
# binary into a sealed memfd first, and sealing now and then fails with EBUSY ("Close_Fd sealing
# memfd copy: Device or resource busy": seen once in CI, the command never ran): that failure of
# buildah's, and only that one, is tried again, up to three times.
in_image() {
  local err rc try
  err=$(mktemp)
  for try in 1 2 3; do
    rc=0
    buildah run --isolation=chroot "$ctr" -- "$@" 2>"$err" || rc=$?
    if ((rc == 0)) || ! grep -q 'sealing memfd' "$err"; then break; fi
    note "buildah run failed before running $1 (sealing its memfd copy, try $try of 3)" >&2
  done
  cat "$err" >&2
  rm -f "$err"
  return "$rc"
}
found=$(in_image sh -c \
  'for t in g++ gcc c++ cc clang cmake ninja ccache python3 python pip gdb; do command -v "$t"; done' || true)
[[ -z $found ]] || fail "the image has build or test tools: $found"
devs=$(in_image dpkg-query -W -f '${Package}\n' |
       grep -E -- '-dev$|^(g\+\+|gcc|cpp|python3)(-[0-9.]+)?$' || true)
[[ -z $devs ]] || fail "the image has build packages: $(echo $devs)"
for b in packrat-agent packrat-runtime packrat packrat-forward; do
  [[ -x $mnt/opt/packrat/bin/$b ]] || fail "/opt/packrat/bin/$b is missing"
  out=$(in_image ldd "/opt/packrat/bin/$b") ||
    fail "ldd /opt/packrat/bin/$b failed"
  if grep -q 'not found' <<<"$out"; then
    fail "$b misses libraries in the image: $(grep 'not found' <<<"$out" | tr -s ' \t\n' ' ')"
  fi
done
unused=$(find "$mnt/usr/lib" "$mnt/opt" \( -name 'libopencv_*' -o -name 'libav*' -o -name 'libQt*' \
         -o -name 'libgdal*' \) -printf '%f ')
[[ -z $unused ]] || fail "the image has libraries nothing binds to: $unused"
for f in /usr/share/doc/packrat/LICENSE /usr/share/doc/packrat/closure.txt \
         /usr/share/doc/libtorch1.13/copyright; do
  [[ -s $mnt$f ]] || fail "$f is missing"
done
blas=$(in_image readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3)
[[ $blas == *openblas* ]] || fail "libblas.so.3 is $blas, not OpenBLAS"
[[ -s $mnt/opt/packrat/models/resnet18.pt ]] || fail "/opt/packrat/models/resnet18.pt is missing"
cmp -s "$mnt/etc/packrat/packrat.yaml" deploy/config/packrat.yaml ||
  fail "/etc/packrat/packrat.yaml differs from deploy/config/packrat.yaml"
[[ $(stat -c %u "$mnt/var/lib/packrat/profiles") == 10001 ]] ||
  fail "/var/lib/packrat/profiles is not owned by uid 10001"
phase "contents: no compiler, Python or sources; every library resolves (BLAS: $blas)"

# The KServe runtime's config (deploy/kserve/): the agent in the image reads /mnt/models, where
# KServe's storage initializer puts the InferenceService's files, as a model repository.
mkdir -p "$work/kserve-models/tiny"
cat >"$work/kserve-models/tiny/model.yaml" <<'EOF'
path: /opt/packrat/models/tiny_mlp.pt
inputs: [{name: x, datatype: FP32, shape: [-1, 16]}]
outputs: [{name: y, datatype: FP32, shape: [-1, 8]}]
batching: {max_batch: 8}
instances: auto
EOF
kserve_check=$(buildah run --isolation=chroot --volume "$work/kserve-models:/mnt/models:ro" "$ctr" -- \
  /opt/packrat/bin/packrat-agent --check-config /etc/packrat/kserve.yaml 2>&1) ||
  fail "packrat-agent --check-config /etc/packrat/kserve.yaml failed in the image: $kserve_check"
grep -q '^# Repository models, each valid: tiny$' <<<"$kserve_check" ||
  fail "the KServe config does not read /mnt/models as a repository: $kserve_check"
phase "the KServe runtime's config reads /mnt/models as a model repository"

# --- the agent in the image ------------------------------------------------------------------
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
share=$work/share   # bind-mounted at /check: the port file and the config variant
mkdir -p "$share"
profiles=$work/profiles
((auto)) && profiles=$cache/profiles
mkdir -p "$profiles"
chown 10001:10001 "$share" "$profiles"
free_ports=0
if port_busy 8080 || port_busy 8081 || port_busy 8082; then
  free_ports=1
  note "8080-8082 are taken on this machine: the agent in the image listens on free ports instead"
fi
((auto)) || note "instances: auto becomes a fixed plan (count 1, threads 1, batch 4): no profiling (--auto profiles)"
# The image's config, with the changes above; `host` also for build/bin/packrat-agent: every
# port free on loopback, no Unix socket, the image's model files copied to DIR.
variant() {  # variant IN OUT image|host [DIR]
  python3 - "$@" "$auto" "$free_ports" "$profiles" <<'EOF'
import sys, yaml
src, out, who = sys.argv[1:4]
folder, auto, free_ports, profiles = (sys.argv[4:8] if who == "host" else ["", *sys.argv[4:7]])
config = yaml.safe_load(open(src))
server = config["server"]
if who == "host" or free_ports == "1":
    for key in ("http", "management", "metrics"):
        host = "127.0.0.1" if who == "host" else server[key].rsplit(":", 1)[0]
        server[key] = f"{host}:0"
if who == "host":
    server.pop("unix_socket", None)
    server["profile_dir"] = profiles
for model in config["models"]:
    if who == "host":
        model["path"] = f"{folder}/{model['path'].rsplit('/', 1)[1]}"
    if auto == "0" and model.get("instances") == "auto":
        model["instances"] = [{"count": 1, "threads": 1, "batch": 4}]
yaml.safe_dump(config, open(out, "w"), sort_keys=False)
EOF
}
agent_args=(--config /etc/packrat/packrat.yaml --port-file /check/ports.json)
if ((free_ports || !auto)); then
  variant "$mnt/etc/packrat/packrat.yaml" "$share/packrat.yaml" image
  agent_args=(--config /check/packrat.yaml --port-file /check/ports.json)
fi
shutdown_timeout=$(python3 -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["server"].get("shutdown_timeout_s", 30))' "$mnt/etc/packrat/packrat.yaml")
ready_timeout=${PACKRAT_CHECK_READY_TIMEOUT:-$( ((auto)) && echo 1800 || echo 300)}

# Waits for the port file $1 of the agent whose process is $2; sets http and metrics.
wait_ports() {
  local deadline=$((SECONDS + 60))
  until [[ -s $1 ]]; do
    kill -0 "$2" 2>/dev/null && ((SECONDS < deadline)) || return 1
    sleep 0.5
  done
  http=$(jq -r .http "$1") metrics=$(jq -r .metrics "$1")
}
# Waits until the agent on port $1 (process $2, log $3) is ready.
wait_ready() {
  local deadline=$((SECONDS + ready_timeout)) next=$((SECONDS + 30))
  until [[ $(curl -s -o /dev/null -w '%{http_code}' "127.0.0.1:$1/v2/health/ready") == 200 ]]; do
    kill -0 "$2" 2>/dev/null || { tail -20 "$3" >&2; fail "the agent exited before it was ready (log above)"; }
    ((SECONDS < deadline)) || { tail -20 "$3" >&2; fail "not ready after $ready_timeout s (log above)"; }
    if ((SECONDS >= next)); then
      note "  waiting for ready: $(curl -s "127.0.0.1:$1/v2/models/demo" | jq -r '.parameters.state_detail // .parameters.state // "?"' 2>/dev/null)"
      next=$((SECONDS + 30))
    fi
    sleep 1
  done
}
# The process named $2 among the descendants of process $1 (buildah run forks it).
descendant() {
  local pid
  for pid in $(pgrep -P "$1"); do
    if [[ $(cat "/proc/$pid/comm" 2>/dev/null) == "$2" ]]; then echo "$pid"; return; fi
    descendant "$pid" "$2"
  done
}
agent_of() { descendant "$1" packrat-agent; }
forward_of() { descendant "$1" packrat-forward; }
# SIGTERM to agent $1, then waits for process $2 (the agent or its buildah run; log $3): it
# must exit 0 within the shutdown timeout (plus 5 s for the runtimes and buildah).
stop_agent() {
  local start=$SECONDS rc=0
  [[ -n $1 ]] || fail "cannot find the agent's process"
  kill -TERM "$1"
  wait "$2" || rc=$?
  local took=$((SECONDS - start))
  ((rc == 0)) || { tail -20 "$3" >&2; fail "the agent exited $rc on SIGTERM (log above)"; }
  ((took <= shutdown_timeout + 5)) || fail "the agent took $took s to stop (shutdown_timeout_s: $shutdown_timeout)"
  note "  SIGTERM: exit 0 after $took s"
}

# A deterministic 1x3x224x224 image as a JSON tensor.
python3 - >"$work/request.json" <<'EOF'
import json, math
data = [round(math.sin(i * 0.001) * 0.5 + 0.5, 6) for i in range(3 * 224 * 224)]
print(json.dumps({"inputs": [{"name": "input__0", "datatype": "FP32", "shape": [1, 3, 224, 224],
                              "data": data}]}))
EOF

phase "starting packrat-agent in the image (${agent_args[*]})"
for try in 1 2 3; do  # the memfd failure of in_image's comment, tried again the same way
  buildah run --isolation=chroot --volume "$share:/check" \
    --volume "$profiles:/var/lib/packrat/profiles" "$ctr" -- \
    /opt/packrat/bin/packrat-agent "${agent_args[@]}" >"$work/image-agent.log" 2>&1 &
  image_agent_pid=$!
  wait_ports "$share/ports.json" "$image_agent_pid" && break
  if ((try == 3)) || ! grep -q 'sealing memfd' "$work/image-agent.log"; then
    tail -20 "$work/image-agent.log" >&2
    fail "the agent in the image did not start (log above)"
  fi
  note "buildah run failed before running packrat-agent (sealing its memfd copy, try $try of 3)"
done
[[ $(curl -s -o /dev/null -w '%{http_code}' "127.0.0.1:$http/v2/health/live") == 200 ]] ||
  fail "/v2/health/live is not 200"
wait_ready "$http" "$image_agent_pid" "$work/image-agent.log"
phase "live and ready on 127.0.0.1:$http"
curl -sf "127.0.0.1:$http/v2/models/demo" >"$work/metadata.json" || fail "GET /v2/models/demo failed"
jq -e '.name == "demo" and .platform == "pytorch_torchscript" and .inputs[0].name == "input__0"
       and .inputs[0].shape == [-1, 3, 224, 224] and .outputs[0].shape == [-1, 1000]' \
   "$work/metadata.json" >/dev/null || fail "unexpected model metadata: $(cat "$work/metadata.json")"
curl -sf "127.0.0.1:$http/v2/models/demo/infer" --data-binary "@$work/request.json" \
  -o "$work/image-response.json" || fail "the inference in the image failed"
curl -sf "127.0.0.1:$metrics/metrics" -o "$work/metrics.txt" || fail "GET /metrics failed"
grep -q '^packrat_' "$work/metrics.txt" || fail "/metrics has no packrat_ series"
phase "metadata, inference and /metrics ($(grep -c '^packrat_' "$work/metrics.txt") packrat_ samples) answer"

# --- the sidecar's image in front of that agent --------------------------------------------------
fctr=$(buildah from --pull=never --name "packrat-check-forward-$$" "$forward_tag")
phase "starting packrat-forward in $forward_tag (upstream tcp:127.0.0.1:$http)"
for try in 1 2 3; do  # the memfd failure of in_image's comment, tried again the same way
  buildah run --isolation=chroot --volume "$share:/check" "$fctr" -- \
    /opt/packrat/bin/packrat-forward --listen 127.0.0.1:0 --upstream "tcp:127.0.0.1:$http" \
    --port-file /check/forward.json --shutdown-timeout-s 5 >"$work/forward.log" 2>&1 &
  forward_pid=$!
  deadline=$((SECONDS + 30))
  until [[ -s $share/forward.json ]] || ! kill -0 "$forward_pid" 2>/dev/null || ((SECONDS > deadline)); do
    sleep 0.2
  done
  [[ -s $share/forward.json ]] && break
  if ((try == 3)) || ! grep -q 'sealing memfd' "$work/forward.log"; then
    tail -20 "$work/forward.log" >&2
    fail "packrat-forward in $forward_tag did not start (log above)"
  fi
  note "buildah run failed before running packrat-forward (sealing its memfd copy, try $try of 3)"
done
fport=$(jq -r .listen "$share/forward.json")
[[ $(curl -s -o /dev/null -w '%{http_code}' "127.0.0.1:$fport/v2/health/ready") == 200 ]] ||
  fail "/v2/health/ready through packrat-forward is not 200"
curl -sf "127.0.0.1:$fport/v2/models/demo/infer" --data-binary "@$work/request.json" \
  -o "$work/forward-response.json" || fail "the inference through packrat-forward failed"
jq -e --slurpfile a "$work/image-response.json" '.outputs == $a[0].outputs' \
  "$work/forward-response.json" >/dev/null || fail "the answer through packrat-forward differs"
# The sidecar's readiness probe (deploy/example/app-with-sidecar.yaml) runs in its own image.
fmnt=$(buildah mount "$fctr")
[[ -x $fmnt/usr/bin/curl && ! -e $fmnt/bin/sh && ! -e $fmnt/usr/bin/apt-get ]] ||
  fail "$forward_tag should hold curl and no shell or package manager"
rc=0
buildah run --isolation=chroot "$fctr" -- curl -sfo /dev/null --max-time 2 \
  "http://127.0.0.1:$fport/v2/health/ready" || rc=$?
((rc == 0)) || fail "the sidecar's probe command in $forward_tag exited $rc"
kill -TERM "$(forward_of "$forward_pid")"
rc=0
wait "$forward_pid" || rc=$?
forward_pid=""
((rc == 0)) || { tail -20 "$work/forward.log" >&2; fail "packrat-forward exited $rc on SIGTERM (log above)"; }
phase "packrat-forward in $forward_tag: readiness, inference and its probe answer; SIGTERM: exit 0"
agent_pid=$(agent_of "$image_agent_pid")
stop_agent "$agent_pid" "$image_agent_pid" "$work/image-agent.log"
image_agent_pid=""
leftover=$(find /dev/shm -maxdepth 1 -name "packrat.$agent_pid.*")
[[ -z $leftover ]] || fail "shared memory left after the agent stopped: $leftover"

# --- the same request to the build tree's agent ------------------------------------------------
# The image's model files (so the same bytes) and, with --auto, the profile the agent in the
# image measured (same file, same machine: no second profiling).
mkdir "$work/models"
cp "$mnt"/opt/packrat/models/*.pt "$work/models/"
variant "$mnt/etc/packrat/packrat.yaml" "$work/host.yaml" host "$work/models"
phase "starting build/bin/packrat-agent with the same config and model file"
"$host_agent" --config "$work/host.yaml" --port-file "$work/host-ports.json" >"$work/host-agent.log" 2>&1 &
host_agent_pid=$!
wait_ports "$work/host-ports.json" "$host_agent_pid" ||
  { tail -20 "$work/host-agent.log" >&2; fail "build/bin/packrat-agent did not start (log above)"; }
wait_ready "$http" "$host_agent_pid" "$work/host-agent.log"
curl -sf "127.0.0.1:$http/v2/models/demo/infer" --data-binary "@$work/request.json" \
  -o "$work/host-response.json" || fail "the inference on build/bin/packrat-agent failed"
stop_agent "$host_agent_pid" "$host_agent_pid" "$work/host-agent.log"
host_agent_pid=""
python3 - "$work/image-response.json" "$work/host-response.json" <<'EOF' ||
import json, sys
image, host = (json.load(open(p))["outputs"] for p in sys.argv[1:3])
assert len(image) == len(host) == 1, (len(image), len(host))
a, b = image[0], host[0]
for key in ("name", "datatype", "shape"):
    assert a[key] == b[key], f"{key}: {a[key]} vs {b[key]}"
assert a["shape"] == [1, 1000], a["shape"]
diff = max(abs(x - y) for x, y in zip(a["data"], b["data"]))
scale = max(abs(y) for y in b["data"])
print(f"check_image:   output {a['name']} {a['shape']}: largest difference {diff:.3g}"
      f" (values up to {scale:.3g})")
assert diff <= 1e-5 * max(1.0, scale), "the outputs differ"
EOF
  fail "the image's answer differs from build/bin/packrat-agent's"

phase "OK: $tag ($(numfmt --to=si --round=nearest --suffix=B "$size")) and $forward_tag ($(numfmt --to=si --round=nearest --suffix=B "$forward_size")), checked in $((SECONDS - t0)) s$( ((keep)) && echo " (kept)" || true)"
