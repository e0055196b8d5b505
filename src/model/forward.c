/* forward.c: the FP32 forward pass (embeddings, post-LN encoder layers, task heads), with
 * the same maths as transformers v4.31. */
#include "model/session.h"
#include "kernels/rowops/rowops.h"
#include "kernels/attention/attention.h"
#include "kernels/quantize/quantize.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Largest request one call accepts: keeps every buffer size far from overflow. */
#define B8_MAX_TOKENS ((int64_t)1 << 22)

bert8_status b8_buf_reserve(b8_buf *buf, size_t count, size_t size, b8_err *e) {
    size_t bytes;
    if (!b8_mul_ok(count, size, &bytes)) return b8_fail(e, BERT8_ERR_TOO_LARGE, "buffer size overflows");
    if (bytes <= buf->cap) return BERT8_OK;
    void *p = b8_malloc_aligned(bytes);
    if (!p) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory allocating %zu bytes", bytes);
    b8_free_aligned(buf->p);
    buf->p = p;
    buf->cap = bytes;
    return BERT8_OK;
}

bert8_status bert8_session_create(const bert8_model *model, bert8_session **out) {
    if (!out) return BERT8_ERR_INVALID_ARG;
    *out = NULL;
    if (!model) return BERT8_ERR_INVALID_ARG;
    bert8_session *s = calloc(1, sizeof *s);
    if (!s) return BERT8_ERR_NOMEM;
    s->model = model;
    *out = s;
    return BERT8_OK;
}

void bert8_session_free(bert8_session *s) {
    if (!s) return;
    b8_buf *bufs[] = {&s->xq, &s->hq, &s->rowscale, &s->rowscale2, &s->x, &s->qkv, &s->scores, &s->ctx, &s->ffn, &s->first, &s->pooled,
                      &s->tmp, &s->logits, &s->start, &s->end, &s->ids};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) b8_free_aligned(bufs[i]->p);
    free(s);
}

const char *bert8_session_last_error(const bert8_session *s) { return s ? s->err.msg : "no session"; }

static inline double prof_start(const bert8_session *s) { return s->profiling ? omp_get_wtime() : 0.0; }
/* Charges the time since *t to op and restarts the clock. */
static inline void prof_mark(bert8_session *s, bert8_op op, double *t) {
    if (!s->profiling) return;
    double n = omp_get_wtime();
    s->prof[op] += n - *t;
    *t = n;
}

const char *bert8_op_name(bert8_op op) {
    static const char *const names[BERT8_OP_COUNT] = {"embed", "qkv", "attention", "attn_out", "ffn_in",
                                                      "ffn_out", "layernorm", "quantize", "head"};
    return (unsigned)op < BERT8_OP_COUNT ? names[op] : "?";
}

void bert8_session_set_profiling(bert8_session *s, int on) {
    if (!s) return;
    s->profiling = on;
    if (on) memset(s->prof, 0, sizeof s->prof);
}

void bert8_session_get_profile(const bert8_session *s, double seconds[BERT8_OP_COUNT]) {
    for (int i = 0; i < BERT8_OP_COUNT; i++) seconds[i] = s ? s->prof[i] : 0.0;
}

/* Work below this many elements runs on the calling thread: waking the pool costs more. */
#define B8_PAR_MIN ((int64_t)1 << 15)

/* Row-parallel application of a row kernel over the pool. */
static void layernorm_par(float *x, int64_t rows, int64_t n, const float *g, const float *b, float eps) {
    b8_layernorm_fn ln = b8_layernorm_rows_best();
#pragma omp parallel for schedule(static) if (rows * n >= B8_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) ln(x + r * n, x + r * n, 1, n, g, b, eps);
}

/* LayerNorm in place; when the next Linear runs INT8 with static scales, the same pass also
 * writes that Linear's smoothed int8 input (qg/qb fold 1/(s*a) into gamma/beta). */
