/* added_index.h: the added tokens' lookups (added_index.c): by content, by the text they start,
 * by id. */
#ifndef BERT8_ADDED_INDEX_H
#define BERT8_ADDED_INDEX_H

#include "tokenizer/tok_types.h"

/* b8_added_find gives the index in t->added of the token whose content is s (len bytes), or -1;
 * b8_added_index_add files t->added[idx] after it is appended; b8_added_index_build makes every
 * lookup anew once the tokens are final and sorted (b8_tok_finish). */
int b8_added_find(const b8_tokenizer *t, const char *s, size_t len);
bert8_status b8_added_index_add(b8_tokenizer *t, int idx, b8_err *e);
bert8_status b8_added_index_build(b8_tokenizer *t, b8_err *e);
void b8_added_index_free(b8_tokenizer *t);
/* The added token of pass `pass` (BPE: 1 for the normalized ones; 0 otherwise) that the text
 * at s (n bytes) starts with: the longest exact match, else the longest fold match (a fold
 * token also matches text that lower-cases to it); NULL when none. *mlen: the bytes of text
 * it covers. Cost: the walk down a trie, whatever the number of tokens. */
const b8_added_token *b8_added_match(const b8_tokenizer *t, int pass, const uint8_t *s, size_t n, size_t *mlen);
/* [*lo, *hi): the entries of t->added_by_id with that id. */
void b8_added_id_range(const b8_tokenizer *t, int32_t id, int *lo, int *hi);

#endif
