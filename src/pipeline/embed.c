/* embed.c: sentence embeddings (a sentence-transformers folder's modules after the transformer:
 * every pooling mode, concatenated when several; Dense modules with their activation; Normalize;
 * prompts) and per-token hidden states. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/pipeline_internal.h"

bert8_embed_options bert8_default_embed_options(void) {
    bert8_embed_options o;
    memset(&o, 0, sizeof o);
    o.pooling = BERT8_POOLING_DEFAULT;
    o.normalize = -1;
    return o;
}

typedef struct emb_ctx {
    const bert8_pipeline *p;
    const int64_t *row_input; /* row -> input of the chunk; NULL: the tag is the input */
    int64_t base, H, width, dim;
    unsigned pool;
    bool normalize, skip_prompt;
    float *out;
    float *a, *b; /* scratch [the widest step] */
} emb_ctx;

/* Pools tokens [0, len) of x ([len][H]) into dst, the modes in B8_POOL_* order; tokens before
 * skip (the prompt, when the pooling leaves it out) count as masked, as sentence-transformers
 * zeroes their attention mask. */
static void pool_row(unsigned pool, const float *x, int64_t len, int64_t skip, int64_t H, float *dst) {
    for (unsigned bit = 1; bit <= B8_POOL_LAST; bit <<= 1) {
        if (!(pool & bit)) continue;
        if (bit == B8_POOL_CLS || bit == B8_POOL_LAST) {
            /* cls: the first unmasked token (0 when none); last: the last one (zeros when none) */
            int64_t t = bit == B8_POOL_CLS ? (skip < len ? skip : 0) : len - 1;
            if (bit == B8_POOL_LAST && t < skip) memset(dst, 0, (size_t)H * sizeof *dst);
            else memcpy(dst, x + t * H, (size_t)H * sizeof *dst);
        } else if (bit == B8_POOL_MAX) {
            for (int64_t d = 0; d < H; d++) dst[d] = -INFINITY;
            for (int64_t t = skip; t < len; t++)
                for (int64_t d = 0; d < H; d++) dst[d] = fmaxf(dst[d], x[t * H + d]);
        } else {
            double wsum = 0;
            for (int64_t d = 0; d < H; d++) dst[d] = 0;
            for (int64_t t = skip; t < len; t++) {
                const float w = bit == B8_POOL_WEIGHTED ? (float)(t + 1) : 1.0f;
                for (int64_t d = 0; d < H; d++) dst[d] += w * x[t * H + d];
                wsum += w;
            }
            wsum = fmax(wsum, 1e-9);
            const double div = bit == B8_POOL_MEAN_SQRT ? sqrt(wsum) : wsum;
            for (int64_t d = 0; d < H; d++) dst[d] = (float)(dst[d] / div);
        }
        dst += H;
    }
}

static float activate(b8_st_act act, float v) {
    switch (act) {
    case B8_ACT_IDENTITY: return v;
    case B8_ACT_TANH: return tanhf(v);
    case B8_ACT_RELU: return v > 0 ? v : 0;
    case B8_ACT_GELU: return (float)(0.5 * v * (1.0 + erf(v * 0.70710678118654752)));
    case B8_ACT_SIGMOID: return (float)(1.0 / (1.0 + exp(-(double)v)));
    case B8_ACT_SILU: return (float)(v / (1.0 + exp(-(double)v)));
    case B8_ACT_LEAKY_RELU: return v > 0 ? v : 0.01f * v;
    }
    return v;
}

/* y = act(W x + b) (+ x or + R x): one Dense module. */
static void dense(const b8_st_dense *m, const float *x, float *y) {
    for (int64_t o = 0; o < m->out; o++) {
        const float *w = m->w + o * m->in;
        double acc = m->b ? m->b[o] : 0;
        for (int64_t i = 0; i < m->in; i++) acc += (double)w[i] * x[i];
        y[o] = activate(m->act, (float)acc);
        if (m->residual) {
            if (!m->res) {
                y[o] += x[o];
            } else {
                const float *r = m->res + o * m->in;
                double ra = 0;
                for (int64_t i = 0; i < m->in; i++) ra += (double)r[i] * x[i];
                y[o] += (float)ra;
            }
        }
    }
}

