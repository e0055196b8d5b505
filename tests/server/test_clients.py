"""The real TEI clients, unchanged: huggingface_hub's InferenceClient and the OpenAI client."""
import base64
import math
import struct

import pytest

from conftest import CLS, EMB, SENTENCES, cli

hub = pytest.importorskip("huggingface_hub")
openai = pytest.importorskip("openai")


@pytest.fixture(scope="module")
def emb(serve):
    return serve(EMB)


@pytest.fixture(scope="module")
def cls(serve):
    return serve(CLS)


def test_inference_client_feature_extraction(emb):
    client = hub.InferenceClient(base_url=emb.url)
    got = client.feature_extraction(SENTENCES[0])
    ref = cli("embed", EMB, [{"text": SENTENCES[0]}], "--normalize")[0]["embedding"]
    assert got.shape == (1, 32)
    assert max(abs(a - b) for a, b in zip(got[0].tolist(), ref)) <= 1e-5
    raw = client.feature_extraction(SENTENCES[1], normalize=False)
    ref = cli("embed", EMB, [{"text": SENTENCES[1]}], "--no-normalize")[0]["embedding"]
    assert max(abs(a - b) for a, b in zip(raw[0].tolist(), ref)) <= 1e-5


def test_inference_client_sentence_similarity(emb):
    client = hub.InferenceClient(base_url=emb.url)
    got = client.sentence_similarity(SENTENCES[0], other_sentences=SENTENCES[1:4])
    want = emb.post("/similarity", {"inputs": {"source_sentence": SENTENCES[0], "sentences": SENTENCES[1:4]}}).json()
    assert len(got) == 3 and max(abs(a - b) for a, b in zip(got, want)) <= 1e-6


def test_inference_client_text_classification(cls):
    client = hub.InferenceClient(base_url=cls.url)
    ref = cli("classify", CLS, [{"text": t} for t in SENTENCES[:3]])
    for text, want in zip(SENTENCES[:3], ref):
        out = client.text_classification(text)
        # TEI answers [{score, label}, ...] for one text; this client takes element [0] of the
        # answer, so against TEI (and bert8) it returns the top prediction
        top = out[0] if isinstance(out, list) else out
        assert top.label == want["label"]
        assert abs(top.score - want["score"]) <= 1e-5


def test_openai_embeddings_float_and_base64(emb):
    client = openai.OpenAI(base_url=emb.url + "/v1", api_key="unused")
    ref = [x["embedding"] for x in cli("embed", EMB, [{"text": t} for t in SENTENCES[:3]], "--normalize")]
    # without encoding_format the client asks for base64 itself and decodes it to floats
    for fmt in ("float", None, "base64"):
        kw = {"encoding_format": fmt} if fmt else {}
        r = client.embeddings.create(input=SENTENCES[:3], model="bert8", **kw)
        assert [d.index for d in r.data] == [0, 1, 2]
        for d, want in zip(r.data, ref):
            v = d.embedding
            if fmt == "base64":  # asked for explicitly: the client hands over the string
                raw = base64.b64decode(v)
                v = list(struct.unpack("<%df" % (len(raw) // 4), raw))
            assert len(v) == 32
            assert max(abs(a - b) for a, b in zip(v, want)) <= 1e-5
        assert r.usage.prompt_tokens > 0
    one = client.embeddings.create(input="hello world", model="bert8", dimensions=8)
    v = one.data[0].embedding
    assert len(v) == 8 and abs(math.sqrt(sum(x * x for x in v)) - 1) < 1e-5


def test_openai_client_sees_errors(emb):
    client = openai.OpenAI(base_url=emb.url + "/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.UnprocessableEntityError):
        client.embeddings.create(input=["a"] * 33, model="bert8", encoding_format="float")
