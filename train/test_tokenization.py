"""Check tokenization.py against the transformers golden tokenizer corpora.

Run: /usr/bin/python3 train/test_tokenization.py   (exit status 0 when every record matches)
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tokenization  # noqa: E402

SHARED = os.path.join(HERE, "..", "..", "shared")


def run(name, tok, is_bert):
    path = os.path.join(SHARED, "golden", "tokenizers", name + ".jsonl")
    n = bad = 0
    for line in open(path, encoding="utf-8"):
        r = json.loads(line)
        n += 1
        pair = r.get("text_pair") if r["kind"] == "pair" else None
        if is_bert:
            ids, tt = tok.encode(r["text"], pair)
            ok = ids == r["input_ids"] and tt == r["token_type_ids"] and tok.tokenize(r["text"]) == r["tokens"]
        else:
            ids = tok.encode(r["text"], pair)
            ok = ids == r["input_ids"] and tok.tokenize(r["text"]) == r["tokens"]
        if not ok:
            bad += 1
            if bad <= 3:
                print("  mismatch %s: %r" % (r["id"], r["text"][:80]))
    print("%-28s records=%d mismatches=%d" % (name, n, bad))
    return n > 0 and bad == 0


def main():
    ok = run("bert-base-uncased", tokenization.BertTokenizer.from_file(
        os.path.join(SHARED, "tokenizers", "bert-base-uncased.vocab.txt"), lower=True), True)
    ok &= run("bert-base-cased", tokenization.BertTokenizer.from_file(
        os.path.join(SHARED, "tokenizers", "bert-base-cased.vocab.txt"), lower=False), True)
    ok &= run("xlm-roberta", tokenization.XLMRTokenizer(
        os.path.join(SHARED, "tokenizers", "xlm-roberta.sentencepiece.rebuilt.model")), False)
    print("tokenization: %s" % ("all ok" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
