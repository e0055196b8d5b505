"""bert8.Model against transformers + torch (pip) on the golden checkpoints of ../shared and the
models of models/: FP32 outputs within 1e-4, padded and packed forms, input dtypes."""
from __future__ import annotations

import json

import numpy as np
import pytest

import bert8
from conftest import GOLDEN, GOLDEN_MODELS, MODELS, REPO_MODELS

ATOL = 1e-4
FOLDERS = [GOLDEN / n for n in GOLDEN_MODELS] + [MODELS / n for n in REPO_MODELS]


def _reference(transformers, torch, folder):
    config = json.loads((folder / "config.json").read_text())
    cls = getattr(transformers, config["architectures"][0])
    model = cls.from_pretrained(str(folder), dtype=torch.float32)
    return model.eval()


def _batch(info, rng, lengths):
    """Random ids [B, T] with padding after each row's length (first id CLS-like, types 0/1)."""
    B, T = len(lengths), max(lengths)
    low = 5 if info.vocab_size > 10 else 0
    ids = rng.integers(low, info.vocab_size, size=(B, T), dtype=np.int64)
    mask = np.zeros((B, T), dtype=np.int64)
    types = np.zeros((B, T), dtype=np.int64)
    for i, n in enumerate(lengths):
        mask[i, :n] = 1
        ids[i, n:] = info.pad_token_id
        if info.type_vocab_size > 1:
            types[i, n // 2: n] = 1
    return ids, mask, types


def _torch_outputs(torch, ref, info, ids, mask, types):
    kw = dict(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask), output_hidden_states=True)
    if info.arch == "bert" or (info.arch == "xlm-roberta" and info.type_vocab_size > 1):
        kw["token_type_ids"] = torch.from_numpy(types)
    with torch.no_grad():
        out = ref(**kw)
    got = {"last_hidden_state": out.hidden_states[-1].numpy()}
    for name in ("pooler_output", "logits", "start_logits", "end_logits"):
        v = getattr(out, name, None)
        if v is not None:
            got[name] = v.numpy()
    return got


@pytest.fixture(scope="module")
def rng():
    return np.random.default_rng(1234)


@pytest.mark.parametrize("folder", FOLDERS, ids=[f.name for f in FOLDERS])
def test_forward_matches_transformers(folder, torch, transformers, rng):
    m = bert8.Model(folder)
    info = m.info
    ref = _reference(transformers, torch, folder)
    lengths = [min(info.max_seq_len, n) for n in (17, 5, 31, 1)]
    ids, mask, types = _batch(info, rng, lengths)
    want = _torch_outputs(torch, ref, info, ids, mask, types)
    got = m.forward(ids, mask, types if info.arch == "bert" else None)
    assert "last_hidden_state" in got
    real = mask.astype(bool)
    for name, w in want.items():
        if name not in got:
            assert name == "pooler_output", f"{folder.name}: bert8 gave no {name}"
            continue
        g = got[name]
        assert g.dtype == np.float32 and g.shape == w.shape, name
        if g.ndim >= 2 and g.shape[:2] == real.shape:  # token-level: real tokens only
            g, w = g[real], w[real]
        np.testing.assert_allclose(g, w, atol=ATOL, rtol=0, err_msg=f"{folder.name}: {name}")


@pytest.mark.parametrize("name", ["bert_model", "bert_tokcls", "xlmr_qa", "distilbert_seqcls"])
def test_packed_forward_equals_padded_rows(name, rng):
    folder = GOLDEN / name
    if not folder.is_dir():
        pytest.skip("no golden folder")
    m = bert8.Model(folder)
    lengths = [9, 3, 14]
    ids, mask, types = _batch(m.info, rng, lengths)
    padded = m.forward(ids, mask)
    seqs = [ids[i, :n] for i, n in enumerate(lengths)]
    packed = m.forward_packed(seqs)
    np.testing.assert_array_equal(packed["cu_seqlens"], [0, 9, 12, 26])
    flat = m.forward_packed(np.concatenate(seqs), cu_seqlens=[0, 9, 12, 26])
    real = mask.astype(bool)
    for k, v in padded.items():
        p = packed[k]
        want = v[real] if v.ndim >= 2 and v.shape[:2] == real.shape else v
        np.testing.assert_allclose(p, want, atol=1e-5, rtol=0, err_msg=k)
        np.testing.assert_array_equal(flat[k], p)


def test_golden_cases_through_the_binding():
    """cases.json of the golden folders (transformers v4.31 outputs) for the first case each."""
    checked = 0
    for name in GOLDEN_MODELS:
        cases = json.loads((GOLDEN / name / "cases.json").read_text())
        items = cases.get("cases") or []
        if not items or "input_ids" not in items[0]:
            continue
        c = items[0]
        m = bert8.Model(GOLDEN / name)
        out = m.forward(np.asarray(c["input_ids"]), c.get("attention_mask"), c.get("token_type_ids"))
        real = np.asarray(c["attention_mask"], dtype=bool) if c.get("attention_mask") else None
        for key, value in (c.get("outputs") or {}).items():
            if key not in out:
                continue
            want = np.asarray(value["data"], dtype=np.float32).reshape(value["shape"])
            got = out[key]
            if real is not None and got.ndim >= 2 and got.shape[:2] == real.shape:
                got, want = got[real], want[real]
            np.testing.assert_allclose(got, want, atol=ATOL, rtol=0, err_msg=f"{name}: {key}")
            checked += 1
    assert checked >= 10


def test_input_dtypes_and_zero_copy_views(rng):
    m = bert8.Model(MODELS / "sst2-bert-mini") if (MODELS / "sst2-bert-mini").is_dir() else pytest.skip("no model")
    ids, mask, types = _batch(m.info, rng, [7, 4])
    base = m.forward(ids, mask, types)["logits"]
    for conv in (np.int32, np.int64, np.uint16):
        np.testing.assert_array_equal(m.forward(ids.astype(conv), mask.astype(conv), types.astype(conv))["logits"], base)
    np.testing.assert_array_equal(m.forward(ids.tolist(), mask.astype(bool).tolist(), types.tolist())["logits"], base)
    np.testing.assert_array_equal(m.forward(np.asfortranarray(ids), mask, types)["logits"], base)
    views = m.forward(ids.astype(np.int32), mask.astype(np.int32), types.astype(np.int32), copy=False)
    np.testing.assert_array_equal(views["logits"], base)
    idle = m._m.idle_sessions
    del views
    assert m._m.idle_sessions == idle + 1  # the lent session went back to the pool
    one = m.forward(ids[0, :7])  # 1-d ids: one row
    assert one["logits"].shape == (1, 2)


def test_info_and_repr():
    m = bert8.Model(MODELS / "sst2-bert-mini")
    assert m.info.architecture == "BertForSequenceClassification"
    assert m.info["labels"] == ["negative", "positive"]
    assert "sst2-bert-mini" in repr(m)
    assert bert8.__version__.count(".") == 2
