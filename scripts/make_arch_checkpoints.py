#!/usr/bin/env python3
"""Random-weight checkpoints of every architecture bert8 reads, made by transformers, with the
outputs transformers computes for them: the oracle of python/tests/test_architectures.py.

    python3 scripts/make_arch_checkpoints.py OUT_DIR [--arch mpnet,roberta,...] [--quick]

For each architecture, shape and head, OUT_DIR/<arch>_<shape>_<head>/ holds config.json and
model.safetensors (save_pretrained) and cases.npz: padded batches of random token ids (lengths
1 to 520 for the long shape, pad ids among the real tokens too), their attention masks and
token type ids, and transformers' outputs (last_hidden_state, pooler_output, logits,
start_logits, end_logits). Every parameter is drawn with a spread far above the initializer's,
so that a LayerNorm, a bias or a relative-position bucket that bert8 got wrong shows.
Needs torch and transformers; deterministic for a given transformers version."""
from __future__ import annotations

import argparse
import json
import pathlib

import numpy as np
import torch
import transformers as tf

# (hidden, layers, heads, intermediate, max_position_embeddings, longest sequence)
SHAPES = {
    "s": (32, 2, 4, 37, 64, 40),
    "m": (48, 3, 6, 64, 130, 120),
    "l": (64, 2, 2, 96, 600, 520),
}

# architecture -> (config class, model_type specific fields, {head: model class})
ARCHS = {
    "bert": (tf.BertConfig, {"type_vocab_size": 3}, "Bert"),
    "distilbert": (tf.DistilBertConfig, {}, "DistilBert"),
    "xlm-roberta": (tf.XLMRobertaConfig, {"type_vocab_size": 1, "pad_token_id": 1}, "XLMRoberta"),
    "roberta": (tf.RobertaConfig, {"type_vocab_size": 1, "pad_token_id": 1}, "Roberta"),
    "camembert": (tf.CamembertConfig, {"type_vocab_size": 1, "pad_token_id": 1}, "Camembert"),
    "mpnet": (tf.MPNetConfig, {"pad_token_id": 1, "relative_attention_num_buckets": 32}, "MPNet"),
    # rotary positions, gated FFNs: GTE (GeGLU, no gate/up biases), NomicBERT (SwiGLU, no biases,
    # a non-default theta, two token types), Jina v3 (plain FFN, RoBERTa's head)
    "gte": (tf.GteConfig, {"pad_token_id": 1}, "Gte"),
    "nomic-bert": (tf.NomicBertConfig, {"pad_token_id": 0, "rope_parameters": {"rope_type": "default",
                                                                           "rope_theta": 500.0}}, "NomicBert"),
    "jina-v3": (tf.JinaEmbeddingsV3Config, {"pad_token_id": 1, "type_vocab_size": 1}, "JinaEmbeddingsV3"),
    # pre-norm, GeGLU, no biases, a sliding window of 16 keys (8 each side) in every layer but
    # each second one, its own rope theta; the head's mean pooling
    "modernbert": (tf.ModernBertConfig, {"pad_token_id": 0, "local_attention": 16, "global_attn_every_n_layers": 2,
                                         "norm_eps": 1e-5, "global_rope_theta": 10000.0, "local_rope_theta": 500.0,
                                         "classifier_pooling": "mean"}, "ModernBert"),
    # Jina v3 as its published checkpoints store it (the XLMRobertaLoRA custom code): "roberta."
    # prefix, task LoRA adapters on the embeddings and every Linear (add_lora); base model only (last, so
    # that the other architectures keep their seeds)
    "jina-v3-lora": (tf.JinaEmbeddingsV3Config, {"pad_token_id": 1, "type_vocab_size": 1}, "JinaEmbeddingsV3"),
    # disentangled attention; each shape its own variant (SHAPE_EXTRA)
    "deberta-v2": (tf.DebertaV2Config, {"pad_token_id": 0, "relative_attention": True}, "DebertaV2"),
}
# Per-shape settings on top of ARCHS' extras. DeBERTa: s is v3's layout with small log buckets
# (16, reached at 40 tokens) and the c2p term alone; m is v2's without buckets (offsets clamped
# at 48), separate pos_key_proj / pos_query_proj, an absolute position table, token types, no
# LayerNorm on the relative embeddings, pos_att_type as a "|" string and a tanh ContextPooler;
# l is deberta-v3-base's own settings (256 buckets, max_relative_positions 512) at 520 tokens.
SHAPE_EXTRA = {
    ("deberta-v2", "s"): {"position_buckets": 16, "share_att_key": True, "norm_rel_ebd": "layer_norm",
                          "position_biased_input": False, "pos_att_type": ["c2p"], "type_vocab_size": 0},
    ("deberta-v2", "m"): {"share_att_key": False, "max_relative_positions": 48, "position_biased_input": True,
                          "type_vocab_size": 2, "pos_att_type": "p2c|c2p", "pooler_hidden_act": "tanh"},
    ("deberta-v2", "l"): {"position_buckets": 256, "max_relative_positions": 512, "share_att_key": True,
                          "norm_rel_ebd": "layer_norm", "position_biased_input": False,
                          "pos_att_type": ["p2c", "c2p"], "type_vocab_size": 0},
}
HEADS = {"base": "Model", "seqcls": "ForSequenceClassification", "tokcls": "ForTokenClassification",
         "qa": "ForQuestionAnswering", "mlm": "ForMaskedLM"}
