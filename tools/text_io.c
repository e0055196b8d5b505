/* text_io.c: line reading, UTF-8 checks, offsets and JSON/progress output (see text_io.h). */
#include "text_io.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int text_read_line(FILE *f, text_line *l, size_t max_bytes) {
    l->len = 0;
    l->too_long = l->has_nul = false;
    bool any = false;
    int c;
    while ((c = getc_unlocked(f)) != EOF) {
        any = true;
        if (c == '\n') break;
        if (l->too_long) continue; /* drain the rest of an over-long line */
        if (l->len >= max_bytes) {
            l->too_long = true;
            continue;
        }
        if (l->len + 1 >= l->cap) {
            size_t cap = l->cap ? l->cap * 2 : 4096;
            if (cap > max_bytes + 1) cap = max_bytes + 1;
            if (cap <= l->len + 1) cap = l->len + 2;
            char *nb = realloc(l->buf, cap);
            if (!nb) return -1;
            l->buf = nb;
            l->cap = cap;
        }
        if (c == 0) l->has_nul = true;
        l->buf[l->len++] = (char)c;
    }
    if (ferror(f)) return -1;
    if (!any) return 0;
    if (!l->buf) {
        l->buf = malloc(1);
        if (!l->buf) return -1;
        l->cap = 1;
    }
    if (l->len && l->buf[l->len - 1] == '\r') l->len--;
    l->buf[l->len] = 0;
    l->lineno++;
    return 1;
}

void text_line_free(text_line *l) {
    if (!l) return;
    free(l->buf);
    memset(l, 0, sizeof *l);
}


void text_chars_init(text_chars *c, const char *s, size_t len) {
    c->s = s;
    c->len = len;
    c->byte = 0;
    c->chr = 0;
}

int64_t text_chars_at(text_chars *c, int64_t byte) {
    size_t b = byte < 0 ? 0 : (size_t)byte;
    if (b > c->len) b = c->len;
    if (b < c->byte) c->byte = 0, c->chr = 0;
    for (; c->byte < b; c->byte++)
        if (((unsigned char)c->s[c->byte] & 0xC0) != 0x80) c->chr++;
    /* An offset inside a character (never produced by the tokenizer) counts that character. */
    return c->chr;
}

void text_print_double(FILE *f, double v) {
    if (isnan(v) || isinf(v)) {
        fputs("null", f);
        return;
    }
    char buf[40];
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    fputs(buf, f);
}

void text_print_json_bytes(FILE *f, const char *s, size_t n) {
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"':
            fputs("\\\"", f);
            break;
        case '\\':
            fputs("\\\\", f);
            break;
        case '\n':
            fputs("\\n", f);
            break;
        case '\r':
            fputs("\\r", f);
            break;
        case '\t':
            fputs("\\t", f);
            break;
        default:
            if (c < 0x20 || c == 0x7F)
                fprintf(f, "\\u%04x", c);
            else
                fputc(c, f);
        }
    }
    fputc('"', f);
}

void text_progress_start(text_progress *p, const char *label, int64_t total, bool on) {
    p->label = label;
    p->total = total;
    p->shown = -1;
    p->on = on && total > 0;
    text_progress_update(p, 0);
}

void text_progress_update(text_progress *p, int64_t done) {
    if (!p->on) return;
    int64_t pct = done >= p->total ? 100 : done * 100 / p->total;
    if (pct == p->shown) return;
    p->shown = pct;
    char bar[41];
    int fill = (int)(pct * 40 / 100);
    for (int i = 0; i < 40; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[40] = 0;
    fprintf(stderr, "\r%s [%s] %3lld%% %lld/%lld", p->label, bar, (long long)pct, (long long)done,
            (long long)p->total);
    fflush(stderr);
}

void text_progress_end(text_progress *p) {
    if (!p->on) return;
    text_progress_update(p, p->total);
    fputc('\n', stderr);
    p->on = false;
}
