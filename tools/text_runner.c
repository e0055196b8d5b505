/* text_runner.c: a model folder opened for the text commands (see text_runner.h). */
#include "text_runner.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

bert8_pipeline_params text_runner_pipeline_params(const text_runner_opts *o, int64_t max_tokens) {
    bert8_pipeline_params pp = bert8_default_pipeline_params();
    pp.max_batch_size = o->batch > 0 ? o->batch : 32;
    pp.max_batch_tokens = pp.max_batch_size * max_tokens; /* --batch alone bounds a pass */
    pp.max_length = o->max_length;
    pp.pooling = o->pooling;
    pp.normalize = o->normalize;
    if (o->max_text_bytes > 0) pp.max_text_bytes = o->max_text_bytes;
    return pp;
}

bool text_runner_open(text_runner *r, const char *cmd, const char *dir, bool with_model, const text_runner_opts *o) {
    memset(r, 0, sizeof *r);
    r->cmd = cmd;
    if (!dir) {
        cli_error(cmd, "missing MODEL_DIR");
        return false;
    }
    bert8_status st = bert8_tokenizer_load(dir, &r->tok, r->err, sizeof r->err);
    if (st) {
        cli_error(cmd, "loading the tokenizer of %s: %s (%s)", dir, r->err, bert8_status_string(st));
        return false;
    }
    r->max_tokens = bert8_tokenizer_model_max_length(r->tok);
    if (!with_model) {
        if (o->threads > 0) bert8_set_threads(o->threads);
        return true;
    }
    if (!(r->model = cli_load_model(cmd, dir, o->threads, o->lora_task))) goto fail;
    r->info = bert8_model_get_info(r->model);
    if (r->max_tokens <= 0 || r->info->max_seq_len < r->max_tokens) r->max_tokens = r->info->max_seq_len;
    if (o->max_length > r->max_tokens) {
        cli_error(cmd, "--max-length %lld exceeds the model's limit of %lld tokens", (long long)o->max_length,
                  (long long)r->max_tokens);
        goto fail;
    }
    bert8_pipeline_params pp = text_runner_pipeline_params(o, r->max_tokens);
    if ((st = bert8_pipeline_wrap(r->model, r->tok, dir, &pp, &r->pl, r->err, sizeof r->err))) {
        cli_error(cmd, "%s (%s)", r->err, bert8_status_string(st));
        goto fail;
    }
    return true;
fail:
    text_runner_close(r);
    return false;
}

void text_runner_close(text_runner *r) {
    if (!r) return;
    bert8_encoding_free(&r->enc);
    bert8_pipeline_free(r->pl);
    bert8_model_free(r->model);
    bert8_tokenizer_free(r->tok);
    r->pl = NULL;
    r->model = NULL;
    r->tok = NULL;
}

bert8_status text_runner_encode(text_runner *r, int64_t n, const char *const *texts, const char *const *pairs,
                                const bert8_encode_params *p) {
    r->err[0] = 0;
    bert8_status st = bert8_encode(r->tok, n, texts, pairs, p, &r->enc, r->err, sizeof r->err);
    if (st && !r->err[0]) snprintf(r->err, sizeof r->err, "%s", bert8_status_string(st));
    return st;
}

int64_t text_softmax(const float *logits, int64_t n, float *p) {
    int64_t arg = 0;
    for (int64_t i = 1; i < n; i++)
        if (logits[i] > logits[arg]) arg = i;
    float mx = logits[arg];
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += exp((double)logits[i] - mx);
    for (int64_t i = 0; i < n; i++) p[i] = (float)(exp((double)logits[i] - mx) / sum);
    return arg;
}