VOCAB = 211


# Jina v3's LoRA adapters: transformers 5.24's JinaEmbeddingsV3Model has none (no lora_* config
# field, no adapter_mask), so the adapters are written here in the custom code's layout and the
# oracle folds them into transformers' weights with torch (W + alpha / rank * B A; A B for the
# embedding tables), exactly as that code's LoRAParametrization.lora_forward does.
LORA_TASKS = ["retrieval.query", "retrieval.passage", "separation", "classification", "text-matching"]
LORA_RANK, LORA_ALPHA = 4, 3.0


def heads_of(arch: str) -> list[str]:
    """The heads transformers has for the architecture (GTE and NomicBERT have no QA model)."""
    if arch.endswith("-lora"):
        return ["base"]
    return [h for h in HEADS if hasattr(tf, ARCHS[arch][2] + HEADS[h])]


def add_lora(d: pathlib.Path, model: torch.nn.Module, cfg, gen: torch.Generator) -> dict:
    """Rewrites d's checkpoint in the published jina-embeddings-v3 layout: every tensor under
    "roberta.", each Embedding and Linear weight as "<m>.parametrizations.weight.original" with
    random adapters "<m>.parametrizations.weight.0.lora_A/lora_B" (one slice per task); adds
    lora_adaptations, lora_rank and lora_alpha to config.json. Returns, per task, the
    transformers state dict with that task's adapters folded in."""
    from safetensors.torch import load_file, save_file  # noqa: PLC0415

    T, r, scale = len(LORA_TASKS), LORA_RANK, LORA_ALPHA / LORA_RANK
    H = cfg.hidden_size
    saved = load_file(str(d / "model.safetensors"))
    # saved (custom-code) module -> [(transformers parameter, first row)] and whether it is a table
    modules = {"embeddings.word_embeddings": ([("embeddings.word_embeddings.weight", 0)], True),
               "embeddings.token_type_embeddings": ([("embeddings.token_type_embeddings.weight", 0)], True),
               "pooler.dense": ([("pooler.dense.weight", 0)], False)}
    for i in range(cfg.num_hidden_layers):
        p, q = f"encoder.layers.{i}.", f"layers.{i}."
        modules[p + "mixer.Wqkv"] = ([(q + f"self_attn.{x}_proj.weight", j * H) for j, x in enumerate("qkv")], False)
        modules[p + "mixer.out_proj"] = ([(q + "self_attn.o_proj.weight", 0)], False)
        modules[p + "mlp.fc1"] = ([(q + "mlp.fc1.weight", 0)], False)
        modules[p + "mlp.fc2"] = ([(q + "mlp.fc2.weight", 0)], False)
    out, deltas = {}, {t: {} for t in LORA_TASKS}
    for name, w in saved.items():
        mod = name[: -len(".weight")]
        if mod not in modules:
            out["roberta." + name] = w
            continue
        n, k = w.shape
        table = modules[mod][1]
        a = 0.3 * torch.randn((T, n, r) if table else (T, r, k), generator=gen)
        b = 0.3 * torch.randn((T, r, k) if table else (T, n, r), generator=gen)
        base = "roberta." + mod + ".parametrizations.weight."
        out[base + "original"], out[base + "0.lora_A"], out[base + "0.lora_B"] = w, a, b
        for t, task in enumerate(LORA_TASKS):
            deltas[task][mod] = (a[t] @ b[t] if table else b[t] @ a[t]) * scale
    save_file(out, str(d / "model.safetensors"), metadata={"format": "pt"})
    c = json.loads((d / "config.json").read_text())
    c.update(lora_adaptations=LORA_TASKS, lora_rank=LORA_RANK, lora_alpha=LORA_ALPHA)
    (d / "config.json").write_text(json.dumps(c, indent=2))
    states = {}
    for task in LORA_TASKS:
        sd = {k: v.clone() for k, v in model.state_dict().items()}
        for mod, (targets, _) in modules.items():
            for pname, row in targets:
                rows = sd[pname].shape[0]
                sd[pname] = sd[pname] + deltas[task][mod][row: row + rows]
        states[task] = sd
    return states


