/* route_classify.c: the routes of classifiers and rerankers: /predict (labels and scores, sorted)
 * and /rerank (a query against texts, the texts ranked). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "routes.h"

/* One predict input: "a" | ["a"] | ["a", "b"]. */
static int predict_sequence(srv_call *c, const cJSON *v, int64_t i, srv_response *r) {
    if (cJSON_IsString(v)) return rq_text(v, &c->texts[i], "inputs", i, r, 0);
    int m = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 0;
    if (m != 1 && m != 2) {
        srv_error(r, E_VALIDATION, 0,
                  "`inputs` must be a string, a pair of strings [string, string] or a batch of mixed strings and pairs "
                  "[[string], [string, string], ...]");
        return -1;
    }
    if (rq_text(cJSON_GetArrayItem(v, 0), &c->texts[i], "inputs", i, r, 0)) return -1;
    if (m == 2 && rq_text(cJSON_GetArrayItem(v, 1), &c->pairs[i], "inputs", i, r, 0)) return -1;
    return 0;
}

int srv_predict_parse(srv_server *s, srv_call *c, const cJSON *root, srv_response *r) {
    int truncate = s->cfg.auto_truncate;
    bert8_side side = BERT8_SIDE_RIGHT;
    if (rq_bool(root, "truncate", &truncate, r, 0) || rq_side(root, &side, r) ||
        rq_bool(root, "raw_scores", &c->raw_scores, r, 0))
        return -1;
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(root, "inputs");
    const char *shape_err = "`inputs` must be a string, a pair of strings [string, string] or a batch of mixed "
                            "strings and pairs [[string], [string, string], ...]";
    if (cJSON_IsString(in)) {
        c->single = 1;
        if (rq_alloc_inputs(c, 1, 1, r) || predict_sequence(c, in, 0, r)) return -1;
    } else if (cJSON_IsArray(in) && cJSON_GetArraySize(in) > 0 && cJSON_IsString(cJSON_GetArrayItem(in, 0))) {
        c->single = 1; /* ["a"] or ["a", "b"]: one input */
        if (rq_alloc_inputs(c, 1, 1, r) || predict_sequence(c, in, 0, r)) return -1;
    } else if (cJSON_IsArray(in) && cJSON_GetArraySize(in) > 0) {
        int64_t n = cJSON_GetArraySize(in);
        if (rq_check_batch(s, c, n, "inputs", r) || rq_alloc_inputs(c, n, 1, r)) return -1;
        int64_t i = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, in) {
            if (!cJSON_IsArray(e)) {
                srv_error(r, E_VALIDATION, 0, "%s", shape_err);
                return -1;
            }
            if (predict_sequence(c, e, i++, r)) return -1;
        }
    } else {
        srv_error(r, E_VALIDATION, 0, "%s", shape_err);
        return -1;
    }
    srv_metrics_count(s->metrics, "te_request_count", "method", c->single ? "single" : "batch");
    if (rq_need_model(s, c, s->mtype != MT_EMBEDDING, "Model is not a classifier model", r)) return -1;
    if (rq_acquire(s, c, r) || rq_tokenize(s, c, truncate, side, 0, r)) return -1;
    rq_job_common(s, c, K_CLASSIFY, truncate, side);
    c->job.score_fn = c->raw_scores ? BERT8_SCORE_NONE : BERT8_SCORE_AUTO;
    return rq_alloc_out(c, s->info->num_labels, r);
}

