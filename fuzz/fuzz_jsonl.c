/* fuzz_jsonl.c: the CLI's input lines for the text commands (`bert8 classify | embed | qa |
 * ner | tokenize`): tools/text_cmd.c is compiled into this harness unchanged, and each line the
 * line reader (tools/text_io.c) returns goes through its parse_item: JSON objects with named
 * fields ({"text", "text_pair", "id"}, {"question", "context"}), TEXT<TAB>PAIR lines and plain
 * lines. Byte 0 picks the command's fields and options. Invariants: an accepted line gives
 * NUL-terminated, valid UTF-8 texts without NUL bytes that lie within the line's length (a
 * JSON string can only shrink when unescaped), a pair exactly when the command takes one and
 * the line has one, and an "id" that is valid JSON; a refused line gives a message. */
#include "fuzz_util.h" /* first: it defines _GNU_SOURCE */

#include "../tools/text_cmd.c"

static bool valid_text(const char *s, size_t line_len) {
    if (!s) return false;
    size_t n = strlen(s);
    return n <= line_len && bert8_utf8_valid(s, n, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2 || size > 8192) return 0;
    static const struct {
        const char *fa, *fb;
        bool pair_needed;
    } kinds[4] = {{"text", NULL, false}, {"text", "text_pair", false}, {"question", "context", true},
                  {"query", "text", true}};
    tcmd c;
    memset(&c, 0, sizeof c);
    c.name = "fuzz";
    c.fa = kinds[data[0] % 4].fa;
    c.fb = kinds[data[0] % 4].fb;
    c.pair_needed = kinds[data[0] % 4].pair_needed;
    c.plain = (data[0] >> 2) & 1;
    c.max_line = 64 + (size_t)(data[0] >> 3) * 64;
    FILE *f = fmemopen((void *)(data + 1), size - 1, "rb");
    if (!f) return 0;
    text_line l = {0};
    while (text_read_line(f, &l, c.max_line) == 1) {
        item it;
        parse_item(&c, &l, &it);
        if (it.bad) {
            FUZZ_CHECK(it.error && it.error[0]);
        } else {
            FUZZ_CHECK(valid_text(it.a, l.len));
            FUZZ_CHECK(!it.b || valid_text(it.b, l.len));
            FUZZ_CHECK(!c.pair_needed || it.b);
            FUZZ_CHECK(c.fb || !it.b);
            if (it.id) {
                cJSON *id = cJSON_Parse(it.id);
                FUZZ_CHECK(id != NULL);
                cJSON_Delete(id);
            }
        }
        item_clear(&it);
    }
    text_line_free(&l);
    fclose(f);
    return 0;
}
