#!/usr/bin/env bash
# The foundation checks on a CUDA machine (no Qt needed): builds against the LibTorch of the installed PyTorch,
# runs the golden tests on CUDA in float32 and bfloat16, the perplexity command, and the comparison with
# transformers on small random models of every supported family.
#   scripts/gpu-check.sh [OUTDIR]
# PARETO_SHARED: the shared data (default ../shared); PARETO_DEPS_PREFIX: extra prefix for PCRE2/utf8proc;
# PARETO_CMAKE_ARGS: more configure arguments (e.g. -DPARETO_GTEST_SOURCE_DIR=...).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$here/build-gpu/results}"
mkdir -p "$out"
export PARETO_SHARED="${PARETO_SHARED:-$here/../shared}"
torch_prefix="$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')"
prefix="$torch_prefix${PARETO_DEPS_PREFIX:+;$PARETO_DEPS_PREFIX}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"

step() { echo; echo "== $*"; }
step configure+build
cmake -S "$here" -B "$here/build-gpu" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPARETO_GUI=OFF \
  -DCMAKE_PREFIX_PATH="$prefix" ${PARETO_CMAKE_ARGS:-} >"$out/configure.log" 2>&1 || { tail -40 "$out/configure.log"; exit 1; }
grep "Pareto:" "$out/configure.log"
cmake --build "$here/build-gpu" -j "$(nproc)" >"$out/build.log" 2>&1 || { grep -B2 -A12 "error" "$out/build.log" | head -80; exit 1; }
cli="$here/build-gpu/app/cli/pareto-cli"
status=0

step "ctest (CPU float32 + everything that runs on this machine)"
# Tokenizer tests need ../shared/tokenizers, which GPU runs may not carry; they are CPU-only code.
# Two threads per test: 8 tests at once on 16 cores without oversubscribing them.
(cd "$here/build-gpu" && OMP_NUM_THREADS=2 ctest --output-on-failure -j 8 ${PARETO_CTEST_ARGS:-} >"$out/ctest-cpu.log" 2>&1) || status=1
tail -5 "$out/ctest-cpu.log"

for dt in float32 bfloat16; do
  step "golden tests on CUDA, $dt"
  PARETO_TEST_DEVICE=cuda PARETO_TEST_DTYPE=$dt "$here/build-gpu/tests/core/test_golden_model" \
    >"$out/golden-cuda-$dt.log" 2>&1 || status=1
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests ran|Failure|relative" "$out/golden-cuda-$dt.log" | head -20
done

step "calibration, sequential pass and compress job on CUDA (float32)"
for t in test_calibration test_compress_job; do
  PARETO_TEST_DEVICE=cuda "$here/build-gpu/tests/core/$t" >"$out/$t-cuda.log" 2>&1 || status=1
  grep -E "^\[  (PASSED|FAILED) |Failure" "$out/$t-cuda.log" | head -10
done

step "perplexity command"
for dev in "cpu float32" "cuda float32" "cuda bfloat16" "cuda float16"; do
  set -- $dev
  echo "pareto-cli perplexity --model ref-small --text heldout-prose.txt --max-windows 40 --device $1 --dtype $2 --json"
  /usr/bin/time -f "  (%e s)" "$cli" perplexity --model "$PARETO_SHARED/models/ref-small" \
    --text "$PARETO_SHARED/data/heldout-prose.txt" --max-windows 40 --device "$1" --dtype "$2" --json || status=1
done

step "transformers comparison on random models of each family"
for dev in cpu cuda; do
  python3 "$here/tests/gpu/compare_transformers.py" --cli "$cli" --tokenizer "$PARETO_SHARED/models/ref-small" \
    --device $dev || status=1
done
step "compress on CUDA (SparseGPT 2:4, decode calibration) and evaluate"
rm -rf "$here/build-gpu/sgpt24"
"$cli" compress --model "$PARETO_SHARED/models/ref-small" --recipe "$here/resources/recipes/sparsegpt-2of4-decode.json" \
  --out "$here/build-gpu/sgpt24" --device cuda --json >"$out/compress-cuda.json" || status=1
python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print('bpw', j['linear_bits_per_weight'], 'timings', j['timings'])" "$out/compress-cuda.json"
"$cli" perplexity --model "$here/build-gpu/sgpt24" --text "$PARETO_SHARED/data/heldout-prose.txt" --max-windows 40 --device cuda --json || status=1
"$cli" fidelity --dense "$PARETO_SHARED/models/ref-small" --model "$here/build-gpu/sgpt24" \
  --prompts "$PARETO_SHARED/data/prompts-python.txt" --max-new-tokens 64 --device cuda --json || status=1

step "Hessian discrepancy study on CUDA (ref-small, both domains)"
for domain in prose python; do
  "$cli" analyze hessian --model "$PARETO_SHARED/models/ref-small" --text "$PARETO_SHARED/data/heldout-$domain.txt" \
    --prompts "$PARETO_SHARED/data/prompts-$domain.txt" --calib-tokens 8192 --max-new-tokens 256 --device cuda \
    --json >"$out/hessian-$domain-cuda.json" || status=1
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(sys.argv[2], 'fraction', j['fraction_decode_smaller'], 'median', j['median_ratio'], 'seconds', j['seconds'])" \
    "$out/hessian-$domain-cuda.json" $domain
done

step "Hessian accumulation + discrepancy at Llama-3.1-8B width 14336 on CUDA"
"$here/build-gpu/bench/bench_hessian" --device cuda --width 14336 --tokens 16384 --json "$out/bench-hessian-14336.json" || status=1
exit $status