static void layernorm_next(bert8_session *s, int64_t rows, int64_t n, const float *g, const float *b,
                           float eps, const float *qg, const float *qb) {
    if (!qg) {
        layernorm_par(s->x.p, rows, n, g, b, eps);
        return;
    }
    b8_ln_quant p = {qg, qb, g, b, s->x.p, n, eps};
    b8_layernorm_quantize(s->x.p, n, rows, n, &p, s->xq.p, n);
}

/* int8 input of an INT8 Linear from an fp32 activation: static (one scale, folded into mul)
 * or dynamic (per-row scale of the smoothed row, written to scales). */
static void quantize_input(const b8_qlinear *q, bert8_scheme scheme, const float *x, int64_t rows,
                           int8_t *out, float *scales) {
    if (scheme == BERT8_SCHEME_STATIC)
        b8_quantize_static(x, q->k, rows, q->k, q->in_mul, 1.0f, out, q->k);
    else
        b8_quantize_dynamic(x, q->k, rows, q->k, q->in_mul, out, q->k, scales);
}

static b8_act qact(const b8_config *c) {
    switch (c->act) {
    case B8_HIDDEN_GELU_TANH: return B8_ACT_GELU_TANH;
    case B8_HIDDEN_RELU: return B8_ACT_RELU;
    default: return B8_ACT_GELU;
    }
}

static bert8_status check_batch(const bert8_model *m, const bert8_batch *bt, b8_err *e) {
    const b8_config *c = &m->cfg;
    if (!bt || !bt->input_ids) return b8_fail(e, BERT8_ERR_INVALID_ARG, "batch has no input_ids");
    if (bt->batch <= 0 || bt->seq <= 0)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "batch shape %lld x %lld must be positive",
                       (long long)bt->batch, (long long)bt->seq);
    if (bt->batch > B8_MAX_TOKENS || bt->seq > B8_MAX_TOKENS || bt->batch * bt->seq > B8_MAX_TOKENS)
        return b8_fail(e, BERT8_ERR_TOO_LARGE, "batch of %lld x %lld tokens exceeds the limit of %lld tokens",
                       (long long)bt->batch, (long long)bt->seq, (long long)B8_MAX_TOKENS);
    int64_t max_seq = c->max_position_embeddings;
    if (c->arch == BERT8_ARCH_XLMR) max_seq = c->max_position_embeddings - c->pad_token_id - 1;
    if (bt->seq > max_seq)
        return b8_fail(e, BERT8_ERR_TOO_LARGE, "sequence length %lld exceeds the model's limit of %lld positions",
                       (long long)bt->seq, (long long)max_seq);
    int64_t n = bt->batch * bt->seq;
    for (int64_t i = 0; i < n; i++) {
        if (bt->input_ids[i] < 0 || bt->input_ids[i] >= c->vocab_size)
            return b8_fail(e, BERT8_ERR_INVALID_ARG, "input_ids[%lld][%lld] = %d is outside the vocabulary [0, %lld)",
                           (long long)(i / bt->seq), (long long)(i % bt->seq), bt->input_ids[i],
                           (long long)c->vocab_size);
        if (bt->attention_mask && bt->attention_mask[i] != 0 && bt->attention_mask[i] != 1)
            return b8_fail(e, BERT8_ERR_INVALID_ARG, "attention_mask[%lld][%lld] = %d is not 0 or 1",
                           (long long)(i / bt->seq), (long long)(i % bt->seq), bt->attention_mask[i]);
        if (bt->token_type_ids && c->arch != BERT8_ARCH_DISTILBERT &&
            (bt->token_type_ids[i] < 0 || bt->token_type_ids[i] >= c->type_vocab_size))
            return b8_fail(e, BERT8_ERR_INVALID_ARG,
                           "token_type_ids[%lld][%lld] = %d is outside [0, %lld)", (long long)(i / bt->seq),
                           (long long)(i % bt->seq), bt->token_type_ids[i], (long long)c->type_vocab_size);
    }
    return BERT8_OK;
}

