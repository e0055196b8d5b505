"""Conversions of caller arrays into what the C extension takes (C-contiguous int32/int64)."""
from __future__ import annotations

from typing import Any

import numpy as np

_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1


def as_int32(x: Any, name: str, ndim: int) -> np.ndarray:
    """x as a C-contiguous int32 array of ndim dimensions (1-d input gains a batch axis when ndim
    is 2). Integer and bool arrays, lists and CPU tensors are accepted; values must fit int32."""
    a = x if isinstance(x, np.ndarray) else np.asarray(x)
    if a.dtype != np.int32:
        if a.dtype.kind not in "iub":
            raise TypeError(f"{name} must hold integers, got dtype {a.dtype}")
        if a.size and a.dtype.kind != "b" and a.dtype.itemsize >= 4:
            lo, hi = int(a.min()), int(a.max())
            if lo < _I32_MIN or hi > _I32_MAX:
                raise ValueError(f"{name} holds {lo if lo < _I32_MIN else hi}, outside the int32 range")
        a = a.astype(np.int32)
    if ndim == 2 and a.ndim == 1:
        a = a[None, :]
    if a.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions, got shape {a.shape}")
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    return a


def as_int64(x: Any, name: str) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype.kind not in "iu":
        raise TypeError(f"{name} must hold integers, got dtype {a.dtype}")
    return np.ascontiguousarray(a, dtype=np.int64).reshape(-1)
