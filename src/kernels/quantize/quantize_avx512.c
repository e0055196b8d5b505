/* quantize_avx512.c: AVX-512 twins of the activation quantizers (see quantize.h for the exact
 * order of operations, shared with the scalar oracle in quantize.c). */
#include "kernels/quantize/quantize.h"

#include <immintrin.h>
#include <math.h>

#define T512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define LANES B8_QUANT_LANES

static inline T512 __mmask16 tail(int64_t left) {
    return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
}

static inline T512 void store_q(int8_t *dst, __mmask16 k, __m512 v) {
    v = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(-127.0f)), _mm512_set1_ps(127.0f));
    _mm_mask_storeu_epi8(dst, k, _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(v)));
}

static inline T512 __m512 load_v(const float *x, const float *mul, int64_t j, __mmask16 k) {
    __m512 v = _mm512_maskz_loadu_ps(k, x + j);
    return mul ? _mm512_mul_ps(v, _mm512_maskz_loadu_ps(k, mul + j)) : v;
}

T512 void b8_quantize_static__avx512(const float *x, int64_t ldx, int64_t rows, int64_t n,
                                     const float *mul, float inv_scale, int8_t *q, int64_t ldq) {
    __m512 inv = _mm512_set1_ps(inv_scale);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < n; j += LANES) {
            __mmask16 k = tail(n - j);
            store_q(q + r * ldq + j, k, _mm512_mul_ps(load_v(x + r * ldx, mul, j, k), inv));
        }
}

T512 void b8_quantize_dynamic__avx512(const float *x, int64_t ldx, int64_t rows, int64_t n,
                                      const float *mul, int8_t *q, int64_t ldq, float *row_scale) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * ldx;
        __m512 vmax = _mm512_setzero_ps();
        for (int64_t j = 0; j < n; j += LANES)
            vmax = _mm512_max_ps(_mm512_abs_ps(load_v(xr, mul, j, tail(n - j))), vmax);
        float amax = _mm512_reduce_max_ps(vmax);
        float s = amax > 0.0f ? amax / 127.0f : 1.0f;
        row_scale[r] = s;
        __m512 inv = _mm512_set1_ps(1.0f / s);
        for (int64_t j = 0; j < n; j += LANES) {
            __mmask16 k = tail(n - j);
            store_q(q + r * ldq + j, k, _mm512_mul_ps(load_v(xr, mul, j, k), inv));
        }
    }
}

static inline T512 float sum_lanes(__m512 v) {
    float l[LANES];
    _mm512_storeu_ps(l, v);
    float s = l[0];
    for (int i = 1; i < LANES; i++) s += l[i];
    return s;
}

T512 void b8_layernorm_quantize__avx512(const float *x, int64_t ldx, int64_t rows, int64_t n,
                                        const b8_ln_quant *p, int8_t *q, int64_t ldq) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * ldx;
        __m512 acc = _mm512_setzero_ps();
        for (int64_t j = 0; j < n; j += LANES)
            acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(tail(n - j), xr + j));
        float mean = sum_lanes(acc) / (float)n;
        __m512 vmean = _mm512_set1_ps(mean);
        __m512 acc2 = _mm512_setzero_ps();
        for (int64_t j = 0; j < n; j += LANES) {
            __mmask16 k = tail(n - j);
            __m512 d = _mm512_maskz_sub_ps(k, _mm512_maskz_loadu_ps(k, xr + j), vmean);
            acc2 = _mm512_fmadd_ps(d, d, acc2);
        }
        float rstd = 1.0f / sqrtf(sum_lanes(acc2) / (float)n + p->eps);
        __m512 vrstd = _mm512_set1_ps(rstd);
        for (int64_t j = 0; j < n; j += LANES) {
            __mmask16 k = tail(n - j);
            __m512 d = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, xr + j), vmean), vrstd);
            store_q(q + r * ldq + j, k,
                    _mm512_fmadd_ps(d, _mm512_maskz_loadu_ps(k, p->qg + j),
                                    _mm512_maskz_loadu_ps(k, p->qb + j)));
            if (p->y)
                _mm512_mask_storeu_ps(p->y + r * p->ldy + j, k,
                                      _mm512_fmadd_ps(d, _mm512_maskz_loadu_ps(k, p->g + j),
                                                      _mm512_maskz_loadu_ps(k, p->b + j)));
        }
    }
}
