"""Fine-tune the MLM-pretrained BERT-mini encoder on one task and export it to models/<name>/
in the Hugging Face layout, then reload the exported folder and score the held-out split.

Run (one at a time, after pretrain_mlm.py):
  LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-serial /usr/bin/python3 train/finetune.py sst2
Tasks: sst2 mrpc stsb xnli squad.
"""
import argparse
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
import safetensors_io
import tokenization

TASKS = {
    "sst2": dict(folder="sst2-bert-mini", arch="BertForSequenceClassification", epochs=3, lr=2e-4,
                 batch=64, labels=["negative", "positive"], seed=101),
    "mrpc": dict(folder="mrpc-distilbert-mini", arch="DistilBertForSequenceClassification", epochs=3,
                 lr=5e-5, batch=32, labels=["not_equivalent", "equivalent"], seed=102, from_stsb=True,
                 swap=True),
    "stsb": dict(folder="stsb-bert-mini", arch="BertForSequenceClassification", epochs=12, lr=1e-4,
                 batch=16, labels=None, seed=103),
    "xnli": dict(folder="xnli-xlmr-mini", arch="XLMRobertaForSequenceClassification", epochs=6,
                 lr=1e-4, batch=32, labels=data.XNLI_LABELS, seed=104),
    "squad": dict(folder="squad-bert-mini", arch="BertForQuestionAnswering", epochs=2, lr=3e-4,
                  batch=32, labels=None, seed=105),
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
    lengths = [len(e[0]) for e in enc_tr]
    rng = random.Random(spec["seed"])
    max_tokens = spec["batch"] * 64
    nb = len(common.batches(lengths, max_tokens, random.Random(0), max_batch=spec["batch"]))
    total = nb * spec["epochs"]
    opt, sched = common.optimizer(model, spec["lr"], total, warmup=0.1)
    ytr_t = torch.tensor(ytr, dtype=torch.float32 if task == "stsb" else torch.long)
    step = 0
    for ep in range(spec["epochs"]):
        model.train()
        tot = 0.0
        for b in common.batches(lengths, max_tokens, rng, max_batch=spec["batch"]):
            if step >= total or (args.max_steps and step >= args.max_steps):
                break
            ids = common.pad([enc_tr[i][0] for i in b], pad_id)
            tt = common.pad([enc_tr[i][1] for i in b], 0) if use_tt else None
            out = model(ids, (ids != pad_id).long(), tt)
            y = ytr_t[b]
            loss = F.mse_loss(out[:, 0], y) if task == "stsb" else F.cross_entropy(out, y)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            step += 1
            tot += loss.item()
        common.log("epoch %d/%d steps %d train loss %.4f (%.1f min)" % (ep + 1, spec["epochs"], step,
                                                                       tot / max(1, nb), clock.minutes()))
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


def squad_features(tok, articles, training):
    feats = []
    for a in articles:
        for p in a["paragraphs"]:
            ctx_ids, spans = squad_context_tokens(tok, p["context"])
            for q in p["qas"]:
                q_ids = tok.ids(tok.tokenize(q["question"]))[:MAX_Q]
                room = MAX_LEN - len(q_ids) - 3
                ans = q["answers"][0]
                a0 = ans["answer_start"]
                a1 = a0 + len(ans["text"])
                st = en = None
                for i, (s, e) in enumerate(spans):
                    if st is None and e > a0:
                        st = i
                    if s < a1:
                        en = i
                start = 0
                while True:
                    end = min(start + room, len(ctx_ids))
                    ids = [tok.cls] + q_ids + [tok.sep] + ctx_ids[start:end] + [tok.sep]
                    tt = [0] * (len(q_ids) + 2) + [1] * (end - start + 1)
                    off = len(q_ids) + 2 - start
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
                room = TRAIN_LEN - len(q_ids) - 3
                ans = q["answers"][0]
                a0, a1 = ans["answer_start"], ans["answer_start"] + len(ans["text"])
                st = en = None
                for i, (s, e) in enumerate(spans):
                    if st is None and e > a0:
                        st = i
                    if s < a1:
                        en = i
                if st is None or en is None or en < st or en - st + 1 > room:
                    continue
                lo = max(0, en + 1 - room)
                hi = min(st, max(0, len(ctx_ids) - room))
                start = rng.randint(lo, max(lo, hi))
                end = min(start + room, len(ctx_ids))
                ids = [tok.cls] + q_ids + [tok.sep] + ctx_ids[start:end] + [tok.sep]
                tt = [0] * (len(q_ids) + 2) + [1] * (end - start + 1)
                off = len(q_ids) + 2 - start
                feats.append({"ids": ids, "tt": tt, "label": (st + off, en + off)})
    return feats


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


def run_squad(spec, args, clock):
    tok = tokenization.BertTokenizer.from_file(os.path.join(common.WORK, "vocab.txt"))
    mlm, _ = load_mlm("squad")
    tr_art, ev_art = data.squad_split()
    cfg = common.bert_config(spec["arch"], len(tok.vocab))
    common.setup(spec["seed"])
    model = hf_models.build(cfg)
    common.log("initialised from MLM; left random: %s" % init_bert(model, mlm))
    rng = random.Random(spec["seed"])
    feats = squad_train_features(tok, tr_art, rng)
    common.log("%d train features (windows of <= %d tokens holding the answer)" % (len(feats), TRAIN_LEN))
    lengths = [len(f["ids"]) for f in feats]
    max_tokens = spec["batch"] * TRAIN_LEN
    nb = len(common.batches(lengths, max_tokens, random.Random(0), max_batch=spec["batch"]))
    total = nb * spec["epochs"]
    opt, sched = common.optimizer(model, spec["lr"], total, warmup=0.1)
    step = 0
    for ep in range(spec["epochs"]):
        model.train()
        tot = 0.0
        for b in common.batches(lengths, max_tokens, rng, max_batch=spec["batch"]):
            if args.max_steps and step >= args.max_steps:
                break
            ids = common.pad([feats[i]["ids"] for i in b], tok.pad)
            tt = common.pad([feats[i]["tt"] for i in b], 0)
            s_lg, e_lg = model(ids, (ids != tok.pad).long(), tt)
            ys = torch.tensor([feats[i]["label"][0] for i in b])
            ye = torch.tensor([feats[i]["label"][1] for i in b])
            loss = (F.cross_entropy(s_lg, ys) + F.cross_entropy(e_lg, ye)) / 2
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            step += 1
            tot += loss.item()
            if step % 50 == 0:
                common.log("step %d/%d loss %.3f (%.1f min)" % (step, total, loss.item(), clock.minutes()))
        common.log("epoch %d/%d train loss %.4f (%.1f min)" % (ep + 1, spec["epochs"], tot / max(1, nb),
                                                               clock.minutes()))
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
    ap.add_argument("--models-dir", default=common.MODELS, help="where to write the model folder")
    args = ap.parse_args()
    common.MODELS = args.models_dir
    spec = dict(TASKS[args.task])
    if args.epochs:
        spec["epochs"] = args.epochs
    if args.lr:
        spec["lr"] = args.lr
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
