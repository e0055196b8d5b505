/* bpe.c: the byte-level BPE model (GPT-2, RoBERTa, ModernBERT) as the `tokenizers` library
 * runs it: normalizer (NFC / Lowercase), ByteLevel pre-tokenizer (optional prefix space, the
 * GPT-2 split regex written out by hand), merges by rank, and the post-processor's offset
 * trimming. Added tokens are split off before this runs (encode.c).
 *
 * The split regex is
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * with \s = Unicode White_Space (Oniguruma's), \p{L} = categories L*, \p{N} = N*. Offsets: a
 * token covers bytes [a, b) of the normalized text; each byte maps to the span of the
 * character it came from, so a token made of part of a character covers all of it, as the
 * reference's alignments do. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "base/utf8.h"
#include "tokenizer/bpe.h"
#include "tokenizer/piece_trie.h"
#include "tokenizer/tokseq.h"
#include "tokenizer/unicode_text.h"

/* ---- GPT-2 byte alphabet --------------------------------------------------------------- */

/* Printable bytes stand for themselves; the others (0-32, 127-160, 173) take U+0100 onwards
 * in byte order. */
static bool byte_printable(int b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

static uint32_t byte_cp(uint8_t byte) {
    if (byte_printable(byte)) return byte;
    uint32_t n = 0;
    for (int b = 0; b < byte; b++)
        n += !byte_printable(b);
    return 256 + n;
}

int b8_bpe_byte_char(uint8_t byte, uint8_t out[2]) {
    return b8_utf8_put(byte_cp(byte), out);
}

int b8_bpe_char_byte(uint32_t cp) {
    if (cp < 256) return byte_printable((int)cp) ? (int)cp : -1;
    if (cp >= 256 + 68) return -1; /* 68 bytes are not printable */
    uint32_t n = cp - 256;
    for (int b = 0; b < 256; b++)
        if (!byte_printable(b) && n-- == 0) return b;
    return -1;
}

/* ---- Character classes of the split regex ---------------------------------------------- */

enum { C_OTHER = 0, C_LETTER = 1, C_NUMBER = 2, C_SPACE = 3 };

/* Unicode White_Space: Oniguruma's \s and Rust's char::is_whitespace. */
static bool is_white_space(uint32_t cp) {
    if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
           cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

static int char_class(uint32_t cp) {
    if (cp < 0x80) {
        if ((cp | 32) >= 'a' && (cp | 32) <= 'z') return C_LETTER;
        if (cp >= '0' && cp <= '9') return C_NUMBER;
        return is_white_space(cp) ? C_SPACE : C_OTHER;
    }
    if (is_white_space(cp)) return C_SPACE;
    int c = b8_uni_category(cp);
    if (c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO) return C_LETTER;
    if (c >= UTF8PROC_CATEGORY_ND && c <= UTF8PROC_CATEGORY_NO) return C_NUMBER;
    return C_OTHER;
}

/* Class and length of the character at s[i] (valid UTF-8). */
static inline int class_at(const uint8_t *s, size_t i, int *len) {
    if (s[i] < 0x80) {
        *len = 1;
        uint8_t c = s[i];
        if ((c | 32) >= 'a' && (c | 32) <= 'z') return C_LETTER;
        if (c >= '0' && c <= '9') return C_NUMBER;
        return (c == ' ' || (c >= 0x09 && c <= 0x0D)) ? C_SPACE : C_OTHER;
    }
    uint32_t cp;
    *len = b8_utf8_next(s + i, &cp);
    return char_class(cp);
}

/* End of the run of characters of class cls starting at i. */
static size_t run_end(const uint8_t *s, size_t n, size_t i, int cls) {
    while (i < n) {
        int l;
        if (class_at(s, i, &l) != cls) break;
        i += (size_t)l;
    }
    return i;
}

/* The end of the regex match starting at i (< n). */
static size_t split_next(const uint8_t *s, size_t n, size_t i) {
    if (s[i] == '\'' && i + 1 < n) {
        uint8_t c = s[i + 1];
        if (c == 's' || c == 't' || c == 'm' || c == 'd') return i + 2;
        if (i + 2 < n && ((c == 'r' && s[i + 2] == 'e') || (c == 'v' && s[i + 2] == 'e') ||
                          (c == 'l' && s[i + 2] == 'l')))
            return i + 3;
    }
    int l;
    int cls = class_at(s, i, &l);
    if (s[i] == ' ' && i + 1 < n) {
        int l2;
        int c2 = class_at(s, i + 1, &l2);
        if (c2 != C_SPACE) return run_end(s, n, i + 1, c2);
    }
    if (cls != C_SPACE) return run_end(s, n, i, cls);
    /* \s+(?!\S): the run, less its last character when something follows; \s+ for one */
    size_t j = i, last = i;
    while (j < n) {
        int lj;
        if (class_at(s, j, &lj) != C_SPACE) break;
        last = j;
        j += (size_t)lj;
    }
    if (j == n || last == i) return j;
    return last;
}

/* ---- Normalization into the scratch bytes ---------------------------------------------- */

/* b8_uni_nfc gives every character of a composed group the group's span; `tokenizers`
 * aligns them in order: a group of n input characters that comes out as m < n characters has
 * its first output character on the first input character (the starter it composed onto),
 * the n - m characters after that vanish, and output character k >= 1 takes input character
 * k + n - m, whichever mark that is (a + U+0327 + U+0308 -> U+00E4 U+0327: the cedilla gets the
 * diaeresis' span, as in `tokenizers`); a group that grows (m > n) keeps its last input
 * character for the extra outputs. Valid while the spans are still those of single input
 * characters, i.e. when NFC runs first. */
static void nfc_align(const uint8_t *text, b8_ucps *u) {
    for (size_t i = 0; i < u->n;) {
        size_t j = i + 1;
        while (j < u->n && u->os[j] == u->os[i] && u->oe[j] == u->oe[i])
            j++;
        int32_t p = u->os[i], end = u->oe[i];
        if (j - i > 1 || end - p > b8_utf8_len(text[p])) {
            size_t n_in = 0;
            for (int32_t x = p; x < end; x += b8_utf8_len(text[x]))
                n_in++;
            const size_t n_out = j - i, gone = n_in > n_out ? n_in - n_out : 0;
            size_t at = 0; /* input character index of p */
            for (size_t q = i; q < j; q++) {
                size_t want = q == i ? 0 : q - i + gone;
                if (want > n_in - 1) want = n_in - 1;
                for (; at < want; at++)
                    p += b8_utf8_len(text[p]);
                u->os[q] = p;
                u->oe[q] = p + b8_utf8_len(text[p]);
            }
        }
        i = j;
    }
}

/* text[s, e) normalized into sc->nb (with the prefix space when configured), each byte with
 * the origin span of its character; *out_n gets the length. */
static bool normalize(const b8_tokenizer *t, const uint8_t *text, int32_t s, int32_t e,
                      b8_tok_scratch *sc, size_t *out_n) {
    size_t n = 0;
    *out_n = 0;
    if (s >= e) return true;
    const b8_ucps *w = NULL;
    if (t->bpe.n_norm > 0) {
        b8_ucps *u = &sc->word;
        u->n = 0;
        for (int32_t i = s; i < e;) {
            uint32_t cp;
            int l = b8_utf8_next(text + i, &cp);
            if (!b8_ucps_push(u, cp, i, i + l)) return false;
            i += l;
        }
        for (int k = 0; k < t->bpe.n_norm; k++) {
            if (t->bpe.norm[k] == B8_BPE_NORM_NFC) {
                if (!b8_uni_nfc(u, &sc->tmp, &sc->nfc)) return false;
                if (k == 0) nfc_align(text, u);
            } else {
                b8_ucps *o = &sc->tmp;
                o->n = 0;
                for (size_t i = 0; i < u->n; i++) {
                    uint32_t lc[2];
                    int m = b8_uni_lower(u->cp[i], lc);
                    for (int j = 0; j < m; j++)
                        if (!b8_ucps_push(o, lc[j], u->os[i], u->oe[i])) return false;
                }
                b8_ucps swap = *u;
                *u = *o;
                *o = swap;
            }
        }
        if (u->n == 0) return true;
        w = u;
    }
    /* ByteLevel's add_prefix_space: a space before a piece that does not start with one,
     * aligned to the first character */
    bool prefix = t->bpe.add_prefix_space && (w ? w->cp[0] != ' ' : text[s] != ' ');
    size_t cap = w ? w->n * 4 + 1 : (size_t)(e - s) + 1;
    if (!b8_scratch_bytes(sc, cap)) return false;
    uint8_t *nb = sc->nb;
    int32_t *nos = sc->nos, *noe = sc->noe;
    if (prefix) {
        nb[0] = ' ';
        nos[0] = w ? w->os[0] : s;
        noe[0] = w ? w->oe[0] : s + b8_utf8_len(text[s]);
        n = 1;
    }
    if (!w) {
        for (int32_t i = s; i < e;) {
            if (text[i] < 0x80) {
                nb[n] = text[i];
                nos[n] = i;
                noe[n++] = i + 1;
                i++;
                continue;
            }
            int l = b8_utf8_len(text[i]);
            for (int k = 0; k < l; k++, n++) {
                nb[n] = text[i + k];
                nos[n] = i;
                noe[n] = i + l;
            }
            i += l;
        }
    } else {
        for (size_t i = 0; i < w->n; i++) {
            uint8_t buf[4];
            int l = b8_utf8_put(w->cp[i], buf);
            for (int k = 0; k < l; k++, n++) {
                nb[n] = buf[k];
                nos[n] = w->os[i];
                noe[n] = w->oe[i];
            }
        }
    }
    *out_n = n;
    return true;
}

/* ---- Merges ------------------------------------------------------------------------------ */

static inline uint32_t pair_hash(int32_t l, int32_t r) {
    uint64_t k = ((uint64_t)(uint32_t)l << 32) | (uint32_t)r;
    k *= 0x9E3779B97F4A7C15ull;
    return (uint32_t)(k >> 32);
}

static inline const b8_bpe_merge *find_merge(const b8_tokenizer *t, int32_t l, int32_t r) {
    uint32_t m = t->bpe.merge_mask;
    for (uint32_t h = pair_hash(l, r) & m;; h = (h + 1) & m) {
        const b8_bpe_merge *e = &t->bpe.merges[h];
        if (e->left < 0) return NULL;
        if (e->left == l && e->right == r) return e;
    }
}

typedef struct sym {
    int32_t id;
    int32_t len; /* bytes; 0 once merged into its left neighbour */
    int32_t prev, next;
} sym;

typedef struct qent {
    int32_t rank, pos, new_id;
    int32_t left, right; /* the pair when pushed: still there means still valid */
} qent;

static inline bool q_less(const qent *a, const qent *b) {
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void q_push(qent *q, size_t *n, qent v) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!q_less(&v, &q[p])) break;
        q[i] = q[p];
        i = p;
    }
    q[i] = v;
}

