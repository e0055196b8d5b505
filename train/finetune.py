"""Fine-tune the MLM-pretrained BERT-mini encoder on one task and export it to models/<name>/
in the Hugging Face layout, then reload the exported folder and score the held-out split.

Run (one at a time, after pretrain_mlm.py):
  LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-serial /usr/bin/python3 train/finetune.py sst2
Tasks: sst2 mrpc stsb xnli squad.
"""
import argparse
import bisect
import collections
import json
import os
import random
import re
import string
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

import common
import data
import hf_models
import qa_teacher
import safetensors_io
import teacher
import tokenization

TASKS = {
    "sst2": dict(folder="sst2-bert-mini", arch="BertForSequenceClassification", epochs=3, lr=2e-4,
                 batch=64, labels=["negative", "positive"], seed=101),
    "mrpc": dict(folder="mrpc-distilbert-mini", arch="DistilBertForSequenceClassification", epochs=3,
                 lr=5e-5, batch=32, labels=["not_equivalent", "equivalent"], seed=102, from_stsb=True,
                 swap=True),
    "stsb": dict(folder="stsb-bert-mini", arch="BertForSequenceClassification", epochs=12, lr=1e-4,
                 batch=16, labels=None, seed=103),
    "xnli": dict(folder="xnli-xlmr-mini", arch="XLMRobertaForSequenceClassification", epochs=5,
                 lr=3e-4, batch=32, labels=data.XNLI_LABELS, seed=104, match_aux=1.0,
                 distill=dict(synthetic=15000)),
    "squad": dict(folder="squad-bert-mini", arch="BertForQuestionAnswering", epochs=5, lr=1e-3,
                  batch=32, labels=None, seed=105,
                  qa_aux=1.0, distill=dict(teacher_epochs=2, mix=1.0)),
}


# ---- model construction from the MLM checkpoint ----------------------------------------


INIT = {"sst2": "mlm_bert.pt"}  # every other task starts from the pair stage (pretrain_pairs.py)


def load_mlm(task):
    ck = torch.load(os.path.join(common.WORK, INIT.get(task, "mlm_bert2.pt")))
    return ck["state_dict"], ck


def init_bert(model, mlm):
    own = model.state_dict()
    enc = {k: v for k, v in mlm.items() if k.startswith("bert.") and k in own}  # QA has no pooler
    missing, unexpected = model.load_state_dict(enc, strict=False)
    assert not unexpected, unexpected
    return missing


def init_distilbert(model, mlm):
    sd = {}
    e = "bert.embeddings."
    sd["distilbert.embeddings.word_embeddings.weight"] = mlm[e + "word_embeddings.weight"]
    # No token types in DistilBERT: fold type 0 into the position table (exact for segment A).
    sd["distilbert.embeddings.position_embeddings.weight"] = (
        mlm[e + "position_embeddings.weight"] + mlm[e + "token_type_embeddings.weight"][0])
    sd["distilbert.embeddings.LayerNorm.weight"] = mlm[e + "LayerNorm.weight"]
    sd["distilbert.embeddings.LayerNorm.bias"] = mlm[e + "LayerNorm.bias"]
    names = {"attention.self.query": "attention.q_lin", "attention.self.key": "attention.k_lin",
             "attention.self.value": "attention.v_lin", "attention.output.dense": "attention.out_lin",
             "attention.output.LayerNorm": "sa_layer_norm", "intermediate.dense": "ffn.lin1",
             "output.dense": "ffn.lin2", "output.LayerNorm": "output_layer_norm"}
    for k, v in mlm.items():
        if not k.startswith("bert.encoder.layer."):
            continue
        rest = k[len("bert.encoder.layer."):]
        n, sub = rest.split(".", 1)
        base, leaf = sub.rsplit(".", 1)
        sd["distilbert.transformer.layer.%s.%s.%s" % (n, names[base], leaf)] = v
    missing, unexpected = model.load_state_dict(sd, strict=False)
    assert not unexpected, unexpected
    return missing


def stsb_state():
    t, _, _ = safetensors_io.read(os.path.join(common.MODELS, TASKS["stsb"]["folder"], "model.safetensors"))
    return {k: torch.from_numpy(v.astype(np.float32)) for k, v in t.items()}


def init_distilbert_from_stsb(model):
    """Intermediate-task transfer (STS-B train rows -> MRPC): the exported stsb-bert-mini encoder,
    its pooler as pre_classifier, and its similarity output turned into a 2-way head that calls
    a pair a paraphrase when the predicted similarity is above 3."""
    sd = stsb_state()
    missing = init_distilbert(model, sd)
    w, b = sd["classifier.weight"][0], sd["classifier.bias"][0]
    with torch.no_grad():
        model.pre_classifier.weight.copy_(sd["bert.pooler.dense.weight"])
        model.pre_classifier.bias.copy_(sd["bert.pooler.dense.bias"])
        model.classifier.weight.copy_(torch.stack([-w / 2, w / 2]))
        model.classifier.bias.copy_(torch.stack([-(b - 3) / 2, (b - 3) / 2]))
    return [k for k in missing if not k.startswith(("pre_classifier", "classifier"))]


