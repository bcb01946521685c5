#!/usr/bin/env python3
"""The quantization study of issue 6 on a reference model, through pareto-cli only.

Compresses the model with every shipped recipe in resources/recipes/ that quantizes (plus RTN 3-bit g128 for
comparison with GPTQ and SpQR at 3 bits), then reports bits per weight over the block linears, perplexity on
heldout-prose, heldout-python and wikitext2-test (40 windows of 512) and decode fidelity on the prose prompts
(odd lines, 64 dense greedy tokens each).

  scripts/quant_study.py --cli build/app/cli/pareto-cli --shared ../shared --model ../shared/models/ref-small \
      --out quant-out [--device cpu] [--only spqr-3bit,sparsegpt-2of4-gptq4]
Writes <out>/results.json and <out>/table.md. --only re-measures just the named rows (no dense baseline), for
updating single rows of the table after a change.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RECIPES = ["int8-channel", "int4-g128-rtn", "int4-tensor-rtn", "gptq-4bit-g128", "gptq-3bit-g128", "spqr-3bit",
           "sparsegpt-2of4-int4", "sparsegpt-2of4-gptq4"]


def run(cli, args):
    p = subprocess.run([cli] + args + ["--json"], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"pareto-cli {' '.join(args)} failed ({p.returncode}): {p.stderr.strip()}")
    return json.loads(p.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--shared", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--only", default="", help="comma-separated recipe names: measure only these rows")
    a = ap.parse_args()
    only = [r for r in a.only.split(",") if r]
    os.makedirs(a.out, exist_ok=True)
    lines = [l for l in open(f"{a.shared}/data/prompts-prose.txt", encoding="utf-8").read().splitlines() if l.strip()]
    eval_prompts = f"{a.out}/eval-prompts-prose.txt"
    open(eval_prompts, "w", encoding="utf-8").write("\n".join(lines[1::2]) + "\n")
    dev = ["--device", a.device]
    texts = {"prose": "heldout-prose.txt", "python": "heldout-python.txt", "wikitext2": "wikitext2-test.txt"}

    def evaluate(model):
        return {f"ppl_{k}": run(a.cli, ["perplexity", "--model", model, "--text", f"{a.shared}/data/{f}",
                                        "--max-windows", "40"] + dev)["ppl"] for k, f in texts.items()}

    recipes = [(r, f"{HERE}/../resources/recipes/{r}.json") for r in RECIPES]
    extra = f"{a.out}/rtn-3bit-g128.json"
    json.dump({"quantize": {"method": "rtn", "bits": 3, "granularity": "group", "group_size": 128}}, open(extra, "w"))
    recipes.insert(5, ("rtn-3bit-g128 (not shipped)", extra))

    if only:
        unknown = [r for r in only if r not in [n.split()[0] for n, _ in recipes]]
        if unknown:
            sys.exit(f"--only: unknown recipe(s) {', '.join(unknown)}")
        recipes = [(n, p) for n, p in recipes if n.split()[0] in only]
    results = [] if only else [{"recipe": "dense bf16", "bits_per_weight": 16.0, **evaluate(a.model)}]
    for name, path in recipes:
        folder = f"{a.out}/{name.split()[0]}"
        comp = run(a.cli, ["compress", "--model", a.model, "--recipe", path, "--out", folder, "--overwrite"] + dev)
        fid = run(a.cli, ["fidelity", "--dense", a.model, "--model", folder, "--prompts", eval_prompts,
                          "--max-new-tokens", "64"] + dev)
        row = {"recipe": name, "bits_per_weight": comp["linear_bits_per_weight"], "compress_s": comp["timings"]["total_s"],
               **evaluate(folder), "decode_nll": fid["decode_nll"], "top1": fid["top1_agreement"],
               "prefix": fid["shared_prefix"]}
        results.append(row)
        print(json.dumps(row), flush=True)
    json.dump(results, open(f"{a.out}/results.json", "w"), indent=1)
    head = "| recipe | bits/weight | ppl prose | ppl python | ppl wikitext2 | decode NLL | top-1 | shared prefix | compress s |"
    out = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in results:
        g = lambda k, f: (f % r[k]) if k in r else "-"
        out.append(f"| {r['recipe']} | {r['bits_per_weight']:.3f} | {r['ppl_prose']:.2f} | {r['ppl_python']:.2f} | "
                   f"{r['ppl_wikitext2']:.2f} | {g('decode_nll', '%.3f')} | {g('top1', '%.3f')} | {g('prefix', '%.1f')} | "
                   f"{g('compress_s', '%.0f')} |")
    open(f"{a.out}/table.md", "w").write("\n".join(out) + "\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
