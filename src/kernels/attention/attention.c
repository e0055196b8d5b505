/* attention.c: fused per-head attention. K is transposed once into scratch so a row of
 * scores is a sum over d of broadcast(q[i][k]) * Kt[k][:], which vectorises along the keys;
 * blocks of 4 query rows share each load. Both twins accumulate in ascending k (scores) and
 * ascending j (context) with fused multiply-adds, so they agree bit for bit. AVX-512, AVX2, scalar. */
#include "kernels/attention/attention.h"
#include "base/cpu.h"
#include "kernels/dispatch.h"
#include "kernels/vmath/vmath_avx2.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#define RB 4    /* query rows per block */
#define CW 64   /* columns per pass: 4 vectors of 16 */

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

size_t b8_attention_scratch_floats(int64_t T, int64_t d) {
    int64_t tp = round_up(T, CW);
    return (size_t)(d * tp + RB * tp);
}

/* Kt[k][j] = K[j][k], columns past T zero */
static void transpose_k(const float *k, int64_t ld, int64_t T, int64_t d, float *kt, int64_t tp) {
    for (int64_t kk = 0; kk < d; kk++) {
        float *row = kt + kk * tp;
        for (int64_t j = 0; j < T; j++) row[j] = k[j * ld + kk];
        for (int64_t j = T; j < tp; j++) row[j] = 0.0f;
    }
}

void b8_attention_head__scalar(const float *q, const float *k, const float *v, int64_t ld, int64_t T, int64_t d,
                               float alpha, const int32_t *mask, b8_mask_mode mode, const float *rel, const float *bias,
                               float *ctx, int64_t ldo, float *scratch) {
    const int64_t tp = round_up(T, CW);
    float *kt = scratch, *s = scratch + d * tp;
    transpose_k(k, ld, T, d, kt, tp);
    for (int64_t i = 0; i < T; i++) {
        for (int64_t j = 0; j < T; j++) {
            float acc = 0.0f;
            for (int64_t kk = 0; kk < d; kk++) acc = fmaf(q[i * ld + kk], kt[kk * tp + j], acc);
            s[j] = acc * alpha;
        }
        if (rel) b8_attention_add_rel(s, T, rel, i);
        if (bias) b8_attention_add_bias(s, T, bias, i);
        b8_softmax_rows__scalar(s, 1, T, mask, mode);
        for (int64_t dd = 0; dd < d; dd++) {
            float acc = 0.0f;
            for (int64_t j = 0; j < T; j++) acc = fmaf(s[j], v[j * ld + dd], acc);
            ctx[i * ldo + dd] = acc;
        }
    }
}

void b8_attention_window__scalar(const float *q, const float *k, const float *v, int64_t ld, int64_t T, int64_t d,
                                 float alpha, int64_t w, const int32_t *mask, b8_mask_mode mode, float *ctx,
                                 int64_t ldo, float *scratch) {
    float *s = scratch;
    for (int64_t i = 0; i < T; i++) {
        const int64_t lo = i - w > 0 ? i - w : 0, hi = i + w < T - 1 ? i + w : T - 1, n = hi - lo + 1;
        for (int64_t j = lo; j <= hi; j++) { /* keys outside the window: no score is formed */
            float acc = 0.0f;
            for (int64_t kk = 0; kk < d; kk++) acc = fmaf(q[i * ld + kk], k[j * ld + kk], acc);
            s[j - lo] = acc * alpha;
        }
        b8_softmax_rows__scalar(s, 1, n, mask ? mask + lo : NULL, mode);
        for (int64_t dd = 0; dd < d; dd++) {
            float acc = 0.0f;
            for (int64_t j = 0; j < n; j++) acc = fmaf(s[j], v[(lo + j) * ld + dd], acc);
            ctx[i * ldo + dd] = acc;
        }
    }
}

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

AVX512 static inline __mmask16 lanes_left(int64_t left) {
    return left >= 16 ? (__mmask16)0xFFFF : left <= 0 ? (__mmask16)0 : (__mmask16)((1u << left) - 1u);
}

