/* unigram.c: SentencePiece Unigram as sentencepiece 0.1.97 runs it for XLM-R: the precompiled
 * charsmap normalizer (a darts-clone double array plus replacement strings), whitespace
 * escaping, and the optimized Viterbi over piece scores, with byte origins kept for offsets. */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "tokenizer/piece_trie.h"
#include "tokenizer/tokseq.h"
#include "tokenizer/unigram.h"

static const uint8_t kSpace[3] = {0xE2, 0x96, 0x81}; /* U+2581, SentencePiece's whitespace */

/* ---- The double array (darts-clone unit layout) ---------------------------------------- */

static inline bool da_has_leaf(uint32_t u) {
    return (u >> 8) & 1;
}
static inline uint32_t da_value(uint32_t u) {
    return u & ((1u << 31) - 1);
}
static inline uint32_t da_label(uint32_t u) {
    return u & ((1u << 31) | 0xFF);
}
static inline uint32_t da_offset(uint32_t u) {
    return (u >> 10) << ((u & (1u << 9)) >> 6);
}

/* Longest key of the charsmap that prefixes s[0..n); returns its length (0: none) and the
 * replacement's offset in the strings. Every index is checked: the array is file data. */
static size_t da_longest(const b8_tokenizer *t, const uint8_t *s, size_t n, uint32_t *value) {
    const uint32_t *a = t->ug.da;
    size_t units = t->ug.da_units;
    if (!a || units == 0) return 0;
    size_t best = 0;
    uint32_t pos = da_offset(a[0]);
    for (size_t i = 0; i < n; i++) {
        pos ^= s[i];
        if (pos >= units) break;
        uint32_t u = a[pos];
        if (da_label(u) != s[i]) break;
        pos ^= da_offset(u);
        if (da_has_leaf(u)) {
            if (pos >= units) break;
            best = i + 1;
            *value = da_value(a[pos]);
        }
    }
    return best;
}

/* Whether some key continues past the single byte b (then b cannot be normalized alone). */
static bool da_has_longer(const b8_tokenizer *t, uint8_t b) {
    const uint32_t *a = t->ug.da;
    size_t units = t->ug.da_units;
    uint32_t pos = da_offset(a[0]) ^ b;
    if (pos >= units || da_label(a[pos]) != b) return false;
    uint32_t base = pos ^ da_offset(a[pos]);
    for (uint32_t c = 1; c < 256; c++) {
        uint32_t p = base ^ c;
        if (p < units && da_label(a[p]) == c) return true;
    }
    return false;
}

bert8_status b8_ug_set_charsmap(b8_tokenizer *t, const uint8_t *blob, size_t n, const char *what,
                                b8_err *e) {
    free(t->ug.charsmap);
    t->ug.charsmap = NULL;
    t->ug.da = NULL;
    t->ug.da_units = 0;
    t->ug.norm = NULL;
    t->ug.norm_len = 0;
    if (n == 0) return BERT8_OK;
    if (n <= 4)
        return b8_fail(e, BERT8_ERR_FORMAT, "%s: precompiled_charsmap is %zu bytes, too short",
                       what, n);
    uint32_t trie_size = (uint32_t)blob[0] | (uint32_t)blob[1] << 8 | (uint32_t)blob[2] << 16 |
                         (uint32_t)blob[3] << 24;
    if ((size_t)trie_size >= n - 4 + 1 || trie_size % 4 != 0 || trie_size == 0)
        return b8_fail(e, BERT8_ERR_FORMAT,
                       "%s: precompiled_charsmap trie size %u does not fit its %zu bytes", what,
                       trie_size, n);
    /* copy so the units are 4-byte aligned and the strings end in a NUL we own */
    uint8_t *copy = malloc(n + 1);
    if (!copy) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory reading %s", what);
    memcpy(copy, blob, n);
    copy[n] = 0;
    t->ug.charsmap = copy;
    t->ug.da = (const uint32_t *)(void *)(copy + 4);
    t->ug.da_units = trie_size / 4;
    t->ug.norm = (const char *)copy + 4 + trie_size;
    t->ug.norm_len = n - 4 - trie_size;
    return BERT8_OK;
}

