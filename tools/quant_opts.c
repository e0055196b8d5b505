/* quant_opts.c: the options of `bert8 quantize` and their parsing (quant_opts.h): the INT8 form
 * (shared with `bert8 bench`), the budgets and their evaluation, --unit-modes. */
#include "cli.h"
#include "quant_opts.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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

bool parse_points(const char *cmd, const char *name, const char *v, double lo, double hi, double *out) {
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
bool parse_min_cosine(const char *cmd, const char *v, double *mean, double *p1) {
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

/* --unit-modes KIND=MODE[,KIND=MODE...]: KIND a unit kind (qkv, attention_output, ffn_in, ffn_out,
 * attention), MODE fp32, static or dynamic (attention: fp32 or static); every layer's unit of that
 * kind runs so, the others as --scheme and --attention say. Fills modes (unit count entries). */
bool parse_unit_modes(const char *cmd, const char *spec, const bert8_model *m, const bert8_quant_params *p,
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

int quant_args_parse(int argc, char **argv, quant_args *q) {
    const char *C = "quantize";
    cli_args a;
    cli_args_init(&a, argc, argv);
    memset(q, 0, sizeof *q);
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
    *q = (quant_args){.dir = dir, .outdir = outdir, .calib = calib, .columns = columns, .lora_task = lora_task,
                      .alpha = alpha_s, .unit_modes = umodes, .samples = 512, .max_length = 128, .threads = 0,
                      .quiet = quiet, .max_drop = drop_s != NULL, .min_cosine = mincos_s != NULL};
    if (samples_s && !cli_int(C, "--samples", samples_s, 1, 10000000, &q->samples)) return 1;
    if (maxlen_s && !cli_int(C, "--max-length", maxlen_s, 2, 65536, &q->max_length)) return 1;
    if (th && !cli_int(C, "--threads", th, 1, 1024, &q->threads)) return 1;
    bert8_quant_params *p = &q->qp;
    *p = bert8_default_quant_params();
    if (!parse_scheme(C, scheme_s, &p->scheme) || !parse_alpha(C, alpha_s, &p->alpha, &p->smooth)) return 1;
    p->max_samples = q->samples;
    p->keep_fp32 = keep;
    p->progress = !quiet;
    if (!parse_attention(C, att, &p->int8_attention) || !parse_embeddings(C, emb, &p->int8_embeddings) ||
        !parse_weight_bits(C, wbits, &p->weight_bits) || !parse_ffn_out(C, ffn_out, &p->ffn_out_per_token) ||
        !parse_ffn_in(C, ffn_in, &p->ffn_in_per_token) || !parse_outliers(C, outl, &p->outliers))
        return 1;
    if (umodes && (drop_s || mincos_s))
        return cli_error(C, "--unit-modes takes neither --max-drop nor --min-cosine");
    if (drop_s && mincos_s) return cli_error(C, "--min-cosine and --max-drop are mutually exclusive: give one budget");
    budget_opts *bo = &q->bo;
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
    return 0;
}
