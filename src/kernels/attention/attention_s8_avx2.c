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

/* dst[c] = column c of the 8 x 8 int32 matrix whose rows are r[0..7]. */
A2 static inline void transpose8x8(const __m256i r[8], __m256i dst[8]) {
    __m256i t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) { /* half h of u[i + c]: rows i..i+3 of column 4h + c */
        u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
        u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
        u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
        u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int c = 0; c < 4; c++) {
        dst[c] = _mm256_permute2x128_si256(u[c], u[4 + c], 0x20);
        dst[4 + c] = _mm256_permute2x128_si256(u[c], u[4 + c], 0x31);
    }
}

/* K as int16 pairs [d/2][t16][2] (keys past T zero), V as int16 pairs [t4/2][d][2] (key 2g in
 * the low half of pair g, keys past T zero). K: 8 keys x 8 pairs (16 depths) widened and
 * transposed as 8 x 8 dwords at a time; V: two keys' 8 bytes widened and interleaved. Pairs and
 * depths past the last full block one by one. */
A2 static void pack2(const int8_t *k, const int8_t *v, int64_t ld, int64_t T, int64_t d, const layout2 *l) {
    const int64_t g2 = d / 2, gfull = g2 / 8 * 8;
    for (int64_t j0 = 0; j0 < l->t16; j0 += 8) {
        for (int64_t g0 = 0; g0 < gfull; g0 += 8) {
            __m256i r[8], c[8];
            for (int i = 0; i < 8; i++)
                r[i] = j0 + i < T ? _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(k + (j0 + i) * ld + 2 * g0)))
                                  : _mm256_setzero_si256();
            transpose8x8(r, c);
            for (int g = 0; g < 8; g++) _mm256_storeu_si256((__m256i *)(l->k + ((g0 + g) * l->t16 + j0) * 2), c[g]);
        }
        for (int64_t g = gfull; g < g2; g++)
            for (int64_t j = j0; j < j0 + 8; j++) {
                int16_t *o = l->k + (g * l->t16 + j) * 2;
                o[0] = j < T ? k[j * ld + 2 * g] : 0;
                o[1] = j < T ? k[j * ld + 2 * g + 1] : 0;
            }
    }
    for (int64_t g = 0; g < l->t4 / 2; g++) {
        const int8_t *r0 = 2 * g < T ? v + 2 * g * ld : NULL, *r1 = 2 * g + 1 < T ? v + (2 * g + 1) * ld : NULL;
        int16_t *o = l->v + g * d * 2;
        int64_t dd = 0;
        for (; dd + 8 <= d; dd += 8) {
            const __m128i a = r0 ? _mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)(r0 + dd))) : _mm_setzero_si128();
            const __m128i b = r1 ? _mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)(r1 + dd))) : _mm_setzero_si128();
            _mm_storeu_si128((__m128i *)(o + 2 * dd), _mm_unpacklo_epi16(a, b));
            _mm_storeu_si128((__m128i *)(o + 2 * dd + 8), _mm_unpackhi_epi16(a, b));
        }
        for (; dd < d; dd++) {
            o[2 * dd] = r0 ? r0[dd] : 0;
            o[2 * dd + 1] = r1 ? r1[dd] : 0;
        }
    }
}

/* `rows` x 16 int32 dot products over `groups` pairs into tile[RB][16]: row r's pairs at a + r *
 * lda (int16), group g's 16 columns at b + g * ldb (two vectors, loaded under m0, m1 when
 * `masked`, else whole). rows and masked are constants in each function below: inlined into its
 * callers, GCC 12 copied the accumulators to other registers on every step and kept one on the
 * stack, a store and reload in the loop's dependency chain (half the time of a head's products). */
