/* classify.c: sequence classification and cross-encoder reranking. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/pipeline_internal.h"

typedef struct cls_ctx {
    const int64_t *row_input; /* NULL: the tag is the input */
    int64_t base;   /* input index of the chunk's first text */
    int64_t L;
    float *out;     /* [inputs][L] raw logits */
} cls_ctx;

static bert8_status cls_row(void *ctx, const b8_rowout *o, b8_err *e) {
    cls_ctx *c = ctx;
    if (!o->seq_logits) return b8_fail(e, BERT8_ERR_INTERNAL, "the model gave no sequence logits");
    memcpy(c->out + (c->base + (c->row_input ? c->row_input[o->tag] : o->tag)) * c->L, o->seq_logits, (size_t)c->L * sizeof(float));
    return BERT8_OK;
}

/* Raw logits [n][L] of texts (and pairs), in chunks. */
static bert8_status logits(const bert8_pipeline *p, int64_t n, const bert8_text *texts, const bert8_text *pairs,
                           const bert8_run_options *o, float *out, b8_err *e) {
    if (p->info.task != BERT8_TASK_CLASSIFY)
        return b8_fail(e, BERT8_ERR_UNSUPPORTED, "the model is not a sequence classifier (architecture \"%s\")",
                       p->info.model->architecture);
    bert8_status st;
    if ((st = b8_pipe_check_texts(p, n, texts, "text", false, e)) ||
        (pairs && (st = b8_pipe_check_texts(p, n, pairs, "text_pair", true, e))))
        return st;
    bert8_encoding enc = {0};
    b8_row *rows = NULL;
    int64_t cap = 0;
    cls_ctx c = {NULL, 0, p->info.num_labels, out};
    for (int64_t i0 = 0; i0 < n && !st; i0 += B8_PIPE_CHUNK) {
        int64_t nb = n - i0 < B8_PIPE_CHUNK ? n - i0 : B8_PIPE_CHUNK, nr = 0;
        c.base = i0;
        if ((st = b8_pipe_encode(p, nb, texts + i0, pairs ? pairs + i0 : NULL, o, &enc, e)) ||
            (st = b8_pipe_rows(p, &enc, 0, &rows, &nr, &cap, e)))
            break;
        c.row_input = enc.row_input;
        st = b8_pipe_run(p, rows, nr, cls_row, &c, e);
    }
    free(rows);
    bert8_encoding_free(&enc);
    return st;
}

static float sigmoid(float x) { return (float)(1.0 / (1.0 + exp(-(double)x))); }

/* Raw logits of pre-tokenized inputs. */
static bert8_status logits_ids(const bert8_pipeline *p, int64_t n, const bert8_token_ids *in, float *out, b8_err *e) {
    if (p->info.task != BERT8_TASK_CLASSIFY)
        return b8_fail(e, BERT8_ERR_UNSUPPORTED, "the model is not a sequence classifier (architecture \"%s\")",
                       p->info.model->architecture);
    b8_row *rows = NULL;
    cls_ctx c = {NULL, 0, p->info.num_labels, out};
    bert8_status st = b8_pipe_id_rows(p, n, in, &rows, e);
    if (!st) st = b8_pipe_run(p, rows, n, cls_row, &c, e);
    free(rows);
    return st;
}

static void apply_score(const bert8_pipeline *p, int64_t n, bert8_score_fn fn, float *scores) {
    const int64_t L = p->info.num_labels;
    if (fn == BERT8_SCORE_AUTO) fn = L == 1 ? BERT8_SCORE_SIGMOID : BERT8_SCORE_SOFTMAX;
    for (int64_t i = 0; i < n; i++) {
        float *s = scores + i * L;
        if (fn == BERT8_SCORE_SOFTMAX) b8_softmax_d(s, L, s);
        else if (fn == BERT8_SCORE_SIGMOID)
            for (int64_t j = 0; j < L; j++) s[j] = sigmoid(s[j]);
    }
}

