"""Every route of `bert8 serve` against the CLI and the library's outputs on the same texts."""
import base64
import math
import struct

import pytest

from conftest import CLS, EMB, RERANK, SENTENCES, XLMR, cli


@pytest.fixture(scope="session")
def emb(serve):
    return serve(EMB, "--max-client-batch-size", "100", "--max-concurrent-requests", "200")


@pytest.fixture(scope="session")
def cls(serve):
    return serve(CLS)


@pytest.fixture(scope="session")
def rerank(serve):
    return serve(RERANK)


@pytest.fixture(scope="session")
def emb8(serve, int8_dirs):
    return serve(int8_dirs["emb"])


@pytest.fixture(scope="session")
def cls8(serve, int8_dirs):
    return serve(int8_dirs["cls"])


def close(a, b, tol):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        if isinstance(x, list):
            close(x, y, tol)
        else:
            assert abs(x - y) <= tol, (x, y)


def softmax(v):
    m = max(v)
    e = [math.exp(x - m) for x in v]
    return [x / sum(e) for x in e]


# ---- health, info, metrics ------------------------------------------------------------------

def test_health_and_get_root(emb):
    assert emb.get("/health").status_code == 200
    assert emb.get("/").status_code == 200
    assert emb.get("/ping").status_code == 200


def test_info_describes_model_and_limits(emb, cls, rerank, emb8):
    i = emb.get("/info").json()
    assert i["model_dtype"] == "float32" and i["quantization"] is None
    assert i["model_type"] == {"embedding": {"pooling": "mean"}}
    assert i["max_input_length"] == 128 and i["max_batch_tokens"] == 16384
    assert i["max_client_batch_size"] == 100 and i["max_concurrent_requests"] == 200
    assert i["max_batch_requests"] is None and isinstance(i["version"], str)
    c = cls.get("/info").json()["model_type"]
    assert c == {"classifier": {"id2label": {"0": "negative", "1": "positive"},
                                "label2id": {"negative": 0, "positive": 1}}}
    assert "reranker" in rerank.get("/info").json()["model_type"]
    q = emb8.get("/info").json()
    assert q["model_dtype"] == "int8" and q["quantization"] == "static"


def test_metrics_has_counts_and_histograms(emb):
    emb.post("/embed", {"inputs": "metrics please"})
    emb.post("/embed", {"inputs": []})
    text = emb.get("/metrics").text
    for name in ("bert8_http_requests_total{route=\"/embed\",status=\"200\"}",
                 "bert8_http_requests_total{route=\"/embed\",status=\"400\"}",
                 "te_request_duration_bucket", "te_request_queue_duration_bucket",
                 "te_request_tokenization_duration_bucket", "te_request_inference_duration_bucket",
                 "te_batch_next_size_bucket", "te_batch_next_tokens_bucket", "te_queue_size",
                 "process_resident_memory_bytes"):
        assert name in text, name


# ---- embeddings -----------------------------------------------------------------------------

@pytest.mark.parametrize("which", ["fp32", "int8"])
def test_embed_equals_cli(which, emb, emb8, int8_dirs):
    srv, model = (emb, EMB) if which == "fp32" else (emb8, int8_dirs["emb"])
    tol = 1e-5 if which == "fp32" else 0.0
    r = srv.post("/embed", {"inputs": SENTENCES})
    assert r.status_code == 200
    ref = [x["embedding"] for x in cli("embed", model, [{"text": t} for t in SENTENCES], "--normalize")]
    close(r.json(), ref, tol)
    raw = srv.post("/embed", {"inputs": SENTENCES, "normalize": False}).json()
    ref = [x["embedding"] for x in cli("embed", model, [{"text": t} for t in SENTENCES], "--no-normalize")]
    close(raw, ref, tol)
    for h in ("x-compute-time", "x-compute-tokens", "x-queue-time", "x-inference-time", "x-tokenization-time"):
        assert h in r.headers


