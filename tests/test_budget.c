/* test_budget.c: bert8_quantize_budget (INT8 to an accuracy budget) on a golden model with an
 * artificial, deterministic evaluation callback: the score is 90 minus a fixed penalty per unit
 * and mode, so the search's path and result can be worked out by hand. Also: the budgeted model
 * round-trips through quantization_config.json exactly, bert8_quantize's unit_modes, and bad
 * budgets (negative, NaN, infinite, no callback) and failing callbacks are refused with a
 * message. */
#include "golden.h"
#include "testutil.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define MODEL "bert_seqcls" /* 2 layers: 10 units */
#define NU 10

/* Units: 0 L0 qkv, 1 L0 attention_output, 2 L0 ffn_in, 3 L0 ffn_out, 4 L0 attention, 5..9 the
 * same in L1. Penalties are binary fractions, so every score below is exact. Without
 * int8_attention the attention units (4, 9) stay FP32 and are not searched. */
static const double PEN_STATIC[NU] = {0.125, 3.0, 0.0, 0.25, 0.0, 0.0, 1.5, 0.0, 0.375, 0.0};
static const double PEN_DYNAMIC[NU] = {0.0625, 0.25, 0.0, 0.125, 0.0, 0.0, 1.25, 0.0, 0.125, 0.0};
#define ATT0 4
#define ATT1 9

typedef struct fake_eval {
    const bert8_batch *batch; /* run once per candidate: every candidate must work */
    int calls;
    int fail_at;       /* the call that fails (1-based), 0 never */
    bool nan_score;    /* return NaN instead */
    const double *pen_s, *pen_d;
} fake_eval;

static bert8_status fake_score(void *ctx, const bert8_model *m, double *score, char *err, size_t err_len) {
    fake_eval *f = ctx;
    f->calls++;
    if (f->fail_at && f->calls == f->fail_at) {
        snprintf(err, err_len, "the test's callback fails on call %d", f->calls);
        return BERT8_ERR_IO;
    }
    if (bert8_model_unit_count(m) != NU) {
        snprintf(err, err_len, "%lld units", (long long)bert8_model_unit_count(m));
        return BERT8_ERR_INTERNAL;
    }
    double s = 90.0;
    for (int64_t u = 0; u < NU; u++) {
        bert8_unit_info ui;
        if (bert8_model_unit(m, u, &ui)) return BERT8_ERR_INTERNAL;
        if (ui.mode == BERT8_UNIT_INT8_STATIC) s -= f->pen_s[u];
        if (ui.mode == BERT8_UNIT_INT8_DYNAMIC) s -= f->pen_d[u];
    }
    bert8_session *ses = NULL;
    bert8_outputs o;
    if (bert8_session_create(m, &ses) || bert8_forward(ses, f->batch, &o)) {
        snprintf(err, err_len, "a candidate does not run");
        bert8_session_free(ses);
        return BERT8_ERR_INTERNAL;
    }
    for (int64_t i = 0; i < o.logits.shape[0] * o.logits.shape[1]; i++)
        if (!isfinite(o.logits.data[i])) s = -1e9;
    bert8_session_free(ses);
    *score = f->nan_score ? NAN : s;
    return BERT8_OK;
}

typedef struct events {
    int baseline, sensitivity, step, trim, done;
} events;

static void count_event(void *ctx, const bert8_budget_event *ev) {
    events *e = ctx;
    switch (ev->stage) {
    case BERT8_BUDGET_BASELINE: e->baseline++; break;
    case BERT8_BUDGET_SENSITIVITY: e->sensitivity++; break;
    case BERT8_BUDGET_STEP: e->step++; break;
    case BERT8_BUDGET_TRIM: e->trim++; break;
    case BERT8_BUDGET_TRIAL_DONE: e->done++; break;
    }
}

typedef struct fixture {
    bert8_model *f;
    golden_set cs;
} fixture;

static bool fixture_open(fixture *x) {
    char err[1024];
    memset(x, 0, sizeof *x);
    CHECKF(bert8_model_load(tu_shared_path("golden/models/" MODEL), NULL, &x->f, err, sizeof err) == 0, "%s", err);
    if (!x->f) return false;
    golden_set_load(&x->cs, MODEL);
    CHECK(x->cs.n > 0);
    CHECK(bert8_model_unit_count(x->f) == NU);
    return x->cs.n > 0;
}

static void fixture_close(fixture *x) {
    golden_set_free(&x->cs);
    bert8_model_free(x->f);
}

