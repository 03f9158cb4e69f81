#!/usr/bin/env python3
"""Independent float64 GPT-2 forward pass that writes the reference tensors
under tests/data/reference/ (the tests compare attnscope's float32 forward
pass with them; the tests never run Python).

Written from the GPT-2 definition (docs/architectures.md of the shared
material, Hugging Face's GPT2Model semantics), not from attnscope's C++: token
+ position embeddings; per block pre-LayerNorm causal self-attention (Conv1D
weights stored (in, out), scores scaled by 1/sqrt(head_dim) when
scale_attn_weights, and by 1/(layer_index + 1) as well when
scale_attn_by_inverse_layer_idx) and a pre-LayerNorm MLP with the configured
activation (gelu_new: tanh approximation, gelu: exact erf, relu); final
LayerNorm; logits with the tied token embedding. Everything in float64 from
the checkpoint's stored values.

Usage (from the repository root, Debian's python3-torch):
  /usr/bin/python3 scripts/reference/gpt2_reference.py [--check]
--check only compares this implementation with the fixtures' Hugging Face
reference tensors (tests/data/models/*/reference.safetensors) and prints the
largest differences.
"""
import argparse
import json
import math
import os
import struct
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURE = os.path.join(ROOT, "tests/data/models/gpt2-random-hub-layout")
BUNDLED = os.path.join(ROOT, "models/tiny-gpt2")
OUT_DIR = os.path.join(ROOT, "tests/data/reference")

# "The cat sat on the keyboard again." in GPT-2's tokenizer.
CAT_IDS = [464, 3797, 3332, 319, 262, 10586, 757, 13]

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
          "I64": torch.int64, "F64": torch.float64}
NAMES = {v: k for k, v in DTYPES.items()}


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = bytearray(blob[base + begin:base + end])
        t = torch.frombuffer(raw, dtype=DTYPES[info["dtype"]]) if raw else \
            torch.empty(0, dtype=DTYPES[info["dtype"]])
        out[name] = t.reshape(info["shape"]).clone()
    return out


def write_safetensors(tensors, path, metadata):
    header, chunks, offset = {"__metadata__": metadata}, [], 0
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        data = t.numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def load_checkpoint(d):
    with open(os.path.join(d, "config.json")) as f:
        config = json.load(f)
    index = os.path.join(d, "model.safetensors.index.json")
    weights = {}
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
        for name in files:
            weights.update(read_safetensors(os.path.join(d, name)))
    else:
        weights = read_safetensors(os.path.join(d, "model.safetensors"))
    weights = {k[len("transformer."):] if k.startswith("transformer.") else k: v.double()
               for k, v in weights.items()}
    return config, weights


def layer_norm(x, w, b, eps):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * w + b


def activation(name, x):
    if name in ("gelu_new", "gelu_pytorch_tanh"):
        return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    if name == "gelu":
        return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))
    if name == "relu":
        return torch.clamp(x, min=0)
    raise ValueError(f"unsupported activation_function {name}")


