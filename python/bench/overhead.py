"""Time a Python caller spends outside C in Model.forward, on a BERT-base checkpoint at batch
8 x 128 (docs/python.md reports the figure).

    build/bench/make_checkpoint /tmp/bert-base --arch bert --layers 12 --hidden 768 --heads 12 \\
        --inter 3072 --vocab 30522 --maxpos 512
    python python/bench/overhead.py /tmp/bert-base [--repeats 15]

Three timings per round, interleaved so that machine noise hits them alike:
  c      the C forward alone: Model._m.forward on int32 arrays, copy=False (the extension's call
         with the GIL released; nothing but argument checks around bert8_forward);
  python bert8.Model.forward as users call it (int64 ids from a tokenizer, dtype conversion,
         outputs copied out of the session and wrapped as NumPy arrays);
  empty  the Python-side work of one call without the forward pass (conversion + wrapping of
         arrays of the same shapes), which bounds the overhead from the other side.
The overhead is median(python) - median(c), as a share of median(c).
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import bert8
from bert8._arrays import as_int32


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--threads", type=int, default=None)
    a = ap.parse_args()
    m = bert8.Model(a.model, threads=a.threads)
    rng = np.random.default_rng(0)
    ids64 = rng.integers(1000, m.info.vocab_size, size=(a.batch, a.seq), dtype=np.int64)
    mask64 = np.ones_like(ids64)
    types64 = np.zeros_like(ids64)
    ids32, mask32, types32 = (x.astype(np.int32) for x in (ids64, mask64, types64))
    raw = m._m
    out = m.forward(ids64, mask64, types64)  # warm-up: scratch allocation, primitive creation
    raw.forward(ids32, mask32, types32, False)
    shapes = {k: v.shape for k, v in out.items()}

    def empty_call() -> None:
        # the Python work of Model.forward without the forward pass: conversions, then copies
        # of outputs of the same shapes wrapped as arrays
        as_int32(ids64, "input_ids", 2), as_int32(mask64, "attention_mask", 2), as_int32(types64, "token_type_ids", 2)
        {k: np.asarray(np.empty(s, np.float32)) for k, s in shapes.items()}

    tc, tp, te = [], [], []
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        raw.forward(ids32, mask32, types32, False)
        t1 = time.perf_counter()
        m.forward(ids64, mask64, types64)
        t2 = time.perf_counter()
        empty_call()
        t3 = time.perf_counter()
        tc.append(t1 - t0)
        tp.append(t2 - t1)
        te.append(t3 - t2)
    mc, mp, me = statistics.median(tc), statistics.median(tp), statistics.median(te)
    print(f"bert8 {bert8.__version__}: {a.model}, batch {a.batch} x {a.seq}, {m.threads} thread(s), {a.repeats} rounds")
    print(f"  C forward (extension call, no copy): median {mc * 1e3:8.2f} ms  (min {min(tc) * 1e3:.2f})")
    print(f"  bert8.Model.forward from Python:     median {mp * 1e3:8.2f} ms  (min {min(tp) * 1e3:.2f})")
    print(f"  Python-side work alone:              median {me * 1e3:8.3f} ms")
    print(f"  overhead: {100 * (mp - mc) / mc:+.2f}% of the C forward (medians); "
          f"Python-side work alone {100 * me / mc:.3f}%")


if __name__ == "__main__":
    main()
