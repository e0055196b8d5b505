"""Every architecture bert8 reads, against transformers on random-weight checkpoints that
scripts/make_arch_checkpoints.py makes with it (three shapes, every head on the small one,
padded batches with sequences of 1 to 520 tokens): last_hidden_state, pooler_output and the
heads' logits within the golden tolerance, packed batches equal to padded ones, and INT8
(static and dynamic) running on each architecture and staying near FP32."""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import bert8
from conftest import REPO, SENTENCES

ATOL = 1e-4  # the golden tolerance of tests/test_golden_models.c
GENERATOR = REPO / "scripts" / "make_arch_checkpoints.py"


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> pathlib.Path:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    out = tmp_path_factory.mktemp("arch")
    subprocess.run([sys.executable, str(GENERATOR), str(out)], check=True, capture_output=True)
    return out


def _names() -> list[str]:
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        import make_arch_checkpoints as g  # noqa: PLC0415 (needs transformers)
    except ImportError:
        return []
    finally:
        sys.path.pop(0)
    names = []
    for arch in g.ARCHS:
        for shape in g.SHAPES:
            for head in g.heads_of(arch):
                names.append(f"{arch}_{shape}_{head}")
    return names


NAMES = _names()


def _run(m: bert8.Model, case) -> dict:
    types = case["token_type_ids"] if "token_type_ids" in case.files else None
    return m.forward(case["input_ids"], case["attention_mask"], types)


@pytest.mark.parametrize("name", NAMES)
def test_fp32_matches_transformers(checkpoints, name):
    d = checkpoints / name
    case = np.load(d / "cases.npz")
    m = bert8.Model(d)
    got = _run(m, case)
    real = case["attention_mask"].astype(bool)
    compared = 0
    for key in ("last_hidden_state", "pooler_output", "logits", "start_logits", "end_logits"):
        if key not in case.files:
            continue
        assert key in got, f"{name}: bert8 gave no {key}"
        g, w = got[key], case[key]
        assert g.shape == w.shape, f"{name}: {key} {g.shape} vs {w.shape}"
        if g.ndim >= 2 and g.shape[:2] == real.shape:
            g, w = g[real], w[real]
        np.testing.assert_allclose(g, w, atol=ATOL, rtol=0, err_msg=f"{name}: {key}")
        compared += 1
    assert compared >= 2 or name.endswith(("_base", "_mlm")), f"{name}: only {compared} outputs compared"


@pytest.mark.parametrize("name", [n for n in NAMES if n.endswith("_l_base") or n.endswith("_m_base")])
def test_packed_equals_padded(checkpoints, name):
    d = checkpoints / name
    case = np.load(d / "cases.npz")
    m = bert8.Model(d)
    padded = _run(m, case)["last_hidden_state"]
    mask = case["attention_mask"].astype(bool)
    lengths = mask.sum(1)
    ids = np.concatenate([case["input_ids"][b, :n] for b, n in enumerate(lengths)])
    cu = np.concatenate([[0], np.cumsum(lengths)])
    types = None
    if "token_type_ids" in case.files:
        types = np.concatenate([case["token_type_ids"][b, :n] for b, n in enumerate(lengths)])
    packed = m.forward_packed(ids, cu, types)["last_hidden_state"]
    # FP32's contract for packed batches is 1e-5 (tests/test_packed.c): the layers' products run on
    # oneDNN, whose blocking follows the row count on some ISAs (an AVX2 CPU, or BERT8_MAX_ISA=avx2:
    # about 2e-6 apart on the l shape); every kernel of bert8's own gives the same bits either way
    np.testing.assert_allclose(packed, padded[mask], rtol=1e-5, atol=1e-5)


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


