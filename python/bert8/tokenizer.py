"""bert8.Tokenizer: the WordPiece / SentencePiece Unigram tokenizer of a model folder, called
like a Hugging Face fast tokenizer (same keys, same meaning; offsets in characters)."""
from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _bert8
from ._arrays import as_int32

PathLike = Union[str, "os.PathLike[str]"]
TextInput = Union[str, Sequence[str]]

# bert8_truncation
_TRUNCATION = {"longest_first": 1, "only_first": 2, "only_second": 3}
# tokenizer classes whose model_input_names leave out token_type_ids
_NO_TOKEN_TYPES = ("XLMRoberta", "Roberta", "DistilBert", "Camembert")


class BatchEncoding(dict):
    """The output of :class:`Tokenizer` calls: a dict (``input_ids``, ``attention_mask``, ...)
    with attribute access, plus per-row ``word_ids()`` and ``sequence_ids()`` as in transformers."""

    def __init__(self, data: Dict[str, Any], word_ids: Optional[np.ndarray] = None,
                 sequence_ids: Optional[np.ndarray] = None, lengths: Optional[np.ndarray] = None) -> None:
        super().__init__(data)
        self._word_ids = word_ids
        self._sequence_ids = sequence_ids
        self._lengths = lengths  # per row when the rows are not padded

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def _row(self, table: Optional[np.ndarray], batch_index: int) -> List[Optional[int]]:
        if table is None:
            raise ValueError("no token information in this encoding")
        row = table[batch_index]
        if self._lengths is not None:
            row = row[: int(self._lengths[batch_index])]
        return [None if v < 0 else int(v) for v in row]

    def word_ids(self, batch_index: int = 0) -> List[Optional[int]]:
        """The word index of each token of row batch_index (None for special tokens and padding)."""
        return self._row(self._word_ids, batch_index)

    def sequence_ids(self, batch_index: int = 0) -> List[Optional[int]]:
        """0 for tokens of the text, 1 for the pair, None for special tokens and padding."""
        return self._row(self._sequence_ids, batch_index)


def _read_json(path: str) -> Dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


