#!/usr/bin/env bash
# Sets Pareto up (scripts/setup.sh) and runs every test with ctest. GPU tests skip without a CUDA device;
# tests that need the reference models read them from $PARETO_SHARED (default: ../shared beside the checkout).
# Extra arguments go to setup.sh (e.g. --no-gui).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${PARETO_BUILD_DIR:-$here/build}"
"$here/scripts/setup.sh" --fuzz --llama-cpp "$@"
export PARETO_SHARED="${PARETO_SHARED:-$here/../shared}"
export QT_QPA_PLATFORM=offscreen
ctest --test-dir "$build_dir" --output-on-failure -j "${PARETO_JOBS:-$(nproc)}"
# Short fuzz runs of the file parsers (docs/reliability.md): a clang build of their few libraries in build-fuzz
# (about a minute on 2 cores), then PARETO_FUZZ_TIME seconds per target; skipped where clang is not installed,
# or with PARETO_FUZZ_TIME=0.
if [ "${PARETO_FUZZ_TIME:-20}" != 0 ]; then
  PARETO_FUZZ_TIME="${PARETO_FUZZ_TIME:-20}" "$here/tests/fuzz/run.sh" --if-available
fi
# The ASan + UBSan build of everything and its ctest (tests/sanitize.sh) is a second, instrumented full build plus a
# 3x slower test run: an estimated 20-25 more minutes on 2 cores, so it runs only when asked
# (PARETO_SANITIZE_TESTS=1); docs/reliability.md records its last clean run.
if [ "${PARETO_SANITIZE_TESTS:-0}" = 1 ]; then
  "$here/tests/sanitize.sh"
fi
