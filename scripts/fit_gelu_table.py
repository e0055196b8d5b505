#!/usr/bin/env python3
"""Fits the piecewise polynomial of bert8's GELU (src/kernels/vmath) and prints its table.

    python3 scripts/fit_gelu_table.py [--check]

GELU(x) = max(x, 0) + h(|x|) with h(a) = -a (1 - Phi(a)) = GELU(-a), a smooth bump in
[-0.17, 0] that vanishes past a = 5.5 (h(5.565) = -1.5e-7). u = a * B8_VM_GELU_SCALE picks one of
B8_VM_GELU_PIECES intervals (i = floor(u), t = u - i in [0, 1)), h = C0[i] + t (C1[i] + t (...)),
and h = 0 from u >= B8_VM_GELU_PIECES on. No division and no exp: five table lookups (a vpermps
each) and four multiply-adds, where erf's rational form took thirteen multiply-adds and a
division (which on Zen 4 share the vpdpbusd pipe: docs/benchmarks.md).

Coefficients: least squares on 400 Chebyshev nodes per interval (near minimax), rounded to
float32; interval 0 has C0 = 0 so that GELU(0) = 0 exactly. --check evaluates the table as the
C code does (float32, fused multiply-adds) over [-12, 12] against erf in double and prints the
worst error relative to 1 + |GELU(x)| (2.1e-7; the erf form's bound was 1e-6).
"""
import argparse

import numpy as np
from scipy.special import erf, erfc

PIECES = 16
SCALE = np.float32(2.875)  # exact in binary; PIECES / SCALE = 5.565
DEGREE = 4


def h(a):
    return -a * 0.5 * erfc(a / np.sqrt(2.0))


def fit():
    table = np.zeros((DEGREE + 1, PIECES), dtype=np.float32)
    k = 400
    t = 0.5 - 0.5 * np.cos(np.pi * (np.arange(k) + 0.5) / k)
    for i in range(PIECES):
        a = (i + t) / np.float64(SCALE)
        v = np.vander(t, DEGREE + 1, increasing=True)
        if i == 0:
            w = np.concatenate([[0.0], np.linalg.lstsq(v[:, 1:], h(a), rcond=None)[0]])
        else:
            w = np.linalg.lstsq(v, h(a), rcond=None)[0]
        table[:, i] = w.astype(np.float32)
    return table


def fma32(a, b, c):
    # a * b is exact in double for float32 operands; one rounding of the sum to float32 (the
    # double rounding of the sum can differ from fmaf in rare last-bit cases: fine for a bound).
    return (np.float64(a) * np.float64(b) + np.float64(c)).astype(np.float32)


def gelu_table(x, table):
    x = x.astype(np.float32)
    a = np.abs(x)
    u = (a * SCALE).astype(np.float32)
    keep = u < np.float32(PIECES)
    u = np.minimum(u, np.nextafter(np.float32(PIECES), np.float32(0)))
    f = np.floor(u)
    i = f.astype(np.int64)
    t = (u - f).astype(np.float32)
    p = table[DEGREE][i]
    for j in range(DEGREE - 1, -1, -1):
        p = fma32(p, t, table[j][i])
    return (np.maximum(np.float32(0), x) + np.where(keep, p, np.float32(0))).astype(np.float32)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="print the worst error against erf in double")
    args = ap.parse_args()
    table = fit()
    if args.check:
        x = np.linspace(-12, 12, 4000001).astype(np.float32)
        g = 0.5 * np.float64(x) * (1.0 + erf(np.float64(x) / np.sqrt(2.0)))
        err = np.abs(gelu_table(x, table) - g) / (1.0 + np.abs(g))
        print(f"worst error {err.max():.3g} relative to 1 + |GELU(x)| at x = {x[np.argmax(err)]:.7g}")
        return
    print(f"/* scripts/fit_gelu_table.py: B8_VM_GELU_PIECES {PIECES}, B8_VM_GELU_SCALE {SCALE}, degree {DEGREE} */")
    print("const float b8_vm_gelu_table[B8_VM_GELU_DEGREE + 1][B8_VM_GELU_PIECES]")
    print("    __attribute__((aligned(64))) = {")
    for j in range(DEGREE + 1):
        rows = [", ".join(f"{float(c):.9e}f" for c in table[j][q:q + 4]) for q in range(0, PIECES, 4)]
        print("        {" + ",\n         ".join(rows) + "},")
    print("};")


if __name__ == "__main__":
    main()
