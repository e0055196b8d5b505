/* attention_s8_avx2.c: the INT8 attention of attention_s8.c on AVX2 (no vpdpbusd), bit-identical
 * to its scalar twin there.
 *
 * Both products run on vpmaddwd with operands widened to int16, which is exact for any int8 or
 * u8 value (two products per int32 lane). Widening changes one thing: Q.K^T needs no +128 shift,
 * since q . k is computed directly and equals (q + 128) . k - 128 sum k, the twins' value. The
 * float steps (score scale, vmath's exp, the 16-lane sums of the softmax reduced 0..15, the u8
 * rounding, the row scale, the output rounding) are the scalar twin's, in its order.
 *
 * Layout (scratch): K as int16 pairs [d/2][t16][2] (8 keys x 2 depths per vector), V as int16
 * pairs [t4/2][d][2], the block's Q rows and probabilities widened to int16. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/attention/attention.h"
#include "kernels/vmath/vmath_avx2.h"

#define RB 4 /* query rows per block */
#define A2 __attribute__((target("avx2,fma")))

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

typedef struct layout2 {
    int64_t t16, t4;
    float *s;     /* [RB][t16] scores */
    int16_t *k;   /* [d/2][t16][2] */
    int16_t *v;   /* [t4/2][d][2] */
    int16_t *p;   /* [RB][t4] probabilities as u8 values */
    int16_t *q;   /* [RB][d] */
} layout2;

size_t b8_attention_s8_avx2_scratch_bytes(int64_t T, int64_t d) {
    const int64_t t16 = round_up(T, 16), t4 = round_up(T, 4);
    return (size_t)(4 * RB * t16 + 2 * d * t16 + 2 * t4 * d + 2 * RB * t4 + 2 * RB * d + 5 * 64);
}

static layout2 carve2(void *scratch, int64_t T, int64_t d) {
    layout2 l;
    l.t16 = round_up(T, 16);
    l.t4 = round_up(T, 4);
    uint8_t *p = (uint8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
#define TAKE(ptr, type, bytes) (ptr = (type *)p, p += round_up((int64_t)(bytes), 64))
    TAKE(l.s, float, 4 * RB * l.t16);
    TAKE(l.k, int16_t, 2 * d * l.t16);
    TAKE(l.v, int16_t, 2 * l.t4 * d);
    TAKE(l.p, int16_t, 2 * RB * l.t4);
    TAKE(l.q, int16_t, 2 * RB * d);
#undef TAKE
    return l;
}

static void pack2(const int8_t *k, const int8_t *v, int64_t ld, int64_t T, int64_t d, const layout2 *l) {
    for (int64_t g = 0; g < d / 2; g++) {
        int16_t *row = l->k + g * l->t16 * 2;
        for (int64_t j = 0; j < T; j++) {
            row[2 * j] = k[j * ld + 2 * g];
            row[2 * j + 1] = k[j * ld + 2 * g + 1];
        }
        memset(row + 2 * T, 0, (size_t)(2 * (l->t16 - T)) * sizeof(int16_t));
    }
    for (int64_t g = 0; g < l->t4 / 2; g++)
        for (int c = 0; c < 2; c++) {
            const int64_t j = 2 * g + c;
            int16_t *o = l->v + g * d * 2 + c;
            if (j < T)
                for (int64_t dd = 0; dd < d; dd++) o[2 * dd] = v[j * ld + dd];
            else
                for (int64_t dd = 0; dd < d; dd++) o[2 * dd] = 0;
        }
}

/* `rows` (a constant at each caller) x 16 int32 dot products over `groups` pairs: row r's pairs at
 * a + r * lda (int16), group g's 16 columns at b + g * ldb (two vectors, loaded under m0, m1). */
static inline __attribute__((always_inline)) A2 void dot_rows16(const int rows, const int16_t *a, int64_t lda,
                                                                const int16_t *b, int64_t ldb, int64_t groups,
                                                                __m256i m0, __m256i m1, __m256i acc[RB][2]) {
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
    for (int64_t g = 0; g < groups; g++) {
        const int16_t *br = b + g * ldb;
        const __m256i b0 = _mm256_maskload_epi32((const int *)br, m0), b1 = _mm256_maskload_epi32((const int *)(br + 16), m1);
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++) {
            int32_t w;
            memcpy(&w, a + r * lda + 2 * g, 4);
            const __m256i ab = _mm256_set1_epi32(w);
            acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(ab, b0));
            acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(ab, b1));
        }
    }
}