/* scores of rows [i0, i0+rb) against the nw columns (a multiple of CW) of kt from its first into s
 * (stride tp), scaled by alpha */
AVX512 static inline __attribute__((always_inline)) void scores_block(const float *q, int64_t ld, int64_t d,
                                                                      const float *kt, int64_t tp, int64_t nw,
                                                                      float alpha, float *s, int rb) {
    const __m512 va = _mm512_set1_ps(alpha);
    for (int64_t c0 = 0; c0 < nw; c0 += CW) {
        __m512 acc[RB][4];
        #pragma GCC unroll 4
        for (int r = 0; r < rb; r++)
            #pragma GCC unroll 4
            for (int c = 0; c < 4; c++) acc[r][c] = _mm512_setzero_ps();
        for (int64_t kk = 0; kk < d; kk++) {
            const float *kr = kt + kk * tp + c0;
            __m512 k0 = _mm512_loadu_ps(kr), k1 = _mm512_loadu_ps(kr + 16), k2 = _mm512_loadu_ps(kr + 32),
                   k3 = _mm512_loadu_ps(kr + 48);
            #pragma GCC unroll 4
            for (int r = 0; r < rb; r++) {
                __m512 qb = _mm512_set1_ps(q[r * ld + kk]);
                acc[r][0] = _mm512_fmadd_ps(qb, k0, acc[r][0]);
                acc[r][1] = _mm512_fmadd_ps(qb, k1, acc[r][1]);
                acc[r][2] = _mm512_fmadd_ps(qb, k2, acc[r][2]);
                acc[r][3] = _mm512_fmadd_ps(qb, k3, acc[r][3]);
            }
        }
        #pragma GCC unroll 4
        for (int r = 0; r < rb; r++)
            #pragma GCC unroll 4
            for (int c = 0; c < 4; c++) _mm512_storeu_ps(s + r * tp + c0 + 16 * c, _mm512_mul_ps(acc[r][c], va));
    }
}

/* context of rows [i0, i0+rb) from probabilities s (stride tp) */
AVX512 static inline __attribute__((always_inline)) void context_block(const float *s, int64_t tp, const float *v,
                                                                       int64_t ld, int64_t T, int64_t d,
                                                                       float *ctx, int64_t ldo, int rb) {
    for (int64_t d0 = 0; d0 < d; d0 += CW) {
        __mmask16 m[4];
        #pragma GCC unroll 4
        for (int c = 0; c < 4; c++) m[c] = lanes_left(d - d0 - 16 * c);
        __m512 acc[RB][4];
        #pragma GCC unroll 4
        for (int r = 0; r < rb; r++)
            #pragma GCC unroll 4
            for (int c = 0; c < 4; c++) acc[r][c] = _mm512_setzero_ps();
        for (int64_t j = 0; j < T; j++) {
            const float *vr = v + j * ld + d0;
            __m512 v0 = _mm512_maskz_loadu_ps(m[0], vr), v1 = _mm512_maskz_loadu_ps(m[1], vr + 16),
                   v2 = _mm512_maskz_loadu_ps(m[2], vr + 32), v3 = _mm512_maskz_loadu_ps(m[3], vr + 48);
            #pragma GCC unroll 4
            for (int r = 0; r < rb; r++) {
                __m512 pb = _mm512_set1_ps(s[r * tp + j]);
                acc[r][0] = _mm512_fmadd_ps(pb, v0, acc[r][0]);
                acc[r][1] = _mm512_fmadd_ps(pb, v1, acc[r][1]);
                acc[r][2] = _mm512_fmadd_ps(pb, v2, acc[r][2]);
                acc[r][3] = _mm512_fmadd_ps(pb, v3, acc[r][3]);
            }
        }
        #pragma GCC unroll 4
        for (int r = 0; r < rb; r++)
            #pragma GCC unroll 4
            for (int c = 0; c < 4; c++)
                if (m[c]) _mm512_mask_storeu_ps(ctx + r * ldo + d0 + 16 * c, m[c], acc[r][c]);
    }
}

