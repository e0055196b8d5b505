#!/usr/bin/env python3
"""Per-Linear-group INT8 diagnosis of a BERT-family checkpoint, computed with transformers.

    python scripts/int8_groups.py MODEL_DIR [--calib FILE] [--eval FILE] [--samples 512]
        [--alphas 0.5,0.8] [--json OUT] [--markdown]

For each layer and Linear group (qkv, attention_output, ffn_in, ffn_out) it records the input
activations of the calibration text (SST-2 sentences by default) and of held-out text (STS-B
sentences), and prints:
  - act max / median: the largest channel's max|X_j| over the median channel's (outliers),
  - w max: max|W|, and after smoothing with alpha: the smoothed input's per-tensor max over its
    median channel max, and the weights' max|W*s|,
  - the relative output error ||X W^T - dq(q(X/s)) dq(q(W s))^T||^2 / ||X W^T||^2 on the
    held-out rows, for static per-tensor symmetric activations (scale from the calibration
    rows: saturation included), static per-tensor with a zero point (asymmetric: [min, max]
    mapped onto [-127, 127]) and dynamic per-token symmetric.
This mirrors bert8's quantizer (weights int8 per output channel, round to nearest even, clamp to
+-127; s_j = max|X_j|^a / max|W_j|^(1-a) clamped to [1e-5, 1e5]); it is a diagnosis, not the
engine. Needs torch and transformers (the Python test environment has both).
"""
import argparse
import csv
import json
import os

import numpy as np
import torch
from transformers import AutoModel, AutoTokenizer

GROUPS = ("qkv", "attention_output", "ffn_in", "ffn_out")


def read_lines(path, column, limit):
    out = []
    with open(path, encoding="utf-8") as f:
        if path.endswith(".tsv"):
            for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
                for c in column.split(","):
                    if row.get(c):
                        out.append(row[c])
        else:
            out = [line.rstrip("\n") for line in f if line.strip()]
    if limit and len(out) > limit:
        step = len(out) / limit
        out = [out[int(i * step)] for i in range(limit)]
    return out


def find_linears(model):
    """{(layer, group): [Linear, ...]} for the BERT, DistilBERT and XLM-R layouts."""
    enc = getattr(model, "encoder", None) or getattr(model, "transformer", None)
    layers = enc.layer
    out = {}
    for i, L in enumerate(layers):
        if hasattr(L, "attention") and hasattr(L.attention, "self"):  # BERT / XLM-R
            out[(i, "qkv")] = [L.attention.self.query, L.attention.self.key, L.attention.self.value]
            out[(i, "attention_output")] = [L.attention.output.dense]
            out[(i, "ffn_in")] = [L.intermediate.dense]
            out[(i, "ffn_out")] = [L.output.dense]
        else:  # DistilBERT
            a = L.attention
            out[(i, "qkv")] = [a.q_lin, a.k_lin, a.v_lin]
            out[(i, "attention_output")] = [a.out_lin]
            out[(i, "ffn_in")] = [L.ffn.lin1]
            out[(i, "ffn_out")] = [L.ffn.lin2]
    return out


def collect(model, tok, texts, lin, max_length=128, batch=32):
    """Input rows (real tokens only) of the first Linear of every group."""
    rows = {k: [] for k in lin}
    hooks = []
    cur = {}

    def hook(key):
        def f(_mod, inp):
            x = inp[0].detach()
            m = cur["mask"]
            rows[key].append(x[m].float().numpy())
        return f

    for k, mods in lin.items():
        hooks.append(mods[0].register_forward_pre_hook(hook(k)))
    with torch.no_grad():
        for i in range(0, len(texts), batch):
            enc = tok(texts[i:i + batch], padding=True, truncation=True, max_length=max_length, return_tensors="pt")
            cur["mask"] = enc["attention_mask"].bool()
            model(**enc)
    for h in hooks:
        h.remove()
    return {k: np.concatenate(v) for k, v in rows.items()}


def q8(x):
    return np.clip(np.rint(x), -127, 127)


def rel_err(x, w, s, a_static, zp_range):
    """Relative output errors: static symmetric, static with zero point, dynamic per token."""
    y = x @ w.T
    ref = float((y * y).sum())
    ws = w * s[None, :]
    wsc = np.abs(ws).max(axis=1) / 127.0
    wsc[wsc == 0] = 1.0
    wd = q8(ws / wsc[:, None]) * wsc[:, None]
    xs = x / s[None, :]
    out = {}
    xd = q8(xs / a_static) * a_static
    out["static"] = float(((xd @ wd.T - y) ** 2).sum()) / ref
    lo, hi = zp_range
    sc = (hi - lo) / 254.0
    zp = np.rint(-127 - lo / sc)
    xd = (q8(np.rint(xs / sc) + zp) - zp) * sc
    out["static_zp"] = float(((xd @ wd.T - y) ** 2).sum()) / ref
    m = np.abs(xs).max(axis=1, keepdims=True) / 127.0
    m[m == 0] = 1.0
    xd = q8(xs / m) * m
    out["dynamic"] = float(((xd @ wd.T - y) ** 2).sum()) / ref
    lo = np.minimum(xs.min(axis=1, keepdims=True), 0)
    hi = np.maximum(xs.max(axis=1, keepdims=True), 0)
    sc = (hi - lo) / 254.0
    sc[sc == 0] = 1.0
    zp = np.rint(-127 - lo / sc)
    xd = (q8(np.rint(xs / sc) + zp) - zp) * sc
    out["dynamic_zp"] = float(((xd @ wd.T - y) ** 2).sum()) / ref
    return out


