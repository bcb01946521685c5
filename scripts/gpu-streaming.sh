#!/usr/bin/env bash
# Streaming and memory budgets on a CUDA machine (issue 23): a Llama-3.1-8B-shaped checkpoint of random weights
# compressed with SparseGPT 2:4 (16384 WikiText-2 tokens) twice, without budgets and under --max-gpu-memory /
# --max-host-memory, the written tensors compared byte for byte; then a Llama-3.3-70B-shaped checkpoint of a few
# layers under the budgets a 70B needs on one GPU. Per-layer times come from the progress log, peaks from the
# results' "memory" (the process's peak resident memory, the CUDA caching allocator's peak).
#   scripts/gpu-streaming.sh [OUTDIR]
# PARETO_STREAM_DATA: a folder with wikitext2-test.txt and llama3/tokenizer.json (default: $PARETO_SHARED's data and
# tokenizers/llama3). PARETO_8B_LAYERS (default 32), PARETO_70B_LAYERS (12), PARETO_STREAM_WORK (scratch, /tmp).
# PARETO_BUDGET_8B and PARETO_BUDGET_70B: the budget options of each. See scripts/gpu-common.sh for the rest.
source "$(dirname "${BASH_SOURCE[0]}")/gpu-common.sh"
gpu_build pareto-cli
data="${PARETO_STREAM_DATA:-}"
text="${data:+$data/wikitext2-test.txt}"; text="${text:-$PARETO_SHARED/data/wikitext2-test.txt}"
tok="${data:+$data/llama3}"; tok="${tok:-$PARETO_SHARED/tokenizers/llama3}"
work="${PARETO_STREAM_WORK:-/tmp/pareto-stream}"
rm -rf "$work"; mkdir -p "$work"
cat >"$work/recipe.json" <<JSON
{"calibration": {"source": "text", "text": "$text", "tokens": 16384, "window": 512, "seed": 0},
 "prune": {"method": "sparsegpt", "pattern": "2:4"}}
JSON

# compress NAME MODEL SECONDS [OPTIONS...]: one run, its JSON result, its progress log, the layer times.
compress() {
  local name=$1 model=$2 limit=$3; shift 3
  step "compress $name $*"
  timeout "$limit" "$cli" compress --model "$model" --recipe "$work/recipe.json" --out "$work/$name" --device cuda \
    --batch 8 --json "$@" >"$out/$name.json" 2>"$out/$name.log" || { echo "compress $name failed"; tail -5 "$out/$name.log"; status=1; }
  grep -E "sequential pass|memory|error" "$out/$name.log" | tail -4
  python3 - "$out/$name.json" <<'PY' || true
import json, sys
r = json.load(open(sys.argv[1]))
m, t = r["memory"], r["timings"]
print(f"total {t['total_s']:.1f} s, calibration {t['calibration_s']:.1f} s, pass {t['pass_s']:.1f} s, write {t['write_s']:.1f} s; "
      f"peak host {m['peak_host_bytes']/2**30:.2f} GiB (start {m['host_base_bytes']/2**30:.2f}), "
      f"GPU {m['peak_gpu_bytes']/2**30:.2f} GiB; activations on the {m['activations']}; plan: {m['plan']}")
PY
}

step "synthesize llama-3.1-8b, ${PARETO_8B_LAYERS:-32} layers"
"$cli" synthesize --preset llama-3.1-8b --layers "${PARETO_8B_LAYERS:-32}" --tokenizer "$tok" --out "$work/8b" >"$out/synth-8b.log" 2>&1 \
  || { tail -5 "$out/synth-8b.log"; exit 1; }
tail -1 "$out/synth-8b.log"
compress 8b-free "$work/8b" "${PARETO_8B_SECONDS:-280}"
compress 8b-budget "$work/8b" "${PARETO_8B_SECONDS:-280}" ${PARETO_BUDGET_8B:---max-gpu-memory 8GiB --max-host-memory 24GiB}
step "the same tensors with and without budgets"
for f in "$work/8b-free"/*.safetensors; do
  cmp "$f" "$work/8b-budget/$(basename "$f")" && echo "identical: $(basename "$f")" || status=1
done | tee "$out/8b-compare.txt"
rm -rf "$work/8b" "$work/8b-free" "$work/8b-budget"

step "synthesize llama-3.3-70b, ${PARETO_70B_LAYERS:-12} layers"
"$cli" synthesize --preset llama-3.3-70b --layers "${PARETO_70B_LAYERS:-12}" --tokenizer "$tok" --out "$work/70b" >"$out/synth-70b.log" 2>&1 \
  || { tail -5 "$out/synth-70b.log"; exit 1; }
tail -1 "$out/synth-70b.log"
compress 70b-budget "$work/70b" "${PARETO_70B_SECONDS:-400}" ${PARETO_BUDGET_70B:---max-gpu-memory 32GiB --max-host-memory 32GiB}
rm -rf "$work"
exit $status
