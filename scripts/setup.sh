#!/usr/bin/env bash
# Installs everything Packrat needs on Debian 12, builds it (Release) and generates the model
# files. Safe to re-run: packages already installed are skipped, the build is incremental and
# existing models are kept.
#
#   scripts/setup.sh [--bench]     --bench also generates the large benchmark models
set -euo pipefail
cd "$(dirname "$0")/.."

bench_models=""
[[ "${1:-}" == "--bench" ]] && bench_models="--bench"

mapfile -t packages < <(grep -v '^\s*#' scripts/packages.txt | grep -v '^\s*$')
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [[ $(id -u) -ne 0 ]] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi

# Single-thread ResNet-50 is ~10x slower with the reference BLAS: insist on OpenBLAS.
# (Read the answer whole first: `grep -q` exits at the match, and under pipefail the writer's
# SIGPIPE would read as "no match".)
blas=$(update-alternatives --query libblas.so.3-x86_64-linux-gnu 2>/dev/null || true)
if ! grep -q '^Value: .*openblas' <<<"$blas"; then
  echo "setup: warning: libblas.so.3 does not point to OpenBLAS" >&2
fi

source scripts/ccache_env.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)"

/usr/bin/python3 scripts/make_models.py --out models $bench_models
echo "setup: done (binaries in build/bin, models in models/)"
