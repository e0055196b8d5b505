/* fuzz_util.h: what the libFuzzer harnesses share: a private scratch folder (on /dev/shm when
 * it exists), writing an input into a file there, splitting one input into several parts,
 * and CHECK, which turns a broken invariant into a crash the fuzzer records. Header-only so
 * that each harness is one translation unit plus the library. */
#ifndef BERT8_FUZZ_UTIL_H
#define BERT8_FUZZ_UTIL_H

#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A broken invariant: print it and crash, so that libFuzzer keeps the input. */
#define FUZZ_CHECK(cond)                                                                       \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #cond);        \
            __builtin_trap();                                                                  \
        }                                                                                      \
    } while (0)

/* The shared folder with the golden data (../shared beside the repository, or $BERT8_SHARED). */
static inline const char *fuzz_shared(const char *rel) {
    static char buf[4][1024];
    static int k;
    const char *root = getenv("BERT8_SHARED");
#ifdef BERT8_SHARED_DIR
    if (!root) root = BERT8_SHARED_DIR;
#endif
    if (!root) root = "../shared";
    char *b = buf[k++ % 4];
    snprintf(b, sizeof buf[0], "%s/%s", root, rel);
    return b;
}

/* This process's scratch folder, made once: /dev/shm/bert8-fuzz-<pid> (or under /tmp). It is
 * removed at a normal exit and left behind on a crash (scripts/fuzz.sh removes stale ones). */
static char fuzz_dir_buf[256];
static inline void fuzz_dir_remove(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fuzz_dir_buf);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", fuzz_dir_buf);
}
static inline const char *fuzz_dir(void) {
    if (!fuzz_dir_buf[0]) {
        struct stat sb;
        const char *base = stat("/dev/shm", &sb) == 0 ? "/dev/shm" : "/tmp";
        snprintf(fuzz_dir_buf, sizeof fuzz_dir_buf, "%s/bert8-fuzz-%ld", base, (long)getpid());
        mkdir(fuzz_dir_buf, 0755);
        atexit(fuzz_dir_remove);
    }
    return fuzz_dir_buf;
}

static inline const char *fuzz_path(const char *name) {
    static char buf[4][512];
    static int k;
    char *b = buf[k++ % 4];
    snprintf(b, sizeof buf[0], "%s/%s", fuzz_dir(), name);
    return b;
}

/* Writes n bytes to path (truncating); returns 0 on success. */
static inline int fuzz_write(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = n ? fwrite(data, 1, n, f) : 0;
    return (fclose(f) == 0 && w == n) ? 0 : -1;
}

/* Reads a whole file into a fresh buffer (NULL when it cannot be read). */
static inline unsigned char *fuzz_read(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(sz > 0 ? (size_t)sz : 1);
    size_t got = b && sz > 0 ? fread(b, 1, (size_t)sz, f) : 0;
    fclose(f);
    *n = got;
    return b;
}

/* Splits data at the separator line "\n#####\n" into at most max parts; returns the count.
 * Missing parts are empty. The dictionaries list the separator, so the fuzzer finds it. */
#define FUZZ_SEP "\n#####\n"
static inline int fuzz_split(const uint8_t *data, size_t size, const uint8_t **part,
                             size_t *len, int max) {
    int n = 0;
    size_t sl = strlen(FUZZ_SEP), start = 0;
    for (int i = 0; i < max; i++) {
        part[i] = data + size;
        len[i] = 0;
    }
    while (n < max) {
        const uint8_t *hit = NULL;
        if (n < max - 1 && size - start >= sl)
            hit = memmem(data + start, size - start, FUZZ_SEP, sl);
        size_t end = hit ? (size_t)(hit - data) : size;
        part[n] = data + start;
        len[n] = end - start;
        n++;
        if (!hit) break;
        start = end + sl;
    }
    return n;
}

/* A NUL-terminated copy of bytes (free with free()). */
static inline char *fuzz_str(const uint8_t *p, size_t n) {
    char *s = malloc(n + 1);
    if (!s) abort();
    if (n) memcpy(s, p, n);
    s[n] = 0;
    return s;
}

#endif
