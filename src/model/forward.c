/* forward.c: the forward pass (embeddings, post-LN encoder layers, task heads) in FP32 and
 * INT8, with the same maths as transformers, on padded or packed batches. The architecture's
 * traits (io/arch.h) decide positions (absolute, relative bias, rotary), the FFN's form (plain
 * or gated) and the heads.
 *
 * A call runs on token rows: a padded batch is B x T rows with a key mask, a packed batch is
 * the real tokens only (cumulative starts, no mask). Every Linear runs on all rows at once;
 * attention runs per (sequence, head) over that sequence's rows. Each Linear group runs FP32
 * or INT8 by its own mode (per-tensor static or per-token dynamic activation scales). */
#include "model/session.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/pool.h"
#include "base/threads.h"
#include "kernels/attention/attention.h"
#include "kernels/attention/rel_dot.h"
#include "kernels/quantize/quantize.h"
#include "kernels/rowops/glu.h"
#include "kernels/rowops/rotary.h"
#include "kernels/rowops/rowops.h"

/* Largest request one call accepts: keeps every buffer size far from overflow. */
#define B8_MAX_TOKENS ((int64_t)1 << 22)

/* Work below this many elements runs on the calling thread: waking the pool costs more. */
#define B8_PAR_MIN ((int64_t)1 << 15)

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
    b8_buf *bufs[] = {&s->x,     &s->qkv,    &s->ctx,   &s->ffn,   &s->xq,     &s->hq, &s->qkvq,
                      &s->rowscale, &s->rowscale2, &s->rowzero2, &s->rowzero, &s->ox, &s->att, &s->gemm_ws, &s->relb, &s->relidx, &s->mlm, &s->rope,
                      &s->rope_local, &s->gate,
                      &s->starts, &s->first,
                      &s->pooled, &s->tmp,   &s->logits, &s->start, &s->end};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) b8_buf_free(bufs[i]);
    for (int i = 0; i < s->nkids; i++) bert8_session_free(s->kids[i]);
    free(s->kids);
    b8_buf *split[] = {&s->splitcu, &s->split_order, &s->split_ids, &s->split_types};
    for (size_t i = 0; i < sizeof split / sizeof *split; i++) b8_buf_free(split[i]);
    free(s);
}

void b8_session_set_observer(bert8_session *s, b8_observer fn, void *ctx) {
    s->observe = fn;
    s->observe_ctx = fn ? ctx : NULL;
}

const char *bert8_session_last_error(const bert8_session *s) { return s ? s->err.msg : "no session"; }

static inline double prof_start(const bert8_session *s) { return s->profiling ? omp_get_wtime() : 0.0; }
/* Charges the time since *t to op (less what was already charged to a row operation inside it,
 * run_group) and restarts the clock. */
static inline void prof_mark(bert8_session *s, bert8_op op, double *t) {
    if (!s->profiling) return;
    double n = omp_get_wtime();
    s->prof[op] += n - *t - s->prof_carry;
    s->prof_carry = 0.0;
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
    s->prof_carry = 0.0;
}

void bert8_session_get_profile(const bert8_session *s, double seconds[BERT8_OP_COUNT]) {
    for (int i = 0; i < BERT8_OP_COUNT; i++) seconds[i] = s ? s->prof[i] : 0.0;
}

/* ---- the rows of one call ------------------------------------------------------------------ */

typedef struct rows {
    bool packed;
    int64_t nseq, M;      /* sequences, token rows */
    int64_t T;            /* padded: row length; packed: the longest sequence */
    const int64_t *start; /* [nseq + 1] first row of each sequence */
    const int32_t *mask;  /* [M] key mask (padded batches), NULL when every row is a real token */
    const int32_t *ids, *types;
} rows;

/* Either public batch form. */
typedef struct input {
    int64_t batch, seq;            /* packed: seq unused */
    const int32_t *input_ids, *attention_mask, *token_type_ids;
    const int64_t *cu_seqlens;     /* packed when not NULL */
} input;

static bert8_status check_batch(const bert8_model *m, const input *bt, b8_err *e) {
    const b8_config *c = &m->cfg;
    if (!bt->input_ids) return b8_fail(e, BERT8_ERR_INVALID_ARG, "batch has no input_ids");
    const int64_t max_seq = m->info.max_seq_len;
    int64_t n;
    if (bt->cu_seqlens) {
        if (bt->batch <= 0) return b8_fail(e, BERT8_ERR_INVALID_ARG, "packed batch of %lld sequences", (long long)bt->batch);
        if (bt->batch > B8_MAX_TOKENS)
            return b8_fail(e, BERT8_ERR_TOO_LARGE, "packed batch of %lld sequences exceeds the limit of %lld",
                           (long long)bt->batch, (long long)B8_MAX_TOKENS);
        if (bt->cu_seqlens[0] != 0)
            return b8_fail(e, BERT8_ERR_INVALID_ARG, "cu_seqlens[0] = %lld, must be 0", (long long)bt->cu_seqlens[0]);
        for (int64_t i = 0; i < bt->batch; i++) {
            int64_t len = bt->cu_seqlens[i + 1] - bt->cu_seqlens[i];
            if (bt->cu_seqlens[i + 1] < bt->cu_seqlens[i] || len < 1)
                return b8_fail(e, BERT8_ERR_INVALID_ARG,
                               "cu_seqlens must increase by at least 1: sequence %lld has length %lld", (long long)i,
                               (long long)len);
            if (len > max_seq)
                return b8_fail(e, BERT8_ERR_TOO_LARGE,
                               "sequence %lld has %lld tokens, over the model's limit of %lld positions", (long long)i,
                               (long long)len, (long long)max_seq);
            if (bt->cu_seqlens[i + 1] > B8_MAX_TOKENS)
                return b8_fail(e, BERT8_ERR_TOO_LARGE, "packed batch exceeds the limit of %lld tokens",
                               (long long)B8_MAX_TOKENS);
        }
        n = bt->cu_seqlens[bt->batch];
    } else {
        if (bt->batch <= 0 || bt->seq <= 0)
            return b8_fail(e, BERT8_ERR_INVALID_ARG, "batch shape %lld x %lld must be positive", (long long)bt->batch,
                           (long long)bt->seq);
        if (bt->batch > B8_MAX_TOKENS || bt->seq > B8_MAX_TOKENS || bt->batch * bt->seq > B8_MAX_TOKENS)
            return b8_fail(e, BERT8_ERR_TOO_LARGE, "batch of %lld x %lld tokens exceeds the limit of %lld tokens",
                           (long long)bt->batch, (long long)bt->seq, (long long)B8_MAX_TOKENS);
        if (bt->seq > max_seq)
            return b8_fail(e, BERT8_ERR_TOO_LARGE, "sequence length %lld exceeds the model's limit of %lld positions",
                           (long long)bt->seq, (long long)max_seq);
        n = bt->batch * bt->seq;
    }
    const int64_t T = bt->cu_seqlens ? 1 : bt->seq; /* for messages: [row][col] of padded batches */
    for (int64_t i = 0; i < n; i++) {
        if (bt->input_ids[i] < 0 || bt->input_ids[i] >= c->vocab_size)
            return b8_fail(e, BERT8_ERR_INVALID_ARG, "input_ids[%lld][%lld] = %d is outside the vocabulary [0, %lld)",
                           (long long)(i / T), (long long)(i % T), bt->input_ids[i], (long long)c->vocab_size);
        if (bt->attention_mask && bt->attention_mask[i] != 0 && bt->attention_mask[i] != 1)
            return b8_fail(e, BERT8_ERR_INVALID_ARG, "attention_mask[%lld][%lld] = %d is not 0 or 1",
                           (long long)(i / T), (long long)(i % T), bt->attention_mask[i]);
        if (bt->token_type_ids && c->desc->token_types && c->type_vocab_size > 0 &&
            (bt->token_type_ids[i] < 0 || bt->token_type_ids[i] >= c->type_vocab_size))
            return b8_fail(e, BERT8_ERR_INVALID_ARG, "token_type_ids[%lld][%lld] = %d is outside [0, %lld)",
                           (long long)(i / T), (long long)(i % T), bt->token_type_ids[i],
                           (long long)c->type_vocab_size);
    }
    return BERT8_OK;
}

static bert8_status make_rows(bert8_session *s, const input *bt, rows *r) {
    b8_err *e = &s->err;
    memset(r, 0, sizeof *r);
    r->packed = bt->cu_seqlens != NULL;
    r->nseq = bt->batch;
    r->ids = bt->input_ids;
    r->types = s->model->cfg.desc->token_types ? bt->token_type_ids : NULL;
    bert8_status st = b8_buf_reserve(&s->starts, (size_t)(r->nseq + 1), sizeof(int64_t), e);
    if (st) return st;
    int64_t *start = s->starts.p;
    if (r->packed) {
        memcpy(start, bt->cu_seqlens, (size_t)(r->nseq + 1) * sizeof(int64_t));
        for (int64_t i = 0; i < r->nseq; i++)
            if (start[i + 1] - start[i] > r->T) r->T = start[i + 1] - start[i];
        r->M = start[r->nseq];
    } else {
        for (int64_t i = 0; i <= r->nseq; i++) start[i] = i * bt->seq;
        r->T = bt->seq;
        r->M = bt->batch * bt->seq;
        r->mask = bt->attention_mask;
    }
    r->start = start;
    return BERT8_OK;
}

/* ---- layers -------------------------------------------------------------------------------- */

/* A dynamic (per-token) group quantizes its input with a zero point per row when its kernel
 * takes them: the row's range, not twice its largest magnitude, then spans the 255 levels,
 * which halves the step on a one-sided row (FFN-out's GELU output) and narrows it on a skewed
 * one (a LayerNorm output with its beta). */
static bool row_zero(const bert8_session *s, const b8_qlinear *q) {
    return !s->model->dyn_symmetric && q && q->mode == B8_QMODE_DYNAMIC && b8_qweight_takes_row_zero(q->packed);
}

