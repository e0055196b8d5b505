/* calib_text.h: calibration text for `bert8 quantize` and `bert8 bench`: reading it (one input
 * per line: plain text, a JSON object {"text": ..., "text_pair": ...}, or with --column
 * NAME[,NAME2] (or a .tsv file) a TSV whose header names the columns), encoding it into
 * batches, and the shared option parsers. */
#ifndef BERT8_CALIB_TEXT_H
#define BERT8_CALIB_TEXT_H

#include <stdbool.h>
#include <stdint.h>

#include "bert8.h"

typedef struct texts {
    char **a, **b; /* b[i] NULL for single texts */
    int64_t n, cap;
} texts;

void texts_free(texts *t);
bool texts_add(texts *t, const char *a, const char *b);
/* Reads at most limit (<= 0: all) inputs of path; prints the error (naming cmd) and returns 1. */
int read_texts(const char *cmd, const char *path, const char *columns, int64_t limit, texts *out);
/* Built-in sample sentences (NULL-terminated) for bench runs without --calib. */
extern const char *const SAMPLE_TEXT[];
/* Encodes texts into batches of `rows` sequences truncated to max_len; returns 1 on failure. */
int make_batches(const char *cmd, const bert8_tokenizer *tok, const texts *t, int64_t max_len, int64_t rows,
                 bert8_encoding **encs, bert8_batch **batches, int64_t *nb);
void free_batches(bert8_encoding *encs, bert8_batch *b, int64_t n);
bool parse_scheme(const char *cmd, const char *v, bert8_scheme *out);
/* --attention fp32|int8 (NULL: *int8 is left as it is, the library's default -1) */
bool parse_attention(const char *cmd, const char *v, int *int8);
/* *int8 = -1 settled for model m as bert8_quantize settles it (INT8 where the head size is a
 * multiple of 4) */
void resolve_attention(const bert8_model *m, int *int8);
/* --embeddings fp32|int8 (NULL: fp32) */
bool parse_embeddings(const char *cmd, const char *v, int *int8);
/* --weight-bits 7|8 (NULL leaves *bits as it is). */
bool parse_weight_bits(const char *cmd, const char *v, int *bits);
/* --ffn-out dynamic|static: the static scheme's FFN-out input per token (1) or per tensor (0) */
bool parse_ffn_out(const char *cmd, const char *v, int *per_token);
/* --ffn-in dynamic|static: the static scheme's FFN-in input per token (1) or per tensor (0) */
bool parse_ffn_in(const char *cmd, const char *v, int *per_token);
/* --outliers N (0 to 64): fp32 outlier input channels of each per-token Linear (NULL: as is) */
bool parse_outliers(const char *cmd, const char *v, int *outliers);
/* --alpha A|auto|none */
bool parse_alpha(const char *cmd, const char *v, float *alpha, int *smooth);

#endif
