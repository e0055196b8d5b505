/* unigram.h: the SentencePiece Unigram model (unigram.c): its normalizer and Viterbi, and the
 * finishing of a loaded model. */
#ifndef BERT8_UNIGRAM_H
#define BERT8_UNIGRAM_H

#include "tokenizer/tok_types.h"

/* The model stage: tokenize text[s, e) (no added tokens inside) and append to seq; *word is
 * the next word index and is advanced. */
bert8_status b8_ug_tokenize(const b8_tokenizer *t, const uint8_t *text, int32_t s, int32_t e,
                            b8_tokseq *seq, b8_tok_scratch *sc, int32_t *word, b8_err *err);
/* Installs a precompiled charsmap blob (copied) into t->ug; what names it in messages. */
bert8_status b8_ug_set_charsmap(b8_tokenizer *t, const uint8_t *blob, size_t n, const char *what,
                                b8_err *e);
/* Finishes the Unigram model: min/max scores, piece trie, ASCII table. */
bert8_status b8_ug_finish(b8_tokenizer *t, b8_err *e);

#endif
