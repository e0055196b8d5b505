/* rel_dot.h: the products of disentangled attention (DeBERTa's c2p and p2c terms), Q (or K)
 * times the transposed window of a head's relative projections, AVX-512, AVX2 and a scalar twin
 * with bit-identical results.
 *
 * Each output is one chain of fused multiply-adds in k order, from +0:
 * c = fma(a[k-1], b[k-1], ... fma(a[1], b[1], fma(a[0], b[0], 0))). The SIMD kernels broadcast
 * a[i][k] and multiply it into vectors of outputs (an outer product over a register tile), so
 * that order depends on neither m, nor the tile, nor the thread count, nor the ISA: a sequence's
 * bias is the same bits packed or padded, on every CPU. Single-threaded: the caller runs it
 * inside its per-(sequence, head) loop. */
#ifndef BERT8_REL_DOT_H
#define BERT8_REL_DOT_H

#include "base/common.h"

/* c[i][j] = sum over t < k of a[i][t] * b[t][j], for i < m, j < n: a is [m][k] at row stride
 * lda, b is [k][n] at row stride ldb, c is [m][n] at row stride ldc (written, never read). */
typedef void (*b8_rel_dot_fn)(const float *a, int64_t lda, int64_t m, const float *b, int64_t ldb, int64_t k,
                              int64_t n, float *c, int64_t ldc);

void b8_rel_dot_4x64__avx512(const float *a, int64_t lda, int64_t m, const float *b, int64_t ldb, int64_t k,
                             int64_t n, float *c, int64_t ldc);
void b8_rel_dot_4x24__avx2(const float *a, int64_t lda, int64_t m, const float *b, int64_t ldb, int64_t k,
                           int64_t n, float *c, int64_t ldc);
void b8_rel_dot__scalar(const float *a, int64_t lda, int64_t m, const float *b, int64_t ldb, int64_t k, int64_t n,
                        float *c, int64_t ldc);

/* The implementation the dispatch table chooses (kernels/dispatch.h). */
b8_rel_dot_fn b8_rel_dot_best(void);

#endif
