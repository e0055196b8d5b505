/* piece_trie.c: the byte trie that maps vocabulary strings to ids, stored as a double array
 * built in one pass over the sorted keys. WordPiece walks it for the longest match, Unigram
 * for every piece that starts at a position. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/piece_trie.h"

void b8_ptrie_free(b8_ptrie *t) {
    if (!t) return;
    free(t->da);
    memset(t, 0, sizeof *t);
}

uint32_t b8_ptrie_walk(const b8_ptrie *t, uint32_t from, const char *key, size_t len) {
    if (!t->da) return B8_PTRIE_NONE;
    uint32_t node = from;
    for (size_t i = 0; i < len; i++) {
        node = b8_ptrie_child(t, node, (uint8_t)key[i]);
        if (!node) return B8_PTRIE_NONE;
    }
    return node;
}

int32_t b8_ptrie_get(const b8_ptrie *t, const char *key, size_t len) {
    uint32_t node = b8_ptrie_walk(t, 0, key, len);
    if (node == B8_PTRIE_NONE) return -1;
    int32_t v = t->da[node].value;
    return v < 0 ? -1 : (v & B8_PV_ID);
}

static int cmp_key(const void *a, const void *b) {
    const b8_ptrie_key *x = a, *y = b;
    uint32_t m = x->len < y->len ? x->len : y->len;
    int c = m ? memcmp(x->s, y->s, m) : 0;
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

typedef struct da_build {
    b8_da_unit *u;
    uint32_t *next; /* union-find "smallest free unit >= i" (next[i] == i when free) */
    uint32_t cap;
} da_build;

static bool da_grow(da_build *d, uint64_t need) {
    if (need <= d->cap) return true;
    uint64_t nc = d->cap ? d->cap : 1024;
    while (nc < need)
        nc += nc / 2;
    if (nc > (uint64_t)INT32_MAX) return false;
    b8_da_unit *u = realloc(d->u, (size_t)nc * sizeof *u);
    if (!u) return false;
    d->u = u;
    uint32_t *nx = realloc(d->next, (size_t)(nc + 1) * sizeof *nx);
    if (!nx) return false;
    d->next = nx;
    for (uint64_t i = d->cap; i < nc; i++) {
        u[i] = (b8_da_unit){0, -1, -1, 0.0f};
        nx[i] = (uint32_t)i;
    }
    nx[nc] = (uint32_t)nc; /* past the end counts as free; the array grows when it is used */
    d->cap = (uint32_t)nc;
    return true;
}

static uint32_t da_find(da_build *d, uint32_t i) {
    uint32_t r = i;
    while (d->next[r] != r)
        r = d->next[r];
    while (d->next[i] != r) { /* path compression */
        uint32_t n = d->next[i];
        d->next[i] = r;
        i = n;
    }
    return r;
}

/* A node of the trie during the build: the sorted keys [lo, hi) share its depth-byte prefix. */
typedef struct span {
    uint32_t lo, hi, depth, unit;
} span;

