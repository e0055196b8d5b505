/* added_index.c: the lookups over a tokenizer's added tokens, so that their number costs
 * nothing per character of text: a hash of their contents (load-time updates, token -> id,
 * never_split), a byte trie per matching pass (the longest token at a position in one walk,
 * as `tokenizers`' automaton finds it) and their order by id (decode).
 *
 * The tries are the vocabulary's double array (piece_trie.c) with the token's index in
 * t->added as the value. The linear scan they replace returned the first token in t->added's
 * order (longest first) that matches at the position; the walk keeps the smallest index among
 * the tokens it passes, which is the same token. */
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "tokenizer/added_index.h"
#include "tokenizer/piece_trie.h"
#include "tokenizer/unicode_text.h"

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

int b8_added_find(const b8_tokenizer *t, const char *s, size_t len) {
    if (!t->added_slot) return -1;
    for (uint32_t h = (uint32_t)hash_bytes(s, len) & t->added_slot_mask;; h = (h + 1) & t->added_slot_mask) {
        const int32_t i = t->added_slot[h];
        if (i < 0) return -1;
        if (t->added[i].len == len && !memcmp(t->added[i].content, s, len)) return i;
    }
}

static void slot_put(b8_tokenizer *t, int32_t idx) {
    const b8_added_token *a = &t->added[idx];
    uint32_t h = (uint32_t)hash_bytes(a->content, a->len) & t->added_slot_mask;
    while (t->added_slot[h] >= 0)
        h = (h + 1) & t->added_slot_mask;
    t->added_slot[h] = idx;
}

/* A table for the n_added tokens there are (at most half full), filled anew. */
static bert8_status slots_rebuild(b8_tokenizer *t, b8_err *e) {
    uint32_t slots = 16;
    while (slots < 2u * (uint32_t)t->n_added + 2)
        slots *= 2;
    int32_t *s = malloc((size_t)slots * sizeof *s);
    if (!s) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory indexing the added tokens");
    free(t->added_slot);
    t->added_slot = s;
    t->added_slot_mask = slots - 1;
    memset(s, 0xff, (size_t)slots * sizeof *s); /* -1: empty */
    for (int i = 0; i < t->n_added; i++)
        slot_put(t, i);
    return BERT8_OK;
}

bert8_status b8_added_index_add(b8_tokenizer *t, int idx, b8_err *e) {
    if (!t->added_slot || 2u * (uint32_t)t->n_added + 2 > t->added_slot_mask + 1) return slots_rebuild(t, e);
    slot_put(t, idx);
    return BERT8_OK;
}

