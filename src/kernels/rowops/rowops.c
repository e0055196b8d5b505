/* rowops.c: masked softmax and LayerNorm rows, AVX-512, AVX2 and scalar twins.
 *
 * Both twins follow one order of floating-point operations: 16 lane accumulators (lane j%16),
 * reduced lane 0..15 in sequence, explicit fused multiply-adds where the SIMD code uses them.
 * So the scalar twin is an exact oracle for the SIMD one. */
#include "kernels/rowops/rowops.h"
#include "base/cpu.h"
#include "kernels/dispatch.h"
#include "kernels/vmath/vmath_avx2.h"
#include "kernels/rowops/ln_avx512.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <immintrin.h>

#define LANES 16
#define MIN_NEG (-FLT_MAX)

/* exp(x) = 2^n * p(r), r = x - n ln2, Cephes-style minimax polynomial. */
static const float EXP_HI = 88.3762626647949f, EXP_LO = -87.3365478515625f;
static const float LOG2E = 1.44269504088896341f, LN2_HI = 0.693359375f, LN2_LO = -2.12194440e-4f;
static const float P0 = 1.9875691500E-4f, P1 = 1.3981999507E-3f, P2 = 8.3334519073E-3f,
                   P3 = 4.1665795894E-2f, P4 = 1.6666665459E-1f, P5 = 5.0000001201E-1f;

float b8_expf_approx(float x) {
    if (x < EXP_LO) return 0.0f;
    if (x > EXP_HI) x = EXP_HI;
    float n = nearbyintf(x * LOG2E);
    float r = fmaf(n, -LN2_HI, x);
    r = fmaf(n, -LN2_LO, r);
    float p = fmaf(P0, r, P1);
    p = fmaf(p, r, P2);
    p = fmaf(p, r, P3);
    p = fmaf(p, r, P4);
    p = fmaf(p, r, P5);
    float r2 = r * r;
    p = fmaf(p, r2, r);
    p = p + 1.0f;
    return ldexpf(p, (int)n);
}

static inline float masked_score(float s, int32_t m, b8_mask_mode mode) {
    if (m) return s;
    return mode == B8_MASK_ADD_MIN ? s + MIN_NEG : MIN_NEG;
}

static float reduce_lanes(const float *acc) {
    float s = acc[0];
    for (int i = 1; i < LANES; i++) s += acc[i];
    return s;
}

void b8_softmax_rows__scalar(float *x, int64_t rows, int64_t n, const int32_t *mask,
                             b8_mask_mode mode) {
    for (int64_t r = 0; r < rows; r++) {
        float *row = x + r * n;
        float mx = -INFINITY;
        for (int64_t j = 0; j < n; j++) {
            if (mask) row[j] = masked_score(row[j], mask[j], mode);
            if (row[j] > mx) mx = row[j];
        }
        float acc[LANES] = {0};
        for (int64_t j = 0; j < n; j++) {
            float v = b8_expf_approx(row[j] - mx);
            row[j] = v;
            acc[j % LANES] += v;
        }
        float inv = 1.0f / reduce_lanes(acc);
        for (int64_t j = 0; j < n; j++) row[j] *= inv;
    }
}

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

