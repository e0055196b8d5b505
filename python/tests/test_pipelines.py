"""Pipelines (classify, embed, rerank, qa, ner) and SentenceEncoder against torch, and against
the bert8 CLI."""
from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

import bert8
from conftest import CLI, GOLDEN, MODELS, SENTENCES, require

SST2 = MODELS / "sst2-bert-mini"


@pytest.fixture(scope="module")
def clf():
    return bert8.Pipeline(require(SST2))


def _torch_model(transformers, torch, folder, cls="AutoModel"):
    return getattr(transformers, cls).from_pretrained(str(folder), dtype=torch.float32).eval()


def test_classify_matches_torch_softmax(clf, torch, transformers):
    tok = transformers.AutoTokenizer.from_pretrained(str(SST2))
    ref = _torch_model(transformers, torch, SST2, "AutoModelForSequenceClassification")
    enc = tok(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        want = torch.softmax(ref(**enc).logits, -1).numpy()
    got = clf.scores(SENTENCES)
    np.testing.assert_allclose(got, want, atol=1e-5)
    results = clf.classify(SENTENCES)
    assert [r["label"] for r in results] == [ref.config.id2label[int(i)] for i in want.argmax(1)]
    top = clf.classify(SENTENCES[0], top_k=None)
    assert [d["label"] for d in top] == sorted(clf.labels, key=lambda l: -want[0][clf.labels.index(l)])
    raw = clf.scores(SENTENCES, function_to_apply="none")
    with torch.no_grad():
        np.testing.assert_allclose(raw, ref(**enc).logits.numpy(), atol=1e-4)


def test_embed_mean_pooling_matches_torch(torch, transformers):
    folder = require(GOLDEN / "bert_e2e")
    tok = transformers.AutoTokenizer.from_pretrained(str(folder))
    ref = _torch_model(transformers, torch, folder)
    enc = tok(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        h = ref(**enc).last_hidden_state
    m = enc["attention_mask"].unsqueeze(-1).float()
    mean = ((h * m).sum(1) / m.sum(1)).numpy()
    cls = h[:, 0].numpy()
    p = bert8.Pipeline(folder)
    np.testing.assert_allclose(p.embed(SENTENCES, pooling="mean"), mean, atol=1e-4)
    np.testing.assert_allclose(p.embed(SENTENCES, pooling="cls"), cls, atol=1e-4)
    unit = p.embed(SENTENCES, pooling="mean", normalize=True)
    np.testing.assert_allclose(unit, mean / np.linalg.norm(mean, axis=1, keepdims=True), atol=1e-5)
    tokens = p.embed_tokens(SENTENCES[:3])
    for i, t in enumerate(tokens):
        n = int(enc["attention_mask"][i].sum())
        np.testing.assert_allclose(t, h[i, :n].numpy(), atol=1e-4)


def test_sentence_encoder_encode():
    enc = bert8.SentenceEncoder(require(SST2))
    a = enc.encode(SENTENCES, batch_size=3)
    assert a.shape == (len(SENTENCES), enc.get_sentence_embedding_dimension()) and a.dtype == np.float32
    np.testing.assert_allclose(a, bert8.Pipeline(SST2).embed(SENTENCES), atol=1e-6)
    b = enc.encode(SENTENCES, normalize_embeddings=True, show_progress_bar=True)
    np.testing.assert_allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5)
    one = enc.encode(SENTENCES[0])
    assert one.shape == (a.shape[1],)
    np.testing.assert_allclose(one, a[0], atol=1e-6)
    assert enc.encode(SENTENCES, truncate_dim=16).shape == (len(SENTENCES), 16)


def test_rerank_orders_by_score():
    p = bert8.Pipeline(require(MODELS / "mrpc-distilbert-mini"))
    docs = SENTENCES[:6]
    ranked = p.rerank("The quick brown fox", docs, return_documents=True)
    scores = p.rerank_scores("The quick brown fox", docs)
    assert [r["corpus_id"] for r in ranked] == list(np.argsort(-scores, kind="stable"))
    assert ranked[0]["text"] == docs[ranked[0]["corpus_id"]]
    assert len(p.rerank("q", docs, top_k=2)) == 2
    pair = p.scores(["The quick brown fox"] * len(docs), docs)
    np.testing.assert_allclose(scores, pair[:, -1], atol=1e-6)


def test_an_empty_text_is_refused_by_name():
    """TEI refuses an empty input ("`inputs` cannot be empty"; a pair only when both texts are
    empty); the embedding and reranking calls raise the library's error naming it."""
    p = bert8.Pipeline(require(SST2))
    with pytest.raises(bert8.Error, match="text 1 is empty") as e:
        p.embed(["a film", ""])
    assert e.value.status == bert8.Status.INVALID_ARG
    with pytest.raises(bert8.Error, match="text 0 is empty"):
        bert8.SentenceEncoder(SST2).encode([""])
    assert p.embed(["", "a film"], text_pair=["a pair", ""]).shape[0] == 2
    r = bert8.Pipeline(require(MODELS / "mrpc-distilbert-mini"))
    with pytest.raises(bert8.Error, match="the query and text 0 are empty"):
        r.rerank("", ["", "b"])
    assert len(r.rerank("", ["b"])) == 1


def test_qa_answers_with_character_offsets():
    p = bert8.Pipeline(require(MODELS / "squad-bert-mini"))
    ctx = "Der Käse: The Broncos won the game in 2016 at Levi's Stadium in Santa Clara."
    ans = p.qa("Who won the game?", ctx)
    assert set(ans) == {"score", "start", "end", "answer"}
    assert ans["answer"] == ctx[ans["start"]: ans["end"]] and ans["answer"]
    many = p.qa(["Who won?", "Where?"], [ctx, ctx])
    assert len(many) == 2


def _tokcls_folder(tmp_path):
    """The golden token classifier with the golden e2e vocabulary (same size) beside it."""
    import shutil

    src, vocab = require(GOLDEN / "bert_tokcls"), require(GOLDEN / "bert_e2e")
    for f in ("config.json", "model.safetensors"):
        shutil.copyfile(src / f, tmp_path / f)
    for f in ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copyfile(vocab / f, tmp_path / f)
    return tmp_path


def test_ner_matches_the_transformers_pipeline(tmp_path, torch, transformers):
    folder = _tokcls_folder(tmp_path)
    p = bert8.Pipeline(folder)
    assert p.task == "ner"
    tok = transformers.AutoTokenizer.from_pretrained(str(folder))
    ref = _torch_model(transformers, torch, folder, "AutoModelForTokenClassification")
    texts = ["hello world this is a test of the system", "the quick brown fox jumps over the lazy dog"]
    for strategy in ("none", "simple", "first", "average", "max"):
        hf = transformers.pipeline("token-classification", model=ref, tokenizer=tok, aggregation_strategy=strategy)
        for text in texts:
            got, want = p.ner(text, aggregation_strategy=strategy), hf(text)
            key = "entity" if strategy == "none" else "entity_group"
            assert [(e[key], e["start"], e["end"]) for e in got] == [(w[key], w["start"], w["end"]) for w in want], strategy
            np.testing.assert_allclose([e["score"] for e in got], [float(w["score"]) for w in want], atol=1e-4)
            for e in got:
                assert e["word"] == text[e["start"]: e["end"]]


def _cli(args, stdin):
    cli = require(CLI)
    r = subprocess.run([str(cli), *args], input=stdin, capture_output=True, text=True, check=True)
    return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]


