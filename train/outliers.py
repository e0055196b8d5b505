"""Activation outliers per layer: how far the largest input channel of each encoder Linear
stands above the median channel (max over channels of max|X_j| / median over channels of
max|X_j|, over the real tokens of some task text). Pre-trained BERTs have a few channels
10-100x above the rest; that is what breaks per-tensor (naive) INT8 and what SmoothQuant fixes.

Run (from the repository root):
  /usr/bin/python3 train/outliers.py models/sst2-bert-mini models/sst2-bert-mini-outlier
Options: --data FILE (TSV with a header, relative to ../shared/data or a path) --column NAME[,NAME2]
         --rows N (first N data rows) --json (one JSON object instead of the table)
         --keep-going (a folder that cannot be measured is reported, the others still are)
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

import data
import hf_models
import safetensors_io
import tokenization

# The four Linear groups of each layer, named as docs/int8.md names them, with the module
# (relative to the layer) whose input is the group's input. Q, K and V share one input.
GROUPS = {
    "bert": [("qkv_in", "attention.self.query"), ("attn_ctx", "attention.output.dense"),
             ("ffn_in", "intermediate.dense"), ("ffn_out_in", "output.dense")],
    "distilbert": [("qkv_in", "attention.q_lin"), ("attn_ctx", "attention.out_lin"),
                   ("ffn_in", "ffn.lin1"), ("ffn_out_in", "ffn.lin2")],
}


def load_folder(folder):
    with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    t, _, _ = safetensors_io.read(os.path.join(folder, "model.safetensors"))
    model = hf_models.build(cfg)
    sd = {k: torch.from_numpy(v.astype(np.float32)) for k, v in t.items()}
    missing, unexpected = model.load_state_dict(sd, strict=False)
    missing = [k for k in missing if "pooler" not in k]
    if missing or unexpected:
        raise SystemExit("%s: missing %s, unexpected %s" % (folder, missing, unexpected))
    return model.eval(), cfg


def tokenizer(folder, cfg):
    if os.path.exists(os.path.join(folder, "vocab.txt")):
        with open(os.path.join(folder, "tokenizer_config.json"), encoding="utf-8") as f:
            lower = json.load(f).get("do_lower_case", True)
        tok = tokenization.BertTokenizer.from_file(os.path.join(folder, "vocab.txt"), lower)
        return lambda a, b: tok.encode(a, b), tok.pad
    tok = tokenization.XLMRTokenizer(os.path.join(folder, "sentencepiece.bpe.model"))
    return lambda a, b: (tok.encode(a, b), None), tok.pad


def read_texts(path, columns, rows):
    if not os.path.exists(path):
        path = os.path.join(data.DATA, path)
    with open(path, encoding="utf-8-sig") as f:
        lines = [ln for ln in f.read().split("\n") if ln.strip()]
    head = lines[0].split("\t")
    cols = [head.index(c) for c in columns.split(",")]
    out = []
    for ln in lines[1:rows + 1]:
        f = ln.split("\t")
        out.append((f[cols[0]], f[cols[1]] if len(cols) > 1 else None))
    return out


def layers_of(model, cfg):
    enc = model.distilbert.transformer if cfg["model_type"] == "distilbert" else model.encoder_model.encoder
    return enc.layer


def measure(folder, texts, max_len=128, batch=32):
    """Returns {group: [per-layer channel absmax array]} over the real tokens of texts."""
    model, cfg = load_folder(folder)
    encode, pad = tokenizer(folder, cfg)
    kind = "distilbert" if cfg["model_type"] == "distilbert" else "bert"
    layers = layers_of(model, cfg)
    amax = {g: [None] * len(layers) for g, _ in GROUPS[kind]}
    mask_box = [None]
    hooks = []
    for li, lyr in enumerate(layers):
        for g, path in GROUPS[kind]:
            mod = lyr.get_submodule(path)

            def hook(_m, inp, g=g, li=li):
                x = inp[0].detach().abs()[mask_box[0]]  # real tokens only: [n, channels]
                m = x.max(dim=0).values.numpy()
                amax[g][li] = m if amax[g][li] is None else np.maximum(amax[g][li], m)
            hooks.append(mod.register_forward_pre_hook(hook))
    enc = []
    for a, b in texts:
        ids, tt = encode(a, b)
        if len(ids) > max_len:
            ids = ids[:max_len - 1] + ids[-1:]
            tt = tt[:max_len - 1] + tt[-1:] if tt else None
        enc.append((ids, tt))
    with torch.no_grad():
        for i in range(0, len(enc), batch):
            part = enc[i:i + batch]
            t = max(len(e[0]) for e in part)
            ids = torch.full((len(part), t), pad, dtype=torch.long)
            tts = torch.zeros((len(part), t), dtype=torch.long)
            for j, (e, tt) in enumerate(part):
                ids[j, :len(e)] = torch.tensor(e)
                if tt:
                    tts[j, :len(tt)] = torch.tensor(tt)
            mask = (ids != pad).long()
            mask_box[0] = mask.bool()
            model(ids, mask, tts if kind == "bert" and cfg.get("type_vocab_size", 2) > 1 else None)
    for h in hooks:
        h.remove()
    return amax


def summarize(amax):
    out = {}
    for g, per_layer in amax.items():
        rows = []
        for li, m in enumerate(per_layer):
            med = float(np.median(m))
            top = int(np.argmax(m))
            rows.append({"layer": li, "ratio": float(m[top]) / med if med > 0 else float("inf"),
                         "max": float(m[top]), "median": med, "channel": top,
                         "channels_over_10x": int((m > 10 * med).sum())})
        out[g] = rows
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--data", default="glue/SST-2.train10.tsv")
    ap.add_argument("--column", default="sentence")
    ap.add_argument("--rows", type=int, default=256)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--keep-going", action="store_true", help="report a folder that fails and go on")
    args = ap.parse_args()
    torch.set_num_threads(1)
    texts = read_texts(args.data, args.column, args.rows)
    result = {"data": args.data, "column": args.column, "rows": len(texts), "models": {}}
    for folder in args.models:
        name = os.path.basename(os.path.normpath(folder))
        try:
            result["models"][name] = summarize(measure(folder, texts))
        except Exception as e:  # one unreadable folder (or a missing sentencepiece) should not hide the rest
            if not args.keep_going:
                raise
            result.setdefault("errors", {})[name] = "%s: %s" % (type(e).__name__, e)
            print("outliers.py: %s: %s" % (folder, result["errors"][name]), file=sys.stderr)
    if args.json:
        json.dump(result, sys.stdout, indent=1)
        print()
        return
    print("max channel absmax / median channel absmax per Linear input (%d rows of %s)" % (len(texts), args.data))
    for name, s in result["models"].items():
        print("\n%s" % name)
        groups = list(s)
        print("  layer  " + "  ".join("%-22s" % g for g in groups))
        for li in range(len(s[groups[0]])):
            cells = ["%7.1fx (ch %3d, %6.2f)" % (s[g][li]["ratio"], s[g][li]["channel"], s[g][li]["max"])
                     for g in groups]
            print("  %5d  %s" % (li, "  ".join(cells)))
    for name, err in result.get("errors", {}).items():
        print("\n%s: not measured (%s)" % (name, err))


if __name__ == "__main__":
    main()
