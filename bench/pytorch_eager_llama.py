#!/usr/bin/python3
"""The baseline of real_size_bench: a plain PyTorch eager forward of a
Llama-family decoder (llama, mistral, qwen2, qwen3) that keeps every
attention and hidden state, as Hugging Face's eager attention does with
output_attentions=True and output_hidden_states=True: RMSNorm in float32,
rotary embeddings (default or llama3 scaling), grouped-query attention with
the key/value heads repeated, a causal (and sliding-window) mask with the
dtype's lowest value, softmax in float32, SwiGLU, logits against lm_head (or
the tied embedding). Written from the architecture, not from transformers,
which Debian does not package.

Usage: pytorch_eager_llama.py MODEL_DIR IDS_FILE THREADS DTYPE REPEATS LOGITS_OUT [GENERATE]
  DTYPE: float32 (what from_pretrained gives by default: the BF16 weights
  widened on load) or bfloat16 (torch_dtype=torch.bfloat16).
  IDS_FILE: token ids separated by whitespace; LOGITS_OUT: the last row of
  logits as raw float32 (the caller checks that both ran the same model).
  GENERATE: after the passes, greedy decoding of this many tokens from the
  prompt with a key/value cache (as generate(use_cache=True) without
  output_attentions), timed from the prompt's pass to the last token.
Prints one line:
  "load_s L first_s F warm_s W peak_rss_mib P" [+ " generate_tps G ids I,I,..."]
(warm_s: the median of REPEATS passes after the first; 0 when REPEATS is 0;
generate_tps: new tokens per second of that decoding; ids: its tokens).
Needs Debian's python3-torch (1.13).
"""
import json
import math
import os
import struct
import sys
import time

import torch
import torch.nn.functional as F

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def shard_files(model_dir):
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            return sorted(set(json.load(f)["weight_map"].values()))
    return ["model.safetensors"]


def load_weights(model_dir, dtype):
    # Like from_pretrained: every tensor read into memory torch owns, in dtype.
    weights = {}
    for name in shard_files(model_dir):
        path = os.path.join(model_dir, name)
        with open(path, "rb") as f:
            header_len = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(header_len))
            data = bytearray(f.read())
        for tensor, t in header.items():
            if tensor == "__metadata__":
                continue
            begin, end = t["data_offsets"]
            stored = DTYPES[t["dtype"]]
            count = (end - begin) // torch.tensor([], dtype=stored).element_size()
            x = torch.frombuffer(data, dtype=stored, count=count, offset=begin)
            weights[tensor] = x.reshape(t["shape"]).to(dtype).clone()
        del data
    return weights


def inverse_frequencies(cfg, head_dim):
    theta = cfg.get("rope_theta", 10000.0)
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    scaling = cfg.get("rope_scaling") or {}
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind == "llama3":
        factor = scaling["factor"]
        low, high = scaling["low_freq_factor"], scaling["high_freq_factor"]
        old = scaling["original_max_position_embeddings"]
        low_wavelen, high_wavelen = old / low, old / high
        wavelen = 2 * math.pi / inv
        scaled = torch.where(wavelen > low_wavelen, inv / factor, inv)
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
        inv = torch.where(medium, smoothed, scaled)
    elif kind != "default":
        raise SystemExit("rope_scaling %s is not implemented here" % kind)
    return inv


