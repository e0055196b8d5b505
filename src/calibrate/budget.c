/* budget.c: bert8_quantize_budget: INT8 to an accuracy budget (the contract is in bert8.h), a
 * search over the quantization units of calibrate/units.h.
 *
 * The search calibrates once and prepares every unit's INT8 forms once (the scheme's mode and,
 * for a static scheme, the dynamic fallback). A candidate is a fresh copy of the FP32 model
 * (its own mapping of the checkpoint, as bert8_quantize makes) with copies of the chosen forms
 * installed; the caller's callback scores it and it is freed. Every scored configuration is
 * remembered, so an order that revisits one (the two rankings often start alike) costs no
 * evaluation.
 *
 * Why dynamic before FP32: an int8_dynamic Linear keeps the int8 GEMM and only adds a per-token
 * scale, while an FP32 one gives the int8 GEMM up; and outliers that vary from token to token,
 * the usual cause of a static loss, are what per-token scales absorb (docs/accuracy.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibrate/calibrate.h"
#include "calibrate/smoothquant.h"
#include "calibrate/units.h"
#include "kernels/quantize/quantize.h"

/* Calibration sequences the attention units' output error is measured on. */
#define ATT_SEQS 16

/* A score equal to the budget's edge counts as within it (scores are sums of fractions). */
#define DROP_EPS 1e-9

const char *bert8_ranking_name(bert8_ranking r) {
    switch (r) {
    case BERT8_RANK_BOTH: return "both";
    case BERT8_RANK_OUTPUT_ERROR: return "output-error";
    case BERT8_RANK_METRIC: return "metric";
    }
    return "?";
}

bert8_budget_params bert8_default_budget_params(void) {
    bert8_budget_params p = {.max_drop = 0.5, .ranking = BERT8_RANK_BOTH, .allow_dynamic = 1, .trim = 1};
    return p;
}

void bert8_budget_report_free(bert8_budget_report *r) {
    if (!r) return;
    free(r->units);
    for (int i = 0; i < 2; i++) {
        free(r->trials[i].order);
        free(r->trials[i].modes);
    }
    memset(r, 0, sizeof *r);
}

/* ---- the search state ------------------------------------------------------------------- */

typedef struct seen_cfg {
    bert8_unit_mode *modes; /* [U] */
    double score;
} seen_cfg;

/* A unit's prepared INT8 form in one mode: a Linear, or an attention's scales. */
typedef struct b8_form {
    b8_qlinear *q;
    b8_qattn *att;
} b8_form;

typedef struct search {
    const bert8_model *fp32;
    const bert8_quant_params *qp;
    const bert8_budget_params *bp;
    int64_t U;
    b8_form (*forms)[3]; /* [U][bert8_unit_mode]: the prepared INT8 forms; [FP32] is empty */
    bool *fixed;         /* [U]: not searched (keep_fp32; attention without int8_attention) */
    bert8_unit_mode ladder[3]; /* of a Linear group; an attention unit's is static, fp32 */
    int rungs;
    int64_t calib_samples;
    double fp32_score;
    seen_cfg *seen;
    size_t n_seen, cap_seen;
    int64_t evaluations;
    b8_err *e;
} search;

static void search_free(search *S) {
    for (int64_t u = 0; S->forms && u < S->U; u++)
        for (int m = 0; m < 3; m++) {
            b8_qlinear_free(S->forms[u][m].q);
            b8_qattn_free(S->forms[u][m].att);
        }
    free(S->forms);
    free(S->fixed);
    for (size_t i = 0; i < S->n_seen; i++) free(S->seen[i].modes);
    free(S->seen);
}

/* The modes a unit steps through, safest last; returns how many. A static scheme's FFN-in and
 * FFN-out start per token, as bert8_quantize makes them (ffn_in_per_token, ffn_out_per_token). */
static int ladder_of(const search *S, int64_t u, bert8_unit_mode lad[3]) {
    const b8_unit_desc *d = &b8_unit_table[u % B8_UNITS_PER_LAYER];
    if (d->kind == B8_UNIT_ATTENTION) {
        lad[0] = BERT8_UNIT_INT8_STATIC;
        lad[1] = BERT8_UNIT_FP32;
        return 2;
    }
    if (S->qp->scheme == BERT8_SCHEME_STATIC && ((d->group == B8_GROUP_FFN_OUT && S->qp->ffn_out_per_token) ||
                                                 (d->group == B8_GROUP_FFN_IN && S->qp->ffn_in_per_token))) {
        lad[0] = BERT8_UNIT_INT8_DYNAMIC;
        lad[1] = BERT8_UNIT_FP32;
        return 2;
    }
    memcpy(lad, S->ladder, sizeof S->ladder);
    return S->rungs;
}