/* sentence-transformers' Normalize: x / max(||x||, 1e-12) */
static void l2_normalize(float *x, int64_t n) {
    double ss = 0;
    for (int64_t d = 0; d < n; d++) ss += (double)x[d] * x[d];
    double inv = 1.0 / fmax(sqrt(ss), 1e-12);
    for (int64_t d = 0; d < n; d++) x[d] = (float)(x[d] * inv);
}

static bert8_status emb_row(void *ctx, const b8_rowout *o, b8_err *e) {
    (void)e;
    emb_ctx *c = ctx;
    const bert8_pipeline *p = c->p;
    const int64_t in = c->base + (c->row_input ? c->row_input[o->tag] : o->tag);
    float *dst = c->out + in * c->dim, *x = c->a, *y = c->b;
    pool_row(c->pool, o->hidden, o->len, c->skip_prompt ? o->prompt_len : 0, c->H, x);
    int64_t w = c->width;
    for (size_t s = 0; s < p->n_steps; s++) {
        const b8_st_step *st = &p->st.steps[s];
        if (st->normalize) {
            l2_normalize(x, w);
            continue;
        }
        dense(&st->dense, x, y);
        w = st->dense.out;
        float *t = x;
        x = y;
        y = t;
    }
    memcpy(dst, x, (size_t)c->dim * sizeof *dst); /* Matryoshka: the first dim values */
    if (c->normalize) l2_normalize(dst, c->dim);
    return BERT8_OK;
}

static bool any_pair(int64_t n, const bert8_text *pairs) {
    for (int64_t i = 0; pairs && i < n; i++)
        if (pairs[i].data) return true;
    return false;
}

/* The context of one embed call: options checked, pooling and widths resolved, scratch made. */
static bert8_status emb_setup(const bert8_pipeline *p, const bert8_embed_options *eo, float *out, emb_ctx *c, b8_err *e) {
    bert8_embed_options o = eo ? *eo : bert8_default_embed_options();
    memset(c, 0, sizeof *c);
    if (p->info.task != BERT8_TASK_EMBED && p->n_steps)
        return b8_fail(e, BERT8_ERR_INTERNAL, "a Dense chain on a model with a head");
    if ((unsigned)o.pooling > BERT8_POOLING_LAST_TOKEN || o.normalize < -1 || o.normalize > 1 || o.dimensions < 0)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "embed options: pooling %d, normalize %d or dimensions %lld out of range",
                       (int)o.pooling, o.normalize, (long long)o.dimensions);
    c->p = p;
    c->H = p->info.model->hidden_size;
    c->pool = o.pooling != BERT8_POOLING_DEFAULT ? b8_pool_bit(o.pooling) : p->pool;
    c->width = b8_pool_width(c->pool, c->H);
    int64_t final_w;
    bert8_status st = b8_pipe_chain_width(p, c->width, &final_w, e);
    if (st) return st;
    if (o.dimensions > final_w)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "embed options: dimensions %lld exceeds the embedding width %lld",
                       (long long)o.dimensions, (long long)final_w);
    c->dim = o.dimensions ? o.dimensions : final_w;
    c->normalize = o.normalize >= 0 ? o.normalize : p->info.normalize;
    c->skip_prompt = !p->info.include_prompt;
    c->out = out;
    int64_t widest = c->width;
    for (size_t s = 0; s < p->n_steps; s++)
        if (!p->st.steps[s].normalize && p->st.steps[s].dense.out > widest) widest = p->st.steps[s].dense.out;
    if (!(c->a = malloc(2 * (size_t)widest * sizeof *c->a))) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
    c->b = c->a + widest;
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
    emb_ctx c;
    char *prompt = NULL;
    int64_t prompt_len = 0;
    if ((st = emb_setup(p, eo, out, &c, &e))) return b8_pipe_report(st, &e, err, err_len);
    if ((st = b8_pipe_check_texts(p, n, texts, "text", false, &e)) ||
        (pairs && (st = b8_pipe_check_texts(p, n, pairs, "text_pair", true, &e))) ||
        (st = b8_pipe_check_nonempty(n, texts, pairs, NULL, &e)) ||
        (st = b8_pipe_prompt(p, eo, any_pair(n, pairs), &prompt, &e)) || (st = b8_pipe_prompt_len(p, prompt, &prompt_len, &e))) {
        free(c.a);
        free(prompt);
        return b8_pipe_report(st, &e, err, err_len);
    }
    bert8_encoding enc = {0};
    b8_row *rows = NULL;
    int64_t cap = 0;
    for (int64_t i0 = 0; i0 < n && !st; i0 += B8_PIPE_CHUNK) {
        int64_t nb = n - i0 < B8_PIPE_CHUNK ? n - i0 : B8_PIPE_CHUNK, nr = 0;
        c.base = i0;
        if ((st = b8_pipe_encode_ex(p, nb, texts + i0, pairs ? pairs + i0 : NULL, opt, prompt, false, &enc, &e)) ||
            (st = b8_pipe_rows(p, &enc, prompt_len, &rows, &nr, &cap, &e)))
            break;
        c.row_input = enc.row_input;
        st = b8_pipe_run(p, rows, nr, emb_row, &c, &e);
    }
    free(rows);
    free(prompt);
    free(c.a);
    bert8_encoding_free(&enc);
    return b8_pipe_report(st, &e, err, err_len);
}

