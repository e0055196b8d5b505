/* sgemm.h: the FP32 matrix products of the forward pass (Linear layers and task heads), on
 * oneDNN's matmul. This path is the baseline every INT8 speedup is measured against.
 *
 * Each packed weight owns exactly one oneDNN primitive, created when it is packed, whose M and
 * row strides are given at run time: a packed weight is immutable afterwards, any number of
 * threads may use it at once, and memory does not grow with the number of distinct batch
 * shapes a long-running process sees. */
#ifndef BERT8_SGEMM_H
#define BERT8_SGEMM_H

#include "base/act.h"
#include "base/common.h"

/* A Linear layer's weight W [N][K] (out x in) and bias [N], in oneDNN's layout, with its
 * epilogue: C = post(A W^T + bias), plus C's previous contents when accumulate is set. */
typedef struct b8_sgemm_w b8_sgemm_w;

/* bias may be NULL (zeros). */
bert8_status b8_sgemm_w_pack(const float *w, const float *bias, int64_t n, int64_t k, b8_act post,
                             bool accumulate, b8_sgemm_w **out, b8_err *e);
/* A task head's weight (pooler, classifiers, QA and token heads): run by sgemm_rows.h's kernel,
 * whose every output is summed in an order fixed by K alone, so that a sequence's head output
 * is the same bits whatever batch it runs in, on every thread count and ISA level. */
bert8_status b8_sgemm_w_pack_head(const float *w, const float *bias, int64_t n, int64_t k, b8_act post,
                                  b8_sgemm_w **out, b8_err *e);
void b8_sgemm_w_free(b8_sgemm_w *w); /* NULL is a no-op */

/* C [m][ldc] = the weight's epilogue of A [m][lda] x W^T. m may be 0. Thread-safe. */
bert8_status b8_sgemm(const b8_sgemm_w *w, const float *a, int64_t lda, int64_t m, float *c,
                      int64_t ldc, b8_err *e);

/* Caps the ISA oneDNN's own kernels may use to bert8's level (BERT8_MAX_ISA), so that a capped
 * run really runs capped code; called before the first primitive is made. */
void b8_sgemm_apply_isa_cap(void);

#endif
