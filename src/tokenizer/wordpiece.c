/* wordpiece.c: BERT's basic tokenizer (clean-up, CJK split, NFC, lower-casing, accent
 * stripping, punctuation split) and greedy longest-match-first WordPiece, with the byte
 * origin of every character carried through so tokens get offsets into the input. */
#include <string.h>
#include <utf8proc.h>

#include "base/utf8.h"
#include "tokenizer/added_index.h"
#include "tokenizer/tokseq.h"
#include "tokenizer/unicode_text.h"
#include "tokenizer/wordpiece.h"

enum { CH_OTHER = 0, CH_DROP, CH_SPACE, CH_CJK };

/* BertTokenizer's _is_punctuation: the ASCII symbol ranges, or any P* category. */
static bool is_punct(uint32_t cp) {
    if (cp < 0x80)
        return (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
               (cp >= 123 && cp <= 126);
    int c = b8_uni_category(cp);
    return c >= UTF8PROC_CATEGORY_PC && c <= UTF8PROC_CATEGORY_PO;
}

/* The CJK ideograph blocks split into words of their own, as the fast tokenizers' BertNormalizer
 * has them (what AutoTokenizer, sentence-transformers and TEI run): the last block from U+2B920,
 * where the Python BasicTokenizer starts it at U+2B820 (U+2B820..U+2B91F stay inside words). */
static bool is_cjk(uint32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
           (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

/* What the clean-up, the CJK split and whitespace_tokenize do with one (lowered) character.
 * The clean-up drops NUL, U+FFFD and the control, format, surrogate and private-use categories
 * (Cc, Cf, Cs, Co), but keeps unassigned code points (Cn: noncharacters, and characters newer
 * than the Unicode tables) inside their word, as the fast tokenizers do; the Python
 * BasicTokenizer would drop them too. */
static int char_class(const b8_tokenizer *t, uint32_t cp) {
    if (t->wp.clean_text) {
        if (cp == 0 || cp == 0xFFFD) return CH_DROP;
        if (cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r') return CH_SPACE;
        int c = b8_uni_category(cp);
        if (c == UTF8PROC_CATEGORY_ZS) return CH_SPACE;
        if (c >= UTF8PROC_CATEGORY_CC) return CH_DROP;
    }
    /* survivors that Python's str.split() still treats as separators (U+2028, U+2029) */
    if (b8_uni_isspace(cp)) return CH_SPACE;
    if (t->wp.chinese && is_cjk(cp)) return CH_CJK;
    return CH_OTHER;
}

typedef struct wp_ctx {
    const b8_tokenizer *t;
    const uint8_t *text;
    b8_tokseq *seq;
    b8_tok_scratch *sc;
    int32_t *word;
    b8_err *err;
} wp_ctx;

static bert8_status nomem(wp_ctx *c) {
    return b8_fail(c->err, BERT8_ERR_NOMEM, "out of memory while tokenizing");
}

static bert8_status push_unk(wp_ctx *c, int32_t os, int32_t oe, int32_t word) {
    const b8_tokenizer *t = c->t;
    if (!b8_tokseq_push(c->seq, t->wp.unk_id, os, oe, word, t->wp.unk_token,
                        strlen(t->wp.unk_token)))
        return nomem(c);
    return BERT8_OK;
}

/* Greedy longest-match-first over the normalized bytes sc->nb[0..nb) of one word. */
static bert8_status wordpiece(wp_ctx *c, size_t nb, size_t nchars) {
    const b8_tokenizer *t = c->t;
    const uint8_t *w = c->sc->nb;
    const int32_t *os = c->sc->nos, *oe = c->sc->noe;
    int32_t word = (*c->word)++;
    if (nb == 0) return BERT8_OK;
    if (nchars > (size_t)t->wp.max_chars) return push_unk(c, os[0], oe[nb - 1], word);
    int64_t first = c->seq->n, first_str = c->seq->str_n;
    size_t start = 0;
    while (start < nb) {
        uint32_t node = start == 0 ? 0 : t->wp.cont_node;
        int32_t best = -1;
        size_t best_end = 0;
        if (node != B8_PTRIE_NONE) {
            const b8_da_unit *da = t->trie.da;
            const uint32_t da_n = t->trie.da_n;
            for (size_t i = start; i < nb; i++) {
                uint32_t next = (uint32_t)da[node].base + w[i];
                if (next >= da_n || da[next].check != (int32_t)node) break;
                node = next;
                int32_t v = da[node].value;
                /* a match must end on a character boundary */
                if (v >= 0 && (i + 1 == nb || (w[i + 1] & 0xC0) != 0x80)) {
                    best = v;
                    best_end = i + 1;
                }
            }
        }
        if (best < 0) {
            /* one unmatchable piece makes the whole word [UNK] */
            c->seq->n = first;
            c->seq->str_n = first_str;
            return push_unk(c, os[0], oe[nb - 1], word);
        }
        size_t tl = 0;
        const char *ts = b8_tokenizer_id_to_token(t, best, &tl);
        if (!b8_tokseq_push(c->seq, best, os[start], oe[best_end - 1], word, ts, tl))
            return nomem(c);
        start = best_end;
    }
    return BERT8_OK;
}

/* Writes cps [a, b) of the word as UTF-8 into the normalized buffer and runs WordPiece. */
static bert8_status emit_piece(wp_ctx *c, const b8_ucps *u, size_t a, size_t b) {
    if (a >= b) return BERT8_OK;
    b8_tok_scratch *sc = c->sc;
    if (!b8_scratch_bytes(sc, (b - a) * 4)) return nomem(c);
    size_t nb = 0;
    for (size_t i = a; i < b; i++) {
        uint32_t cp = u->cp[i];
        if (cp < 0x80) {
            sc->nb[nb] = (uint8_t)cp;
            sc->nos[nb] = u->os[i];
            sc->noe[nb] = u->oe[i];
            nb++;
            continue;
        }
        int k = b8_utf8_put(cp, sc->nb + nb);
        for (int j = 0; j < k; j++) {
            sc->nos[nb + j] = u->os[i];
            sc->noe[nb + j] = u->oe[i];
        }
        nb += (size_t)k;
    }
    return wordpiece(c, nb, b - a);
}

/* HF keeps words equal to a special token string whole (never_split). */
static bool is_never_split(const b8_tokenizer *t, const b8_ucps *u) {
    if (t->wp.n_never == 0) return false;
    uint8_t buf[256];
    size_t nb = 0;
    for (size_t i = 0; i < u->n; i++) {
        if (nb + 4 > sizeof buf) return false;
        nb += (size_t)b8_utf8_put(u->cp[i], buf + nb);
    }
    if (nb < 64 && !(t->added_lens >> nb & 1)) return false;
    const int i = b8_added_find(t, (const char *)buf, nb);
    return i >= 0 && t->added[i].special;
}

/* One whitespace-delimited word (after clean-up and the CJK split): NFC, accents, punctuation
 * split, then WordPiece on each part. */
static bert8_status flush_word(wp_ctx *c, bool ascii) {
    b8_tok_scratch *sc = c->sc;
    b8_ucps *u = &sc->word;
    if (u->n == 0) return BERT8_OK;
    const b8_tokenizer *t = c->t;
    bert8_status st = BERT8_OK;
    if (!ascii && !b8_uni_nfc(u, &sc->tmp, &sc->nfc)) return nomem(c);
    if (is_never_split(t, u)) {
        st = emit_piece(c, u, 0, u->n);
        u->n = 0;
        return st;
    }
    if (!ascii && t->wp.strip_accents) {
        size_t before = u->n;
        if (!b8_uni_strip_accents(u, &sc->tmp)) return nomem(c);
        if (u->n != before && is_never_split(t, u)) {
            st = emit_piece(c, u, 0, u->n);
            u->n = 0;
            return st;
        }
    }
    size_t run = 0;
    for (size_t i = 0; i < u->n && st == BERT8_OK; i++) {
        if (!is_punct(u->cp[i])) continue;
        st = emit_piece(c, u, run, i);
        if (st == BERT8_OK) st = emit_piece(c, u, i, i + 1);
        run = i + 1;
    }
    if (st == BERT8_OK) st = emit_piece(c, u, run, u->n);
    u->n = 0;
    return st;
}

bert8_status b8_wp_tokenize(const b8_tokenizer *t, const uint8_t *text, int32_t s, int32_t e,
                            b8_tokseq *seq, b8_tok_scratch *sc, int32_t *word, b8_err *err) {
    wp_ctx c = {t, text, seq, sc, word, err};
    b8_ucps *u = &sc->word;
    u->n = 0;
    bool ascii = true;
    bert8_status st = BERT8_OK;
    int32_t pos = s;
    while (pos < e && st == BERT8_OK) {
        uint8_t b = text[pos];
        if (b < 0x80) {
            /* ASCII: the table-free fast path of the same rules */
            uint32_t cp = b;
            if (b == ' ' || b == '\t' || b == '\n' || b == '\r' ||
                (!t->wp.clean_text && (b == 0x0B || b == 0x0C || (b >= 0x1C && b <= 0x1F)))) {
                st = flush_word(&c, ascii);
                ascii = true;
            } else if (t->wp.clean_text && (b < 0x20 || b == 0x7F)) {
                /* control characters vanish, joining their neighbours */
            } else {
                if (t->wp.lowercase && b >= 'A' && b <= 'Z') cp = b + 32;
                if (!b8_ucps_push(u, cp, pos, pos + 1)) return nomem(&c);
            }
            pos++;
            continue;
        }
        uint32_t cp;
        int len = b8_utf8_next(text + pos, &cp);
        uint32_t lc[2] = {cp, 0};
        int nl = t->wp.lowercase ? b8_uni_lower(cp, lc) : 1;
        for (int k = 0; k < nl && st == BERT8_OK; k++) {
            switch (char_class(t, lc[k])) {
            case CH_DROP:
                break;
            case CH_SPACE:
                st = flush_word(&c, ascii);
                ascii = true;
                break;
            case CH_CJK:
                st = flush_word(&c, ascii);
                if (st != BERT8_OK) break;
                if (!b8_ucps_push(u, lc[k], pos, pos + len)) return nomem(&c);
                st = flush_word(&c, false);
                ascii = true;
                break;
            default:
                if (!b8_ucps_push(u, lc[k], pos, pos + len)) return nomem(&c);
                ascii = false;
            }
        }
        pos += len;
    }
    if (st == BERT8_OK) st = flush_word(&c, ascii);
    return st;
}