/* rows x n contiguous floats quantized per row on the calling thread for the dynamic group q
 * (in_mul: its smoothing) into out, their scales into scale and, with row_zero(s, q), their
 * zero points into zero. */
static void dyn_rows(const bert8_session *s, const b8_qlinear *q, const float *x, int64_t rows, int64_t n,
                     int8_t *out, float *scale, int32_t *zero) {
    if (row_zero(s, q)) b8_quantize_dynamic_zp_best()(x, n, rows, n, q->in_mul, out, n, scale, zero);
    else b8_quantize_dynamic_best()(x, n, rows, n, q->in_mul, out, n, scale);
}

/* A LayerNorm of the hidden state s->x in place; when the Linear it feeds (next) runs INT8, the
 * same pass also writes that Linear's smoothed int8 input into s->xq: with its static scale
 * folded into the LayerNorm, or with a scale per row (dynamic) into s->rowscale. */
typedef struct ln_job {
    bert8_session *s;
    const float *g, *b;
    const b8_qlinear *next;
} ln_job;

/* ln_job's LayerNorm on rows [m0, m1) on the calling thread: the rows of one unit of a
 * residual GEMM (b8_qepilogue.rows_done), or a share of them all (layernorm_next). */
static void ln_rows(void *ctx, int64_t m0, int64_t m1) {
    const ln_job *j = ctx;
    bert8_session *s = j->s;
    const b8_config *c = &s->model->cfg;
    const int64_t H = c->hidden_size, n = m1 - m0;
    const b8_qlinear *next = j->next;
    float *x = (float *)s->x.p + m0 * H;
    /* s->xq and s->rowscale exist only when the model has INT8 groups */
    if (next && next->mode == B8_QMODE_DYNAMIC) {
        b8_layernorm_rows_best()(x, x, n, H, j->g, j->b, c->layer_norm_eps);
        dyn_rows(s, next, x, n, H, (int8_t *)s->xq.p + m0 * H, (float *)s->rowscale.p + m0,
                 (int32_t *)s->rowzero.p + m0);
    } else if (!next || next->mode != B8_QMODE_STATIC || !next->ln_qg) {
        b8_layernorm_rows_best()(x, x, n, H, j->g, j->b, c->layer_norm_eps);
    } else {
        const b8_ln_quant p = {next->ln_qg, next->ln_qb, j->g, j->b, x, H, c->layer_norm_eps};
        b8_layernorm_quantize_best()(x, H, n, H, &p, (int8_t *)s->xq.p + m0 * H, H);
    }
}

/* FFN-in's fp32 output rows [m0, m1) (s->ffn, row stride I) quantized per row for a dynamic
 * FFN-out (qo) into s->hq, their scales into s->rowscale2, their zero points into s->rowzero2. */
typedef struct hq_job {
    bert8_session *s;
    int64_t I;
    const b8_qlinear *qo;
} hq_job;

static void hq_rows(void *ctx, int64_t m0, int64_t m1) {
    const hq_job *j = ctx;
    bert8_session *s = j->s;
    dyn_rows(s, j->qo, (const float *)s->ffn.p + m0 * j->I, m1 - m0, j->I, (int8_t *)s->hq.p + m0 * j->I,
             (float *)s->rowscale2.p + m0, (int32_t *)s->rowzero2.p + m0);
}

static void ln_rows_par(void *ctx, int64_t m0, int64_t m1, int slot) {
    (void)slot;
    ln_rows(ctx, m0, m1);
}

/* ln_job's LayerNorm on all M rows over the pool. */
static void layernorm_next(bert8_session *s, int64_t M, const float *g, const float *b, const b8_qlinear *next) {
    ln_job j = {s, g, b, next};
    const int64_t H = s->model->cfg.hidden_size;
    b8_par_for(M, 8, b8_par_threads_for(M * H, B8_PAR_MIN), ln_rows_par, &j);
}

/* Pre-norm: out = LayerNorm(s->x) on all M rows over the pool, s->x unchanged. When the Linear
 * it feeds (next) runs INT8, the pass writes next's int8 input into s->xq instead: with the
 * static scale folded into the LayerNorm (out untouched), or with a scale per row (dynamic)
 * into s->rowscale; ln_ready(s, next) is then that input. */
typedef struct prenorm_job {
    bert8_session *s;
    const float *g, *b;
    float *out;
    const b8_qlinear *next;
} prenorm_job;

static void prenorm_rows(void *ctx, int64_t r0, int64_t r1, int slot) {
    (void)slot;
    const prenorm_job *j = ctx;
    bert8_session *s = j->s;
    const b8_config *c = &s->model->cfg;
    const int64_t H = c->hidden_size;
    const float *x = s->x.p;
    const b8_qlinear *next = j->next;
    const bool stat = next && next->mode == B8_QMODE_STATIC && next->ln_qg;
    const bool dyn = next && next->mode == B8_QMODE_DYNAMIC;
    for (int64_t r = r0; r < r1; r++) {
        if (stat) {
            const b8_ln_quant p = {next->ln_qg, next->ln_qb, NULL, NULL, NULL, 0, c->layer_norm_eps};
            b8_layernorm_quantize_best()(x + r * H, H, 1, H, &p, (int8_t *)s->xq.p + r * H, H);
            continue;
        }
        b8_layernorm_rows_best()(x + r * H, j->out + r * H, 1, H, j->g, j->b, c->layer_norm_eps);
        if (dyn)
            dyn_rows(s, next, j->out + r * H, 1, H, (int8_t *)s->xq.p + r * H, (float *)s->rowscale.p + r,
                     (int32_t *)s->rowzero.p + r);
    }
}

static void prenorm(bert8_session *s, int64_t M, const float *g, const float *b, float *out, const b8_qlinear *next) {
    prenorm_job j = {s, g, b, out, next};
    b8_par_for(M, 8, b8_par_threads_for(M * s->model->cfg.hidden_size, B8_PAR_MIN), prenorm_rows, &j);
}

/* One Linear group on M rows of x ([M][k], row stride k). INT8: xq is the int8 input when an
 * earlier step already made it (static scale fused into a LayerNorm or an epilogue), else x is
 * quantized into qbuf (per-row scales into rowscale). The output is either out_f32 (row
 * stride ldc; residual groups add into it) or, for FFN-in feeding a static FFN-out, out_s8
 * requantized with out_mul. */
typedef struct gcall {
    b8_group g;
    const float *x;
    const int8_t *xq;
    int8_t *qbuf;
    float *rowscale;
    float *out_f32;
    int64_t ldc;
    int8_t *out_s8;
    const float *out_mul;
    float out_zp; /* out_s8's zero point: the static FFN-out's input zero point */
    /* A row operation an INT8 product runs on its finished output rows (b8_qepilogue.rows_done),
     * or NULL: a residual group's LayerNorm (ln_rows), FFN-in's per-row quantization for a
     * dynamic FFN-out (hq_rows). */
    void (*rows)(void *ctx, int64_t m0, int64_t m1);
    void *rows_ctx;
} gcall;

/* A row operation timed on the thread that runs it (profiling only; see run_group). */
typedef struct timed_rows {
    bert8_session *s;
    void (*fn)(void *ctx, int64_t m0, int64_t m1);
    void *ctx;
} timed_rows;

static void rows_timed(void *ctx, int64_t m0, int64_t m1) {
    const timed_rows *t = ctx;
    const double t0 = omp_get_wtime();
    t->fn(t->ctx, m0, m1);
    __atomic_fetch_add(&t->s->prof_rows_ns, (int64_t)((omp_get_wtime() - t0) * 1e9), __ATOMIC_RELAXED);
}

/* Runs the group; an INT8 group also runs c->rows (when there is one) inside its product, on the
 * rows each unit of work finished (ln_after runs the LayerNorm after an FP32 group). */
static bert8_status run_group(bert8_session *s, const b8_layer *ly, int64_t M, const gcall *c, double *t) {
    const b8_config *cfg = &s->model->cfg;
    const bool residual = c->g == B8_GROUP_ATTN_OUT || c->g == B8_GROUP_FFN_OUT;
    const b8_qlinear *q = ly->q[c->g];
    if (!q) {
        int64_t n, k;
        b8_group_dims(cfg->desc, c->g, cfg->hidden_size, cfg->intermediate_size, &n, &k);
        return b8_sgemm(ly->f32[c->g], c->x, k, M, c->out_f32, c->ldc, &s->err);
    }
    const bool dyn = q->mode == B8_QMODE_DYNAMIC;
    const bool zp = row_zero(s, q);
    int32_t *rowzero = !zp ? NULL : c->g == B8_GROUP_FFN_OUT ? s->rowzero2.p : s->rowzero.p;
    const int8_t *xq = c->xq;
    if (!xq) {
        if (zp) b8_quantize_dynamic_zp(c->x, q->k, M, q->k, q->in_mul, c->qbuf, q->k, c->rowscale, rowzero);
        else if (dyn) b8_quantize_dynamic(c->x, q->k, M, q->k, q->in_mul, c->qbuf, q->k, c->rowscale);
        else b8_quantize_static(c->x, q->k, M, q->k, q->in_mul, 1.0f, q->a_zero, c->qbuf, q->k);
        xq = c->qbuf;
        prof_mark(s, BERT8_OP_QUANTIZE, t);
    }
    /* outlier channels: their fp32 values, gathered from the input the quantizer read (which
     * saw them as 0), for the epilogue's small fp32 product */
    float *ox = s->ox.p;
    for (int64_t m = 0; q->n_out && m < M; m++)
        for (int64_t o = 0; o < q->n_out; o++) ox[m * q->n_out + o] = c->x[m * q->k + q->out_idx[o]];
    b8_qepilogue ep = {.a_scale = dyn ? c->rowscale : &q->a_scale,
                       .a_scale_per_row = dyn,
                       .a_zero = rowzero,
                       .bias = q->bias,
                       .outliers = (int)q->n_out,
                       .ox = ox,
                       .ld_ox = q->n_out,
                       .ow = q->out_wt,
                       .ld_ow = q->n,
                       .act = c->g == B8_GROUP_FFN_IN && cfg->desc->ffn != B8_FFN_GLU ? cfg->act : B8_ACT_NONE,
                       .residual = residual ? c->out_f32 : NULL,
                       .ld_res = residual ? c->ldc : 0,
                       .out_f32 = c->out_f32,
                       .ldc = c->ldc,
                       .out_s8 = c->out_s8,
                       .out_mul = c->out_mul,
                       .out_zp = c->out_zp,
                       .rows_done = c->rows,
                       .rows_ctx = c->rows_ctx};
    /* profiling: the LayerNorm and the per-token requantization a product runs on its rows are
     * timed where they run and charged to their own ops (thread time over the threads: their share
     * of the call's wall time, exactly when they run alone after the product) */
    const bert8_op rows_op = c->rows == ln_rows ? BERT8_OP_NORM : c->rows == hq_rows ? BERT8_OP_QUANTIZE : BERT8_OP_COUNT;
    timed_rows tr = {s, c->rows, c->rows_ctx};
    if (s->profiling && rows_op != BERT8_OP_COUNT) {
        s->prof_rows_ns = 0;
        ep.rows_done = rows_timed;
        ep.rows_ctx = &tr;
    }
    const bert8_status st = b8_qgemm(xq, q->k, M, q->packed, &ep, &s->gemm_ws, &s->err);
    if (s->profiling && rows_op != BERT8_OP_COUNT) {
        const double sec = (double)s->prof_rows_ns * 1e-9 / (double)b8_par_threads();
        s->prof[rows_op] += sec;
        s->prof_carry += sec;
    }
    return st;
}

