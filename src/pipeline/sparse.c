/* sparse.c: SPLADE sparse embeddings, as sentence-transformers' SparseEncoder (MLMTransformer +
 * SpladePooling, max strategy, ReLU) and text-embeddings-inference's --pooling splade compute
 * them: the masked-LM head's vocabulary logits at every token of a text, log(1 + relu(x)),
 * the maximum over the tokens; the non-zero entries in vocabulary order. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/pipeline_internal.h"

/* Token rows per bert8_mlm_logits call: bounds the [rows][vocab] logits buffer. */
#define SPLADE_ROWS 32

typedef struct sp_text {
    int64_t n;
    int32_t *idx;
    float *val;
} sp_text;

typedef struct sp_ctx {
    const int64_t *row_input; /* a row's input (an encoding's row_input), or NULL: the tag is it */
    bert8_session *s;
    int64_t V, H;
    float *logits; /* [SPLADE_ROWS][V] */
    float *acc;    /* [V] the running maximum */
    sp_text *out;  /* [rows] */
} sp_ctx;

static bert8_status sp_row(void *ctx, const b8_rowout *o, b8_err *e) {
    sp_ctx *c = ctx;
    const int64_t V = c->V, H = c->H;
    float *acc = c->acc;
    memset(acc, 0, (size_t)V * sizeof(float)); /* log1p(relu(x)) >= 0: zero is the identity */
    for (int64_t t0 = 0; t0 < o->len; t0 += SPLADE_ROWS) {
        const int64_t nt = o->len - t0 < SPLADE_ROWS ? o->len - t0 : SPLADE_ROWS;
        bert8_status st = bert8_mlm_logits(c->s, o->hidden + t0 * H, nt, c->logits);
        if (st) return b8_fail(e, st, "%s", bert8_session_last_error(c->s));
        for (int64_t t = 0; t < nt; t++) {
            const float *l = c->logits + t * V;
            for (int64_t j = 0; j < V; j++)
                if (l[j] > 0.0f) {
                    const float w = log1pf(l[j]);
                    if (w > acc[j]) acc[j] = w;
                }
        }
    }
    int64_t nz = 0;
    for (int64_t j = 0; j < V; j++) nz += acc[j] > 0.0f;
    sp_text *r = &c->out[c->row_input ? c->row_input[o->tag] : o->tag];
    r->idx = malloc((size_t)(nz ? nz : 1) * sizeof(int32_t));
    r->val = malloc((size_t)(nz ? nz : 1) * sizeof(float));
    if (!r->idx || !r->val) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
    for (int64_t j = 0; j < V; j++)
        if (acc[j] > 0.0f) {
            r->idx[r->n] = (int32_t)j;
            r->val[r->n++] = acc[j];
        }
    return BERT8_OK;
}

typedef struct sp_priv {
    int64_t *offsets;
    int32_t *indices;
    float *values;
} sp_priv;

void bert8_sparse_embeddings_free(bert8_sparse_embeddings *r) {
    if (!r) return;
    sp_priv *pv = r->priv;
    if (pv) {
        free(pv->offsets);
        free(pv->indices);
        free(pv->values);
        free(pv);
    }
    memset(r, 0, sizeof *r);
}

