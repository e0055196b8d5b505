"""Readers for the shared task data and the project's fixed train/eval splits.

Every split is deterministic (seeded or rule-based) and is also written as split.json in
each model folder, so bert8's C evaluator scores exactly the rows we held out.
"""
import json
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.normpath(os.path.join(HERE, "..", "..", "shared", "data"))
SQUAD_SPLIT_SEED = 20240
SQUAD_EVAL_ARTICLES = 10  # of 48: about 20% held out by article


def _tsv_rows(path):
    with open(path, encoding="utf-8-sig") as f:
        lines = f.read().split("\n")
    head = lines[0].split("\t")
    rows = [dict(zip(head, ln.split("\t"))) for ln in lines[1:] if ln.strip()]
    return head, rows


def sst2(split):
    """split: 'train' (train90 + train10) or 'dev'. Returns [(sentence, label)]."""
    names = ["SST-2.train90.tsv", "SST-2.train10.tsv"] if split == "train" else ["SST-2.dev.tsv"]
    out = []
    for n in names:
        _, rows = _tsv_rows(os.path.join(DATA, "glue", n))
        out += [(r["sentence"], int(r["label"])) for r in rows]
    return out


def mrpc(split):
    """split: 'train' or 'test'. Returns [(s1, s2, label)]; the file has a BOM and no quoting."""
    path = os.path.join(DATA, "glue", "MRPC.msr_paraphrase_%s.txt" % split)
    with open(path, encoding="utf-8-sig") as f:
        lines = [ln for ln in f.read().split("\n")[1:] if ln.strip()]
    out = []
    for ln in lines:
        q, _, _, a, b = ln.split("\t")
        out.append((a, b, int(q)))
    return out


def stsb_split():
    """STS-B has only its dev file: rows with index % 3 == 2 are eval (500), the rest train
    (1000). The rule keeps the three genres in both halves."""
    _, rows = _tsv_rows(os.path.join(DATA, "glue", "STS-B.dev.tsv"))
    tr, ev = [], []
    for i, r in enumerate(rows):
        item = (r["sentence1"], r["sentence2"], float(r["score"]), int(r["index"]))
        (ev if i % 3 == 2 else tr).append(item)
    return tr, ev


XNLI_LABELS = ["entailment", "neutral", "contradiction"]


def xnli(split):
    """English pairs of xnli.my.{dev,test}.tsv. Returns [(premise, hypothesis, label_id)]."""
    _, rows = _tsv_rows(os.path.join(DATA, "xnli", "xnli.my.%s.tsv" % split))
    return [(r["sentence1_en"], r["sentence2_en"], XNLI_LABELS.index(r["label"])) for r in rows]


def squad_articles():
    with open(os.path.join(DATA, "squad", "dev-v1.1.rebuilt.json"), encoding="utf-8") as f:
        return json.load(f)["data"]


def squad_split():
    """Split the SQuAD dev articles: a seeded shuffle of the titles, the first 10 are eval."""
    arts = squad_articles()
    titles = sorted(a["title"] for a in arts)
    random.Random(SQUAD_SPLIT_SEED).shuffle(titles)
    ev = set(titles[:SQUAD_EVAL_ARTICLES])
    return [a for a in arts if a["title"] not in ev], [a for a in arts if a["title"] in ev]


def pretrain_texts():
    """Unlabelled text from the TRAIN side of every split (never an eval row):
    returns (single sentences, sentence pairs, long passages)."""
    singles = [s for s, _ in sst2("train")]
    pairs = [(a, b) for a, b, _ in mrpc("train")]
    pairs += [(a, b) for a, b, _, _ in stsb_split()[0]]
    pairs += [(a, b) for a, b, _ in xnli("test")]
    tr, _ = squad_split()
    passages = [p["context"] for a in tr for p in a["paragraphs"]]
    singles += [q["question"] for a in tr for p in a["paragraphs"] for q in p["qas"]]
    return singles, pairs, passages


def vocab_texts():
    singles, pairs, passages = pretrain_texts()
    return singles + [x for p in pairs for x in p] + passages


SPLIT_FOLDERS = {"sst2": "sst2-bert-mini", "mrpc": "mrpc-distilbert-mini", "stsb": "stsb-bert-mini",
                 "xnli": "xnli-xlmr-mini", "squad": "squad-bert-mini"}


def split_definition(task):
    """The split.json written into each model folder (paths relative to ../shared/data)."""
    if task == "sst2":
        return {"train": ["glue/SST-2.train90.tsv", "glue/SST-2.train10.tsv"], "eval": "glue/SST-2.dev.tsv",
                "eval_rows": "all 872 rows"}
    if task == "mrpc":
        return {"train": "glue/MRPC.msr_paraphrase_train.txt", "eval": "glue/MRPC.msr_paraphrase_test.txt",
                "eval_rows": "all 1725 pairs", "positive_label": 1}
    if task == "stsb":
        _, ev = stsb_split()
        return {"file": "glue/STS-B.dev.tsv",
                "rule": "data row i (0-based, header excluded) is eval when i % 3 == 2, else train",
                "train_rows": 1000, "eval_rows": 500, "eval_index": [r[3] for r in ev]}
    if task == "xnli":
        return {"train": "xnli/xnli.my.test.tsv", "eval": "xnli/xnli.my.dev.tsv",
                "columns": ["sentence1_en", "sentence2_en"], "labels": XNLI_LABELS, "eval_rows": "all 2490 pairs",
                "note": "XNLI has no train split: trained on test, evaluated on dev"}
    if task == "squad":
        tr, ev = squad_split()
        return {"file": "squad/dev-v1.1.rebuilt.json",
                "rule": "titles sorted, shuffled with random.Random(%d), first %d are eval"
                        % (SQUAD_SPLIT_SEED, SQUAD_EVAL_ARTICLES),
                "eval_articles": sorted(a["title"] for a in ev),
                "eval_questions": sum(len(p["qas"]) for a in ev for p in a["paragraphs"]),
                "train_articles": sorted(a["title"] for a in tr),
                "max_length": 256, "doc_stride": 128, "max_query_length": 64,
                "max_answer_length": 30, "n_best": 20}
    raise ValueError(task)
