#!/usr/bin/env python3
"""Independent float64 direct logit attribution: writes the golden files
tests/data/reference/dla-<fixture>.safetensors (the tests compare attnscope's
LogitAttributionObserver with them; the tests never run Python).

Written from the definition (service/analysis/definitions.md, "Direct logit
attribution") and Hugging Face's computation of each family (the shared
architectures notes), not from attnscope's C++. Its inputs are the Hugging
Face tensors of each fixture (tests/data/models/<fixture>/reference.safetensors:
input_ids, hidden_states (L+1, T, D), attentions (L, H, T, T), logits (T, V))
and the checkpoint's weights:

  head h of layer l  z_h = A[l,h] @ V_g (g = the head's key/value group;
                     V = the value projection of norm_1(X[l]) with its bias)
                     write_h = z_h @ W_O[:, h's columns]^T (no bias);
                     Gemma-2: through post_attention_layernorm with its scale
                     frozen at the whole attention output's row.
  attention bias     the attention's write less the sum of its heads
                     (GPT-2's c_proj bias; 0 elsewhere).
  MLP of layer l     X[l+1] - X[l] - attention write for l < L - 1; the
                     last layer's MLP computed here from the weights (HF's
                     X[L] is after the final norm), so the final residual r
                     = X[L-1] + attention + MLP.
  read-out           u = the target's unembedding row through the final
                     norm with its scale frozen at r (LayerNorm: centred;
                     Gemma: (1 + w)); contribution = write . u; offset =
                     the norm's bias . unembedding row (GPT-2), 0 elsewhere.
  targets            the next token x_{i+1}; at the last position the model's
                     top prediction (argmax of HF's logits).
  positions          T // 2 and T - 1.

Everything in float64. Before writing, the script checks itself: final_norm(r)
against HF's X[L], cap(sum of contributions + offset) against HF's logits.

Usage (from the repository root; Debian's python3-torch):
  /usr/bin/python3 scripts/reference/dla_reference.py [--check]
"""
import argparse
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lens_reference import read_safetensors, write_safetensors  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT_DIR = os.path.join(ROOT, "tests/data/reference")
FIXTURES = ["gpt2-random-hub-layout", "llama", "gemma2"]


def layer_norm(x, g, b, eps):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * g + b


def rms_scale(x, eps):
    return 1.0 / torch.sqrt((x * x).mean(-1, keepdim=True) + eps)


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


