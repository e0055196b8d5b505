/* attention.h: one pass of self-attention for one (sequence, head): scores = alpha Q K^T,
 * key mask, softmax, context = P V. An AVX-512 kernel and its bit-identical scalar twin.
 * Replaces three oneDNN calls and two round trips of the score matrix through memory. */
#ifndef BERT8_ATTENTION_H
#define BERT8_ATTENTION_H

#include "base/common.h"
#include "kernels/rowops/rowops.h"

/* Q, K, V are [T][d] with row stride ld (elements), ctx [T][d] with row stride ldo.
 * mask[j] == 0 masks key j (NULL: none). rel (NULL: none) is a relative-position bias of 2T - 1
 * floats: score[i][j] = alpha q_i.k_j + rel[T - 1 + j - i], before the mask and the softmax
 * (MPNet). bias (NULL: none) is a bias per score, [T][T]: score[i][j] += bias[i T + j] after rel
 * (DeBERTa's disentangled terms). scratch holds b8_attention_scratch_floats(T, d). */
typedef void (*b8_attention_fn)(const float *q, const float *k, const float *v, int64_t ld, int64_t T,
                                int64_t d, float alpha, const int32_t *mask, b8_mask_mode mode, const float *rel,
                                const float *bias, float *ctx, int64_t ldo, float *scratch);

size_t b8_attention_scratch_floats(int64_t T, int64_t d);
void b8_attention_head__scalar(const float *q, const float *k, const float *v, int64_t ld, int64_t T, int64_t d,
                               float alpha, const int32_t *mask, b8_mask_mode mode, const float *rel, const float *bias,
                               float *ctx, int64_t ldo, float *scratch);
void b8_attention_head__avx512(const float *q, const float *k, const float *v, int64_t ld, int64_t T, int64_t d,
                               float alpha, const int32_t *mask, b8_mask_mode mode, const float *rel, const float *bias,
                               float *ctx, int64_t ldo, float *scratch);
void b8_attention_head__avx2(const float *q, const float *k, const float *v, int64_t ld, int64_t T, int64_t d,
                             float alpha, const int32_t *mask, b8_mask_mode mode, const float *rel, const float *bias,
                             float *ctx, int64_t ldo, float *scratch);
b8_attention_fn b8_attention_head_best(void);

/* Sliding-window attention (ModernBERT's local layers): query i attends to keys j with
 * |i - j| <= w only; the scores outside the window are never formed. Arguments as
 * b8_attention_fn's (no relative bias); scratch holds b8_attention_scratch_floats(T, d). */
typedef void (*b8_attention_window_fn)(const float *q, const float *k, const float *v, int64_t ld, int64_t T,
                                       int64_t d, float alpha, int64_t w, const int32_t *mask, b8_mask_mode mode,
                                       float *ctx, int64_t ldo, float *scratch);
void b8_attention_window__scalar(const float *q, const float *k, const float *v, int64_t ld, int64_t T, int64_t d,
                                 float alpha, int64_t w, const int32_t *mask, b8_mask_mode mode, float *ctx,
                                 int64_t ldo, float *scratch);
/* AVX-512 and AVX2, bit-identical to the scalar twin; scratch holds b8_attention_scratch_floats(T, d). */
void b8_attention_window__avx512(const float *q, const float *k, const float *v, int64_t ld, int64_t T,
                                 int64_t d, float alpha, int64_t w, const int32_t *mask, b8_mask_mode mode,
                                 float *ctx, int64_t ldo, float *scratch);
void b8_attention_window__avx2(const float *q, const float *k, const float *v, int64_t ld, int64_t T, int64_t d,
                               float alpha, int64_t w, const int32_t *mask, b8_mask_mode mode, float *ctx, int64_t ldo,
                               float *scratch);
/* The twin of the attention kernel the dispatcher runs (AVX-512, AVX2, else the scalar one). */
b8_attention_window_fn b8_attention_window_best(void);

/* ---- INT8 attention (attention_s8.c) ---- */

typedef struct b8_attn_s8_params {
    float score_scale;    /* s_q s_k / sqrt(d): int32 scores -> fp32 */
    float v_scale;        /* s_v (per tensor; 1 when V has a scale per channel, see ch_mul) */
    const float *out_mul; /* [d]: with an int8 output, its multipliers (the next GEMM's in_mul,
                             times V's channel scales when it has them) */
    const float *ch_mul;  /* [d] or NULL: with an fp32 output, V's scale per channel */
    const float *rel;     /* 2T - 1 floats or NULL: the relative-position bias added to the fp32
                             scores, score[i][j] += rel[T - 1 + j - i] (see b8_attention_fn) */
} b8_attn_s8_params;

/* Adds row i's relative-position bias to its T scores (every kernel's one way of doing it, so
 * the twins agree). */
static inline void b8_attention_add_rel(float *s, int64_t T, const float *rel, int64_t i) {
    const float *b = rel + (T - 1 - i);
    for (int64_t j = 0; j < T; j++) s[j] += b[j];
}