def forward(config, w, ids):
    """Returns attentions (L,H,T,T), hidden_states (L+1,T,D), logits (T,V)."""
    T, D, H = len(ids), config["n_embd"], config["n_head"]
    L, hd, eps = config["n_layer"], config["n_embd"] // config["n_head"], config["layer_norm_epsilon"]
    ids_t = torch.tensor(ids)
    x = w["wte.weight"][ids_t] + w["wpe.weight"][torch.arange(T)]
    states, attentions = [x], []
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    for layer in range(L):
        p = f"h.{layer}."
        a = layer_norm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)
        qkv = a @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
        q, k, v = (t.reshape(T, H, hd).transpose(0, 1) for t in qkv.split(D, dim=-1))
        scores = q @ k.transpose(1, 2)
        if config.get("scale_attn_weights", True):
            scores = scores / math.sqrt(hd)
        if config.get("scale_attn_by_inverse_layer_idx", False):
            scores = scores / float(layer + 1)
        scores = scores.masked_fill(~causal, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        attentions.append(probs)
        o = (probs @ v).transpose(0, 1).reshape(T, D)
        x = x + o @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        m = layer_norm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
        m = activation(config["activation_function"], m @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"])
        x = x + m @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
        if layer + 1 < L:
            states.append(x)
    x = layer_norm(x, w["ln_f.weight"], w["ln_f.bias"], eps)
    states.append(x)
    logits = x @ w["wte.weight"].T
    return torch.stack(attentions), torch.stack(states), logits


def check_against_fixtures():
    worst = 0.0
    for name in ("gpt2-random-hub-layout", "gpt2-random-sharded-fp16"):
        d = os.path.join(ROOT, "tests/data/models", name)
        config, w = load_checkpoint(d)
        ref = read_safetensors(os.path.join(d, "reference.safetensors"))
        att, hid, log = forward(config, w, ref["input_ids"].tolist())
        diffs = [(att - ref["attentions"].double()).abs().max().item(),
                 (hid - ref["hidden_states"].double()).abs().max().item(),
                 (log - ref["logits"].double()).abs().max().item()]
        print(f"{name}: max |diff| vs HF reference: attentions {diffs[0]:.2e} "
              f"hidden {diffs[1]:.2e} logits {diffs[2]:.2e}")
        worst = max([worst] + diffs)
    if not worst < 1e-4:
        sys.exit(f"this reference disagrees with the fixtures' HF tensors ({worst:.2e})")


def tensors(prefix, ids, att, hid, log):
    return {prefix + "input_ids": torch.tensor(ids, dtype=torch.int64),
            prefix + "attentions": att.float(), prefix + "hidden_states": hid.float(),
            prefix + "logits": log.float()}


def fixture_references():
    """Variants of the small fixture: activation and attention-scaling
    branches on the fixture's own prompt, and the base config at T = 1 and
    at T = n_positions (there only the last row of logits, 64 x 1000 would
    be 256 kB)."""
    config, w = load_checkpoint(FIXTURE)
    prompt = read_safetensors(os.path.join(FIXTURE, "reference.safetensors"))["input_ids"].tolist()
    out = {}
    variants = {"gelu": {"activation_function": "gelu"},
                "relu": {"activation_function": "relu"},
                "inverse_layer_idx": {"scale_attn_by_inverse_layer_idx": True}}
    for name, change in variants.items():
        out.update(tensors(name + ".", prompt, *forward({**config, **change}, w, prompt)))
    one = [prompt[0]]
    full = [(37 * i + 11) % config["vocab_size"] for i in range(config["n_positions"])]
    out.update(tensors("t1.", one, *forward(config, w, one)))
    full_tensors = tensors("full.", full, *forward(config, w, full))
    full_tensors["full.logits_last"] = full_tensors.pop("full.logits")[-1].contiguous()
    out.update(full_tensors)
    meta = {"source": "tests/data/models/gpt2-random-hub-layout",
            "made_by": "scripts/reference/gpt2_reference.py (float64)",
            "variants": json.dumps(variants)}
    write_safetensors(out, os.path.join(OUT_DIR, "gpt2-fixture-variants.safetensors"), meta)


def bundled_reference():
    """models/tiny-gpt2 on the cat prompt: all attentions and hidden states,
    the logits of the last position only (the full (T, 50257) matrix would
    be 1.6 MB; the last hidden state pins the rest through the tied head)."""
    config, w = load_checkpoint(BUNDLED)
    att, hid, log = forward(config, w, CAT_IDS)
    out = tensors("", CAT_IDS, att, hid, log)
    out["logits_last"] = out.pop("logits")[-1].contiguous()
    meta = {"source": "models/tiny-gpt2", "prompt": "The cat sat on the keyboard again.",
            "made_by": "scripts/reference/gpt2_reference.py (float64)"}
    write_safetensors(out, os.path.join(OUT_DIR, "tiny-gpt2-cat.safetensors"), meta)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only compare with the fixtures")
    args = parser.parse_args()
    torch.set_default_dtype(torch.float64)
    check_against_fixtures()
    if args.check:
        return
    os.makedirs(OUT_DIR, exist_ok=True)
    fixture_references()
    bundled_reference()
    for name in sorted(os.listdir(OUT_DIR)):
        if name.endswith(".safetensors"):
            print(name, os.path.getsize(os.path.join(OUT_DIR, name)), "bytes")


if __name__ == "__main__":
    main()
