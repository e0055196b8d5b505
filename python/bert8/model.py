"""bert8.Model: a checkpoint folder loaded for the forward pass on token ids."""
from __future__ import annotations

import os
from typing import Any, Dict, Optional, Sequence, Union

import numpy as np

from . import _bert8
from ._arrays import as_int32, as_int64

PathLike = Union[str, "os.PathLike[str]"]
ArrayLike = Any


class ModelInfo(dict):
    """The model's configuration and sizes (bert8_model_info) as a dict with attribute access:
    ``arch``, ``head``, ``model_type``, ``hidden_size``, ``num_layers``, ``num_labels``,
    ``labels``, ``max_seq_len``, ``quantized``, ``scheme``, ``weight_bits``, ``param_count``, ..."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class Model:
    """A Hugging Face checkpoint folder (``config.json`` + ``model.safetensors``, FP32 or a bert8
    INT8 folder) loaded once and shareable by any number of Python threads.

    Args:
        path: the model folder.
        threads: threads per call; ``None`` (default) uses the physical cores.
        lora_task: the task whose LoRA adapters are folded into the weights at load time (Jina
            embeddings v3: one of config.json's ``lora_adaptations``, e.g. ``"retrieval.query"``);
            ``None`` (default) runs the base weights, as transformers does without a task. An
            unknown name raises ``bert8.Error`` listing the valid ones.

    Each call takes a session (per-call scratch memory) from a pool and releases the GIL while
    it computes, so threads calling one Model run concurrently.
    """

    def __init__(self, path: PathLike, threads: Optional[int] = None, *, verbose: bool = False,
                 lora_task: Optional[str] = None) -> None:
        self.path = os.fspath(path)
        self._m = _bert8.Model(self.path, threads or 0, verbose, lora_task)
        self._info: Optional[ModelInfo] = None

    @classmethod
    def _wrap(cls, m: "_bert8.Model", path: str) -> "Model":
        self = cls.__new__(cls)
        self.path = path
        self._m = m
        self._info = None
        return self

    @property
    def info(self) -> ModelInfo:
        """The model's configuration and sizes (see :class:`ModelInfo`)."""
        if self._info is None:
            self._info = ModelInfo(self._m.info())
        return self._info

    @property
    def threads(self) -> int:
        """Threads each call runs on."""
        return self._m.threads

    @threads.setter
    def threads(self, n: Optional[int]) -> None:
        self._m.set_threads(n or 0)

    def forward(
        self,
        input_ids: ArrayLike,
        attention_mask: Optional[ArrayLike] = None,
        token_type_ids: Optional[ArrayLike] = None,
        *,
        copy: bool = True,
    ) -> Dict[str, np.ndarray]:
        """The forward pass of a padded batch.

        Args:
            input_ids: token ids ``[batch, seq]`` (or ``[seq]``), any integer dtype; int32
                C-contiguous arrays are passed without a copy.
            attention_mask: 1 for real tokens, 0 for padding (default all ones).
            token_type_ids: segment ids (default all zeros).
            copy: ``True`` (default) returns arrays of their own. ``False`` returns views of the
                session's output buffers without a copy; that session stays out of the pool
                until every returned array is garbage.

        Returns:
            float32 arrays named as transformers names them: ``last_hidden_state`` ``[B, T, H]``
            and ``pooler_output`` ``[B, H]`` (base models), ``logits`` (classification heads),
            ``start_logits`` and ``end_logits`` (question answering).
        """
        ids = as_int32(input_ids, "input_ids", 2)
        mask = None if attention_mask is None else as_int32(attention_mask, "attention_mask", 2)
        types = None if token_type_ids is None else as_int32(token_type_ids, "token_type_ids", 2)
        out = self._m.forward(ids, mask, types, copy)
        return {k: np.asarray(v) for k, v in out.items()}

    __call__ = forward

    def forward_packed(
        self,
        input_ids: Union[ArrayLike, Sequence[ArrayLike]],
        cu_seqlens: Optional[ArrayLike] = None,
        token_type_ids: Optional[Union[ArrayLike, Sequence[ArrayLike]]] = None,
        *,
        copy: bool = True,
    ) -> Dict[str, np.ndarray]:
        """The forward pass of a packed (variable-length, padding-free) batch: only real tokens
        are computed.

        Args:
            input_ids: either a list of 1-d token id sequences, or all sequences back to back
                (1-d) with ``cu_seqlens``.
            cu_seqlens: ``[n + 1]`` row starts (0, len0, len0 + len1, ...) when input_ids is flat.
            token_type_ids: like input_ids (default all zeros).

        Returns:
            The outputs of :meth:`forward` with token-level ones packed (``last_hidden_state``
            ``[tokens, H]``, token logits ``[tokens, labels]``, ``start_logits`` ``[tokens]``),
            sequence-level ones ``[n, ...]``, and ``cu_seqlens`` (int64).
        """
        if cu_seqlens is None:
            seqs = [as_int32(s, "input_ids", 1) for s in input_ids]
            if not seqs:
                raise ValueError("forward_packed needs at least one sequence")
            lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
            cu = np.zeros(len(seqs) + 1, dtype=np.int64)
            np.cumsum(lengths, out=cu[1:])
            ids = np.concatenate(seqs)
            types = None
            if token_type_ids is not None:
                types = np.concatenate([as_int32(s, "token_type_ids", 1) for s in token_type_ids])
        else:
            ids = as_int32(input_ids, "input_ids", 1)
            cu = as_int64(cu_seqlens, "cu_seqlens")
            types = None if token_type_ids is None else as_int32(token_type_ids, "token_type_ids", 1)
        out = self._m.forward_packed(ids, cu, types, copy)
        return {k: np.asarray(v) for k, v in out.items()}

    def save(self, path: PathLike) -> None:
        """Writes an INT8 model as a loadable folder (config.json, model.safetensors,
        quantization_config.json; tokenizer files of the source folder are copied)."""
        self._m.save(os.fspath(path))

    def __repr__(self) -> str:
        i = self.info
        q = f", int8 {i.scheme}" if i.quantized else ""
        return f"bert8.Model({self.path!r}: {i.architecture or i.model_type}, {i.num_layers} layers, hidden {i.hidden_size}{q})"
