/* glu.h: the gated FFN's activation pass h = act(gate) * up (GTE's GeGLU, NomicBERT's SwiGLU),
 * AVX-512, AVX2 and a scalar twin with bit-identical results; the activations are those of
 * kernels/vmath (the INT8 epilogues' approximations, within 1e-6 of the exact functions). */
#ifndef BERT8_GLU_H
#define BERT8_GLU_H

#include "base/act.h"
#include "base/common.h"

/* For n rows: x [n][2I] (row stride ldx) holds the gate's I outputs then the up projection's;
 * h[r][i] = act(x[r][i]) * x[r][I + i] into h (row stride ldh). act: GELU, GELU_TANH, RELU,
 * SILU (any other passes the gate through). */
typedef void (*b8_glu_fn)(const float *x, int64_t ldx, int64_t n, int64_t I, b8_act act, float *h, int64_t ldh);

void b8_glu_rows__scalar(const float *x, int64_t ldx, int64_t n, int64_t I, b8_act act, float *h, int64_t ldh);
void b8_glu_rows__avx2(const float *x, int64_t ldx, int64_t n, int64_t I, b8_act act, float *h, int64_t ldh);
void b8_glu_rows__avx512(const float *x, int64_t ldx, int64_t n, int64_t I, b8_act act, float *h, int64_t ldh);

/* The implementation the dispatch table chooses (kernels/dispatch.h). */
b8_glu_fn b8_glu_rows_best(void);

#endif
