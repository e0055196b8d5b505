/* testutil.h: a minimal test harness. Each test file defines TEST(name) functions and lists
 * them in main() with RUN(name); the program prints "N passed, N failed" and exits non-zero
 * on any failure, so ctest and CI read the result. */
#ifndef BERT8_TESTUTIL_H
#define BERT8_TESTUTIL_H

#include <stdio.h>
#include <string.h>
#include <math.h>

extern int tu_failed_checks; /* checks failed inside the current test */
extern int tu_passed, tu_failed;

#define TEST(name) static void test_##name(void)
#define RUN(name)                                                                              \
    do {                                                                                       \
        tu_failed_checks = 0;                                                                  \
        test_##name();                                                                         \
        if (tu_failed_checks) {                                                                \
            tu_failed++;                                                                       \
            printf("FAIL %s\n", #name);                                                        \
        } else {                                                                               \
            tu_passed++;                                                                       \
            printf("ok   %s\n", #name);                                                        \
        }                                                                                      \
        fflush(stdout);                                                                        \
    } while (0)

#define CHECK(cond)                                                                            \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            tu_failed_checks++;                                                                \
            printf("  %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                  \
        }                                                                                      \
    } while (0)
#define CHECKF(cond, ...)                                                                      \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            tu_failed_checks++;                                                                \
            printf("  %s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);                  \
            printf(__VA_ARGS__);                                                               \
            printf("\n");                                                                      \
        }                                                                                      \
    } while (0)

/* Prints the summary line and returns the process exit code. */
int tu_finish(void);

/* Path under the shared folder (../shared next to the repository, or $BERT8_SHARED). */
const char *tu_shared_path(const char *rel);
/* A fresh temporary directory (removed by tu_finish). */
const char *tu_tmpdir(void);
/* The whole file, NUL-terminated (free with free()), or NULL; *len (if not NULL) its size. */
char *tu_read_file(const char *path, size_t *len);
/* Writes n bytes to path; returns 0 on success. */
int tu_write_file(const char *path, const void *data, size_t n);

#endif
