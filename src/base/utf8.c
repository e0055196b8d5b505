/* utf8.c: the UTF-8 validator and helpers (see utf8.h). */
#include "base/utf8.h"

#include <string.h>
#include <utf8proc.h>

#include "bert8.h"

int b8_utf8_put(uint32_t cp, uint8_t *out) {
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | (cp >> 18));
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

/* Strict UTF-8 as Python decodes it: no overlongs, no surrogates, nothing past U+10FFFF. */
size_t b8_utf8_invalid_at(const uint8_t *s, size_t len) {
    size_t i = 0;
    while (i < len) {
        /* eight ASCII bytes at a time: the common case */
        while (i + 8 <= len) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (w & 0x8080808080808080ull) break;
            i += 8;
        }
        if (i >= len) break;
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t need;
        uint8_t lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) {
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
            return i;
        }
        if (len - i <= need) return i;
        if (s[i + 1] < lo || s[i + 1] > hi) return i;
        for (size_t k = 2; k <= need; k++)
            if ((s[i + k] & 0xC0) != 0x80) return i;
        i += need + 1;
    }
    return len;
}

int bert8_utf8_valid(const char *s, size_t len, size_t *bad_offset) {
    if (!s && len) {
        if (bad_offset) *bad_offset = 0;
        return 0;
    }
    size_t at = b8_utf8_invalid_at((const uint8_t *)s, len);
    if (at == len) return 1;
    if (bad_offset) *bad_offset = at;
    return 0;
}

int64_t b8_utf8_chars(const char *s, size_t byte) {
    int64_t n = 0;
    for (size_t i = 0; i < byte; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80) n++;
    return n;
}

size_t b8_utf8_lower(const char *s, size_t len, char *out) {
    const uint8_t *u = (const uint8_t *)s;
    uint8_t *o = (uint8_t *)out;
    size_t w = 0;
    for (size_t i = 0; i < len;) {
        if (u[i] < 0x80) { /* the common case */
            o[w++] = (uint8_t)(u[i] >= 'A' && u[i] <= 'Z' ? u[i] + 32 : u[i]);
            i++;
            continue;
        }
        uint32_t cp;
        i += (size_t)b8_utf8_next(u + i, &cp);
        if (cp == 0x130) { /* the one full mapping to two code points */
            o[w++] = 'i';
            w += (size_t)b8_utf8_put(0x307, o + w);
        } else {
            w += (size_t)b8_utf8_put((uint32_t)utf8proc_tolower((utf8proc_int32_t)cp), o + w);
        }
    }
    return w;
}
