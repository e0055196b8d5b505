"""Shared helpers for the training scripts: configs as save_pretrained writes them, export of a
model folder (safetensors + tokenizer files), length-bucketed batching, LR schedule."""
import json
import os
import random
import shutil
import time

import numpy as np
import torch

import safetensors_io

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
WORK = os.path.join(HERE, "work")          # intermediate checkpoints, never committed
MODELS = os.path.join(ROOT, "models")
GOLDEN = os.path.normpath(os.path.join(ROOT, "..", "shared", "golden", "models"))
MAX_BYTES = 6 * 1000 * 1000                # above this a model is stored as F16

# The project's "mini" encoder shape, shared by every model so one MLM pre-training serves all.
MINI = dict(hidden_size=192, num_hidden_layers=4, num_attention_heads=4, intermediate_size=768,
            max_position_embeddings=256)
VOCAB_SIZE = 5000
SPM_SIZE = 5000


def setup(seed):
    torch.set_num_threads(1)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def bert_config(arch, vocab_size, id2label=None, problem_type=None, model_type="bert"):
    cfg = {
        "architectures": [arch], "attention_probs_dropout_prob": 0.1, "classifier_dropout": None,
        "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "initializer_range": 0.02,
        "layer_norm_eps": 1e-12, "model_type": model_type, "pad_token_id": 0,
        "position_embedding_type": "absolute", "torch_dtype": "float32",
        "transformers_version": "4.31.0", "type_vocab_size": 2, "use_cache": True,
        "vocab_size": vocab_size,
    }
    cfg.update(MINI)
    if model_type == "xlm-roberta":
        # XLM-R reserves positions 0 and 1 (pad), so the table is 2 longer than the usable length.
        cfg.update(bos_token_id=0, eos_token_id=2, pad_token_id=1, type_vocab_size=1,
                   layer_norm_eps=1e-5, max_position_embeddings=MINI["max_position_embeddings"] + 2)
    _labels(cfg, id2label, problem_type)
    return cfg


def distilbert_config(arch, vocab_size, id2label=None):
    cfg = {
        "activation": "gelu", "architectures": [arch], "attention_dropout": 0.1,
        "dim": MINI["hidden_size"], "dropout": 0.1, "hidden_dim": MINI["intermediate_size"],
        "initializer_range": 0.02, "max_position_embeddings": MINI["max_position_embeddings"],
        "model_type": "distilbert", "n_heads": MINI["num_attention_heads"],
        "n_layers": MINI["num_hidden_layers"], "pad_token_id": 0, "qa_dropout": 0.1,
        "seq_classif_dropout": 0.2, "sinusoidal_pos_embds": False, "torch_dtype": "float32",
        "transformers_version": "4.31.0", "vocab_size": vocab_size,
    }
    _labels(cfg, id2label, None)
    return cfg


def _labels(cfg, id2label, problem_type):
    if id2label is not None:
        cfg["id2label"] = {str(i): n for i, n in enumerate(id2label)}
        cfg["label2id"] = {n: i for i, n in enumerate(id2label)}
    if problem_type:
        cfg["problem_type"] = problem_type


def write_json(path, obj):
    # save_pretrained's layout: indent 2, sorted keys, trailing newline.
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def export(model, cfg, folder, extra_files=None):
    """Write config.json + model.safetensors (F32, or F16 when over MAX_BYTES) and copy
    extra_files {name: source path or bytes}. Loads the stored (possibly F16-rounded)
    weights back into `model`, so evaluation afterwards sees what bert8 will see."""
    os.makedirs(folder, exist_ok=True)
    sd = {k: v.detach().cpu().float().numpy() for k, v in model.state_dict().items()}
    nbytes = sum(a.size * 4 for a in sd.values())
    half = nbytes > MAX_BYTES
    if half:
        sd = {k: a.astype(np.float16) for k, a in sd.items()}
    cfg = dict(cfg)
    cfg["torch_dtype"] = "float16" if half else "float32"
    write_json(os.path.join(folder, "config.json"), cfg)
    safetensors_io.write(os.path.join(folder, "model.safetensors"), sd)
    for name, src in (extra_files or {}).items():
        dst = os.path.join(folder, name)
        if isinstance(src, (bytes, bytearray)):
            with open(dst, "wb") as f:
                f.write(src)
        else:
            shutil.copyfile(src, dst)
    back = {k: torch.from_numpy(a.astype(np.float32)) for k, a in sd.items()}
    model.load_state_dict(back)
    return "F16" if half else "F32"