/* The LayerNorm after residual group g when it ran FP32, as a pass of its own (an INT8 group ran
 * it inside its product, run_group). */
static void ln_after(bert8_session *s, const b8_layer *ly, b8_group g, int64_t M, const ln_job *ln, double *t) {
    if (ly->q[g]) return;
    layernorm_next(s, M, ln->g, ln->b, ln->next);
    prof_mark(s, BERT8_OP_NORM, t);
}

/* The int8 input a group finds ready in s->xq (written by the LayerNorm before it, see
 * layernorm_next; a dynamic group's row scales in s->rowscale). */
static const int8_t *ln_ready(const bert8_session *s, const b8_qlinear *q) {
    if (q && q->mode == B8_QMODE_DYNAMIC) return s->xq.p;
    return q && q->mode == B8_QMODE_STATIC && q->ln_qg ? s->xq.p : NULL;
}

typedef struct seq_job {
    bert8_session *s;
    const rows *r;
    int64_t layer;
} seq_job;

/* The embeddings of sequences [q0, q1). */
static void embed_seqs(void *ctx, int64_t q0, int64_t q1, int slot) {
    (void)slot;
    const seq_job *j = ctx;
    bert8_session *s = j->s;
    const rows *r = j->r;
    const bert8_model *m = s->model;
    float *x = s->x.p;
    const b8_config *c = &m->cfg;
    const int64_t H = c->hidden_size;
    const int32_t pad = (int32_t)c->pad_token_id;
    const bool from_pad = c->desc->pos == B8_POS_FROM_PAD;
    for (int64_t q = q0; q < q1; q++) {
        int64_t count = 0; /* positions from the pad index: running count of non-pad ids */
        for (int64_t i = r->start[q]; i < r->start[q + 1]; i++) {
            const int64_t t = i - r->start[q];
            const int32_t id = r->ids[i];
            int64_t pos = t;
            if (from_pad) {
                if (id != pad) count++;
                pos = id != pad ? count + pad : pad;
            }
            const float *pe = m->pos_emb ? m->pos_emb + pos * H : NULL; /* rotary: no table */
            float *xr = x + i * H;
            if (m->word_emb_q) { /* int8 rows, dequantized on gather */
                const int8_t *wq = m->word_emb_q + (int64_t)id * H;
                const float ws = m->word_emb_scale[id];
                for (int64_t h = 0; h < H; h++) xr[h] = (float)wq[h] * ws;
            } else {
                memcpy(xr, m->word_emb + (int64_t)id * H, (size_t)H * sizeof(float));
            }
            const float *te = m->type_emb ? m->type_emb + (int64_t)(r->types ? r->types[i] : 0) * H : NULL;
            if (te && pe) {
                for (int64_t h = 0; h < H; h++) xr[h] = (xr[h] + te[h]) + pe[h];
            } else if (te || pe) {
                const float *add = te ? te : pe;
                for (int64_t h = 0; h < H; h++) xr[h] = xr[h] + add[h];
            }
        }
    }
}

static void embed(bert8_session *s, const rows *r) {
    const bert8_model *m = s->model;
    const b8_config *c = &m->cfg;
    seq_job j = {s, r, 0};
    b8_par_for(r->nseq, 4, b8_par_threads_for(r->M * c->hidden_size, B8_PAR_MIN), embed_seqs, &j);
    /* pre-norm: the embeddings' LayerNorm makes the residual stream, which the first layer
     * normalizes again (or quantizes itself when it has no LN1) */
    const b8_qlinear *next = c->num_layers > 0 && !c->desc->pre_norm ? m->layers[0].q[B8_GROUP_QKV] : NULL;
    layernorm_next(s, r->M, m->emb_ln_g, m->emb_ln_b, next);
}

/* The relative-position bias (MPNet) of every head over offsets -(T-1)..T-1 of this call's
 * longest sequence T, looked up once per call: s->relb [heads][2T - 1]. */
static bert8_status rel_table(bert8_session *s, const rows *r) {
    const bert8_model *m = s->model;
    const b8_config *c = &m->cfg;
    if (!m->rel_bias) return BERT8_OK;
    const int64_t A = c->num_heads, W = 2 * r->T - 1;
    bert8_status st = b8_buf_reserve(&s->relb, (size_t)(A * W), sizeof(float), &s->err);
    if (st) return st;
    float *t = s->relb.p;
    for (int64_t o = 0; o < W; o++) {
        const int64_t b = b8_rel_bucket(o - (r->T - 1), c->rel_buckets, c->desc->rel_max_distance);
        for (int64_t h = 0; h < A; h++) t[h * W + o] = m->rel_bias[b * A + h];
    }
    return BERT8_OK;
}

/* Disentangled attention: the relative embedding each offset i - j = -(T-1)..T-1 of this call's
 * longest sequence reads, clamp(att_span + bucket(i - j), 0, 2 att_span - 1) (s->relidx). */
static bert8_status rel_index(bert8_session *s, const rows *r) {
    const b8_config *c = &s->model->cfg;
    if (!c->c2p && !c->p2c) return BERT8_OK;
    const int64_t W = 2 * r->T - 1, R = 2 * c->att_span;
    bert8_status st = b8_buf_reserve(&s->relidx, (size_t)W, sizeof(int32_t), &s->err);
    if (st) return st;
    int32_t *ix = s->relidx.p;
    for (int64_t o = 0; o < W; o++) {
        int64_t v = c->att_span + b8_rel_log_bucket(o - (r->T - 1), c->pos_buckets, c->max_rel_pos);
        ix[o] = (int32_t)(v < 0 ? 0 : v > R - 1 ? R - 1 : v);
    }
    return BERT8_OK;
}

/* Floats of one thread's disentangled-attention scratch for sequences up to T tokens: the two
 * products with the relative projections [T][W] (W <= 2T - 1 embeddings) and the bias [T][T]. */
static size_t disent_floats(const b8_config *c, int64_t T) {
    if (!c->c2p && !c->p2c) return 0;
    return (size_t)(2 * T * (2 * T - 1) + T * T);
}

/* The bias disentangled attention adds to head h's scores of a sequence of len tokens (Q, K in
 * rows of stride ld), [len][len] in scratch: c2p[i][j] = q_i . Kr[idx(i - j)] and p2c[i][j] =
 * k_j . Qr[idx(i - j)], each divided by the scale, then added, as transformers does. The
 * products run only against the embeddings the sequence's offsets read (a monotonic window of
 * the transposed tables), with rel_dot, whose every output is one chain of multiply-adds in
 * order of d: a sequence's bias is the same bits packed or padded. */
static const float *disent_bias(const bert8_session *s, const rows *r, const b8_layer *ly, int64_t h,
                                const float *q, const float *k, int64_t ld, int64_t len, float *scratch) {
    const bert8_model *m = s->model;
    const b8_config *c = &m->cfg;
    const int64_t d = c->hidden_size / c->num_heads, R = 2 * c->att_span;
    const int32_t *ix = (const int32_t *)s->relidx.p + (r->T - 1); /* ix[o]: offset o */
    const int64_t lo = ix[-(len - 1)], W = ix[len - 1] - lo + 1;
    float *cp = scratch, *pc = scratch + len * W, *bias = scratch + 2 * len * W;
    const b8_rel_dot_fn dot = b8_rel_dot_best();
    if (c->c2p) dot(q, ld, len, ly->rel_kr + h * d * R + lo, R, d, W, cp, W);
    if (c->p2c) dot(k, ld, len, ly->rel_qr + h * d * R + lo, R, d, W, pc, W);
    const float scale = sqrtf((float)d * (float)c->scale_factor);
    for (int64_t i = 0; i < len; i++)
        for (int64_t j = 0; j < len; j++) {
            const int64_t u = ix[i - j] - lo;
            float v = 0.0f;
            if (c->c2p) v = cp[i * W + u] / scale;
            if (c->p2c) v = c->c2p ? v + pc[j * W + u] / scale : pc[j * W + u] / scale;
            bias[i * len + j] = v;
        }
    return bias;
}

/* Rotary positions: cos | sin of positions 0..T-1 (s->rope), computed when a call is longer
 * than every earlier one. */
