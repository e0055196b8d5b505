/* embed.c: sentence embeddings (CLS / mean / max pooling over the real tokens, optional L2
 * normalisation as sentence-transformers' Normalize) and per-token hidden states. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/pipeline_internal.h"

bert8_embed_options bert8_default_embed_options(void) {
    bert8_embed_options o = {BERT8_POOLING_DEFAULT, -1, 0};
    return o;
}

typedef struct emb_ctx {
    const bert8_encoding *enc;
    int64_t base, H, dim;
    bert8_pooling pool;
    bool normalize;
    float *out;
} emb_ctx;

static bert8_status emb_row(void *ctx, const b8_rowout *o, b8_err *e) {
    (void)e;
    emb_ctx *c = ctx;
    const int64_t H = c->H, D = c->dim;
    float *dst = c->out + (c->base + c->enc->row_input[o->tag]) * D;
    const float *x = o->hidden;
    if (c->pool == BERT8_POOLING_CLS) {
        memcpy(dst, x, (size_t)D * sizeof(float));
    } else {
        const bool mx = c->pool == BERT8_POOLING_MAX;
        for (int64_t d = 0; d < D; d++) dst[d] = mx ? -INFINITY : 0.0f;
        for (int64_t t = 0; t < o->len; t++)
            for (int64_t d = 0; d < D; d++) dst[d] = mx ? fmaxf(dst[d], x[t * H + d]) : dst[d] + x[t * H + d];
        if (!mx)
            for (int64_t d = 0; d < D; d++) dst[d] /= (float)(o->len ? o->len : 1);
    }
    if (c->normalize) {
        double ss = 0;
        for (int64_t d = 0; d < D; d++) ss += (double)dst[d] * dst[d];
        /* sentence-transformers' Normalize: x / max(||x||, 1e-12) */
        double inv = 1.0 / fmax(sqrt(ss), 1e-12);
        for (int64_t d = 0; d < D; d++) dst[d] = (float)(dst[d] * inv);
    }
    return BERT8_OK;
}

bert8_status bert8_embed(const bert8_pipeline *p, int64_t n, const bert8_text *texts, const bert8_text *pairs,
                         const bert8_run_options *opt, const bert8_embed_options *eo, float *out, char *err,
                         size_t err_len) {
    b8_err e;
    b8_err_clear(&e);
    bert8_status st;
    if (!p || (n > 0 && !out))
        return b8_pipe_report(b8_fail(&e, BERT8_ERR_INVALID_ARG, "bert8_embed: pipeline and out must not be NULL"), &e, err, err_len);
    bert8_embed_options o = eo ? *eo : bert8_default_embed_options();
    if ((unsigned)o.pooling > BERT8_POOLING_MAX || o.normalize < -1 || o.normalize > 1 || o.dimensions < 0 ||
        o.dimensions > p->info.dim) {
        st = b8_fail(&e, BERT8_ERR_INVALID_ARG,
                     "embed options: pooling %d, normalize %d or dimensions %lld (at most %lld) out of range",
                     (int)o.pooling, o.normalize, (long long)o.dimensions, (long long)p->info.dim);
        return b8_pipe_report(st, &e, err, err_len);
    }
    if ((st = b8_pipe_check_texts(p, n, texts, "text", false, &e)) ||
        (pairs && (st = b8_pipe_check_texts(p, n, pairs, "text_pair", true, &e))))
        return b8_pipe_report(st, &e, err, err_len);
    bert8_encoding enc = {0};
    b8_row *rows = NULL;
    int64_t cap = 0;
    emb_ctx c = {&enc, 0, p->info.dim, o.dimensions ? o.dimensions : p->info.dim,
                 o.pooling != BERT8_POOLING_DEFAULT ? o.pooling : p->info.pooling,
                 o.normalize >= 0 ? o.normalize : p->info.normalize, out};
    for (int64_t i0 = 0; i0 < n && !st; i0 += B8_PIPE_CHUNK) {
        int64_t nb = n - i0 < B8_PIPE_CHUNK ? n - i0 : B8_PIPE_CHUNK, nr = 0;
        c.base = i0;
        if ((st = b8_pipe_encode(p, nb, texts + i0, pairs ? pairs + i0 : NULL, opt, &enc, &e)) ||
            (st = b8_pipe_rows(p, &enc, &rows, &nr, &cap, &e)))
            break;
        st = b8_pipe_run(p, rows, nr, emb_row, &c, &e);
    }
    free(rows);
    bert8_encoding_free(&enc);
    return b8_pipe_report(st, &e, err, err_len);
}

