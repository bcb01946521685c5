#!/usr/bin/env python3
"""Compare pareto-cli with Hugging Face transformers on small random models of every supported family.

Builds tiny Llama-3.1 (llama3 RoPE scaling), Mistral (sliding window), Qwen2 (q/k/v bias) and Qwen3 (q/k norm,
head_dim != hidden/heads) checkpoints with random weights, saves them as safetensors next to the reference
tokenizer, and checks that `pareto-cli score` (nll_sum, top-10) and `pareto-cli generate --greedy` agree with
transformers in float32. Needs torch, transformers and tokenizers (the GPU machine has them).

  compare_transformers.py --cli build/app/cli/pareto-cli --tokenizer DIR_WITH_tokenizer.json [--device cuda]
"""
import argparse
import json
import shutil
import subprocess
import sys
import tempfile

import torch
import transformers
from tokenizers import Tokenizer

PROMPT = ("The history of the United States is the story of a people who crossed an ocean, "
          "built towns along the rivers and wrote a constitution")

COMMON = dict(vocab_size=8192, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
              rms_norm_eps=1e-6, bos_token_id=0, eos_token_id=1, tie_word_embeddings=False)

MAJOR = int(transformers.__version__.split(".")[0])


def families():
    llama3_rope = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 64}
    if MAJOR >= 5:
        llama = dict(rope_parameters=dict(llama3_rope, rope_theta=500000.0))
    else:
        llama = dict(rope_theta=500000.0, rope_scaling=llama3_rope)
    return {
        "llama3": ("llama", dict(llama)),
        "mistral": ("mistral", dict(sliding_window=8)),
        "qwen2": ("qwen2", dict(tie_word_embeddings=True)),
        "qwen3": ("qwen3", dict(head_dim=48, tie_word_embeddings=True)),
    }


def run_cli(cli, args):
    out = subprocess.run([cli] + args + ["--json"], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"pareto-cli {' '.join(args)} failed ({out.returncode}): {out.stderr.strip()}")
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--tokenizer", required=True, help="folder holding the reference tokenizer.json")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--keep", help="keep the generated models in this folder")
    a = ap.parse_args()

    tok = Tokenizer.from_file(a.tokenizer + "/tokenizer.json")
    ids = [0] + tok.encode(PROMPT, add_special_tokens=False).ids
    work = a.keep or tempfile.mkdtemp(prefix="pareto-hf-")
    failures = 0
    for name, (model_type, extra) in families().items():
        torch.manual_seed(1234)
        cfg = transformers.AutoConfig.for_model(model_type, **dict(COMMON, **extra))
        cfg._attn_implementation = "eager"
        model = transformers.AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.float32).eval()
        with torch.no_grad():   # larger weights than the default init, so logits are far from ties
            for p in model.parameters():
                if p.dim() == 2:
                    p.normal_(0, 0.08)
        folder = f"{work}/{name}"
        model.save_pretrained(folder, safe_serialization=True)
        shutil.copy(a.tokenizer + "/tokenizer.json", folder + "/tokenizer.json")
        x = torch.tensor([ids])
        with torch.no_grad():
            logits = model(x).logits[0].double()
            logp = torch.log_softmax(logits[:-1], -1)
            nll = -logp.gather(-1, x[0, 1:, None]).sum().item()
            top10 = torch.topk(logits[-1], 10).indices.tolist()
            gen = model.generate(x, max_new_tokens=16, do_sample=False,
                                 pad_token_id=1)[0, len(ids):].tolist()

        dev = ["--device", a.device]
        s = run_cli(a.cli, ["score", "--model", folder, "--prompt", PROMPT] + dev)
        g = run_cli(a.cli, ["generate", "--model", folder, "--prompt", PROMPT, "--max-new-tokens", "16",
                            "--greedy"] + dev)
        rel = abs(s["nll_sum"] - nll) / abs(nll)
        ok = s["ids"] == ids and rel < 1e-4 and s["last_top10"][:5] == top10[:5] and g["ids"] == gen
        failures += not ok
        print(f"{name:8s} {'OK  ' if ok else 'FAIL'} nll_sum pareto {s['nll_sum']:.6f} transformers {nll:.6f} "
              f"(rel {rel:.1e}); top5 {'same' if s['last_top10'][:5] == top10[:5] else 'DIFFERENT'}; "
              f"greedy16 {'same' if g['ids'] == gen else 'DIFFERENT: ' + str(g['ids']) + ' vs ' + str(gen)}")
    print(f"transformers {transformers.__version__}, device {a.device}: "
          f"{'all families match' if failures == 0 else str(failures) + ' families differ'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
