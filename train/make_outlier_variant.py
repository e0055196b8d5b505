"""Writes an "outlier" variant of a trained model: the same network with a few activation
channels made 10-100x larger than the rest, as pre-trained BERTs have them, so that naive
per-tensor W8A8 visibly loses accuracy and SmoothQuant has something to recover.

Construction (per chosen layer, a few chosen channels j):
  * value rows: V.weight[j, :] and V.bias[j] times K, attention-output columns W_o[:, j] / K.
    Softmax weights are unchanged and the context channel j is linear in V's row j, so the
    network computes exactly the same function (up to F16 rounding of the stored weights);
    only the attention-output Linear sees a context channel K times larger.
  * optionally (--ln-k), LayerNorm channels: gamma[c] and beta[c] times K2 for the embedding
    LayerNorm and both LayerNorms of each layer, with the consuming QKV / FFN-in / pooler /
    classifier input columns c divided by K2. With post-LN the scaled channel also rides the
    residual into the next LayerNorm's statistics, so this one changes the function a little:
    the variant's own FP32 score is its baseline.

K should be a power of two so that scaling F16 weights is exact (except where W_o / K falls
into F16 subnormals). Run from the repository root:
  /usr/bin/python3 train/make_outlier_variant.py models/sst2-bert-mini models/sst2-bert-mini-outlier
"""
import argparse
import json
import os
import random
import shutil

import numpy as np

import safetensors_io

HERE = os.path.dirname(os.path.abspath(__file__))


def names(cfg, prefix):
    """Tensor-name builders for the model type: value, attention output, LayerNorms, consumers."""
    if cfg["model_type"] == "distilbert":
        L = "%stransformer.layer.%%d." % prefix
        return dict(value=L + "attention.v_lin", attn_out=L + "attention.out_lin",
                    qkv=[L + "attention.q_lin", L + "attention.k_lin", L + "attention.v_lin"],
                    ffn_in=L + "ffn.lin1", ln_attn=L + "sa_layer_norm", ln_out=L + "output_layer_norm",
                    ln_emb=prefix + "embeddings.LayerNorm", layers=cfg["n_layers"], hidden=cfg["dim"])
    L = "%sencoder.layer.%%d." % prefix
    return dict(value=L + "attention.self.value", attn_out=L + "attention.output.dense",
                qkv=[L + "attention.self.query", L + "attention.self.key", L + "attention.self.value"],
                ffn_in=L + "intermediate.dense", ln_attn=L + "attention.output.LayerNorm",
                ln_out=L + "output.LayerNorm", ln_emb=prefix + "embeddings.LayerNorm",
                layers=cfg["num_hidden_layers"], hidden=cfg["hidden_size"])


def find_prefix(t):
    for p in ("bert.", "distilbert.", "roberta.", ""):
        if any(k.startswith(p + "encoder.") or k.startswith(p + "transformer.") for k in t):
            return p
    raise SystemExit("no encoder tensors found")


