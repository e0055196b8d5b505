"""Second pre-training stage: teach the MLM encoder to compare two segments.

A few minutes of plain MLM on one core leave the encoder near the unigram plateau, and the pair
tasks (STS-B, MRPC, NLI) and SQuAD's question/context matching need cross-segment attention.
Here every example is a synthetic pair built from train-side sentences only: B is either a
noised copy of A (words dropped, replaced, locally shuffled) or another sentence with a few of
A's words mixed in. Loss = MLM on both segments (a masked word can be copied from the other
segment) + regression of the word-set Jaccard overlap of A and B from the pooler output.

Run (after pretrain_mlm.py):
  LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-serial /usr/bin/python3 train/pretrain_pairs.py
Reads train/work/mlm_bert.pt, writes train/work/mlm_bert2.pt (encoder incl. pooler).
"""
import argparse
import os
import random
import re

import torch
import torch.nn as nn
import torch.nn.functional as F

import common
import data
import hf_models
import tokenization
from pretrain_mlm import mask_tokens


class PairPretrainer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h = cfg["hidden_size"]
        # Same names as hf_models.BertForMaskedLM so its checkpoint loads directly.
        self.bert = hf_models.BertModel(cfg, add_pooling_layer=True)
        self.transform_dense = nn.Linear(h, h)
        self.transform_ln = nn.LayerNorm(h, eps=cfg["layer_norm_eps"])
        self.bias = nn.Parameter(torch.zeros(cfg["vocab_size"]))
        self.overlap = nn.Linear(h, 1)
        self.overlap.weight.data.normal_(0.0, 0.02)
        self.overlap.bias.data.zero_()
        self.bert.pooler.dense.weight.data.normal_(0.0, 0.02)
        self.bert.pooler.dense.bias.data.zero_()

    def forward(self, ids, att, tt, sel):
        h, pooled = self.bert(ids, att, tt)
        t = self.transform_ln(F.gelu(self.transform_dense(h[sel])))
        return t @ self.bert.embeddings.word_embeddings.weight.t() + self.bias, self.overlap(pooled)[:, 0]


def init_match_head(model, layer=0, head=0, gain=1.0, seed=0):
    """Make one attention head score identical tokens highly: W_q = W_k = gain * R with R
    orthonormal rows, so q_i.k_j ~ x_i.x_j, large when the two tokens share a word embedding.
    Learning such a matching head from scratch takes far longer than our budget; starting from it
    lets the pair losses use cross-segment matches (the decomposable-attention idea) at once."""
    att = model.bert.encoder.layer[layer].attention.self
    dh, h = att.dh, att.query.weight.shape[1]
    g = torch.Generator().manual_seed(seed)
    r, _ = torch.linalg.qr(torch.randn(h, dh, generator=g))  # h x dh, orthonormal columns
    rows = slice(head * dh, (head + 1) * dh)
    with torch.no_grad():
        att.query.weight[rows] = gain * r.t()
        att.key.weight[rows] = gain * r.t()
        att.query.bias[rows] = 0.0
        att.key.bias[rows] = 0.0


def sentences():
    singles, pairs, passages = data.pretrain_texts()
    out = list(singles) + [x for p in pairs for x in p]
    for p in passages:
        out += re.split(r"(?<=[.!?])\s+", p)
    words = []
    for s in out:
        w = tokenization.basic_tokenize(s)
        if 4 <= len(w) <= 60:
            words.append(w)
    return words