static qent q_pop(qent *q, size_t *n) {
    qent top = q[0], last = q[--*n];
    size_t i = 0, m = *n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= m) break;
        if (c + 1 < m && q_less(&q[c + 1], &q[c])) c++;
        if (!q_less(&q[c], &last)) break;
        q[i] = q[c];
        i = c;
    }
    if (m) q[i] = last;
    return top;
}

static void q_pair(const b8_tokenizer *t, const sym *sy, qent *q, size_t *nq, int32_t pos) {
    int32_t nx = sy[pos].next;
    if (nx < 0) return;
    const b8_bpe_merge *m = find_merge(t, sy[pos].id, sy[nx].id);
    if (m) q_push(q, nq, (qent){m->rank, pos, m->new_id, sy[pos].id, sy[nx].id});
}

/* ignore_merges: the whole word's GPT-2 string when it is in the vocabulary, else -1. */
static int32_t whole_word_id(const b8_tokenizer *t, const uint8_t *w, size_t m) {
    uint32_t node = 0;
    for (size_t k = 0; k < m; k++) {
        uint8_t c[2];
        int l = b8_bpe_byte_char(w[k], c);
        node = b8_ptrie_walk(&t->trie, node, (const char *)c, (size_t)l);
        if (node == B8_PTRIE_NONE) return -1;
    }
    int32_t v = b8_ptrie_value(&t->trie, node);
    return v >= 0 ? (v & B8_PV_ID) : -1;
}

