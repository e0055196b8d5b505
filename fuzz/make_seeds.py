#!/usr/bin/env python3
"""Regenerates the seed corpora under fuzz/corpus/<harness>/ (standard library only).

The committed seeds (fuzz/corpus/) are made here only: small files built in the formats'
own layouts, the project's own model folders' files, and hand-made edge cases. Seeds taken
from ../shared (the golden folders' JSON and tokenizer files, headers cut out of the golden
checkpoints) are never committed: `--shared-only OUT` writes them to OUT/<harness>/, which
scripts/fuzz.sh does into build-fuzz/extra/ before it fuzzes. The harness input layouts are
described at the top of each fuzz/fuzz_*.c.

    python3 fuzz/make_seeds.py                          regenerate fuzz/corpus/
    python3 fuzz/make_seeds.py --shared-only OUT [SHARED_DIR]
"""
import base64
import json
import os
import shutil
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARGS = sys.argv[1:]
EXTRA = None  # where seeds taken from ../shared go (--shared-only OUT); None: not written
if ARGS[:1] == ["--shared-only"] and len(ARGS) >= 2:
    EXTRA, ARGS = ARGS[1], ARGS[2:]
SHARED = ARGS[0] if ARGS else os.path.join(ROOT, "..", "shared")
GOLD = os.path.join(SHARED, "golden")
CORPUS = os.path.join(ROOT, "fuzz", "corpus")
SEP = b"\n#####\n"


def rd(*parts):
    with open(os.path.join(*parts), "rb") as f:
        return f.read()


def put(harness, name, data, shared=False):
    """Writes one seed: into fuzz/corpus/ (committed), or, for a seed taken from ../shared
    (shared=True), into the --shared-only folder; each mode writes only its own kind."""
    if shared != (EXTRA is not None):
        return
    d = os.path.join(EXTRA if shared else CORPUS, harness)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- safetensors ------------------------------------------------------------------------

DT = {"F64": ("d", 8), "F32": ("f", 4), "F16": ("e", 2), "BF16": (None, 2), "I64": ("q", 8),
      "I32": ("i", 4), "I16": ("h", 2), "I8": ("b", 1), "U8": ("B", 1), "BOOL": ("?", 1),
      "U16": ("H", 2), "U32": ("I", 4), "U64": ("Q", 8), "F8_E5M2": (None, 1),
      "F8_E4M3": (None, 1)}


def st_file(tensors, meta={"format": "pt"}, pad=True, order=None):
    """tensors: list of (name, dtype, shape); data bytes are a counting pattern."""
    hdr, blobs, off = {}, [], 0
    if meta is not None:
        hdr["__metadata__"] = meta
    for name, dt, shape in tensors:
        n = 1
        for s in shape:
            n *= s
        size = n * DT[dt][1]
        hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + size]}
        blobs.append(bytes((i * 7 + len(name)) & 0xFF for i in range(size)))
        off += size
    h = json.dumps(hdr, separators=(",", ":")).encode()
    if pad:
        h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h, b"".join(blobs)


def golden_header(model):
    b = rd(GOLD, "models", model, "model.safetensors")
    n = struct.unpack("<Q", b[:8])[0]
    return b[8:8 + n]


def bert_tensors(prefix, H=4, I=8, V=10, P=6, layers=1, legacy=False):
    ln = ("gamma", "beta") if legacy else ("weight", "bias")
    t = [(prefix + "embeddings.word_embeddings.weight", "F32", [V, H]),
         (prefix + "embeddings.position_embeddings.weight", "F32", [P, H]),
         (prefix + "embeddings.token_type_embeddings.weight", "F32", [2, H]),
         (prefix + "embeddings.LayerNorm." + ln[0], "F32", [H]),
         (prefix + "embeddings.LayerNorm." + ln[1], "F32", [H])]
    for l in range(layers):
        b = "%sencoder.layer.%d." % (prefix, l)
        for part, shape in (("attention.self.query", [H, H]), ("attention.self.key", [H, H]),
                            ("attention.self.value", [H, H]),
                            ("attention.output.dense", [H, H]), ("intermediate.dense", [I, H]),
                            ("output.dense", [H, I])):
            t += [(b + part + ".weight", "F32", shape), (b + part + ".bias", "F32", shape[:1])]
        for part in ("attention.output.LayerNorm", "output.LayerNorm"):
            t += [(b + part + "." + ln[0], "F32", [H]), (b + part + "." + ln[1], "F32", [H])]
    return t