def init_xlmr(model, mlm, bert_tok, xtok):
    """Reuse the BERT-mini encoder for XLM-R: each sentencepiece piece starts as the mean of
    the embeddings of its WordPiece split; positions shift by 2 (XLM-R starts at pad+1)."""
    sd = {}
    for k, v in mlm.items():
        if k.startswith("bert.encoder."):
            sd["roberta." + k[len("bert."):]] = v
    e = "bert.embeddings."
    sd["roberta.embeddings.LayerNorm.weight"] = mlm[e + "LayerNorm.weight"]
    sd["roberta.embeddings.LayerNorm.bias"] = mlm[e + "LayerNorm.bias"]
    sd["roberta.embeddings.token_type_embeddings.weight"] = mlm[e + "token_type_embeddings.weight"][:1].clone()
    pos = model.roberta.embeddings.position_embeddings.weight.detach().clone()
    bpos = mlm[e + "position_embeddings.weight"]
    pos[2:2 + bpos.shape[0]] = bpos
    pos[1].zero_()
    sd["roberta.embeddings.position_embeddings.weight"] = pos
    wemb = mlm[e + "word_embeddings.weight"]
    W = model.roberta.embeddings.word_embeddings.weight.detach().clone()
    special = {0: bert_tok.cls, 1: bert_tok.pad, 2: bert_tok.sep, 3: bert_tok.unk, xtok.mask: bert_tok.mask}
    for xi, bi in special.items():
        W[xi] = wemb[bi]
    for sp_id in range(3, xtok.sp.get_piece_size()):
        piece = xtok.sp.id_to_piece(sp_id)
        word_start = piece.startswith("\u2581")
        text = piece.lstrip("\u2581")
        if not text:
            W[sp_id + 1] = wemb[bert_tok.cls] * 0.0
            continue
        pieces = bert_tok.tokenize(text)
        if not word_start:
            pieces = [p if p.startswith("##") or p == "[UNK]" else "##" + p for p in pieces[:1]] + pieces[1:]
        ids = [bert_tok.vocab.get(p, bert_tok.unk) for p in pieces] or [bert_tok.unk]
        W[sp_id + 1] = wemb[ids].mean(0)
    sd["roberta.embeddings.word_embeddings.weight"] = W
    missing, unexpected = model.load_state_dict(sd, strict=False)
    assert not unexpected, unexpected
    return missing


def load_folder(folder):
    cfg = json.load(open(os.path.join(folder, "config.json")))
    t, _, _ = safetensors_io.read(os.path.join(folder, "model.safetensors"))
    model = hf_models.build(cfg)
    missing, unexpected = model.load_state_dict({k: torch.from_numpy(v.astype(np.float32)) for k, v in t.items()},
                                                strict=False)
    missing = [k for k in missing if "pooler" not in k]
    if missing or unexpected:
        raise RuntimeError("%s: missing %s unexpected %s" % (folder, missing, unexpected))
    return model.eval(), cfg


# ---- sequence tasks -------------------------------------------------------------------


def encode_pairs(task, tok, rows):
    out = []
    for r in rows:
        if task == "sst2":
            ids, tt = tok.encode(r[0])
        elif task == "xnli":
            ids = tok.encode(r[0], r[1])
            tt = [0] * len(ids)
        else:
            ids, tt = tok.encode(r[0], r[1])
        if len(ids) > 256:  # keep the tail [SEP]; very rare in these sets
            ids, tt = ids[:255] + ids[-1:], tt[:255] + tt[-1:]
        out.append((ids, tt))
    return out


def match_labels(ids, tok):
    """Per token of a two-segment encoding: 1 if the same id occurs in the other segment, 0 if
    not, -1 for special tokens."""
    cls, sep = (tok.bos, tok.eos) if hasattr(tok, "eos") else (tok.cls, tok.sep)
    special = {cls, sep, tok.pad}
    cut = ids.index(sep)
    a, b = set(ids[1:cut]), set(ids[cut + 1:])
    return [-1 if t in special else int(t in (b if i < cut else a)) for i, t in enumerate(ids)]


def predict(model, enc, pad_id, use_tt, max_tokens=16384):
    model.eval()
    outs = [None] * len(enc)
    lengths = [len(e[0]) for e in enc]
    with torch.no_grad():
        for b in common.batches(lengths, max_tokens, random.Random(0), max_batch=256, shuffle=False):
            ids = common.pad([enc[i][0] for i in b], pad_id)
            tt = common.pad([enc[i][1] for i in b], 0) if use_tt else None
            lg = model(ids, (ids != pad_id).long(), tt)
            for j, i in enumerate(b):
                outs[i] = lg[j].numpy()
    return np.stack(outs)


def metrics(task, preds, gold):
    from scipy import stats
    if task == "stsb":
        p = preds[:, 0]
        return {"pearson": float(stats.pearsonr(p, gold)[0]), "spearman": float(stats.spearmanr(p, gold)[0])}
    y = preds.argmax(1)
    gold = np.asarray(gold)
    m = {"accuracy": float((y == gold).mean())}
    if task == "mrpc":
        tp = int(((y == 1) & (gold == 1)).sum())
        fp = int(((y == 1) & (gold == 0)).sum())
        fn = int(((y == 0) & (gold == 1)).sum())
        m["f1"] = 2 * tp / max(1, 2 * tp + fp + fn)
        m["majority_baseline_accuracy"] = float((gold == 1).mean())
        m["all_positive_f1"] = 2 * int((gold == 1).sum()) / (2 * int((gold == 1).sum()) + int((gold == 0).sum()))
    return m


