#!/usr/bin/env bash
# Search under a tokens/s budget on a CUDA machine (issue 24): this device's kernel table at the model's own shapes
# (bench kernels --per-shape: each GEMV alone, recorded in the store the search reads), the dense decode speed
# (recorded too: the rest of the step), then for each budget the searched
# recipe compressed and decoded: predicted tokens/s against measured.
#   scripts/gpu-search.sh [OUTDIR]
# PARETO_SEARCH_MODEL (default $PARETO_SHARED/models/ref-small); PARETO_SEARCH_FACTORS: budgets as fractions of
# the way from the predicted dense tokens/s to the fastest the candidates reach (default "0.3 0.6 0.9"). See
# scripts/gpu-common.sh for the rest.
source "$(dirname "${BASH_SOURCE[0]}")/gpu-common.sh"
gpu_build pareto-cli
model="${PARETO_SEARCH_MODEL:-$PARETO_SHARED/models/ref-small}"
work="${PARETO_SEARCH_WORK:-/tmp/pareto-search}"
rm -rf "$work"; mkdir -p "$work"
python3 - "$model/config.json" "$work/shape.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
h, f, n, kv = c["hidden_size"], c["intermediate_size"], c["num_attention_heads"], c["num_key_value_heads"]
d = c.get("head_dim") or h // n
json.dump({"name": "searched-model", "layers": c["num_hidden_layers"],
           "linears": [{"name": "qkv", "rows": (n + 2 * kv) * d, "cols": h}, {"name": "o", "rows": h, "cols": n * d},
                       {"name": "gate_up", "rows": 2 * f, "cols": h}, {"name": "down", "rows": h, "cols": f}]},
          open(sys.argv[2], "w"))
PY
step "bench kernels at the model's shapes (recorded for the search)"
"$cli" bench kernels --shapes "$work/shape.json" --batch 1 --runs 50 --per-shape >"$out/search-bench-kernels.txt" 2>&1 || status=1
tail -12 "$out/search-bench-kernels.txt"
cat >"$work/base.json" <<JSON
{"calibration": {"source": "text", "text": "$PARETO_SHARED/data/heldout-prose.txt", "tokens": 8192, "window": 256},
 "skip": ["lm_head"]}
JSON
step "dense decode"
"$cli" bench decode --model "$model" --batch 1 --json >"$out/search-dense-decode.json" 2>"$out/search-dense-decode.log" || status=1
dense=$(python3 -c "import json,sys;r=json.load(open(sys.argv[1]));print(r)" "$out/search-dense-decode.json" | head -c 400); echo "$dense"
step "predicted dense tokens/s (the search at the dense budget)"
"$cli" search --model "$model" --recipe "$work/base.json" --budget-bpw 16 --out "$work/dense.json" --device cuda \
  --dtype float16 --json >"$out/search-16bpw.json" 2>"$out/search-16bpw.log" || { tail -5 "$out/search-16bpw.log"; status=1; }
read -r pred fastest < <(python3 -c "import json,sys;r=json.load(open(sys.argv[1]));print(r['chosen']['predicted_tokens_per_second'], r['reachable']['tokens_per_second'][1])" "$out/search-16bpw.json")
echo "predicted dense: $pred tok/s; the fastest allocation: $fastest tok/s"
for k in ${PARETO_SEARCH_FACTORS:-0.3 0.6 0.9}; do
  t=$(python3 -c "print(round($pred + $k * ($fastest - $pred)))")
  step "budget $t tok/s ($k of the way from the predicted dense to the fastest)"
  "$cli" search --model "$model" --recipe "$work/base.json" --budget-tok-s "$t" --out "$work/r-$k.json" --device cuda \
    --dtype float16 --json >"$out/search-$k.json" 2>"$out/search-$k.log" || { tail -3 "$out/search-$k.log"; status=1; continue; }
  "$cli" compress --model "$model" --recipe "$work/r-$k.json" --out "$work/c-$k" --device cuda >/dev/null 2>"$out/compress-$k.log" \
    || { tail -3 "$out/compress-$k.log"; status=1; continue; }
  "$cli" bench decode --model "$work/c-$k" --batch 1 --json >"$out/decode-$k.json" 2>"$out/decode-$k.log" || status=1
  python3 - "$out/search-$k.json" "$out/decode-$k.json" <<'PY' || true
import json, sys
s, d = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
print("search:", json.dumps(s.get("chosen"))[:300])
print("decode:", json.dumps(d)[:400])
PY
done
exit $status
