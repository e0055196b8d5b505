"""Shared pieces of the peer benchmark: model specs, token ids, work per sequence, timing.

Imported by every runner process, so it must stay light: numpy and the standard library only.
"""
import json
import os
import statistics
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
SHARED = os.environ.get("BERT8_SHARED", os.path.abspath(os.path.join(REPO, "..", "shared")))
WORK = os.environ.get("PEERS_WORK", os.path.join(HERE, "work"))

# Model specs. The *-base ones are the measured models; the tiny-* ones (2 layers, hidden 128)
# exist only so that --quick can check every runner end to end in seconds.
MODELS = {
    "bert-base": dict(arch="bert", layers=12, hidden=768, heads=12, inter=3072, vocab=30522, maxpos=512),
    "distilbert-base": dict(arch="distilbert", layers=6, hidden=768, heads=12, inter=3072, vocab=30522, maxpos=512),
    "xlmr-base": dict(arch="xlmr", layers=12, hidden=768, heads=12, inter=3072, vocab=250002, maxpos=514),
    "tiny-bert": dict(arch="bert", layers=2, hidden=128, heads=2, inter=512, vocab=30522, maxpos=512),
    "tiny-distilbert": dict(arch="distilbert", layers=2, hidden=128, heads=2, inter=512, vocab=30522, maxpos=512),
    "tiny-xlmr": dict(arch="xlmr", layers=2, hidden=128, heads=2, inter=512, vocab=250002, maxpos=514),
}


# config.json model_type -> the arch names above
ARCHS = {"bert": "bert", "distilbert": "distilbert", "xlm-roberta": "xlmr", "roberta": "xlmr"}


def is_folder(model):
    """A --models entry is a checkpoint folder (a real model) when it names a directory."""
    return os.sep in model or os.path.isdir(model)


def model_name(model):
    """Short name of a model: the spec name, or a folder's base name."""
    return os.path.basename(os.path.normpath(model)) if is_folder(model) else model


def spec_of(model):
    """The spec of a named random model, or one read from a checkpoint folder's config.json."""
    if not is_folder(model):
        return MODELS[model]
    with open(os.path.join(model, "config.json")) as f:
        c = json.load(f)
    mt = c.get("model_type", "bert")
    if mt not in ARCHS:
        raise ValueError(f"{model}/config.json: model_type {mt!r} is not one of {sorted(ARCHS)}")
    if mt == "distilbert":
        keys = dict(layers="n_layers", hidden="dim", heads="n_heads", inter="hidden_dim")
    else:
        keys = dict(layers="num_hidden_layers", hidden="hidden_size", heads="num_attention_heads",
                    inter="intermediate_size")
    spec = {k: int(c[v]) for k, v in keys.items()}
    spec.update(arch=ARCHS[mt], vocab=int(c["vocab_size"]), maxpos=int(c["max_position_embeddings"]),
                real=True, dir=os.path.abspath(model))
    if mt in ("xlm-roberta", "roberta"):
        spec["pad"] = int(c.get("pad_token_id", 1))
    return spec


def check_model(model):
    """argparse type for --model: a random model's name or a checkpoint folder."""
    if is_folder(model):
        if not os.path.exists(os.path.join(model, "config.json")):
            raise ValueError(f"{model}: no config.json")
        return os.path.abspath(model)
    if model not in MODELS:
        raise ValueError(f"unknown model {model}; known: {', '.join(MODELS)} or a checkpoint folder")
    return model


# peer families that run in their own venv (bench/peers/work/venv-NAME, made by run.sh from
# requirements-NAME.txt), because their packages pin versions of their own; the rest run in the main venv
FAMILY_VENV = {"llamacpp": "venv-llamacpp", "fastembed": "venv-fastembed"}


def family_python(family, default):
    """The Python a peer family runs in (None when its venv was not made)."""
    v = FAMILY_VENV.get(family)
    if not v:
        return default
    py = os.path.join(WORK, v, "bin", "python")
    return py if os.path.exists(py) else None


def model_dir(name):
    if is_folder(name):
        return os.path.abspath(name)
    return os.path.join(WORK, "models", name)


def artifacts_dir(name, seq, calib_n):
    """Where the converted/quantized peer models of one checkpoint live (calibration depends on seq)."""
    return os.path.join(WORK, "artifacts", f"{model_name(name)}.seq{seq}.calib{calib_n}")


def parse_shape(shape, seq):
    """A column: "B" (batch B at --seq tokens), "BxS" (batch B at S tokens) or "mix".
    Returns (batch, seq) or None for the mix."""
    shape = str(shape)
    if shape == "mix":
        return None
    if "x" in shape:
        b, s = shape.split("x")
        return int(b), int(s)
    return int(shape), seq