def run_seq(task, spec, args, clock):
    bert_tok = tokenization.BertTokenizer.from_file(os.path.join(common.WORK, "vocab.txt"))
    mlm, _ = load_mlm(task)
    if task == "sst2":
        train, ev = data.sst2("train"), data.sst2("dev")
        ytr, yev = [r[1] for r in train], [r[1] for r in ev]
    elif task == "mrpc":
        train, ev = data.mrpc("train"), data.mrpc("test")
        ytr, yev = [r[2] for r in train], [r[2] for r in ev]
    elif task == "stsb":
        train, ev = data.stsb_split()
        ytr, yev = [r[2] for r in train], [r[2] for r in ev]
    else:
        train, ev = data.xnli("test"), data.xnli("dev")
        ytr, yev = [r[2] for r in train], [r[2] for r in ev]

    files = {}
    if task == "xnli":
        spm_prefix = os.path.join(common.WORK, "xlmr_spm")
        tokenization.train_sentencepiece(data.vocab_texts(), spm_prefix, common.SPM_SIZE,
                                         os.path.join(common.WORK, "spm_input.txt"))
        tok = tokenization.XLMRTokenizer(spm_prefix + ".model")
        cfg = common.bert_config(spec["arch"], tok.vocab_size, spec["labels"], model_type="xlm-roberta")
        pad_id, use_tt = tok.pad, False
        files = common.xlmr_tokenizer_files(spm_prefix + ".model")
    elif task == "mrpc":
        tok = bert_tok
        cfg = common.distilbert_config(spec["arch"], len(tok.vocab), spec["labels"])
        pad_id, use_tt = tok.pad, False
        files = common.bert_tokenizer_files(os.path.join(common.WORK, "vocab.txt"))
    else:
        tok = bert_tok
        labels = spec["labels"] if spec["labels"] else ["LABEL_0"]
        cfg = common.bert_config(spec["arch"], len(tok.vocab), labels,
                                 problem_type="regression" if task == "stsb" else None)
        pad_id, use_tt = tok.pad, True
        files = common.bert_tokenizer_files(os.path.join(common.WORK, "vocab.txt"))

    common.setup(spec["seed"])
    model = hf_models.build(cfg)
    if task == "xnli":
        # from_stsb: intermediate-task transfer from the exported STS-B model's encoder.
        missing = init_xlmr(model, stsb_state() if spec.get("from_stsb") else mlm, bert_tok, tok)
    elif task == "mrpc" and spec.get("from_stsb"):
        missing = init_distilbert_from_stsb(model)
    elif task == "mrpc":
        missing = init_distilbert(model, mlm)
    else:
        missing = init_bert(model, mlm)
    common.log("initialised from MLM; left random: %s" % missing)

    if spec.get("swap"):
        # A paraphrase is symmetric: train on both orders.
        train = train + [(b, a, y) for a, b, y in train]
        ytr = ytr + ytr
    enc_tr = encode_pairs(task, tok, train)
    enc_ev = encode_pairs(task, tok, ev)
    rng = random.Random(spec["seed"])
    dist = spec.get("distill")
    if dist:
        # Knowledge distillation (train/teacher.py): every epoch adds fresh synthetic pairs
        # labelled with the bag-of-words teacher's probabilities; real pairs keep gold labels.
        teach = teacher.Teacher(train, seed=spec["seed"])
        common.log("teacher: weight decay %g, 5-fold CV accuracy on the train split %.4f"
                   % (teach.wd, teach.cv_accuracy))
        spec["teacher"] = {"weight_decay": teach.wd, "cv_accuracy_train_split": round(teach.cv_accuracy, 4),
                           "synthetic_per_epoch": dist["synthetic"]}
        srng = random.Random(spec["seed"] + 7)
        gold_soft = F.one_hot(torch.tensor(ytr), 3).float()

        def epoch_data():
            syn = teacher.synthetic_pairs(train, dist["synthetic"], srng)
            enc = enc_tr + encode_pairs(task, tok, [(p, h, 0) for p, h in syn])
            return enc, torch.cat([gold_soft, teach.probs(syn)])
    else:
        def epoch_data():
            return enc_tr, torch.tensor(ytr, dtype=torch.float32 if task == "stsb" else torch.long)
    enc_ep, ytr_t = epoch_data()
    lengths = [len(e[0]) for e in enc_ep]
    max_tokens = spec["batch"] * 64
    nb = len(common.batches(lengths, max_tokens, random.Random(0), max_batch=spec["batch"]))
    total = nb * spec["epochs"]
    opt, sched = common.optimizer(model, spec["lr"], total, warmup=0.1)
    aux = None
    if spec.get("match_aux"):
        # Auxiliary token task (training only, the head is not exported): for every token of
        # one segment, does the same piece occur in the other segment? A from-scratch encoder
        # learns slowly from 5,000 pairs that NLI hinges on which hypothesis words the premise
        # lacks; this dense signal teaches it that comparison directly.
        aux = torch.nn.Linear(cfg["hidden_size"], 1)
        opt.add_param_group({"params": list(aux.parameters()), "weight_decay": 0.0})
    step = 0
    for ep in range(spec["epochs"]):
        if ep > 0:
            enc_ep, ytr_t = epoch_data()
            lengths = [len(e[0]) for e in enc_ep]
        if aux is not None:
            match_ep = [match_labels(e[0], tok) for e in enc_ep]
        model.train()
        tot = 0.0
        for b in common.batches(lengths, max_tokens, rng, max_batch=spec["batch"]):
            if step >= total or (args.max_steps and step >= args.max_steps):
                break
            ids = common.pad([enc_ep[i][0] for i in b], pad_id)
            tt = common.pad([enc_ep[i][1] for i in b], 0) if use_tt else None
            if aux is None:
                out = model(ids, (ids != pad_id).long(), tt)
            else:
                h, _ = model.encoder_model(ids, (ids != pad_id).long(), tt)
                out = model.classifier(h)
            y = ytr_t[b]
            if task == "stsb":
                loss = F.mse_loss(out[:, 0], y)
            elif dist:
                loss = -(y * F.log_softmax(out, dim=1)).sum(1).mean()
            else:
                loss = F.cross_entropy(out, y)
            if aux is not None:
                ml = common.pad([match_ep[i] for i in b], -1)
                keep = ml >= 0
                loss = loss + spec["match_aux"] * F.binary_cross_entropy_with_logits(
                    aux(h)[..., 0][keep], ml[keep].float())
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            step += 1
            tot += loss.item()
        common.log("epoch %d/%d steps %d train loss %.4f (%.1f min)" % (ep + 1, spec["epochs"], step,
                                                                       tot / max(1, nb), clock.minutes()))
        if args.log_eval:  # monitoring only: the exported model is always the last epoch's
            common.log("  eval after epoch %d: %s" % (ep + 1, metrics(task, predict(model, enc_ev, pad_id, use_tt), yev)))
    train_minutes = clock.minutes()

    folder = os.path.join(common.MODELS, spec["folder"])
    dtype = common.export(model, cfg, folder, files)
    common.write_json(os.path.join(folder, "split.json"), data.split_definition(task))
    # Score the folder as written (F16-rounded if so), loaded fresh, exactly what bert8 reads.
    model2, _ = load_folder(folder)
    if task == "xnli":
        tok2 = tokenization.XLMRTokenizer(os.path.join(folder, "sentencepiece.bpe.model"))
    else:
        tok2 = tokenization.BertTokenizer.from_file(os.path.join(folder, "vocab.txt"))
    enc_ev2 = encode_pairs(task, tok2, ev)
    assert [e[0] for e in enc_ev2] == [e[0] for e in enc_ev]
    m = metrics(task, predict(model2, enc_ev2, pad_id, use_tt), yev)
    return m, dtype, train_minutes, total


