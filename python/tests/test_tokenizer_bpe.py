"""bert8.Tokenizer on byte-level BPE tokenizer.json files against the live `tokenizers` library:
the committed test tokenizer (tests/data/bpe, trained by scripts/train_bpe_tokenizer.py) and
variants of it (prefix space, normalizers, post-processors, added tokens), on the hostile
corpus and the BPE-specific texts; ids, token types, masks, character offsets and decoding."""
from __future__ import annotations

import copy
import json

import pytest

import bert8
from conftest import REPO, SENTENCES, SHARED

BPE_JSON = REPO / "tests" / "data" / "bpe" / "tokenizer.json"
HOSTILE = SHARED / "golden" / "tokenizers" / "xlm-roberta.jsonl"
EXTRA = [
    "Hello <mask>!", " <mask> ", "<s>hi</s>", "x <mask>  <mask>\t<mask>", "I'll've done it, y'all'd've",
    "😀 x 😀😀 👨‍👩‍👧‍👦 🇫🇷", "中文字符测试，还有标点。", "e\u0301 é cafe\u0301", "ctrl\x00nul\x01 \u0085nel",
    " " * 40 + "x", "\n" * 9 + "y\n\n", "a \t \n b  \u00a0 d\u3000e", "trailing   ", "   leading", "", " ",
    "ÉCOLE İstanbul ΣΊΣΥΦΟΣ ǅ", "Movie! movie! MOVIE! amovie!", "12345 ٣٤٥ Ⅻ", "'s 's x's !!'s",
]


def _texts():
    texts = list(SENTENCES) + EXTRA
    if HOSTILE.exists():
        with open(HOSTILE, encoding="utf-8") as f:
            texts += [json.loads(line)["text"] for line in f][:120]
    return texts


def _variants():
    base = json.loads(BPE_JSON.read_text(encoding="utf-8"))
    out = {"roberta": base}
    v = copy.deepcopy(base)
    v["pre_tokenizer"]["add_prefix_space"] = True
    v["post_processor"]["add_prefix_space"] = True
    out["prefix_space"] = v
    v = copy.deepcopy(base)
    v["normalizer"] = {"type": "Lowercase"}
    out["lowercase"] = v
    v = copy.deepcopy(base)
    v["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Lowercase"}]}
    out["nfc_lowercase"] = v
    v = copy.deepcopy(base)
    v["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                   {"SpecialToken": {"id": "</s>", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "</s>", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}},
                 {"SpecialToken": {"id": "</s>", "type_id": 1}}],
        "special_tokens": {"<s>": {"id": "<s>", "ids": [0], "tokens": ["<s>"]},
                           "</s>": {"id": "</s>", "ids": [2], "tokens": ["</s>"]}}}
    out["template"] = v
    v = copy.deepcopy(base)
    v["post_processor"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    v["pre_tokenizer"]["add_prefix_space"] = True
    out["bytelevel_post"] = v
    v = copy.deepcopy(base)
    v["post_processor"] = None
    v["pre_tokenizer"]["use_regex"] = False
    out["no_regex_no_post"] = v
    v = copy.deepcopy(base)
    v["added_tokens"].append({"id": len(v["model"]["vocab"]), "content": "movie!", "single_word": True,
                              "lstrip": False, "rstrip": True, "normalized": True, "special": False})
    v["added_tokens"].append({"id": len(v["model"]["vocab"]) + 1, "content": "ÉCOLE", "single_word": False,
                              "lstrip": True, "rstrip": False, "normalized": True, "special": False})
    v["normalizer"] = {"type": "Lowercase"}
    out["added_normalized"] = v
    # the fuzz seed with the remaining options: pair-form merges, continuing_subword_prefix,
    # end_of_word_suffix, ignore_merges, fuse_unk over missing bytes, no regex, a Sequence
    # post-processor (ByteLevel + TemplateProcessing), NFC + Lowercase
    seed = REPO / "fuzz" / "corpus" / "tokenizer_json" / "bpe_options"
    if seed.exists():
        out["options_seed"] = json.loads(seed.read_bytes().split(b"\n#####\n")[0])
    return out


VARIANTS = _variants() if BPE_JSON.exists() else {}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_bpe_variant_matches_tokenizers(name, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    spec = VARIANTS[name]
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    ref = tokenizers.Tokenizer.from_str(json.dumps(spec))
    tok = bert8.Tokenizer(tmp_path)
    texts = _texts()
    pairs = texts[1:] + texts[:1]
    for i, text in enumerate(texts):
        for pair in (None, pairs[i] if i % 4 == 0 else None):
            want = ref.encode(text, pair) if pair is not None else ref.encode(text)
            got = tok(text, pair, return_offsets_mapping=True, return_token_type_ids=True)
            where = f"{name}: {text!r} / {pair!r}"
            assert list(got["input_ids"]) == want.ids, where
            assert list(got["token_type_ids"]) == want.type_ids, where
            assert list(got["attention_mask"]) == want.attention_mask, where
            assert [tuple(o) for o in got["offset_mapping"]] == want.offsets, where
            if "\x00" in text + (pair or ""):
                continue  # decoded text is NUL-terminated in the C API
            assert tok.decode(want.ids) == ref.decode(want.ids, skip_special_tokens=False), where
            assert tok.decode(want.ids, skip_special_tokens=True) == ref.decode(want.ids), where


def test_bpe_malformed_file_is_an_error(tmp_path):
    if not VARIANTS:
        pytest.skip("no BPE test tokenizer")
    spec = copy.deepcopy(VARIANTS["roberta"])
    spec["model"]["merges"].append("Ġ nosuchtoken")
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    with pytest.raises(bert8.Error, match="nosuchtoken"):
        bert8.Tokenizer(tmp_path)
