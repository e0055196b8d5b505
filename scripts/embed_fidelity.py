#!/usr/bin/env python3
"""Embedding fidelity of INT8 folders against their FP32 model, through the CLI.

    python3 scripts/embed_fidelity.py FP32_DIR [INT8_DIR ...] [--bert8 build/bert8]
        [--data ../shared/data] [--max-length N] [--no-retrieval] [--stsb-limit N] [--json OUT]

For each folder: STS-B dev Spearman (cosine of the two sentences' embeddings against the gold
score, x 100), the cosine of every STS-B sentence's embedding to its FP32 embedding (mean, 1st
percentile, min), and retrieval: SQuAD v1.1 dev questions against its paragraphs as a corpus,
recall@1 and MRR@10 (a question's relevant paragraph is the one it was asked on), and the
overlap of each question's top-10 list with the FP32 top-10 list. Retrieval is given twice for an
INT8 folder: corpus and queries INT8 ("int8"), and INT8 queries against the FP32-indexed corpus
("mixed"), which is how users meet a new engine. Only numpy is needed.
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import time

import numpy as np


def embed(bert8, model, texts, max_length, threads):
    """Normalized embeddings of texts (one per row) from `bert8 embed`."""
    args = [bert8, "embed", model, "--normalize", "--batch", "32"]
    if max_length:
        args += ["--max-length", str(max_length)]
    if threads:
        args += ["--threads", str(threads)]
    inp = "".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts)
    r = subprocess.run(args, input=inp.encode(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    if r.returncode:
        sys.exit(f"{' '.join(args)} failed: {r.stderr.decode(errors='replace')}")
    out = [json.loads(line)["embedding"] for line in r.stdout.decode().splitlines() if line.strip()]
    if len(out) != len(texts):
        sys.exit(f"{model}: {len(out)} embeddings for {len(texts)} texts")
    return np.asarray(out, dtype=np.float32)


def ranks(x):
    """Average ranks (ties share their mean rank), as Spearman's rho needs."""
    order = np.argsort(x, kind="mergesort")
    r = np.empty(len(x), dtype=np.float64)
    xs = x[order]
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and xs[j + 1] == xs[i]:
            j += 1
        r[order[i:j + 1]] = (i + j) / 2.0
        i = j + 1
    return r


def spearman(a, b):
    ra, rb = ranks(np.asarray(a, np.float64)), ranks(np.asarray(b, np.float64))
    ra -= ra.mean()
    rb -= rb.mean()
    return float((ra * rb).sum() / np.sqrt((ra * ra).sum() * (rb * rb).sum()))


def read_stsb(path, limit):
    s1, s2, gold = [], [], []
    with open(path, encoding="utf-8") as f:
        for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            s1.append(row["sentence1"])
            s2.append(row["sentence2"])
            gold.append(float(row["score"]))
            if limit and len(gold) >= limit:
                break
    return s1, s2, np.asarray(gold)


def read_squad(path):
    data = json.load(open(path, encoding="utf-8"))["data"]
    paras, questions, rel = [], [], []
    for art in data:
        for p in art["paragraphs"]:
            pid = len(paras)
            paras.append(p["context"])
            for q in p["qas"]:
                questions.append(q["question"])
                rel.append(pid)
    return paras, questions, np.asarray(rel)


def topk(q, c, k):
    s = q @ c.T
    idx = np.argpartition(-s, k, axis=1)[:, :k]
    part = np.take_along_axis(s, idx, axis=1)
    order = np.argsort(-part, axis=1, kind="stable")
    return np.take_along_axis(idx, order, axis=1)


def retrieval(q, c, rel, ref_top=None):
    top = topk(q, c, 10)
    hit = top == rel[:, None]
    r1 = float(hit[:, 0].mean()) * 100
    pos = np.where(hit.any(axis=1), hit.argmax(axis=1) + 1, 0)
    mrr = float(np.where(pos > 0, 1.0 / np.maximum(pos, 1), 0).mean()) * 100
    out = {"recall@1": r1, "mrr@10": mrr}
    if ref_top is not None:
        ov = [len(set(a) & set(b)) / 10.0 for a, b in zip(top, ref_top)]
        out["top10_overlap"] = float(np.mean(ov)) * 100
    return out, top


def cos_stats(a, b):
    c = (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return {"mean": float(c.mean()), "p1": float(np.percentile(c, 1)), "min": float(c.min())}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("fp32")
    ap.add_argument("int8", nargs="*")
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--bert8", default=os.path.join(here, "..", "build", "bert8"))
    ap.add_argument("--data", default=os.path.join(here, "..", "..", "shared", "data"))
    ap.add_argument("--max-length", type=int, default=0, help="truncation (default: the model's)")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--stsb-limit", type=int, default=0)
    ap.add_argument("--no-retrieval", action="store_true")
    ap.add_argument("--json", help="write the results here")
    a = ap.parse_args()

    s1, s2, gold = read_stsb(os.path.join(a.data, "glue", "STS-B.dev.tsv"), a.stsb_limit)
    sents = s1 + s2
    n = len(s1)
    if not a.no_retrieval:
        paras, questions, rel = read_squad(os.path.join(a.data, "squad", "dev-v1.1.rebuilt.json"))
    results = []
    ref = {}
    for i, model in enumerate([a.fp32] + a.int8):
        t0 = time.time()
        e = embed(a.bert8, model, sents, a.max_length, a.threads)
        cs = (e[:n] * e[n:]).sum(axis=1)
        row = {"model": model, "stsb_spearman": spearman(cs, gold) * 100}
        if i == 0:
            ref["stsb"] = e
        else:
            row["cosine_to_fp32"] = cos_stats(e, ref["stsb"])
        if not a.no_retrieval:
            qe = embed(a.bert8, model, questions, a.max_length, a.threads)
            ce = embed(a.bert8, model, paras, a.max_length, a.threads)
            if i == 0:
                r, ref["top"] = retrieval(qe, ce, rel)
                ref["corpus"] = ce
                row["retrieval"] = r
            else:
                row["retrieval"], _ = retrieval(qe, ce, rel, ref["top"])
                row["retrieval_mixed"], _ = retrieval(qe, ref["corpus"], rel, ref["top"])
                row["cosine_to_fp32_queries"] = cos_stats(qe, ref["q"])
            if i == 0:
                ref["q"] = qe
        row["seconds"] = round(time.time() - t0, 1)
        results.append(row)
        print(json.dumps(row), flush=True)
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump({"stsb_pairs": n, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
