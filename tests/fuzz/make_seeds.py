#!/usr/bin/env python3
"""Seed corpora for the fuzz targets, built from the shared reference files (never copied into the repository).

usage: make_seeds.py SHARED_DIR REPO_DIR OUT_DIR

Writes OUT_DIR/<target>/<name> for the targets fuzz_safetensors, fuzz_config, fuzz_tokenizer and fuzz_recipe.
Real files are cut down to something a fuzzer can mutate quickly (a few KB): tokenizers keep their pipeline and
the first few hundred vocabulary entries, the model checkpoint keeps its real header with shapes shrunk so the
data fits. Seeds from a missing shared folder are skipped with a note; the synthetic ones are always written.
"""
import json
import os
import struct
import sys


def write(out, target, name, data):
    folder = os.path.join(out, target)
    os.makedirs(folder, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def safetensors_image(entries, metadata=None):
    """entries: [(name, dtype, shape, bytes)] laid out back to back."""
    header, data = {}, b""
    for name, dtype, shape, payload in entries:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(payload)]}
        data += payload
    if metadata is not None:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


SIZES = {"F32": 4, "F16": 2, "BF16": 2, "I32": 4, "I16": 2, "I8": 1, "U8": 1}


def safetensors_seeds(shared, out):
    t = "fuzz_safetensors"
    entries = []
    for i, (dtype, shape) in enumerate([("F32", [2, 2]), ("F16", [3]), ("BF16", [1, 4]), ("I32", [2]),
                                         ("I16", [2, 1]), ("I8", [5]), ("U8", [0, 3]), ("F32", [])]):
        entries.append((f"t{i}", dtype, shape, bytes(range(SIZES[dtype] * _numel(shape)))))
    write(out, t, "synthetic-dtypes", safetensors_image(entries, {"format": "pt", "producer": "seed"}))
    write(out, t, "synthetic-empty", safetensors_image([]))
    write(out, t, "synthetic-one", safetensors_image([("w", "F32", [1], b"\0\0\x80\x3f")]))
    path = os.path.join(shared, "models", "ref-tiny", "model.safetensors")
    if not os.path.exists(path):
        print(f"make_seeds: {path} missing, only synthetic safetensors seeds", file=sys.stderr)
        return
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        f.seek(0)
        write(out, t, "ref-tiny-first-4k", f.read(4096))   # the real header, data cut off
    # The real names and dtypes with every dimension capped at 2, so the data section stays tiny.
    shrunk = []
    for name, e in sorted(header.items()):
        if name == "__metadata__":
            continue
        shape = [min(d, 2) for d in e["shape"]]
        shrunk.append((name, e["dtype"], shape, bytes(SIZES[e["dtype"]] * _numel(shape))))
    write(out, t, "ref-tiny-shrunk", safetensors_image(shrunk, header.get("__metadata__")))


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


SYNTHETIC_CONFIGS = {
    "llama31": {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 128256,
                "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
                "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 131072,
                "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
                "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                 "original_max_position_embeddings": 8192, "rope_type": "llama3"},
                "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu",
                "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False,
                "torch_dtype": "bfloat16"},
    "qwen3": {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 151936,
              "hidden_size": 2560, "intermediate_size": 9728, "num_hidden_layers": 36, "num_attention_heads": 32,
              "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 40960, "rms_norm_eps": 1e-06,
              "rope_theta": 1000000, "rope_scaling": None, "use_sliding_window": False, "sliding_window": None,
              "tie_word_embeddings": True, "bos_token_id": 151643, "eos_token_id": 151645, "hidden_act": "silu"},
    "qwen2": {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "vocab_size": 151936,
              "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14,
              "num_key_value_heads": 2, "max_position_embeddings": 32768, "rms_norm_eps": 1e-06,
              "rope_theta": 1000000.0, "use_sliding_window": True, "sliding_window": 32768,
              "tie_word_embeddings": True, "hidden_act": "silu"},
    "mistral": {"architectures": ["MistralForCausalLM"], "model_type": "mistral", "vocab_size": 32000,
                "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
                "num_attention_heads": 32, "num_key_value_heads": 8, "sliding_window": 4096,
                "max_position_embeddings": 32768, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
                "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu"},
    "llama1": {"architectures": ["LlamaForCausalLM"], "vocab_size": 32000, "hidden_size": 4096,
               "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32,
               "max_position_embeddings": 2048, "rms_norm_eps": 1e-06},
}


