/* unicode_text.c: UTF-8 checking and the Unicode operations the reference tokenizers apply
 * (categories, Python's isspace/lower, NFC and accent stripping with offset tracking), on top
 * of utf8proc. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "base/utf8.h"
#include "tokenizer/unicode_text.h"


bert8_status b8_utf8_check(const char *text, size_t len, const char *what, b8_err *e) {
    if (!text && len) return b8_fail(e, BERT8_ERR_INVALID_ARG, "%s is NULL", what);
    size_t at = text ? b8_utf8_invalid_at((const uint8_t *)text, len) : len;
    if (at == len) return BERT8_OK;
    return b8_fail(e, BERT8_ERR_ENCODING, "%s is not valid UTF-8 at byte offset %zu (byte 0x%02X)",
                   what, at, (unsigned)(uint8_t)text[at]);
}

/* Code points that Unicode 15.0 assigned. The goldens come from Python 3.11, whose unicodedata
 * is Unicode 14.0 and calls them unassigned; utf8proc 2.8 knows them. Listing them keeps
 * BERT's clean-up (which drops unassigned characters) identical to the reference. */
static const uint32_t new_in_15[][2] = {
    {0xCF3, 0xCF3},     {0xECE, 0xECE},     {0x10EFD, 0x10EFF}, {0x1123F, 0x11241},
    {0x11B00, 0x11B09}, {0x11F00, 0x11F10}, {0x11F12, 0x11F3A}, {0x11F3E, 0x11F59},
    {0x1342F, 0x1342F}, {0x13439, 0x13455}, {0x1B132, 0x1B132}, {0x1B155, 0x1B155},
    {0x1D2C0, 0x1D2D3}, {0x1DF25, 0x1DF2A}, {0x1E030, 0x1E06D}, {0x1E08F, 0x1E08F},
    {0x1E4D0, 0x1E4F9}, {0x1F6DC, 0x1F6DC}, {0x1F774, 0x1F776}, {0x1F77B, 0x1F77F},
    {0x1F7D9, 0x1F7D9}, {0x1FA75, 0x1FA77}, {0x1FA87, 0x1FA88}, {0x1FAAD, 0x1FAAF},
    {0x1FABB, 0x1FABD}, {0x1FABF, 0x1FABF}, {0x1FACE, 0x1FACF}, {0x1FADA, 0x1FADB},
    {0x1FAE8, 0x1FAE8}, {0x1FAF7, 0x1FAF8}, {0x2B739, 0x2B739}, {0x31350, 0x323AF},
};

static bool is_new_in_15(uint32_t cp) {
    if (cp < 0xCF3) return false;
    size_t lo = 0, hi = sizeof new_in_15 / sizeof new_in_15[0];
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < new_in_15[mid][0])
            hi = mid;
        else if (cp > new_in_15[mid][1])
            lo = mid + 1;
        else
            return true;
    }
    return false;
}

int b8_uni_category(uint32_t cp) {
    if (cp > 0x10FFFF) return UTF8PROC_CATEGORY_CN;
    int c = utf8proc_category((utf8proc_int32_t)cp);
    if (c != UTF8PROC_CATEGORY_CN && is_new_in_15(cp)) return UTF8PROC_CATEGORY_CN;
    return c;
}

bool b8_uni_is_word(uint32_t cp) {
    if (cp < 0x80)
        return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9') ||
               cp == '_';
    if (cp == 0x200C || cp == 0x200D) return true; /* Join_Control */
    /* Other_Alphabetic symbols: circled and squared Latin letters */
    if ((cp >= 0x24B6 && cp <= 0x24E9) || (cp >= 0x1F130 && cp <= 0x1F149) ||
        (cp >= 0x1F150 && cp <= 0x1F169) || (cp >= 0x1F170 && cp <= 0x1F189))
        return true;
    int c = b8_uni_category(cp);
    return (c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_ND) ||
           c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_PC;
}

/* Python: whitespace is bidirectional class WS, B or S, or category Zs. */
bool b8_uni_isspace(uint32_t cp) {
    if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F);
    if (cp > 0x10FFFF || is_new_in_15(cp)) return false;
    const utf8proc_property_t *p = utf8proc_get_property((utf8proc_int32_t)cp);
    return p->bidi_class == UTF8PROC_BIDI_CLASS_WS || p->bidi_class == UTF8PROC_BIDI_CLASS_B ||
           p->bidi_class == UTF8PROC_BIDI_CLASS_S || p->category == UTF8PROC_CATEGORY_ZS;
}

