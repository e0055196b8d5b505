/* cmd_quant.c: `bert8 quantize` (calibrate + SmoothQuant + save an INT8 folder), and the
 * calibration-text helpers it shares with `bert8 bench` (calib_text.h). */
#include "calib_text.h"
#include "cli.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* ---- calibration text (calib_text.h) ---------------------------------------------------- */
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
            if (lineno == 1) {
                char want[256];
                snprintf(want, sizeof want, "%s", columns ? columns : "sentence");
                char *second = strchr(want, ',');
                if (second) *second++ = 0;
                for (int i = 0; i < nc; i++) {
                    if (!strcmp(cols[i], want)) ci[0] = i;
                    if (second && !strcmp(cols[i], second)) ci[1] = i;
                }
                if (ci[0] < 0 && !columns) ci[0] = 0;
                if (ci[0] < 0 || (second && ci[1] < 0)) {
                    rc = cli_error(cmd, "%s: header has no column \"%s\"%s%s", path, want, second ? " or " : "",
                                   second ? second : "");
                    break;
                }
                continue;
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

bool parse_scheme(const char *cmd, const char *v, bert8_scheme *out) {
    if (!v || !strcmp(v, "static")) *out = BERT8_SCHEME_STATIC;
    else if (!strcmp(v, "dynamic")) *out = BERT8_SCHEME_DYNAMIC;
    else {
        cli_error(cmd, "--scheme must be static or dynamic, not \"%s\"", v);
        return false;
    }
    return true;
}

bool parse_attention(const char *cmd, const char *v, int *int8) {
    *int8 = v && !strcmp(v, "int8");
    if (v && strcmp(v, "int8") && strcmp(v, "fp32")) {
        cli_error(cmd, "--attention must be fp32 or int8, not \"%s\"", v);
        return false;
    }
    return true;
}

bool parse_embeddings(const char *cmd, const char *v, int *int8) {
    *int8 = v && !strcmp(v, "int8");
    if (v && strcmp(v, "int8") && strcmp(v, "fp32")) {
        cli_error(cmd, "--embeddings must be fp32 or int8, not \"%s\"", v);
        return false;
    }
    return true;
}

bool parse_alpha(const char *cmd, const char *v, float *alpha, int *smooth) {
    *smooth = 1;
    if (!v) return true;
    if (!strcmp(v, "auto")) {
        *alpha = -1.0f;
        return true;
    }
    if (!strcmp(v, "none")) {
        *smooth = 0;
        return true;
    }
    char *end;
    double a = strtod(v, &end);
    if (*end || !(a >= 0 && a <= 1)) {
        cli_error(cmd, "--alpha must be a number in [0, 1], \"auto\" or \"none\", not \"%s\"", v);
        return false;
    }
    *alpha = (float)a;
    return true;
}

int cmd_quantize(int argc, char **argv) {
    const char *C = "quantize";
    cli_args a;
    cli_args_init(&a, argc, argv);
    const char *outdir = cli_opt(&a, "-o");
    if (!outdir) outdir = cli_opt(&a, "--output");
    const char *calib = cli_opt(&a, "--calib"), *samples_s = cli_opt(&a, "--samples");
    const char *alpha_s = cli_opt(&a, "--alpha"), *scheme_s = cli_opt(&a, "--scheme");
    const char *keep = cli_opt(&a, "--keep-fp32"), *columns = cli_opt(&a, "--column");
    const char *maxlen_s = cli_opt(&a, "--max-length"), *th = cli_opt(&a, "--threads");
    const char *att = cli_opt(&a, "--attention"), *emb = cli_opt(&a, "--embeddings");
    bool quiet = cli_flag(&a, "--quiet");
    const char *dir = cli_positional(&a), *left = cli_leftover(&a);
    if (left) return cli_error(C, "unknown argument \"%s\"", left);
    if (!dir) return cli_error(C, "missing MODEL_DIR");
    if (!outdir || !*outdir) return cli_error(C, "missing -o OUT_DIR");
    if (!calib || !*calib) return cli_error(C, "missing --calib FILE (text lines, JSON lines or TSV)");
    long samples = 512, maxlen = 128, threads = 0;
    if (samples_s && !cli_int(C, "--samples", samples_s, 1, 10000000, &samples)) return 1;
    if (maxlen_s && !cli_int(C, "--max-length", maxlen_s, 2, 65536, &maxlen)) return 1;
    if (th && !cli_int(C, "--threads", th, 1, 1024, &threads)) return 1;
    bert8_quant_params p = bert8_default_quant_params();
    if (!parse_scheme(C, scheme_s, &p.scheme) || !parse_alpha(C, alpha_s, &p.alpha, &p.smooth)) return 1;
    p.max_samples = samples;
    p.keep_fp32 = keep;
    p.progress = !quiet;
    if (!parse_attention(C, att, &p.int8_attention) || !parse_embeddings(C, emb, &p.int8_embeddings)) return 1;
    texts t = {0};
    int rc = read_texts(C, calib, columns, samples, &t);
    if (rc) {
        texts_free(&t);
        return rc;
    }
    bert8_model *m = cli_load_model(C, dir, (int)threads), *q = NULL;
    bert8_tokenizer *tok = NULL;
    bert8_encoding *encs = NULL;
    bert8_batch *batches = NULL;
    int64_t nb = 0;
    char err[1024];
    rc = 1;
    if (!m) goto out;
    if (bert8_tokenizer_load(dir, &tok, err, sizeof err)) {
        cli_error(C, "the calibration text needs the model's tokenizer: %s", err);
        goto out;
    }
    if (maxlen > bert8_model_get_info(m)->max_seq_len) maxlen = bert8_model_get_info(m)->max_seq_len;
    if (make_batches(C, tok, &t, maxlen, 16, &encs, &batches, &nb)) goto out;
    bert8_status st = bert8_quantize(m, batches, (size_t)nb, &p, &q, err, sizeof err);
    if (st) {
        cli_error(C, "%s (%s)", err, bert8_status_string(st));
        goto out;
    }
    if ((st = bert8_model_save(q, outdir, err, sizeof err))) {
        cli_error(C, "%s (%s)", err, bert8_status_string(st));
        goto out;
    }
    if (!quiet)
        fprintf(stderr, "wrote %s: INT8 %s, alpha %s, %s attention, %lld calibration sequences\n", outdir,
                p.scheme == BERT8_SCHEME_STATIC ? "static" : "dynamic", !p.smooth ? "none (no smoothing)" : alpha_s ? alpha_s : "0.5",
                p.int8_attention ? "INT8" : "FP32", (long long)(t.n < samples ? t.n : samples));
    rc = 0;
out:
    free_batches(encs, batches, nb);
    bert8_tokenizer_free(tok);
    bert8_model_free(q);
    bert8_model_free(m);
    texts_free(&t);
    return rc;
}

