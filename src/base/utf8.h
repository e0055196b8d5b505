/* utf8.h: the library's one UTF-8 validator (strict, as Python decodes: no overlong forms, no
 * surrogates, nothing past U+10FFFF) and the small encode/decode helpers built on it. */
#ifndef BERT8_UTF8_H
#define BERT8_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Offset of the first byte that is not valid UTF-8, or len when all of it is valid. */
size_t b8_utf8_invalid_at(const uint8_t *s, size_t len);

/* Decodes one scalar value from valid UTF-8 (checked beforehand); returns its length. */
static inline int b8_utf8_next(const uint8_t *p, uint32_t *cp) {
    uint8_t c = p[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c < 0xE0) {
        *cp = ((uint32_t)(c & 0x1F) << 6) | (p[1] & 0x3F);
        return 2;
    }
    if (c < 0xF0) {
        *cp = ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
        return 3;
    }
    *cp = ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(p[1] & 0x3F) << 12) | ((uint32_t)(p[2] & 0x3F) << 6) |
          (p[3] & 0x3F);
    return 4;
}

/* Length of the sequence a valid lead byte starts. */
static inline int b8_utf8_len(uint8_t lead) { return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4; }

/* Encodes a scalar value; returns 1..4 bytes written. */
int b8_utf8_put(uint32_t cp, uint8_t *out);

/* Code points in s[0..byte) of valid UTF-8 (a byte inside a character counts that character). */
int64_t b8_utf8_chars(const char *s, size_t byte);

/* The lowercase of valid UTF-8 s[0..len) into out, which has room for 2 * len bytes; returns the
 * bytes written. As the tokenizers library's Lowercase normalizer (what sentence-transformers'
 * do_lower_case installs): code point by code point, Unicode's lowercase mapping (utf8proc's
 * tables), U+0130 becoming "i" + U+0307, no final-sigma context. */
size_t b8_utf8_lower(const char *s, size_t len, char *out);

#endif