bert8_status bert8_classify(const bert8_pipeline *p, int64_t n, const bert8_text *texts, const bert8_text *pairs,
                            const bert8_run_options *opt, bert8_score_fn fn, float *scores, char *err,
                            size_t err_len) {
    b8_err e;
    b8_err_clear(&e);
    if (!p || (n > 0 && !scores)) return b8_pipe_report(b8_fail(&e, BERT8_ERR_INVALID_ARG, "bert8_classify: pipeline and scores must not be NULL"), &e, err, err_len);
    if ((unsigned)fn > BERT8_SCORE_NONE)
        return b8_pipe_report(b8_fail(&e, BERT8_ERR_INVALID_ARG, "unknown score function %d", (int)fn), &e, err, err_len);
    bert8_status st = logits(p, n, texts, pairs, opt, scores, &e);
    if (st) return b8_pipe_report(st, &e, err, err_len);
    apply_score(p, n, fn, scores);
    return BERT8_OK;
}

bert8_status bert8_classify_ids(const bert8_pipeline *p, int64_t n, const bert8_token_ids *in,
                                bert8_score_fn fn, float *scores, char *err, size_t err_len) {
    b8_err e;
    b8_err_clear(&e);
    if (!p || (n > 0 && !scores)) return b8_pipe_report(b8_fail(&e, BERT8_ERR_INVALID_ARG, "bert8_classify_ids: pipeline and scores must not be NULL"), &e, err, err_len);
    if ((unsigned)fn > BERT8_SCORE_NONE)
        return b8_pipe_report(b8_fail(&e, BERT8_ERR_INVALID_ARG, "unknown score function %d", (int)fn), &e, err, err_len);
    bert8_status st = logits_ids(p, n, in, scores, &e);
    if (st) return b8_pipe_report(st, &e, err, err_len);
    apply_score(p, n, fn, scores);
    return BERT8_OK;
}

typedef struct ranked {
    float score;
    int64_t index;
} ranked;

static int by_score_desc(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

bert8_status bert8_rerank(const bert8_pipeline *p, bert8_text query, int64_t n, const bert8_text *texts,
                          const bert8_run_options *opt, int raw_scores, float *scores, int64_t *order, char *err,
                          size_t err_len) {
    b8_err e;
    b8_err_clear(&e);
    if (!p || (n > 0 && !scores))
        return b8_pipe_report(b8_fail(&e, BERT8_ERR_INVALID_ARG, "bert8_rerank: pipeline and scores must not be NULL"), &e, err, err_len);
    bert8_status st = b8_pipe_check_texts(p, 1, &query, "query", false, &e);
    if (!st && n > 0 && texts) st = b8_pipe_check_nonempty(n, texts, NULL, &query, &e);
    if (st) return b8_pipe_report(st, &e, err, err_len);
    const int64_t L = p->info.num_labels;
    float *lg = malloc((size_t)(n > 0 ? n : 1) * (size_t)(L > 0 ? L : 1) * sizeof(float));
    bert8_text *qs = malloc((size_t)(n > 0 ? n : 1) * sizeof *qs);
    ranked *rk = order ? malloc((size_t)(n > 0 ? n : 1) * sizeof *rk) : NULL;
    if (!lg || !qs || (order && !rk)) {
        st = b8_fail(&e, BERT8_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int64_t i = 0; i < n; i++) qs[i] = query;
    if ((st = logits(p, n, qs, texts, opt, lg, &e))) goto out;
    for (int64_t i = 0; i < n; i++) {
        const float *l = lg + i * L;
        if (raw_scores) scores[i] = l[L - 1];
        else if (L == 1) scores[i] = sigmoid(l[0]);
        else {
            float *pr = malloc((size_t)L * sizeof(float));
            if (!pr) {
                st = b8_fail(&e, BERT8_ERR_NOMEM, "out of memory");
                goto out;
            }
            b8_softmax_d(l, L, pr);
            scores[i] = pr[L - 1];
            free(pr);
        }
    }
    if (order) {
        for (int64_t i = 0; i < n; i++) rk[i] = (ranked){scores[i], i};
        qsort(rk, (size_t)n, sizeof *rk, by_score_desc);
        for (int64_t i = 0; i < n; i++) order[i] = rk[i].index;
    }
out:
    free(lg);
    free(qs);
    free(rk);
    return b8_pipe_report(st, &e, err, err_len);
}