AVX512 static inline __m512 exp16(__m512 x) {
    __mmask16 under = _mm512_cmp_ps_mask(x, _mm512_set1_ps(EXP_LO), _CMP_LT_OQ);
    x = _mm512_min_ps(x, _mm512_set1_ps(EXP_HI));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(LOG2E)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-LN2_HI), x);
    r = _mm512_fmadd_ps(n, _mm512_set1_ps(-LN2_LO), r);
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(P0), r, _mm512_set1_ps(P1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(P2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(P3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(P4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(P5));
    __m512 r2 = _mm512_mul_ps(r, r);
    p = _mm512_fmadd_ps(p, r2, r);
    p = _mm512_add_ps(p, _mm512_set1_ps(1.0f));
    p = _mm512_scalef_ps(p, n);
    return _mm512_maskz_mov_ps((__mmask16)~under, p);
}

AVX512 static inline __mmask16 tail_mask(int64_t left) {
    return left >= LANES ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1u);
}

AVX512 void b8_softmax_rows__avx512(float *x, int64_t rows, int64_t n, const int32_t *mask,
                                    b8_mask_mode mode) {
    const __m512 minneg = _mm512_set1_ps(MIN_NEG);
    for (int64_t r = 0; r < rows; r++) {
        float *row = x + r * n;
        __m512 vmx = _mm512_set1_ps(-INFINITY);
        for (int64_t j = 0; j < n; j += LANES) {
            __mmask16 k = tail_mask(n - j);
            __m512 v = _mm512_maskz_loadu_ps(k, row + j);
            if (mask) {
                __m512i mv = _mm512_maskz_loadu_epi32(k, mask + j);
                __mmask16 off = _mm512_mask_cmpeq_epi32_mask(k, mv, _mm512_setzero_si512());
                __m512 repl = mode == B8_MASK_ADD_MIN ? _mm512_add_ps(v, minneg) : minneg;
                v = _mm512_mask_mov_ps(v, off, repl);
                _mm512_mask_storeu_ps(row + j, k, v);
            }
            vmx = _mm512_mask_max_ps(vmx, k, vmx, v);
        }
        __m512 vm = _mm512_set1_ps(_mm512_reduce_max_ps(vmx));
        __m512 acc = _mm512_setzero_ps();
        for (int64_t j = 0; j < n; j += LANES) {
            __mmask16 k = tail_mask(n - j);
            __m512 v = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, row + j), vm));
            v = _mm512_maskz_mov_ps(k, v);
            _mm512_mask_storeu_ps(row + j, k, v);
            acc = _mm512_add_ps(acc, v);
        }
        float lanes[LANES];
        _mm512_storeu_ps(lanes, acc);
        __m512 inv = _mm512_set1_ps(1.0f / reduce_lanes(lanes));
        for (int64_t j = 0; j < n; j += LANES) {
            __mmask16 k = tail_mask(n - j);
            _mm512_mask_storeu_ps(row + j, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, row + j), inv));
        }
    }
}

/* Row mean and 1/sqrt(var + eps), two passes, in the lane order both twins share. */
static inline void ln_stats_scalar(const float *xr, int64_t n, float eps, float *mean_out, float *rstd_out) {
    float acc[LANES] = {0};
    for (int64_t j = 0; j < n; j++) acc[j % LANES] += xr[j];
    float mean = reduce_lanes(acc) / (float)n;
    float acc2[LANES] = {0};
    for (int64_t j = 0; j < n; j++) {
        float d = xr[j] - mean;
        acc2[j % LANES] = fmaf(d, d, acc2[j % LANES]);
    }
    *mean_out = mean;
    *rstd_out = 1.0f / sqrtf(reduce_lanes(acc2) / (float)n + eps);
}

/* LayerNorm: mean and variance by two passes over the row (as torch does, numerically safe). */
void b8_layernorm_rows__scalar(const float *x, float *y, int64_t rows, int64_t n, const float *g,
                               const float *b, float eps) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        float mean, rstd;
        ln_stats_scalar(xr, n, eps, &mean, &rstd);
        for (int64_t j = 0; j < n; j++) yr[j] = fmaf((xr[j] - mean) * rstd, g[j], b[j]);
    }
}

/* `rows` rows (a constant at each caller) at once: ln_avx512.h's statistics, then the rows. */
static inline __attribute__((always_inline)) AVX512 void ln_rows_avx512(const int rows, const float *x, float *y,
                                                                        int64_t n, const float *g, const float *b,
                                                                        float eps) {
    __m512 vmean[B8_LN_MAX_ROWS], vrstd[B8_LN_MAX_ROWS];
    b8_ln_stats_rows(rows, x, n, n, eps, vmean, vrstd);
    for (int64_t j = 0; j < n; j += LANES) {
        const __mmask16 k = tail_mask(n - j);
        const __m512 gv = _mm512_maskz_loadu_ps(k, g + j), bv = _mm512_maskz_loadu_ps(k, b + j);
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++) {
            const __m512 d = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + r * n + j), vmean[r]), vrstd[r]);
            _mm512_mask_storeu_ps(y + r * n + j, k, _mm512_fmadd_ps(d, gv, bv));
        }
    }
}

