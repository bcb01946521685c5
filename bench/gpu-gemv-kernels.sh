#!/usr/bin/env bash
# One device call for the kernels-only loop: build bench/gemv_kernels (about a minute), run its correctness test
# (every kernel, batch 1-16, fp16/bf16), compute-sanitizer memcheck over the small shapes, the benchmark at
# Llama-3.1-8B shapes, and the quantized kernels again with PARETO_QUANT_MMA=0 (the v5 FFMA path) for an A/B in the
# same session (GEMV_AB_ENV, GEMV_AB_FORMATS: another A/B). Results in OUTDIR (default build-kernels/results).
#   bench/gpu-gemv-kernels.sh [OUTDIR]
# GEMV_BATCHES (default 1,2,4,8,16), GEMV_SANITIZE=0 skips memcheck, GEMV_AB=0 skips the A/B, GEMV_TEST=0 the test;
# GEMV_SANITIZE_ENV: settings (VAR=VALUE ...) memcheck runs under;
# GEMV_BIN: a binary built beforehand (no build here); GEMV_BASE_BIN: another one (an earlier version) benchmarked
# the same way in the same call.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$here/build-kernels/results}"
mkdir -p "$out"
status=0
step() { echo; echo "== [${SECONDS}s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
if [ -n "${GEMV_BIN:-}" ]; then
  bin="$GEMV_BIN"  # linked elsewhere (the device build takes ~300 s): the kernels' objects compiled for sm_90(a)
else
  step "build"
  "$here/bench/build-gemv-kernels.sh" "$here/build-kernels" >"$out/build.log" 2>&1 || { tail -60 "$out/build.log"; exit 1; }
  cp "$here/build-kernels/ptxas.txt" "$out/ptxas.txt" 2>/dev/null
  bin="$here/build-kernels/gemv_kernels"
fi
if [ "${GEMV_TEST:-1}" = 1 ]; then
  step "test"
  "$bin" test >"$out/test.log" 2>&1 || status=1
  grep -E "^FAIL|^TESTS" "$out/test.log" | head -30
fi
step "bench"
# One process a format (with cuBLAS in each, for the speedup of the same run): a sticky CUDA error in one format
# does not take the others with it.
for f in ${GEMV_FORMATS:-int4-g128 int8-channel bitmask-2:4+int4-g128 spqr-3bit bitmask-2:4}; do
  "$bin" bench --batch "${GEMV_BATCHES:-1,2,4,8,16}" --runs 50 --formats "dense,$f" \
    2>&1 | tee -a "$out/bench.txt" || status=1
done
if [ -n "${GEMV_BASE_BIN:-}" ]; then
  step "bench of the base binary ($GEMV_BASE_BIN)"
  for f in ${GEMV_FORMATS:-int4-g128 int8-channel bitmask-2:4+int4-g128 spqr-3bit bitmask-2:4}; do
    "$GEMV_BASE_BIN" bench --batch "${GEMV_BATCHES:-1,2,4,8,16}" --runs 50 --formats "dense,$f" \
      2>&1 | tee -a "$out/bench-base.txt" || status=1
  done
fi
if [ "${GEMV_AB:-1}" = 1 ]; then
  # GEMV_AB_ENV: the settings of the other side (default the quantized kernels' FFMA path), or several sides
  # separated by ';', each a space-separated list of VAR=VALUE; GEMV_AB_FORMATS the formats timed with each side,
  # one process each. GEMV_AB_TEST: the numbers of the sides (1 = the first) to run `test` under as well, e.g.
  # "1 3" (a knob's own code path checked where it is not the default); those also in GEMV_AB_SMALL_TEST run
  # `test --small` (every kernel and batch at the small shapes) instead.
  IFS=';' read -ra sides <<<"${GEMV_AB_ENV:-PARETO_QUANT_MMA=0}"
  n=0
  for side in "${sides[@]}"; do
    n=$((n + 1))
    if [[ " ${GEMV_AB_TEST:-} " == *" $n "* ]]; then
      small=""; [[ " ${GEMV_AB_SMALL_TEST:-} " == *" $n "* ]] && small="--small"
      step "test $small under $side"
      # shellcheck disable=SC2086  # a side is a list of settings
      env $side "$bin" test $small >"$out/test-ab-$n.log" 2>&1 || status=1
      grep -E "^FAIL|^TESTS" "$out/test-ab-$n.log" | head -30
    fi
    step "A/B: $side"
    echo "# side $n: $side" >>"$out/bench-ab.txt"
    for f in ${GEMV_AB_FORMATS:-int4-g128}; do
      # shellcheck disable=SC2086
      env $side "$bin" bench --batch "${GEMV_BATCHES:-1,2,4,8,16}" --runs 50 --formats "dense,$f" \
        2>&1 | tee -a "$out/bench-ab.txt" || status=1
    done
  done
fi
if [ "${GEMV_SANITIZE:-1}" = 1 ]; then
  step "compute-sanitizer memcheck (small shapes)"
  # shellcheck disable=SC2086
  env ${GEMV_SANITIZE_ENV:-} timeout ${GEMV_SANITIZE_TIMEOUT:-400} compute-sanitizer --tool memcheck --leak-check no "$bin" test --small >"$out/memcheck.log" 2>&1
  echo "memcheck exit $?"; grep -E "ERROR SUMMARY|^TESTS|^FAIL" "$out/memcheck.log" | head -8
fi
step "done"
exit $status
