/* attention_s8.c: INT8 attention for one (sequence, head): an AMX kernel, an AVX512-VNNI kernel
 * and their bit-identical scalar twin (the AVX2 kernel is in attention_s8_avx2.c).
 *
 *   scores[i][j] = ((q_i + 128) . k_j - 128 sum_k k_j[k]) * score_scale   int8 x int8 -> int32 (vpdpbusd)
 *   e[i][j]      = exp(scores[i][j] - max_j scores[i][j]), 0 for masked keys     (vmath.h's exp)
 *   p_u8[i][j]   = rne(e[i][j] * 255)            the row's largest probability maps to 255
 *   ctx[i][d]    = (p_u8[i] . v[:, d]) * (v_scale / 255 / sum_j e[i][j])      u8 x int8 -> int32
 *   out          = ctx * ch_mul[d] (fp32), or rne(clamp(ctx * out_mul[d])) (int8)  the next GEMM's input
 *
 * Q, K and V arrive int8 (the QKV GEMM requantizes them with calibrated per-tensor scales,
 * score_scale = s_q s_k / sqrt(d), v_scale = s_v). The softmax is never normalised in float:
 * the unnormalised e is quantized against its maximum (1), so a long row of small probabilities
 * keeps its resolution, and 1/sum is folded into the row's output scale (two passes over a
 * row instead of five). The sum runs over 16 lanes (key j in lane j % 16) reduced 0..15. K is packed
 * once per call as [d/4][T16][4] (16 keys x 4 depths per vector, the vpdpbusd operand), V as
 * [T4/4][d][4]. Both twins compute the integer sums exactly and every float step in the same
 * order, so they agree bit for bit. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "base/cpu.h"
#include "kernels/amx.h"
#include "kernels/attention/attention.h"
#include "kernels/dispatch.h"
#include "kernels/quantize/quantize.h"
#include "kernels/vmath/vmath.h"
#include "kernels/vmath/vmath_avx512.h"

#define RB 4 /* query rows per block */

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/* scratch: Kp [d][T16] bytes, comp [T16] int32, Vp [T4][d] bytes, scores [RB][T16] floats,
 * p_u8 [RB][T4] bytes, q_u8 [RB][d] bytes */
#define RBA 16 /* query rows per block of the AMX kernel: one tile's rows */

static size_t amx_scratch_bytes(int64_t T, int64_t d);

size_t b8_attention_s8_scratch_bytes(int64_t T, int64_t d) {
    const int64_t t16 = round_up(T, 16), t4 = round_up(T, 4);
    const size_t vnni = (size_t)(d * t16 + 4 * t16 + t4 * d + 4 * RB * t16 + RB * t4 + RB * d + 256);
    const size_t amx = amx_scratch_bytes(T, d), avx2 = b8_attention_s8_avx2_scratch_bytes(T, d);
    const size_t most = vnni > amx ? vnni : amx;
    return most > avx2 ? most : avx2;
}

typedef struct layout {
    int64_t t16, t4;
    int8_t *kp;
    int32_t *comp;
    int8_t *vp;
    float *s;
    uint8_t *pu;
    uint8_t *qu;
} layout;

static layout carve(void *scratch, int64_t T, int64_t d) {
    layout l;
    l.t16 = round_up(T, 16);
    l.t4 = round_up(T, 4);
    uint8_t *p = scratch;
    l.s = (float *)p;
    p += 4 * RB * l.t16;
    l.comp = (int32_t *)p;
    p += 4 * l.t16;
    l.kp = (int8_t *)p;
    p += d * l.t16;
    l.vp = (int8_t *)p;
    p += l.t4 * d;
    l.pu = p;
    p += RB * l.t4;
    l.qu = p;
    return l;
}

/* Kp[g][j][c] = K[j][4g + c] (zero past T); comp[j] = 128 sum_k K[j][k]; Vp[g][dd][c] = V[4g + c][dd]. */
static void pack(const int8_t *k, const int8_t *v, int64_t ld, int64_t T, int64_t d, const layout *l) {
    memset(l->kp, 0, (size_t)(d * l->t16));
    memset(l->vp, 0, (size_t)(l->t4 * d));
    for (int64_t j = 0; j < l->t16; j++) l->comp[j] = 0;
    for (int64_t j = 0; j < T; j++) {
        int32_t s = 0;
        for (int64_t kk = 0; kk < d; kk++) {
            const int8_t x = k[j * ld + kk];
            l->kp[((kk / 4) * l->t16 + j) * 4 + kk % 4] = x;
            s += x;
        }
        l->comp[j] = 128 * s;
        for (int64_t dd = 0; dd < d; dd++) l->vp[((j / 4) * d + dd) * 4 + j % 4] = v[j * ld + dd];
    }
}

/* e, p_u8 and the row's output scale of one row of scores (length T, p_u8 padded with zeros to
 * t4). A row whose keys are all masked attends to every key alike. */
static float softmax_u8(const float *s, int64_t T, int64_t t4, const int32_t *mask, float v_scale255, uint8_t *pu) {
    float mx = -INFINITY;
    for (int64_t j = 0; j < T; j++)
        if (!mask || mask[j]) mx = s[j] > mx ? s[j] : mx;
    const bool none = mx == -INFINITY;
    float lane[16] = {0};
    for (int64_t j = 0; j < T; j++) {
        float e = none ? 1.0f : (!mask || mask[j]) ? b8_vm_exp(s[j] - mx) : 0.0f;
        lane[j % 16] += e;
        float x = e * 255.0f;
        x = x < 255.0f ? x : 255.0f;
        pu[j] = (uint8_t)(int32_t)rintf(x);
    }
    for (int64_t j = T; j < t4; j++) pu[j] = 0;
    float sum = lane[0];
    for (int l = 1; l < 16; l++) sum += lane[l];
    return v_scale255 / sum;
}

static inline void store_ctx(float y, int64_t dd, const b8_attn_s8_params *p, float *ctx, int8_t *ctxq) {
    if (ctxq) ctxq[dd] = b8_q8(y * p->out_mul[dd]);
    else ctx[dd] = p->ch_mul ? y * p->ch_mul[dd] : y;
}

void b8_attention_s8__scalar(const int8_t *q, const int8_t *k, const int8_t *v, int64_t ld, int64_t T, int64_t d,
                             const b8_attn_s8_params *p, const int32_t *mask, b8_mask_mode mode, float *ctx,
                             int8_t *ctxq, int64_t ldo, void *scratch) {
    layout l = carve(scratch, T, d);
    pack(k, v, ld, T, d, &l);
    const float vs = p->v_scale / 255.0f;
    for (int64_t i = 0; i < T; i++) {
        for (int64_t j = 0; j < T; j++) {
            int32_t acc = 0;
            for (int64_t kk = 0; kk < d; kk++) acc += (int32_t)(uint8_t)(q[i * ld + kk] + 128) * l.kp[((kk / 4) * l.t16 + j) * 4 + kk % 4];
            l.s[j] = (float)(acc - l.comp[j]) * p->score_scale;
        }
        if (p->rel) b8_attention_add_rel(l.s, T, p->rel, i);
        const float rs = softmax_u8(l.s, T, l.t4, mask, vs, l.pu);
        for (int64_t dd = 0; dd < d; dd++) {
            int32_t acc = 0;
            for (int64_t j = 0; j < l.t4; j++) acc += (int32_t)l.pu[j] * l.vp[((j / 4) * d + dd) * 4 + j % 4];
            store_ctx((float)acc * rs, dd, p, ctx ? ctx + i * ldo : NULL, ctxq ? ctxq + i * ldo : NULL);
        }
    }
}

#define VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))

/* vmath_avx512.h's exp with its last step, p * 2^n built from the exponent bits, done by one
 * vscalefps: 2^n is a normal float for every n the clamp allows, so p * 2^n and scalef(p, n) are
 * the same correctly rounded product, bit for bit (three operations fewer per 16 values); for a
 * softmax's x = score - row max: x <= 0 in every lane whose result is kept (the lanes
 * the max was taken over, and the masked-off ones are dropped after), so the upper clamp of
 * exp16 changes no kept lane and is left out: the same bits there. */
