#!/usr/bin/env python3
"""Trains the small byte-level BPE tokenizer (RoBERTa layout) the BPE tests use.

The project has no hub access, so tests/data/bpe/tokenizer.json is made here with the
`tokenizers` library on SST-2 sentences from ../shared/data: a ByteLevel pre-tokenizer
(GPT-2 regex, no prefix space) and decoder, RobertaProcessing (<s> A </s></s> B </s>, trimmed
offsets), special tokens <s> <pad> </s> <unk> <mask> (ids 0-4, <mask> strips space on its
left as roberta-base's does) and a few thousand merges.

    python scripts/train_bpe_tokenizer.py [--shared ../shared] [--out tests/data/bpe/tokenizer.json]
"""
import argparse
import os

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from tokenizers import AddedToken

SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]


def sentences(path):
    with open(path, encoding="utf-8") as f:
        next(f)  # header
        for line in f:
            yield line.split("\t", 1)[0]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(here, "..", "..", "shared"))
    ap.add_argument("--out", default=os.path.join(here, "..", "tests", "data", "bpe", "tokenizer.json"))
    ap.add_argument("--vocab-size", type=int, default=3000)
    a = ap.parse_args()

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=a.vocab_size,
        min_frequency=2,
        special_tokens=[AddedToken(s, lstrip=(s == "<mask>"), rstrip=False, normalized=False,
                                   special=True) for s in SPECIALS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(sentences(os.path.join(a.shared, "data", "glue", "SST-2.train90.tsv")),
                            trainer=trainer)
    tok.post_processor = processors.RobertaProcessing(
        ("</s>", tok.token_to_id("</s>")), ("<s>", tok.token_to_id("<s>")),
        trim_offsets=True, add_prefix_space=False)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    tok.save(a.out, pretty=False)
    print(f"{a.out}: {tok.get_vocab_size()} tokens")


if __name__ == "__main__":
    main()
