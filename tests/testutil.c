/* testutil.c: the harness behind testutil.h. */
#define _GNU_SOURCE
#include "testutil.h"
#include "base/common.h"

#include <stdlib.h>
#include <unistd.h>

int tu_failed_checks, tu_passed, tu_failed, tu_skipped;
const char *tu_skip_reason;
static char tu_tmp[256];

int tu_finish(void) {
    if (tu_tmp[0]) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tu_tmp);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tu_tmp);
    }
    if (tu_skipped) printf("%d passed, %d failed, %d skipped\n", tu_passed, tu_failed, tu_skipped);
    else printf("%d passed, %d failed\n", tu_passed, tu_failed);
    if (tu_failed) return 1;
    return tu_passed == 0 && tu_skipped > 0 ? TU_SKIP_CODE : 0;
}

const char *tu_shared_path(const char *rel) {
    static char buf[8][1024];
    static int k;
    const char *root = getenv("BERT8_SHARED");
#ifdef BERT8_SHARED_DIR
    if (!root) root = BERT8_SHARED_DIR;
#endif
    if (!root) root = "../shared";
    char *b = buf[k++ % 8];
    snprintf(b, sizeof buf[0], "%s/%s", root, rel);
    return b;
}

const char *tu_tmpdir(void) {
    if (!tu_tmp[0]) {
        snprintf(tu_tmp, sizeof tu_tmp, "/tmp/bert8-test-XXXXXX");
        if (!mkdtemp(tu_tmp)) {
            tu_tmp[0] = 0;
            return "/tmp";
        }
    }
    return tu_tmp;
}

int tu_write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, n, f);
    int rc = fclose(f);
    return (w == n && rc == 0) ? 0 : -1;
}

char *tu_read_file(const char *path, size_t *len) { return b8_read_file(path, len, NULL); }
