/* sgemm.h: the FP32 matrix products of the forward pass, on oneDNN's matmul with weights
 * prepacked once at load. This path is the baseline every INT8 speedup is measured against. */
#ifndef BERT8_SGEMM_H
#define BERT8_SGEMM_H

#include "base/common.h"

typedef enum b8_post {
    B8_POST_NONE,
    B8_POST_GELU,      /* exact erf GELU */
    B8_POST_GELU_TANH, /* tanh approximation (gelu_new) */
    B8_POST_RELU,
    B8_POST_TANH
} b8_post;

/* A Linear layer's weight W [N][K] (out x in) and bias [N], packed into oneDNN's blocked layout. */
typedef struct b8_sgemm_w b8_sgemm_w;

bert8_status b8_sgemm_w_pack(const float *w, const float *bias, int64_t n, int64_t k,
                             b8_sgemm_w **out, b8_err *e);
void b8_sgemm_w_free(b8_sgemm_w *w);
int64_t b8_sgemm_w_n(const b8_sgemm_w *w);
int64_t b8_sgemm_w_k(const b8_sgemm_w *w);

/* C[m][n] = post(sum_k A[m][k] W[n][k] + bias[n]) (+ C[m][n] before the call when accumulate).
 * A is M x K with row stride lda, C is M x N with row stride ldc. Thread-safe. */
bert8_status b8_sgemm(const b8_sgemm_w *w, const float *a, int64_t lda, int64_t m, float *c,
                      int64_t ldc, b8_post post, bool accumulate, b8_err *e);

#endif