static inline __attribute__((always_inline)) VNNI __m512 exp16_nonpos(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(B8_VM_EXP_LO));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(B8_VM_LOG2E)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fmadd_ps(n, _mm512_set1_ps(-B8_VM_LN2_HI), x);
    r = _mm512_fmadd_ps(n, _mm512_set1_ps(-B8_VM_LN2_LO), r);
    __m512 p = _mm512_set1_ps(B8_VM_EXP_C6);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(B8_VM_EXP_C5));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(B8_VM_EXP_C4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(B8_VM_EXP_C3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(B8_VM_EXP_C2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(B8_VM_EXP_C1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(B8_VM_EXP_C0));
    return _mm512_scalef_ps(p, n);
}

/* p_u8 of 16 probabilities e (0 <= e <= 1 in kept lanes): e * 255 rounded; vpmovusdb saturates at
 * 255, so no clamp is needed for the same bits as round(min(e * 255, 255)). */
static inline __attribute__((always_inline)) VNNI __m128i p_u8_16(__m512 e) {
    return _mm512_cvtusepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(e, _mm512_set1_ps(255.0f))));
}

VNNI static inline __mmask16 lanes_left(int64_t left) {
    return left >= 16 ? (__mmask16)0xFFFF : left <= 0 ? (__mmask16)0 : (__mmask16)((1u << left) - 1u);
}

/* 16 context values y (lanes m) of channels d0.. of one row: to ctxq requantized with out_mul
 * (the quantizers' rounding: clamp to [-127, 127], NaN -> -127, round half even), else to ctx,
 * times ch_mul when V has a scale per channel. ctx/ctxq point at the row. */
VNNI static inline void store_ctx16(__m512 y, __mmask16 m, int64_t d0, const b8_attn_s8_params *p, float *ctx,
                                    int8_t *ctxq) {
    if (ctxq) {
        __m512 z = _mm512_mul_ps(y, _mm512_maskz_loadu_ps(m, p->out_mul + d0));
        z = _mm512_min_ps(_mm512_max_ps(z, _mm512_set1_ps(-127.0f)), _mm512_set1_ps(127.0f));
        _mm_mask_storeu_epi8(ctxq + d0, m, _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(z)));
    } else {
        _mm512_mask_storeu_ps(ctx + d0, m, p->ch_mul ? _mm512_mul_ps(y, _mm512_maskz_loadu_ps(m, p->ch_mul + d0)) : y);
    }
}

/* RB rows x 16 nc columns of int32 dot products, stored to tile[RB][64]: row r of the u8 operand
 * starts at a + r * lda (4 bytes per group), group g of the s8 operand's columns at b + g * ldb
 * (column block c of 16 lanes x 4 bytes loaded under mask m[c]). Both Q.K^T and P.V run here. nc
 * is a constant in each of the four functions below, so a product of fewer than 64 columns (P.V at
 * head size 32, the last keys of a row) issues only the vpdpbusd it needs. Functions of their own:
 * inlined into its callers, GCC 12 copied the 16 accumulators to other registers on every step (32
 * moves per 16 vpdpbusd), which costs vpdpbusd slots where moves are not eliminated (Ice Lake). */
static inline __attribute__((always_inline)) VNNI void dot_4xn(const int nc, const uint8_t *a, int64_t lda,
                                                                const int8_t *b, int64_t ldb, int64_t groups,
                                                                const __mmask16 *m, int32_t *tile) {
    __m512i acc[RB][4];
#pragma GCC unroll 4
    for (int r = 0; r < RB; r++)
#pragma GCC unroll 4
        for (int c = 0; c < nc; c++) acc[r][c] = _mm512_setzero_si512();
    for (int64_t g = 0; g < groups; g++) {
        const int8_t *br = b + g * ldb;
        __m512i v[4];
#pragma GCC unroll 4
        for (int c = 0; c < nc; c++) v[c] = _mm512_maskz_loadu_epi32(m[c], br + 64 * c);
#pragma GCC unroll 4
        for (int r = 0; r < RB; r++) {
            int32_t w;
            memcpy(&w, a + r * lda + 4 * g, 4);
            const __m512i ab = _mm512_set1_epi32(w);
#pragma GCC unroll 4
            for (int c = 0; c < nc; c++) acc[r][c] = _mm512_dpbusd_epi32(acc[r][c], ab, v[c]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < RB; r++)
#pragma GCC unroll 4
        for (int c = 0; c < nc; c++) _mm512_storeu_si512(tile + r * 64 + 16 * c, acc[r][c]);
}

#define DOT_4X(N)                                                                                                  \
    VNNI __attribute__((noinline)) static void dot_4x##N(const uint8_t *a, int64_t lda, const int8_t *b,           \
                                                         int64_t ldb, int64_t groups, const __mmask16 *m,          \
                                                         int32_t *tile) {                                          \
        dot_4xn(N / 16, a, lda, b, ldb, groups, m, tile);                                                          \
    }
DOT_4X(16)
DOT_4X(32)
DOT_4X(48)
DOT_4X(64)
#undef DOT_4X

/* dot_4xn over the first nc (1..4) column blocks, the rest of tile left as it was */
VNNI static void dot_4x(int nc, const uint8_t *a, int64_t lda, const int8_t *b, int64_t ldb, int64_t groups,
                        const __mmask16 *m, int32_t *tile) {
    switch (nc) {
    case 1: dot_4x16(a, lda, b, ldb, groups, m, tile); break;
    case 2: dot_4x32(a, lda, b, ldb, groups, m, tile); break;
    case 3: dot_4x48(a, lda, b, ldb, groups, m, tile); break;
    default: dot_4x64(a, lda, b, ldb, groups, m, tile); break;
    }
}

/* column blocks of 16 with any lane set in the first four masks */
static int blocks_of(const __mmask16 *m) { return m[3] ? 4 : m[2] ? 3 : m[1] ? 2 : 1; }

/* Scores of RB query rows (q_u8 rows of d bytes) against all keys, into l->s (stride t16). */
VNNI static void scores_rows(const layout *l, const uint8_t *qu, int64_t d, float scale) {
    const __m512 vsc = _mm512_set1_ps(scale);
    int32_t tile[RB * 64] __attribute__((aligned(64)));
    for (int64_t c0 = 0; c0 < l->t16; c0 += 64) {
        const int nc = l->t16 - c0 >= 64 ? 4 : (int)((l->t16 - c0) / 16);
        __mmask16 m[4];
        for (int c = 0; c < 4; c++) m[c] = c < nc ? (__mmask16)0xFFFF : (__mmask16)0;
        dot_4x(nc, qu, d, l->kp + c0 * 4, l->t16 * 4, d / 4, m, tile);
#pragma GCC unroll 4
        for (int c = 0; c < nc; c++) {
            const __m512i cm = _mm512_loadu_si512(l->comp + c0 + 16 * c);
#pragma GCC unroll 4
            for (int r = 0; r < RB; r++)
                _mm512_storeu_ps(l->s + r * l->t16 + c0 + 16 * c,
                                 _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_load_si512(tile + r * 64 + 16 * c), cm)), vsc));
        }
    }
}

/* ctx of RB rows from their p_u8 rows (stride t4) and row scales. */
VNNI static void context_rows(const layout *l, int64_t d, const float *rs, const b8_attn_s8_params *p,
                              float *ctx, int8_t *ctxq, int64_t ldo) {
    const int rb = RB;
    int32_t tile[RB * 64] __attribute__((aligned(64)));
    for (int64_t d0 = 0; d0 < d; d0 += 64) {
        __mmask16 m[4];
        for (int c = 0; c < 4; c++) m[c] = lanes_left(d - d0 - 16 * c);
        dot_4x(blocks_of(m), l->pu, l->t4, l->vp + d0 * 4, d * 4, l->t4 / 4, m, tile);
#pragma GCC unroll 4
        for (int r = 0; r < rb; r++) {
            const __m512 vr = _mm512_set1_ps(rs[r]);
#pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                if (!m[c]) continue;
                const __m512 y = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512(tile + r * 64 + 16 * c)), vr);
                store_ctx16(y, m[c], d0 + 16 * c, p, ctx ? ctx + r * ldo : NULL, ctxq ? ctxq + r * ldo : NULL);
            }
        }
    }
}