/* Where mode is on unit u's ladder (its length when it is not on it). */
static int rung_of(const search *S, int64_t u, bert8_unit_mode m) {
    bert8_unit_mode lad[3];
    const int n = ladder_of(S, u, lad);
    for (int r = 0; r < n; r++)
        if (lad[r] == m) return r;
    return n;
}

/* A layer's attention runs INT8 only while its QKV product does. */
static void normalize(const search *S, bert8_unit_mode *modes) {
    for (int64_t u = B8_UNIT_ATTENTION_POS; u < S->U; u += B8_UNITS_PER_LAYER)
        if (modes[u - B8_UNIT_ATTENTION_POS + B8_UNIT_QKV_POS] == BERT8_UNIT_FP32) modes[u] = BERT8_UNIT_FP32;
}

/* The attention units' output error: on the first ATT_SEQS calibration sequences, run one at a
 * time through the FP32 model so the observer sees whole sequences, the attention block's output
 * (every head's context through the FP32 attention-output weights, which is what the rest of the
 * layer sees: a context channel the weights scale down matters less) from the observed Q, K and V
 * in FP32, against the INT8 attention's arithmetic: Q, K, V rounded to int8 with the unit's
 * scales, probabilities rounded to u8 against their row maximum. */
typedef struct att_obs {
    int64_t H, T;
    float *qkv; /* [layers][3][T][H] */
} att_obs;

static void att_observe(void *ctx, int64_t layer, b8_site site, const float *x, int64_t rows, int64_t cols,
                        int64_t ld, const int32_t *mask) {
    att_obs *o = ctx;
    const int i = site == B8_SITE_Q ? 0 : site == B8_SITE_K ? 1 : site == B8_SITE_V ? 2 : -1;
    if (i < 0 || cols != o->H || rows != o->T) return;
    float *dst = o->qkv + ((size_t)layer * 3 + (size_t)i) * (size_t)(o->T * o->H);
    for (int64_t r = 0; r < rows; r++) memcpy(dst + r * o->H, x + r * ld, (size_t)o->H * sizeof(float));
    (void)mask;
}

/* The context [T][H] of every head from q, k, v [T][H] (p: [T] scratch); u8: the INT8 kernel's
 * probability rounding. */
static void att_context(const float *q, const float *k, const float *v, int64_t T, int64_t H, int64_t A, bool u8,
                        float *p, float *ctx) {
    const int64_t d = H / A;
    const float scale = 1.0f / sqrtf((float)d);
    for (int64_t h = 0; h < A; h++)
        for (int64_t i = 0; i < T; i++) {
            float mx = -INFINITY, pmax = 0;
            double sum = 0;
            for (int64_t j = 0; j < T; j++) {
                float sc = 0;
                for (int64_t c = 0; c < d; c++) sc += q[i * H + h * d + c] * k[j * H + h * d + c];
                p[j] = sc * scale;
                mx = p[j] > mx ? p[j] : mx;
            }
            for (int64_t j = 0; j < T; j++) sum += (p[j] = expf(p[j] - mx));
            for (int64_t j = 0; j < T; j++) {
                p[j] = (float)(p[j] / sum);
                pmax = p[j] > pmax ? p[j] : pmax;
            }
            if (u8 && pmax > 0)
                for (int64_t j = 0; j < T; j++) p[j] = nearbyintf(p[j] * 255.0f / pmax) * pmax / 255.0f;
            for (int64_t c = 0; c < d; c++) {
                float acc = 0;
                for (int64_t j = 0; j < T; j++) acc += p[j] * v[j * H + h * d + c];
                ctx[i * H + h * d + c] = acc;
            }
        }
}

/* Adds one layer's output error and reference energy for one sequence (q, k, v: [T][H]; wo:
 * the attention-output weights [H][H]; tmp: 5 T H + T + 2 H floats). */
static void att_error(const float *q, const float *k, const float *v, int64_t T, int64_t H, int64_t A,
                      const b8_qattn *f, const float *wo, float *tmp, double *err, double *ref) {
    float *qq = tmp, *kq = qq + T * H, *vq = kq + T * H, *c0 = vq + T * H, *c1 = c0 + T * H, *p = c1 + T * H;
    for (int64_t i = 0; i < T * H; i++) {
        qq[i] = b8_q8(q[i] / f->sq) * f->sq;
        kq[i] = b8_q8(k[i] / f->sk) * f->sk;
        const float sv = f->sv_ch ? f->sv_ch[i % H] : f->sv;
        vq[i] = b8_q8(v[i] / sv) * sv;
    }
    att_context(q, k, v, T, H, A, false, p, c0);
    att_context(qq, kq, vq, T, H, A, true, p, c1);
    for (int64_t i = 0; i < T; i++)
        for (int64_t n = 0; n < H; n++) {
            double y0 = 0, y1 = 0;
            for (int64_t c = 0; c < H; c++) {
                y0 += (double)wo[n * H + c] * c0[i * H + c];
                y1 += (double)wo[n * H + c] * c1[i * H + c];
            }
            *err += (y1 - y0) * (y1 - y0);
            *ref += y0 * y0;
        }
}

