"""A feature-based extractive-QA teacher (in the spirit of the original SQuAD logistic-regression
baseline, without a parser) for distilling into the SQuAD transformer.

Per context word: does it occur in the question; IDF-weighted share of the question's words
found within +-2/5/10/20 words and in its sentence; its own shape (capitalised, number, stop
word, punctuation next to it); the question's wh-word crossed with that shape; distance to the
nearest matched word. A small MLP scores every word as a start and as an end; answers are the
best (start <= end, at most 12 words) span. Fitted on train articles only.
"""
import collections
import math
import re

import torch
import torch.nn as nn
import torch.nn.functional as F

STOP = set("""a an the of in on at to and or for by with from as is was were are be been being that which
it its this these those he she they his her their had has have not but what who whom whose when where
why how did does do many much there into than then also such other some any all can could would should
will may might one two""".split())
WH = ["what", "who", "when", "where", "which", "why", "how many", "how much", "how", "other"]
TOK = re.compile(r"[a-z0-9]+")


def norm(w):
    return " ".join(TOK.findall(w.lower()))


def words(context):
    """Whitespace words with char spans."""
    return [(m.group(0), m.start(), m.end()) for m in re.finditer(r"\S+", context)]


def wh_type(q):
    ql = q.lower()
    for i, w in enumerate(WH[:-1]):
        if re.search(r"\b%s\b" % w, ql):
            return i
    return len(WH) - 1


class Featurizer:
    def __init__(self, contexts):
        df = collections.Counter()
        for c in contexts:
            df.update(set(t for w, _, _ in words(c) for t in TOK.findall(w.lower())))
        self.n = len(contexts)
        self.df = df

    def idf(self, t):
        return math.log((self.n + 1) / (self.df.get(t, 0) + 1)) + 1.0

    def features(self, context, question, ws=None):
        ws = ws or words(context)
        qt = [t for t in TOK.findall(question.lower()) if t not in STOP]
        qset = set(qt)
        qidf = sum(self.idf(t) for t in qset) or 1.0
        toks = [TOK.findall(w.lower()) for w, _, _ in ws]
        matched = [set(t for t in tk if t in qset) for tk in toks]
        n = len(ws)
        # sentence ids
        sid, s = [], 0
        for w, _, _ in ws:
            sid.append(s)
            if w[-1:] in ".!?" and len(w) > 2:
                s += 1
        sent_match = collections.defaultdict(set)
        for i in range(n):
            sent_match[sid[i]] |= matched[i]
        wt = wh_type(question)
        match_pos = [i for i in range(n) if matched[i]]
        feats = []
        for i in range(n):
            w = ws[i][0]
            f = [1.0, float(bool(matched[i])), float(bool(toks[i]) and all(t in STOP for t in toks[i]))]
            cap = float(w[:1].isupper())
            num = float(any(ch.isdigit() for ch in w))
            f += [cap, num, float(w[-1:] in ",.;:)\""), float(w[:1] in "(\""), float(i == 0 or ws[i - 1][0][-1:] in ".!?")]
            for r in (2, 5, 10, 20):
                got = set()
                for j in range(max(0, i - r), min(n, i + r + 1)):
                    if j != i:
                        got |= matched[j]
                f.append(sum(self.idf(t) for t in got) / qidf)
            f.append(sum(self.idf(t) for t in sent_match[sid[i]]) / qidf)
            d = min((abs(i - j) for j in match_pos), default=50)
            f += [float(d == 0), float(d == 1), float(2 <= d <= 3), float(4 <= d <= 8), float(d > 8)]
            shape = [cap, num, float(cap + num == 0), float(bool(matched[i]))]
            cross = [0.0] * (len(WH) * len(shape))
            for k, v in enumerate(shape):
                cross[wt * len(shape) + k] = v
            f += cross
            feats.append(f)
        return torch.tensor(feats)


class QATeacher(nn.Module):
    def __init__(self, nfeat, hidden=64):
        super().__init__()
        self.ctx = nn.Sequential(nn.Linear(nfeat, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        # Neighbour features: each word also sees its left and right neighbours' hidden states.
        self.out = nn.Linear(3 * hidden, 2)

    def forward(self, x):
        h = self.ctx(x)
        z = torch.zeros_like(h[:1])
        left = torch.cat([z, h[:-1]])
        right = torch.cat([h[1:], z])
        lg = self.out(torch.cat([left, h, right], 1))
        return lg[:, 0], lg[:, 1]


def covering(spans, a0, a1):
    """First and last index of the (start, end) char spans that overlap chars [a0, a1)."""
    st = en = None
    for i, (s, e) in enumerate(spans):
        if st is None and e > a0:
            st = i
        if s < a1:
            en = i
    return st, en


def examples(feat, articles):
    out = []
    for a in articles:
        for p in a["paragraphs"]:
            ws = words(p["context"])
            for q in p["qas"]:
                an = q["answers"][0]
                st, en = covering([(s, e) for _, s, e in ws], an["answer_start"],
                                  an["answer_start"] + len(an["text"]))
                if st is None or en is None or en < st:
                    continue
                out.append((feat.features(p["context"], q["question"], ws), st, en, p, q, ws))
    return out


def fit(exs, epochs=6, seed=0, lr=3e-3):
    torch.manual_seed(seed)
    m = QATeacher(exs[0][0].shape[1])
    opt = torch.optim.Adam(m.parameters(), lr=lr, weight_decay=1e-5)
    g = torch.Generator().manual_seed(seed)
    for ep in range(epochs):
        for i in torch.randperm(len(exs), generator=g).tolist():
            x, st, en = exs[i][:3]
            s, e = m(x)
            loss = F.cross_entropy(s[None], torch.tensor([st])) + F.cross_entropy(e[None], torch.tensor([en]))
            opt.zero_grad()
            loss.backward()
            opt.step()
    return m


def best_span(s, e, max_words=12):
    best, arg = -1e9, (0, 0)
    n = len(s)
    for i in range(n):
        for j in range(i, min(n, i + max_words)):
            v = s[i] + e[j]
            if v > best:
                best, arg = v, (i, j)
    return arg


def predict_text(m, ex):
    x, _, _, p, q, ws = ex
    with torch.no_grad():
        s, e = m(x)
    i, j = best_span(s.tolist(), e.tolist())
    txt = p["context"][ws[i][1]:ws[j][2]]
    return txt.strip(".,;:!?\"'()")