/* One row of scores_rows (the tail of a block). */
VNNI static void scores_rows1(const layout *l, const uint8_t *qu, int64_t d, float scale, float *srow) {
    const __m512 vsc = _mm512_set1_ps(scale);
    for (int64_t c0 = 0; c0 < l->t16; c0 += 16) {
        __m512i acc = _mm512_setzero_si512();
        for (int64_t g = 0; g < d / 4; g++) {
            int32_t w;
            memcpy(&w, qu + 4 * g, 4);
            acc = _mm512_dpbusd_epi32(acc, _mm512_set1_epi32(w), _mm512_loadu_si512(l->kp + (g * l->t16 + c0) * 4));
        }
        _mm512_storeu_ps(srow + c0, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(acc, _mm512_loadu_si512(l->comp + c0))), vsc));
    }
}

/* One row of context_rows. */
VNNI static void context_rows1(const layout *l, int64_t d, float rs, const uint8_t *pu, const b8_attn_s8_params *p,
                               float *ctx, int8_t *ctxq) {
    const __m512 vr = _mm512_set1_ps(rs);
    for (int64_t d0 = 0; d0 < d; d0 += 16) {
        const __mmask16 m = lanes_left(d - d0);
        __m512i acc = _mm512_setzero_si512();
        for (int64_t g = 0; g < l->t4 / 4; g++) {
            int32_t w;
            memcpy(&w, pu + 4 * g, 4);
            acc = _mm512_dpbusd_epi32(acc, _mm512_set1_epi32(w), _mm512_maskz_loadu_epi32(m, l->vp + (g * d + d0) * 4));
        }
        const __m512 y = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), vr);
        store_ctx16(y, m, d0, p, ctx, ctxq);
    }
}

/* dst[c] = column c of the 16 x 16 int32 matrix whose rows are r[0..15]. */
VNNI static inline void transpose16x16(const __m512i r[16], __m512i dst[16]) {
    __m512i t[16], u[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) { /* lane L of u[i + c]: rows i..i+3 of column 4L + c */
        u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int c = 0; c < 4; c++) {
        const __m512i v0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x88), v1 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xDD);
        const __m512i v2 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x88),
                      v3 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xDD);
        dst[c] = _mm512_shuffle_i32x4(v0, v2, 0x88);
        dst[8 + c] = _mm512_shuffle_i32x4(v0, v2, 0xDD);
        dst[4 + c] = _mm512_shuffle_i32x4(v1, v3, 0x88);
        dst[12 + c] = _mm512_shuffle_i32x4(v1, v3, 0xDD);
    }
}

/* pack() for the VNNI path, the same bytes: K as 32-bit words (4 depths), 16 keys x 16 words
 * transposed at a time, comp from vpdpbusd of ones against the transposed words, V interleaved 4
 * keys at a time with byte/word unpacks. */
VNNI static void pack_vnni(const int8_t *k, const int8_t *v, int64_t ld, int64_t T, int64_t d, const layout *l) {
    const int64_t g4 = d / 4;
    int32_t *kp = (int32_t *)l->kp;
    const __m512i ones = _mm512_set1_epi8(1);
    for (int64_t j0 = 0; j0 < l->t16; j0 += 16) {
        __m512i sum = _mm512_setzero_si512();
        for (int64_t g0 = 0; g0 < g4; g0 += 16) {
            const __mmask16 m = lanes_left(g4 - g0);
            const int nc = g4 - g0 >= 16 ? 16 : (int)(g4 - g0);
            __m512i r[16], c[16];
            for (int i = 0; i < 16; i++)
                r[i] = j0 + i < T ? _mm512_maskz_loadu_epi32(m, k + (j0 + i) * ld + 4 * g0) : _mm512_setzero_si512();
            transpose16x16(r, c);
            for (int i = 0; i < nc; i++) {
                _mm512_storeu_si512(kp + (g0 + i) * l->t16 + j0, c[i]);
                sum = _mm512_dpbusd_epi32(sum, ones, c[i]);
            }
        }
        _mm512_storeu_si512(l->comp + j0, _mm512_slli_epi32(sum, 7));
    }
    int32_t *vp = (int32_t *)l->vp;
    for (int64_t j0 = 0; j0 < l->t4; j0 += 4) {
        const int8_t *r[4];
        static const int8_t zero[64] = {0};
        for (int c = 0; c < 4; c++) r[c] = j0 + c < T ? v + (j0 + c) * ld : NULL;
        int64_t dd = 0;
        for (; dd + 16 <= d; dd += 16) {
            __m128i a = r[0] ? _mm_loadu_si128((const __m128i *)(r[0] + dd)) : _mm_setzero_si128();
            __m128i b = r[1] ? _mm_loadu_si128((const __m128i *)(r[1] + dd)) : _mm_setzero_si128();
            __m128i c = r[2] ? _mm_loadu_si128((const __m128i *)(r[2] + dd)) : _mm_setzero_si128();
            __m128i e = r[3] ? _mm_loadu_si128((const __m128i *)(r[3] + dd)) : _mm_setzero_si128();
            __m128i ab0 = _mm_unpacklo_epi8(a, b), ab1 = _mm_unpackhi_epi8(a, b);
            __m128i ce0 = _mm_unpacklo_epi8(c, e), ce1 = _mm_unpackhi_epi8(c, e);
            int32_t *o = vp + (j0 / 4) * d + dd;
            _mm_storeu_si128((__m128i *)(o + 0), _mm_unpacklo_epi16(ab0, ce0));
            _mm_storeu_si128((__m128i *)(o + 4), _mm_unpackhi_epi16(ab0, ce0));
            _mm_storeu_si128((__m128i *)(o + 8), _mm_unpacklo_epi16(ab1, ce1));
            _mm_storeu_si128((__m128i *)(o + 12), _mm_unpackhi_epi16(ab1, ce1));
        }
        for (; dd < d; dd++) {
            uint32_t w = 0;
            for (int c = 0; c < 4; c++) w |= (uint32_t)(uint8_t)(r[c] ? r[c][dd] : zero[0]) << (8 * c);
            vp[(j0 / 4) * d + dd] = (int32_t)w;
        }
    }
}

/* softmax_u8() in AVX-512 on `rows` rows at once (rows of s at stride lds, of pu at stride ldpu;
 * their output scales into rs): the same max, exp (vmath_avx512.h), lane sums and rounding, row by
 * row. The rows' steps are interleaved: a row alone is a chain of dependent steps (the max, its
 * reduction, the lane sum) that left the core mostly idle; `rows` is a constant at each caller. */
/* One vector of scores: floats, or (sc != NULL, the AMX kernel's exact int32 dot products) the
 * same floats formed on the fly, (float)acc * scale, as the AMX kernel would have stored them. */
static inline __attribute__((always_inline)) VNNI __m512 score16(const float *s, const int32_t *sc, int64_t off,
                                                                 __m512 vsc, __mmask16 k) {
    return sc ? _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_maskz_loadu_epi32(k, sc + off)), vsc)
              : _mm512_maskz_loadu_ps(k, s + off);
}

/* The key mask of lanes k (mask: 16 keys' flags, or NULL). */
static inline __attribute__((always_inline)) VNNI __mmask16 keys_kept(__mmask16 k, const int32_t *mask) {
    return mask ? _mm512_mask_cmpneq_epi32_mask(k, _mm512_maskz_loadu_epi32(k, mask), _mm512_setzero_si512()) : k;
}

/* row_masks (a constant): row r's key mask at mask + r * ldm (the window kernel's), else one for
 * all rows. */
