"""Task pipelines over lists of texts (bert8_pipeline.h): classify, embed, rerank, qa, ner, and
a sentence-transformers-style SentenceEncoder. Results use the names and shapes of the
transformers pipelines and sentence-transformers."""
from __future__ import annotations

import functools
import os
import sys
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np

from . import _bert8

PathLike = Union[str, "os.PathLike[str]"]
Texts = Union[str, Sequence[str]]

_POOLING = {None: 0, "default": 0, "cls": 1, "mean": 2, "max": 3, "mean_sqrt_len_tokens": 4, "weightedmean": 5,
            "lasttoken": 6}
_POOLING_NAMES = "'cls', 'mean', 'max', 'mean_sqrt_len_tokens', 'weightedmean', 'lasttoken' or None"
_SCORE_FN = {None: 0, "auto": 0, "softmax": 1, "sigmoid": 2, "none": 3}
_AGGREGATION = {"none": 0, "simple": 1, "first": 2, "average": 3, "max": 4}


def _normalize_flag(v: Optional[bool]) -> int:
    return -1 if v is None else int(bool(v))


def _as_list(texts: Texts, name: str) -> List[str]:
    if isinstance(texts, str):
        return [texts]
    if isinstance(texts, (bytes, bytearray)):
        raise TypeError(f"{name} must be str or a list of str, not bytes")
    return list(texts)


