#!/usr/bin/env bash
# README command 2: sets up (packages, build, models) and runs every test with CTest.
#
#   scripts/test.sh            the Release build in build/
#   scripts/test.sh --asan     the same tests built with AddressSanitizer + UBSan (build-asan/)
#   scripts/test.sh --tsan     first clang's thread-safety analysis of the GUARDED_BY/REQUIRES
#                              annotations (scripts/thread_safety.sh), then the tests built with
#                              ThreadSanitizer (build-tsan/)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
source scripts/ccache_env.sh
case "${1:-}" in
  "")
    cd build ;;
  --asan|--tsan)
    flavour=${1#--}
    option=$([ "$flavour" = asan ] && echo PACKRAT_ASAN || echo PACKRAT_TSAN)
    [ "$flavour" = tsan ] && scripts/thread_safety.sh
    cmake -S . -B "build-$flavour" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -D$option=ON >/dev/null
    cmake --build "build-$flavour" -j "$(nproc)"
    # libtorch is not instrumented: its allocations look like container overflows to ASan, and
    # its OpenMP pool outlives main (leaks at exit that are not ours). Every report is fatal.
    export ASAN_OPTIONS=detect_container_overflow=0:detect_leaks=0:abort_on_error=1
    export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
    export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/scripts/tsan.supp
    cd "build-$flavour" ;;
  *) echo "usage: scripts/test.sh [--asan|--tsan]" >&2; exit 2 ;;
esac
ctest --output-on-failure --timeout 900 -j "$(nproc)"