static inline __attribute__((always_inline)) VNNI void
softmax_u8_body(const int rows, const float *s, const int32_t *sc, float scale, int64_t lds, int64_t T, int64_t t4,
                const int32_t *mask, const bool row_masks, int64_t ldm, float v_scale255, uint8_t *pu, int64_t ldpu,
                float *rs) {
    const __m512 vsc = _mm512_set1_ps(scale);
    __m512 vmx[RB];
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++) vmx[r] = _mm512_set1_ps(-INFINITY);
    for (int64_t j = 0; j < T; j += 16) {
        const __mmask16 in = lanes_left(T - j), k0 = keys_kept(in, mask ? mask + j : NULL);
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++) {
            const __mmask16 k = row_masks && r ? keys_kept(in, mask + r * ldm + j) : k0;
            vmx[r] = _mm512_mask_max_ps(vmx[r], k, vmx[r], score16(s, sc, r * lds + j, vsc, k));
        }
    }
    bool none[RB];
    __m512 vm[RB], acc[RB];
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++) {
        const float mx = _mm512_reduce_max_ps(vmx[r]);
        none[r] = mx == -INFINITY;
        vm[r] = _mm512_set1_ps(mx);
        acc[r] = _mm512_setzero_ps();
    }
    for (int64_t j = 0; j < t4; j += 16) {
        const __mmask16 inr = lanes_left(T - j), out = lanes_left(t4 - j), km0 = keys_kept(inr, mask ? mask + j : NULL);
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++) {
            const __mmask16 km = row_masks && r ? keys_kept(inr, mask + r * ldm + j) : km0;
            const __m512 e = none[r] ? _mm512_maskz_mov_ps(inr, _mm512_set1_ps(1.0f))
                                     : _mm512_maskz_mov_ps(km, exp16_nonpos(_mm512_sub_ps(
                                                                   score16(s, sc, r * lds + j, vsc, inr), vm[r])));
            acc[r] = _mm512_add_ps(acc[r], e);
            _mm_mask_storeu_epi8(pu + r * ldpu + j, out, p_u8_16(e));
        }
    }
    float lane[RB][16], sum[RB];
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++) {
        _mm512_storeu_ps(lane[r], acc[r]);
        sum[r] = lane[r][0];
    }
    for (int l = 1; l < 16; l++)
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++) sum[r] += lane[r][l];
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++) rs[r] = v_scale255 / sum[r];
}

VNNI static float softmax_u8_vnni(const float *s, int64_t T, int64_t t4, const int32_t *mask, float v_scale255,
                                  uint8_t *pu) {
    float rs;
    softmax_u8_body(1, s, NULL, 1.0f, 0, T, t4, mask, false, 0, v_scale255, pu, 0, &rs);
    return rs;
}

/* RB rows of scores (stride t16) into p_u8 rows (stride t4) and their output scales. */
VNNI static void softmax_u8_rows(const layout *l, int64_t T, const int32_t *mask, float v_scale255, float *rs) {
    softmax_u8_body(RB, l->s, NULL, 1.0f, l->t16, T, l->t4, mask, false, 0, v_scale255, l->pu, l->t4, rs);
}

/* RB rows of a window block's scores (stride ld, n keys, n a multiple of 16), each with its own
 * window mask (stride ld), into p_u8 rows (stride ld) and their output scales: the rows
 * interleaved, as softmax_u8_rows. */
VNNI static void softmax_u8_window_rows(const float *s, int64_t ld, int64_t n, const int32_t *wm, float v_scale255,
                                        uint8_t *pu, float *rs) {
    softmax_u8_body(RB, s, NULL, 1.0f, ld, n, n, wm, true, ld, v_scale255, pu, ld, rs);
}

VNNI void b8_attention_s8__avx512vnni(const int8_t *q, const int8_t *k, const int8_t *v, int64_t ld, int64_t T,
                                      int64_t d, const b8_attn_s8_params *p, const int32_t *mask, b8_mask_mode mode,
                                      float *ctx, int8_t *ctxq, int64_t ldo, void *scratch) {
    layout l = carve(scratch, T, d);
    pack_vnni(k, v, ld, T, d, &l);
    const float vs = p->v_scale / 255.0f;
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    float rs[RB];
    for (int64_t i = 0; i < T; i += RB) {
        const int rb = T - i >= RB ? RB : (int)(T - i);
        for (int r = 0; r < rb; r++) /* q + 128 as u8: flip the sign bit */
            for (int64_t k0 = 0; k0 < d; k0 += 64) {
                const __mmask64 m = d - k0 >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (d - k0)) - 1);
                _mm512_mask_storeu_epi8(l.qu + r * d + k0, m,
                                        _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, q + (i + r) * ld + k0), flip));
            }
        /* constant row counts, so that the accumulators stay in registers */
        if (rb == RB) scores_rows(&l, l.qu, d, p->score_scale);
        else
            for (int r = 0; r < rb; r++) scores_rows1(&l, l.qu + r * d, d, p->score_scale, l.s + r * l.t16);
        for (int r = 0; r < rb && p->rel; r++) b8_attention_add_rel(l.s + r * l.t16, T, p->rel, i + r);
        if (rb == RB) softmax_u8_rows(&l, T, mask, vs, rs);
        else
            for (int r = 0; r < rb; r++) rs[r] = softmax_u8_vnni(l.s + r * l.t16, T, l.t4, mask, vs, l.pu + r * l.t4);
        if (rb == RB) context_rows(&l, d, rs, p, ctx ? ctx + i * ldo : NULL, ctxq ? ctxq + i * ldo : NULL, ldo);
        else
            for (int r = 0; r < rb; r++)
                context_rows1(&l, d, rs[r], l.pu + r * l.t4, p, ctx ? ctx + (i + r) * ldo : NULL,
                              ctxq ? ctxq + (i + r) * ldo : NULL);
    }
}

/* ---- AMX: Q.K^T and P.V on tiles (d a multiple of 64; other d run the VNNI kernel) ----
 *
 * Blocks of 16 query rows. Scores: tdpbssd of the Q rows (s8, one 16 x 64 tile per 64 depths,
 * read in place) against K packed as for the VNNI kernel ([d/4][t16][4] is the tile B layout),
 * exact int32 q.k = (q + 128).k - comp, so the same floats as the twins. Context: tdpbusd of the
 * p_u8 rows (keys padded with zeros to a multiple of 64) against V packed [t64/4][d][4]. The
 * softmax and the output rounding are the VNNI kernel's, so all three agree bit for bit. */

#define AMXT __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,amx-tile,amx-int8")))

/* scratch: the VNNI layout with t4 = t64 and RBA rows, plus q rows of a tail block [RBA][d]
 * and the int32 results: scores [RBA][t16], context [RBA][d]. */
static size_t amx64_scratch_bytes(int64_t T);

static size_t amx_scratch_bytes(int64_t T, int64_t d) {
    const int64_t t16 = round_up(T, 16), t64 = round_up(T, 64);
    const size_t blocks = (size_t)(4 * RBA * t16 + 4 * t16 + d * t16 + t64 * d + RBA * t64 + RBA * d + 4 * RBA * t16 +
                                   4 * RBA * d + 8 * 64);
    const size_t fused = d <= 64 && d % 16 == 0 ? amx64_scratch_bytes(T) : 0;
    return blocks > fused ? blocks : fused;
}

typedef struct amx_layout {
    layout l; /* t4 holds t64 here */
    int32_t *sc, *cx;
} amx_layout;

