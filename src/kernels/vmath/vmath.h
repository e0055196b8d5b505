/* vmath.h: the exp, erf and GELU approximations of the INT8 epilogues. One definition of the
 * constants and of the order of operations; vmath.c holds the scalar twins, vmath_avx512.h and
 * vmath_avx2.h the SIMD ones, and all three give bit-identical results.
 *
 * Rules that keep the twins bit-exact: every a*b+c is an explicit fused multiply-add (fmaf /
 * _mm*_fmadd_ps); no product ever feeds an addition written with '+' (gcc would contract it in
 * SIMD code, where FMA is available, and not in the baseline scalar build); max/min follow the
 * x86 rule "x > y ? x : y" (NaN picks the second operand); rounding is to nearest even.
 *
 * Accuracy (checked by test_qgemm against libm in double): exp relative error <= 2e-7 on
 * [-87, 88]; erf relative error <= 3e-7 (~2.5 ulp); GELU error <= 1e-6 relative to 1 + |y|,
 * the worst case in the negative tail where h + h * erf cancels. A two-branch erf (polynomial
 * below 0.9, 1 - exp(poly) above) was 1.7e-7 accurate but cost twice the operations, which
 * made the GELU -> int8 epilogue 8% slower on the FFN-in GEMM. */
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

/* erf(z) = c * P(c^2) / Q(c^2), c = z clamped to [-B8_VM_ERF_CLAMP, B8_VM_ERF_CLAMP] (erf(3.92)
 * rounds to 1): one rational function for the whole range, P degree 6 and Q degree 4 in c^2,
 * fitted for relative error; 13 multiply-adds and one division. */
#define B8_VM_ERF_CLAMP 3.92f
#define B8_VM_ERF_P0 1.128379107e+00f
#define B8_VM_ERF_P1 1.998950541e-01f
#define B8_VM_ERF_P2 5.056894943e-02f
#define B8_VM_ERF_P3 3.700136207e-03f
#define B8_VM_ERF_P4 1.417993917e-04f
#define B8_VM_ERF_P5 (-1.957289214e-06f)
#define B8_VM_ERF_P6 1.991876708e-08f
#define B8_VM_ERF_Q1 5.104840398e-01f
#define B8_VM_ERF_Q2 1.149857938e-01f
#define B8_VM_ERF_Q3 1.435036585e-02f
#define B8_VM_ERF_Q4 9.556316072e-04f

/* GELU (erf form): h = 0.5 x; y = fma(h, erf(x * (1/sqrt 2)), h). */
#define B8_VM_SQRT1_2 0.707106781187f
/* GELU (tanh form, "gelu_new"): 0.5 x (1 + tanh(u)) = x / (1 + exp(-2u)), which has no
 * cancellation; -2u = x * fma(x*x, B8_VM_GT_K3, B8_VM_GT_K1). */
#define B8_VM_GT_K1 (-1.59576912161f)            /* -2 sqrt(2/pi) */
#define B8_VM_GT_K3 (-0.0713548162726f)          /* -2 sqrt(2/pi) 0.044715 */

/* Scalar twins (vmath.c). Kept out of line so they are never inlined into, and contracted
 * by, a function compiled for an FMA target. */
float b8_vm_exp(float x);
float b8_vm_erf(float x);
float b8_vm_gelu(float x);
float b8_vm_gelu_tanh(float x);
float b8_vm_relu(float x);
/* SiLU x / (1 + exp(-x)): exp's parts folded into one fused multiply-add, as in gelu_tanh. */
float b8_vm_silu(float x);

#endif
