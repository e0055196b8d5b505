#!/usr/bin/env python3
"""Whole-model fake-quant emulation of bert8's per-token INT8 scheme, computed with transformers:
what a change of granularity would give before any kernel is written.

    python scripts/int8_emulate.py MODEL_DIR [--pairs 1500] [--alpha 0.6] [--qkv max|gmean|separate]
        [--variants row,wfp32,ffn_out_g128,...] [--data ../shared/data]

Every encoder Linear gets SmoothQuant with a fixed alpha (s_j = max|X_j|^a / max|W_j|^(1-a),
max|X_j| from 512 SST-2 train sentences spread as scripts/real_accuracy.py spreads them), its
input quantized per token with a zero point (the row's [min(0, min), max(0, max)] onto
[-127, 127]) and its weights int8 per output channel, as `bert8 quantize --scheme dynamic
--alpha A --attention fp32` builds them; attention stays FP32. Reports the cosine of each STS-B
dev sentence's mean-pooled embedding to the FP32 one (mean, 1st percentile, min).
--qkv: how the shared smoothing of the stacked Q, K, V is derived from their weights: the
column max over all three (max, what bert8 does), the geometric mean of the three column maxima
(gmean), or a factor per projection with its own input quantization (separate: not what one
fused product can do; an upper bound).
Variants (comma-separated): row (the scheme above), wfp32 (weights unquantized: the activation
error alone), KIND_fp32 (KIND in qkv, attention_output, ffn_in, ffn_out, or all: that group FP32),
KIND_gG (that group's weights with one scale per output channel and per G inputs along K),
KIND_oN (that group's N input channels of largest calibrated max |x| kept out of int8, input
and weights in fp32, as `bert8 quantize --outliers N` does), only_KIND and only_KIND_gG / _oN
(only that group quantized).
A diagnosis, not the engine: checked against bert8 on all-mpnet-base-v2 (FFN-out alone 1 - cos
5.80e-4 here, 5.83e-4 for bert8; everything, --qkv max, 1,500 pairs: mean 0.99889 / min 0.9939
here, 0.99889 / 0.9934 for bert8). Needs torch and transformers.
"""
import argparse
import os
import re
import sys

import numpy as np
import torch
from transformers import AutoModel, AutoTokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from embed_fidelity import read_stsb  # noqa: E402
from int8_groups import read_lines  # noqa: E402

VARIANT = r"(only_)?(qkv|attention_output|ffn_in|ffn_out|all)(?:_(fp32|g\d+|o\d+))?|row|wfp32"


def kind_of(name):
    last = name.rsplit(".", 1)[-1]
    if "attention" in name and last in ("q", "k", "v", "query", "key", "value"):
        return "qkv"
    if "attention" in name and (last == "o" or name.endswith("attention.output.dense")):
        return "attention_output"
    if "intermediate" in name:
        return "ffn_in"
    return "ffn_out"


def qact(x):
    """Per-token int8 with a zero point, dequantized."""
    lo = torch.clamp(x.amin(-1, keepdim=True), max=0)
    hi = torch.clamp(x.amax(-1, keepdim=True), min=0)
    sc = torch.clamp((hi - lo) / 254, min=1e-12)
    z = torch.round(-127 - lo / sc)
    return (torch.clamp(torch.round(x / sc) + z, -127, 127) - z) * sc