static void embed(bert8_session *s, const bert8_batch *bt) {
    const bert8_model *m = s->model;
    float *x = s->x.p;
    const b8_config *c = &m->cfg;
    const int64_t H = c->hidden_size, B = bt->batch, T = bt->seq;
    const int32_t pad = (int32_t)c->pad_token_id;
    const bool xlmr = c->arch == BERT8_ARCH_XLMR;
#pragma omp parallel for schedule(static) if (B * T * H >= B8_PAR_MIN)
    for (int64_t b = 0; b < B; b++) {
        int64_t count = 0; /* XLM-R: running count of non-pad ids */
        for (int64_t t = 0; t < T; t++) {
            int64_t i = b * T + t;
            int32_t id = bt->input_ids[i];
            int64_t pos = t;
            if (xlmr) {
                if (id != pad) count++;
                pos = id != pad ? count + pad : pad;
            }
            const float *we = m->word_emb + (int64_t)id * H;
            const float *pe = m->pos_emb + pos * H;
            float *xr = x + i * H;
            if (m->type_emb) {
                int32_t tt = bt->token_type_ids ? bt->token_type_ids[i] : 0;
                const float *te = m->type_emb + (int64_t)tt * H;
                for (int64_t h = 0; h < H; h++) xr[h] = (we[h] + te[h]) + pe[h];
            } else {
                for (int64_t h = 0; h < H; h++) xr[h] = we[h] + pe[h];
            }
        }
    }
    const b8_layer *l0 = c->num_layers > 0 ? &m->layers[0] : NULL;
    layernorm_next(s, B * T, H, m->emb_ln_g, m->emb_ln_b, c->layer_norm_eps, l0 ? l0->qkv_qg : NULL,
                   l0 ? l0->qkv_qb : NULL);
}