int b8_uni_lower(uint32_t cp, uint32_t out[2]) {
    if (cp < 0x80) {
        out[0] = (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
        return 1;
    }
    /* the one unconditional multi-character lowercase mapping in SpecialCasing.txt */
    if (cp == 0x130) {
        out[0] = 'i';
        out[1] = 0x307;
        return 2;
    }
    if (cp > 0x10FFFF || is_new_in_15(cp)) {
        out[0] = cp;
        return 1;
    }
    out[0] = (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp);
    return 1;
}

bool b8_ucps_reserve(b8_ucps *u, size_t n) {
    if (n <= u->cap) return true;
    size_t nc = u->cap ? u->cap : 64;
    while (nc < n)
        nc *= 2;
    uint32_t *cp = realloc(u->cp, nc * sizeof *cp);
    if (!cp) return false;
    u->cp = cp;
    int32_t *os = realloc(u->os, nc * sizeof *os);
    if (!os) return false;
    u->os = os;
    int32_t *oe = realloc(u->oe, nc * sizeof *oe);
    if (!oe) return false;
    u->oe = oe;
    u->cap = nc;
    return true;
}

void b8_ucps_free(b8_ucps *u) {
    free(u->cp);
    free(u->os);
    free(u->oe);
    memset(u, 0, sizeof *u);
}

static int ccc(uint32_t cp) {
    if (cp < 0x300) return 0;
    return utf8proc_get_property((utf8proc_int32_t)cp)->combining_class;
}

/* Canonical (full, recursive) decomposition of one code point; returns the count written
 * (at most 8; no canonical decomposition is longer than 4). */
static int decompose1(uint32_t cp, int32_t out[8]) {
    if (cp < 0xC0) {
        out[0] = (int32_t)cp;
        return 1;
    }
    int lbc = 0;
    utf8proc_ssize_t n =
        utf8proc_decompose_char((utf8proc_int32_t)cp, out, 8, UTF8PROC_DECOMPOSE, &lbc);
    if (n < 1 || n > 8) {
        out[0] = (int32_t)cp;
        return 1;
    }
    return (int)n;
}

/* Stable sort of each run of non-starters by combining class (the canonical ordering step
 * of normalization); origins move with their code points. */
static void canonical_order(uint32_t *cp, int32_t *os, int32_t *oe, size_t n) {
    for (size_t i = 1; i < n; i++) {
        int c = ccc(cp[i]);
        if (c == 0) continue;
        size_t j = i;
        while (j > 0) {
            int cj = ccc(cp[j - 1]);
            if (cj == 0 || cj <= c) break;
            j--;
        }
        if (j == i) continue;
        uint32_t tc = cp[i];
        int32_t ts = os ? os[i] : 0, te = oe ? oe[i] : 0;
        memmove(cp + j + 1, cp + j, (i - j) * sizeof *cp);
        if (os) memmove(os + j + 1, os + j, (i - j) * sizeof *os);
        if (oe) memmove(oe + j + 1, oe + j, (i - j) * sizeof *oe);
        cp[j] = tc;
        if (os) os[j] = ts;
        if (oe) oe[j] = te;
    }
}

/* Whether cp can change under NFC or take part in a composition. Everything below U+0300
 * is inert (compositions need a combining mark, Hangul jamo or an Indic vowel sign, all of
 * them above U+0300, as the second character). */
static bool nfc_active(uint32_t cp) {
    if (cp < 0x300) return false;
    if (cp >= 0x4E00 && cp <= 0x9FFF) return false; /* CJK: the common case, all inert */
    const utf8proc_property_t *p = utf8proc_get_property((utf8proc_int32_t)cp);
    if (p->combining_class != 0) return true;
    if (p->category == UTF8PROC_CATEGORY_MN || p->category == UTF8PROC_CATEGORY_MC ||
        p->category == UTF8PROC_CATEGORY_ME)
        return true;
    if ((cp >= 0x1100 && cp <= 0x11FF) || (cp >= 0xA960 && cp <= 0xA97F) ||
        (cp >= 0xD7B0 && cp <= 0xD7FF))
        return true;
    if (p->decomp_seqindex != UINT16_MAX && p->decomp_type == 0) {
        /* canonical decomposition: inert only if it composes straight back */
        int32_t d[8];
        int n = decompose1(cp, d);
        utf8proc_ssize_t m = utf8proc_normalize_utf32(d, n, UTF8PROC_COMPOSE | UTF8PROC_STABLE);
        return !(m == 1 && (uint32_t)d[0] == cp);
    }
    return false;
}

/* NFC of cp[0..n) into (*buf)[0..) (grown as needed); returns the length or -1. */
static ptrdiff_t nfc_into(const uint32_t *cp, size_t n, int32_t **buf, size_t *cap) {
    size_t need = n * 8 + 8;
    if (need > *cap) {
        int32_t *nb = realloc(*buf, need * sizeof *nb);
        if (!nb) return -1;
        *buf = nb;
        *cap = need;
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        m += (size_t)decompose1(cp[i], *buf + m);
    canonical_order((uint32_t *)*buf, NULL, NULL, m);
    utf8proc_ssize_t r =
        utf8proc_normalize_utf32(*buf, (utf8proc_ssize_t)m, UTF8PROC_COMPOSE | UTF8PROC_STABLE);
    return r < 0 ? -1 : (ptrdiff_t)r;
}

/* Output of one composition group: per-character origins when the group came out unchanged,
 * otherwise every output character gets the span of the whole group. */
static bool emit_group(const b8_ucps *w, size_t gs, size_t ge, const int32_t *nfc, size_t m,
                       b8_ucps *out) {
    bool same = (m == ge - gs);
    for (size_t i = 0; same && i < m; i++)
        same = ((uint32_t)nfc[i] == w->cp[gs + i]);
    if (same) {
        for (size_t i = gs; i < ge; i++)
            if (!b8_ucps_push(out, w->cp[i], w->os[i], w->oe[i])) return false;
        return true;
    }
    int32_t s = w->os[gs], e = w->oe[gs];
    for (size_t i = gs; i < ge; i++) {
        if (w->os[i] < s) s = w->os[i];
        if (w->oe[i] > e) e = w->oe[i];
    }
    for (size_t i = 0; i < m; i++)
        if (!b8_ucps_push(out, (uint32_t)nfc[i], s, e)) return false;
    return true;
}

bool b8_uni_nfc(b8_ucps *w, b8_ucps *tmp, b8_nfc_work *work) {
    size_t n = w->n;
    bool active = false;
    for (size_t i = 0; i < n && !active; i++)
        active = nfc_active(w->cp[i]);
    if (!active) return true;

    /* Units are a starter plus the non-starters after it. Neighbouring units are merged into
     * one group while normalizing them together differs from normalizing them apart, so each
     * group is an independent piece of the NFC result with a known origin. */
    b8_nfc_work k = *work; /* the buffers swap roles below; handed back at the end */
    bool ok = false;
    tmp->n = 0;
    size_t gs = 0, ge = 1;
    while (ge < n && ccc(w->cp[ge]) != 0)
        ge++;
    ptrdiff_t gl = nfc_into(w->cp + gs, ge - gs, &k.g, &k.gc);
    if (gl < 0) goto done;
    while (ge < n) {
        size_t us = ge, ue = ge + 1;
        while (ue < n && ccc(w->cp[ue]) != 0)
            ue++;
        ptrdiff_t ul = nfc_into(w->cp + us, ue - us, &k.u, &k.uc);
        ptrdiff_t ml = nfc_into(w->cp + gs, ue - gs, &k.m, &k.mc);
        if (ul < 0 || ml < 0) goto done;
        bool apart = (ml == gl + ul) && !memcmp(k.m, k.g, (size_t)gl * sizeof *k.g) &&
                     !memcmp(k.m + gl, k.u, (size_t)ul * sizeof *k.u);
        if (apart) {
            if (!emit_group(w, gs, ge, k.g, (size_t)gl, tmp)) goto done;
            int32_t *sw = k.g;
            k.g = k.u;
            k.u = sw;
            size_t sc = k.gc;
            k.gc = k.uc;
            k.uc = sc;
            gl = ul;
            gs = us;
        } else {
            int32_t *sw = k.g;
            k.g = k.m;
            k.m = sw;
            size_t sc = k.gc;
            k.gc = k.mc;
            k.mc = sc;
            gl = ml;
        }
        ge = ue;
    }
    if (!emit_group(w, gs, ge, k.g, (size_t)gl, tmp)) goto done;
    {
        b8_ucps sw = *w;
        *w = *tmp;
        *tmp = sw;
    }
    ok = true;
done:
    *work = k;
    return ok;
}

bool b8_uni_strip_accents(b8_ucps *w, b8_ucps *tmp) {
    size_t n = w->n;
    bool ascii = true;
    for (size_t i = 0; i < n && ascii; i++)
        ascii = w->cp[i] < 0x80;
    if (ascii) return true;
    tmp->n = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t d[8];
        int k = decompose1(w->cp[i], d);
        for (int j = 0; j < k; j++)
            if (!b8_ucps_push(tmp, (uint32_t)d[j], w->os[i], w->oe[i])) return false;
    }
    canonical_order(tmp->cp, tmp->os, tmp->oe, tmp->n);
    size_t m = 0;
    for (size_t i = 0; i < tmp->n; i++) {
        if (tmp->cp[i] >= 0x300 && b8_uni_category(tmp->cp[i]) == UTF8PROC_CATEGORY_MN) continue;
        tmp->cp[m] = tmp->cp[i];
        tmp->os[m] = tmp->os[i];
        tmp->oe[m] = tmp->oe[i];
        m++;
    }
    tmp->n = m;
    b8_ucps sw = *w;
    *w = *tmp;
    *tmp = sw;
    return true;
}