def config_seeds(shared, out):
    for name, cfg in SYNTHETIC_CONFIGS.items():
        write(out, "fuzz_config", name, json.dumps(cfg, indent=1))
    for model in ("ref-tiny", "ref-small"):
        path = os.path.join(shared, "models", model, "config.json")
        if os.path.exists(path):
            write(out, "fuzz_config", model, open(path, "rb").read())
        else:
            print(f"make_seeds: {path} missing", file=sys.stderr)


TEXTS = ["Hello world! It's 2024, isn't it?  ", "def f(x):\n\treturn x ** 2  # \u00e9t\u00e9\r\n",
         "\u4f60\u597d\uff0c\u4e16\u754c \U0001F600 caf\u00e9 na\u00efve"]


def trim_tokenizer(t, keep):
    """The tokenizer with ids < keep, the merges among them, and the added tokens renumbered right after."""
    model = t["model"]
    vocab = {tok: i for tok, i in model["vocab"].items() if i < keep}
    merges = []
    for m in model.get("merges", []):
        a, b = m.split(" ", 1) if isinstance(m, str) else m
        if a in vocab and b in vocab and a + b in vocab:
            merges.append(m)
    model = dict(model, vocab=vocab, merges=merges)
    renumber = {}
    added = []
    for i, a in enumerate(t.get("added_tokens", [])[:8]):
        new_id = a["id"] if a["id"] < keep else keep + i
        renumber[a["id"]] = new_id
        added.append(dict(a, id=new_id))
    trimmed = dict(t, model=model, added_tokens=added)
    post = trimmed.get("post_processor")
    if isinstance(post, dict) and post.get("type") == "TemplateProcessing":
        specials = {}
        for key, s in post.get("special_tokens", {}).items():
            specials[key] = dict(s, ids=[renumber.get(i, i) for i in s.get("ids", [])])
        trimmed["post_processor"] = dict(post, special_tokens=specials)
    return trimmed


def tokenizer_seeds(shared, out):
    sources = {"ref": os.path.join(shared, "models", "ref-tiny", "tokenizer.json")}
    for name in ("llama3", "qwen3", "spm-bpe-32k"):
        sources[name] = os.path.join(shared, "tokenizers", name, "tokenizer.json")
    for name, path in sources.items():
        if not os.path.exists(path):
            print(f"make_seeds: {path} missing", file=sys.stderr)
            continue
        trimmed = json.dumps(trim_tokenizer(json.load(open(path, encoding="utf-8")), 300), ensure_ascii=False)
        write(out, "fuzz_tokenizer", name, trimmed)
        for i, text in enumerate(TEXTS):
            write(out, "fuzz_tokenizer", f"{name}-text{i}", trimmed.encode() + b"\0" + text.encode())


def recipe_seeds(repo, out):
    folder = os.path.join(repo, "resources", "recipes")
    for name in sorted(os.listdir(folder)):
        if name.endswith(".json"):
            write(out, "fuzz_recipe", name, open(os.path.join(folder, name), "rb").read())
    write(out, "fuzz_recipe", "overrides.json", json.dumps({
        "calibration": {"source": "decode", "prompts": "prompts.txt", "tokens": 4096, "max_new_tokens": 64,
                        "seed": 1},
        "prune": {"method": "sparsegpt", "pattern": "2:4", "damp": 0.01, "block": 128},
        "quantize": {"method": "gptq", "bits": 4, "granularity": "group", "group_size": 128, "symmetric": True,
                     "act_order": True},
        "skip": ["lm_head", "*.mlp.down_proj"],
        "overrides": [{"match": "model.layers.0.*", "prune": None},
                      {"match": "model.layers.[12].self_attn.*", "quantize": {"bits": 8}}]}))


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    shared, repo, out = sys.argv[1:]
    safetensors_seeds(shared, out)
    config_seeds(shared, out)
    tokenizer_seeds(shared, out)
    recipe_seeds(repo, out)


if __name__ == "__main__":
    main()
