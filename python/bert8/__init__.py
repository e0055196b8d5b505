"""bert8: BERT-family encoders (BERT, DistilBERT, XLM-R; FP32 and INT8) on CPUs, from Python.

    import bert8
    clf = bert8.Pipeline("models/sst2-bert-mini")
    print(clf.classify(["a great film", "a dull film"]))

The package is a CPython extension (bert8._bert8) over the C library's public API, plus the
Pythonic layer of this folder: Model (forward on token ids), Tokenizer (Hugging Face fast
tokenizer calling convention), Pipeline and the task functions (classify, embed, rerank, qa,
ner), SentenceEncoder (sentence-transformers' encode) and quantize (INT8). See docs/python.md.
"""
from __future__ import annotations

from . import _bert8
from ._errors import Error, Status
from .model import Model, ModelInfo
from .pipelines import Pipeline, SentenceEncoder, classify, embed, ner, qa, rerank
from .quantize import quantize, read_calibration_file
from .tokenizer import BatchEncoding, Tokenizer

_bert8._set_error_type(Error)

__version__ = _bert8.version()


def physical_cores() -> int:
    """The machine's physical cores (the default thread count)."""
    return int(_bert8.physical_cores())


__all__ = [
    "BatchEncoding",
    "Error",
    "Model",
    "ModelInfo",
    "Pipeline",
    "SentenceEncoder",
    "Status",
    "Tokenizer",
    "classify",
    "embed",
    "ner",
    "physical_cores",
    "qa",
    "quantize",
    "read_calibration_file",
    "rerank",
    "__version__",
]