class Pipeline:
    """A model folder and its tokenizer with the task logic of bert8_pipeline: batching longest
    first under a token budget (padding-free), truncation, pooling, QA windows, NER aggregation.
    Thread-safe: any number of Python threads may call one Pipeline at once (the GIL is released
    while it tokenizes and computes).

    Args:
        path: the model folder.
        threads: threads per call (default: the physical cores).
        max_batch_tokens: real tokens per forward pass (default 8192).
        max_batch_size: sequences per forward pass (default 128).
        max_length: tokens per sequence (default: the model's and tokenizer's limit).
        padding_free: packed forward passes (default True).
        pooling: embeddings' pooling, "cls", "mean", "max", "mean_sqrt_len_tokens",
            "weightedmean" or "lasttoken" (default: the folder's 1_Pooling/config.json, else mean).
        normalize: L2-normalise embeddings (default: the folder's modules.json).
        dense_path: a Dense module folder (under path, or absolute) that replaces the one in
            modules.json, or follows the pooling when it lists none (TEI's --dense-path).
        default_prompt_name / default_prompt: the prompt an embed call without one gets (default:
            config_sentence_transformers.json's default_prompt_name; "" for none).
        lora_task: the task whose LoRA adapters are folded into the weights (Jina embeddings v3's
            "retrieval.query", "text-matching", ...; default None: the base weights), as
            ``bert8.Model(path, lora_task=...)``.

    A sentence-transformers folder is read whole: modules.json in order (Transformer, Pooling,
    Dense, Normalize; another module raises naming it), prompts, max_seq_length, do_lower_case.
    """

    def __init__(
        self,
        path: PathLike,
        threads: Optional[int] = None,
        *,
        max_batch_tokens: int = 8192,
        max_batch_size: int = 128,
        max_length: Optional[int] = None,
        padding_free: bool = True,
        pooling: Optional[str] = None,
        normalize: Optional[bool] = None,
        max_text_bytes: int = 1 << 20,
        max_inputs: int = 1_000_000,
        max_windows: int = 256,
        dense_path: Optional[PathLike] = None,
        default_prompt_name: Optional[str] = None,
        default_prompt: Optional[str] = None,
        lora_task: Optional[str] = None,
    ) -> None:
        if pooling not in _POOLING:
            raise ValueError(f"pooling must be {_POOLING_NAMES}, not {pooling!r}")
        self.path = os.fspath(path)
        self._p = _bert8.Pipeline(
            self.path, threads or 0, max_batch_tokens, max_batch_size, max_length or 0, padding_free,
            max_text_bytes, max_inputs, max_windows, _POOLING[pooling], _normalize_flag(normalize),
            None if dense_path is None else os.fspath(dense_path), default_prompt_name, default_prompt, lora_task,
        )
        self.info: Dict[str, Any] = self._p.info()
        self.task: str = self.info["task"]
        self.labels: List[Optional[str]] = list(self.info["model"]["labels"])

    # ---- classification ------------------------------------------------------------------

    def scores(
        self,
        texts: Texts,
        text_pair: Optional[Texts] = None,
        *,
        function_to_apply: Optional[str] = None,
        truncation: bool = True,
        truncation_side: str = "right",
        max_length: Optional[int] = None,
    ) -> np.ndarray:
        """Class scores ``[n, num_labels]`` (float32) after function_to_apply: None/"auto"
        (sigmoid for one label, softmax for several, as transformers), "softmax", "sigmoid" or
        "none" (raw logits)."""
        if function_to_apply not in _SCORE_FN:
            raise ValueError(f"function_to_apply must be 'softmax', 'sigmoid', 'none' or None, not {function_to_apply!r}")
        a = _as_list(texts, "texts")
        b = None if text_pair is None else _as_list(text_pair, "text_pair")
        out = self._p.classify(a, b, truncation, truncation_side == "left", max_length or 0,
                               _SCORE_FN[function_to_apply])
        return np.asarray(out)

    def classify(
        self,
        texts: Texts,
        text_pair: Optional[Texts] = None,
        *,
        top_k: Optional[int] = 1,
        function_to_apply: Optional[str] = None,
        truncation: bool = True,
        max_length: Optional[int] = None,
    ) -> Any:
        """Text classification as transformers' ``pipeline("text-classification")``: for each
        text ``{"label", "score"}`` (top_k=1, the default) or a list of the top_k (None: all)
        labels by descending score. A single str gives a single result."""
        s = self.scores(texts, text_pair, function_to_apply=function_to_apply, truncation=truncation,
                        max_length=max_length)
        results: List[Any] = []
        for row in s:
            order = np.argsort(-row, kind="stable")
            ranked = [{"label": self._label(int(k)), "score": float(row[k])} for k in order]
            results.append(ranked[0] if top_k == 1 else ranked[:top_k] if top_k else ranked)
        return results[0] if isinstance(texts, str) and top_k != 1 else results

    def _label(self, k: int) -> str:
        name = self.labels[k] if k < len(self.labels) else None
        return name if name is not None else f"LABEL_{k}"

    # ---- embeddings -----------------------------------------------------------------------

    def embed(
        self,
        texts: Texts,
        text_pair: Optional[Texts] = None,
        *,
        pooling: Optional[str] = None,
        normalize: Optional[bool] = None,
        dimensions: Optional[int] = None,
        truncation: bool = True,
        max_length: Optional[int] = None,
        prompt_name: Optional[str] = None,
        prompt: Optional[str] = None,
    ) -> np.ndarray:
        """Sentence embeddings ``[n, dim]`` (float32), written by C straight into the array.

        pooling: as the constructor's (default: the pipeline's); normalize: L2 (default: the
        pipeline's); dimensions: keep the first values only (Matryoshka), after the Dense
        modules, before normalising; prompt_name: one of ``info["prompts"]``; prompt: a text
        prepended to each text ("" for none); neither: the pipeline's default prompt."""
        if pooling not in _POOLING:
            raise ValueError(f"pooling must be {_POOLING_NAMES}, not {pooling!r}")
        a = _as_list(texts, "texts")
        b = None if text_pair is None else _as_list(text_pair, "text_pair")
        out = self._p.embed(a, b, truncation, False, max_length or 0, _POOLING[pooling], _normalize_flag(normalize),
                            dimensions or 0, prompt_name, prompt)
        return np.asarray(out)

    def embed_tokens(self, texts: Texts, *, truncation: bool = True, max_length: Optional[int] = None) -> List[np.ndarray]:
        """The last hidden state of every token (special tokens included) of each text: a list
        of ``[tokens_i, hidden]`` arrays, views of one block of C memory."""
        offsets, data = self._p.embed_tokens(_as_list(texts, "texts"), truncation, False, max_length or 0)
        off = np.asarray(offsets)
        d = np.asarray(data)
        return [d[off[i]: off[i + 1]] for i in range(len(off) - 1)]

    # ---- reranking ------------------------------------------------------------------------

    def rerank_scores(self, query: str, documents: Sequence[str], *, raw_scores: bool = False,
                      truncation: bool = True, max_length: Optional[int] = None) -> np.ndarray:
        """Cross-encoder scores ``[n]`` of (query, document) pairs: sigmoid of the logit for one
        label, softmax's last class for several (raw_scores: the logit)."""
        scores, _ = self._p.rerank(query, _as_list(documents, "documents"), truncation, False, max_length or 0, raw_scores)
        return np.asarray(scores)

    def rerank(
        self,
        query: str,
        documents: Sequence[str],
        *,
        top_k: Optional[int] = None,
        return_documents: bool = False,
        raw_scores: bool = False,
        truncation: bool = True,
        max_length: Optional[int] = None,
    ) -> List[Dict[str, Any]]:
        """Ranks documents for a query as sentence-transformers' ``CrossEncoder.rank``: a list of
        ``{"corpus_id", "score"(, "text")}`` by descending score (ties keep input order)."""
        docs = _as_list(documents, "documents")
        scores, order = self._p.rerank(query, docs, truncation, False, max_length or 0, raw_scores)
        s, o = np.asarray(scores), np.asarray(order)
        out = []
        for i in o[:top_k] if top_k else o:
            item: Dict[str, Any] = {"corpus_id": int(i), "score": float(s[i])}
            if return_documents:
                item["text"] = docs[i]
            out.append(item)
        return out

    # ---- question answering ---------------------------------------------------------------

    def qa(
        self,
        question: Texts,
        context: Texts,
        *,
        max_answer_len: int = 30,
        doc_stride: Optional[int] = None,
        max_seq_len: Optional[int] = None,
        score_logits: bool = False,
    ) -> Any:
        """Extractive question answering as transformers' ``pipeline("question-answering")``:
        ``{"score", "start", "end", "answer"}`` per (question, context), start/end in characters
        of the context; long contexts run in strided windows. A single question and context give
        a single answer."""
        qs, cs = _as_list(question, "question"), _as_list(context, "context")
        if len(qs) == 1 and len(cs) > 1:
            qs = qs * len(cs)
        raw = self._p.qa(qs, cs, max_answer_len, -1 if doc_stride is None else doc_stride, max_seq_len or 0,
                         score_logits)
        out = []
        for (found, score, _b0, _b1, c0, c1), ctx in zip(raw, cs):
            out.append({"score": float(score), "start": int(c0), "end": int(c1), "answer": ctx[c0:c1] if found else ""})
        return out[0] if isinstance(question, str) and isinstance(context, str) else out

    # ---- token classification -------------------------------------------------------------

    def ner(
        self,
        texts: Texts,
        *,
        aggregation_strategy: str = "first",
        stride: Optional[int] = None,
        ignore_labels: Optional[Sequence[str]] = None,
    ) -> Any:
        """Token classification as transformers' ``pipeline("token-classification")``. With
        aggregation_strategy "none": ``{"entity", "score", "index", "word", "start", "end"}`` per
        token; else ("simple", "first", "average", "max") ``{"entity_group", "score", "word",
        "start", "end"}`` per entity. start/end are characters of the text and "word" is that
        slice of it. Entities labelled "O" are dropped unless ignore_labels says otherwise."""
        if aggregation_strategy not in _AGGREGATION:
            raise ValueError(f"aggregation_strategy must be one of {sorted(_AGGREGATION)}, not {aggregation_strategy!r}")
        a = _as_list(texts, "texts")
        ignore = {"O"} if ignore_labels is None else set(ignore_labels)
        keep_outside = "O" not in ignore
        entities, _words = self._p.ner(a, _AGGREGATION[aggregation_strategy], -1 if stride is None else stride,
                                       keep_outside)
        agg = aggregation_strategy != "none"
        out: List[List[Dict[str, Any]]] = []
        for text, ents in zip(a, entities):
            row = []
            for label, score, _b0, _b1, c0, c1, index in ents:
                if label in ignore:
                    continue
                e: Dict[str, Any] = {"entity_group" if agg else "entity": label, "score": float(score)}
                if not agg:
                    e["index"] = int(index)
                e.update(word=text[c0:c1], start=int(c0), end=int(c1))
                row.append(e)
            out.append(row)
        return out[0] if isinstance(texts, str) else out

    # ---- masked-LM models ------------------------------------------------------------------

    def fill_mask(self, texts: Texts, *, top_k: int = 5, max_length: Optional[int] = None) -> Any:
        """transformers' ``pipeline("fill-mask")``: for each mask token of a text, the top_k
        ``{"score", "token", "token_str", "sequence"}``. A text with one mask gives a list, with
        several a list per mask; a single text gives its result alone."""
        a = _as_list(texts, "texts")
        raw = self._p.fill_mask(a, top_k, max_length or 0)
        out: List[Any] = []
        for masks in raw:
            per = [[{"score": float(sc), "token": int(tok), "token_str": ts, "sequence": seq}
                    for sc, tok, ts, seq in preds] for preds in masks]
            out.append(per[0] if len(per) == 1 else per)
        return out[0] if isinstance(texts, str) else out

    def embed_sparse(self, texts: Texts, *, truncation: bool = True, max_length: Optional[int] = None) -> Any:
        """SPLADE sparse embeddings (models with a masked-LM head): per text a dict
        ``{"indices": int32 array, "values": float32 array}`` of the non-zero vocabulary weights,
        max over tokens of log(1 + relu(logits)), as sentence-transformers' SparseEncoder and
        TEI's ``--pooling splade``."""
        a = _as_list(texts, "texts")
        off, idx, val, vocab = self._p.embed_sparse(a, truncation, max_length or 0)
        off, idx, val = np.asarray(off), np.asarray(idx), np.asarray(val)
        out = [{"indices": idx[off[i]:off[i + 1]].copy(), "values": val[off[i]:off[i + 1]].copy(), "dim": int(vocab)}
               for i in range(len(a))]
        return out[0] if isinstance(texts, str) else out

    def __repr__(self) -> str:
        return f"bert8.Pipeline({getattr(self, 'path', '?')!r}, task={getattr(self, 'task', None)!r})"


