#!/usr/bin/env bash
# The test command (README, CI): set up and build, then run every ctest test. GPU tests skip by
# themselves on a machine without one. Exits with ctest's status.
#   BUILD_DIR=build-asan SANITIZE=address,undefined bash scripts/test.sh   # under ASan and UBSan
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build_dir=${BUILD_DIR:-build}

bash scripts/setup.sh
echo "test: ctest --test-dir $build_dir"
status=0
ctest --test-dir "$build_dir" --output-on-failure -j2 || status=$?
exit "$status"