AVX512 void b8_attention_head__avx512(const float *q, const float *k, const float *v, int64_t ld, int64_t T,
                                      int64_t d, float alpha, const int32_t *mask, b8_mask_mode mode, const float *rel,
                                      const float *bias, float *ctx, int64_t ldo, float *scratch) {
    const int64_t tp = round_up(T, CW);
    float *kt = scratch, *s = scratch + d * tp;
    transpose_k(k, ld, T, d, kt, tp);
    int64_t i = 0;
    for (; i + RB <= T; i += RB) {
        scores_block(q + i * ld, ld, d, kt, tp, tp, alpha, s, RB);
        for (int r = 0; r < RB && rel; r++) b8_attention_add_rel(s + r * tp, T, rel, i + r);
        for (int r = 0; r < RB && bias; r++) b8_attention_add_bias(s + r * tp, T, bias, i + r);
        for (int r = 0; r < RB; r++) b8_softmax_rows__avx512(s + r * tp, 1, T, mask, mode);
        context_block(s, tp, v, ld, T, d, ctx + i * ldo, ldo, RB);
    }
    for (; i < T; i++) {
        scores_block(q + i * ld, ld, d, kt, tp, tp, alpha, s, 1);
        if (rel) b8_attention_add_rel(s, T, rel, i);
        if (bias) b8_attention_add_bias(s, T, bias, i);
        b8_softmax_rows__avx512(s, 1, T, mask, mode);
        context_block(s, tp, v, ld, T, d, ctx + i * ldo, ldo, 1);
    }
}

/* The window kernels' probabilities of rows [i, i + rb) from their scores over the block's keys
 * [blo, blo + nb) (rows of s at stride tp): each row's softmax (the kernel's twin sm) over its own
 * window, zeros outside it. */
static void window_probs(float *s, int64_t tp, int64_t i, int rb, int64_t w, int64_t T, int64_t blo, int64_t nb,
                         const int32_t *mask, b8_mask_mode mode, b8_softmax_fn sm) {
    for (int r = 0; r < rb; r++) {
        const int64_t lo = i + r - w > 0 ? i + r - w : 0, hi = i + r + w < T - 1 ? i + r + w : T - 1;
        float *sr = s + r * tp;
        for (int64_t j = 0; j < lo - blo; j++) sr[j] = 0.0f;
        sm(sr + (lo - blo), 1, hi - lo + 1, mask ? mask + lo : NULL, mode);
        for (int64_t j = hi - blo + 1; j < nb; j++) sr[j] = 0.0f;
    }
}

/* The window twin: each block of rows forms the scores of the keys its rows' windows cover
 * [blo, bhi] only; a row's softmax runs on its own window, its probabilities outside it are
 * zero, so the context sums exactly the scalar twin's terms in its order (a zero term leaves the
 * fused sum unchanged). kt's rows are read up to CW - 1 floats past a window's end (into the next
 * row, or the score rows after kt): those columns are never used. */
AVX512 void b8_attention_window__avx512(const float *q, const float *k, const float *v, int64_t ld, int64_t T,
                                        int64_t d, float alpha, int64_t w, const int32_t *mask, b8_mask_mode mode,
                                        float *ctx, int64_t ldo, float *scratch) {
    const int64_t tp = round_up(T, CW);
    float *kt = scratch, *s = scratch + d * tp;
    transpose_k(k, ld, T, d, kt, tp);
    for (int64_t i = 0; i < T; i += RB) {
        const int rb = T - i < RB ? (int)(T - i) : RB;
        const int64_t blo = i - w > 0 ? i - w : 0, bhi = i + rb - 1 + w < T - 1 ? i + rb - 1 + w : T - 1;
        const int64_t nb = bhi - blo + 1;
        if (rb == RB) scores_block(q + i * ld, ld, d, kt + blo, tp, round_up(nb, CW), alpha, s, RB);
        else /* the last rows one by one (a constant row count keeps the blocks' registers) */
            for (int r = 0; r < rb; r++)
                scores_block(q + (i + r) * ld, ld, d, kt + blo, tp, round_up(nb, CW), alpha, s + r * tp, 1);
        window_probs(s, tp, i, rb, w, T, blo, nb, mask, mode, b8_softmax_rows__avx512);
        if (rb == RB) context_block(s, tp, v + blo * ld, ld, nb, d, ctx + i * ldo, ldo, RB);
        else
            for (int r = 0; r < rb; r++)
                context_block(s + r * tp, tp, v + blo * ld, ld, nb, d, ctx + (i + r) * ldo, ldo, 1);
    }
}