@functools.lru_cache(maxsize=8)
def _cached(path: str) -> Pipeline:
    return Pipeline(path)


def _pipeline(model: Union[PathLike, Pipeline]) -> Pipeline:
    return model if isinstance(model, Pipeline) else _cached(os.path.abspath(os.fspath(model)))


def classify(model: Union[PathLike, Pipeline], texts: Texts, text_pair: Optional[Texts] = None, **kw: Any) -> Any:
    """``Pipeline(model).classify(texts, ...)`` (pipelines opened from a path are cached)."""
    return _pipeline(model).classify(texts, text_pair, **kw)


def embed(model: Union[PathLike, Pipeline], texts: Texts, **kw: Any) -> np.ndarray:
    """``Pipeline(model).embed(texts, ...)``: a ``[n, dim]`` float32 array."""
    return _pipeline(model).embed(texts, **kw)


def rerank(model: Union[PathLike, Pipeline], query: str, documents: Sequence[str], **kw: Any) -> List[Dict[str, Any]]:
    """``Pipeline(model).rerank(query, documents, ...)``."""
    return _pipeline(model).rerank(query, documents, **kw)


def qa(model: Union[PathLike, Pipeline], question: Texts, context: Texts, **kw: Any) -> Any:
    """``Pipeline(model).qa(question, context, ...)``."""
    return _pipeline(model).qa(question, context, **kw)