/* Scores of `rows` query rows (l->q) against every key, scaled, into l->s. */
static inline __attribute__((always_inline)) A2 void scores2(const int rows, const layout2 *l, int64_t d, float scale) {
    const __m256 vsc = _mm256_set1_ps(scale);
    const __m256i all = _mm256_set1_epi32(-1);
    for (int64_t c0 = 0; c0 < l->t16; c0 += 16) {
        __m256i acc[RB][2];
        dot_rows16(rows, l->q, d, l->k + c0 * 2, l->t16 * 2, d / 2, all, all, acc);
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++) {
            _mm256_storeu_ps(l->s + r * l->t16 + c0, _mm256_mul_ps(_mm256_cvtepi32_ps(acc[r][0]), vsc));
            _mm256_storeu_ps(l->s + r * l->t16 + c0 + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(acc[r][1]), vsc));
        }
    }
}

/* 8 context values y of channels d0.. of one row (m: the channels that exist), stored as the
 * scalar twin's store_ctx does: requantized with out_mul (clamp to [-127, 127], NaN -> -127,
 * round half even), or fp32 times ch_mul when V has a scale per channel. */
A2 static inline void store_ctx8(__m256 y, __m256i m, int64_t d0, int64_t left, const b8_attn_s8_params *p,
                                 float *ctx, int8_t *ctxq) {
    if (ctxq) {
        __m256 z = _mm256_mul_ps(y, _mm256_maskload_ps(p->out_mul + d0, m));
        z = _mm256_min_ps(_mm256_max_ps(z, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
        const __m256i qi = _mm256_cvtps_epi32(z);
        const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(qi), _mm256_extracti128_si256(qi, 1));
        const __m128i b = _mm_packs_epi16(w, w);
        if (left >= 8) _mm_storel_epi64((__m128i *)(ctxq + d0), b);
        else {
            int8_t t[16];
            _mm_storeu_si128((__m128i *)t, b);
            memcpy(ctxq + d0, t, (size_t)left);
        }
    } else {
        if (p->ch_mul) y = _mm256_mul_ps(y, _mm256_maskload_ps(p->ch_mul + d0, m));
        _mm256_maskstore_ps(ctx + d0, m, y);
    }
}

/* Context of `rows` rows from l->p and their row scales. */
static inline __attribute__((always_inline)) A2 void context2(const int rows, const layout2 *l, int64_t d,
                                                              const float *rs, const b8_attn_s8_params *p, float *ctx,
                                                              int8_t *ctxq, int64_t ldo) {
    for (int64_t d0 = 0; d0 < d; d0 += 16) {
        const __m256i m0 = b8_v8_lanes(d - d0), m1 = b8_v8_lanes(d - d0 - 8);
        __m256i acc[RB][2];
        dot_rows16(rows, l->p, l->t4, l->v + d0 * 2, d * 2, l->t4 / 2, m0, m1, acc);
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++) {
            const __m256 vr = _mm256_set1_ps(rs[r]);
            float *cr = ctx ? ctx + r * ldo : NULL;
            int8_t *qr = ctxq ? ctxq + r * ldo : NULL;
            store_ctx8(_mm256_mul_ps(_mm256_cvtepi32_ps(acc[r][0]), vr), m0, d0, d - d0, p, cr, qr);
            if (d - d0 > 8)
                store_ctx8(_mm256_mul_ps(_mm256_cvtepi32_ps(acc[r][1]), vr), m1, d0 + 8, d - d0 - 8, p, cr, qr);
        }
    }
}

/* 8 probabilities as int16 (values 0..255) from 8 floats already in [0, 255]: round half even. */
A2 static inline void store_p8(__m256 x, int16_t *dst, int64_t left) {
    const __m256i qi = _mm256_cvtps_epi32(x);
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(qi), _mm256_extracti128_si256(qi, 1));
    if (left >= 8) _mm_storeu_si128((__m128i *)dst, w);
    else if (left > 0) {
        int16_t t[8];
        _mm_storeu_si128((__m128i *)t, w);
        memcpy(dst, t, (size_t)left * sizeof(int16_t));
    }
}

/* The scalar twin's softmax_u8 on one row: e (0 for masked keys, 1 everywhere when every key is
 * masked), p = rne(min(e * 255, 255)) for keys [0, t4) (0 past T), the row scale. */
