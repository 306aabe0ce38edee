#!/bin/bash
# The peers benchmark (bench/run) and the real side of bench/virtual on a borrowed many-core
# machine that has PyTorch from pip but none of Debian's packages and no network: the 16-core
# device machines of our workplace (Ubuntu 24.04 and GCC 13 on the one of 2026-11-27).
#
#   bench/device.sh bundle       here: packs the Debian headers and libraries the build needs
#                                (Boost, yaml-cpp, simdjson, GoogleTest; gRPC, Abseil, protobuf
#                                with protoc, Prometheus, civetweb, libcgroup, CLI11, re2,
#                                c-ares, OpenSSL: whole packages) and Flask for the Python peer
#                                into .device/deps.tar.xz (19 MB); carry .device
#   bench/device.sh session S [bench/run arguments]
#                                there: builds against pip's libtorch (once), generates the
#                                models the arguments name, starts bench/run in its own session
#                                (once; with --resume and the results of an earlier machine from
#                                .device/results.tar.xz), waits for it until S seconds after
#                                this script started, then leaves results.tar.xz and the log in
#                                $OUT. The same call again waits on the same run, so a run may
#                                outlast one command (a ResNet-50 profile at T = 16: 10 min).
#
#   bench/device.sh robust-bundle [BASE_BIN]
#                                here: packs build/bin's packrat-agent, packrat-emulated-runtime,
#                                packrat and loadgen (and BASE_BIN's agent and emulated runtime,
#                                bench/robust's peer `base`) with the shared libraries they load
#                                beyond glibc into .device/robust.tar.xz; carry .device
#   bench/device.sh robust S [bench/robust arguments]
#                                there: those binaries (no build, no libtorch: the runtimes are
#                                emulated) run bench/robust on all its cores in its own session
#                                until S seconds after this script started (the same call
#                                again waits on the same run); leaves robust.tar.xz (its
#                                results.json under robust-data/DRAW), its log and lscpu in $OUT.
#                                Here, unpack robust-data/DRAW into bench/data/robust/ and
#                                `bench/robust --judge-only` with the same arguments renders it.
#
#   bench/device.sh partition S [bench/partition_robust arguments]
#                                there: as robust, for bench/partition_robust (its results
#                                under the ignored bench/results/partition-data/DRAW); leaves
#                                partition.tar.xz (results.json and the joint partition's
#                                decision traces), its log and lscpu in $OUT. Here, unpack it
#                                and `bench/partition_robust --judge-only --data DIR` renders it.
#
#   bench/device.sh virtual S [bench/virtual arguments]
#                                there: as session, but runs `bench/virtual --real --no-docs`
#                                (real runtimes on its cores, each model's profile measured
#                                first) on all its cores with --profile-dir and --data under
#                                bench/results/virtual-device; leaves virtual-device.tar.xz
#                                (profiles, results.json, the probes' CSVs and logs) and lscpu
#                                in $OUT. Here, `bench/virtual --profile-dir` on those profiles
#                                is the run's emulated twin.
#
# Then here: unpack results.tar.xz into bench/results/ and
# `bench/run --render-only --tag TAG --models ...` writes the docs section and plots.
# Nothing built there comes back; the models are generated there with its torch.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEPS=/opt/packrat-deps
# The bundle's shared libraries (gRPC, Abseil, protobuf, Prometheus, libcgroup): for protoc
# during the build and for every Packrat binary after it.
export LD_LIBRARY_PATH=$DEPS/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LIBRARY_PATH=$DEPS/usr/lib/x86_64-linux-gnu  # for -lre2 in gRPC's link interface
mode=${1:?usage: bench/device.sh bundle | session SECONDS [bench/run arguments]}
shift