bert8_status bert8_embed_ids(const bert8_pipeline *p, int64_t n, const bert8_token_ids *in,
                             const bert8_embed_options *eo, float *out, char *err, size_t err_len) {
    b8_err e;
    b8_err_clear(&e);
    if (!p || (n > 0 && !out))
        return b8_pipe_report(b8_fail(&e, BERT8_ERR_INVALID_ARG, "bert8_embed_ids: pipeline and out must not be NULL"), &e, err, err_len);
    emb_ctx c;
    b8_row *rows = NULL;
    bert8_status st = emb_setup(p, eo, out, &c, &e);
    if (!st && !(st = b8_pipe_id_rows(p, n, in, &rows, &e))) st = b8_pipe_run(p, rows, n, emb_row, &c, &e);
    free(rows);
    free(c.a);
    return b8_pipe_report(st, &e, err, err_len);
}

bert8_status bert8_pipeline_encode(const bert8_pipeline *p, int64_t n, const bert8_text *texts,
                                   const bert8_text *pairs, const bert8_run_options *opt,
                                   const bert8_embed_options *eo, bert8_encoding *enc, int64_t *prompt_len,
                                   char *err, size_t err_len) {
    b8_err e;
    b8_err_clear(&e);
    if (prompt_len) *prompt_len = 0;
    if (!p || !enc)
        return b8_pipe_report(b8_fail(&e, BERT8_ERR_INVALID_ARG, "bert8_pipeline_encode: pipeline and enc must not be NULL"), &e, err, err_len);
    char *prompt = NULL;
    int64_t plen = 0;
    bert8_status st;
    if (!(st = b8_pipe_check_texts(p, n, texts, "text", false, &e)) &&
        !(st = pairs ? b8_pipe_check_texts(p, n, pairs, "text_pair", true, &e) : BERT8_OK) &&
        !(st = eo ? b8_pipe_prompt(p, eo, any_pair(n, pairs), &prompt, &e) : BERT8_OK) &&
        !(st = b8_pipe_prompt_len(p, prompt, &plen, &e)) &&
        !(st = b8_pipe_encode_ex(p, n, texts, pairs, opt, prompt, true, enc, &e)) && enc->rows != n)
        st = b8_fail(&e, BERT8_ERR_INTERNAL, "%lld texts gave %lld rows", (long long)n, (long long)enc->rows);
    free(prompt);
    if (!st && prompt_len) *prompt_len = plen;
    return b8_pipe_report(st, &e, err, err_len);
}

