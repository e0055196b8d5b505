/* decode.c: ids back to text, as transformers' tokenizer.decode does: WordPiece tokens joined by
 * spaces with " ##" removed, each piece cleaned as `tokenizers`' WordPiece decoder does (cleanup:
 * a space before , . ! ? dropped); SentencePiece pieces concatenated with U+2581 read as a space;
 * then, when tokenizer_config.json's clean_up_tokenization_spaces is true, transformers'
 * clean_up_tokenization over the whole text (spaces before punctuation and English contractions).
 * BPE decodes as `tokenizers`' ByteLevel decoder: each token's GPT-2 characters back to bytes,
 * invalid UTF-8 replaced by U+FFFD; transformers skips the clean-up for BPE models. */
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "tokenizer/added_index.h"
#include "tokenizer/bpe.h"
#include "tokenizer/tok_types.h"

bool b8_tokenizer_is_special(const b8_tokenizer *t, int32_t id) {
    if (id < 0) return false;
    for (int i = 0; i < B8_SPECIAL_COUNT; i++)
        if (t->special[i] == id) return true;
    int lo, hi;
    b8_added_id_range(t, id, &lo, &hi);
    for (int i = lo; i < hi; i++)
        if (t->added[t->added_by_id[i].idx].special) return true;
    return false;
}

typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

