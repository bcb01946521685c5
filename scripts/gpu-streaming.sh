#!/usr/bin/env bash
# Streaming, speed and memory budgets on a CUDA machine (issue 23), in stages that can run in separate calls on one
# warm machine (the build and the synthesized checkpoints under PARETO_STREAM_WORK are reused):
#   tests      the sequential pass and the compress job on CUDA (concurrent module solvers on their streams)
#   8b         a Llama-3.1-8B-shaped checkpoint of random weights (synthesized once), SparseGPT 2:4 with decode
#              calibration (16384 continuation tokens of WikiText-2 prompts) without budgets: time, peaks, a
#              checksum of every written file
#   8b-gptq    the same checkpoint, GPTQ 4-bit g128 on 16384 text tokens
#   8b-ppl     perplexity over the whole WikiText-2 test set of the 2:4 folder (bfloat16)
#   8b-decode  decode calibration's generation at scale: PARETO_DECODE_PROMPTS prompts (2048) continued by
#              PARETO_DECODE_NEW tokens each (512: 1M tokens), PARETO_DECODE_BATCH at a time (256), bfloat16, written
#              as a continuations file (`generate --prompts --out`, the batched generation a compress runs)
#   8b-budget  GPTQ again under --max-gpu-memory 8GiB --max-host-memory 24GiB: the checksums must equal 8b-gptq's
#   70b        a Llama-3.3-70B-shaped checkpoint of PARETO_70B_LAYERS layers under the budgets a 70B needs, SparseGPT
#              2:4 with decode calibration read from a continuations file (as a 70B's must be)
#   scripts/gpu-streaming.sh [OUTDIR]
# PARETO_STREAM_STAGES (default: all, in that order); PARETO_STREAM_DATA: a folder with wikitext2-test.txt and
# llama3/tokenizer.json (default: $PARETO_SHARED's data and tokenizers/llama3); PARETO_8B_LAYERS (32),
# PARETO_70B_LAYERS (12), PARETO_STREAM_WORK (/tmp/pareto-stream), PARETO_BUDGET_8B, PARETO_BUDGET_70B (the budget
# options of each), PARETO_*_SECONDS (time limits). See scripts/gpu-common.sh for the rest.
source "$(dirname "${BASH_SOURCE[0]}")/gpu-common.sh"
stages="${PARETO_STREAM_STAGES:-tests 8b 8b-gptq 8b-ppl 8b-decode 8b-budget 70b}"
has() { [[ " $stages " == *" $1 "* ]]; }
targets=(pareto-cli)
has tests && targets+=(test_calibration test_compress_job test_obs_block_kernel test_compress_sparsegpt test_compress_quant test_golden_model)
gpu_build "${targets[@]}"
data="${PARETO_STREAM_DATA:-}"
text="${data:+$data/wikitext2-test.txt}"; text="${text:-$PARETO_SHARED/data/wikitext2-test.txt}"
tok="${data:+$data/llama3}"; tok="${tok:-$PARETO_SHARED/tokenizers/llama3}"
work="${PARETO_STREAM_WORK:-/tmp/pareto-stream}"
mkdir -p "$work"
# Prompts for decode calibration: the first 24 words of each WikiText-2 test paragraph (and words 30-54 of the
# long ones), one a line.
python3 - "$text" "$work/prompts.txt" <<'PY'
import sys
out = []
for line in open(sys.argv[1], encoding="utf-8"):
    w = line.split()
    if len(w) < 30 or line.strip().startswith("="): continue
    out.append(" ".join(w[:24]))
    if len(w) >= 60: out.append(" ".join(w[30:54]))
open(sys.argv[2], "w", encoding="utf-8").write("\n".join(out) + "\n")
PY
text_calibration="{\"source\": \"text\", \"text\": \"$text\", \"tokens\": 16384, \"window\": 512, \"seed\": 0}"
decode_calibration="{\"source\": \"decode\", \"prompts\": \"$work/prompts.txt\", \"tokens\": 16384, \"max_new_tokens\": 128, \"seed\": 0}"
recipe() {  # recipe NAME CALIBRATION_JSON PRUNE_OR_QUANTIZE_JSON
  echo "{\"calibration\": $2, $3}" >"$work/$1.json"
}
recipe sparsegpt "$decode_calibration" '"prune": {"method": "sparsegpt", "pattern": "2:4"}'
recipe gptq "$text_calibration" '"quantize": {"method": "gptq", "bits": 4, "granularity": "group", "group_size": 128, "symmetric": true, "damp": 0.01}'

