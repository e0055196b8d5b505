/* wordpiece.h: the WordPiece model stage (wordpiece.c). */
#ifndef BERT8_WORDPIECE_H
#define BERT8_WORDPIECE_H

#include "tokenizer/tok_types.h"

/* The model stage: tokenize text[s, e) (no added tokens inside) and append to seq; *word is
 * the next word index and is advanced. */
bert8_status b8_wp_tokenize(const b8_tokenizer *t, const uint8_t *text, int32_t s, int32_t e,
                            b8_tokseq *seq, b8_tok_scratch *sc, int32_t *word, b8_err *err);

#endif