static inline __attribute__((always_inline)) A2 void dot_rows16(const int rows, const bool masked, const int16_t *a,
                                                                int64_t lda, const int16_t *b, int64_t ldb,
                                                                int64_t groups, __m256i m0, __m256i m1, int32_t *tile) {
    __m256i acc[RB][2];
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
    for (int64_t g = 0; g < groups; g++) {
        const int16_t *br = b + g * ldb;
        const __m256i b0 = masked ? _mm256_maskload_epi32((const int *)br, m0)
                                  : _mm256_loadu_si256((const __m256i *)br);
        const __m256i b1 = masked ? _mm256_maskload_epi32((const int *)(br + 16), m1)
                                  : _mm256_loadu_si256((const __m256i *)(br + 16));
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++) {
            int32_t w;
            memcpy(&w, a + r * lda + 2 * g, 4);
            const __m256i ab = _mm256_set1_epi32(w);
            acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(ab, b0));
            acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(ab, b1));
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++) {
        _mm256_storeu_si256((__m256i *)(tile + 16 * r), acc[r][0]);
        _mm256_storeu_si256((__m256i *)(tile + 16 * r + 8), acc[r][1]);
    }
}

#define DOT_ROWS(R, M, NAME)                                                                                        \
    A2 __attribute__((noinline)) static void NAME(const int16_t *a, int64_t lda, const int16_t *b, int64_t ldb,     \
                                                  int64_t groups, __m256i m0, __m256i m1, int32_t *tile) {          \
        dot_rows16(R, M, a, lda, b, ldb, groups, m0, m1, tile);                                                     \
    }
DOT_ROWS(1, false, dot_1)
DOT_ROWS(2, false, dot_2)
DOT_ROWS(3, false, dot_3)
DOT_ROWS(4, false, dot_4)
DOT_ROWS(1, true, dot_1m)
DOT_ROWS(2, true, dot_2m)
DOT_ROWS(3, true, dot_3m)
DOT_ROWS(4, true, dot_4m)
#undef DOT_ROWS

/* dot_rows16 of `rows` (1..RB) rows */
A2 static void dot_rows(int rows, bool masked, const int16_t *a, int64_t lda, const int16_t *b, int64_t ldb,
                        int64_t groups, __m256i m0, __m256i m1, int32_t *tile) {
    typedef void (*dot_fn)(const int16_t *, int64_t, const int16_t *, int64_t, int64_t, __m256i, __m256i, int32_t *);
    static const dot_fn fs[2][RB] = {{dot_1, dot_2, dot_3, dot_4}, {dot_1m, dot_2m, dot_3m, dot_4m}};
    fs[masked][rows - 1](a, lda, b, ldb, groups, m0, m1, tile);
}

/* 8 int32 of a dot-product tile (32-byte aligned) as floats times sc. */
static inline __attribute__((always_inline)) A2 __m256 tile_times(const int32_t *t, __m256 sc) {
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_load_si256((const __m256i *)t)), sc);
}