@pytest.mark.parametrize("scheme", ["static", "dynamic"])
@pytest.mark.parametrize("arch", sorted({n.split("_")[0] for n in NAMES}))
def test_int8_runs_and_stays_near_fp32(checkpoints, tmp_path, arch, scheme):
    """Random weights with a 0.15 spread make outliers no real model has; the bound only says the
    INT8 path (SmoothQuant groups, fused epilogues, INT8 attention with the relative bias) works
    from the same traits: a wrong scale or position would give cosines near 0."""
    d = checkpoints / f"{arch}_m_base"
    case = np.load(d / "cases.npz")
    out = tmp_path / "q"
    bert8.quantize(d, out, SENTENCES * 4, scheme=scheme, progress=False)
    fp = _run(bert8.Model(d), case)["last_hidden_state"]
    q = bert8.Model(out)
    assert q.info.quantized
    got = _run(q, case)["last_hidden_state"]
    real = case["attention_mask"].astype(bool)
    cos = _cos(got[real], fp[real])
    assert cos.mean() > 0.95, f"{arch} {scheme}: mean token cosine {cos.mean():.4f}"


def _cli(*args: str, stdin: str) -> list[dict]:
    from conftest import CLI
    if not CLI.exists():
        pytest.skip(f"{CLI} is not built")
    r = subprocess.run([str(CLI), *args], input=stdin.encode(), capture_output=True, check=False)
    assert r.returncode == 0, r.stderr.decode()
    return [json.loads(line) for line in r.stdout.decode().splitlines()]


# NomicBERT's masked-LM transform takes hidden_act (SiLU), which the FP32 head GEMM's epilogue
# does not have: its head is not loaded (the encoder is), and fill-mask says so.
MLM_UNSUPPORTED = {"nomic-bert"}


@pytest.mark.parametrize("arch", sorted({n.split("_")[0] for n in NAMES if n.endswith("_s_mlm")} - MLM_UNSUPPORTED))
def test_fill_mask_matches_transformers(checkpoints, arch):
    """`bert8 fill-mask` against transformers' fill-mask pipeline on the masked-LM checkpoint of
    each architecture: the same tokens, token strings and sequences, scores within 1e-5, for a
    text with one mask (a list) and with two (a list per mask)."""
    d = checkpoints / f"{arch}_s_mlm"
    ref = json.loads((d / "fill_mask.json").read_text())
    got = _cli("fill-mask", str(d), "--top-k", "5", stdin="".join(json.dumps({"text": t}) + "\n" for t in ref["texts"]))
    assert len(got) == len(ref["texts"])
    for g, want in zip(got, ref["outputs"]):
        g = g["predictions"]
        if want and isinstance(want[0], dict):
            g, want = [g], [want]
        assert len(g) == len(want)
        for gm, wm in zip(g, want):
            assert [p["token"] for p in gm] == [p["token"] for p in wm]
            assert [p["token_str"] for p in gm] == [p["token_str"] for p in wm]
            assert [p["sequence"] for p in gm] == [p["sequence"] for p in wm]
            np.testing.assert_allclose([p["score"] for p in gm], [p["score"] for p in wm], atol=1e-5, rtol=0)


