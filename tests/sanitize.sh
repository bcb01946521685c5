#!/usr/bin/env bash
# Builds core, pareto-cli and the tests with AddressSanitizer + UndefinedBehaviorSanitizer
# (PARETO_SANITIZE=address,undefined) in their own folder and runs ctest there (CPU; GPU tests skip).
#
#   tests/sanitize.sh [ctest arguments...]      e.g. tests/sanitize.sh -R 'Safetensors|Tokenizer'
#
# Environment: PARETO_ASAN_BUILD_DIR (default build-asan), PARETO_JOBS (build and ctest parallelism, default 2),
# PARETO_SHARED (default ../shared). docs/reliability.md records the last clean run.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${PARETO_ASAN_BUILD_DIR:-$root/build-asan}"
jobs="${PARETO_JOBS:-2}"

if [[ ! -f "$build/CMakeCache.txt" ]]; then
  generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPARETO_GUI=OFF \
    -DPARETO_CUDA=OFF -DPARETO_SANITIZE=address,undefined >/dev/null
fi
cmake --build "$build" -j "$jobs"

export PARETO_SHARED="${PARETO_SHARED:-$root/../shared}"
# allocator_may_return_null: the out-of-memory tests ask for petabytes on purpose and expect LibTorch's error,
# not an ASan abort. LibTorch is not instrumented, so ASan sees its allocations but not its accesses.
export ASAN_OPTIONS="allocator_may_return_null=1:check_initialization_order=1:strict_init_order=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
ctest --test-dir "$build" --output-on-failure -j "$jobs" "$@"
