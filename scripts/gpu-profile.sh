#!/usr/bin/env bash
# Where the time of one decode step goes, kernel by kernel, from the hardware counters (Nsight Compute): each
# packed GEMV format at the four Llama-3.1-8B linear shapes of one layer (qkv, o, gate+up, down), and the small
# decode kernels (RoPE + cache, attention, combine, add+RMSNorm, SiLU·mul) of a synthetic Llama-3.1-8B layer.
# Per kernel: duration, DRAM and SM throughput (% of peak), issue-slot use, achieved occupancy and the warp
# stall reasons (raw CSV of the SpeedOfLight, WarpStateStats, Occupancy, LaunchStats and SchedulerStats
# sections, plus a short table).
#   scripts/gpu-profile.sh [OUTDIR]
# PARETO_PROFILE_FORMATS (default int4-g128,bitmask-2:4,bitmask-2:4+int4-g128,spqr-3bit): the GEMV formats;
# PARETO_PROFILE_SASS=0 skips the instruction-level profile of the int4 qkv GEMV (executed instructions and stall
# samples per SASS line, from the -lineinfo build).
# ncu runs with --clock-control none (the device notes: leave the clocks alone) and flushes the caches before
# each kernel (its default), so each GEMV streams its weight from memory as in a decode step.
source "$(dirname "${BASH_SOURCE[0]}")/gpu-common.sh"
gpu_build pareto-cli

profile() {  # NAME KERNEL-REGEX COUNT COMMAND...
  local name="$1" regex="$2" count="$3"; shift 3
  step "ncu: $name"
  timeout 150 ncu --clock-control none --kernel-name-base demangled --kernel-name "regex:$regex" \
    --launch-count "$count" --section SpeedOfLight --section WarpStateStats --section Occupancy \
    --section LaunchStats --section SchedulerStats --page raw --csv "$@" >"$out/ncu-$name.csv" 2>"$out/ncu-$name.err" \
    || { status=1; tail -5 "$out/ncu-$name.err"; }
  python3 "$here/scripts/ncu_table.py" "$out/ncu-$name.csv"
}

for f in $(echo "${PARETO_PROFILE_FORMATS:-int4-g128,bitmask-2:4,bitmask-2:4+int4-g128,spqr-3bit}" | tr , ' '); do
  # One layer: its four GEMVs, launched once each before the graph is captured.
  profile "gemv-$f" "packedGemvKernel|ringGemvKernel" 4 "$cli" --no-record bench kernels --shapes llama-3.1-8b --layers 1 \
    --formats "$f" --batch 1 --runs 1
done
profile decode-small "ropeCache|decodeAttention|combine|addRmsNorm|siluMul" 12 "$cli" --no-record bench decode \
  --synthetic llama-3.1-8b --format int4-g128 --layers 2 --context 512 --new-tokens 2 --runs 1 --eager
if [ "${PARETO_PROFILE_SASS:-1}" = 1 ]; then
  # Instruction by instruction for one int4 GEMV (qkv): executed count and stall samples of each SASS line, and
  # the executed instructions by opcode — where a kernel that is neither memory- nor issue-bound spends its time.
  step "ncu: SASS lines of the int4 qkv GEMV"
  timeout 120 ncu --clock-control none --kernel-name-base demangled --kernel-name regex:QuantMmaFormat --launch-count 1 \
    --section SourceCounters --section WarpStateStats -f -o "$out/ncu-int4-qkv" "$cli" --no-record bench kernels \
    --shapes llama-3.1-8b --layers 1 --formats int4-g128 --batch 1 --runs 1 >"$out/ncu-int4-qkv.log" 2>&1 \
    && ncu --import "$out/ncu-int4-qkv.ncu-rep" --page source --print-source sass --csv >"$out/ncu-int4-qkv-sass.csv" 2>>"$out/ncu-int4-qkv.log" \
    || { status=1; tail -5 "$out/ncu-int4-qkv.log"; }
  python3 "$here/scripts/ncu_sass.py" "$out/ncu-int4-qkv-sass.csv" || status=1
fi
exit $status
