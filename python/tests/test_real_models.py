"""FP32 exactness on real pretrained checkpoints (models/real.tsv, docs/models.md): for every
model the manifest marks supported and `scripts/fetch-models.sh --path` finds in the cache,
bert8 against transformers (last_hidden_state; logits for classifiers) and sentence-transformers
(embeddings) on 200 STS-B dev sentences plus hostile and long texts, and bert8's token ids
against the HF tokenizer.

A model that is not fetched is skipped, unless BERT8_REAL_MODELS=required (as in CI), where
it fails: run `bash scripts/fetch-models.sh` first."""
from __future__ import annotations

import csv
import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

import bert8
from conftest import REPO, SHARED

MANIFEST = REPO / "models" / "real.tsv"
FETCH = REPO / "scripts" / "fetch-models.sh"
STSB = SHARED / "data" / "glue" / "STS-B.dev.tsv"
REQUIRED = os.environ.get("BERT8_REAL_MODELS", "") == "required"
# The hidden-state tolerance of tests/test_golden_models.c and test_model.py (1e-4), taken as a
# bound on the max absolute difference (rtol 0), for last_hidden_state and embeddings alike.
ATOL = 1e-4
BATCH = 32


def _manifest() -> list:
    with open(MANIFEST, encoding="utf-8") as f:
        lines = [line for line in f if line.strip() and not line.startswith("#")]
    rows = list(csv.DictReader(lines, delimiter="\t", quoting=csv.QUOTE_NONE))
    for r in rows:
        assert len(r) == 10 and None not in r.values(), f"{MANIFEST}: bad row {r}"
    return rows


SUPPORTED = [r for r in _manifest() if r["status"].split(":")[0] == "supported"]
ENCODERS = [r for r in SUPPORTED if r["kind"].startswith("sentence-encoder")]
CLASSIFIERS = [r for r in SUPPORTED if r["kind"] == "classifier"]


def _missing(why: str):
    if REQUIRED:
        pytest.fail(f"{why} (BERT8_REAL_MODELS=required)")
    pytest.skip(why)


def _folder(name: str) -> pathlib.Path:
    p = subprocess.run(["bash", str(FETCH), "--path", name], capture_output=True, text=True)
    if p.returncode != 0:
        _missing(f"real model {name} is not fetched: {p.stderr.strip()}")
    return pathlib.Path(p.stdout.strip())


def _max_length(folder: pathlib.Path) -> int:
    """sentence-transformers' max_seq_length (sentence_bert_config.json), else tokenizer_config.json's
    model_max_length where it is below the positions (categorium-topics-en: 100, the length it
    was trained at), else the positions. bert8's pipelines take their default from
    model_max_length, capped by sentence_bert_config.json's max_seq_length (256 for
    all-MiniLM-L6-v2, whose tokenizer says 512); the tests pass it explicitly as well."""
    sb = folder / "sentence_bert_config.json"
    if sb.exists():
        return int(json.loads(sb.read_text())["max_seq_length"])
    n = int(json.loads((folder / "config.json").read_text())["max_position_embeddings"])
    tc = folder / "tokenizer_config.json"
    if tc.exists():
        ml = json.loads(tc.read_text()).get("model_max_length")
        if isinstance(ml, (int, float)) and 0 < ml < n:
            return int(ml)
    return n


PARAGRAPH = " ".join(
    "Site reliability engineers watched the dashboards through the night while the storage cluster"
    " rebalanced its shards; latency rose, queues grew, and the on-call rota changed twice before"
    " dawn. By morning the incident review listed seventeen contributing factors, from an expired"
    " certificate to a misconfigured retry budget, and nobody could agree which one mattered most."
    .split() * 6)  # 318 words, well over 256 and 512 tokens, so truncation is exercised

HOSTILE = [
    "",
    " ",
    "\t\n",
    "naïve café — Zürich, São Paulo, Kraków; ½ ≠ 0.5 ™",
    "短い日本語の文と English mixed 한국어 문장 中文句子",
    "emoji 😀👍🏽👨‍👩‍👧 and zero\u200bwidth\u200djoiners",
    "e\u0301 combining accents: Ame\u0301lie, Cafe\u0301",
    "مرحبا بالعالم שלום עולם",
    "ALL CAPS AND lowercase, MiXeD; punctuation!!! ??? ... ---",
    "a " * 700,
    PARAGRAPH,
    "unbelievably unaffordable counterrevolutionaries antidisestablishmentarianism",
]


