/* bpe.h: the byte-level BPE model stage, its offset trimming and the GPT-2 byte alphabet
 * (bpe.c). */
#ifndef BERT8_BPE_H
#define BERT8_BPE_H

#include "tokenizer/tok_types.h"

/* The model stage: tokenize text[s, e) (no added tokens inside) and append to seq; *word is
 * the next word index and is advanced. */
bert8_status b8_bpe_tokenize(const b8_tokenizer *t, const uint8_t *text, int32_t s, int32_t e,
                             b8_tokseq *seq, b8_tok_scratch *sc, int32_t *word, b8_err *err);
/* The post-processor's offset trimming of one token (str, len bytes: its string), first in its
 * sequence or not; offsets move by characters of text. */
void b8_bpe_trim_offsets(const b8_tokenizer *t, const uint8_t *text, const char *str, size_t len,
                         bool first, int32_t *os, int32_t *oe);
/* GPT-2 byte alphabet: the character (UTF-8, 1 or 2 bytes) a byte is written as. */
int b8_bpe_byte_char(uint8_t byte, uint8_t out[2]);
/* The byte a GPT-2 alphabet character stands for, -1 when cp is not one. */
int b8_bpe_char_byte(uint32_t cp);

#endif