if [[ $mode == bundle ]]; then
  mkdir -p "$ROOT/.device"
  lib=usr/lib/x86_64-linux-gnu
  py=usr/lib/python3/dist-packages
  # Whole packages (their files, not static libraries or docs) for gRPC, Prometheus, libcgroup
  # and CLI11, with the shared libraries they load: the device's distribution has none of them.
  # Links are stored as the files they name; /lib is stored as usr/lib (Debian's merged /usr).
  packages="libgrpc++-dev libgrpc-dev libgrpc++1.51 libgrpc29 libprotobuf-dev libprotobuf32
    libprotobuf-lite32 libprotoc32 protobuf-compiler protobuf-compiler-grpc libabsl-dev
    libabsl20220623 prometheus-cpp-dev libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0
    libprometheus-cpp-push1.0 libcivetweb-dev libcivetweb1 civetweb libcgroup-dev libcgroup2
    libcli11-dev libre2-dev libre2-9 libc-ares-dev libc-ares2 libssl-dev libssl3 zlib1g-dev"
  # shellcheck disable=SC2086
  dpkg -L $packages | sort -u | while read -r f; do
    [[ -f $f && ! $f =~ ^/usr/share/(doc|man|lintian)/ && $f != *.a ]] && echo "${f#/}"
  done > "$ROOT/.device/files"
  (cd / && tar -chJf "$ROOT/.device/deps.tar.xz" --transform 's,^lib/,usr/lib/,' \
     -T "$ROOT/.device/files" usr/include/boost usr/include/yaml-cpp \
     usr/include/simdjson.h usr/include/gtest usr/include/gmock $lib/libyaml-cpp.so* \
     $lib/libsimdjson.so* $lib/libgtest*.a $lib/libgmock*.a $lib/cmake/Boost-1.74.0 \
     $lib/cmake/boost_headers-1.74.0 $lib/cmake/BoostDetectToolset-1.74.0.cmake \
     $lib/cmake/yaml-cpp $lib/cmake/simdjson $lib/cmake/GTest \
     $py/flask $py/werkzeug $py/itsdangerous $py/[Ff]lask-*info $py/[Ww]erkzeug-*info \
     $py/itsdangerous-*info)
  ls -l "$ROOT/.device/deps.tar.xz"
  exit 0
fi
if [[ $mode == robust-bundle ]]; then
  stage=$(mktemp -d)
  mkdir -p "$stage/bin" "$stage/lib" "$ROOT/.device"
  cp "$ROOT"/build/bin/{packrat-agent,packrat-emulated-runtime,packrat,loadgen} "$stage/bin/"
  if [[ -n ${1:-} ]]; then
    mkdir -p "$stage/bin-base"
    cp "$1"/{packrat-agent,packrat-emulated-runtime} "$stage/bin-base/"
  fi
  # Every library they load but glibc's own (the device has a newer glibc and libstdc++).
  ldd "$stage"/bin*/* | awk '$3 ~ /^\// {print $3}' | sort -u |
    grep -vE '/(libc|libm|libpthread|libdl|librt|libgcc_s|libstdc\+\+|ld-linux-x86-64)\.so' |
    xargs -I{} cp -L {} "$stage/lib/"
  tar -C "$stage" -cJf "$ROOT/.device/robust.tar.xz" .
  rm -rf "$stage"
  ls -l "$ROOT/.device/robust.tar.xz"
  exit 0
fi
if [[ $mode == robust || $mode == partition ]]; then
  seconds=${1:?seconds}
  shift
  OUT=${OUT:-/tmp/packrat-device-out}
  mkdir -p "$OUT" "$ROOT/.device/robust"
  cd "$ROOT"
  [[ -x .device/robust/bin/packrat-agent ]] || tar -C .device/robust -xJf .device/robust.tar.xz
  mkdir -p build/bin
  for f in .device/robust/bin/*; do  # not over running ones (a second call)
    [[ -e build/bin/${f##*/} ]] || cp "$f" build/bin/
  done
  export LD_LIBRARY_PATH=$ROOT/.device/robust/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  lscpu > "$OUT/lscpu.txt" 2>&1 || true
  mkdir -p bench/results
fi
if [[ $mode == partition ]]; then
  if ! pgrep -f "$ROOT/bench/partition_robust" > /dev/null; then
    PYTHONUNBUFFERED=1 setsid python3 "$ROOT/bench/partition_robust" \
      --data bench/results/partition-data "$@" > bench/results/partition.log 2>&1 < /dev/null &
  fi
  while pgrep -f "$ROOT/bench/partition_robust" > /dev/null && ((SECONDS < seconds)); do
    sleep 5
  done
  pgrep -f "$ROOT/bench/partition_robust" > /dev/null && echo "== still running" ||
    echo "== finished"
  (cd bench/results && find partition-data partition_robust -name results.json -o \
     -name joint-partition.jsonl -o -name base-partition.jsonl 2>/dev/null |
     tar -cJf "$OUT/partition.tar.xz" -T -) || true
  cp bench/results/partition.log "$OUT/"
  tail -n 30 bench/results/partition.log
  exit 0
fi
if [[ $mode == robust ]]; then
  if ! pgrep -f "$ROOT/bench/robust" > /dev/null; then
    # Results in an ignored folder: each call lays the tracked files anew, an ignored one stays.
    PYTHONUNBUFFERED=1 setsid python3 "$ROOT/bench/robust" --data bench/results/robust-data \
      "$@" > bench/results/robust.log 2>&1 < /dev/null &
  fi
  while pgrep -f "$ROOT/bench/robust" > /dev/null && ((SECONDS < seconds)); do sleep 5; done
  pgrep -f "$ROOT/bench/robust" > /dev/null && echo "== still running" || echo "== finished"
  tar -C bench/results -cJf "$OUT/robust.tar.xz" robust-data 2>/dev/null || true
  cp bench/results/robust.log "$OUT/"
  tail -n 30 bench/results/robust.log
  exit 0
