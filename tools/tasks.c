/* tasks.c: TSV, SQuAD and split-file readers for `bert8 eval` (see tasks.h). */
#include "tasks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bert8.h"
#include "text_io.h"

static char *read_all(const char *path, size_t *len, char *err, size_t err_len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, err_len, "cannot open %s", path);
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) break;
        if (n + 1 == cap) {
            char *nb = cap > ((size_t)1 << 40) ? NULL : realloc(buf, cap * 2);
            if (!nb) free(buf);
            buf = nb;
            cap *= 2;
        }
    }
    bool bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        free(buf);
        snprintf(err, err_len, "%s %s", bad ? "read error in" : "out of memory reading", path);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

bool tsv_load(const char *path, tsv_table *t, char *err, size_t err_len) {
    memset(t, 0, sizeof *t);
    size_t len;
    if (!(t->data = read_all(path, &len, err, err_len))) return false;
    char *p = t->data, *end = t->data + len;
    if (len >= 3 && !memcmp(p, "\xEF\xBB\xBF", 3)) p += 3;
    size_t bad;
    if (memchr(p, 0, (size_t)(end - p))) {
        snprintf(err, err_len, "%s: contains a NUL byte at byte %zu", path,
                 (size_t)((char *)memchr(p, 0, (size_t)(end - p)) - t->data));
        goto fail;
    }
    if (!bert8_utf8_valid(p, (size_t)(end - p), &bad)) {
        snprintf(err, err_len, "%s: invalid UTF-8 at byte %zu", path, bad + (size_t)(p - t->data));
        goto fail;
    }
    int64_t cap_rows = 0, line = 0;
    for (char *q = p; q < end;) {
        char *nl = memchr(q, '\n', (size_t)(end - q));
        char *le = nl ? nl : end;
        line++;
        if (le > q && le[-1] == '\r') le[-1] = 0;
        *le = 0; /* le may be end, which holds the NUL read_all appended */
        char *next = nl ? nl + 1 : end;
        if (!*q) { /* blank line */
            q = next;
            continue;
        }
        int64_t nf = 1;
        for (char *c = q; *c; c++)
            nf += *c == '\t';
        if (t->cols == 0) {
            t->cols = nf;
        } else if (nf != t->cols) {
            snprintf(err, err_len, "%s:%lld: %lld fields where the header has %lld", path,
                     (long long)line, (long long)nf, (long long)t->cols);
            goto fail;
        }
        int64_t row = t->cells ? t->rows + 1 : 0; /* 0 is the header */
        if (row + 1 > cap_rows) {
            cap_rows = cap_rows ? cap_rows * 2 : 1024;
            size_t bytes;
            if (__builtin_mul_overflow((size_t)cap_rows, (size_t)t->cols * sizeof(char *), &bytes))
                goto oom;
            char **nc = realloc(t->cells, bytes);
            if (!nc) goto oom;
            t->cells = nc;
            int64_t *nl2 = realloc(t->line, (size_t)cap_rows * sizeof *nl2);
            if (!nl2) goto oom;
            t->line = nl2;
        }
        char **cells = t->cells + row * t->cols;
        int64_t k = 0;
        cells[k++] = q;
        for (char *c = q; *c; c++)
            if (*c == '\t') {
                *c = 0;
                cells[k++] = c + 1;
            }
        if (row > 0) {
            t->line[row - 1] = line;
            t->rows = row;
        }
        q = next;
    }
    if (!t->cells) {
        snprintf(err, err_len, "%s: empty file (no header row)", path);
        goto fail;
    }
    return true;
oom:
    snprintf(err, err_len, "out of memory reading %s", path);
fail:
    tsv_free(t);
    return false;
}

void tsv_free(tsv_table *t) {
    if (!t) return;
    free(t->data);
    free(t->cells);
    free(t->line);
    memset(t, 0, sizeof *t);
}

int64_t tsv_col(const tsv_table *t, const char *name) {
    for (int64_t c = 0; c < t->cols; c++)
        if (!strcmp(t->cells[c], name)) return c;
    return -1;
}

cJSON *json_load_file(const char *path, char *err, size_t err_len) {
    size_t len;
    char *text = read_all(path, &len, err, err_len);
    if (!text) return NULL;
    cJSON *root = cJSON_ParseWithLength(text, len);
    if (!root) {
        const char *ep = cJSON_GetErrorPtr();
        size_t at = ep && ep >= text && ep <= text + len ? (size_t)(ep - text) : 0;
        snprintf(err, err_len, "%s: invalid JSON near byte %zu", path, at);
    }
    free(text);
    return root;
}