def rms_norm(x, weight, eps):
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(x.dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def forward(w, cfg, ids, dtype, cache=None, start=0):
    """ids at positions start.. . cache: None (a whole prompt: every attention
    and hidden state kept) or a list that holds each layer's keys and values
    (before the key/value heads are repeated), extended with these ids'; then
    only the last row's logits are made and nothing else is kept."""
    family = cfg["model_type"]
    layers = cfg["num_hidden_layers"]
    heads = cfg["num_attention_heads"]
    kv_heads = cfg.get("num_key_value_heads", heads)
    width = cfg["hidden_size"]
    head_dim = cfg.get("head_dim") or width // heads
    eps = cfg.get("rms_norm_eps", 1e-6)
    window = cfg.get("sliding_window") if family == "mistral" else None
    t = ids.shape[0]

    x = w["model.embed_tokens.weight"][ids]
    positions = torch.arange(start, start + t, dtype=torch.float32)
    freqs = torch.outer(positions, inverse_frequencies(cfg, head_dim))
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().to(dtype), emb.sin().to(dtype)
    i = torch.arange(start, start + t).unsqueeze(1)
    j = torch.arange(start + t).unsqueeze(0)
    allowed = j <= i
    if window:
        allowed = allowed & (j > i - window)
    mask = torch.zeros(t, start + t, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)

    hidden, attentions = [], []
    for layer in range(layers):
        p = "model.layers.%d." % layer
        if cache is None:
            hidden.append(x)
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)

        def project(name):
            bias = w.get(p + "self_attn.%s_proj.bias" % name)
            return F.linear(h, w[p + "self_attn.%s_proj.weight" % name], bias)

        q = project("q").view(t, heads, head_dim).transpose(0, 1)
        k = project("k").view(t, kv_heads, head_dim).transpose(0, 1)
        v = project("v").view(t, kv_heads, head_dim).transpose(0, 1)
        if family == "qwen3":
            q = rms_norm(q, w[p + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, w[p + "self_attn.k_norm.weight"], eps)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if cache is not None:
            if layer < len(cache):
                k = torch.cat((cache[layer][0], k), dim=1)
                v = torch.cat((cache[layer][1], v), dim=1)
                cache[layer] = (k, v)
            else:
                cache.append((k, v))
        k = k.repeat_interleave(heads // kv_heads, dim=0)
        v = v.repeat_interleave(heads // kv_heads, dim=0)
        scores = torch.matmul(q, k.transpose(1, 2)) * head_dim ** -0.5 + mask
        probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(dtype)
        if cache is None:
            attentions.append(probs)
        out = torch.matmul(probs, v).transpose(0, 1).reshape(t, heads * head_dim)
        x = x + F.linear(out, w[p + "self_attn.o_proj.weight"])
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        gate = F.linear(h, w[p + "mlp.gate_proj.weight"])
        up = F.linear(h, w[p + "mlp.up_proj.weight"])
        x = x + F.linear(F.silu(gate) * up, w[p + "mlp.down_proj.weight"])
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
    if cache is not None:
        return F.linear(x[-1:], head), None, None
    hidden.append(x)
    logits = F.linear(x, head)
    return logits, hidden, attentions


def generate(w, cfg, ids, dtype, count):
    """Greedy decoding of `count` tokens after ids with a key/value cache:
    the new ids and the seconds from the prompt's pass to the last one."""
    cache = []
    start = time.perf_counter()
    logits, _, _ = forward(w, cfg, ids, dtype, cache, 0)
    new = [int(logits[-1].argmax())]
    while len(new) < count:
        logits, _, _ = forward(w, cfg, torch.tensor(new[-1:], dtype=torch.int64), dtype, cache,
                               ids.shape[0] + len(new) - 1)
        new.append(int(logits[-1].argmax()))
    return new, time.perf_counter() - start


def peak_rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def main():
    model_dir, ids_file, threads, dtype_name, repeats, logits_out = sys.argv[1:7]
    count = int(sys.argv[7]) if len(sys.argv) > 7 else 0
    torch.set_num_threads(int(threads))
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[dtype_name]
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    if cfg["model_type"] not in ("llama", "mistral", "qwen2", "qwen3"):
        raise SystemExit("model_type %s: this baseline covers llama, mistral, qwen2 and qwen3"
                         % cfg["model_type"])
    with open(ids_file) as f:
        ids = torch.tensor([int(s) for s in f.read().split()], dtype=torch.int64)
    start = time.perf_counter()
    w = load_weights(model_dir, dtype)
    load_s = time.perf_counter() - start
    with torch.no_grad():
        start = time.perf_counter()
        logits, hidden, attentions = forward(w, cfg, ids, dtype)
        first_s = time.perf_counter() - start
        logits[-1].to(torch.float32).numpy().tofile(logits_out)
        del logits, hidden, attentions
        warm = []
        for _ in range(int(repeats)):
            start = time.perf_counter()
            outputs = forward(w, cfg, ids, dtype)
            warm.append(time.perf_counter() - start)
            del outputs
        generated = generate(w, cfg, ids, dtype, count) if count > 0 else None
    warm.sort()
    warm_s = warm[len(warm) // 2] if warm else 0.0
    line = "load_s %.3f first_s %.3f warm_s %.3f peak_rss_mib %.0f" % (
        load_s, first_s, warm_s, peak_rss_mib())
    if generated:
        line += " generate_tps %.3f ids %s" % (len(generated[0]) / generated[1],
                                               ",".join(str(i) for i in generated[0]))
    print(line)


if __name__ == "__main__":
    main()
