/* quant_opts.h: the options of `bert8 quantize` (quant_opts.c): the parsers of the INT8 form,
 * which `bert8 bench` shares, and the whole command line read into quant_args, checked as far as
 * it can be without the model. To add an option: a field here, its cli_opt and check in
 * quant_args_parse, and its use in cmd_quant.c (the plain run) or quant_budget.h (the searches). */
#ifndef BERT8_QUANT_OPTS_H
#define BERT8_QUANT_OPTS_H

#include <stdbool.h>
#include <stdint.h>

#include "bert8.h"

bool parse_scheme(const char *cmd, const char *v, bert8_scheme *out);
/* --attention fp32|int8 (NULL: *int8 is left as it is, the library's default -1) */
bool parse_attention(const char *cmd, const char *v, int *int8);
/* *int8 = -1 settled for model m as bert8_quantize settles it (INT8 where the head size is a
 * multiple of 4) */
void resolve_attention(const bert8_model *m, int *int8);
/* --embeddings fp32|int8 (NULL: fp32) */
bool parse_embeddings(const char *cmd, const char *v, int *int8);
/* --weight-bits 7|8 (NULL leaves *bits as it is). */
bool parse_weight_bits(const char *cmd, const char *v, int *bits);
/* --ffn-out dynamic|static: the static scheme's FFN-out input per token (1) or per tensor (0) */
bool parse_ffn_out(const char *cmd, const char *v, int *per_token);
/* --ffn-in dynamic|static: the static scheme's FFN-in input per token (1) or per tensor (0) */
bool parse_ffn_in(const char *cmd, const char *v, int *per_token);
/* --outliers N (0 to 64): fp32 outlier input channels of each per-token Linear (NULL: as is) */
bool parse_outliers(const char *cmd, const char *v, int *outliers);
/* --alpha A|auto|none */
bool parse_alpha(const char *cmd, const char *v, float *alpha, int *smooth);
/* --max-drop / --min-cosine numbers: a finite number in [lo, hi] */
bool parse_points(const char *cmd, const char *name, const char *v, double lo, double hi, double *out);
/* --min-cosine MEAN[,P1]: each strictly between 0 and 1; *p1 NAN when not given */
bool parse_min_cosine(const char *cmd, const char *v, double *mean, double *p1);
/* --unit-modes KIND=MODE[,KIND=MODE...]: fills modes (one per unit of m); every unit not named
 * keeps what bert8_quantize makes of it with p */
bool parse_unit_modes(const char *cmd, const char *spec, const bert8_model *m, const bert8_quant_params *p,
                      bert8_unit_mode *modes);

/* The budget of a search and how it is evaluated (--max-drop or --min-cosine and their options). */
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

/* `bert8 quantize`'s command line. */
typedef struct quant_args {
    const char *dir, *outdir, *calib, *columns, *lora_task;
    const char *alpha;      /* --alpha as given (NULL: auto), for the closing message */
    const char *unit_modes; /* --unit-modes, parsed once the model is loaded */
    long samples, max_length, threads;
    bool quiet;
    bert8_quant_params qp;
    bool max_drop, min_cosine; /* which budget, if any */
    budget_opts bo;
} quant_args;

/* Reads and checks the command line; returns 0, or 1 after printing why. */
int quant_args_parse(int argc, char **argv, quant_args *q);

#endif