static bert8_status att_output_errors(search *S, const bert8_batch *calib, size_t n_calib, bert8_budget_unit *units) {
    const bert8_model *m = S->fp32;
    const int64_t L = m->cfg.num_layers, H = m->cfg.hidden_size, A = m->cfg.num_heads;
    int64_t Tmax = 0;
    for (size_t i = 0; i < n_calib; i++) Tmax = calib[i].seq > Tmax ? calib[i].seq : Tmax;
    double *err = calloc((size_t)L + 1, sizeof *err), *ref = calloc((size_t)L + 1, sizeof *ref);
    att_obs o = {H, 0, NULL};
    float *tmp = NULL;
    bert8_session *s = NULL;
    bert8_status st = BERT8_ERR_NOMEM;
    size_t cnt;
    if (!err || !ref || !b8_mul_ok((size_t)(L * 3 * H), (size_t)Tmax, &cnt) ||
        !(o.qkv = malloc(cnt * sizeof *o.qkv + 1)) || !(tmp = malloc(((size_t)(5 * Tmax * H + Tmax + 2 * H)) * sizeof *tmp))) {
        b8_fail(S->e, BERT8_ERR_NOMEM, "out of memory for the attention output error");
        goto out;
    }
    if ((st = bert8_session_create(m, &s))) {
        b8_fail(S->e, st, "out of memory creating a session");
        goto out;
    }
    b8_session_set_observer(s, att_observe, &o);
    int64_t seqs = 0;
    for (size_t i = 0; i < n_calib && seqs < ATT_SEQS; i++) {
        const bert8_batch *b = &calib[i];
        for (int64_t r = 0; r < b->batch && seqs < ATT_SEQS; r++) {
            int64_t len = 0; /* right-padded rows: the real tokens come first */
            while (len < b->seq && (!b->attention_mask || b->attention_mask[r * b->seq + len])) len++;
            if (len < 2) continue;
            bert8_batch one = {1, len, b->input_ids + r * b->seq, NULL,
                               b->token_type_ids ? b->token_type_ids + r * b->seq : NULL};
            o.T = len;
            if ((st = bert8_forward(s, &one, NULL))) {
                b8_fail(S->e, st, "the attention output error: %s", bert8_session_last_error(s));
                goto out;
            }
            for (int64_t l = 0; l < L; l++) {
                const b8_form *f = &S->forms[l * B8_UNITS_PER_LAYER + B8_UNIT_ATTENTION_POS][BERT8_UNIT_INT8_STATIC];
                const float *wo = m->layers[l].w[B8_PART_ATTN_OUT];
                if (!f->att || !wo) continue;
                const float *q = o.qkv + (size_t)l * 3 * (size_t)(len * H);
                att_error(q, q + len * H, q + 2 * len * H, len, H, A, f->att, wo, tmp, &err[l], &ref[l]);
            }
            seqs++;
        }
    }
    for (int64_t l = 0; l < L; l++) {
        bert8_budget_unit *bu = &units[l * B8_UNITS_PER_LAYER + B8_UNIT_ATTENTION_POS];
        if (!bu->fixed && seqs > 0) bu->output_error = ref[l] > 0 ? err[l] / ref[l] : err[l];
    }
    st = BERT8_OK;
out:
    bert8_session_free(s);
    free(o.qkv);
    free(tmp);
    free(err);
    free(ref);
    return st;
}

/* The INT8 forms of every unit the ladder uses, and each Linear unit's output error in the
 * scheme's mode (written into the report's units). */
