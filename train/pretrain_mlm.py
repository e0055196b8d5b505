"""Build the project's WordPiece vocabulary and masked-LM pre-train the shared BERT-mini encoder
on the train side of every task's data (no eval row is ever seen).

Run: LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-serial /usr/bin/python3 train/pretrain_mlm.py
Writes train/work/vocab.txt and train/work/mlm_bert.pt (state_dict of the encoder).
"""
import argparse
import os
import random

import torch
import torch.nn.functional as F

import common
import data
import hf_models
import tokenization


def build_examples(tok, rng):
    singles, pairs, passages = data.pretrain_texts()
    ex = []  # (ids, token_type_ids)
    for p in passages:
        ids = tok.ids(tok.tokenize(p))
        for s in range(0, len(ids), 254):
            chunk = ids[s:s + 254]
            if len(chunk) >= 8:
                ex.append(([tok.cls] + chunk + [tok.sep], [0] * (len(chunk) + 2)))
    for a, b in pairs:
        ids, tt = tok.encode(a, b)
        ex.append((ids[:256], tt[:256]))
    # Short single sentences are packed into sequences of varied length (16-128 tokens).
    order = list(range(len(singles)))
    rng.shuffle(order)
    cur, target = [], rng.randint(16, 128)
    for i in order:
        ids = tok.ids(tok.tokenize(singles[i]))
        if cur and len(cur) + len(ids) > target:
            ex.append(([tok.cls] + cur + [tok.sep], [0] * (len(cur) + 2)))
            cur, target = [], rng.randint(16, 128)
        cur += ids[:254]
    if cur:
        ex.append(([tok.cls] + cur[:254] + [tok.sep], [0] * (min(len(cur), 254) + 2)))
    return ex


def mask_tokens(ids, tok, vocab_size, gen):
    """BERT's dynamic masking: 15% of real tokens; 80% [MASK], 10% random, 10% unchanged."""
    labels = ids.clone()
    special = (ids == tok.pad) | (ids == tok.cls) | (ids == tok.sep)
    prob = torch.full(ids.shape, 0.15)
    prob[special] = 0.0
    sel = torch.bernoulli(prob, generator=gen).bool()
    labels[~sel] = -100
    inp = ids.clone()
    r = torch.rand(ids.shape, generator=gen)
    inp[sel & (r < 0.8)] = tok.mask
    rnd = sel & (r >= 0.8) & (r < 0.9)
    inp[rnd] = torch.randint(5, vocab_size, ids.shape, generator=gen)[rnd]
    return inp, labels, sel


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--steps", type=int, default=1700)
    ap.add_argument("--max-tokens", type=int, default=2048)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--max-minutes", type=float, default=14.0)
    ap.add_argument("--warmup", type=float, default=0.05, help="warm-up fraction of --steps")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default="mlm_bert.pt")
    args = ap.parse_args()
    common.setup(args.seed)
    torch.set_num_threads(args.threads)
    os.makedirs(common.WORK, exist_ok=True)
    clock = common.Clock()

    vocab = tokenization.build_wordpiece_vocab(data.vocab_texts(), common.VOCAB_SIZE)
    vocab_path = os.path.join(common.WORK, "vocab.txt")
    with open(vocab_path, "w", encoding="utf-8") as f:
        f.write("".join(t + "\n" for t in vocab))
    tok = tokenization.BertTokenizer(vocab)
    rng = random.Random(args.seed)
    ex = build_examples(tok, rng)
    ntok = sum(len(e[0]) for e in ex)
    common.log("vocab %d, %d sequences, %d tokens, prep %.1f min" % (len(vocab), len(ex), ntok, clock.minutes()))

    cfg = common.bert_config("BertForMaskedLM", len(vocab))
    cfg["num_labels"] = 2
    model = hf_models.BertForMaskedLM(cfg)
    opt, sched = common.optimizer(model, args.lr, args.steps, warmup=args.warmup, betas=(0.9, 0.98))
    gen = torch.Generator().manual_seed(args.seed)
    lengths = [len(e[0]) for e in ex]
    step, epoch, seen, run_loss = 0, 0, 0, []
    model.train()
    while step < args.steps and clock.minutes() < args.max_minutes:
        for b in common.batches(lengths, args.max_tokens, rng, max_batch=256):
            if step >= args.steps or clock.minutes() >= args.max_minutes:
                break
            ids = common.pad([ex[i][0] for i in b], tok.pad)
            tt = common.pad([ex[i][1] for i in b], 0)
            att = (ids != tok.pad).long()
            inp, labels, sel = mask_tokens(ids, tok, len(vocab), gen)
            logits = model(inp, att, tt, select=sel)
            loss = F.cross_entropy(logits, labels[sel])
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            step += 1
            seen += int(att.sum())
            run_loss.append(loss.item())
            if step % 50 == 0:
                common.log("step %d epoch %d loss(avg 50) %.3f tokens %d (%.1f min)" % (
                    step, epoch, sum(run_loss[-50:]) / 50, seen, clock.minutes()))
        epoch += 1
    torch.save({"state_dict": model.state_dict(), "cfg": cfg, "steps": step, "seed": args.seed,
                "minutes": clock.minutes(), "tokens_seen": seen},
               os.path.join(common.WORK, args.out))
    common.log("done: %d steps, %.1f minutes, last loss %.3f" % (step, clock.minutes(), loss.item()))


if __name__ == "__main__":
    main()
