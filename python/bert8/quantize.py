"""bert8.quantize: calibrate an FP32 folder on text and write an INT8 (SmoothQuant W8A8) folder,
as ``bert8 quantize`` does."""
from __future__ import annotations

import csv
import json
import os
from typing import Any, List, Optional, Sequence, Tuple, Union

import numpy as np

from .model import Model, PathLike
from .tokenizer import Tokenizer

Calib = Union[PathLike, Sequence[Union[str, Tuple[str, Optional[str]], dict]]]

_BATCH_ROWS = 16  # sequences per calibration batch, as the CLI


def read_calibration_file(path: PathLike, column: Optional[str] = None, limit: int = 0) -> List[Tuple[str, Optional[str]]]:
    """Calibration inputs of a file as the CLI reads them: one per line, plain text or a JSON
    object ``{"text": ..., "text_pair": ...}``; a ``.tsv`` file (or column given) is read by its
    header (column "sentence", else the first; "a,b" names a pair of columns)."""
    path = os.fspath(path)
    out: List[Tuple[str, Optional[str]]] = []
    with open(path, encoding="utf-8-sig", newline="") as f:
        if column or path.endswith(".tsv"):
            reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
            header = next(reader, [])
            names = (column or "sentence").split(",", 1)
            idx = [header.index(n) if n in header else -1 for n in names]
            if idx[0] < 0 and not column:
                idx[0] = 0
            if any(i < 0 for i in idx):
                raise ValueError(f"{path}: header has no column {column!r}")
            for row in reader:
                if all(i < len(row) for i in idx):
                    out.append((row[idx[0]], row[idx[1]] if len(idx) > 1 else None))
                if limit and len(out) >= limit:
                    break
        else:
            for n, line in enumerate(f, 1):
                line = line.rstrip("\r\n")
                if not line:
                    continue
                if line.startswith("{"):
                    obj = json.loads(line)
                    if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
                        raise ValueError(f'{path} line {n}: expected a JSON object with a "text" string')
                    pair = obj.get("text_pair")
                    out.append((obj["text"], pair if isinstance(pair, str) else None))
                else:
                    out.append((line, None))
                if limit and len(out) >= limit:
                    break
    if not out:
        raise ValueError(f"{path} holds no calibration text")
    return out


def _inputs(calib: Calib, limit: int) -> List[Tuple[str, Optional[str]]]:
    if isinstance(calib, (str, os.PathLike)):
        return read_calibration_file(calib, limit=limit)
    out: List[Tuple[str, Optional[str]]] = []
    for item in calib:
        if isinstance(item, str):
            out.append((item, None))
        elif isinstance(item, dict):
            out.append((item["text"], item.get("text_pair")))
        else:
            a, b = item
            out.append((a, b))
        if limit and len(out) >= limit:
            break
    if not out:
        raise ValueError("calib holds no text")
    return out


