/* tokenizer.c: the tokenizer object and the encoding layer: verbatim matching of added and
 * special tokens, the model run in between, templates, truncation, overflow windows,
 * padding and batches. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

/* ---- Object ---------------------------------------------------------------------------- */

b8_tokenizer *b8_tok_alloc(b8_tok_kind kind) {
    b8_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->kind = kind;
    t->model_max_length = 512;
    for (int i = 0; i < B8_SPECIAL_COUNT; i++)
        t->special[i] = -1;
    t->wp.max_chars = 100;
    t->wp.cont_node = B8_PTRIE_NONE;
    t->wp.unk_id = -1;
    t->wp.clean_text = true;
    t->wp.chinese = true;
    t->ug.unk_id = -1;
    return t;
}

void b8_tokenizer_free(b8_tokenizer *t) {
    if (!t) return;
    free(t->tok_blob);
    free(t->tok_off);
    b8_ptrie_free(&t->trie);
    for (int i = 0; i < t->n_added; i++) {
        free(t->added[i].content);
        free(t->added[i].folded);
    }
    free(t->added);
    free(t->wp.unk_token);
    free(t->wp.prefix);
    b8_added_index_free(t);
    free(t->ug.score);
    free(t->ug.type);
    free(t->ug.charsmap);
    b8_ptrie_free(&t->ug.user);
    b8_bpe_free(t);
    for (int i = 0; i < t->ug.n_reserved; i++)
        free(t->ug.reserved[i]);
    free(t->ug.reserved);
    free(t->ug.reserved_id);
    free(t);
}

bert8_status b8_tok_set_tokens(b8_tokenizer *t, const char *const *toks, const size_t *lens,
                               int64_t n, b8_err *e) {
    if (n < 0 || n > B8_TOK_MAX_VOCAB)
        return b8_fail(e, BERT8_ERR_TOO_LARGE, "%lld tokens, over the limit of %lld",
                       (long long)n, (long long)B8_TOK_MAX_VOCAB);
    size_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        if (lens[i] > B8_TOK_MAX_TOKEN_BYTES)
            return b8_fail(e, BERT8_ERR_TOO_LARGE,
                           "token %lld (\"%.40s...\") is %zu bytes, over the limit of %d",
                           (long long)i, toks[i], lens[i], B8_TOK_MAX_TOKEN_BYTES);
        total += lens[i] + 1; /* cannot overflow: n and each length are bounded */
    }
    char *blob = malloc(total ? total : 1);
    int64_t *off = malloc((size_t)(n + 1) * sizeof *off);
    if (!blob || !off) {
        free(blob);
        free(off);
        return b8_fail(e, BERT8_ERR_NOMEM, "out of memory storing the vocabulary");
    }
    size_t at = 0;
    for (int64_t i = 0; i < n; i++) {
        off[i] = (int64_t)at;
        if (lens[i]) memcpy(blob + at, toks[i], lens[i]);
        blob[at + lens[i]] = 0;
        at += lens[i] + 1;
    }
    off[n] = (int64_t)at;
    free(t->tok_blob);
    free(t->tok_off);
    t->tok_blob = blob;
    t->tok_off = off;
    t->blob_cap = total ? total : 1;
    t->off_cap = (size_t)n + 1;
    t->vocab_size = n;
    return BERT8_OK;
}

/* Grows the vocabulary to `size` ids in one step: `pad` empty tokens, then s (len bytes) as
 * the last one. New Unigram entries are control pieces with score 0 (outside the Viterbi),
 * padding ones are no piece at all. */
static bert8_status grow_tokens(b8_tokenizer *t, int64_t pad, const char *s, size_t len,
                                b8_err *e) {
    int64_t size = t->vocab_size + pad + 1;
    if (size > B8_TOK_MAX_VOCAB)
        return b8_fail(e, BERT8_ERR_TOO_LARGE, "vocabulary of %lld tokens, over the limit of %lld",
                       (long long)size, (long long)B8_TOK_MAX_VOCAB);
    if (len > B8_TOK_MAX_TOKEN_BYTES)
        return b8_fail(e, BERT8_ERR_TOO_LARGE, "token \"%.40s...\" is %zu bytes, over the limit of %d",
                       s, len, B8_TOK_MAX_TOKEN_BYTES);
    size_t old = (size_t)t->tok_off[t->vocab_size];
    size_t add = (size_t)pad + len + 1;
    if (old + add > t->blob_cap) {
        const size_t cap = old + add + (old + add) / 2;
        char *blob = realloc(t->tok_blob, cap);
        if (!blob) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory adding a token");
        t->tok_blob = blob;
        t->blob_cap = cap;
    }
    char *blob = t->tok_blob;
    if ((size_t)size + 1 > t->off_cap) {
        const size_t cap = (size_t)size + 1 + ((size_t)size + 1) / 2;
        int64_t *off = realloc(t->tok_off, cap * sizeof *off);
        if (!off) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory adding a token");
        t->tok_off = off;
        t->off_cap = cap;
    }
    int64_t *off = t->tok_off;
    if (t->kind == B8_TOK_UNIGRAM && t->ug.score) {
        if ((size_t)size > t->ug_cap) { /* 0 at first: exactly the pieces were allocated */
            const size_t cap = (size_t)size + (size_t)size / 2;
            float *grown = realloc(t->ug.score, cap * sizeof *grown);
            if (grown) t->ug.score = grown;
            uint8_t *ty = grown ? realloc(t->ug.type, cap) : NULL;
            if (ty) t->ug.type = ty;
            if (!grown || !ty) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory adding a token");
            t->ug_cap = cap;
        }
        float *sc = t->ug.score;
        uint8_t *ty = t->ug.type;
        for (int64_t i = t->vocab_size; i < size; i++) {
            sc[i] = 0;
            ty[i] = i == size - 1 ? B8_SP_CONTROL : 0;
        }
    }
    size_t at = old;
    for (int64_t i = t->vocab_size; i < size - 1; i++) {
        blob[at] = 0;
        off[i + 1] = (int64_t)++at;
    }
    if (len) memcpy(blob + at, s, len);
    blob[at + len] = 0;
    off[size] = (int64_t)(at + len + 1);
    t->vocab_size = size;
    return BERT8_OK;
}

