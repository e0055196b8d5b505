/* attention.h: one pass of self-attention for one (sequence, head): scores = alpha Q K^T,
 * key mask, softmax, context = P V. An AVX-512 kernel and its bit-identical scalar twin.
 * Replaces three oneDNN calls and two round trips of the score matrix through memory. */
#ifndef BERT8_ATTENTION_H
#define BERT8_ATTENTION_H

#include "base/common.h"
#include "kernels/rowops/rowops.h"

/* Q, K, V are [T][d] with row stride ld (elements), ctx [T][d] with row stride ldo.
 * mask[j] == 0 masks key j (NULL: none). scratch holds b8_attention_scratch_floats(T, d). */
typedef void (*b8_attention_fn)(const float *q, const float *k, const float *v, int64_t ld, int64_t T,
                                int64_t d, float alpha, const int32_t *mask, b8_mask_mode mode, float *ctx,
                                int64_t ldo, float *scratch);

size_t b8_attention_scratch_floats(int64_t T, int64_t d);
void b8_attention_head__scalar(const float *q, const float *k, const float *v, int64_t ld, int64_t T, int64_t d,
                               float alpha, const int32_t *mask, b8_mask_mode mode, float *ctx, int64_t ldo,
                               float *scratch);
void b8_attention_head__avx512(const float *q, const float *k, const float *v, int64_t ld, int64_t T, int64_t d,
                               float alpha, const int32_t *mask, b8_mask_mode mode, float *ctx, int64_t ldo,
                               float *scratch);
b8_attention_fn b8_attention_head_best(void);

#endif
