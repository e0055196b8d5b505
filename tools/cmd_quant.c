/* cmd_quant.c: `bert8 quantize`: calibrate, apply SmoothQuant and save an INT8 folder. The options
 * are read by quant_opts.c; with --max-drop or --min-cosine the run goes on in a budgeted search
 * (quant_budget.h), else this file quantizes once with the options given. */
#include "calib_text.h"
#include "cli.h"
#include "quant_budget.h"

#include <stdlib.h>
#include <string.h>

/* The plain run: one bert8_quantize with the command line's options, the folder written, a line
 * on stderr saying what it holds. */
static int quantize_once(const quant_args *qa, bert8_model *m, const bert8_batch *batches, int64_t nb,
                         int64_t calib_rows) {
    const char *C = "quantize";
    bert8_quant_params p = qa->qp;
    bert8_model *q = NULL;
    bert8_unit_mode *modes = NULL;
    char err[1024];
    if (qa->unit_modes) {
        if (!(modes = calloc((size_t)bert8_model_unit_count(m), sizeof *modes))) return cli_error(C, "out of memory");
        if (!parse_unit_modes(C, qa->unit_modes, m, &p, modes)) {
            free(modes);
            return 1;
        }
        p.unit_modes = modes;
    }
    bert8_status st = bert8_quantize(m, batches, (size_t)nb, &p, &q, err, sizeof err);
    free(modes);
    p.unit_modes = NULL;
    if (st) return cli_error(C, "%s (%s)", err, bert8_status_string(st));
    if ((st = bert8_model_save(q, qa->outdir, err, sizeof err))) {
        bert8_model_free(q);
        return cli_error(C, "%s (%s)", err, bert8_status_string(st));
    }
    /* what the written model runs (an architecture may keep its attention FP32 whatever was asked) */
    bool att8 = false;
    for (int64_t u = 0; u < bert8_model_unit_count(q); u++) {
        bert8_unit_info ui;
        if (!bert8_model_unit(q, u, &ui) && !strcmp(ui.kind, "attention") && ui.mode != BERT8_UNIT_FP32) att8 = true;
    }
    bert8_model_free(q);
    if (!qa->quiet)
        fprintf(stderr, "wrote %s: INT8 %s%s, alpha %s, %s attention, %lld calibration sequences\n", qa->outdir,
                qa->unit_modes ? "per --unit-modes" : p.scheme == BERT8_SCHEME_STATIC ? "static" : "dynamic",
                qa->unit_modes || p.scheme != BERT8_SCHEME_STATIC ? ""
                : p.ffn_in_per_token != 0 && p.ffn_out_per_token != 0 ? " (FFN-in and FFN-out inputs per token)"
                : p.ffn_out_per_token != 0                           ? " (FFN-out input per token)"
                : p.ffn_in_per_token != 0                            ? " (FFN-in input per token)"
                                                                     : "",
                !p.smooth ? "none (no smoothing)" : qa->alpha ? qa->alpha : "auto (searched per group)",
                att8 ? "INT8" : "FP32", (long long)calib_rows);
    return 0;
}

int cmd_quantize(int argc, char **argv) {
    const char *C = "quantize";
    quant_args qa;
    if (quant_args_parse(argc, argv, &qa)) return 1;
    const budget_opts *bo = &qa.bo;
    const char *edata = bo->data;
    const long samples = qa.samples;
    /* --min-cosine scores held-out text: the calibration file's rows after the first --samples, or
     * the --eval-data lines (read as --calib is) */
    texts t = {0}, ev = {0};
    int rc = read_texts(C, qa.calib, qa.columns, qa.min_cosine && !edata ? samples + bo->limit : samples, &t);
    if (!rc && qa.min_cosine && edata) rc = read_texts(C, edata, qa.columns, bo->limit, &ev);
    if (!rc && qa.min_cosine && !edata && t.n > samples) {
        ev.a = t.a + samples, ev.b = t.b + samples, ev.n = t.n - samples; /* still owned by t */
    }
    if (!rc && qa.min_cosine && ev.n < 32)
        rc = cli_error(C, "--min-cosine needs held-out text: give --eval-data or fewer --samples (%lld text%s "
                          "left to score, at least 32 needed)",
                       (long long)ev.n, ev.n == 1 ? "" : "s");
    if (rc) {
        if (edata && qa.min_cosine) texts_free(&ev);
        texts_free(&t);
        return rc;
    }
    /* only the first --samples rows calibrate */
    texts calib_t = t;
    if (calib_t.n > samples) calib_t.n = samples;
    bert8_model *m = cli_load_model(C, qa.dir, (int)qa.threads, qa.lora_task);
    bert8_tokenizer *tok = NULL;
    bert8_encoding *encs = NULL;
    bert8_batch *batches = NULL;
    int64_t nb = 0;
    char err[1024];
    rc = 1;
    if (!m) goto out;
    if (bert8_tokenizer_load(qa.dir, &tok, err, sizeof err)) {
        cli_error(C, "the calibration text needs the model's tokenizer: %s", err);
        goto out;
    }
    long maxlen = qa.max_length;
    if (maxlen > bert8_model_get_info(m)->max_seq_len) maxlen = bert8_model_get_info(m)->max_seq_len;
    if (make_batches(C, tok, &calib_t, maxlen, 16, &encs, &batches, &nb)) goto out;
    resolve_attention(m, &qa.qp.int8_attention);
    if (qa.max_drop || qa.min_cosine) {
        budget_run br = {.dir = qa.dir, .outdir = qa.outdir, .bo = qa.bo, .qp = qa.qp, .m = m,
                         .threads = (int)qa.threads, .calib = qa.calib, .calib_rows = calib_t.n};
        rc = qa.min_cosine ? quantize_cosine(&br, tok, batches, nb, &ev) : quantize_budget(&br, tok, batches, nb);
        budget_run_free(&br);
        goto out;
    }
    rc = quantize_once(&qa, m, batches, nb, t.n < samples ? t.n : samples);
out:
    free_batches(encs, batches, nb);
    bert8_tokenizer_free(tok);
    bert8_model_free(m);
    if (qa.min_cosine && edata) texts_free(&ev);
    texts_free(&t);
    return rc;
}