def render(res, alphas):
    """The markdown table of the results (one row per layer and group)."""
    hdr = "| layer | group | act max | max/median ch | act min | w max |"
    sep = "|---:|---|---:|---:|---:|---:|"
    for al in alphas:
        hdr += (f" a={al}: act max/median | w max | range (static) | err static | err static+zp | err dynamic |"
                f" err dynamic+zp |")
        sep += "---:|---:|---|---:|---:|---:|---:|"
    lines = [hdr, sep]
    for r in res:
        line = (f"| {r['layer']} | {r['group']} | {r['act_max']:.2f} | {r['act_outlier']:.0f} | {r['act_min']:.2f} |"
                f" {r['w_max']:.2f} |")
        for al in alphas:
            x = r["alphas"][str(al)]
            lo, hi = x["smoothed_range"]
            line += (f" {x['smoothed_act_outlier']:.1f} | {x['w_max_smoothed']:.2f} | [{lo:.2f}, {hi:.2f}] |"
                     f" {x['static']:.2e} | {x['static_zp']:.2e} | {x['dynamic']:.2e} | {x['dynamic_zp']:.2e} |")
        lines.append(line)
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    here = os.path.dirname(os.path.abspath(__file__))
    data = os.path.join(here, "..", "..", "shared", "data", "glue")
    ap.add_argument("--calib", default=os.path.join(data, "SST-2.train90.tsv"))
    ap.add_argument("--calib-column", default="sentence")
    ap.add_argument("--eval", default=os.path.join(data, "STS-B.dev.tsv"))
    ap.add_argument("--eval-column", default="sentence1,sentence2")
    ap.add_argument("--samples", type=int, default=512)
    ap.add_argument("--eval-samples", type=int, default=600)
    ap.add_argument("--alphas", default="0.5,0.8")
    ap.add_argument("--json")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--render", help="print the markdown table of a --json file and exit")
    a = ap.parse_args()
    if a.render:
        d = json.load(open(a.render, encoding="utf-8"))
        res = d["results"]
        print(render(res, [float(k) for k in res[0]["alphas"]]))
        return
    torch.set_grad_enabled(False)
    model = AutoModel.from_pretrained(a.model).eval()
    tok = AutoTokenizer.from_pretrained(a.model)
    lin = find_linears(model)
    cal = collect(model, tok, read_lines(a.calib, a.calib_column, a.samples), lin)
    ev = collect(model, tok, read_lines(a.eval, a.eval_column, a.eval_samples), lin)
    alphas = [float(x) for x in a.alphas.split(",")]
    res = []
    for (layer, g), mods in lin.items():
        w = torch.cat([m.weight for m in mods]).float().numpy()
        xc, xe = cal[(layer, g)], ev[(layer, g)]
        amax = np.abs(xc).max(axis=0)
        wmax = np.abs(w).max(axis=0)
        row = {"layer": layer, "group": g, "act_max": float(amax.max()),
               "act_outlier": float(amax.max() / max(np.median(amax), 1e-12)),
               "act_min": float(xc.min()), "w_max": float(np.abs(w).max()), "alphas": {}}
        for al in alphas:
            s = np.where(amax > 0, np.clip(amax ** al / np.maximum(wmax, 1e-12) ** (1 - al), 1e-5, 1e5), 1.0)
            xs = xc / s[None, :]
            a_static = float(np.abs(xs).max()) / 127.0
            rng = (float(xs.min()), float(xs.max()))
            sm = np.abs(xs).max(axis=0)
            e = rel_err(xe, w, s, a_static, rng)
            row["alphas"][str(al)] = {"smoothed_act_outlier": float(sm.max() / max(np.median(sm), 1e-12)),
                                      "smoothed_range": rng, "w_max_smoothed": float(np.abs(w * s).max()), **e}
        res.append(row)
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump({"model": a.model, "results": res}, f, indent=1)
    if a.markdown:
        print(render(res, alphas))
    else:
        for r in res:
            print(json.dumps(r))


if __name__ == "__main__":
    main()