bert8_status b8_ug_finish(b8_tokenizer *t, b8_err *e) {
    t->ug.min_score = FLT_MAX;
    t->ug.max_score = FLT_MIN; /* sentencepiece starts from FLT_MIN too */
    bool any_user = false;
    for (int64_t i = 0; i < t->vocab_size; i++) {
        if (t->ug.type[i] == B8_SP_NORMAL) {
            if (t->ug.score[i] < t->ug.min_score) t->ug.min_score = t->ug.score[i];
            if (t->ug.score[i] > t->ug.max_score) t->ug.max_score = t->ug.score[i];
        }
        if (t->ug.type[i] == B8_SP_USER) any_user = true;
    }
    /* the piece trie holds normal, user-defined and unused pieces, as sentencepiece's does;
     * user-defined symbols also get a trie of their own for the normalizer */
    b8_ptrie_key *keys = malloc((size_t)t->vocab_size * sizeof *keys);
    if (!keys) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory building the piece trie");
    size_t nk = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1 && !any_user) break;
        nk = 0;
        for (int64_t i = 0; i < t->vocab_size; i++) {
            uint8_t ty = t->ug.type[i];
            bool take = pass == 0 ? (ty == B8_SP_NORMAL || ty == B8_SP_USER || ty == B8_SP_UNUSED)
                                  : ty == B8_SP_USER;
            if (!take) continue;
            size_t len = 0;
            const char *s = b8_tokenizer_id_to_token(t, (int32_t)i, &len);
            keys[nk++] = (b8_ptrie_key){s, (uint32_t)len, (int32_t)i, 0};
        }
        size_t dup = 0;
        bert8_status st =
            pass == 0 ? b8_ptrie_build(&t->trie, keys, nk, t->ug.score, t->ug.type, true, &dup, e)
                      : b8_ptrie_build(&t->ug.user, keys, nk, NULL, NULL, false, NULL, e);
        if (st == BERT8_ERR_FORMAT) {
            /* positions count the keys taken, in id order: find the repeated id */
            int64_t id = 0;
            for (size_t k = 0; id < t->vocab_size; id++) {
                uint8_t ty = t->ug.type[id];
                if (ty != B8_SP_NORMAL && ty != B8_SP_USER && ty != B8_SP_UNUSED) continue;
                if (k++ == dup) break;
            }
            free(keys);
            return b8_fail(e, BERT8_ERR_FORMAT, "piece %lld (\"%s\") is defined twice",
                           (long long)id, b8_tokenizer_id_to_token(t, (int32_t)id, NULL));
        }
        if (st != BERT8_OK) {
            free(keys);
            return st;
        }
    }
    free(keys);
    t->ug.has_user = any_user;
    /* ASCII bytes whose normalization does not depend on what follows get a table entry,
     * which keeps the per-character cost of plain text to one lookup. */
    for (int b = 0; b < 128; b++) {
        b8_ascii_norm *a = &t->ug.ascii[b];
        a->simple = 0;
        if (!t->ug.da) {
            a->simple = 2;
            a->len = 1;
            continue;
        }
        if (da_has_longer(t, (uint8_t)b)) continue;
        uint8_t key = (uint8_t)b;
        uint32_t v = 0;
        size_t m = da_longest(t, &key, 1, &v);
        if (m == 0) {
            a->simple = 2;
            a->len = 1;
        } else if (v < t->ug.norm_len) {
            size_t l = strlen(t->ug.norm + v);
            if (l > 255) continue;
            a->simple = 1;
            a->len = (uint8_t)l;
            a->off = v;
        }
    }
    return BERT8_OK;
}

/* NormalizePrefix: the replacement for the longest rule at s, or the first character
 * unchanged. *consumed gets the input bytes used. */
static const uint8_t *norm_prefix(const b8_tokenizer *t, const uint8_t *s, size_t n,
                                  size_t *out_len, size_t *consumed) {
    if (t->ug.has_user) {
        /* user-defined symbols are copied through before any rule */
        uint32_t node = 0;
        size_t best = 0;
        for (size_t i = 0; i < n; i++) {
            node = b8_ptrie_child(&t->ug.user, node, s[i]);
            if (!node) break;
            if (b8_ptrie_value(&t->ug.user, node) >= 0) best = i + 1;
        }
        if (best) {
            *out_len = best;
            *consumed = best;
            return s;
        }
    }
    if (s[0] < 0x80) {
        const b8_ascii_norm *a = &t->ug.ascii[s[0]];
        if (a->simple) {
            *consumed = 1;
            *out_len = a->len;
            return a->simple == 2 ? s : (const uint8_t *)t->ug.norm + a->off;
        }
    }
    uint32_t v = 0;
    size_t m = da_longest(t, s, n, &v);
    if (m > 0 && v < t->ug.norm_len) {
        *consumed = m;
        *out_len = strlen(t->ug.norm + v); /* NUL inside the strings or the one we appended */
        return (const uint8_t *)t->ug.norm + v;
    }
    size_t l = (size_t)b8_utf8_len(s[0]);
    if (l > n) l = n;
    *consumed = l;
    *out_len = l;
    return s;
}

