#!/usr/bin/env bash
# The decode checks on a CUDA machine (no Qt needed): builds against the LibTorch of the installed PyTorch, runs
# the decode-op and decode-runtime tests on the GPU (graph vs eager vs generate on ref-small, every compressed
# format's kernels vs its CPU references), then `pareto-cli bench decode` on a synthetic Llama-3.1-8B in each
# format (batch 1 and 8, context 512 and 4096, 256 new tokens).
#   scripts/gpu-decode.sh [OUTDIR]
# PARETO_SHARED, PARETO_DEPS_PREFIX, PARETO_CMAKE_ARGS: see scripts/gpu-common.sh. PARETO_DECODE_BENCH=0 skips
# every benchmark (tests only). PARETO_DECODE_TESTS=0 skips
# the tests, PARETO_DECODE_FORMATS / _CONTEXTS / _BATCHES change the benchmark grid, PARETO_DECODE_BREAKDOWN=0 and
# PARETO_DECODE_EAGER=0 skip the per-part timing and the run without the graph, PARETO_DECODE_PDL_AB=0 the batch-1
# run with PARETO_PDL=0, PARETO_DECODE_KERNELS=0 `bench kernels` (batches PARETO_KERNEL_BATCHES, default 1,8),
# PARETO_DECODE_SAMPLING=0 the run that samples (temperature/top-k/top-p) instead of taking the argmax,
# PARETO_DECODE_FUSION_AB=0 the batch-1 run and breakdown with the small ops unfused (PARETO_DECODE_FUSED=0),
# PARETO_DECODE_FUSION_BATCHES (default 1) the batches of the runs without one fusion each,
# PARETO_DECODE_AB_ENV adds batch-1 and batch-8 runs under other settings: sides separated by ';', each a
# space-separated list of VAR=VALUE (e.g. "PARETO_RING_GROUP_WARPS=0;PARETO_ATTENTION_EARLY_TILE=1", kernels/KernelSwitches.h),
# PARETO_DECODE_AB_FORMATS (default the benchmark's formats) their formats, PARETO_DECODE_AB_CONTEXTS (default 512) their contexts (a side that begins with "contexts=512,4096 " its own), PARETO_DECODE_AB_BREAKDOWN=1 adds each side's --breakdown (dense and int4, batch 1, context 512),
# PARETO_DECODE_TEST_ENV (VAR=VALUE ...) runs the CUDA tests a second time under those settings,
# PARETO_DECODE_HEAD_AB=0 the batch-1 runs and breakdown with a packed output head (int8-channel, int4-g128).
# The benchmarks run before the tests, so that a call cut short by its time limit still brings back numbers.
source "$(dirname "${BASH_SOURCE[0]}")/gpu-common.sh"
gpu_build pareto-cli test_decode test_decode_ops test_packed_gemv

if [ "${PARETO_DECODE_BENCH:-1}" = 1 ]; then
formats="${PARETO_DECODE_FORMATS:-dense,bitmask-2:4,int4-g128,spqr-3bit,bitmask-2:4+int4-g128}"
step "bench decode: synthetic llama-3.1-8b ($formats)"
"$cli" --no-record bench decode --synthetic llama-3.1-8b --format "$formats" \
  --context "${PARETO_DECODE_CONTEXTS:-512,4096}" --batch "${PARETO_DECODE_BATCHES:-1,8}" --new-tokens 256 --runs 5 \
  --output "$out/bench-decode.json" 2>"$out/bench-decode.err" | tee "$out/bench-decode.txt" || { status=1; tail -20 "$out/bench-decode.err"; }
if [ "${PARETO_DECODE_BREAKDOWN:-1}" = 1 ]; then
  step "bench decode --breakdown: each part of the step alone (batch 1, context 512)"
  "$cli" --no-record bench decode --synthetic llama-3.1-8b --format dense,int4-g128 --context 512 --batch 1 \
    --new-tokens 128 --runs 3 --breakdown --output "$out/bench-decode-breakdown.json" 2>>"$out/bench-decode.err" \
    | tail -6