# ---- SQuAD ------------------------------------------------------------------------------


MAX_LEN, STRIDE, MAX_Q, MAX_ANS, NBEST = 256, 128, 64, 30, 20
TRAIN_LEN = 192  # training windows: shorter, always holding the answer (see squad_train_features)


def squad_words(context):
    """Whitespace words as the BERT basic tokenizer sees them, with char offsets."""
    words, starts, prev_ws = [], [], True
    for i, ch in enumerate(context):
        if tokenization._is_whitespace(ch):
            prev_ws = True
            continue
        if prev_ws:
            words.append(ch)
            starts.append(i)
        else:
            words[-1] += ch
        prev_ws = False
    return words, starts


def squad_context_tokens(tok, context):
    """Wordpieces of the context with the char span each covers. Pieces get exact spans when
    the normalised text keeps the word's length; otherwise each piece spans its whole word."""
    words, starts = squad_words(context)
    toks, spans, tok_word = [], [], []
    for wi, (w, s) in enumerate(zip(words, starts)):
        pieces = tok.tokenize(w)
        bare = [p[2:] if p.startswith("##") else p for p in pieces]
        norm = "".join(bare)
        exact = "[UNK]" not in pieces and len(norm) == len(w) and len(pieces) > 0
        off = 0
        for p, b in zip(pieces, bare):
            if exact:
                spans.append((s + off, s + off + len(b)))
                off += len(b)
            else:
                spans.append((s, s + len(w)))
            toks.append(p)
            tok_word.append(wi)
    return tok.ids(toks), spans


def window_ids(tok, q_ids, ctx_ids, start, end):
    """[CLS] question [SEP] context[start:end] [SEP], its token types, and the offset that maps a
    context piece index to its position in the window."""
    ids = [tok.cls] + q_ids + [tok.sep] + ctx_ids[start:end] + [tok.sep]
    tt = [0] * (len(q_ids) + 2) + [1] * (end - start + 1)
    return ids, tt, len(q_ids) + 2 - start


def squad_features(tok, articles, training):
    feats = []
    for a in articles:
        for p in a["paragraphs"]:
            ctx_ids, spans = squad_context_tokens(tok, p["context"])
            for q in p["qas"]:
                q_ids = tok.ids(tok.tokenize(q["question"]))[:MAX_Q]
                room = MAX_LEN - len(q_ids) - 3
                ans = q["answers"][0]
                st, en = qa_teacher.covering(spans, ans["answer_start"], ans["answer_start"] + len(ans["text"]))
                start = 0
                while True:
                    end = min(start + room, len(ctx_ids))
                    ids, tt, off = window_ids(tok, q_ids, ctx_ids, start, end)
                    f = {"ids": ids, "tt": tt, "qid": q["id"], "ctx_start": start, "ctx_end": end,
                         "off": off, "spans": spans, "context": p["context"]}
                    if training:
                        if st is not None and en is not None and st >= start and en < end and st <= en:
                            f["label"] = (st + off, en + off)
                        else:
                            f["label"] = (0, 0)
                    feats.append(f)
                    if end >= len(ctx_ids):
                        break
                    start += STRIDE
    return feats