static bert8_status run_budget_att(fixture *x, fake_eval *fe, bert8_ranking rk, double max_drop, events *ev,
                                   int int8_attention, bert8_model **out, bert8_budget_report *rep, char *err,
                                   size_t err_len) {
    bert8_quant_params qp = bert8_default_quant_params();
    qp.int8_attention = int8_attention;
    qp.ffn_out_per_token = 0; /* every Linear starts static: the hand-worked paths below */
    qp.ffn_in_per_token = 0;
    bert8_budget_params bp = bert8_default_budget_params();
    bp.max_drop = max_drop;
    bp.ranking = rk;
    bp.eval = fake_score;
    bp.eval_ctx = fe;
    bp.progress = ev ? count_event : NULL;
    bp.progress_ctx = ev;
    fe->batch = &x->cs.b[0];
    if (!fe->pen_s) fe->pen_s = PEN_STATIC;
    if (!fe->pen_d) fe->pen_d = PEN_DYNAMIC;
    return bert8_quantize_budget(x->f, x->cs.b, (size_t)x->cs.n, &qp, &bp, out, rep, err, err_len);
}

static bert8_status run_budget(fixture *x, fake_eval *fe, bert8_ranking rk, double max_drop, events *ev,
                               bert8_model **out, bert8_budget_report *rep, char *err, size_t err_len) {
    return run_budget_att(x, fe, rk, max_drop, ev, 0, out, rep, err, err_len);
}

static void unit_modes_of(const bert8_model *m, bert8_unit_mode *modes) {
    for (int64_t u = 0; u < NU; u++) {
        bert8_unit_info ui;
        CHECK(bert8_model_unit(m, u, &ui) == BERT8_OK);
        modes[u] = ui.mode;
    }
}

/* By hand, the metric order is 1 (3.0), 6 (1.5), 8, 3, 0, then the penalty-free 2, 5, 7. Every
 * Linear to dynamic leaves a drop of 1.8125; then unit 1 to FP32 (1.5625) and unit 6 to FP32
 * (0.3125) reach the budget after 10 moves. Trimming, last moved first: 6 and 1 back to dynamic
 * break the budget (1.5625, 0.5625); 2, 5, 7 go back to static for free; 0 (0.375) and 3 (0.5,
 * the budget's edge counts) go back too; 8 would make it 0.75. */
TEST(metric_ranking_follows_the_hand_worked_path) {
    fixture x;
    if (!fixture_open(&x)) return;
    fake_eval fe = {0};
    events ev = {0};
    bert8_budget_report rep = {0};
    bert8_model *q = NULL;
    char err[1024] = "";
    bert8_status st = run_budget(&x, &fe, BERT8_RANK_METRIC, 0.5, &ev, &q, &rep, err, sizeof err);
    CHECKF(st == BERT8_OK, "%s", err);
    if (st == BERT8_OK) {
        CHECK(rep.fp32_score == 90.0);
        CHECK(rep.int8_score == 90.0 - 5.25);
        CHECK(rep.n_trials == 1 && rep.chosen == 0);
        const bert8_budget_trial *t = &rep.trials[0];
        CHECK(t->ranking == BERT8_RANK_METRIC);
        CHECK(t->n_order == NU - 2);
        const int64_t head[5] = {1, 6, 8, 3, 0};
        for (int i = 0; i < 5; i++) CHECKF(t->order[i] == head[i], "order[%d] = %lld", i, (long long)t->order[i]);
        CHECK(t->steps == 10);
        CHECK(t->first_score == 90.0 - 0.3125);
        CHECK(t->first_off == NU - 2);
        CHECK(t->trim_steps == 8);
        CHECK(t->within == 1);
        CHECK(t->score == 89.5);
        CHECK(rep.score == 89.5);
        CHECK(t->n_fp32 == 2 && t->n_dynamic == 1 && t->n_static == 5);
        const bert8_unit_mode S_ = BERT8_UNIT_INT8_STATIC, F_ = BERT8_UNIT_FP32, D_ = BERT8_UNIT_INT8_DYNAMIC;
        const bert8_unit_mode want[NU] = {S_, F_, S_, S_, F_, S_, F_, S_, D_, F_};
        bert8_unit_mode got[NU];
        unit_modes_of(q, got);
        for (int u = 0; u < NU; u++) {
            CHECKF(got[u] == want[u], "unit %d is %s, want %s", u, bert8_unit_mode_name(got[u]),
                   bert8_unit_mode_name(want[u]));
            CHECK(rep.units[u].mode == want[u]);
            const bool att = u == ATT0 || u == ATT1;
            CHECK(rep.units[u].fixed == att);
            CHECK(att ? isnan(rep.units[u].metric_drop) : rep.units[u].metric_drop == PEN_STATIC[u]);
            CHECK(att ? isnan(rep.units[u].output_error)
                      : rep.units[u].output_error >= 0 && isfinite(rep.units[u].output_error));
        }
        /* 2 baselines + 8 sensitivities + 10 moves + 8 trims, less one: unit 6 back to dynamic is
         * the configuration after move 9, scored once */
        CHECKF(rep.evaluations == 27 && fe.calls == 27, "%lld evaluations, %d calls", (long long)rep.evaluations,
               fe.calls);
        CHECK(ev.baseline == 2 && ev.sensitivity == NU - 2 && ev.step == 10 && ev.trim == 8 && ev.done == 1);
        CHECK(bert8_model_get_info(q)->quantized == 1);
    }
    bert8_model_free(q);
    bert8_budget_report_free(&rep);
    bert8_budget_report_free(&rep); /* twice is harmless: it was zeroed */
    fixture_close(&x);
}