static void put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1) cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np) {
            b->oom = true;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

/* Replaces, in order, every from[k] in s by to[k] (never longer), as a chain of str.replace. */
static void replace_all(char *s, const char *const *from, const char *const *to, size_t n) {
    for (size_t k = 0; k < n; k++) {
        size_t fl = strlen(from[k]), tl = strlen(to[k]);
        char *r = s, *w = s;
        while (*r) {
            if (!strncmp(r, from[k], fl)) {
                memmove(w, to[k], tl);
                w += tl;
                r += fl;
            } else {
                *w++ = *r++;
            }
        }
        *w = 0;
    }
}

/* transformers' clean_up_tokenization: spaces before punctuation and English contractions. */
static void clean_up(char *s) {
    static const char *const from[] = {" .", " ?", " !", " ,", " ' ", " n't", " 'm", " 's", " 've", " 're"};
    static const char *const to[] = {".", "?", "!", ",", "'", "n't", "'m", "'s", "'ve", "'re"};
    replace_all(s, from, to, sizeof from / sizeof *from);
}

/* `tokenizers`' WordPiece decoder cleanup (decoders/wordpiece.rs), applied to each piece (a token
 * with the space that joins it): its own list, " do not" included. */
static void wordpiece_cleanup(char *s) {
    static const char *const from[] = {" .", " ?", " !", " ,", " ' ", " n't", " 'm", " do not", " 's", " 've", " 're"};
    static const char *const to[] = {".", "?", "!", ",", "'", "n't", "'m", " don't", "'s", "'ve", "'re"};
    replace_all(s, from, to, sizeof from / sizeof *from);
}

static char *strip(char *s) {
    size_t n = strlen(s);
    while (n && strchr(" \t\n\r\v\f", s[n - 1])) s[--n] = 0;
    size_t i = 0;
    while (s[i] && strchr(" \t\n\r\v\f", s[i])) i++;
    if (i) memmove(s, s + i, n - i + 1);
    return s;
}

/* Length of the longest prefix of s[0, n) that starts a valid UTF-8 sequence (at least 1): what
 * one U+FFFD replaces in String::from_utf8_lossy. Returns 0 when s starts a valid character
 * (*len gets its length then). */
static size_t invalid_prefix(const uint8_t *s, size_t n, size_t *len) {
    uint8_t c = s[0];
    size_t need;
    uint8_t lo = 0x80, hi = 0xBF;
    if (c < 0x80) {
        *len = 1;
        return 0;
    } else if (c >= 0xC2 && c <= 0xDF) {
        need = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        return 1;
    }
    size_t k = 1;
    for (; k <= need; k++) {
        if (k >= n) return k;
        uint8_t lo_k = k == 1 ? lo : 0x80, hi_k = k == 1 ? hi : 0xBF;
        if (s[k] < lo_k || s[k] > hi_k) return k;
    }
    *len = need + 1;
    return 0;
}

/* `tokenizers` skips the added tokens marked special, not the roles (an <unk> of the model
 * stays). */
static bool added_special(const b8_tokenizer *t, int32_t id) {
    int lo, hi;
    b8_added_id_range(t, id, &lo, &hi);
    for (int i = lo; i < hi; i++)
        if (t->added[t->added_by_id[i].idx].special) return true;
    return false;
}

static bert8_status decode_bpe(const b8_tokenizer *t, const int32_t *ids, int64_t n,
                               bool skip_special, char **out, b8_err *e) {
    sbuf raw = {0}, b = {0};
    bool any_folded = false;
    for (int k = 0; k < t->n_added; k++)
        any_folded = any_folded || t->added[k].folded;
    put(&raw, "", 0);
    put(&b, "", 0);
    for (int64_t i = 0; i < n; i++) {
        if (skip_special && added_special(t, ids[i])) continue;
        size_t len;
        const uint8_t *tok = (const uint8_t *)b8_tokenizer_id_to_token(t, ids[i], &len);
        int lo = 0, hi = 0, last = -1;
        if (any_folded) b8_added_id_range(t, ids[i], &lo, &hi);
        for (int k = lo; k < hi; k++) /* the last in t->added's order, as the scan over it found */
            if (t->added[t->added_by_id[k].idx].folded && t->added_by_id[k].idx > last) last = t->added_by_id[k].idx;
        if (last >= 0) {
            /* `tokenizers` decodes a normalized added token as its normalized content */
            tok = (const uint8_t *)t->added[last].folded;
            len = t->added[last].folded_len;
        }
        /* a token whose characters are all in the byte alphabet gives those bytes, any other
         * its own text */
        size_t start = raw.n;
        bool all = true;
        for (size_t k = 0; k < len && all;) {
            uint32_t cp;
            k += (size_t)b8_utf8_next(tok + k, &cp);
            int byte = b8_bpe_char_byte(cp);
            if (byte < 0) {
                all = false;
                break;
            }
            char c = (char)byte;
            put(&raw, &c, 1);
        }
        if (!all) {
            raw.n = start;
            put(&raw, (const char *)tok, len);
        }
    }
    for (size_t i = 0; i < raw.n && !raw.oom;) {
        size_t cl = 0;
        size_t bad = invalid_prefix((const uint8_t *)raw.p + i, raw.n - i, &cl);
        if (bad) {
            put(&b, "\xEF\xBF\xBD", 3);
            i += bad;
        } else {
            put(&b, raw.p + i, cl);
            i += cl;
        }
    }
    bool oom = raw.oom || b.oom;
    free(raw.p);
    if (oom) {
        free(b.p);
        return b8_fail(e, BERT8_ERR_NOMEM, "out of memory decoding %lld ids", (long long)n);
    }
    *out = b.p;
    return BERT8_OK;
}

bert8_status b8_tokenizer_decode(const b8_tokenizer *t, const int32_t *ids, int64_t n, bool skip_special, char **out,
                                 b8_err *e) {
    *out = NULL;
    if (n < 0 || (n > 0 && !ids)) return b8_fail(e, BERT8_ERR_INVALID_ARG, "decode: %lld ids without an array", (long long)n);
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= t->vocab_size)
            return b8_fail(e, BERT8_ERR_INVALID_ARG,
                           "decode: id %d at %lld is outside the vocabulary [0, %lld)", ids[i],
                           (long long)i, (long long)t->vocab_size);
    if (t->kind == B8_TOK_BPE) return decode_bpe(t, ids, n, skip_special, out, e);
    sbuf b = {0};
    put(&b, "", 0);
    const bool wp = t->kind == B8_TOK_WORDPIECE;
    const char *cont = wp && t->wp.prefix ? t->wp.prefix : "##";
    const size_t cl = strlen(cont);
    bool first = true;
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->vocab_size) {
            free(b.p);
            return b8_fail(e, BERT8_ERR_INVALID_ARG, "decode: id %d at %lld is outside the vocabulary [0, %lld)",
                           ids[i], (long long)i, (long long)t->vocab_size);
        }
        if (skip_special && b8_tokenizer_is_special(t, ids[i])) continue;
        size_t len;
        const char *tok = b8_tokenizer_id_to_token(t, ids[i], &len);
        if (!tok) continue;
        if (wp) {
            /* the piece: a continuation without its prefix, any other token after a space */
            sbuf piece = {0};
            if (!first && len >= cl && !strncmp(tok, cont, cl)) {
                put(&piece, tok + cl, len - cl);
            } else {
                put(&piece, first ? "" : " ", first ? 0 : 1);
                put(&piece, tok, len);
            }
            if (!piece.oom) {
                wordpiece_cleanup(piece.p);
                put(&b, piece.p, strlen(piece.p));
            } else {
                b.oom = true;
            }
            free(piece.p);
        } else {
            /* U+2581 (E2 96 81) reads as a space */
            for (size_t k = 0; k < len;) {
                if (k + 3 <= len && (unsigned char)tok[k] == 0xE2 && (unsigned char)tok[k + 1] == 0x96 &&
                    (unsigned char)tok[k + 2] == 0x81) {
                    put(&b, " ", 1);
                    k += 3;
                } else {
                    put(&b, tok + k, 1);
                    k++;
                }
            }
        }
        first = false;
    }
    if (b.oom) {
        free(b.p);
        return b8_fail(e, BERT8_ERR_NOMEM, "out of memory decoding %lld ids", (long long)n);
    }
    strip(b.p);
    if (t->clean_up) clean_up(b.p);
    *out = b.p;
    return BERT8_OK;
}
