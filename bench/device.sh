#!/bin/bash
# The peers benchmark (bench/run) on a borrowed many-core machine that has PyTorch from pip but
# none of Debian's packages and no network: the 16-core device machines of our workplace.
#
#   bench/device.sh bundle       here: packs the Debian headers and libraries the build needs
#                                (Boost, yaml-cpp, simdjson, GoogleTest) and Flask for the
#                                Python peer into .device/deps.tar.xz; carry .device
#   bench/device.sh session S [bench/run arguments]
#                                there: builds against pip's libtorch (once), generates the
#                                models the arguments name, starts bench/run in its own session
#                                (once; with --resume and the results of an earlier machine from
#                                .device/results.tar.xz), waits for it until S seconds after
#                                this script started, then leaves results.tar.xz and the log in
#                                $OUT. The same call again waits on the same run, so a run may
#                                outlast one command (a ResNet-50 profile at T = 16: 10 min).
#
# Then here: unpack results.tar.xz into bench/results/ and
# `bench/run --render-only --tag TAG --models ...` writes the docs section and plots.
# Nothing built there comes back; the models are generated there with its torch.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEPS=/opt/packrat-deps
mode=${1:?usage: bench/device.sh bundle | session SECONDS [bench/run arguments]}
shift

if [[ $mode == bundle ]]; then
  mkdir -p "$ROOT/.device"
  lib=usr/lib/x86_64-linux-gnu
  py=usr/lib/python3/dist-packages
  (cd / && tar -cJf "$ROOT/.device/deps.tar.xz" usr/include/boost usr/include/yaml-cpp \
     usr/include/simdjson.h usr/include/gtest usr/include/gmock $lib/libyaml-cpp.so* \
     $lib/libsimdjson.so* $lib/libgtest*.a $lib/libgmock*.a $lib/cmake/Boost-1.74.0 \
     $lib/cmake/boost_headers-1.74.0 $lib/cmake/BoostDetectToolset-1.74.0.cmake \
     $lib/cmake/yaml-cpp $lib/cmake/simdjson $lib/cmake/GTest \
     $py/flask $py/werkzeug $py/itsdangerous $py/[Ff]lask-*info $py/[Ww]erkzeug-*info \
     $py/itsdangerous-*info)
  ls -l "$ROOT/.device/deps.tar.xz"
  exit 0
fi
[[ $mode == session ]] || { echo "unknown mode $mode" >&2; exit 2; }
seconds=${1:?seconds}
shift
OUT=${OUT:-/tmp/packrat-device-out}
mkdir -p "$OUT"
PY=${PACKRAT_PYTHON:-$(command -v python3)}
tag=$(printf '%s\n' "$@" | sed -n '/^--tag$/{n;p}')
models=$(printf '%s\n' "$@" | sed -n '/^--models$/{n;p}')
[[ -n $models ]] || { echo "name the models: --models resnet50,..." >&2; exit 2; }
[[ -f .device/deps.tar.xz || -x build/bin/packrat-runtime ]] ||
  { echo "no .device/deps.tar.xz: run bench/device.sh bundle here and carry .device" >&2; exit 2; }
results="$ROOT/bench/results/peers${tag:+-$tag}"
log="$ROOT/bench/results/device.log"
cd "$ROOT"

if [[ ! -x build/bin/packrat-runtime ]]; then
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
  if ! cmake --build build -j "$(nproc)" --target packrat-agent packrat-runtime loadgen \
       batch_latency generate_load -- -k 0 > build/build.log 2>&1; then
    grep -B2 -A12 -E "error|FAILED" build/build.log | head -200
    cp build/build.log "$OUT/"
    exit 1
  fi
  $PY scripts/make_models.py --out models --bench --only "$(sed 's/,/.pt,/g; s/$/.pt/' <<< "$models")"
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
