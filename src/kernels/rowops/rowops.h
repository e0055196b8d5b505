/* rowops.h: row-wise FP32 kernels of the forward pass (masked softmax, LayerNorm), each with
 * AVX-512 and AVX2 versions and a scalar reference twin that computes bit-identical results. */
#ifndef BERT8_ROWOPS_H
#define BERT8_ROWOPS_H

#include "base/common.h"

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
void b8_softmax_rows__avx2(float *x, int64_t rows, int64_t n, const int32_t *mask, b8_mask_mode mode);
void b8_layernorm_rows__avx2(const float *x, float *y, int64_t rows, int64_t n, const float *g, const float *b,
                             float eps);
void b8_layernorm_rows__scalar(const float *x, float *y, int64_t rows, int64_t n, const float *g,
                               const float *b, float eps);
void b8_layernorm_rows__avx512(const float *x, float *y, int64_t rows, int64_t n, const float *g,
                               const float *b, float eps);

/* The LayerNorm the dispatch table chooses (kernels/dispatch.h). The softmax twins serve the
 * attention kernels and the tests. */
b8_layernorm_fn b8_layernorm_rows_best(void);

/* The exp approximation both softmax twins share (relative error ~2e-7; 0 below -87.3). */
float b8_expf_approx(float x);


#endif