/* Adds row i's bias row (b8_attention_fn's bias, [T][T]) to its T scores. */
static inline void b8_attention_add_bias(float *s, int64_t T, const float *bias, int64_t i) {
    const float *b = bias + i * T;
    for (int64_t j = 0; j < T; j++) s[j] += b[j];
}

/* Q, K, V int8 [T][d] with row stride ld (bytes); the context goes to ctx (fp32) or, when ctxq
 * is not NULL, to ctxq (int8, requantized with out_mul), row stride ldo. d must be a multiple
 * of 4. scratch holds b8_attention_s8_scratch_bytes(T, d), 64-byte aligned. */
typedef void (*b8_attention_s8_fn)(const int8_t *q, const int8_t *k, const int8_t *v, int64_t ld, int64_t T, int64_t d,
                                   const b8_attn_s8_params *p, const int32_t *mask, b8_mask_mode mode, float *ctx,
                                   int8_t *ctxq, int64_t ldo, void *scratch);
size_t b8_attention_s8_scratch_bytes(int64_t T, int64_t d);
void b8_attention_s8__scalar(const int8_t *q, const int8_t *k, const int8_t *v, int64_t ld, int64_t T, int64_t d,
                             const b8_attn_s8_params *p, const int32_t *mask, b8_mask_mode mode, float *ctx,
                             int8_t *ctxq, int64_t ldo, void *scratch);
void b8_attention_s8__avx512vnni(const int8_t *q, const int8_t *k, const int8_t *v, int64_t ld, int64_t T, int64_t d,
                                 const b8_attn_s8_params *p, const int32_t *mask, b8_mask_mode mode, float *ctx,
                                 int8_t *ctxq, int64_t ldo, void *scratch);
/* AVX2 (attention_s8_avx2.c): vpmaddwd on int16-widened operands. */
void b8_attention_s8__avx2(const int8_t *q, const int8_t *k, const int8_t *v, int64_t ld, int64_t T, int64_t d,
                           const b8_attn_s8_params *p, const int32_t *mask, b8_mask_mode mode, float *ctx,
                           int8_t *ctxq, int64_t ldo, void *scratch);
size_t b8_attention_s8_avx2_scratch_bytes(int64_t T, int64_t d);
/* AMX: d a multiple of 64 (other d run the VNNI kernel). */
void b8_attention_s8__amx(const int8_t *q, const int8_t *k, const int8_t *v, int64_t ld, int64_t T, int64_t d,
                          const b8_attn_s8_params *p, const int32_t *mask, b8_mask_mode mode, float *ctx, int8_t *ctxq,
                          int64_t ldo, void *scratch);
b8_attention_s8_fn b8_attention_s8_best(void);

/* INT8 sliding-window attention: query i sees keys |i - j| <= w only (no relative bias); the
 * scores outside a row's window, from its first key rounded down to a multiple of 16, are never
 * formed. Arguments as b8_attention_s8_fn's; scratch holds
 * b8_attention_s8_window_scratch_bytes(T, d), 64-byte aligned. The VNNI and AVX2 kernels and their
 * scalar twin agree bit for bit. */
typedef void (*b8_attention_s8_window_fn)(const int8_t *q, const int8_t *k, const int8_t *v, int64_t ld, int64_t T,
                                          int64_t d, const b8_attn_s8_params *p, int64_t w, const int32_t *mask,
                                          float *ctx, int8_t *ctxq, int64_t ldo, void *scratch);
size_t b8_attention_s8_window_scratch_bytes(int64_t T, int64_t d);
void b8_attention_s8_window__scalar(const int8_t *q, const int8_t *k, const int8_t *v, int64_t ld, int64_t T,
                                    int64_t d, const b8_attn_s8_params *p, int64_t w, const int32_t *mask,
                                    float *ctx, int8_t *ctxq, int64_t ldo, void *scratch);
void b8_attention_s8_window__avx512vnni(const int8_t *q, const int8_t *k, const int8_t *v, int64_t ld, int64_t T,
                                        int64_t d, const b8_attn_s8_params *p, int64_t w, const int32_t *mask,
                                        float *ctx, int8_t *ctxq, int64_t ldo, void *scratch);
/* AVX2 (attention_s8_avx2.c), bit-identical to the other two. */
void b8_attention_s8_window__avx2(const int8_t *q, const int8_t *k, const int8_t *v, int64_t ld, int64_t T, int64_t d,
                                  const b8_attn_s8_params *p, int64_t w, const int32_t *mask, float *ctx, int8_t *ctxq,
                                  int64_t ldo, void *scratch);
/* The VNNI kernel where the dispatcher runs VNNI or AMX INT8 attention, the AVX2 one where it runs
 * AVX2 INT8 attention, else NULL (sliding layers then run fp32 attention between their INT8
 * products). */
b8_attention_s8_window_fn b8_attention_s8_window_best(void);

#endif
