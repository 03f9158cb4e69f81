#!/usr/bin/env python3
"""Independent float64 activation patching on the GPT-2 fixture: writes the
golden file tests/data/reference/patch-gpt2-random-hub-layout.safetensors
(the tests compare attnscope's engine::RunPatching and `attnscope patch`
with it; the tests never run Python).

Written from the definition (service/analysis/definitions.md, "Activation
patching") over the project's float64 GPT-2 (scripts/reference/
gpt2_reference.py's weights and layer norm, the forward written again here
with the two hooks), not from attnscope's C++:

  clean      the fixture's own prompt (its reference input_ids, T = 20)
  corrupted  the same ids with positions 4 and 9 replaced by (id + 500) mod V
  metric     logit(a) - logit(b) at the last position, a = the clean run's
             top prediction, b = the corrupted run's
  heads      for each (layer, head): the corrupted run with that head's
             weighted values (probs @ v, every position) taken from the clean
             run; recovery = (metric - corrupted) / (clean - corrupted)
  residual   for each (layer, position): the corrupted run with the residual
             stream entering that layer at that position taken from the
             clean run (layer 0: the embeddings)

Before writing, the script checks itself: its unpatched clean pass against
the fixture's Hugging Face logits; patching the residual at layer 0 of the
two changed positions gives the clean metric exactly, and at any other
position leaves the corrupted metric unchanged.

Usage (from the repository root; Debian's python3-torch):
  /usr/bin/python3 scripts/reference/patch_reference.py [--check]
"""
import argparse
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt2_reference import activation, layer_norm, load_checkpoint, read_safetensors  # noqa: E402
from lens_reference import write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURE = "gpt2-random-hub-layout"
OUT = os.path.join(ROOT, "tests/data/reference", f"patch-{FIXTURE}.safetensors")
CHANGED = (4, 9)


def forward(config, w, ids, head_patches=None, resid_patches=None, record=None):
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only the self-check")
    args = parser.parse_args()
    d = os.path.join(ROOT, "tests/data/models", FIXTURE)
    config, w = load_checkpoint(d)
    ref = read_safetensors(os.path.join(d, "reference.safetensors"))
    clean = [int(i) for i in ref["input_ids"]]
    V, L, H, T = config["vocab_size"], config["n_layer"], config["n_head"], len(clean)
    corrupted = list(clean)
    for pos in CHANGED:
        corrupted[pos] = (corrupted[pos] + 500) % V
    record = {}
    z_clean = forward(config, w, clean, record=record)
    diff = (z_clean - ref["logits"][-1].double()).abs().max().item()
    print(f"clean pass vs the fixture's HF logits (last row): max |diff| {diff:.2e}")
    if not diff < 1e-4:
        sys.exit("the float64 forward does not match Hugging Face")
    z_corrupted = forward(config, w, corrupted)
    a, b = int(torch.argmax(z_clean)), int(torch.argmax(z_corrupted))
    metric = lambda z: float(z[a] - z[b])  # noqa: E731
    m_clean, m_corrupted = metric(z_clean), metric(z_corrupted)
    print(f"targets a = {a}, b = {b}: clean {m_clean:.6f}, corrupted {m_corrupted:.6f}")
    if a == b or not abs(m_clean - m_corrupted) > 1e-3:
        sys.exit("the prompts do not disagree: choose another corruption")
    span = m_clean - m_corrupted
    heads_metric = torch.zeros(L, H, dtype=torch.float64)
    for layer in range(L):
        for h in range(H):
            z = forward(config, w, corrupted, head_patches={(layer, h): record["heads"][(layer, h)]})
            heads_metric[layer, h] = metric(z)
    resid_metric = torch.zeros(L, T, dtype=torch.float64)
    for layer in range(L):
        for pos in range(T):
            z = forward(config, w, corrupted, resid_patches={(layer, pos): record["resid"][layer][pos]})
            resid_metric[layer, pos] = metric(z)
    # Self-checks: the embeddings of the changed positions are all that differ.
    z = forward(config, w, corrupted,
                resid_patches={(0, pos): record["resid"][0][pos] for pos in CHANGED})
    full = abs(metric(z) - m_clean)
    print(f"residual at layer 0 of the changed positions patched: |metric - clean| {full:.1e}")
    if not full < 1e-9:
        sys.exit("patching the embeddings does not give the clean run")
    untouched = (resid_metric[0, [p for p in range(T) if p not in CHANGED]] - m_corrupted).abs().max().item()
    print(f"residual at layer 0 of an unchanged position: |metric - corrupted| {untouched:.1e}")
    if not untouched < 1e-9:
        sys.exit("patching an unchanged position changed the run")
    print("head recoveries (layer x head):")
    print(((heads_metric - m_corrupted) / span).numpy().round(4))
    if args.check:
        return
    write_safetensors({
        "clean_ids": torch.tensor(clean, dtype=torch.int64),
        "corrupted_ids": torch.tensor(corrupted, dtype=torch.int64),
        "targets": torch.tensor([a, b], dtype=torch.int64),
        "metrics": torch.tensor([m_clean, m_corrupted], dtype=torch.float64),
        "heads_metric": heads_metric,
        "heads_recovery": (heads_metric - m_corrupted) / span,
        "residual_metric": resid_metric,
        "residual_recovery": (resid_metric - m_corrupted) / span,
    }, OUT, {"producer": "scripts/reference/patch_reference.py",
             "fixture": f"tests/data/models/{FIXTURE}"})
    print(f"wrote {os.path.relpath(OUT, ROOT)}")


if __name__ == "__main__":
    main()
