/* quant_report.c: the tables and JSON reports of `bert8 quantize --max-drop` and `--min-cosine`. */
#include "cli.h"
#include "quant_budget.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Op of the forward-pass profile that times a unit kind's GEMM. */
static int unit_op(const char *kind) {
    if (!strcmp(kind, "qkv")) return BERT8_OP_QKV;
    if (!strcmp(kind, "attention_output")) return BERT8_OP_ATTN_OUT;
    if (!strcmp(kind, "ffn_in")) return BERT8_OP_FFN_IN;
    if (!strcmp(kind, "ffn_out")) return BERT8_OP_FFN_OUT;
    if (!strcmp(kind, "attention")) return BERT8_OP_ATTENTION;
    return -1;
}

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

int budget_report_json(const budget_run *b, const char *path) {
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

static void print_pair(double v, double base) {
    if (!isfinite(v)) printf("  %7s %7s", "-", "");
    else printf("  %7.2f %+7.2f", v, v - base);
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

/* The final table, on stdout. */
void budget_table(const budget_run *b) {
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

/* The shortest decimal that reads back as x (0.9999999, not %g's 1). */
const char *num_text(double x, char buf[32]) {
    for (int p = 6; p <= 17; p++) {
        snprintf(buf, 32, "%.*g", p, x);
        if (strtod(buf, NULL) == x) break;
    }
    return buf;
}

/* "mean >= 0.999, 1st percentile >= 0.995" */
const char *cos_targets(const cosine_eval *ce, char *buf, size_t n) {
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
void cosine_table(const budget_run *b) {
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

int cosine_report_json(const budget_run *b, const char *path) {
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