int32_t b8_tok_append_token(b8_tokenizer *t, const char *s, size_t len, b8_err *e) {
    if (grow_tokens(t, 0, s, len, e) != BERT8_OK) return -1;
    return (int32_t)(t->vocab_size - 1);
}

/* Id by vocabulary only (no added tokens), as the model's own lookup gives it. */
static int32_t vocab_lookup(const b8_tokenizer *t, const char *s, size_t len) {
    if (t->kind != B8_TOK_UNIGRAM) return b8_ptrie_get(&t->trie, s, len);
    if (t->ug.fairseq) {
        static const char *const fixed[4] = {"<s>", "<pad>", "</s>", "<unk>"};
        for (int k = 0; k < 4; k++)
            if (len == strlen(fixed[k]) && !memcmp(s, fixed[k], len)) return k;
        if (len == 6 && !memcmp(s, "<mask>", 6)) return (int32_t)t->ug.spm_size + 1;
    }
    for (int i = 0; i < t->ug.n_reserved; i++)
        if (strlen(t->ug.reserved[i]) == len && !memcmp(t->ug.reserved[i], s, len))
            return t->ug.reserved_id[i];
    int32_t id = b8_ptrie_get(&t->trie, s, len);
    return id >= 0 ? id : t->ug.unk_id;
}

bert8_status b8_tok_add_token(b8_tokenizer *t, const char *content, size_t len, int32_t id,
                              bool lstrip, bool rstrip, bool single_word, bool special, b8_err *e) {
    if (len == 0) return BERT8_OK; /* HF ignores empty added tokens */
    if (len > B8_TOK_MAX_TOKEN_BYTES)
        return b8_fail(e, BERT8_ERR_TOO_LARGE,
                       "added token \"%.40s...\" is %zu bytes, over the limit of %d", content, len,
                       B8_TOK_MAX_TOKEN_BYTES);
    size_t bad = b8_utf8_invalid_at((const uint8_t *)content, len);
    if (bad < len)
        return b8_fail(e, BERT8_ERR_FORMAT, "added token \"%.*s\" is not valid UTF-8 at byte %zu",
                       (int)len, content, bad);
    /* An explicit id past the vocabulary grows it first, also when the token is already
     * added under another id (fuzz_tokenizer_json: the update used to keep an id past the
     * end, and later lookups indexed past the tables). */
    if (id >= t->vocab_size) {
        /* decided before anything is allocated: a far-away id is a broken file, not a
         * reason to allocate gigabytes */
        if ((int64_t)id - t->vocab_size > B8_TOK_MAX_ID_GAP || (int64_t)id >= B8_TOK_MAX_VOCAB)
            return b8_fail(e, BERT8_ERR_TOO_LARGE,
                           "added token \"%.*s\" has id %d, more than %lld past the end of the "
                           "vocabulary (%lld tokens)",
                           (int)(len < 60 ? len : 60), content, (int)id,
                           (long long)B8_TOK_MAX_ID_GAP, (long long)t->vocab_size);
        bert8_status st = grow_tokens(t, (int64_t)id - t->vocab_size, content, len, e);
        if (st != BERT8_OK) return st;
    }
    const int at = b8_added_find(t, content, len);
    if (at >= 0) { /* already added: an update */
        b8_added_token *a = &t->added[at];
        a->lstrip = lstrip;
        a->rstrip = rstrip;
        a->single_word = single_word;
        a->special = a->special || special;
        if (id >= 0) a->id = id;
        return BERT8_OK;
    }
    if (id < 0) {
        id = vocab_lookup(t, content, len);
        int32_t unk = t->kind == B8_TOK_WORDPIECE ? t->wp.unk_id
                      : t->kind == B8_TOK_BPE     ? t->bpe.unk_id
                                                  : t->ug.unk_id;
        size_t unk_len = 0;
        const char *unk_s = unk >= 0 ? b8_tokenizer_id_to_token(t, unk, &unk_len) : NULL;
        bool is_unk = unk_s && unk_len == len && !memcmp(unk_s, content, len);
        if (id < 0 || (id == unk && !is_unk)) {
            id = b8_tok_append_token(t, content, len, e);
            if (id < 0) return e ? e->status : BERT8_ERR_NOMEM;
        }
    }
    if ((size_t)t->n_added + 1 > t->added_cap) {
        const size_t cap = 16 + (size_t)t->n_added + (size_t)t->n_added / 2;
        b8_added_token *grown = realloc(t->added, cap * sizeof *grown);
        if (!grown) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory adding a token");
        t->added = grown;
        t->added_cap = cap;
    }
    b8_added_token *na = t->added;
    char *c = malloc(len + 1);
    if (!c) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory adding a token");
    memcpy(c, content, len);
    c[len] = 0;
    na[t->n_added++] = (b8_added_token){c, len, id, lstrip, rstrip, single_word, special, false, false, NULL, 0};
    return b8_added_index_add(t, t->n_added - 1, e);
}