AVX512 void b8_layernorm_rows__avx512(const float *x, float *y, int64_t rows, int64_t n,
                                      const float *g, const float *b, float eps) {
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4) ln_rows_avx512(4, x + r * n, y + r * n, n, g, b, eps);
    for (; r < rows; r++) ln_rows_avx512(1, x + r * n, y + r * n, n, g, b, eps);
}

/* ---- AVX2: the 16 lanes of the shared order as two 8-float halves (lanes 0-7 and 8-15) ---- */

#define AVX2 __attribute__((target("avx2,fma")))

AVX2 static inline float sum16(__m256 lo, __m256 hi) {
    float l[LANES];
    _mm256_storeu_ps(l, lo);
    _mm256_storeu_ps(l + 8, hi);
    return reduce_lanes(l);
}

/* exp16's operations on 8 lanes. scalef(p, n) is p * 2^n rounded once: here p * 2^(n - n/2)
 * (exact, p is near 1) times 2^(n/2), both powers normal for every n the clamps allow. */
AVX2 static inline __m256 exp8(__m256 x) {
    const __m256 under = _mm256_cmp_ps(x, _mm256_set1_ps(EXP_LO), _CMP_LT_OQ);
    x = _mm256_min_ps(x, _mm256_set1_ps(EXP_HI));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-LN2_HI), x);
    r = _mm256_fmadd_ps(n, _mm256_set1_ps(-LN2_LO), r);
    __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(P0), r, _mm256_set1_ps(P1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(P2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(P3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(P4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(P5));
    __m256 r2 = _mm256_mul_ps(r, r);
    p = _mm256_fmadd_ps(p, r2, r);
    p = _mm256_add_ps(p, _mm256_set1_ps(1.0f));
    const __m256i ni = _mm256_cvtps_epi32(n), half = _mm256_srai_epi32(ni, 1);
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(ni, half), bias), 23));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(half, bias), 23));
    p = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
    return _mm256_andnot_ps(under, p);
}

