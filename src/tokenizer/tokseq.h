/* tokseq.h: the token list of one sequence (b8_tokseq) and the per-call scratch (tokseq.c):
 * what the models append to and grow, and what the encode and tokenize results keep. */
#ifndef BERT8_TOKSEQ_H
#define BERT8_TOKSEQ_H

#include "tokenizer/tok_types.h"

bool b8_tokseq_reserve(b8_tokseq *s, int64_t n);
void b8_tokseq_free(b8_tokseq *s);
/* Appends a token; str (len bytes) is recorded when want_strings. */
bool b8_tokseq_push(b8_tokseq *s, int32_t id, int32_t os, int32_t oe, int32_t word, const char *str,
                    size_t len);

bool b8_scratch_bytes(b8_tok_scratch *s, size_t n); /* nb/nos/noe hold at least n */
void b8_scratch_free(b8_tok_scratch *s);

#endif
