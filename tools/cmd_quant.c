/* cmd_quant.c: `bert8 quantize` (calibrate + SmoothQuant + save an INT8 folder; with --max-drop,
 * to an accuracy budget; with --min-cosine, to an embedding-fidelity budget), and the
 * calibration-text helpers it shares with `bert8 bench` (calib_text.h). */
#include "calib_text.h"
#include "cli.h"
#include "eval_set.h"
#include "text_runner.h"

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

/* Leaves *int8 (the library's default, -1: INT8 where the head size allows) when v is NULL. */
bool parse_attention(const char *cmd, const char *v, int *int8) {
    if (v) *int8 = !strcmp(v, "int8");
    if (v && strcmp(v, "int8") && strcmp(v, "fp32")) {
        cli_error(cmd, "--attention must be fp32 or int8, not \"%s\"", v);
        return false;
    }
    return true;
}

/* The default (-1) as the library settles it, so that messages name what runs: INT8 attention
 * where the head size is a multiple of 4. */
void resolve_attention(const bert8_model *m, int *int8) {
    const bert8_model_info *in = bert8_model_get_info(m);
    if (*int8 < 0) *int8 = in && in->num_heads > 0 && (in->hidden_size / in->num_heads) % 4 == 0;
}

bool parse_weight_bits(const char *cmd, const char *v, int *bits) {
    if (!v) return true;
    if (strcmp(v, "7") && strcmp(v, "8")) {
        cli_error(cmd, "--weight-bits must be 7 or 8, not \"%s\"", v);
        return false;
    }
    *bits = v[0] - '0';
    return true;
}

static bool parse_per_token(const char *cmd, const char *flag, const char *v, int *per_token) {
    if (!v) return true;
    if (strcmp(v, "dynamic") && strcmp(v, "static")) {
        cli_error(cmd, "%s must be dynamic (per token) or static (per tensor), not \"%s\"", flag, v);
        return false;
    }
    *per_token = !strcmp(v, "dynamic");
    return true;
}

bool parse_ffn_out(const char *cmd, const char *v, int *per_token) {
    return parse_per_token(cmd, "--ffn-out", v, per_token);
}

bool parse_ffn_in(const char *cmd, const char *v, int *per_token) {
    return parse_per_token(cmd, "--ffn-in", v, per_token);
}

bool parse_outliers(const char *cmd, const char *v, int *outliers) {
    if (!v) return true;
    long n;
    if (!cli_int(cmd, "--outliers", v, 0, 64, &n)) return false;
    *outliers = (int)n;
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

/* ---- timing two models side by side (the speed cost of a budgeted model) ----------------
 * As `bert8 bench` times: the same deterministic token ids, a warm-up pass each, then passes of
 * the two models interleaved in this process, medians compared. */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Token ids for timing: deterministic, away from the special ids at the low end. */
static int32_t *timing_ids(const bert8_model_info *info, int64_t B, int64_t S) {
    int32_t *ids = malloc((size_t)(B * S) * sizeof *ids);
    for (int64_t i = 0; ids && i < B * S; i++)
        ids[i] = (int32_t)(5 + ((uint64_t)i * 2654435761u) % (uint64_t)(info->vocab_size - 5));
    return ids;
}

typedef struct bench_result {
    long iters;
    double med[2], best[2];       /* seconds per forward pass of models a and b */
    double op[2][BERT8_OP_COUNT]; /* seconds per pass spent in each op (median over the passes) */
} bench_result;

/* Times models a and b on one batch in this process: a warm-up pass each (allocations,
 * primitive creation), then iters passes of each, interleaved so that both see the same machine
 * (iters 0: about `seconds` of timing in all, 3 to 50 passes). */
static int bench_pair(const char *cmd, const bert8_model *a, const bert8_model *b, const bert8_batch *batch,
                      long iters, double seconds, bench_result *r) {
    bert8_session *sa = NULL, *sb = NULL;
    double *ta = NULL, *tb = NULL, *ops = NULL;
    int rc = 1;
    memset(r, 0, sizeof *r);
    if (bert8_session_create(a, &sa) || bert8_session_create(b, &sb)) {
        cli_error(cmd, "out of memory creating sessions");
        goto out;
    }
    bert8_outputs o;
    bert8_status st;
    if ((st = bert8_forward(sa, batch, &o)) || (st = bert8_forward(sb, batch, &o))) {
        cli_error(cmd, "forward failed: %s", bert8_session_last_error(st ? sb : sa));
        goto out;
    }
    double t0 = omp_get_wtime();
    bert8_forward(sa, batch, &o);
    double one = omp_get_wtime() - t0;
    if (iters == 0) iters = (long)(seconds / (one * 1.5 + 1e-9));
    if (iters < 3) iters = 3;
    if (iters > 50) iters = 50;
    /* ops[(model * BERT8_OP_COUNT + op) * iters + pass]: per-pass times, whose medians resist the
     * odd pass another process slows down */
    if (!(ta = malloc((size_t)iters * sizeof *ta)) || !(tb = malloc((size_t)iters * sizeof *tb)) ||
        !(ops = malloc((size_t)iters * 2 * BERT8_OP_COUNT * sizeof *ops))) {
        cli_error(cmd, "out of memory");
        goto out;
    }
    for (long i = 0; i < iters; i++) {
        double pa[BERT8_OP_COUNT], pb[BERT8_OP_COUNT];
        bert8_session_set_profiling(sa, 1); /* clears the sums */
        bert8_session_set_profiling(sb, 1);
        double a0 = omp_get_wtime();
        bert8_forward(sa, batch, &o);
        double a1 = omp_get_wtime();
        bert8_forward(sb, batch, &o);
        double a2 = omp_get_wtime();
        ta[i] = a1 - a0;
        tb[i] = a2 - a1;
        bert8_session_get_profile(sa, pa);
        bert8_session_get_profile(sb, pb);
        for (int k = 0; k < BERT8_OP_COUNT; k++) {
            ops[(size_t)k * iters + i] = pa[k];
            ops[(size_t)(BERT8_OP_COUNT + k) * iters + i] = pb[k];
        }
    }
    for (int k = 0; k < 2 * BERT8_OP_COUNT; k++) {
        double *v = ops + (size_t)k * iters;
        qsort(v, (size_t)iters, sizeof *v, cmp_double);
        r->op[k / BERT8_OP_COUNT][k % BERT8_OP_COUNT] = v[iters / 2];
    }
    qsort(ta, (size_t)iters, sizeof *ta, cmp_double);
    qsort(tb, (size_t)iters, sizeof *tb, cmp_double);
    r->iters = iters;
    r->med[0] = ta[iters / 2];
    r->med[1] = tb[iters / 2];
    r->best[0] = ta[0];
    r->best[1] = tb[0];
    rc = 0;
out:
    free(ta);
    free(tb);
    free(ops);
    bert8_session_free(sa);
    bert8_session_free(sb);
    return rc;
}

/* ---- quantize to an accuracy budget (--max-drop) ------------------------------------------
 * The library searches (bert8_quantize_budget); this part supplies the evaluation callback (the
 * task's headline metric, in points, on a tuning slice of the eval data), shows the search as it
 * runs, then scores FP32, the all-INT8 model, the result and each ranking's result on the
 * held-out rest, times the result against the all-INT8 model, and prints the table. */

typedef struct budget_opts {
    double max_drop, tune_fraction, bench_seconds;
    double min_mean, min_p1; /* --min-cosine MEAN[,P1] (min_p1 NAN: none) */
    bool cosine;             /* --min-cosine rather than --max-drop */
    const char *task, *data, *split, *report;
    long limit, batch;
    bert8_ranking ranking;
    int allow_dynamic, trim;
    bool conservative, quiet;
} budget_opts;

static bool parse_points(const char *cmd, const char *name, const char *v, double lo, double hi, double *out) {
    char *end;
    double x = v ? strtod(v, &end) : NAN;
    if (!v || !*v || *end || !isfinite(x) || x < lo || x > hi) {
        cli_error(cmd, "%s must be a finite number in [%g, %g], not \"%s\"", name, lo, hi, v ? v : "");
        return false;
    }
    *out = x;
    return true;
}

/* --min-cosine MEAN[,P1]: each a number strictly between 0 and 1; *p1 NAN when not given. */
static bool parse_min_cosine(const char *cmd, const char *v, double *mean, double *p1) {
    char *end;
    double m = strtod(v, &end), q = NAN;
    bool ok = *v && end != v && isfinite(m) && m > 0 && m < 1;
    if (ok && *end == ',') {
        const char *s = end + 1;
        q = strtod(s, &end);
        ok = *s && end != s && isfinite(q) && q > 0 && q < 1;
    }
    if (!ok || *end) {
        cli_error(cmd, "--min-cosine must be MEAN or MEAN,P1, each a number strictly between 0 and 1 (e.g. "
                       "0.999,0.995), not \"%s\"", v);
        return false;
    }
    *mean = m;
    *p1 = q;
    return true;
}

/* The tuning and held-out slices: a fixed-seed shuffle of the examples, the first
 * ceil(fraction * n) tune, the rest are held out; both sorted. Deterministic, and interleaved
 * over the file whatever order its rows are in. */
static bool split_slices(int64_t n, double fraction, int64_t **tune, int64_t *nt, int64_t **held, int64_t *nh) {
    int64_t *perm = malloc((size_t)n * sizeof *perm);
    *tune = malloc((size_t)n * sizeof **tune);
    *held = malloc((size_t)n * sizeof **held);
    if (!perm || !*tune || !*held) {
        free(perm);
        return false;
    }
    uint64_t rng = 0x9E3779B97F4A7C15ULL;
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        int64_t j = (int64_t)(rng % (uint64_t)(i + 1)), x = perm[i];
        perm[i] = perm[j];
        perm[j] = x;
    }
    int64_t k = (int64_t)ceil(fraction * (double)n);
    if (k < 1) k = 1;
    if (k > n) k = n;
    bool *in_tune = calloc((size_t)n, sizeof *in_tune);
    if (!in_tune) {
        free(perm);
        return false;
    }
    for (int64_t i = 0; i < k; i++) in_tune[perm[i]] = true;
    *nt = *nh = 0;
    for (int64_t i = 0; i < n; i++) {
        if (in_tune[i]) (*tune)[(*nt)++] = i;
        else (*held)[(*nh)++] = i;
    }
    free(in_tune);
    free(perm);
    return true;
}

