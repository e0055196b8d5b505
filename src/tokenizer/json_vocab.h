/* json_vocab.h: model.vocab of a tokenizer.json (json_vocab.c), the reader tok_json.c
 * (WordPiece) and bpe_load.c (BPE) share. */
#ifndef BERT8_JSON_VOCAB_H
#define BERT8_JSON_VOCAB_H

#include "tokenizer/tok_types.h"

/* model.vocab of a tokenizer.json ({"token": id, ...}, a cJSON object) into t's id -> token
 * table and trie; a repeated id is an error, a repeated key keeps the last. */
bert8_status b8_tokjson_vocab(b8_tokenizer *t, const void *vocab, const char *path, b8_err *e);

#endif