def quantize(
    src: PathLike,
    dst: Optional[PathLike],
    calib: Calib,
    scheme: str = "static",
    alpha: Union[float, str, None] = "auto",
    samples: int = 512,
    keep_fp32: Union[str, Sequence[str], None] = None,
    progress: bool = True,
    *,
    max_length: int = 128,
    threads: Optional[int] = None,
    attention: Optional[str] = None,
    embeddings: str = "fp32",
    weight_bits: int = 8,
    ffn_out: str = "dynamic",
    ffn_in: str = "dynamic",
    outliers: Optional[int] = None,
    lora_task: Optional[str] = None,
) -> Model:
    """Calibrates the FP32 model folder ``src`` on text, applies SmoothQuant and quantizes it to
    INT8 (W8A8); writes the result to ``dst`` (unless None) and returns it loaded.

    Args:
        src: an FP32 model folder with its tokenizer files.
        dst: the output folder (config.json, model.safetensors, quantization_config.json and
            the tokenizer files).
        calib: calibration text: a list of str (or (text, text_pair) tuples, or dicts with
            "text"/"text_pair"), or a file path read as ``bert8 quantize --calib`` reads it.
        scheme: "static" (activation scales calibrated ahead) or "dynamic" (per token at run time).
        alpha: SmoothQuant migration strength in [0, 1], "auto" (the default: a search per
            Linear group of each layer) or None (no smoothing: naive W8A8).
        samples: calibration sequences used at most.
        keep_fp32: glob pattern(s) of tensor names kept in FP32.
        progress: a progress bar on stderr.
        max_length: tokens per calibration sequence (truncated longest first).
        attention: "int8" (Q K^T and P V on int8 operands with calibrated scales), "fp32", or
            None (the default: INT8 where the head size is a multiple of 4), as
            ``bert8 quantize --attention``.
        embeddings: "int8" stores the word embedding rows as int8 with a scale per row, as
            ``bert8 quantize --embeddings``; "fp32" (the default) keeps them.
        weight_bits: 8 (the default) or 7: weights within [-64, 64], which CPUs without VNNI
            multiply on an exact vpmaddubsw path (about 1.3x the INT8 GEMM rate on AVX2) at
            half the weight resolution, as ``bert8 quantize --weight-bits``.
        ffn_out: with scheme "static", how FFN-out's input (the GELU output) is quantized:
            "dynamic" (the default: per token at run time, closest to FP32) or "static" (per
            tensor with a calibrated zero point: a few % faster), as ``bert8 quantize --ffn-out``.
        ffn_in: with scheme "static", how FFN-in's input (a LayerNorm output) is quantized:
            "dynamic" (the default since 2026-12-04: per token at run time) or "static" (per
            tensor: 1-2% faster, further from FP32 on real embedding models), as ``bert8
            quantize --ffn-in``.
        outliers: input channels of each per-token Linear kept in fp32, those of largest
            calibrated magnitude (None: the library's default, 4 with scheme "dynamic" and 0
            with "static"; 0: none; at most 64), as ``bert8 quantize --outliers``.
        lora_task: the LoRA task whose adapters are folded into the weights before calibration
            (Jina embeddings v3; ``bert8.Model(src, lora_task=...)``); the INT8 folder holds it
            folded and records it (``quantization_config.json`` "lora_task").
    """
    if scheme not in ("static", "dynamic"):
        raise ValueError(f"scheme must be 'static' or 'dynamic', not {scheme!r}")
    smooth = alpha is not None
    if alpha is None:
        a = 0.5
    elif alpha == "auto":
        a = -1.0
    elif isinstance(alpha, (int, float)) and 0.0 <= float(alpha) <= 1.0:
        a = float(alpha)
    else:
        raise ValueError(f'alpha must be a number in [0, 1], "auto" or None, not {alpha!r}')
    if samples < 1:
        raise ValueError("samples must be positive")
    if attention not in (None, "int8", "fp32"):
        raise ValueError(f"attention must be 'int8', 'fp32' or None, not {attention!r}")
    if embeddings not in ("int8", "fp32"):
        raise ValueError(f"embeddings must be 'int8' or 'fp32', not {embeddings!r}")
    if weight_bits not in (7, 8):
        raise ValueError(f"weight_bits must be 7 or 8, not {weight_bits!r}")
    if ffn_out not in ("dynamic", "static"):
        raise ValueError(f"ffn_out must be 'dynamic' or 'static', not {ffn_out!r}")
    if ffn_in not in ("dynamic", "static"):
        raise ValueError(f"ffn_in must be 'dynamic' or 'static', not {ffn_in!r}")
    if outliers is not None and (isinstance(outliers, bool) or not isinstance(outliers, int)
                                 or not 0 <= outliers <= 64):
        raise ValueError(f"outliers must be an integer in [0, 64] or None, not {outliers!r}")
    if isinstance(keep_fp32, (list, tuple)):
        keep_fp32 = ",".join(keep_fp32)
    model = Model(src, threads, lora_task=lora_task)
    tok = Tokenizer(src)
    info = model.info
    limit = min(max_length, info.max_seq_len) if info.max_seq_len > 0 else max_length
    inputs = _inputs(calib, samples)
    batches: List[Tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for i in range(0, len(inputs), _BATCH_ROWS):
        chunk = inputs[i: i + _BATCH_ROWS]
        pairs: Any = [b for _, b in chunk]
        enc = tok.encode_batch([t for t, _ in chunk], pairs if any(p is not None for p in pairs) else None,
                               truncation=True, max_length=limit)
        batches.append((enc["input_ids"], enc["attention_mask"], enc["token_type_ids"]))
    att = -1 if attention is None else int(attention == "int8")
    q = model._m.quantize(batches, 0 if scheme == "static" else 1, a, smooth, samples, keep_fp32, progress,
                          att, int(embeddings == "int8"), weight_bits, int(ffn_out == "dynamic"),
                          int(ffn_in == "dynamic"), -1 if outliers is None else outliers)
    result = Model._wrap(q, os.fspath(dst) if dst is not None else model.path)
    if dst is not None:
        result.save(dst)
    return result