def seeds_safetensors():
    h, d = st_file(bert_tensors("bert."))
    put("safetensors", "tiny_bert", h + d)
    h, d = st_file(bert_tensors("", legacy=True) + [("bert.embeddings.position_ids", "I64", [1, 6])])
    put("safetensors", "tiny_legacy_i64", h + d)
    h, d = st_file([(k, k, [2, 1]) for k in DT])
    put("safetensors", "every_dtype", h + d)
    h, d = st_file([("scalar", "F32", []), ("empty", "F16", [0, 3]), ("bf", "BF16", [3])],
                   meta={"format": "pt", "note": "x\u00e9\\\"y"})
    put("safetensors", "scalar_empty_meta", h + d)
    h, d = st_file([("a", "F32", [2])], meta=None, pad=False)
    put("safetensors", "no_meta_unpadded", h + d)
    put("safetensors", "empty_object", struct.pack("<Q", 2) + b"{}")
    put("safetensors", "truncated", (h + d)[:len(h) + 3])
    for m in ("bert_e2e", "distilbert_seqcls", "xlmr_e2e", "bert_legacy_names"):
        if EXTRA is not None:
            put("st_header", "golden_" + m, golden_header(m), shared=True)
    for name in ("tiny_bert", "every_dtype", "scalar_empty_meta"):
        if EXTRA is not None:
            continue
        b = rd(CORPUS, "safetensors", name)
        n = struct.unpack("<Q", b[:8])[0]
        put("st_header", name, b[8:8 + n])
    put("st_header", "overlap",
        '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
        '"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}')
    put("st_header", "dup_and_gap",
        '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
        '"a":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}')
    put("st_header", "huge_dims",
        '{"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,0]}}')


def seeds_index():
    wm = {"a.weight": "model-00001-of-00002.safetensors",
          "a.bias": "model-00001-of-00002.safetensors",
          "b.weight": "model-00002-of-00002.safetensors",
          "b.bias": "model-00002-of-00002.safetensors"}
    put("st_index", "two_shards", json.dumps({"metadata": {"total_size": 48}, "weight_map": wm},
                                             indent=2))
    wm2 = dict(wm)
    wm2["c.weight"] = "sub/c.safetensors"
    wm2["c.bias"] = "sub/c.safetensors"
    put("st_index", "sub_folder", json.dumps({"weight_map": wm2}))
    put("st_index", "one_shard_partial",
        json.dumps({"weight_map": {"a.weight": "model-00001-of-00002.safetensors"}}))
    put("st_index", "escape", json.dumps({"weight_map": {"a.weight": "../model.safetensors"}}))
    put("st_index", "absolute", json.dumps({"weight_map": {"a.weight": "/etc/passwd"}}))
    put("st_index", "wrong_shard",
        json.dumps({"weight_map": {"a.weight": "model-00002-of-00002.safetensors"}}))
    put("st_index", "missing", json.dumps({"weight_map": {"a.weight": "nope.safetensors"}}))
    put("st_index", "empty", '{"weight_map":{}}')


# ---- config.json -------------------------------------------------------------------------

