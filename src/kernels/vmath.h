/* vmath.h: the exp, erf and GELU approximations of the INT8 epilogues. One definition of the
 * constants and of the order of operations; vmath.c holds the scalar twins, vmath_avx512.h and
 * vmath_avx2.h the SIMD ones, and all three give bit-identical results.
 *
 * Rules that keep the twins bit-exact: every a*b+c is an explicit fused multiply-add (fmaf /
 * _mm*_fmadd_ps); no product ever feeds an addition written with '+' (gcc would contract it in
 * SIMD code, where FMA is available, and not in the baseline scalar build); max/min follow the
 * x86 rule "x > y ? x : y" (NaN picks the second operand); rounding is to nearest even.
 *
 * Accuracy (checked by test_qgemm against libm in double): erf relative error <= 2e-7 (~1.5
 * ulp), exp relative error <= 2e-7 on [-87, 88]. */
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

/* erf(z), a = |z|: a < B8_VM_ERF_SPLIT: a * P(a^2) (P degree 5);
 * B8_VM_ERF_SPLIT <= a < B8_VM_ERF_ONE: 1 - exp(Q(a)), Q ~ log(erfc(a)) (degree 8);
 * beyond: 1 (erfc(3.92) < half an ulp of 1). The sign of z is copied onto the result. */
#define B8_VM_ERF_SPLIT 0.9f
#define B8_VM_ERF_ONE 3.92f
#define B8_VM_ERF_P0 1.128379107e+00f
#define B8_VM_ERF_P1 (-3.761255443e-01f)
#define B8_VM_ERF_P2 1.128240898e-01f
#define B8_VM_ERF_P3 (-2.678741328e-02f)
#define B8_VM_ERF_P4 5.023305770e-03f
#define B8_VM_ERF_P5 (-6.144185318e-04f)
#define B8_VM_ERF_Q0 3.077939909e-04f
#define B8_VM_ERF_Q1 (-1.130187988e+00f)
#define B8_VM_ERF_Q2 (-6.318956614e-01f)
#define B8_VM_ERF_Q3 (-1.100221127e-01f)
#define B8_VM_ERF_Q4 2.639247105e-02f
#define B8_VM_ERF_Q5 (-4.751002882e-03f)
#define B8_VM_ERF_Q6 5.952882930e-04f
#define B8_VM_ERF_Q7 (-4.591526158e-05f)
#define B8_VM_ERF_Q8 1.631786631e-06f

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

#endif