static bert8_status rope_table(bert8_session *s, const rows *r) {
    const b8_config *c = &s->model->cfg;
    if (c->desc->pos != B8_POS_ROTARY || r->T <= s->rope_T) return BERT8_OK;
    const int64_t d = c->hidden_size / c->num_heads;
    bert8_status st = b8_buf_reserve(&s->rope, (size_t)(r->T * d), sizeof(float), &s->err);
    if (st) return st;
    b8_rotary_table(s->rope.p, r->T, d, c->rope_theta);
    if (c->desc->sliding) {
        if ((st = b8_buf_reserve(&s->rope_local, (size_t)(r->T * d), sizeof(float), &s->err))) return st;
        b8_rotary_table(s->rope_local.p, r->T, d, c->rope_theta_local);
    }
    s->rope_T = r->T;
    return BERT8_OK;
}

/* Whether layer l attends within a sliding window (desc->sliding). */
static inline bool sliding_layer(const b8_config *c, int64_t l) { return c->layer_sliding && c->layer_sliding[l]; }

/* Rotates Q and K of every row of s->qkv in place by its position in its sequence (with layer
 * l's table). */
static void rotate_seqs(void *ctx, int64_t q0, int64_t q1, int slot) {
    (void)slot;
    const seq_job *j = ctx;
    const bert8_session *s = j->s;
    const rows *r = j->r;
    const b8_config *c = &s->model->cfg;
    const int64_t H = c->hidden_size, A = c->num_heads, d = H / A;
    const b8_rotary_fn rot = b8_rotary_rows_best();
    float *qkv = s->qkv.p;
    const float *cs = sliding_layer(c, j->layer) ? s->rope_local.p : s->rope.p;
    for (int64_t q = q0; q < q1; q++) {
        const int64_t r0 = r->start[q], len = r->start[q + 1] - r0;
        rot(qkv + r0 * 3 * H, 3 * H, len, 2 * A, d, cs, 0);
    }
}

static void rotate_qk(bert8_session *s, const rows *r, int64_t layer) {
    const b8_config *c = &s->model->cfg;
    seq_job j = {s, r, layer};
    b8_par_for(r->nseq, 1, b8_par_threads_for(r->M * 2 * c->hidden_size, B8_PAR_MIN), rotate_seqs, &j);
}

/* Head h's bias for a sequence of len tokens: 2 len - 1 floats centred on offset 0, or NULL. */
static inline const float *rel_of(const bert8_session *s, const rows *r, int64_t h, int64_t len) {
    if (!s->model->rel_bias) return NULL;
    return (const float *)s->relb.p + h * (2 * r->T - 1) + (r->T - len);
}

/* One attention pass per (sequence, head) item: everything the items share. */
typedef struct att_s8_job {
    const bert8_session *s;
    const rows *r;
    const b8_qattn *qa;
    const b8_qlinear *qo;
    bool fused;
    b8_mask_mode mode;
    b8_attn_s8_params ap;
    b8_attention_s8_fn att;
    b8_attention_s8_window_fn watt;
    int64_t win;
    size_t kbytes, per;
    const int8_t *qkv;
    int8_t *ctxq;
    float *ctx;
} att_s8_job;

static void att_s8_items(void *ctx_, int64_t i0, int64_t i1, int slot) {
    const att_s8_job *j = ctx_;
    const bert8_session *s = j->s;
    const rows *r = j->r;
    const b8_config *c = &s->model->cfg;
    const int64_t H = c->hidden_size, A = c->num_heads, d = H / A;
    const b8_qattn *qa = j->qa;
    const b8_qlinear *qo = j->qo;
    const bool fused = j->fused;
    float *ctx = j->ctx;
    int8_t *ctxq = j->ctxq;
    void *scratch = (uint8_t *)s->att.p + (size_t)slot * j->per;
    for (int64_t it = i0; it < i1; it++) {
        const int64_t q = it / A, h = it % A, r0 = r->start[q], len = r->start[q + 1] - r0;
        const int8_t *base = j->qkv + r0 * 3 * H + h * d;
        b8_attn_s8_params p = j->ap;
        p.rel = rel_of(s, r, h, len);
        if (fused) p.out_mul = qo->in_mul + h * d;
        if (qa->sv_ch && fused) {
            float *fm = (float *)((uint8_t *)scratch + j->kbytes);
            for (int64_t k = 0; k < d; k++) fm[k] = qo->in_mul[h * d + k] * qa->sv_ch[h * d + k];
            p.out_mul = fm;
        } else if (qa->sv_ch) {
            p.ch_mul = qa->sv_ch + h * d;
        }
        if (j->watt)
            j->watt(base, base + H, base + 2 * H, 3 * H, len, d, &p, j->win, r->mask ? r->mask + r0 : NULL,
                    fused ? NULL : ctx + r0 * H + h * d, fused ? ctxq + r0 * H + h * d : NULL, H, scratch);
        else
            j->att(base, base + H, base + 2 * H, 3 * H, len, d, &p, r->mask ? r->mask + r0 : NULL, j->mode,
                   fused ? NULL : ctx + r0 * H + h * d, fused ? ctxq + r0 * H + h * d : NULL, H, scratch);
    }
}

/* Attention on int8 Q, K, V (ly->att), then the output projection. With a static INT8 output
 * projection the context leaves the kernel already quantized for it. */
static bert8_status attention_s8(bert8_session *s, const rows *r, const b8_layer *ly, int64_t layer, double *t) {
    const bert8_model *m = s->model;
    const b8_config *c = &m->cfg;
    const int64_t H = c->hidden_size, A = c->num_heads, d = H / A, M = r->M;
    const b8_qattn *qa = ly->att;
    const b8_qlinear *qo = ly->q[B8_GROUP_ATTN_OUT];
    const bool fused = qo && qo->mode == B8_QMODE_STATIC;
    const b8_mask_mode mode = c->desc->mask_replace ? B8_MASK_REPLACE_MIN : B8_MASK_ADD_MIN;
    const b8_attn_s8_params ap = {qa->sq * qa->sk / sqrtf((float)d), qa->sv, NULL, NULL, NULL};
    b8_attention_s8_fn att = b8_attention_s8_best();
    const int64_t win = sliding_layer(c, layer) ? c->window : -1;
    const b8_attention_s8_window_fn watt = win >= 0 ? b8_attention_s8_window_best() : NULL;
    /* per thread: the kernel's scratch, then d floats for V's channel scales times the next
     * GEMM's input multipliers */
    const size_t kbytes =
        ((watt ? b8_attention_s8_window_scratch_bytes(r->T, d) : b8_attention_s8_scratch_bytes(r->T, d)) + 63) &
        ~(size_t)63;
    const size_t per = (kbytes + (size_t)d * sizeof(float) + 63) & ~(size_t)63;
    const int nt = b8_par_threads();
    bert8_status st;
    if ((st = b8_buf_reserve(&s->att, (size_t)nt, per, &s->err))) return st;
    int64_t work = 0;
    for (int64_t q = 0; q < r->nseq; q++) {
        int64_t len = r->start[q + 1] - r->start[q];
        work += len * len;
    }
    int8_t *ctxq = s->xq.p;
    float *ctx = s->ctx.p;
    att_s8_job j = {s, r, qa, qo, fused, mode, ap, att, watt, win, kbytes, per, s->qkvq.p, ctxq, ctx};
    b8_par_for(r->nseq * A, 1, work * A * d >= 4 * B8_PAR_MIN ? nt : 1, att_s8_items, &j);
    prof_mark(s, BERT8_OP_ATTENTION, t);
    const bool pre = c->desc->pre_norm; /* the residual stream stays unnormalized */
    ln_job ln = {s, ly->w[B8_PART_LN1], ly->b[B8_PART_LN1], ly->q[B8_GROUP_FFN_IN]};
    gcall oc = {B8_GROUP_ATTN_OUT, ctx, fused ? ctxq : NULL, s->xq.p, s->rowscale.p, s->x.p, H, NULL, NULL, 0.0f,
                pre ? NULL : ln_rows, &ln};
    if ((st = run_group(s, ly, M, &oc, t))) return st;
    prof_mark(s, BERT8_OP_ATTN_OUT, t);
    if (!pre) ln_after(s, ly, B8_GROUP_ATTN_OUT, M, &ln, t);
    (void)layer;
    return BERT8_OK;
}

typedef struct att_f32_job {
    const bert8_session *s;
    const rows *r;
    const b8_layer *ly;
    b8_attention_fn att;
    b8_attention_window_fn watt;
    int64_t win;
    float alpha;
    b8_mask_mode mode;
    size_t per, katt; /* per slot: the kernel's scratch (katt floats), then the disentangled bias */
    bool disent;
    const float *qkv;
    float *ctx;
} att_f32_job;

static void att_f32_items(void *ctx_, int64_t i0, int64_t i1, int slot) {
    const att_f32_job *j = ctx_;
    const bert8_session *s = j->s;
    const rows *r = j->r;
    const b8_config *c = &s->model->cfg;
    const int64_t H = c->hidden_size, A = c->num_heads, d = H / A;
    float *scratch = (float *)s->att.p + (size_t)slot * j->per;
    for (int64_t it = i0; it < i1; it++) {
        const int64_t q = it / A, h = it % A, r0 = r->start[q], len = r->start[q + 1] - r0;
        const float *base = j->qkv + r0 * 3 * H + h * d;
        const float *bias =
            j->disent ? disent_bias(s, r, j->ly, h, base, base + H, 3 * H, len, scratch + j->katt) : NULL;
        if (j->win >= 0)
            j->watt(base, base + H, base + 2 * H, 3 * H, len, d, j->alpha, j->win, r->mask ? r->mask + r0 : NULL,
                    j->mode, j->ctx + r0 * H + h * d, H, scratch);
        else
            j->att(base, base + H, base + 2 * H, 3 * H, len, d, j->alpha, r->mask ? r->mask + r0 : NULL, j->mode,
                   rel_of(s, r, h, len), bias, j->ctx + r0 * H + h * d, H, scratch);
    }
}

