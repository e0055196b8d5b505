/* testutil.c: the harness behind testutil.h. */
#define _GNU_SOURCE
#include "testutil.h"
#include "base/common.h"

#include <stdarg.h>
#include <stdlib.h>
#include <sys/wait.h>
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

tu_run tu_cli(const void *input, size_t n, const char *fmt, ...) {
    tu_run r;
    memset(&r, 0, sizeof r);
    char args[4096], cmd[8192], in[1024], out[1024], err[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(in, sizeof in, "%s/stdin.txt", tu_tmpdir());
    snprintf(out, sizeof out, "%s/stdout.txt", tu_tmpdir());
    snprintf(err, sizeof err, "%s/stderr.txt", tu_tmpdir());
    if (input && tu_write_file(in, input, n)) {
        r.rc = -1;
        r.out = strdup("");
        r.err = strdup("cannot write the input file");
        return r;
    }
    snprintf(cmd, sizeof cmd, "'%s' %s < '%s' > '%s' 2> '%s'", BERT8_CLI_PATH, args, input ? in : "/dev/null", out,
             err);
    int st = system(cmd);
    r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    r.out = tu_read_file(out, NULL);
    r.err = tu_read_file(err, NULL);
    if (!r.out) r.out = strdup("");
    if (!r.err) r.err = strdup("");
    CHECKF(!strstr(r.err, "Sanitizer") && !strstr(r.err, "runtime error"), "bert8 %s: %s", args, r.err);
    for (char *p = r.out; p && *p && r.n < 512;) {
        char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        r.lines[r.n++] = cJSON_ParseWithLength(p, len);
        p = nl ? nl + 1 : p + len;
    }
    return r;
}

void tu_run_free(tu_run *r) {
    free(r->out);
    free(r->err);
    for (int i = 0; i < r->n; i++) cJSON_Delete(r->lines[i]);
    memset(r, 0, sizeof *r);
}

double tu_json_num(const cJSON *o, const char *a, const char *b, const char *c) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, a);
    if (b) x = cJSON_GetObjectItemCaseSensitive(x, b);
    if (c) x = cJSON_GetObjectItemCaseSensitive(x, c);
    return cJSON_IsNumber(x) ? x->valuedouble : NAN;
}