static bool same_modes(const bert8_budget_report *r, const bert8_unit_mode *a, const bert8_unit_mode *b) {
    return !memcmp(a, b, (size_t)r->n_units * sizeof *a);
}

/* A configuration the callback scored: its units' modes, the searched score and the plain metric. */
typedef struct scored_cfg {
    bert8_unit_mode *modes;
    double score, plain;
} scored_cfg;

typedef struct budget_eval {
    const eval_set *es;
    const bert8_tokenizer *tok;
    const char *dir;
    bert8_pipeline_params pp;
    const int64_t *idx; /* the tuning slice */
    int64_t n;
    const double *fp32_ex; /* [n] FP32's own score per tuning example; NULL: the plain metric is searched */
    double *ex;            /* [n] scratch */
    scored_cfg *seen;
    size_t n_seen, cap_seen;
} budget_eval;

/* The task's headline metric in points of model m on examples idx[0..n) (per_example: see
 * eval_set_score). */
static bert8_status score_model(const budget_eval *be, const bert8_model *m, const int64_t *idx, int64_t n,
                                double *per_example, double *score, char *err, size_t err_len) {
    bert8_pipeline *pl = NULL;
    bert8_status st = bert8_pipeline_wrap(m, be->tok, be->dir, &be->pp, &pl, err, err_len);
    if (st) return st;
    eval_result r;
    st = eval_set_score(be->es, pl, idx, n, 0, &r, per_example, err, err_len);
    bert8_pipeline_free(pl);
    if (!st) *score = eval_headline(be->es->o.task, &r);
    return st;
}

static bert8_unit_mode *modes_of(const bert8_model *m) {
    const int64_t n = bert8_model_unit_count(m);
    bert8_unit_mode *modes = malloc((size_t)n * sizeof *modes + 1);
    for (int64_t u = 0; modes && u < n; u++) {
        bert8_unit_info ui;
        modes[u] = bert8_model_unit(m, u, &ui) ? BERT8_UNIT_FP32 : ui.mode;
    }
    return modes;
}

/* The evaluation callback of the search, on the tuning slice. Conservative (the default where
 * the metric is a mean over examples): each example counts at most what it scores under FP32,
 * so quantization is charged for every example it breaks and credited for none it happens to
 * fix; a configuration that flips many predictions both ways cannot pass as harmless. */
static bert8_status budget_score(void *ctx, const bert8_model *cand, double *score, char *err, size_t err_len) {
    budget_eval *be = ctx;
    double plain;
    bert8_status st = score_model(be, cand, be->idx, be->n, be->ex, &plain, err, err_len);
    if (st) return st;
    *score = plain;
    if (be->fp32_ex) {
        double sum = 0;
        for (int64_t i = 0; i < be->n; i++) sum += be->ex[i] < be->fp32_ex[i] ? be->ex[i] : be->fp32_ex[i];
        *score = 100.0 * sum / (double)be->n;
    }
    if (be->n_seen == be->cap_seen) {
        size_t cap = be->cap_seen ? be->cap_seen * 2 : 64;
        scored_cfg *ns = realloc(be->seen, cap * sizeof *ns);
        if (!ns) return snprintf(err, err_len, "out of memory"), BERT8_ERR_NOMEM;
        be->seen = ns;
        be->cap_seen = cap;
    }
    bert8_unit_mode *modes = modes_of(cand);
    if (!modes) return snprintf(err, err_len, "out of memory"), BERT8_ERR_NOMEM;
    be->seen[be->n_seen++] = (scored_cfg){modes, *score, plain};
    return BERT8_OK;
}

/* The plain tuning metric of a configuration the search scored, or NAN. */
static double plain_of(const budget_eval *be, const bert8_unit_mode *modes, int64_t units) {
    for (size_t i = 0; i < be->n_seen; i++)
        if (!memcmp(be->seen[i].modes, modes, (size_t)units * sizeof *modes)) return be->seen[i].plain;
    return NAN;
}

/* A cosine budget's statistics of one model on one slice: the mean, the 1st percentile (nearest
 * rank) and the minimum of the per-text cosine to the FP32 embedding. */
typedef struct cos_stats {
    double mean, p1, min;
} cos_stats;

typedef struct budget_view {
    const bert8_model *m;
    bool quiet;
    int prec;              /* decimals of scores: 2 (points), 4 (a cosine budget's score) */
    const cos_stats *last; /* a cosine budget: the latest candidate's statistics, else NULL */
    cos_stats *start;      /* a cosine budget: where the all-INT8 baseline's statistics go */
} budget_view;

static void unit_label(const bert8_model *m, int64_t u, char *out, size_t n) {
    bert8_unit_info ui;
    if (u >= 0 && !bert8_model_unit(m, u, &ui)) snprintf(out, n, "layer %lld %s", (long long)ui.layer, ui.kind);
    else snprintf(out, n, "unit %lld", (long long)u);
}

/* The progress display: one line per scored configuration, on stderr. */
static void budget_progress(void *ctx, const bert8_budget_event *ev) {
    const budget_view *v = ctx;
    if (v->start && v->last && ev->stage == BERT8_BUDGET_BASELINE && ev->mode != BERT8_UNIT_FP32 && !ev->cached)
        *v->start = *v->last;
    if (v->quiet) return;
    char u[96];
    unit_label(v->m, ev->unit, u, sizeof u);
    const char *seen = ev->cached ? ", seen before" : "";
    const int pr = v->prec;
    switch (ev->stage) {
    case BERT8_BUDGET_BASELINE:
        if (ev->mode == BERT8_UNIT_FP32) fprintf(stderr, "budget: FP32 scores %.*f on the tuning slice", pr, ev->score);
        else
            fprintf(stderr, "budget: all units %s: %.*f (drop %.*f)", bert8_unit_mode_name(ev->mode), pr, ev->score,
                    pr, ev->drop);
        break;
    case BERT8_BUDGET_SENSITIVITY:
        fprintf(stderr, "budget: metric ranking %2lld/%lld: %-28s alone in %s: %.*f (drop %+.*f)%s",
                (long long)ev->done, (long long)ev->total, u, bert8_unit_mode_name(ev->mode), pr, ev->score, pr,
                ev->drop, seen);
        break;
    case BERT8_BUDGET_STEP:
        fprintf(stderr, "budget: [%s] move %2lld: %-28s -> %-12s %.*f (drop %.*f)  [%lld evaluations%s]",
                bert8_ranking_name(ev->ranking), (long long)ev->done, u, bert8_unit_mode_name(ev->mode), pr,
                ev->score, pr, ev->drop, (long long)ev->evaluations, seen);
        break;
    case BERT8_BUDGET_TRIM:
        fprintf(stderr, "budget: [%s] trim %2lld: %-28s back to %-12s %.*f (drop %.*f): %s%s",
                bert8_ranking_name(ev->ranking), (long long)ev->done, u, bert8_unit_mode_name(ev->mode), pr,
                ev->score, pr, ev->drop, ev->accepted ? "kept" : "undone", seen);
        break;
    case BERT8_BUDGET_TRIAL_DONE:
        fprintf(stderr, "budget: [%s] ends at %.*f (drop %.*f) after %lld moves", bert8_ranking_name(ev->ranking), pr,
                ev->score, pr, ev->drop, (long long)ev->done);
        break;
    }
    /* the cosine statistics behind a score just computed */
    if (v->last && !ev->cached && ev->stage != BERT8_BUDGET_TRIAL_DONE)
        fprintf(stderr, "  (cosine mean %.7f, p1 %.7f)", v->last->mean, v->last->p1);
    fputc('\n', stderr);
}

/* Op of the forward-pass profile that times a unit kind's GEMM. */
static int unit_op(const char *kind) {
    if (!strcmp(kind, "qkv")) return BERT8_OP_QKV;
    if (!strcmp(kind, "attention_output")) return BERT8_OP_ATTN_OUT;
    if (!strcmp(kind, "ffn_in")) return BERT8_OP_FFN_IN;
    if (!strcmp(kind, "ffn_out")) return BERT8_OP_FFN_OUT;
    if (!strcmp(kind, "attention")) return BERT8_OP_ATTENTION;
    return -1;
}

/* Rows of the final table: FP32, all INT8, each ranking's result, the result. */
enum { ROW_FP32, ROW_INT8, ROW_TRIAL0, ROW_TRIAL1, ROW_RESULT, ROWS };

/* The evaluation of a cosine budget (--min-cosine): the texts, the tuning slice first and the
 * held-out slice after it, their FP32 embeddings, and the targets. */
typedef struct cosine_eval {
    const bert8_tokenizer *tok;
    const char *dir;
    bert8_pipeline_params pp;
    bert8_text *a, *b;  /* [n] texts, pairs (b NULL when none has one) */
    int64_t n, nt, dim; /* texts [0, nt) tune the search, [nt, n) are held out */
    float *ref;         /* [n][dim] the FP32 embeddings */
    float *emb;         /* [n][dim] a candidate's (scratch) */
    double *cos;        /* [n] scratch */
    double tm, tp;      /* the targets of the mean and the 1st percentile; tp NAN: the mean only */
    cos_stats last;     /* the latest scored candidate on the tuning slice */
} cosine_eval;

/* Everything one budgeted quantization works with and reports. */
typedef struct budget_run {
    const char *dir, *outdir;
    budget_opts bo;
    bert8_quant_params qp;
    const bert8_model *m; /* FP32 */
    eval_set es;
    budget_eval be;
    int64_t *tune, *held, nt, nh;
    bert8_budget_report rep;
    bert8_unit_mode *all_int8; /* [units] the all-INT8 configuration */
    double searched[ROWS], tune_plain[ROWS], held_plain[ROWS]; /* NAN: not scored */
    bench_result br; /* [0] all INT8, [1] result; iters 0 when not timed */
    bert8_batch timed;
    int threads;
    /* a cosine budget */
    cosine_eval ce;
    cos_stats tune_cos[ROWS], held_cos[ROWS];
    cos_stats start_cos;        /* the search's start (every searched unit in the scheme's INT8 mode),
                                   tuning slice */
    bert8_unit_mode *int8_modes; /* [units] the all-INT8 model's (bert8_quantize's defaults) */
    bert8_unit_mode *result_modes; /* [units] the result's */
    int64_t calib_rows;        /* calibration rows (the held-out text follows them when no --eval-data) */
    const char *calib;
    const char *pooling;       /* the embedding's pooling, as the folder says */
} budget_run;

