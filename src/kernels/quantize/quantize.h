/* quantize.h: fp32 -> int8 activation quantizers of the INT8 path (SmoothQuant), each with
 * AVX-512, AVX2 and scalar twins that give bit-identical results.
 *
 * Every int8 value is q = rne(clamp(v, -127, 127)): symmetric range [-127, 127], round half
 * to even, NaN -> -127 (x86 max/min semantics, the same in every twin).
 *
 *   static:  v = x[j] * mul[j] (mul NULL: v = x[j]), then v * inv_scale     one scale
 *   dynamic: v = x[j] * mul[j] (or x[j]); s = max_j |v| / 127 (1 when the row is all zero);
 *            q = rne(clamp(v * (1 / s))); row_scale[r] = s                     per row
 *   dynamic with a zero point (asymmetric, for one-sided rows such as a GELU output):
 *            v as above; lo = min(0, min_j v), hi = max(0, max_j v) (NaN skipped);
 *            s = (hi - lo) / 254, z = clamp(rne(-127 - lo * (1 / s)), -127, 127) (s = 1, z = 0
 *            when lo = hi = 0); q = rne(clamp(fma(v, 1 / s, z))), so x ~ s * (q - z);
 *            row_scale[r] = s, row_zero[r] = z                               per row
 *   LayerNorm -> int8 (static): mean and variance in float by two passes (16 lane sums, lane
 *            j % 16, lanes added 0..15 in order), rstd = 1 / sqrt(var + eps),
 *            d = (x - mean) * rstd; q = rne(clamp(fma(d, qg[j], qb[j]))), where qg/qb already
 *            fold 1/(smooth * scale); optionally also y = fma(d, g[j], b[j]) in fp32 (the
 *            residual path).
 *
 * mul folds SmoothQuant's 1/s per channel (and may also fold 1/scale, with inv_scale = 1).
 * The public entry points pick the best twin the CPU (and BERT8_MAX_ISA) allows and split rows
 * over the OpenMP pool. Rows have strides (ldx, ldq, ldy) in elements. */
#ifndef BERT8_QUANTIZE_H
#define BERT8_QUANTIZE_H

#include "base/common.h"

typedef struct b8_ln_quant {
    const float *qg, *qb; /* [n] gamma and beta with 1/(smooth * scale) folded in */
    const float *g, *b;   /* [n] plain gamma and beta for the fp32 output, or NULL */
    float *y;             /* fp32 LayerNorm output [rows][ldy], or NULL (needs g and b) */
    int64_t ldy;
    float eps;
} b8_ln_quant;

/* q = sat127(rne(fma(x * mul, inv_scale, zero))): zero is the zero point (an integer; 0 symmetric) */
void b8_quantize_static(const float *x, int64_t ldx, int64_t rows, int64_t n, const float *mul,
                        float inv_scale, float zero, int8_t *q, int64_t ldq);
void b8_quantize_dynamic(const float *x, int64_t ldx, int64_t rows, int64_t n, const float *mul,
                         int8_t *q, int64_t ldq, float *row_scale);
void b8_quantize_dynamic_zp(const float *x, int64_t ldx, int64_t rows, int64_t n, const float *mul,
                            int8_t *q, int64_t ldq, float *row_scale, int32_t *row_zero);
void b8_layernorm_quantize(const float *x, int64_t ldx, int64_t rows, int64_t n,
                           const b8_ln_quant *p, int8_t *q, int64_t ldq);
/* LayerNorm in place (x = fma((x - mean) * rstd, g, b), rowops' twins), then the dynamic
 * quantizer on the same row while it is in L1: q and row_scale equal b8_quantize_dynamic of the
 * normalised rows bit for bit, one pass over memory instead of two. */
void b8_layernorm_quantize_dynamic(float *x, int64_t ldx, int64_t rows, int64_t n, const float *g,
                                   const float *b, float eps, const float *mul, int8_t *q,
                                   int64_t ldq, float *row_scale);

/* The twins, one row range each, for tests and for callers that do their own threading. */
typedef void (*b8_quantize_static_fn)(const float *x, int64_t ldx, int64_t rows, int64_t n,
                                      const float *mul, float inv_scale, float zero, int8_t *q,
                                      int64_t ldq);
typedef void (*b8_quantize_dynamic_fn)(const float *x, int64_t ldx, int64_t rows, int64_t n,
                                       const float *mul, int8_t *q, int64_t ldq,
                                       float *row_scale);
typedef void (*b8_quantize_dynamic_zp_fn)(const float *x, int64_t ldx, int64_t rows, int64_t n,
                                          const float *mul, int8_t *q, int64_t ldq,
                                          float *row_scale, int32_t *row_zero);
typedef void (*b8_layernorm_quantize_fn)(const float *x, int64_t ldx, int64_t rows, int64_t n,
                                         const b8_ln_quant *p, int8_t *q, int64_t ldq);

#define B8_QUANT_TWINS(isa)                                                                    \
    void b8_quantize_static__##isa(const float *x, int64_t ldx, int64_t rows, int64_t n,      \
                                   const float *mul, float inv_scale, float zero, int8_t *q,   \
                                   int64_t ldq);                                              \
    void b8_quantize_dynamic__##isa(const float *x, int64_t ldx, int64_t rows, int64_t n,     \
                                    const float *mul, int8_t *q, int64_t ldq,                 \
                                    float *row_scale);                                        \
    void b8_quantize_dynamic_zp__##isa(const float *x, int64_t ldx, int64_t rows, int64_t n,  \
                                       const float *mul, int8_t *q, int64_t ldq,              \
                                       float *row_scale, int32_t *row_zero);                  \
    void b8_layernorm_quantize__##isa(const float *x, int64_t ldx, int64_t rows, int64_t n,   \
                                      const b8_ln_quant *p, int8_t *q, int64_t ldq);
B8_QUANT_TWINS(scalar)
B8_QUANT_TWINS(avx2)
B8_QUANT_TWINS(avx512)
#undef B8_QUANT_TWINS

/* The twins the dispatch table chooses, for callers that run their own rows (no threading). */
b8_quantize_dynamic_fn b8_quantize_dynamic_best(void);
b8_quantize_dynamic_zp_fn b8_quantize_dynamic_zp_best(void);
b8_layernorm_quantize_fn b8_layernorm_quantize_best(void);

/* The one fp32 -> int8 rounding of the library (weights and activations): clamp to
 * [-127, 127] (NaN -> -127, as maxps), then round half to even. */
static inline int8_t b8_q8(float v) {
    v = v > -127.0f ? v : -127.0f;
    v = v < 127.0f ? v : 127.0f;
    return (int8_t)(int32_t)__builtin_rintf(v);
}

/* The scale, its inverse and the zero point of an asymmetric row from its range lo <= 0 <= hi
 * (shared by every twin: plain C after the vector min/max reduction). */
static inline void b8_qzp_params(float lo, float hi, float *s, float *inv, float *z) {
    const float range = hi - lo;
    if (!(range > 0.0f)) {
        *s = 1.0f;
        *inv = 1.0f;
        *z = 0.0f;
        return;
    }
    *s = range / 254.0f;
    *inv = 1.0f / *s;
    *z = (float)b8_q8(-127.0f - lo * *inv);
}

/* Lane count of the shared summation order. */
#define B8_QUANT_LANES 16

#endif