/* A cache of words already merged, kept in the scratch across calls (one per result, so per
 * thread), direct-mapped; tagged with the tokenizer it belongs to (b8_tokenizer.bpe.tag,
 * unique to each load), so a result reused with another tokenizer starts it afresh. */
#define CACHE_SLOTS 16384
#define CACHE_KEY 22
#define CACHE_TOKS 8

typedef struct cache_ent {
    uint32_t hash;
    uint8_t klen, ntok; /* klen 0: empty */
    uint8_t key[CACHE_KEY];
    int32_t id[CACHE_TOKS];
    uint8_t len[CACHE_TOKS];
} cache_ent;

typedef struct word_cache {
    uint64_t tag;
    cache_ent ent[CACHE_SLOTS];
} word_cache;

static word_cache *cache_for(const b8_tokenizer *t, b8_tok_scratch *sc) {
    word_cache *c = sc->bpe_cache;
    if (!c) {
        c = calloc(1, sizeof *c);
        if (!c) return NULL; /* run without one */
        sc->bpe_cache = c;
        c->tag = t->bpe.tag;
    }
    if (c->tag != t->bpe.tag) {
        memset(c, 0, sizeof *c);
        c->tag = t->bpe.tag;
    }
    return c;
}

static inline uint32_t word_hash(const uint8_t *w, size_t m) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < m; i++)
        h = (h ^ w[i]) * 16777619u;
    return h;
}