def make_pair(A, pool, rng):
    if rng.random() < 0.5:
        p_drop, p_rep = rng.uniform(0, 0.5), rng.uniform(0, 0.3)
        other = rng.choice(pool)
        B = []
        for w in A:
            r = rng.random()
            if r < p_drop:
                continue
            B.append(rng.choice(other) if r < p_drop + p_rep else w)
        for _ in range(int(len(B) * rng.uniform(0, 0.3))):
            i = rng.randrange(len(B)) if B else 0
            if i + 1 < len(B):
                B[i], B[i + 1] = B[i + 1], B[i]
        if not B:
            B = [rng.choice(A)]
    else:
        B = list(rng.choice(pool))
        k = int(len(B) * rng.uniform(0, 0.4))
        for _ in range(k):
            B[rng.randrange(len(B))] = rng.choice(A)
    sa, sb = set(A), set(B)
    target = len(sa & sb) / len(sa | sb)
    return (A, B, target) if rng.random() < 0.5 else (B, A, target)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=4321)
    ap.add_argument("--steps", type=int, default=700)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=4e-4)
    ap.add_argument("--max-minutes", type=float, default=10.0)
    ap.add_argument("--match-heads", type=int, default=2, help="layers 0..n-1 get a matching head 0")
    args = ap.parse_args()
    common.setup(args.seed)
    clock = common.Clock()
    ck = torch.load(os.path.join(common.WORK, "mlm_bert.pt"))
    cfg = ck["cfg"]
    tok = tokenization.BertTokenizer.from_file(os.path.join(common.WORK, "vocab.txt"))
    model = PairPretrainer(cfg)
    missing, unexpected = model.load_state_dict(ck["state_dict"], strict=False)
    assert not unexpected, unexpected
    common.log("loaded MLM stage 1; new: %s" % missing)
    if args.match_heads:
        for lyr in range(args.match_heads):
            init_match_head(model, layer=lyr, head=0, seed=args.seed + lyr)
    rng = random.Random(args.seed)
    pool = sentences()
    wp_cache = {}

    def pieces(words):
        out = []
        for w in words:
            if w not in wp_cache:
                wp_cache[w] = tok.ids(tok.wordpiece(w))
            out += wp_cache[w]
        return out[:120]

    opt, sched = common.optimizer(model, args.lr, args.steps, warmup=0.05, betas=(0.9, 0.98))
    gen = torch.Generator().manual_seed(args.seed)
    model.train()
    hist = []
    step = 0
    while step < args.steps and clock.minutes() < args.max_minutes:
        seqs, types, targets = [], [], []
        for _ in range(args.batch):
            A, B, t = make_pair(rng.choice(pool), pool, rng)
            a, b = pieces(A), pieces(B)
            seqs.append([tok.cls] + a + [tok.sep] + b + [tok.sep])
            types.append([0] * (len(a) + 2) + [1] * (len(b) + 1))
            targets.append(t)
        ids = common.pad(seqs, tok.pad)
        tt = common.pad(types, 0)
        att = (ids != tok.pad).long()
        inp, labels, sel = mask_tokens(ids, tok, len(tok.vocab), gen)
        logits, ov = model(inp, att, tt, sel)
        mlm = F.cross_entropy(logits, labels[sel])
        reg = F.mse_loss(torch.sigmoid(ov), torch.tensor(targets))
        loss = mlm + 10.0 * reg
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        step += 1
        hist.append((mlm.item(), reg.item()))
        if step % 50 == 0:
            m = sum(h[0] for h in hist[-50:]) / 50
            r = sum(h[1] for h in hist[-50:]) / 50
            common.log("step %d mlm %.3f overlap-mse %.4f (%.1f min)" % (step, m, r, clock.minutes()))
    sd = {k: v for k, v in model.state_dict().items() if not k.startswith("overlap.")}
    torch.save({"state_dict": sd, "cfg": cfg, "steps": ck["steps"], "seed": ck["seed"],
                "minutes": ck["minutes"], "tokens_seen": ck["tokens_seen"],
                "stage2": {"seed": args.seed, "steps": step, "minutes": clock.minutes()}},
               os.path.join(common.WORK, "mlm_bert2.pt"))
    common.log("done: %d steps, %.1f minutes" % (step, clock.minutes()))


if __name__ == "__main__":
    main()