def test_embed_single_string_is_2d_and_identical_to_batch(emb):
    one = emb.post("/embed", {"inputs": SENTENCES[0]}).json()
    assert len(one) == 1 and isinstance(one[0][0], float)
    assert one[0] == emb.post("/embed", {"inputs": [SENTENCES[0]]}).json()[0]


def test_embed_dimensions_truncate_then_normalize(emb):
    full = emb.post("/embed", {"inputs": "matryoshka", "normalize": False}).json()[0]
    d8 = emb.post("/embed", {"inputs": "matryoshka", "dimensions": 8}).json()[0]
    assert len(d8) == 8
    n = math.sqrt(sum(x * x for x in full[:8]))
    close(d8, [x / n for x in full[:8]], 1e-6)
    assert emb.post("/embed", {"inputs": "x", "dimensions": 0}).status_code == 422
    assert emb.post("/embed", {"inputs": "x", "dimensions": 33}).status_code == 422
    assert emb.post("/embed", {"inputs": "x", "dimensions": None}).status_code == 200


def test_embed_truncation_direction(emb):
    long = " ".join(["word%d" % i for i in range(300)])
    right = emb.post("/embed", {"inputs": long, "truncation_direction": "right"}).json()
    left = emb.post("/embed", {"inputs": long, "truncation_direction": "Left"}).json()
    assert emb.post("/embed", {"inputs": long, "truncation_direction": "Right"}).json() == right
    assert left != right
    r = emb.post("/embed", {"inputs": long, "truncate": False})
    assert r.status_code == 422 and r.json()["error_type"] == "Validation"
    assert "128" in r.json()["error"]
    assert emb.post("/embed", {"inputs": long, "truncation_direction": "middle"}).status_code == 422


def test_embed_all_per_token_states(emb):
    r = emb.post("/embed_all", {"inputs": ["hello world", "a"]})
    assert r.status_code == 200
    out = r.json()
    toks = emb.post("/tokenize", {"inputs": ["hello world", "a"]}).json()
    assert [len(x) for x in out] == [len(t) for t in toks]
    assert all(len(row) == 32 for x in out for row in x)
    # mean pooling of the token states is the (unnormalized) sentence embedding
    pooled = emb.post("/embed", {"inputs": ["hello world"], "normalize": False}).json()[0]
    mean = [sum(col) / len(out[0]) for col in zip(*out[0])]
    close(mean, pooled, 1e-5)


def test_similarity_is_cosine_of_embeddings(emb):
    body = {"inputs": {"source_sentence": SENTENCES[0], "sentences": SENTENCES[1:4]}}
    r = emb.post("/similarity", body)
    assert r.status_code == 200
    v = emb.post("/embed", {"inputs": SENTENCES[:4], "normalize": False}).json()

    def cos(a, b):
        return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))
    close(r.json(), [cos(v[0], v[i]) for i in range(1, 4)], 1e-6)
    empty = emb.post("/similarity", {"inputs": {"source_sentence": "a", "sentences": []}})
    assert empty.status_code == 400 and empty.json()["error_type"] == "Empty"


