/* calib_text.h: calibration text for `bert8 quantize` and `bert8 bench`: reading it and encoding
 * it into batches. One input per line: plain text, or a JSON object {"text": ..., "text_pair":
 * ...}; or a TSV (a .tsv file, or any file with --column):
 *   - with --column NAME[,NAME2] the first line is a header that must name those columns (the
 *     second one: the text pair);
 *   - without --column the first line is a header only when one of its cells is a text column's
 *     name: sentence, text, sentence1, question or premise (the first of these it holds is read,
 *     e.g. SST-2's "sentence\tlabel"); otherwise it is the first row, and column 0 of every row is
 *     read. A file whose first sentence is exactly one of those names needs --column. */
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

#endif
