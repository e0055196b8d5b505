/* vmath.h: the exp and GELU approximations of the INT8 epilogues. One definition of the
 * constants and of the order of operations; vmath.c holds the scalar twins, vmath_avx512.h and
 * vmath_avx2.h the SIMD ones, and all three give bit-identical results.
 *
 * Rules that keep the twins bit-exact: every a*b+c is an explicit fused multiply-add (fmaf /
 * _mm*_fmadd_ps); no product ever feeds an addition written with '+' (gcc would contract it in
 * SIMD code, where FMA is available, and not in the baseline scalar build); max/min follow the
 * x86 rule "x > y ? x : y" (NaN picks the second operand); rounding is to nearest even.
 *
 * Accuracy (checked by test_qgemm against libm in double): exp relative error <= 2e-7 on
 * [-87, 88]; GELU error <= 2.1e-7 relative to 1 + |y| (scripts/fit_gelu_table.py --check). */
#ifndef BERT8_VMATH_H
#define BERT8_VMATH_H

/* exp(x) = 2^n * p(r), n = rint(x log2 e), r = x - n ln2 (two-part ln2); p fitted on
 * [-ln2/2, ln2/2]. The argument is clamped to [B8_VM_EXP_LO, B8_VM_EXP_HI]. */
#define B8_VM_EXP_LO (-87.0f)
#define B8_VM_EXP_HI 88.0f
#define B8_VM_LOG2E 1.44269504089f
#define B8_VM_LN2_HI 0.693359375f
#define B8_VM_LN2_LO (-2.12194440e-4f)
#define B8_VM_EXP_C0 1.000000000e+00f
#define B8_VM_EXP_C1 1.000000000e+00f
#define B8_VM_EXP_C2 5.000000000e-01f
#define B8_VM_EXP_C3 1.666641533e-01f
#define B8_VM_EXP_C4 4.166621715e-02f
#define B8_VM_EXP_C5 8.375128731e-03f
#define B8_VM_EXP_C6 1.394858118e-03f

/* GELU (erf form) = max(x, 0) + h(|x|), h(a) = -a (1 - Phi(a)) = GELU(-a): a bump in
 * [-0.17, 0] that is below 1.5e-7 from a = 5.565 on. u = a * B8_VM_GELU_SCALE; below
 * B8_VM_GELU_PIECES, i = floor(u), t = u - i and h = C0[i] + t (C1[i] + t (C2[i] + t (C3[i] +
 * t C4[i]))) from b8_vm_gelu_table (vmath.c, printed by scripts/fit_gelu_table.py); at and past
 * it (or NaN), h = 0. Five table lookups and four multiply-adds, no division: the erf form it
 * replaced (a rational function, thirteen multiply-adds and a division) took about 20 vpdpbusd
 * slots per 16 values on Zen 4, which shares that pipe with the float math, and held the
 * GELU -> int8 FFN-in GEMM of all-MiniLM-L6-v2 at 73% of the peak (docs/benchmarks.md). There is
 * no cancellation: h is added to max(x, 0), never formed as a difference. */
#define B8_VM_GELU_PIECES 16
#define B8_VM_GELU_DEGREE 4
#define B8_VM_GELU_SCALE 2.875f
/* the largest float below B8_VM_GELU_PIECES: u's clamp, which keeps every index in the table */
#define B8_VM_GELU_UMAX 15.999999f
extern const float b8_vm_gelu_table[B8_VM_GELU_DEGREE + 1][B8_VM_GELU_PIECES];

/* GELU (tanh form, "gelu_new"): 0.5 x (1 + tanh(u)) = x / (1 + exp(-2u)), which has no
 * cancellation; -2u = x * fma(x*x, B8_VM_GT_K3, B8_VM_GT_K1). */
#define B8_VM_GT_K1 (-1.59576912161f)            /* -2 sqrt(2/pi) */
#define B8_VM_GT_K3 (-0.0713548162726f)          /* -2 sqrt(2/pi) 0.044715 */

/* Scalar twins (vmath.c). Kept out of line so they are never inlined into, and contracted
 * by, a function compiled for an FMA target. */
float b8_vm_exp(float x);
float b8_vm_gelu(float x);
float b8_vm_gelu_tanh(float x);
float b8_vm_relu(float x);
/* SiLU x / (1 + exp(-x)): exp's parts folded into one fused multiply-add, as in gelu_tanh. */
float b8_vm_silu(float x);

#endif