@pytest.fixture(scope="module")
def texts() -> list:
    if not STSB.exists():
        _missing(f"{STSB} is not there")
    with open(STSB, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    sts = [s for r in rows[:100] for s in (r["sentence1"], r["sentence2"])]
    assert len(sts) == 200
    return sts + HOSTILE


def _batches(n: int, lengths: list):
    """Index batches of BATCH texts, longest first (so padding stays small)."""
    order = sorted(range(n), key=lambda i: -lengths[i])
    for i in range(0, n, BATCH):
        yield order[i: i + BATCH]


def _padded(enc, pad_id: int):
    """(index batch, input_ids, attention_mask, token_type_ids) int64 [B, T], longest first."""
    lengths = [len(ids) for ids in enc["input_ids"]]
    for idx in _batches(len(lengths), lengths):
        T = max(lengths[i] for i in idx)
        ids = np.full((len(idx), T), pad_id, dtype=np.int64)
        mask = np.zeros_like(ids)
        types = np.zeros_like(ids)
        for b, i in enumerate(idx):
            ids[b, : lengths[i]] = enc["input_ids"][i]
            mask[b, : lengths[i]] = 1
            if "token_type_ids" in enc:
                types[b, : lengths[i]] = enc["token_type_ids"][i]
        yield idx, ids, mask, types


@pytest.fixture(scope="module")
def hf_tokenizers(transformers):
    cache: dict = {}

    def get(folder):
        if folder not in cache:
            cache[folder] = transformers.AutoTokenizer.from_pretrained(str(folder))
        return cache[folder]
    return get


@pytest.mark.parametrize("row", SUPPORTED, ids=[r["name"] for r in SUPPORTED])
def test_tokenizer_ids_match_hf(row, texts, hf_tokenizers):
    folder = _folder(row["name"])
    n = _max_length(folder)
    want = hf_tokenizers(folder)(texts, truncation=True, max_length=n)
    got = bert8.Tokenizer(folder)(texts, truncation=True, max_length=n)
    for key in ("input_ids", "attention_mask", "token_type_ids"):
        if key not in want:
            continue
        bad = [i for i in range(len(texts)) if list(got[key][i]) != list(want[key][i])]
        assert not bad, f"{row['name']}: {key} differ on {len(bad)} texts, first {texts[bad[0]][:80]!r}: " \
                        f"bert8 {list(got[key][bad[0]])[:20]} vs HF {list(want[key][bad[0]])[:20]}"
    assert max(len(ids) for ids in want["input_ids"]) == n, "no text reached the truncation length"


@pytest.mark.parametrize("row", SUPPORTED, ids=[r["name"] for r in SUPPORTED])
def test_last_hidden_state_matches_transformers(row, texts, torch, transformers, hf_tokenizers):
    folder = _folder(row["name"])
    n = _max_length(folder)
    tok = hf_tokenizers(folder)
    ref, loading = transformers.AutoModel.from_pretrained(str(folder), dtype=torch.float32, output_loading_info=True)
    ref.eval()
    # a weight the reference did not load would be random: then the comparison means nothing
    # (a masked-LM checkpoint has no pooler, which last_hidden_state does not use)
    missing = sorted(k for k in loading["missing_keys"] if not k.startswith("pooler."))
    assert not missing, f"{row['name']}: transformers did not load {missing}"
    model = bert8.Model(folder)
    enc = tok(texts, truncation=True, max_length=n)
    worst = 0.0
    for idx, ids, mask, types in _padded(enc, tok.pad_token_id):
        with torch.no_grad():
            want = ref(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask),
                       token_type_ids=torch.from_numpy(types)).last_hidden_state.numpy()
        got = model.forward(ids, mask, types)["last_hidden_state"]
        assert got.shape == want.shape and got.dtype == np.float32
        real = mask.astype(bool)
        err = float(np.max(np.abs(got[real] - want[real])))
        worst = max(worst, err)
        assert err <= ATOL, f"{row['name']}: last_hidden_state max |diff| {err:.3g} > {ATOL} on batch {idx[:4]}..."
    print(f"\n{row['name']}: last_hidden_state max |bert8 - transformers| = {worst:.3g} ({len(texts)} texts)")


