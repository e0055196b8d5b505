/* tok_object.h: building the tokenizer object (tok_object.c), for the loaders: the id -> token
 * table, added tokens, templates, and the finish that makes the lookups. tok_object.c also frees
 * and reads the object (b8_tokenizer_free, b8_tokenizer_id_to_token, ...): those are declared
 * in tokenizer.h. */
#ifndef BERT8_TOK_OBJECT_H
#define BERT8_TOK_OBJECT_H

#include "tokenizer/tok_types.h"

/* Loading pieces shared by the loader files (tok_load.c, tok_json.c, json_vocab.c,
 * spm_model.c). */
b8_tokenizer *b8_tok_alloc(b8_tok_kind kind);
/* Sets the id -> token table from n strings (lens given); refuses more than B8_TOK_MAX_VOCAB
 * tokens or one longer than B8_TOK_MAX_TOKEN_BYTES (what names the source in messages). */
bert8_status b8_tok_set_tokens(b8_tokenizer *t, const char *const *toks, const size_t *lens,
                               int64_t n, b8_err *e);
/* Adds (or updates) a verbatim-matched token; id < 0 looks it up / appends it. An explicit id
 * at or past the vocabulary size grows it to id + 1 (padding with "" tokens), within
 * B8_TOK_MAX_ID_GAP and B8_TOK_MAX_VOCAB. */
bert8_status b8_tok_add_token(b8_tokenizer *t, const char *content, size_t len, int32_t id,
                              bool lstrip, bool rstrip, bool single_word, bool special, b8_err *e);
/* Appends a new token to the vocabulary (for added tokens missing from it); returns its id. */
int32_t b8_tok_append_token(b8_tokenizer *t, const char *s, size_t len, b8_err *e);
/* Builds the lookup structures once everything is known (sorts added tokens etc.). */
bert8_status b8_tok_finish(b8_tokenizer *t, b8_err *e);
/* Sets the default templates of the kind from the special ids. */
void b8_tok_default_templates(b8_tokenizer *t);

#endif
