"""Shared paths and oracles for the bert8 Python tests: the golden checkpoints in ../shared,
the models in models/, and transformers + torch from pip as the reference."""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
SHARED = pathlib.Path(os.environ.get("BERT8_SHARED_DIR", REPO.parent / "shared"))
GOLDEN = SHARED / "golden" / "models"
MODELS = REPO / "models"
CLI = pathlib.Path(os.environ.get("BERT8_CLI", REPO / "build" / "bert8"))

GOLDEN_MODELS = sorted(p.name for p in GOLDEN.iterdir()) if GOLDEN.is_dir() else []
REPO_MODELS = sorted(p.name for p in MODELS.iterdir() if (p / "config.json").exists()) if MODELS.is_dir() else []

SENTENCES = [
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "A thoroughly enjoyable film with a sharp script and a warm heart.",
    "The service was slow, the food was cold, and nobody seemed to care.",
    "naïve café owners in Zürich don't like  double  spaces",
    "Prices rose by 3.5% in the third quarter, according to the report.",
    "It's not the worst thing I've seen this year, but it comes close.",
    "Émile a visité São Paulo et Kraków en 2019 — c'était génial!",
    "短い日本語の文と English mixed",
    "unbelievably unaffordable counterrevolutionaries",
]


def require(path: pathlib.Path) -> pathlib.Path:
    if not path.exists():
        pytest.skip(f"{path} is not there")
    return path


@pytest.fixture(scope="session")
def torch():
    return pytest.importorskip("torch")


@pytest.fixture(scope="session")
def transformers():
    return pytest.importorskip("transformers")


def golden_cases(name: str) -> dict:
    with open(GOLDEN / name / "cases.json", encoding="utf-8") as f:
        return json.load(f)


def tokenizer_folder(tmp_root: pathlib.Path, name: str, vocab: pathlib.Path, config: dict) -> pathlib.Path:
    """A model folder holding only a tokenizer (vocab file + tokenizer_config.json)."""
    d = tmp_root / name
    d.mkdir(parents=True, exist_ok=True)
    target = "sentencepiece.bpe.model" if vocab.suffix == ".model" else "vocab.txt"
    if not (d / target).exists():
        shutil.copyfile(vocab, d / target)
    (d / "tokenizer_config.json").write_text(json.dumps(config))
    return d


sys.path.insert(0, str(pathlib.Path(__file__).parent))