AVX2 void b8_softmax_rows__avx2(float *x, int64_t rows, int64_t n, const int32_t *mask, b8_mask_mode mode) {
    const __m256 minneg = _mm256_set1_ps(MIN_NEG), neginf = _mm256_set1_ps(-INFINITY);
    for (int64_t r = 0; r < rows; r++) {
        float *row = x + r * n;
        __m256 vmx = neginf;
        for (int64_t j = 0; j < n; j += 8) {
            const __m256i k = b8_v8_lanes(n - j);
            __m256 v = _mm256_maskload_ps(row + j, k);
            if (mask) {
                const __m256i mv = _mm256_maskload_epi32((const int *)mask + j, k);
                const __m256 off = _mm256_castsi256_ps(_mm256_and_si256(k, _mm256_cmpeq_epi32(mv, _mm256_setzero_si256())));
                const __m256 repl = mode == B8_MASK_ADD_MIN ? _mm256_add_ps(v, minneg) : minneg;
                v = _mm256_blendv_ps(v, repl, off);
                _mm256_maskstore_ps(row + j, k, v);
            }
            vmx = _mm256_max_ps(vmx, _mm256_blendv_ps(neginf, v, _mm256_castsi256_ps(k)));
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vmx), _mm256_extractf128_ps(vmx, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const __m256 vm = _mm256_set1_ps(_mm_cvtss_f32(m4));
        __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
        for (int64_t j = 0; j < n; j += 16) {
            const __m256i k0 = b8_v8_lanes(n - j), k1 = b8_v8_lanes(n - j - 8);
            __m256 v0 = exp8(_mm256_sub_ps(_mm256_maskload_ps(row + j, k0), vm));
            __m256 v1 = exp8(_mm256_sub_ps(_mm256_maskload_ps(row + j + 8, k1), vm));
            v0 = _mm256_and_ps(v0, _mm256_castsi256_ps(k0));
            v1 = _mm256_and_ps(v1, _mm256_castsi256_ps(k1));
            _mm256_maskstore_ps(row + j, k0, v0);
            _mm256_maskstore_ps(row + j + 8, k1, v1);
            lo = _mm256_add_ps(lo, v0);
            hi = _mm256_add_ps(hi, v1);
        }
        const __m256 inv = _mm256_set1_ps(1.0f / sum16(lo, hi));
        for (int64_t j = 0; j < n; j += 8) {
            const __m256i k = b8_v8_lanes(n - j);
            _mm256_maskstore_ps(row + j, k, _mm256_mul_ps(_mm256_maskload_ps(row + j, k), inv));
        }
    }
}

/* `rows` rows (1 or 2, a constant at each caller) with their steps interleaved, as on AVX-512. */
static inline __attribute__((always_inline)) AVX2 void ln_rows_avx2(const int rows, const float *x, float *y, int64_t n,
                                                                    const float *g, const float *b, float eps) {
    __m256 acc[4][2], vmean[4], vrstd[4];
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int64_t j = 0; j < n; j += 16) {
        const __m256i k0 = b8_v8_lanes(n - j), k1 = b8_v8_lanes(n - j - 8);
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++) {
            acc[r][0] = _mm256_add_ps(acc[r][0], _mm256_maskload_ps(x + r * n + j, k0));
            acc[r][1] = _mm256_add_ps(acc[r][1], _mm256_maskload_ps(x + r * n + j + 8, k1));
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++) {
        vmean[r] = _mm256_set1_ps(sum16(acc[r][0], acc[r][1]) / (float)n);
        acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    }
    for (int64_t j = 0; j < n; j += 16) {
        const __m256i k0 = b8_v8_lanes(n - j), k1 = b8_v8_lanes(n - j - 8);
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++) {
            const __m256 d0 = _mm256_and_ps(_mm256_sub_ps(_mm256_maskload_ps(x + r * n + j, k0), vmean[r]),
                                            _mm256_castsi256_ps(k0));
            const __m256 d1 = _mm256_and_ps(_mm256_sub_ps(_mm256_maskload_ps(x + r * n + j + 8, k1), vmean[r]),
                                            _mm256_castsi256_ps(k1));
            acc[r][0] = _mm256_fmadd_ps(d0, d0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(d1, d1, acc[r][1]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++) vrstd[r] = _mm256_set1_ps(1.0f / sqrtf(sum16(acc[r][0], acc[r][1]) / (float)n + eps));
    for (int64_t j = 0; j < n; j += 8) {
        const __m256i k = b8_v8_lanes(n - j);
        const __m256 gv = _mm256_maskload_ps(g + j, k), bv = _mm256_maskload_ps(b + j, k);
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++) {
            const __m256 d = _mm256_mul_ps(_mm256_sub_ps(_mm256_maskload_ps(x + r * n + j, k), vmean[r]), vrstd[r]);
            _mm256_maskstore_ps(y + r * n + j, k, _mm256_fmadd_ps(d, gv, bv));
        }
    }
}

AVX2 void b8_layernorm_rows__avx2(const float *x, float *y, int64_t rows, int64_t n, const float *g, const float *b,
                                  float eps) {
    int64_t r = 0; /* pairs of rows: four, with two halves each, spill from 16 registers */
    for (; r + 2 <= rows; r += 2) ln_rows_avx2(2, x + r * n, y + r * n, n, g, b, eps);
    for (; r < rows; r++) ln_rows_avx2(1, x + r * n, y + r * n, n, g, b, eps);
}

static const b8_impl layernorm_impls[] = {
    {"layernorm_rows__avx512", B8_ISA_AVX512, (b8_fnptr)b8_layernorm_rows__avx512},
    {"layernorm_rows__avx2", B8_ISA_AVX2, (b8_fnptr)b8_layernorm_rows__avx2},
    {"layernorm_rows__scalar", B8_ISA_SCALAR, (b8_fnptr)b8_layernorm_rows__scalar},
};
b8_op_table b8_op_layernorm = {"layernorm", layernorm_impls, 3, -1};

b8_layernorm_fn b8_layernorm_rows_best(void) { return (b8_layernorm_fn)b8_dispatch(&b8_op_layernorm)->fn; }