static bert8_status attention(bert8_session *s, const bert8_batch *bt, const b8_layer *ly, int64_t layer) {
    const bert8_model *m = s->model;
    const b8_config *c = &m->cfg;
    const int64_t H = c->hidden_size, A = c->num_heads, d = H / A, B = bt->batch, T = bt->seq;
    float *x = s->x.p, *qkv = s->qkv.p, *ctx = s->ctx.p;
    b8_err *e = &s->err;
    bert8_status st;
    double t = prof_start(s);
    if (s->observe) s->observe(s->observe_ctx, layer, B8_SITE_QKV, x, B * T, H, bt->attention_mask);
    if (ly->qkv_q) {
        const b8_qlinear *q = ly->qkv_q;
        bool dyn = m->scheme == BERT8_SCHEME_DYNAMIC;
        if (dyn) quantize_input(q, m->scheme, x, B * T, s->xq.p, s->rowscale.p);
        prof_mark(s, BERT8_OP_QUANTIZE, &t);
        b8_qepilogue ep = {dyn ? s->rowscale.p : &q->a_scale, dyn, q->bias, B8_ACT_NONE, NULL, 0,
                           qkv, 3 * H, NULL, NULL};
        if ((st = b8_qgemm(s->xq.p, H, B * T, q->packed, &ep, e))) return st;
    } else if ((st = b8_sgemm(ly->qkv, x, H, B * T, qkv, 3 * H, B8_POST_NONE, false, e))) {
        return st;
    }
    prof_mark(s, BERT8_OP_QKV, &t);
    const float alpha = 1.0f / sqrtf((float)d);
    const b8_mask_mode mode = c->arch == BERT8_ARCH_DISTILBERT ? B8_MASK_REPLACE_MIN : B8_MASK_ADD_MIN;
    /* one fused pass per (sequence, head); each thread has its own scratch */
    b8_attention_fn att = b8_attention_head_best();
    const size_t per = b8_attention_scratch_floats(T, d);
    const int nt = omp_get_max_threads();
    if ((st = b8_buf_reserve(&s->scores, (size_t)nt, per * sizeof(float), e))) return st;
    const int32_t *mask = bt->attention_mask;
#pragma omp parallel for schedule(static) if (B * A * T * T * d >= B8_PAR_MIN)
    for (int64_t r = 0; r < B * A; r++) {
        const int64_t b = r / A, h = r % A;
        const float *base = qkv + b * T * 3 * H + h * d;
        float *scratch = (float *)s->scores.p + (size_t)omp_get_thread_num() * per;
        att(base, base + H, base + 2 * H, 3 * H, T, d, alpha, mask ? mask + b * T : NULL, mode,
            ctx + b * T * H + h * d, H, scratch);
    }
    prof_mark(s, BERT8_OP_ATTENTION, &t);
    if (s->observe) s->observe(s->observe_ctx, layer, B8_SITE_ATTN_OUT, ctx, B * T, H, bt->attention_mask);
    /* x = LN(x + ctx Wo^T + bo): the residual is the matmul's accumulate post-op. */
    if (ly->attn_out_q) {
        const b8_qlinear *q = ly->attn_out_q;
        bool dyn = m->scheme == BERT8_SCHEME_DYNAMIC;
        quantize_input(q, m->scheme, ctx, B * T, s->xq.p, s->rowscale.p);
        prof_mark(s, BERT8_OP_QUANTIZE, &t);
        b8_qepilogue ep = {dyn ? s->rowscale.p : &q->a_scale, dyn, q->bias, B8_ACT_NONE, x, H,
                           x, H, NULL, NULL};
        if ((st = b8_qgemm(s->xq.p, H, B * T, q->packed, &ep, e))) return st;
    } else if ((st = b8_sgemm(ly->attn_out.f32, ctx, H, B * T, x, H, B8_POST_NONE, true, e))) {
        return st;
    }
    prof_mark(s, BERT8_OP_ATTN_OUT, &t);
    layernorm_next(s, B * T, H, ly->ln1_g, ly->ln1_b, c->layer_norm_eps, ly->ffn_qg, ly->ffn_qb);
    prof_mark(s, BERT8_OP_NORM, &t);
    return BERT8_OK;
}

static b8_post hidden_post(const b8_config *c) {
    switch (c->act) {
    case B8_HIDDEN_GELU_TANH: return B8_POST_GELU_TANH;
    case B8_HIDDEN_RELU: return B8_POST_RELU;
    default: return B8_POST_GELU;
    }
}

