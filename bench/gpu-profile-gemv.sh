#!/usr/bin/env bash
# Hardware counters (Nsight Compute) of the packed GEMVs from the kernels-only binary (bench/gemv_kernels, built by
# bench/gpu-gemv-kernels.sh or bench/build-gemv-kernels.sh first): for each format and batch in GEMV_NCU_CASES
# (default int4-g128:1 int4-g128:8 dense:1), the four Llama-3.1-8B shapes of layer 0 in their first (eager)
# launch: duration, DRAM and SM throughput, issue-slot use, warps, the top stall reasons (raw CSV + a table), and
# the SASS lines with the most stall samples of the int4 batch-1 gate+up GEMV.
#   bench/gpu-profile-gemv.sh [OUTDIR]
# ncu runs with --clock-control none (the device notes: leave the clocks alone) and flushes the caches before each
# kernel (its default), so each GEMV streams its weight from memory, but without its neighbours in the graph (no
# programmatic-launch overlap): its duration is the GEMV alone, cold.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$here/build-kernels/results}"
mkdir -p "$out"
bin="$here/build-kernels/gemv_kernels"
status=0


for c in ${GEMV_NCU_CASES:-int4-g128:1 int4-g128:8 dense:1}; do
  f="${c%%:*}"; b="${c##*:}"; name="$(echo "$f-b$b" | tr -c 'a-zA-Z0-9\n-' _)"
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
  echo; echo "== [${SECONDS}s] ncu: SASS lines of the int4 batch-1 gate+up GEMV (stall samples)"
  timeout 150 ncu --clock-control none --kernel-name-base demangled --kernel-name regex:ringGemvKernel --launch-skip 2 \
    --launch-count 1 --section SourceCounters --section WarpStateStats -f -o "$out/ncu-int4-gateup" "$bin" bench \
    --batch 1 --runs 1 --formats int4-g128 >"$out/ncu-int4-gateup.log" 2>&1 \
    && ncu --import "$out/ncu-int4-gateup.ncu-rep" --page source --print-source sass --csv >"$out/ncu-int4-gateup-sass.csv" 2>>"$out/ncu-int4-gateup.log" \
    || { status=1; tail -5 "$out/ncu-int4-gateup.log"; }
  python3 - "$out/ncu-int4-gateup-sass.csv" <<'PY'
import collections, csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if r]
starts = [i for i, r in enumerate(rows) if r[0] == "Address"]  # the first row names the kernel
if not starts: sys.exit("no SASS rows")
head, rows = rows[starts[0]], rows[starts[0]:]
def col(*words):
    for i, h in enumerate(head):
        if all(w.lower() in h.lower() for w in words): return i
    return None
src, ex, st = col("source"), col("instructions executed"), col("stall sampling", "all")
if None in (src, ex): sys.exit("no Source / Instructions Executed columns: " + str(head[:14]))
def num(r, i):
    try: return float(r[i].replace(",", "")) if i is not None else 0.0
    except ValueError: return 0.0
body = rows[1:]
total = sum(num(r, ex) for r in body) or 1
samples = sum(num(r, st) for r in body) or 1
ops = collections.Counter()
for r in body: ops[r[src].split()[0].split(".")[0] if r[src].split() else "?"] += num(r, ex)
print("executed warp instructions:", int(total), " stall samples:", int(samples))
print("by opcode:", ", ".join(f"{k} {100 * v / total:.1f}%" for k, v in ops.most_common(14)))
print("most stall samples:")
for r in sorted(body, key=lambda r: -num(r, st))[:20]:
    print(f"  {100 * num(r, st) / samples:5.1f}% {num(r, ex):9.0f} exec  {r[src][:90]}")
PY
fi
exit $status