static const char *alpha_name(const bert8_quant_params *qp, char *buf, size_t n) {
    if (!qp->smooth) return "none";
    if (qp->alpha < 0) return "auto";
    snprintf(buf, n, "%g", (double)qp->alpha);
    return buf;
}

static void json_scores(cJSON *o, const budget_run *b, int row) {
    if (isfinite(b->searched[row])) cJSON_AddNumberToObject(o, "searched", b->searched[row]);
    if (isfinite(b->tune_plain[row])) cJSON_AddNumberToObject(o, "tune", b->tune_plain[row]);
    if (isfinite(b->held_plain[row])) cJSON_AddNumberToObject(o, "held_out", b->held_plain[row]);
}

static void json_search(cJSON *o, const budget_run *b, const char *drop_key);
static int json_write(cJSON *o, const char *path);

static int budget_report_json(const budget_run *b, const char *path) {
    const bert8_budget_report *r = &b->rep;
    cJSON *o = cJSON_CreateObject();
    if (!o) return cli_error("quantize", "out of memory");
    char ab[32];
    cJSON_AddStringToObject(o, "model", b->dir);
    cJSON_AddStringToObject(o, "task", b->bo.task);
    cJSON_AddStringToObject(o, "metric", eval_headline_name(b->es.o.task));
    cJSON_AddStringToObject(o, "searched_score", b->be.fp32_ex ? "conservative" : "plain");
    cJSON_AddStringToObject(o, "data", b->bo.data);
    cJSON_AddStringToObject(o, "scheme", b->qp.scheme == BERT8_SCHEME_STATIC ? "static" : "dynamic");
    cJSON_AddStringToObject(o, "alpha", alpha_name(&b->qp, ab, sizeof ab));
    cJSON_AddStringToObject(o, "attention", b->qp.int8_attention ? "int8" : "fp32");
    cJSON_AddNumberToObject(o, "max_drop", r->max_drop);
    cJSON_AddNumberToObject(o, "tune_examples", (double)b->nt);
    cJSON_AddNumberToObject(o, "held_out_examples", (double)b->nh);
    cJSON_AddNumberToObject(o, "evaluations", (double)r->evaluations);
    cJSON_AddStringToObject(o, "ranking_used", r->chosen >= 0 ? bert8_ranking_name(r->trials[r->chosen].ranking) : "none");
    const char *names[3] = {"fp32", "all_int8", "result"};
    const int rows[3] = {ROW_FP32, ROW_INT8, ROW_RESULT};
    for (int i = 0; i < 3; i++) {
        cJSON *s = cJSON_AddObjectToObject(o, names[i]);
        if (s) json_scores(s, b, rows[i]);
    }
    json_search(o, b, "metric_drop");
    return json_write(o, path);
}

/* The part of the report both budgets share: the rankings, the units and the speed. drop_key
 * names each unit's score lost with only that unit in INT8. */
static void json_search(cJSON *o, const budget_run *b, const char *drop_key) {
    const bert8_budget_report *r = &b->rep;
    cJSON *trials = cJSON_AddArrayToObject(o, "trials");
    for (int i = 0; trials && i < r->n_trials; i++) {
        const bert8_budget_trial *t = &r->trials[i];
        cJSON *x = cJSON_CreateObject();
        if (!x) break;
        cJSON_AddStringToObject(x, "ranking", bert8_ranking_name(t->ranking));
        cJSON_AddNumberToObject(x, "moves", (double)t->steps);
        cJSON_AddNumberToObject(x, "trims", (double)t->trim_steps);
        cJSON_AddNumberToObject(x, "off_before_trim", (double)t->first_off);
        cJSON_AddNumberToObject(x, "int8_static", (double)t->n_static);
        cJSON_AddNumberToObject(x, "int8_dynamic", (double)t->n_dynamic);
        cJSON_AddNumberToObject(x, "fp32", (double)t->n_fp32);
        json_scores(x, b, ROW_TRIAL0 + i);
        cJSON_AddBoolToObject(x, "within", t->within);
        cJSON *arr = cJSON_AddArrayToObject(x, "order");
        for (int64_t k = 0; arr && k < t->n_order; k++) {
            char u[96];
            unit_label(b->m, t->order[k], u, sizeof u);
            cJSON_AddItemToArray(arr, cJSON_CreateString(u));
        }
        cJSON_AddItemToArray(trials, x);
    }
    cJSON *units = cJSON_AddArrayToObject(o, "units");
    for (int64_t u = 0; units && u < r->n_units; u++) {
        const bert8_budget_unit *bu = &r->units[u];
        cJSON *x = cJSON_CreateObject();
        if (!x) break;
        cJSON_AddNumberToObject(x, "layer", (double)bu->layer);
        cJSON_AddStringToObject(x, "kind", bu->kind);
        cJSON_AddStringToObject(x, "mode", bert8_unit_mode_name(bu->mode));
        if (isfinite(bu->output_error)) cJSON_AddNumberToObject(x, "output_error", bu->output_error);
        if (isfinite(bu->metric_drop)) cJSON_AddNumberToObject(x, drop_key, bu->metric_drop);
        if (bu->fixed) cJSON_AddBoolToObject(x, "fixed", 1); /* not searched */
        cJSON_AddItemToArray(units, x);
    }
    const bench_result *br = &b->br;
    cJSON *sp = br->iters ? cJSON_AddObjectToObject(o, "speed") : NULL;
    if (sp) {
        cJSON_AddNumberToObject(sp, "batch", (double)b->timed.batch);
        cJSON_AddNumberToObject(sp, "seq", (double)b->timed.seq);
        cJSON_AddNumberToObject(sp, "threads", b->threads);
        cJSON_AddNumberToObject(sp, "iterations", (double)br->iters);
        cJSON_AddNumberToObject(sp, "all_int8_seq_per_s", (double)b->timed.batch / br->med[0]);
        cJSON_AddNumberToObject(sp, "result_seq_per_s", (double)b->timed.batch / br->med[1]);
        cJSON_AddNumberToObject(sp, "result_over_all_int8", br->med[0] / br->med[1]);
        cJSON *ops = cJSON_AddObjectToObject(sp, "op_ms_added");
        for (int i = 0; ops && i < BERT8_OP_COUNT; i++)
            cJSON_AddNumberToObject(ops, bert8_op_name((bert8_op)i), 1e3 * (br->op[1][i] - br->op[0][i]));
    }
}

/* Writes a report and frees it. */
static int json_write(cJSON *o, const char *path) {
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    FILE *f = text ? fopen(path, "w") : NULL;
    bool ok = f && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
    if (f && fclose(f) != 0) ok = false;
    free(text);
    return ok ? 0 : cli_error("quantize", "cannot write the report %s", path);
}

static void print_pair(double v, double base) {
    if (!isfinite(v)) printf("  %7s %7s", "-", "");
    else printf("  %7.2f %+7.2f", v, v - base);
}

static void search_table(const budget_run *b, const char *drop_name, int prec);

/* The final table, on stdout. */
static void budget_table(const budget_run *b) {
    const bert8_budget_report *r = &b->rep;
    char ab[32], label[96];
    const char *metric = eval_headline_name(b->es.o.task);
    printf("bert8 quantize %s: %s W8A8 (alpha %s), %s attention, budget %.2f points of %s %s\n", b->dir,
           b->qp.scheme == BERT8_SCHEME_STATIC ? "static" : "dynamic", alpha_name(&b->qp, ab, sizeof ab),
           b->qp.int8_attention ? "INT8" : "FP32", r->max_drop, b->bo.task, metric);
    printf("  %s: %lld examples tune the search, %lld held out (scored only at the end)\n", b->bo.data,
           (long long)b->nt, (long long)b->nh);
    printf("  searched score: %s\n", b->be.fp32_ex ? "conservative (an example counts at most what it scores in FP32: "
                                                     "broken examples cost, fixed ones earn nothing)"
                                                   : "the plain metric");
    printf("\n  %-30s  %-15s  %-15s  %-15s\n", "", "searched score", "tuning metric", "held-out metric");
    printf("  %-30s  %7s %7s  %7s %7s  %7s %7s\n", "", "score", "drop", metric, "drop", metric, "drop");
    for (int row = 0; row < ROWS; row++) {
        if ((row == ROW_TRIAL0 && r->n_trials < 1) || (row == ROW_TRIAL1 && r->n_trials < 2)) continue;
        const char *name = row == ROW_FP32 ? "FP32" : row == ROW_INT8 ? "all INT8" : row == ROW_RESULT ? "result" : NULL;
        if (!name) {
            snprintf(label, sizeof label, "%s ranking%s", bert8_ranking_name(r->trials[row - ROW_TRIAL0].ranking),
                     row - ROW_TRIAL0 == r->chosen ? " (used)" : "");
            name = label;
        }
        printf("  %-30s", name);
        print_pair(b->searched[row], b->searched[ROW_FP32]);
        print_pair(b->tune_plain[row], b->tune_plain[ROW_FP32]);
        print_pair(b->held_plain[row], b->held_plain[ROW_FP32]);
        printf("\n");
    }
    search_table(b, "metric drop", 2);
}

/* The part of the final table both budgets share: each ranking's moves and trims, the units kept
 * out of the scheme's mode (with drop_name, at prec decimals, the score lost with only that unit
 * in INT8) and the speed of the result against the all-INT8 model. */