/* Both orders followed; the result is the one with fewer FP32 units (then fewer dynamic ones),
 * and a second run makes the same choices. */
TEST(both_rankings_keep_the_result_with_fewest_units_off_int8) {
    fixture x;
    if (!fixture_open(&x)) return;
    bert8_budget_report rep[2];
    memset(rep, 0, sizeof rep);
    bert8_model *q[2] = {NULL, NULL};
    int calls[2] = {0, 0};
    for (int run = 0; run < 2; run++) {
        fake_eval fe = {0};
        char err[1024] = "";
        bert8_status st = run_budget(&x, &fe, BERT8_RANK_BOTH, 0.5, NULL, &q[run], &rep[run], err, sizeof err);
        CHECKF(st == BERT8_OK, "%s", err);
        calls[run] = fe.calls;
        if (st) continue;
        CHECK(rep[run].n_trials == 2);
        CHECK(rep[run].trials[0].ranking == BERT8_RANK_OUTPUT_ERROR && rep[run].trials[1].ranking == BERT8_RANK_METRIC);
        const bert8_budget_trial *c = &rep[run].trials[rep[run].chosen], *o = &rep[run].trials[1 - rep[run].chosen];
        CHECK(c->within && o->within);
        CHECK(c->n_fp32 < o->n_fp32 || (c->n_fp32 == o->n_fp32 && c->n_dynamic <= o->n_dynamic));
        CHECK(90.0 - rep[run].score <= 0.5);
        CHECK(rep[run].score == c->score);
        /* the output-error order is the units sorted by their measured error */
        const bert8_budget_trial *t = &rep[run].trials[0];
        for (int64_t i = 1; i < t->n_order; i++)
            CHECK(rep[run].units[t->order[i - 1]].output_error >= rep[run].units[t->order[i]].output_error);
        /* fewer calls than configurations tried: the two orders share the first ones */
        CHECK(rep[run].evaluations == fe.calls);
        CHECK(rep[run].evaluations <= 2 + NU + t->steps + t->trim_steps + rep[run].trials[1].steps +
                                          rep[run].trials[1].trim_steps);
    }
    if (q[0] && q[1]) {
        bert8_unit_mode a[NU], b[NU];
        unit_modes_of(q[0], a);
        unit_modes_of(q[1], b);
        CHECK(memcmp(a, b, sizeof a) == 0);
        CHECK(rep[0].chosen == rep[1].chosen && calls[0] == calls[1]);
    }
    for (int run = 0; run < 2; run++) {
        bert8_model_free(q[run]);
        bert8_budget_report_free(&rep[run]);
    }
    fixture_close(&x);
}

TEST(all_int8_within_budget_needs_no_search) {
    fixture x;
    if (!fixture_open(&x)) return;
    fake_eval fe = {0};
    bert8_budget_report rep = {0};
    bert8_model *q = NULL;
    char err[1024] = "";
    CHECKF(run_budget(&x, &fe, BERT8_RANK_BOTH, 6.0, NULL, &q, &rep, err, sizeof err) == BERT8_OK, "%s", err);
    CHECK(rep.chosen == -1 && rep.n_trials == 0 && rep.evaluations == 2 && fe.calls == 2);
    CHECK(rep.score == rep.int8_score);
    for (int u = 0; u < NU && q; u++)
        CHECK(rep.units[u].mode == (u == ATT0 || u == ATT1 ? BERT8_UNIT_FP32 : BERT8_UNIT_INT8_STATIC) &&
              isnan(rep.units[u].metric_drop));
    bert8_model_free(q);
    bert8_budget_report_free(&rep);
    fixture_close(&x);
}

/* A budget of 0 against penalties in every INT8 form leaves nothing in INT8: an error that says
 * to use the FP32 model, with the report still filled. */