static bert8_status ffn(bert8_session *s, const bert8_batch *bt, const b8_layer *ly, int64_t layer) {
    const bert8_model *m = s->model;
    const b8_config *c = &m->cfg;
    const int64_t H = c->hidden_size, I = c->intermediate_size, M = bt->batch * bt->seq;
    const bool dyn = m->scheme == BERT8_SCHEME_DYNAMIC;
    float *x = s->x.p, *h = s->ffn.p;
    b8_err *e = &s->err;
    bert8_status st;
    double t = prof_start(s);
    if (s->observe) s->observe(s->observe_ctx, layer, B8_SITE_FFN_IN, x, M, H, bt->attention_mask);
    /* static INT8 end to end: FFN-in -> GELU -> int8 -> FFN-out never leaves int8 */
    bool fused_h = ly->ffn_in_q && ly->ffn_out_q && !dyn;
    if (ly->ffn_in_q) {
        const b8_qlinear *q = ly->ffn_in_q;
        if (dyn) quantize_input(q, m->scheme, x, M, s->xq.p, s->rowscale.p);
        prof_mark(s, BERT8_OP_QUANTIZE, &t);
        b8_qepilogue ep = {dyn ? s->rowscale.p : &q->a_scale, dyn, q->bias, qact(c), NULL, 0,
                           fused_h ? NULL : h, I, fused_h ? s->hq.p : NULL,
                           fused_h ? ly->ffn_out_q->in_mul : NULL};
        if ((st = b8_qgemm(s->xq.p, H, M, q->packed, &ep, e))) return st;
    } else if ((st = b8_sgemm(ly->ffn_in.f32, x, H, M, h, I, hidden_post(c), false, e))) {
        return st;
    }
    prof_mark(s, BERT8_OP_FFN_IN, &t);
    if (s->observe) s->observe(s->observe_ctx, layer, B8_SITE_FFN_OUT, h, M, I, bt->attention_mask);
    if (ly->ffn_out_q) {
        const b8_qlinear *q = ly->ffn_out_q;
        if (!fused_h) quantize_input(q, m->scheme, h, M, s->hq.p, s->rowscale2.p);
        prof_mark(s, BERT8_OP_QUANTIZE, &t);
        b8_qepilogue ep = {dyn ? s->rowscale2.p : &q->a_scale, dyn, q->bias, B8_ACT_NONE, x, H,
                           x, H, NULL, NULL};
        if ((st = b8_qgemm(s->hq.p, I, M, q->packed, &ep, e))) return st;
    } else if ((st = b8_sgemm(ly->ffn_out.f32, h, I, M, x, H, B8_POST_NONE, true, e))) {
        return st;
    }
    prof_mark(s, BERT8_OP_FFN_OUT, &t);
    const b8_layer *next = layer + 1 < c->num_layers ? ly + 1 : NULL;
    layernorm_next(s, M, H, ly->ln2_g, ly->ln2_b, c->layer_norm_eps, next ? next->qkv_qg : NULL,
                   next ? next->qkv_qb : NULL);
    prof_mark(s, BERT8_OP_NORM, &t);
    return BERT8_OK;
}

static void set_tensor(bert8_tensor *t, const float *data, int ndim, int64_t d0, int64_t d1, int64_t d2) {
    t->data = data;
    t->ndim = ndim;
    t->shape[0] = d0;
    t->shape[1] = d1;
    t->shape[2] = d2;
    t->shape[3] = 0;
}

static bert8_status heads(bert8_session *s, const bert8_batch *bt) {
    const bert8_model *m = s->model;
    const b8_config *c = &m->cfg;
    const int64_t H = c->hidden_size, B = bt->batch, T = bt->seq, M = B * T;
    b8_err *e = &s->err;
    bert8_status st;
    float *x = s->x.p;
    set_tensor(&s->out.last_hidden_state, x, 3, B, T, H);
    if ((st = b8_buf_reserve(&s->first, (size_t)(B * H), sizeof(float), e)) ||
        (st = b8_buf_reserve(&s->pooled, (size_t)(B * H), sizeof(float), e)) ||
        (st = b8_buf_reserve(&s->tmp, (size_t)(B * H), sizeof(float), e)))
        return st;
    float *first = s->first.p;
    for (int64_t b = 0; b < B; b++) memcpy(first + b * H, x + b * T * H, (size_t)H * sizeof(float));
    if (m->has_pooler) {
        if ((st = b8_sgemm(m->pooler.f32, first, H, B, s->pooled.p, H, B8_POST_TANH, false, e))) return st;
        set_tensor(&s->out.pooler_output, s->pooled.p, 2, B, H, 0);
    }
    const int64_t L = m->cls_out.n;
    switch (m->info.head) {
    case BERT8_HEAD_BASE: break;
    case BERT8_HEAD_SEQ_CLS: {
        if ((st = b8_buf_reserve(&s->logits, (size_t)(B * L), sizeof(float), e))) return st;
        const float *feat = s->pooled.p;
        if (c->arch == BERT8_ARCH_DISTILBERT || c->arch == BERT8_ARCH_XLMR) {
            b8_post p = c->arch == BERT8_ARCH_DISTILBERT ? B8_POST_RELU : B8_POST_TANH;
            if ((st = b8_sgemm(m->cls_dense.f32, first, H, B, s->tmp.p, H, p, false, e))) return st;
            feat = s->tmp.p;
        }
        if ((st = b8_sgemm(m->cls_out.f32, feat, H, B, s->logits.p, L, B8_POST_NONE, false, e))) return st;
        set_tensor(&s->out.logits, s->logits.p, 2, B, L, 0);
        break;
    }
    case BERT8_HEAD_TOKEN_CLS:
        if ((st = b8_buf_reserve(&s->logits, (size_t)(M * L), sizeof(float), e))) return st;
        if ((st = b8_sgemm(m->cls_out.f32, x, H, M, s->logits.p, L, B8_POST_NONE, false, e))) return st;
        set_tensor(&s->out.logits, s->logits.p, 3, B, T, L);
        break;
    case BERT8_HEAD_QA: {
        if ((st = b8_buf_reserve(&s->logits, (size_t)(M * 2), sizeof(float), e)) ||
            (st = b8_buf_reserve(&s->start, (size_t)M, sizeof(float), e)) ||
            (st = b8_buf_reserve(&s->end, (size_t)M, sizeof(float), e)))
            return st;
        float *lg = s->logits.p, *sl = s->start.p, *el = s->end.p;
        if ((st = b8_sgemm(m->cls_out.f32, x, H, M, lg, 2, B8_POST_NONE, false, e))) return st;
        for (int64_t i = 0; i < M; i++) {
            sl[i] = lg[2 * i];
            el[i] = lg[2 * i + 1];
        }
        set_tensor(&s->out.start_logits, sl, 2, B, T, 0);
        set_tensor(&s->out.end_logits, el, 2, B, T, 0);
        break;
    }
    }
    return BERT8_OK;
}

