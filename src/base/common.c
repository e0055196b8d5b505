/* common.c: error helpers, aligned allocation and whole-file reading. */
#include "base/common.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bert8_status b8_fail(b8_err *e, bert8_status status, const char *fmt, ...) {
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
        e->status = status;
    }
    return status;
}

bert8_status b8_wrap(b8_err *e, const char *fmt, ...) {
    if (!e) return BERT8_ERR_INTERNAL;
    char prefix[512], old[sizeof e->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, e->msg, sizeof old);
    size_t pl = strlen(prefix);
    if (pl > sizeof e->msg - 3) pl = sizeof e->msg - 3;
    memcpy(e->msg, prefix, pl);
    e->msg[pl] = ':';
    e->msg[pl + 1] = ' ';
    size_t room = sizeof e->msg - pl - 2;
    size_t ol = strnlen(old, sizeof old - 1);
    if (ol > room - 1) ol = room - 1;
    memcpy(e->msg + pl + 2, old, ol);
    e->msg[pl + 2 + ol] = '\0';
    return e->status;
}

void b8_err_clear(b8_err *e) {
    if (e) {
        e->status = BERT8_OK;
        e->msg[0] = '\0';
    }
}

void *b8_malloc_aligned(size_t n) {
    if (n == 0) n = 64;
    size_t rounded;
    if (!b8_add_ok(n, 63, &rounded)) return NULL;
    rounded &= ~(size_t)63;
    return aligned_alloc(64, rounded);
}

void *b8_calloc_aligned(size_t count, size_t size) {
    size_t n;
    if (!b8_mul_ok(count, size, &n)) return NULL;
    void *p = b8_malloc_aligned(n);
    if (p) memset(p, 0, n);
    return p;
}

void b8_free_aligned(void *p) { free(p); }

bert8_status b8_buf_reserve(b8_buf *buf, size_t count, size_t size, b8_err *e) {
    size_t bytes;
    if (!b8_mul_ok(count, size, &bytes)) return b8_fail(e, BERT8_ERR_TOO_LARGE, "buffer size overflows");
    if (bytes <= buf->cap && buf->p) return BERT8_OK;
    void *p = b8_malloc_aligned(bytes);
    if (!p) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory allocating %zu bytes", bytes);
    b8_free_aligned(buf->p);
    buf->p = p;
    buf->cap = bytes;
    return BERT8_OK;
}

void b8_buf_free(b8_buf *buf) {
    if (!buf) return;
    b8_free_aligned(buf->p);
    buf->p = NULL;
    buf->cap = 0;
}

char *b8_read_file(const char *path, size_t *len, b8_err *e) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        b8_fail(e, BERT8_ERR_IO, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    if (!buf) {
        fclose(f);
        b8_fail(e, BERT8_ERR_NOMEM, "out of memory reading %s", path);
        return NULL;
    }
    for (;;) {
        if (n + 1 >= cap) {
            if (cap > ((size_t)1 << 40)) break;
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                fclose(f);
                b8_fail(e, BERT8_ERR_NOMEM, "out of memory reading %s", path);
                return NULL;
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        b8_fail(e, BERT8_ERR_IO, "error reading %s", path);
        return NULL;
    }
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
}