static amx_layout carve_amx(void *scratch, int64_t T, int64_t d) {
    amx_layout a;
    uint8_t *p = (uint8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    a.l.t16 = round_up(T, 16);
    a.l.t4 = round_up(T, 64);
#define TAKE(ptr, type, bytes) (ptr = (type *)p, p += round_up((int64_t)(bytes), 64))
    TAKE(a.l.s, float, 4 * RBA * a.l.t16);
    TAKE(a.l.comp, int32_t, 4 * a.l.t16);
    TAKE(a.l.kp, int8_t, d * a.l.t16);
    TAKE(a.l.vp, int8_t, a.l.t4 * d);
    TAKE(a.l.pu, uint8_t, RBA * a.l.t4);
    TAKE(a.l.qu, uint8_t, RBA * d);
    TAKE(a.sc, int32_t, 4 * RBA * a.l.t16);
    TAKE(a.cx, int32_t, 4 * RBA * d);
#undef TAKE
    return a;
}

/* int32 scores of 16 query rows (q, row stride ldq) against all t16 keys into sc [16][t16]. */
AMXT static void scores_amx(const int8_t *q, int64_t ldq, int64_t d, const layout *l, int32_t *sc) {
    const int64_t ldk = l->t16 * 4, lds = l->t16 * 4;
    B8_AMX_BARRIER();
    int64_t j0 = 0;
    for (; j0 + 32 <= l->t16; j0 += 32) {
        _tile_zero(0);
        _tile_zero(1);
        for (int64_t k0 = 0; k0 < d; k0 += 64) {
            _tile_loadd(4, q + k0, ldq);
            _tile_loadd(6, l->kp + ((k0 / 4) * l->t16 + j0) * 4, ldk);
            _tile_loadd(7, l->kp + ((k0 / 4) * l->t16 + j0 + 16) * 4, ldk);
            _tile_dpbssd(0, 4, 6);
            _tile_dpbssd(1, 4, 7);
        }
        _tile_stored(0, sc + j0, lds);
        _tile_stored(1, sc + j0 + 16, lds);
    }
    if (j0 < l->t16) {
        _tile_zero(0);
        for (int64_t k0 = 0; k0 < d; k0 += 64) {
            _tile_loadd(4, q + k0, ldq);
            _tile_loadd(6, l->kp + ((k0 / 4) * l->t16 + j0) * 4, ldk);
            _tile_dpbssd(0, 4, 6);
        }
        _tile_stored(0, sc + j0, lds);
    }
    B8_AMX_BARRIER();
}

/* int32 context of 16 rows of p_u8 (stride t64) against V [t64/4][d][4] into cx [16][d]. */
AMXT static void context_amx(const layout *l, int64_t d, int32_t *cx) {
    const int64_t ldv = d * 4, ldc = d * 4;
    B8_AMX_BARRIER();
    for (int64_t d0 = 0; d0 < d; d0 += 32) {
        _tile_zero(0);
        _tile_zero(1);
        for (int64_t j0 = 0; j0 < l->t4; j0 += 64) {
            _tile_loadd(4, l->pu + j0, l->t4);
            _tile_loadd(6, l->vp + ((j0 / 4) * d + d0) * 4, ldv);
            _tile_loadd(7, l->vp + ((j0 / 4) * d + d0 + 16) * 4, ldv);
            _tile_dpbusd(0, 4, 6);
            _tile_dpbusd(1, 4, 7);
        }
        _tile_stored(0, cx + d0, ldc);
        _tile_stored(1, cx + d0 + 16, ldc);
    }
    B8_AMX_BARRIER();
}


/* ---- AMX, head sizes 16 to 64: scores, softmax and P.V fused per block of keys ----
 *
 * For each block of 16 query rows, in chunks of 64 keys, two passes: the first forms the chunk's
 * scores (one 16 x 16 tile per 16 keys, Q held in a tile) only for the rows' largest score, the
 * second forms them again, turns them into p_u8 and the lane sums, and multiplies the chunk's
 * p_u8 tile into the context tiles, which stay in tile registers over all chunks. No row's
 * scores outlive their chunk (4 KiB, in L1), where the block kernel above stores [16][T] int32
 * scores and reads them back (128 KiB per block at T = 2048, from L2). K and V are packed tile by
 * tile (each tile load one contiguous KiB). Every float is formed as in the twins: the same score
 * (int32 * scale, then + rel), the same max, exp, lane order (key j in lane j % 16, keys in
 * ascending order) and rounding, and the context sums are exact integers, so the outputs are bit
 * for bit the block kernel's and the scalar twin's. A head size below 64 (MiniLM's 32) runs on the
 * same 64-depth tiles with the depths past it zero in Q and K, which add exact zeros. */

#define KCH 64 /* keys per chunk */

/* kt [t64/16][16 groups][16 keys][4], vt [t64/64][4][16 groups][16 dims][4] (dims in tiles of 16),
 * then a chunk's scores [16][64] int32, its p_u8 [16][64], the rows of a tail block [16][64] */
static size_t amx64_scratch_bytes(int64_t T) {
    const int64_t t64 = round_up(T, 64);
    return (size_t)(2 * t64 * 64 + 4 * 16 * KCH + 16 * KCH + 16 * 64 + 2 * 64);
}

/* keep a product out of a following addition: GCC contracts (a * b) + c into one fused
 * multiply-add, which rounds once where the twins round twice */
#define B8_NO_CONTRACT(x) __asm__("" : "+v"(x))

/* K and V of one head into the tile layouts (keys past T zero). K: the 16 x 16 dwords (keys x
 * groups of 4 depths) of each 16-key tile transposed; V: four keys' bytes interleaved per dim,
 * as pack_vnni does, each 16-dim column tile of a 64-key chunk stored whole. */
AMXT static void pack_amx64(const int8_t *k, const int8_t *v, int64_t ld, int64_t T, int64_t d, int8_t *kt,
                            int8_t *vt) {
    const int64_t t16 = round_up(T, 16), t64 = round_up(T, 64);
    const __mmask16 kd = (__mmask16)((1u << (d / 4)) - 1); /* the dwords of a key's d depths */
    for (int64_t j0 = 0; j0 < t16; j0 += 16) { /* no score is formed past t16 */
        __m512i r[16], c[16];
        for (int i = 0; i < 16; i++) r[i] = j0 + i < T ? _mm512_maskz_loadu_epi32(kd, k + (j0 + i) * ld) : _mm512_setzero_si512();
        transpose16x16(r, c);
        for (int g = 0; g < 16; g++) _mm512_storeu_si512(kt + j0 * 64 + g * 64, c[g]);
    }
    for (int64_t j0 = 0; j0 < t64; j0 += 4) {
        __m128i rows[4][4]; /* key c, dims 16 dd .. 16 dd + 15 */
        for (int c = 0; c < 4; c++)
            for (int dd = 0; dd < d / 16; dd++)
                rows[c][dd] = j0 + c < T ? _mm_loadu_si128((const __m128i *)(v + (j0 + c) * ld + 16 * dd)) : _mm_setzero_si128();
        for (int dd = 0; dd < d / 16; dd++) {
            const __m128i ab0 = _mm_unpacklo_epi8(rows[0][dd], rows[1][dd]), ab1 = _mm_unpackhi_epi8(rows[0][dd], rows[1][dd]);
            const __m128i ce0 = _mm_unpacklo_epi8(rows[2][dd], rows[3][dd]), ce1 = _mm_unpackhi_epi8(rows[2][dd], rows[3][dd]);
            int8_t *o = vt + (j0 / 64) * 4096 + dd * 1024 + ((j0 % 64) / 4) * 64;
            _mm_storeu_si128((__m128i *)(o + 0), _mm_unpacklo_epi16(ab0, ce0));
            _mm_storeu_si128((__m128i *)(o + 16), _mm_unpackhi_epi16(ab0, ce0));
            _mm_storeu_si128((__m128i *)(o + 32), _mm_unpacklo_epi16(ab1, ce1));
            _mm_storeu_si128((__m128i *)(o + 48), _mm_unpackhi_epi16(ab1, ce1));
        }
    }
}

/* The int32 scores of the block's 16 rows (Q in tmm4) against the n16 16-key tiles of a chunk
 * (kc: its first K tile) into sb [16][64]. pass 1 has tmm0-3 free (four score tiles at once);
 * pass 2 keeps the context in them and forms the scores one tile at a time in tmm6. */
AMXT static inline __attribute__((always_inline)) void chunk_scores(const int8_t *kc, int n16, int32_t *sb, int wide) {
    B8_AMX_BARRIER();
    if (wide) {
#define B8_SCORE_TILE(t, kr)                                                                     \
    if (n16 > t) {                                                                             \
        _tile_loadd(kr, kc + (t) * 1024, 64);                                                  \
        _tile_zero(t);                                                                         \
        _tile_dpbssd(t, 4, kr);                                                                \
        _tile_stored(t, sb + 16 * (t), 4 * KCH);                                                \
    }
        B8_SCORE_TILE(0, 5) B8_SCORE_TILE(1, 6) B8_SCORE_TILE(2, 7) B8_SCORE_TILE(3, 5)
#undef B8_SCORE_TILE
    } else {
#define B8_SCORE_TILE(t, kr)                                                                     \
    if (n16 > t) {                                                                             \
        _tile_loadd(kr, kc + (t) * 1024, 64);                                                  \
        _tile_zero(6);                                                                         \
        _tile_dpbssd(6, 4, kr);                                                                \
        _tile_stored(6, sb + 16 * (t), 4 * KCH);                                                \
    }
        B8_SCORE_TILE(0, 5) B8_SCORE_TILE(1, 7) B8_SCORE_TILE(2, 5) B8_SCORE_TILE(3, 7)
#undef B8_SCORE_TILE
    }
    B8_AMX_BARRIER();
}

/* One vector of a chunk's scores as floats: (float)acc * scale, plus the relative bias (rel: the
 * row's rel row, already offset to key j). */
AMXT static inline __attribute__((always_inline)) __m512 chunk_score16(const int32_t *sb, __m512 vsc, const float *rel,
                                                                      __mmask16 k) {
    __m512 x = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512(sb)), vsc);
    if (rel) {
        B8_NO_CONTRACT(x);
        x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(k, rel));
    }
    return x;
}