TEST(budget_that_only_fp32_meets_is_an_error) {
    fixture x;
    if (!fixture_open(&x)) return;
    static const double all_s[NU] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
                        all_d[NU] = {0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5};
    fake_eval fe = {.pen_s = all_s, .pen_d = all_d};
    bert8_budget_report rep = {0};
    bert8_model *q = NULL;
    char err[1024] = "";
    bert8_status st = run_budget(&x, &fe, BERT8_RANK_OUTPUT_ERROR, 0.0, NULL, &q, &rep, err, sizeof err);
    CHECK(st == BERT8_ERR_UNSUPPORTED && q == NULL);
    CHECKF(strstr(err, "FP32 model") != NULL, "%s", err);
    CHECK(rep.n_trials == 1 && rep.trials[0].n_fp32 == NU - 2 && rep.trials[0].within);
    bert8_budget_report_free(&rep);
    fixture_close(&x);
}

TEST(bad_budgets_and_callbacks_are_refused) {
    fixture x;
    if (!fixture_open(&x)) return;
    const double bad[3] = {-0.5, NAN, INFINITY};
    for (int i = 0; i < 3; i++) {
        fake_eval fe = {0};
        bert8_model *q = NULL;
        char err[1024] = "";
        bert8_status st = run_budget(&x, &fe, BERT8_RANK_BOTH, bad[i], NULL, &q, NULL, err, sizeof err);
        CHECKF(st == BERT8_ERR_INVALID_ARG && q == NULL, "max_drop %g: status %d", bad[i], (int)st);
        CHECKF(strstr(err, "max_drop") != NULL, "max_drop %g: \"%s\"", bad[i], err);
        CHECK(fe.calls == 0);
    }
    bert8_quant_params qp = bert8_default_quant_params();
    bert8_budget_params bp = bert8_default_budget_params();
    bert8_model *q = NULL;
    char err[1024] = "";
    /* no callback */
    CHECK(bert8_quantize_budget(x.f, x.cs.b, (size_t)x.cs.n, &qp, &bp, &q, NULL, err, sizeof err) ==
          BERT8_ERR_INVALID_ARG);
    CHECKF(strstr(err, "callback") != NULL, "%s", err);
    fake_eval fe = {.pen_s = PEN_STATIC, .pen_d = PEN_DYNAMIC, .batch = &x.cs.b[0]};
    bp.eval = fake_score;
    bp.eval_ctx = &fe;
    /* an unknown ranking, unit_modes given, no budget, no calibration */
    bp.ranking = (bert8_ranking)7;
    CHECK(bert8_quantize_budget(x.f, x.cs.b, (size_t)x.cs.n, &qp, &bp, &q, NULL, err, sizeof err) ==
          BERT8_ERR_INVALID_ARG);
    CHECKF(strstr(err, "ranking") != NULL, "%s", err);
    bp.ranking = BERT8_RANK_BOTH;
    bert8_unit_mode modes[NU] = {BERT8_UNIT_INT8_STATIC};
    qp.unit_modes = modes;
    CHECK(bert8_quantize_budget(x.f, x.cs.b, (size_t)x.cs.n, &qp, &bp, &q, NULL, err, sizeof err) ==
          BERT8_ERR_INVALID_ARG);
    CHECKF(strstr(err, "unit_modes") != NULL, "%s", err);
    qp.unit_modes = NULL;
    CHECK(bert8_quantize_budget(x.f, x.cs.b, (size_t)x.cs.n, &qp, NULL, &q, NULL, err, sizeof err) ==
          BERT8_ERR_INVALID_ARG);
    CHECK(bert8_quantize_budget(x.f, x.cs.b, 0, &qp, &bp, &q, NULL, err, sizeof err) == BERT8_ERR_INVALID_ARG);
    CHECK(fe.calls == 0 && q == NULL);
    /* the callback failing on its third call: its status and message come back */
    bert8_budget_report rep = {0};
    fe.fail_at = 3;
    bert8_status st = run_budget(&x, &fe, BERT8_RANK_BOTH, 0.5, NULL, &q, &rep, err, sizeof err);
    CHECK(st == BERT8_ERR_IO && q == NULL);
    CHECKF(strstr(err, "fails on call 3") != NULL, "%s", err);
    CHECK(rep.evaluations == 3);
    /* a NaN score */
    fake_eval fn = {.nan_score = true};
    st = run_budget(&x, &fn, BERT8_RANK_BOTH, 0.5, NULL, &q, &rep, err, sizeof err);
    CHECK(st == BERT8_ERR_INVALID_ARG && q == NULL);
    CHECKF(strstr(err, "finite") != NULL, "%s", err);
    bert8_budget_report_free(&rep);
    fixture_close(&x);
}