/* Scores of `rows` query rows (l->q) against every key, scaled, into l->s. */
static inline __attribute__((always_inline)) A2 void scores2(const int rows, const layout2 *l, int64_t d, float scale) {
    const __m256 vsc = _mm256_set1_ps(scale);
    const __m256i all = _mm256_set1_epi32(-1);
    for (int64_t c0 = 0; c0 < l->t16; c0 += 16) {
        int32_t tile[RB * 16] __attribute__((aligned(32)));
        dot_rows(rows, false, l->q, d, l->k + c0 * 2, l->t16 * 2, d / 2, all, all, tile);
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++) {
            _mm256_storeu_ps(l->s + r * l->t16 + c0, tile_times(tile + 16 * r, vsc));
            _mm256_storeu_ps(l->s + r * l->t16 + c0 + 8, tile_times(tile + 16 * r + 8, vsc));
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

/* Context of `rows` rows from their probabilities (pp, row stride ldp, int16 pairs of keys) times
 * the `groups` key pairs of packed V from vv on, and their row scales. */
static inline __attribute__((always_inline)) A2 void context2(const int rows, const int16_t *pp, int64_t ldp,
                                                              const int16_t *vv, int64_t groups, int64_t d,
                                                              const float *rs, const b8_attn_s8_params *p, float *ctx,
                                                              int8_t *ctxq, int64_t ldo) {
    for (int64_t d0 = 0; d0 < d; d0 += 16) {
        const __m256i m0 = b8_v8_lanes(d - d0), m1 = b8_v8_lanes(d - d0 - 8);
        int32_t tile[RB * 16] __attribute__((aligned(32)));
        dot_rows(rows, d - d0 < 16, pp, ldp, vv + d0 * 2, d * 2, groups, m0, m1, tile);
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++) {
            const __m256 vr = _mm256_set1_ps(rs[r]);
            float *cr = ctx ? ctx + r * ldo : NULL;
            int8_t *qr = ctxq ? ctxq + r * ldo : NULL;
            store_ctx8(tile_times(tile + 16 * r, vr), m0, d0, d - d0, p, cr, qr);
            if (d - d0 > 8) store_ctx8(tile_times(tile + 16 * r + 8, vr), m1, d0 + 8, d - d0 - 8, p, cr, qr);
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

/* vmath_avx2.h's exp without its upper clamp: for x = score - row max, x <= 0 in every lane whose
 * result is kept (the others are cleared after), so the clamp changes no kept lane: the same bits. */
static inline __attribute__((always_inline)) A2 __m256 exp8_nonpos(__m256 x) {
    __m256 p, sc;
    b8_v8_exp_parts_clamped(_mm256_max_ps(x, _mm256_set1_ps(B8_VM_EXP_LO)), &p, &sc);
    return _mm256_mul_ps(p, sc);
}

/* The lanes of in whose key is not masked (mask: the 8 keys' flags, or NULL for none masked). */
static inline __attribute__((always_inline)) A2 __m256i key_lanes(__m256i in, const int32_t *mask) {
    if (!mask) return in;
    const __m256i off = _mm256_cmpeq_epi32(_mm256_maskload_epi32((const int *)mask, in), _mm256_setzero_si256());
    return _mm256_andnot_si256(off, in);
}

/* The scalar twin's softmax_u8 on `rows` rows at once (a constant at each caller; scores at stride
 * lds, probabilities at stride ldp, row r's key mask at mask + r * ldm with row_masks (a
 * constant), else one mask for all rows; the row scales into rs): e (0 for masked keys, 1
 * everywhere when every key of the row is masked), p = rne(min(e * 255, 255)) for keys [0, t4) (0
 * past T). The rows' steps are interleaved, as in the VNNI kernel: one row alone is a chain of
 * dependent maxima and sums (two rows here: four spill AVX2's 16 registers). The min is left out:
 * e <= 1 in every kept lane (exp8_nonpos of x <= 0 times 255 is at most 255 for every float x in
 * [-1, 0]; below -1 it is under 0.37), so it changes nothing (test_rowops'
 * int8_attention_avx2_probabilities_need_no_clamp checks that bound); store_p8's saturation is
 * not at 255. */
static inline __attribute__((always_inline)) A2 void softmax_rows2(const int rows, const bool row_masks, const float *s,
                                                                   int64_t lds, int64_t T, int64_t t4,
                                                                   const int32_t *mask, int64_t ldm, float v_scale255,
                                                                   int16_t *pp, int64_t ldp, float *rs) {
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    __m256 vmx[RB];
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++) vmx[r] = ninf;
    for (int64_t j = 0; j < T; j += 8) {
        const __m256i in = b8_v8_lanes(T - j), k0 = key_lanes(in, mask ? mask + j : NULL);
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++) {
            const __m256i k = row_masks && r ? key_lanes(in, mask + r * ldm + j) : k0;
            vmx[r] = _mm256_max_ps(vmx[r], _mm256_blendv_ps(ninf, _mm256_maskload_ps(s + r * lds + j, k),
                                                            _mm256_castsi256_ps(k)));
        }
    }
    bool none[RB];
    __m256 vm[RB], acc[RB][2];
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++) {
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vmx[r]), _mm256_extractf128_ps(vmx[r], 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float mx = _mm_cvtss_f32(m4);
        none[r] = mx == -INFINITY;
        vm[r] = _mm256_set1_ps(mx);
        acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    }
    const __m256 k255 = _mm256_set1_ps(255.0f), one = _mm256_set1_ps(1.0f);
    for (int64_t j = 0; j < t4; j += 16) {
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            const int64_t jj = j + 8 * h;
            const __m256i inr = b8_v8_lanes(T - jj), km0 = key_lanes(inr, mask ? mask + jj : NULL);
#pragma GCC unroll 4
            for (int r = 0; r < rows; r++) {
                const __m256i km = row_masks && r ? key_lanes(inr, mask + r * ldm + jj) : km0;
                const __m256 x = _mm256_sub_ps(_mm256_maskload_ps(s + r * lds + jj, inr), vm[r]);
                const __m256 e = none[r] ? _mm256_and_ps(one, _mm256_castsi256_ps(inr))
                                         : _mm256_and_ps(exp8_nonpos(x), _mm256_castsi256_ps(km));
                acc[r][h] = _mm256_add_ps(acc[r][h], e);
                store_p8(_mm256_mul_ps(e, k255), pp + r * ldp + jj, t4 - jj);
            }
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++) {
        float lane[16];
        _mm256_storeu_ps(lane, acc[r][0]);
        _mm256_storeu_ps(lane + 8, acc[r][1]);
        float sum = lane[0];
        for (int i = 1; i < 16; i++) sum += lane[i];
        rs[r] = v_scale255 / sum;
    }
}

/* rows query rows (row stride ld) widened to int16 into qw [rows][d]. */
A2 static void widen_q(const int8_t *q, int64_t ld, int rows, int64_t d, int16_t *qw) {
    for (int r = 0; r < rows; r++) {
        const int8_t *qr = q + r * ld;
        int64_t kk = 0;
        for (; kk + 8 <= d; kk += 8)
            _mm_storeu_si128((__m128i *)(qw + r * d + kk),
                             _mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)(qr + kk))));
        for (; kk < d; kk++) qw[r * d + kk] = qr[kk];
    }
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
        widen_q(q + i * ld, ld, rb, d, l.q);
        /* constant row counts, so that the accumulators stay in registers */
        switch (rb) {
        case 4: scores2(4, &l, d, p->score_scale); break;
        case 3: scores2(3, &l, d, p->score_scale); break;
        case 2: scores2(2, &l, d, p->score_scale); break;
        default: scores2(1, &l, d, p->score_scale); break;
        }
        for (int r = 0; r < rb && p->rel; r++) b8_attention_add_rel(l.s + r * l.t16, T, p->rel, i + r);
        for (int r = 0; r < rb;) { /* two rows at a time, then one */
            const float *sr = l.s + r * l.t16;
            int16_t *pr = l.p + r * l.t4;
            if (rb - r >= 2) softmax_rows2(2, false, sr, l.t16, T, l.t4, mask, 0, vs, pr, l.t4, rs + r), r += 2;
            else softmax_rows2(1, false, sr, l.t16, T, l.t4, mask, 0, vs, pr, l.t4, rs + r), r += 1;
        }
        float *cb = ctx ? ctx + i * ldo : NULL;
        int8_t *qb = ctxq ? ctxq + i * ldo : NULL;
        switch (rb) {
        case 4: context2(4, l.p, l.t4, l.v, l.t4 / 2, d, rs, p, cb, qb, ldo); break;
        case 3: context2(3, l.p, l.t4, l.v, l.t4 / 2, d, rs, p, cb, qb, ldo); break;
        case 2: context2(2, l.p, l.t4, l.v, l.t4 / 2, d, rs, p, cb, qb, ldo); break;
        default: context2(1, l.p, l.t4, l.v, l.t4 / 2, d, rs, p, cb, qb, ldo); break;
        }
    }
}