A2 static float softmax_row2(const float *s, int64_t T, int64_t t4, const int32_t *mask, float v_scale255,
                             int16_t *pr) {
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    __m256 vmx = ninf;
    for (int64_t j = 0; j < T; j += 8) {
        __m256i k = b8_v8_lanes(T - j);
        if (mask) k = _mm256_andnot_si256(_mm256_cmpeq_epi32(_mm256_maskload_epi32((const int *)mask + j, k),
                                                             _mm256_setzero_si256()), k);
        vmx = _mm256_max_ps(vmx, _mm256_blendv_ps(ninf, _mm256_maskload_ps(s + j, k), _mm256_castsi256_ps(k)));
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vmx), _mm256_extractf128_ps(vmx, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float mx = _mm_cvtss_f32(m4);
    const bool none = mx == -INFINITY;
    const __m256 vm = _mm256_set1_ps(mx), k255 = _mm256_set1_ps(255.0f), one = _mm256_set1_ps(1.0f);
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t j = 0; j < t4; j += 16) {
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const int64_t jj = j + 8 * h;
            const __m256i inr = b8_v8_lanes(T - jj);
            __m256i km = inr;
            if (mask) km = _mm256_andnot_si256(_mm256_cmpeq_epi32(_mm256_maskload_epi32((const int *)mask + jj, inr),
                                                                  _mm256_setzero_si256()), inr);
            const __m256 e = none ? _mm256_and_ps(one, _mm256_castsi256_ps(inr))
                                  : _mm256_and_ps(b8_v8_exp(_mm256_sub_ps(_mm256_maskload_ps(s + jj, inr), vm)),
                                                  _mm256_castsi256_ps(km));
            acc[h] = _mm256_add_ps(acc[h], e);
            store_p8(_mm256_min_ps(_mm256_mul_ps(e, k255), k255), pr + jj, t4 - jj);
        }
    }
    float lane[16];
    _mm256_storeu_ps(lane, acc[0]);
    _mm256_storeu_ps(lane + 8, acc[1]);
    float sum = lane[0];
    for (int i = 1; i < 16; i++) sum += lane[i];
    return v_scale255 / sum;
}

A2 void b8_attention_s8__avx2(const int8_t *q, const int8_t *k, const int8_t *v, int64_t ld, int64_t T, int64_t d,
                              const b8_attn_s8_params *p, const int32_t *mask, b8_mask_mode mode, float *ctx,
                              int8_t *ctxq, int64_t ldo, void *scratch) {
    (void)mode; /* masked keys get e = 0 in both modes, as in the scalar twin */
    layout2 l = carve2(scratch, T, d);
    pack2(k, v, ld, T, d, &l);
    const float vs = p->v_scale / 255.0f;
    float rs[RB];
    for (int64_t i = 0; i < T; i += RB) {
        const int rb = T - i >= RB ? RB : (int)(T - i);
        for (int r = 0; r < rb; r++) {
            const int8_t *qr = q + (i + r) * ld;
            int64_t kk = 0;
            for (; kk + 8 <= d; kk += 8)
                _mm_storeu_si128((__m128i *)(l.q + r * d + kk), _mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)(qr + kk))));
            for (; kk < d; kk++) l.q[r * d + kk] = qr[kk];
        }
        /* constant row counts, so that the accumulators stay in registers */
        switch (rb) {
        case 4: scores2(4, &l, d, p->score_scale); break;
        case 3: scores2(3, &l, d, p->score_scale); break;
        case 2: scores2(2, &l, d, p->score_scale); break;
        default: scores2(1, &l, d, p->score_scale); break;
        }
        for (int r = 0; r < rb && p->rel; r++) b8_attention_add_rel(l.s + r * l.t16, T, p->rel, i + r);
        for (int r = 0; r < rb; r++) rs[r] = softmax_row2(l.s + r * l.t16, T, l.t4, mask, vs, l.p + r * l.t4);
        float *cb = ctx ? ctx + i * ldo : NULL;
        int8_t *qb = ctxq ? ctxq + i * ldo : NULL;
        switch (rb) {
        case 4: context2(4, &l, d, rs, p, cb, qb, ldo); break;
        case 3: context2(3, &l, d, rs, p, cb, qb, ldo); break;
        case 2: context2(2, &l, d, rs, p, cb, qb, ldo); break;
        default: context2(1, &l, d, rs, p, cb, qb, ldo); break;
        }
    }
}