bert8_status b8_ptrie_build(b8_ptrie *t, b8_ptrie_key *keys, size_t n, const float *score,
                            const uint8_t *type, bool unique, size_t *dup, b8_err *e) {
    memset(t, 0, sizeof *t);
    if (n >= (size_t)INT32_MAX / 2)
        return b8_fail(e, BERT8_ERR_TOO_LARGE, "vocabulary too large (%zu keys)", n);
    for (size_t i = 0; i < n; i++)
        keys[i].order = (uint32_t)i;
    if (n > 1) qsort(keys, n, sizeof *keys, cmp_key);
    bert8_status st = BERT8_OK;
    size_t qcap = n + 1024, qn = 0, qi = 0, bytes = 0;
    for (size_t i = 0; i < n; i++)
        bytes += keys[i].len;
    span *q = malloc(qcap * sizeof *q);
    /* the keys' bytes in sorted order: the build scans them level by level */
    char *blob = malloc(bytes + 1);
    da_build d = {0};
    if (!q || !blob || !da_grow(&d, (uint64_t)n * 3 + 1024)) {
        st = b8_fail(e, BERT8_ERR_NOMEM, "out of memory building the vocabulary trie");
        goto out;
    }
    for (size_t i = 0, at = 0; i < n; i++) {
        if (keys[i].len) memcpy(blob + at, keys[i].s, keys[i].len);
        keys[i].s = blob + at;
        at += keys[i].len;
    }
    d.u[0].check = -2; /* the root is taken */
    d.next[0] = 1;
    q[qn++] = (span){0, (uint32_t)n, 0, 0};
    uint32_t used_max = 1;
    while (qi < qn) {
        span sp = q[qi++];
        uint32_t i = sp.lo;
        /* keys that end here (sorted first); repeats are duplicates */
        if (i < sp.hi && keys[i].len == sp.depth) {
            const b8_ptrie_key *k = &keys[i];
            while (i + 1 < sp.hi && keys[i + 1].len == sp.depth) {
                if (unique) {
                    if (dup) *dup = keys[i + 1].order;
                    st = b8_fail(e, BERT8_ERR_FORMAT, "the vocabulary repeats an entry");
                    goto out;
                }
                k = &keys[++i]; /* the last copy wins */
            }
            int32_t v = k->value;
            if (v >= 0 && type) {
                if (type[v] == B8_SP_UNUSED) v |= B8_PV_UNUSED;
                if (type[k->value] == B8_SP_USER) v |= B8_PV_USER;
            }
            d.u[sp.unit].value = v;
            d.u[sp.unit].score = (k->value >= 0 && score) ? score[k->value] : 0.0f;
            i++;
        }
        if (i >= sp.hi) continue;
        /* distinct next bytes and where their key ranges start */
        uint8_t lab[256];
        uint32_t from[257];
        int nl = 0;
        for (uint32_t j = i; j < sp.hi; j++) {
            uint8_t c = (uint8_t)keys[j].s[sp.depth];
            if (nl == 0 || lab[nl - 1] != c) {
                lab[nl] = c;
                from[nl++] = j;
            }
        }
        from[nl] = sp.hi;
        /* the lowest base where every child fits */
        uint32_t base = 0;
        for (uint32_t pos = da_find(&d, (uint32_t)lab[0] + 1);; pos = da_find(&d, pos + 1)) {
            if (!da_grow(&d, (uint64_t)pos + 257)) {
                st = b8_fail(e, BERT8_ERR_NOMEM, "out of memory building the vocabulary trie");
                goto out;
            }
            base = pos - lab[0];
            bool fits = true;
            for (int j = 1; j < nl && fits; j++)
                fits = d.u[base + lab[j]].check == -1;
            if (fits) break;
        }
        d.u[sp.unit].base = (int32_t)base;
        if (qn + (size_t)nl > qcap) {
            size_t nc = qcap * 2 + (size_t)nl;
            span *nq = realloc(q, nc * sizeof *nq);
            if (!nq) {
                st = b8_fail(e, BERT8_ERR_NOMEM, "out of memory building the vocabulary trie");
                goto out;
            }
            q = nq;
            qcap = nc;
        }
        for (int j = 0; j < nl; j++) {
            uint32_t idx = base + lab[j];
            d.u[idx].check = (int32_t)sp.unit;
            d.next[idx] = idx + 1;
            if (idx + 1 > used_max) used_max = idx + 1;
            q[qn++] = (span){from[j], from[j + 1], sp.depth + 1, idx};
        }
    }
    /* keep 256 spare units so base + byte never leaves the array */
    {
        uint32_t keep = used_max + 256;
        if (!da_grow(&d, keep)) {
            st = b8_fail(e, BERT8_ERR_NOMEM, "out of memory building the vocabulary trie");
            goto out;
        }
        b8_da_unit *u = realloc(d.u, (size_t)keep * sizeof *u);
        if (u) d.u = u;
        t->da = d.u;
        t->da_n = keep;
        d.u = NULL;
    }
out:
    free(d.u);
    free(d.next);
    free(q);
    free(blob);
    return st;
}
