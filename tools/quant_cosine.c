/* quant_cosine.c: `bert8 quantize --min-cosine`: INT8 to an embedding-fidelity budget. No labels:
 * a candidate is scored by how close its sentence embeddings (the folder's pooling, L2-normalized)
 * stay to the FP32 model's on a tuning slice of text, the per-text cosine's mean and 1st percentile
 * against targets. The score is min((mean - tm) / (1 - tm), (p1 - tp) / (1 - tp)): 1 for FP32,
 * >= 0 exactly when both targets are met, so the library searches it with max_drop 1. The search,
 * its progress display, the timing and the tail are those of --max-drop (quant_budget.c). */
#include "cli.h"
#include "quant_budget.h"
#include "text_runner.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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

bool cos_within(const cosine_eval *ce, cos_stats s) {
    return s.mean >= ce->tm && (isnan(ce->tp) || s.p1 >= ce->tp);
}

double cos_score(const cosine_eval *ce, cos_stats s) {
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

/* The search to a cosine budget over the texts ev (held-out calibration text or --eval-data). */
int quantize_cosine(budget_run *b, const bert8_tokenizer *tok, const bert8_batch *batches, int64_t nb,
                    const texts *ev) {
    const char *C = "quantize";
    const budget_opts *bo = &b->bo;
    cosine_eval *ce = &b->ce;
    bert8_model *q = NULL, *all = NULL;
    bert8_pipeline *pl = NULL;
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
    const int64_t max_tokens = budget_max_tokens(b, tok);
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
    if (budget_searched(b, st, err, q)) goto out;
    /* FP32 (its own embeddings: 1), the all-INT8 model (also the baseline of the speed cost) and
     * the result, on both slices */
    b->tune_cos[ROW_FP32] = cos_stats_of(ce, ce->ref, 0, b->nt);
    b->held_cos[ROW_FP32] = cos_stats_of(ce, ce->ref, b->nt, b->nh);
    /* the all-INT8 model as bert8_quantize makes it (the same calibration) */
    if (budget_all_int8(b, batches, nb, &all)) goto out;
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
    if (budget_finish(b, all, q, cosine_table, cosine_report_json)) goto out;
    rc = 0;
out:
    bert8_model_free(all);
    bert8_model_free(q);
    return rc;
}