def pad_id(spec):
    return spec.get("pad", 1 if spec["arch"] == "xlmr" else 0)


def has_token_types(spec):
    return spec["arch"] != "distilbert"


def bert8_ids(batch, seq, vocab):
    """bert8's own timing ids: id = 5 + ((uint64)i * 2654435761) mod (vocab - 5), i the flat index.

    i * 2654435761 stays far below 2^64 for any batch the bench takes, so Python's exact integers
    give the same value as bert8's uint64 arithmetic; the wrap is applied anyway to mirror it."""
    n = batch * seq
    out = np.empty(n, dtype=np.int64)
    m = vocab - 5
    for i in range(n):
        out[i] = 5 + ((i * 2654435761) % (1 << 64)) % m
    return out.reshape(batch, seq)


def fixed_inputs(spec, batch, seq):
    """The fixed-shape timing batch as int64 numpy arrays (ids, mask of ones, types of zeros)."""
    ids = bert8_ids(batch, seq, spec["vocab"])
    feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
    if has_token_types(spec):
        feeds["token_type_ids"] = np.zeros_like(ids)
    return feeds


def pad_batch(spec, rows):
    """Pads a list of id lists to the longest; returns int64 feeds with the attention mask."""
    L = max(len(r) for r in rows)
    ids = np.full((len(rows), L), pad_id(spec), dtype=np.int64)
    mask = np.zeros((len(rows), L), dtype=np.int64)
    for k, r in enumerate(rows):
        ids[k, : len(r)] = r
        mask[k, : len(r)] = 1
    feeds = {"input_ids": ids, "attention_mask": mask}
    if has_token_types(spec):
        feeds["token_type_ids"] = np.zeros_like(ids)
    return feeds


def lengthmix_path():
    return os.path.join(WORK, "lengthmix", "sst2-dev.bert-base-uncased.json")


def lengthmix_batches(spec, batch):
    """The SST-2 dev sentences (bert-base-uncased ids) in batches of `batch` consecutive sentences,
    each padded to its own longest row. Returns (list of feeds, number of sentences)."""
    with open(lengthmix_path()) as f:
        rows = json.load(f)["ids"]
    out = [pad_batch(spec, rows[i : i + batch]) for i in range(0, len(rows), batch)]
    return out, len(rows)


def check_batches(spec):
    """The batches of the same-function check: a 2 x 16 batch of the timing ids and 3 padded
    SST-2 dev sentences (the mask in use)."""
    out = [fixed_inputs(spec, 2, 16)]
    if os.path.exists(lengthmix_path()):
        with open(lengthmix_path()) as f:
            rows = json.load(f)["ids"][:3]
        out.append(pad_batch(spec, rows))
    return out


def gop_per_seq(spec, seq):
    """Operations (multiply and add counted as 2) per sequence of `seq` tokens: per layer
    2*S*(4*H*H + 2*H*I) for the linear layers plus 4*S*S*H for scores and context."""
    H, I, L, S = spec["hidden"], spec["inter"], spec["layers"], seq
    return L * (2.0 * S * (4.0 * H * H + 2.0 * H * I) + 4.0 * S * S * H) / 1e9


def lengthmix_gop(spec, lengths, batch, padded):
    """Total GOP of the length mix: packed counts each sentence at its own length, padded at
    its batch's longest."""
    total = 0.0
    for i in range(0, len(lengths), batch):
        chunk = lengths[i : i + batch]
        for n in chunk:
            total += gop_per_seq(spec, max(chunk) if padded else n)
    return total


def time_fn(fn, warmup, budget_s, min_iters, max_iters):
    """Warm-up calls, then calls until both min_iters and budget_s are reached (or max_iters).
    Returns the list of per-call wall times in seconds."""
    for _ in range(warmup):
        fn()
    times = []
    start = time.perf_counter()
    while len(times) < max_iters:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if len(times) >= min_iters and time.perf_counter() - start >= budget_s:
            break
    return times


def percentile(times, q):
    """The q-th percentile (nearest rank) of a list of call times."""
    t = sorted(times)
    return t[min(len(t) - 1, max(0, int(-(-q * len(t) // 100)) - 1))]


def summarize(times, seqs_per_call):
    med = statistics.median(times)
    return {
        "seq_per_s": seqs_per_call / med,
        "median_s": med,
        "p50_s": percentile(times, 50),
        "p99_s": percentile(times, 99),
        "best_s": min(times),
        "iterations": len(times),
        "times_s": times,
    }