static bert8_status prepare_forms(search *S, const b8_calib *cs, bert8_budget_unit *units) {
    const bert8_model *m = S->fp32;
    bert8_status st = BERT8_OK;
    for (int64_t u = 0; u < S->U && !st; u++) {
        const int64_t l = u / B8_UNITS_PER_LAYER;
        const b8_unit_desc *d = &b8_unit_table[u % B8_UNITS_PER_LAYER];
        units[u].layer = l;
        units[u].kind = d->key;
        units[u].output_error = NAN;
        units[u].metric_drop = NAN;
        switch (d->kind) {
        case B8_UNIT_LINEAR: {
            S->fixed[u] = b8_group_kept(m, l, d->group, S->qp->keep_fp32);
            units[u].fixed = S->fixed[u];
            if (S->fixed[u]) break;
            const float *w, *b;
            bool owned;
            int64_t n, k;
            b8_group_dims(m->cfg.desc, d->group, m->cfg.hidden_size, m->cfg.intermediate_size, &n, &k);
            if ((st = b8_layer_group_fp32(m, l, d->group, &w, &b, &owned, S->e))) break;
            const b8_site_stats *ss = b8_calib_site(cs, l, b8_group_table[d->group].site);
            bert8_unit_mode lad[3];
            const int nl = ladder_of(S, u, lad);
            for (int r = 0; r < nl && !st; r++) {
                const bert8_unit_mode mode = lad[r];
                if (mode == BERT8_UNIT_FP32) continue;
                st = b8_quantize_group(w, b, n, k, ss, S->qp, b8_qmode_of_unit_mode(mode), b8_group_zero_ok(d->group),
                                       &S->forms[u][mode].q, S->e);
            }
            if (!st) st = b8_group_output_error(w, n, k, ss, S->forms[u][lad[0]].q, &units[u].output_error, S->e);
            if (owned) {
                b8_free_aligned((void *)w);
                b8_free_aligned((void *)b);
            }
            if (st) b8_wrap(S->e, "layer %lld %s", (long long)l, d->key);
            break;
        }
        case B8_UNIT_ATTENTION: {
            /* searched with int8_attention, while the product feeding it is */
            S->fixed[u] = !S->qp->int8_attention || S->fixed[u - B8_UNIT_ATTENTION_POS + B8_UNIT_QKV_POS];
            units[u].fixed = S->fixed[u];
            if (S->fixed[u]) break;
            float sc[3], *sv_ch = malloc((size_t)m->cfg.hidden_size * sizeof(float));
            if (!sv_ch) {
                st = b8_fail(S->e, BERT8_ERR_NOMEM, "out of memory");
                break;
            }
            b8_qattn_scales(cs, l, sc, sv_ch);
            st = b8_qattn_make(sc[0], sc[1], sc[2], sv_ch, m->cfg.hidden_size, &S->forms[u][BERT8_UNIT_INT8_STATIC].att,
                               S->e);
            free(sv_ch);
            if (st) b8_wrap(S->e, "layer %lld %s", (long long)l, d->key);
            break;
        }
        }
    }
    return st;
}

/* A candidate: a fresh copy of the FP32 model with copies of the chosen forms installed. */
static bert8_status build_candidate(const search *S, const bert8_unit_mode *modes, bert8_model **out) {
    *out = NULL;
    char lerr[1024];
    bert8_load_params lp = bert8_default_load_params();
    lp.lora_task = S->fp32->lora_task; /* the same adapters folded */
    bert8_model *m = NULL;
    bert8_status st = bert8_model_load(S->fp32->dir, &lp, &m, lerr, sizeof lerr);
    if (st) return b8_fail(S->e, st, "loading a candidate copy of %s: %s", S->fp32->dir, lerr);
    m->quantized = true;
    m->scheme = S->qp->scheme;
    m->calib_samples = S->calib_samples;
    m->weight_bits = S->qp->weight_bits;
    snprintf(m->keep_fp32, sizeof m->keep_fp32, "%s", S->qp->keep_fp32 ? S->qp->keep_fp32 : "");
    for (int64_t u = 0; u < S->U && !st; u++) {
        if (modes[u] == BERT8_UNIT_FP32) continue;
        const b8_unit_desc *d = &b8_unit_table[u % B8_UNITS_PER_LAYER];
        const b8_form *form = &S->forms[u][modes[u]];
        b8_layer *ly = &m->layers[u / B8_UNITS_PER_LAYER];
        if (!form->q && !form->att) {
            st = b8_fail(S->e, BERT8_ERR_INTERNAL, "unit %lld has no %s form", (long long)u,
                         bert8_unit_mode_name(modes[u]));
            break;
        }
        switch (d->kind) {
        case B8_UNIT_LINEAR:
            if (!(ly->q[d->group] = b8_qlinear_copy(form->q)))
                st = b8_fail(S->e, BERT8_ERR_NOMEM, "out of memory for a candidate");
            break;
        case B8_UNIT_ATTENTION: /* after its layer's QKV unit (a lower index): only over an INT8 one */
            if (ly->q[d->group])
                st = b8_qattn_make(form->att->sq, form->att->sk, form->att->sv, form->att->sv_ch, m->cfg.hidden_size,
                                   &ly->att, S->e);
            break;
        }
    }
    if (!st) st = b8_model_prepare_int8(m, S->e);
    if (st) {
        bert8_model_free(m);
        return st;
    }
    m->info.quantized = 1;
    m->info.scheme = S->qp->scheme;
    m->info.weight_bits = m->weight_bits;
    *out = m;
    return BERT8_OK;
}

