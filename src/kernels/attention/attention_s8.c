/* attention_s8.c: INT8 attention for one (sequence, head), an AVX512-VNNI kernel and its
 * bit-identical scalar twin.
 *
 *   scores[i][j] = ((q_i + 128) . k_j - 128 sum_k k_j[k]) * score_scale   int8 x int8 -> int32 (vpdpbusd)
 *   p            = softmax(masked scores)                                  fp32, the FP32 path's kernel
 *   p_u8[i][j]   = rne(p[i][j] * 255 / max_j p[i][j])                       a scale per query row
 *   ctx[i][d]    = (p_u8[i] . v[:, d]) * (max_j p[i][j] * v_scale / 255)   u8 x int8 -> int32
 *   out          = ctx (fp32), or rne(clamp(ctx * out_mul[d])) (int8)     the next GEMM's input
 *
 * Q, K and V arrive int8 (the QKV GEMM requantizes them with calibrated per-tensor scales,
 * score_scale = s_q s_k / sqrt(d), v_scale = s_v). Probabilities are quantized per row against
 * their own maximum, so a long row of small probabilities keeps its resolution. K is packed
 * once per call as [d/4][T16][4] (16 keys x 4 depths per vector, the vpdpbusd operand), V as
 * [T4/4][d][4]. Both twins compute the integer sums exactly and every float step in the same
 * order, so they agree bit for bit. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "base/cpu.h"
#include "kernels/attention/attention.h"
#include "kernels/dispatch.h"
#include "kernels/quantize/quantize.h"

#define RB 4 /* query rows per block */

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/* scratch: Kp [d][T16] bytes, comp [T16] int32, Vp [T4][d] bytes, scores [RB][T16] floats,
 * p_u8 [RB][T4] bytes, q_u8 [RB][d] bytes */
size_t b8_attention_s8_scratch_bytes(int64_t T, int64_t d) {
    const int64_t t16 = round_up(T, 16), t4 = round_up(T, 4);
    return (size_t)(d * t16 + 4 * t16 + t4 * d + 4 * RB * t16 + RB * t4 + RB * d + 256);
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

/* p_u8 of one softmax row (length T, padded with zeros to t4); returns the row's output scale. */
static float quantize_probs(const float *s, int64_t T, int64_t t4, float v_scale255, uint8_t *pu) {
    float pmax = 0.0f;
    for (int64_t j = 0; j < T; j++) pmax = s[j] > pmax ? s[j] : pmax;
    const float inv = pmax > 0.0f ? 255.0f / pmax : 0.0f;
    for (int64_t j = 0; j < T; j++) {
        float x = s[j] * inv;
        x = x < 255.0f ? x : 255.0f;
        pu[j] = (uint8_t)(int32_t)rintf(x);
    }
    for (int64_t j = T; j < t4; j++) pu[j] = 0;
    return pmax * v_scale255;
}

static inline void store_ctx(float y, int64_t dd, const b8_attn_s8_params *p, float *ctx, int8_t *ctxq) {
    if (ctxq) ctxq[dd] = b8_q8(y * p->out_mul[dd]);
    else ctx[dd] = y;
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
        b8_softmax_rows__scalar(l.s, 1, T, mask, mode);
        const float rs = quantize_probs(l.s, T, l.t4, vs, l.pu);
        for (int64_t dd = 0; dd < d; dd++) {
            int32_t acc = 0;
            for (int64_t j = 0; j < l.t4; j++) acc += (int32_t)l.pu[j] * l.vp[((j / 4) * d + dd) * 4 + j % 4];
            store_ctx((float)acc * rs, dd, p, ctx ? ctx + i * ldo : NULL, ctxq ? ctxq + i * ldo : NULL);
        }
    }
}

#define VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")))

VNNI static inline __mmask16 lanes_left(int64_t left) {
    return left >= 16 ? (__mmask16)0xFFFF : left <= 0 ? (__mmask16)0 : (__mmask16)((1u << left) - 1u);
}

/* Scores of rb query rows (q_u8 rows of d bytes) against all keys, into l->s (stride t16). */
VNNI static inline __attribute__((always_inline)) void scores_rows(const layout *l, const uint8_t *qu, int64_t d,
                                                                   float scale, int rb) {
    const __m512 vsc = _mm512_set1_ps(scale);
    for (int64_t c0 = 0; c0 < l->t16; c0 += 64) {
        const int nc = l->t16 - c0 >= 64 ? 4 : (int)((l->t16 - c0) / 16);
        __m512i acc[RB][4];
        for (int r = 0; r < rb; r++)
            for (int c = 0; c < 4; c++) acc[r][c] = _mm512_setzero_si512();
        for (int64_t g = 0; g < d / 4; g++) {
            const int8_t *kr = l->kp + (g * l->t16 + c0) * 4;
            __m512i k0 = _mm512_loadu_si512(kr), k1 = nc > 1 ? _mm512_loadu_si512(kr + 64) : k0,
                    k2 = nc > 2 ? _mm512_loadu_si512(kr + 128) : k0, k3 = nc > 3 ? _mm512_loadu_si512(kr + 192) : k0;
            for (int r = 0; r < rb; r++) {
                int32_t w;
                memcpy(&w, qu + r * d + 4 * g, 4);
                const __m512i qb = _mm512_set1_epi32(w);
                acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], qb, k0);
                acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], qb, k1);
                acc[r][2] = _mm512_dpbusd_epi32(acc[r][2], qb, k2);
                acc[r][3] = _mm512_dpbusd_epi32(acc[r][3], qb, k3);
            }
        }
        for (int c = 0; c < nc; c++) {
            const __m512i cm = _mm512_loadu_si512(l->comp + c0 + 16 * c);
            for (int r = 0; r < rb; r++)
                _mm512_storeu_ps(l->s + r * l->t16 + c0 + 16 * c,
                                 _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(acc[r][c], cm)), vsc));
        }
    }
}

