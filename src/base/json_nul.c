/* json_nul.c: a NUL written into a JSON string, found with its field's place (json_nul.h). */
#include "base/json_nul.h"

#include <stdio.h>
#include <string.h>

/* One open container while scanning: an object (its current key) or an array (the index). */
typedef struct frame {
    bool array;
    long index;
    char key[48];
} frame;

#define MAX_DEPTH 32 /* deeper containers are named by their first 32 levels */

static void put_place(const frame *st, int depth, char *where, size_t cap) {
    size_t n = 0;
    where[0] = '\0';
    for (int i = 0; i < depth && i < MAX_DEPTH && n + 1 < cap; i++) {
        int k = st[i].array ? snprintf(where + n, cap - n, "[%ld]", st[i].index)
                            : snprintf(where + n, cap - n, "%s%s", n ? "." : "", st[i].key);
        if (k < 0) break;
        n += (size_t)k < cap - n ? (size_t)k : cap - n - 1;
    }
}

bool b8_json_find_nul(const char *text, size_t len, size_t *offset, char *where, size_t cap) {
    frame st[MAX_DEPTH];
    int depth = 0;
    bool want_key = false; /* the next string in this object is a key */
    for (size_t i = 0; i < len; i++) {
        const char c = text[i];
        if (c == '{' || c == '[') {
            if (depth < MAX_DEPTH) st[depth] = (frame){c == '[', 0, ""};
            depth++;
            want_key = c == '{';
        } else if (c == '}' || c == ']') {
            if (depth > 0) depth--;
            want_key = false;
        } else if (c == ',') {
            if (depth > 0 && depth <= MAX_DEPTH && st[depth - 1].array) st[depth - 1].index++;
            want_key = depth > 0 && depth <= MAX_DEPTH && !st[depth - 1].array;
        } else if (c == '"') {
            const size_t start = i + 1;
            bool nul = false;
            size_t at = 0;
            for (i = start; i < len && text[i] != '"'; i++) {
                if (text[i] != '\\' || i + 1 >= len) continue;
                if (!nul && i + 5 < len && !memcmp(text + i + 1, "u0000", 5)) {
                    nul = true;
                    at = i;
                }
                i++; /* the escaped character, a quote or backslash included */
            }
            const bool is_key = want_key;
            if (is_key && depth > 0 && depth <= MAX_DEPTH) {
                const size_t n = i - start < sizeof st[0].key - 1 ? i - start : sizeof st[0].key - 1;
                memcpy(st[depth - 1].key, text + start, n);
                st[depth - 1].key[n] = '\0';
            }
            want_key = false;
            if (nul) {
                *offset = at;
                char place[256];
                put_place(st, is_key && depth > 0 ? depth - 1 : depth, place, sizeof place);
                if (is_key) snprintf(where, cap, "a key of %s", place[0] ? place : "the top-level object");
                else snprintf(where, cap, "%s", place[0] ? place : "the top-level string");
                return true;
            }
        }
    }
    return false;
}

bert8_status b8_json_refuse_nul(const char *text, size_t len, const char *path, b8_err *e) {
    size_t off;
    char where[300];
    if (!text || !b8_json_find_nul(text, len, &off, where, sizeof where)) return BERT8_OK;
    return b8_fail(e, BERT8_ERR_FORMAT,
                   "%s: %s holds a NUL character (\\u0000, byte offset %zu); a name of a file, module, tensor or "
                   "token cannot contain one",
                   path, where, off);
}