void b8_tok_default_templates(b8_tokenizer *t) {
    int32_t cls = t->special[B8_SPECIAL_CLS], sep = t->special[B8_SPECIAL_SEP];
    b8_tmpl_item *s = t->tmpl_single, *p = t->tmpl_pair;
    t->n_single = t->n_pair = 0;
    if (cls >= 0) s[t->n_single++] = (b8_tmpl_item){B8_TMPL_SPECIAL, 0, cls};
    s[t->n_single++] = (b8_tmpl_item){B8_TMPL_SEQ_A, 0, 0};
    if (sep >= 0) s[t->n_single++] = (b8_tmpl_item){B8_TMPL_SPECIAL, 0, sep};
    if (cls >= 0) p[t->n_pair++] = (b8_tmpl_item){B8_TMPL_SPECIAL, 0, cls};
    p[t->n_pair++] = (b8_tmpl_item){B8_TMPL_SEQ_A, 0, 0};
    if (sep >= 0) p[t->n_pair++] = (b8_tmpl_item){B8_TMPL_SPECIAL, 0, sep};
    if (t->kind == B8_TOK_WORDPIECE) {
        /* [CLS] A [SEP] B [SEP], the second part with token type 1 */
        p[t->n_pair++] = (b8_tmpl_item){B8_TMPL_SEQ_B, 1, 0};
        if (sep >= 0) p[t->n_pair++] = (b8_tmpl_item){B8_TMPL_SPECIAL, 1, sep};
    } else {
        /* <s> A </s></s> B </s>, all token type 0 */
        if (sep >= 0) p[t->n_pair++] = (b8_tmpl_item){B8_TMPL_SPECIAL, 0, sep};
        p[t->n_pair++] = (b8_tmpl_item){B8_TMPL_SEQ_B, 0, 0};
        if (sep >= 0) p[t->n_pair++] = (b8_tmpl_item){B8_TMPL_SPECIAL, 0, sep};
    }
}

/* Bytes of s whose character-by-character lower case (str.lower on each character) is
 * exactly tok, or 0. */
static size_t lowered_match(const uint8_t *s, size_t n, const char *tok, size_t tl) {
    size_t i = 0, j = 0;
    while (j < tl) {
        if (i >= n) return 0;
        uint32_t cp, lc[2];
        int l = b8_utf8_len(s[i]);
        if ((size_t)l > n - i) return 0;
        b8_utf8_next(s + i, &cp);
        int k = b8_uni_lower(cp, lc);
        for (int m = 0; m < k; m++) {
            uint8_t buf[4];
            int bl = b8_utf8_put(lc[m], buf);
            if (j + (size_t)bl > tl || memcmp(tok + j, buf, (size_t)bl)) return 0;
            j += (size_t)bl;
        }
        i += (size_t)l;
    }
    return i;
}

static int cmp_added(const void *a, const void *b) {
    const b8_added_token *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return memcmp(x->content, y->content, x->len);
}

bert8_status b8_tok_finish(b8_tokenizer *t, b8_err *e) {
    if (!t->trie.da) return b8_fail(e, BERT8_ERR_INTERNAL, "the tokenizer has no vocabulary");
    if (t->kind == B8_TOK_WORDPIECE) {
        const char *pre = t->wp.prefix ? t->wp.prefix : "##";
        t->wp.cont_node = b8_ptrie_walk(&t->trie, 0, pre, strlen(pre));
    }
    if (t->n_added > 1) qsort(t->added, (size_t)t->n_added, sizeof *t->added, cmp_added);
    memset(t->added_first, 0, sizeof t->added_first);
    for (int i = 0; i < t->n_added; i++) {
        b8_added_token *a = &t->added[i];
        t->added_first[(uint8_t)a->content[0]] = 1;
        bool lower = t->kind == B8_TOK_WORDPIECE && t->wp.lowercase;
        for (int k = 0; t->kind == B8_TOK_BPE && a->normalized && k < t->bpe.n_norm; k++)
            lower = lower || t->bpe.norm[k] == B8_BPE_NORM_LOWER; /* a Lowercase normalizer */
        if (lower && t->kind == B8_TOK_BPE && !a->folded) {
            /* at most 3 bytes of lower case per byte of content (U+0130 -> i U+0307) */
            char *f = malloc(a->len * 3 + 1);
            if (!f) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory finishing the tokenizer");
            size_t n = 0;
            for (size_t k = 0; k < a->len;) {
                uint32_t cp, lc[2];
                k += (size_t)b8_utf8_next((const uint8_t *)a->content + k, &cp);
                int m = b8_uni_lower(cp, lc);
                for (int j = 0; j < m; j++)
                    n += (size_t)b8_utf8_put(lc[j], (uint8_t *)f + n);
            }
            f[n] = 0;
            a->folded = f;
            a->folded_len = n;
        }
        const char *fc = a->folded ? a->folded : a->content;
        size_t fl = a->folded ? a->folded_len : a->len;
        a->fold = lower && lowered_match((const uint8_t *)fc, fl, fc, fl) == fl;
        if (!a->fold) continue;
        /* upper-case spellings start with other bytes: any letter, any non-ASCII lead */
        uint8_t c0 = (uint8_t)fc[0];
        if (c0 >= 'a' && c0 <= 'z') t->added_first[c0 - 32] = 1;
        for (int b = 0xC0; b < 0x100; b++)
            t->added_first[b] = 1;
    }
    bert8_status st = b8_added_index_build(t, e);
    if (st) return st;
    if (t->kind == B8_TOK_WORDPIECE) {
        t->wp.n_never = 0;
        t->added_lens = 0;
        for (int i = 0; i < t->n_added; i++) {
            if (!t->added[i].special) continue;
            t->wp.n_never++;
            if (t->added[i].len < 64) t->added_lens |= 1ull << t->added[i].len;
        }
        if (t->wp.unk_id < 0)
            return b8_fail(e, BERT8_ERR_MISSING, "the WordPiece vocabulary has no unknown token");
    } else if (t->kind == B8_TOK_UNIGRAM && t->ug.unk_id < 0) {
        return b8_fail(e, BERT8_ERR_MISSING, "the Unigram model has no unknown piece");
    }
    return BERT8_OK;
}