static bert8_status attention(bert8_session *s, const rows *r, const b8_layer *ly, int64_t layer) {
    const bert8_model *m = s->model;
    const b8_config *c = &m->cfg;
    const int64_t H = c->hidden_size, A = c->num_heads, d = H / A, M = r->M;
    float *x = s->x.p, *qkv = s->qkv.p, *ctx = s->ctx.p;
    b8_err *e = &s->err;
    bert8_status st;
    double t = prof_start(s);
    const bool pre = c->desc->pre_norm;
    /* pre-norm: attention reads LN1(x) (s->ctx, free until the attention writes it), or x itself
     * in a layer without LN1 */
    const float *xin = x;
    const int8_t *xq = pre ? NULL : ln_ready(s, ly->q[B8_GROUP_QKV]);
    if (pre && ly->w[B8_PART_LN1]) {
        prenorm(s, M, ly->w[B8_PART_LN1], ly->b[B8_PART_LN1], ctx, ly->q[B8_GROUP_QKV]);
        xin = ctx;
        xq = ln_ready(s, ly->q[B8_GROUP_QKV]);
    }
    if (s->observe) s->observe(s->observe_ctx, layer, B8_SITE_QKV_IN, xin, M, H, H, r->mask);
    /* INT8 attention: the QKV product emits int8 Q, K, V, unless Q and K are rotated first (then
     * the fp32 product is rotated and quantized with the same multipliers) */
    /* a sliding-window layer's INT8 attention needs the window kernel (VNNI); without it the
     * attention runs in fp32 between the INT8 products */
    /* disentangled attention runs in fp32 between the INT8 products too */
    const b8_qattn *qa =
        (sliding_layer(c, layer) && !b8_attention_s8_window_best()) || c->desc->disentangled ? NULL : ly->att;
    const bool rot = c->desc->pos == B8_POS_ROTARY, emit = qa && !rot;
    gcall qc = {B8_GROUP_QKV, xin, xq, s->xq.p, s->rowscale.p, emit ? NULL : qkv, 3 * H,
                emit ? s->qkvq.p : NULL, emit ? qa->out_mul : NULL, 0.0f, NULL, NULL};
    if ((st = run_group(s, ly, M, &qc, &t))) return st;
    if (rot) rotate_qk(s, r, layer);
    prof_mark(s, BERT8_OP_QKV, &t);
    if (qa && rot) {
        b8_quantize_static(qkv, 3 * H, M, 3 * H, qa->out_mul, 1.0f, 0.0f, s->qkvq.p, 3 * H);
        prof_mark(s, BERT8_OP_QUANTIZE, &t);
    }
    if (s->observe && !qa) {
        s->observe(s->observe_ctx, layer, B8_SITE_Q, qkv, M, H, 3 * H, r->mask);
        s->observe(s->observe_ctx, layer, B8_SITE_K, qkv + H, M, H, 3 * H, r->mask);
        s->observe(s->observe_ctx, layer, B8_SITE_V, qkv + 2 * H, M, H, 3 * H, r->mask);
    }
    /* disentangled attention divides by sqrt(d x (1 + its relative terms)) */
    const float alpha = 1.0f / sqrtf(c->desc->disentangled ? (float)d * (float)c->scale_factor : (float)d);
    const b8_mask_mode mode = c->desc->mask_replace ? B8_MASK_REPLACE_MIN : B8_MASK_ADD_MIN;
    if (qa) return attention_s8(s, r, ly, layer, &t);
    /* one fused pass per (sequence, head); each thread has its own scratch */
    b8_attention_fn att = b8_attention_head_best();
    const int64_t win = sliding_layer(c, layer) ? c->window : -1;
    const b8_attention_window_fn watt = b8_attention_window_best();
    const size_t katt = (b8_attention_scratch_floats(r->T, d) + 15) & ~(size_t)15;
    const size_t per = katt + disent_floats(c, r->T);
    const bool disent = c->c2p || c->p2c;
    const int nt = b8_par_threads();
    if ((st = b8_buf_reserve(&s->att, (size_t)nt, per * sizeof(float), e))) return st;
    int64_t work = 0;
    for (int64_t q = 0; q < r->nseq; q++) {
        int64_t len = r->start[q + 1] - r->start[q];
        work += len * len;
    }
    att_f32_job j = {s, r, ly, att, watt, win, alpha, mode, per, katt, disent, qkv, ctx};
    b8_par_for(r->nseq * A, 1, work * A * d >= B8_PAR_MIN ? nt : 1, att_f32_items, &j);
    prof_mark(s, BERT8_OP_ATTENTION, &t);
    if (s->observe) s->observe(s->observe_ctx, layer, B8_SITE_ATTN_OUT_IN, ctx, M, H, H, r->mask);
    /* x = LN(x + ctx Wo^T + bo): the residual is added in the GEMM's epilogue, the LayerNorm
     * runs on each unit's rows (INT8) or after the product (FP32) */
    ln_job ln = {s, ly->w[B8_PART_LN1], ly->b[B8_PART_LN1], ly->q[B8_GROUP_FFN_IN]};
    gcall oc = {B8_GROUP_ATTN_OUT, ctx, NULL, s->xq.p, s->rowscale.p, x, H, NULL, NULL, 0.0f, pre ? NULL : ln_rows,
                &ln};
    if ((st = run_group(s, ly, M, &oc, &t))) return st;
    prof_mark(s, BERT8_OP_ATTN_OUT, &t);
    if (!pre) ln_after(s, ly, B8_GROUP_ATTN_OUT, M, &ln, &t);
    return BERT8_OK;
}

/* The residual FFN-out and the LayerNorm after it, on the FFN activation h [M][I] (hq: its int8
 * form when FFN-in's product already made it, else NULL). */
static bert8_status ffn_out(bert8_session *s, const rows *r, const b8_layer *ly, int64_t layer, const float *h,
                            const int8_t *hq, double *t) {
    const b8_config *c = &s->model->cfg;
    const b8_qlinear *next = layer + 1 < c->num_layers ? ly[1].q[B8_GROUP_QKV] : NULL;
    ln_job ln = {s, ly->w[B8_PART_LN2], ly->b[B8_PART_LN2], next};
    const bool pre = c->desc->pre_norm; /* the residual stream stays unnormalized */
    gcall oc = {B8_GROUP_FFN_OUT, h, hq, s->hq.p, s->rowscale2.p, s->x.p, c->hidden_size, NULL, NULL, 0.0f,
                pre ? NULL : ln_rows, &ln};
    bert8_status st = run_group(s, ly, r->M, &oc, t);
    if (st) return st;
    prof_mark(s, BERT8_OP_FFN_OUT, t);
    if (!pre) ln_after(s, ly, B8_GROUP_FFN_OUT, r->M, &ln, t);
    return BERT8_OK;
}

/* The GLU pass h = act(gate) * up on rows [m0, m1) of s->gate into s->ffn. */
typedef struct glu_job {
    b8_glu_fn fn;
    const float *gu;
    float *h;
    int64_t I;
    b8_act act;
} glu_job;

static void glu_rows(void *ctx, int64_t m0, int64_t m1) {
    const glu_job *j = ctx;
    j->fn(j->gu + m0 * 2 * j->I, 2 * j->I, m1 - m0, j->I, j->act, j->h + m0 * j->I, j->I);
}

static void glu_rows_par(void *ctx, int64_t m0, int64_t m1, int slot) {
    (void)slot;
    glu_rows(ctx, m0, m1);
}

/* A gated FFN: FFN-in's [M][2I] gate | up product in fp32 (FP32 or INT8), h = act(gate) * up
 * (the GLU pass: inside an INT8 product on the rows each unit finished, else a pass of its own),
 * then FFN-out on h (quantized by run_group when it runs INT8). */
static bert8_status ffn_glu(bert8_session *s, const rows *r, const b8_layer *ly, int64_t layer, const float *xin,
                            double *t) {
    const b8_config *c = &s->model->cfg;
    const int64_t I = c->intermediate_size, M = r->M;
    float *gu = s->gate.p, *h = s->ffn.p;
    const b8_qlinear *qi = ly->q[B8_GROUP_FFN_IN];
    glu_job gj = {b8_glu_rows_best(), gu, h, I, c->act};
    gcall ic = {B8_GROUP_FFN_IN, xin, ln_ready(s, qi), s->xq.p, s->rowscale.p, gu, 2 * I,
                NULL, NULL, 0.0f, glu_rows, &gj};
    bert8_status st = run_group(s, ly, M, &ic, t);
    if (st) return st;
    if (!qi) {
        b8_par_for(M, 16, b8_par_threads_for(M * I, B8_PAR_MIN), glu_rows_par, &gj);
    }
    prof_mark(s, BERT8_OP_FFN_IN, t);
    if (s->observe) s->observe(s->observe_ctx, layer, B8_SITE_FFN_OUT_IN, h, M, I, I, r->mask);
    return ffn_out(s, r, ly, layer, h, NULL, t);
}

