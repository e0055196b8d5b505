/* tok_object.c: the tokenizer object: allocated and filled by the loaders (the id -> token
 * table, added tokens, templates), finished into its lookups, freed, and read by everyone
 * above it (id <-> token, special ids, sizes). */
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "tokenizer/added_index.h"
#include "tokenizer/piece_trie.h"
#include "tokenizer/tok_object.h"
#include "tokenizer/unicode_text.h"

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
    free(t->bpe.merges);
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