static void search_table(const budget_run *b, const char *drop_name, int prec) {
    const bert8_budget_report *r = &b->rep;
    const char *scheme = b->qp.scheme == BERT8_SCHEME_STATIC ? "int8_static" : "int8_dynamic";
    printf("\n  ranking       moves  trims  off before trim  int8_static  int8_dynamic  fp32\n");
    for (int i = 0; i < r->n_trials; i++) {
        const bert8_budget_trial *t = &r->trials[i];
        printf("  %-12s  %5lld  %5lld  %15lld  %11lld  %12lld  %4lld%s\n", bert8_ranking_name(t->ranking),
               (long long)t->steps, (long long)t->trim_steps, (long long)t->first_off, (long long)t->n_static,
               (long long)t->n_dynamic, (long long)t->n_fp32, i == r->chosen ? "  <- used" : "");
    }
    if (r->chosen < 0) printf("  (no search: all INT8 is within the budget)\n");
    else
        printf("  used: %s (the fewest FP32 units, then the fewest dynamic ones, then the higher score)\n",
               bert8_ranking_name(r->trials[r->chosen].ranking));
    for (int i = 0; i < r->n_trials; i++) {
        const bert8_budget_trial *t = &r->trials[i];
        printf("  %s order:", bert8_ranking_name(t->ranking));
        for (int64_t k = 0; k < t->n_order && k < 6; k++) {
            bert8_unit_info ui;
            if (!bert8_model_unit(b->m, t->order[k], &ui)) printf(" L%lld.%s", (long long)ui.layer, ui.kind);
        }
        printf("%s\n", t->n_order > 6 ? " ..." : "");
    }
    printf("  %lld evaluations of the tuning slice\n", (long long)r->evaluations);
    /* the units kept out of the scheme's mode, with the time their op gained, shared among them */
    int64_t changed[BERT8_OP_COUNT] = {0};
    for (int64_t u = 0; u < r->n_units; u++) {
        const int op = unit_op(r->units[u].kind);
        const bool att = op == BERT8_OP_ATTENTION;
        if (op >= 0 && !(att && r->units[u].fixed) &&
            strcmp(bert8_unit_mode_name(r->units[u].mode), att ? "int8_static" : scheme))
            changed[op]++;
    }
    const bench_result *br = &b->br;
    printf("\n  units kept out of %s:\n", scheme);
    printf("  %5s  %-17s  %-12s  %12s  %11s  %s\n", "layer", "unit", "mode", "output error", drop_name,
           br->iters ? "ms/batch (its op's added time / units moved there)" : "");
    int64_t shown = 0;
    for (int64_t u = 0; u < r->n_units; u++) {
        const bert8_budget_unit *bu = &r->units[u];
        const bool att = !strcmp(bu->kind, "attention");
        /* an attention unit is int8_static when INT8; unsearched ones are not listed */
        if (!strcmp(bert8_unit_mode_name(bu->mode), att ? "int8_static" : scheme) || (att && bu->fixed)) continue;
        shown++;
        printf("  %5lld  %-17s  %-12s  %12.3g  ", (long long)bu->layer, bu->kind, bert8_unit_mode_name(bu->mode),
               bu->output_error);
        if (isfinite(bu->metric_drop)) printf("%+11.*f", prec, bu->metric_drop);
        else printf("%11s", "-");
        const int op = unit_op(bu->kind);
        if (br->iters && op >= 0 && changed[op] > 0)
            printf("  %+.2f", 1e3 * (br->op[1][op] - br->op[0][op]) / (double)changed[op]);
        printf("%s\n", bu->fixed ? "  (--keep-fp32)" : "");
    }
    if (!shown) printf("  (none)\n");
    if (br->iters) {
        const double B = (double)b->timed.batch;
        printf("\n  speed (as bert8 bench: batch %lld x seq %lld, %d thread(s), %ld passes each, interleaved):\n",
               (long long)b->timed.batch, (long long)b->timed.seq, b->threads, br->iters);
        printf("    all INT8 %.2f seq/s (median %.1f ms), result %.2f seq/s (median %.1f ms): the result runs at "
               "%.3fx the all-INT8 speed\n",
               B / br->med[0], 1e3 * br->med[0], B / br->med[1], 1e3 * br->med[1], br->med[0] / br->med[1]);
        printf("    time added per batch by op (ms, medians):");
        for (int i = 0; i < BERT8_OP_COUNT; i++) {
            double d = 1e3 * (br->op[1][i] - br->op[0][i]);
            if (fabs(d) >= 0.005) printf(" %s %+.2f", bert8_op_name((bert8_op)i), d);
        }
        printf("\n    (timings on a shared or busy machine move by several percent from run to run)\n");
    }
}

/* Scores a model on the held-out slice (NAN when there is none). */
static int held_out(const budget_run *b, const bert8_model *m, double *out) {
    *out = NAN;
    if (b->nh == 0) return 0;
    char err[1024];
    bert8_status st = score_model(&b->be, m, b->held, b->nh, NULL, out, err, sizeof err);
    return st ? cli_error("quantize", "scoring the held-out slice: %s (%s)", err, bert8_status_string(st)) : 0;
}

/* Unit u's mode in the all-INT8 configuration: the scheme's (an attention unit static), FP32 when
 * it is not searched. */
static bert8_unit_mode all_int8_mode(const budget_run *b, int64_t u) {
    const bert8_budget_unit *bu = &b->rep.units[u];
    if (bu->fixed) return BERT8_UNIT_FP32;
    if (!strcmp(bu->kind, "attention")) return BERT8_UNIT_INT8_STATIC;
    /* the static scheme's FFN-in and FFN-out run per token unless --ffn-in / --ffn-out static */
    if (b->qp.scheme == BERT8_SCHEME_STATIC && !(!strcmp(bu->kind, "ffn_out") && b->qp.ffn_out_per_token != 0) &&
        !(!strcmp(bu->kind, "ffn_in") && b->qp.ffn_in_per_token != 0))
        return BERT8_UNIT_INT8_STATIC;
    return BERT8_UNIT_INT8_DYNAMIC;
}

/* The speed cost: the result q against the all-INT8 model, as bert8 bench times them (skipped
 * with --bench-seconds 0). *ids holds the timed token ids; the caller frees it. */
static int time_result(budget_run *b, const bert8_model *all, const bert8_model *q, int32_t **ids) {
    const bert8_model_info *info = bert8_model_get_info(b->m);
    if (b->bo.bench_seconds <= 0) return 0;
    int64_t S = 128, maxpos = info->max_seq_len;
    if (S > maxpos) S = maxpos;
    if (!(*ids = timing_ids(info, 8, S))) return cli_error("quantize", "out of memory");
    b->timed = (bert8_batch){8, S, *ids, NULL, NULL};
    b->threads = bert8_get_threads();
    if (!b->bo.quiet) fprintf(stderr, "budget: timing the result against the all-INT8 model\n");
    return bench_pair("quantize", all, q, &b->timed, 0, b->bo.bench_seconds, &b->br);
}