/* texts (encoded here) or in (pre-tokenized), one of them NULL. */
static bert8_status embed_sparse(const bert8_pipeline *p, int64_t n, const bert8_text *texts,
                                 const bert8_token_ids *in, const bert8_run_options *o, bert8_sparse_embeddings *out,
                                 b8_err *e) {
    const bert8_model_info *mi = bert8_model_get_info(p->model);
    if (!mi->has_mlm_head)
        return b8_fail(e, BERT8_ERR_UNSUPPORTED,
                       "SPLADE pooling needs a masked-LM head, and the model has none (architecture \"%s\")",
                       mi->architecture);
    bert8_status st = texts ? b8_pipe_check_texts(p, n, texts, "text", false, e) : BERT8_OK;
    if (!st && texts) st = b8_pipe_check_nonempty(n, texts, NULL, NULL, e);
    if (st) return st;
    if (n < 0 || (n > 0 && !texts && !in)) return b8_fail(e, BERT8_ERR_INVALID_ARG, "no inputs for %lld texts", (long long)n);
    const int64_t V = mi->vocab_size;
    sp_priv *pv = calloc(1, sizeof *pv);
    sp_text *per = calloc((size_t)(n > 0 ? n : 1), sizeof *per);
    float *logits = malloc((size_t)(SPLADE_ROWS * V) * sizeof(float)), *acc = malloc((size_t)V * sizeof(float));
    bert8_session *s = NULL;
    bert8_encoding enc = {0};
    b8_row *rows = NULL;
    int64_t nr = 0, cap = 0;
    if (!pv || !per || !logits || !acc || !(pv->offsets = calloc((size_t)n + 1, sizeof(int64_t)))) {
        st = b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((st = bert8_session_create(p->model, &s))) {
        b8_fail(e, st, "out of memory creating a session");
        goto done;
    }
    for (int64_t i0 = 0; i0 < n && !st; i0 += B8_PIPE_CHUNK) {
        const int64_t nb = n - i0 < B8_PIPE_CHUNK ? n - i0 : B8_PIPE_CHUNK;
        nr = 0;
        if (in) { /* pre-tokenized inputs: one call over all of them */
            sp_ctx c = {NULL, s, V, mi->hidden_size, logits, acc, per};
            if (!(st = b8_pipe_id_rows(p, n, in, &rows, e))) st = b8_pipe_run(p, rows, n, sp_row, &c, e);
            break;
        }
        if ((st = b8_pipe_encode(p, nb, texts + i0, NULL, o, &enc, e)) ||
            (st = b8_pipe_rows(p, &enc, 0, &rows, &nr, &cap, e)))
            break;
        sp_ctx c = {enc.row_input, s, V, mi->hidden_size, logits, acc, per + i0};
        st = b8_pipe_run(p, rows, nr, sp_row, &c, e);
    }
    if (st) goto done;
    for (int64_t i = 0; i < n; i++) pv->offsets[i + 1] = pv->offsets[i] + per[i].n;
    const int64_t total = pv->offsets[n];
    if (!(pv->indices = malloc((size_t)(total ? total : 1) * sizeof(int32_t))) ||
        !(pv->values = malloc((size_t)(total ? total : 1) * sizeof(float)))) {
        st = b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int64_t i = 0; i < n; i++) {
        memcpy(pv->indices + pv->offsets[i], per[i].idx, (size_t)per[i].n * sizeof(int32_t));
        memcpy(pv->values + pv->offsets[i], per[i].val, (size_t)per[i].n * sizeof(float));
    }
done:
    for (int64_t i = 0; per && i < n; i++) {
        free(per[i].idx);
        free(per[i].val);
    }
    free(per);
    free(logits);
    free(acc);
    free(rows);
    bert8_encoding_free(&enc);
    bert8_session_free(s);
    out->priv = pv;
    if (st) {
        bert8_sparse_embeddings_free(out);
        return st;
    }
    out->n = n;
    out->dim = V;
    out->offsets = pv->offsets;
    out->indices = pv->indices;
    out->values = pv->values;
    return BERT8_OK;
}

bert8_status bert8_embed_sparse(const bert8_pipeline *p, int64_t n, const bert8_text *texts,
                                const bert8_run_options *opt, bert8_sparse_embeddings *out, char *err, size_t err_len) {
    b8_err e;
    b8_err_clear(&e);
    if (out) memset(out, 0, sizeof *out);
    if (!p || !out || (n > 0 && !texts))
        return b8_pipe_report(
            b8_fail(&e, BERT8_ERR_INVALID_ARG, "bert8_embed_sparse: pipeline, texts and out must not be NULL"), &e,
            err, err_len);
    return b8_pipe_report(embed_sparse(p, n, texts, NULL, opt, out, &e), &e, err, err_len);
}

bert8_status bert8_embed_sparse_ids(const bert8_pipeline *p, int64_t n, const bert8_token_ids *in,
                                    bert8_sparse_embeddings *out, char *err, size_t err_len) {
    b8_err e;
    b8_err_clear(&e);
    if (out) memset(out, 0, sizeof *out);
    if (!p || !out || (n > 0 && !in))
        return b8_pipe_report(
            b8_fail(&e, BERT8_ERR_INVALID_ARG, "bert8_embed_sparse_ids: pipeline, inputs and out must not be NULL"), &e,
            err, err_len);
    return b8_pipe_report(embed_sparse(p, n, NULL, in, NULL, out, &e), &e, err, err_len);
}
