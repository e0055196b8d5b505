/* calib_text.c: calibration text for `bert8 quantize` and `bert8 bench` (calib_text.h): reading
 * it, the built-in sample sentences, and encoding it into batches. */
#include "calib_text.h"
#include "cli.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

void texts_free(texts *t) {
    for (int64_t i = 0; i < t->n; i++) free(t->a[i]), free(t->b[i]);
    free(t->a);
    free(t->b);
    memset(t, 0, sizeof *t);
}

bool texts_add(texts *t, const char *a, const char *b) {
    if (t->n == t->cap) {
        int64_t cap = t->cap ? t->cap * 2 : 256;
        char **na = realloc(t->a, (size_t)cap * sizeof *na);
        if (!na) return false;
        t->a = na;
        char **nb = realloc(t->b, (size_t)cap * sizeof *nb);
        if (!nb) return false;
        t->b = nb;
        t->cap = cap;
    }
    t->a[t->n] = strdup(a);
    t->b[t->n] = b ? strdup(b) : NULL;
    if (!t->a[t->n] || (b && !t->b[t->n])) return false;
    t->n++;
    return true;
}

static int split_tabs(char *line, char **cols, int max) {
    int n = 0;
    cols[n++] = line;
    for (char *p = line; *p && n < max; p++)
        if (*p == '\t') {
            *p = 0;
            cols[n++] = p + 1;
        }
    return n;
}

/* The column a TSV header names as the text without --column: the first of TEXT_COLUMNS among its
 * cells (GLUE's and the usual datasets' names), or -1 when none is: then the line is no header. */
static const char *const TEXT_COLUMNS[] = {"sentence", "text", "sentence1", "question", "premise"};

static int header_text_column(char *const *cols, int nc) {
    for (size_t k = 0; k < sizeof TEXT_COLUMNS / sizeof *TEXT_COLUMNS; k++)
        for (int i = 0; i < nc; i++)
            if (!strcmp(cols[i], TEXT_COLUMNS[k])) return i;
    return -1;
}

int read_texts(const char *cmd, const char *path, const char *columns, int64_t limit, texts *out) {
    FILE *f = fopen(path, "rb");
    if (!f) return cli_error(cmd, "cannot open calibration file %s", path);
    size_t plen = strlen(path);
    bool tsv = columns || (plen > 4 && !strcmp(path + plen - 4, ".tsv"));
    int ci[2] = {-1, -1};
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int64_t lineno = 0;
    int rc = 0;
    while ((len = getline(&line, &cap, f)) >= 0 && (limit <= 0 || out->n < limit)) {
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        char *l = line;
        if (lineno == 1 && (unsigned char)l[0] == 0xEF && (unsigned char)l[1] == 0xBB && (unsigned char)l[2] == 0xBF)
            l += 3;
        if (tsv) {
            char *cols[64];
            int nc = split_tabs(l, cols, 64);
            if (lineno == 1 && columns) { /* --column: the first line is the header naming them */
                char want[256];
                snprintf(want, sizeof want, "%s", columns);
                char *second = strchr(want, ',');
                if (second) *second++ = 0;
                for (int i = 0; i < nc; i++) {
                    if (!strcmp(cols[i], want)) ci[0] = i;
                    if (second && !strcmp(cols[i], second)) ci[1] = i;
                }
                if (ci[0] < 0 || (second && ci[1] < 0)) {
                    rc = cli_error(cmd, "%s: header has no column \"%s\"%s%s", path, want, second ? " or " : "",
                                   second ? second : "");
                    break;
                }
                continue;
            }
            if (lineno == 1) { /* a header only when it names a text column; else the first row */
                ci[0] = header_text_column(cols, nc);
                if (ci[0] >= 0) continue;
                ci[0] = 0;
            }
            if (ci[0] >= nc || ci[1] >= nc) continue;
            if (!texts_add(out, cols[ci[0]], ci[1] >= 0 ? cols[ci[1]] : NULL)) {
                rc = cli_error(cmd, "out of memory");
                break;
            }
            continue;
        }
        if (len == 0) continue;
        if (l[0] == '{') {
            cJSON *o = cJSON_Parse(l);
            const cJSON *a = o ? cJSON_GetObjectItemCaseSensitive(o, "text") : NULL;
            const cJSON *b = o ? cJSON_GetObjectItemCaseSensitive(o, "text_pair") : NULL;
            if (!cJSON_IsString(a)) {
                cJSON_Delete(o);
                rc = cli_error(cmd, "%s line %lld: expected a JSON object with a \"text\" string", path,
                               (long long)lineno);
                break;
            }
            bool ok = texts_add(out, a->valuestring, cJSON_IsString(b) ? b->valuestring : NULL);
            cJSON_Delete(o);
            if (!ok) {
                rc = cli_error(cmd, "out of memory");
                break;
            }
        } else if (!texts_add(out, l, NULL)) {
            rc = cli_error(cmd, "out of memory");
            break;
        }
    }
    free(line);
    fclose(f);
    if (!rc && out->n == 0) rc = cli_error(cmd, "%s holds no calibration text", path);
    return rc;
}

/* Built-in calibration text for `bench` when no --calib is given. */
const char *const SAMPLE_TEXT[] = {
    "The quick brown fox jumps over the lazy dog.",
    "A thoroughly enjoyable film with a sharp script and a warm heart.",
    "The service was slow, the food was cold, and nobody seemed to care.",
    "Quantization maps floating point values to a small set of integers.",
    "She asked whether the meeting had been moved to Thursday afternoon.",
    "In 1969, the Apollo 11 mission landed the first humans on the Moon.",
    "It's not the worst thing I've seen this year, but it comes close.",
    "Prices rose by 3.5% in the third quarter, according to the report.",
    "The committee will publish its findings after the summer recess.",
    "An unexpected twist in the final act leaves the audience breathless.",
    "Please return the form by email no later than Friday, 12 March.",
    "Researchers trained the model on two cores in under an hour.",
    NULL,
};

/* Encodes texts into batches of `rows` sequences (truncated to max_len). */
int make_batches(const char *cmd, const bert8_tokenizer *tok, const texts *t, int64_t max_len, int64_t rows,
                        bert8_encoding **encs, bert8_batch **batches, int64_t *nb) {
    int64_t n = (t->n + rows - 1) / rows;
    *encs = calloc((size_t)n, sizeof **encs);
    *batches = calloc((size_t)n, sizeof **batches);
    if (!*encs || !*batches) return cli_error(cmd, "out of memory");
    bert8_encode_params p = bert8_default_encode_params();
    p.truncation = BERT8_TRUNCATE_LONGEST_FIRST;
    p.max_length = max_len;
    char err[1024];
    for (int64_t i = 0; i < n; i++) {
        int64_t k = t->n - i * rows < rows ? t->n - i * rows : rows;
        if (bert8_encode(tok, k, (const char *const *)t->a + i * rows, (const char *const *)t->b + i * rows, &p,
                         &(*encs)[i], err, sizeof err))
            return cli_error(cmd, "calibration text %lld..%lld: %s", (long long)(i * rows + 1),
                             (long long)(i * rows + k), err);
        (*batches)[i] = bert8_encoding_batch(&(*encs)[i], 0, (*encs)[i].rows);
    }
    *nb = n;
    return 0;
}

void free_batches(bert8_encoding *encs, bert8_batch *b, int64_t n) {
    for (int64_t i = 0; encs && i < n; i++) bert8_encoding_free(&encs[i]);
    free(encs);
    free(b);
}
