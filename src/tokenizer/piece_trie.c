/* piece_trie.c: the byte trie that maps vocabulary strings to ids; WordPiece walks it for the
 * longest match, Unigram for every piece that starts at a position. */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

static size_t pow2_at_least(size_t n) {
    size_t p = 64;
    while (p < n)
        p <<= 1;
    return p;
}

bert8_status b8_ptrie_init(b8_ptrie *t, size_t expected_bytes, b8_err *e) {
    memset(t, 0, sizeof *t);
    size_t want = expected_bytes + expected_bytes / 2 + 64, nslots;
    if (!b8_mul_ok(want, 2, &nslots) || nslots > ((size_t)1 << 33))
        return b8_fail(e, BERT8_ERR_TOO_LARGE, "vocabulary too large (%zu bytes)", expected_bytes);
    nslots = pow2_at_least(nslots);
    t->slots = calloc(nslots, sizeof *t->slots);
    t->cap_nodes = 1024;
    t->value = malloc(t->cap_nodes * sizeof *t->value);
    if (!t->slots || !t->value) {
        b8_ptrie_free(t);
        return b8_fail(e, BERT8_ERR_NOMEM, "out of memory building the vocabulary trie");
    }
    t->mask = nslots - 1;
    t->nodes = 1;
    t->value[0] = -1;
    return BERT8_OK;
}

void b8_ptrie_free(b8_ptrie *t) {
    if (!t) return;
    free(t->slots);
    free(t->value);
    memset(t, 0, sizeof *t);
}

static bool grow_slots(b8_ptrie *t) {
    size_t n = (t->mask + 1) * 2;
    uint64_t *ns = calloc(n, sizeof *ns);
    if (!ns) return false;
    for (size_t i = 0; i <= t->mask; i++) {
        uint64_t s = t->slots[i];
        if (!s) continue;
        uint32_t key = (uint32_t)(s >> 32);
        size_t h = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & (n - 1);
        while (ns[h])
            h = (h + 1) & (n - 1);
        ns[h] = s;
    }
    free(t->slots);
    t->slots = ns;
    t->mask = n - 1;
    return true;
}

static uint32_t new_node(b8_ptrie *t) {
    /* keys pack the parent into 24 bits */
    if (t->nodes >= (1u << 24) - 1) return B8_PTRIE_NONE;
    if (t->nodes == t->cap_nodes) {
        uint32_t nc = t->cap_nodes * 2;
        int32_t *nv = realloc(t->value, (size_t)nc * sizeof *nv);
        if (!nv) return B8_PTRIE_NONE;
        t->value = nv;
        t->cap_nodes = nc;
    }
    t->value[t->nodes] = -1;
    return t->nodes++;
}

uint32_t b8_ptrie_insert(b8_ptrie *t, const char *key, size_t len, int32_t value) {
    uint32_t node = 0;
    for (size_t i = 0; i < len; i++) {
        uint8_t b = (uint8_t)key[i];
        uint32_t child = b8_ptrie_child(t, node, b);
        if (!child) {
            child = new_node(t);
            if (child == B8_PTRIE_NONE) return B8_PTRIE_NONE;
            if (node == 0) {
                t->root[b] = child;
            } else {
                if ((t->used + 1) * 2 > t->mask + 1 && !grow_slots(t)) return B8_PTRIE_NONE;
                uint32_t k = (node << 8 | b) + 1u;
                size_t h = (size_t)((k * 0x9E3779B97F4A7C15ull) >> 32) & t->mask;
                while (t->slots[h])
                    h = (h + 1) & t->mask;
                t->slots[h] = (uint64_t)k << 32 | child;
                t->used++;
            }
        }
        node = child;
    }
    t->value[node] = value;
    return node;
}

uint32_t b8_ptrie_walk(const b8_ptrie *t, uint32_t from, const char *key, size_t len) {
    uint32_t node = from;
    for (size_t i = 0; i < len; i++) {
        node = b8_ptrie_child(t, node, (uint8_t)key[i]);
        if (!node) return B8_PTRIE_NONE;
    }
    return node;
}

int32_t b8_ptrie_get(const b8_ptrie *t, const char *key, size_t len) {
    if (!t->value) return -1;
    uint32_t node = b8_ptrie_walk(t, 0, key, len);
    return node == B8_PTRIE_NONE ? -1 : t->value[node];
}
