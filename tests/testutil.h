/* testutil.h: a minimal test harness. Each test file defines TEST(name) functions and lists
 * them in main() with RUN(name); the program prints "N passed, N failed, N skipped" and exits
 * non-zero on any failure, so ctest and CI read the result. A test that cannot run here calls
 * TU_SKIP("why"); a program whose tests were all skipped exits with TU_SKIP_CODE, which ctest
 * reports as skipped (SKIP_RETURN_CODE), not as passed. */
#ifndef BERT8_TESTUTIL_H
#define BERT8_TESTUTIL_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <math.h>

#include <cjson/cJSON.h>

extern int tu_failed_checks; /* checks failed inside the current test */
extern int tu_passed, tu_failed, tu_skipped;
extern const char *tu_skip_reason; /* set by TU_SKIP inside the current test */

#define TU_SKIP_CODE 77
#define TU_SKIP(why)                                                                           \
    do {                                                                                       \
        tu_skip_reason = (why);                                                                \
        return;                                                                                \
    } while (0)

#define TEST(name) static void test_##name(void)
#define RUN(name)                                                                              \
    do {                                                                                       \
        tu_failed_checks = 0;                                                                  \
        tu_skip_reason = NULL;                                                                 \
        test_##name();                                                                         \
        if (tu_skip_reason && !tu_failed_checks) {                                             \
            tu_skipped++;                                                                      \
            printf("skip %s: %s\n", #name, tu_skip_reason);                                    \
        } else if (tu_failed_checks) {                                                         \
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

/* xorshift64: the tests' deterministic pseudo-random numbers (*state must not be 0). */
static inline uint64_t tu_xorshift(uint64_t *state) {
    uint64_t x = *state;
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return *state = x;
}

/* Path under the shared folder (../shared next to the repository, or $BERT8_SHARED). */
const char *tu_shared_path(const char *rel);
/* A fresh temporary directory (removed by tu_finish). */
const char *tu_tmpdir(void);
/* The whole file, NUL-terminated (free with free()), or NULL; *len (if not NULL) its size. */
char *tu_read_file(const char *path, size_t *len);
/* Writes n bytes to path; returns 0 on success. */
int tu_write_file(const char *path, const void *data, size_t n);

/* ---- the bert8 CLI, for the tests that run it ------------------------------------------- */

/* One run of the built `bert8` (BERT8_CLI_PATH): its exit status, stdout and stderr (never NULL)
 * and stdout parsed line by line as JSON (lines[i] NULL where a line is not JSON). */
typedef struct tu_run {
    int rc;
    char *out, *err;
    cJSON *lines[512];
    int n;
} tu_run;

/* Runs `bert8 ARGS` (ARGS from fmt, quoted by the caller as a shell would need) with the n bytes
 * of input on stdin (input NULL: /dev/null), in the repository root. Fails the current test when
 * stderr holds a sanitizer report (under ASan a report also exits 1, which bad-input runs expect). */
tu_run tu_cli(const void *input, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* tu_cli with nothing on stdin. */
#define tu_bert8(...) tu_cli(NULL, 0, __VA_ARGS__)
void tu_run_free(tu_run *r);
/* The number at o.a(.b(.c)) of a JSON object (b, c NULL: fewer levels), or NAN. */
double tu_json_num(const cJSON *o, const char *a, const char *b, const char *c);

#endif