/* ---- Introspection --------------------------------------------------------------------- */

b8_tok_kind b8_tokenizer_kind(const b8_tokenizer *t) {
    return t->kind;
}
int64_t b8_tokenizer_vocab_size(const b8_tokenizer *t) {
    return t->vocab_size;
}
int64_t b8_tokenizer_model_max_length(const b8_tokenizer *t) {
    return t->model_max_length;
}

int32_t b8_tokenizer_special_id(const b8_tokenizer *t, b8_special which) {
    if ((unsigned)which >= B8_SPECIAL_COUNT) return -1;
    return t->special[which];
}

const char *b8_tokenizer_id_to_token(const b8_tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->vocab_size) return NULL;
    if (len) *len = (size_t)(t->tok_off[id + 1] - t->tok_off[id] - 1);
    return t->tok_blob + t->tok_off[id];
}

int32_t b8_tokenizer_token_to_id(const b8_tokenizer *t, const char *token, size_t len) {
    if (!token) return -1;
    const int i = b8_added_find(t, token, len);
    return i >= 0 ? t->added[i].id : vocab_lookup(t, token, len);
}

int b8_tokenizer_num_special_tokens(const b8_tokenizer *t, int pair) {
    const b8_tmpl_item *it = pair ? t->tmpl_pair : t->tmpl_single;
    int n = pair ? t->n_pair : t->n_single, k = 0;
    for (int i = 0; i < n; i++)
        k += it[i].kind == B8_TMPL_SPECIAL;
    return k;
}

/* ---- Tokenize one sequence ------------------------------------------------------------ */

static int32_t skip_space_fwd(const uint8_t *s, int32_t a, int32_t b) {
    while (a < b) {
        uint32_t cp;
        int l = b8_utf8_next(s + a, &cp);
        if (!b8_uni_isspace(cp)) break;
        a += l;
    }
    return a;
}

static int32_t skip_space_back(const uint8_t *s, int32_t a, int32_t b) {
    while (b > a) {
        int32_t p = b - 1;
        while (p > a && (s[p] & 0xC0) == 0x80)
            p--;
        uint32_t cp;
        b8_utf8_next(s + p, &cp);
        if (!b8_uni_isspace(cp)) break;
        b = p;
    }
    return b;
}

/* True when text[a, b) has no word character right before or right after it. */
static bool word_bounded(const uint8_t *s, int32_t len, int32_t a, int32_t b) {
    uint32_t cp;
    if (a > 0) {
        int32_t p = a - 1;
        while (p > 0 && (s[p] & 0xC0) == 0x80)
            p--;
        b8_utf8_next(s + p, &cp);
        if (b8_uni_is_word(cp)) return false;
    }
    if (b < len) {
        b8_utf8_next(s + b, &cp);
        if (b8_uni_is_word(cp)) return false;
    }
    return true;
}

/* Unicode White_Space (Rust's char::is_whitespace), what `tokenizers` strips beside added
 * tokens. */