/* attention_s8.c's window_mask in AVX2, 8 keys at a time (the same flags; n a multiple of 16). */
A2 static void window_mask2(int64_t i, int64_t w, int64_t T, int64_t c0, int64_t n, const int32_t *mask,
                            int32_t *wm) {
    const int64_t lo = i - w > 0 ? i - w : 0, hi = i + w < T - 1 ? i + w : T - 1;
    const __m256i vlo = _mm256_set1_epi32((int)(lo - c0 - 1)), vhi = _mm256_set1_epi32((int)(hi - c0 + 1));
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), one = _mm256_set1_epi32(1);
    __m256i any = _mm256_setzero_si256();
    for (int64_t j = 0; j < n; j += 8) {
        const __m256i idx = _mm256_add_epi32(_mm256_set1_epi32((int)j), iota);
        const __m256i in = _mm256_and_si256(_mm256_cmpgt_epi32(idx, vlo), _mm256_cmpgt_epi32(vhi, idx));
        const __m256i m = key_lanes(in, mask ? mask + c0 + j : NULL);
        any = _mm256_or_si256(any, m);
        _mm256_storeu_si256((__m256i *)(wm + j), _mm256_and_si256(m, one));
    }
    if (_mm256_testz_si256(any, any)) /* every window key masked: the window alone */
        for (int64_t j = 0; j < n; j += 8) {
            const __m256i idx = _mm256_add_epi32(_mm256_set1_epi32((int)j), iota);
            const __m256i in = _mm256_and_si256(_mm256_cmpgt_epi32(idx, vlo), _mm256_cmpgt_epi32(vhi, idx));
            _mm256_storeu_si256((__m256i *)(wm + j), _mm256_and_si256(in, one));
        }
}