static int quantize_budget(budget_run *b, const bert8_tokenizer *tok, const bert8_batch *batches, int64_t nb) {
    const char *C = "quantize";
    const bert8_model_info *info = bert8_model_get_info(b->m);
    const budget_opts *bo = &b->bo;
    bert8_model *q = NULL, *all = NULL, *tm = NULL;
    int32_t *ids = NULL;
    double *fp32_ex = NULL;
    int rc = 1;
    char err[1024];
    for (int i = 0; i < ROWS; i++) b->searched[i] = b->tune_plain[i] = b->held_plain[i] = NAN;
    /* the eval set and its slices */
    eval_opts eo = {.task_name = bo->task, .data = bo->data, .split_path = bo->split, .limit = bo->limit,
                    .row_hi = -1, .batch = bo->batch, .stride = -1};
    bert8_head head;
    if (!eval_task_parse(bo->task, &eo.task, &head))
        return cli_error(C, "unknown --eval-task \"%s\" (sst2, xnli, mrpc, squad or stsb)", bo->task);
    if (info->head != head)
        return cli_error(C, "%s is not a %s model, which --eval-task %s needs", b->dir,
                         eo.task == TASK_SQUAD ? "question answering" : "sequence classification", bo->task);
    int64_t max_tokens = bert8_tokenizer_model_max_length(tok);
    if (max_tokens <= 0 || info->max_seq_len < max_tokens) max_tokens = info->max_seq_len;
    if (eo.task != TASK_SQUAD) eo.max_len = max_tokens < 128 ? (long)max_tokens : 128;
    if (!eval_set_load(&b->es, C, &eo, max_tokens)) goto out;
    if (!split_slices(b->es.n, bo->tune_fraction, &b->tune, &b->nt, &b->held, &b->nh)) {
        cli_error(C, "out of memory");
        goto out;
    }
    if (b->nh == 0 && !bo->quiet)
        fprintf(stderr, "bert8 quantize: warning: --tune-fraction %g leaves no held-out examples; every score "
                        "reported is on the data the search tuned on\n", bo->tune_fraction);
    text_runner_opts ro = {b->threads, bo->batch, 0, BERT8_POOLING_DEFAULT, -1, 0, NULL};
    b->be = (budget_eval){.es = &b->es, .tok = tok, .dir = b->dir, .pp = text_runner_pipeline_params(&ro, max_tokens),
                          .idx = b->tune, .n = b->nt};
    if (!(b->be.ex = malloc((size_t)b->nt * sizeof *b->be.ex))) {
        cli_error(C, "out of memory");
        goto out;
    }
    /* FP32's own score per tuning example, the ceiling of the conservative score */
    if (bo->conservative && eo.task != TASK_STSB) {
        double s;
        bert8_status st = BERT8_ERR_NOMEM;
        if (!(fp32_ex = malloc((size_t)b->nt * sizeof *fp32_ex)) ||
            (st = score_model(&b->be, b->m, b->tune, b->nt, fp32_ex, &s, err, sizeof err))) {
            cli_error(C, "scoring the FP32 model: %s (%s)", fp32_ex ? err : "out of memory", bert8_status_string(st));
            goto out;
        }
        b->be.fp32_ex = fp32_ex;
    } else if (bo->conservative && !bo->quiet) {
        fprintf(stderr, "budget: %s's %s is not a mean over examples: the plain metric is searched\n", bo->task,
                eval_headline_name(eo.task));
    }
    if (!bo->quiet)
        fprintf(stderr, "budget: %s %s (%s) on %lld tuning examples of %s (%lld held out), budget %.2f points\n",
                bo->task, eval_headline_name(eo.task), b->be.fp32_ex ? "conservative" : "plain", (long long)b->nt,
                bo->data, (long long)b->nh, bo->max_drop);
    /* the search */
    budget_view view = {b->m, bo->quiet, 2, NULL, NULL};
    bert8_budget_params bp = bert8_default_budget_params();
    bp.max_drop = bo->max_drop;
    bp.ranking = bo->ranking;
    bp.allow_dynamic = bo->allow_dynamic;
    bp.trim = bo->trim;
    bp.eval = budget_score;
    bp.eval_ctx = &b->be;
    bp.progress = budget_progress;
    bp.progress_ctx = &view;
    bert8_status st = bert8_quantize_budget(b->m, batches, (size_t)nb, &b->qp, &bp, &q, &b->rep, err, sizeof err);
    if (st) {
        cli_error(C, "%s (%s)", err, bert8_status_string(st));
        goto out;
    }
    if ((st = bert8_model_save(q, b->outdir, err, sizeof err))) {
        cli_error(C, "%s (%s)", err, bert8_status_string(st));
        goto out;
    }
    if (!bo->quiet) fprintf(stderr, "budget: wrote %s; scoring the held-out slice\n", b->outdir);
    /* the tuning scores the search saw */
    const bert8_budget_report *r = &b->rep;
    const int64_t U = r->n_units;
    bert8_unit_mode *rm = malloc((size_t)U * sizeof *rm + 1), *fm = malloc((size_t)U * sizeof *fm + 1);
    b->all_int8 = malloc((size_t)U * sizeof *b->all_int8 + 1);
    if (!rm || !fm || !b->all_int8) {
        free(rm);
        free(fm);
        cli_error(C, "out of memory");
        goto out;
    }
    for (int64_t u = 0; u < U; u++) {
        rm[u] = r->units[u].mode;
        fm[u] = BERT8_UNIT_FP32;
        b->all_int8[u] = all_int8_mode(b, u);
    }
    b->searched[ROW_FP32] = r->fp32_score;
    b->searched[ROW_INT8] = r->int8_score;
    b->searched[ROW_RESULT] = r->score;
    b->tune_plain[ROW_FP32] = plain_of(&b->be, fm, U);
    b->tune_plain[ROW_INT8] = plain_of(&b->be, b->all_int8, U);
    b->tune_plain[ROW_RESULT] = plain_of(&b->be, rm, U);
    for (int i = 0; i < r->n_trials; i++) {
        b->searched[ROW_TRIAL0 + i] = r->trials[i].score;
        b->tune_plain[ROW_TRIAL0 + i] = plain_of(&b->be, r->trials[i].modes, U);
    }
    free(fm);
    /* held out: FP32, the all-INT8 model (also the baseline of the speed cost), the result and each
     * ranking's result, the last two rebuilt from the same calibration */
    bert8_quant_params qa = b->qp;
    qa.progress = 0;
    if ((st = bert8_quantize(b->m, batches, (size_t)nb, &qa, &all, err, sizeof err))) {
        free(rm);
        cli_error(C, "the all-INT8 model: %s (%s)", err, bert8_status_string(st));
        goto out;
    }
    if (held_out(b, b->m, &b->held_plain[ROW_FP32]) || held_out(b, all, &b->held_plain[ROW_INT8]) ||
        held_out(b, q, &b->held_plain[ROW_RESULT])) {
        free(rm);
        goto out;
    }
    for (int i = 0; i < r->n_trials; i++) {
        const bert8_budget_trial *t = &r->trials[i];
        const bert8_model *tq = q;
        if (!same_modes(r, rm, t->modes)) {
            bool any = false;
            for (int64_t u = 0; u < U; u++) any = any || t->modes[u] != BERT8_UNIT_FP32;
            if (!any) continue;
            qa.unit_modes = t->modes;
            st = bert8_quantize(b->m, batches, (size_t)nb, &qa, &tm, err, sizeof err);
            qa.unit_modes = NULL;
            if (st) {
                free(rm);
                cli_error(C, "the %s ranking's model: %s (%s)", bert8_ranking_name(t->ranking), err,
                          bert8_status_string(st));
                goto out;
            }
            tq = tm;
        }
        int bad = held_out(b, tq, &b->held_plain[ROW_TRIAL0 + i]);
        bert8_model_free(tm);
        tm = NULL;
        if (bad) {
            free(rm);
            goto out;
        }
    }
    free(rm);
    /* the speed cost: the result against the all-INT8 model, as bert8 bench times them */
    if (time_result(b, all, q, &ids)) goto out;
    budget_table(b);
    if (bo->report && budget_report_json(b, bo->report)) goto out;
    rc = 0;
out:
    free(ids);
    free(fp32_ex);
    b->be.fp32_ex = NULL;
    bert8_model_free(tm);
    bert8_model_free(all);
    bert8_model_free(q);
    return rc;
}

/* ---- quantize to an embedding-fidelity budget (--min-cosine) ------------------------------
 * No labels: a candidate is scored by how close its sentence embeddings (the folder's pooling,
 * L2-normalized) stay to the FP32 model's on a tuning slice of text, the per-text cosine's mean
 * and 1st percentile against targets. The score is min((mean - tm) / (1 - tm), (p1 - tp) /
 * (1 - tp)): 1 for FP32, >= 0 exactly when both targets are met, so the library searches it with
 * max_drop 1. The search, its progress display and the timing are those of --max-drop. */

/* Embeds texts [first, first + n) with model m into out ([n][dim]). */
static bert8_status embed_slice(const cosine_eval *ce, const bert8_model *m, int64_t first, int64_t n, float *out,
                                char *err, size_t err_len) {
    bert8_pipeline *pl = NULL;
    bert8_status st = bert8_pipeline_wrap(m, ce->tok, ce->dir, &ce->pp, &pl, err, err_len);
    if (st) return st;
    bert8_embed_options eo = bert8_default_embed_options();
    eo.normalize = 1;
    st = bert8_embed(pl, n, ce->a + first, ce->b ? ce->b + first : NULL, NULL, &eo, out, err, err_len);
    bert8_pipeline_free(pl);
    return st;
}

/* The cosine statistics of texts [first, first + n), emb holding their embeddings at the same rows
 * as ref. The 1st percentile is the nearest rank: the ceil(n / 100)-th smallest cosine. A text's
 * cosine to its own FP32 embedding is exactly 1 (x / sqrt(x * x) == 1 in IEEE arithmetic). */
static cos_stats cos_stats_of(const cosine_eval *ce, const float *emb, int64_t first, int64_t n) {
    cos_stats s = {NAN, NAN, NAN};
    if (n <= 0) return s;
    const int64_t D = ce->dim;
    double *c = ce->cos, sum = 0;
    for (int64_t i = 0; i < n; i++) {
        const float *x = ce->ref + (size_t)(first + i) * (size_t)D, *y = emb + (size_t)(first + i) * (size_t)D;
        double xy = 0, xx = 0, yy = 0;
        for (int64_t k = 0; k < D; k++) {
            xy += (double)x[k] * (double)y[k];
            xx += (double)x[k] * (double)x[k];
            yy += (double)y[k] * (double)y[k];
        }
        double v = xx > 0 && yy > 0 ? xy / sqrt(xx * yy) : xx == yy ? 1.0 : 0.0;
        if (!(v <= 1)) v = isnan(v) ? -1.0 : 1.0;
        if (v < -1) v = -1;
        c[i] = v;
        sum += v;
    }
    qsort(c, (size_t)n, sizeof *c, cmp_double);
    int64_t k = (int64_t)ceil(0.01 * (double)n);
    if (k < 1) k = 1;
    s.mean = sum / (double)n;
    s.p1 = c[k - 1];
    s.min = c[0];
    return s;
}

static bool cos_within(const cosine_eval *ce, cos_stats s) {
    return s.mean >= ce->tm && (isnan(ce->tp) || s.p1 >= ce->tp);
}

static double cos_score(const cosine_eval *ce, cos_stats s) {
    double score = (s.mean - ce->tm) / (1 - ce->tm);
    if (!isnan(ce->tp) && (s.p1 - ce->tp) / (1 - ce->tp) < score) score = (s.p1 - ce->tp) / (1 - ce->tp);
    /* the library allows 1e-9 of rounding on the drop: a miss must not pass for that */
    if (!cos_within(ce, s) && !(score <= -1e-6)) score = -1e-6;
    return score;
}

/* The evaluation callback of a cosine budget, on the tuning slice. */
static bert8_status cosine_score(void *ctx, const bert8_model *cand, double *score, char *err, size_t err_len) {
    cosine_eval *ce = ctx;
    bert8_status st = embed_slice(ce, cand, 0, ce->nt, ce->emb, err, err_len);
    if (st) return st;
    ce->last = cos_stats_of(ce, ce->emb, 0, ce->nt);
    *score = cos_score(ce, ce->last);
    return BERT8_OK;
}

static const char *pooling_name(bert8_pooling p) {
    return p == BERT8_POOLING_CLS ? "cls" : p == BERT8_POOLING_MAX ? "max" : "mean";
}

/* The shortest decimal that reads back as x (0.9999999, not %g's 1). */
static const char *num_text(double x, char buf[32]) {
    for (int p = 6; p <= 17; p++) {
        snprintf(buf, 32, "%.*g", p, x);
        if (strtod(buf, NULL) == x) break;
    }
    return buf;
}

/* "mean >= 0.999, 1st percentile >= 0.995" */
static const char *cos_targets(const cosine_eval *ce, char *buf, size_t n) {
    char a[32], b[32];
    if (isnan(ce->tp)) snprintf(buf, n, "mean >= %s", num_text(ce->tm, a));
    else snprintf(buf, n, "mean >= %s, 1st percentile >= %s", num_text(ce->tm, a), num_text(ce->tp, b));
    return buf;
}

/* Searched units of a configuration (NULL: FP32) in int8_static, int8_dynamic and fp32. */
static void mode_counts(const budget_run *b, const bert8_unit_mode *modes, int64_t c[3]) {
    c[0] = c[1] = c[2] = 0;
    for (int64_t u = 0; u < b->rep.n_units; u++) {
        if (b->rep.units[u].fixed) continue;
        bert8_unit_mode m = modes ? modes[u] : BERT8_UNIT_FP32;
        c[m == BERT8_UNIT_INT8_STATIC ? 0 : m == BERT8_UNIT_INT8_DYNAMIC ? 1 : 2]++;
    }
}