def seeds_config():
    if EXTRA is not None:
        for m in sorted(os.listdir(os.path.join(GOLD, "models"))):
            put("config", "golden_" + m, rd(GOLD, "models", m, "config.json"), shared=True)
    for m in sorted(os.listdir(os.path.join(ROOT, "models"))):
        p = os.path.join(ROOT, "models", m, "config.json")
        if os.path.exists(p):
            put("config", "model_" + m, rd(p))
    base = json.loads(rd(ROOT, "models", "sst2-bert-mini", "config.json"))
    edits = {
        "eps_subnormal": ("layer_norm_eps", "1e-320"), "pet_number": ("position_embedding_type", "1.5"),
        "labels_string": ("num_labels", '"1e999"'), "hidden_neg_huge": ("hidden_size", "-1e308"),
        "archs_string": ("architectures", '"BertModel"'), "decoder": ("is_decoder", "true"),
        "problem": ("problem_type", '"regression"'), "id2label_array": ("id2label", "[\"a\"]"),
        "act_relu": ("hidden_act", '"relu"'), "heads_indivisible": ("num_attention_heads", "5"),
    }
    text = json.dumps(base, indent=2)
    for name, (k, v) in edits.items():
        d = dict(base)
        d[k] = "@V@"
        put("config", "edge_" + name, json.dumps(d, indent=2).replace('"@V@"', v))
    put("config", "edge_minimal_distilbert", '{"model_type":"distilbert"}')
    put("config", "edge_minimal_camembert", '{"model_type":"camembert"}')
    put("config", "edge_mpnet", json.dumps({"model_type": "mpnet", "hidden_size": 64, "num_hidden_layers": 2,
                                             "num_attention_heads": 4, "intermediate_size": 96, "pad_token_id": 1,
                                             "max_position_embeddings": 130, "relative_attention_num_buckets": 32,
                                             "layer_norm_eps": 1e-5}, indent=2))
    put("config", "edge_mpnet_bad_buckets", '{"model_type":"mpnet","relative_attention_num_buckets":1}')
    put("config", "edge_roberta_pad_past_positions", '{"model_type":"roberta","pad_token_id":600,"max_position_embeddings":514}')
    # rotary positions, gated FFNs (GTE, NomicBERT, Jina v3): rope_parameters / rope_scaling /
    # the legacy rope_theta, head_dim, SiLU
    put("config", "edge_gte_rope", json.dumps({"model_type": "gte", "hidden_size": 64, "num_hidden_layers": 2,
                                                "num_attention_heads": 4, "intermediate_size": 96,
                                                "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
                                                "type_vocab_size": 0}, indent=2))
    put("config", "edge_nomic_legacy_theta", '{"model_type":"nomic_bert","rope_theta":500,"head_dim":64,'
                                             '"hidden_act":"swish"}')
    put("config", "edge_jina_rope_scaling", '{"model_type":"jina_embeddings_v3","rope_scaling":{"type":"yarn"}}')
    put("config", "edge_rope_odd_head", '{"model_type":"gte","hidden_size":30,"num_attention_heads":2,'
                                        '"rope_parameters":{"rope_theta":-1}}')
    # ModernBERT: layer_types / global_attn_every_n_layers, local_attention (even), rope_parameters
    # per layer kind and the legacy global_rope_theta / local_rope_theta, norm_eps, the head's options
    put("config", "edge_modernbert", json.dumps({"model_type": "modernbert", "hidden_size": 64, "num_hidden_layers": 3,
                                                 "num_attention_heads": 4, "intermediate_size": 96,
                                                 "layer_types": ["full_attention", "sliding_attention",
                                                                 "sliding_attention"],
                                                 "local_attention": 16, "norm_eps": 1e-5,
                                                 "rope_parameters": {"full_attention": {"rope_type": "default",
                                                                                        "rope_theta": 160000.0},
                                                                     "sliding_attention": {"rope_type": "default",
                                                                                           "rope_theta": 10000.0}},
                                                 "classifier_pooling": "mean", "classifier_activation": "gelu",
                                                 "hidden_activation": "gelu"}, indent=2))
    put("config", "edge_modernbert_legacy", '{"model_type":"modernbert","global_attn_every_n_layers":2,'
                                            '"global_rope_theta":80000,"local_rope_theta":5000,"num_hidden_layers":4}')
    put("config", "edge_modernbert_odd_window", '{"model_type":"modernbert","local_attention":15}')
    put("config", "edge_modernbert_layer_types", '{"model_type":"modernbert","num_hidden_layers":2,'
                                                 '"layer_types":["full_attention","chunked_attention"]}')
    put("config", "edge_modernbert_bias", '{"model_type":"modernbert","attention_bias":true}')
    # DeBERTa-v2/v3: relative_attention, pos_att_type as a list or a "|" string, share_att_key,
    # position_buckets / max_relative_positions, norm_rel_ebd, position_biased_input, the pooler's
    # fields, the refused conv / embedding_size / attention_head_size
    put("config", "edge_deberta_v3", json.dumps({"model_type": "deberta-v2", "hidden_size": 64, "num_hidden_layers": 2,
                                                 "num_attention_heads": 4, "intermediate_size": 96,
                                                 "relative_attention": True, "pos_att_type": ["p2c", "c2p"],
                                                 "share_att_key": True, "position_buckets": 256,
                                                 "max_relative_positions": -1, "norm_rel_ebd": "layer_norm",
                                                 "position_biased_input": False, "type_vocab_size": 0,
                                                 "pooler_hidden_size": 64, "pooler_hidden_act": "gelu",
                                                 "layer_norm_eps": 1e-7}, indent=2))
    put("config", "edge_deberta_bar_string", '{"model_type":"deberta-v2","relative_attention":true,'
                                             '"pos_att_type":"P2C | c2p","share_att_key":false,"position_buckets":-1,'
                                             '"max_relative_positions":48,"norm_rel_ebd":"none|layer_norm"}')
    put("config", "edge_deberta_buckets", '{"model_type":"deberta-v2","relative_attention":true,"position_buckets":1}')
    put("config", "edge_deberta_span", '{"model_type":"deberta-v2","relative_attention":true,"position_buckets":600,'
                                       '"max_relative_positions":300}')
    put("config", "edge_deberta_conv", '{"model_type":"deberta-v2","conv_kernel_size":3,"conv_act":"gelu"}')
    put("config", "edge_deberta_pooler", '{"model_type":"deberta-v2","pooler_hidden_size":17,"pooler_hidden_act":"swish"}')
    put("config", "edge_deberta_types", '{"model_type":"deberta-v2","pos_att_type":[1],"embedding_size":128,'
                                        '"attention_head_size":32}')
    put("config", "edge_id2label_sparse",
        text.replace('"id2label": {', '"id2label": {"7": "X", ', 1))


# ---- tokenizer files -----------------------------------------------------------------------

def pb_varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def pb_field(num, wt, payload):
    key = pb_varint(num << 3 | wt)
    if wt == 0:
        return key + pb_varint(payload)
    if wt == 5:
        return key + payload
    return key + pb_varint(len(payload)) + payload


def spm_model(pieces, dummy=True, model_type=1, charsmap=None, extra_norm=b""):
    """pieces: (text, score, type); a sentencepiece ModelProto."""
    out = b""
    for s, score, typ in pieces:
        p = pb_field(1, 2, s.encode()) + pb_field(2, 5, struct.pack("<f", score))
        if typ != 1:
            p += pb_field(3, 0, typ)
        out += pb_field(1, 2, p)
    out += pb_field(2, 2, pb_field(3, 0, model_type) + pb_field(4, 0, len(pieces)))
    norm = pb_field(1, 2, b"nmt_nfkc") + pb_field(3, 0, 1 if dummy else 0) + extra_norm
    if charsmap is not None:
        norm += pb_field(2, 2, charsmap)
    out += pb_field(3, 2, norm)
    return out