def config_of(arch: str, shape: str, head: str):
    cls, extra, _ = ARCHS[arch]
    H, L, A, I, P, _ = SHAPES[shape]
    labels = 2 if head == "qa" else 3
    if arch == "distilbert":
        return cls(vocab_size=VOCAB, dim=H, n_layers=L, n_heads=A, hidden_dim=I, max_position_embeddings=P,
                   num_labels=labels, pad_token_id=0)
    pos = P + 2 if extra.get("pad_token_id") == 1 else P  # RoBERTa-style positions start after the pad index
    extra = {**extra, **SHAPE_EXTRA.get((arch, shape), {})}
    return cls(vocab_size=VOCAB, hidden_size=H, num_hidden_layers=L, num_attention_heads=A, intermediate_size=I,
               max_position_embeddings=pos, num_labels=labels, layer_norm_eps=1e-5, **extra)


def perturb(model: torch.nn.Module, gen: torch.Generator) -> None:
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ("layernorm" in name.lower() or "layer_norm" in name  # post_attention_layernorm too
                    or name.endswith(("norm.weight", "norm.bias"))):  # ModernBERT's attn_norm, final_norm
                base = 1.0 if name.endswith("weight") else 0.0
                p.copy_(base + 0.2 * torch.randn(p.shape, generator=gen))
            elif "relative_attention_bias" in name or "rel_embeddings" in name:
                p.copy_(1.5 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.15 * torch.randn(p.shape, generator=gen))