fi
[[ $mode == session || $mode == virtual ]] || { echo "unknown mode $mode" >&2; exit 2; }
seconds=${1:?seconds}
shift
OUT=${OUT:-/tmp/packrat-device-out}
mkdir -p "$OUT"
PY=${PACKRAT_PYTHON:-$(command -v python3)}
tag=$(printf '%s\n' "$@" | sed -n '/^--tag$/{n;p}')
models=$(printf '%s\n' "$@" | sed -n '/^--\(models\|profiles\)$/{n;p}')
[[ -n $models ]] || { echo "name the models: --models resnet50,..." >&2; exit 2; }
[[ -f .device/deps.tar.xz || -x build/bin/packrat-runtime ]] ||
  { echo "no .device/deps.tar.xz: run bench/device.sh bundle here and carry .device" >&2; exit 2; }
results="$ROOT/bench/results/peers${tag:+-$tag}"
log="$ROOT/bench/results/device.log"
cd "$ROOT"

if [[ ! -x build/bin/packrat-agent ]]; then
  echo "== $(nproc) cpus; $(grep -m1 'model name' /proc/cpuinfo)"
  mkdir -p $DEPS && tar -C $DEPS -xJf .device/deps.tar.xz
  torch=$($PY -c 'import os, torch; print(os.path.dirname(torch.__file__))')
  abi=$($PY -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')
  [[ $abi == 1 ]] || { echo "this torch uses the pre-C++11 string ABI: not supported" >&2; exit 1; }
  echo "== torch $($PY -c 'import torch; print(torch.__version__)') at $torch; $(c++ --version | head -1)"
  mkdir -p build
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=$DEPS/usr \
    -DCMAKE_POLICY_VERSION_MINIMUM=3.5 -DPACKRAT_TORCH_ROOT="$torch" -DPACKRAT_WERROR=OFF \
    > build/configure.log 2>&1 || { tail -40 build/configure.log; exit 1; }
  if ! cmake --build build -j "$(nproc)" --target packrat-agent packrat-runtime packrat \
       loadgen batch_latency generate_load -- -k 0 > build/build.log 2>&1; then
    grep -B2 -A12 -E "error|FAILED" build/build.log | head -200
    cp build/build.log "$OUT/"
    exit 1
  fi
fi
for m in ${models//,/ }; do
  [[ -f models/$m.pt ]] && continue
  $PY scripts/make_models.py --out models --bench --only "$(sed 's/,/.pt,/g; s/$/.pt/' <<< "$models")"
  break
done

if [[ $mode == virtual ]]; then
  work=bench/results/virtual-device
  lscpu > "$OUT/lscpu.txt" 2>&1 || true
  if ! pgrep -f "bench/virtual --real" > /dev/null; then
    mkdir -p $work
    PYTHONPATH=$DEPS/usr/lib/python3/dist-packages PACKRAT_PYTHON=$PY PYTHONUNBUFFERED=1 \
      setsid "$PY" bench/virtual --real --no-docs --resume --profile-dir $work/profiles \
      --data $work --threads "$(nproc)" "$@" >> $work/log 2>&1 < /dev/null &
  fi
  while pgrep -f "bench/virtual --real" > /dev/null && ((SECONDS < seconds)); do sleep 5; done
  pgrep -f "bench/virtual --real" > /dev/null && echo "== still running" || echo "== finished"
  tar -C bench/results -cJf "$OUT/virtual-device.tar.xz" virtual-device virtual 2>/dev/null || true
  tail -n 40 $work/log
  exit 0
fi

if [[ -f .device/results.tar.xz && ! -d $results ]]; then
  tar -C bench/results -xJf .device/results.tar.xz  # an earlier machine's results: resumed
fi
if ! pgrep -f "bench/run .*--no-setup" > /dev/null; then
  mkdir -p bench/results
  PYTHONPATH=$DEPS/usr/lib/python3/dist-packages PACKRAT_PYTHON=$PY \
    PACKRAT_BENCH_COMMAND="bench/device.sh session $seconds" PYTHONUNBUFFERED=1 \
    setsid "$PY" bench/run --no-setup --no-docs --resume "$@" >> "$log" 2>&1 < /dev/null &
fi
end=$seconds  # from the start of this script
while pgrep -f "bench/run .*--no-setup" > /dev/null && ((SECONDS < end)); do sleep 5; done
pgrep -f "bench/run .*--no-setup" > /dev/null && echo "== still running" || echo "== finished"
[[ -d $results ]] && tar -C bench/results -cJf "$OUT/results.tar.xz" "$(basename "$results")"
cp "$log" "$OUT/device.log"
tail -n 60 "$log"