static bool rust_space(uint32_t cp) {
    if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
           cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

/* `tokenizers`' AddedVocabulary::find_matches over text[a, b): leftmost-longest matches of
 * the tokens of one pass (non-overlapping; a single_word match glued to a word is skipped,
 * its bytes not searched again); lstrip/rstrip take the whitespace beside a match into it
 * (never what an earlier match took). Between matches, the first pass runs the second and
 * the second runs the model. */
static bert8_status split_added_bpe(const b8_tokenizer *t, const uint8_t *text, int32_t a,
                                    int32_t b, bool normalized, b8_tokseq *seq,
                                    b8_tok_scratch *sc, int32_t *word, b8_err *e) {
    int32_t done = a; /* start_offset: everything before it is emitted */
    for (int32_t q = a;;) {
        const b8_added_token *at = NULL;
        size_t mlen = 0;
        int32_t m = b;
        for (; q < b; q++) {
            if (!t->added_first[text[q]]) continue;
            at = b8_added_match(t, normalized, text + q, (size_t)(b - q), &mlen);
            if (at && at->single_word &&
                !word_bounded(text + a, b - a, q - a, q - a + (int32_t)mlen)) {
                q += (int32_t)mlen - 1;
                at = NULL;
                continue;
            }
            if (at) {
                m = q;
                break;
            }
        }
        int32_t start = m, stop = at ? m + (int32_t)mlen : m;
        if (at && at->lstrip) {
            int32_t p = start;
            while (p > a) {
                int32_t r = p - 1;
                while (r > a && (text[r] & 0xC0) == 0x80)
                    r--;
                uint32_t cp;
                b8_utf8_next(text + r, &cp);
                if (!rust_space(cp)) break;
                p = r;
            }
            start = p > done ? p : done;
        }
        if (at && at->rstrip) {
            while (stop < b) {
                uint32_t cp;
                int l = b8_utf8_next(text + stop, &cp);
                if (!rust_space(cp)) break;
                stop += l;
            }
        }
        if (start > done) {
            bert8_status st = normalized ? b8_bpe_tokenize(t, text, done, start, seq, sc, word, e)
                                         : split_added_bpe(t, text, done, start, true, seq, sc,
                                                           word, e);
            if (st != BERT8_OK) return st;
        }
        if (!at) break;
        /* the token's string is the text it covers, stripped whitespace included */
        int32_t os = start, oe = stop;
        b8_bpe_trim_offsets(t, text, (const char *)text + start, (size_t)(stop - start),
                            seq->n == 0, &os, &oe);
        if (!b8_tokseq_push(seq, at->id, os, oe, (*word)++, (const char *)text + start,
                            (size_t)(stop - start)))
            return b8_fail(e, BERT8_ERR_NOMEM, "out of memory while tokenizing");
        done = stop > done ? stop : done;
        q = m + (int32_t)mlen;
    }
    return BERT8_OK;
}

/* PreTrainedTokenizer.tokenize: cut the text at added/special tokens (matched verbatim,
 * leftmost-longest), strip whitespace beside them as their lstrip/rstrip say, run the model
 * on what lies between. Text must be valid UTF-8 (checked by the caller). */
static bert8_status tokenize_seq(const b8_tokenizer *t, const uint8_t *text, int32_t len,
                                 b8_tokseq *seq, b8_tok_scratch *sc, b8_err *e) {
    seq->n = 0;
    seq->str_n = 0;
    if (t->kind == B8_TOK_BPE) {
        int32_t w = 0;
        return split_added_bpe(t, text, 0, len, false, seq, sc, &w, e);
    }
    int32_t word = 0, seg = 0, p = 0;
    bool strip_left = false;
    for (;;) {
        const b8_added_token *at = NULL;
        int32_t m = len;
        size_t mlen = 0;
        if (t->n_added) {
            for (int32_t q = p; q < len; q++) {
                if (!t->added_first[text[q]]) continue;
                at = b8_added_match(t, 0, text + q, (size_t)(len - q), &mlen);
                if (at && at->single_word &&
                    !word_bounded(text, len, q, q + (int32_t)mlen)) {
                    /* refused, and its bytes are not searched again (HF's non-overlapping
                     * leftmost-longest matches) */
                    q += (int32_t)mlen - 1;
                    at = NULL;
                    continue;
                }
                if (at) {
                    m = q;
                    break;
                }
            }
        }
        int32_t a = seg, b = m;
        if (strip_left) a = skip_space_fwd(text, a, b);
        if (at && at->lstrip) b = skip_space_back(text, a, b);
        if (a < b) {
            bert8_status st = t->kind == B8_TOK_WORDPIECE
                                  ? b8_wp_tokenize(t, text, a, b, seq, sc, &word, e)
                                  : b8_ug_tokenize(t, text, a, b, seq, sc, &word, e);
            if (st != BERT8_OK) return st;
        }
        if (!at) break;
        if (!b8_tokseq_push(seq, at->id, m, m + (int32_t)mlen, word++, at->content, at->len))
            return b8_fail(e, BERT8_ERR_NOMEM, "out of memory while tokenizing");
        p = seg = m + (int32_t)mlen;
        strip_left = at->rstrip;
    }
    return BERT8_OK;
}

static bert8_status check_text(const char *text, size_t len, const char *what, int64_t index,
                               b8_err *e) {
    char name[64];
    if (index >= 0)
        snprintf(name, sizeof name, "%s %lld", what, (long long)index);
    else
        snprintf(name, sizeof name, "%s", what);
    if (len > (size_t)INT32_MAX - 16)
        return b8_fail(e, BERT8_ERR_TOO_LARGE, "%s is %zu bytes; at most 2 GiB is supported", name,
                       len);
    return b8_utf8_check(text, len, name, e);
}

typedef struct pieces_priv {
    b8_tok_scratch sc;
    b8_tokseq seq;
    int64_t cap;
} pieces_priv;

bert8_status b8_tokenizer_tokenize(const b8_tokenizer *t, const char *text, size_t len,
                                   b8_tok_pieces *out, b8_err *e) {
    if (!t || !out) return b8_fail(e, BERT8_ERR_INVALID_ARG, "tokenize: NULL tokenizer or result");
    bert8_status st = check_text(text, len, "text", -1, e);
    if (st != BERT8_OK) return st;
    pieces_priv *pv = out->priv;
    if (!pv) {
        pv = calloc(1, sizeof *pv);
        if (!pv) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
        out->priv = pv;
    }
    pv->seq.want_strings = true;
    st = tokenize_seq(t, (const uint8_t *)(text ? text : ""), (int32_t)len, &pv->seq, &pv->sc, e);
    if (st != BERT8_OK) return st;
    int64_t n = pv->seq.n;
    if (n + 1 > pv->cap) {
        int64_t nc = n + 1 > 64 ? n + 1 : 64;
        int32_t *ids = realloc(out->ids, (size_t)nc * sizeof *ids);
        if (ids) out->ids = ids;
        int32_t *w = realloc(out->word_ids, (size_t)nc * sizeof *w);
        if (w) out->word_ids = w;
        int64_t *o = realloc(out->offsets, (size_t)nc * 2 * sizeof *o);
        if (o) out->offsets = o;
        int64_t *so = realloc(out->str_off, (size_t)(nc + 1) * sizeof *so);
        if (so) out->str_off = so;
        if (!ids || !w || !o || !so) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
        pv->cap = nc;
    }
    for (int64_t i = 0; i < n; i++) {
        out->ids[i] = pv->seq.id[i];
        out->word_ids[i] = pv->seq.word[i];
        out->offsets[2 * i] = pv->seq.os[i];
        out->offsets[2 * i + 1] = pv->seq.oe[i];
        out->str_off[i] = pv->seq.str_off[i];
    }
    out->str_off[n] = n ? pv->seq.str_off[n] : 0;
    out->strings = pv->seq.str ? pv->seq.str : (char *)"";
    out->n = n;
    return BERT8_OK;
}

void b8_tok_pieces_free(b8_tok_pieces *p) {
    if (!p) return;
    pieces_priv *pv = p->priv;
    if (pv) {
        b8_scratch_free(&pv->sc);
        b8_tokseq_free(&pv->seq);
        free(pv);
    }
    free(p->ids);
    free(p->word_ids);
    free(p->offsets);
    free(p->str_off);
    memset(p, 0, sizeof *p);
}

/* ---- Encode -------------------------------------------------------------------------- */

b8_encode_params b8_default_encode_params(void) {
    b8_encode_params p = {0};
    p.add_special_tokens = 1;
    p.truncation = B8_TRUNC_NONE;
    p.padding = B8_PAD_LONGEST;
    return p;
}

typedef struct row_plan {
    int64_t input, window;
    int32_t a0, a1, b0, b1; /* token ranges of the two sequences (b1 < 0: single) */
    int64_t len;
} row_plan;

typedef struct enc_priv {
    b8_tok_scratch sc;
    size_t cap_tok, cap_rows;
} enc_priv;

static bool plan_push(b8_tok_scratch *sc, int64_t *nplan, row_plan r) {
    if ((size_t)*nplan == sc->plan_cap) {
        size_t nc = sc->plan_cap ? sc->plan_cap * 2 : 64;
        row_plan *p = realloc(sc->plan, nc * sizeof *p);
        if (!p) return false;
        sc->plan = p;
        sc->plan_cap = nc;
    }
    ((row_plan *)sc->plan)[(*nplan)++] = r;
    return true;
}

/* Rows for one input: HF's truncation strategies, and for overflow the windows of Hugging
 * Face's Encoding::truncate (each starts budget - stride after the previous one). */
static bert8_status plan_input(const b8_tokenizer *t, const b8_encode_params *p, int64_t input,
                               int32_t na, int32_t nb, b8_tok_scratch *sc, int64_t *nplan,
                               b8_err *e) {
    bool pair = nb >= 0;
    int32_t nspec = p->add_special_tokens ? b8_tokenizer_num_special_tokens(t, pair) : 0;
    int64_t maxlen = p->max_length > 0 ? p->max_length : t->model_max_length;
    int64_t total = (int64_t)na + (pair ? nb : 0) + nspec;
    row_plan r = {input, 0, 0, na, 0, pair ? nb : -1, total};
    if (p->truncation == B8_TRUNC_NONE || total <= maxlen) {
        if (!plan_push(sc, nplan, r)) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
        return BERT8_OK;
    }
    b8_truncation tr = p->truncation;
    if (!pair && tr == B8_TRUNC_LONGEST_FIRST) tr = B8_TRUNC_ONLY_FIRST;
    if (tr == B8_TRUNC_LONGEST_FIRST) {
        if (p->return_overflow)
            return b8_fail(e, BERT8_ERR_UNSUPPORTED,
                           "input %lld: overflow windows need only_first or only_second "
                           "truncation for pairs",
                           (long long)input);
        /* transformers' slow loop: one token at a time from the longer, ties from the second */
        int64_t remove = total - maxlen;
        int32_t la = na, lb = nb;
        for (int64_t k = 0; k < remove; k++) {
            if (la > lb)
                la--;
            else if (lb > 0)
                lb--;
        }
        if (p->truncate_left) {
            r.a0 = na - la;
            r.b0 = nb - lb;
        } else {
            r.a1 = la;
            r.b1 = lb;
        }
        r.len = (int64_t)la + lb + nspec;
        if (!plan_push(sc, nplan, r)) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
        return BERT8_OK;
    }
    if (tr == B8_TRUNC_ONLY_SECOND && !pair)
        return b8_fail(e, BERT8_ERR_TOO_LARGE,
                       "input %lld: %lld tokens exceed max_length %lld and only_second "
                       "truncation has no second sequence to cut",
                       (long long)input, (long long)total, (long long)maxlen);
    bool second = tr == B8_TRUNC_ONLY_SECOND;
    int32_t n = second ? nb : na;
    int64_t budget = (int64_t)n - (total - maxlen);
    if (budget < 1)
        return b8_fail(e, BERT8_ERR_TOO_LARGE,
                       "input %lld: max_length %lld leaves no room for the %s sequence (%lld "
                       "tokens in the other, %d special)",
                       (long long)input, (long long)maxlen, second ? "second" : "first",
                       (long long)(second ? na : (pair ? nb : 0)), nspec);
    if (!p->return_overflow) {
        if (second && p->truncate_left)
            r.b0 = nb - (int32_t)budget;
        else if (second)
            r.b1 = (int32_t)budget;
        else if (p->truncate_left)
            r.a0 = na - (int32_t)budget;
        else
            r.a1 = (int32_t)budget;
        r.len = maxlen;
        if (!plan_push(sc, nplan, r)) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
        return BERT8_OK;
    }
    if (p->truncate_left)
        return b8_fail(e, BERT8_ERR_UNSUPPORTED, "input %lld: overflow windows with left truncation",
                       (long long)input);
    if (p->stride < 0 || p->stride >= budget)
        return b8_fail(e, BERT8_ERR_INVALID_ARG,
                       "input %lld: stride %lld must be below the %lld tokens that fit in a "
                       "window",
                       (long long)input, (long long)p->stride, (long long)budget);
    int64_t step = budget - p->stride;
    int64_t window = 0;
    for (int64_t start = 0;; start += step) {
        int64_t stop = start + budget < n ? start + budget : n;
        row_plan w = r;
        w.window = window++;
        if (second) {
            w.b0 = (int32_t)start;
            w.b1 = (int32_t)stop;
        } else {
            w.a0 = (int32_t)start;
            w.a1 = (int32_t)stop;
        }
        w.len = (int64_t)(w.a1 - w.a0) + (pair ? w.b1 - w.b0 : 0) + nspec;
        if (!plan_push(sc, nplan, w)) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
        if (stop == n) break;
    }
    return BERT8_OK;
}

static bool grow_outputs(b8_encoding *out, enc_priv *pv, size_t ntok, size_t nrows) {
    if (ntok > pv->cap_tok) {
        int32_t **a32[6] = {&out->input_ids,    &out->attention_mask, &out->token_type_ids,
                            &out->special_mask, &out->sequence_ids,   &out->word_ids};
        for (int i = 0; i < 6; i++) {
            int32_t *p = realloc(*a32[i], ntok * sizeof *p);
            if (!p) return false;
            *a32[i] = p;
        }
        int64_t *o = realloc(out->offsets, ntok * 2 * sizeof *o);
        if (!o) return false;
        out->offsets = o;
        pv->cap_tok = ntok;
    }
    if (nrows > pv->cap_rows) {
        int64_t **a64[3] = {&out->lengths, &out->row_input, &out->row_window};
        for (int i = 0; i < 3; i++) {
            int64_t *p = realloc(*a64[i], nrows * sizeof *p);
            if (!p) return false;
            *a64[i] = p;
        }
        pv->cap_rows = nrows;
    }
    return true;
}

bert8_status b8_tokenizer_encode_batch(const b8_tokenizer *t, int64_t n, const char *const *texts,
                                       const size_t *text_lens, const char *const *pairs,
                                       const size_t *pair_lens, const b8_encode_params *params,
                                       b8_encoding *out, b8_err *e) {
    if (!t || !out) return b8_fail(e, BERT8_ERR_INVALID_ARG, "encode: NULL tokenizer or result");
    if (n < 0 || (n > 0 && !texts))
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "encode: %lld inputs without texts", (long long)n);
    b8_encode_params p = params ? *params : b8_default_encode_params();
    if ((unsigned)p.truncation > B8_TRUNC_ONLY_SECOND || (unsigned)p.padding > B8_PAD_MAX_LENGTH ||
        p.max_length < 0 || p.pad_to_multiple_of < 0 || p.stride < 0)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "encode: invalid parameters");
    enc_priv *pv = out->priv;
    if (!pv) {
        pv = calloc(1, sizeof *pv);
        if (!pv) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
        out->priv = pv;
    }
    b8_tok_scratch *sc = &pv->sc;
    out->rows = out->seq = 0;
    if (sc->nseqs < 2 * n) {
        b8_tokseq *ns = realloc(sc->seqs, (size_t)(2 * n) * sizeof *ns);
        if (!ns) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
        memset(ns + sc->nseqs, 0, (size_t)(2 * n - sc->nseqs) * sizeof *ns);
        sc->seqs = ns;
        sc->nseqs = 2 * n;
    }
    int64_t nplan = 0;
    for (int64_t i = 0; i < n; i++) {
        const char *a = texts[i], *b = pairs ? pairs[i] : NULL;
        size_t la = text_lens ? text_lens[i] : (a ? strlen(a) : 0);
        size_t lb = b ? (pair_lens ? pair_lens[i] : strlen(b)) : 0;
        bert8_status st = check_text(a, la, "text", i, e);
        if (st == BERT8_OK && b) st = check_text(b, lb, "text_pair", i, e);
        if (st != BERT8_OK) return st;
        b8_tokseq *sa = &sc->seqs[2 * i], *sb = &sc->seqs[2 * i + 1];
        sa->want_strings = sb->want_strings = false;
        st = tokenize_seq(t, (const uint8_t *)(a ? a : ""), (int32_t)la, sa, sc, e);
        if (st == BERT8_OK && b) st = tokenize_seq(t, (const uint8_t *)b, (int32_t)lb, sb, sc, e);
        if (st != BERT8_OK) return st;
        if (sa->n > INT32_MAX / 2 || sb->n > INT32_MAX / 2)
            return b8_fail(e, BERT8_ERR_TOO_LARGE, "input %lld has too many tokens", (long long)i);
        st = plan_input(t, &p, i, (int32_t)sa->n, b ? (int32_t)sb->n : -1, sc, &nplan, e);
        if (st != BERT8_OK) return st;
    }
    const row_plan *plan = sc->plan;
    int64_t seq = 0;
    for (int64_t r = 0; r < nplan; r++)
        if (plan[r].len > seq) seq = plan[r].len;
    if (p.padding == B8_PAD_MAX_LENGTH) {
        int64_t ml = p.max_length > 0 ? p.max_length : t->model_max_length;
        if (ml > seq) seq = ml;
    }
    if (seq > INT32_MAX || p.pad_to_multiple_of > INT32_MAX)
        return b8_fail(e, BERT8_ERR_TOO_LARGE, "encode: rows of %lld tokens (padding to %lld)",
                       (long long)seq, (long long)p.pad_to_multiple_of);
    if (p.pad_to_multiple_of > 0 && seq % p.pad_to_multiple_of)
        seq += p.pad_to_multiple_of - seq % p.pad_to_multiple_of;
    size_t ntok;
    if (!b8_mul_ok((size_t)nplan, (size_t)seq, &ntok) || ntok > (size_t)B8_TOK_MAX_ENCODE_TOKENS)
        return b8_fail(e, BERT8_ERR_TOO_LARGE,
                       "encode: %lld rows of %lld tokens is over the limit of %lld token slots "
                       "per call",
                       (long long)nplan, (long long)seq, (long long)B8_TOK_MAX_ENCODE_TOKENS);
    int32_t pad = t->special[B8_SPECIAL_PAD];
    for (int64_t r = 0; r < nplan && pad < 0; r++)
        if (plan[r].len < seq)
            return b8_fail(e, BERT8_ERR_INVALID_ARG,
                           "encode: rows need padding but the tokenizer has no pad token");
    if (!grow_outputs(out, pv, ntok ? ntok : 1, nplan ? (size_t)nplan : 1))
        return b8_fail(e, BERT8_ERR_NOMEM, "out of memory for %lld x %lld tokens", (long long)nplan,
                       (long long)seq);
    for (int64_t r = 0; r < nplan; r++) {
        const row_plan *rp = &plan[r];
        const b8_tokseq *sa = &sc->seqs[2 * rp->input], *sb = &sc->seqs[2 * rp->input + 1];
        bool pair = rp->b1 >= 0;
        const b8_tmpl_item *items = pair ? t->tmpl_pair : t->tmpl_single;
        int ni = pair ? t->n_pair : t->n_single;
        static const b8_tmpl_item bare[2] = {{B8_TMPL_SEQ_A, 0, 0}, {B8_TMPL_SEQ_B, 0, 0}};
        if (!p.add_special_tokens) {
            items = bare;
            ni = pair ? 2 : 1;
        }
        size_t base = (size_t)r * (size_t)seq, k = base;
        for (int it = 0; it < ni; it++) {
            const b8_tmpl_item *ti = &items[it];
            if (ti->kind == B8_TMPL_SPECIAL) {
                out->input_ids[k] = ti->id;
                out->attention_mask[k] = 1;
                out->token_type_ids[k] = ti->type_id;
                out->special_mask[k] = 1;
                out->sequence_ids[k] = -1;
                out->word_ids[k] = -1;
                out->offsets[2 * k] = out->offsets[2 * k + 1] = 0;
                k++;
                continue;
            }
            bool isb = ti->kind == B8_TMPL_SEQ_B;
            const b8_tokseq *s = isb ? sb : sa;
            int32_t from = isb ? rp->b0 : rp->a0, to = isb ? rp->b1 : rp->a1;
            for (int32_t j = from; j < to; j++, k++) {
                out->input_ids[k] = s->id[j];
                out->attention_mask[k] = 1;
                out->token_type_ids[k] = ti->type_id;
                out->special_mask[k] = 0;
                out->sequence_ids[k] = isb ? 1 : 0;
                out->word_ids[k] = s->word[j];
                out->offsets[2 * k] = s->os[j];
                out->offsets[2 * k + 1] = s->oe[j];
            }
        }
        out->lengths[r] = (int64_t)(k - base);
        out->row_input[r] = rp->input;
        out->row_window[r] = rp->window;
        for (; k < base + (size_t)seq; k++) {
            out->input_ids[k] = pad;
            out->attention_mask[k] = 0;
            out->token_type_ids[k] = 0;
            out->special_mask[k] = 1;
            out->sequence_ids[k] = -1;
            out->word_ids[k] = -1;
            out->offsets[2 * k] = out->offsets[2 * k + 1] = 0;
        }
    }
    out->rows = nplan;
    out->seq = seq;
    return BERT8_OK;
}

bert8_status b8_tokenizer_encode(const b8_tokenizer *t, const char *text, size_t text_len,
                                 const char *pair, size_t pair_len, const b8_encode_params *p,
                                 b8_encoding *out, b8_err *e) {
    const char *texts[1] = {text};
    const char *pairs[1] = {pair};
    size_t tl[1] = {text_len}, pl[1] = {pair_len};
    return b8_tokenizer_encode_batch(t, 1, texts, tl, pair ? pairs : NULL, pl, p, out, e);
}

void b8_encoding_free(b8_encoding *enc) {
    if (!enc) return;
    enc_priv *pv = enc->priv;
    if (pv) {
        b8_scratch_free(&pv->sc);
        free(pv);
    }
    free(enc->input_ids);
    free(enc->attention_mask);
    free(enc->token_type_ids);
    free(enc->special_mask);
    free(enc->sequence_ids);
    free(enc->word_ids);
    free(enc->offsets);
    free(enc->lengths);
    free(enc->row_input);
    free(enc->row_window);
    memset(enc, 0, sizeof *enc);
}