def squad_window(tok, ctx_ids, spans, q_ids, a0, a1, rng, length):
    """A training window of at most `length` tokens holding the answer chars [a0, a1), placed at
    random; None when the answer cannot be located or does not fit."""
    room = length - len(q_ids) - 3
    st, en = qa_teacher.covering(spans, a0, a1)
    if st is None or en is None or en < st or en - st + 1 > room:
        return None
    lo = max(0, en + 1 - room)
    hi = min(st, max(0, len(ctx_ids) - room))
    start = rng.randint(lo, max(lo, hi))
    end = min(start + room, len(ctx_ids))
    ids, tt, off = window_ids(tok, q_ids, ctx_ids, start, end)
    return {"ids": ids, "tt": tt, "label": (st + off, en + off), "ctx": (start, end), "off": off}


def teacher_targets(f, piece_word, first, last, ps, pe, mix):
    """Soft start/end targets of one window: the gold one-hot mixed with the QA teacher's word
    probabilities, a word's start mass on its first piece and its end mass on its last piece."""
    n = len(f["ids"])
    ts, te = [0.0] * n, [0.0] * n
    start, end = f["ctx"]
    for k in range(start, end):
        w = piece_word[k]
        if first[k]:
            ts[k + f["off"]] = ps[w]
        if last[k]:
            te[k + f["off"]] = pe[w]
    zs, ze = sum(ts), sum(te)
    out = []
    for t, z, g in ((ts, zs, f["label"][0]), (te, ze, f["label"][1])):
        lam = mix if z > 0.05 else 0.0
        t = [lam * v / z if z > 0 else 0.0 for v in t]
        t[g] += 1.0 - lam
        out.append(t)
    f["soft"] = out


def squad_train_features(tok, articles, rng):
    """One window per question of at most TRAIN_LEN tokens, placed at random so that it holds
    the answer. Cheaper than training on every stride window (one core, ~15 minutes) while the
    random placement still teaches the model that answers can sit anywhere in the window."""
    feats = []
    for a in articles:
        for p in a["paragraphs"]:
            ctx_ids, spans = squad_context_tokens(tok, p["context"])
            for q in p["qas"]:
                q_ids = tok.ids(tok.tokenize(q["question"]))[:MAX_Q]
                ans = q["answers"][0]
                f = squad_window(tok, ctx_ids, spans, q_ids, ans["answer_start"],
                                 ans["answer_start"] + len(ans["text"]), rng, TRAIN_LEN)
                if f is not None:
                    feats.append(f)
    return feats


def qa_aux_targets(ids, tt, tok, width=11):
    """Dense per-token targets for the QA auxiliary head, for context tokens only (else -1):
    [does this piece occur in the question, share of question pieces in the +-5 token window]."""
    real = (ids != tok.pad) & (ids != tok.sep) & (ids != tok.cls)
    ctx = (tt == 1) & real
    q = (tt == 0) & real
    match = ((ids[:, :, None] == ids[:, None, :]) & q[:, None, :]).any(2) & ctx
    dens = F.avg_pool1d(match.float()[:, None, :], width, stride=1, padding=width // 2,
                        count_include_pad=True)[:, 0, :]
    y = torch.stack([match.float(), dens], 2)
    y[~ctx] = -1.0
    return y


def train_qa(model, tok, feats_fn, epochs, lr, batch, length, rng, clock, args, name, aux=None, aux_w=0.0):
    """Span-extraction training; feats_fn(epoch) gives that epoch's features. aux: an optional
    Linear(hidden, 2) head trained on qa_aux_targets (not exported)."""
    lengths0 = [len(f["ids"]) for f in feats_fn(-1)]
    nb = len(common.batches(lengths0, batch * length, random.Random(0), max_batch=batch))
    total = nb * epochs
    opt, sched = common.optimizer(model, lr, total, warmup=0.1)
    if aux is not None:
        opt.add_param_group({"params": list(aux.parameters()), "weight_decay": 0.0})
    step = 0
    for ep in range(epochs):
        feats = feats_fn(ep)
        lengths = [len(f["ids"]) for f in feats]
        model.train()
        tot, nbat = 0.0, 0
        for b in common.batches(lengths, batch * length, rng, max_batch=batch):
            if (args.max_steps and step >= args.max_steps) or step >= total:
                break
            ids = common.pad([feats[i]["ids"] for i in b], tok.pad)
            tt = common.pad([feats[i]["tt"] for i in b], 0)
            if aux is None:
                s_lg, e_lg = model(ids, (ids != tok.pad).long(), tt)
            else:
                h, _ = model.encoder_model(ids, (ids != tok.pad).long(), tt)
                lg = model.qa_outputs(h)
                s_lg, e_lg = lg[..., 0], lg[..., 1]
            if "soft" in feats[b[0]]:
                t = s_lg.shape[1]
                ts = torch.tensor([feats[i]["soft"][0] + [0.0] * (t - len(feats[i]["ids"])) for i in b])
                te = torch.tensor([feats[i]["soft"][1] + [0.0] * (t - len(feats[i]["ids"])) for i in b])
                loss = -((ts * F.log_softmax(s_lg, 1)).sum(1) + (te * F.log_softmax(e_lg, 1)).sum(1)).mean() / 2
            else:
                ys = torch.tensor([feats[i]["label"][0] for i in b])
                ye = torch.tensor([feats[i]["label"][1] for i in b])
                loss = (F.cross_entropy(s_lg, ys) + F.cross_entropy(e_lg, ye)) / 2
            if aux is not None:
                ya = qa_aux_targets(ids, tt, tok)
                keep = ya[..., 0] >= 0
                pa = aux(h)[keep]
                loss = loss + aux_w * (F.binary_cross_entropy_with_logits(pa[:, 0], ya[keep][:, 0])
                                       + 10.0 * F.mse_loss(torch.sigmoid(pa[:, 1]), ya[keep][:, 1]))
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            step += 1
            nbat += 1
            tot += loss.item()
            if step % 50 == 0:
                common.log("%s step %d/%d loss %.3f (%.1f min)" % (name, step, total, loss.item(),
                                                                 clock.minutes()))
        common.log("%s epoch %d/%d train loss %.4f (%.1f min)" % (name, ep + 1, epochs, tot / max(1, nbat),
                                                                clock.minutes()))
    return total


