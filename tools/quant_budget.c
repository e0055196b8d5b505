/* quant_budget.c: what the two budgeted searches of `bert8 quantize` share (quant_budget.h): the
 * tuning and held-out slices, the progress display, timing the result against the all-INT8 model,
 * and the tail after the search (the folder written, the all-INT8 model, the speed, the table and
 * the report). */
#include "cli.h"
#include "quant_budget.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* ---- timing two models side by side (the speed cost of a budgeted model) ----------------
 * As `bert8 bench` times: the same deterministic token ids, a warm-up pass each, then passes of
 * the two models interleaved in this process, medians compared. */

int cmp_double(const void *a, const void *b) {
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

/* The tuning and held-out slices: a fixed-seed shuffle of the examples, the first
 * ceil(fraction * n) tune, the rest are held out; both sorted. Deterministic, and interleaved
 * over the file whatever order its rows are in. */
bool split_slices(int64_t n, double fraction, int64_t **tune, int64_t *nt, int64_t **held, int64_t *nh) {
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

bert8_unit_mode *modes_of(const bert8_model *m) {
    const int64_t n = bert8_model_unit_count(m);
    bert8_unit_mode *modes = malloc((size_t)n * sizeof *modes + 1);
    for (int64_t u = 0; modes && u < n; u++) {
        bert8_unit_info ui;
        modes[u] = bert8_model_unit(m, u, &ui) ? BERT8_UNIT_FP32 : ui.mode;
    }
    return modes;
}

void unit_label(const bert8_model *m, int64_t u, char *out, size_t n) {
    bert8_unit_info ui;
    if (u >= 0 && !bert8_model_unit(m, u, &ui)) snprintf(out, n, "layer %lld %s", (long long)ui.layer, ui.kind);
    else snprintf(out, n, "unit %lld", (long long)u);
}

/* The progress display: one line per scored configuration, on stderr. */
void budget_progress(void *ctx, const bert8_budget_event *ev) {
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

int64_t budget_max_tokens(const budget_run *b, const bert8_tokenizer *tok) {
    int64_t max_tokens = bert8_tokenizer_model_max_length(tok), model = bert8_model_get_info(b->m)->max_seq_len;
    return max_tokens <= 0 || model < max_tokens ? model : max_tokens;
}

int budget_searched(budget_run *b, bert8_status st, const char *err, const bert8_model *q) {
    const char *C = "quantize";
    char serr[1024];
    if (st) return cli_error(C, "%s (%s)", err, bert8_status_string(st));
    if ((st = bert8_model_save(q, b->outdir, serr, sizeof serr)))
        return cli_error(C, "%s (%s)", serr, bert8_status_string(st));
    if (!b->bo.quiet) fprintf(stderr, "budget: wrote %s; scoring the held-out slice\n", b->outdir);
    const bert8_budget_report *r = &b->rep;
    if (!(b->all_int8 = malloc((size_t)r->n_units * sizeof *b->all_int8 + 1))) return cli_error(C, "out of memory");
    for (int64_t u = 0; u < r->n_units; u++) b->all_int8[u] = all_int8_mode(b, u);
    b->searched[ROW_FP32] = r->fp32_score;
    b->searched[ROW_INT8] = r->int8_score;
    b->searched[ROW_RESULT] = r->score;
    for (int i = 0; i < r->n_trials; i++) b->searched[ROW_TRIAL0 + i] = r->trials[i].score;
    return 0;
}

int budget_all_int8(budget_run *b, const bert8_batch *batches, int64_t nb, bert8_model **all) {
    bert8_quant_params qa = b->qp;
    qa.progress = 0;
    char err[1024];
    bert8_status st = bert8_quantize(b->m, batches, (size_t)nb, &qa, all, err, sizeof err);
    return st ? cli_error("quantize", "the all-INT8 model: %s (%s)", err, bert8_status_string(st)) : 0;
}

int budget_finish(budget_run *b, const bert8_model *all, const bert8_model *q, void (*table)(const budget_run *),
                  int (*json)(const budget_run *, const char *)) {
    int32_t *ids = NULL;
    int rc = time_result(b, all, q, &ids);
    if (!rc) {
        table(b);
        if (b->bo.report) rc = json(b, b->bo.report);
    }
    b->timed.input_ids = NULL;
    free(ids);
    return rc;
}

void budget_run_free(budget_run *b) {
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