/* The mixed model a search returns is saved, reloaded with every unit in its recorded mode and
 * alpha, and computes bit for bit the same outputs. */
TEST(budgeted_model_roundtrips_through_its_config) {
    fixture x;
    if (!fixture_open(&x)) return;
    fake_eval fe = {0};
    bert8_budget_report rep = {0};
    bert8_model *q = NULL, *r = NULL;
    char err[1024] = "", out[512];
    CHECKF(run_budget(&x, &fe, BERT8_RANK_METRIC, 0.5, NULL, &q, &rep, err, sizeof err) == BERT8_OK, "%s", err);
    snprintf(out, sizeof out, "%s/budgeted", tu_tmpdir());
    CHECKF(q && bert8_model_save(q, out, err, sizeof err) == BERT8_OK, "%s", err);
    CHECKF(bert8_model_load(out, NULL, &r, err, sizeof err) == BERT8_OK, "%s", err);
    if (q && r) {
        CHECK(bert8_model_unit_count(r) == NU);
        int kinds[3] = {0, 0, 0};
        for (int64_t u = 0; u < NU; u++) {
            bert8_unit_info a, b;
            CHECK(bert8_model_unit(q, u, &a) == BERT8_OK && bert8_model_unit(r, u, &b) == BERT8_OK);
            CHECKF(a.mode == b.mode && a.alpha == b.alpha && a.layer == b.layer && !strcmp(a.kind, b.kind),
                   "unit %lld: %s %g saved, %s %g loaded", (long long)u, bert8_unit_mode_name(a.mode),
                   (double)a.alpha, bert8_unit_mode_name(b.mode), (double)b.alpha);
            kinds[b.mode]++;
        }
        CHECK(kinds[BERT8_UNIT_FP32] == 4 && kinds[BERT8_UNIT_INT8_DYNAMIC] == 1 && kinds[BERT8_UNIT_INT8_STATIC] == 5);
        char path[600];
        snprintf(path, sizeof path, "%s/quantization_config.json", out);
        char *text = tu_read_file(path, NULL);
        CHECK(text && strstr(text, "\"int8_dynamic\"") && strstr(text, "\"fp32\"") && strstr(text, "\"int8_static\""));
        free(text);
        bert8_session *a = NULL, *b = NULL;
        CHECK(bert8_session_create(q, &a) == BERT8_OK && bert8_session_create(r, &b) == BERT8_OK);
        for (int i = 0; a && b && i < x.cs.n; i++) {
            bert8_outputs oa, ob;
            CHECK(bert8_forward(a, &x.cs.b[i], &oa) == BERT8_OK);
            const int64_t n = oa.logits.shape[0] * oa.logits.shape[1];
            float *keep = malloc((size_t)n * sizeof *keep);
            memcpy(keep, oa.logits.data, (size_t)n * sizeof *keep);
            CHECK(bert8_forward(b, &x.cs.b[i], &ob) == BERT8_OK);
            CHECKF(memcmp(keep, ob.logits.data, (size_t)n * sizeof *keep) == 0, "case %d: logits differ", i);
            free(keep);
        }
        bert8_session_free(a);
        bert8_session_free(b);
    }
    bert8_model_free(r);
    bert8_model_free(q);
    bert8_budget_report_free(&rep);
    fixture_close(&x);
}

/* bert8_quantize with unit_modes builds exactly the given mix; all-FP32 and unknown modes are
 * refused. */
