/* tok_json.h: a tokenizer.json into a tokenizer (tok_json.c). */
#ifndef BERT8_TOK_JSON_H
#define BERT8_TOK_JSON_H

#include "tokenizer/tokenizer.h"

/* Parses a tokenizer.json (text, NUL-terminated) into a fresh tokenizer. */
bert8_status b8_tokjson_parse(const char *text, size_t len, const char *path,
                              const b8_tok_options *opt, b8_tokenizer **out, b8_err *e);

#endif
