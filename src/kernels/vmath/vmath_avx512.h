/* vmath_avx512.h: AVX-512 twins of the epilogue math in vmath.h (16 floats at a time), with
 * the same constants and order of operations as vmath.c so the results are bit-identical. */
#ifndef BERT8_VMATH_AVX512_H
#define BERT8_VMATH_AVX512_H

#include <immintrin.h>

#include "kernels/vmath/vmath.h"

#define B8_T512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))
#define B8_V512_INLINE static inline __attribute__((always_inline)) B8_T512

/* exp(x) = p * s; callers fold the product into their next fused operation. */
B8_V512_INLINE void b8_v16_exp_parts(__m512 x, __m512 *p_out, __m512 *s_out) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(B8_VM_EXP_LO)),
                      _mm512_set1_ps(B8_VM_EXP_HI));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(B8_VM_LOG2E)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-B8_VM_LN2_HI), x);
    r = _mm512_fmadd_ps(n, _mm512_set1_ps(-B8_VM_LN2_LO), r);
    __m512 p = _mm512_set1_ps(B8_VM_EXP_C6);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(B8_VM_EXP_C5));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(B8_VM_EXP_C4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(B8_VM_EXP_C3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(B8_VM_EXP_C2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(B8_VM_EXP_C1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(B8_VM_EXP_C0));
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)),
                                  23);
    *p_out = p;
    *s_out = _mm512_castsi512_ps(e);
}

B8_V512_INLINE __m512 b8_v16_exp(__m512 x) {
    __m512 p, s;
    b8_v16_exp_parts(x, &p, &s);
    return _mm512_mul_ps(p, s);
}

B8_V512_INLINE __m512 b8_v16_erf(__m512 z) {
    __m512 c = _mm512_min_ps(_mm512_max_ps(z, _mm512_set1_ps(-B8_VM_ERF_CLAMP)), _mm512_set1_ps(B8_VM_ERF_CLAMP));
    __m512 t = _mm512_mul_ps(c, c);
    __m512 p = _mm512_set1_ps(B8_VM_ERF_P6);
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(B8_VM_ERF_P5));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(B8_VM_ERF_P4));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(B8_VM_ERF_P3));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(B8_VM_ERF_P2));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(B8_VM_ERF_P1));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(B8_VM_ERF_P0));
    __m512 q = _mm512_set1_ps(B8_VM_ERF_Q4);
    q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(B8_VM_ERF_Q3));
    q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(B8_VM_ERF_Q2));
    q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(B8_VM_ERF_Q1));
    q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(1.0f));
    return _mm512_div_ps(_mm512_mul_ps(c, p), q);
}

B8_V512_INLINE __m512 b8_v16_gelu(__m512 x) {
    __m512 h = _mm512_mul_ps(x, _mm512_set1_ps(0.5f));
    __m512 erf = b8_v16_erf(_mm512_mul_ps(x, _mm512_set1_ps(B8_VM_SQRT1_2)));
    return _mm512_fmadd_ps(h, erf, h);
}

B8_V512_INLINE __m512 b8_v16_gelu_tanh(__m512 x) {
    __m512 k = _mm512_fmadd_ps(_mm512_mul_ps(x, x), _mm512_set1_ps(B8_VM_GT_K3),
                               _mm512_set1_ps(B8_VM_GT_K1));
    __m512 p, s;
    b8_v16_exp_parts(_mm512_mul_ps(x, k), &p, &s);
    return _mm512_div_ps(x, _mm512_fmadd_ps(p, s, _mm512_set1_ps(1.0f)));
}

B8_V512_INLINE __m512 b8_v16_relu(__m512 x) { return _mm512_max_ps(x, _mm512_setzero_ps()); }

B8_V512_INLINE __m512 b8_v16_silu(__m512 x) {
    __m512 p, s;
    b8_v16_exp_parts(_mm512_sub_ps(_mm512_setzero_ps(), x), &p, &s);
    return _mm512_div_ps(x, _mm512_fmadd_ps(p, s, _mm512_set1_ps(1.0f)));
}

#endif
