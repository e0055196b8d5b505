/* quantize.c: the scalar twins of the activation quantizers (the oracle for the SIMD ones) and
 * the dispatching, row-parallel entry points. */
#include "kernels/quantize/quantize.h"

#include <math.h>

#include "base/cpu.h"
#include "base/pool.h"
#include "kernels/dispatch.h"
#include "kernels/rowops/rowops.h"

#define LANES B8_QUANT_LANES

void b8_quantize_static__scalar(const float *x, int64_t ldx, int64_t rows, int64_t n,
                                const float *mul, float inv_scale, float zero, int8_t *q, int64_t ldq) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < n; j++) {
            float v = x[r * ldx + j];
            if (mul) v = v * mul[j];
            q[r * ldq + j] = b8_q8(fmaf(v, inv_scale, zero));
        }
}

void b8_quantize_dynamic__scalar(const float *x, int64_t ldx, int64_t rows, int64_t n,
                                 const float *mul, int8_t *q, int64_t ldq, float *row_scale) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * ldx;
        float amax = 0.0f;
        for (int64_t j = 0; j < n; j++) {
            float v = fabsf(mul ? xr[j] * mul[j] : xr[j]);
            amax = v > amax ? v : amax;
        }
        float s = amax > 0.0f ? amax / 127.0f : 1.0f, inv = 1.0f / s;
        row_scale[r] = s;
        for (int64_t j = 0; j < n; j++) {
            float v = mul ? xr[j] * mul[j] : xr[j];
            q[r * ldq + j] = b8_q8(v * inv);
        }
    }
}

void b8_quantize_dynamic_zp__scalar(const float *x, int64_t ldx, int64_t rows, int64_t n,
                                    const float *mul, int8_t *q, int64_t ldq, float *row_scale,
                                    int32_t *row_zero) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * ldx;
        float lo = 0.0f, hi = 0.0f;
        for (int64_t j = 0; j < n; j++) {
            float v = mul ? xr[j] * mul[j] : xr[j];
            lo = v < lo ? v : lo; /* NaN keeps lo and hi, as minps/maxps with v first */
            hi = v > hi ? v : hi;
        }
        float s, inv, z;
        b8_qzp_params(lo, hi, &s, &inv, &z);
        row_scale[r] = s;
        row_zero[r] = (int32_t)z;
        for (int64_t j = 0; j < n; j++) {
            float v = mul ? xr[j] * mul[j] : xr[j];
            q[r * ldq + j] = b8_q8(fmaf(v, inv, z));
        }
    }
}

/* Mean and rstd in the shared order: lane j % 16, a lane past the row end adds 0 (as the
 * masked SIMD loads do), lanes summed 0..15. */
static void ln_stats(const float *xr, int64_t n, float eps, float *mean_out, float *rstd_out) {
    float acc[LANES] = {0};
    for (int64_t j0 = 0; j0 < n; j0 += LANES)
        for (int l = 0; l < LANES; l++) acc[l] += j0 + l < n ? xr[j0 + l] : 0.0f;
    float sum = acc[0];
    for (int l = 1; l < LANES; l++) sum += acc[l];
    float mean = sum / (float)n;
    float acc2[LANES] = {0};
    for (int64_t j0 = 0; j0 < n; j0 += LANES)
        for (int l = 0; l < LANES; l++) {
            float d = j0 + l < n ? xr[j0 + l] - mean : 0.0f;
            acc2[l] = fmaf(d, d, acc2[l]);
        }
    float var = acc2[0];
    for (int l = 1; l < LANES; l++) var += acc2[l];
    *mean_out = mean;
    *rstd_out = 1.0f / sqrtf(var / (float)n + eps);
}

void b8_layernorm_quantize__scalar(const float *x, int64_t ldx, int64_t rows, int64_t n,
                                   const b8_ln_quant *p, int8_t *q, int64_t ldq) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * ldx;
        float mean, rstd;
        ln_stats(xr, n, p->eps, &mean, &rstd);
        for (int64_t j = 0; j < n; j++) {
            float d = (xr[j] - mean) * rstd;
            q[r * ldq + j] = b8_q8(fmaf(d, p->qg[j], p->qb[j]));
            if (p->y) p->y[r * p->ldy + j] = fmaf(d, p->g[j], p->b[j]);
        }
    }
}