def squad_normalize(s):
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def squad_f1(pred, gold):
    p, g = squad_normalize(pred).split(), squad_normalize(gold).split()
    common_ = collections.Counter(p) & collections.Counter(g)
    same = sum(common_.values())
    if same == 0:
        return 0.0
    prec, rec = same / len(p), same / len(g)
    return 2 * prec * rec / (prec + rec)


def squad_predict(model, feats, pad_id):
    best = {}
    lengths = [len(f["ids"]) for f in feats]
    model.eval()
    with torch.no_grad():
        for b in common.batches(lengths, 16384, random.Random(0), max_batch=128, shuffle=False):
            ids = common.pad([feats[i]["ids"] for i in b], pad_id)
            tt = common.pad([feats[i]["tt"] for i in b], 0)
            s_lg, e_lg = model(ids, (ids != pad_id).long(), tt)
            for j, i in enumerate(b):
                f = feats[i]
                s, e = s_lg[j].numpy(), e_lg[j].numpy()
                lo, hi = f["ctx_start"] + f["off"], f["ctx_end"] + f["off"]  # context token range
                si = [k for k in np.argsort(-s[lo:hi])[:NBEST] + lo]
                ei = [k for k in np.argsort(-e[lo:hi])[:NBEST] + lo]
                for a in si:
                    for z in ei:
                        if z < a or z - a + 1 > MAX_ANS:
                            continue
                        sc = float(s[a] + e[z])
                        if f["qid"] not in best or sc > best[f["qid"]][0]:
                            c0 = f["spans"][a - f["off"]][0]
                            c1 = f["spans"][z - f["off"]][1]
                            best[f["qid"]] = (sc, f["context"][c0:c1])
    return {k: v[1] for k, v in best.items()}


def squad_score(preds, articles):
    em = f1 = n = 0
    for a in articles:
        for p in a["paragraphs"]:
            for q in p["qas"]:
                golds = [x["text"] for x in q["answers"]]
                pr = preds.get(q["id"], "")
                em += max(float(squad_normalize(pr) == squad_normalize(g)) for g in golds)
                f1 += max(squad_f1(pr, g) for g in golds)
                n += 1
    return {"exact_match": 100.0 * em / n, "f1": 100.0 * f1 / n, "questions": n}


def distill_features(tok, tr_art, spec, rng, clock):
    """Knowledge distillation from the feature-based QA teacher (train/qa_teacher.py), fitted on
    the train articles only. Returns feats_fn(epoch): every epoch places each question's window
    afresh and gives it soft targets mixing gold and teacher."""
    dist = spec["distill"]
    feat = qa_teacher.Featurizer([p["context"] for a in tr_art for p in a["paragraphs"]])
    exs = qa_teacher.examples(feat, tr_art)
    teach = qa_teacher.fit(exs, epochs=dist["teacher_epochs"], seed=spec["seed"])
    common.log("QA teacher fitted on %d train questions (%.1f min)" % (len(exs), clock.minutes()))
    items = []
    by_q = {}
    with torch.no_grad():
        for x, _, _, p, q, ws in exs:
            s_t, e_t = teach(x)
            by_q[q["id"]] = (F.softmax(s_t, 0).tolist(), F.softmax(e_t, 0).tolist())
    for a in tr_art:
        for p in a["paragraphs"]:
            ctx_ids, spans = squad_context_tokens(tok, p["context"])
            wstarts = [w[1] for w in qa_teacher.words(p["context"])]
            pw = [bisect.bisect_right(wstarts, sp[0]) - 1 for sp in spans]
            first = [k == 0 or pw[k - 1] != pw[k] for k in range(len(pw))]
            last = [k == len(pw) - 1 or pw[k + 1] != pw[k] for k in range(len(pw))]
            for q in p["qas"]:
                if q["id"] not in by_q:
                    continue
                ans = q["answers"][0]
                items.append((ctx_ids, spans, pw, first, last, tok.ids(tok.tokenize(q["question"]))[:MAX_Q],
                              ans["answer_start"], ans["answer_start"] + len(ans["text"]), by_q[q["id"]]))
    spec["teacher"] = {"questions": len(exs), "epochs": dist["teacher_epochs"], "mix": dist["mix"]}
    cache = {}

    def feats_fn(ep):
        if ep not in cache:
            cache.clear()
            out = []
            for ctx_ids, spans, pw, first, last, q_ids, a0, a1, (ps, pe) in items:
                f = squad_window(tok, ctx_ids, spans, q_ids, a0, a1, rng, TRAIN_LEN)
                if f is not None:
                    teacher_targets(f, pw, first, last, ps, pe, dist["mix"])
                    out.append(f)
            cache[ep] = out
        return cache[ep]

    return feats_fn