def ner(model: Union[PathLike, Pipeline], texts: Texts, **kw: Any) -> Any:
    """``Pipeline(model).ner(texts, ...)``."""
    return _pipeline(model).ner(texts, **kw)


class SentenceEncoder:
    """Sentence embeddings with sentence-transformers' ``SentenceTransformer.encode`` interface::

        model = bert8.SentenceEncoder("path/to/all-MiniLM-L6-v2")
        vectors = model.encode(["a sentence", "another"], normalize_embeddings=True)

    The folder's modules are honoured in order (every Pooling mode, Dense, Normalize), with its
    prompts (``prompts``, ``default_prompt_name``) as sentence-transformers applies them.
    """

    def __init__(self, path: PathLike, threads: Optional[int] = None, *, pooling: Optional[str] = None,
                 max_batch_tokens: int = 8192, prompts: Optional[Dict[str, str]] = None,
                 default_prompt_name: Optional[str] = None, dense_path: Optional[PathLike] = None,
                 lora_task: Optional[str] = None) -> None:
        self.pipeline = Pipeline(path, threads, pooling=pooling, max_batch_tokens=max_batch_tokens,
                                 dense_path=dense_path, lora_task=lora_task)
        self.prompts: Dict[str, str] = dict(self.pipeline.info["prompts"])
        if prompts:
            self.prompts.update(prompts)
        folder_default = next((k for k, v in self.prompts.items() if self.pipeline.info["default_prompt"] is not None
                               and v == self.pipeline.info["default_prompt"]), None)
        self.default_prompt_name: Optional[str] = default_prompt_name or folder_default
        if self.default_prompt_name is not None and self.default_prompt_name not in self.prompts:
            raise ValueError(f"Default prompt name '{self.default_prompt_name}' not found in the configured prompts "
                             f"dictionary with keys {list(self.prompts)!r}.")

    @property
    def max_seq_length(self) -> int:
        return int(self.pipeline.info["max_length"])

    def get_sentence_embedding_dimension(self) -> int:
        return int(self.pipeline.info["dim"])

    def encode(
        self,
        sentences: Texts,
        batch_size: int = 32,
        show_progress_bar: Optional[bool] = None,
        convert_to_numpy: bool = True,
        normalize_embeddings: bool = False,
        truncate_dim: Optional[int] = None,
        prompt_name: Optional[str] = None,
        prompt: Optional[str] = None,
    ) -> np.ndarray:
        """Embeds sentences: a ``[n, dim]`` float32 NumPy array (``[dim]`` for one str).

        Args:
            sentences: a str or a list of str.
            batch_size: sentences per call into C (each call batches them again by tokens).
            show_progress_bar: a progress bar on stderr (default: off).
            normalize_embeddings: L2-normalise (a folder with a Normalize module always does).
            truncate_dim: keep the first values only (Matryoshka).
            prompt_name: a key of ``prompts`` whose text is prepended to each sentence.
            prompt: a text prepended to each sentence (wins over prompt_name; "" for none).
            Neither: the default prompt (``default_prompt_name``), if any.
        """
        if not convert_to_numpy:
            raise ValueError("bert8 returns NumPy arrays only (convert_to_numpy=True)")
        if batch_size < 1:
            raise ValueError("batch_size must be positive")
        single = isinstance(sentences, str)
        texts = _as_list(sentences, "sentences")
        dim = truncate_dim or self.get_sentence_embedding_dimension()
        out = np.empty((len(texts), dim), dtype=np.float32)
        norm = True if normalize_embeddings else None
        if prompt is None:
            if prompt_name is not None:
                if prompt_name not in self.prompts:
                    raise ValueError(f"Prompt name '{prompt_name}' not found in the configured prompts dictionary "
                                     f"with keys {list(self.prompts)!r}.")
                prompt = self.prompts[prompt_name]
            elif self.default_prompt_name is not None:
                prompt = self.prompts.get(self.default_prompt_name, "")
            else:
                prompt = ""
        for i in range(0, len(texts), batch_size):
            out[i: i + batch_size] = self.pipeline.embed(texts[i: i + batch_size], normalize=norm, dimensions=truncate_dim,
                                                         prompt=prompt)
            if show_progress_bar:
                done = min(i + batch_size, len(texts))
                print(f"\rbert8 encode: {done}/{len(texts)}", end="" if done < len(texts) else "\n",
                      file=sys.stderr, flush=True)
        return out[0] if single else out

    __call__ = encode