TEST(quantize_with_unit_modes_builds_that_mix) {
    fixture x;
    if (!fixture_open(&x)) return;
    const bert8_unit_mode S_ = BERT8_UNIT_INT8_STATIC, F_ = BERT8_UNIT_FP32, D_ = BERT8_UNIT_INT8_DYNAMIC;
    /* layer 0 with an INT8 attention over its dynamic QKV, layer 1 without */
    bert8_unit_mode modes[NU] = {D_, F_, S_, S_, S_, F_, D_, S_, D_, F_};
    bert8_quant_params qp = bert8_default_quant_params();
    qp.unit_modes = modes;
    bert8_model *q = NULL;
    char err[1024] = "";
    CHECKF(bert8_quantize(x.f, x.cs.b, (size_t)x.cs.n, &qp, &q, err, sizeof err) == BERT8_OK, "%s", err);
    if (q) {
        bert8_unit_mode got[NU];
        unit_modes_of(q, got);
        CHECK(memcmp(got, modes, sizeof got) == 0);
        bert8_unit_info ui;
        CHECK(bert8_model_unit(q, NU, &ui) == BERT8_ERR_INVALID_ARG && bert8_model_unit(q, -1, &ui) == BERT8_ERR_INVALID_ARG);
        /* the default alpha is searched per group on the grid 0.3 .. 0.9 */
        CHECK(bert8_model_unit(q, 0, &ui) == BERT8_OK && ui.alpha >= 0.3f && ui.alpha <= 0.9f && !strcmp(ui.kind, "qkv"));
        CHECK(bert8_model_unit(q, 1, &ui) == BERT8_OK && ui.alpha < 0 && !strcmp(ui.kind, "attention_output"));
        CHECK(bert8_model_unit(q, ATT0, &ui) == BERT8_OK && !strcmp(ui.kind, "attention") &&
              ui.mode == BERT8_UNIT_INT8_STATIC);
    }
    bert8_model_free(q);
    q = NULL;
    /* an attention unit is static or FP32, and INT8 only over an INT8 qkv unit */
    modes[ATT0] = D_;
    CHECK(bert8_quantize(x.f, x.cs.b, (size_t)x.cs.n, &qp, &q, err, sizeof err) == BERT8_ERR_INVALID_ARG);
    CHECKF(strstr(err, "attention unit runs int8_static or fp32") != NULL, "%s", err);
    modes[ATT0] = F_;
    modes[ATT1] = S_;
    CHECK(bert8_quantize(x.f, x.cs.b, (size_t)x.cs.n, &qp, &q, err, sizeof err) == BERT8_ERR_INVALID_ARG);
    CHECKF(strstr(err, "needs its qkv unit in INT8") != NULL, "%s", err);
    for (int u = 0; u < NU; u++) modes[u] = BERT8_UNIT_FP32;
    CHECK(bert8_quantize(x.f, x.cs.b, (size_t)x.cs.n, &qp, &q, err, sizeof err) == BERT8_ERR_INVALID_ARG);
    CHECKF(strstr(err, "every unit FP32") != NULL, "%s", err);
    modes[3] = (bert8_unit_mode)9;
    CHECK(bert8_quantize(x.f, x.cs.b, (size_t)x.cs.n, &qp, &q, err, sizeof err) == BERT8_ERR_INVALID_ARG);
    CHECKF(strstr(err, "unit_modes[3]") != NULL, "%s", err);
    CHECK(q == NULL);
    CHECK(!strcmp(bert8_unit_mode_name(BERT8_UNIT_INT8_DYNAMIC), "int8_dynamic"));
    CHECK(!strcmp(bert8_unit_mode_name((bert8_unit_mode)9), "?"));
    CHECK(!strcmp(bert8_ranking_name(BERT8_RANK_OUTPUT_ERROR), "output-error"));
    CHECK(bert8_model_unit_count(NULL) == 0);
    fixture_close(&x);
}

/* With int8_attention the attention units join the search: never dynamic, straight to FP32. By
 * hand: only layer 0's INT8 attention costs (2.0); it ranks first (its drop measured from its
 * QKV alone), the dynamic pass moves the eight Linears for nothing, the FP32 pass moves it and
 * reaches the budget; trimming undoes the eight Linear moves. */
TEST(attention_units_join_the_search_with_int8_attention) {
    fixture x;
    if (!fixture_open(&x)) return;
    static const double pen_s[NU] = {0, 0, 0, 0, 2.0, 0, 0, 0, 0, 0}, pen_d[NU] = {0};
    fake_eval fe = {.pen_s = pen_s, .pen_d = pen_d};
    bert8_budget_report rep = {0};
    bert8_model *q = NULL, *r = NULL;
    char err[1024] = "", out[512];
    CHECKF(run_budget_att(&x, &fe, BERT8_RANK_METRIC, 0.5, NULL, 1, &q, &rep, err, sizeof err) == BERT8_OK, "%s", err);
    if (q) {
        CHECK(rep.int8_score == 88.0 && rep.score == 90.0);
        CHECK(!rep.units[ATT0].fixed && !rep.units[ATT1].fixed);
        CHECK(rep.units[ATT0].metric_drop == 2.0 && rep.units[ATT1].metric_drop == 0.0);
        CHECKF(isfinite(rep.units[ATT0].output_error) && rep.units[ATT0].output_error > 0, "%g",
               rep.units[ATT0].output_error);
        const bert8_budget_trial *t = &rep.trials[0];
        CHECK(t->n_order == NU && t->order[0] == ATT0);
        CHECK(t->steps == 9 && t->trim_steps == 9);
        CHECK(t->n_fp32 == 1 && t->n_dynamic == 0 && t->n_static == NU - 1);
        bert8_unit_mode got[NU];
        unit_modes_of(q, got);
        for (int u = 0; u < NU; u++)
            CHECKF(got[u] == (u == ATT0 ? BERT8_UNIT_FP32 : BERT8_UNIT_INT8_STATIC), "unit %d is %s", u,
                   bert8_unit_mode_name(got[u]));
        /* the INT8 attention of layer 1 is saved and loaded back */
        snprintf(out, sizeof out, "%s/budgeted-att", tu_tmpdir());
        CHECKF(bert8_model_save(q, out, err, sizeof err) == BERT8_OK, "%s", err);
        CHECKF(bert8_model_load(out, NULL, &r, err, sizeof err) == BERT8_OK, "%s", err);
        bert8_unit_mode back[NU];
        if (r) unit_modes_of(r, back);
        CHECK(r && memcmp(got, back, sizeof got) == 0);
    }
    bert8_model_free(r);
    bert8_model_free(q);
    bert8_budget_report_free(&rep);
    fixture_close(&x);
}