def bert_tokenizer_files(vocab_path):
    # tokenizer_config.json in the format BertTokenizer.save_pretrained (v4.31) writes.
    tc = {"clean_up_tokenization_spaces": True, "cls_token": "[CLS]", "do_basic_tokenize": True,
          "do_lower_case": True, "mask_token": "[MASK]",
          "model_max_length": MINI["max_position_embeddings"], "never_split": None,
          "pad_token": "[PAD]", "sep_token": "[SEP]", "strip_accents": None,
          "tokenize_chinese_chars": True, "tokenizer_class": "BertTokenizer", "unk_token": "[UNK]"}
    stm = {"cls_token": "[CLS]", "mask_token": "[MASK]", "pad_token": "[PAD]", "sep_token": "[SEP]",
           "unk_token": "[UNK]"}
    return {"vocab.txt": vocab_path,
            "tokenizer_config.json": _jbytes(tc), "special_tokens_map.json": _jbytes(stm)}


def xlmr_tokenizer_files(spm_path):
    mask = {"content": "<mask>", "lstrip": True, "normalized": True, "rstrip": False,
            "single_word": False}
    tc = {"bos_token": "<s>", "clean_up_tokenization_spaces": True, "cls_token": "<s>",
          "eos_token": "</s>", "mask_token": dict(mask, __type="AddedToken"),
          "model_max_length": MINI["max_position_embeddings"], "pad_token": "<pad>",
          "sep_token": "</s>", "sp_model_kwargs": {}, "tokenizer_class": "XLMRobertaTokenizer",
          "unk_token": "<unk>"}
    stm = {"bos_token": "<s>", "cls_token": "<s>", "eos_token": "</s>", "mask_token": mask,
           "pad_token": "<pad>", "sep_token": "</s>", "unk_token": "<unk>"}
    return {"sentencepiece.bpe.model": spm_path,
            "tokenizer_config.json": _jbytes(tc), "special_tokens_map.json": _jbytes(stm)}


def _jbytes(obj):
    return (json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def batches(lengths, max_tokens, rng, max_batch=128, shuffle=True):
    """Index lists grouped by similar length so padding stays small; each batch holds at most
    max_tokens padded tokens."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    if shuffle:
        # Sort within large random chunks only, so epochs differ but lengths still group.
        idx = list(range(len(lengths)))
        rng.shuffle(idx)
        chunk = max(1, max_batch * 50)
        order = []
        for s in range(0, len(idx), chunk):
            order += sorted(idx[s:s + chunk], key=lambda i: lengths[i])
    out, cur, cur_max = [], [], 0
    for i in order:
        m = max(cur_max, lengths[i])
        if cur and (m * (len(cur) + 1) > max_tokens or len(cur) >= max_batch):
            out.append(cur)
            cur, m = [], lengths[i]
        cur.append(i)
        cur_max = m
    if cur:
        out.append(cur)
    if shuffle:
        rng.shuffle(out)
    return out


def pad(seqs, value):
    t = max(len(s) for s in seqs)
    return torch.tensor([list(s) + [value] * (t - len(s)) for s in seqs], dtype=torch.long)


def optimizer(model, lr, total_steps, warmup=0.06, wd=0.01, betas=(0.9, 0.999)):
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (no_decay if p.dim() < 2 or "LayerNorm" in n or "layer_norm" in n else decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": wd},
                             {"params": no_decay, "weight_decay": 0.0}], lr=lr, betas=betas)
    w = max(1, int(total_steps * warmup))

    def f(step):
        if step < w:
            return (step + 1) / w
        return max(0.0, (total_steps - step) / max(1, total_steps - w))

    return opt, torch.optim.lr_scheduler.LambdaLR(opt, f)


class Clock:
    def __init__(self):
        self.t0 = time.time()

    def minutes(self):
        return (time.time() - self.t0) / 60.0


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, flush=True)
