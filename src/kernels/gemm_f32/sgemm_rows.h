/* sgemm_rows.h: the FP32 product of the task heads (pooler, classifier, QA and token heads),
 * one output at a time in an order fixed by K alone.
 *
 * Why not oneDNN here: its GEMM picks its kernel and blocking by M at run time (a GEMV for
 * one row on AVX2), so a sequence's logits changed in the last bits with the batch it was run
 * in: a server answered the same text differently alone and batched. Each output of this
 * kernel is the dot product of one A row with one W row, summed in eight lanes (lane l takes
 * k = l, l+8, ... with fused multiply-adds, a zero-padded tail) and the lanes added as
 * ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)); then + bias, the activation, + C when accumulating.
 * That order depends on neither M, nor the threads, nor the ISA: the AVX2 kernel and its
 * scalar twin give the same bits. The heads are a fraction of a percent of a forward pass. */
#ifndef BERT8_SGEMM_ROWS_H
#define BERT8_SGEMM_ROWS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/act.h"

/* C[i][j] for rows [0, m) and outputs [j0, j1): W is [n][k] row-major (ldw = k), bias [n]
 * (not NULL). */
typedef void (*b8_sgemm_rows_fn)(const float *a, int64_t lda, int64_t m, const float *w,
                                 const float *bias, int64_t k, b8_act post, bool acc, float *c,
                                 int64_t ldc, int64_t j0, int64_t j1);

void b8_sgemm_rows__avx2(const float *a, int64_t lda, int64_t m, const float *w, const float *bias,
                         int64_t k, b8_act post, bool acc, float *c, int64_t ldc, int64_t j0,
                         int64_t j1);
void b8_sgemm_rows__scalar(const float *a, int64_t lda, int64_t m, const float *w,
                           const float *bias, int64_t k, b8_act post, bool acc, float *c,
                           int64_t ldc, int64_t j0, int64_t j1);

/* The implementation the CPU (and BERT8_MAX_ISA) allows, best first. */
b8_sgemm_rows_fn b8_sgemm_rows_best(void);

#endif
