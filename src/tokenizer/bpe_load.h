/* bpe_load.h: the BPE parts of a tokenizer.json (bpe_load.c). */
#ifndef BERT8_BPE_LOAD_H
#define BERT8_BPE_LOAD_H

#include "tokenizer/tok_types.h"

/* Reads model (a cJSON object: vocab, merges, ...) into t's BPE tables; path for messages.
 * Declared with void * so that this header stays free of cJSON. */
bert8_status b8_bpe_parse_model(b8_tokenizer *t, const void *model, const char *path, b8_err *e);
/* The rest of a BPE tokenizer.json (root, a cJSON object): normalizer, ByteLevel
 * pre-tokenizer, decoder. */
bert8_status b8_bpe_parse_pipeline(b8_tokenizer *t, const void *root, const char *path, b8_err *e);

#endif