static bool all_fp32(const search *S, const bert8_unit_mode *modes) {
    for (int64_t u = 0; u < S->U; u++)
        if (modes[u] != BERT8_UNIT_FP32) return false;
    return true;
}

/* The score of a configuration: remembered, or the callback's on a new candidate. */
static bert8_status score_of(search *S, const bert8_unit_mode *modes, double *score, bool *cached) {
    const size_t bytes = (size_t)S->U * sizeof *modes;
    for (size_t i = 0; i < S->n_seen; i++)
        if (!memcmp(S->seen[i].modes, modes, bytes)) {
            *score = S->seen[i].score;
            *cached = true;
            return BERT8_OK;
        }
    *cached = false;
    if (S->n_seen == S->cap_seen) {
        size_t cap = S->cap_seen ? S->cap_seen * 2 : 64;
        seen_cfg *ns = realloc(S->seen, cap * sizeof *ns);
        if (!ns) return b8_fail(S->e, BERT8_ERR_NOMEM, "out of memory");
        S->seen = ns;
        S->cap_seen = cap;
    }
    bert8_unit_mode *copy = malloc(bytes ? bytes : 1);
    if (!copy) return b8_fail(S->e, BERT8_ERR_NOMEM, "out of memory");
    memcpy(copy, modes, bytes);
    bert8_model *cand = NULL;
    bert8_status st = BERT8_OK;
    const bert8_model *run = S->fp32;
    if (!all_fp32(S, modes)) {
        if ((st = build_candidate(S, modes, &cand))) {
            free(copy);
            return st;
        }
        run = cand;
    }
    char msg[1024] = "";
    double v = NAN;
    st = S->bp->eval(S->bp->eval_ctx, run, &v, msg, sizeof msg);
    S->evaluations++;
    bert8_model_free(cand);
    if (st) {
        free(copy);
        return b8_fail(S->e, st, "the evaluation callback failed: %s", msg[0] ? msg : bert8_status_string(st));
    }
    if (!isfinite(v)) {
        free(copy);
        return b8_fail(S->e, BERT8_ERR_INVALID_ARG, "the evaluation callback returned a score of %g, not a finite number",
                       v);
    }
    S->seen[S->n_seen++] = (seen_cfg){copy, v};
    *score = v;
    return BERT8_OK;
}

static void emit(const search *S, bert8_budget_stage stage, bert8_ranking rk, int64_t unit, bert8_unit_mode mode,
                 double score, int64_t done, int64_t total, bool cached, bool accepted) {
    if (!S->bp->progress) return;
    bert8_budget_event ev = {stage,   rk,    unit,  mode, score, S->fp32_score - score, done, total, S->evaluations,
                             cached, accepted};
    S->bp->progress(S->bp->progress_ctx, &ev);
}

static bool within(const search *S, double score) { return S->fp32_score - score <= S->bp->max_drop + DROP_EPS; }

/* Units in each mode; fixed units are not counted. */
static void count_modes(const search *S, bert8_budget_trial *t) {
    t->n_static = t->n_dynamic = t->n_fp32 = 0;
    for (int64_t u = 0; u < S->U; u++) {
        if (S->fixed[u]) continue;
        if (t->modes[u] == BERT8_UNIT_INT8_STATIC) t->n_static++;
        else if (t->modes[u] == BERT8_UNIT_INT8_DYNAMIC) t->n_dynamic++;
        else t->n_fp32++;
    }
}

/* Moves unit u of t's configuration to mode (normalized); false when that changes nothing. */
static bool move(const search *S, bert8_budget_trial *t, int64_t u, bert8_unit_mode mode, bert8_unit_mode *was) {
    memcpy(was, t->modes, (size_t)S->U * sizeof *was);
    t->modes[u] = mode;
    normalize(S, t->modes);
    return memcmp(was, t->modes, (size_t)S->U * sizeof *was) != 0;
}

/* Tries each moved unit, last moved first, back up its ladder one rung at a time while the score
 * stays within budget. moved[0..n) lists the moves in order (a unit may appear twice). */
static bert8_status trim(search *S, const int64_t *moved, int64_t n, bert8_budget_trial *t) {
    bool *seen = calloc((size_t)S->U + 1, sizeof *seen);
    bert8_unit_mode *was = malloc((size_t)S->U * sizeof *was + 1);
    bert8_status st = BERT8_OK;
    if (!seen || !was) st = b8_fail(S->e, BERT8_ERR_NOMEM, "out of memory");
    for (int64_t i = n - 1; i >= 0 && !st; i--) {
        const int64_t u = moved[i];
        if (seen[u]) continue;
        seen[u] = true;
        bert8_unit_mode lad[3];
        ladder_of(S, u, lad);
        for (int r = rung_of(S, u, t->modes[u]); r > 0; r--) {
            double score;
            bool cached;
            if (!move(S, t, u, lad[r - 1], was)) break;
            if ((st = score_of(S, t->modes, &score, &cached))) break;
            t->trim_steps++;
            const bool ok = within(S, score);
            emit(S, BERT8_BUDGET_TRIM, t->ranking, u, t->modes[u], score, t->trim_steps, 0, cached, ok);
            if (!ok) {
                memcpy(t->modes, was, (size_t)S->U * sizeof *was);
                break;
            }
            t->score = score;
        }
    }
    free(seen);
    free(was);
    return st;
}

