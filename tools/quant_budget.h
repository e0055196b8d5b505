/* quant_budget.h: the two budgeted searches of `bert8 quantize`, --max-drop (quant_drop.c) and
 * --min-cosine (quant_cosine.c): what one run works with, what they share (quant_budget.c) and
 * their tables and reports (quant_report.c). Each search scores candidates on a tuning slice and
 * the result on the held-out rest; both end in the same tail: the folder written, the all-INT8
 * model built from the same calibration, the speed of the result against it, the table, the
 * report. */
#ifndef BERT8_QUANT_BUDGET_H
#define BERT8_QUANT_BUDGET_H

#include <stdbool.h>
#include <stdint.h>

#include "bert8.h"
#include "bert8_pipeline.h"
#include "calib_text.h"
#include "eval_set.h"
#include "quant_opts.h"

/* The result timed against the all-INT8 model, as `bert8 bench` times: passes interleaved. */
typedef struct bench_result {
    long iters;
    double med[2], best[2];       /* seconds per forward pass of models a and b */
    double op[2][BERT8_OP_COUNT]; /* seconds per pass spent in each op (median over the passes) */
} bench_result;

/* A configuration the callback scored: its units' modes, the searched score and the plain metric. */
typedef struct scored_cfg {
    bert8_unit_mode *modes;
    double score, plain;
} scored_cfg;

/* The evaluation of an accuracy budget (--max-drop): the eval set's tuning slice, the FP32
 * per-example ceiling of the conservative score, every configuration scored. */
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

/* A cosine budget's statistics of one model on one slice: the mean, the 1st percentile (nearest
 * rank) and the minimum of the per-text cosine to the FP32 embedding. */
typedef struct cos_stats {
    double mean, p1, min;
} cos_stats;

/* What the progress display (budget_progress) needs. */
typedef struct budget_view {
    const bert8_model *m;
    bool quiet;
    int prec;              /* decimals of scores: 2 (points), 4 (a cosine budget's score) */
    const cos_stats *last; /* a cosine budget: the latest candidate's statistics, else NULL */
    cos_stats *start;      /* a cosine budget: where the all-INT8 baseline's statistics go */
} budget_view;

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

/* ---- quant_budget.c: shared by both searches ----------------------------------------------- */

int cmp_double(const void *a, const void *b);
/* The tuning and held-out slices of n examples (a fixed-seed shuffle, the first ceil(fraction * n)
 * tune); false when out of memory. */
bool split_slices(int64_t n, double fraction, int64_t **tune, int64_t *nt, int64_t **held, int64_t *nh);
/* Every unit's mode in model m ([units], malloc'd; NULL when out of memory). */
bert8_unit_mode *modes_of(const bert8_model *m);
/* "layer 3 ffn_out" */
void unit_label(const bert8_model *m, int64_t u, char *out, size_t n);
/* The search's progress display on stderr (a bert8_budget_params.progress; ctx a budget_view). */
void budget_progress(void *ctx, const bert8_budget_event *ev);
/* The largest input a text of model m may have in tokens: the tokenizer's and the model's limit. */
int64_t budget_max_tokens(const budget_run *b, const bert8_tokenizer *tok);
/* The first part of the tail after bert8_quantize_budget returned st (and model q): the error, or
 * the folder written, the all-INT8 configuration and the scores the search reports. 0, or 1 after
 * the message. */
int budget_searched(budget_run *b, bert8_status st, const char *err, const bert8_model *q);
/* The all-INT8 model as bert8_quantize makes it with the run's options, from the same calibration. */
int budget_all_int8(budget_run *b, const bert8_batch *batches, int64_t nb, bert8_model **all);
/* The end of the tail: the result q timed against the all-INT8 model (unless --bench-seconds 0),
 * then table(b) on stdout and, with --report, json(b, path). */
int budget_finish(budget_run *b, const bert8_model *all, const bert8_model *q, void (*table)(const budget_run *),
                  int (*json)(const budget_run *, const char *));
void budget_run_free(budget_run *b);

/* ---- the searches ------------------------------------------------------------------------- */

/* --max-drop: the search over the eval set's tuning slice. */
int quantize_budget(budget_run *b, const bert8_tokenizer *tok, const bert8_batch *batches, int64_t nb);
/* --min-cosine: the search over the texts ev (held-out calibration text or --eval-data). */
int quantize_cosine(budget_run *b, const bert8_tokenizer *tok, const bert8_batch *batches, int64_t nb,
                    const texts *ev);
/* A cosine budget's targets met by s; the score the search sees for s (>= 0 within the budget). */
bool cos_within(const cosine_eval *ce, cos_stats s);
double cos_score(const cosine_eval *ce, cos_stats s);

/* ---- quant_report.c ------------------------------------------------------------------------ */

void budget_table(const budget_run *b);
int budget_report_json(const budget_run *b, const char *path);
void cosine_table(const budget_run *b);
int cosine_report_json(const budget_run *b, const char *path);
/* "mean >= 0.999, 1st percentile >= 0.995" */
const char *cos_targets(const cosine_eval *ce, char *buf, size_t n);
/* The shortest decimal that reads back as x. */
const char *num_text(double x, char buf[32]);

#endif
