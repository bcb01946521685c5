#!/usr/bin/env python3
"""The search study of issue 24 (point 5) on a reference model, through pareto-cli only.

For each budget (bits per weight over the block linears) runs `search` with the default candidates and the
shipped recipes' calibration (16384 tokens of WikiText-2 windows of 512), compresses the searched recipe and the
uniform shipped recipes, and evaluates every folder: perplexity on heldout-prose and heldout-python (--windows
windows of 512) with the KL divergence to dense on the same windows (`perplexity --dense`), and decode fidelity on the
first --prompts odd-line prose prompts (64 dense greedy tokens each). The estimated loss of a uniform recipe is the sum of its
candidate's estimated losses over the modules (the same sensitivities the search used); the study reports the
Spearman rank correlation of estimated loss and measured KL over every recipe.

  scripts/search_study.py --cli build/app/cli/pareto-cli --shared ../shared --model ../shared/models/ref-small \
      --out search-out [--budgets 3.5,4.125,6,9] [--search-args "--no-refine"]
Writes <out>/results.json and <out>/table.md; finished steps are kept and not redone.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# Shipped uniform recipes and the search candidate each one is (same solver, grid and calibration).
UNIFORM = {"int8-channel": "rtn-int8-channel", "gguf-q8_0-rtn": "rtn-gguf-q8_0", "gguf-q4_k-gptq": "gptq-gguf-q4_k",
           "gptq-4bit-g128": "gptq-int4-g128", "spqr-3bit": "spqr-3bit", "gptq-3bit-g128": "gptq-int3-g128",
           "sparsegpt-2of4-gptq4": "sparsegpt-2:4+gptq-int4"}


def run(cli, args, out=None):
    if out and os.path.exists(out):
        return json.load(open(out))
    p = subprocess.run([cli] + args + ["--json", "--no-record", "--quiet"], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"pareto-cli {' '.join(args)} failed ({p.returncode}): {p.stderr.strip()}")
    r = json.loads(p.stdout)
    if out:
        json.dump(r, open(out, "w"), indent=1)
    return r


def spearman(xs, ys):
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(v):
            j = i
            while j + 1 < len(v) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2 + 1
            i = j + 1
        return r
    rx, ry = ranks(xs), ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    return cov / (sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry)) ** 0.5


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--shared", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--budgets", default="3.5,4.125,6,9")
    ap.add_argument("--windows", default="10", help="perplexity/KL windows of 512 per held-out file")
    ap.add_argument("--prompts", default="16", help="fidelity prompts (odd prose lines)")
    ap.add_argument("--uniform", choices=["evaluate", "estimate"], default="evaluate",
                    help="estimate: only the uniform rows' estimated loss (their measured metrics from an earlier "
                         "run; they do not depend on the search)")
    ap.add_argument("--search-args", default="", help="extra `search` options, e.g. \"--no-refine\"")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    shared = os.path.abspath(a.shared)
    base = f"{a.out}/base.json"
    json.dump({"calibration": {"source": "text", "text": f"{shared}/data/wikitext2-test.txt", "tokens": 16384,
                               "window": 512, "seed": 0}}, open(base, "w"), indent=1)
    lines = [l for l in open(f"{shared}/data/prompts-prose.txt", encoding="utf-8").read().splitlines() if l.strip()]
    prompts = f"{a.out}/eval-prompts-prose.txt"
    open(prompts, "w", encoding="utf-8").write("\n".join(lines[1::2]) + "\n")

    def evaluate(name, folder):
        r = {}
        for key, f in (("prose", "heldout-prose.txt"), ("python", "heldout-python.txt")):
            p = run(a.cli, ["perplexity", "--model", folder, "--dense", a.model, "--text", f"{shared}/data/{f}",
                            "--max-windows", a.windows], f"{a.out}/{name}.ppl-{key}.json")
            r[f"ppl_{key}"], r[f"kl_{key}"], r[f"kl_p99_{key}"] = p["ppl"], p["kl_mean"], p["kl_p99"]
        fid = run(a.cli, ["fidelity", "--dense", a.model, "--model", folder, "--prompts", prompts,
                          "--max-prompts", a.prompts, "--max-new-tokens", "64"], f"{a.out}/{name}.fidelity.json")
        r.update(decode_nll=fid["decode_nll"], top1=fid["top1_agreement"], shared_prefix=fid["shared_prefix"]["mean"]
                 if isinstance(fid["shared_prefix"], dict) else fid["shared_prefix"])
        return r

    def compress(name, recipe):
        folder = f"{a.out}/{name}"
        c = run(a.cli, ["compress", "--model", a.model, "--recipe", recipe, "--out", folder],
                f"{a.out}/{name}.compress.json")
        return folder, c["linear_bits_per_weight"]

    # The uniform rows first: they do not depend on the search, so they are ready while it runs.
    uniform = []
    for name, cand in UNIFORM.items():
        if a.uniform == "estimate":
            uniform.append(dict(recipe=name, candidate=cand))
            continue
        folder, bits = compress(name, f"{HERE}/../resources/recipes/{name}.json")
        uniform.append(dict(recipe=name, candidate=cand, bits=bits, **evaluate(name, folder)))
        print(json.dumps(uniform[-1]), flush=True)
    rows = []
    table = None
    estimate = None
    for b in [float(x) for x in a.budgets.split(",")]:
        name = f"searched-{b:g}"
        s = run(a.cli, ["search", "--model", a.model, "--recipe", base, "--budget-bpw", str(b), "--out",
                        f"{a.out}/{name}.recipe.json", "--table", f"{a.out}/sensitivity-table.json"]
                + a.search_args.split(), f"{a.out}/{name}.search.json")
        table = table or s["modules"]
        estimate = estimate or s.get("estimate")
        folder, bits = compress(name, f"{a.out}/{name}.recipe.json")
        counts = {}
        for m in s["modules"]:
            counts[m["chosen"]] = counts.get(m["chosen"], 0) + 1
        rows.append(dict(recipe=name, budget=b, bits=bits, predicted_bits=s["chosen"]["linear_bits_per_weight"],
                         estimated_loss=s["chosen"]["estimated_loss"], allocation=counts, **evaluate(name, folder)))
        print(json.dumps(rows[-1]), flush=True)
    # A uniform recipe's estimated loss: its candidate's column of the search's table.
    for r in uniform:
        loss = 0.0
        for m in table:
            cell = next(c for c in m["candidates"] if c["candidate"] == r["candidate"])
            loss += cell["estimated_loss"] if cell["applies"] else float("nan")
        r["estimated_loss"] = loss
        if a.uniform == "estimate":
            print(json.dumps(r), flush=True)
            continue
        rows.append(r)
    dense = run(a.cli, ["perplexity", "--model", a.model, "--text", f"{shared}/data/heldout-prose.txt",
                        "--max-windows", a.windows], f"{a.out}/dense.ppl-prose.json")["ppl"]
    if len(rows) < 3:
        json.dump({"rows": rows, "uniform_estimates": {r["recipe"]: r["estimated_loss"] for r in uniform},
                   "estimate": estimate}, open(f"{a.out}/results.json", "w"), indent=1)
        return
    rho_prose = spearman([r["estimated_loss"] for r in rows], [r["kl_prose"] for r in rows])
    rho_python = spearman([r["estimated_loss"] for r in rows], [r["kl_python"] for r in rows])
    json.dump({"rows": rows, "uniform_estimates": {r["recipe"]: r["estimated_loss"] for r in uniform}, "estimate": estimate, "dense_ppl_prose": dense, "spearman_kl_prose": rho_prose,
               "spearman_kl_python": rho_python}, open(f"{a.out}/results.json", "w"), indent=1)
    out = ["| recipe | bits/weight | est. loss | ppl prose | ppl python | KL prose | KL python | decode NLL | top-1 | "
           "shared prefix |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: r["bits"]):
        out.append(f"| {r['recipe']} | {r['bits']:.3f} | {r['estimated_loss']:.4g} | {r['ppl_prose']:.2f} | "
                   f"{r['ppl_python']:.2f} | {r['kl_prose']:.4f} | {r['kl_python']:.4f} | {r['decode_nll']:.3f} | "
                   f"{r['top1']:.3f} | {r['shared_prefix']:.1f} |")
    out.append("")
    out.append(f"Estimated loss: {estimate}")
    out.append(f"Spearman(estimated loss, KL prose) = {rho_prose:.3f}, (estimated loss, KL python) = {rho_python:.3f} "
               f"over {len(rows)} recipes; dense ppl prose {dense:.2f}")
    for r in rows:
        if "allocation" in r:
            out.append(f"- {r['recipe']}: " + ", ".join(f"{k} × {v}" for k, v in sorted(r["allocation"].items())))
    open(f"{a.out}/table.md", "w").write("\n".join(out) + "\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