def qweight(w, group=0):
    """int8 per output channel (group 0) or per output channel and group of inputs, dequantized."""
    n, k = w.shape
    g = group if group and k % group == 0 else k
    wg = w.reshape(n, k // g, g)
    sc = wg.abs().amax(-1, keepdim=True).clamp(min=1e-12) / 127
    return (torch.round(wg / sc) * sc).reshape(n, k)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--data", default=os.path.join(here, "..", "..", "shared", "data"))
    ap.add_argument("--pairs", type=int, default=1500)
    ap.add_argument("--alpha", type=float, default=0.6)
    ap.add_argument("--qkv", choices=("max", "gmean", "separate"), default="max")
    ap.add_argument("--variants", default="row")
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    variants = [v.strip() for v in a.variants.split(",")]
    for v in variants:
        if not re.fullmatch(VARIANT, v):
            raise SystemExit(f"unknown variant {v!r} (see --help)")
    if a.threads:
        torch.set_num_threads(a.threads)
    tok = AutoTokenizer.from_pretrained(a.model)
    model = AutoModel.from_pretrained(a.model).eval()
    s1, s2, _ = read_stsb(os.path.join(a.data, "glue", "STS-B.dev.tsv"), a.pairs)
    texts = s1 + s2
    calib = read_lines(os.path.join(a.data, "glue", "SST-2.train90.tsv"), "sentence", 512)

    def embed(tx, bs=32):
        out = []
        with torch.no_grad():
            for i in range(0, len(tx), bs):
                b = tok(tx[i:i + bs], padding=True, truncation=True, max_length=384, return_tensors="pt")
                h = model(**b).last_hidden_state
                m = b["attention_mask"].unsqueeze(-1).float()
                out.append(torch.nn.functional.normalize((h * m).sum(1) / m.sum(1), dim=-1))
        return torch.cat(out)

    lins = {n: m for n, m in model.named_modules()
            if isinstance(m, torch.nn.Linear) and ".layer." in n and "pooler" not in n}
    ref = embed(texts)
    amax = {}

    def calib_hook(name):
        def h(mod, inp):
            x = inp[0].reshape(-1, inp[0].shape[-1]).abs().amax(0)
            amax[name] = torch.maximum(amax[name], x) if name in amax else x
        return h

    hooks = [m.register_forward_pre_hook(calib_hook(n)) for n, m in lins.items()]
    embed(calib)
    for h in hooks:
        h.remove()
    orig = {n: m.weight.data.clone() for n, m in lins.items()}

    def qkv_siblings(n):
        p, last = n.rsplit(".", 1)
        names = ("q", "k", "v") if last in ("q", "k", "v") else ("query", "key", "value")
        return [f"{p}.{x}" for x in names]

    def run(variant):
        v = re.fullmatch(VARIANT, variant)
        only, target, form = v.group(1), v.group(2), v.group(3)
        hooks = []
        for n, m in lins.items():
            k = kind_of(n)
            if variant in ("row", "wfp32"):
                mode = variant
            elif target != "all" and k != target:
                mode = "fp32" if only else "row"
            else:
                mode = {"g": "group", "o": "outlier"}.get((form or "x")[0], form or "row")
            if mode == "fp32":
                continue
            w = orig[n]
            wm = w.abs().amax(0)
            if k == "qkv" and a.qkv != "separate":
                st = torch.stack([orig[x].abs().amax(0) for x in qkv_siblings(n)])
                wm = st.amax(0) if a.qkv == "max" else st.clamp(min=1e-5).log().mean(0).exp()
            s = (amax[n].clamp(min=1e-5) ** a.alpha) / (wm.clamp(min=1e-5) ** (1 - a.alpha))
            s = s.clamp(1e-5, 1e5)
            keep = torch.ones_like(s, dtype=torch.bool)
            if mode == "outlier":
                keep[amax[n].topk(int(form[1:])).indices] = False
            ws = w * s * keep
            wq = ws if mode == "wfp32" else qweight(ws, int(form[1:]) if mode == "group" else 0)
            m.weight.data = torch.where(keep, wq / s, w)

            def hook(mod, inp, s=s, keep=keep):
                x = inp[0]
                return (torch.where(keep, qact(x * keep / s) * s, x),)
            hooks.append(m.register_forward_pre_hook(hook))
        e = embed(texts)
        for h in hooks:
            h.remove()
        for n, m in lins.items():
            m.weight.data = orig[n].clone()
        c = (e * ref).sum(-1).numpy()
        print(f"{variant:28s} qkv={a.qkv:8s} alpha {a.alpha}: cosine to FP32 mean {c.mean():.5f} "
              f"(1 - cos {1 - c.mean():.2e}) p1 {np.percentile(c, 1):.4f} min {c.min():.4f}", flush=True)

    for v in variants:
        run(v)


if __name__ == "__main__":
    main()
