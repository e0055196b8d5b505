/* qa.c: extractive question answering: (question, context) pairs in overflow windows of the
 * context (only_second truncation, windows overlapping by doc_stride), the best span over all
 * windows with start <= end, both in the context, at most max_answer_len tokens. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/pipeline_internal.h"

bert8_qa_options bert8_default_qa_options(void) {
    bert8_qa_options o = {30, -1, 0, 0};
    return o;
}

typedef struct qa_span {
    bool found;
    int64_t start, end; /* bytes into the context */
    double score;
} qa_span;

typedef struct qa_rowref {
    const bert8_encoding *enc;
    int64_t row;
    int64_t input; /* index within the call */
} qa_rowref;

typedef struct qa_ctx {
    const qa_rowref *refs;
    qa_span *best; /* [inputs of the call] */
    int64_t max_answer;
    bool logits;
} qa_ctx;

static double log_sum_exp_ctx(const float *x, const int32_t *seq, int64_t T) {
    double mx = -INFINITY, sum = 0;
    for (int64_t k = 0; k < T; k++)
        if (seq[k] == 1 && x[k] > mx) mx = x[k];
    for (int64_t k = 0; k < T; k++)
        if (seq[k] == 1) sum += exp(x[k] - mx);
    return mx + log(sum);
}

/* The best span of one window. With probabilities, score = softmax(start over the window's
 * context tokens)[s] x softmax(end over them)[e] (transformers' pipeline), else the sum of the
 * two logits (the SQuAD reference post-processing). Keeps the higher score in *best. */
static void scan(const bert8_encoding *enc, int64_t row, int64_t T, const float *sl, const float *el,
                 int64_t max_answer_len, bool prob, qa_span *best) {
    const int32_t *seq = enc->sequence_ids + row * enc->seq;
    const int64_t *off = enc->offsets + 2 * row * enc->seq;
    bool any = false;
    for (int64_t k = 0; k < T && !any; k++) any = seq[k] == 1;
    if (!any) return;
    double ls = prob ? log_sum_exp_ctx(sl, seq, T) : 0, le = prob ? log_sum_exp_ctx(el, seq, T) : 0;
    for (int64_t s = 0; s < T; s++) {
        if (seq[s] != 1) continue;
        for (int64_t e = s; e < T && e - s < max_answer_len && seq[e] == 1; e++) {
            double sc = prob ? exp(((double)sl[s] - ls) + ((double)el[e] - le)) : (double)sl[s] + (double)el[e];
            if (best->found && !(sc > best->score)) continue;
            best->found = true;
            best->score = sc;
            best->start = off[2 * s];
            best->end = off[2 * e + 1] > off[2 * s] ? off[2 * e + 1] : off[2 * s];
        }
    }
}

static bert8_status qa_row(void *ctx, const b8_rowout *o, b8_err *e) {
    qa_ctx *c = ctx;
    if (!o->start || !o->end) return b8_fail(e, BERT8_ERR_INTERNAL, "the model gave no start/end logits");
    const qa_rowref *r = &c->refs[o->tag];
    scan(r->enc, r->row, o->len, o->start, o->end, c->max_answer, !c->logits, &c->best[r->input]);
    return BERT8_OK;
}

/* Tokens of a question alone (no special tokens), or -1. */
static int64_t question_tokens(const bert8_tokenizer *t, bert8_text q) {
    bert8_encode_params p = bert8_default_encode_params();
    p.add_special_tokens = 0;
    bert8_encoding e = {0};
    int64_t n = -1;
    if (!bert8_encode_texts(t, 1, &q, NULL, &p, &e, NULL, 0)) n = e.lengths[0];
    bert8_encoding_free(&e);
    return n;
}

/* Encodes one question/context pair; a question that leaves less room than the stride gets the
 * stride halved to fit, so that long questions still get windows that advance. */
static bert8_status encode_one(const bert8_pipeline *p, bert8_text q, bert8_text c, const bert8_encode_params *ep,
                               int64_t input, bert8_encoding *enc, b8_err *e) {
    char msg[1024];
    bert8_status st = bert8_encode_texts(p->tok, 1, &q, &c, ep, enc, msg, sizeof msg);
    if (!st) return BERT8_OK;
    /* room: what a window holds besides the question and up to 4 template tokens */
    int64_t qt = question_tokens(p->tok, q), room = ep->max_length - qt - 4;
    if (qt < 0) return b8_fail(e, st, "input %lld: %s", (long long)input, msg);
    if (room < 1)
        return b8_fail(e, BERT8_ERR_TOO_LARGE,
                       "input %lld: the question has %lld tokens and leaves no room for the context in max_length %lld",
                       (long long)input, (long long)qt, (long long)ep->max_length);
    if (ep->stride < room / 2) return b8_fail(e, st, "input %lld: %s", (long long)input, msg);
    bert8_encode_params p2 = *ep;
    p2.stride = room / 2;
    if ((st = bert8_encode_texts(p->tok, 1, &q, &c, &p2, enc, msg, sizeof msg)))
        return b8_fail(e, st, "input %lld: %s", (long long)input, msg);
    return BERT8_OK;
}