static bert8_status ffn(bert8_session *s, const rows *r, const b8_layer *ly, int64_t layer) {
    const bert8_model *m = s->model;
    const b8_config *c = &m->cfg;
    const int64_t H = c->hidden_size, I = c->intermediate_size, M = r->M;
    float *x = s->x.p, *h = s->ffn.p;
    bert8_status st;
    double t = prof_start(s);
    const bool pre = c->desc->pre_norm;
    const float *xin = x; /* pre-norm: the FFN reads LN2(x) in s->ctx */
    if (pre) {
        prenorm(s, M, ly->w[B8_PART_LN2], ly->b[B8_PART_LN2], s->ctx.p, ly->q[B8_GROUP_FFN_IN]);
        xin = s->ctx.p;
    }
    if (s->observe) s->observe(s->observe_ctx, layer, B8_SITE_FFN_IN_IN, xin, M, H, H, r->mask);
    const b8_qlinear *qi = ly->q[B8_GROUP_FFN_IN], *qo = ly->q[B8_GROUP_FFN_OUT];
    if (c->desc->ffn == B8_FFN_GLU) return ffn_glu(s, r, ly, layer, xin, &t);
    /* INT8 end to end: FFN-in -> GELU -> int8 -> FFN-out never leaves int8 (static FFN-out), or
     * FFN-in quantizes each of its fp32 output rows for a dynamic FFN-out as soon as it finished
     * them, instead of a pass of its own over the M x I floats */
    const bool fused_h = qi && qo && qo->mode == B8_QMODE_STATIC && !s->observe;
    const bool dyn_h = qi && qo && qo->mode == B8_QMODE_DYNAMIC && !s->observe;
    hq_job hj = {s, I, qo};
    gcall ic = {B8_GROUP_FFN_IN, xin, ln_ready(s, qi), s->xq.p, s->rowscale.p, fused_h ? NULL : h, I,
                fused_h ? s->hq.p : NULL, fused_h ? qo->in_mul : NULL, fused_h ? qo->a_zero : 0.0f,
                dyn_h ? hq_rows : NULL, &hj};
    if ((st = run_group(s, ly, M, &ic, &t))) return st;
    prof_mark(s, BERT8_OP_FFN_IN, &t);
    if (s->observe) s->observe(s->observe_ctx, layer, B8_SITE_FFN_OUT_IN, h, M, I, I, r->mask);
    return ffn_out(s, r, ly, layer, h, fused_h || dyn_h ? s->hq.p : NULL, &t);
}

/* ---- heads --------------------------------------------------------------------------------- */

static void set_tensor(bert8_tensor *t, const float *data, int ndim, int64_t d0, int64_t d1, int64_t d2) {
    t->data = data;
    t->ndim = ndim;
    t->shape[0] = d0;
    t->shape[1] = d1;
    t->shape[2] = d2;
    t->shape[3] = 0;
}

/* Token-level outputs: [B, T, ...] for padded batches, [tokens, ...] for packed ones. */
static void set_token_tensor(bert8_tensor *t, const rows *r, const float *data, int64_t width) {
    if (r->packed) set_tensor(t, data, width ? 2 : 1, r->M, width, 0);
    else set_tensor(t, data, width ? 3 : 2, r->nseq, r->T, width);
}

/* B8_CLS_HEAD_NORM (ModernBERT): LayerNorm(act(dense(h))) then the classifier, on the first token or
 * the mean of each sequence's real tokens (sequence classification) or on every token. */
static bert8_status head_norm(bert8_session *s, const rows *r, float *first) {
    const bert8_model *m = s->model;
    const b8_config *c = &m->cfg;
    const int64_t H = c->hidden_size, B = r->nseq, M = r->M, L = m->cls_out.n;
    b8_err *e = &s->err;
    bert8_status st;
    const float *x = s->x.p;
    float *t = s->ctx.p; /* [M][H], free after the last layer */
    if (m->info.head == BERT8_HEAD_SEQ_CLS) {
        if (c->cls_mean) {
            for (int64_t b = 0; b < B; b++) {
                float *f = first + b * H;
                int64_t n = 0;
                memset(f, 0, (size_t)H * sizeof(float));
                for (int64_t i = r->start[b]; i < r->start[b + 1]; i++) {
                    if (r->mask && !r->mask[i]) continue;
                    n++;
                    for (int64_t h = 0; h < H; h++) f[h] += x[i * H + h];
                }
                for (int64_t h = 0; h < H; h++) f[h] /= (float)(n ? n : 1);
            }
        }
        if ((st = b8_sgemm(m->cls_dense.f32, first, H, B, t, H, e))) return st;
        b8_layernorm_rows_best()(t, t, B, H, m->cls_ln_g, m->cls_ln_b, c->layer_norm_eps);
        if ((st = b8_buf_reserve(&s->logits, (size_t)(B * L), sizeof(float), e))) return st;
        if ((st = b8_sgemm(m->cls_out.f32, t, H, B, s->logits.p, L, e))) return st;
        set_tensor(&s->out.logits, s->logits.p, 2, B, L, 0);
        return BERT8_OK;
    }
    if ((st = b8_sgemm(m->cls_dense.f32, x, H, M, t, H, e))) return st;
    b8_layernorm_rows_best()(t, t, M, H, m->cls_ln_g, m->cls_ln_b, c->layer_norm_eps);
    if ((st = b8_buf_reserve(&s->logits, (size_t)(M * L), sizeof(float), e))) return st;
    if ((st = b8_sgemm(m->cls_out.f32, t, H, M, s->logits.p, L, e))) return st;
    if (m->info.head == BERT8_HEAD_TOKEN_CLS) {
        set_token_tensor(&s->out.logits, r, s->logits.p, L);
        return BERT8_OK;
    }
    if ((st = b8_buf_reserve(&s->start, (size_t)M, sizeof(float), e)) ||
        (st = b8_buf_reserve(&s->end, (size_t)M, sizeof(float), e)))
        return st;
    float *lg = s->logits.p, *sl = s->start.p, *el = s->end.p;
    for (int64_t i = 0; i < M; i++) {
        sl[i] = lg[2 * i];
        el[i] = lg[2 * i + 1];
    }
    set_token_tensor(&s->out.start_logits, r, sl, 0);
    set_token_tensor(&s->out.end_logits, r, el, 0);
    return BERT8_OK;
}

static bert8_status heads(bert8_session *s, const rows *r) {
    const bert8_model *m = s->model;
    const b8_config *c = &m->cfg;
    const int64_t H = c->hidden_size, B = r->nseq, M = r->M;
    b8_err *e = &s->err;
    bert8_status st;
    float *x = s->x.p;
    set_token_tensor(&s->out.last_hidden_state, r, x, H);
    if ((st = b8_buf_reserve(&s->first, (size_t)(B * H), sizeof(float), e)) ||
        (st = b8_buf_reserve(&s->pooled, (size_t)(B * H), sizeof(float), e)) ||
        (st = b8_buf_reserve(&s->tmp, (size_t)(B * H), sizeof(float), e)))
        return st;
    /* the first token of each sequence */
    float *first = s->first.p;
    for (int64_t b = 0; b < B; b++) memcpy(first + b * H, x + r->start[b] * H, (size_t)H * sizeof(float));
    if (m->has_pooler) {
        if ((st = b8_sgemm(m->pooler.f32, first, H, B, s->pooled.p, H, e))) return st;
        set_tensor(&s->out.pooler_output, s->pooled.p, 2, B, H, 0);
    }
    const int64_t L = m->cls_out.n;
    if (c->desc->cls == B8_CLS_HEAD_NORM && m->info.head != BERT8_HEAD_BASE) return head_norm(s, r, first);
    switch (m->info.head) {
    case BERT8_HEAD_BASE: break;
    case BERT8_HEAD_SEQ_CLS: {
        if ((st = b8_buf_reserve(&s->logits, (size_t)(B * L), sizeof(float), e))) return st;
        const float *feat = s->pooled.p;
        if (c->desc->cls != B8_CLS_POOLER) {
            if ((st = b8_sgemm(m->cls_dense.f32, first, H, B, s->tmp.p, H, e))) return st;
            feat = s->tmp.p;
        }
        if ((st = b8_sgemm(m->cls_out.f32, feat, H, B, s->logits.p, L, e))) return st;
        set_tensor(&s->out.logits, s->logits.p, 2, B, L, 0);
        break;
    }
    case BERT8_HEAD_TOKEN_CLS:
        if ((st = b8_buf_reserve(&s->logits, (size_t)(M * L), sizeof(float), e))) return st;
        if ((st = b8_sgemm(m->cls_out.f32, x, H, M, s->logits.p, L, e))) return st;
        set_token_tensor(&s->out.logits, r, s->logits.p, L);
        break;
    case BERT8_HEAD_QA: {
        if ((st = b8_buf_reserve(&s->logits, (size_t)(M * 2), sizeof(float), e)) ||
            (st = b8_buf_reserve(&s->start, (size_t)M, sizeof(float), e)) ||
            (st = b8_buf_reserve(&s->end, (size_t)M, sizeof(float), e)))
            return st;
        float *lg = s->logits.p, *sl = s->start.p, *el = s->end.p;
        if ((st = b8_sgemm(m->cls_out.f32, x, H, M, lg, 2, e))) return st;
        for (int64_t i = 0; i < M; i++) {
            sl[i] = lg[2 * i];
            el[i] = lg[2 * i + 1];
        }
        set_token_tensor(&s->out.start_logits, r, sl, 0);
        set_token_tensor(&s->out.end_logits, r, el, 0);
        break;
    }
    }
    if (r->packed) {
        s->out.cu_seqlens = r->start;
        s->out.num_sequences = B;
    }
    return BERT8_OK;
}

