#!/usr/bin/env python3
"""The pruning study of issue 5 on a reference model, through pareto-cli only.

For 2:4 and 50% unstructured: magnitude, Wanda, SparseGPT with text calibration and SparseGPT with decode
calibration (same token budget), calibrated on prose and evaluated on disjoint prose prompts, plus the crossed
settings (calibrate on python, evaluate on prose, and the reverse). Reports perplexity on heldout-prose and
heldout-python, decode NLL, top-1 agreement, shared greedy prefix and the mean drift plateau.

Leakage is avoided by construction: text calibration reads the part of each held-out document *after* the
first 40 perplexity windows (perplexity only scores those), and each prompts file is split into two halves by
line parity: even lines calibrate, odd lines evaluate.

  scripts/prune_study.py --cli build/app/cli/pareto-cli --shared ../shared --model ../shared/models/ref-small \
      --out study-out [--device cpu] [--tokens 8192]
Writes <out>/results.json and <out>/table.md.
"""
import argparse
import json
import os
import subprocess
import sys
import time


def run(cli, args):
    t0 = time.time()
    p = subprocess.run([cli] + args + ["--json"], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"pareto-cli {' '.join(args)} failed ({p.returncode}): {p.stderr.strip()}")
    return json.loads(p.stdout), time.time() - t0


def split_text(src, dst, skip_tokens_chars):
    text = open(src, encoding="utf-8").read()
    cut = text.find("\n", skip_tokens_chars)
    open(dst, "w", encoding="utf-8").write(text[cut + 1:])


def split_prompts(src, even, odd):
    lines = [l for l in open(src, encoding="utf-8").read().splitlines() if l.strip()]
    open(even, "w", encoding="utf-8").write("\n".join(lines[0::2]) + "\n")
    open(odd, "w", encoding="utf-8").write("\n".join(lines[1::2]) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--shared", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--eval-new-tokens", type=int, default=64)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    data = {}
    for d in ("prose", "python"):
        # 40 windows of 512 tokens at ~3.5 bytes per token stay well inside the first 150 kB.
        split_text(f"{a.shared}/data/heldout-{d}.txt", f"{a.out}/calib-text-{d}.txt", 150_000)
        split_prompts(f"{a.shared}/data/prompts-{d}.txt", f"{a.out}/calib-prompts-{d}.txt",
                      f"{a.out}/eval-prompts-{d}.txt")
        data[d] = {"text": f"{a.out}/calib-text-{d}.txt", "prompts": f"{a.out}/calib-prompts-{d}.txt",
                   "eval": f"{a.out}/eval-prompts-{d}.txt", "heldout": f"{a.shared}/data/heldout-{d}.txt"}

    configs = []
    for pattern in ("2:4", "50%"):
        prune = {"pattern": "2:4"} if pattern == "2:4" else {"sparsity": 0.5}
        text = lambda d: {"source": "text", "text": data[d]["text"], "tokens": a.tokens, "window": 512}
        decode = lambda d: {"source": "decode", "prompts": data[d]["prompts"], "tokens": a.tokens,
                            "max_new_tokens": a.max_new_tokens}
        configs += [
            (pattern, "magnitude", "-", {"prune": dict(prune, method="magnitude")}),
            (pattern, "wanda", "text prose", {"calibration": text("prose"), "prune": dict(prune, method="wanda")}),
            (pattern, "sparsegpt", "text prose", {"calibration": text("prose"), "prune": dict(prune, method="sparsegpt")}),
            (pattern, "sparsegpt", "decode prose", {"calibration": decode("prose"), "prune": dict(prune, method="sparsegpt")}),
            (pattern, "sparsegpt", "text python", {"calibration": text("python"), "prune": dict(prune, method="sparsegpt")}),
            (pattern, "sparsegpt", "decode python", {"calibration": decode("python"), "prune": dict(prune, method="sparsegpt")}),
        ]

    dev = ["--device", a.device]

    def evaluate(model):
        r = {}
        for d in ("prose", "python"):
            ppl, _ = run(a.cli, ["perplexity", "--model", model, "--text", data[d]["heldout"], "--max-windows", "40"] + dev)
            r[f"ppl_{d}"] = ppl["ppl"]
        return r

    results = [{"pattern": "-", "method": "dense", "calibration": "-", **evaluate(a.model)}]
    for i, (pattern, method, calib, recipe) in enumerate(configs):
        path = f"{a.out}/recipe-{i}.json"
        json.dump(recipe, open(path, "w"), indent=1)
        folder = f"{a.out}/model-{i}"
        comp, secs = run(a.cli, ["compress", "--model", a.model, "--recipe", path, "--out", folder, "--overwrite"] + dev)
        row = {"pattern": pattern, "method": method, "calibration": calib, "compress_s": secs,
               "bits_per_weight": comp["linear_bits_per_weight"], **evaluate(folder)}
        for d in ("prose", "python"):
            fid, _ = run(a.cli, ["fidelity", "--dense", a.model, "--model", folder, "--prompts", data[d]["eval"],
                                 "--max-new-tokens", str(a.eval_new_tokens)] + dev)
            row[f"decode_nll_{d}"] = fid["decode_nll"]
            row[f"top1_{d}"] = fid["top1_agreement"]
            row[f"prefix_{d}"] = fid["shared_prefix"]
        drift, _ = run(a.cli, ["analyze", "drift", "--dense", a.model, "--model", folder, "--prompts",
                               data["prose"]["eval"], "--steps", str(a.eval_new_tokens)] + dev)
        free = drift["plateau"]["free"]
        row["drift_plateau_free"] = sum(free) / len(free)
        row["steps_to_90_max"] = max(drift["steps_to_90"]["free"])
        results.append(row)
        print(json.dumps(row), flush=True)

    json.dump(results, open(f"{a.out}/results.json", "w"), indent=1)
    head = ("| pattern | method | calibration | bpw | ppl prose | ppl python | decode NLL prose | top-1 prose | "
            "prefix prose | decode NLL python | top-1 python | prefix python | drift plateau | max steps to 90% |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in results:
        f = lambda k, fmt: (fmt % r[k]) if k in r else "-"
        lines.append(f"| {r['pattern']} | {r['method']} | {r['calibration']} | {f('bits_per_weight', '%.2f')} | "
                     f"{r['ppl_prose']:.2f} | {r['ppl_python']:.2f} | {f('decode_nll_prose', '%.3f')} | "
                     f"{f('top1_prose', '%.3f')} | {f('prefix_prose', '%.1f')} | {f('decode_nll_python', '%.3f')} | "
                     f"{f('top1_python', '%.3f')} | {f('prefix_python', '%.1f')} | {f('drift_plateau_free', '%.3f')} | "
                     f"{f('steps_to_90_max', '%d')} |")
    open(f"{a.out}/table.md", "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