def run_squad(spec, args, clock):
    tok = tokenization.BertTokenizer.from_file(os.path.join(common.WORK, "vocab.txt"))
    mlm, _ = load_mlm("squad")
    tr_art, ev_art = data.squad_split()
    cfg = common.bert_config(spec["arch"], len(tok.vocab))
    common.setup(spec["seed"])
    model = hf_models.build(cfg)
    common.log("initialised from MLM; left random: %s" % init_bert(model, mlm))
    rng = random.Random(spec["seed"])
    aux = torch.nn.Linear(cfg["hidden_size"], 2) if spec.get("qa_aux") else None
    dist = spec.get("distill")
    if dist:
        feats_fn = distill_features(tok, tr_art, spec, rng, clock)
    else:
        feats = squad_train_features(tok, tr_art, rng)
        common.log("%d train features (windows of <= %d tokens holding the answer)" % (len(feats), TRAIN_LEN))
        feats_fn = lambda ep: feats  # noqa: E731
    total = train_qa(model, tok, feats_fn, spec["epochs"], spec["lr"], spec["batch"], TRAIN_LEN, rng,
                     clock, args, "squad", aux, spec.get("qa_aux", 0.0))
    train_minutes = clock.minutes()
    folder = os.path.join(common.MODELS, spec["folder"])
    dtype = common.export(model, cfg, folder, common.bert_tokenizer_files(os.path.join(common.WORK, "vocab.txt")))
    common.write_json(os.path.join(folder, "split.json"), data.split_definition("squad"))
    model2, _ = load_folder(folder)
    tok2 = tokenization.BertTokenizer.from_file(os.path.join(folder, "vocab.txt"))
    preds = squad_predict(model2, squad_features(tok2, ev_art, False), tok2.pad)
    return squad_score(preds, ev_art), dtype, train_minutes, total


DESCR = {
    "sst2": ("SST-2 binary sentiment (GLUE)", "BertForSequenceClassification, 2 labels (0 negative, 1 positive)",
             "train: SST-2.train90.tsv + SST-2.train10.tsv (67,349 rows); eval: SST-2.dev.tsv (872 rows)"),
    "mrpc": ("MRPC paraphrase detection", "DistilBertForSequenceClassification, 2 labels (0 not_equivalent, 1 equivalent)",
             "train: MRPC.msr_paraphrase_train.txt (4,076 pairs); eval: MRPC.msr_paraphrase_test.txt (1,725 pairs)"),
    "stsb": ("STS-B semantic similarity (regression, 0-5)", "BertForSequenceClassification, num_labels 1, problem_type regression",
             "only STS-B.dev.tsv exists: data row i (0-based, header excluded) is eval when i % 3 == 2 "
             "(500 rows, listed in split.json by their `index` column), the other 1,000 rows train"),
    "xnli": ("English NLI (XNLI English side), 3 classes", "XLMRobertaForSequenceClassification, labels 0 entailment, 1 neutral, 2 contradiction",
             "XNLI has no train split: train on xnli.my.test.tsv (5,010 pairs), eval on xnli.my.dev.tsv (2,490 pairs), "
             "columns sentence1_en/sentence2_en, pair encoded as <s> A </s></s> B </s>"),
    "squad": ("SQuAD v1.1 extractive QA", "BertForQuestionAnswering",
              "only the dev file exists: split BY ARTICLE, 38 articles train, 10 eval (titles in split.json)"),
}