/* Appends the tokens (ids with their byte lengths) of the word at nb[a...]. */
static bert8_status emit(const b8_tokenizer *t, const uint8_t *text, b8_tok_scratch *sc, size_t a,
                         const int32_t *ids, const int32_t *lens, int32_t n, b8_tokseq *seq,
                         int32_t word, b8_err *err) {
    size_t pos = a;
    for (int32_t i = 0; i < n; i++) {
        size_t end = pos + (size_t)lens[i];
        int32_t os = sc->nos[pos], oe = sc->noe[end - 1];
        size_t slen = 0;
        const char *str = b8_tokenizer_id_to_token(t, ids[i], &slen);
        b8_bpe_trim_offsets(t, text, str, slen, seq->n == 0, &os, &oe);
        if (!b8_tokseq_push(seq, ids[i], os, oe, word, str, slen))
            return b8_fail(err, BERT8_ERR_NOMEM, "out of memory while tokenizing");
        pos = end;
    }
    return BERT8_OK;
}

/* BPE of one word (nb[a, b)); tokens go to seq with word index `word`. */
static bert8_status bpe_word(const b8_tokenizer *t, const uint8_t *text, b8_tok_scratch *sc,
                             size_t a, size_t b, b8_tokseq *seq, int32_t word, b8_err *err) {
    const uint8_t *w = sc->nb + a;
    size_t m = b - a;
    cache_ent *ce = NULL;
    uint32_t h = 0;
    if (m <= CACHE_KEY) {
        word_cache *c = cache_for(t, sc);
        if (c) {
            h = word_hash(w, m);
            ce = &c->ent[h & (CACHE_SLOTS - 1)];
            if (ce->klen == m && ce->hash == h && !memcmp(ce->key, w, m)) {
                int32_t lens[CACHE_TOKS];
                for (int i = 0; i < ce->ntok; i++)
                    lens[i] = ce->len[i];
                return emit(t, text, sc, a, ce->id, lens, ce->ntok, seq, word, err);
            }
        }
    }
    if (sc->bpe_cap < m) {
        size_t cap = m < 64 ? 64 : m + m / 2;
        sym *ns = realloc(sc->bpe_sym, cap * sizeof *ns);
        if (ns) sc->bpe_sym = ns;
        qent *nq = realloc(sc->bpe_heap, cap * 3 * sizeof *nq); /* at most 2m entries at once */
        if (nq) sc->bpe_heap = nq;
        if (!ns || !nq) return b8_fail(err, BERT8_ERR_NOMEM, "out of memory while tokenizing");
        sc->bpe_cap = cap;
    }
    sym *sy = sc->bpe_sym;
    int32_t ns = 0;
    int32_t whole = t->bpe.ignore_merges ? whole_word_id(t, w, m) : -1;
    if (whole >= 0) {
        sy[ns++] = (sym){whole, (int32_t)m, -1, -1};
    } else {
        /* initial symbols (Word::add in merge_word): one per byte; missing ones become the
         * unknown token (runs fused with fuse_unk) or are dropped */
        int32_t unk_len = 0;
        for (size_t k = 0; k < m; k++) {
            int tab = (k > 0 ? 1 : 0) | (k + 1 == m ? 2 : 0);
            int32_t id = t->bpe.byte_id[tab][w[k]];
            if (id >= 0) {
                if (unk_len) {
                    sy[ns] = (sym){t->bpe.unk_id, unk_len, ns - 1, -1};
                    ns++;
                    unk_len = 0;
                }
                sy[ns] = (sym){id, 1, ns - 1, -1};
                ns++;
                continue;
            }
            if (t->bpe.unk_id == -2)
                return b8_fail(err, BERT8_ERR_ENCODING,
                               "byte 0x%02X has no token and the unk_token is not in the "
                               "vocabulary",
                               w[k]);
            if (t->bpe.unk_id < 0) continue;
            if (unk_len && !t->bpe.fuse_unk) {
                sy[ns] = (sym){t->bpe.unk_id, unk_len, ns - 1, -1};
                ns++;
                unk_len = 0;
            }
            unk_len++;
        }
        if (unk_len) {
            sy[ns] = (sym){t->bpe.unk_id, unk_len, ns - 1, -1};
            ns++;
        }
        for (int32_t i = 0; i + 1 < ns; i++)
            sy[i].next = i + 1;
        if (ns > 1) {
            qent *q = sc->bpe_heap;
            size_t nq = 0;
            for (int32_t i = 0; i + 1 < ns; i++)
                q_pair(t, sy, q, &nq, i);
            while (nq) {
                qent top = q_pop(q, &nq);
                sym *s0 = &sy[top.pos];
                if (s0->len == 0 || s0->next < 0) continue;
                sym *s1 = &sy[s0->next];
                if (s0->id != top.left || s1->id != top.right) {
                    /* the pair changed: the entry is expired unless the new pair makes the
                     * same token (the reference checks the new id only) */
                    const b8_bpe_merge *cur = find_merge(t, s0->id, s1->id);
                    if (!cur || cur->new_id != top.new_id) continue;
                }
                s0->id = top.new_id;
                s0->len += s1->len;
                s1->len = 0;
                s0->next = s1->next;
                if (s0->next >= 0) sy[s0->next].prev = top.pos;
                if (s0->prev >= 0) q_pair(t, sy, q, &nq, s0->prev);
                q_pair(t, sy, q, &nq, top.pos);
            }
        }
    }
    /* the kept symbols, in order, compacted into ids/lens (sy is read ahead of the writes);
     * offsets count their lengths, as Word::get_offsets does */
    int32_t *ids = (int32_t *)sc->bpe_heap, *lens = ids + m;
    int32_t nk = 0;
    for (int32_t i = 0; i < ns; i++) {
        if (sy[i].len == 0) continue;
        ids[nk] = sy[i].id;
        lens[nk++] = sy[i].len;
    }
    if (ce && nk <= CACHE_TOKS) {
        ce->hash = h;
        ce->klen = (uint8_t)m;
        ce->ntok = (uint8_t)nk;
        memcpy(ce->key, w, m);
        for (int32_t i = 0; i < nk; i++) {
            ce->id[i] = ids[i];
            ce->len[i] = (uint8_t)lens[i];
        }
    }
    return emit(t, text, sc, a, ids, lens, nk, seq, word, err);
}

