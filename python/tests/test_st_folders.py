"""sentence-transformers folders against sentence-transformers itself: random-weight models built
here (a tiny BERT from transformers under SentenceTransformer(modules=[Transformer, Pooling, Dense,
Normalize]), prompts in the config), saved, then opened by bert8.SentenceEncoder and `bert8 embed`.
Every pooling mode, include_prompt, Dense with each activation (bias, residual), prompts,
do_lower_case; and each broken folder is a named error."""
from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import pytest

import bert8
from conftest import CLI, SHARED

st = pytest.importorskip("sentence_transformers")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from sentence_transformers.base.modules import Dense, Normalize, Transformer  # noqa: E402
from sentence_transformers.sentence_transformer.modules import Pooling  # noqa: E402

VOCAB = SHARED / "tokenizers" / "bert-base-cased.vocab.txt"
H = 32
TEXTS = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "Émile ΣΟΦΟΣ visited İstanbul; naïve CAFÉ owners said NO.",
    "a",
    "Prices rose by 3.5% in the third quarter, according to the report, " * 3,
]
PROMPTS = {"query": "query: ", "passage": "Represent this passage for retrieval: ", "none": ""}
TOL = 1e-4


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory):
    """A tiny random BertModel with a cased WordPiece tokenizer."""
    if not VOCAB.exists():
        pytest.skip(f"{VOCAB} is not there")
    d = tmp_path_factory.mktemp("bert") / "bert"
    d.mkdir()
    shutil.copyfile(VOCAB, d / "vocab.txt")
    tok = transformers.BertTokenizerFast(str(d / "vocab.txt"), do_lower_case=False)
    tok.save_pretrained(d)
    cfg = transformers.BertConfig(vocab_size=tok.vocab_size, hidden_size=H, num_hidden_layers=2, num_attention_heads=2,
                                  intermediate_size=64, max_position_embeddings=128)
    torch.manual_seed(0)
    transformers.BertModel(cfg).eval().save_pretrained(d)
    return d


def build(tmp_path, bert_dir, name, pooling="mean", include_prompt=True, dense=None, normalize=True,
          do_lower_case=False, extra=None, safe=True, prompts=PROMPTS, default_prompt_name="query", max_seq_length=64):
    torch.manual_seed(1)
    mods = [Transformer(str(bert_dir), max_seq_length=max_seq_length, do_lower_case=do_lower_case),
            Pooling(H, pooling_mode=pooling, include_prompt=include_prompt)]
    width = H * (len(pooling) if isinstance(pooling, (list, tuple)) else 1)
    for out, act, kw in dense or []:
        mods.append(Dense(width, out, activation_function=act, **kw))
        width = out
    mods += extra or []
    if normalize:
        mods.append(Normalize())
    model = st.SentenceTransformer(modules=mods, prompts=prompts, default_prompt_name=default_prompt_name, device="cpu")
    path = tmp_path / name
    model.save(str(path), safe_serialization=safe)
    return model, path


def check(model, path, **kw):
    ref = model.encode(TEXTS, **kw)
    got = bert8.SentenceEncoder(path, threads=1).encode(TEXTS, **kw)
    assert got.shape == ref.shape
    err = float(np.abs(got - ref).max())
    assert err <= TOL, f"{path.name} {kw}: max |bert8 - sentence-transformers| = {err}"
    return got


@pytest.mark.parametrize("pooling", ["cls", "mean", "max", "mean_sqrt_len_tokens", "weightedmean", "lasttoken",
                                     ("cls", "mean"), ("max", "weightedmean", "lasttoken")])
@pytest.mark.parametrize("include_prompt", [True, False])
def test_every_pooling_mode_with_prompts(tmp_path, bert_dir, pooling, include_prompt):
    model, path = build(tmp_path, bert_dir, "p", pooling=pooling, include_prompt=include_prompt,
                        normalize=pooling != "max")
    default = check(model, path)  # the folder's default prompt ("query: ")
    check(model, path, prompt_name="passage")
    plain = check(model, path, prompt="")
    check(model, path, prompt="Instruct: find the answer\nQuery: ")
    assert np.abs(default - plain).max() > 1e-3  # the prompt matters: the test can see a wrong one