fi
if [ "${PARETO_DECODE_FUSION_AB:-1}" = 1 ]; then
  step "bench decode with the small ops unfused (PARETO_DECODE_FUSED=0: RoPE, attention, merge; argmax and inputs; norms, SiLU·mul and residual adds beside the packed GEMVs)"
  PARETO_DECODE_FUSED=0 "$cli" --no-record bench decode --synthetic llama-3.1-8b --format "$formats" --context 512 \
    --batch 1 --new-tokens 256 --runs 5 --output "$out/bench-decode-unfused.json" 2>>"$out/bench-decode.err" \
    | tee "$out/bench-decode-unfused.txt" | tail -8
  PARETO_DECODE_FUSED=0 "$cli" --no-record bench decode --synthetic llama-3.1-8b --format dense,int4-g128 \
    --context 512 --batch 1 --new-tokens 128 --runs 3 --breakdown --output "$out/bench-decode-breakdown-unfused.json" \
    2>>"$out/bench-decode.err" | tail -6
  # Each fusion alone against all of them: the step without it (PARETO_DECODE_FUSED keeps the named ones).
  for without in attention next-token folds; do
    keep=$(echo attention next-token folds | tr ' ' '\n' | grep -v "^$without\$" | paste -sd, -)
    step "bench decode without the $without fusion (PARETO_DECODE_FUSED=$keep)"
    PARETO_DECODE_FUSED=$keep "$cli" --no-record bench decode --synthetic llama-3.1-8b --format "$formats" \
      --context 512 --batch "${PARETO_DECODE_FUSION_BATCHES:-1}" --new-tokens 256 --runs 5 --output "$out/bench-decode-without-$without.json" \
      2>>"$out/bench-decode.err" | tail -6
  done
fi
if [ "${PARETO_DECODE_HEAD_AB:-1}" = 1 ]; then
  for head in int8-channel int4-g128; do
    step "bench decode with a packed output head ($head; batch 1, context 512)"
    "$cli" --no-record bench decode --synthetic llama-3.1-8b --format dense,int4-g128,bitmask-2:4+int4-g128 \
      --head-format "$head" --context 512 --batch 1 --new-tokens 256 --runs 5 --breakdown \
      --output "$out/bench-decode-head-$head.json" 2>>"$out/bench-decode.err" | tee "$out/bench-decode-head-$head.txt" | tail -8
  done
fi
if [ -n "${PARETO_DECODE_AB_ENV:-}" ]; then
  IFS=';' read -ra sides <<<"$PARETO_DECODE_AB_ENV"
  n=0
  for side in "${sides[@]}"; do
    n=$((n + 1))
    contexts="${PARETO_DECODE_AB_CONTEXTS:-512}"
    if [[ "$side" == contexts=* ]]; then  # "contexts=512,4096 VAR=VALUE ...": this side's own contexts
      contexts="${side%% *}"; contexts="${contexts#contexts=}"; side="${side#* }"
    fi
    step "bench decode under $side (batch 1 and 8, context $contexts)"
    # shellcheck disable=SC2086  # a side is a list of settings
    env $side "$cli" --no-record bench decode --synthetic llama-3.1-8b --format "${PARETO_DECODE_AB_FORMATS:-$formats}" \
      --context "$contexts" --batch 1,8 --new-tokens 256 --runs 5 --output "$out/bench-decode-ab-$n.json" \
      2>>"$out/bench-decode.err" | tee "$out/bench-decode-ab-$n.txt" | tail -12
    if [ "${PARETO_DECODE_AB_BREAKDOWN:-0}" = 1 ]; then
      # shellcheck disable=SC2086
      env $side "$cli" --no-record bench decode --synthetic llama-3.1-8b --format dense,int4-g128 --context 512 \
        --batch 1 --new-tokens 128 --runs 3 --breakdown --output "$out/bench-decode-ab-$n-breakdown.json" \
        2>>"$out/bench-decode.err" | tail -6
    fi
  done