bert8_status b8_bpe_tokenize(const b8_tokenizer *t, const uint8_t *text, int32_t s, int32_t e,
                             b8_tokseq *seq, b8_tok_scratch *sc, int32_t *word, b8_err *err) {
    size_t n = 0;
    if (!normalize(t, text, s, e, sc, &n))
        return b8_fail(err, BERT8_ERR_NOMEM, "out of memory while tokenizing");
    for (size_t i = 0; i < n;) {
        size_t j = t->bpe.use_regex ? split_next(sc->nb, n, i) : n;
        bert8_status st = bpe_word(t, text, sc, i, j, seq, (*word)++, err);
        if (st != BERT8_OK) return st;
        i = j;
    }
    return BERT8_OK;
}

/* ---- Offset trimming (RobertaProcessing / ByteLevel post-processor) ---------------------- */

/* Characters at the start (from_end: the end) of str that are U+0120 (the space's GPT-2
 * character) or White_Space. */
static size_t count_spaces(const char *str, size_t len, bool from_end) {
    const uint8_t *s = (const uint8_t *)str;
    size_t k = 0;
    if (!from_end) {
        for (size_t i = 0; i < len;) {
            uint32_t cp;
            int l = b8_utf8_next(s + i, &cp);
            if (cp != 0x120 && !is_white_space(cp)) break;
            k++;
            i += (size_t)l;
        }
        return k;
    }
    for (size_t i = len; i > 0;) {
        size_t p = i - 1;
        while (p > 0 && (s[p] & 0xC0) == 0x80)
            p--;
        uint32_t cp;
        b8_utf8_next(s + p, &cp);
        if (cp != 0x120 && !is_white_space(cp)) break;
        k++;
        i = p;
    }
    return k;
}

