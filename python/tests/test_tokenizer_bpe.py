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
    # NFC groups that lose characters: the marks left over take the spans after the absorbed ones
    "o\u0308\u0303 xo\u0308\u0303y a\u0327\u0308 o\u0308\u0303\u0301 o\u0323\u0308 \u1100\u1161\u11a8x e\u0344",
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


# tokenizer.json values as `tokenizers` parses them (issue 41).
BAD_BOOLEANS = [
    (("pre_tokenizer", "add_prefix_space"), "yes", "pre_tokenizer ByteLevel's add_prefix_space must be true or false"),
    (("pre_tokenizer", "use_regex"), None, "pre_tokenizer ByteLevel's use_regex must be true or false, not null"),
    (("model", "fuse_unk"), "yes", "model.fuse_unk must be true, false or null"),
    (("added_tokens", 0, "lstrip"), "no", r"added_tokens\[0\].lstrip must be true or false"),
]


@pytest.mark.parametrize("where,value,why", BAD_BOOLEANS)
def test_bpe_non_boolean_flags_are_refused_as_tokenizers_refuses_them(tmp_path, where, value, why):
    tokenizers = pytest.importorskip("tokenizers")
    if not VARIANTS:
        pytest.skip("no BPE test tokenizer")
    spec = copy.deepcopy(VARIANTS["roberta"])
    node = spec
    for k in where[:-1]:
        node = node[k]
    node[where[-1]] = value
    with pytest.raises(Exception):
        tokenizers.Tokenizer.from_str(json.dumps(spec))
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    with pytest.raises(bert8.Error, match=why):
        bert8.Tokenizer(tmp_path)


def test_bpe_unk_token_missing_from_the_vocabulary_as_tokenizers(tmp_path):
    """`tokenizers` loads a BPE whose unk_token is not in its vocabulary and fails only when a
    character needs it; bert8 does the same (the issue expected a refusal at load)."""
    tokenizers = pytest.importorskip("tokenizers")
    if not VARIANTS:
        pytest.skip("no BPE test tokenizer")
    spec = copy.deepcopy(VARIANTS["roberta"])
    spec["model"]["unk_token"] = "<nope>"
    ref = tokenizers.Tokenizer.from_str(json.dumps(spec))
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    tok = bert8.Tokenizer(tmp_path)
    for text in _texts():
        assert list(tok(text)["input_ids"]) == ref.encode(text).ids, text
    # without the byte 0x00's character, a NUL needs the unknown token: both refuse the text
    byte0 = "\u0100"  # the GPT-2 alphabet's character for byte 0x00
    spec["model"]["vocab"].pop(byte0)
    spec["model"]["merges"] = [m for m in spec["model"]["merges"] if byte0 not in m]
    ref = tokenizers.Tokenizer.from_str(json.dumps(spec))
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    tok = bert8.Tokenizer(tmp_path)
    assert list(tok("plain text")["input_ids"]) == ref.encode("plain text").ids
    with pytest.raises(Exception, match="<nope>"):
        ref.encode("a\x00b")
    with pytest.raises(bert8.Error, match="byte 0x00 has no token and the unk_token is not in the vocabulary"):
        tok("a\x00b")


def test_bpe_added_token_with_nul_is_refused(tmp_path):
    """`tokenizers` keeps the NUL; bert8 refuses it by name (its strings end at a NUL)."""
    if not VARIANTS:
        pytest.skip("no BPE test tokenizer")
    spec = copy.deepcopy(VARIANTS["roberta"])
    spec["added_tokens"][1]["content"] = "<pa\u0000d>"
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    with pytest.raises(bert8.Error, match=r"added_tokens\[1\].content holds a NUL character"):
        bert8.Tokenizer(tmp_path)


def test_many_added_tokens_match_as_tokenizers(tmp_path):
    """2,000 added tokens sharing prefixes, both matching passes, single_word, lstrip and rstrip:
    the trie finds what `tokenizers`' automaton finds."""
    tokenizers = pytest.importorskip("tokenizers")
    if not VARIANTS:
        pytest.skip("no BPE test tokenizer")
    spec = copy.deepcopy(VARIANTS["lowercase"])
    base = len(spec["model"]["vocab"])
    for i in range(2000):
        spec["added_tokens"].append({"id": base + i, "content": ("tok%d" % i) if i % 3 else ("Tok%d!" % i),
                                     "single_word": i % 7 == 0, "lstrip": i % 5 == 0, "rstrip": i % 11 == 0,
                                     "normalized": i % 2 == 0, "special": False})
    ref = tokenizers.Tokenizer.from_str(json.dumps(spec))
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec), encoding="utf-8")
    tok = bert8.Tokenizer(tmp_path)
    texts = ["tok1 tok12 tok123tok1234 TOK15 Tok3! tok6! xtok7 tok14x  tok10  ", "tok", "tok1999tok0 Tok0!",
             "the tok21 movie TOK1998 tok 5"] + SENTENCES
    for text in texts:
        want = ref.encode(text)
        got = tok(text, return_offsets_mapping=True)
        assert list(got["input_ids"]) == want.ids, text
        assert [tuple(o) for o in got["offset_mapping"]] == want.offsets, text