/* The rows of a cosine budget's table: FP32, the all-INT8 model (what `bert8 quantize` writes
 * with the same options, the baseline of the speed cost), the search's start (every searched unit
 * in the scheme's INT8 mode, the budget library's forms; scored on the tuning slice only) and the
 * result. */
enum { CROW_FP32, CROW_INT8, CROW_START, CROW_RESULT, CROWS };

typedef struct cos_row {
    const char *name, *key;
    double score;
    cos_stats tune, held;
    const bert8_unit_mode *modes; /* NULL: FP32 */
    double speed;                 /* against the all-INT8 model; NAN: not timed */
} cos_row;

static void cos_rows(const budget_run *b, cos_row rows[CROWS]) {
    const bert8_budget_report *r = &b->rep;
    const cos_stats none = {NAN, NAN, NAN};
    const bench_result *br = &b->br;
    const double unit[2] = {br->iters ? 1.0 : NAN, br->iters ? br->med[0] / br->med[1] : NAN};
    rows[CROW_FP32] = (cos_row){"FP32", "fp32", b->searched[ROW_FP32], b->tune_cos[ROW_FP32], b->held_cos[ROW_FP32],
                                NULL, NAN};
    rows[CROW_INT8] = (cos_row){"all INT8", "all_int8", cos_score(&b->ce, b->tune_cos[ROW_INT8]),
                                b->tune_cos[ROW_INT8], b->held_cos[ROW_INT8], b->int8_modes, unit[0]};
    rows[CROW_START] = (cos_row){"search start", "search_start", r->int8_score, b->start_cos, none, b->all_int8, NAN};
    rows[CROW_RESULT] = (cos_row){"result", "result", b->searched[ROW_RESULT], b->tune_cos[ROW_RESULT],
                                  b->held_cos[ROW_RESULT], b->result_modes, unit[1]};
}

static void print_cos(cos_stats s) {
    if (!isfinite(s.mean)) printf("  %9s %9s %9s", "-", "-", "-");
    else printf("  %9.7f %9.7f %9.7f", s.mean, s.p1, s.min);
}

/* The final table of a cosine budget, on stdout. */
static void cosine_table(const budget_run *b) {
    const cosine_eval *ce = &b->ce;
    char ab[32], tg[96];
    printf("bert8 quantize %s: %s W8A8 (alpha %s), %s attention, budget: cosine to the FP32 embedding, %s\n", b->dir,
           b->qp.scheme == BERT8_SCHEME_STATIC ? "static" : "dynamic", alpha_name(&b->qp, ab, sizeof ab),
           b->qp.int8_attention ? "INT8" : "FP32", cos_targets(ce, tg, sizeof tg));
    if (b->bo.data)
        printf("  texts: %lld lines of %s; embedding: %s pooling (the folder's), L2-normalized\n", (long long)ce->n,
               b->bo.data, b->pooling);
    else
        printf("  texts: %lld held-out calibration rows of %s (after the %lld that calibrate); embedding: %s pooling "
               "(the folder's), L2-normalized\n",
               (long long)ce->n, b->calib, (long long)b->calib_rows, b->pooling);
    printf("  %lld texts tune the search, %lld held out (scored only at the end)\n", (long long)b->nt, (long long)b->nh);
    char m[32], q[32];
    num_text(ce->tm, m);
    num_text(ce->tp, q);
    if (isnan(ce->tp))
        printf("  score = (mean - %s) / (1 - %s) on the tuning slice: within the budget at >= 0, FP32 scores 1\n", m,
               m);
    else
        printf("  score = min((mean - %s) / (1 - %s), (p1 - %s) / (1 - %s)) on the tuning slice: within the budget "
               "at >= 0, FP32 scores 1\n",
               m, m, q, q);
    printf("  (mean, p1, min: of each text's cosine to its FP32 embedding; p1 the 1st percentile, nearest rank)\n");
    printf("\n  %-12s  %9s  %-29s  %-29s  %-13s  %s\n", "", "", "  tuning slice cosine", "  held-out slice cosine",
           "units moved", "speed vs");
    printf("  %-12s  %9s  %9s %9s %9s  %9s %9s %9s  %7s %5s  %s\n", "", "score", "mean", "p1", "min", "mean", "p1",
           "min", "dynamic", "fp32", "all INT8");
    cos_row rows[CROWS];
    cos_rows(b, rows);
    for (int i = 0; i < CROWS; i++) {
        const cos_row *w = &rows[i];
        printf("  %-12s  ", w->name);
        if (fabs(w->score) < 1000) printf("%9.4f", w->score);
        else printf("%9.2e", w->score);
        print_cos(w->tune);
        print_cos(w->held);
        int64_t c[3];
        mode_counts(b, w->modes, c);
        if (!w->modes) printf("  %7s %5s", "-", "-");
        else printf("  %7lld %5lld", (long long)c[1], (long long)c[2]);
        if (isfinite(w->speed)) printf("  %.3fx\n", w->speed);
        else printf("  -\n");
    }
    printf("  (all INT8: what bert8 quantize writes with these options; search start: every searched unit in the\n"
           "   scheme's INT8 form the search moves from, scored on the tuning slice only)\n");
    printf("  the result %s the target on the held-out slice\n",
               !isfinite(b->held_cos[ROW_RESULT].mean) ? "is not scored against (none held out)"
               : cos_within(ce, b->held_cos[ROW_RESULT]) ? "also meets" : "misses");
    search_table(b, "score drop", 4);
}

static void json_cos(cJSON *o, const char *name, cos_stats s) {
    if (!isfinite(s.mean)) return;
    cJSON *x = cJSON_AddObjectToObject(o, name);
    if (!x) return;
    cJSON_AddNumberToObject(x, "mean", s.mean);
    cJSON_AddNumberToObject(x, "p1", s.p1);
    cJSON_AddNumberToObject(x, "min", s.min);
}

static int cosine_report_json(const budget_run *b, const char *path) {
    const bert8_budget_report *r = &b->rep;
    const cosine_eval *ce = &b->ce;
    cJSON *o = cJSON_CreateObject();
    if (!o) return cli_error("quantize", "out of memory");
    char ab[32];
    cJSON_AddStringToObject(o, "model", b->dir);
    cJSON_AddStringToObject(o, "budget", "min_cosine");
    cJSON_AddNumberToObject(o, "min_cosine_mean", ce->tm);
    if (isnan(ce->tp)) cJSON_AddNullToObject(o, "min_cosine_p1");
    else cJSON_AddNumberToObject(o, "min_cosine_p1", ce->tp);
    cJSON_AddStringToObject(o, "percentile", "nearest-rank");
    cJSON_AddStringToObject(o, "pooling", b->pooling);
    cJSON_AddBoolToObject(o, "normalized", 1);
    cJSON_AddStringToObject(o, "texts", b->bo.data ? b->bo.data : "held-out calibration text");
    cJSON_AddStringToObject(o, "calib", b->calib);
    cJSON_AddNumberToObject(o, "calib_rows", (double)b->calib_rows);
    cJSON_AddStringToObject(o, "scheme", b->qp.scheme == BERT8_SCHEME_STATIC ? "static" : "dynamic");
    cJSON_AddStringToObject(o, "alpha", alpha_name(&b->qp, ab, sizeof ab));
    cJSON_AddStringToObject(o, "attention", b->qp.int8_attention ? "int8" : "fp32");
    cJSON_AddNumberToObject(o, "tune_texts", (double)b->nt);
    cJSON_AddNumberToObject(o, "held_out_texts", (double)b->nh);
    cJSON_AddNumberToObject(o, "evaluations", (double)r->evaluations);
    cJSON_AddStringToObject(o, "ranking_used", r->chosen >= 0 ? bert8_ranking_name(r->trials[r->chosen].ranking) : "none");
    cos_row rows[CROWS];
    cos_rows(b, rows);
    for (int i = 0; i < CROWS; i++) {
        const cos_row *w = &rows[i];
        cJSON *s = cJSON_AddObjectToObject(o, w->key);
        if (!s) continue;
        cJSON_AddNumberToObject(s, "score", w->score);
        json_cos(s, "tune", w->tune);
        json_cos(s, "held_out", w->held);
        int64_t c[3];
        mode_counts(b, w->modes, c);
        cJSON_AddNumberToObject(s, "int8_static", (double)c[0]);
        cJSON_AddNumberToObject(s, "int8_dynamic", (double)c[1]);
        cJSON_AddNumberToObject(s, "fp32", (double)c[2]);
        if (isfinite(w->speed)) cJSON_AddNumberToObject(s, "speed_over_all_int8", w->speed);
    }
    json_search(o, b, "score_drop");
    return json_write(o, path);
}