/* ---- AVX2: blocks of 4 query rows x 16 columns (8 accumulators of 8 floats) ---- */

#define AVX2 __attribute__((target("avx2,fma")))
#define CW2 16

/* scores of rows [i0, i0+rb) against the nw columns (a multiple of CW2) of kt from its first into s
 * (stride tp), scaled by alpha */
AVX2 static inline __attribute__((always_inline)) void scores_block_avx2(const float *q, int64_t ld, int64_t d,
                                                                         const float *kt, int64_t tp, int64_t nw,
                                                                         float alpha, float *s, int rb) {
    const __m256 va = _mm256_set1_ps(alpha);
    for (int64_t c0 = 0; c0 < nw; c0 += CW2) {
        __m256 acc[RB][2];
#pragma GCC unroll 4
        for (int r = 0; r < rb; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
        for (int64_t kk = 0; kk < d; kk++) {
            const float *kr = kt + kk * tp + c0;
            const __m256 k0 = _mm256_loadu_ps(kr), k1 = _mm256_loadu_ps(kr + 8);
#pragma GCC unroll 4
            for (int r = 0; r < rb; r++) {
                const __m256 qb = _mm256_broadcast_ss(q + r * ld + kk);
                acc[r][0] = _mm256_fmadd_ps(qb, k0, acc[r][0]);
                acc[r][1] = _mm256_fmadd_ps(qb, k1, acc[r][1]);
            }
        }
#pragma GCC unroll 4
        for (int r = 0; r < rb; r++) {
            _mm256_storeu_ps(s + r * tp + c0, _mm256_mul_ps(acc[r][0], va));
            _mm256_storeu_ps(s + r * tp + c0 + 8, _mm256_mul_ps(acc[r][1], va));
        }
    }
}

AVX2 static inline __attribute__((always_inline)) void context_block_avx2(const float *s, int64_t tp, const float *v,
                                                                          int64_t ld, int64_t T, int64_t d, float *ctx,
                                                                          int64_t ldo, int rb) {
    for (int64_t d0 = 0; d0 < d; d0 += CW2) {
        const __m256i m0 = b8_v8_lanes(d - d0), m1 = b8_v8_lanes(d - d0 - 8);
        __m256 acc[RB][2];
#pragma GCC unroll 4
        for (int r = 0; r < rb; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
        for (int64_t j = 0; j < T; j++) {
            const float *vr = v + j * ld + d0;
            const __m256 v0 = _mm256_maskload_ps(vr, m0), v1 = _mm256_maskload_ps(vr + 8, m1);
#pragma GCC unroll 4
            for (int r = 0; r < rb; r++) {
                const __m256 pb = _mm256_broadcast_ss(s + r * tp + j);
                acc[r][0] = _mm256_fmadd_ps(pb, v0, acc[r][0]);
                acc[r][1] = _mm256_fmadd_ps(pb, v1, acc[r][1]);
            }
        }
#pragma GCC unroll 4
        for (int r = 0; r < rb; r++) {
            _mm256_maskstore_ps(ctx + r * ldo + d0, m0, acc[r][0]);
            _mm256_maskstore_ps(ctx + r * ldo + d0 + 8, m1, acc[r][1]);
        }
    }
}

AVX2 void b8_attention_head__avx2(const float *q, const float *k, const float *v, int64_t ld, int64_t T, int64_t d,
                                  float alpha, const int32_t *mask, b8_mask_mode mode, const float *rel, const float *bias,
                                  float *ctx, int64_t ldo, float *scratch) {
    const int64_t tp = round_up(T, CW);
    float *kt = scratch, *s = scratch + d * tp;
    transpose_k(k, ld, T, d, kt, tp);
    int64_t i = 0;
    for (; i + RB <= T; i += RB) {
        scores_block_avx2(q + i * ld, ld, d, kt, tp, tp, alpha, s, RB);
        for (int r = 0; r < RB && rel; r++) b8_attention_add_rel(s + r * tp, T, rel, i + r);
        for (int r = 0; r < RB && bias; r++) b8_attention_add_bias(s + r * tp, T, bias, i + r);
        for (int r = 0; r < RB; r++) b8_softmax_rows__avx2(s + r * tp, 1, T, mask, mode);
        context_block_avx2(s, tp, v, ld, T, d, ctx + i * ldo, ldo, RB);
    }
    for (; i < T; i++) {
        scores_block_avx2(q + i * ld, ld, d, kt, tp, tp, alpha, s, 1);
        if (rel) b8_attention_add_rel(s, T, rel, i);
        if (bias) b8_attention_add_bias(s, T, bias, i);
        b8_softmax_rows__avx2(s, 1, T, mask, mode);
        context_block_avx2(s, tp, v, ld, T, d, ctx + i * ldo, ldo, 1);
    }
}

/* The window twin of b8_attention_window__avx512 on AVX2 (the same blocks of the rows' spans, zero
 * probabilities outside each row's window, kt read up to CW2 - 1 floats past a span's end). */
AVX2 void b8_attention_window__avx2(const float *q, const float *k, const float *v, int64_t ld, int64_t T, int64_t d,
                                    float alpha, int64_t w, const int32_t *mask, b8_mask_mode mode, float *ctx,
                                    int64_t ldo, float *scratch) {
    const int64_t tp = round_up(T, CW);
    float *kt = scratch, *s = scratch + d * tp;
    transpose_k(k, ld, T, d, kt, tp);
    for (int64_t i = 0; i < T; i += RB) {
        const int rb = T - i < RB ? (int)(T - i) : RB;
        const int64_t blo = i - w > 0 ? i - w : 0, bhi = i + rb - 1 + w < T - 1 ? i + rb - 1 + w : T - 1;
        const int64_t nb = bhi - blo + 1;
        if (rb == RB) scores_block_avx2(q + i * ld, ld, d, kt + blo, tp, round_up(nb, CW2), alpha, s, RB);
        else /* the last rows one by one (a constant row count keeps the blocks' registers) */
            for (int r = 0; r < rb; r++)
                scores_block_avx2(q + (i + r) * ld, ld, d, kt + blo, tp, round_up(nb, CW2), alpha, s + r * tp, 1);
        window_probs(s, tp, i, rb, w, T, blo, nb, mask, mode, b8_softmax_rows__avx2);
        if (rb == RB) context_block_avx2(s, tp, v + blo * ld, ld, nb, d, ctx + i * ldo, ldo, RB);
        else
            for (int r = 0; r < rb; r++)
                context_block_avx2(s + r * tp, tp, v + blo * ld, ld, nb, d, ctx + (i + r) * ldo, ldo, 1);
    }
}

b8_attention_window_fn b8_attention_window_best(void) {
    /* the twin of the attention kernel the dispatcher chose (BERT8_MAX_ISA included) */
    const b8_attention_fn f = b8_attention_head_best();
    return f == b8_attention_head__avx512 ? b8_attention_window__avx512
           : f == b8_attention_head__avx2 ? b8_attention_window__avx2
                                          : b8_attention_window__scalar;
}

static const b8_impl attention_impls[] = {
    {"attention_head__avx512", B8_ISA_AVX512, (b8_fnptr)b8_attention_head__avx512},
    {"attention_head__avx2", B8_ISA_AVX2, (b8_fnptr)b8_attention_head__avx2},
    {"attention_head__scalar", B8_ISA_SCALAR, (b8_fnptr)b8_attention_head__scalar},
};
b8_op_table b8_op_attention = {"attention", attention_impls, 3, -1};

b8_attention_fn b8_attention_head_best(void) { return (b8_attention_fn)b8_dispatch(&b8_op_attention)->fn; }
