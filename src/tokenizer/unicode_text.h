/* unicode_text.h: the Unicode properties and normalizations the tokenizers need, as Python 3.11
 * gives them (unicode_text.c), and the code point buffers they work on. */
#ifndef BERT8_UNICODE_TEXT_H
#define BERT8_UNICODE_TEXT_H

#include "tokenizer/tok_types.h"

/* Unicode general category as utf8proc numbers it (UTF8PROC_CATEGORY_*), except that code
 * points new in Unicode 15.0 read as unassigned (Cn), as Python 3.11's unicodedata says. */
int b8_uni_category(uint32_t cp);
/* A character of regex \w as HF tokenizers' single_word check reads it. */
bool b8_uni_is_word(uint32_t cp);
/* Python's str.isspace(). */
bool b8_uni_isspace(uint32_t cp);
/* Python's str.lower() of one character: 1 or 2 code points (U+0130 -> i U+0307). */
int b8_uni_lower(uint32_t cp, uint32_t out[2]);

bool b8_ucps_reserve(b8_ucps *u, size_t n);
void b8_ucps_free(b8_ucps *u);
static inline bool b8_ucps_push(b8_ucps *u, uint32_t cp, int32_t os, int32_t oe) {
    if (u->n == u->cap && !b8_ucps_reserve(u, u->n + 1)) return false;
    u->cp[u->n] = cp;
    u->os[u->n] = os;
    u->oe[u->n] = oe;
    u->n++;
    return true;
}

/* NFC of w in place, keeping origins: characters that compose share the span of what they
 * came from. tmp and work are scratch. Returns false on allocation failure. */
bool b8_uni_nfc(b8_ucps *w, b8_ucps *tmp, b8_nfc_work *work);
/* NFD of w with Mn (non-spacing marks) dropped, i.e. BERT's _run_strip_accents. */
bool b8_uni_strip_accents(b8_ucps *w, b8_ucps *tmp);

#endif