/* Logits of every calibration case of model a and model b are bitwise equal. */
static void same_logits(const fixture *x, const bert8_model *qa, const bert8_model *qb, const char *what) {
    bert8_session *a = NULL, *b = NULL;
    CHECK(bert8_session_create(qa, &a) == BERT8_OK && bert8_session_create(qb, &b) == BERT8_OK);
    for (int i = 0; a && b && i < x->cs.n; i++) {
        bert8_outputs oa, ob;
        CHECK(bert8_forward(a, &x->cs.b[i], &oa) == BERT8_OK);
        const int64_t n = oa.logits.shape[0] * oa.logits.shape[1];
        float *keep = malloc((size_t)n * sizeof *keep);
        memcpy(keep, oa.logits.data, (size_t)n * sizeof *keep);
        CHECK(bert8_forward(b, &x->cs.b[i], &ob) == BERT8_OK);
        CHECKF(memcmp(keep, ob.logits.data, (size_t)n * sizeof *keep) == 0, "%s: case %d: logits differ", what, i);
        free(keep);
    }
    bert8_session_free(a);
    bert8_session_free(b);
}

/* The defaults: every Linear static but FFN-in and FFN-out, whose inputs (a LayerNorm output, the
 * GELU output) are quantized per token; alpha searched per group. ffn_in_per_token = 0 and
 * ffn_out_per_token = 0 keep them static, FFN-out with a calibrated input zero point, which the
 * folder stores (input_zero_point) and gives back bit for bit. */
TEST(defaults_quantize_ffn_out_per_token_and_static_ffn_out_has_a_zero_point) {
    fixture x;
    if (!fixture_open(&x)) return;
    const bert8_unit_mode S_ = BERT8_UNIT_INT8_STATIC, D_ = BERT8_UNIT_INT8_DYNAMIC;
    char err[1024] = "", out[512];
    bert8_quant_params qp = bert8_default_quant_params();
    CHECK(qp.alpha < 0 && qp.scheme == BERT8_SCHEME_STATIC && qp.ffn_out_per_token == -1 && qp.ffn_in_per_token == -1);
    bert8_model *q = NULL, *z = NULL, *r = NULL;
    CHECKF(bert8_quantize(x.f, x.cs.b, (size_t)x.cs.n, &qp, &q, err, sizeof err) == BERT8_OK, "%s", err);
    if (q) {
        bert8_unit_mode got[NU], want[NU] = {S_, S_, D_, D_, S_, S_, S_, D_, D_, S_};
        unit_modes_of(q, got);
        CHECK(memcmp(got, want, sizeof got) == 0);
    }
    qp.ffn_out_per_token = 0;
    qp.ffn_in_per_token = 0;
    CHECKF(bert8_quantize(x.f, x.cs.b, (size_t)x.cs.n, &qp, &z, err, sizeof err) == BERT8_OK, "%s", err);
    snprintf(out, sizeof out, "%s/ffn-out-zero-point", tu_tmpdir());
    CHECKF(z && bert8_model_save(z, out, err, sizeof err) == BERT8_OK, "%s", err);
    CHECKF(bert8_model_load(out, NULL, &r, err, sizeof err) == BERT8_OK, "%s", err);
    if (z && r) {
        bert8_unit_mode got[NU];
        unit_modes_of(r, got);
        for (int64_t u = 0; u < NU; u++) CHECK(got[u] == S_);
        char path[600];
        snprintf(path, sizeof path, "%s/model.safetensors", out);
        size_t len = 0;
        char *bytes = tu_read_file(path, &len);
        /* the GELU output is one-sided: its range gets a zero point, the others none */
        int zeros = 0;
        for (size_t i = 0; bytes && i + 16 < len && i < 65536; i++) zeros += !memcmp(bytes + i, "input_zero_point", 16);
        CHECKF(zeros == 2, "%d input_zero_point tensors, want one per FFN-out", zeros);
        free(bytes);
        snprintf(path, sizeof path, "%s/quantization_config.json", out);
        char *text = tu_read_file(path, NULL);
        CHECK(text && strstr(text, "\"version\":\t5") != NULL);
        free(text);
        same_logits(&x, z, r, "zero point saved and loaded");
    }
    qp.ffn_out_per_token = 3;
    bert8_model *bad = NULL;
    CHECK(bert8_quantize(x.f, x.cs.b, (size_t)x.cs.n, &qp, &bad, err, sizeof err) == BERT8_ERR_INVALID_ARG &&
          strstr(err, "ffn_out_per_token"));
    qp.ffn_out_per_token = -1;
    qp.ffn_in_per_token = 2;
    CHECK(bert8_quantize(x.f, x.cs.b, (size_t)x.cs.n, &qp, &bad, err, sizeof err) == BERT8_ERR_INVALID_ARG &&
          strstr(err, "ffn_in_per_token"));
    bert8_model_free(r);
    bert8_model_free(z);
    bert8_model_free(q);
    fixture_close(&x);
}

