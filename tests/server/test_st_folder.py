"""A sentence-transformers folder behind `bert8 serve`: prompts (prompt_name on /embed, /embed_all,
/similarity, /tokenize and the OpenAI route; TEI's error for an unknown name), --default-prompt(-name),
--dense-path, --served-model-name, every pooling name, and GET /docs and /openapi.json. The
embeddings are checked against `bert8 embed`, which python/tests/test_st_folders.py checks against
sentence-transformers itself."""
import json
import random
import shutil
import struct
import subprocess

import pytest
import requests

from conftest import BIN, EMB, SENTENCES, SLOW, cli

hub = pytest.importorskip("huggingface_hub")
openai = pytest.importorskip("openai")

H = 32  # bert_e2e's hidden size
PROMPTS = {"query": "query: ", "passage": "passage: ", "empty": ""}


def write_safetensors(path, tensors):
    """tensors: name -> (shape, floats); F32, as safetensors lays them out."""
    header, blobs, off = {}, [], 0
    for name, (shape, vals) in tensors.items():
        b = struct.pack("<%df" % len(vals), *vals)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def write_dense(d, n_in, n_out, act, seed):
    d.mkdir()
    rng = random.Random(seed)
    (d / "config.json").write_text(json.dumps({"in_features": n_in, "out_features": n_out, "bias": True,
                                               "activation_function": act}))
    write_safetensors(d / "model.safetensors", {
        "linear.weight": ([n_out, n_in], [rng.uniform(-0.3, 0.3) for _ in range(n_in * n_out)]),
        "linear.bias": ([n_out], [rng.uniform(-0.1, 0.1) for _ in range(n_out)])})


def st_folder(root, name, dense="2_Dense", pooling="weightedmean", include_prompt=False):
    d = root / name
    shutil.copytree(EMB, d)
    mods = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": dense, "type": "sentence_transformers.models.Dense"},
            {"idx": 3, "name": "3", "path": "3_Normalize", "type": "sentence_transformers.models.Normalize"}]
    (d / "modules.json").write_text(json.dumps(mods))
    (d / "1_Pooling").mkdir()
    (d / "1_Pooling" / "config.json").write_text(json.dumps(
        {"embedding_dimension": H, "pooling_mode": pooling, "include_prompt": include_prompt}))
    write_dense(d / "2_Dense", H, 16, "torch.nn.modules.activation.Tanh", 1)
    write_dense(d / "2_Dense_8", H, 8, "torch.nn.modules.linear.Identity", 2)
    (d / "config_sentence_transformers.json").write_text(json.dumps(
        {"prompts": PROMPTS, "default_prompt_name": "query", "similarity_fn_name": "cosine"}))
    (d / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 64, "do_lower_case": False}))
    return d


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("st")
    return {"st": st_folder(root, "st"), "st8": st_folder(root, "st8", dense="2_Dense_8")}


@pytest.fixture(scope="module")
def st(serve, folders):
    return serve(str(folders["st"]), "--served-model-name", "my-model")


def close(a, b, tol=1e-5):
    assert len(a) == len(b)
    return max(abs(x - y) for x, y in zip(a, b)) <= tol


def ref(folder, texts, *args):
    return [x["embedding"] for x in cli("embed", str(folder), [{"text": t} for t in texts], *args)]


def test_prompt_name_on_embed_matches_the_cli(st, folders):
    texts = SENTENCES[:4]
    for name in ("query", "passage"):
        got = st.post("/embed", {"inputs": texts, "prompt_name": name}).json()
        assert len(got[0]) == 16
        for g, w in zip(got, ref(folders["st"], texts, "--prompt-name", name)):
            assert close(g, w)
    # TEI applies no prompt unless the request or a flag names one (not the folder's default)
    plain = st.post("/embed", {"inputs": texts}).json()
    for g, w in zip(plain, ref(folders["st"], texts, "--prompt", "")):
        assert close(g, w)
    query = st.post("/embed", {"inputs": texts, "prompt_name": "query"}).json()
    assert not close(plain[0], query[0], 1e-3)  # the prompt changes the embedding
    empty = st.post("/embed", {"inputs": texts, "prompt_name": "empty"}).json()
    assert all(close(a, b) for a, b in zip(empty, plain))


