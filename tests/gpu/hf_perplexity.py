#!/usr/bin/env python3
"""Perplexity of a Hugging Face folder with transformers, by Pareto's protocol (docs: DESIGN.md "Perplexity"):
tokenize the whole file with no special tokens, cut non-overlapping windows of --window tokens (a trailing partial
window dropped, at most --max-windows), score each window alone with no BOS over its window-1 next-token
predictions; ppl = exp(mean NLL). Prints one JSON object. Used to check `pareto-cli export hf` on the GPU machine."""
import argparse
import json
import math

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--model", required=True)
    p.add_argument("--text", required=True)
    p.add_argument("--window", type=int, default=512)
    p.add_argument("--max-windows", type=int, default=0)
    p.add_argument("--device", default="cuda")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    a = p.parse_args()
    tok = AutoTokenizer.from_pretrained(a.model)
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=getattr(torch, a.dtype)).to(a.device).eval()
    ids = tok(open(a.text, encoding="utf-8").read(), add_special_tokens=False)["input_ids"]
    windows = len(ids) // a.window
    if a.max_windows:
        windows = min(windows, a.max_windows)
    nll, count = 0.0, 0
    with torch.no_grad():
        for w in range(windows):
            x = torch.tensor([ids[w * a.window:(w + 1) * a.window]], device=a.device)
            logits = model(x).logits.float()
            logp = torch.log_softmax(logits[0, :-1], dim=-1)
            nll -= logp.gather(1, x[0, 1:, None]).sum().item()
            count += a.window - 1
    print(json.dumps({"perplexity": math.exp(nll / count), "windows": windows, "tokens": count}))


if __name__ == "__main__":
    main()
