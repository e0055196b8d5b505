/* text_runner.c: model + tokenizer on text through the public API (see text_runner.h). */
#include "text_runner.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

bool text_runner_open(text_runner *r, const char *cmd, const char *dir, bool with_model,
                      int threads, int64_t batch) {
    memset(r, 0, sizeof *r);
    r->cmd = cmd;
    r->batch = batch > 0 ? batch : 32;
    if (!dir) {
        cli_error(cmd, "missing MODEL_DIR");
        return false;
    }
    bert8_status st = bert8_tokenizer_load(dir, &r->tok, r->err, sizeof r->err);
    if (st) {
        cli_error(cmd, "loading the tokenizer of %s: %s (%s)", dir, r->err,
                  bert8_status_string(st));
        return false;
    }
    r->max_tokens = bert8_tokenizer_model_max_length(r->tok);
    if (!with_model) {
        if (threads > 0) bert8_set_threads(threads);
        return true;
    }
    if (!(r->model = cli_load_model(cmd, dir, threads))) goto fail;
    r->info = bert8_model_get_info(r->model);
    int64_t tv = bert8_tokenizer_vocab_size(r->tok);
    if (tv > r->info->vocab_size) {
        cli_error(cmd,
                  "the tokenizer of %s has %lld tokens but the model's vocabulary has only %lld",
                  dir, (long long)tv, (long long)r->info->vocab_size);
        goto fail;
    }
    /* XLM-R positions start after the padding index, so pad_token_id + 1 of them are unusable. */
    int64_t pos = r->info->max_position_embeddings;
    if (r->info->arch == BERT8_ARCH_XLMR) pos -= r->info->pad_token_id + 1;
    if (pos < r->max_tokens || r->max_tokens <= 0) r->max_tokens = pos;
    r->use_types = r->info->type_vocab_size > 1 && r->info->arch != BERT8_ARCH_DISTILBERT;
    if (bert8_session_create(r->model, &r->sess)) {
        cli_error(cmd, "out of memory creating a session");
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
    bert8_session_free(r->sess);
    bert8_model_free(r->model);
    bert8_tokenizer_free(r->tok);
    r->sess = NULL;
    r->model = NULL;
    r->tok = NULL;
}

bert8_status text_runner_encode(text_runner *r, int64_t n, const char *const *texts,
                                const char *const *pairs, const bert8_encode_params *p) {
    r->err[0] = 0;
    bert8_status st = bert8_encode(r->tok, n, texts, pairs, p, &r->enc, r->err, sizeof r->err);
    if (st && !r->err[0]) snprintf(r->err, sizeof r->err, "%s", bert8_status_string(st));
    return st;
}

/* Tokens of a question alone (no special tokens), or -1. */
static int64_t question_tokens(const text_runner *r, const char *q) {
    bert8_encode_params p = bert8_default_encode_params();
    p.add_special_tokens = 0;
    bert8_encoding e = {0};
    int64_t n = -1;
    if (!bert8_encode(r->tok, 1, &q, NULL, &p, &e, NULL, 0)) n = e.lengths[0];
    bert8_encoding_free(&e);
    return n;
}

bert8_status text_runner_encode_qa(text_runner *r, int64_t n, const char *const *questions,
                                   const char *const *contexts, const bert8_encode_params *p) {
    bert8_status st = text_runner_encode(r, n, questions, contexts, p);
    if (!st || n != 1) return st;
    /* room: what a window holds besides the question and up to 4 template tokens */
    int64_t q = question_tokens(r, questions[0]), room = p->max_length - q - 4;
    if (q < 0) return st;
    if (room < 1) {
        snprintf(
            r->err, sizeof r->err,
            "the question has %lld tokens and leaves no room for the context in max_length %lld",
            (long long)q, (long long)p->max_length);
        return BERT8_ERR_TOO_LARGE;
    }
    if (p->stride < room / 2) return st;
    bert8_encode_params p2 = *p;
    p2.stride = room / 2;
    return text_runner_encode(r, n, questions, contexts, &p2);
}

bert8_status text_runner_forward(text_runner *r, text_chunk_fn fn, void *ctx) {
    for (int64_t row0 = 0; row0 < r->enc.rows; row0 += r->batch) {
        int64_t n = r->enc.rows - row0 < r->batch ? r->enc.rows - row0 : r->batch;
        bert8_batch b = bert8_encoding_batch(&r->enc, row0, n);
        if (!r->use_types) b.token_type_ids = NULL;
        bert8_outputs o;
        bert8_status st = bert8_forward(r->sess, &b, &o);
        if (st) {
            snprintf(r->err, sizeof r->err, "%s (%s)", bert8_session_last_error(r->sess),
                     bert8_status_string(st));
            return st;
        }
        if (fn(ctx, &o, row0, n)) {
            snprintf(r->err, sizeof r->err, "processing the model outputs failed");
            return BERT8_ERR_INTERNAL;
        }
    }
    return BERT8_OK;
}

int64_t text_softmax(const float *logits, int64_t n, float *p) {
    int64_t arg = 0;
    for (int64_t i = 1; i < n; i++)
        if (logits[i] > logits[arg]) arg = i;
    float mx = logits[arg];
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += exp((double)logits[i] - mx);
    for (int64_t i = 0; i < n; i++)
        p[i] = (float)(exp((double)logits[i] - mx) / sum);
    return arg;
}

static double log_sum_exp_ctx(const float *x, const int32_t *seq, int64_t T) {
    double mx = -INFINITY, sum = 0;
    for (int64_t k = 0; k < T; k++)
        if (seq[k] == 1 && x[k] > mx) mx = x[k];
    for (int64_t k = 0; k < T; k++)
        if (seq[k] == 1) sum += exp(x[k] - mx);
    return mx + log(sum);
}

void text_qa_scan(const bert8_encoding *enc, int64_t row, const float *sl, const float *el,
                  int64_t max_answer_len, bool prob, text_qa_span *best) {
    const int64_t T = enc->seq;
    const int32_t *seq = enc->sequence_ids + row * T;
    const int64_t *off = enc->offsets + 2 * row * T;
    bool any = false;
    for (int64_t k = 0; k < T && !any; k++)
        any = seq[k] == 1;
    if (!any) return;
    double ls = prob ? log_sum_exp_ctx(sl, seq, T) : 0, le = prob ? log_sum_exp_ctx(el, seq, T) : 0;
    for (int64_t s = 0; s < T; s++) {
        if (seq[s] != 1) continue;
        for (int64_t e = s; e < T && e - s < max_answer_len && seq[e] == 1; e++) {
            double sc = prob ? exp(((double)sl[s] - ls) + ((double)el[e] - le))
                             : (double)sl[s] + (double)el[e];
            if (best->found && !(sc > best->score)) continue;
            best->found = true;
            best->score = sc;
            best->start = off[2 * s];
            best->end = off[2 * e + 1] > off[2 * s] ? off[2 * e + 1] : off[2 * s];
            best->tok_start = s;
            best->tok_end = e;
            best->row = row;
        }
    }
}
