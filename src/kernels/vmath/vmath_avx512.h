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

/* GELU as vmath.h describes it: each coefficient row of the table is one register, indexed by
 * vpermps; t = u - trunc(u) by one vreduceps. */
B8_V512_INLINE __m512 b8_v16_gelu(__m512 x) {
    const __m512 u = _mm512_mul_ps(_mm512_abs_ps(x), _mm512_set1_ps(B8_VM_GELU_SCALE));
    const __mmask16 keep = _mm512_cmp_ps_mask(u, _mm512_set1_ps((float)B8_VM_GELU_PIECES), _CMP_LT_OQ);
    const __m512i i = _mm512_cvttps_epi32(_mm512_min_ps(u, _mm512_set1_ps(B8_VM_GELU_UMAX)));
    const __m512 t = _mm512_reduce_ps(u, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512 h = _mm512_permutexvar_ps(i, _mm512_load_ps(b8_vm_gelu_table[4]));
    h = _mm512_fmadd_ps(h, t, _mm512_permutexvar_ps(i, _mm512_load_ps(b8_vm_gelu_table[3])));
    h = _mm512_fmadd_ps(h, t, _mm512_permutexvar_ps(i, _mm512_load_ps(b8_vm_gelu_table[2])));
    h = _mm512_fmadd_ps(h, t, _mm512_permutexvar_ps(i, _mm512_load_ps(b8_vm_gelu_table[1])));
    h = _mm512_maskz_fmadd_ps(keep, h, t, _mm512_permutexvar_ps(i, _mm512_load_ps(b8_vm_gelu_table[0])));
    return _mm512_add_ps(_mm512_max_ps(_mm512_setzero_ps(), x), h);
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