def batch(cfg, arch: str, longest: int, rng: np.random.Generator):
    lengths = [1, 7, longest, max(2, longest // 3)]
    T = max(lengths)
    pad = cfg.pad_token_id
    ids = np.full((len(lengths), T), pad, dtype=np.int64)
    mask = np.zeros((len(lengths), T), dtype=np.int64)
    for b, n in enumerate(lengths):
        ids[b, :n] = rng.integers(0, VOCAB, n)
        mask[b, :n] = 1
    ids[2, 3] = pad  # a pad id among real tokens: it takes the pad position in RoBERTa-style models
    tv = getattr(cfg, "type_vocab_size", 0) if arch != "distilbert" else 0
    types = rng.integers(0, tv, ids.shape) * mask if tv and tv > 1 else None
    return ids, mask, types


def write_tokenizer(d: pathlib.Path, cfg) -> None:
    """A WordPiece tokenizer.json over the VOCAB ids (specials, letters, digits, their ## forms,
    punctuation), so that the folder can be calibrated on text; RoBERTa's specials and template
    where the pad id is 1."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    roberta = cfg.pad_token_id == 1
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"] if roberta else ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    pieces = [chr(c) for c in range(ord("a"), ord("z") + 1)] + [str(i) for i in range(10)]
    pieces += ["##" + p for p in pieces] + list(".,!?'-;:()\"")
    words = ["the", "film", "movie", "good", "bad", "is", "and", "of", "to", "it", "this", "that", "not"]
    vocab = specials + pieces + words
    vocab += [f"w{i}" for i in range(VOCAB - len(vocab))]
    unk = specials[3] if roberta else specials[1]
    tok = Tokenizer(models.WordPiece({t: i for i, t in enumerate(vocab)}, unk_token=unk))
    tok.add_special_tokens(specials)
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    if roberta:
        tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    else:
        tok.post_processor = processors.BertProcessing(("[SEP]", 3), ("[CLS]", 2))
    tok.save(str(d / "tokenizer.json"))
    (d / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 128, "clean_up_tokenization_spaces": True}))


def make(out: pathlib.Path, arch: str, shape: str, head: str, seed: int) -> None:
    cfg = config_of(arch, shape, head)
    cls = getattr(tf, ARCHS[arch][2] + HEADS[head])
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = cls(cfg).eval()
    perturb(model, gen)
    d = out / f"{arch}_{shape}_{head}"
    model.save_pretrained(d, safe_serialization=True)
    write_tokenizer(d, cfg)
    states = add_lora(d, model, cfg, gen) if arch.endswith("-lora") else {}
    ids, mask, types = batch(cfg, arch, SHAPES[shape][5], np.random.default_rng(seed))
    kw = {"input_ids": torch.tensor(ids), "attention_mask": torch.tensor(mask)}
    if types is not None:
        kw["token_type_ids"] = torch.tensor(types)
    with torch.no_grad():
        res = model(**kw, output_hidden_states=True)
    arrays = {"input_ids": ids, "attention_mask": mask, "last_hidden_state": res.hidden_states[-1].numpy()}
    base_state = {k: v.clone() for k, v in model.state_dict().items()}
    for task, sd in states.items():  # per task: "lora__<task>__<output>"
        model.load_state_dict(sd)
        with torch.no_grad():
            rt = model(**kw, output_hidden_states=True)
        arrays[f"lora__{task}__last_hidden_state"] = rt.hidden_states[-1].numpy()
        arrays[f"lora__{task}__pooler_output"] = rt.pooler_output.numpy()
    if states:
        model.load_state_dict(base_state)
    if types is not None:
        arrays["token_type_ids"] = types
    if head == "base" and getattr(res, "pooler_output", None) is not None:
        arrays["pooler_output"] = res.pooler_output.numpy()
    for name in ("logits", "start_logits", "end_logits"):
        if head not in ("base", "mlm") and getattr(res, name, None) is not None:
            arrays[name] = getattr(res, name).numpy()
    if head == "mlm":  # the vocabulary logits, and fill-mask's top 5 at a mask in a text
        arrays["mlm_logits"] = res.logits.numpy()
        names = (["<s>", "<pad>", "</s>", "<unk>", "<mask>"] if cfg.pad_token_id == 1
                 else ["[CLS]", "[PAD]", "[SEP]", "[UNK]", "[MASK]"])
        tok = tf.PreTrainedTokenizerFast(tokenizer_file=str(d / "tokenizer.json"), cls_token=names[0],
                                         pad_token=names[1], sep_token=names[2], unk_token=names[3],
                                         mask_token=names[4], clean_up_tokenization_spaces=True)
        fm = tf.pipeline("fill-mask", model=model, tokenizer=tok, top_k=5)
        mask = names[4]
        texts = [f"the film is {mask} .", f"a {mask} movie and {mask} good"]
        (d / "fill_mask.json").write_text(json.dumps({"texts": texts, "outputs": [fm(t) for t in texts]}))
    np.savez(d / "cases.npz", **arrays)
    (d / "oracle.json").write_text(json.dumps({"transformers": tf.__version__, "torch": torch.__version__,
                                               "class": cls.__name__, "seed": seed}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=pathlib.Path)
    ap.add_argument("--arch", default=",".join(ARCHS), help="comma-separated architectures")
    ap.add_argument("--quick", action="store_true", help="the small shape with every head, the others base only")
    a = ap.parse_args()
    seed = 100
    for arch in a.arch.split(","):
        if arch not in ARCHS:
            raise SystemExit(f"unknown architecture {arch!r} ({', '.join(ARCHS)})")
        for shape in SHAPES:
            heads = heads_of(arch) if shape == "s" or not a.quick else ["base"]
            for head in heads:
                seed += 1
                make(a.out, arch, shape, head, seed)
    print(f"wrote {sum(1 for _ in a.out.iterdir())} checkpoints to {a.out}")


if __name__ == "__main__":
    main()