/* A string member of a SQuAD object, checked for UTF-8; NULL with a message naming where. */
static const char *squad_str(const cJSON *o, const char *key, const char *path, const char *where,
                             char *err, size_t err_len) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    size_t bad;
    if (!cJSON_IsString(v) || !v->valuestring) {
        snprintf(err, err_len, "%s: %s.%s is missing or not a string", path, where, key);
        return NULL;
    }
    if (!bert8_utf8_valid(v->valuestring, strlen(v->valuestring), &bad)) {
        snprintf(err, err_len, "%s: %s.%s is not valid UTF-8 (byte %zu)", path, where, key, bad);
        return NULL;
    }
    return v->valuestring;
}

static const cJSON *squad_arr(const cJSON *o, const char *key, const char *path, const char *where,
                              char *err, size_t err_len) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsArray(v))
        snprintf(err, err_len, "%s: %s.%s is missing or not an array", path, where, key);
    return cJSON_IsArray(v) ? v : NULL;
}

bool squad_load(const char *path, squad_set *s, char *err, size_t err_len) {
    memset(s, 0, sizeof *s);
    if (!(s->root = json_load_file(path, err, err_len))) return false;
    const cJSON *data = squad_arr(s->root, "data", path, "(root)", err, err_len);
    if (!data) goto fail;
    /* Two passes: count, then fill, so the arrays are allocated once. */
    for (int pass = 0; pass < 2; pass++) {
        int64_t nq = 0, ng = 0;
        int ai = 0;
        for (const cJSON *art = data->child; art; art = art->next, ai++) {
            char where[160];
            snprintf(where, sizeof where, "data[%d]", ai);
            const char *title = squad_str(art, "title", path, where, err, err_len);
            const cJSON *paras =
                title ? squad_arr(art, "paragraphs", path, where, err, err_len) : NULL;
            if (!paras) goto fail;
            int pi = 0;
            for (const cJSON *para = paras->child; para; para = para->next, pi++) {
                snprintf(where, sizeof where, "data[%d].paragraphs[%d]", ai, pi);
                const char *ctx = squad_str(para, "context", path, where, err, err_len);
                const cJSON *qas = ctx ? squad_arr(para, "qas", path, where, err, err_len) : NULL;
                if (!qas) goto fail;
                int qi = 0;
                for (const cJSON *qa = qas->child; qa; qa = qa->next, qi++) {
                    snprintf(where, sizeof where, "data[%d].paragraphs[%d].qas[%d]", ai, pi, qi);
                    const char *question = squad_str(qa, "question", path, where, err, err_len);
                    const cJSON *ans =
                        question ? squad_arr(qa, "answers", path, where, err, err_len) : NULL;
                    if (!ans) goto fail;
                    const cJSON *idj = cJSON_GetObjectItemCaseSensitive(qa, "id");
                    int64_t g0 = ng;
                    int k = 0;
                    for (const cJSON *a = ans->child; a; a = a->next, k++) {
                        char w2[200];
                        snprintf(w2, sizeof w2, "%s.answers[%d]", where, k);
                        const char *txt = squad_str(a, "text", path, w2, err, err_len);
                        if (!txt) goto fail;
                        if (pass) s->gold_store[ng] = txt;
                        ng++;
                    }
                    if (ng == g0) {
                        snprintf(err, err_len, "%s: %s has no answers", path, where);
                        goto fail;
                    }
                    if (pass) {
                        squad_question *q = &s->q[nq];
                        q->title = title;
                        q->context = ctx;
                        q->question = question;
                        q->id = cJSON_IsString(idj) ? idj->valuestring : "";
                        q->golds = s->gold_store + g0;
                        q->n_gold = ng - g0;
                    }
                    nq++;
                }
            }
        }
        if (!pass) {
            s->q = calloc((size_t)nq + 1, sizeof *s->q);
            s->gold_store = calloc((size_t)ng + 1, sizeof *s->gold_store);
            if (!s->q || !s->gold_store) {
                snprintf(err, err_len, "out of memory reading %s", path);
                goto fail;
            }
        }
        s->n = nq;
    }
    return true;
fail:
    squad_free(s);
    return false;
}

void squad_free(squad_set *s) {
    if (!s) return;
    cJSON_Delete(s->root);
    free(s->q);
    free(s->gold_store);
    memset(s, 0, sizeof *s);
}

void squad_keep_titles(squad_set *s, const char *const *titles, int64_t n) {
    int64_t k = 0;
    for (int64_t i = 0; i < s->n; i++) {
        bool keep = false;
        for (int64_t j = 0; j < n && !keep; j++)
            keep = !strcmp(s->q[i].title, titles[j]);
        if (keep) s->q[k++] = s->q[i];
    }
    s->n = k;
}