@pytest.mark.parametrize("act", [torch.nn.Tanh(), torch.nn.Identity(), torch.nn.ReLU(), torch.nn.GELU(),
                                 torch.nn.Sigmoid(), torch.nn.SiLU(), torch.nn.LeakyReLU()])
def test_dense_activations(tmp_path, bert_dir, act):
    model, path = build(tmp_path, bert_dir, "d", dense=[(24, act, {})])
    got = check(model, path, prompt_name="passage")
    assert got.shape[1] == 24
    assert bert8.SentenceEncoder(path).get_sentence_embedding_dimension() == 24


def test_dense_chain_without_bias_with_residual_and_truncate_dim(tmp_path, bert_dir):
    model, path = build(tmp_path, bert_dir, "chain", pooling="weightedmean", include_prompt=False,
                        dense=[(48, torch.nn.Tanh(), {"bias": False}), (48, torch.nn.GELU(), {"use_residual": True}),
                               (16, torch.nn.Identity(), {"use_residual": True})], normalize=False)
    check(model, path)
    check(model, path, prompt_name="passage", normalize_embeddings=True)


def test_do_lower_case_and_max_seq_length(tmp_path, bert_dir):
    _, path = build(tmp_path, bert_dir, "lower", do_lower_case=True, max_seq_length=16)
    # sentence-transformers also bakes the lowercasing into the saved tokenizer.json (a normalizer
    # Sequence bert8's tokenizer does not read); the cased tokenizer with sentence_bert_config.json's
    # do_lower_case is the same folder as sentence-transformers loads it
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(bert_dir / f, path / f)
    # the sentence_bert_config.json of the folders on the Hub (sentence-transformers before 6)
    (path / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 16, "do_lower_case": True}))
    model = st.SentenceTransformer(str(path), device="cpu")
    assert model[0].do_lower_case
    check(model, path)
    check(model, path, prompt="QUERY Σ: ")
    info = bert8.Pipeline(path).info
    assert info["max_length"] == 16 and PROMPTS.items() <= info["prompts"].items()


def test_cli_prompt_name_matches(tmp_path, bert_dir):
    if not CLI.exists():
        pytest.skip("no build/bert8")
    model, path = build(tmp_path, bert_dir, "cli", pooling="lasttoken", include_prompt=False,
                        dense=[(8, torch.nn.Tanh(), {})])
    for args, kw in ((["--prompt-name", "passage"], {"prompt_name": "passage"}), ([], {}), (["--prompt", ""], {"prompt": ""})):
        p = subprocess.run([str(CLI), "embed", str(path), "--plain", "--threads", "1", *args], capture_output=True,
                           input="\n".join(TEXTS[:4]) + "\n", text=True, check=True)
        got = np.array([json.loads(line)["embedding"] for line in p.stdout.splitlines()])
        assert np.abs(got - model.encode(TEXTS[:4], **kw)).max() <= TOL
    p = subprocess.run([str(CLI), "embed", str(path), "--prompt-name", "nope"], capture_output=True, input="a\n",
                       text=True)
    assert p.returncode == 2 and "nope" in p.stderr


