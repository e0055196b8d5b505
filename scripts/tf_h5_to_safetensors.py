#!/usr/bin/env python3
"""Converts a Keras/transformers TensorFlow BERT checkpoint (tf_model.h5, as written by
TFBertForSequenceClassification.save_pretrained) into a Hugging Face PyTorch folder:
model.safetensors, config.json, and the tokenizer files (vocab.txt, tokenizer_config.json,
special_tokens_map.json). scripts/fetch-models.sh runs it for manifest rows whose inner path is
'tf-h5:...' (docs/models.md); it needs h5py, numpy and safetensors only (no TensorFlow, no torch).

    tf_h5_to_safetensors.py --h5 tf_model.h5 --config config.json --vocab vocab.txt --out DIR
                            [--labels labels.csv [--labels-column cat]] [--model-max-length N]
                            [--cased]

The weights are read from the HDF5 file's own variable list (the 'weight_names' attribute of
each layer group), and every TF variable name is mapped by an explicit rule to one PyTorch
BertForSequenceClassification name: dense kernels are transposed ([in, out] -> [out, in]),
LayerNorm gamma/beta become weight/bias, embedding tables keep their layout. The conversion
fails, naming the variable, on a variable no rule maps, on two variables that map to one name,
on a tensor the architecture (from config.json) expects but the file lacks, and on any shape
that is not the one config.json implies. So every variable is used exactly once.

--labels: a CSV whose column (default 'cat') lists the class names, row i = class i (after
dropping repeats, as pandas' unique() does); they become config.json's id2label/label2id.
The output is deterministic: the same inputs give byte-identical files.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import re
import sys

import h5py
import numpy as np
from safetensors.numpy import save_file

TOP = r"tf_bert_for_sequence_classification(?:_\d+)?"
# (TF variable regex without the ':0' suffix, PyTorch name template, transpose?)
RULES = [
    (rf"{TOP}/bert/embeddings/word_embeddings/weight", "bert.embeddings.word_embeddings.weight", False),
    (rf"{TOP}/bert/embeddings/position_embeddings/embeddings", "bert.embeddings.position_embeddings.weight", False),
    (rf"{TOP}/bert/embeddings/token_type_embeddings/embeddings", "bert.embeddings.token_type_embeddings.weight", False),
    (rf"{TOP}/bert/embeddings/LayerNorm/gamma", "bert.embeddings.LayerNorm.weight", False),
    (rf"{TOP}/bert/embeddings/LayerNorm/beta", "bert.embeddings.LayerNorm.bias", False),
    (rf"{TOP}/bert/encoder/layer_\._(\d+)/attention/self/(query|key|value)/kernel",
     "bert.encoder.layer.{0}.attention.self.{1}.weight", True),
    (rf"{TOP}/bert/encoder/layer_\._(\d+)/attention/self/(query|key|value)/bias",
     "bert.encoder.layer.{0}.attention.self.{1}.bias", False),
    (rf"{TOP}/bert/encoder/layer_\._(\d+)/attention/output/dense/kernel",
     "bert.encoder.layer.{0}.attention.output.dense.weight", True),
    (rf"{TOP}/bert/encoder/layer_\._(\d+)/attention/output/dense/bias",
     "bert.encoder.layer.{0}.attention.output.dense.bias", False),
    (rf"{TOP}/bert/encoder/layer_\._(\d+)/attention/output/LayerNorm/gamma",
     "bert.encoder.layer.{0}.attention.output.LayerNorm.weight", False),
    (rf"{TOP}/bert/encoder/layer_\._(\d+)/attention/output/LayerNorm/beta",
     "bert.encoder.layer.{0}.attention.output.LayerNorm.bias", False),
    (rf"{TOP}/bert/encoder/layer_\._(\d+)/intermediate/dense/kernel",
     "bert.encoder.layer.{0}.intermediate.dense.weight", True),
    (rf"{TOP}/bert/encoder/layer_\._(\d+)/intermediate/dense/bias",
     "bert.encoder.layer.{0}.intermediate.dense.bias", False),
    (rf"{TOP}/bert/encoder/layer_\._(\d+)/output/dense/kernel", "bert.encoder.layer.{0}.output.dense.weight", True),
    (rf"{TOP}/bert/encoder/layer_\._(\d+)/output/dense/bias", "bert.encoder.layer.{0}.output.dense.bias", False),
    (rf"{TOP}/bert/encoder/layer_\._(\d+)/output/LayerNorm/gamma",
     "bert.encoder.layer.{0}.output.LayerNorm.weight", False),
    (rf"{TOP}/bert/encoder/layer_\._(\d+)/output/LayerNorm/beta",
     "bert.encoder.layer.{0}.output.LayerNorm.bias", False),
    (rf"{TOP}/bert/pooler/dense/kernel", "bert.pooler.dense.weight", True),
    (rf"{TOP}/bert/pooler/dense/bias", "bert.pooler.dense.bias", False),
    (rf"{TOP}/classifier/kernel", "classifier.weight", True),
    (rf"{TOP}/classifier/bias", "classifier.bias", False),
]


def die(msg: str) -> None:
    sys.exit(f"tf_h5_to_safetensors: {msg}")


def expected_shapes(cfg: dict) -> dict:
    """The PyTorch BertForSequenceClassification state dict (less buffers) that config.json implies."""
    try:
        H, I, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
        V, P, T = cfg["vocab_size"], cfg["max_position_embeddings"], cfg.get("type_vocab_size", 2)
    except KeyError as e:
        die(f"config.json lacks {e}")
    if cfg.get("model_type") != "bert" or cfg.get("architectures") != ["BertForSequenceClassification"]:
        die(f"config.json is not a BertForSequenceClassification (model_type {cfg.get('model_type')!r}, "
            f"architectures {cfg.get('architectures')!r})")
    if cfg.get("position_embedding_type", "absolute") != "absolute":
        die("only absolute position embeddings are handled")
    n = cfg.get("num_labels") or len(cfg.get("id2label") or {}) or 2
    s = {
        "bert.embeddings.word_embeddings.weight": (V, H),
        "bert.embeddings.position_embeddings.weight": (P, H),
        "bert.embeddings.token_type_embeddings.weight": (T, H),
        "bert.embeddings.LayerNorm.weight": (H,),
        "bert.embeddings.LayerNorm.bias": (H,),
        "bert.pooler.dense.weight": (H, H),
        "bert.pooler.dense.bias": (H,),
        "classifier.weight": (n, H),
        "classifier.bias": (n,),
    }
    for i in range(L):
        p = f"bert.encoder.layer.{i}."
        for m in ("query", "key", "value"):
            s[p + f"attention.self.{m}.weight"] = (H, H)
            s[p + f"attention.self.{m}.bias"] = (H,)
        s[p + "attention.output.dense.weight"] = (H, H)
        s[p + "attention.output.dense.bias"] = (H,)
        s[p + "attention.output.LayerNorm.weight"] = (H,)
        s[p + "attention.output.LayerNorm.bias"] = (H,)
        s[p + "intermediate.dense.weight"] = (I, H)
        s[p + "intermediate.dense.bias"] = (I,)
        s[p + "output.dense.weight"] = (H, I)
        s[p + "output.dense.bias"] = (H,)
        s[p + "output.LayerNorm.weight"] = (H,)
        s[p + "output.LayerNorm.bias"] = (H,)
    return s


def h5_variables(path: str) -> list:
    """(TF variable name, dataset) for every weight the Keras file lists, in its order. Every
    dataset in the file must be listed (a stray one is an error, not silently dropped)."""
    out, listed = [], set()
    with h5py.File(path, "r") as f:
        groups = f.attrs.get("layer_names")
        if groups is None:
            die(f"{path}: no 'layer_names' attribute (not a Keras save_weights HDF5 file)")
        for g in groups:
            g = g.decode() if isinstance(g, bytes) else str(g)
            for w in f[g].attrs.get("weight_names", []):
                w = w.decode() if isinstance(w, bytes) else str(w)
                key = f"{g}/{w}"
                if key not in f or not isinstance(f[key], h5py.Dataset):
                    die(f"{path}: layer {g!r} lists {w!r}, which the file lacks")
                if key in listed:
                    die(f"{path}: {key!r} is listed twice")
                listed.add(key)
                out.append((w, np.array(f[key][()])))
        stray = []
        f.visititems(lambda name, obj: stray.append(name)
                     if isinstance(obj, h5py.Dataset) and name not in listed else None)
        if stray:
            die(f"{path}: datasets no layer lists: {', '.join(stray)}")
    return out


def convert(h5: str, cfg: dict) -> dict:
    want = expected_shapes(cfg)
    rules = [(re.compile(rx), tpl, tr) for rx, tpl, tr in RULES]
    got: dict = {}
    for tf_name, arr in h5_variables(h5):
        if not tf_name.endswith(":0"):
            die(f"unexpected TF variable name {tf_name!r}")
        base = tf_name[:-2]
        hits = [(m, tpl, tr) for rx, tpl, tr in rules if (m := rx.fullmatch(base))]
        if len(hits) != 1:
            die(f"no rule maps the TF variable {tf_name!r}" if not hits else f"several rules map {tf_name!r}")
        m, tpl, tr = hits[0]
        name = tpl.format(*m.groups())
        if name in got:
            die(f"{tf_name!r} maps to {name}, which another variable already gave")
        if arr.dtype != np.float32:
            die(f"{tf_name!r} is {arr.dtype}, expected float32")
        if tr:
            if arr.ndim != 2:
                die(f"{tf_name!r} is a kernel of shape {arr.shape}, expected 2-D")
            arr = arr.T
        if name not in want:
            die(f"{tf_name!r} maps to {name}, which config.json's architecture does not have")
        if tuple(arr.shape) != want[name]:
            die(f"{tf_name!r} -> {name}: shape {tuple(arr.shape)}, config.json implies {want[name]}")
        got[name] = np.ascontiguousarray(arr)
    missing = sorted(set(want) - set(got))
    if missing:
        die(f"the checkpoint lacks {', '.join(missing)}")
    return got


def read_labels(path: str, column: str) -> list:
    with open(path, encoding="utf-8-sig", newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows or column not in rows[0]:
        die(f"{path}: no column {column!r}")
    labels: list = []
    for r in rows:
        v = (r[column] or "").strip()
        if not v:
            die(f"{path}: an empty label")
        if v not in labels:
            labels.append(v)
    return labels


def write_json(path: str, obj: dict) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--h5", required=True, help="tf_model.h5")
    ap.add_argument("--config", required=True, help="the checkpoint's config.json")
    ap.add_argument("--vocab", required=True, help="the WordPiece vocab.txt")
    ap.add_argument("--out", required=True, help="output folder (created; files in it are overwritten)")
    ap.add_argument("--labels", help="CSV with the class names, row i = class i")
    ap.add_argument("--labels-column", default="cat")
    ap.add_argument("--model-max-length", type=int, default=512)
    ap.add_argument("--cased", action="store_true", help="do_lower_case false (default: uncased)")
    a = ap.parse_args()

    with open(a.config, encoding="utf-8") as f:
        cfg = json.load(f)
    if a.labels:
        labels = read_labels(a.labels, a.labels_column)
        n = len(cfg.get("id2label") or {}) or cfg.get("num_labels")
        if n and n != len(labels):
            die(f"{a.labels} lists {len(labels)} labels, config.json has {n}")
        cfg["id2label"] = {str(i): s for i, s in enumerate(labels)}
        cfg["label2id"] = {s: i for i, s in enumerate(labels)}
    tensors = convert(a.h5, cfg)

    with open(a.vocab, encoding="utf-8") as f:
        vocab = f.read().split("\n")
    if vocab and vocab[-1] == "":
        vocab.pop()
    if len(vocab) > cfg["vocab_size"]:
        die(f"{a.vocab} has {len(vocab)} tokens, more than vocab_size {cfg['vocab_size']}")
    special = {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
               "mask_token": "[MASK]"}
    for tok in special.values():
        if tok not in vocab:
            die(f"{a.vocab} lacks {tok}")
    if cfg.get("pad_token_id", 0) != vocab.index("[PAD]"):
        die(f"config.json's pad_token_id {cfg.get('pad_token_id')} is not [PAD]'s id {vocab.index('[PAD]')}")
    if a.model_max_length > cfg["max_position_embeddings"]:
        die(f"--model-max-length {a.model_max_length} exceeds max_position_embeddings")

    os.makedirs(a.out, exist_ok=True)
    weights = os.path.join(a.out, "model.safetensors")
    save_file(tensors, weights, metadata={"format": "pt"})
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(weights, 0o666 & ~umask)  # safetensors writes it 0600; make it like the other files
    write_json(os.path.join(a.out, "config.json"), cfg)
    with open(os.path.join(a.out, "vocab.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(t + "\n" for t in vocab))
    write_json(os.path.join(a.out, "tokenizer_config.json"), {
        "tokenizer_class": "BertTokenizer",
        "do_lower_case": not a.cased,
        "do_basic_tokenize": True,
        "never_split": None,
        "tokenize_chinese_chars": True,
        "strip_accents": None,
        "model_max_length": a.model_max_length,
        "clean_up_tokenization_spaces": True,
        **special,
    })
    write_json(os.path.join(a.out, "special_tokens_map.json"), special)
    print(f"tf_h5_to_safetensors: {len(tensors)} tensors, "
          f"{sum(int(t.size) for t in tensors.values())} parameters -> {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
