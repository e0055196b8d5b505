"""bert8 inside Ray Data (docs/scale-out.md): a callable class loads the model once per worker and
map_batches embeds a few thousand sentences on a local 2-CPU Ray instance; the embeddings equal
the single-process ones."""
from __future__ import annotations

import os

import numpy as np
import pytest

import bert8
from conftest import MODELS, SHARED, require

SST2 = MODELS / "sst2-bert-mini"


class Bert8Embedder:
    """Loads the model once per Ray worker; each call embeds one batch of sentences."""

    def __init__(self, path: str) -> None:
        self.encoder = bert8.SentenceEncoder(path, threads=1)

    def __call__(self, batch: dict) -> dict:
        batch["embedding"] = self.encoder.encode(list(batch["text"]), batch_size=256)
        return batch


def test_ray_data_embeddings_equal_single_process():
    ray = pytest.importorskip("ray")
    data = require(SHARED / "data" / "glue" / "SST-2.train90.tsv")
    texts = [line.split("\t")[0] for line in data.read_text(encoding="utf-8").splitlines()[1:3001]]
    want = bert8.SentenceEncoder(require(SST2)).encode(texts, batch_size=256)
    os.environ.setdefault("RAY_DISABLE_USAGE_STATS", "1")
    # the workers import this module (Bert8Embedder) from the tests folder
    here = os.path.dirname(os.path.abspath(__file__))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True,
             runtime_env={"env_vars": {"PYTHONPATH": here, "OMP_NUM_THREADS": "1"}})
    try:
        ds = ray.data.from_items([{"id": i, "text": t} for i, t in enumerate(texts)])
        ds = ds.map_batches(Bert8Embedder, fn_constructor_args=(str(SST2),), batch_size=500, num_cpus=1,
                            concurrency=2, batch_format="numpy")
        rows = ds.take_all()
    finally:
        ray.shutdown()
    assert len(rows) == len(texts)
    got = np.zeros_like(want)
    for r in rows:
        got[r["id"]] = r["embedding"]
    # the same model on the same text: equal up to the order of float sums across batch shapes
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)
