"""Time a Python caller spends outside C in Model.forward, on a BERT-base checkpoint at batch
8 x 128 (docs/python.md reports the figure).

    build/bench/make_checkpoint /tmp/bert-base --arch bert --layers 12 --hidden 768 --heads 12 \\
        --inter 3072 --vocab 30522 --maxpos 512
    python python/bench/overhead.py /tmp/bert-base [--repeats 15]

Each round calls bert8.Model.forward as users do (int64 ids as a tokenizer gives them, dtype
conversion, outputs copied out of the session and wrapped as NumPy arrays) and reads the wall
time the extension measured around bert8_forward itself (Model._m.last_forward_seconds). The
difference is the time outside C of that same call: Python, the extension's argument handling
and the output copy. Pairing both numbers in one call keeps the machine's noise (a shared,
loaded machine: the forward time itself varies by tens of percent) out of the overhead.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import bert8


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
    m.forward(ids64, mask64, types64)  # warm-up: scratch allocation, primitive creation
    inside, outside, share = [], [], []
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        m.forward(ids64, mask64, types64)
        total = time.perf_counter() - t0
        c = m._m.last_forward_seconds
        inside.append(c)
        outside.append(total - c)
        share.append((total - c) / c)
    mi, mo = statistics.median(inside), statistics.median(outside)
    print(f"bert8 {bert8.__version__}: {a.model}, batch {a.batch} x {a.seq}, {m.threads} thread(s), {a.repeats} calls")
    print(f"  inside bert8_forward:  median {mi * 1e3:9.2f} ms (min {min(inside) * 1e3:.2f}, max {max(inside) * 1e3:.2f})")
    print(f"  outside C, same calls: median {mo * 1e3:9.3f} ms (min {min(outside) * 1e3:.3f}, max {max(outside) * 1e3:.3f})")
    print(f"  time outside C: {100 * statistics.median(share):.3f}% of the forward (median of per-call shares; "
          f"max {100 * max(share):.3f}%)")


if __name__ == "__main__":
    main()