/* Follows one order from the all-INT8 configuration: each unit in turn one rung down its ladder
 * (every Linear to dynamic before any unit goes to FP32), re-scoring after each move, until
 * within budget; then trims. */
static bert8_status run_trial(search *S, const bert8_unit_mode *base, double int8_score, bert8_budget_trial *t) {
    memcpy(t->modes, base, (size_t)S->U * sizeof *base);
    t->score = int8_score;
    t->within = within(S, int8_score);
    int64_t *moved = malloc(((size_t)S->U * 3 + 1) * sizeof *moved), nm = 0;
    bert8_unit_mode *was = malloc((size_t)S->U * sizeof *was + 1);
    bert8_status st = BERT8_OK;
    if (!moved || !was) st = b8_fail(S->e, BERT8_ERR_NOMEM, "out of memory");
    /* the passes: the Linear ladder's modes below the scheme's, in order */
    for (int r = 1; r < S->rungs && !t->within && !st; r++)
        for (int64_t i = 0; i < t->n_order && !t->within; i++) {
            const int64_t u = t->order[i];
            const bert8_unit_mode target = S->ladder[r];
            bert8_unit_mode lad[3];
            const int n = ladder_of(S, u, lad);
            if (rung_of(S, u, target) == n || rung_of(S, u, t->modes[u]) >= rung_of(S, u, target)) continue;
            if (!move(S, t, u, target, was)) continue;
            bool cached;
            if ((st = score_of(S, t->modes, &t->score, &cached))) break;
            t->steps++;
            /* an attention unit a QKV product took to FP32 along with it is trimmed after it */
            for (int64_t v = 0; v < S->U; v++)
                if (v != u && was[v] != t->modes[v]) moved[nm++] = v;
            moved[nm++] = u;
            t->within = within(S, t->score);
            emit(S, BERT8_BUDGET_STEP, t->ranking, u, t->modes[u], t->score, t->steps, 0, cached, false);
        }
    t->first_score = t->score;
    for (int64_t u = 0; u < S->U; u++) t->first_off += t->modes[u] != base[u];
    if (!st && t->within && S->bp->trim) st = trim(S, moved, nm, t);
    free(moved);
    free(was);
    count_modes(S, t);
    if (!st) emit(S, BERT8_BUDGET_TRIAL_DONE, t->ranking, -1, BERT8_UNIT_FP32, t->score, t->steps, 0, false, false);
    return st;
}

/* Sorts the searched units by key, largest first; ties by the second key, then by index. */
static void rank_units(const search *S, const double *key, const double *key2, int64_t *order, int64_t *n) {
    *n = 0;
    for (int64_t u = 0; u < S->U; u++)
        if (!S->fixed[u]) order[(*n)++] = u;
    for (int64_t i = 1; i < *n; i++) { /* insertion sort: stable, and U is small */
        const int64_t u = order[i];
        int64_t j = i;
        for (; j > 0; j--) {
            const int64_t v = order[j - 1];
            const double a = isnan(key[u]) ? -INFINITY : key[u], b = isnan(key[v]) ? -INFINITY : key[v];
            bool before = a > b;
            if (a == b && key2) {
                const double a2 = isnan(key2[u]) ? -INFINITY : key2[u], b2 = isnan(key2[v]) ? -INFINITY : key2[v];
                before = a2 > b2;
            }
            if (!before) break;
            order[j] = v;
        }
        order[j] = u;
    }
}

/* Whether trial a is a better result than trial b: within budget, fewer FP32 units, fewer
 * dynamic ones, a higher score. */
static bool better(const bert8_budget_trial *a, const bert8_budget_trial *b) {
    if (a->within != b->within) return a->within > b->within;
    if (a->n_fp32 != b->n_fp32) return a->n_fp32 < b->n_fp32;
    if (a->n_dynamic != b->n_dynamic) return a->n_dynamic < b->n_dynamic;
    return a->score > b->score;
}

static bert8_status put_err(bert8_status st, char *err, size_t err_len, const char *msg) {
    if (err && err_len) snprintf(err, err_len, "%s", msg);
    return st;
}