class Family:
    """A family's pieces in float64, from the checkpoint's tensor names."""

    def __init__(self, config, w):
        self.c = config
        self.w = {k: v.double() for k, v in w.items()}
        self.kind = config["model_type"]
        if self.kind == "gpt2":
            self.L, self.H = config["n_layer"], config["n_head"]
            self.D = config["n_embd"]
            self.d = self.D // self.H
            self.KV = self.H
            self.eps = config["layer_norm_epsilon"]
        else:
            self.L, self.H = config["num_hidden_layers"], config["num_attention_heads"]
            self.D = config["hidden_size"]
            self.d = config.get("head_dim") or self.D // self.H
            self.KV = config["num_key_value_heads"]
            self.eps = config["rms_norm_eps"]

    def p(self, name):
        return self.w[name]

    def norm1(self, l, x):
        if self.kind == "gpt2":
            return layer_norm(x, self.p(f"h.{l}.ln_1.weight"), self.p(f"h.{l}.ln_1.bias"), self.eps)
        g = self.p(f"model.layers.{l}.input_layernorm.weight")
        return x * rms_scale(x, self.eps) * ((1.0 + g) if self.kind == "gemma2" else g)

    def values(self, l, x):
        """(KV, T, d) values of norm1(x)."""
        n = self.norm1(l, x)
        if self.kind == "gpt2":
            qkv = n @ self.p(f"h.{l}.attn.c_attn.weight") + self.p(f"h.{l}.attn.c_attn.bias")
            v = qkv[:, 2 * self.D:]
        else:
            v = n @ self.p(f"model.layers.{l}.self_attn.v_proj.weight").t()
        return v.view(-1, self.KV, self.d).transpose(0, 1)

    def out_columns(self, l, h):
        """(d, D): what head h's values are multiplied by."""
        if self.kind == "gpt2":
            return self.p(f"h.{l}.attn.c_proj.weight")[h * self.d:(h + 1) * self.d, :]
        return self.p(f"model.layers.{l}.self_attn.o_proj.weight")[:, h * self.d:(h + 1) * self.d].t()

    def out_bias(self, l):
        if self.kind == "gpt2":
            return self.p(f"h.{l}.attn.c_proj.bias")
        return torch.zeros(self.D, dtype=torch.float64)

    def post_attention(self, l, raw):
        """(norm function with the scale frozen at raw, or None)."""
        if self.kind != "gemma2":
            return None
        g = 1.0 + self.p(f"model.layers.{l}.post_attention_layernorm.weight")
        scale = rms_scale(raw, self.eps)
        return lambda c: c * scale * g

    def mlp(self, l, h):
        if self.kind == "gpt2":
            n = layer_norm(h, self.p(f"h.{l}.ln_2.weight"), self.p(f"h.{l}.ln_2.bias"), self.eps)
            a = gelu_tanh(n @ self.p(f"h.{l}.mlp.c_fc.weight") + self.p(f"h.{l}.mlp.c_fc.bias"))
            return a @ self.p(f"h.{l}.mlp.c_proj.weight") + self.p(f"h.{l}.mlp.c_proj.bias")
        pre = f"model.layers.{l}."
        if self.kind == "llama":
            n = h * rms_scale(h, self.eps) * self.p(pre + "post_attention_layernorm.weight")
            act = torch.nn.functional.silu
        else:
            n = h * rms_scale(h, self.eps) * (1.0 + self.p(pre + "pre_feedforward_layernorm.weight"))
            act = gelu_tanh
        gate = n @ self.p(pre + "mlp.gate_proj.weight").t()
        up = n @ self.p(pre + "mlp.up_proj.weight").t()
        out = (act(gate) * up) @ self.p(pre + "mlp.down_proj.weight").t()
        if self.kind == "gemma2":
            out = out * rms_scale(out, self.eps) * (1.0 + self.p(pre + "post_feedforward_layernorm.weight"))
        return out

    def final_norm(self, r):
        if self.kind == "gpt2":
            return layer_norm(r, self.p("ln_f.weight"), self.p("ln_f.bias"), self.eps)
        g = self.p("model.norm.weight")
        return r * rms_scale(r, self.eps) * ((1.0 + g) if self.kind == "gemma2" else g)

    def unembedding(self):
        if self.kind == "gpt2":
            return self.p("wte.weight")
        if self.kind == "llama" and not self.c.get("tie_word_embeddings", True):
            return self.p("lm_head.weight")
        return self.p("model.embed_tokens.weight")

    def direction(self, r, row):
        """(u, offset) for one final residual row r (D) and unembedding row."""
        if self.kind == "gpt2":
            g, b = self.p("ln_f.weight"), self.p("ln_f.bias")
            wg = row * g
            var = ((r - r.mean()) ** 2).mean()
            return (wg - wg.mean()) / torch.sqrt(var + self.eps), float(row @ b)
        g = self.p("model.norm.weight")
        g = (1.0 + g) if self.kind == "gemma2" else g
        return row * g / torch.sqrt((r * r).mean() + self.eps), 0.0

    def cap(self, z):
        c = self.c.get("final_logit_softcapping") if self.kind == "gemma2" else None
        return math.tanh(z / c) * c if c else z


