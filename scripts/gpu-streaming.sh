#!/usr/bin/env bash
# Streaming, speed and memory budgets on a CUDA machine (issue 23), in stages that can run in separate calls on one
# warm machine (the build and the synthesized checkpoints under PARETO_STREAM_WORK are reused):
#   tests      the sequential pass and the compress job on CUDA (concurrent module solvers on their streams)
#   8b         a Llama-3.1-8B-shaped checkpoint of random weights (synthesized once), SparseGPT 2:4 on 16384
#              WikiText-2 tokens without budgets: time, peaks, a checksum of every written file
#   8b-gptq    the same checkpoint, GPTQ 4-bit g128 on 16384 text tokens
#   8b-ppl     perplexity over the whole WikiText-2 test set of the 2:4 folder (bfloat16)
#   8b-budget  2:4 again under --max-gpu-memory 8GiB --max-host-memory 24GiB: the checksums must equal the 8b ones
#   70b        a Llama-3.3-70B-shaped checkpoint of PARETO_70B_LAYERS layers under the budgets a 70B needs
#   scripts/gpu-streaming.sh [OUTDIR]
# PARETO_STREAM_STAGES (default: all, in that order); PARETO_STREAM_DATA: a folder with wikitext2-test.txt and
# llama3/tokenizer.json (default: $PARETO_SHARED's data and tokenizers/llama3); PARETO_8B_LAYERS (32),
# PARETO_70B_LAYERS (12), PARETO_STREAM_WORK (/tmp/pareto-stream), PARETO_BUDGET_8B, PARETO_BUDGET_70B (the budget
# options of each), PARETO_*_SECONDS (time limits). See scripts/gpu-common.sh for the rest.
source "$(dirname "${BASH_SOURCE[0]}")/gpu-common.sh"
stages="${PARETO_STREAM_STAGES:-tests 8b 8b-gptq 8b-ppl 8b-budget 70b}"
has() { [[ " $stages " == *" $1 "* ]]; }
targets=(pareto-cli)
has tests && targets+=(test_calibration test_compress_job test_obs_block_kernel test_compress_sparsegpt test_compress_quant)
gpu_build "${targets[@]}"
data="${PARETO_STREAM_DATA:-}"
text="${data:+$data/wikitext2-test.txt}"; text="${text:-$PARETO_SHARED/data/wikitext2-test.txt}"
tok="${data:+$data/llama3}"; tok="${tok:-$PARETO_SHARED/tokenizers/llama3}"
work="${PARETO_STREAM_WORK:-/tmp/pareto-stream}"
mkdir -p "$work"
recipe() {  # recipe NAME PRUNE_OR_QUANTIZE_JSON
  cat >"$work/$1.json" <<JSON
{"calibration": {"source": "text", "text": "$text", "tokens": 16384, "window": 512, "seed": 0}, $2}
JSON
}
recipe sparsegpt '"prune": {"method": "sparsegpt", "pattern": "2:4"}'
recipe gptq '"quantize": {"method": "gptq", "bits": 4, "granularity": "group", "group_size": 128, "symmetric": true, "damp": 0.01}'