/* The search to a cosine budget over the texts ev (held-out calibration text or --eval-data). */
static int quantize_cosine(budget_run *b, const bert8_tokenizer *tok, const bert8_batch *batches, int64_t nb,
                           const texts *ev) {
    const char *C = "quantize";
    const bert8_model_info *info = bert8_model_get_info(b->m);
    const budget_opts *bo = &b->bo;
    cosine_eval *ce = &b->ce;
    bert8_model *q = NULL, *all = NULL;
    bert8_pipeline *pl = NULL;
    int32_t *ids = NULL;
    int rc = 1;
    char err[1024], tg[96];
    bert8_status st;
    for (int i = 0; i < ROWS; i++) {
        b->searched[i] = b->tune_plain[i] = b->held_plain[i] = NAN;
        b->tune_cos[i] = b->held_cos[i] = (cos_stats){NAN, NAN, NAN};
    }
    const int64_t n = ev->n;
    if (!split_slices(n, bo->tune_fraction, &b->tune, &b->nt, &b->held, &b->nh)) return cli_error(C, "out of memory");
    if (b->nh == 0 && !bo->quiet)
        fprintf(stderr, "bert8 quantize: warning: --tune-fraction %g leaves no held-out text; every cosine "
                        "reported is on the text the search tuned on\n", bo->tune_fraction);
    /* the texts, the tuning slice first */
    bool pairs = false;
    for (int64_t i = 0; i < n; i++) pairs = pairs || ev->b[i];
    ce->a = calloc((size_t)n, sizeof *ce->a);
    ce->b = pairs ? calloc((size_t)n, sizeof *ce->b) : NULL;
    if (!ce->a || (pairs && !ce->b)) return cli_error(C, "out of memory");
    for (int64_t k = 0; k < n; k++) {
        const int64_t i = k < b->nt ? b->tune[k] : b->held[k - b->nt];
        ce->a[k] = (bert8_text){ev->a[i], strlen(ev->a[i])};
        if (pairs) ce->b[k] = ev->b[i] ? (bert8_text){ev->b[i], strlen(ev->b[i])} : (bert8_text){NULL, 0};
    }
    int64_t max_tokens = bert8_tokenizer_model_max_length(tok);
    if (max_tokens <= 0 || info->max_seq_len < max_tokens) max_tokens = info->max_seq_len;
    text_runner_opts ro = {b->threads, bo->batch, 0, BERT8_POOLING_DEFAULT, -1, 0, NULL};
    ce->tok = tok;
    ce->dir = b->dir;
    ce->pp = text_runner_pipeline_params(&ro, max_tokens);
    ce->n = n;
    ce->nt = b->nt;
    ce->tm = bo->min_mean;
    ce->tp = bo->min_p1;
    /* the FP32 embeddings, once */
    if ((st = bert8_pipeline_wrap(b->m, tok, b->dir, &ce->pp, &pl, err, sizeof err)))
        return cli_error(C, "%s (%s)", err, bert8_status_string(st));
    ce->dim = bert8_pipeline_get_info(pl)->dim;
    b->pooling = pooling_name(bert8_pipeline_get_info(pl)->pooling);
    bert8_pipeline_free(pl);
    const size_t ne = (size_t)n * (size_t)ce->dim;
    if (!(ce->ref = malloc(ne * sizeof *ce->ref + 1)) || !(ce->emb = malloc(ne * sizeof *ce->emb + 1)) ||
        !(ce->cos = malloc((size_t)n * sizeof *ce->cos + 1)))
        return cli_error(C, "out of memory");
    if (!bo->quiet)
        fprintf(stderr, "budget: embedding %lld texts with the FP32 model (%s pooling, L2-normalized)\n", (long long)n,
                b->pooling);
    if ((st = embed_slice(ce, b->m, 0, n, ce->ref, err, sizeof err)))
        return cli_error(C, "embedding with the FP32 model: %s (%s)", err, bert8_status_string(st));
    if (!bo->quiet)
        fprintf(stderr, "budget: cosine to the FP32 embedding on %lld tuning texts (%lld held out), %s\n",
                (long long)b->nt, (long long)b->nh, cos_targets(ce, tg, sizeof tg));
    /* the search: FP32 scores 1, a configuration is within the budget at a score >= 0 */
    budget_view view = {b->m, bo->quiet, 4, &ce->last, &b->start_cos};
    bert8_budget_params bp = bert8_default_budget_params();
    bp.max_drop = 1;
    bp.ranking = bo->ranking;
    bp.allow_dynamic = bo->allow_dynamic;
    bp.trim = bo->trim;
    bp.eval = cosine_score;
    bp.eval_ctx = ce;
    bp.progress = budget_progress;
    bp.progress_ctx = &view;
    st = bert8_quantize_budget(b->m, batches, (size_t)nb, &b->qp, &bp, &q, &b->rep, err, sizeof err);
    const bert8_budget_report *r = &b->rep;
    if (st == BERT8_ERR_UNSUPPORTED && r->n_units > 0 && r->units) {
        bool fp32 = true;
        for (int64_t u = 0; u < r->n_units; u++) fp32 = fp32 && r->units[u].mode == BERT8_UNIT_FP32;
        if (fp32) {
            cli_error(C, "--min-cosine: no configuration with an INT8 unit reaches %s on the tuning slice, only "
                         "the FP32 model does: use the FP32 model or a lower target",
                      cos_targets(ce, tg, sizeof tg));
            goto out;
        }
    }
    if (st) {
        cli_error(C, "%s (%s)", err, bert8_status_string(st));
        goto out;
    }
    if ((st = bert8_model_save(q, b->outdir, err, sizeof err))) {
        cli_error(C, "%s (%s)", err, bert8_status_string(st));
        goto out;
    }
    if (!bo->quiet) fprintf(stderr, "budget: wrote %s; scoring the held-out slice\n", b->outdir);
    if (!(b->all_int8 = malloc((size_t)r->n_units * sizeof *b->all_int8 + 1))) {
        cli_error(C, "out of memory");
        goto out;
    }
    for (int64_t u = 0; u < r->n_units; u++) b->all_int8[u] = all_int8_mode(b, u);
    b->searched[ROW_FP32] = r->fp32_score;
    b->searched[ROW_INT8] = r->int8_score;
    b->searched[ROW_RESULT] = r->score;
    for (int i = 0; i < r->n_trials; i++) b->searched[ROW_TRIAL0 + i] = r->trials[i].score;
    /* FP32 (its own embeddings: 1), the all-INT8 model (also the baseline of the speed cost) and
     * the result, on both slices */
    b->tune_cos[ROW_FP32] = cos_stats_of(ce, ce->ref, 0, b->nt);
    b->held_cos[ROW_FP32] = cos_stats_of(ce, ce->ref, b->nt, b->nh);
    /* the all-INT8 model as bert8_quantize makes it (the same calibration) */
    bert8_quant_params qa = b->qp;
    qa.progress = 0;
    if ((st = bert8_quantize(b->m, batches, (size_t)nb, &qa, &all, err, sizeof err))) {
        cli_error(C, "the all-INT8 model: %s (%s)", err, bert8_status_string(st));
        goto out;
    }
    if (!(b->int8_modes = modes_of(all)) || !(b->result_modes = modes_of(q))) {
        cli_error(C, "out of memory");
        goto out;
    }
    const bert8_model *models[2] = {all, q};
    const int rows[2] = {ROW_INT8, ROW_RESULT};
    for (int i = 0; i < 2; i++) {
        if ((st = embed_slice(ce, models[i], 0, n, ce->emb, err, sizeof err))) {
            cli_error(C, "embedding with the %s model: %s (%s)", i ? "result" : "all-INT8", err,
                      bert8_status_string(st));
            goto out;
        }
        b->tune_cos[rows[i]] = cos_stats_of(ce, ce->emb, 0, b->nt);
        b->held_cos[rows[i]] = cos_stats_of(ce, ce->emb, b->nt, b->nh);
    }
    if (time_result(b, all, q, &ids)) goto out;
    cosine_table(b);
    if (bo->report && cosine_report_json(b, bo->report)) goto out;
    rc = 0;
out:
    free(ids);
    bert8_model_free(all);
    bert8_model_free(q);
    return rc;
}

static void budget_run_free(budget_run *b) {
    free(b->ce.a);
    free(b->ce.b);
    free(b->ce.ref);
    free(b->ce.emb);
    free(b->ce.cos);
    free(b->int8_modes);
    free(b->result_modes);
    eval_set_free(&b->es);
    free(b->tune);
    free(b->held);
    free(b->all_int8);
    free(b->be.ex);
    for (size_t i = 0; i < b->be.n_seen; i++) free(b->be.seen[i].modes);
    free(b->be.seen);
    bert8_budget_report_free(&b->rep);
}

/* --unit-modes KIND=MODE[,KIND=MODE...]: KIND a unit kind (qkv, attention_output, ffn_in, ffn_out,
 * attention), MODE fp32, static or dynamic (attention: fp32 or static); every layer's unit of that
 * kind runs so, the others as --scheme and --attention say. Fills modes (unit count entries). */