def write_readme(task, spec, result):
    name, cls, split = DESCR[task]
    folder = os.path.join(common.MODELS, spec["folder"])
    m = result["metrics"]
    mtxt = ", ".join("%s %s" % (k, ("%.4f" % v) if isinstance(v, float) else v) for k, v in m.items())
    tok = ("WordPiece vocab.txt (5,000 pieces, built by train/tokenization.py from the train-side text), "
           "uncased (BertTokenizer, do_lower_case true)") if task != "xnli" else (
        "sentencepiece.bpe.model: unigram, 5,000 pieces, nmt_nfkc, trained on the train-side text; "
        "XLM-R fairseq ids (<s>=0 <pad>=1 </s>=2 <unk>=3, piece id + 1, <mask>=5001), vocab_size 5002")
    lines = [
        "# %s: %s" % (spec["folder"], name), "",
        "Trained by the bert8 project itself (no downloaded checkpoint), in the exact Hugging Face",
        "layout: `config.json`, `model.safetensors`, tokenizer files, plus `split.json` (the held-out rows).", "",
        "* Class: %s. Encoder: 4 layers, hidden 192, 4 heads (head dim 48), intermediate 768, exact GELU,"
        % cls,
        "  max positions %d." % (258 if task == "xnli" else 256),
        "* Weights stored as %s (%s bytes in this folder)." % (result["weights_dtype"], result["folder_bytes"]),
        "* Tokenizer: %s." % tok,
        "* Data (../shared/data): %s." % split,
        "* Initialisation: masked-LM pre-training of the shared BERT-mini encoder (train/pretrain_mlm.py, seed %d, "
        "%d steps, %.1f min, %d tokens) on the train side of all task data only."
        % (result["mlm"]["seed"], result["mlm"]["steps"], result["mlm"]["minutes"], result["mlm"]["tokens_seen"]),
    ]
    ps = result["mlm"].get("pair_stage")
    if ps:
        lines += [
            "* Then the pair stage (train/pretrain_pairs.py, seed %d, %d steps, %.1f min): synthetic sentence pairs "
            "from the same train-side text, MLM on both segments + word-overlap regression from the pooler."
            % (ps["seed"], ps["steps"], ps["minutes"])]
    lines += [
        "* Fine-tuning: seed %d, %d epochs, lr %g (AdamW, linear warm-up 10%% then decay), batch %d, %d steps, "
        "%.1f min on one CPU core." % (result["seed"], result["epochs"], result["lr"], result["batch"], result["steps"],
                                      result["finetune_minutes"]),
    ]
    if spec.get("qa_aux"):
        lines += [
            "* Training adds an auxiliary per-token loss (weight %g; the head is not exported): for each context "
            "piece, whether it occurs in the question and the share of question pieces within +-5 tokens."
            % spec["qa_aux"]]
    if spec.get("match_aux"):
        lines += [
            "* Auxiliary per-token loss during fine-tuning (weight %g; the head is not exported): does this piece "
            "occur in the other segment?" % spec["match_aux"]]
    if spec.get("teacher") and task == "squad":
        t = spec["teacher"]
        lines += [
            "* Knowledge distillation (train/qa_teacher.py): a feature-based QA teacher (per context word: "
            "question-word matches, IDF-weighted question overlap in +-2/5/10/20-word windows and in its sentence, "
            "word shape crossed with the question's wh-word, distance to the nearest match; a small MLP scoring "
            "starts and ends), fitted on the %d train-article questions for %d epochs. Every fine-tuning epoch "
            "places each question's window afresh; its start/end targets are %g x gold one-hot + %g x the "
            "teacher's probabilities (a word's start mass on its first piece, its end mass on its last)."
            % (t["questions"], t["epochs"], 1 - t["mix"], t["mix"])]
    elif spec.get("teacher"):
        t = spec["teacher"]
        lines += [
            "* Knowledge distillation (train/teacher.py): a bag-of-words logistic-regression teacher (hypothesis "
            "words, hypothesis words absent from the premise, overlap, negations, lengths), fitted on the train "
            "split only (weight decay %g by 5-fold cross-validation on the train split, CV accuracy %.4f). Each "
            "epoch trains on the gold train pairs plus %d fresh synthetic pairs (train premises with perturbed or "
            "borrowed train hypotheses) labelled with the teacher's probabilities."
            % (t["weight_decay"], t["cv_accuracy_train_split"], t["synthetic_per_epoch"])]
    lines += [
        "* Command (from the repository root, after `train/pretrain_mlm.py`%s):"
        % (" and `train/pretrain_pairs.py`" if ps else ""), "",
        "      " + result["command"], "",
        "## Measured (torch FP32 maths on the stored weights, reloaded from this folder)", "",
        "Eval split: %s" % mtxt, "",
    ]
    if task == "squad":
        lines += ["Post-processing: max_length 256, doc stride 128, question truncated to 64 tokens, n-best 20 start",
                  "and end logits over context tokens, end >= start, at most 30 tokens, score start+end; the answer",
                  "is the context text covered by the chosen pieces (a piece covers its exact characters when the",
                  "lower-cased/accent-stripped word keeps its length, else its whole whitespace word). Official",
                  "SQuAD v1.1 normalisation for EM/F1.", ""]
    with open(os.path.join(folder, "README.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("task", choices=sorted(TASKS))
    ap.add_argument("--epochs", type=int)
    ap.add_argument("--lr", type=float)
    ap.add_argument("--max-steps", type=int, default=0, help="smoke test: stop after this many steps")
    ap.add_argument("--mix", type=float, help="squad: teacher share of the soft targets")
    ap.add_argument("--log-eval", action="store_true", help="log the eval metric after every epoch")
    ap.add_argument("--models-dir", default=common.MODELS, help="where to write the model folder")
    args = ap.parse_args()
    common.MODELS = args.models_dir
    spec = dict(TASKS[args.task])
    if args.epochs:
        spec["epochs"] = args.epochs
    if args.lr:
        spec["lr"] = args.lr
    if args.mix is not None:
        spec["distill"] = dict(spec["distill"], mix=args.mix)
    torch.set_num_threads(1)
    clock = common.Clock()
    if args.task == "squad":
        m, dtype, minutes, steps = run_squad(spec, args, clock)
    else:
        m, dtype, minutes, steps = run_seq(args.task, spec, args, clock)
    folder = os.path.join(common.MODELS, spec["folder"])
    size = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
    _, mlm_info = load_mlm(args.task)
    stage1 = torch.load(os.path.join(common.WORK, "mlm_bert.pt"))
    result = {"task": args.task, "metrics": m, "weights_dtype": dtype, "seed": spec["seed"],
              "epochs": spec["epochs"], "lr": spec["lr"], "batch": spec["batch"], "steps": steps,
              "finetune_minutes": round(minutes, 2), "folder_bytes": size,
              "stages": {k: spec[k] for k in ("qa_aux", "match_aux", "teacher") if k in spec},
              "mlm": {"seed": stage1["seed"], "steps": stage1["steps"],
                      "minutes": round(stage1["minutes"], 2), "tokens_seen": stage1["tokens_seen"],
                      "pair_stage": mlm_info.get("stage2")},
              "command": "LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-serial /usr/bin/python3 "
                         "train/finetune.py " + " ".join(sys.argv[1:]),
              "date": time.strftime("%Y-%m-%d %H:%M")}
    common.write_json(os.path.join(common.WORK, "result_%s.json" % args.task), result)
    common.write_json(os.path.join(folder, "metrics.json"), result)
    write_readme(args.task, spec, result)
    common.log("RESULT %s" % json.dumps(result))


if __name__ == "__main__":
    main()