@pytest.mark.parametrize("row", CLASSIFIERS, ids=[r["name"] for r in CLASSIFIERS])
def test_logits_match_transformers(row, texts, torch, transformers, hf_tokenizers):
    """Sequence classifiers: logits from bert8.Model.forward (padded batches) and from
    bert8.Pipeline.scores (its own tokenization, packed batches) against
    AutoModelForSequenceClassification, and the labels from config.json's id2label."""
    folder = _folder(row["name"])
    n = _max_length(folder)
    tok = hf_tokenizers(folder)
    ref, loading = transformers.AutoModelForSequenceClassification.from_pretrained(
        str(folder), dtype=torch.float32, output_loading_info=True)
    ref.eval()
    assert not loading["missing_keys"] and not loading["unexpected_keys"], \
        f"{row['name']}: transformers loading: {loading}"
    model = bert8.Model(folder)
    labels = [ref.config.id2label[i] for i in range(ref.config.num_labels)]
    assert list(model.info["labels"]) == labels
    enc = tok(texts, truncation=True, max_length=n)
    want = np.zeros((len(texts), len(labels)), dtype=np.float32)
    worst = 0.0
    for idx, ids, mask, types in _padded(enc, tok.pad_token_id):
        with torch.no_grad():
            w = ref(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask),
                    token_type_ids=torch.from_numpy(types)).logits.numpy()
        got = model.forward(ids, mask, types)["logits"]
        assert got.shape == w.shape and got.dtype == np.float32
        err = float(np.max(np.abs(got - w)))
        worst = max(worst, err)
        assert err <= ATOL, f"{row['name']}: logits max |diff| {err:.3g} > {ATOL} on batch {idx[:4]}..."
        want[idx] = w
    # the pipeline: bert8's tokenizer, truncation at model_max_length by default, packed batches
    pipe = bert8.Pipeline(folder)
    got = pipe.scores(texts, function_to_apply="none")
    assert got.shape == want.shape and got.dtype == np.float32
    err_pipe = np.max(np.abs(got - want), axis=1)
    bad = int(np.argmax(err_pipe))
    assert err_pipe[bad] <= ATOL, f"{row['name']}: Pipeline.scores max |diff| {err_pipe[bad]:.3g} on {texts[bad][:80]!r}"
    # the top label, wherever transformers' top two logits are further apart than the tolerance
    top = [r["label"] for r in pipe.classify(texts)]
    two = np.sort(want, axis=1)[:, -2:]
    clear = [i for i in range(len(texts)) if two[i, 1] - two[i, 0] > 2 * ATOL]
    assert len(clear) > len(texts) // 2
    assert [top[i] for i in clear] == [labels[int(np.argmax(want[i]))] for i in clear]
    print(f"\n{row['name']}: logits max |bert8 - transformers| = {worst:.3g} (Model.forward), "
          f"{err_pipe[bad]:.3g} (Pipeline.scores) ({len(texts)} texts)")


@pytest.mark.parametrize("row", ENCODERS, ids=[r["name"] for r in ENCODERS])
def test_sentence_embeddings_match_sentence_transformers(row, texts):
    folder = _folder(row["name"])
    try:
        import sentence_transformers
    except ImportError:
        _missing("sentence-transformers is not installed")
    st = sentence_transformers.SentenceTransformer(str(folder), device="cpu")
    n = _max_length(folder)
    assert st.max_seq_length == n
    # the empty text: sentence-transformers embeds [CLS] [SEP]; bert8 refuses it by name, as TEI
    # does ("`inputs` cannot be empty"), so it is compared on the others
    with pytest.raises(bert8.Error, match="text 0 is empty"):
        bert8.Pipeline(folder, max_length=n).embed([""])
    texts = [t for t in texts if t]
    want = st.encode(texts, batch_size=BATCH, convert_to_numpy=True)
    # bert8's pooling and normalisation come from the folder (1_Pooling, modules.json); the
    # truncation length is passed explicitly (see _max_length)
    pipe = bert8.Pipeline(folder, max_length=n)
    got = pipe.embed(texts)
    assert got.shape == want.shape and got.dtype == np.float32
    err = np.max(np.abs(got - want), axis=1)
    worst = int(np.argmax(err))
    assert err[worst] <= ATOL, f"{row['name']}: embedding max |diff| {err[worst]:.3g} > {ATOL} on {texts[worst][:80]!r}"
    # SentenceEncoder as a user opens it (no length given) truncates where sentence-transformers
    # does: bert8 reads sentence_bert_config.json's max_seq_length
    encoder = bert8.SentenceEncoder(folder)
    # not bit for bit: the two batch the texts differently, and on an AVX2 CPU oneDNN's FP32
    # blocking follows the row count (~1e-8 apart); another truncation would differ by far more
    np.testing.assert_allclose(encoder.encode(texts, batch_size=BATCH), got, rtol=0, atol=1e-6)
    print(f"\n{row['name']}: embedding max |bert8 - sentence-transformers| = {err[worst]:.3g} ({len(texts)} texts)")