def spm_pieces_of(model):
    """(piece, score, type) of a ModelProto (pieces only; a minimal reader)."""
    def varint(b, i):
        v = s = 0
        while True:
            c = b[i]
            i += 1
            v |= (c & 0x7F) << s
            s += 7
            if not c & 0x80:
                return v, i

    out, i = [], 0
    while i < len(model):
        key, i = varint(model, i)
        f, wt = key >> 3, key & 7
        if wt == 0:
            _, i = varint(model, i)
            continue
        if wt == 5:
            i += 4
            continue
        if wt == 1:
            i += 8
            continue
        n, i = varint(model, i)
        body, i = model[i:i + n], i + n
        if f != 1:
            continue
        j, piece, score, typ = 0, b"", 0.0, 1
        while j < len(body):
            k, j = varint(body, j)
            ff, ww = k >> 3, k & 7
            if ww == 2:
                m, j = varint(body, j)
                if ff == 1:
                    piece = body[j:j + m]
                j += m
            elif ww == 5:
                if ff == 2:
                    score = struct.unpack("<f", body[j:j + 4])[0]
                j += 4
            else:
                v, j = varint(body, j)
                if ff == 3:
                    typ = v
        out.append((piece.decode(), score, typ))
    return out


SMALL_PIECES = [("<unk>", 0.0, 2), ("<s>", 0.0, 3), ("</s>", 0.0, 3), ("\u2581", -2.0, 1),
                ("\u2581the", -3.0, 1), ("\u2581a", -3.5, 1), ("s", -4.0, 1), ("t", -4.5, 1),
                ("he", -5.0, 1), ("\u2581hello", -6.0, 1), ("\u2581world", -6.5, 1),
                ("\u2581w", -7.0, 1), ("o", -7.5, 1), ("r", -8.0, 1), ("l", -8.5, 1),
                ("d", -9.0, 1), ("\u00e9", -9.5, 1), ("\u6771", -10.0, 1), ("<sep>", 0.0, 4),
                ("\u2581unused", 0.0, 5), (",", -11.0, 1), (".", -11.5, 1)]


def gpt2_char(b):
    """The GPT-2 byte alphabet: the character byte b is written as."""
    printable = list(range(33, 127)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    if b in printable:
        return chr(b)
    return chr(256 + [x for x in range(256) if x not in printable].index(b))


def seeds_bpe():
    """Byte-level BPE tokenizer.json seeds: a small hand-made model in RoBERTa's layout, one
    with the other options (pair merges, prefix space, normalizers, template, prefix/suffix,
    ignore_merges, fuse_unk with missing bytes), and the test tokenizer trained on SST-2
    (tests/data/bpe, project-made)."""
    alphabet = [gpt2_char(b) for b in range(256)]
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    merges = [("\u0120", "t"), ("h", "e"), ("\u0120t", "he"), ("i", "n"), ("\u0120", "a"),
              ("o", "u"), ("\u0120a", "n"), ("in", "g"), ("\u0120", "\u0120"), ("\u010a", "\u010a")]
    vocab = {t: i for i, t in enumerate(specials + alphabet)}
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    added = [{"id": vocab[t], "content": t, "single_word": False, "lstrip": t == "<mask>",
              "rstrip": False, "normalized": False, "special": True} for t in specials]
    rob = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
           "normalizer": None,
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                             "use_regex": True},
           "post_processor": {"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0],
                              "trim_offsets": True, "add_prefix_space": False},
           "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                       "use_regex": True},
           "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>",
                     "continuing_subword_prefix": None, "end_of_word_suffix": None,
                     "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                     "vocab": vocab, "merges": [a + " " + b for a, b in merges]}}
    put("tokenizer_json", "bpe_roberta", json.dumps(rob) + SEP.decode() +
        "the  thing <mask> an\n\n\n  ouing's I'll \U0001F600 \u4e2d\u6587 e\u0301 \x00\x7f</s>")
    # the other options: missing bytes (no 'z'), prefix and suffix, pair-form merges
    small = [c for c in alphabet if c != "z"]
    v2 = {t: i for i, t in enumerate(["<unk>", "<s>", "</s>"] + small)}
    for c in "hetn":
        v2.setdefault("##" + c, len(v2))
        v2.setdefault(c + "</w>", len(v2))
        v2.setdefault("##" + c + "</w>", len(v2))
    m2 = [["t", "##h"], ["th", "##e"], ["\u0120", "##t"]]
    for a, b in m2:
        v2.setdefault(a + b[2:], len(v2))
    opt = {"added_tokens": [{"id": 1, "content": "<s>", "single_word": False, "lstrip": False,
                             "rstrip": False, "normalized": False, "special": True},
                            {"id": 2, "content": "</s>", "single_word": False, "lstrip": False,
                             "rstrip": False, "normalized": False, "special": True},
                            {"id": len(v2), "content": "movie", "single_word": True, "lstrip": False,
                             "rstrip": True, "normalized": True, "special": False}],
           "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Lowercase"}]},
           "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
               {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                "use_regex": False}]},
           "post_processor": {"type": "Sequence", "processors": [
               {"type": "ByteLevel", "trim_offsets": True, "add_prefix_space": True,
                "use_regex": True},
               {"type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 1}},
                         {"Sequence": {"id": "B", "type_id": 1}}],
                "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]},
                                   "</s>": {"id": "</s>", "ids": [2], "tokens": ["</s>"]}}}]},
           "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                       "use_regex": True},
           "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": True, "ignore_merges": True,
                     "continuing_subword_prefix": "##", "end_of_word_suffix": "</w>",
                     "vocab": v2, "merges": m2}}
    put("tokenizer_json", "bpe_options", json.dumps(opt, indent=1) + SEP.decode() +
        "The zzz MOVIE movie! \u0130stanbul the\u00a0then")
    # issue 41: an unk_token missing from the vocabulary (`tokenizers` loads it and fails only
    # when a byte needs it), a ByteLevel add_prefix_space written "yes" (refused), an added
    # token holding \u0000 (refused), and 300 added tokens sharing prefixes (the trie)
    put("tokenizer_json", "bpe_unk_not_in_vocab", json.dumps(dict(rob, model=dict(rob["model"], unk_token="<nope>"))) +
        SEP.decode() + "the thing \x00 ouing")
    put("tokenizer_json", "bpe_prefix_space_yes",
        json.dumps(dict(rob, pre_tokenizer=dict(rob["pre_tokenizer"], add_prefix_space="yes"))) + SEP.decode() + "the")
    nul = [dict(a) for a in added] + [{"id": len(vocab), "content": "<x\u0000y>", "single_word": False,
                                       "lstrip": False, "rstrip": False, "normalized": False, "special": True}]
    put("tokenizer_json", "bpe_added_nul", json.dumps(dict(rob, added_tokens=nul)) + SEP.decode() + "<x")
    many = [dict(a) for a in added] + [
        {"id": len(vocab) + i, "content": "th%03d" % i if i % 3 else "The%02d" % (i % 100), "single_word": i % 7 == 0,
         "lstrip": i % 5 == 0, "rstrip": i % 11 == 0, "normalized": i % 2 == 0, "special": i % 4 == 0}
        for i in range(300)]
    put("tokenizer_json", "bpe_many_added", json.dumps(dict(rob, added_tokens=many)) + SEP.decode() +
        "th001 th002th003 The07 the th 7 th299x th29 " * 4)
    put("tokenizer_json", "bpe_sst2_trained",
        rd(ROOT, "tests", "data", "bpe", "tokenizer.json") + SEP + "Hello <mask>!  it's a 'great' film\n\n".encode())


