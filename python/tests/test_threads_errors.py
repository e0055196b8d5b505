"""One model shared by 8 Python threads; errors as bert8.Error with the library's status."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import bert8
from conftest import GOLDEN, MODELS, SENTENCES, require

SST2 = MODELS / "sst2-bert-mini"


def _run_threads(fn, n=8):
    results, errors = [None] * n, []

    def work(i):
        try:
            results[i] = fn(i)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return results


def test_eight_threads_share_one_model():
    m = bert8.Model(require(SST2), threads=1)
    tok = bert8.Tokenizer(SST2)
    batches = [tok(SENTENCES[i:] + SENTENCES[:i], padding=True, return_tensors="np") for i in range(8)]
    want = [m.forward(b["input_ids"], b["attention_mask"], b["token_type_ids"]) for b in batches]

    def work(i):
        out = []
        for _ in range(5):
            b = batches[i]
            out.append(m.forward(b["input_ids"], b["attention_mask"], b["token_type_ids"]))
        return out

    for i, outs in enumerate(_run_threads(work)):
        for o in outs:
            for k in want[i]:
                np.testing.assert_array_equal(o[k], want[i][k])


def test_eight_threads_share_one_pipeline_and_tokenizer():
    p = bert8.Pipeline(require(SST2), threads=1)
    tok = bert8.Tokenizer(SST2)
    texts = SENTENCES * 5
    want_scores, want_emb = p.scores(texts), p.embed(texts)
    want_tok = tok(texts, return_offsets_mapping=True)

    def work(i):
        return [(p.scores(texts), p.embed(texts), tok(texts, return_offsets_mapping=True)) for _ in range(3)]

    for outs in _run_threads(work):
        for s, e, t in outs:
            np.testing.assert_array_equal(s, want_scores)
            np.testing.assert_array_equal(e, want_emb)
            assert t == want_tok


def test_the_gil_is_released_during_compute():
    """A pure-Python thread keeps running while another thread is inside a forward pass."""
    m = bert8.Model(require(SST2), threads=1)
    ids = np.full((64, 128), 7, dtype=np.int32)
    ticks, done = [0], threading.Event()

    def spin():
        while not done.is_set():
            ticks[0] += 1

    t = threading.Thread(target=spin)
    t.start()
    try:
        before = ticks[0]
        m.forward(ids)
        during = ticks[0] - before
    finally:
        done.set()
        t.join()
    assert during > 1000


def test_missing_folder_raises_io_error(tmp_path):
    with pytest.raises(bert8.Error) as e:
        bert8.Model(tmp_path / "nope")
    assert e.value.status == bert8.Status.IO and "nope" in e.value.message
    with pytest.raises(bert8.Error) as e:
        bert8.Tokenizer(tmp_path / "nope")
    assert e.value.status in (bert8.Status.IO, bert8.Status.MISSING)
    with pytest.raises(bert8.Error):
        bert8.Pipeline(tmp_path / "nope")


def test_broken_config_raises_format_error(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(bert8.Error) as e:
        bert8.Model(tmp_path)
    assert e.value.status in (bert8.Status.FORMAT, bert8.Status.IO, bert8.Status.MISSING)
    assert e.value.status_name


def test_bad_ids_raise_with_the_library_message():
    m = bert8.Model(require(SST2))
    with pytest.raises(bert8.Error) as e:
        m.forward(np.array([[2, m.info.vocab_size + 5, 3]]))
    assert e.value.status == bert8.Status.INVALID_ARG
    with pytest.raises(bert8.Error):
        m.forward(np.array([[2, -1, 3]]))
    with pytest.raises(bert8.Error) as e:
        m.forward(np.zeros((1, m.info.max_seq_len + 1), dtype=np.int32))
    assert e.value.status in (bert8.Status.TOO_LARGE, bert8.Status.INVALID_ARG)
    with pytest.raises(ValueError):
        m.forward(np.array([[2, 2**40, 3]]))


def test_wrong_dtypes_and_shapes_raise_type_and_value_errors():
    m = bert8.Model(require(SST2))
    with pytest.raises(TypeError):
        m.forward(np.zeros((1, 4), dtype=np.float32))
    with pytest.raises(TypeError):
        m.forward(["a", "b"])
    with pytest.raises(ValueError):
        m.forward(np.zeros((1, 4), dtype=np.int32), attention_mask=np.ones((1, 5), dtype=np.int32))
    with pytest.raises(ValueError):
        m.forward(np.zeros((2, 2, 2), dtype=np.int32))
    with pytest.raises(ValueError):
        m.forward_packed(np.zeros(4, dtype=np.int32), cu_seqlens=[0, 2, 5])
    tok = bert8.Tokenizer(SST2)
    with pytest.raises(TypeError):
        tok([1, 2])
    with pytest.raises(ValueError):
        tok(["a", "b"], ["c"])
    with pytest.raises(ValueError):
        tok(["a"], padding="sideways")
    with pytest.raises(UnicodeEncodeError):
        tok(["bad \ud800 surrogate"])
    p = bert8.Pipeline(SST2)
    with pytest.raises(bert8.Error) as e:
        p.qa("q", "c")  # a classifier has no QA head
    assert e.value.status == bert8.Status.UNSUPPORTED
    with pytest.raises(ValueError):
        p.embed(["x"], pooling="median")


def test_too_long_text_without_truncation():
    p = bert8.Pipeline(require(SST2))
    with pytest.raises(bert8.Error) as e:
        p.scores(["word " * 1000], truncation=False)
    assert e.value.status == bert8.Status.TOO_LARGE
    assert p.scores(["word " * 1000]).shape == (1, 2)


def test_golden_xlmr_end_to_end_pipeline():
    p = bert8.Pipeline(require(GOLDEN / "xlmr_e2e"))
    assert p.scores(SENTENCES).shape == (len(SENTENCES), 3)
