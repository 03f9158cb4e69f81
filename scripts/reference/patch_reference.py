#!/usr/bin/env python3
"""Independent float64 activation patching on the GPT-2, Llama and Gemma-2
fixtures: writes the golden files tests/data/reference/patch-<fixture>.safetensors
(the tests compare attnscope's engine::RunPatching and `attnscope patch`
with them; the tests never run Python).

Written from the definition (service/analysis/definitions.md, "Activation
patching") and Hugging Face's computation of each family (the shared
architectures notes), not from attnscope's C++: GPT-2 over the project's
float64 GPT-2 (scripts/reference/gpt2_reference.py's weights and layer
norm); Llama and Gemma-2 over scripts/reference/dla_reference.py's float64
pieces (norms, values, output columns, MLPs), with the queries, keys,
rotary embedding, grouped heads, Gemma-2's query_pre_attn_scalar,
attention soft-capping, sliding window on even layers, embedding scale and
final soft-capping written here:

  clean      the fixture's own prompt (its reference input_ids)
  corrupted  the same ids with two positions (CHANGED) replaced by
             (id + SHIFT) mod V
  metric     logit(a) - logit(b) at the last position (after soft-capping),
             a = the clean run's top prediction, b = the corrupted run's
  heads      for each (layer, head): the corrupted run with that head's
             weighted values (probs @ v, every position) taken from the
             clean run; recovery = (metric - corrupted) / (clean - corrupted)
  residual   for each (layer, position): the corrupted run with the residual
             stream entering that layer at that position taken from the
             clean run (layer 0: the embeddings, Gemma-2's scaled)

Before writing, the script checks itself: its unpatched clean pass against
the fixture's Hugging Face logits; patching the residual at layer 0 of the
two changed positions gives the clean metric exactly, and at any other
position leaves the corrupted metric unchanged.

Usage (from the repository root; Debian's python3-torch):
  /usr/bin/python3 scripts/reference/patch_reference.py [--check]
"""
import argparse
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt2_reference import activation, layer_norm, load_checkpoint, read_safetensors  # noqa: E402
from lens_reference import write_safetensors  # noqa: E402
import dla_reference  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# fixture: (changed positions, id shift)
FIXTURES = {"gpt2-random-hub-layout": ((4, 9), 500), "llama": ((3, 7), 101),
            "gemma2": ((5, 31), 77)}