bert8_status bert8_forward(bert8_session *s, const bert8_batch *bt, bert8_outputs *out) {
    if (!s) return BERT8_ERR_INVALID_ARG;
    b8_err *e = &s->err;
    b8_err_clear(e);
    memset(&s->out, 0, sizeof s->out);
    if (out) memset(out, 0, sizeof *out);
    const bert8_model *m = s->model;
    const b8_config *c = &m->cfg;
    bert8_status st;
    if ((st = check_batch(m, bt, e))) return st;
    const int64_t H = c->hidden_size, I = c->intermediate_size;
    const int64_t B = bt->batch, T = bt->seq, M = B * T;
    if ((st = b8_buf_reserve(&s->x, (size_t)(M * H), sizeof(float), e)) ||
        (st = b8_buf_reserve(&s->qkv, (size_t)(M * 3 * H), sizeof(float), e)) ||
        (st = b8_buf_reserve(&s->ctx, (size_t)(M * H), sizeof(float), e)) ||
        (st = b8_buf_reserve(&s->ffn, (size_t)M, (size_t)I * sizeof(float), e)))
        return st;
    if (m->quantized &&
        ((st = b8_buf_reserve(&s->xq, (size_t)M, (size_t)H, e)) ||
         (st = b8_buf_reserve(&s->hq, (size_t)M, (size_t)I, e)) ||
         (st = b8_buf_reserve(&s->rowscale, (size_t)M, sizeof(float), e)) ||
         (st = b8_buf_reserve(&s->rowscale2, (size_t)M, sizeof(float), e))))
        return st;
    double t = prof_start(s);
    embed(s, bt);
    prof_mark(s, BERT8_OP_EMBED, &t);
    for (int64_t l = 0; l < c->num_layers; l++) {
        if ((st = attention(s, bt, &m->layers[l], l)) || (st = ffn(s, bt, &m->layers[l], l)))
            return b8_wrap(e, "layer %lld", (long long)l);
    }
    t = prof_start(s);
    if ((st = heads(s, bt))) return st;
    prof_mark(s, BERT8_OP_HEAD, &t);
    if (out) *out = s->out;
    return BERT8_OK;
}