# Each line of a progress log with the seconds since the script started: the layer times of a run cut short.
stamp() { while IFS= read -r line; do printf '%s %s\n' "$SECONDS" "$line"; done; }
# compress NAME MODEL RECIPE SECONDS [OPTIONS...]: one run, its JSON result, its progress log, the checksums.
compress() {
  local name=$1 model=$2 rec=$3 limit=$4; shift 4
  step "compress $name ($rec) $*"
  rm -rf "$work/$name"
  timeout "$limit" "$cli" compress --model "$model" --recipe "$work/$rec.json" --out "$work/$name" --device cuda \
    --batch 8 --json "$@" >"$out/$name.json" 2> >(stamp >"$out/$name.log") \
    || { sleep 1; echo "compress $name failed"; tail -5 "$out/$name.log"; status=1; return 1; }
  python3 - "$out/$name.json" <<'PY' || true
import json, sys
r = json.load(open(sys.argv[1]))
m, t = r["memory"], r["timings"]
print(f"total {t['total_s']:.1f} s, calibration {t['calibration_s']:.1f} s, pass {t['pass_s']:.1f} s, write {t['write_s']:.1f} s; "
      f"peak host {m['peak_host_bytes']/2**30:.2f} GiB (start {m['host_base_bytes']/2**30:.2f}), "
      f"GPU {m['peak_gpu_bytes']/2**30:.2f} GiB; activations on the {m['activations']}; plan: {m['plan']}")
print("pass stages (s):", ", ".join(f"{k} {v:.1f}" for k, v in t.get("pass_stages_s", {}).items()))
PY
  (cd "$work/$name" && sha256sum *.safetensors) >"$out/$name.sha256"
}
synth() {  # synth PRESET LAYERS DIR
  [ -f "$3/config.json" ] && return 0
  step "synthesize $1, $2 layers"
  "$cli" synthesize --preset "$1" --layers "$2" --tokenizer "$tok" --out "$3" >"$out/synth-$1.log" 2>&1 \
    || { tail -5 "$out/synth-$1.log"; exit 1; }
  tail -1 "$out/synth-$1.log"
}

if has tests; then
  step "sequential pass and compress job on CUDA"
  for t in test_obs_block_kernel test_compress_sparsegpt test_compress_quant test_calibration test_compress_job; do
    PARETO_TEST_DEVICE=cuda timeout "${PARETO_TEST_SECONDS:-150}" "$here/build-gpu/tests/core/$t" >"$out/$t-cuda.log" 2>&1 || status=1
    summary "$out/$t-cuda.log" 12
  done
fi
if has 8b || has 8b-gptq || has 8b-ppl || has 8b-budget; then synth llama-3.1-8b "${PARETO_8B_LAYERS:-32}" "$work/8b"; fi
has 8b && compress 8b-free "$work/8b" sparsegpt "${PARETO_8B_SECONDS:-300}"
if has 8b-gptq; then
  compress 8b-gptq "$work/8b" gptq "${PARETO_8B_SECONDS:-300}"
  rm -rf "$work/8b-gptq"
fi
if has 8b-ppl && [ -d "$work/8b-free" ]; then
  step "perplexity of the 2:4 folder over the whole WikiText-2 test set (bfloat16)"
  /usr/bin/time -f "perplexity wall %e s, peak RSS %M KB" timeout "${PARETO_PPL_SECONDS:-200}" "$cli" perplexity \
    --model "$work/8b-free" --text "$text" --device cuda --dtype bfloat16 --json >"$out/8b-ppl.json" 2>"$out/8b-ppl.log" \
    || { echo "perplexity failed"; status=1; }
  tail -2 "$out/8b-ppl.log"; head -c 600 "$out/8b-ppl.json"; echo
fi
if has 8b-budget; then
  rm -rf "$work/8b-free"   # the checksums stay; the disk holds one output at a time
  compress 8b-budget "$work/8b" sparsegpt "${PARETO_8B_SECONDS:-300}" ${PARETO_BUDGET_8B:---max-gpu-memory 8GiB --max-host-memory 24GiB} \
    && { step "the same tensors with and without budgets"
         diff "$out/8b-free.sha256" "$out/8b-budget.sha256" && echo "identical: every file" || status=1; }
  rm -rf "$work/8b-budget"
fi
if has 70b; then
  rm -rf "$work/8b" "$work/8b-free"
  synth llama-3.3-70b "${PARETO_70B_LAYERS:-12}" "$work/70b"
  compress 70b-budget "$work/70b" sparsegpt "${PARETO_70B_SECONDS:-400}" ${PARETO_BUDGET_70B:---max-gpu-memory 32GiB --max-host-memory 32GiB}
  rm -rf "$work/70b" "$work/70b-budget"
fi
exit $status
