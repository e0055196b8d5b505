/* vmath_avx2.h: AVX2 twins of the epilogue math in vmath.h (8 floats at a time), with
 * the same constants and order of operations as vmath.c so the results are bit-identical. */
#ifndef BERT8_VMATH_AVX2_H
#define BERT8_VMATH_AVX2_H

#include <immintrin.h>
#include <stdint.h>

#include "kernels/vmath/vmath.h"

#define B8_T256 __attribute__((target("avx2,fma")))
#define B8_V256_INLINE static inline __attribute__((always_inline)) B8_T256

/* Lanes [0, left) of 8 as a load/store mask (left may be <= 0 or >= 8). */
B8_V256_INLINE __m256i b8_v8_lanes(int64_t left) {
    const int n = left >= 8 ? 8 : left <= 0 ? 0 : (int)left;
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* b8_v8_exp_parts of an x already within [B8_VM_EXP_LO, B8_VM_EXP_HI] (or whose lanes outside it
 * the caller discards). */
B8_V256_INLINE void b8_v8_exp_parts_clamped(__m256 x, __m256 *p_out, __m256 *s_out) {
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(B8_VM_LOG2E)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-B8_VM_LN2_HI), x);
    r = _mm256_fmadd_ps(n, _mm256_set1_ps(-B8_VM_LN2_LO), r);
    __m256 p = _mm256_set1_ps(B8_VM_EXP_C6);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(B8_VM_EXP_C5));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(B8_VM_EXP_C4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(B8_VM_EXP_C3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(B8_VM_EXP_C2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(B8_VM_EXP_C1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(B8_VM_EXP_C0));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)),
                                  23);
    *p_out = p;
    *s_out = _mm256_castsi256_ps(e);
}

/* exp(x) = p * s; callers fold the product into their next fused operation. */
B8_V256_INLINE void b8_v8_exp_parts(__m256 x, __m256 *p_out, __m256 *s_out) {
    b8_v8_exp_parts_clamped(_mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(B8_VM_EXP_LO)), _mm256_set1_ps(B8_VM_EXP_HI)),
                            p_out, s_out);
}

B8_V256_INLINE __m256 b8_v8_exp(__m256 x) {
    __m256 p, s;
    b8_v8_exp_parts(x, &p, &s);
    return _mm256_mul_ps(p, s);
}

/* Coefficient row j of the GELU table at indices i (0..15): vpermps on each half, the upper
 * half's where i > 7. */
B8_V256_INLINE __m256 b8_v8_gelu_coef(int j, __m256i i, __m256 upper) {
    return _mm256_blendv_ps(_mm256_permutevar8x32_ps(_mm256_load_ps(b8_vm_gelu_table[j]), i),
                            _mm256_permutevar8x32_ps(_mm256_load_ps(b8_vm_gelu_table[j] + 8), i), upper);
}

/* GELU as vmath.h describes it. u has uses other than the subtraction, so it is never
 * contracted into a multiply-add (test_qgemm checks the twins bit for bit). */
B8_V256_INLINE __m256 b8_v8_gelu(__m256 x) {
    const __m256 u = _mm256_mul_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), x), _mm256_set1_ps(B8_VM_GELU_SCALE));
    const __m256 keep = _mm256_cmp_ps(u, _mm256_set1_ps((float)B8_VM_GELU_PIECES), _CMP_LT_OQ);
    const __m256i i = _mm256_cvttps_epi32(_mm256_min_ps(u, _mm256_set1_ps(B8_VM_GELU_UMAX)));
    const __m256 t = _mm256_sub_ps(u, _mm256_cvtepi32_ps(i));
    const __m256 upper = _mm256_castsi256_ps(_mm256_cmpgt_epi32(i, _mm256_set1_epi32(7)));
    __m256 h = b8_v8_gelu_coef(4, i, upper);
    h = _mm256_fmadd_ps(h, t, b8_v8_gelu_coef(3, i, upper));
    h = _mm256_fmadd_ps(h, t, b8_v8_gelu_coef(2, i, upper));
    h = _mm256_fmadd_ps(h, t, b8_v8_gelu_coef(1, i, upper));
    h = _mm256_and_ps(keep, _mm256_fmadd_ps(h, t, b8_v8_gelu_coef(0, i, upper)));
    return _mm256_add_ps(_mm256_max_ps(_mm256_setzero_ps(), x), h);
}

B8_V256_INLINE __m256 b8_v8_gelu_tanh(__m256 x) {
    __m256 k = _mm256_fmadd_ps(_mm256_mul_ps(x, x), _mm256_set1_ps(B8_VM_GT_K3),
                               _mm256_set1_ps(B8_VM_GT_K1));
    __m256 p, s;
    b8_v8_exp_parts(_mm256_mul_ps(x, k), &p, &s);
    return _mm256_div_ps(x, _mm256_fmadd_ps(p, s, _mm256_set1_ps(1.0f)));
}

B8_V256_INLINE __m256 b8_v8_relu(__m256 x) { return _mm256_max_ps(x, _mm256_setzero_ps()); }

B8_V256_INLINE __m256 b8_v8_silu(__m256 x) {
    __m256 p, s;
    b8_v8_exp_parts(_mm256_sub_ps(_mm256_setzero_ps(), x), &p, &s);
    return _mm256_div_ps(x, _mm256_fmadd_ps(p, s, _mm256_set1_ps(1.0f)));
}

#endif
