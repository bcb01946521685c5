#!/usr/bin/env bash
# Compression across the GPUs of one host (issue 26), for docs/results.md: a Llama-3.1-8B-shaped checkpoint of
# random weights (synthesize) compressed with SparseGPT 2:4 from decode calibration (generation is the stage that
# splits across GPUs most cleanly) and from text, once on one GPU and once as --processes N (one process per GPU,
# NCCL between them). Prints each stage's seconds (calibration, sequential pass, write, total) for 1 and N GPUs and
# the speedup, and compares the two results: every module's format and sparsity, and how many stored bytes differ
# (a float32 summation order may tip a few SparseGPT choices; the tensors need not be byte-identical).
#   scripts/gpu-distributed.sh [OUTDIR]
# PARETO_DIST_GPUS (default: every GPU nvidia-smi lists, at least 2), PARETO_8B_LAYERS (default 32),
# PARETO_DIST_WORK (scratch, /tmp), PARETO_DIST_SECONDS (per compress, 500). See scripts/gpu-common.sh for the rest.
source "$(dirname "${BASH_SOURCE[0]}")/gpu-common.sh"
gpu_build pareto-cli
gpus="${PARETO_DIST_GPUS:-$(nvidia-smi -L | wc -l)}"
if [ "$gpus" -lt 2 ]; then echo "gpu-distributed: $gpus GPU(s) here; this measurement needs 2 or more"; exit 1; fi
text="$PARETO_SHARED/data/wikitext2-test.txt"
prompts="$PARETO_SHARED/data/prompts-prose.txt"
tok="$PARETO_SHARED/tokenizers/llama3"
work="${PARETO_DIST_WORK:-/tmp/pareto-dist}"
rm -rf "$work"; mkdir -p "$work"
cat >"$work/text.json" <<JSON
{"calibration": {"source": "text", "text": "$text", "tokens": 16384, "window": 512, "seed": 0},
 "prune": {"method": "sparsegpt", "pattern": "2:4"}}
JSON
cat >"$work/decode.json" <<JSON
{"calibration": {"source": "decode", "prompts": "$prompts", "tokens": 16384, "max_new_tokens": 128, "seed": 0},
 "prune": {"method": "sparsegpt", "pattern": "2:4"}}
JSON

# compress NAME RECIPE [OPTIONS...]: one run, its JSON result and progress log.
compress() {
  local name=$1 recipe=$2; shift 2
  step "compress $name $*"
  timeout "${PARETO_DIST_SECONDS:-500}" "$cli" compress --model "$work/8b" --recipe "$work/$recipe.json" \
    --out "$work/$name" --device cuda --dtype bfloat16 --json "$@" >"$out/$name.json" 2>"$out/$name.log" \
    || { echo "compress $name failed"; tail -8 "$out/$name.log"; status=1; }
}

# speedup ONE MANY: the stages of both runs and their ratio; then the two folders compared.
speedup() {
  python3 - "$out/$1.json" "$out/$2.json" "$work/$1" "$work/$2" "$gpus" <<'PY' | tee "$out/$2-speedup.txt" || status=1
import json, os, sys
import numpy as np
one, many = (json.load(open(p)) for p in sys.argv[1:3])
gpus = sys.argv[5]
for stage in ("calibration_s", "pass_s", "write_s", "total_s"):
    a, b = one["timings"][stage], many["timings"][stage]
    print(f"{stage:14s} 1 GPU {a:8.1f} s   {gpus} GPUs {b:8.1f} s   speedup {a / b if b else float('nan'):5.2f}x")
m1, m2 = (json.load(open(os.path.join(d, "pareto.json"))) for d in sys.argv[3:5])
assert m2.get("processes") == int(gpus), m2.get("processes")
same = all(m1["modules"][k]["format"] == m2["modules"][k]["format"] and
           abs(m1["modules"][k]["sparsity"] - m2["modules"][k]["sparsity"]) < 1e-9 for k in m1["modules"])
print("modules: same formats and sparsity" if same else "modules DIFFER")
diff = total = 0
for f in sorted(os.listdir(sys.argv[3])):
    if not f.endswith(".safetensors"): continue
    a, b = (np.memmap(os.path.join(d, f), dtype=np.uint8, mode="r") for d in sys.argv[3:5])
    n = min(len(a), len(b)); total += len(a)
    diff += abs(len(a) - len(b)) + sum(int(np.count_nonzero(a[i:i + 2**28] != b[i:i + 2**28])) for i in range(0, n, 2**28))
print(f"stored bytes differing: {diff} of {total} ({100 * diff / max(total, 1):.4f}%)")
sys.exit(0 if same else 1)
PY
}

step "synthesize llama-3.1-8b, ${PARETO_8B_LAYERS:-32} layers"
"$cli" synthesize --preset llama-3.1-8b --layers "${PARETO_8B_LAYERS:-32}" --tokenizer "$tok" --out "$work/8b" \
  >"$out/synth-8b.log" 2>&1 || { tail -5 "$out/synth-8b.log"; exit 1; }
tail -1 "$out/synth-8b.log"
for recipe in decode text; do
  compress "$recipe-1gpu" "$recipe"
  compress "$recipe-${gpus}gpu" "$recipe" --processes "$gpus"
  speedup "$recipe-1gpu" "$recipe-${gpus}gpu"
  rm -rf "$work/$recipe-1gpu" "$work/$recipe-${gpus}gpu"
done
rm -rf "$work"
exit $status