def test_unknown_prompt_name_is_teis_422(st, serve):
    r = st.post("/embed", {"inputs": "a", "prompt_name": "nope"})
    assert r.status_code == 422, r.text
    j = r.json()
    assert j["error_type"] == "Validation"
    assert j["error"].startswith("`default-prompt-name` is set to `nope` but it was not found in the Sentence "
                                 "Transformers prompts. Available prompts: [")
    assert '"query"' in j["error"]
    r = st.post("/embed", {"inputs": "a", "prompt_name": 3})
    assert r.status_code == 422
    # a folder without prompts: TEI's other sentence
    plain = serve(EMB)
    r = plain.post("/embed", {"inputs": "a", "prompt_name": "query"})
    assert r.status_code == 422
    assert "no prompts were found in the Sentence Transformers configuration" in r.json()["error"]
    r = st.post("/v1/embeddings", {"input": "a", "prompt_name": "nope"})
    assert r.status_code == 422 and "message" in r.json()


def test_prompt_name_on_other_routes(st, folders):
    texts = SENTENCES[:3]
    want = ref(folders["st"], texts, "--prompt-name", "passage")
    client = hub.InferenceClient(base_url=st.url)
    got = client.feature_extraction(texts[0], prompt_name="passage")
    assert close(got[0].tolist(), want[0])
    oa = openai.OpenAI(base_url=st.url + "/v1", api_key="unused")
    r = oa.embeddings.create(input=texts, model="x", encoding_format="float", extra_body={"prompt_name": "passage"})
    assert r.model == "my-model"
    assert all(close(d.embedding, w) for d, w in zip(r.data, want))
    # the prompt's tokens count in usage
    plain = oa.embeddings.create(input=texts, model="x", encoding_format="float")
    assert r.usage.prompt_tokens > plain.usage.prompt_tokens
    sim = st.post("/similarity", {"inputs": {"source_sentence": texts[0], "sentences": texts[1:]},
                                  "parameters": {"prompt_name": "passage"}}).json()
    raw = ref(folders["st"], texts, "--prompt-name", "passage", "--no-normalize")
    dot = lambda a, b: sum(x * y for x, y in zip(a, b))
    for s, v in zip(sim, raw[1:]):
        assert abs(s - dot(raw[0], v) / (dot(raw[0], raw[0]) * dot(v, v)) ** 0.5) <= 1e-5
    toks = st.post("/tokenize", {"inputs": "hello world", "prompt_name": "query"}).json()[0]
    plain = st.post("/tokenize", {"inputs": "hello world"}).json()[0]
    joined = st.post("/tokenize", {"inputs": "query: hello world"}).json()[0]
    assert toks == joined and len(toks) > len(plain)  # TEI tokenizes prompt + text
    nospec = st.post("/tokenize", {"inputs": "hello world", "prompt_name": "query",
                                   "add_special_tokens": False}).json()[0]
    assert len(nospec) == len(toks) - 2 and not any(t["special"] for t in nospec)
    all_tok = st.post("/embed_all", {"inputs": "hello world", "prompt_name": "query"}).json()[0]
    assert len(all_tok) == len(toks) and len(all_tok[0]) == H


def test_default_prompt_flags(serve, folders):
    texts = SENTENCES[:2]
    by_name = serve(str(folders["st"]), "--default-prompt-name", "passage")
    by_text = serve(str(folders["st"]), "--default-prompt", "passage: ")
    want = ref(folders["st"], texts, "--prompt-name", "passage")
    for s in (by_name, by_text):
        got = s.post("/embed", {"inputs": texts}).json()
        assert all(close(g, w) for g, w in zip(got, want))
        # a request's own prompt_name wins
        q = s.post("/embed", {"inputs": texts, "prompt_name": "query"}).json()
        assert all(close(g, w) for g, w in zip(q, ref(folders["st"], texts, "--prompt-name", "query")))
    for args, why in ((["--default-prompt-name", "nope"], "not found in the Sentence Transformers prompts"),
                      (["--default-prompt-name", "query", "--default-prompt", "x"], "cannot be used together")):
        p = subprocess.run([BIN, "serve", str(folders["st"]), "--port", "0", *args], capture_output=True,
                           timeout=60 * SLOW)
        assert p.returncode != 0 and why in p.stderr.decode(), p.stderr.decode()


