"""Minimal safetensors reader/writer producing the same bytes as the reference serializer.

Layout: u64 LE header length, compact JSON header ("__metadata__" first, then tensors
ordered by dtype descending and name ascending), padded with spaces to a multiple of 8,
then the tensor data packed in header order with no gaps.
"""
import json
import struct

import numpy as np

_DT = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": None,
       "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8,
       "BOOL": np.bool_}
_NP2DT = {np.dtype(v): k for k, v in _DT.items() if v is not None}
# The reference orders dtypes by its Dtype enum; "descending" puts wider types first.
_RANK = {"BOOL": 0, "U8": 1, "I8": 2, "I16": 4, "F16": 6, "BF16": 7, "I32": 8, "F32": 10,
         "I64": 12, "F64": 13}


def read(path):
    """Return (dict name -> numpy array, metadata dict, header list in file order)."""
    with open(path, "rb") as f:
        buf = f.read()
    if len(buf) < 8:
        raise ValueError("%s: shorter than the 8-byte header length" % path)
    n = struct.unpack("<Q", buf[:8])[0]
    if 8 + n > len(buf):
        raise ValueError("%s: header length %d runs past end of file" % (path, n))
    hdr = json.loads(buf[8:8 + n].decode("utf-8"))
    meta = hdr.pop("__metadata__", {})
    data = memoryview(buf)[8 + n:]
    out = {}
    for name, info in hdr.items():
        b, e = info["data_offsets"]
        dt = _DT[info["dtype"]]
        arr = np.frombuffer(data[b:e], dtype=np.dtype(dt).newbyteorder("<"))
        out[name] = arr.reshape(info["shape"]).copy()
    return out, meta, list(hdr.keys())


def serialize(tensors, metadata=None):
    """tensors: dict name -> numpy array (or torch tensor). Returns the file bytes."""
    if metadata is None:
        metadata = {"format": "pt"}
    items = []
    for name, a in tensors.items():
        if hasattr(a, "detach"):
            a = a.detach().cpu().numpy()
        a = np.ascontiguousarray(a)
        items.append((name, _NP2DT[a.dtype], a))
    items.sort(key=lambda t: (-_RANK[t[1]], t[0].encode("utf-8")))
    hdr = {"__metadata__": metadata}
    off = 0
    for name, dt, a in items:
        nb = a.size * a.itemsize
        hdr[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + nb]}
        off += nb
    hb = json.dumps(hdr, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    hb += b" " * ((8 - len(hb) % 8) % 8)
    parts = [struct.pack("<Q", len(hb)), hb]
    for _, _, a in items:
        parts.append(a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes())
    return b"".join(parts)


def write(path, tensors, metadata=None):
    with open(path, "wb") as f:
        f.write(serialize(tensors, metadata))