@pytest.mark.parametrize("name,tensor,change,words", [
    ("gte_s_base", "encoder.layer.1.mlp.up_gate_proj.weight", "drop", ["up_gate_proj.weight", "missing"]),
    ("gte_s_base", "encoder.layer.0.attention.qkv_proj.weight", "shape", ["qkv_proj.weight", "[95,32]", "[96,32]"]),
    ("nomic-bert_s_base", "encoder.layers.0.mlp.fc11.weight", "drop", ["fc11.weight", "missing"]),
    ("jina-v3_s_base", "encoder.layers.1.mixer.Wqkv.bias", "drop", ["Wqkv.bias", "missing"]),
    ("jina-v3_s_base", "emb_ln.weight", "drop", ["emb_ln.weight", "missing"]),
])
def test_damaged_rotary_checkpoint_names_the_tensor(checkpoints, tmp_path, name, tensor, change, words):
    """A fused tensor missing or of the wrong shape (gate/up, Q/K/V) is an error naming it."""
    from safetensors.numpy import load_file, save_file  # noqa: PLC0415

    src = checkpoints / name
    d = tmp_path / name
    d.mkdir()
    for f in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        (d / f).write_bytes((src / f).read_bytes())
    tensors = load_file(str(src / "model.safetensors"))
    assert tensor in tensors
    if change == "drop":
        del tensors[tensor]
    else:
        tensors[tensor] = tensors[tensor][:-1].copy()
    save_file(tensors, str(d / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(bert8.Error) as ei:
        bert8.Model(d)
    for w in words:
        assert w in str(ei.value), f"{ei.value!r} lacks {w!r}"


def test_keep_fp32_by_the_fused_tensor_name(checkpoints, tmp_path):
    """keep_fp32 may name a fused checkpoint tensor (GTE's up_gate_proj): that layer's group stays
    FP32 (the fused tensor is copied), the others are INT8 under their parts' names."""
    from safetensors import safe_open  # noqa: PLC0415

    d = checkpoints / "gte_s_base"
    out = tmp_path / "q"
    bert8.quantize(d, out, SENTENCES * 2, keep_fp32=["*.layer.1.mlp.up_gate_proj.weight"], progress=False)
    with safe_open(str(out / "model.safetensors"), "np") as f:
        names = set(f.keys())
        assert f.get_tensor("encoder.layer.1.mlp.up_gate_proj.weight").dtype == np.float32
        assert f.get_tensor("encoder.layer.0.mlp.gate_proj.weight").dtype == np.int8
    assert "encoder.layer.1.mlp.gate_proj.weight" not in names
    assert "encoder.layer.0.mlp.up_gate_proj.weight" not in names
    case = np.load(d / "cases.npz")
    got = _run(bert8.Model(out), case)["last_hidden_state"]
    fp = _run(bert8.Model(d), case)["last_hidden_state"]
    real = case["attention_mask"].astype(bool)
    assert _cos(got[real], fp[real]).mean() > 0.95


# Jina v3's task LoRA adapters (scripts/make_arch_checkpoints.py add_lora): the oracle folds each
# task's adapters into transformers' weights with torch; bert8 folds them at load.
LORA = [n for n in NAMES if n.startswith("jina-v3-lora_")]


@pytest.mark.parametrize("name", LORA)
def test_lora_task_matches_folded_transformers(checkpoints, name):
    d = checkpoints / name
    case = np.load(d / "cases.npz")
    real = case["attention_mask"].astype(bool)
    tasks = [k.split("__")[1] for k in case.files if k.startswith("lora__") and k.endswith("__last_hidden_state")]
    assert len(tasks) == 5
    for task in tasks:
        m = bert8.Model(d, lora_task=task)
        assert m.info.lora_task == task
        got = _run(m, case)
        want = case[f"lora__{task}__last_hidden_state"]
        np.testing.assert_allclose(got["last_hidden_state"][real], want[real], atol=ATOL, rtol=0, err_msg=f"{name} {task}")
        np.testing.assert_allclose(got["pooler_output"], case[f"lora__{task}__pooler_output"], atol=ATOL, rtol=0,
                                   err_msg=f"{name} {task} pooler")
        # the adapters matter: a task's output is far from the base weights'
        assert np.abs(want[real] - case["last_hidden_state"][real]).max() > 0.5


def test_jina_published_config_reads_as_jina_v3(checkpoints, tmp_path):
    """jina-embeddings-v3's published config.json says model_type "xlm-roberta" with rotary
    positions and names the theta rotary_emb_base (its custom code); bert8 reads it as the Jina v3
    row: the same outputs, bit for bit, as the folder that says jina_embeddings_v3."""
    src = checkpoints / "jina-v3-lora_s_base"
    cfg = json.loads((src / "config.json").read_text())
    theta = cfg.pop("rope_theta", None) or (cfg.pop("rope_parameters", None) or {}).get("rope_theta", 20000.0)
    cfg.update(model_type="xlm-roberta", position_embedding_type="rotary", rotary_emb_base=theta,
               architectures=["XLMRobertaModel"])
    d = tmp_path / "published"
    d.mkdir()
    for f in src.iterdir():
        if f.name != "config.json":
            (d / f.name).symlink_to(f)
    (d / "config.json").write_text(json.dumps(cfg))
    case = np.load(src / "cases.npz")
    for task in (None, "retrieval.query"):
        want = _run(bert8.Model(src, lora_task=task), case)["last_hidden_state"]
        m = bert8.Model(d, lora_task=task)
        assert m.info.arch == "jina_embeddings_v3"
        np.testing.assert_array_equal(_run(m, case)["last_hidden_state"], want)
    # a plain XLM-R config with another position type is still refused
    cfg["position_embedding_type"] = "relative_key"
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(bert8.Error, match="position_embedding_type"):
        bert8.Model(d)


def test_lora_unknown_task_is_refused_naming_the_valid_ones(checkpoints):
    d = checkpoints / "jina-v3-lora_s_base"
    with pytest.raises(bert8.Error) as ei:
        bert8.Model(d, lora_task="retrieval")
    for w in ('"retrieval"', "retrieval.query", "retrieval.passage", "separation", "classification", "text-matching"):
        assert w in str(ei.value), f"{ei.value!r} lacks {w!r}"
    with pytest.raises(bert8.Error, match="no LoRA adapters"):
        bert8.Model(checkpoints / "gte_s_base", lora_task="retrieval.query")


@pytest.mark.parametrize("scheme", ["static", "dynamic"])
def test_lora_int8_holds_the_folded_task(checkpoints, tmp_path, scheme):
    """Quantizing with a task calibrates the folded weights; the INT8 folder holds plain folded
    weights (no parametrizations), records the task, and refuses another one."""
    from safetensors import safe_open  # noqa: PLC0415

    d = checkpoints / "jina-v3-lora_m_base"
    case = np.load(d / "cases.npz")
    real = case["attention_mask"].astype(bool)
    out = tmp_path / "q"
    bert8.quantize(d, out, SENTENCES * 4, scheme=scheme, progress=False, lora_task="text-matching")
    with safe_open(str(out / "model.safetensors"), "np") as f:
        names = list(f.keys())
    assert not [n for n in names if "parametrizations" in n]
    assert json.loads((out / "quantization_config.json").read_text())["lora_task"] == "text-matching"
    q = bert8.Model(out)
    assert q.info.quantized and q.info.lora_task == "text-matching"
    assert bert8.Model(out, lora_task="text-matching").info.lora_task == "text-matching"
    with pytest.raises(bert8.Error, match='"text-matching" folded'):
        bert8.Model(out, lora_task="separation")
    fp = case["lora__text-matching__last_hidden_state"]
    got = _run(q, case)["last_hidden_state"]
    cos = _cos(got[real], fp[real])
    print(f"jina-v3-lora int8 {scheme} text-matching: mean token cosine {cos.mean():.4f}, min {cos.min():.4f}")
    assert cos.mean() > 0.95, f"{scheme}: mean token cosine {cos.mean():.4f}"


def _copy_with_config(src: pathlib.Path, d: pathlib.Path, **changes) -> pathlib.Path:
    """A copy of a checkpoint folder (config.json, weights, tokenizer) with config.json fields
    changed (a value of None removes the field)."""
    d.mkdir()
    for f in ("model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        (d / f).write_bytes((src / f).read_bytes())
    cfg = json.loads((src / "config.json").read_text())
    for k, v in changes.items():
        if v is None:
            cfg.pop(k, None)
        else:
            cfg[k] = v
    (d / "config.json").write_text(json.dumps(cfg))
    return d


@pytest.mark.parametrize("field,value,words", [
    ("conv_kernel_size", 3, ["conv_kernel_size", "not supported"]),
    ("embedding_size", 16, ["embedding_size", "embed_proj"]),
    ("attention_head_size", 4, ["attention_head_size"]),
    ("pooler_hidden_size", 16, ["pooler_hidden_size"]),
    ("pooler_hidden_act", "swish", ["pooler_hidden_act", "swish"]),
    ("position_buckets", 1, ["position_buckets"]),
    ("max_relative_positions", 8, ["max_relative_positions", "position_buckets"]),
    ("pos_att_type", [1], ["pos_att_type"]),
])
def test_deberta_config_it_does_not_run_is_refused_by_name(checkpoints, tmp_path, field, value, words):
    """DebertaV2Config fields that change the maths in ways bert8 does not run (the convolution
    after the first layer, a projected embedding size, ...) or that transformers would turn into
    NaN (one bucket, a span the log buckets divide by zero with) are errors naming the field."""
    d = _copy_with_config(checkpoints / "deberta-v2_s_base", tmp_path / "d", **{field: value})
    with pytest.raises(bert8.Error) as ei:
        bert8.Model(d)
    for w in words:
        assert w in str(ei.value), f"{ei.value!r} lacks {w!r}"


def test_deberta_pos_att_type_as_a_bar_string(checkpoints, tmp_path):
    """pos_att_type written as DeBERTa-v2's "p2c|c2p" string (any case, spaces) reads as the list."""
    src = checkpoints / "deberta-v2_m_base"
    case = np.load(src / "cases.npz")
    d = _copy_with_config(src, tmp_path / "d", pos_att_type="P2C | c2p")
    np.testing.assert_array_equal(_run(bert8.Model(d), case)["last_hidden_state"],
                                  _run(bert8.Model(src), case)["last_hidden_state"])


def test_deberta_damaged_checkpoint_names_the_tensor(checkpoints, tmp_path):
    from safetensors.numpy import load_file, save_file  # noqa: PLC0415

    src = checkpoints / "deberta-v2_m_base"
    d = _copy_with_config(src, tmp_path / "d")
    tensors = load_file(str(src / "model.safetensors"))
    del tensors["encoder.layer.1.attention.self.pos_query_proj.weight"]  # a base model: no "deberta." prefix
    save_file(tensors, str(d / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(bert8.Error, match="pos_query_proj.weight"):
        bert8.Model(d)


def test_deberta_int8_folder_stores_the_relative_projections(checkpoints, tmp_path):
    """With share_att_key the relative projections come from the key/query weights, which an
    INT8 folder holds in int8: it stores each layer's Kr and Qr in fp32 instead, loads from
    them (the same outputs as the model in memory), and names a missing one. Its attention is
    fp32 (no INT8 kernel for the disentangled terms)."""
    from safetensors.numpy import load_file, save_file  # noqa: PLC0415

    d = checkpoints / "deberta-v2_l_base"
    case = np.load(d / "cases.npz")
    out = tmp_path / "q"
    bert8.quantize(d, out, SENTENCES * 2, progress=False)
    tensors = load_file(str(out / "model.safetensors"))
    cfg = json.loads((d / "config.json").read_text())
    span = cfg["position_buckets"]
    for layer in range(cfg["num_hidden_layers"]):
        base = f"encoder.layer.{layer}.attention.self."  # a base model: no "deberta." prefix
        assert tensors[base + "key_proj.weight"].dtype == np.int8
        for t in ("rel_key_table", "rel_query_table"):
            assert tensors[base + t].dtype == np.float32
            assert tensors[base + t].shape == (2 * span, cfg["hidden_size"])
    q = bert8.Model(out)
    got = _run(q, case)["last_hidden_state"]
    real = case["attention_mask"].astype(bool)
    fp = _run(bert8.Model(d), case)["last_hidden_state"]
    assert _cos(got[real], fp[real]).mean() > 0.95
    info = subprocess.run([str(REPO / "build" / "bert8"), "info", str(out)], capture_output=True, text=True)
    if info.returncode == 0:
        assert "attention int8" not in info.stdout
    del tensors["encoder.layer.1.attention.self.rel_query_table"]
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(bert8.Error, match="rel_query_table"):
        bert8.Model(out)