def forward_gpt2(config, w, ids, head_patches=None, resid_patches=None, record=None):
    """Last-position logits (V). head_patches: {(layer, head): (T, d)};
    resid_patches: {(layer, position): (D)}; record: dict filled with
    'heads' {(layer, head): (T, d)} and 'resid' {layer: (T, D)}."""
    head_patches, resid_patches = head_patches or {}, resid_patches or {}
    T, D, H = len(ids), config["n_embd"], config["n_head"]
    L, hd, eps = config["n_layer"], D // H, config["layer_norm_epsilon"]
    x = w["wte.weight"][torch.tensor(ids)] + w["wpe.weight"][torch.arange(T)]
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    for layer in range(L):
        x = x.clone()
        for (pl, pos), row in resid_patches.items():
            if pl == layer:
                x[pos] = row
        if record is not None:
            record.setdefault("resid", {})[layer] = x.clone()
        p = f"h.{layer}."
        a = layer_norm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"], eps)
        qkv = a @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]
        q, k, v = (t.reshape(T, H, hd).transpose(0, 1) for t in qkv.split(D, dim=-1))
        scores = (q @ k.transpose(1, 2)) / math.sqrt(hd)
        probs = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
        o = probs @ v  # (H, T, d)
        for h in range(H):
            if record is not None:
                record.setdefault("heads", {})[(layer, h)] = o[h].clone()
            if (layer, h) in head_patches:
                o[h] = head_patches[(layer, h)]
        o = o.transpose(0, 1).reshape(T, D)
        x = x + o @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        m = layer_norm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"], eps)
        m = activation(config["activation_function"], m @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"])
        x = x + m @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    x = layer_norm(x, w["ln_f.weight"], w["ln_f.bias"], eps)
    return x[-1] @ w["wte.weight"].T


def rotary(x, theta):
    """x (heads, T, d) rotated at positions 0..T-1 (rotate_half's halves)."""
    T, d = x.shape[1], x.shape[2]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    angles = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
    cos, sin = torch.cat([angles, angles], -1).cos(), torch.cat([angles, angles], -1).sin()
    return x * cos + torch.cat([-x[..., d // 2:], x[..., :d // 2]], -1) * sin


def forward_decoder(fam, ids, head_patches=None, resid_patches=None, record=None):
    """forward_gpt2's contract for a Llama or Gemma-2 Family."""
    head_patches, resid_patches = head_patches or {}, resid_patches or {}
    c, gemma = fam.c, fam.kind == "gemma2"
    T, D, H, KV, d, L = len(ids), fam.D, fam.H, fam.KV, fam.d, fam.L
    x = fam.p("model.embed_tokens.weight")[torch.tensor(ids)]
    if gemma:
        x = x * math.sqrt(D)
    q_idx = torch.arange(T)[:, None]
    k_idx = torch.arange(T)[None, :]
    causal = k_idx <= q_idx
    scale = c["query_pre_attn_scalar"] ** -0.5 if gemma else d ** -0.5
    for layer in range(L):
        x = x.clone()
        for (pl, pos), row in resid_patches.items():
            if pl == layer:
                x[pos] = row
        if record is not None:
            record.setdefault("resid", {})[layer] = x.clone()
        n = fam.norm1(layer, x)
        pre = f"model.layers.{layer}.self_attn."
        q = (n @ fam.p(pre + "q_proj.weight").t()).view(T, H, d).transpose(0, 1)
        k = (n @ fam.p(pre + "k_proj.weight").t()).view(T, KV, d).transpose(0, 1)
        q, k = rotary(q, c["rope_theta"]), rotary(k, c["rope_theta"])
        v = fam.values(layer, x)
        mask = causal
        if gemma and layer % 2 == 0 and c.get("sliding_window"):
            mask = mask & (k_idx > q_idx - c["sliding_window"])
        raw = fam.out_bias(layer).expand(T, D).clone()
        for h in range(H):
            g = h // (H // KV)
            scores = (q[h] @ k[g].t()) * scale
            if gemma and c.get("attn_logit_softcapping"):
                cap = c["attn_logit_softcapping"]
                scores = torch.tanh(scores / cap) * cap
            z = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1) @ v[g]
            if record is not None:
                record.setdefault("heads", {})[(layer, h)] = z.clone()
            if (layer, h) in head_patches:
                z = head_patches[(layer, h)]
            raw = raw + z @ fam.out_columns(layer, h)
        post = fam.post_attention(layer, raw)
        x = x + (raw if post is None else post(raw))
        x = x + fam.mlp(layer, x)
    z = fam.final_norm(x)[-1] @ fam.unembedding().t()
    cap = c.get("final_logit_softcapping") if gemma else None
    return torch.tanh(z / cap) * cap if cap else z


def fixture_golden(name):
    """The golden tensors of one fixture, after the self-checks."""
    changed, shift = FIXTURES[name]
    d = os.path.join(ROOT, "tests/data/models", name)
    ref = read_safetensors(os.path.join(d, "reference.safetensors"))
    if name.startswith("gpt2"):
        config, w = load_checkpoint(d)
        V, L, H = config["vocab_size"], config["n_layer"], config["n_head"]
        forward = lambda ids, **kw: forward_gpt2(config, w, ids, **kw)  # noqa: E731
    else:
        with open(os.path.join(d, "config.json")) as f:
            config = json.load(f)
        fam = dla_reference.Family(config, dla_reference.read_safetensors(
            os.path.join(d, "model.safetensors")))
        V, L, H = config["vocab_size"], fam.L, fam.H
        forward = lambda ids, **kw: forward_decoder(fam, ids, **kw)  # noqa: E731
    clean = [int(i) for i in ref["input_ids"]]
    T = len(clean)
    corrupted = list(clean)
    for pos in changed:
        corrupted[pos] = (corrupted[pos] + shift) % V
    record = {}
    z_clean = forward(clean, record=record)
    diff = (z_clean - ref["logits"][-1].double()).abs().max().item()
    print(f"{name}: clean pass vs the fixture's HF logits (last row): max |diff| {diff:.2e}")
    if not diff < 1e-4:
        sys.exit(f"{name}: the float64 forward does not match Hugging Face")
    z_corrupted = forward(corrupted)
    a, b = int(torch.argmax(z_clean)), int(torch.argmax(z_corrupted))
    metric = lambda z: float(z[a] - z[b])  # noqa: E731
    m_clean, m_corrupted = metric(z_clean), metric(z_corrupted)
    print(f"{name}: targets a = {a}, b = {b}: clean {m_clean:.6f}, corrupted {m_corrupted:.6f}")
    if a == b or not abs(m_clean - m_corrupted) > 1e-3:
        sys.exit(f"{name}: the prompts do not disagree: choose another corruption")
    span = m_clean - m_corrupted
    heads_metric = torch.zeros(L, H, dtype=torch.float64)
    for layer in range(L):
        for h in range(H):
            z = forward(corrupted, head_patches={(layer, h): record["heads"][(layer, h)]})
            heads_metric[layer, h] = metric(z)
    resid_metric = torch.zeros(L, T, dtype=torch.float64)
    for layer in range(L):
        for pos in range(T):
            z = forward(corrupted, resid_patches={(layer, pos): record["resid"][layer][pos]})
            resid_metric[layer, pos] = metric(z)
    # Self-checks: the embeddings of the changed positions are all that differ.
    z = forward(corrupted, resid_patches={(0, pos): record["resid"][0][pos] for pos in changed})
    full = abs(metric(z) - m_clean)
    print(f"{name}: residual at layer 0 of the changed positions patched: |metric - clean| {full:.1e}")
    if not full < 1e-9:
        sys.exit(f"{name}: patching the embeddings does not give the clean run")
    untouched = (resid_metric[0, [p for p in range(T) if p not in changed]] - m_corrupted).abs().max().item()
    print(f"{name}: residual at layer 0 of an unchanged position: |metric - corrupted| {untouched:.1e}")
    if not untouched < 1e-9:
        sys.exit(f"{name}: patching an unchanged position changed the run")
    print(f"{name}: head recoveries (layer x head):")
    print(((heads_metric - m_corrupted) / span).numpy().round(4))
    return {
        "clean_ids": torch.tensor(clean, dtype=torch.int64),
        "corrupted_ids": torch.tensor(corrupted, dtype=torch.int64),
        "targets": torch.tensor([a, b], dtype=torch.int64),
        "metrics": torch.tensor([m_clean, m_corrupted], dtype=torch.float64),
        "heads_metric": heads_metric,
        "heads_recovery": (heads_metric - m_corrupted) / span,
        "residual_metric": resid_metric,
        "residual_recovery": (resid_metric - m_corrupted) / span,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only the self-checks")
    args = parser.parse_args()
    for name in FIXTURES:
        tensors = fixture_golden(name)
        if args.check:
            continue
        path = os.path.join(ROOT, "tests/data/reference", f"patch-{name}.safetensors")
        write_safetensors(tensors, path, {"producer": "scripts/reference/patch_reference.py",
                                          "fixture": f"tests/data/models/{name}"})
        print(f"wrote {os.path.relpath(path, ROOT)}")


if __name__ == "__main__":
    main()