def ln_weight(t, base):
    w = base + ".weight" if base + ".weight" in t else base + ".gamma"
    b = base + ".bias" if base + ".bias" in t else base + ".beta"
    return w, b


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--k", type=float, default=64.0, help="value-row / context-channel factor")
    ap.add_argument("--channels", type=int, default=2, help="context channels scaled per layer")
    ap.add_argument("--layers", default="all", help="comma-separated layer indices or 'all'")
    ap.add_argument("--ln-k", type=float, default=0.0, help="LayerNorm channel factor (0: off)")
    ap.add_argument("--ln-channels", type=int, default=2, help="residual channels scaled")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()

    with open(os.path.join(args.src, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    t, meta, _ = safetensors_io.read(os.path.join(args.src, "model.safetensors"))
    dtype = {a.dtype for a in t.values() if a.dtype.kind == "f"}
    if len(dtype) != 1:
        raise SystemExit("mixed float dtypes in %s" % args.src)
    dtype = dtype.pop()
    w = {k: (a.astype(np.float64) if a.dtype.kind == "f" else a) for k, a in t.items()}
    prefix = find_prefix(t)
    n = names(cfg, prefix)
    layers = range(n["layers"]) if args.layers == "all" else [int(x) for x in args.layers.split(",")]
    rng = random.Random(args.seed)
    record = {"source": os.path.basename(os.path.normpath(args.src)), "k": args.k, "value_channels": {},
              "ln_k": args.ln_k, "ln_channels": [], "seed": args.seed}

    for li in layers:
        ch = sorted(rng.sample(range(n["hidden"]), args.channels))
        v, o = n["value"] % li, n["attn_out"] % li
        for j in ch:
            w[v + ".weight"][j, :] *= args.k
            w[v + ".bias"][j] *= args.k
            w[o + ".weight"][:, j] /= args.k
        record["value_channels"][str(li)] = ch

    if args.ln_k:
        K2 = args.ln_k
        ch = sorted(rng.sample(range(n["hidden"]), args.ln_channels))
        record["ln_channels"] = ch
        L = n["layers"]
        # Every LayerNorm output channel c is scaled, so every Linear reading the residual
        # stream divides its input column c: QKV and FFN-in of each layer, and the head.
        lns = [n["ln_emb"]] + [n[k] % li for li in range(L) for k in ("ln_attn", "ln_out")]
        for base in lns:
            gw, gb = ln_weight(w, base)
            w[gw][ch] *= K2
            w[gb][ch] *= K2
        readers = [q % li for li in range(L) for q in n["qkv"]] + [n["ffn_in"] % li for li in range(L)]
        readers += [k[:-len(".weight")] for k in w if k.endswith(".weight") and w[k].ndim == 2 and (
            k.startswith(prefix + "pooler.") or k.startswith("pre_classifier.") or k.startswith("qa_outputs.")
            or k.startswith("classifier.dense."))]
        for r in readers:
            w[r + ".weight"][:, ch] /= K2

    out = {k: (a.astype(dtype) if a.dtype.kind == "f" else a) for k, a in w.items()}
    for k, a in out.items():
        if a.dtype.kind == "f" and not np.all(np.isfinite(a)):
            raise SystemExit("%s overflows %s; use a smaller K" % (k, dtype))
    os.makedirs(args.dst, exist_ok=True)
    safetensors_io.write(os.path.join(args.dst, "model.safetensors"), out, meta or None)
    for name in os.listdir(args.src):
        if name not in ("model.safetensors", "README.md", "metrics.json"):
            shutil.copyfile(os.path.join(args.src, name), os.path.join(args.dst, name))
    with open(os.path.join(args.dst, "outlier.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps(record, indent=2, sort_keys=True) + "\n")
    cmd = "/usr/bin/python3 train/make_outlier_variant.py %s %s --k %g --channels %d --layers %s --ln-k %g " \
          "--ln-channels %d --seed %d" % (args.src, args.dst, args.k, args.channels, args.layers, args.ln_k,
                                         args.ln_channels, args.seed)
    with open(os.path.join(args.dst, "README.md"), "w", encoding="utf-8") as f:
        f.write(README % dict(name=os.path.basename(os.path.normpath(args.dst)), src=record["source"],
                              k=args.k, ch=json.dumps(record["value_channels"]), ln=(
                                  "LayerNorm channels %s: gamma/beta x %g in every LayerNorm, the reading "
                                  "Linears' input columns / %g (changes the function a little under post-LN)"
                                  % (record["ln_channels"], args.ln_k, args.ln_k)) if args.ln_k else
                              "no LayerNorm scaling (the variant computes the same function as the source)",
                              cmd=cmd, dtype=str(dtype)))
    print("wrote %s (%s)" % (args.dst, json.dumps(record)))


README = """# %(name)s: %(src)s with activation outliers

A test model for INT8, not a new training run: the weights of `%(src)s` with a few activation
channels made much larger than the rest, as pre-trained BERTs have them (see docs/accuracy.md).

* Value rows x %(k)g and the matching attention-output columns / %(k)g, per layer: %(ch)s
  (exactly function-preserving: only the attention-output Linear's input changes).
* %(ln)s.
* Weights stored as %(dtype)s like the source; tokenizer files and split.json copied from it.
* Built by (from the repository root):

      %(cmd)s

`train/outliers.py` prints the per-layer outlier ratios of this folder and of its source.
"""

if __name__ == "__main__":
    main()
