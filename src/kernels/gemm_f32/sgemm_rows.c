/* sgemm_rows.c: the task heads' FP32 product (sgemm_rows.h says why and in what order), AVX2
 * and its scalar twin. The AVX2 kernel runs blocks of 2 rows x 4 outputs: eight independent
 * accumulators cover the fused multiply-add latency on two pipes. */
#include "kernels/gemm_f32/sgemm_rows.h"

#include <immintrin.h>
#include <math.h>

#include "kernels/dispatch.h"
#include "kernels/vmath/vmath_avx2.h"

/* The epilogue of one output: one compiled copy, called by both kernels, so that they round
 * alike (inlined into the AVX2 kernel, the compiler could fuse its multiplies and adds). */
static __attribute__((noinline)) float finish(float dot, float bias, b8_act post, bool acc, const float *c) {
    float v = dot + bias;
    switch (post) {
    case B8_ACT_GELU: v = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)); break;
    case B8_ACT_GELU_TANH:
        v = 0.5f * v * (1.0f + tanhf(0.79788456080286536f * (v + 0.044715f * v * v * v)));
        break;
    case B8_ACT_RELU: v = v > 0.0f ? v : 0.0f; break;
    case B8_ACT_TANH: v = tanhf(v); break;
    default: break;
    }
    return acc ? *c + v : v;
}

void b8_sgemm_rows__scalar(const float *a, int64_t lda, int64_t m, const float *w,
                           const float *bias, int64_t k, b8_act post, bool acc, float *c,
                           int64_t ldc, int64_t j0, int64_t j1) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = j0; j < j1; j++) {
            const float *ar = a + i * lda, *wr = w + j * k;
            float l[8] = {0};
            for (int64_t k0 = 0; k0 < k; k0 += 8)
                for (int t = 0; t < 8; t++) {
                    int64_t kk = k0 + t;
                    /* the AVX2 kernel's masked tail loads zeros: 0 * 0 is added there too */
                    l[t] = kk < k ? fmaf(ar[kk], wr[kk], l[t]) : fmaf(0.0f, 0.0f, l[t]);
                }
            float dot = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
            c[i * ldc + j] = finish(dot, bias[j], post, acc, c + i * ldc + j);
        }
}

static inline B8_T256 float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)); /* l+l4 */
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));       /* (l0+l4)+(l2+l6), (l1+l5)+(l3+l7) */
    s = _mm_add_ss(s, _mm_movehdup_ps(s));        /* their sum */
    return _mm_cvtss_f32(s);
}

/* R rows x T outputs (constants after inlining). */
static inline __attribute__((always_inline)) B8_T256 void
block(const int R, const int T, const float *a, int64_t lda, const float *w, int64_t k,
      __m256i tail, float dot[2][4]) {
    __m256 acc[2][4];
#pragma GCC unroll 2
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) acc[r][t] = _mm256_setzero_ps();
    int64_t kk = 0;
    for (; kk + 8 <= k; kk += 8) {
        __m256 av[2];
#pragma GCC unroll 2
        for (int r = 0; r < R; r++) av[r] = _mm256_loadu_ps(a + r * lda + kk);
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            __m256 wv = _mm256_loadu_ps(w + t * k + kk);
#pragma GCC unroll 2
            for (int r = 0; r < R; r++) acc[r][t] = _mm256_fmadd_ps(av[r], wv, acc[r][t]);
        }
    }
    if (kk < k) {
        __m256 av[2];
#pragma GCC unroll 2
        for (int r = 0; r < R; r++) av[r] = _mm256_maskload_ps(a + r * lda + kk, tail);
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            __m256 wv = _mm256_maskload_ps(w + t * k + kk, tail);
#pragma GCC unroll 2
            for (int r = 0; r < R; r++) acc[r][t] = _mm256_fmadd_ps(av[r], wv, acc[r][t]);
        }
    }
#pragma GCC unroll 2
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) dot[r][t] = hsum(acc[r][t]);
}

B8_T256 void b8_sgemm_rows__avx2(const float *a, int64_t lda, int64_t m, const float *w,
                                 const float *bias, int64_t k, b8_act post, bool acc, float *c,
                                 int64_t ldc, int64_t j0, int64_t j1) {
    const __m256i tail = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(k % 8)),
                                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    for (int64_t i = 0; i < m; i += 2) {
        const int R = m - i >= 2 ? 2 : 1;
        for (int64_t j = j0; j < j1; j += 4) {
            const int T = j1 - j >= 4 ? 4 : (int)(j1 - j);
            const float *ar = a + i * lda, *wr = w + j * k;
            float dot[2][4];
            if (R == 2) {
                switch (T) {
                case 4: block(2, 4, ar, lda, wr, k, tail, dot); break;
                case 3: block(2, 3, ar, lda, wr, k, tail, dot); break;
                case 2: block(2, 2, ar, lda, wr, k, tail, dot); break;
                default: block(2, 1, ar, lda, wr, k, tail, dot); break;
                }
            } else {
                switch (T) {
                case 4: block(1, 4, ar, lda, wr, k, tail, dot); break;
                case 3: block(1, 3, ar, lda, wr, k, tail, dot); break;
                case 2: block(1, 2, ar, lda, wr, k, tail, dot); break;
                default: block(1, 1, ar, lda, wr, k, tail, dot); break;
                }
            }
            for (int r = 0; r < R; r++)
                for (int t = 0; t < T; t++) {
                    float *cp = c + (i + r) * ldc + j + t;
                    *cp = finish(dot[r][t], bias[j + t], post, acc, cp);
                }
        }
    }
}

static const b8_impl sgemm_rows_impls[] = {
    {"sgemm_rows__avx2", B8_ISA_AVX2, (b8_fnptr)b8_sgemm_rows__avx2},
    {"sgemm_rows__scalar", B8_ISA_SCALAR, (b8_fnptr)b8_sgemm_rows__scalar},
};
b8_op_table b8_op_sgemm_rows = {"sgemm_rows", sgemm_rows_impls, 2, -1};

b8_sgemm_rows_fn b8_sgemm_rows_best(void) {
    return (b8_sgemm_rows_fn)b8_dispatch(&b8_op_sgemm_rows)->fn;
}