fi
if [ "${PARETO_DECODE_EAGER:-1}" = 1 ]; then
  step "bench decode: dense without the CUDA graph (launch overhead)"
  "$cli" --no-record bench decode --synthetic llama-3.1-8b --format dense --context 512 --batch 1 --new-tokens 64 \
    --runs 3 --eager --output "$out/bench-decode-eager.json" 2>>"$out/bench-decode.err" | tail -3
fi
if [ "${PARETO_DECODE_SAMPLING:-1}" = 1 ]; then
  step "bench decode with sampling on the device (temperature 0.8, top-k 50, top-p 0.95; batch 1, context 512)"
  "$cli" --no-record bench decode --synthetic llama-3.1-8b --format dense,int4-g128 --context 512 --batch 1 \
    --new-tokens 256 --runs 5 --temperature 0.8 --top-k 50 --top-p 0.95 --output "$out/bench-decode-sampling.json" \
    2>>"$out/bench-decode.err" | tail -4
fi
if [ "${PARETO_DECODE_PDL_AB:-1}" = 1 ]; then
  step "bench decode without programmatic dependent launch (PARETO_PDL=0; batch 1, context 512)"
  PARETO_PDL=0 "$cli" --no-record bench decode --synthetic llama-3.1-8b --format "$formats" --context 512 --batch 1 \
    --new-tokens 256 --runs 5 --output "$out/bench-decode-nopdl.json" 2>>"$out/bench-decode.err" \
    | tee "$out/bench-decode-nopdl.txt" | tail -8
fi
if [ "${PARETO_DECODE_KERNELS:-1}" = 1 ]; then
  step "bench kernels (Llama-3.1-8B shapes), with and without programmatic dependent launch"
  "$cli" --no-record bench kernels --shapes llama-3.1-8b --batch "${PARETO_KERNEL_BATCHES:-1,8}" --runs 50 --per-shape \
    --output "$out/bench-kernels.json" 2>"$out/bench-kernels.err" | tee "$out/bench-kernels.txt" | tail -24
  PARETO_PDL=0 "$cli" --no-record bench kernels --shapes llama-3.1-8b --batch 1 --runs 50 \
    --output "$out/bench-kernels-nopdl.json" 2>>"$out/bench-kernels.err" | tail -12
fi
fi  # PARETO_DECODE_BENCH

if [ "${PARETO_DECODE_TESTS:-1}" = 1 ]; then
  # The CPU halves of these tests run in CI; here only the CUDA ones.
  step "decode op tests (CUDA vs CPU)"
  "$here/build-gpu/tests/core/test_decode_ops" --gtest_filter='*Cuda*' >"$out/test_decode_ops.log" 2>&1 || status=1
  summary "$out/test_decode_ops.log"
  step "decode runtime tests"
  "$here/build-gpu/tests/core/test_decode" --gtest_filter='*Cuda*' >"$out/test_decode.log" 2>&1 || status=1
  summary "$out/test_decode.log" 40
  step "packed GEMV kernel tests (small shapes)"
  PARETO_KERNEL_TEST_SMALL=${PARETO_KERNEL_TEST_SMALL:-1} "$here/build-gpu/tests/core/test_packed_gemv" \
    --gtest_filter='*Cuda*' >"$out/test_packed_gemv.log" 2>&1 || status=1
  summary "$out/test_packed_gemv.log"
  if [ -n "${PARETO_DECODE_TEST_ENV:-}" ]; then
    for t in test_decode_ops test_decode test_packed_gemv; do
      step "$t under $PARETO_DECODE_TEST_ENV"
      # shellcheck disable=SC2086
      env $PARETO_DECODE_TEST_ENV PARETO_KERNEL_TEST_SMALL=${PARETO_KERNEL_TEST_SMALL:-1} \
        "$here/build-gpu/tests/core/$t" --gtest_filter='*Cuda*' >"$out/$t-env.log" 2>&1 || status=1
      summary "$out/$t-env.log"
    done
  fi
fi

exit $status
