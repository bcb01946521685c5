#!/usr/bin/env bash
# Hardware counters (Nsight Compute) of the packed GEMVs from the kernels-only binary (bench/gemv_kernels, built by
# bench/gpu-gemv-kernels.sh or bench/build-gemv-kernels.sh first): for each format and batch in GEMV_NCU_CASES
# (default int4-g128:1 int4-g128:8 dense:1; the batch after the last colon), the four Llama-3.1-8B shapes of layer 0 in their first (eager)
# launch: duration, DRAM and SM throughput, issue-slot use, warps, the top stall reasons (raw CSV + a table), and
# the SASS lines with the most stall samples of one gate+up GEMV (GEMV_NCU_SASS_CASE, default int4-g128:1).
#   bench/gpu-profile-gemv.sh [OUTDIR]
# ncu runs with --clock-control none (the device notes: leave the clocks alone) and flushes the caches before each
# kernel (its default), so each GEMV streams its weight from memory, but without its neighbours in the graph (no
# programmatic-launch overlap): its duration is the GEMV alone, cold.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$here/build-kernels/results}"
mkdir -p "$out"
bin="${GEMV_BIN:-$here/build-kernels/gemv_kernels}"
status=0


for c in ${GEMV_NCU_CASES:-int4-g128:1 int4-g128:8 dense:1}; do
  f="${c%:*}"; b="${c##*:}"; name="$(echo "$f-b$b" | tr -c 'a-zA-Z0-9\n-' _)"
  regex="ringGemvKernel|packedGemvKernel"; [ "$f" = dense ] && regex="gemv|gemm"
  echo; echo "== [${SECONDS}s] ncu: $f batch $b, layer 0 (qkv, o, gate+up, down)"
  timeout 150 ncu --clock-control none --kernel-name-base demangled --kernel-name "regex:$regex" --launch-count 4 \
    --metrics dram__bytes_read.sum,dram__bytes_write.sum \
    --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats --section SchedulerStats \
    --section MemoryWorkloadAnalysis --page raw --csv "$bin" bench --batch "$b" --runs 1 --formats "$f" \
    >"$out/ncu-$name.csv" 2>"$out/ncu-$name.err" || { status=1; tail -5 "$out/ncu-$name.err"; }
  python3 "$here/scripts/ncu_table.py" "$out/ncu-$name.csv" || status=1
done

if [ "${GEMV_NCU_SASS:-1}" = 1 ]; then
  c="${GEMV_NCU_SASS_CASE:-int4-g128:1}"; f="${c%:*}"; b="${c##*:}"; name="$(echo "$f-b$b" | tr -c 'a-zA-Z0-9\n-' _)"
  echo; echo "== [${SECONDS}s] ncu: SASS lines of the $f batch-$b gate+up GEMV (stall samples)"
  # The third packed GEMV of the step is layer 0's gate+up, ring kernel or lane-per-row FFMA kernel alike.
  timeout 150 ncu --clock-control none --kernel-name-base demangled --kernel-name "regex:ringGemvKernel|packedGemvKernel" --launch-skip 2 \
    --launch-count 1 --section SourceCounters --section WarpStateStats -f -o "$out/ncu-$name-gateup" "$bin" bench \
    --batch "$b" --runs 1 --formats "$f" >"$out/ncu-$name-gateup.log" 2>&1 \
    && ncu --import "$out/ncu-$name-gateup.ncu-rep" --page source --print-source sass --csv >"$out/ncu-$name-gateup-sass.csv" 2>>"$out/ncu-$name-gateup.log" \
    || { status=1; tail -5 "$out/ncu-$name-gateup.log"; }
  python3 "$here/scripts/ncu_sass.py" "$out/ncu-$name-gateup-sass.csv" || status=1
fi
exit $status
