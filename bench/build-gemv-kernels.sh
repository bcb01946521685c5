#!/usr/bin/env bash
# Builds bench/gemv_kernels (the kernels-only test and benchmark, see bench/gemv_kernels.cu): the four packed-GEMV
# kernels, their host code and references, CUDA runtime and cuBLAS only; one nvcc per file, in parallel.
#   bench/build-gemv-kernels.sh [BUILDDIR]     (default build-kernels; the binary is BUILDDIR/gemv_kernels)
# GEMV_BUILD_JOBS: at most this many nvcc at once (default: all files together; 2 on a shared build machine).
# GEMV_TIMELINE=1: the kernels stamp every block (kernels/GemvTimeline.cuh) for `gemv_kernels timeline`; use a
# build folder of its own (the objects differ).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$here/build-kernels}"
mkdir -p "$build"
flags=(-std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -lineinfo -I"$here/kernels" -Xptxas=-v)
[ "${GEMV_TIMELINE:-0}" = 1 ] && flags+=(-DPARETO_GEMV_TIMELINE)
# ptxas's advice to use mma.sp::ordered_metadata (no faster on the H200: bench/NOTES.md v6k), where it knows the switch.
if echo '__global__ void k() {}' >"${TMPDIR:-/tmp}/pareto-ptxas-probe.cu" &&
   nvcc -Xptxas=--suppress-sparse-mma-advisory-info -c "${TMPDIR:-/tmp}/pareto-ptxas-probe.cu" \
        -o "${TMPDIR:-/tmp}/pareto-ptxas-probe.o" >/dev/null 2>&1; then
  flags+=(-Xptxas=--suppress-sparse-mma-advisory-info)
fi
pids=()
for src in kernels/quant_group_gemv.cu kernels/quant_group_gemv_folded.cu kernels/bitmask_nm_gemv.cu \
           kernels/bitmask_int4_gemv.cu kernels/bitmask_int4_gemv_folded.cu kernels/spqr_gemv.cu \
           kernels/GemvProblem.cpp kernels/GemvChecks.cpp kernels/KernelSwitches.cpp kernels/reference/GemvReference.cpp bench/gemv_kernels.cu; do
  obj="$build/$(basename "$src").o"
  # Up to date: newer than its source and every kernels header (a carried build of the unchanged files).
  if [ -f "$obj" ] && [ -z "$(find "$here/$src" "$here"/kernels/*.h "$here"/kernels/*.cuh "$here"/kernels/reference/*.h -newer "$obj" 2>/dev/null)" ]; then
    continue
  fi
  if [[ "$src" == *.cpp ]]; then
    nvcc -x cu "${flags[@]}" -c "$here/$src" -o "$obj" >"$obj.log" 2>&1 &
  else
    nvcc "${flags[@]}" -c "$here/$src" -o "$obj" >"$obj.log" 2>&1 &
  fi
  pids+=($!)
  if [ -n "${GEMV_BUILD_JOBS:-}" ]; then
    while [ "$(jobs -rp | wc -l)" -ge "$GEMV_BUILD_JOBS" ]; do wait -n || true; done
  fi
done
fail=0
for p in "${pids[@]}"; do wait "$p" || fail=1; done
if [ $fail = 1 ]; then grep -h -B2 -A6 "error" "$build"/*.log | head -60; exit 1; fi
cat "$build"/*.o.log 2>/dev/null | grep -E "registers|spill" >"$build/ptxas.txt" || true
nvcc -gencode=arch=compute_90a,code=sm_90a "$build"/*.o -o "$build/gemv_kernels" -lcublas
echo "built $build/gemv_kernels"
