#!/usr/bin/python3
"""The baseline of perf_compare_bench: a plain PyTorch eager GPT-2 that keeps
every attention and hidden state, as Hugging Face's GPT-2 with
output_attentions=True and output_hidden_states=True does (the same eager
operations: Conv1D as addmm, masked softmax with the lowest float, gelu_new
written out, logits against the tied embedding).

Usage: pytorch_eager_gpt2.py MODEL_DIR IDS_FILE THREADS REPEATS LOGITS_OUT
  IDS_FILE: token ids separated by whitespace; LOGITS_OUT: the last row of
  logits is written there as raw float32 (so the caller can check that both
  ran the same model).
Prints one line: "seconds <median of REPEATS after a warm-up> peak_rss_mib <VmHWM>".
Needs Debian's python3-torch (1.13) and python3-numpy.
"""
import json
import math
import resource
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F


def load_weights(path):
    # Like from_pretrained: every tensor copied into memory torch owns.
    with open(path, "rb") as f:
        header_len = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(header_len))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + header_len)
    dtypes = {"F32": np.float32, "F16": np.float16}
    weights = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        begin, end = t["data_offsets"]
        array = np.frombuffer(data[begin:end], dtype=dtypes[t["dtype"]]).reshape(t["shape"])
        weights[name] = torch.from_numpy(array.astype(np.float32))
    return weights


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def forward(w, n_layer, n_head, ids):
    t = ids.shape[0]
    x = w["wte.weight"][ids] + w["wpe.weight"][:t]
    width = x.shape[-1]
    d = width // n_head
    causal = torch.tril(torch.ones(t, t, dtype=torch.bool))
    lowest = torch.finfo(torch.float32).min
    hidden, attentions = [], []
    for layer in range(n_layer):
        p = "h.%d." % layer
        hidden.append(x)
        h = F.layer_norm(x, (width,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], 1e-5)
        qkv = torch.addmm(w[p + "attn.c_attn.bias"], h, w[p + "attn.c_attn.weight"])
        q, k, v = (m.view(t, n_head, d).transpose(0, 1) for m in qkv.split(width, dim=1))
        scores = torch.matmul(q, k.transpose(-1, -2)) / torch.full([], d ** 0.5)
        scores = torch.where(causal, scores, torch.full([], lowest))
        probs = torch.softmax(scores, dim=-1)
        attentions.append(probs)
        o = torch.matmul(probs, v).transpose(0, 1).reshape(t, width)
        x = x + torch.addmm(w[p + "attn.c_proj.bias"], o, w[p + "attn.c_proj.weight"])
        h = F.layer_norm(x, (width,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], 1e-5)
        m = gelu_new(torch.addmm(w[p + "mlp.c_fc.bias"], h, w[p + "mlp.c_fc.weight"]))
        x = x + torch.addmm(w[p + "mlp.c_proj.bias"], m, w[p + "mlp.c_proj.weight"])
    x = F.layer_norm(x, (width,), w["ln_f.weight"], w["ln_f.bias"], 1e-5)
    hidden.append(x)
    logits = torch.matmul(x, w["wte.weight"].t())
    return logits, hidden, attentions


def main():
    model_dir, ids_file, threads, repeats, logits_out = sys.argv[1:6]
    torch.set_num_threads(int(threads))
    with open(model_dir + "/config.json") as f:
        config = json.load(f)
    w = load_weights(model_dir + "/model.safetensors")
    with open(ids_file) as f:
        ids = torch.tensor([int(s) for s in f.read().split()], dtype=torch.long)
    times = []
    with torch.no_grad():
        for i in range(int(repeats) + 1):
            start = time.perf_counter()
            logits, hidden, attentions = forward(w, config["n_layer"], config["n_head"], ids)
            if i > 0:  # the first pass warms up
                times.append(time.perf_counter() - start)
            del hidden, attentions
    logits[-1].numpy().astype(np.float32).tofile(logits_out)
    times.sort()
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print("seconds %.6f peak_rss_mib %.1f" % (times[(len(times) - 1) // 2], peak_mib))


if __name__ == "__main__":
    main()
