/* spm_model.h: a sentencepiece .model file into the Unigram model (spm_model.c). */
#ifndef BERT8_SPM_MODEL_H
#define BERT8_SPM_MODEL_H

#include "tokenizer/tok_types.h"

/* Reads a sentencepiece ModelProto (data, n bytes) into t's Unigram model; path for messages. */
bert8_status b8_spm_parse(b8_tokenizer *t, const uint8_t *data, size_t n, const char *path,
                          b8_err *e);

#endif