/* Normalizer::Normalize over text[s, e) into sc->nb with origins; returns the length. */
static bool normalize(const b8_tokenizer *t, const uint8_t *text, int32_t s, int32_t e,
                      b8_tok_scratch *sc, size_t *out_n) {
    size_t n = 0;
    *out_n = 0;
    int32_t pos = s;
    size_t olen = 0, used = 0;
    if (t->ug.remove_extra_ws) {
        while (pos < e) {
            const uint8_t *o = norm_prefix(t, text + pos, (size_t)(e - pos), &olen, &used);
            if (!(olen == 1 && o[0] == ' ')) break;
            pos += (int32_t)used;
        }
    }
    if (pos >= e) return true;
    /* the output is at most 3x the input (' ' -> U+2581) plus expansions: grow as needed */
    if (!b8_scratch_bytes(sc, (size_t)(e - pos) * 3 + 16)) return false;
    if (t->ug.add_dummy_prefix) {
        if (t->ug.escape_ws) {
            for (int k = 0; k < 3; k++) {
                sc->nb[n] = kSpace[k];
                sc->nos[n] = sc->noe[n] = pos;
                n++;
            }
        } else {
            sc->nb[n] = ' ';
            sc->nos[n] = sc->noe[n] = pos;
            n++;
        }
    }
    bool prev_space = t->ug.remove_extra_ws;
    while (pos < e) {
        const uint8_t *o = norm_prefix(t, text + pos, (size_t)(e - pos), &olen, &used);
        size_t i = 0;
        while (prev_space && i < olen && o[i] == ' ')
            i++;
        if (i < olen) {
            if (!b8_scratch_bytes(sc, n + (olen - i) * 3 + (size_t)(e - pos) * 3 + 16))
                return false;
            for (; i < olen; i++) {
                if (t->ug.escape_ws && o[i] == ' ') {
                    for (int k = 0; k < 3; k++) {
                        sc->nb[n] = kSpace[k];
                        sc->nos[n] = pos;
                        sc->noe[n] = pos + (int32_t)used;
                        n++;
                    }
                } else {
                    sc->nb[n] = o[i];
                    sc->nos[n] = pos;
                    sc->noe[n] = pos + (int32_t)used;
                    n++;
                }
            }
            prev_space = o[olen - 1] == ' ';
        }
        pos += (int32_t)used;
        if (!t->ug.remove_extra_ws) prev_space = false;
    }
    if (t->ug.remove_extra_ws) {
        if (t->ug.escape_ws) {
            while (n >= 3 && !memcmp(sc->nb + n - 3, kSpace, 3))
                n -= 3;
        } else {
            while (n >= 1 && sc->nb[n - 1] == ' ')
                n--;
        }
    }
    *out_n = n;
    return true;
}

/* ---- Viterbi ------------------------------------------------------------------------ */

typedef struct best_node {
    float score;
    int32_t start; /* -1: not reached yet */
    int32_t id;
} best_node;

/* Final id of a merged run of unknown characters: what PieceToId would say about its text. */
static int32_t unk_run_id(const b8_tokenizer *t, const uint8_t *s, size_t n) {
    int32_t id = b8_ptrie_get(&t->trie, (const char *)s, n);
    if (id >= 0) return id;
    for (int i = 0; i < t->ug.n_reserved; i++)
        if (strlen(t->ug.reserved[i]) == n && !memcmp(t->ug.reserved[i], s, n))
            return t->ug.reserved_id[i];
    return t->ug.unk_id;
}