def test_unknown_prompt_name_and_bad_prompts(tmp_path, bert_dir):
    model, path = build(tmp_path, bert_dir, "bad")
    enc = bert8.SentenceEncoder(path)
    with pytest.raises(ValueError, match="Prompt name 'nope' not found"):
        enc.encode(["a"], prompt_name="nope")
    with pytest.raises(bert8.Error, match="not found in the Sentence Transformers prompts. Available prompts"):
        bert8.Pipeline(path).embed(["a"], prompt_name="nope")
    with pytest.raises(bert8.Error, match="prompt has .* bytes, over the limit"):
        bert8.Pipeline(path, max_text_bytes=1000).embed(["a"], prompt="x" * 2000)
    with pytest.raises(UnicodeEncodeError):
        enc.encode(["a"], prompt="\ud800")
    with pytest.raises(bert8.Error, match="dual inputs"):
        bert8.Pipeline(path).embed(["a"], ["b"], prompt_name="query")
    with pytest.raises(bert8.Error, match="default_prompt_name \"nope\" is not one of its prompts"):
        cfg = json.loads((path / "config_sentence_transformers.json").read_text())
        cfg["default_prompt_name"] = "nope"
        (path / "config_sentence_transformers.json").write_text(json.dumps(cfg))
        bert8.SentenceEncoder(path)


def test_unknown_module_is_a_named_error(tmp_path, bert_dir):
    from sentence_transformers.sentence_transformer.modules import LayerNorm
    model, path = build(tmp_path, bert_dir, "ln", extra=[LayerNorm(H)])
    model.encode(["works in sentence-transformers"])
    with pytest.raises(bert8.Error, match=r"modules.json: module 2 \(sentence_transformers\..*LayerNorm\) is not supported"):
        bert8.SentenceEncoder(path)