/* The context tiles (tmm0 .. tmm(nct - 1): 16 rows x 16 dims each) += a chunk's p_u8 [16][KCH]
 * times its V tiles. */
AMXT static inline __attribute__((always_inline)) void context_chunk(const uint8_t *pb, const int8_t *vc, int nct) {
    B8_AMX_BARRIER();
    _tile_loadd(7, pb, KCH);
    _tile_loadd(5, vc, 64);
    _tile_dpbusd(0, 7, 5);
    if (nct > 1) {
        _tile_loadd(6, vc + 1024, 64);
        _tile_dpbusd(1, 7, 6);
    }
    if (nct > 2) {
        _tile_loadd(5, vc + 2048, 64);
        _tile_dpbusd(2, 7, 5);
    }
    if (nct > 3) {
        _tile_loadd(6, vc + 3072, 64);
        _tile_dpbusd(3, 7, 6);
    }
    B8_AMX_BARRIER();
}

AMXT static void b8_attention_s8_amx64(const int8_t *q, const int8_t *k, const int8_t *v, int64_t ld, int64_t T,
                                       int64_t d, const b8_attn_s8_params *p, const int32_t *mask, float *ctx, int8_t *ctxq,
                                       int64_t ldo, void *scratch) {
    const int64_t t16 = round_up(T, 16), t64 = round_up(T, 64);
    uint8_t *base = (uint8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    int8_t *kt = (int8_t *)base, *vt = kt + t64 * 64;
    int32_t *sbuf = (int32_t *)(vt + t64 * 64); /* [16][KCH] */
    uint8_t *pbuf = (uint8_t *)(sbuf + 16 * KCH); /* [16][KCH] */
    int8_t *qu = (int8_t *)(pbuf + 16 * KCH);
    int32_t cx[16 * 64] __attribute__((aligned(64)));
    pack_amx64(k, v, ld, T, d, kt, vt);
    const int nct = (int)(d / 16); /* context tiles */
    b8_amx_tilecfg cfg;
    b8_amx_tilecfg_16x64(&cfg);
    B8_AMX_BARRIER();
    _tile_loadconfig(&cfg);
    const __m512 vsc = _mm512_set1_ps(p->score_scale);
    const float vs255 = p->v_scale / 255.0f;
    const int64_t nch = (t16 + KCH - 1) / KCH;
/* 16-key tiles of chunk c (those before t16) */
#define B8_N16(c) ((int)((t16 - (c) * KCH) / 16 < 4 ? (t16 - (c) * KCH) / 16 : 4))
    for (int64_t i = 0; i < T; i += 16) {
        const int rb = T - i >= 16 ? 16 : (int)(T - i);
        const int8_t *qb = q + i * ld;
        int64_t ldq = ld;
        if (rb < 16 || d < 64) { /* a tail block, or rows shorter than a tile's 64 depths: copied,
                                    the rest zero, so no tile reads past T or past a row */
            memset(qu, 0, 16 * 64);
            for (int r = 0; r < rb; r++) memcpy(qu + r * 64, q + (i + r) * ld, (size_t)d);
            qb = qu;
            ldq = 64;
        }
        B8_AMX_BARRIER();
        _tile_loadd(4, qb, ldq);
        /* (Forming chunk c + 1's scores before reading chunk c's, and multiplying chunk c's p_u8
         * into the context only after chunk c + 1's softmax, so that no load waits on stores just
         * made, was measured slower: 12.8 -> 15.1 us per head at T = 128, the same at 2,048.) */
        /* pass 1: each row's largest score over the keys not masked */
        __m512 vmx[16];
        for (int r = 0; r < 16; r++) vmx[r] = _mm512_set1_ps(-INFINITY);
        for (int64_t c = 0; c < nch; c++) {
            const int64_t c0 = c * KCH;
            const int n16 = B8_N16(c);
            const int32_t *sb = sbuf;
            chunk_scores(kt + c0 * 64, n16, sbuf, 1);
            for (int t = 0; t < n16; t++) {
                const int64_t j = c0 + 16 * t;
                __mmask16 km = lanes_left(T - j);
                if (mask) km &= _mm512_mask_cmpneq_epi32_mask(km, _mm512_maskz_loadu_epi32(km, mask + j), _mm512_setzero_si512());
                for (int r = 0; r < rb; r++) {
                    const float *rel = p->rel ? p->rel + (T - 1 - (i + r)) + j : NULL;
                    vmx[r] = _mm512_mask_max_ps(vmx[r], km, vmx[r], chunk_score16(sb + r * KCH + 16 * t, vsc, rel, km));
                }
            }
        }
        float mx[16];
        bool none[16];
        __m512 acc[16];
        for (int r = 0; r < rb; r++) {
            mx[r] = _mm512_reduce_max_ps(vmx[r]);
            none[r] = mx[r] == -INFINITY;
            acc[r] = _mm512_setzero_ps();
        }
        /* pass 2: p_u8 and the lane sums, and the context tiles (tmm0-3) over the chunks */
        B8_AMX_BARRIER();
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        for (int64_t c = 0; c < nch; c++) {
            const int64_t c0 = c * KCH;
            const int n16 = B8_N16(c);
            const int32_t *sb = sbuf;
            uint8_t *pb = pbuf;
            chunk_scores(kt + c0 * 64, n16, sbuf, 0);
            for (int t = 0; t < 4; t++) {
                const int64_t j = c0 + 16 * t;
                if (t >= n16) { /* keys past t16 up to t64: p = 0 */
                    for (int r = 0; r < 16; r++) _mm_storeu_si128((__m128i *)(pb + r * KCH + 16 * t), _mm_setzero_si128());
                    continue;
                }
                const __mmask16 inr = lanes_left(T - j);
                __mmask16 km = inr;
                if (mask) km &= _mm512_mask_cmpneq_epi32_mask(inr, _mm512_maskz_loadu_epi32(inr, mask + j), _mm512_setzero_si512());
                for (int r = 0; r < rb; r++) {
                    const float *rel = p->rel ? p->rel + (T - 1 - (i + r)) + j : NULL;
                    __m512 e;
                    if (none[r]) {
                        e = _mm512_maskz_mov_ps(inr, _mm512_set1_ps(1.0f));
                    } else {
                        __m512 x = _mm512_maskz_mov_ps(inr, chunk_score16(sb + r * KCH + 16 * t, vsc, rel, inr));
                        B8_NO_CONTRACT(x);
                        e = _mm512_maskz_mov_ps(km, exp16_nonpos(_mm512_sub_ps(x, _mm512_set1_ps(mx[r]))));
                    }
                    acc[r] = _mm512_add_ps(acc[r], e);
                    _mm_storeu_si128((__m128i *)(pb + r * KCH + 16 * t), p_u8_16(e));
                }
                for (int r = rb; r < 16; r++) _mm_storeu_si128((__m128i *)(pb + r * KCH + 16 * t), _mm_setzero_si128());
            }
            context_chunk(pb, vt + c0 * 64, nct);
        }
        _tile_stored(0, cx, 256);
        if (nct > 1) _tile_stored(1, cx + 16, 256);
        if (nct > 2) _tile_stored(2, cx + 32, 256);
        if (nct > 3) _tile_stored(3, cx + 48, 256);
        B8_AMX_BARRIER();
        for (int r = 0; r < rb; r++) {
            float lane[16], sum;
            _mm512_storeu_ps(lane, acc[r]);
            sum = lane[0];
            for (int l = 1; l < 16; l++) sum += lane[l];
            const __m512 vr = _mm512_set1_ps(vs255 / sum);
            for (int64_t d0 = 0; d0 < d; d0 += 16) {
                const __m512 y = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512(cx + r * 64 + d0)), vr);
                store_ctx16(y, (__mmask16)0xFFFF, d0, p, ctx ? ctx + (i + r) * ldo : NULL,
                            ctxq ? ctxq + (i + r) * ldo : NULL);
            }
        }
    }
    _tile_release();
}
#undef B8_N16