bert8_status b8_ug_tokenize(const b8_tokenizer *t, const uint8_t *text, int32_t s, int32_t e,
                            b8_tokseq *seq, b8_tok_scratch *sc, int32_t *word, b8_err *err) {
    size_t n = 0;
    if (!normalize(t, text, s, e, sc, &n))
        return b8_fail(err, BERT8_ERR_NOMEM, "out of memory while tokenizing");
    if (n == 0) return BERT8_OK;
    if (n >= (size_t)INT32_MAX)
        return b8_fail(err, BERT8_ERR_TOO_LARGE, "the normalized text is %zu bytes (limit 2 GiB)",
                       n);
    if (sc->lattice_cap < n + 1) {
        size_t cap = (n + 1) * 2;
        best_node *nl = realloc(sc->lattice, cap * sizeof *nl);
        if (!nl) return b8_fail(err, BERT8_ERR_NOMEM, "out of memory while tokenizing");
        sc->lattice = nl;
        sc->lattice_cap = cap;
    }
    best_node *best = sc->lattice;
    const uint8_t *nb = sc->nb;
    for (size_t i = 0; i <= n; i++) {
        best[i].start = -1;
        best[i].score = 0;
        best[i].id = -1;
    }
    const float unk_score = t->ug.min_score - 10.0f;
    const b8_da_unit *da = t->trie.da;
    const uint32_t da_n = t->trie.da_n;
    size_t at = 0;
    while (at < n) {
        const float till_here = best[at].score;
        size_t mblen = (size_t)b8_utf8_len(nb[at]);
        if (mblen > n - at) mblen = n - at;
        bool has_single = false;
        uint32_t node = 0;
        for (size_t k = at; k < n; k++) {
            uint32_t next = (uint32_t)da[node].base + nb[k];
            if (next >= da_n || da[next].check != (int32_t)node) break;
            node = next;
            int32_t v = da[node].value;
            if (v < 0 || (v & B8_PV_UNUSED)) continue;
            int32_t id = v & B8_PV_ID;
            size_t len = k + 1 - at;
            /* sentencepiece computes the candidate in double (the user-defined branch of
             * its conditional is double) and stores it as float: do the same so ties and
             * roundings land where the reference's do. */
            double sc_piece =
                (v & B8_PV_USER) ? (double)len * t->ug.max_score - 0.1 : (double)da[node].score;
            double cand = sc_piece + (double)till_here;
            best_node *tn = &best[k + 1];
            if (tn->start < 0 || cand > (double)tn->score) {
                tn->score = (float)cand;
                tn->start = (int32_t)at;
                tn->id = id;
            }
            if (len == mblen) has_single = true;
        }
        if (!has_single) {
            best_node *tn = &best[at + mblen];
            float cand = unk_score + till_here;
            if (tn->start < 0 || cand > tn->score) {
                tn->score = cand;
                tn->start = (int32_t)at;
                tn->id = t->ug.unk_id;
            }
        }
        at += mblen;
    }
    /* Backtrack: pieces come out in reverse; count them, then fill forward. */
    size_t count = 0;
    for (int64_t end = (int64_t)n; end > 0; end = best[end].start)
        count++;
    int64_t base = seq->n;
    if (!b8_tokseq_reserve(seq, base + (int64_t)count))
        return b8_fail(err, BERT8_ERR_NOMEM, "out of memory while tokenizing");
    /* park the pieces (start in os, end in oe) in the free tail of seq, in order */
    size_t k = count;
    int64_t end = (int64_t)n;
    while (end > 0) {
        k--;
        seq->os[base + (int64_t)k] = best[end].start;
        seq->oe[base + (int64_t)k] = (int32_t)end;
        seq->id[base + (int64_t)k] = best[end].id;
        end = best[end].start;
    }
    /* Emit, merging runs of unknown pieces into one (sentencepiece does so before HF sees
     * the pieces). */
    int64_t out = base;
    int32_t cur_word = *word - 1;
    bool first = true;
    for (size_t i = 0; i < count;) {
        int32_t a = seq->os[base + (int64_t)i], b = seq->oe[base + (int64_t)i];
        int32_t id = seq->id[base + (int64_t)i];
        size_t j = i + 1;
        if (id == t->ug.unk_id) {
            while (j < count && seq->id[base + (int64_t)j] == t->ug.unk_id) {
                b = seq->oe[base + (int64_t)j];
                j++;
            }
            id = unk_run_id(t, nb + a, (size_t)(b - a));
        }
        bool starts_ws = (b - a >= 3 && !memcmp(nb + a, kSpace, 3)) || (nb[a] == ' ');
        if (first || starts_ws) cur_word = (*word)++;
        first = false;
        /* offsets: skip the leading U+2581 when the piece has more after it */
        int32_t oa = sc->nos[a];
        if (b - a > 3 && !memcmp(nb + a, kSpace, 3)) oa = sc->nos[a + 3];
        int32_t ob = sc->noe[b - 1];
        if (ob < oa) ob = oa;
        /* the piece's text is its vocabulary entry, or for unknown runs what HF prints */
        const char *str = (const char *)nb + a;
        size_t slen = (size_t)(b - a);
        /* out <= base + i, so writing in place never clobbers entries still to be read */
        seq->n = out;
        if (!b8_tokseq_push(seq, id, oa, ob, cur_word, str, slen))
            return b8_fail(err, BERT8_ERR_NOMEM, "out of memory while tokenizing");
        out++;
        i = j;
    }
    seq->n = out;
    return BERT8_OK;
}
