"""SPLADE behind `bert8 serve`: POST /embed_sparse (TEI's route: [[{"index", "value"}]] per input)
on a masked-LM model made here from the golden bert_e2e encoder and a random masked-LM head, in
FP32 and INT8; checked against `bert8 embed --pooling splade`, which python/tests checks against
transformers on the real splade-tiny. A model without the head answers TEI's error."""
import json
import random
import shutil
import struct

import pytest

from conftest import EMB, SENTENCES, cli
from test_st_folder import write_safetensors

H = 32  # bert_e2e's hidden size


def _header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n))


@pytest.fixture(scope="module")
def mlm(tmp_path_factory):
    """bert_e2e with a masked-LM head (transform, LayerNorm, vocabulary bias; the decoder tied to
    the word embeddings) in a second shard, as a BertForMaskedLM folder."""
    d = tmp_path_factory.mktemp("mlm") / "bert_mlm"
    shutil.copytree(EMB, d)
    cfg = json.loads((d / "config.json").read_text())
    cfg["architectures"] = ["BertForMaskedLM"]
    (d / "config.json").write_text(json.dumps(cfg))
    V = cfg["vocab_size"]
    rng = random.Random(3)
    head = {
        "cls.predictions.transform.dense.weight": ([H, H], [rng.uniform(-0.4, 0.4) for _ in range(H * H)]),
        "cls.predictions.transform.dense.bias": ([H], [rng.uniform(-0.1, 0.1) for _ in range(H)]),
        "cls.predictions.transform.LayerNorm.weight": ([H], [1 + rng.uniform(-0.2, 0.2) for _ in range(H)]),
        "cls.predictions.transform.LayerNorm.bias": ([H], [rng.uniform(-0.2, 0.2) for _ in range(H)]),
        "cls.predictions.bias": ([V], [rng.uniform(-1.5, 0.5) for _ in range(V)]),
    }
    (d / "model.safetensors").rename(d / "model-00001-of-00002.safetensors")
    write_safetensors(d / "model-00002-of-00002.safetensors", head)
    weight_map = {k: "model-00001-of-00002.safetensors" for k in _header(d / "model-00001-of-00002.safetensors")
                  if k != "__metadata__"}
    weight_map.update({k: "model-00002-of-00002.safetensors" for k in head})
    (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return d


def _check(server, folder, texts):
    got = server.post("/embed_sparse", {"inputs": texts})
    assert got.status_code == 200, got.text
    got = got.json()
    want = [x["embedding"] for x in cli("embed", str(folder), [{"text": t} for t in texts], "--pooling", "splade")]
    assert len(got) == len(texts)
    for g, w in zip(got, want):
        assert [e["index"] for e in g] == [e["index"] for e in w]
        assert max(abs(a["value"] - b["value"]) for a, b in zip(g, w)) <= 1e-5
        assert all(e["value"] > 0 for e in g)
    return got


def test_embed_sparse_matches_the_cli(serve, mlm):
    s = serve(str(mlm))
    got = _check(s, mlm, SENTENCES)
    assert sum(len(g) for g in got) > 0
    one = s.post("/embed_sparse", {"inputs": SENTENCES[0]}).json()  # a single input: still a list of lists
    assert one == [got[0]]
    r = s.post("/embed_sparse", {"inputs": []})
    assert r.status_code == 400 and r.json()["error_type"] == "Empty"
    r = s.post("/embed_sparse", {"inputs": ["x " * 5000], "truncate": False})
    assert r.status_code == 422
    assert s.post("/embed", {"inputs": SENTENCES[:2]}).status_code == 200  # the encoder still embeds


def test_embed_sparse_int8(serve, mlm, tmp_path):
    calib = tmp_path / "calib.txt"
    calib.write_text("\n".join(SENTENCES * 4) + "\n")
    q = tmp_path / "q"
    cli_args = ["--calib", str(calib), "-o", str(q)]
    import subprocess

    from conftest import BIN
    subprocess.run([BIN, "quantize", str(mlm), *cli_args], check=True, capture_output=True)
    _check(serve(str(q)), q, SENTENCES[:4])


def test_embed_sparse_needs_a_masked_lm_head(serve):
    r = serve(EMB).post("/embed_sparse", {"inputs": ["hello"]})
    assert r.status_code in (400, 422, 424) and "masked-LM head" in r.json()["error"]


def test_pooling_splade_flag(serve, mlm):
    """TEI's --pooling splade: /embed_sparse as before, /embed refused by name; a model without the
    head does not start."""
    import subprocess

    from conftest import BIN
    s = serve(str(mlm), "--pooling", "splade")
    _check(s, mlm, SENTENCES[:3])
    r = s.post("/embed", {"inputs": "hello"})
    assert r.status_code >= 400 and "/embed_sparse" in r.json()["error"]
    p = subprocess.run([BIN, "serve", EMB, "--pooling", "splade", "--port", "0", "--hostname", "127.0.0.1"],
                       capture_output=True, timeout=60)
    assert p.returncode != 0 and b"masked-LM head" in p.stderr