AMXT void b8_attention_s8__amx(const int8_t *q, const int8_t *k, const int8_t *v, int64_t ld, int64_t T, int64_t d,
                               const b8_attn_s8_params *p, const int32_t *mask, b8_mask_mode mode, float *ctx,
                               int8_t *ctxq, int64_t ldo, void *scratch) {
    /* Head sizes below 64 fill the tiles' 64 depths with zeros: at a handful of keys the VNNI
     * kernel is ahead (all-MiniLM-L6-v2, d = 32, 1 x 16 tokens: 1.03-1.06x; at 32 and 48 keys level,
     * from 64 the fused kernel is 1.05x ahead; d = 64 level at 16-48; bench_ab, Xeon with AMX). */
    if (d <= 64 && d % 16 == 0 && (d == 64 || T >= 32)) {
        b8_attention_s8_amx64(q, k, v, ld, T, d, p, mask, ctx, ctxq, ldo, scratch);
        return;
    }
    if (d % 64 != 0) {
        b8_attention_s8__avx512vnni(q, k, v, ld, T, d, p, mask, mode, ctx, ctxq, ldo, scratch);
        return;
    }
    amx_layout a = carve_amx(scratch, T, d);
    const layout *l = &a.l;
    pack_vnni(k, v, ld, T, d, l); /* V rows up to t4 = t64, zero past T */
    b8_amx_tilecfg cfg;
    b8_amx_tilecfg_16x64(&cfg);
    B8_AMX_BARRIER();
    _tile_loadconfig(&cfg);
    const float vs = p->v_scale / 255.0f;
    const __m512 vsc = _mm512_set1_ps(p->score_scale);
    float rs[RBA];
    for (int64_t i = 0; i < T; i += RBA) {
        const int rb = T - i >= RBA ? RBA : (int)(T - i);
        const int8_t *qb = q + i * ld;
        int64_t ldq = ld;
        if (rb < RBA) { /* a tail block: its rows copied, the rest zero, so no tile reads past T */
            memset(l->qu, 0, (size_t)(RBA * d));
            for (int r = 0; r < rb; r++) memcpy(l->qu + r * d, q + (i + r) * ld, (size_t)d);
            qb = (const int8_t *)l->qu;
            ldq = d;
        }
        scores_amx(qb, ldq, d, l, a.sc);
        /* The softmax RB rows at a time (a row alone is a chain of dependent steps). Without
         * relative positions it reads the int32 scores and scales them as it goes; with them the
         * scaled rows are stored first and the bias added. */
        if (p->rel)
            for (int r = 0; r < rb; r++) {
                float *srow = l->s + r * l->t16;
                for (int64_t j = 0; j < l->t16; j += 16)
                    _mm512_storeu_ps(srow + j, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_loadu_si512(a.sc + r * l->t16 + j)), vsc));
                b8_attention_add_rel(srow, T, p->rel, i + r);
            }
        const float *sf = p->rel ? l->s : NULL;
        const int32_t *si = p->rel ? NULL : a.sc;
        const float scale = p->rel ? 1.0f : p->score_scale;
        int r = 0;
        for (; r + RB <= rb; r += RB)
            softmax_u8_body(RB, sf ? sf + r * l->t16 : NULL, si ? si + r * l->t16 : NULL, scale, l->t16, T, l->t4, mask,
                            false, 0, vs, l->pu + r * l->t4, l->t4, rs + r);
        for (; r < rb; r++)
            softmax_u8_body(1, sf ? sf + r * l->t16 : NULL, si ? si + r * l->t16 : NULL, scale, 0, T, l->t4, mask,
                            false, 0, vs, l->pu + r * l->t4, 0, rs + r);
        if (rb < RBA) memset(l->pu + rb * l->t4, 0, (size_t)((RBA - rb) * l->t4));
        context_amx(l, d, a.cx);
        for (int r = 0; r < rb; r++) {
            const __m512 vr = _mm512_set1_ps(rs[r]);
            for (int64_t d0 = 0; d0 < d; d0 += 16) {
                const __m512 y = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_loadu_si512(a.cx + r * d + d0)), vr);
                store_ctx16(y, (__mmask16)0xFFFF, d0, p, ctx ? ctx + (i + r) * ldo : NULL,
                            ctxq ? ctxq + (i + r) * ldo : NULL);
            }
        }
    }
    _tile_release();
}

static const b8_impl attention_s8_impls[] = {
    {"attention_s8__amx", B8_ISA_AMX, (b8_fnptr)b8_attention_s8__amx},
    {"attention_s8__avx512vnni", B8_ISA_AVX512_VNNI, (b8_fnptr)b8_attention_s8__avx512vnni},
    {"attention_s8__avx2", B8_ISA_AVX2, (b8_fnptr)b8_attention_s8__avx2},
    {"attention_s8__scalar", B8_ISA_SCALAR, (b8_fnptr)b8_attention_s8__scalar},
};
b8_op_table b8_op_attention_s8 = {"attention_s8", attention_s8_impls, 4, -1};

b8_attention_s8_fn b8_attention_s8_best(void) { return (b8_attention_s8_fn)b8_dispatch(&b8_op_attention_s8)->fn; }

/* ---- Sliding windows (ModernBERT's local layers) ----
 *
 * Query i sees keys j with |i - j| <= w. A row's keys are taken from lo16, its window's first key
 * rounded down to a multiple of 16 (so key j stays in lane j % 16), to its window's last key; the
 * keys of that span outside the window count as masked. No score outside it is formed. A row
 * whose window keys are all masked (padding) attends over its window as if none were. The VNNI
 * kernel forms a block of rows' scores over the union of their spans (the extra keys are masked
 * for each row, and add exact zeros), so both twins agree bit for bit. */

size_t b8_attention_s8_window_scratch_bytes(int64_t T, int64_t d) {
    const int64_t t16 = round_up(T, 16);
    /* past the block kernels' scratch: window masks [RB][t16] int32, then probabilities [RB][t16]
     * (u8 here, int16 in the AVX2 kernel) */
    return b8_attention_s8_scratch_bytes(T, d) + (size_t)(RB * t16 * 6 + 128);
}

/* The window mask of row i over keys [c0, c0 + n): in the window and not masked (or, when none
 * of the window's keys is, in the window). The SIMD kernels form the same flags with their own
 * vectors (window_mask_vnni below, window_mask2 in attention_s8_avx2.c). */
static void window_mask(int64_t i, int64_t w, int64_t T, int64_t c0, int64_t n, const int32_t *mask, int32_t *wm) {
    const int64_t lo = i - w > 0 ? i - w : 0, hi = i + w < T - 1 ? i + w : T - 1;
    bool any = false;
    for (int64_t j = 0; j < n; j++) {
        const int64_t key = c0 + j;
        wm[j] = key >= lo && key <= hi && (!mask || mask[key]);
        any = any || wm[j];
    }
    if (!any)
        for (int64_t j = 0; j < n; j++) wm[j] = c0 + j >= lo && c0 + j <= hi;
}