int srv_rerank_parse(srv_server *s, srv_call *c, const cJSON *root, srv_response *r) {
    int truncate = s->cfg.auto_truncate;
    bert8_side side = BERT8_SIDE_RIGHT;
    if (rq_bool(root, "truncate", &truncate, r, 0) || rq_side(root, &side, r) ||
        rq_bool(root, "raw_scores", &c->raw_scores, r, 0) || rq_bool(root, "return_text", &c->return_text, r, 0))
        return -1;
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(root, "query");
    const cJSON *texts = cJSON_GetObjectItemCaseSensitive(root, "texts");
    bert8_text query;
    if (rq_text(q, &query, "query", -1, r, 0)) return -1;
    if (!cJSON_IsArray(texts)) {
        srv_error(r, E_VALIDATION, 0, "`texts` must be a list of strings");
        return -1;
    }
    int64_t n = cJSON_GetArraySize(texts);
    if (n == 0) {
        srv_error(r, E_EMPTY, 0, "`texts` cannot be empty");
        rq_fail_metric(s, "validation");
        return -1;
    }
    if (rq_need_model(s, c, s->mtype == MT_RERANKER, "model is not a re-ranker model", r)) return -1;
    if (rq_check_batch(s, c, n, "texts", r) || rq_alloc_inputs(c, n, 1, r)) return -1;
    int64_t i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, texts) {
        c->texts[i] = query;
        if (rq_text(e, &c->pairs[i], "texts", i, r, 0)) return -1;
        i++;
    }
    srv_metrics_count(s->metrics, "te_request_count", "method", "batch");
    if (rq_acquire(s, c, r) || rq_tokenize(s, c, truncate, side, 0, r)) return -1;
    rq_job_common(s, c, K_CLASSIFY, truncate, side);
    /* one label: sigmoid(logit), as bert8_rerank; raw: the logit */
    c->job.score_fn = c->raw_scores ? BERT8_SCORE_NONE : BERT8_SCORE_SIGMOID;
    return rq_alloc_out(c, s->info->num_labels, r);
}
typedef struct ranked {
    float score;
    int64_t index;
} ranked;

/* TEI sorts ascending and reverses: descending scores, ties in descending index order. */
static int by_score(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return x->index > y->index ? -1 : x->index < y->index;
}

static int sort_scores(const float *v, int64_t n, ranked *rk, srv_response *r) {
    for (int64_t i = 0; i < n; i++) {
        if (isnan(v[i])) {
            srv_error(r, E_BACKEND, 0, "score is NaN");
            return -1;
        }
        rk[i] = (ranked){v[i], i};
    }
    qsort(rk, (size_t)n, sizeof *rk, by_score);
    return 0;
}

void srv_rank_build(srv_server *s, srv_call *c, srv_response *r) {
    const srv_job *j = &c->job;
    jbuf b = {0};
    int64_t w = j->width;
    int64_t m = c->route == R_PREDICT ? w : c->n;
    ranked *rk = malloc((size_t)(m > 0 ? m : 1) * sizeof *rk);
    float *col = c->route == R_RERANK ? malloc((size_t)(m > 0 ? m : 1) * sizeof *col) : NULL;
    if (!rk || (c->route == R_RERANK && !col)) {
        free(rk);
        free(col);
        srv_error(r, E_BACKEND, 0, "out of memory");
        return;
    }
    if (c->route == R_RERANK) {
        for (int64_t i = 0; i < c->n; i++) col[i] = j->out[i * w + (w - 1)];
        int bad = sort_scores(col, c->n, rk, r);
        jb_putc(&b, '[');
        for (int64_t k = 0; k < c->n && !bad; k++) {
            int64_t i = rk[k].index;
            jb_printf(&b, "%s{\"index\":%lld,", k ? "," : "", (long long)i);
            if (c->return_text) {
                jb_puts(&b, "\"text\":");
                jb_str(&b, c->pairs[i].data, c->pairs[i].len);
                jb_putc(&b, ',');
            }
            jb_puts(&b, "\"score\":");
            jb_float(&b, rk[k].score);
            jb_putc(&b, '}');
        }
        jb_putc(&b, ']');
    } else {
        if (!c->single) jb_putc(&b, '[');
        for (int64_t i = 0; i < c->n; i++) {
            if (sort_scores(j->out + i * w, w, rk, r)) break;
            jb_puts(&b, i ? ",[" : "[");
            for (int64_t k = 0; k < w; k++) {
                jb_puts(&b, k ? ",{\"score\":" : "{\"score\":");
                jb_float(&b, rk[k].score);
                jb_puts(&b, ",\"label\":");
                jb_cstr(&b, bert8_pipeline_label(s->pipe, rk[k].index));
                jb_putc(&b, '}');
            }
            jb_putc(&b, ']');
        }
        if (!c->single) jb_putc(&b, ']');
    }
    free(rk);
    free(col);
    if (r->body) { /* a NaN score */
        jb_free(&b);
        return;
    }
    rq_json_response(r, &b);
}
