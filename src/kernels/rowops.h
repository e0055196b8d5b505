/* rowops.h: row-wise FP32 kernels of the forward pass (masked softmax, LayerNorm), each with
 * an AVX-512 version and a scalar reference twin that computes bit-identical results. */
#ifndef BERT8_ROWOPS_H
#define BERT8_ROWOPS_H

#include "common.h"

typedef enum b8_mask_mode {
    B8_MASK_ADD_MIN,     /* BERT/XLM-R: score + (1 - mask) * FLT_MIN_NEG */
    B8_MASK_REPLACE_MIN  /* DistilBERT: masked scores set to FLT_MIN_NEG */
} b8_mask_mode;

/* For each of `rows` rows of length n: apply the key mask (mask[j] == 0 masks key j; NULL =
 * none) then softmax in place. */
typedef void (*b8_softmax_fn)(float *x, int64_t rows, int64_t n, const int32_t *mask,
                              b8_mask_mode mode);
/* y = (x - mean) / sqrt(var + eps) * g + b over rows of length n, in place (x == y allowed). */
typedef void (*b8_layernorm_fn)(const float *x, float *y, int64_t rows, int64_t n,
                                const float *g, const float *b, float eps);

void b8_softmax_rows__scalar(float *x, int64_t rows, int64_t n, const int32_t *mask,
                             b8_mask_mode mode);
void b8_softmax_rows__avx512(float *x, int64_t rows, int64_t n, const int32_t *mask,
                             b8_mask_mode mode);
void b8_layernorm_rows__scalar(const float *x, float *y, int64_t rows, int64_t n, const float *g,
                               const float *b, float eps);
void b8_layernorm_rows__avx512(const float *x, float *y, int64_t rows, int64_t n, const float *g,
                               const float *b, float eps);

/* The best versions this CPU (and BERT8_MAX_ISA) allows. */
b8_softmax_fn b8_softmax_rows_best(void);
b8_layernorm_fn b8_layernorm_rows_best(void);

/* The exp approximation both softmax twins share (relative error ~2e-7; 0 below -87.3). */
float b8_expf_approx(float x);


/* LayerNorm that also emits the int8 input of the next GEMM:
 *   y = (x - mean) * rstd * g + b                     (fp32, kept for the residual path)
 *   q = sat127(round_even((x - mean) * rstd * qg + qb)) (int8; qg = g / (s * scale) and
 *                                                       qb = b / (s * scale) fold SmoothQuant's
 *                                                       1/s and the static activation scale)
 * y may alias x. */
typedef void (*b8_layernorm_q_fn)(const float *x, float *y, int8_t *q, int64_t rows, int64_t n,
                                  const float *g, const float *b, const float *qg, const float *qb,
                                  float eps);
void b8_layernorm_q_rows__scalar(const float *x, float *y, int8_t *q, int64_t rows, int64_t n,
                                 const float *g, const float *b, const float *qg, const float *qb,
                                 float eps);
void b8_layernorm_q_rows__avx512(const float *x, float *y, int8_t *q, int64_t rows, int64_t n,
                                 const float *g, const float *b, const float *qg, const float *qb,
                                 float eps);
b8_layernorm_q_fn b8_layernorm_q_rows_best(void);

/* fp32 rows -> int8 input of an INT8 Linear, round to nearest even, saturated to [-127, 127].
 * static:  q = sat(rne(x[j] * mul[j]))          (mul = 1/(smooth * scale))
 * dynamic: scale[r] = max_j |x[j] * mul[j]| / 127 (mul = 1/smooth; 1 when the row is zero),
 *          q = sat(rne(x[j] * mul[j] / scale[r])) */
void b8_quantize_rows_static__scalar(const float *x, int64_t rows, int64_t n, const float *mul, int8_t *q);
void b8_quantize_rows_static__avx512(const float *x, int64_t rows, int64_t n, const float *mul, int8_t *q);
void b8_quantize_rows_dynamic__scalar(const float *x, int64_t rows, int64_t n, const float *mul, int8_t *q,
                                      float *scale);
void b8_quantize_rows_dynamic__avx512(const float *x, int64_t rows, int64_t n, const float *mul, int8_t *q,
                                      float *scale);
/* Best version, row-parallel over the pool. */
void b8_quantize_rows_static(const float *x, int64_t rows, int64_t n, const float *mul, int8_t *q);
void b8_quantize_rows_dynamic(const float *x, int64_t rows, int64_t n, const float *mul, int8_t *q, float *scale);

#endif
