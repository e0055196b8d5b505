/* quantize_avx512.c: AVX-512 twins of the activation quantizers (see quantize.h for the exact
 * order of operations, shared with the scalar oracle in quantize.c). */
#include "kernels/quantize/quantize.h"

#include <immintrin.h>
#include <math.h>

#include "kernels/rowops/ln_avx512.h"

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
                                     const float *mul, float inv_scale, float zero, int8_t *q, int64_t ldq) {
    __m512 inv = _mm512_set1_ps(inv_scale), z = _mm512_set1_ps(zero);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < n; j += LANES) {
            __mmask16 k = tail(n - j);
            store_q(q + r * ldq + j, k, _mm512_fmadd_ps(load_v(x + r * ldx, mul, j, k), inv, z));
        }
}

/* `rows` rows (a constant at each caller) with their max-abs chains interleaved; each row's
 * operations in the order of one row. */
static inline __attribute__((always_inline)) T512 void
quant_dyn_rows(const int rows, const float *x, int64_t ldx, int64_t n, const float *mul, int8_t *q, int64_t ldq,
               float *row_scale) {
    __m512 vmax[4], inv[4];
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++) vmax[r] = _mm512_setzero_ps();
    for (int64_t j = 0; j < n; j += LANES) {
        const __mmask16 k = tail(n - j);
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++) vmax[r] = _mm512_max_ps(_mm512_abs_ps(load_v(x + r * ldx, mul, j, k)), vmax[r]);
    }
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++) {
        const float amax = _mm512_reduce_max_ps(vmax[r]);
        const float s = amax > 0.0f ? amax / 127.0f : 1.0f;
        row_scale[r] = s;
        inv[r] = _mm512_set1_ps(1.0f / s);
    }
    for (int64_t j = 0; j < n; j += LANES) {
        const __mmask16 k = tail(n - j);
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++) store_q(q + r * ldq + j, k, _mm512_mul_ps(load_v(x + r * ldx, mul, j, k), inv[r]));
    }
}

T512 void b8_quantize_dynamic__avx512(const float *x, int64_t ldx, int64_t rows, int64_t n,
                                      const float *mul, int8_t *q, int64_t ldq, float *row_scale) {
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4) quant_dyn_rows(4, x + r * ldx, ldx, n, mul, q + r * ldq, ldq, row_scale + r);
    for (; r < rows; r++) quant_dyn_rows(1, x + r * ldx, ldx, n, mul, q + r * ldq, ldq, row_scale + r);
}

/* The zero-point variant: each row's min and max chains, then fma(v, 1 / s, z). */
static inline __attribute__((always_inline)) T512 void
quant_dyn_zp_rows(const int rows, const float *x, int64_t ldx, int64_t n, const float *mul, int8_t *q,
                  int64_t ldq, float *row_scale, int32_t *row_zero) {
    __m512 vlo[4], vhi[4], inv[4], zp[4];
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++) vlo[r] = vhi[r] = _mm512_setzero_ps();
    for (int64_t j = 0; j < n; j += LANES) {
        const __mmask16 k = tail(n - j);
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++) {
            const __m512 v = load_v(x + r * ldx, mul, j, k);
            vlo[r] = _mm512_min_ps(v, vlo[r]);
            vhi[r] = _mm512_max_ps(v, vhi[r]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++) {
        float s, iv, z;
        b8_qzp_params(_mm512_reduce_min_ps(vlo[r]), _mm512_reduce_max_ps(vhi[r]), &s, &iv, &z);
        row_scale[r] = s;
        row_zero[r] = (int32_t)z;
        inv[r] = _mm512_set1_ps(iv);
        zp[r] = _mm512_set1_ps(z);
    }
    for (int64_t j = 0; j < n; j += LANES) {
        const __mmask16 k = tail(n - j);
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++) {
            /* this pass reads the rows from L1 while memory idles: ask for the next rows (into
             * L2; the first pass then finds them there): FFN-out's per-token input, 1024 x 3072
             * fp32 from L3, 0.85 -> 0.77 ms on one core of the Xeon with AMX */
            _mm_prefetch((const char *)(x + (r + rows) * ldx + j), _MM_HINT_T1);
            store_q(q + r * ldq + j, k, _mm512_fmadd_ps(load_v(x + r * ldx, mul, j, k), inv[r], zp[r]));
        }
    }
}

T512 void b8_quantize_dynamic_zp__avx512(const float *x, int64_t ldx, int64_t rows, int64_t n,
                                         const float *mul, int8_t *q, int64_t ldq, float *row_scale,
                                         int32_t *row_zero) {
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4)
        quant_dyn_zp_rows(4, x + r * ldx, ldx, n, mul, q + r * ldq, ldq, row_scale + r, row_zero + r);
    for (; r < rows; r++) quant_dyn_zp_rows(1, x + r * ldx, ldx, n, mul, q + r * ldq, ldq, row_scale + r, row_zero + r);
}

/* `rows` rows (a constant at each caller) at once: ln_avx512.h's statistics, then the rows. */
static inline __attribute__((always_inline)) T512 void
ln_quant_rows(const int rows, const float *x, int64_t ldx, int64_t n, const b8_ln_quant *p, float *y, int8_t *q,
              int64_t ldq) {
    __m512 vmean[B8_LN_MAX_ROWS], vrstd[B8_LN_MAX_ROWS];
    b8_ln_stats_rows(rows, x, ldx, n, p->eps, vmean, vrstd);
    for (int64_t j = 0; j < n; j += LANES) {
        const __mmask16 k = tail(n - j);
        const __m512 qg = _mm512_maskz_loadu_ps(k, p->qg + j), qb = _mm512_maskz_loadu_ps(k, p->qb + j);
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++) {
            _mm_prefetch((const char *)(x + (r + rows) * ldx + j), _MM_HINT_T1); /* as quant_dyn_zp_rows */
            const __m512 d = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + r * ldx + j), vmean[r]), vrstd[r]);
            store_q(q + r * ldq + j, k, _mm512_fmadd_ps(d, qg, qb));
            if (y)
                _mm512_mask_storeu_ps(y + r * p->ldy + j, k,
                                      _mm512_fmadd_ps(d, _mm512_maskz_loadu_ps(k, p->g + j),
                                                      _mm512_maskz_loadu_ps(k, p->b + j)));
        }
    }
}

T512 void b8_layernorm_quantize__avx512(const float *x, int64_t ldx, int64_t rows, int64_t n,
                                        const b8_ln_quant *p, int8_t *q, int64_t ldq) {
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4)
        ln_quant_rows(4, x + r * ldx, ldx, n, p, p->y ? p->y + r * p->ldy : NULL, q + r * ldq, ldq);
    for (; r < rows; r++) ln_quant_rows(1, x + r * ldx, ldx, n, p, p->y ? p->y + r * p->ldy : NULL, q + r * ldq, ldq);
}