/* The pass over a batch check_batch has accepted. */
static bert8_status forward_rows(bert8_session *s, const input *bt, bert8_outputs *out) {
    b8_err *e = &s->err;
    const bert8_model *m = s->model;
    const b8_config *c = &m->cfg;
    bert8_status st;
    rows r;
    if ((st = make_rows(s, bt, &r))) return st;
    const int64_t H = c->hidden_size, I = c->intermediate_size, M = r.M;
    if ((st = b8_buf_reserve(&s->x, (size_t)(M * H), sizeof(float), e)) ||
        (st = b8_buf_reserve(&s->qkv, (size_t)(M * 3 * H), sizeof(float), e)) ||
        (st = b8_buf_reserve(&s->ctx, (size_t)(M * H), sizeof(float), e)) ||
        (st = b8_buf_reserve(&s->ffn, (size_t)M, (size_t)I * sizeof(float), e)) ||
        (c->desc->ffn == B8_FFN_GLU && (st = b8_buf_reserve(&s->gate, (size_t)M, (size_t)(2 * I) * sizeof(float), e))))
        return st;
    if (m->quantized &&
        ((st = b8_buf_reserve(&s->xq, (size_t)M, (size_t)H, e)) || (st = b8_buf_reserve(&s->hq, (size_t)M, (size_t)I, e)) ||
         (st = b8_buf_reserve(&s->qkvq, (size_t)M, (size_t)(3 * H), e)) ||
         (st = b8_buf_reserve(&s->rowscale, (size_t)M, sizeof(float), e)) ||
         (st = b8_buf_reserve(&s->rowscale2, (size_t)M, sizeof(float), e)) ||
         (st = b8_buf_reserve(&s->rowzero2, (size_t)M, sizeof(int32_t), e)) ||
         (st = b8_buf_reserve(&s->rowzero, (size_t)M, sizeof(int32_t), e)) ||
         (st = b8_buf_reserve(&s->ox, (size_t)M, B8_MAX_OUTLIERS * sizeof(float), e))))
        return st;
    if ((st = rel_table(s, &r)) || (st = rel_index(s, &r)) || (st = rope_table(s, &r))) return st;
    double t = prof_start(s);
    embed(s, &r);
    prof_mark(s, BERT8_OP_EMBED, &t);
    for (int64_t l = 0; l < c->num_layers; l++) {
        if ((st = attention(s, &r, &m->layers[l], l)) || (st = ffn(s, &r, &m->layers[l], l)))
            return b8_wrap(e, "layer %lld", (long long)l);
    }
    if (m->final_ln_g) layernorm_next(s, M, m->final_ln_g, m->final_ln_b, NULL);
    t = prof_start(s);
    if ((st = heads(s, &r))) return st;
    prof_mark(s, BERT8_OP_HEAD, &t);
    if (out) *out = s->out;
    return BERT8_OK;
}

/* Whether a layer's product runs FP32 on oneDNN (whose loops run on OpenMP's threads). */
static bool onednn_layers(const bert8_model *m) {
    for (int64_t l = 0; l < m->cfg.num_layers; l++)
        for (int g = 0; g < B8_GROUP_COUNT; g++)
            if (m->layers[l].f32[g] && !m->layers[l].q[g]) return true;
    return false;
}

/* ---- sequence-parallel batches -------------------------------------------------------------
 *
 * An INT8 batch of at least as many sequences as threads runs as that many groups of whole
 * sequences, each group's whole pass on one thread (a child session per group), instead of
 * every op on all threads in turn: no fork and join per op, and each thread's activations stay
 * in its own caches from one op to the next. Every INT8 op works row by row or sequence by
 * sequence (the packed-batch guarantee, test_packed), so each row comes out as one pass over the
 * whole batch gives it, bit for bit. A padded batch is cut into consecutive runs of sequences; a
 * packed one is dealt out longest first to the group with the fewest tokens so far, so that a
 * mix of lengths still gives even groups. */

/* A group may hold at most this much more than an even share of the tokens (the slowest group
 * sets the pace); a batch that cannot be cut as evenly runs op after op on all threads. */
#define B8_SPLIT_IMBALANCE 1.05
/* Groups of one call at most; with more threads than this, calls run op after op (a group per
 * thread or none: fewer groups would leave threads idle for the whole pass). */
#define B8_SPLIT_MAX 256
#define B8_SPLIT_OUTPUTS 5

static bert8_tensor *out_tensor(bert8_outputs *o, int k) {
    bert8_tensor *t[B8_SPLIT_OUTPUTS] = {&o->last_hidden_state, &o->pooler_output, &o->logits, &o->start_logits,
                                         &o->end_logits};
    return t[k];
}

static int64_t seq_len(const input *bt, int64_t b) {
    return bt->cu_seqlens ? bt->cu_seqlens[b + 1] - bt->cu_seqlens[b] : bt->seq;
}

/* The groups of a call: group i holds the sequences order[gs[i]] .. order[gs[i+1] - 1], in batch
 * order; its tokens start at tok[i] of the gathered ids (packed batches). */
typedef struct split_plan {
    int g;
    int64_t gs[B8_SPLIT_MAX + 1], tok[B8_SPLIT_MAX + 1];
    const int64_t *order;
} split_plan;

static int desc_key(const void *x, const void *y) {
    const int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return a < b ? 1 : a > b ? -1 : 0;
}

/* Whether the session's calls may split into sequence groups: an INT8 model loaded without
 * BERT8_SEQ_PARALLEL=0 and no calibration hook (forward() also leaves out models whose products
 * run on oneDNN's OpenMP threads). Such a session runs its op-by-op calls in the first group's
 * session too (kid_forward). */
static bool may_split(const bert8_session *s) {
    return s->model->quantized && s->model->seq_parallel && !s->observe;
}

/* The groups for this call (p->g), or 0: the call runs op after op on all threads. */
static int split_groups(bert8_session *s, const input *bt, split_plan *p) {
    const int g = b8_par_threads();
    const int64_t B = bt->batch;
    if (g < 2 || g > B8_SPLIT_MAX || B < g) return 0;
    /* s->split_order: the group of each sequence [B], then the order [B] */
    if (b8_buf_reserve(&s->split_order, (size_t)(2 * B), sizeof(int64_t), NULL)) return 0;
    int64_t *grp = s->split_order.p, *order = grp + B;
    int64_t load[B8_SPLIT_MAX] = {0}, total = 0, count[B8_SPLIT_MAX] = {0};
    if (!bt->cu_seqlens) {
        for (int64_t b = 0; b < B; b++) grp[b] = b * g / B; /* consecutive runs, sizes within 1 */
        for (int64_t b = 0; b < B; b++) load[grp[b]] += bt->seq;
    } else {
        /* longest first, each to the lightest group: keys length << 23 | (2^23 - 1 - index),
         * sorted down (lengths and counts stay below 2^22) */
        for (int64_t b = 0; b < B; b++) order[b] = seq_len(bt, b) << 23 | (((int64_t)1 << 23) - 1 - b);
        qsort(order, (size_t)B, sizeof *order, desc_key);
        for (int64_t q = 0; q < B; q++) {
            const int64_t b = ((int64_t)1 << 23) - 1 - (order[q] & (((int64_t)1 << 23) - 1));
            int best = 0;
            for (int i = 1; i < g; i++)
                if (load[i] < load[best]) best = i;
            grp[b] = best;
            load[best] += seq_len(bt, b);
        }
    }
    int64_t most = 0;
    for (int i = 0; i < g; i++) {
        total += load[i];
        if (load[i] > most) most = load[i];
    }
    if ((double)most * g > B8_SPLIT_IMBALANCE * (double)total) return 0;
    for (int64_t b = 0; b < B; b++) count[grp[b]]++;
    p->gs[0] = p->tok[0] = 0;
    for (int i = 0; i < g; i++) {
        if (!count[i]) return 0;
        p->gs[i + 1] = p->gs[i] + count[i];
        p->tok[i + 1] = p->tok[i] + load[i];
    }
    int64_t at[B8_SPLIT_MAX];
    for (int i = 0; i < g; i++) at[i] = p->gs[i];
    for (int64_t b = 0; b < B; b++) order[at[grp[b]]++] = b;
    p->order = order;
    p->g = g;
    return g;
}

typedef struct split_job {
    bert8_session *s;
    const input *bt;
    const split_plan *p;
    input sub[B8_SPLIT_MAX];
    bert8_outputs out[B8_SPLIT_MAX];
    bert8_status st[B8_SPLIT_MAX];
    float *dst[B8_SPLIT_OUTPUTS];
    bool per_token[B8_SPLIT_OUTPUTS]; /* a row per token (a token-level output of a packed batch) */
} split_job;

static void split_run(void *ctx, int64_t i0, int64_t i1, int slot) {
    (void)slot;
    split_job *j = ctx;
    const int was = b8_par_set_alone(1);
    for (int64_t i = i0; i < i1; i++) j->st[i] = forward_rows(j->s->kids[i], &j->sub[i], &j->out[i]);
    b8_par_set_alone(was);
}

/* Each group's outputs into the call's, at its sequences' rows: a token-level output of a packed
 * batch has a row per token (then each sequence's rows move together), every other output a row
 * per sequence ([B, T, w] of a padded batch counts T x w as one row). */
static void split_copy(void *ctx, int64_t i0, int64_t i1, int slot) {
    (void)slot;
    split_job *j = ctx;
    const split_plan *p = j->p;
    const int64_t *cu = j->bt->cu_seqlens;
    for (int64_t i = i0; i < i1; i++) {
        const input *u = &j->sub[i];
        const int64_t n = u->batch;
        for (int k = 0; k < B8_SPLIT_OUTPUTS; k++) {
            const bert8_tensor *t = out_tensor(&j->out[i], k);
            if (!j->dst[k]) continue;
            int64_t row = 1;
            for (int d = 1; d < t->ndim; d++) row *= t->shape[d];
            for (int64_t q = 0; q < n; q++) {
                const int64_t b = p->order[p->gs[i] + q];
                if (j->per_token[k])
                    memcpy(j->dst[k] + cu[b] * row, t->data + u->cu_seqlens[q] * row,
                           (size_t)((cu[b + 1] - cu[b]) * row) * sizeof(float));
                else
                    memcpy(j->dst[k] + b * row, t->data + q * row, (size_t)row * sizeof(float));
            }
        }
    }
}

/* The sessions of the first g groups (s->kids), made on first need. */
static bert8_status need_kids(bert8_session *s, int g) {
    if (s->nkids >= g) return BERT8_OK;
    bert8_session **k = realloc(s->kids, (size_t)g * sizeof *k);
    if (!k) return b8_fail(&s->err, BERT8_ERR_NOMEM, "out of memory for %d sessions of sequence groups", g);
    s->kids = k;
    for (; s->nkids < g; s->nkids++)
        if (bert8_session_create(s->model, &s->kids[s->nkids]) != BERT8_OK)
            return b8_fail(&s->err, BERT8_ERR_NOMEM, "out of memory for %d sessions of sequence groups", g);
    return BERT8_OK;
}

