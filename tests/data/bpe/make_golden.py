#!/usr/bin/env python3
"""Writes tests/data/bpe/golden.jsonl: what the `tokenizers` library gives for the committed
byte-level BPE tokenizer (tests/data/bpe/tokenizer.json, made by scripts/train_bpe_tokenizer.py)
on the hostile-text corpus of the WordPiece/Unigram goldens (../shared/golden/tokenizers, singles
and pairs) plus BPE-specific texts (added tokens in text, emoji, CJK, combining marks, control
characters, long runs of spaces and newlines, contractions).

One JSON object per line. Texts and token strings are hex-encoded UTF-8 (the texts hold NULs);
offsets are the reference's character offsets converted to byte offsets of the token's own
sequence; special tokens keep (0, 0).

    python tests/data/bpe/make_golden.py [--shared ../shared]
"""
import argparse
import json
import os

from tokenizers import Tokenizer

EXTRA = [
    "Hello <mask>!", "Hello<mask>world", " <mask> ", "<mask>", "<s>hi</s>", "a<pad>b <unk> c",
    "<s><s></s>", "x <mask>  <mask>\t<mask>", "no special <MASK> <Mask>",
    "I'll've done it, y'all'd've 'S 'RE ''s", "don't DON'T it's It'S",
    "😀 x 😀😀 👨‍👩‍👧‍👦 🇫🇷🇩🇪 ❤️", "中文字符测试，还有标点。", "日本語のテキスト と カタカナ",
    "한국어 텍스트", "e\u0301 é cafe\u0301 n\u0303o", "a\u0300\u0301\u0302\u0303 b",
    "ctrl\x00nul\x01\x02\x7f del \u0085nel\u200bzwsp", "tab\tand\x0bvt\x0cff\rcr",
    " " * 300 + "x", "\n" * 50 + "y" + "\n" * 40, "a \t \n b\n\n\n c  \u00a0 d\u3000e",
    "trailing   ", "   leading", "", " ", "  ", "\n", "\u00a0", "\u3000x",
    "12345 ٣٤٥ Ⅻ ½ 3.14159 1,000,000", "مرحبا بالعالم", "שלום עולם", "Ωμέγα ΣΊΣΥΦΟΣ",
    "ﬁ ﬂ ＡＢＣ ｱｲｳ", "$$$ ^^^ ___ --- ... !!!???", "@user #tag http://x.y/z?a=1&b=2",
    "x" * 600, "ab" * 200 + " " + "é" * 100, "\U0001d400\U0001d401 𝒜𝒷", "\ufeffBOM text",
    "A-B_C.D/E\\F", "'", "''", "'s", " 's", "x's", "!!'s",
]
PAIRS = [("Hello <mask>!", "  spaced   pair  "), ("", "x"), ("😀", "中文"), (" a", " b "),
         ("I'm here.", "You're there.")]


def hx(s):
    return s.encode("utf-8").hex()


def byte_offsets(text, offs):
    pos = [0]
    for ch in text:
        pos.append(pos[-1] + len(ch.encode("utf-8")))
    return [[pos[a], pos[b]] for a, b in offs]


def record(tok, rid, text, pair):
    enc = tok.encode(text, pair) if pair is not None else tok.encode(text)
    single = tok.encode(text, add_special_tokens=False)
    offs = []
    for (a, b), sid in zip(enc.offsets, enc.sequence_ids):
        if sid is None:
            offs.append([a, b])
        else:
            offs.extend(byte_offsets(text if sid == 0 else pair, [(a, b)]))
    r = {"id": rid, "text": hx(text), "tokens": [hx(t) for t in single.tokens],
         "input_ids": enc.ids, "type_ids": enc.type_ids, "attention_mask": enc.attention_mask,
         "offsets": offs, "word_ids": [-1 if w is None else w for w in enc.word_ids],
         "decode": hx(tok.decode(enc.ids, skip_special_tokens=False)),
         "decode_skip": hx(tok.decode(enc.ids, skip_special_tokens=True))}
    if pair is not None:
        r["text_pair"] = hx(pair)
        r["tokens_pair"] = [hx(t) for t in tok.encode(pair, add_special_tokens=False).tokens]
    return r


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(here, "..", "..", "..", "..", "shared"))
    a = ap.parse_args()
    tok = Tokenizer.from_file(os.path.join(here, "tokenizer.json"))
    cases = []
    with open(os.path.join(a.shared, "golden", "tokenizers", "xlm-roberta.jsonl"), encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            cases.append((r["id"], r["text"], r.get("text_pair")))
    cases += [(f"bpe-s{i:03d}", t, None) for i, t in enumerate(EXTRA)]
    cases += [(f"bpe-p{i:03d}", t, p) for i, (t, p) in enumerate(PAIRS)]
    with open(os.path.join(here, "golden.jsonl"), "w", encoding="utf-8") as out:
        for rid, text, pair in cases:
            out.write(json.dumps(record(tok, rid, text, pair)) + "\n")
    print(f"{len(cases)} records")


if __name__ == "__main__":
    main()