static bool parse_unit_modes(const char *cmd, const char *spec, const bert8_model *m, const bert8_quant_params *p,
                             bert8_unit_mode *modes) {
    const int64_t U = bert8_model_unit_count(m);
    const bert8_unit_mode lin = p->scheme == BERT8_SCHEME_STATIC ? BERT8_UNIT_INT8_STATIC : BERT8_UNIT_INT8_DYNAMIC;
    /* units not named keep what bert8_quantize makes of them without --unit-modes: the scheme's
     * mode, the static scheme's FFN-in and FFN-out per token (unless --ffn-in / --ffn-out static) */
    for (int64_t u = 0; u < U; u++) {
        bert8_unit_info ui;
        if (bert8_model_unit(m, u, &ui)) return false;
        modes[u] = !strcmp(ui.kind, "attention") ? (p->int8_attention ? BERT8_UNIT_INT8_STATIC : BERT8_UNIT_FP32)
                   : !strcmp(ui.kind, "ffn_out") && p->ffn_out_per_token != 0 ? BERT8_UNIT_INT8_DYNAMIC
                   : !strcmp(ui.kind, "ffn_in") && p->ffn_in_per_token != 0   ? BERT8_UNIT_INT8_DYNAMIC
                                                                             : lin;
    }
    const char *s = spec;
    while (*s) {
        const char *c = strchr(s, ','), *end = c ? c : s + strlen(s), *eq = memchr(s, '=', (size_t)(end - s));
        char kind[32], mode[32];
        if (!eq || eq - s <= 0 || (size_t)(eq - s) >= sizeof kind || (size_t)(end - eq - 1) >= sizeof mode) {
            cli_error(cmd, "--unit-modes: \"%.*s\" is not KIND=MODE (e.g. ffn_out=dynamic)", (int)(end - s), s);
            return false;
        }
        memcpy(kind, s, (size_t)(eq - s));
        kind[eq - s] = 0;
        memcpy(mode, eq + 1, (size_t)(end - eq - 1));
        mode[end - eq - 1] = 0;
        bert8_unit_mode md;
        if (!strcmp(mode, "fp32")) md = BERT8_UNIT_FP32;
        else if (!strcmp(mode, "static")) md = BERT8_UNIT_INT8_STATIC;
        else if (!strcmp(mode, "dynamic")) md = BERT8_UNIT_INT8_DYNAMIC;
        else {
            cli_error(cmd, "--unit-modes: mode \"%s\" must be fp32, static or dynamic", mode);
            return false;
        }
        bool found = false;
        for (int64_t u = 0; u < U; u++) {
            bert8_unit_info ui;
            if (bert8_model_unit(m, u, &ui) || strcmp(ui.kind, kind)) continue;
            modes[u] = md;
            found = true;
        }
        if (!found) {
            cli_error(cmd, "--unit-modes: unknown unit kind \"%s\" (qkv, attention_output, ffn_in, ffn_out, attention)",
                      kind);
            return false;
        }
        if (!c) break;
        s = c + 1;
    }
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
    const char *maxlen_s = cli_opt(&a, "--max-length"), *th = cli_opt(&a, "--threads"),
               *lora_task = cli_opt(&a, "--lora-task");
    const char *att = cli_opt(&a, "--attention"), *emb = cli_opt(&a, "--embeddings");
    const char *wbits = cli_opt(&a, "--weight-bits"), *umodes = cli_opt(&a, "--unit-modes");
    const char *ffn_out = cli_opt(&a, "--ffn-out"), *ffn_in = cli_opt(&a, "--ffn-in");
    const char *outl = cli_opt(&a, "--outliers");
    /* --max-drop and its evaluation */
    const char *drop_s = cli_opt(&a, "--max-drop"), *task_s = cli_opt(&a, "--eval-task");
    const char *edata = cli_opt(&a, "--eval-data"), *esplit = cli_opt(&a, "--eval-split");
    const char *elimit_s = cli_opt(&a, "--eval-limit"), *ebatch_s = cli_opt(&a, "--eval-batch");
    const char *frac_s = cli_opt(&a, "--tune-fraction"), *rank_s = cli_opt(&a, "--ranking");
    const char *report = cli_opt(&a, "--report"), *bench_s = cli_opt(&a, "--bench-seconds");
    const char *tscore_s = cli_opt(&a, "--tune-score");
    const char *mincos_s = cli_opt(&a, "--min-cosine");
    bool no_dynamic = cli_flag(&a, "--no-dynamic"), no_trim = cli_flag(&a, "--no-trim");
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
    if (!parse_attention(C, att, &p.int8_attention) || !parse_embeddings(C, emb, &p.int8_embeddings) ||
        !parse_weight_bits(C, wbits, &p.weight_bits) || !parse_ffn_out(C, ffn_out, &p.ffn_out_per_token) ||
        !parse_ffn_in(C, ffn_in, &p.ffn_in_per_token) || !parse_outliers(C, outl, &p.outliers))
        return 1;
    if (umodes && (drop_s || mincos_s))
        return cli_error(C, "--unit-modes takes neither --max-drop nor --min-cosine");
    if (drop_s && mincos_s) return cli_error(C, "--min-cosine and --max-drop are mutually exclusive: give one budget");
    budget_run br = {.dir = dir, .outdir = outdir, .qp = p};
    budget_opts *bo = &br.bo;
    *bo = (budget_opts){.tune_fraction = 0.5, .bench_seconds = 10, .task = task_s, .data = edata, .split = esplit,
                        .report = report, .batch = 32, .ranking = BERT8_RANK_BOTH, .allow_dynamic = !no_dynamic,
                        .trim = !no_trim, .conservative = true, .quiet = quiet};
    if (!drop_s && !mincos_s && (task_s || edata || esplit || elimit_s || ebatch_s || frac_s || rank_s || report ||
                                 bench_s || tscore_s || no_dynamic || no_trim))
        return cli_error(C, "--eval-*, --tune-fraction, --tune-score, --ranking, --report, --bench-seconds, "
                            "--no-dynamic and --no-trim belong to --max-drop POINTS or --min-cosine MEAN[,P1]");
    if (mincos_s) {
        if (task_s)
            return cli_error(C, "--eval-task makes no sense with --min-cosine: the score is the cosine to the FP32 "
                                "embeddings, no task metric (--eval-data gives plain text)");
        if (esplit || tscore_s) return cli_error(C, "--eval-split and --tune-score belong to --max-drop");
        if (!parse_min_cosine(C, mincos_s, &bo->min_mean, &bo->min_p1)) return 1;
        bo->cosine = true;
        bo->limit = 512;
    }
    if (drop_s || mincos_s) {
        if (frac_s && !parse_points(C, "--tune-fraction", frac_s, 0.01, 1, &bo->tune_fraction)) return 1;
        if (bench_s && !parse_points(C, "--bench-seconds", bench_s, 0, 3600, &bo->bench_seconds)) return 1;
        if (elimit_s && !cli_int(C, "--eval-limit", elimit_s, 1, 1L << 40, &bo->limit)) return 1;
        if (ebatch_s && !cli_int(C, "--eval-batch", ebatch_s, 1, 4096, &bo->batch)) return 1;
        if (rank_s && !strcmp(rank_s, "both")) bo->ranking = BERT8_RANK_BOTH;
        else if (rank_s && !strcmp(rank_s, "output-error")) bo->ranking = BERT8_RANK_OUTPUT_ERROR;
        else if (rank_s && !strcmp(rank_s, "metric")) bo->ranking = BERT8_RANK_METRIC;
        else if (rank_s) return cli_error(C, "--ranking must be both, output-error or metric, not \"%s\"", rank_s);
        if (mincos_s && bo->limit < 32)
            return cli_error(C, "--min-cosine needs held-out text: --eval-limit %ld leaves fewer than 32 texts",
                             bo->limit);
    }
    if (drop_s) {
        if (!parse_points(C, "--max-drop", drop_s, 0, 100, &bo->max_drop)) return 1;
        if (!task_s || !*task_s) return cli_error(C, "--max-drop needs --eval-task sst2|xnli|mrpc|stsb|squad");
        if (!edata || !*edata) return cli_error(C, "--max-drop needs --eval-data PATH");
        if (tscore_s && strcmp(tscore_s, "conservative") && strcmp(tscore_s, "plain"))
            return cli_error(C, "--tune-score must be conservative or plain, not \"%s\"", tscore_s);
        bo->conservative = !tscore_s || !strcmp(tscore_s, "conservative");
    }
    /* --min-cosine scores held-out text: the calibration file's rows after the first --samples, or
     * the --eval-data lines (read as --calib is) */
    texts t = {0}, ev = {0};
    int rc = read_texts(C, calib, columns, mincos_s && !edata ? samples + bo->limit : samples, &t);
    if (!rc && mincos_s && edata) rc = read_texts(C, edata, columns, bo->limit, &ev);
    if (!rc && mincos_s && !edata && t.n > samples) {
        ev.a = t.a + samples, ev.b = t.b + samples, ev.n = t.n - samples; /* still owned by t */
    }
    if (!rc && mincos_s && ev.n < 32)
        rc = cli_error(C, "--min-cosine needs held-out text: give --eval-data or fewer --samples (%lld text%s "
                          "left to score, at least 32 needed)",
                       (long long)ev.n, ev.n == 1 ? "" : "s");
    if (rc) {
        if (edata && mincos_s) texts_free(&ev);
        texts_free(&t);
        return rc;
    }
    /* only the first --samples rows calibrate */
    texts calib_t = t;
    if (calib_t.n > samples) calib_t.n = samples;
    bert8_model *m = cli_load_model(C, dir, (int)threads, lora_task), *q = NULL;
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
    if (make_batches(C, tok, &calib_t, maxlen, 16, &encs, &batches, &nb)) goto out;
    resolve_attention(m, &p.int8_attention);
    resolve_attention(m, &br.qp.int8_attention);
    if (drop_s || mincos_s) {
        br.m = m;
        br.threads = (int)threads;
        br.calib = calib;
        br.calib_rows = calib_t.n;
        rc = mincos_s ? quantize_cosine(&br, tok, batches, nb, &ev) : quantize_budget(&br, tok, batches, nb);
        budget_run_free(&br);
        goto out;
    }
    bert8_unit_mode *modes = NULL;
    if (umodes) {
        modes = calloc((size_t)bert8_model_unit_count(m), sizeof *modes);
        if (!modes) {
            cli_error(C, "out of memory");
            goto out;
        }
        if (!parse_unit_modes(C, umodes, m, &p, modes)) {
            free(modes);
            goto out;
        }
        p.unit_modes = modes;
    }
    bert8_status st = bert8_quantize(m, batches, (size_t)nb, &p, &q, err, sizeof err);
    free(modes);
    p.unit_modes = NULL;
    if (st) {
        cli_error(C, "%s (%s)", err, bert8_status_string(st));
        goto out;
    }
    if ((st = bert8_model_save(q, outdir, err, sizeof err))) {
        cli_error(C, "%s (%s)", err, bert8_status_string(st));
        goto out;
    }
    /* what the written model runs (an architecture may keep its attention FP32 whatever was asked) */
    bool att8 = false;
    for (int64_t u = 0; u < bert8_model_unit_count(q); u++) {
        bert8_unit_info ui;
        if (!bert8_model_unit(q, u, &ui) && !strcmp(ui.kind, "attention") && ui.mode != BERT8_UNIT_FP32) att8 = true;
    }
    if (!quiet)
        fprintf(stderr, "wrote %s: INT8 %s%s, alpha %s, %s attention, %lld calibration sequences\n", outdir,
                umodes ? "per --unit-modes" : p.scheme == BERT8_SCHEME_STATIC ? "static" : "dynamic",
                umodes || p.scheme != BERT8_SCHEME_STATIC ? ""
                : p.ffn_in_per_token != 0 && p.ffn_out_per_token != 0 ? " (FFN-in and FFN-out inputs per token)"
                : p.ffn_out_per_token != 0                           ? " (FFN-out input per token)"
                : p.ffn_in_per_token != 0                            ? " (FFN-in input per token)"
                                                                     : "",
                !p.smooth ? "none (no smoothing)" : alpha_s ? alpha_s : "auto (searched per group)",
                att8 ? "INT8" : "FP32", (long long)(t.n < samples ? t.n : samples));
    rc = 0;
out:
    free_batches(encs, batches, nb);
    bert8_tokenizer_free(tok);
    bert8_model_free(q);
    bert8_model_free(m);
    if (mincos_s && edata) texts_free(&ev);
    texts_free(&t);
    return rc;
}