def test_openai_route_float_and_base64(emb):
    ref = emb.post("/embed", {"inputs": SENTENCES[:3]}).json()
    r = emb.post("/v1/embeddings", {"input": SENTENCES[:3], "model": "whatever"})
    assert r.status_code == 200
    j = r.json()
    assert j["object"] == "list" and j["model"].endswith("bert_e2e")
    assert [d["index"] for d in j["data"]] == [0, 1, 2] and all(d["object"] == "embedding" for d in j["data"])
    assert [d["embedding"] for d in j["data"]] == ref
    assert j["usage"]["prompt_tokens"] == j["usage"]["total_tokens"] > 0
    b = emb.post("/v1/embeddings", {"input": SENTENCES[0], "encoding_format": "base64"}).json()
    raw = base64.b64decode(b["data"][0]["embedding"])
    vals = list(struct.unpack("<%df" % (len(raw) // 4), raw))
    assert vals == [struct.unpack("<f", struct.pack("<f", x))[0] for x in ref[0]]
    assert emb.post("/embeddings", {"input": "x", "dimensions": 4}).json()["data"][0]["embedding"].__len__() == 4
    bad = emb.post("/v1/embeddings", {"input": "x", "encoding_format": "hex"})
    assert bad.status_code == 422 and bad.json()["type"] == "Validation" and bad.json()["code"] == 422


def test_tokenize_and_decode(emb, cls):
    t = emb.post("/tokenize", {"inputs": "hello world!"}).json()[0]
    ref = cli("tokenize", EMB, [{"text": "hello world!"}])[0]
    want = ref["input_ids"][0] if isinstance(ref["input_ids"][0], list) else ref["input_ids"]
    assert [x["id"] for x in t] == want
    assert t[0]["special"] and t[0]["start"] is None and t[0]["text"] == "[CLS]"
    assert t[1] == {"id": t[1]["id"], "text": "hello", "special": False, "start": 0, "stop": 5}
    nospec = emb.post("/tokenize", {"inputs": ["hello world!"], "add_special_tokens": False}).json()[0]
    assert [x["id"] for x in nospec] == [x["id"] for x in t[1:-1]]
    ids = [x["id"] for x in t]
    assert emb.post("/decode", {"ids": ids}).json() == ["hello world!"]
    assert emb.post("/decode", {"ids": [ids, ids[1:2]], "skip_special_tokens": False}).json()[0].startswith("[CLS]")
    assert emb.post("/decode", {"ids": [-1]}).status_code == 422
    assert emb.post("/decode", {"ids": "nope"}).status_code == 422
    # byte offsets into the UTF-8 text
    u = emb.post("/tokenize", {"inputs": "café x"}).json()[0]
    assert u[-2]["text"] == "x" and u[-2]["start"] == len("café ".encode())


# ---- classification and reranking -------------------------------------------------------------

@pytest.mark.parametrize("which", ["fp32", "int8"])
def test_predict_equals_cli(which, cls, cls8, int8_dirs):
    srv, model = (cls, CLS) if which == "fp32" else (cls8, int8_dirs["cls"])
    tol = 1e-5 if which == "fp32" else 0.0
    ref = cli("classify", model, [{"text": t} for t in SENTENCES])
    r = srv.post("/predict", {"inputs": [[t] for t in SENTENCES]})
    assert r.status_code == 200
    for preds, want in zip(r.json(), ref):
        assert [p["score"] for p in preds] == sorted([p["score"] for p in preds], reverse=True)
        got = {p["label"]: p["score"] for p in preds}
        close([got["negative"], got["positive"]], [want["scores"]["negative"], want["scores"]["positive"]], tol)
    single = srv.post("/predict", {"inputs": SENTENCES[0]}).json()
    assert isinstance(single[0], dict) and single[0]["label"] == ref[0]["label"]
    raw = srv.post("/predict", {"inputs": SENTENCES[0], "raw_scores": True}).json()
    logits = {p["label"]: p["score"] for p in raw}
    close(softmax([logits["negative"], logits["positive"]]),
          [ref[0]["scores"]["negative"], ref[0]["scores"]["positive"]], 1e-5)


def test_predict_pairs_and_mixed_batch(cls):
    ref = cli("classify", CLS, [{"text": "a fine film", "text_pair": "i liked it"}, {"text": "awful"}])
    pair = cls.post("/predict", {"inputs": ["a fine film", "i liked it"]}).json()
    assert isinstance(pair[0], dict)
    close([{p["label"]: p["score"] for p in pair}["positive"]], [ref[0]["scores"]["positive"]], 1e-5)
    mixed = cls.post("/predict", {"inputs": [["a fine film", "i liked it"], ["awful"]]}).json()
    assert len(mixed) == 2
    close([{p["label"]: p["score"] for p in mixed[1]}["positive"]], [ref[1]["scores"]["positive"]], 1e-5)
    assert cls.post("/predict", {"inputs": ["a", "b", "c"]}).status_code == 422
    assert cls.post("/predict", {"inputs": [["a", "b", "c"]]}).status_code == 422
    assert cls.post("/predict", {"inputs": []}).status_code == 422


def test_predict_three_labels_xlmr(serve):
    x = serve(XLMR)
    out = x.post("/predict", {"inputs": "hola mundo"}).json()
    ref = cli("classify", XLMR, [{"text": "hola mundo"}])[0]
    assert len(out) == 3
    got = {p["label"]: p["score"] for p in out}
    close([got[k] for k in sorted(got)], [ref["scores"][k] for k in sorted(ref["scores"])], 1e-5)


def test_rerank_scores_sorted_and_equal_to_cross_encoder(rerank):
    q = "a movie about brothers"
    texts = SENTENCES[:5]
    logits = [x["score"] for x in cli("classify", RERANK, [{"text": q, "text_pair": t} for t in texts])]
    r = rerank.post("/rerank", {"query": q, "texts": texts, "return_text": True})
    assert r.status_code == 200
    ranks = r.json()
    assert [x["score"] for x in ranks] == sorted([x["score"] for x in ranks], reverse=True)
    for x in ranks:
        assert x["text"] == texts[x["index"]]
        assert abs(x["score"] - 1 / (1 + math.exp(-logits[x["index"]]))) <= 1e-6
    raw = rerank.post("/rerank", {"query": q, "texts": texts, "raw_scores": True}).json()
    for x in raw:
        assert "text" not in x and abs(x["score"] - logits[x["index"]]) <= 1e-5
    e = rerank.post("/rerank", {"query": q, "texts": []})
    assert e.status_code == 400 and e.json()["error_type"] == "Empty"
    # a reranker also answers /predict (one label, sigmoid)
    p = rerank.post("/predict", {"inputs": [q, texts[0]]}).json()
    assert abs(p[0]["score"] - 1 / (1 + math.exp(-logits[0]))) <= 1e-6


def test_routes_follow_the_model_type(emb, cls, rerank):
    for srv, path, body in ((cls, "/rerank", {"query": "q", "texts": ["a"]}),
                            (emb, "/rerank", {"query": "q", "texts": ["a"]}),
                            (emb, "/predict", {"inputs": "a"}),
                            (cls, "/embed", {"inputs": "a"}),
                            (rerank, "/v1/embeddings", {"input": "a"}),
                            (cls, "/similarity", {"inputs": {"source_sentence": "a", "sentences": ["b"]}})):
        r = srv.post(path, body)
        assert r.status_code == 424, (path, r.text)
        assert (r.json().get("error_type") or r.json().get("type")) == "Backend"


def test_post_root_is_the_default_task(emb, cls, rerank):
    assert emb.post("/", {"inputs": "x"}).json() == emb.post("/embed", {"inputs": "x"}).json()
    sim = {"inputs": {"source_sentence": "a", "sentences": ["b"]}}
    assert emb.post("/", sim).json() == emb.post("/similarity", sim).json()
    assert cls.post("/", {"inputs": "x"}).json() == cls.post("/predict", {"inputs": "x"}).json()
    rr = {"query": "q", "texts": ["a", "b"]}
    assert rerank.post("/", rr).json() == rerank.post("/rerank", rr).json()
    assert rerank.post("/invocations", rr).json() == rerank.post("/rerank", rr).json()


def test_unknown_route_and_method(emb):
    assert emb.post("/nope", {}).status_code == 404
    assert emb.get("/embed").status_code == 405
    assert emb.post("/health", {}).status_code == 405
