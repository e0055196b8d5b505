/* quantize_avx2.c: AVX2 twins of the activation quantizers (see quantize.h). The LayerNorm sums
 * keep the 16-lane order of the other twins with two 8-lane accumulators (lanes 0-7, 8-15). */
#include "kernels/quantize/quantize.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#define T256 __attribute__((target("avx2,fma")))
#define LANES B8_QUANT_LANES

/* Lane mask for the 8 floats at offset j of a row of n. */
static inline T256 __m256i tail(int64_t left) {
    int l = left >= 8 ? 8 : left <= 0 ? 0 : (int)left;
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(l), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

static inline T256 __m256 load(const float *p, int64_t left) {
    return left >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, tail(left));
}

static inline T256 void store_q(int8_t *dst, int64_t left, __m256 v) {
    v = _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
    __m256i i = _mm256_cvtps_epi32(v);
    /* int32 -> int8 without saturation concerns (already in [-127, 127]). */
    __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
    __m128i b = _mm_packs_epi16(w, w);
    if (left >= 8) {
        _mm_storel_epi64((__m128i *)dst, b);
    } else {
        int8_t t[16];
        _mm_storeu_si128((__m128i *)t, b);
        memcpy(dst, t, (size_t)left);
    }
}

static inline T256 __m256 load_v(const float *x, const float *mul, int64_t j, int64_t n) {
    __m256 v = load(x + j, n - j);
    return mul ? _mm256_mul_ps(v, load(mul + j, n - j)) : v;
}

T256 void b8_quantize_static__avx2(const float *x, int64_t ldx, int64_t rows, int64_t n,
                                   const float *mul, float inv_scale, float zero, int8_t *q, int64_t ldq) {
    __m256 inv = _mm256_set1_ps(inv_scale), z = _mm256_set1_ps(zero);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < n; j += 8)
            store_q(q + r * ldq + j, n - j, _mm256_fmadd_ps(load_v(x + r * ldx, mul, j, n), inv, z));
}

T256 void b8_quantize_dynamic__avx2(const float *x, int64_t ldx, int64_t rows, int64_t n,
                                    const float *mul, int8_t *q, int64_t ldq, float *row_scale) {
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * ldx;
        __m256 vmax = _mm256_setzero_ps();
        for (int64_t j = 0; j < n; j += 8)
            vmax = _mm256_max_ps(_mm256_and_ps(load_v(xr, mul, j, n), absmask), vmax);
        float l[8], amax = 0.0f;
        _mm256_storeu_ps(l, vmax);
        for (int i = 0; i < 8; i++) amax = l[i] > amax ? l[i] : amax;
        float s = amax > 0.0f ? amax / 127.0f : 1.0f;
        row_scale[r] = s;
        __m256 inv = _mm256_set1_ps(1.0f / s);
        for (int64_t j = 0; j < n; j += 8)
            store_q(q + r * ldq + j, n - j, _mm256_mul_ps(load_v(xr, mul, j, n), inv));
    }
}

T256 void b8_quantize_dynamic_zp__avx2(const float *x, int64_t ldx, int64_t rows, int64_t n,
                                       const float *mul, int8_t *q, int64_t ldq, float *row_scale,
                                       int32_t *row_zero) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * ldx;
        /* lanes past the row end load 0, which the range holds anyway */
        __m256 vlo = _mm256_setzero_ps(), vhi = _mm256_setzero_ps();
        for (int64_t j = 0; j < n; j += 8) {
            const __m256 v = load_v(xr, mul, j, n);
            vlo = _mm256_min_ps(v, vlo);
            vhi = _mm256_max_ps(v, vhi);
        }
        float l[8], h[8], lo = 0.0f, hi = 0.0f;
        _mm256_storeu_ps(l, vlo);
        _mm256_storeu_ps(h, vhi);
        for (int i = 0; i < 8; i++) {
            lo = l[i] < lo ? l[i] : lo;
            hi = h[i] > hi ? h[i] : hi;
        }
        float s, iv, z;
        b8_qzp_params(lo, hi, &s, &iv, &z);
        row_scale[r] = s;
        row_zero[r] = (int32_t)z;
        const __m256 inv = _mm256_set1_ps(iv), zp = _mm256_set1_ps(z);
        for (int64_t j = 0; j < n; j += 8)
            store_q(q + r * ldq + j, n - j, _mm256_fmadd_ps(load_v(xr, mul, j, n), inv, zp));
    }
}

static inline T256 float sum_lanes(__m256 lo, __m256 hi) {
    float l[LANES];
    _mm256_storeu_ps(l, lo);
    _mm256_storeu_ps(l + 8, hi);
    float s = l[0];
    for (int i = 1; i < LANES; i++) s += l[i];
    return s;
}

T256 void b8_layernorm_quantize__avx2(const float *x, int64_t ldx, int64_t rows, int64_t n,
                                      const b8_ln_quant *p, int8_t *q, int64_t ldq) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * ldx;
        __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
        for (int64_t j = 0; j < n; j += LANES) {
            lo = _mm256_add_ps(lo, load(xr + j, n - j));
            hi = _mm256_add_ps(hi, load(xr + j + 8, n - j - 8));
        }
        float mean = sum_lanes(lo, hi) / (float)n;
        __m256 vmean = _mm256_set1_ps(mean);
        __m256 lo2 = _mm256_setzero_ps(), hi2 = _mm256_setzero_ps();
        for (int64_t j = 0; j < n; j += LANES) {
            /* Lanes past the row end must stay exactly 0, as in the other twins. */
            __m256 dl = _mm256_and_ps(_mm256_sub_ps(load(xr + j, n - j), vmean),
                                      _mm256_castsi256_ps(tail(n - j)));
            __m256 dh = _mm256_and_ps(_mm256_sub_ps(load(xr + j + 8, n - j - 8), vmean),
                                      _mm256_castsi256_ps(tail(n - j - 8)));
            lo2 = _mm256_fmadd_ps(dl, dl, lo2);
            hi2 = _mm256_fmadd_ps(dh, dh, hi2);
        }
        float rstd = 1.0f / sqrtf(sum_lanes(lo2, hi2) / (float)n + p->eps);
        __m256 vrstd = _mm256_set1_ps(rstd);
        for (int64_t j = 0; j < n; j += 8) {
            int64_t left = n - j;
            __m256 d = _mm256_mul_ps(_mm256_sub_ps(load(xr + j, left), vmean), vrstd);
            store_q(q + r * ldq + j, left,
                    _mm256_fmadd_ps(d, load(p->qg + j, left), load(p->qb + j, left)));
            if (p->y) {
                __m256 y = _mm256_fmadd_ps(d, load(p->g + j, left), load(p->b + j, left));
                float *dst = p->y + r * p->ldy + j;
                if (left >= 8) _mm256_storeu_ps(dst, y);
                else _mm256_maskstore_ps(dst, tail(left), y);
            }
        }
    }
}
