#!/usr/bin/env bash
# README command 2: sets up (packages, build, models) and runs every test with CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cd build
ctest --output-on-failure --timeout 600 -j "$(nproc)"