def test_manifest_is_well_formed():
    rows = _manifest()
    names = [r["name"] for r in rows]
    assert len(set(names)) == len(names), "duplicate names"
    for r in rows:
        pkgs, shas = r["package"].split("+"), r["wheel_sha256"].split(",")
        assert len(pkgs) == len(shas), r["name"]
        assert all("==" in p for p in pkgs), r["name"]
        assert all(":" not in p or p.startswith("sdist:") for p in pkgs), r["name"]
        if r["inner"].startswith("tf-h5:"):
            assert len(pkgs) == 1 and "!" in r["inner"] and "h5=" in r["inner"], r["name"]
        for s in shas + [r["weights_sha256"]]:
            assert len(s) == 64 and all(c in "0123456789abcdef" for c in s), (r["name"], s)
        assert r["status"] == "supported" or r["status"].startswith(("supported: ", "unsupported: ")), r["name"]


MASKED_LMS = [r for r in SUPPORTED if r["kind"].startswith("masked-lm")]
FILL_TEXTS = ["The capital of France is [MASK].", "I [MASK] this movie, it was [MASK] good.",
              "[MASK]", "Paris is the [MASK] of France and a city of [MASK] million people."]


@pytest.mark.parametrize("row", MASKED_LMS, ids=[r["name"] for r in MASKED_LMS])
def test_fill_mask_matches_transformers(row, transformers):
    """`bert8 fill-mask` against transformers' fill-mask pipeline on a real masked LM: the
    same top-10 tokens, token strings and sequences, scores within 1e-5."""
    from conftest import CLI
    folder = _folder(row["name"])
    if not CLI.exists():
        pytest.skip(f"{CLI} is not built")
    pipe = transformers.pipeline("fill-mask", model=str(folder), top_k=10)
    r = subprocess.run([str(CLI), "fill-mask", str(folder), "--top-k", "10"], capture_output=True, check=False,
                       input="".join(json.dumps({"text": t}) + "\n" for t in FILL_TEXTS).encode())
    assert r.returncode == 0, r.stderr.decode()
    got = [json.loads(line)["predictions"] for line in r.stdout.decode().splitlines()]
    for text, g in zip(FILL_TEXTS, got):
        want = pipe(text)
        if want and isinstance(want[0], dict):
            g, want = [g], [want]
        for gm, wm in zip(g, want):
            assert [(p["token"], p["token_str"], p["sequence"]) for p in gm] == \
                [(p["token"], p["token_str"], p["sequence"]) for p in wm], text
            np.testing.assert_allclose([p["score"] for p in gm], [p["score"] for p in wm], atol=1e-5, rtol=0)


def _splade_cli(folder, texts) -> list:
    from conftest import CLI
    if not CLI.exists():
        pytest.skip(f"{CLI} is not built")
    r = subprocess.run([str(CLI), "embed", str(folder), "--pooling", "splade", "--max-length", "512"],
                       input="".join(json.dumps({"text": t}) + "\n" for t in texts).encode(),
                       capture_output=True, check=False)
    assert r.returncode == 0, r.stderr.decode()
    return [json.loads(line)["embedding"] for line in r.stdout.decode().splitlines()]


def _dense(entries, V: int) -> np.ndarray:
    v = np.zeros(V, dtype=np.float32)
    for e in entries:
        v[e["index"]] = e["value"]
    return v