/* Sliding windows (attention_s8.c's "Sliding windows"): each block of RB rows forms its scores over
 * the union of its rows' spans [c0, c1) (c0 a multiple of 16, so key j stays in lane j % 16), each
 * row's keys outside its window masked; the probabilities go to int16 rows of their own, and P.V
 * runs over the key pairs of the span. */
A2 void b8_attention_s8_window__avx2(const int8_t *q, const int8_t *k, const int8_t *v, int64_t ld, int64_t T,
                                     int64_t d, const b8_attn_s8_params *p, int64_t w, const int32_t *mask,
                                     float *ctx, int8_t *ctxq, int64_t ldo, void *scratch) {
    layout2 l = carve2(scratch, T, d);
    pack2(k, v, ld, T, d, &l);
    uint8_t *extra = (uint8_t *)scratch + b8_attention_s8_scratch_bytes(T, d);
    int32_t *wm = (int32_t *)(((uintptr_t)extra + 63) & ~(uintptr_t)63); /* [RB][t16] */
    int16_t *pw = (int16_t *)(wm + RB * l.t16);                          /* [RB][t16] */
    const float vs = p->v_scale / 255.0f;
    const __m256 vsc = _mm256_set1_ps(p->score_scale);
    const __m256i all = _mm256_set1_epi32(-1);
    float rs[RB];
    for (int64_t i = 0; i < T; i += RB) {
        const int rb = T - i >= RB ? RB : (int)(T - i);
        widen_q(q + i * ld, ld, rb, d, l.q);
        const int64_t blo = i - w > 0 ? i - w : 0, bhi = i + rb - 1 + w < T - 1 ? i + rb - 1 + w : T - 1;
        const int64_t c0 = blo / 16 * 16, c1 = round_up(bhi + 1, 16), n = c1 - c0;
        for (int64_t cc = c0; cc < c1; cc += 16) {
            int32_t tile[RB * 16] __attribute__((aligned(32)));
            dot_rows(rb, false, l.q, d, l.k + cc * 2, l.t16 * 2, d / 2, all, all, tile);
            for (int r = 0; r < rb; r++)
                for (int hh = 0; hh < 2; hh++)
                    _mm256_storeu_ps(l.s + r * l.t16 + (cc - c0) + 8 * hh, tile_times(tile + 16 * r + 8 * hh, vsc));
        }
        for (int r = 0; r < rb; r++) window_mask2(i + r, w, T, c0, n, mask, wm + r * l.t16);
        for (int r = 0; r < rb;) {
            const float *sr = l.s + r * l.t16;
            const int32_t *mr = wm + r * l.t16;
            int16_t *pr = pw + r * l.t16;
            if (rb - r >= 2) softmax_rows2(2, true, sr, l.t16, n, n, mr, l.t16, vs, pr, l.t16, rs + r), r += 2;
            else softmax_rows2(1, true, sr, l.t16, n, n, mr, l.t16, vs, pr, l.t16, rs + r), r += 1;
        }
        /* context over the packed V pairs the span covers (V is packed to t4 keys) */
        const int64_t ce = c1 < l.t4 ? c1 : l.t4, groups = (ce - c0) / 2;
        const int16_t *vv = l.v + (c0 / 2) * d * 2;
        float *cb = ctx ? ctx + i * ldo : NULL;
        int8_t *qb = ctxq ? ctxq + i * ldo : NULL;
        switch (rb) {
        case 4: context2(4, pw, l.t16, vv, groups, d, rs, p, cb, qb, ldo); break;
        case 3: context2(3, pw, l.t16, vv, groups, d, rs, p, cb, qb, ldo); break;
        case 2: context2(2, pw, l.t16, vv, groups, d, rs, p, cb, qb, ldo); break;
        default: context2(1, pw, l.t16, vv, groups, d, rs, p, cb, qb, ldo); break;
        }
    }
}