# Each line of a progress log with the seconds since the script started: the layer times of a run cut short.
stamp() { while IFS= read -r line; do printf '%s %s\n' "$SECONDS" "$line"; done; }
# compress NAME MODEL RECIPE SECONDS [OPTIONS...]: one run, its JSON result, its progress log, the checksums.
compress() {
  local name=$1 model=$2 rec=$3 limit=$4; shift 4
  step "compress $name ($rec) $*"
  rm -rf "$work/$name"
  timeout "$limit" "$cli" compress --model "$model" --recipe "$work/$rec.json" --out "$work/$name" --device cuda \
    --batch "${PARETO_COMPRESS_BATCH:-0}" --json "$@" >"$out/$name.json" 2> >(stamp >"$out/$name.log") \
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
  for t in test_obs_block_kernel test_compress_sparsegpt test_compress_quant test_calibration test_compress_job test_golden_model; do
    PARETO_TEST_DEVICE=cuda timeout "${PARETO_TEST_SECONDS:-150}" "$here/build-gpu/tests/core/$t" >"$out/$t-cuda.log" 2>&1 || status=1
    summary "$out/$t-cuda.log" 12
  done
fi
if has 8b || has 8b-gptq || has 8b-ppl || has 8b-decode || has 8b-budget; then synth llama-3.1-8b "${PARETO_8B_LAYERS:-32}" "$work/8b"; fi
has 8b && compress 8b-free "$work/8b" sparsegpt "${PARETO_8B_SECONDS:-300}"
if has 8b-gptq; then
  compress 8b-gptq "$work/8b" gptq "${PARETO_8B_SECONDS:-300}"
  rm -rf "$work/8b-gptq"   # its checksums stay for 8b-budget
fi
if has 8b-ppl && [ -d "$work/8b-free" ]; then
  step "perplexity of the 2:4 folder over the whole WikiText-2 test set (bfloat16)"
  /usr/bin/time -f "perplexity wall %e s, peak RSS %M KB" timeout "${PARETO_PPL_SECONDS:-200}" "$cli" perplexity \
    --model "$work/8b-free" --text "$text" --device cuda --dtype bfloat16 --json >"$out/8b-ppl.json" 2>"$out/8b-ppl.log" \
    || { echo "perplexity failed"; status=1; }
  tail -2 "$out/8b-ppl.log"; head -c 600 "$out/8b-ppl.json"; echo
fi
if has 8b-decode; then
  step "decode calibration's generation: ${PARETO_DECODE_PROMPTS:-2048} prompts x ${PARETO_DECODE_NEW:-512} new tokens, batch ${PARETO_DECODE_BATCH:-256}"
  head -n "${PARETO_DECODE_PROMPTS:-2048}" "$work/prompts.txt" >"$work/prompts-decode.txt"
  rm -f "$work/continuations.jsonl"
  /usr/bin/time -f "generate wall %e s, peak RSS %M KB" timeout "${PARETO_DECODE_SECONDS:-500}" "$cli" generate \
    --model "$work/8b" --device cuda --dtype bfloat16 --prompts "$work/prompts-decode.txt" --out "$work/continuations.jsonl" \
    --batch "${PARETO_DECODE_BATCH:-256}" --max-new-tokens "${PARETO_DECODE_NEW:-512}" --json \
    >"$out/8b-decode.json" 2> >(stamp >"$out/8b-decode.log") || { echo "generation failed"; status=1; }
  sleep 1; tail -3 "$out/8b-decode.log"; cat "$out/8b-decode.json"; echo
fi
if has 8b-budget; then
  rm -rf "$work/8b-free"   # the checksums stay; the disk holds one output at a time
  # GPTQ on text: decode calibration generates with the whole model, which an 8 GiB budget refuses (by design).
  compress 8b-budget "$work/8b" gptq "${PARETO_8B_SECONDS:-300}" ${PARETO_BUDGET_8B:---max-gpu-memory 8GiB --max-host-memory 24GiB} \
    && { step "the same tensors with and without budgets"
         diff "$out/8b-gptq.sha256" "$out/8b-budget.sha256" && echo "identical: every file" || status=1; }
  rm -rf "$work/8b-budget"
fi
if has 70b; then
  # A 70B's decode calibration is generated where the model fits (a serving engine) and read from a file: here an
  # 8B's continuations of the same prompts stand in (same tokenizer), written by 8b-decode or now by a 2-layer 8B
  # of random weights (what is generated does not matter here, only that it is read from the file; a whole 8B
  # would take 16 GB of the disk the 70B needs).
  if [ ! -s "$work/continuations.jsonl" ]; then
    synth llama-3.1-8b 2 "$work/8b-continuations"
    step "continuations for the 70B's calibration (generated by a 2-layer 8B)"
    head -n 256 "$work/prompts.txt" >"$work/prompts-70b.txt"
    "$cli" generate --model "$work/8b-continuations" --device cuda --dtype bfloat16 --prompts "$work/prompts-70b.txt" \
      --out "$work/continuations.jsonl" --batch 128 --max-new-tokens 128 >"$out/70b-continuations.log" 2>&1 \
      || { tail -3 "$out/70b-continuations.log"; status=1; }
    rm -rf "$work/8b-continuations"
  fi
  recipe sparsegpt-continuations \
    "{\"source\": \"decode\", \"continuations\": \"$work/continuations.jsonl\", \"tokens\": 16384, \"seed\": 0}" \
    '"prune": {"method": "sparsegpt", "pattern": "2:4"}'
  rm -rf "$work/8b" "$work/8b-free"
  synth llama-3.3-70b "${PARETO_70B_LAYERS:-12}" "$work/70b"
  compress 70b-budget "$work/70b" sparsegpt-continuations "${PARETO_70B_SECONDS:-400}" \
    ${PARETO_BUDGET_70B:---max-gpu-memory 32GiB --max-host-memory 32GiB} \
    && python3 - "$out/70b-budget.json" "${PARETO_70B_LAYERS:-12}" <<'PY'
import json, sys
r, n = json.load(open(sys.argv[1])), int(sys.argv[2])
t = r["timings"]
per = t["pass_s"] / n
print(f"{per:.2f} s a layer; 80 layers: ~{per * 80 + t['calibration_s']:.0f} s of calibration and pass, "
      f"+ ~{t['write_s'] / n * 80:.0f} s of final write (the write scaled by layers)")
PY
  rm -rf "$work/70b" "$work/70b-budget"
fi
exit $status
