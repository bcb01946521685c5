#!/usr/bin/env bash
# The kernels checks on a CUDA machine (no Qt needed): builds against the LibTorch of the installed PyTorch, runs
# `pareto-cli bench kernels` at Llama-3.1-8B shapes for batch 1..16 (the record, first), the packed-GEMV kernel
# tests on the GPU, compute-sanitizer memcheck over them (small shapes) and the kernels' register/SASS summary.
#   scripts/gpu-kernels.sh [OUTDIR]
# PARETO_SHARED, PARETO_DEPS_PREFIX, PARETO_CMAKE_ARGS: see scripts/gpu-common.sh. PARETO_KERNEL_TEST_FILTER (a gtest
# filter, default all) and PARETO_KERNEL_TEST_SMALL=1 narrow the tests, PARETO_KERNEL_BATCHES (default 1,2,4,8,16)
# the benchmark; PARETO_KERNEL_AB_ENV adds a run of the benchmark under other settings for each side (sides separated
# by ';', each a space-separated list of VAR=VALUE, kernels/KernelSwitches.h), PARETO_KERNEL_TEST_ENV (VAR=VALUE ...)
# runs the kernel tests under those settings; PARETO_EXPORT_CHECK=0, PARETO_SANITIZE=0 and PARETO_SASS=0 skip the export round trip, memcheck and
# the SASS summary, PARETO_KERNEL_TEST_TIMEOUT (seconds) bounds the tests. On the H200 the build took 237-320 s,
# the benchmark ~40 s, the whole test_packed_gemv (KernelHarness, 104 tests) 64 s, and cuobjdump over the kernel
# library did not finish in 25 s: the 2026-12-02 record calls skipped the SASS summary, memcheck (run over the
# kernels-only binary instead: bench/gpu-gemv-kernels.sh) and the export check to fit one 10-minute call.
source "$(dirname "${BASH_SOURCE[0]}")/gpu-common.sh"
gpu_build pareto-cli test_packed_gemv
grep -E "registers|spill" "$out/build.log" | sort | uniq -c | sort -rn | head -12 >"$out/ptxas.txt"
cli="$here/build-gpu/app/cli/pareto-cli"


if [ "${PARETO_SASS:-1}" = 1 ]; then
step "SASS summary"
lib="$here/build-gpu/kernels/libpareto_kernels.a"
cuobjdump -res-usage "$lib" 2>/dev/null | grep -E "Function|REG" | paste - - | sed -E 's/.*Function ([^ :]*).*REG:([0-9]+).*/\2 \1/' \
  | sort -n | tail -12 >"$out/registers.txt"
cuobjdump -sass "$lib" >"$out/sass.txt" 2>/dev/null
python3 - "$out/sass.txt" <<'PY' | tee "$out/sass-summary.txt"
import re, sys
fn, counts = None, {}
for line in open(sys.argv[1]):
    m = re.search(r"Function : (\S+)", line)
    if m:
        fn = m.group(1); counts[fn] = {}
        continue
    if fn:
        for op in ("LDG.E.128", "LDG.E.64", "LDS.128", "LDS", "FLO", "FFMA", "PRMT", "SHFL", "LDL", "STL", "BRA"):
            if re.search(r"\b" + re.escape(op) + r"\b", line):
                counts[fn][op] = counts[fn].get(op, 0) + 1
                break
for fn, c in counts.items():
    if "ILi1ELN" in fn or "Li1EL" in fn:
        print(fn[:110], c)
PY
fi

step "bench kernels (Llama-3.1-8B shapes, batch 1..16)"
"$cli" --no-record bench kernels --shapes llama-3.1-8b --batch "${PARETO_KERNEL_BATCHES:-1,2,4,8,16}" --runs 50 --per-shape --output "$out/bench-kernels.json" \
  2>"$out/bench.err" | tee "$out/bench-kernels.txt" || { status=1; tail -20 "$out/bench.err"; }

if [ -n "${PARETO_KERNEL_AB_ENV:-}" ]; then
  IFS=';' read -ra sides <<<"$PARETO_KERNEL_AB_ENV"
  n=0
  for side in "${sides[@]}"; do
    n=$((n + 1))
    step "bench kernels under $side"
    # shellcheck disable=SC2086  # a side is a list of settings
    env $side "$cli" --no-record bench kernels --shapes llama-3.1-8b --batch "${PARETO_KERNEL_BATCHES:-1,2,4,8,16}" --runs 50 \
      --per-shape --output "$out/bench-kernels-ab-$n.json" 2>>"$out/bench.err" | tee "$out/bench-kernels-ab-$n.txt" \
      || { status=1; tail -20 "$out/bench.err"; }
  done
fi

step "kernel tests on CUDA${PARETO_KERNEL_TEST_ENV:+ under $PARETO_KERNEL_TEST_ENV}"
# PARETO_KERNEL_TEST_TIMEOUT (seconds, default none) bounds them, so that the record run fits one device call.
# shellcheck disable=SC2086  # a list of settings
env ${PARETO_KERNEL_TEST_ENV:-} timeout "${PARETO_KERNEL_TEST_TIMEOUT:-0}" "$here/build-gpu/tests/core/test_packed_gemv" \
  --gtest_filter="${PARETO_KERNEL_TEST_FILTER:-*}" >"$out/test_packed_gemv.log" 2>&1 || { rc=$?; status=1; echo "test exit $rc"; }
grep -E "^\[  (PASSED|FAILED|SKIPPED|     OK) |Failure|Expected|Which is|batch" "$out/test_packed_gemv.log" | head -40

if [ "${PARETO_EXPORT_CHECK:-1}" = 1 ]; then
step "export hf of an int4 ref-small, perplexity in Pareto (compressed folder) and in transformers (export)"
rm -rf "$here/build-gpu/q4" "$here/build-gpu/q4-hf"
"$cli" --no-record compress --model "$PARETO_SHARED/models/ref-small" --recipe "$here/resources/recipes/int4-g128-rtn.json" \
  --out "$here/build-gpu/q4" --device cuda --json >"$out/q4-compress.json" || status=1
"$cli" --no-record export hf --model "$here/build-gpu/q4" --out "$here/build-gpu/q4-hf" || status=1
for dt in float32 bfloat16; do
  "$cli" --no-record perplexity --model "$here/build-gpu/q4" --text "$PARETO_SHARED/data/heldout-prose.txt" \
    --max-windows 40 --device cuda --dtype $dt --json | tee "$out/q4-pareto-$dt.json" || status=1
  python3 "$here/tests/gpu/hf_perplexity.py" --model "$here/build-gpu/q4-hf" --text "$PARETO_SHARED/data/heldout-prose.txt" \
    --max-windows 40 --dtype $dt | tee "$out/q4-transformers-$dt.json" || status=1
done
fi

if [ "${PARETO_SANITIZE:-1}" = 1 ]; then
  step "compute-sanitizer memcheck over the kernel tests (small shapes)"
  PARETO_KERNEL_TEST_SMALL=1 timeout 300 compute-sanitizer --tool memcheck --leak-check no \
    "$here/build-gpu/tests/core/test_packed_gemv" --gtest_filter='PackedGemvCuda.*' >"$out/memcheck.log" 2>&1
  echo "memcheck exit $?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$out/memcheck.log" | head -5
fi
exit $status
