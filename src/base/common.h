/* common.h: error values, checked arithmetic and aligned allocation shared by every area. */
#ifndef BERT8_COMMON_H
#define BERT8_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#include "bert8.h"

/* An error slot: a status plus a message naming what is wrong. Library code fills one
 * and returns the status; it never prints, exits or aborts. */
typedef struct b8_err {
    bert8_status status;
    char msg[1024];
} b8_err;

/* Sets *e (if not NULL) and returns status, so `return b8_fail(e, ...)` reads naturally. */
bert8_status b8_fail(b8_err *e, bert8_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prefixes an existing message with context ("loading X: <old message>"). */
bert8_status b8_wrap(b8_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void b8_err_clear(b8_err *e);

/* Overflow-checked size arithmetic: return false on overflow. */
static inline bool b8_mul_ok(size_t a, size_t b, size_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool b8_add_ok(size_t a, size_t b, size_t *out) {
    return !__builtin_add_overflow(a, b, out);
}

/* Index of the first NaN or infinity among p[0..n), or n when every value is finite. The
 * loaders check every float tensor a folder supplies once with it: a NaN weight would make
 * every output NaN without a word. Bandwidth-bound (integer tests on the exponent bits). */
size_t b8_first_nonfinite(const float *p, size_t n);

/* 64-byte aligned allocation (cache line, one AVX-512 register). NULL on failure or n == 0
 * overflow. b8_free_aligned(NULL) is a no-op. */
void *b8_malloc_aligned(size_t n);
void *b8_calloc_aligned(size_t count, size_t size);
void b8_free_aligned(void *p);

/* A growable 64-byte aligned scratch buffer; contents are not kept when it grows. Zero it
 * before first use; free with b8_buf_free. */
typedef struct b8_buf {
    void *p;
    size_t cap; /* bytes */
} b8_buf;

/* Grows buf to at least count * size bytes. */
bert8_status b8_buf_reserve(b8_buf *buf, size_t count, size_t size, b8_err *e);
void b8_buf_free(b8_buf *buf); /* frees and zeroes; NULL is a no-op */

/* Largest file b8_read_file() reads (1 GiB); the loaders pass smaller limits per file kind. */
#define B8_READ_FILE_MAX ((size_t)1 << 30)

/* Reads a whole regular file; returns NULL and fills e on failure. *len excludes the added NUL.
 * The path is opened without blocking and checked with fstat before anything is read, so a
 * FIFO, socket, device or folder under that name is refused (BERT8_ERR_IO) instead of
 * blocking; a file larger than max_bytes is refused with BERT8_ERR_TOO_LARGE before any
 * memory is allocated for it. b8_read_file() is b8_read_file_max(..., B8_READ_FILE_MAX, ...). */
char *b8_read_file(const char *path, size_t *len, b8_err *e);
char *b8_read_file_max(const char *path, size_t max_bytes, size_t *len, b8_err *e);

/* Opens path read-only (O_CLOEXEC) for a loader: without blocking on a FIFO, and refusing
 * anything but a regular file with a message naming the path. Returns the descriptor and
 * its size in *size, or -1 with e filled. */
int b8_open_regular(const char *path, size_t *size, b8_err *e);

/* What is at a path, without opening it: B8_PATH_NONE when nothing is there (or it cannot be
 * reached), B8_PATH_FILE for a regular file (symlinks followed), B8_PATH_OTHER for anything
 * else (folder, FIFO, socket, device). */
typedef enum b8_path_kind { B8_PATH_NONE, B8_PATH_FILE, B8_PATH_OTHER } b8_path_kind;
b8_path_kind b8_path_kind_of(const char *path);

#endif