bert8_status bert8_qa(const bert8_pipeline *p, int64_t n, const bert8_text *questions, const bert8_text *contexts,
                      const bert8_qa_options *qo, bert8_qa_answer *out, char *err, size_t err_len) {
    b8_err e;
    b8_err_clear(&e);
    if (!p || (n > 0 && !out))
        return b8_pipe_report(b8_fail(&e, BERT8_ERR_INVALID_ARG, "bert8_qa: pipeline and out must not be NULL"), &e, err, err_len);
    if (p->info.task != BERT8_TASK_QA)
        return b8_pipe_report(b8_fail(&e, BERT8_ERR_UNSUPPORTED, "the model is not a question answering model (architecture \"%s\")",
                                      p->info.model->architecture), &e, err, err_len);
    bert8_qa_options o = qo ? *qo : bert8_default_qa_options();
    const int64_t limit = p->info.max_length;
    int64_t max_len = o.max_length > 0 ? o.max_length : (limit < 384 ? limit : 384);
    bert8_status st = BERT8_OK;
    if (o.max_length > limit || max_len < 8)
        st = b8_fail(&e, BERT8_ERR_INVALID_ARG, "max_length %lld must be in [8, %lld]", (long long)max_len, (long long)limit);
    int64_t stride = o.doc_stride >= 0 ? o.doc_stride : (max_len / 3 < 128 ? max_len / 3 : 128);
    if (!st && stride >= max_len / 2)
        st = b8_fail(&e, BERT8_ERR_INVALID_ARG, "doc_stride %lld must be below half of max_length %lld", (long long)stride,
                     (long long)max_len);
    if (!st && o.max_answer_len < 1)
        st = b8_fail(&e, BERT8_ERR_INVALID_ARG, "max_answer_len %lld must be positive", (long long)o.max_answer_len);
    if (st || (st = b8_pipe_check_texts(p, n, questions, "question", false, &e)) ||
        (st = b8_pipe_check_texts(p, n, contexts, "context", false, &e)))
        return b8_pipe_report(st, &e, err, err_len);
    bert8_encode_params ep = bert8_default_encode_params();
    ep.truncation = BERT8_TRUNCATE_ONLY_SECOND;
    ep.max_length = max_len;
    ep.return_overflow = 1;
    ep.stride = stride;
    const int64_t C = B8_PIPE_CHUNK;
    bert8_encoding *encs = calloc((size_t)C + 1, sizeof *encs); /* [0]: the chunk; [1 + i]: one input */
    qa_span *best = calloc((size_t)(n > 0 ? n : 1), sizeof *best);
    qa_rowref *refs = NULL;
    b8_row *rows = NULL;
    int64_t cap = 0, cap_refs = 0;
    if (!encs || !best) {
        st = b8_fail(&e, BERT8_ERR_NOMEM, "out of memory");
        goto out;
    }
    qa_ctx c = {NULL, best, o.max_answer_len, o.score_logits != 0};
    for (int64_t i0 = 0; i0 < n && !st; i0 += C) {
        const int64_t nb = n - i0 < C ? n - i0 : C;
        char msg[1024];
        /* the whole chunk at once, else one input at a time (a long question needs its own stride) */
        int n_enc = 1;
        if (bert8_encode_texts(p->tok, nb, questions + i0, contexts + i0, &ep, &encs[0], msg, sizeof msg)) {
            n_enc = 0;
            for (int64_t i = 0; i < nb && !st; i++)
                st = encode_one(p, questions[i0 + i], contexts[i0 + i], &ep, i0 + i, &encs[1 + i], &e);
            if (st) break;
        }
        int64_t nr = 0;
        for (int k = 0; k < (n_enc ? 1 : (int)nb); k++) {
            const bert8_encoding *en = &encs[n_enc ? 0 : 1 + k];
            int64_t first = nr;
            if ((st = b8_pipe_rows(p, en, 0, &rows, &nr, &cap, &e))) break;
            if (nr > cap_refs) {
                qa_rowref *nrf = realloc(refs, (size_t)cap * sizeof *nrf);
                if (!nrf) {
                    st = b8_fail(&e, BERT8_ERR_NOMEM, "out of memory");
                    break;
                }
                refs = nrf;
                cap_refs = cap;
            }
            for (int64_t r = first; r < nr; r++) {
                const int64_t row = rows[r].tag;
                refs[r] = (qa_rowref){en, row, i0 + (n_enc ? en->row_input[row] : k)};
                rows[r].tag = r;
                if (en->row_window[row] >= p->info.params.max_windows) {
                    st = b8_fail(&e, BERT8_ERR_TOO_LARGE, "input %lld needs more than %lld windows of %lld tokens",
                                 (long long)refs[r].input, (long long)p->info.params.max_windows, (long long)max_len);
                    break;
                }
            }
            if (st) break;
        }
        if (st) break;
        c.refs = refs;
        st = b8_pipe_run(p, rows, nr, qa_row, &c, &e);
    }
    for (int64_t i = 0; i < n && !st; i++) {
        bert8_qa_answer *a = &out[i];
        memset(a, 0, sizeof *a);
        if (!best[i].found) continue;
        const bert8_text *ctx = &contexts[i];
        int64_t b0 = best[i].start, b1 = best[i].end;
        b8_trim_span(ctx->data, ctx->len, &b0, &b1);
        b8_chars ch;
        b8_chars_init(&ch, ctx->data, ctx->len);
        a->found = 1;
        a->score = best[i].score;
        a->start = b0;
        a->end = b1;
        a->start_char = b8_chars_at(&ch, b0);
        a->end_char = b8_chars_at(&ch, b1);
    }
out:
    if (encs)
        for (int64_t i = 0; i <= C; i++) bert8_encoding_free(&encs[i]);
    free(encs);
    free(best);
    free(refs);
    free(rows);
    return b8_pipe_report(st, &e, err, err_len);
}
