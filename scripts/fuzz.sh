#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) into build-fuzz/ and runs each for
# SECONDS (default 60) from its seed corpus in fuzz/corpus/<target>/. New interesting inputs
# go to build-fuzz/corpus/<target>/ (the repository's seeds are not modified). A crash leaves
# its input in build-fuzz/artifacts/ and makes the script fail.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}; shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(http_request kserve_decode generate_decode config ring_message)
source scripts/ccache_env.sh
command -v clang++ >/dev/null || { echo "fuzz.sh needs clang (scripts/packages.txt)" >&2; exit 2; }
CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPACKRAT_FUZZ=ON >/dev/null
# ninja prints compiler errors on stdout: keep them, and show the end where the build fails.
if ! ninja -C build-fuzz $(printf '%s_fuzzer ' "${targets[@]}") > build-fuzz/build.log; then
  grep -E -A12 'FAILED|error:' build-fuzz/build.log | head -60 >&2
  echo "fuzz.sh: the fuzz targets did not build (build-fuzz/build.log)" >&2
  exit 1
fi
mkdir -p build-fuzz/artifacts
status=0
for t in "${targets[@]}"; do
  mkdir -p "build-fuzz/corpus/$t"
  echo "== $t: ${seconds} s"
  if ! ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
      "build-fuzz/bin/${t}_fuzzer" "build-fuzz/corpus/$t" "fuzz/corpus/$t" \
      -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=65536 -timeout=10 \
      -artifact_prefix="build-fuzz/artifacts/$t-" -print_final_stats=1 \
      > "build-fuzz/$t.log" 2>&1; then
    echo "   FAILED: see build-fuzz/$t.log and build-fuzz/artifacts/"; status=1
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb|cov:" "build-fuzz/$t.log" | tail -3 | sed 's/^/   /'
done
exit $status