@pytest.mark.parametrize("row", MASKED_LMS, ids=[r["name"] for r in MASKED_LMS])
def test_splade_matches_transformers(row, texts, torch, transformers, hf_tokenizers, tmp_path):
    """`bert8 embed --pooling splade` against SPLADE computed with transformers (the masked-LM
    logits, log(1 + relu), the max over real tokens): every weight within 1e-4; then the default
    INT8 model keeps >= 95% of each text's top-32 terms."""
    folder = _folder(row["name"])
    tok = hf_tokenizers(folder)
    model = transformers.AutoModelForMaskedLM.from_pretrained(str(folder)).eval()
    sample = [t for t in texts[:120] + texts[-len(HOSTILE):] if t]  # "" is refused (test above)
    enc = tok(sample, truncation=True, max_length=512)
    want = [None] * len(sample)
    with torch.no_grad():
        for idx, ids, mask, types in _padded(enc, tok.pad_token_id):
            lg = model(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask),
                       token_type_ids=torch.tensor(types)).logits
            w = torch.log1p(torch.relu(lg)) * torch.tensor(mask)[..., None]
            for b, i in enumerate(idx):
                want[i] = w[b].max(0).values.numpy()
    V = want[0].shape[0]
    got = _splade_cli(folder, sample)
    err = max(float(np.abs(_dense(g, V) - w).max()) for g, w in zip(got, want))
    assert err <= ATOL, f"{row['name']}: SPLADE max |bert8 - transformers| = {err:.3g}"
    assert all(all(e["value"] > 0 for e in g) for g in got)
    # INT8 (the defaults) against FP32: the top-32 terms of each text
    from conftest import CLI
    calib = tmp_path / "calib.txt"
    calib.write_text("\n".join(texts[:200]) + "\n")
    q = tmp_path / "int8"
    subprocess.run([str(CLI), "quantize", str(folder), "-o", str(q), "--calib", str(calib)], check=True,
                   capture_output=True)
    gq = _splade_cli(q, sample)
    overlaps = []
    for a, b in zip(got, gq):
        ta = {e["index"] for e in sorted(a, key=lambda e: -e["value"])[:32]}
        tb = {e["index"] for e in sorted(b, key=lambda e: -e["value"])[:32]}
        overlaps.append(len(ta & tb) / max(1, len(ta)))
    mean = float(np.mean(overlaps))
    print(f"\n{row['name']}: SPLADE max err {err:.3g}; INT8 top-32 overlap mean {mean:.4f} min {min(overlaps):.3f}")
    assert mean >= 0.95, f"{row['name']}: INT8 keeps {mean:.1%} of the top-32 SPLADE terms"


@pytest.mark.parametrize("row", MASKED_LMS, ids=[r["name"] for r in MASKED_LMS])
def test_fill_mask_and_splade_through_python(row, transformers):
    """bert8.Pipeline.fill_mask and .embed_sparse give what the CLI gives (which the tests above
    hold against transformers)."""
    folder = _folder(row["name"])
    p = bert8.Pipeline(folder)
    assert bert8.Model(folder).info["has_mlm_head"]
    pipe = transformers.pipeline("fill-mask", model=str(folder), top_k=4)
    for text in FILL_TEXTS:
        got, want = p.fill_mask(text, top_k=4), pipe(text)
        if want and isinstance(want[0], dict):
            got, want = [got], [want]
        for gm, wm in zip(got, want):
            assert [(x["token"], x["token_str"], x["sequence"]) for x in gm] == \
                [(x["token"], x["token_str"], x["sequence"]) for x in wm]
            np.testing.assert_allclose([x["score"] for x in gm], [x["score"] for x in wm], atol=1e-5, rtol=0)
    texts = ["The capital of France is Paris.", "a " * 600, "x"]
    sparse = p.embed_sparse(texts, max_length=512)
    cli = _splade_cli(folder, texts)
    for s, c in zip(sparse, cli):
        assert s["indices"].tolist() == [e["index"] for e in c]
        np.testing.assert_allclose(s["values"], [e["value"] for e in c], rtol=1e-6)
    with pytest.raises(bert8.Error, match="no mask token"):
        p.fill_mask("no mask here")
