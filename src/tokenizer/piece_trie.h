/* piece_trie.h: the byte-wise trie over vocabulary strings (a double array, piece_trie.c): each
 * model's token -> id, the Unigram pieces' scores, the added tokens' lookups. Its types are in
 * tok_types.h, since the tokenizer object holds tries. */
#ifndef BERT8_PIECE_TRIE_H
#define BERT8_PIECE_TRIE_H

#include "tokenizer/tok_types.h"

/* Builds t from n keys (the array is reordered; its strings must not be used after). With unique, a
 * repeated key fails with BERT8_ERR_FORMAT and *dup gets the input position of the second copy;
 * otherwise the last copy wins, as a dict assignment does. Unigram passes per-id scores and piece
 * types so the units carry them (B8_PV_* flags); WordPiece passes NULLs. */
bert8_status b8_ptrie_build(b8_ptrie *t, b8_ptrie_key *keys, size_t n, const float *score,
                            const uint8_t *type, bool unique, size_t *dup, b8_err *e);
void b8_ptrie_free(b8_ptrie *t);
/* Walks key from node `from`; B8_PTRIE_NONE when the path does not exist. */
uint32_t b8_ptrie_walk(const b8_ptrie *t, uint32_t from, const char *key, size_t len);
/* The id stored for key (flags removed), -1 when absent. */
int32_t b8_ptrie_get(const b8_ptrie *t, const char *key, size_t len);

static inline uint32_t b8_ptrie_child(const b8_ptrie *t, uint32_t node, uint8_t byte) {
    uint32_t i = (uint32_t)t->da[node].base + byte;
    return (i < t->da_n && t->da[i].check == (int32_t)node) ? i : 0;
}

/* The raw value of a node (flags included), -1 when no key ends there. */
static inline int32_t b8_ptrie_value(const b8_ptrie *t, uint32_t node) {
    return t->da[node].value;
}

#endif
