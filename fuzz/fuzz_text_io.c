/* fuzz_text_io.c: the CLI's line reader and text helpers (tools/text_io.c, compiled in
 * unchanged): lines are read from the input with a limit taken from its first byte; each line
 * must respect the limit and be NUL-terminated, the public UTF-8 check (which the CLI
 * uses) must agree with the tokenizer's, byte -> character offsets must be monotonic, and the JSON printers must accept
 * what the checks accept. */
#include "fuzz_util.h"
#include "text_io.h"
#include "tokenizer/tokenizer.h"

static FILE *devnull;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    devnull = fopen("/dev/null", "w");
    return devnull ? 0 : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    size_t max = 1 + data[0] % 64 * 4; /* 1 .. 253 bytes */
    FILE *f = fmemopen((void *)(data + 1), size - 1, "rb");
    if (!f) return 0;
    text_line l = {0};
    int64_t lines = 0;
    int rc;
    while ((rc = text_read_line(f, &l, max)) == 1) {
        lines++;
        FUZZ_CHECK(l.lineno == lines);
        FUZZ_CHECK(l.len <= max && l.buf && l.buf[l.len] == '\0');
        FUZZ_CHECK(l.has_nul == (memchr(l.buf, 0, l.len) != NULL));
        if (l.too_long) continue;
        size_t bad = 0;
        bool ok = bert8_utf8_valid(l.buf, l.len, &bad) != 0;
        b8_err e;
        bool lib_ok = b8_utf8_check(l.buf, l.len, "line", &e) == BERT8_OK;
        FUZZ_CHECK(ok == lib_ok);
        if (!ok) {
            FUZZ_CHECK(bad < l.len);
            continue;
        }
        text_chars c;
        text_chars_init(&c, l.buf, l.len);
        int64_t prev = -1;
        for (size_t b = 0; b <= l.len; b++) {
            if (b < l.len && (l.buf[b] & 0xC0) == 0x80) continue;
            int64_t ch = text_chars_at(&c, (int64_t)b);
            FUZZ_CHECK(ch > prev && ch <= (int64_t)b);
            prev = ch;
        }
        if (!l.has_nul) text_print_json_bytes(devnull, l.buf, l.len);
    }
    FUZZ_CHECK(rc == 0);
    text_line_free(&l);
    fclose(f);
    return 0;
}