def test_classify_and_embed_equal_the_cli(clf):
    lines = _cli(["classify", str(SST2)], "\n".join(SENTENCES) + "\n")
    scores = clf.scores(SENTENCES)
    for row, line in zip(scores, lines):
        assert clf.labels[int(np.argmax(row))] == line["label"]
        np.testing.assert_allclose([line["scores"][l] for l in clf.labels], row, atol=1e-6)
    emb = _cli(["embed", str(SST2)], "\n".join(SENTENCES) + "\n")
    np.testing.assert_allclose(np.asarray([e["embedding"] for e in emb]), clf.embed(SENTENCES), atol=1e-6)


def test_tokenize_equals_the_cli():
    folder = require(MODELS / "xnli-xlmr-mini")
    tok = bert8.Tokenizer(folder)
    lines = _cli(["tokenize", str(folder)], "\n".join(json.dumps({"text": s}) for s in SENTENCES) + "\n")
    enc = tok(SENTENCES, return_offsets_mapping=True)
    for i, line in enumerate(lines):
        assert enc["input_ids"][i] == line["input_ids"]
        assert tok.convert_ids_to_tokens(line["input_ids"]) == line["tokens"]


def test_qa_equals_the_cli():
    folder = require(MODELS / "squad-bert-mini")
    ctx = "The Broncos won the game in 2016 at Levi's Stadium in Santa Clara."
    line = _cli(["qa", str(folder)], json.dumps({"question": "Who won?", "context": ctx}) + "\n")[0]
    ans = bert8.qa(folder, "Who won?", ctx)
    assert (ans["start"], ans["end"], ans["answer"]) == (line["start"], line["end"], line["answer"])
    assert abs(ans["score"] - line["score"]) < 1e-6