/* ctx of rb rows from their p_u8 rows (stride t4) and row scales. */
VNNI static inline __attribute__((always_inline)) void context_rows(const layout *l, int64_t d,
                                                                    const float *rs, const b8_attn_s8_params *p,
                                                                    float *ctx, int8_t *ctxq, int64_t ldo, int rb) {
    for (int64_t d0 = 0; d0 < d; d0 += 64) {
        __mmask16 m[4];
        for (int c = 0; c < 4; c++) m[c] = lanes_left(d - d0 - 16 * c);
        __m512i acc[RB][4];
        for (int r = 0; r < rb; r++)
            for (int c = 0; c < 4; c++) acc[r][c] = _mm512_setzero_si512();
        for (int64_t g = 0; g < l->t4 / 4; g++) {
            const int8_t *vr = l->vp + (g * d + d0) * 4;
            __m512i v0 = _mm512_maskz_loadu_epi32(m[0], vr), v1 = _mm512_maskz_loadu_epi32(m[1], vr + 64),
                    v2 = _mm512_maskz_loadu_epi32(m[2], vr + 128), v3 = _mm512_maskz_loadu_epi32(m[3], vr + 192);
            for (int r = 0; r < rb; r++) {
                int32_t w;
                memcpy(&w, l->pu + r * l->t4 + 4 * g, 4);
                const __m512i pb = _mm512_set1_epi32(w);
                acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], pb, v0);
                acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], pb, v1);
                acc[r][2] = _mm512_dpbusd_epi32(acc[r][2], pb, v2);
                acc[r][3] = _mm512_dpbusd_epi32(acc[r][3], pb, v3);
            }
        }
        for (int r = 0; r < rb; r++) {
            const __m512 vr = _mm512_set1_ps(rs[r]);
            for (int c = 0; c < 4; c++) {
                if (!m[c]) continue;
                const __m512 y = _mm512_mul_ps(_mm512_cvtepi32_ps(acc[r][c]), vr);
                if (ctxq) {
                    /* the quantizers' rounding: clamp to [-127, 127] (NaN -> -127), round half even */
                    __m512 z = _mm512_mul_ps(y, _mm512_maskz_loadu_ps(m[c], p->out_mul + d0 + 16 * c));
                    z = _mm512_min_ps(_mm512_max_ps(z, _mm512_set1_ps(-127.0f)), _mm512_set1_ps(127.0f));
                    __m512i zi = _mm512_cvtps_epi32(z);
                    _mm_mask_storeu_epi8(ctxq + r * ldo + d0 + 16 * c, m[c], _mm512_cvtsepi32_epi8(zi));
                } else {
                    _mm512_mask_storeu_ps(ctx + r * ldo + d0 + 16 * c, m[c], y);
                }
            }
        }
    }
}

VNNI void b8_attention_s8__avx512vnni(const int8_t *q, const int8_t *k, const int8_t *v, int64_t ld, int64_t T,
                                      int64_t d, const b8_attn_s8_params *p, const int32_t *mask, b8_mask_mode mode,
                                      float *ctx, int8_t *ctxq, int64_t ldo, void *scratch) {
    layout l = carve(scratch, T, d);
    pack(k, v, ld, T, d, &l);
    const float vs = p->v_scale / 255.0f;
    float rs[RB];
    for (int64_t i = 0; i < T; i += RB) {
        const int rb = T - i >= RB ? RB : (int)(T - i);
        for (int r = 0; r < rb; r++)
            for (int64_t kk = 0; kk < d; kk++) l.qu[r * d + kk] = (uint8_t)(q[(i + r) * ld + kk] + 128);
        scores_rows(&l, l.qu, d, p->score_scale, rb);
        for (int r = 0; r < rb; r++) {
            b8_softmax_rows__avx512(l.s + r * l.t16, 1, T, mask, mode);
            rs[r] = quantize_probs(l.s + r * l.t16, T, l.t4, vs, l.pu + r * l.t4);
        }
        context_rows(&l, d, rs, p, ctx ? ctx + i * ldo : NULL, ctxq ? ctxq + i * ldo : NULL, ldo, rb);
    }
}

static const b8_impl attention_s8_impls[] = {
    {"attention_s8__avx512vnni", B8_ISA_AVX512_VNNI, (b8_fnptr)b8_attention_s8__avx512vnni},
    {"attention_s8__scalar", B8_ISA_SCALAR, (b8_fnptr)b8_attention_s8__scalar},
};
b8_op_table b8_op_attention_s8 = {"attention_s8", attention_s8_impls, 2, -1};

b8_attention_s8_fn b8_attention_s8_best(void) { return (b8_attention_s8_fn)b8_dispatch(&b8_op_attention_s8)->fn; }
