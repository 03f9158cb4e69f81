#!/usr/bin/env python3
"""Independent float64 logit lens and attention rollout: writes the golden
files tests/data/reference/lens-<fixture>.safetensors (the tests compare
attnscope's LogitLensObserver and AttentionRolloutObserver with them; the
tests never run Python).

Written from the definitions (service/analysis/definitions.md, "Logit lens"
and "Attention rollout") and the families' read-out (the shared
architectures notes, Hugging Face semantics), not from attnscope's C++. Its
inputs are the Hugging Face tensors of each fixture
(tests/data/models/<fixture>/reference.safetensors: input_ids,
hidden_states (L+1, T, D), attentions (L, H, T, T), logits (T, V)) and the
checkpoint's final norm and head:

  logit lens  z = cap(head(norm(X[s])))  for s < L;   z = cap(head(X[L]))
              (Hugging Face's hidden_states[L] is already after the final
              norm); norm: GPT-2 LayerNorm (ln_f, with bias), Llama RMSNorm
              x / sqrt(mean x^2 + eps) * w, Gemma-2 RMSNorm with (1 + w);
              head: wte (GPT-2, tied), lm_head (Llama), embed_tokens
              (Gemma-2, tied); cap: Gemma-2's tanh(z / c) * c with c =
              final_logit_softcapping, the identity elsewhere.
              p = softmax(z); per (state, position): the top K ids (larger
              z first, ties by lower id) with p, p and rank of the next
              token (rank 0 = the most likely; ties by lower id), entropy
              -sum p log p in nats.
  rollout     Abar_l = mean over heads of A_l; Rhat_l = rows of
              (Abar_l + I) / 2 divided by their sums; R_l = Rhat_l R_{l-1},
              R_0 = I; row q of R_l for q in (T // 2, T - 1).

Everything in float64. Before writing, the script checks itself: the last
state's lens logits against the fixture's own logits (HF's float32).

Usage (from the repository root; Debian's python3-torch):
  /usr/bin/python3 scripts/reference/lens_reference.py [--check]
"""
import argparse
import json
import math
import os
import struct
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT_DIR = os.path.join(ROOT, "tests/data/reference")
FIXTURES = ["gpt2-random-hub-layout", "llama", "gemma2"]
TOP_K = 5

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
          "I64": torch.int64, "F64": torch.float64}
NAMES = {v: k for k, v in DTYPES.items()}


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = bytearray(blob[8 + n + begin:8 + n + end])
        out[name] = torch.frombuffer(raw, dtype=DTYPES[info["dtype"]]).reshape(info["shape"]).clone()
    return out


