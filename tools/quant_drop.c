/* quant_drop.c: `bert8 quantize --max-drop`: INT8 to an accuracy budget. The library searches
 * (bert8_quantize_budget); this part supplies the evaluation callback (the task's headline metric,
 * in points, on a tuning slice of the eval data), then scores FP32, the all-INT8 model, the result
 * and each ranking's result on the held-out rest; the shared tail (quant_budget.c) times the result
 * against the all-INT8 model and prints the table. */
#include "cli.h"
#include "quant_budget.h"
#include "text_runner.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool same_modes(const bert8_budget_report *r, const bert8_unit_mode *a, const bert8_unit_mode *b) {
    return !memcmp(a, b, (size_t)r->n_units * sizeof *a);
}

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

/* Scores a model on the held-out slice (NAN when there is none). */
static int held_out(const budget_run *b, const bert8_model *m, double *out) {
    *out = NAN;
    if (b->nh == 0) return 0;
    char err[1024];
    bert8_status st = score_model(&b->be, m, b->held, b->nh, NULL, out, err, sizeof err);
    return st ? cli_error("quantize", "scoring the held-out slice: %s (%s)", err, bert8_status_string(st)) : 0;
}

int quantize_budget(budget_run *b, const bert8_tokenizer *tok, const bert8_batch *batches, int64_t nb) {
    const char *C = "quantize";
    const bert8_model_info *info = bert8_model_get_info(b->m);
    const budget_opts *bo = &b->bo;
    bert8_model *q = NULL, *all = NULL, *tm = NULL;
    bert8_unit_mode *rm = NULL, *fm = NULL; /* the result's modes, FP32's */
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
    const int64_t max_tokens = budget_max_tokens(b, tok);
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
    if (budget_searched(b, st, err, q)) goto out;
    /* the tuning scores the search saw */
    const bert8_budget_report *r = &b->rep;
    const int64_t U = r->n_units;
    if (!(rm = malloc((size_t)U * sizeof *rm + 1)) || !(fm = malloc((size_t)U * sizeof *fm + 1))) {
        cli_error(C, "out of memory");
        goto out;
    }
    for (int64_t u = 0; u < U; u++) {
        rm[u] = r->units[u].mode;
        fm[u] = BERT8_UNIT_FP32;
    }
    b->tune_plain[ROW_FP32] = plain_of(&b->be, fm, U);
    b->tune_plain[ROW_INT8] = plain_of(&b->be, b->all_int8, U);
    b->tune_plain[ROW_RESULT] = plain_of(&b->be, rm, U);
    for (int i = 0; i < r->n_trials; i++) b->tune_plain[ROW_TRIAL0 + i] = plain_of(&b->be, r->trials[i].modes, U);
    /* held out: FP32, the all-INT8 model (also the baseline of the speed cost), the result and each
     * ranking's result, the last two rebuilt from the same calibration */
    if (budget_all_int8(b, batches, nb, &all)) goto out;
    if (held_out(b, b->m, &b->held_plain[ROW_FP32]) || held_out(b, all, &b->held_plain[ROW_INT8]) ||
        held_out(b, q, &b->held_plain[ROW_RESULT]))
        goto out;
    bert8_quant_params qa = b->qp;
    qa.progress = 0;
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
                cli_error(C, "the %s ranking's model: %s (%s)", bert8_ranking_name(t->ranking), err,
                          bert8_status_string(st));
                goto out;
            }
            tq = tm;
        }
        int bad = held_out(b, tq, &b->held_plain[ROW_TRIAL0 + i]);
        bert8_model_free(tm);
        tm = NULL;
        if (bad) goto out;
    }
    /* the speed cost, the table and the report */
    if (budget_finish(b, all, q, budget_table, budget_report_json)) goto out;
    rc = 0;
out:
    free(rm);
    free(fm);
    free(fp32_ex);
    b->be.fp32_ex = NULL;
    bert8_model_free(tm);
    bert8_model_free(all);
    bert8_model_free(q);
    return rc;
}