class Tokenizer:
    """The tokenizer of a model folder (``vocab.txt`` for WordPiece, ``sentencepiece.bpe.model``
    for XLM-R), with the ids of transformers' tokenizers and the calling convention of a Hugging
    Face fast tokenizer::

        tok = bert8.Tokenizer("models/sst2-bert-mini")
        enc = tok(["a great film", "dull"], padding=True, return_tensors="np")

    Tokenization runs in C with the GIL released; one Tokenizer may be shared by threads.

    Attributes:
        model_max_length: the longest input (tokenizer_config.json's model_max_length).
        truncation_side: "right" (default) or "left", as in transformers.
        model_input_names: the keys returned by default.
    """

    def __init__(self, path: PathLike) -> None:
        self.path = os.fspath(path)
        self._t = _bert8.Tokenizer(self.path)
        config = _read_json(os.path.join(self.path, "tokenizer_config.json"))
        model_config = _read_json(os.path.join(self.path, "config.json"))
        cls = str(config.get("tokenizer_class") or "")
        model_type = str(model_config.get("model_type") or "")
        no_types = cls.startswith(_NO_TOKEN_TYPES) or model_type in ("xlm-roberta", "roberta", "distilbert") and not cls
        self.model_input_names: List[str] = (
            ["input_ids", "attention_mask"] if no_types else ["input_ids", "token_type_ids", "attention_mask"]
        )
        self.truncation_side = "right"
        self.padding_side = "right"
        special = self._t.special_ids()
        self.pad_token_id: Optional[int] = special["pad"] if special["pad"] >= 0 else None
        self.cls_token_id: Optional[int] = special["cls"] if special["cls"] >= 0 else None
        self.sep_token_id: Optional[int] = special["sep"] if special["sep"] >= 0 else None
        self.unk_token_id: Optional[int] = special["unk"] if special["unk"] >= 0 else None
        self.mask_token_id: Optional[int] = special["mask"] if special["mask"] >= 0 else None

    @property
    def model_max_length(self) -> int:
        return int(self._t.model_max_length)

    @property
    def vocab_size(self) -> int:
        return int(self._t.vocab_size)

    def __len__(self) -> int:
        return self.vocab_size

    def __call__(
        self,
        text: TextInput,
        text_pair: Optional[TextInput] = None,
        add_special_tokens: bool = True,
        padding: Union[bool, str] = False,
        truncation: Union[bool, str, None] = None,
        max_length: Optional[int] = None,
        stride: int = 0,
        return_tensors: Optional[str] = None,
        return_token_type_ids: Optional[bool] = None,
        return_attention_mask: Optional[bool] = None,
        return_overflowing_tokens: bool = False,
        return_special_tokens_mask: bool = False,
        return_offsets_mapping: bool = False,
        return_length: bool = False,
    ) -> BatchEncoding:
        """Tokenizes one text or a list of texts (and their pairs).

        Args:
            text: a str or a list of str.
            text_pair: the second sequence(s) (a str, or a list like ``text``).
            add_special_tokens: add ``[CLS] a [SEP] b [SEP]`` / ``<s> a </s></s> b </s>``.
            padding: ``False``/``"do_not_pad"``, ``True``/``"longest"``, ``"max_length"``.
            truncation: ``True``/``"longest_first"``, ``"only_first"``, ``"only_second"``,
                ``False``/``"do_not_truncate"``; ``None`` truncates (longest first) only when
                max_length is given, as transformers does.
            max_length: tokens per row (default: model_max_length when truncating or padding to
                max_length).
            stride: overlap in tokens between the windows of return_overflowing_tokens.
            return_tensors: ``None`` (lists), ``"np"`` (int64 NumPy arrays, as transformers) or
                ``"pt"`` (torch tensors).
            return_overflowing_tokens: a long input becomes several rows (windows), and
                ``overflow_to_sample_mapping`` says which input each row came from.
            return_offsets_mapping: ``offset_mapping``: (start, end) in characters of the input
                text for each token, (0, 0) for special tokens and padding.

        Returns:
            A :class:`BatchEncoding` with ``input_ids``, ``token_type_ids`` (BERT-style
            tokenizers), ``attention_mask`` and what was asked for.
        """
        single = isinstance(text, str)
        texts = [text] if single else list(text)
        pairs: Optional[List[Optional[str]]] = None
        if text_pair is not None:
            if isinstance(text_pair, str):
                if not single:
                    raise ValueError("text_pair must be a list when text is a list")
                pairs = [text_pair]
            else:
                if single:
                    raise ValueError("text_pair must be a str when text is a str")
                pairs = list(text_pair)
                if len(pairs) != len(texts):
                    raise ValueError(f"{len(pairs)} text pairs for {len(texts)} texts")
        if padding is True or padding == "longest":
            pad = "longest"
        elif padding is False or padding is None or padding == "do_not_pad":
            pad = None
        elif padding == "max_length":
            pad = "max_length"
        else:
            raise ValueError(f"padding must be True, False, 'longest', 'max_length' or 'do_not_pad', not {padding!r}")
        if truncation is None:
            truncation = "longest_first" if max_length is not None and pad is None else False
        if truncation is True:
            truncation = "longest_first"
        if truncation is False or truncation == "do_not_truncate":
            trunc = 0
        elif truncation in _TRUNCATION:
            trunc = _TRUNCATION[truncation]
        else:
            raise ValueError(f"unknown truncation strategy {truncation!r}")
        if max_length is not None and max_length < 1:
            raise ValueError("max_length must be positive")
        if pad == "max_length" and max_length is None:
            max_length = self.model_max_length
        if trunc == 0 and pad != "max_length":
            # without truncation max_length only matters for padding
            limit = 0
        else:
            limit = max_length or 0
        if self.truncation_side not in ("right", "left"):
            raise ValueError("truncation_side must be 'right' or 'left'")
        raw = self._t.encode(
            texts, pairs, add_special_tokens, trunc, limit, bool(return_overflowing_tokens), int(stride),
            pad == "max_length", self.truncation_side == "left" and trunc != 0,
        )
        ids = np.asarray(raw["input_ids"])
        lengths = np.asarray(raw["lengths"])
        want_types = "token_type_ids" in self.model_input_names if return_token_type_ids is None else return_token_type_ids
        want_mask = True if return_attention_mask is None else return_attention_mask
        keys: List[Tuple[str, str]] = [("input_ids", "input_ids")]
        if want_types:
            keys.append(("token_type_ids", "token_type_ids"))
        if want_mask:
            keys.append(("attention_mask", "attention_mask"))
        if return_special_tokens_mask:
            keys.append(("special_tokens_mask", "special_tokens_mask"))
        if return_offsets_mapping:
            keys.append(("offset_mapping", "offset_mapping"))
        arrays = {k: np.asarray(raw[src]) for k, src in keys}
        if return_length:
            arrays["length"] = lengths.copy() if pad is None else np.full(len(lengths), ids.shape[1], np.int64)
        if return_overflowing_tokens:
            arrays["overflow_to_sample_mapping"] = np.asarray(raw["overflow_to_sample_mapping"])
        data: Dict[str, Any]
        if return_tensors is None:
            data = {}
            for k, a in arrays.items():
                if k in ("length", "overflow_to_sample_mapping"):
                    data[k] = a.tolist()
                elif pad is None:
                    rows = a.tolist()
                    if k == "offset_mapping":
                        data[k] = [[tuple(o) for o in r[:n]] for r, n in zip(rows, lengths.tolist())]
                    else:
                        data[k] = [r[:n] for r, n in zip(rows, lengths.tolist())]
                else:
                    rows = a.tolist()
                    data[k] = [[tuple(o) for o in r] for r in rows] if k == "offset_mapping" else rows
            if single and not return_overflowing_tokens:
                data = {k: v[0] if k != "overflow_to_sample_mapping" else v for k, v in data.items()}
        elif return_tensors in ("np", "pt"):
            if pad is None and len(lengths) > 1 and (lengths != lengths[0]).any():
                raise ValueError(
                    "rows of different lengths cannot form one tensor: pass padding=True (or 'max_length')"
                )
            if pad is None and len(lengths):
                n = int(lengths[0])
                arrays = {k: (a[:, :n] if a.ndim >= 2 else a) for k, a in arrays.items()}
            data = {k: a.astype(np.int64) for k, a in arrays.items()}
            if return_tensors == "pt":
                import torch

                data = {k: torch.from_numpy(np.ascontiguousarray(a)) for k, a in data.items()}
        else:
            raise ValueError(f"return_tensors must be None, 'np' or 'pt', not {return_tensors!r}")
        return BatchEncoding(data, np.asarray(raw["word_ids"]), np.asarray(raw["sequence_ids"]),
                             lengths if pad is None else None)

    def encode_batch(
        self,
        texts: Sequence[str],
        text_pair: Optional[Sequence[Optional[str]]] = None,
        *,
        truncation: Union[bool, str] = False,
        max_length: Optional[int] = None,
        add_special_tokens: bool = True,
        pad_to_max_length: bool = False,
    ) -> Dict[str, np.ndarray]:
        """The padded int32 rows of the C encoder, without conversion (zero-copy views):
        ``input_ids``, ``attention_mask``, ``token_type_ids``, ``special_tokens_mask``,
        ``word_ids``, ``sequence_ids``, ``offset_mapping`` (characters), ``byte_offsets``,
        ``lengths``, ``overflow_to_sample_mapping``. Ready for :meth:`Model.forward`."""
        trunc = 0 if truncation is False else _TRUNCATION["longest_first" if truncation is True else truncation]
        raw = self._t.encode(list(texts), None if text_pair is None else list(text_pair), add_special_tokens, trunc,
                             max_length or 0, False, 0, pad_to_max_length, False)
        return {k: np.asarray(v) for k, v in raw.items()}

    def encode(self, text: str, text_pair: Optional[str] = None, add_special_tokens: bool = True,
               truncation: Union[bool, str, None] = None, max_length: Optional[int] = None) -> List[int]:
        """The token ids of one text (and pair), as transformers' ``tokenizer.encode``."""
        return self(text, text_pair, add_special_tokens=add_special_tokens, truncation=truncation,
                    max_length=max_length)["input_ids"]

    def tokenize(self, text: str, text_pair: Optional[str] = None, add_special_tokens: bool = False) -> List[str]:
        """The token strings of a text (without special tokens by default, as transformers)."""
        return self.convert_ids_to_tokens(self.encode(text, text_pair, add_special_tokens=add_special_tokens))

    def convert_ids_to_tokens(self, ids: Union[int, Sequence[int]]) -> Any:
        if isinstance(ids, (int, np.integer)):
            return self._t.id_to_token(int(ids))
        return [self._t.id_to_token(int(i)) for i in ids]

    def decode(self, token_ids: Any, skip_special_tokens: bool = False) -> str:
        """Text of token ids as transformers' ``tokenizer.decode``, with the folder's
        ``clean_up_tokenization_spaces`` (tokenizer_config.json; absent: False)."""
        arr = np.asarray(token_ids).reshape(-1)
        if arr.size == 0:
            arr = arr.astype(np.int32)  # np.asarray([]) is float64
        ids = as_int32(arr, "token_ids", 1)
        return self._t.decode(ids, skip_special_tokens)

    def batch_decode(self, sequences: Any, skip_special_tokens: bool = False) -> List[str]:
        return [self.decode(s, skip_special_tokens) for s in sequences]

    def is_special(self, token_id: int) -> bool:
        return bool(self._t.is_special(int(token_id)))

    def __repr__(self) -> str:
        return f"bert8.Tokenizer({self.path!r}, vocab_size={self.vocab_size}, model_max_length={self.model_max_length})"