/* ---- dispatch ---- */

/* Rows below this many elements in total run on the calling thread. */
#define PAR_ELEMS (1 << 16)

/* Rows per call of a twin: they interleave the rows of a call (up to 4 at a time). */
#define ROW_BLOCK 8

#define QUANT_TABLE(op, fn)                                                                    \
    static const b8_impl fn##_impls[] = {                                                      \
        {#fn "__avx512", B8_ISA_AVX512, (b8_fnptr)b8_##fn##__avx512},                          \
        {#fn "__avx2", B8_ISA_AVX2, (b8_fnptr)b8_##fn##__avx2},                                \
        {#fn "__scalar", B8_ISA_SCALAR, (b8_fnptr)b8_##fn##__scalar},                          \
    };                                                                                         \
    b8_op_table b8_op_##fn = {op, fn##_impls, 3, -1};
QUANT_TABLE("quantize_static", quantize_static)
QUANT_TABLE("quantize_dynamic", quantize_dynamic)
QUANT_TABLE("layernorm_quantize", layernorm_quantize)
QUANT_TABLE("quantize_dynamic_zp", quantize_dynamic_zp)
#undef QUANT_TABLE

b8_quantize_dynamic_fn b8_quantize_dynamic_best(void) {
    return (b8_quantize_dynamic_fn)b8_dispatch(&b8_op_quantize_dynamic)->fn;
}

b8_quantize_dynamic_zp_fn b8_quantize_dynamic_zp_best(void) {
    return (b8_quantize_dynamic_zp_fn)b8_dispatch(&b8_op_quantize_dynamic_zp)->fn;
}

b8_layernorm_quantize_fn b8_layernorm_quantize_best(void) {
    return (b8_layernorm_quantize_fn)b8_dispatch(&b8_op_layernorm_quantize)->fn;
}

/* The entry points below run their rows on the pool in blocks of ROW_BLOCK (every row is
 * computed alone, so the split changes nothing in the result). */
typedef struct qjob {
    const float *x;
    float *xw; /* layernorm_quantize_dynamic: x, normalized in place */
    int64_t ldx, n, ldq;
    const float *mul;
    float inv_scale, zero;
    int8_t *q;
    float *row_scale;
    int32_t *row_zero;
    const b8_ln_quant *lnq;
    const float *g, *b;
    float eps;
} qjob;

static void static_rows(void *ctx, int64_t r0, int64_t r1, int slot) {
    (void)slot;
    const qjob *j = ctx;
    b8_quantize_static_fn f = (b8_quantize_static_fn)b8_dispatch(&b8_op_quantize_static)->fn;
    f(j->x + r0 * j->ldx, j->ldx, r1 - r0, j->n, j->mul, j->inv_scale, j->zero, j->q + r0 * j->ldq, j->ldq);
}

void b8_quantize_static(const float *x, int64_t ldx, int64_t rows, int64_t n, const float *mul,
                        float inv_scale, float zero, int8_t *q, int64_t ldq) {
    qjob j = {.x = x, .ldx = ldx, .n = n, .ldq = ldq, .mul = mul, .inv_scale = inv_scale, .zero = zero, .q = q};
    b8_par_for(rows, ROW_BLOCK, b8_par_threads_for(rows * n, PAR_ELEMS), static_rows, &j);
}

static void dynamic_rows(void *ctx, int64_t r0, int64_t r1, int slot) {
    (void)slot;
    const qjob *j = ctx;
    b8_quantize_dynamic_fn f = (b8_quantize_dynamic_fn)b8_dispatch(&b8_op_quantize_dynamic)->fn;
    f(j->x + r0 * j->ldx, j->ldx, r1 - r0, j->n, j->mul, j->q + r0 * j->ldq, j->ldq, j->row_scale + r0);
}

void b8_quantize_dynamic(const float *x, int64_t ldx, int64_t rows, int64_t n, const float *mul,
                         int8_t *q, int64_t ldq, float *row_scale) {
    qjob j = {.x = x, .ldx = ldx, .n = n, .ldq = ldq, .mul = mul, .q = q, .row_scale = row_scale};
    b8_par_for(rows, ROW_BLOCK, b8_par_threads_for(rows * n, PAR_ELEMS), dynamic_rows, &j);
}

static void dynamic_zp_rows(void *ctx, int64_t r0, int64_t r1, int slot) {
    (void)slot;
    const qjob *j = ctx;
    b8_quantize_dynamic_zp_fn f = b8_quantize_dynamic_zp_best();
    f(j->x + r0 * j->ldx, j->ldx, r1 - r0, j->n, j->mul, j->q + r0 * j->ldq, j->ldq, j->row_scale + r0,
      j->row_zero + r0);
}

void b8_quantize_dynamic_zp(const float *x, int64_t ldx, int64_t rows, int64_t n, const float *mul,
                            int8_t *q, int64_t ldq, float *row_scale, int32_t *row_zero) {
    qjob j = {.x = x, .ldx = ldx, .n = n, .ldq = ldq, .mul = mul, .q = q, .row_scale = row_scale,
              .row_zero = row_zero};
    b8_par_for(rows, ROW_BLOCK, b8_par_threads_for(rows * n, PAR_ELEMS), dynamic_zp_rows, &j);
}

static void ln_quant_rows(void *ctx, int64_t r0, int64_t r1, int slot) {
    (void)slot;
    const qjob *j = ctx;
    b8_layernorm_quantize_fn f = (b8_layernorm_quantize_fn)b8_dispatch(&b8_op_layernorm_quantize)->fn;
    b8_ln_quant pr = *j->lnq;
    if (pr.y) pr.y += r0 * pr.ldy;
    f(j->x + r0 * j->ldx, j->ldx, r1 - r0, j->n, &pr, j->q + r0 * j->ldq, j->ldq);
}

void b8_layernorm_quantize(const float *x, int64_t ldx, int64_t rows, int64_t n,
                           const b8_ln_quant *p, int8_t *q, int64_t ldq) {
    qjob j = {.x = x, .ldx = ldx, .n = n, .ldq = ldq, .q = q, .lnq = p};
    b8_par_for(rows, ROW_BLOCK, b8_par_threads_for(rows * n, PAR_ELEMS), ln_quant_rows, &j);
}

static void ln_dynamic_rows(void *ctx, int64_t r0, int64_t r1, int slot) {
    (void)slot;
    const qjob *j = ctx;
    b8_layernorm_fn ln = b8_layernorm_rows_best();
    b8_quantize_dynamic_fn f = (b8_quantize_dynamic_fn)b8_dispatch(&b8_op_quantize_dynamic)->fn;
    for (int64_t r = r0; r < r1; r++) { /* ldx may differ from n: the LayerNorm takes one row */
        ln(j->xw + r * j->ldx, j->xw + r * j->ldx, 1, j->n, j->g, j->b, j->eps);
        f(j->xw + r * j->ldx, j->ldx, 1, j->n, j->mul, j->q + r * j->ldq, j->ldq, j->row_scale + r);
    }
}

void b8_layernorm_quantize_dynamic(float *x, int64_t ldx, int64_t rows, int64_t n, const float *g,
                                   const float *b, float eps, const float *mul, int8_t *q,
                                   int64_t ldq, float *row_scale) {
    qjob j = {.xw = x, .ldx = ldx, .n = n, .ldq = ldq, .mul = mul, .q = q, .row_scale = row_scale,
              .g = g, .b = b, .eps = eps};
    b8_par_for(rows, ROW_BLOCK, b8_par_threads_for(rows * n, PAR_ELEMS), ln_dynamic_rows, &j);
}