# ---- sentence-transformers folders (fuzz_st_folder) -------------------------------------------

def seeds_st_folder():
    """modules.json, 1_Pooling/config.json, 2_Dense/config.json [, Dense weight [1][1]] for a
    transformer 4 wide: a good folder and the broken ones of issue 41."""
    def mods(pool=None, pool_type="sentence_transformers.models.Pooling", extra=()):
        m = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
             dict({"idx": 1, "name": "1", "type": pool_type}, **({} if pool is None else {"path": pool})),
             {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"}]
        return json.dumps(m + list(extra), indent=2)
    pool = json.dumps({"word_embedding_dimension": 4, "pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False})
    dense = json.dumps({"in_features": 4, "out_features": 2, "bias": True,
                        "activation_function": "torch.nn.modules.activation.Tanh"})
    norm = [{"idx": 3, "name": "3", "path": "3_Normalize", "type": "sentence_transformers.models.Normalize"}]

    def folder(name, m, p=pool, d=dense, w=None):
        data = m.encode() + SEP + p.encode() + SEP + d.encode()
        if w is not None:
            data += SEP + struct.pack("<f", w)
        put("st_folder", name, data)
    folder("good", mods("1_Pooling", extra=norm))
    folder("pooling_no_path", mods(None))
    folder("pooling_path_nul", mods("1_Pooling\u0000junk"))
    folder("pooling_type_nul", mods("1_Pooling", "sentence_transformers.models.Pooling\u0000x"))
    folder("path_dotdot", mods("x/../1_Pooling"))
    folder("pooling_empty", mods("1_Pooling"), p="{}")
    folder("pooling_all_false", mods("1_Pooling"), p=json.dumps({
        "word_embedding_dimension": 4, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": False,
        "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False}))
    folder("pooling_mode_null", mods("1_Pooling"), p=json.dumps({"embedding_dimension": 4, "pooling_mode": None}))
    folder("pooling_mode_empty_list", mods("1_Pooling"), p=json.dumps({"embedding_dimension": 4, "pooling_mode": []}))
    folder("pooling_modes", mods("1_Pooling"), p=json.dumps({"embedding_dimension": 4, "pooling_mode": ["cls", "max"]}),
           d=json.dumps({"in_features": 8, "out_features": 2, "activation_function": "torch.nn.modules.linear.Identity"}))
    folder("dense_nan", mods("1_Pooling"), w=float("nan"))
    folder("dense_inf", mods("1_Pooling"), w=float("-inf"))
    folder("no_modules", "", p=json.dumps({"embedding_dimension": 4, "pooling_mode": "lasttoken"}))


# A small WordPiece vocabulary for the tokenizer.json seeds (written here).
SMALL_WP_VOCAB = "\n".join([
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "you", "o", "w", "x", "##y",
    "##s", "un", "##aff", "##able", ",", "!", ".", "?", "a", "the", "caf", "##e", "##\u00e9",
    "\u6771", "\u4eac", "##ing", "play", "film", "good"]) + "\n"


def seeds_tokenizers():
    if EXTRA is not None:
        put("vocab_txt", "golden_bert_e2e", rd(GOLD, "models", "bert_e2e", "vocab.txt") + SEP +
            b"Hello, world! [CLS] unaffable", shared=True)
    bert_vocab = SMALL_WP_VOCAB.encode()
    put("vocab_txt", "model_sst2", rd(ROOT, "models", "sst2-bert-mini", "vocab.txt") + SEP +
        b"a gripping, funny film")
    put("vocab_txt", "crlf_dups", b"[UNK]\r\n[CLS]\r\n[SEP]\r\nhello\rworld\n##s\nhello\n##\n"
        + SEP + b"\x01hellos worlds")
    put("vocab_txt", "no_unk", b"a\nb\n" + SEP + b"ab")
    put("vocab_txt", "unicode", "[UNK]\n\u6771\n\u4eac\ncaf\u00e9\n##\u00e9\n\u0130\n".encode() +
        SEP + "\x1fCAF\u00c9 \u6771\u4eac \u0130stanbul".encode())

    # tokenizer.json: WordPiece from the golden BERT vocabulary, template post-processor
    vocab = {t: i for i, t in enumerate(bert_vocab.decode().splitlines())}
    specials = [t for t in vocab if t.startswith("[") and t.endswith("]")]
    wp = {"version": "1.0", "truncation": None, "padding": None,
          "added_tokens": [{"id": vocab[t], "content": t, "single_word": False, "lstrip": False,
                            "rstrip": False, "normalized": False, "special": True}
                           for t in specials],
          "normalizer": {"type": "BertNormalizer", "clean_text": True,
                         "handle_chinese_chars": True, "strip_accents": None, "lowercase": True},
          "pre_tokenizer": {"type": "BertPreTokenizer"},
          "post_processor": {"type": "TemplateProcessing",
                             "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                                        {"Sequence": {"id": "A", "type_id": 0}},
                                        {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
                             "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}},
                                      {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
                                      {"Sequence": {"id": "B", "type_id": 1}},
                                      {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
                             "special_tokens": {
                                 "[CLS]": {"id": "[CLS]", "ids": [vocab["[CLS]"]],
                                           "tokens": ["[CLS]"]},
                                 "[SEP]": {"id": "[SEP]", "ids": [vocab["[SEP]"]],
                                           "tokens": ["[SEP]"]}}},
          "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
          "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                    "max_input_chars_per_word": 100, "vocab": vocab}}
    put("tokenizer_json", "wordpiece_template", json.dumps(wp) + SEP.decode() + "Hello [MASK] you!")
    wp2 = dict(wp)
    wp2["post_processor"] = {"type": "BertProcessing", "sep": ["[SEP]", vocab["[SEP]"]],
                             "cls": ["[CLS]", vocab["[CLS]"]]}
    wp2["added_tokens"] = wp["added_tokens"] + [
        {"id": len(vocab), "content": "o w", "single_word": True, "lstrip": False,
         "rstrip": False, "normalized": False, "special": False},
        {"id": len(vocab) + 1, "content": "<new>", "single_word": False, "lstrip": True,
         "rstrip": True, "normalized": False, "special": True}]
    wp2["padding"] = {"pad_id": vocab["[PAD]"], "pad_token": "[PAD]"}
    wp2["truncation"] = {"max_length": 16}
    put("tokenizer_json", "wordpiece_bert_processing_added", json.dumps(wp2, indent=1) +
        SEP.decode() + "hello o w world<new> x o wy")
    pieces = SMALL_PIECES
    if EXTRA is not None:
        pieces = spm_pieces_of(rd(GOLD, "models", "xlmr_e2e", "sentencepiece.bpe.model"))
    ug = {"version": "1.0", "added_tokens": [
              {"id": 0, "content": "<s>", "special": True}, {"id": 1, "content": "<pad>", "special": True},
              {"id": 2, "content": "</s>", "special": True}, {"id": 3, "content": "<unk>", "special": True},
              {"id": len(pieces) + 1, "content": "<mask>", "lstrip": True, "special": True}],
          "normalizer": {"type": "Sequence", "normalizers": [
              {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]},
          "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581",
                            "add_prefix_space": True},
          "post_processor": {"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0],
                             "trim_offsets": True, "add_prefix_space": True},
          "model": {"type": "Unigram", "unk_id": 3,
                    "vocab": [["<s>", 0.0], ["<pad>", 0.0], ["</s>", 0.0], ["<unk>", 0.0]] +
                    [[p, s] for p, s, _ in pieces[3:]] + [["<mask>", 0.0]]}}
    put("tokenizer_json", "unigram_roberta", json.dumps(ug) + SEP.decode() + "Hello  world <mask>!",
        shared=EXTRA is not None)
    small_ug = {"model": {"type": "Unigram", "unk_id": 0,
                          "vocab": [[p, s] for p, s, _ in SMALL_PIECES]},
                "normalizer": {"type": "Precompiled", "precompiled_charsmap": None},
                "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                    {"type": "WhitespaceSplit"},
                    {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always"}]},
                "post_processor": None, "added_tokens": []}
    put("tokenizer_json", "unigram_small", json.dumps(small_ug) + SEP.decode() + "the hello world")
    put("tokenizer_json", "bpe_empty_vocab", '{"model":{"type":"BPE","vocab":{},"merges":[]}}')
    seeds_bpe()

    # sentencepiece models
    put("spm", "small", spm_model(SMALL_PIECES) + SEP + "hello world, \u6771 caf\u00e9".encode())
    put("spm", "small_no_dummy", spm_model(SMALL_PIECES, dummy=False,
                                           extra_norm=pb_field(4, 0, 0) + pb_field(5, 0, 0)))
    put("spm", "golden_pieces_no_charsmap", spm_model(pieces) + SEP + b"Hello  world", shared=True)
    put("spm", "bpe_type", spm_model(SMALL_PIECES[:5], model_type=2))
    put("spm", "two_unknown", spm_model(SMALL_PIECES[:3] + [("<unk2>", 0.0, 2)]))

    # side files of a model folder: config \n#####\n map \n#####\n added \n#####\n text
    def side(cfg, smap, added, text):
        return SEP.join(x if isinstance(x, bytes) else x.encode() for x in (cfg, smap, added, text))
    if EXTRA is not None:
        for m, text in (("bert_e2e", "Hello [MASK]!"), ("xlmr_e2e", "Hello <mask>!")):
            put("tok_config", m, side(rd(GOLD, "models", m, "tokenizer_config.json"),
                                      rd(GOLD, "models", m, "special_tokens_map.json"), b"", text), shared=True)
    bcfg = rd(ROOT, "models", "sst2-bert-mini", "tokenizer_config.json")
    bmap = rd(ROOT, "models", "sst2-bert-mini", "special_tokens_map.json")
    put("tok_config", "xnli", side(rd(ROOT, "models", "xnli-xlmr-mini", "tokenizer_config.json"),
                                   rd(ROOT, "models", "xnli-xlmr-mini", "special_tokens_map.json"),
                                   b"", "Hello <mask>!"))
    put("tok_config", "sst2", side(rd(ROOT, "models", "sst2-bert-mini", "tokenizer_config.json"),
                                   rd(ROOT, "models", "sst2-bert-mini", "special_tokens_map.json"),
                                   b"", "x"))
    put("tok_config", "added_tokens_json", side(bcfg, bmap, '{"<new>": 1000, "hello": 1001}', "a<new>b"))
    put("tok_config", "decoder_and_extra", side(json.dumps({
        "do_lower_case": False, "model_max_length": 1e30,
        "additional_special_tokens": ["<x>", {"content": "<y>", "lstrip": True}],
        "added_tokens_decoder": {"1000": {"content": "[NEW]", "lstrip": False, "rstrip": True,
                                          "single_word": True, "special": True},
                                 "3": {"content": "[PAD]", "special": True}}}),
        json.dumps({"unk_token": {"content": "[UNK]", "single_word": False}}), b"", "a [NEW] b<x>"))
    put("tok_config", "null_roles", side('{"mask_token": null, "cls_token": null}', b"{}", b"", "x"))


def seeds_quant():
    cfg = {"quant_method": "bert8-smoothquant", "version": 1, "scheme": "static",
           "weights": "int8, symmetric, per output channel (weight_scale)",
           "activations": "int8, symmetric, per tensor (input_scale, calibrated)",
           "calibration_samples": 2, "keep_fp32": "",
           "alpha_per_layer": [{"qkv": 0.5, "attention_output": 0.5, "ffn_in": 0.5,
                                "ffn_out": 0.5}] * 2}
    put("quant", "static", json.dumps(cfg, indent="\t"))
    d = dict(cfg, scheme="dynamic")
    put("quant", "dynamic_mismatch", json.dumps(d))
    put("quant", "no_version", json.dumps({k: v for k, v in cfg.items() if k != "version"}))
    put("quant", "version_2", json.dumps(dict(cfg, version=2)))
    put("quant", "no_config", b"" + SEP + struct.pack("<H", 0) + struct.pack("<f", 1e-30))
    patch = b"".join(struct.pack("<H", i * 37) + struct.pack("<f", v) for i, v in
                     enumerate([0.0, -1.0, float("inf"), float("nan"), 1e38, 1e-38, 3.4e38]))
    put("quant", "static_bad_scales", json.dumps(cfg).encode() + SEP + patch)
    put("quant", "static_tiny_scales", json.dumps(cfg).encode() + SEP +
        b"".join(struct.pack("<H", i) + struct.pack("<f", 1e-37) for i in range(0, 400, 3)))
    # issue 41: configs that contradict the folder's tensors. The harness's folder is static
    # (FFN-in and FFN-out per token, INT8 attention) or, with FUZZ_QUANT_DYNAMIC, dynamic
    # (outlier channels): each seed names the layers as its folder holds them.
    def v5(scheme, modes, attention="int8", **kw):
        layers = [dict({g: {"mode": m, "alpha": 0.5} for g, m in zip(
            ("qkv", "attention_output", "ffn_in", "ffn_out"), modes)}, attention=attention)] * 2
        return json.dumps(dict({"quant_method": "bert8-smoothquant", "version": 5, "scheme": scheme,
                                "calibration_samples": 1, "keep_fp32": "", "attention": attention,
                                "embeddings": "fp32", "weight_bits": 8, "layers": layers}, **kw), indent="\t")
    static_modes = ("int8_static", "int8_static", "int8_dynamic", "int8_dynamic")
    dynamic_modes = ("int8_dynamic",) * 4
    put("quant", "v5_static", v5("static", static_modes))
    put("quant", "v5_static_said_dynamic", v5("dynamic", static_modes))
    put("quant", "v5_static_said_version_1", v5("static", static_modes, version=1))
    put("quant", "v5_static_per_token_with_input_scale", v5("static", ("int8_static", "int8_dynamic") + static_modes[2:]))
    put("quant", "v5_dynamic", v5("dynamic", dynamic_modes))
    put("quant", "v5_dynamic_said_static", v5("static", dynamic_modes))
    put("quant", "v5_dynamic_said_version_4", v5("dynamic", dynamic_modes, version=4))
    put("quant", "v5_lora_task_nul", v5("static", static_modes, lora_task="a\u0000b"))


# Texts for the encode and text_io seeds (written here): plain, cased, accented, CJK, emoji,
# control characters, long words, pairs.
TEXTS = [("Hello, world! How are you?", None),
         ("The quick brown fox jumps over the lazy dog.", "A fast fox leaps."),
         ("Caf\u00e9 cr\u00e8me br\u00fbl\u00e9e, na\u00efve fa\u00e7ade", None),
         ("\u6771\u4eac\u306f\u65e5\u672c\u306e\u9996\u90fd\u3067\u3059\u3002", "Tokyo is the capital."),
         ("unaffable unbelievably antidisestablishmentarianism", None),
         ("Emoji \U0001F600 and symbols \u2603 \u20ac100", "tab\tand\u00a0nbsp"),
         ("\u0130stanbul \u00df STRASSE \u03a3\u03bf\u03c6\u03af\u03b1", None),
         ("What is the answer?", "The answer is 42, said the computer after 7.5 million years."),
         ("  leading and   repeated   spaces  ", None),
         ("\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645", "\u041f\u0440\u0438\u0432\u0435\u0442 \u043c\u0438\u0440")]


def seeds_encode():
    texts = TEXTS
    k = 0
    for tok in range(4):
        for flags, trunc, maxlen, stride, mult in ((1, 0, 0, 0, 0), (1 | 2, 2, 12, 3, 0),
                                                  (1 | 8, 1, 16, 0, 8), (1 | 2 | 8, 3, 14, 2, 0),
                                                  (4 | 8 | 16, 1, 20, 0, 0), (1 | 2 | 16, 1, 9, 4, 4)):
            a, b = texts[k % len(texts)]
            k += 1
            b = b or texts[(k * 7) % len(texts)][0]
            data = bytes([tok, flags, trunc, maxlen, stride, mult]) + a.encode() + SEP + b.encode()
            put("encode", "t%d_f%d_%d" % (tok, flags, k), data)
    put("encode", "invalid_utf8", bytes([0, 1, 0, 0, 0, 0]) + b"ab\xff\xfe cd")
    put("encode", "specials", bytes([3, 1 | 8, 0, 0, 0, 0]) + b"[CLS]x[MASK] o w<r>  \xc3\xa9t\xc3\xa9" + SEP + b"o w")


def seeds_text_io():
    lines = [json.dumps({"text": a, "text_pair": b} if b else {"text": a}).encode() for a, b in TEXTS]
    put("text_io", "jsonl", bytes([63]) + b"\n".join(lines))
    put("text_io", "crlf_nul_bad", bytes([10]) + b"a\r\nb\x00c\r\n\xff\xfe\n\xe2\x82\n" +
        b"x" * 300 + b"\n\xf0\x9f\x98\x80\xed\xa0\x80")
    put("text_io", "empty_lines", bytes([0]) + b"\n\n\r\n")


# The harnesses whose seeds this script writes (jsonl and server_http seeds are hand-written).
GENERATED = ("safetensors", "st_header", "st_index", "config", "st_folder", "tok_config", "vocab_txt",
             "tokenizer_json", "spm", "quant", "encode", "text_io")


def main():
    root = EXTRA if EXTRA is not None else CORPUS
    for h in GENERATED:
        if os.path.isdir(os.path.join(root, h)):
            shutil.rmtree(os.path.join(root, h))
    seeds_safetensors()
    seeds_index()
    seeds_config()
    seeds_st_folder()
    seeds_tokenizers()
    seeds_quant()
    seeds_encode()
    seeds_text_io()
    total = 0
    for h in sorted(os.listdir(root)):
        files = os.listdir(os.path.join(root, h))
        size = sum(os.path.getsize(os.path.join(root, h, f)) for f in files)
        total += size
        print("%-16s %3d seeds %8d bytes" % (h, len(files), size))
    print("total %d bytes" % total)


if __name__ == "__main__":
    main()