def test_dense_path_picks_another_dense_module(serve, folders):
    s = serve(str(folders["st"]), "--dense-path", "2_Dense_8")
    got = s.post("/embed", {"inputs": SENTENCES[:3]}).json()
    want = ref(folders["st8"], SENTENCES[:3], "--prompt", "")
    assert len(got[0]) == 8 and all(close(g, w) for g, w in zip(got, want))
    r = s.post("/embed", {"inputs": "a", "dimensions": 9})
    assert r.status_code == 422
    p = subprocess.run([BIN, "serve", str(folders["st"]), "--port", "0", "--dense-path", "no_such_dense"],
                       capture_output=True, timeout=60 * SLOW)
    assert p.returncode != 0 and "no_such_dense" in p.stderr.decode()


@pytest.mark.parametrize("pooling", ["cls", "mean", "max", "last-token", "weightedmean", "mean_sqrt_len_tokens"])
def test_pooling_flag_names(serve, pooling):
    s = serve(EMB, "--pooling", pooling)
    got = s.post("/embed", {"inputs": SENTENCES[:2], "normalize": False}).json()
    cli_name = "lasttoken" if pooling == "last-token" else pooling
    want = ref(EMB, SENTENCES[:2], "--pooling", cli_name, "--no-normalize")
    assert all(close(g, w) for g, w in zip(got, want))
    info = s.get("/info").json()
    assert info["model_type"]["embedding"]["pooling"] == {"last-token": "last_token"}.get(pooling, pooling)


def test_docs_and_openapi_describe_every_route(st):
    r = st.get("/docs")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "swagger-ui" in r.text and "/openapi.json" in r.text
    for path in ("/openapi.json", "/api-doc/openapi.json"):
        r = st.get(path)
        assert r.status_code == 200 and r.headers["content-type"] == "application/json"
        doc = r.json()
        assert doc["openapi"].startswith("3.") and doc["info"]["version"] != "@VERSION@"
    served = {"/", "/health", "/ping", "/info", "/metrics", "/embed", "/embed_all", "/predict", "/rerank",
              "/similarity", "/tokenize", "/decode", "/v1/embeddings", "/embeddings", "/invocations", "/docs",
              "/openapi.json"}
    assert served <= set(doc["paths"])
    for path in doc["paths"]:  # and nothing it describes is missing
        method = "post" if "post" in doc["paths"][path] else "get"
        r = requests.request(method, st.url + path, json={} if method == "post" else None, timeout=30 * SLOW)
        assert r.status_code != 404, path
    embed = doc["components"]["schemas"]["EmbedRequest"]["properties"]
    assert {"inputs", "truncate", "truncation_direction", "prompt_name", "normalize", "dimensions"} <= set(embed)
    assert "add_special_tokens" in doc["components"]["schemas"]["TokenizeRequest"]["properties"]


def test_served_model_name_in_info_and_openai(st):
    assert st.get("/info").json()["served_model_name"] == "my-model"


def test_token_id_inputs_as_tei(st, folders):
    text = "the quick brown fox"
    ids = [t["id"] for t in st.post("/tokenize", {"inputs": text}).json()[0]]
    by_text = st.post("/embed", {"inputs": text}).json()[0]
    for body in ({"inputs": ids}, {"inputs": [ids, text]}):
        got = st.post("/embed", body).json()
        assert all(close(g, by_text) for g in got)
    # with a prompt TEI decodes the ids and tokenizes prompt + text
    want = st.post("/embed", {"inputs": text, "prompt_name": "query"}).json()[0]
    assert close(st.post("/embed", {"inputs": [ids], "prompt_name": "query"}).json()[0], want)
    oa = st.post("/v1/embeddings", {"input": [ids], "encoding_format": "float"}).json()
    assert close(oa["data"][0]["embedding"], by_text) and oa["usage"]["prompt_tokens"] == len(ids)
    long = ids[:1] + ids[1:-1] * 40 + ids[-1:]
    assert st.post("/embed", {"inputs": [long]}).status_code == 200  # truncated to max_input_length
    r = st.post("/embed", {"inputs": [long], "truncate": False})
    assert r.status_code == 422 and "must have less than" in r.json()["error"]
    r = st.post("/embed", {"inputs": [[1, 10 ** 9]]})
    assert r.status_code == 422 and "token id in [0," in r.json()["error"]
    assert st.post("/tokenize", {"inputs": [ids]}).status_code == 422  # TEI's /tokenize takes text only
    r = st.post("/embed", {"inputs": [[]]})
    assert r.status_code == 400 and r.json() == {"error": "`inputs` cannot be empty", "error_type": "Empty"}