def write_safetensors(tensors, path, metadata):
    header, chunks, offset = {"__metadata__": metadata}, [], 0
    for name in sorted(tensors):
        data = tensors[name].contiguous().numpy().tobytes()
        header[name] = {"dtype": NAMES[tensors[name].dtype], "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def read_out(model_type, config, w):
    """(norm, head, cap) of a family, each a float64 function or matrix."""
    f64 = {k: v.double() for k, v in w.items()}
    if model_type == "gpt2":
        eps = config["layer_norm_epsilon"]
        g, b = f64["ln_f.weight"], f64["ln_f.bias"]

        def norm(x):
            mu = x.mean(-1, keepdim=True)
            var = ((x - mu) ** 2).mean(-1, keepdim=True)
            return (x - mu) / torch.sqrt(var + eps) * g + b
        return norm, f64["wte.weight"], lambda z: z
    eps = config["rms_norm_eps"]
    g = f64["model.norm.weight"]
    if model_type == "llama":
        def norm(x):
            return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * g
        head = f64["lm_head.weight"] if not config.get("tie_word_embeddings", True) \
            else f64["model.embed_tokens.weight"]
        return norm, head, lambda z: z
    if model_type == "gemma2":
        cap = config.get("final_logit_softcapping")

        def norm(x):
            return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * (1.0 + g)
        softcap = (lambda z: torch.tanh(z / cap) * cap) if cap else (lambda z: z)
        return norm, f64["model.embed_tokens.weight"], softcap
    raise ValueError(model_type)


def lens_cells(z, ids):
    """z (T, V) float64 -> top ids/probs, next p/rank, entropy per row."""
    t, v = z.shape
    logp = z - torch.logsumexp(z, -1, keepdim=True)
    p = logp.exp()
    entropy = -(p * logp).sum(-1)
    order = torch.sort(z, dim=-1, descending=True, stable=True).indices[:, :TOP_K]
    top_p = torch.gather(p, 1, order)
    next_p = torch.full((t,), float("nan"), dtype=torch.float64)
    next_rank = torch.full((t,), -1, dtype=torch.int64)
    arange = torch.arange(v)
    for i in range(t - 1):
        n = int(ids[i + 1])
        next_p[i] = p[i, n]
        next_rank[i] = int(((z[i] > z[i, n]) | ((z[i] == z[i, n]) & (arange < n))).sum())
    return order, top_p, next_p, next_rank, entropy


def rollout(att, queries):
    """att (L, H, T, T) -> (L, len(queries), T) rows of R_l."""
    l, _, t, _ = att.shape
    r = torch.eye(t, dtype=torch.float64)
    rows = []
    for layer in range(l):
        a = att[layer].double().mean(0)
        rhat = (a + torch.eye(t, dtype=torch.float64)) / 2
        rhat = rhat / rhat.sum(-1, keepdim=True)
        r = rhat @ r
        rows.append(r[queries])
    return torch.stack(rows)


def fixture_golden(name):
    d = os.path.join(ROOT, "tests/data/models", name)
    with open(os.path.join(d, "config.json")) as f:
        config = json.load(f)
    ref = read_safetensors(os.path.join(d, "reference.safetensors"))
    norm, head, cap = read_out(config["model_type"], config,
                               read_safetensors(os.path.join(d, "model.safetensors")))
    hidden = ref["hidden_states"].double()
    ids = ref["input_ids"]
    states = hidden.shape[0]
    outs = [[] for _ in range(5)]
    for s in range(states):
        x = hidden[s] if s == states - 1 else norm(hidden[s])
        z = cap(x @ head.t())
        if s == states - 1:
            diff = (z - ref["logits"].double()).abs().max().item()
            print(f"{name}: last state's lens logits vs the fixture's logits: max |diff| {diff:.2e}")
            if not diff < 1e-4:
                sys.exit(f"{name}: the last state does not give the model's logits")
        for out, value in zip(outs, lens_cells(z, ids)):
            out.append(value)
    t = ids.shape[0]
    queries = torch.tensor([t // 2, t - 1], dtype=torch.int64)
    rows = rollout(ref["attentions"], queries)
    sums = (rows.sum(-1) - 1).abs().max().item()
    print(f"{name}: rollout rows sum to 1 within {sums:.1e}")
    tensors = {
        "input_ids": ids.to(torch.int64),
        "lens_top_ids": torch.stack(outs[0]), "lens_top_p": torch.stack(outs[1]),
        "lens_next_p": torch.stack(outs[2]), "lens_next_rank": torch.stack(outs[3]),
        "lens_entropy": torch.stack(outs[4]),
        "rollout_queries": queries, "rollout": rows,
    }
    return tensors


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only the self-check")
    args = parser.parse_args()
    for name in FIXTURES:
        tensors = fixture_golden(name)
        if args.check:
            continue
        path = os.path.join(OUT_DIR, f"lens-{name}.safetensors")
        write_safetensors(tensors, path, {"producer": "scripts/reference/lens_reference.py",
                                          "fixture": f"tests/data/models/{name}",
                                          "top_k": str(TOP_K)})
        print(f"wrote {os.path.relpath(path, ROOT)}")


if __name__ == "__main__":
    main()