void b8_attention_s8_window__scalar(const int8_t *q, const int8_t *k, const int8_t *v, int64_t ld, int64_t T,
                                    int64_t d, const b8_attn_s8_params *p, int64_t w, const int32_t *mask,
                                    float *ctx, int8_t *ctxq, int64_t ldo, void *scratch) {
    layout l = carve(scratch, T, d);
    pack(k, v, ld, T, d, &l);
    uint8_t *extra = (uint8_t *)scratch + b8_attention_s8_scratch_bytes(T, d);
    int32_t *wm = (int32_t *)(((uintptr_t)extra + 63) & ~(uintptr_t)63);
    uint8_t *pu = (uint8_t *)(wm + RB * l.t16);
    const float vs = p->v_scale / 255.0f;
    for (int64_t i = 0; i < T; i++) {
        const int64_t lo = i - w > 0 ? i - w : 0, hi = i + w < T - 1 ? i + w : T - 1;
        const int64_t c0 = lo / 16 * 16, n = hi - c0 + 1, n4 = round_up(n, 4);
        for (int64_t j = 0; j < n; j++) {
            int32_t acc = 0;
            for (int64_t kk = 0; kk < d; kk++)
                acc += (int32_t)(uint8_t)(q[i * ld + kk] + 128) * l.kp[((kk / 4) * l.t16 + c0 + j) * 4 + kk % 4];
            l.s[j] = (float)(acc - l.comp[c0 + j]) * p->score_scale;
        }
        window_mask(i, w, T, c0, n, mask, wm);
        const float rs = softmax_u8(l.s, n, n4, wm, vs, pu);
        for (int64_t dd = 0; dd < d; dd++) {
            int32_t acc = 0;
            for (int64_t j = 0; j < n4; j++) acc += (int32_t)pu[j] * l.vp[(((c0 + j) / 4) * d + dd) * 4 + (c0 + j) % 4];
            store_ctx((float)acc * rs, dd, p, ctx ? ctx + i * ldo : NULL, ctxq ? ctxq + i * ldo : NULL);
        }
    }
}

/* window_mask in AVX-512, 16 keys at a time (the same flags; n a multiple of 16): the
 * scalar loop, a compare and branch per key, took a third of this kernel's time at T = 2,048. */
VNNI static void window_mask_vnni(int64_t i, int64_t w, int64_t T, int64_t c0, int64_t n, const int32_t *mask,
                                  int32_t *wm) {
    const int64_t lo = i - w > 0 ? i - w : 0, hi = i + w < T - 1 ? i + w : T - 1;
    const __m512i vlo = _mm512_set1_epi32((int)(lo - c0)), vhi = _mm512_set1_epi32((int)(hi - c0));
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i one = _mm512_set1_epi32(1);
    __mmask16 any = 0;
    for (int64_t j = 0; j < n; j += 16) {
        const __m512i idx = _mm512_add_epi32(_mm512_set1_epi32((int)j), iota);
        const __mmask16 in = _mm512_cmpge_epi32_mask(idx, vlo) & _mm512_cmple_epi32_mask(idx, vhi);
        const __mmask16 m = mask ? _mm512_mask_cmpneq_epi32_mask(in, _mm512_maskz_loadu_epi32(in, mask + c0 + j),
                                                                 _mm512_setzero_si512())
                                 : in;
        any |= m;
        _mm512_storeu_si512(wm + j, _mm512_maskz_mov_epi32(m, one));
    }
    if (!any) /* every window key masked: the window alone */
        for (int64_t j = 0; j < n; j += 16) {
            const __m512i idx = _mm512_add_epi32(_mm512_set1_epi32((int)j), iota);
            const __mmask16 in = _mm512_cmpge_epi32_mask(idx, vlo) & _mm512_cmple_epi32_mask(idx, vhi);
            _mm512_storeu_si512(wm + j, _mm512_maskz_mov_epi32(in, one));
        }
}

VNNI void b8_attention_s8_window__avx512vnni(const int8_t *q, const int8_t *k, const int8_t *v, int64_t ld, int64_t T,
                                             int64_t d, const b8_attn_s8_params *p, int64_t w,
                                             const int32_t *mask, float *ctx, int8_t *ctxq, int64_t ldo,
                                             void *scratch) {
    layout l = carve(scratch, T, d);
    pack_vnni(k, v, ld, T, d, &l);
    uint8_t *extra = (uint8_t *)scratch + b8_attention_s8_scratch_bytes(T, d);
    int32_t *wm = (int32_t *)(((uintptr_t)extra + 63) & ~(uintptr_t)63);
    uint8_t *pu = (uint8_t *)(wm + RB * l.t16);
    const float vs = p->v_scale / 255.0f;
    const __m512 vsc = _mm512_set1_ps(p->score_scale);
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    int32_t tile[RB * 64] __attribute__((aligned(64)));
    float rs[RB];
    memset(l.qu, 0, (size_t)(RB * d));
    for (int64_t i = 0; i < T; i += RB) {
        const int rb = T - i >= RB ? RB : (int)(T - i);
        for (int r = 0; r < rb; r++)
            for (int64_t k0 = 0; k0 < d; k0 += 64) {
                const __mmask64 m = d - k0 >= 64 ? ~(__mmask64)0 : (((__mmask64)1 << (d - k0)) - 1);
                _mm512_mask_storeu_epi8(l.qu + r * d + k0, m,
                                        _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, q + (i + r) * ld + k0), flip));
            }
        /* the keys of the block's rows: [c0, c1), c0 a multiple of 16 */
        const int64_t blo = i - w > 0 ? i - w : 0, bhi = i + rb - 1 + w < T - 1 ? i + rb - 1 + w : T - 1;
        const int64_t c0 = blo / 16 * 16, c1 = round_up(bhi + 1, 16), n = c1 - c0;
        for (int64_t cc = c0; cc < c1; cc += 64) {
            const int nc = c1 - cc >= 64 ? 4 : (int)((c1 - cc) / 16);
            __mmask16 m[4];
            for (int c = 0; c < 4; c++) m[c] = c < nc ? (__mmask16)0xFFFF : (__mmask16)0;
            dot_4x(nc, l.qu, d, l.kp + cc * 4, l.t16 * 4, d / 4, m, tile);
            for (int c = 0; c < nc; c++) {
                const __m512i cm = _mm512_loadu_si512(l.comp + cc + 16 * c);
                for (int r = 0; r < rb; r++)
                    _mm512_storeu_ps(l.s + r * l.t16 + (cc - c0) + 16 * c,
                                     _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(
                                                       _mm512_load_si512(tile + r * 64 + 16 * c), cm)),
                                                   vsc));
            }
        }
        for (int r = 0; r < rb; r++) window_mask_vnni(i + r, w, T, c0, n, mask, wm + r * l.t16);
        if (rb == RB) softmax_u8_window_rows(l.s, l.t16, n, wm, vs, pu, rs);
        else
            for (int r = 0; r < rb; r++) rs[r] = softmax_u8_vnni(l.s + r * l.t16, n, n, wm + r * l.t16, vs, pu + r * l.t16);
        for (int r = rb; r < RB; r++) memset(pu + r * l.t16, 0, (size_t)n);
        /* context over the packed V groups the span covers (V is packed to t4 keys) */
        const int64_t ce = c1 < l.t4 ? c1 : l.t4, groups = (ce - c0) / 4;
        for (int64_t d0 = 0; d0 < d; d0 += 64) {
            __mmask16 m[4];
            for (int c = 0; c < 4; c++) m[c] = lanes_left(d - d0 - 16 * c);
            dot_4x(blocks_of(m), pu, l.t16, l.vp + (c0 * d + d0 * 4), d * 4, groups, m, tile);
            for (int r = 0; r < rb; r++) {
                const __m512 vr = _mm512_set1_ps(rs[r]);
                for (int c = 0; c < 4; c++) {
                    if (!m[c]) continue;
                    const __m512 y = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512(tile + r * 64 + 16 * c)), vr);
                    store_ctx16(y, m[c], d0 + 16 * c, p, ctx ? ctx + (i + r) * ldo : NULL,
                                ctxq ? ctxq + (i + r) * ldo : NULL);
                }
            }
        }
    }
}

b8_attention_s8_window_fn b8_attention_s8_window_best(void) {
    const b8_attention_s8_fn f = b8_attention_s8_best();
    return f == b8_attention_s8__avx512vnni || f == b8_attention_s8__amx ? b8_attention_s8_window__avx512vnni
           : f == b8_attention_s8__avx2                                     ? b8_attention_s8_window__avx2
                                                                            : NULL;
}