def test_broken_dense_folders_are_named_errors(tmp_path, bert_dir):
    _, path = build(tmp_path, bert_dir, "bin", dense=[(8, torch.nn.Tanh(), {})], safe=False)
    if (path / "2_Dense" / "pytorch_model.bin").exists():
        with pytest.raises(bert8.Error, match="pytorch_model.bin: bert8 reads Dense weights from model.safetensors"):
            bert8.SentenceEncoder(path)
    _, path = build(tmp_path, bert_dir, "dense", dense=[(8, torch.nn.Tanh(), {})])
    cfg_path = path / "2_Dense" / "config.json"
    good = cfg_path.read_text()
    cases = [
        ({"in_features": H + 1}, "in_features 33 does not match the 32 values"),
        ({"out_features": 9}, r"tensor linear.weight has shape \[8, 32\].*expected \[9, 32\]"),
        ({"activation_function": "torch.nn.modules.activation.Softplus"}, "activation_function \"torch.nn.modules.activation.Softplus\" is not supported"),
        ({"activation_function": "mypackage.Swish"}, "is not supported"),
        ({"in_features": "32"}, "in_features must be a positive integer"),
    ]
    for change, why in cases:
        cfg = json.loads(good)
        cfg.update(change)
        cfg_path.write_text(json.dumps(cfg))
        with pytest.raises(bert8.Error, match=why):
            bert8.SentenceEncoder(path)
    cfg_path.write_text(good)
    bert8.SentenceEncoder(path).encode(["fine again"])
    for text, why in (("{", "modules.json is not a JSON list"), ('[{"type": 3}]', "module 0 must be an object"),
                      ('[{"path": "", "type": "sentence_transformers.models.Transformer"}]', "lists no Pooling"),
                      ('[{"path": "../x", "type": "sentence_transformers.models.Transformer"}]', "leaves the folder")):
        (path / "modules.json").write_text(text)
        with pytest.raises(bert8.Error, match=why):
            bert8.SentenceEncoder(path)
    (path / "1_Pooling" / "config.json").write_text('{"pooling_mode": "median"}')
    (path / "modules.json").write_text(json.dumps([
        {"path": "", "type": "sentence_transformers.models.Transformer"},
        {"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    with pytest.raises(bert8.Error, match="pooling mode \"median\" is not one of"):
        bert8.SentenceEncoder(path)


def test_dense_path_replaces_the_dense_module(tmp_path, bert_dir):
    model, path = build(tmp_path, bert_dir, "dp", dense=[(24, torch.nn.Tanh(), {})])
    other, opath = build(tmp_path, bert_dir, "dp8", dense=[(8, torch.nn.Identity(), {})])
    shutil.copytree(opath / "2_Dense", path / "2_Dense_8")
    got = bert8.SentenceEncoder(path, dense_path="2_Dense_8").encode(TEXTS)
    assert np.abs(got - other.encode(TEXTS)).max() <= TOL


def _st_outcome(path):
    """sentence-transformers' answer for a folder: its embeddings, or the exception it raises."""
    try:
        return st.SentenceTransformer(str(path), device="cpu").encode(TEXTS), None
    except Exception as e:  # noqa: BLE001 - any refusal counts
        return None, e


# Pooling configs as sentence-transformers reads them (issue 41): where it refuses, bert8 names
# the problem; where it loads, bert8 computes the same embedding.
POOLING_CASES = {
    "empty": ({}, "embedding_dimension .or word_embedding_dimension. is missing"),
    "all_false": ({"word_embedding_dimension": H, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": False,
                   "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False,
                   "pooling_mode_weightedmean_tokens": False, "pooling_mode_lasttoken": False}, None),
    "dimension_only": ({"word_embedding_dimension": H}, None),
    "mode_null": ({"embedding_dimension": H, "pooling_mode": None}, "pooling_mode is null"),
    "mode_empty_list": ({"embedding_dimension": H, "pooling_mode": []}, "pooling_mode is an empty list"),
}


@pytest.mark.parametrize("case", sorted(POOLING_CASES))
def test_pooling_config_as_sentence_transformers_reads_it(tmp_path, bert_dir, case):
    cfg, why = POOLING_CASES[case]
    _, path = build(tmp_path, bert_dir, "pool", pooling="cls", dense=[(8, torch.nn.Tanh(), {})])
    (path / "1_Pooling" / "config.json").write_text(json.dumps(cfg))
    ref, err = _st_outcome(path)
    if why is None:
        assert err is None, f"sentence-transformers refused {case}: {err}"
        got = bert8.SentenceEncoder(path, threads=1).encode(TEXTS)
        assert float(np.abs(got - ref).max()) <= TOL
    else:
        assert err is not None, f"sentence-transformers loads {case}"
        with pytest.raises(bert8.Error, match=why):
            bert8.SentenceEncoder(path)


@pytest.mark.parametrize("module", [0, 1, 2])
def test_module_without_path_or_with_nul_is_refused_as_sentence_transformers_does(tmp_path, bert_dir, module):
    _, path = build(tmp_path, bert_dir, "mods", pooling="cls", dense=[(8, torch.nn.Tanh(), {})], normalize=False)
    good = json.loads((path / "modules.json").read_text())
    mods = json.loads(json.dumps(good))
    del mods[module]["path"]
    (path / "modules.json").write_text(json.dumps(mods))
    assert _st_outcome(path)[1] is not None
    with pytest.raises(bert8.Error, match=rf"module {module} \(.*\) has no \"path\""):
        bert8.SentenceEncoder(path)
    # "1_Pooling\u0000junk" used to read as "1_Pooling"
    mods = json.loads(json.dumps(good))
    mods[module]["path"] += "\u0000junk"
    (path / "modules.json").write_text(json.dumps(mods))
    assert _st_outcome(path)[1] is not None
    with pytest.raises(bert8.Error, match=rf"modules.json: \[{module}\].path holds a NUL character"):
        bert8.SentenceEncoder(path)


def test_dense_with_nan_weights_is_a_named_error(tmp_path, bert_dir):
    from safetensors.torch import load_file, save_file
    _, path = build(tmp_path, bert_dir, "nan", dense=[(8, torch.nn.Tanh(), {})])
    wpath = path / "2_Dense" / "model.safetensors"
    tensors = load_file(str(wpath))
    tensors["linear.weight"][3, 5] = float("nan")
    save_file(tensors, str(wpath))
    # sentence-transformers loads it and answers NaN for every text; bert8 refuses the folder
    ref, err = _st_outcome(path)
    assert err is None and np.isnan(ref).all()
    with pytest.raises(bert8.Error, match=r"2_Dense/model.safetensors: tensor linear.weight\[101\] = nan is not finite"):
        bert8.SentenceEncoder(path)
