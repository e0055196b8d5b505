/* jbuf.c: a growable byte buffer with JSON writers, for response bodies and /metrics. */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

void jb_reserve(jbuf *b, size_t extra) {
    if (b->oom) return;
    if (extra > SIZE_MAX - b->len - 1) {
        b->oom = 1;
        return;
    }
    size_t need = b->len + extra + 1; /* room for a NUL */
    if (need <= b->cap) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    char *d = realloc(b->data, cap);
    if (!d) {
        b->oom = 1;
        return;
    }
    b->data = d;
    b->cap = cap;
}

void jb_put(jbuf *b, const char *s, size_t n) {
    jb_reserve(b, n);
    if (b->oom) return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
}

void jb_puts(jbuf *b, const char *s) { jb_put(b, s, strlen(s)); }

void jb_putc(jbuf *b, char c) { jb_put(b, &c, 1); }

void jb_printf(jbuf *b, const char *fmt, ...) {
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof small) {
        jb_put(b, small, (size_t)n);
        return;
    }
    jb_reserve(b, (size_t)n);
    if (b->oom) return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* Length of the valid UTF-8 character at s (n bytes left), or 0 when it is not one. */
static size_t utf8_char(const unsigned char *s, size_t n) {
    size_t k = s[0] < 0x80 ? 1 : (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3 : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (!k || k > n) return 0;
    return bert8_utf8_valid((const char *)s, k, NULL) ? k : 0;
}

void jb_str(jbuf *b, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    jb_reserve(b, n + 2);
    jb_putc(b, '"');
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n && !b->oom) {
        size_t run = i;
        /* copy plain ASCII in one go */
        while (run < n && p[run] >= 0x20 && p[run] < 0x80 && p[run] != '"' && p[run] != '\\') run++;
        if (run > i) {
            jb_put(b, s + i, run - i);
            i = run;
            continue;
        }
        unsigned char c = p[i];
        if (c < 0x80) {
            char esc[7] = {'\\', 0, 0, 0, 0, 0, 0};
            switch (c) {
            case '"': esc[1] = '"'; jb_put(b, esc, 2); break;
            case '\\': esc[1] = '\\'; jb_put(b, esc, 2); break;
            case '\n': esc[1] = 'n'; jb_put(b, esc, 2); break;
            case '\r': esc[1] = 'r'; jb_put(b, esc, 2); break;
            case '\t': esc[1] = 't'; jb_put(b, esc, 2); break;
            default:
                esc[1] = 'u', esc[2] = '0', esc[3] = '0', esc[4] = hex[c >> 4], esc[5] = hex[c & 15];
                jb_put(b, esc, 6);
            }
            i++;
            continue;
        }
        size_t k = utf8_char(p + i, n - i);
        if (k) {
            jb_put(b, s + i, k);
            i += k;
        } else {
            jb_puts(b, "\xEF\xBF\xBD"); /* U+FFFD */
            i++;
        }
    }
    jb_putc(b, '"');
}

void jb_cstr(jbuf *b, const char *s) { jb_str(b, s ? s : "", s ? strlen(s) : 0); }

void jb_float(jbuf *b, float v) {
    if (isnan(v) || isinf(v)) {
        jb_put(b, "null", 4);
        return;
    }
    char buf[32];
    int n = 0;
    for (int prec = 6; prec <= 9; prec++) {
        n = snprintf(buf, sizeof buf, "%.*g", prec, (double)v);
        if (strtof(buf, NULL) == v) break;
    }
    if (n > 0) jb_put(b, buf, (size_t)n);
}

void jb_floats(jbuf *b, const float *v, int64_t n) {
    jb_reserve(b, (size_t)(n > 0 ? n : 0) * 12 + 2);
    jb_putc(b, '[');
    for (int64_t i = 0; i < n; i++) {
        if (i) jb_putc(b, ',');
        jb_float(b, v[i]);
    }
    jb_putc(b, ']');
}

void jb_int(jbuf *b, int64_t v) { jb_printf(b, "%lld", (long long)v); }

void jb_base64(jbuf *b, const void *data, size_t n) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *p = data;
    if (n > (SIZE_MAX - 3) / 4 * 3) {
        b->oom = 1;
        return;
    }
    jb_reserve(b, (n + 2) / 3 * 4 + 2);
    if (b->oom) return;
    char *o = b->data + b->len;
    *o++ = '"';
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t w = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        *o++ = tab[w >> 18], *o++ = tab[(w >> 12) & 63], *o++ = tab[(w >> 6) & 63], *o++ = tab[w & 63];
    }
    if (i < n) {
        uint32_t w = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);
        *o++ = tab[w >> 18], *o++ = tab[(w >> 12) & 63];
        *o++ = i + 1 < n ? tab[(w >> 6) & 63] : '=';
        *o++ = '=';
    }
    *o++ = '"';
    b->len = (size_t)(o - b->data);
    b->data[b->len] = 0;
}

void jb_free(jbuf *b) {
    free(b->data);
    *b = (jbuf){0};
}

char *jb_take(jbuf *b, size_t *len) {
    if (b->oom) {
        jb_free(b);
        *len = 0;
        return NULL;
    }
    char *d = b->data ? b->data : calloc(1, 1);
    *len = b->data ? b->len : 0;
    *b = (jbuf){0};
    return d;
}