static int cmp_by_id(const void *a, const void *b) {
    const b8_added_ref *x = a, *y = b;
    if (x->id != y->id) return x->id < y->id ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

/* The trie of one pass: the tokens with that normalized flag (BPE; every token otherwise),
 * by their content or, with fold, the fold tokens by their lower-cased form. Keys go in
 * reverse order so that where two share a key (two contents with one lower case) the earlier
 * token is the last copy, which the build keeps. */
static bert8_status build_trie(b8_tokenizer *t, b8_ptrie *trie, int pass, bool fold, b8_ptrie_key *keys, b8_err *e) {
    size_t n = 0;
    for (int i = t->n_added; i-- > 0;) {
        const b8_added_token *a = &t->added[i];
        if ((t->kind == B8_TOK_BPE && a->normalized != (pass == 1)) || (fold && !a->fold)) continue;
        if (fold && a->folded) keys[n++] = (b8_ptrie_key){a->folded, (uint32_t)a->folded_len, i, 0};
        else keys[n++] = (b8_ptrie_key){a->content, (uint32_t)a->len, i, 0};
    }
    b8_ptrie_free(trie);
    return b8_ptrie_build(trie, keys, n, NULL, NULL, false, NULL, e);
}

bert8_status b8_added_index_build(b8_tokenizer *t, b8_err *e) {
    bert8_status st = slots_rebuild(t, e);
    if (st) return st;
    free(t->added_by_id);
    t->added_by_id = malloc(((size_t)t->n_added + 1) * sizeof *t->added_by_id);
    b8_ptrie_key *keys = malloc(((size_t)t->n_added + 1) * sizeof *keys);
    if (!t->added_by_id || !keys) {
        free(keys);
        return b8_fail(e, BERT8_ERR_NOMEM, "out of memory indexing the added tokens");
    }
    for (int i = 0; i < t->n_added; i++)
        t->added_by_id[i] = (b8_added_ref){t->added[i].id, i};
    if (t->n_added > 1) qsort(t->added_by_id, (size_t)t->n_added, sizeof *t->added_by_id, cmp_by_id);
    const int passes = t->kind == B8_TOK_BPE ? 2 : 1;
    for (int p = 0; p < passes && !st; p++) {
        st = build_trie(t, &t->added_exact[p], p, false, keys, e);
        if (!st) st = build_trie(t, &t->added_fold[p], p, true, keys, e);
    }
    free(keys);
    return st;
}

void b8_added_index_free(b8_tokenizer *t) {
    free(t->added_slot);
    free(t->added_by_id);
    t->added_slot = NULL;
    t->added_by_id = NULL;
    for (int p = 0; p < 2; p++) {
        b8_ptrie_free(&t->added_exact[p]);
        b8_ptrie_free(&t->added_fold[p]);
    }
}

/* Walks text s (n bytes) down the trie of contents; the smallest index passed, or -1. */
static int32_t walk_exact(const b8_ptrie *tr, const uint8_t *s, size_t n, size_t *mlen) {
    int32_t best = -1;
    uint32_t node = 0;
    for (size_t i = 0; i < n; i++) {
        if (!(node = b8_ptrie_child(tr, node, s[i]))) break;
        const int32_t v = b8_ptrie_value(tr, node);
        if (v >= 0 && (best < 0 || (v & B8_PV_ID) < best)) {
            best = v & B8_PV_ID;
            *mlen = i + 1;
        }
    }
    return best;
}

/* The same down the trie of lower-cased forms, feeding it each character's str.lower(); a
 * token must end where a character's lower case ends. */
static int32_t walk_fold(const b8_ptrie *tr, const uint8_t *s, size_t n, size_t *mlen) {
    int32_t best = -1;
    uint32_t node = 0;
    for (size_t i = 0; i < n;) {
        const int l = b8_utf8_len(s[i]);
        if (l <= 0 || (size_t)l > n - i) break;
        uint32_t cp, lc[2];
        b8_utf8_next(s + i, &cp);
        const int k = b8_uni_lower(cp, lc);
        bool alive = true; /* node 0 is the root: a step that fails gives 0 */
        for (int m = 0; m < k && alive; m++) {
            uint8_t buf[4];
            const int bl = b8_utf8_put(lc[m], buf);
            for (int j = 0; j < bl && alive; j++)
                alive = (node = b8_ptrie_child(tr, node, buf[j])) != 0;
        }
        if (!alive) break;
        i += (size_t)l;
        const int32_t v = b8_ptrie_value(tr, node);
        if (v >= 0 && (best < 0 || (v & B8_PV_ID) < best)) {
            best = v & B8_PV_ID;
            *mlen = i;
        }
    }
    return best;
}

const b8_added_token *b8_added_match(const b8_tokenizer *t, int pass, const uint8_t *s, size_t n, size_t *mlen) {
    size_t len = 0;
    int32_t i = t->added_exact[pass].da ? walk_exact(&t->added_exact[pass], s, n, &len) : -1;
    if (i < 0 && t->added_fold[pass].da) i = walk_fold(&t->added_fold[pass], s, n, &len);
    if (i < 0) return NULL;
    *mlen = len;
    return &t->added[i];
}

void b8_added_id_range(const b8_tokenizer *t, int32_t id, int *lo, int *hi) {
    int a = 0, b = t->added_by_id ? t->n_added : 0;
    while (a < b) { /* the first entry whose id is not below id */
        const int mid = a + (b - a) / 2;
        if (t->added_by_id[mid].id < id) a = mid + 1;
        else b = mid;
    }
    *lo = a;
    while (t->added_by_id && a < t->n_added && t->added_by_id[a].id == id)
        a++;
    *hi = a;
}