static bert8_status split_forward(bert8_session *s, const input *bt, const split_plan *p, bert8_outputs *out) {
    b8_err *e = &s->err;
    const int g = p->g;
    const int64_t B = bt->batch;
    const bool packed = bt->cu_seqlens != NULL;
    bert8_status st;
    if ((st = need_kids(s, g))) return st;
    if (packed && ((st = b8_buf_reserve(&s->splitcu, (size_t)(B + g), sizeof(int64_t), e)) ||
                   (st = b8_buf_reserve(&s->split_ids, (size_t)p->tok[g], sizeof(int32_t), e)) ||
                   (bt->token_type_ids &&
                    (st = b8_buf_reserve(&s->split_types, (size_t)p->tok[g], sizeof(int32_t), e)))))
        return st;
    split_job *j = calloc(1, sizeof *j);
    if (!j) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory for a sequence-parallel call");
    j->s = s;
    j->bt = bt;
    j->p = p;
    for (int i = 0; i < g; i++) {
        const int64_t n = p->gs[i + 1] - p->gs[i], b0 = p->order[p->gs[i]];
        input *u = &j->sub[i];
        *u = *bt;
        u->batch = n;
        if (!packed) { /* consecutive sequences: the batch's own rows */
            u->input_ids = bt->input_ids + b0 * bt->seq;
            if (bt->attention_mask) u->attention_mask = bt->attention_mask + b0 * bt->seq;
            if (bt->token_type_ids) u->token_type_ids = bt->token_type_ids + b0 * bt->seq;
        } else { /* the group's sequences gathered */
            int64_t *cu = (int64_t *)s->splitcu.p + p->gs[i] + i;
            int32_t *ids = (int32_t *)s->split_ids.p + p->tok[i];
            int32_t *types = bt->token_type_ids ? (int32_t *)s->split_types.p + p->tok[i] : NULL;
            cu[0] = 0;
            for (int64_t q = 0; q < n; q++) {
                const int64_t b = p->order[p->gs[i] + q], t0 = bt->cu_seqlens[b], len = seq_len(bt, b);
                memcpy(ids + cu[q], bt->input_ids + t0, (size_t)len * sizeof(int32_t));
                if (types) memcpy(types + cu[q], bt->token_type_ids + t0, (size_t)len * sizeof(int32_t));
                cu[q + 1] = cu[q] + len;
            }
            u->input_ids = ids;
            u->token_type_ids = types;
            u->cu_seqlens = cu;
        }
        bert8_session *k = s->kids[i];
        b8_err_clear(&k->err);
        memset(&k->out, 0, sizeof k->out);
        bert8_session_set_profiling(k, s->profiling);
    }
    b8_par_for(g, 1, g, split_run, j);
    for (int i = 0; i < g; i++)
        if (j->st[i]) {
            st = b8_fail(e, j->st[i], "sequence group %d of %d (%lld sequences): %s", i + 1, g,
                         (long long)(p->gs[i + 1] - p->gs[i]), s->kids[i]->err.msg);
            free(j);
            return st;
        }
    if (s->profiling) /* the groups ran side by side: each op's time is their mean */
        for (int op = 0; op < BERT8_OP_COUNT; op++) {
            double sum = 0.0;
            for (int i = 0; i < g; i++) sum += s->kids[i]->prof[op];
            s->prof[op] += sum / g;
        }
    /* the outputs, in the call's own buffers */
    b8_buf *bufs[B8_SPLIT_OUTPUTS] = {&s->x, &s->pooled, &s->logits, &s->start, &s->end};
    memset(&s->out, 0, sizeof s->out);
    for (int k = 0; k < B8_SPLIT_OUTPUTS; k++) {
        const bert8_tensor *t0 = out_tensor(&j->out[0], k);
        if (!t0->data) continue;
        int64_t rows = 0, row = 1;
        for (int d = 1; d < t0->ndim; d++) row *= t0->shape[d];
        for (int i = 0; i < g; i++) rows += out_tensor(&j->out[i], k)->shape[0];
        /* rows per token or per sequence: told apart by the total (a group of length-1 sequences
         * alone has as many of one as of the other; when the whole batch does, both agree) */
        j->per_token[k] = packed && rows == p->tok[g] && rows != B;
        if ((st = b8_buf_reserve(bufs[k], (size_t)rows, (size_t)row * sizeof(float), e))) {
            free(j);
            return st;
        }
        j->dst[k] = bufs[k]->p;
        bert8_tensor *t = out_tensor(&s->out, k);
        *t = *t0;
        t->shape[0] = rows;
        t->data = j->dst[k];
    }
    b8_par_for(g, 1, g, split_copy, j);
    free(j);
    if (packed) {
        if ((st = b8_buf_reserve(&s->starts, (size_t)(B + 1), sizeof(int64_t), e))) return st;
        memcpy(s->starts.p, bt->cu_seqlens, (size_t)(B + 1) * sizeof(int64_t));
        s->out.cu_seqlens = s->starts.p;
        s->out.num_sequences = B;
    }
    if (out) *out = s->out;
    return BERT8_OK;
}

/* An op-by-op call of a session whose calls may split: run in the first group's session, so that
 * the session keeps one workspace for its largest batch (shared with the first group of its
 * split calls) rather than its own beside the groups' (test_seq_parallel, test_memory). The
 * outputs stay in that session's buffers, valid until the next call, as every call's are. */
static bert8_status kid_forward(bert8_session *s, const input *bt, bert8_outputs *out) {
    bert8_status st = need_kids(s, 1);
    if (st) return st;
    bert8_session *k = s->kids[0];
    b8_err_clear(&k->err);
    memset(&k->out, 0, sizeof k->out);
    bert8_session_set_profiling(k, s->profiling);
    if ((st = forward_rows(k, bt, &s->out))) {
        s->err = k->err;
        return st;
    }
    for (int op = 0; s->profiling && op < BERT8_OP_COUNT; op++) s->prof[op] += k->prof[op];
    if (out) *out = s->out;
    return BERT8_OK;
}

/* The pass on bert8's pool, or, where oneDNN runs the layers' products on OpenMP's threads, on
 * OpenMP too: two pools spinning for the same cores would slow each other down. */
static bert8_status forward(bert8_session *s, const input *bt, bert8_outputs *out) {
    const bert8_model *m = s->model;
    const bool omp = onednn_layers(m);
    bert8_status st = check_batch(m, bt, &s->err);
    if (st) return st;
    split_plan p;
    s->groups = 0;
    if (!omp && may_split(s)) {
        if (bt->batch >= 2 && split_groups(s, bt, &p)) {
            s->groups = p.g;
            return split_forward(s, bt, &p, out);
        }
        return kid_forward(s, bt, out);
    }
    const int was = b8_par_set_omp(omp);
    st = forward_rows(s, bt, out);
    b8_par_set_omp(was);
    return st;
}

/* Starts a call: clears the error and the outputs; false when s is NULL. */
static bool begin(bert8_session *s, bert8_outputs *out) {
    if (out) memset(out, 0, sizeof *out);
    if (!s) return false;
    b8_threads_apply();
    b8_err_clear(&s->err);
    memset(&s->out, 0, sizeof s->out);
    return true;
}

bert8_status bert8_forward(bert8_session *s, const bert8_batch *bt, bert8_outputs *out) {
    if (!begin(s, out)) return BERT8_ERR_INVALID_ARG;
    if (!bt) return b8_fail(&s->err, BERT8_ERR_INVALID_ARG, "batch is NULL");
    input in = {bt->batch, bt->seq, bt->input_ids, bt->attention_mask, bt->token_type_ids, NULL};
    return forward(s, &in, out);
}

bert8_status bert8_forward_packed(bert8_session *s, const bert8_packed_batch *bt, bert8_outputs *out) {
    if (!begin(s, out)) return BERT8_ERR_INVALID_ARG;
    if (!bt || !bt->cu_seqlens) return b8_fail(&s->err, BERT8_ERR_INVALID_ARG, "packed batch or its cu_seqlens is NULL");
    input in = {bt->num_sequences, 0, bt->input_ids, NULL, bt->token_type_ids, bt->cu_seqlens};
    return forward(s, &in, out);
}

bert8_status bert8_mlm_logits(bert8_session *s, const float *hidden, int64_t n, float *out) {
    if (!s) return BERT8_ERR_INVALID_ARG;
    b8_err *e = &s->err;
    b8_err_clear(e);
    const bert8_model *m = s->model;
    const b8_config *c = &m->cfg;
    if (!m->has_mlm)
        return b8_fail(e, BERT8_ERR_UNSUPPORTED, "%s has no masked-LM head (architecture \"%s\")", m->dir,
                       c->architecture);
    if (n < 0 || (n > 0 && (!hidden || !out)) || n > B8_MAX_TOKENS)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "bert8_mlm_logits: %lld rows (hidden and out must be given)",
                       (long long)n);
    if (n == 0) return BERT8_OK;
    b8_threads_apply();
    const int64_t H = c->hidden_size;
    bert8_status st = b8_buf_reserve(&s->mlm, (size_t)n, (size_t)H * sizeof(float), e);
    if (st) return st;
    float *t = s->mlm.p;
    if ((st = b8_sgemm(m->mlm_dense.f32, hidden, H, n, t, H, e))) return st;
    b8_layernorm_rows_best()(t, t, n, H, m->mlm_ln_g, m->mlm_ln_b, c->layer_norm_eps);
    const b8_qlinear *q = m->mlm_q;
    if (!q) return b8_sgemm(m->mlm_dec, t, H, n, out, c->vocab_size, e);
    if ((st = b8_buf_reserve(&s->xq, (size_t)n, (size_t)H, e)) ||
        (st = b8_buf_reserve(&s->rowscale, (size_t)n, sizeof(float), e)))
        return st;
    b8_quantize_dynamic(t, H, n, H, q->in_mul, s->xq.p, H, s->rowscale.p);
    b8_qepilogue ep = {.a_scale = s->rowscale.p, .a_scale_per_row = true, .bias = q->bias, .act = B8_ACT_NONE,
                       .out_f32 = out, .ldc = c->vocab_size};
    return b8_qgemm(s->xq.p, H, n, q->packed, &ep, &s->gemm_ws, e);
}
