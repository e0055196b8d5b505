/* encode.c: the encoding layer: verbatim matching of added and special tokens, the model run
 * in between, templates, truncation, overflow windows, padding and batches. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "tokenizer/added_index.h"
#include "tokenizer/bpe.h"
#include "tokenizer/tokseq.h"
#include "tokenizer/unicode_text.h"
#include "tokenizer/unigram.h"
#include "tokenizer/wordpiece.h"

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