/* A keep_fp32 pattern that names no weight is an error, not a silent no-op. */
TEST(keep_fp32_pattern_matching_nothing_is_refused) {
    fixture x;
    if (!fixture_open(&x)) return;
    char err[1024] = "";
    bert8_quant_params qp = bert8_default_quant_params();
    bert8_model *q = NULL;
    qp.keep_fp32 = "*output.dense*,intermediate.dense";
    CHECK(bert8_quantize(x.f, x.cs.b, (size_t)x.cs.n, &qp, &q, err, sizeof err) == BERT8_ERR_INVALID_ARG);
    CHECKF(strstr(err, "\"intermediate.dense\" matches no weight") != NULL, "%s", err);
    CHECK(q == NULL);
    qp.keep_fp32 = "*intermediate.dense*,classifier*"; /* the head is FP32 anyway: still a match */
    CHECKF(bert8_quantize(x.f, x.cs.b, (size_t)x.cs.n, &qp, &q, err, sizeof err) == BERT8_OK, "%s", err);
    bert8_model_free(q);
    fixture_close(&x);
}

/* With the defaults the search starts where bert8_quantize's defaults are: FFN-out per token. */
TEST(budget_starts_from_the_default_modes) {
    fixture x;
    if (!fixture_open(&x)) return;
    fake_eval fe = {.batch = &x.cs.b[0], .pen_s = PEN_STATIC, .pen_d = PEN_DYNAMIC};
    bert8_quant_params qp = bert8_default_quant_params();
    bert8_budget_params bp = bert8_default_budget_params();
    bp.max_drop = 100; /* anything passes: the result is the starting configuration */
    bp.eval = fake_score;
    bp.eval_ctx = &fe;
    bert8_budget_report rep = {0};
    bert8_model *q = NULL, *d = NULL;
    char err[1024] = "";
    CHECKF(bert8_quantize_budget(x.f, x.cs.b, (size_t)x.cs.n, &qp, &bp, &q, &rep, err, sizeof err) == BERT8_OK, "%s", err);
    CHECKF(bert8_quantize(x.f, x.cs.b, (size_t)x.cs.n, &qp, &d, err, sizeof err) == BERT8_OK, "%s", err);
    if (q && d) {
        bert8_unit_mode a[NU], b[NU];
        unit_modes_of(q, a);
        unit_modes_of(d, b);
        CHECK(memcmp(a, b, sizeof a) == 0);
        CHECK(a[3] == BERT8_UNIT_INT8_DYNAMIC && a[8] == BERT8_UNIT_INT8_DYNAMIC && a[0] == BERT8_UNIT_INT8_STATIC);
        same_logits(&x, q, d, "budget start against bert8_quantize");
    }
    bert8_model_free(q);
    bert8_model_free(d);
    bert8_budget_report_free(&rep);
    fixture_close(&x);
}

int main(void) {
    RUN(metric_ranking_follows_the_hand_worked_path);
    RUN(both_rankings_keep_the_result_with_fewest_units_off_int8);
    RUN(all_int8_within_budget_needs_no_search);
    RUN(budget_that_only_fp32_meets_is_an_error);
    RUN(bad_budgets_and_callbacks_are_refused);
    RUN(budgeted_model_roundtrips_through_its_config);
    RUN(quantize_with_unit_modes_builds_that_mix);
    RUN(attention_units_join_the_search_with_int8_attention);
    RUN(defaults_quantize_ffn_out_per_token_and_static_ffn_out_has_a_zero_point);
    RUN(keep_fp32_pattern_matching_nothing_is_refused);
    RUN(budget_starts_from_the_default_modes);
    return tu_finish();
}
