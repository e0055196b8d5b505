/* rotary.h: rotary position embeddings applied in place to Q and K (Llama's rotate_half form,
 * which GTE, NomicBERT and Jina v3 use), AVX-512, AVX2 and a scalar twin with bit-identical
 * results. */
#ifndef BERT8_ROTARY_H
#define BERT8_ROTARY_H

#include "base/common.h"

/* Rotates n rows of x (row stride ldx) in place: each row holds `heads` heads of d channels from
 * column 0 (Q and K side by side count as 2 x num_heads). Row r sits at position pos0 + r; cs
 * holds d floats per position: cos of the d/2 angles, then their sin. For j < d/2, with
 * a = x[j], b = x[j + d/2]: x[j] = a cos - b sin, x[j + d/2] = b cos + a sin, each as one
 * product rounded and one fused multiply-add (so the twins agree bit for bit). */
typedef void (*b8_rotary_fn)(float *x, int64_t ldx, int64_t n, int64_t heads, int64_t d, const float *cs,
                             int64_t pos0);

void b8_rotary_rows__scalar(float *x, int64_t ldx, int64_t n, int64_t heads, int64_t d, const float *cs,
                            int64_t pos0);
void b8_rotary_rows__avx2(float *x, int64_t ldx, int64_t n, int64_t heads, int64_t d, const float *cs,
                          int64_t pos0);
void b8_rotary_rows__avx512(float *x, int64_t ldx, int64_t n, int64_t heads, int64_t d, const float *cs,
                            int64_t pos0);

/* The implementation the dispatch table chooses (kernels/dispatch.h). */
b8_rotary_fn b8_rotary_rows_best(void);

/* The cos/sin table of positions 0..T-1 for head size d (even) and base theta, with
 * transformers' float steps: inv_freq[i] = 1 / theta^(2i / d), angle = position x inv_freq,
 * all in float. cs: [T][d]. */
void b8_rotary_table(float *cs, int64_t T, int64_t d, float theta);

#endif