static bert8_status check_budget(const bert8_budget_params *bp, const bert8_quant_params *qp, b8_err *e) {
    if (!bp->eval) return b8_fail(e, BERT8_ERR_INVALID_ARG, "the budget needs an evaluation callback (eval is NULL)");
    if (isnan(bp->max_drop) || isinf(bp->max_drop) || bp->max_drop < 0)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "max_drop %g is not a finite number >= 0", bp->max_drop);
    if (bp->ranking != BERT8_RANK_BOTH && bp->ranking != BERT8_RANK_OUTPUT_ERROR && bp->ranking != BERT8_RANK_METRIC)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "unknown ranking %d", (int)bp->ranking);
    if (qp->unit_modes)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "unit_modes must be NULL for a budget search (it chooses them)");
    return BERT8_OK;
}

/* The searched part: baselines, rankings, the trials, the choice. Fills rep; *result points
 * into it (the modes of the chosen configuration). */
static bert8_status budget_search(search *S, bert8_unit_mode *base, bert8_budget_report *rep,
                                  const bert8_unit_mode **result) {
    bert8_status st;
    bool cached;
    bert8_unit_mode *fp32 = malloc((size_t)S->U * sizeof *fp32 + 1), *one = malloc((size_t)S->U * sizeof *one + 1);
    double *metric = malloc((size_t)S->U * sizeof *metric + 1), *oerr = malloc((size_t)S->U * sizeof *oerr + 1);
    double *alone = malloc((size_t)S->U * sizeof *alone + 1);
    if (!fp32 || !one || !metric || !oerr || !alone) {
        st = b8_fail(S->e, BERT8_ERR_NOMEM, "out of memory");
        goto done;
    }
    int64_t searched = 0;
    for (int64_t u = 0; u < S->U; u++) {
        bert8_unit_mode lad[3];
        ladder_of(S, u, lad);
        fp32[u] = BERT8_UNIT_FP32;
        base[u] = S->fixed[u] ? BERT8_UNIT_FP32 : lad[0];
        oerr[u] = rep->units[u].output_error;
        metric[u] = NAN;
        searched += !S->fixed[u];
    }
    if (searched == 0) {
        st = b8_fail(S->e, BERT8_ERR_INVALID_ARG, "keep_fp32 keeps every unit FP32: nothing to search");
        goto done;
    }
    if ((st = score_of(S, fp32, &S->fp32_score, &cached))) goto done;
    rep->fp32_score = S->fp32_score;
    emit(S, BERT8_BUDGET_BASELINE, BERT8_RANK_BOTH, -1, BERT8_UNIT_FP32, S->fp32_score, 1, 2, cached, false);
    if ((st = score_of(S, base, &rep->int8_score, &cached))) goto done;
    emit(S, BERT8_BUDGET_BASELINE, BERT8_RANK_BOTH, -1, S->ladder[0], rep->int8_score, 2, 2, cached, false);
    rep->chosen = -1;
    rep->score = rep->int8_score;
    *result = base;
    if (within(S, rep->int8_score)) goto done;
    const bool by_err = S->bp->ranking != BERT8_RANK_METRIC, by_metric = S->bp->ranking != BERT8_RANK_OUTPUT_ERROR;
    if (by_metric) {
        /* a unit alone in INT8, the rest FP32; an attention unit needs its QKV product in INT8
         * too, so its drop is measured from the score of that product alone */
        int64_t done_n = 0;
        for (int64_t u = 0; u < S->U; u++) {
            if (S->fixed[u]) continue;
            const bool att = b8_unit_table[u % B8_UNITS_PER_LAYER].kind == B8_UNIT_ATTENTION;
            const int64_t uq = u - u % B8_UNITS_PER_LAYER + B8_UNIT_QKV_POS;
            memcpy(one, fp32, (size_t)S->U * sizeof *one);
            one[u] = base[u];
            if (att) one[uq] = base[uq];
            double s;
            if ((st = score_of(S, one, &s, &cached))) goto done;
            alone[u] = s;
            metric[u] = rep->units[u].metric_drop = (att ? alone[uq] : S->fp32_score) - s;
            emit(S, BERT8_BUDGET_SENSITIVITY, BERT8_RANK_METRIC, u, base[u], s, ++done_n, searched, cached, false);
        }
    }
    const bert8_ranking order_of[2] = {BERT8_RANK_OUTPUT_ERROR, BERT8_RANK_METRIC};
    for (int k = 0; k < 2; k++) {
        if ((k == 0 && !by_err) || (k == 1 && !by_metric)) continue;
        bert8_budget_trial *t = &rep->trials[rep->n_trials++];
        t->ranking = order_of[k];
        t->order = malloc((size_t)S->U * sizeof *t->order + 1);
        t->modes = malloc((size_t)S->U * sizeof *t->modes + 1);
        if (!t->order || !t->modes) {
            st = b8_fail(S->e, BERT8_ERR_NOMEM, "out of memory");
            goto done;
        }
        if (k == 0) rank_units(S, oerr, NULL, t->order, &t->n_order);
        else rank_units(S, metric, oerr, t->order, &t->n_order);
        if ((st = run_trial(S, base, rep->int8_score, t))) goto done;
    }
    rep->chosen = 0;
    for (int i = 1; i < rep->n_trials; i++)
        if (better(&rep->trials[i], &rep->trials[rep->chosen])) rep->chosen = i;
    rep->score = rep->trials[rep->chosen].score;
    *result = rep->trials[rep->chosen].modes;
done:
    free(fp32);
    free(one);
    free(metric);
    free(oerr);
    free(alone);
    return st;
}