/* ---- per-token hidden states ---------------------------------------------------------------- */

typedef struct tok_priv {
    int64_t *offsets;
    float *data;
} tok_priv;

typedef struct tok_ctx {
    const int64_t *row_input; /* NULL: the tag is the input */
    int64_t base, H;
    const int64_t *offsets;
    float *data;
} tok_ctx;

static bert8_status tok_row(void *ctx, const b8_rowout *o, b8_err *e) {
    (void)e;
    tok_ctx *c = ctx;
    const int64_t i = c->base + (c->row_input ? c->row_input[o->tag] : o->tag);
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
    if (!st) st = b8_pipe_check_nonempty(n, texts, NULL, NULL, &e);
    if (st) return b8_pipe_report(st, &e, err, err_len);
    const int64_t H = p->info.model->hidden_size;
    tok_priv *pv = calloc(1, sizeof *pv);
    bert8_encoding enc = {0};
    b8_row *rows = NULL;
    int64_t cap = 0, cap_rows_total = 0;
    if (!pv || !(pv->offsets = calloc((size_t)n + 1, sizeof *pv->offsets))) {
        st = b8_fail(&e, BERT8_ERR_NOMEM, "out of memory");
        goto fail;
    }
    tok_ctx c = {NULL, 0, H, pv->offsets, NULL};
    for (int64_t i0 = 0; i0 < n && !st; i0 += B8_PIPE_CHUNK) {
        int64_t nb = n - i0 < B8_PIPE_CHUNK ? n - i0 : B8_PIPE_CHUNK, nr = 0;
        c.base = i0;
        if ((st = b8_pipe_encode(p, nb, texts + i0, NULL, opt, &enc, &e)) ||
            (st = b8_pipe_rows(p, &enc, 0, &rows, &nr, &cap, &e)))
            break;
        c.row_input = enc.row_input;
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

bert8_status bert8_embed_tokens_ids(const bert8_pipeline *p, int64_t n, const bert8_token_ids *in,
                                    bert8_token_embeddings *out, char *err, size_t err_len) {
    b8_err e;
    b8_err_clear(&e);
    if (!p || !out)
        return b8_pipe_report(b8_fail(&e, BERT8_ERR_INVALID_ARG, "bert8_embed_tokens_ids: pipeline and out must not be NULL"), &e, err, err_len);
    memset(out, 0, sizeof *out);
    const int64_t H = p->info.model->hidden_size;
    b8_row *rows = NULL;
    tok_priv *pv = NULL;
    size_t need = 0;
    bert8_status st = b8_pipe_id_rows(p, n, in, &rows, &e);
    if (!st && (!(pv = calloc(1, sizeof *pv)) || !(pv->offsets = calloc((size_t)n + 1, sizeof *pv->offsets))))
        st = b8_fail(&e, BERT8_ERR_NOMEM, "out of memory");
    if (!st) {
        for (int64_t i = 0; i < n; i++) pv->offsets[i + 1] = pv->offsets[i] + in[i].len;
        if (!b8_mul_ok((size_t)pv->offsets[n], (size_t)H * sizeof(float), &need) || !(pv->data = malloc(need ? need : 1)))
            st = b8_fail(&e, BERT8_ERR_NOMEM, "out of memory for %lld token embeddings", (long long)pv->offsets[n]);
    }
    tok_ctx c = {NULL, 0, H, pv ? pv->offsets : NULL, pv ? pv->data : NULL};
    if (!st) st = b8_pipe_run(p, rows, n, tok_row, &c, &e);
    free(rows);
    if (st) {
        if (pv) {
            free(pv->offsets);
            free(pv->data);
            free(pv);
        }
        return b8_pipe_report(st, &e, err, err_len);
    }
    *out = (bert8_token_embeddings){n, H, pv->offsets, pv->data, pv};
    return BERT8_OK;
}