/* ---- per-token hidden states ---------------------------------------------------------------- */

typedef struct tok_priv {
    int64_t *offsets;
    float *data;
} tok_priv;

typedef struct tok_ctx {
    const bert8_encoding *enc;
    int64_t base, H;
    const int64_t *offsets;
    float *data;
} tok_ctx;

static bert8_status tok_row(void *ctx, const b8_rowout *o, b8_err *e) {
    (void)e;
    tok_ctx *c = ctx;
    const int64_t i = c->base + c->enc->row_input[o->tag];
    memcpy(c->data + c->offsets[i] * c->H, o->hidden, (size_t)(o->len * c->H) * sizeof(float));
    return BERT8_OK;
}

void bert8_token_embeddings_free(bert8_token_embeddings *t) {
    if (!t) return;
    tok_priv *pv = t->priv;
    if (pv) {
        free(pv->offsets);
        free(pv->data);
        free(pv);
    }
    memset(t, 0, sizeof *t);
}

bert8_status bert8_embed_tokens(const bert8_pipeline *p, int64_t n, const bert8_text *texts,
                                const bert8_run_options *opt, bert8_token_embeddings *out, char *err,
                                size_t err_len) {
    b8_err e;
    b8_err_clear(&e);
    if (!p || !out)
        return b8_pipe_report(b8_fail(&e, BERT8_ERR_INVALID_ARG, "bert8_embed_tokens: pipeline and out must not be NULL"), &e, err, err_len);
    memset(out, 0, sizeof *out);
    bert8_status st = b8_pipe_check_texts(p, n, texts, "text", false, &e);
    if (st) return b8_pipe_report(st, &e, err, err_len);
    const int64_t H = p->info.dim;
    tok_priv *pv = calloc(1, sizeof *pv);
    bert8_encoding enc = {0};
    b8_row *rows = NULL;
    int64_t cap = 0, cap_rows_total = 0;
    if (!pv || !(pv->offsets = calloc((size_t)n + 1, sizeof *pv->offsets))) {
        st = b8_fail(&e, BERT8_ERR_NOMEM, "out of memory");
        goto fail;
    }
    tok_ctx c = {&enc, 0, H, pv->offsets, NULL};
    for (int64_t i0 = 0; i0 < n && !st; i0 += B8_PIPE_CHUNK) {
        int64_t nb = n - i0 < B8_PIPE_CHUNK ? n - i0 : B8_PIPE_CHUNK, nr = 0;
        c.base = i0;
        if ((st = b8_pipe_encode(p, nb, texts + i0, NULL, opt, &enc, &e)) ||
            (st = b8_pipe_rows(p, &enc, &rows, &nr, &cap, &e)))
            break;
        /* one row per text: its length is the text's token count */
        for (int64_t r = 0; r < enc.rows; r++) pv->offsets[i0 + enc.row_input[r] + 1] = enc.lengths[r];
        for (int64_t i = i0; i < i0 + nb; i++) pv->offsets[i + 1] += pv->offsets[i];
        size_t need;
        if (!b8_mul_ok((size_t)pv->offsets[i0 + nb], (size_t)H * sizeof(float), &need)) {
            st = b8_fail(&e, BERT8_ERR_TOO_LARGE, "token embeddings overflow");
            break;
        }
        if (pv->offsets[i0 + nb] > cap_rows_total) {
            float *d = realloc(pv->data, need ? need : 1);
            if (!d) {
                st = b8_fail(&e, BERT8_ERR_NOMEM, "out of memory for %lld token embeddings",
                             (long long)pv->offsets[i0 + nb]);
                break;
            }
            pv->data = d;
            cap_rows_total = pv->offsets[i0 + nb];
        }
        c.data = pv->data;
        st = b8_pipe_run(p, rows, nr, tok_row, &c, &e);
    }
    free(rows);
    bert8_encoding_free(&enc);
    if (st) goto fail;
    out->n = n;
    out->dim = H;
    out->offsets = pv->offsets;
    out->data = pv->data;
    out->priv = pv;
    return BERT8_OK;
fail:
    if (pv) {
        free(pv->offsets);
        free(pv->data);
        free(pv);
    }
    return b8_pipe_report(st, &e, err, err_len);
}