bert8_status bert8_quantize_budget(const bert8_model *fp32, const bert8_batch *calib, size_t n_calib,
                                   const bert8_quant_params *quant, const bert8_budget_params *budget,
                                   bert8_model **out, bert8_budget_report *report, char *err, size_t err_len) {
    if (out) *out = NULL;
    bert8_budget_report local = {0};
    bert8_budget_report *rep = report ? report : &local;
    bert8_budget_report_free(rep);
    if (!fp32 || !out || !budget || (!calib && n_calib))
        return put_err(BERT8_ERR_INVALID_ARG, err, err_len,
                       "bert8_quantize_budget: model, budget and out must not be NULL");
    bert8_quant_params qp = quant ? *quant : bert8_default_quant_params();
    b8_err e;
    b8_err_clear(&e);
    bert8_status st;
    b8_quant_resolve(fp32, &qp);
    if ((st = check_budget(budget, &qp, &e)) || (st = b8_quant_check(fp32, &qp, &e)))
        return put_err(st, err, err_len, e.msg);
    if (n_calib == 0) return put_err(BERT8_ERR_INVALID_ARG, err, err_len, "calibration needs at least one sequence");
    search S = {.fp32 = fp32, .qp = &qp, .bp = budget, .U = bert8_model_unit_count(fp32), .e = &e};
    if (qp.scheme == BERT8_SCHEME_DYNAMIC) {
        S.ladder[S.rungs++] = BERT8_UNIT_INT8_DYNAMIC;
    } else {
        S.ladder[S.rungs++] = BERT8_UNIT_INT8_STATIC;
        if (budget->allow_dynamic) S.ladder[S.rungs++] = BERT8_UNIT_INT8_DYNAMIC;
    }
    S.ladder[S.rungs++] = BERT8_UNIT_FP32;
    b8_calib cs;
    bert8_unit_mode *base = NULL;
    const bert8_unit_mode *result = NULL;
    rep->max_drop = budget->max_drop;
    rep->n_units = S.U;
    rep->chosen = -1;
    S.forms = calloc((size_t)S.U + 1, sizeof *S.forms);
    S.fixed = calloc((size_t)S.U + 1, sizeof *S.fixed);
    rep->units = calloc((size_t)S.U + 1, sizeof *rep->units);
    base = malloc(((size_t)S.U + 1) * sizeof *base);
    if (!S.forms || !S.fixed || !rep->units || !base) {
        search_free(&S);
        free(base);
        bert8_budget_report_free(rep);
        return put_err(BERT8_ERR_NOMEM, err, err_len, "out of memory");
    }
    /* 1. calibration with sampled rows: the output errors (and the alpha search) need them */
    if ((st = b8_calib_init(&cs, fp32, true, qp.int8_attention, &e))) goto done;
    st = b8_calib_run(&cs, fp32, calib, n_calib, qp.max_samples, qp.progress, &e);
    S.calib_samples = cs.sequences;
    /* 2. the INT8 forms and the attention units' output errors, 3. the search, 4. the result */
    if (!st) st = prepare_forms(&S, &cs, rep->units);
    b8_calib_free(&cs);
    if (!st && qp.int8_attention) st = att_output_errors(&S, calib, n_calib, rep->units);
    if (st || (st = budget_search(&S, base, rep, &result))) goto done;
    rep->evaluations = S.evaluations;
    for (int64_t u = 0; u < S.U; u++) rep->units[u].mode = result[u];
    if (all_fp32(&S, result)) {
        st = b8_fail(&e, BERT8_ERR_UNSUPPORTED,
                     "no configuration with an INT8 unit stays within %g of the FP32 score %g: use the FP32 model",
                     budget->max_drop, rep->fp32_score);
        goto done;
    }
    st = build_candidate(&S, result, out);
done:
    rep->evaluations = S.evaluations;
    search_free(&S);
    free(base);
    if (!report) bert8_budget_report_free(&local);
    return st ? put_err(st, err, err_len, e.msg) : BERT8_OK;
}