void b8_bpe_trim_offsets(const b8_tokenizer *t, const uint8_t *text, const char *str, size_t len,
                         bool first, int32_t *os, int32_t *oe) {
    if (!t->bpe.trim_offsets || len == 0) return;
    size_t lead = count_spaces(str, len, false);
    if (lead == 0 && ((uint8_t)str[len - 1] < 0x80 && str[len - 1] != ' ' &&
                      !(str[len - 1] >= 0x09 && str[len - 1] <= 0x0D)))
        return; /* the common case: nothing to trim */
    size_t trail = count_spaces(str, len, true);
    /* the reference counts in characters: step over characters of the text */
    if (lead > 0) {
        if ((first || *os == 0) && t->bpe.trim_prefix_space && lead == 1) lead = 0;
        int32_t p = *os;
        for (size_t k = 0; k < lead && p < *oe; k++)
            p += b8_utf8_len(text[p]);
        *os = p < *oe ? p : *oe;
    }
    if (trail > 0) {
        int32_t p = *oe;
        size_t k = 0;
        for (; k < trail && p > 0; k++) {
            p--;
            while (p > 0 && (text[p] & 0xC0) == 0x80)
                p--;
        }
        if (k == trail) *oe = p > *os ? p : *os; /* end >= trailing (in characters) */
    }
}