def fixture_golden(name):
    d = os.path.join(ROOT, "tests/data/models", name)
    with open(os.path.join(d, "config.json")) as f:
        config = json.load(f)
    ref = read_safetensors(os.path.join(d, "reference.safetensors"))
    fam = Family(config, read_safetensors(os.path.join(d, "model.safetensors")))
    X = ref["hidden_states"].double()
    A = ref["attentions"].double()
    ids = ref["input_ids"].to(torch.int64)
    logits = ref["logits"].double()
    T = ids.shape[0]
    L, H = fam.L, fam.H
    heads = torch.zeros(L, H, T, fam.D, dtype=torch.float64)
    attn_bias = torch.zeros(L, T, fam.D, dtype=torch.float64)
    mlp = torch.zeros(L, T, fam.D, dtype=torch.float64)
    attns = []
    for l in range(L):
        v = fam.values(l, X[l])
        raw = fam.out_bias(l).expand(T, fam.D).clone()
        for h in range(H):
            z = A[l, h] @ v[h // (H // fam.KV)]
            heads[l, h] = z @ fam.out_columns(l, h)
            raw += heads[l, h]
        post = fam.post_attention(l, raw)
        attn = raw if post is None else post(raw)
        if post is not None:
            for h in range(H):
                heads[l, h] = post(heads[l, h])
        attn_bias[l] = attn - heads[l].sum(0)
        attns.append(attn)
        mlp[l] = X[l + 1] - X[l] - attn if l + 1 < L else fam.mlp(l, X[l] + attn)
    r = X[L - 1] + attns[L - 1] + mlp[L - 1]
    diff = (fam.final_norm(r) - X[L]).abs().max().item()
    print(f"{name}: final_norm(r) vs HF's last hidden state: max |diff| {diff:.2e}")
    if not diff < 1e-4:
        sys.exit(f"{name}: the reconstructed final residual is wrong")
    # Check the MLP of the first layer from the weights against HF's states.
    check = (fam.mlp(0, X[0] + attns[0]) - mlp[0]).abs().max().item()
    print(f"{name}: layer 0's MLP from the weights vs from HF's states: max |diff| {check:.2e}")
    if not check < 1e-4:
        sys.exit(f"{name}: the MLP does not match Hugging Face's")

    positions = [T // 2, T - 1]
    unembed = fam.unembedding()
    out = {k: [] for k in ("targets", "embedding", "heads", "attention_bias", "mlp", "offset",
                           "logit_before_cap")}
    for i in positions:
        t = int(ids[i + 1]) if i + 1 < T else int(torch.argmax(logits[i]))
        u, offset = fam.direction(r[i], unembed[t])
        emb = float(X[0, i] @ u)
        hc = torch.einsum("lhd,d->lh", heads[:, :, i], u)
        bc = attn_bias[:, i] @ u
        mc = mlp[:, i] @ u
        total = emb + hc.sum().item() + bc.sum().item() + mc.sum().item() + offset
        model = logits[i, t].item()
        err = abs(fam.cap(total) - model)
        print(f"{name}: position {i}, target {t}: sum of contributions {total:.6f}, "
              f"capped {fam.cap(total):.6f} vs HF's logit {model:.6f} (|diff| {err:.1e})")
        if not err < 1e-4:
            sys.exit(f"{name}: the contributions do not sum to the logit")
        out["targets"].append(t)
        out["embedding"].append(emb)
        out["heads"].append(hc)
        out["attention_bias"].append(bc)
        out["mlp"].append(mc)
        out["offset"].append(offset)
        out["logit_before_cap"].append(total)
    return {
        "input_ids": ids,
        "positions": torch.tensor(positions, dtype=torch.int64),
        "targets": torch.tensor(out["targets"], dtype=torch.int64),
        "embedding": torch.tensor(out["embedding"], dtype=torch.float64),
        "heads": torch.stack(out["heads"]),
        "attention_bias": torch.stack(out["attention_bias"]),
        "mlp": torch.stack(out["mlp"]),
        "offset": torch.tensor(out["offset"], dtype=torch.float64),
        "logit_before_cap": torch.tensor(out["logit_before_cap"], dtype=torch.float64),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only the self-check")
    args = parser.parse_args()
    for name in FIXTURES:
        tensors = fixture_golden(name)
        if args.check:
            continue
        path = os.path.join(OUT_DIR, f"dla-{name}.safetensors")
        write_safetensors(tensors, path, {"producer": "scripts/reference/dla_reference.py",
                                          "fixture": f"tests/data/models/{name}"})
        print(f"wrote {os.path.relpath(path, ROOT)}")


if __name__ == "__main__":
    main()
