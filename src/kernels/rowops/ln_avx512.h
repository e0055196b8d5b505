/* ln_avx512.h: the statistics of the AVX-512 LayerNorms (rowops' fp32 LayerNorm and quantize's
 * LayerNorm -> int8), for `rows` rows at once (a constant at each caller, 1 to 4) with their steps
 * interleaved: one row alone is a chain of dependent additions (16 lane sums of the mean, their
 * reduction, then the same for the variance) that leaves the core mostly idle. Each row's
 * operations and their order are those of the scalar twins: lane j % 16, lanes added 0..15,
 * mean = sum / n, rstd = 1 / sqrt(sum((x - mean)^2) / n + eps). */
#ifndef BERT8_LN_AVX512_H
#define BERT8_LN_AVX512_H

#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#define B8_LN_T512 __attribute__((target("avx512f")))
#define B8_LN_MAX_ROWS 4

static inline __attribute__((always_inline)) B8_LN_T512 __mmask16 b8_ln_tail(int64_t left) {
    return left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u);
}

static inline __attribute__((always_inline)) B8_LN_T512 float b8_ln_sum_lanes(__m512 v) {
    float l[16];
    _mm512_storeu_ps(l, v);
    float s = l[0];
    for (int i = 1; i < 16; i++) s += l[i];
    return s;
}

/* vmean[r], vrstd[r]: the mean and 1/sqrt(var + eps) of row r (x + r * ldx, n floats), broadcast. */
static inline __attribute__((always_inline)) B8_LN_T512 void
b8_ln_stats_rows(const int rows, const float *x, int64_t ldx, int64_t n, float eps, __m512 *vmean, __m512 *vrstd) {
    __m512 acc[B8_LN_MAX_ROWS];
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++) acc[r] = _mm512_setzero_ps();
    for (int64_t j = 0; j < n; j += 16) {
        const __mmask16 k = b8_ln_tail(n - j);
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++) acc[r] = _mm512_add_ps(acc[r], _mm512_maskz_loadu_ps(k, x + r * ldx + j));
    }
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++) {
        vmean[r] = _mm512_set1_ps(b8_ln_sum_lanes(acc[r]) / (float)n);
        acc[r] = _mm512_setzero_ps();
    }
    for (int64_t j = 0; j < n; j += 16) {
        const __mmask16 k = b8_ln_tail(n - j);
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++) {
            const __m512 d = _mm512_maskz_sub_ps(k, _mm512_maskz_loadu_ps(k, x + r * ldx + j), vmean[r]);
            acc[r] = _mm512_fmadd_ps(d, d, acc[r]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++) vrstd[r] = _mm512_set1_ps(1.0f / sqrtf(b8_ln_sum_lanes(acc[r]) / (float)n + eps));
}

#endif
