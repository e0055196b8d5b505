/* quant.c: calibration, SmoothQuant smoothing and int8 weight quantization, saving
 * quantized folders.
 *
 * Post-LN BERT feeds each LayerNorm's output both to the next Linear and to the residual
 * path, so 1/s cannot be folded into the LayerNorm's own gamma/beta: the fused LayerNorm
 * kernel writes the fp32 output with gamma/beta and, with a second folded pair
 * gamma/(s*a), beta/(s*a), the int8 input of the next GEMM. */
#include "quant/quant.h"
#include "model/session.h"
#include "io/safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fnmatch.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SAMPLE_ROWS 256   /* activation rows kept per site for the alpha search */
#define SMOOTH_MIN 1e-5f
#define SMOOTH_MAX 1e5f

static const float ALPHA_GRID[] = {0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f, 0.9f};

void b8_qlinear_free(b8_qlinear *q) {
    if (!q) return;
    b8_qweight_free(q->packed);
    b8_free_aligned(q->wq);
    b8_free_aligned(q->w_scale);
    b8_free_aligned(q->bias);
    b8_free_aligned(q->smooth);
    b8_free_aligned(q->in_mul);
    free(q);
}

static b8_qlinear *qlinear_alloc(int64_t n, int64_t k) {
    b8_qlinear *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    q->n = n;
    q->k = k;
    q->wq = b8_malloc_aligned((size_t)(n * k));
    q->w_scale = b8_calloc_aligned((size_t)n, sizeof(float));
    q->bias = b8_calloc_aligned((size_t)n, sizeof(float));
    q->smooth = b8_calloc_aligned((size_t)k, sizeof(float));
    q->in_mul = b8_calloc_aligned((size_t)k, sizeof(float));
    if (!q->wq || !q->w_scale || !q->bias || !q->smooth || !q->in_mul) {
        b8_qlinear_free(q);
        return NULL;
    }
    return q;
}

static inline int8_t q8(float v) {
    float r = nearbyintf(v);
    return (int8_t)(r > 127.f ? 127.f : r < -127.f ? -127.f : r);
}

/* SmoothQuant factors: s_j = max|X_j|^a / max|W_j|^(1-a), clamped; 1 where a channel is dead. */
static void smooth_factors(const float *w, int64_t n, int64_t k, const float *amax, float alpha,
                           float *s) {
    for (int64_t j = 0; j < k; j++) s[j] = 1.0f;
    if (!amax || alpha < 0) return;
    float *wmax = calloc((size_t)k, sizeof(float));
    if (!wmax) return;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < k; j++) {
            float a = fabsf(w[i * k + j]);
            if (a > wmax[j]) wmax[j] = a;
        }
    for (int64_t j = 0; j < k; j++) {
        if (!(amax[j] > 0) || !(wmax[j] > 0)) continue;
        float v = powf(fmaxf(amax[j], SMOOTH_MIN), alpha) / powf(fmaxf(wmax[j], SMOOTH_MIN), 1.0f - alpha);
        s[j] = fminf(fmaxf(v, SMOOTH_MIN), SMOOTH_MAX);
    }
    free(wmax);
}

/* Quantizes W * s per output channel into q. */
static void quantize_weights(const float *w, int64_t n, int64_t k, const float *s, int8_t *wq,
                             float *w_scale) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float m = 0;
        for (int64_t j = 0; j < k; j++) m = fmaxf(m, fabsf(w[i * k + j] * s[j]));
        float sc = m > 0 ? m / 127.0f : 1.0f;
        w_scale[i] = sc;
        float inv = 1.0f / sc;
        for (int64_t j = 0; j < k; j++) wq[i * k + j] = q8(w[i * k + j] * s[j] * inv);
    }
}

static float static_scale(const float *amax, const float *s, int64_t k) {
    float m = 0;
    for (int64_t j = 0; j < k; j++) m = fmaxf(m, amax[j] / s[j]);
    return m > 0 ? m / 127.0f : 1.0f;
}

bert8_status b8_qlinear_from_fp32(const float *w, const float *b, int64_t n, int64_t k,
                                  const float *amax, float alpha, bert8_scheme scheme,
                                  b8_qlinear **out, b8_err *e) {
    *out = NULL;
    b8_qlinear *q = qlinear_alloc(n, k);
    if (!q) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory quantizing a %lld x %lld weight",
                           (long long)n, (long long)k);
    smooth_factors(w, n, k, amax, alpha, q->smooth);
    quantize_weights(w, n, k, q->smooth, q->wq, q->w_scale);
    if (b) memcpy(q->bias, b, (size_t)n * sizeof(float));
    q->alpha = amax && alpha >= 0 ? alpha : -1.0f;
    q->a_scale = scheme == BERT8_SCHEME_STATIC ? (amax ? static_scale(amax, q->smooth, k) : 1.0f) : 0.0f;
    *out = q;
    return BERT8_OK;
}

/* ---- derived state shared by quantize and load ---------------------------------------- */

static float *fold_ln(const float *g, const float *b, const b8_qlinear *q, bool beta) {
    float *o = b8_malloc_aligned((size_t)q->k * sizeof(float));
    if (!o) return NULL;
    for (int64_t j = 0; j < q->k; j++) o[j] = (beta ? b[j] : g[j]) * q->in_mul[j];
    return o;
}

static bert8_status finalize_one(b8_qlinear *q, bert8_scheme scheme, b8_err *e) {
    for (int64_t j = 0; j < q->k; j++)
        q->in_mul[j] = scheme == BERT8_SCHEME_STATIC ? 1.0f / (q->smooth[j] * q->a_scale) : 1.0f / q->smooth[j];
    if (q->packed) return BERT8_OK;
    return b8_qweight_pack(q->wq, q->n, q->k, q->w_scale, NULL, &q->packed, e);
}

bert8_status b8_quant_finalize(bert8_model *m, b8_err *e) {
    bert8_status st;
    for (int64_t l = 0; l < m->cfg.num_layers; l++) {
        b8_layer *ly = &m->layers[l];
        b8_qlinear *qs[4] = {ly->qkv_q, ly->attn_out_q, ly->ffn_in_q, ly->ffn_out_q};
        for (int i = 0; i < 4; i++)
            if (qs[i] && (st = finalize_one(qs[i], m->scheme, e))) return b8_wrap(e, "layer %lld", (long long)l);
        if (m->scheme == BERT8_SCHEME_STATIC) {
            const float *g = l == 0 ? m->emb_ln_g : m->layers[l - 1].ln2_g;
            const float *b = l == 0 ? m->emb_ln_b : m->layers[l - 1].ln2_b;
            if (ly->qkv_q && !ly->qkv_qg) {
                ly->qkv_qg = fold_ln(g, b, ly->qkv_q, false);
                ly->qkv_qb = fold_ln(g, b, ly->qkv_q, true);
                if (!ly->qkv_qg || !ly->qkv_qb) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
            }
            if (ly->ffn_in_q && !ly->ffn_qg) {
                ly->ffn_qg = fold_ln(ly->ln1_g, ly->ln1_b, ly->ffn_in_q, false);
                ly->ffn_qb = fold_ln(ly->ln1_g, ly->ln1_b, ly->ffn_in_q, true);
                if (!ly->ffn_qg || !ly->ffn_qb) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
            }
        }
    }
    return BERT8_OK;
}

/* ---- calibration ------------------------------------------------------------------------ */

typedef struct site_stats {
    int64_t k;
    float *amax;     /* [k] */
    float *sample;   /* [SAMPLE_ROWS][k] reservoir of rows */
    int64_t seen, kept;
} site_stats;

typedef struct calib_state {
    site_stats *sites; /* [layers][B8_SITES] */
    uint64_t rng;
    bool want_samples;
} calib_state;

static void observe(void *ctx, int64_t layer, int site, const float *x, int64_t rows, int64_t cols,
                    const int32_t *mask) {
    calib_state *c = ctx;
    site_stats *s = &c->sites[layer * B8_SITES + site];
    for (int64_t r = 0; r < rows; r++) {
        if (mask && !mask[r]) continue;
        const float *xr = x + r * cols;
        for (int64_t j = 0; j < cols; j++) {
            float a = fabsf(xr[j]);
            if (a > s->amax[j]) s->amax[j] = a;
        }
        if (!c->want_samples || !s->sample) continue;
        /* reservoir sampling keeps a uniform sample of every row seen */
        int64_t slot = -1;
        if (s->kept < SAMPLE_ROWS) slot = s->kept++;
        else {
            c->rng ^= c->rng << 13, c->rng ^= c->rng >> 7, c->rng ^= c->rng << 17;
            uint64_t j = c->rng % (uint64_t)(s->seen + 1);
            if (j < SAMPLE_ROWS) slot = (int64_t)j;
        }
        if (slot >= 0) memcpy(s->sample + slot * cols, xr, (size_t)cols * sizeof(float));
        s->seen++;
    }
}

/* Output error of one candidate on the sampled rows: || X W^T - dq(q(X/s)) dq(q(W s))^T ||^2 */
static double candidate_error(const float *w, int64_t n, int64_t k, const site_stats *st,
                              const float *yref, const b8_qlinear *q, bert8_scheme scheme, b8_err *e) {
    int64_t S = st->kept;
    float *wd = b8_malloc_aligned((size_t)(n * k) * sizeof(float));
    float *xd = b8_malloc_aligned((size_t)(S * k) * sizeof(float));
    float *y = b8_malloc_aligned((size_t)(S * n) * sizeof(float));
    double err = INFINITY;
    b8_sgemm_w *pw = NULL;
    if (!wd || !xd || !y) goto out;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < k; j++) wd[i * k + j] = q->wq[i * k + j] * q->w_scale[i];
    for (int64_t r = 0; r < S; r++) {
        const float *xr = st->sample + r * k;
        float a = q->a_scale;
        if (scheme == BERT8_SCHEME_DYNAMIC) {
            float m = 0;
            for (int64_t j = 0; j < k; j++) m = fmaxf(m, fabsf(xr[j] / q->smooth[j]));
            a = m > 0 ? m / 127.0f : 1.0f;
        }
        for (int64_t j = 0; j < k; j++) xd[r * k + j] = q8(xr[j] / q->smooth[j] / a) * a;
    }
    if (b8_sgemm_w_pack(wd, NULL, n, k, &pw, e) || b8_sgemm(pw, xd, k, S, y, n, B8_POST_NONE, false, e))
        goto out;
    err = 0;
    for (int64_t i = 0; i < S * n; i++) {
        double d = (double)y[i] - yref[i];
        err += d * d;
    }
out:
    b8_sgemm_w_free(pw);
    b8_free_aligned(wd);
    b8_free_aligned(xd);
    b8_free_aligned(y);
    return err;
}

/* Quantizes one Linear group, searching alpha when asked (alpha < 0 with smoothing on). */
static bert8_status quantize_group(const float *w, const float *b, int64_t n, int64_t k,
                                   const site_stats *st, const bert8_quant_params *p,
                                   b8_qlinear **out, b8_err *e) {
    /* alpha < 0 turns smoothing off (s = 1) but keeps the calibrated ranges: naive W8A8 still
     * needs its static activation scale. Without samples, auto falls back to 0.5. */
    if (!p->smooth) return b8_qlinear_from_fp32(w, b, n, k, st->amax, -1.0f, p->scheme, out, e);
    if (p->alpha >= 0 || st->kept == 0)
        return b8_qlinear_from_fp32(w, b, n, k, st->amax, p->alpha >= 0 ? p->alpha : 0.5f, p->scheme, out, e);
    /* reference outputs on the sampled rows */
    int64_t S = st->kept;
    float *yref = b8_malloc_aligned((size_t)(S * n) * sizeof(float));
    b8_sgemm_w *pw = NULL;
    bert8_status rc;
    if (!yref) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
    if ((rc = b8_sgemm_w_pack(w, NULL, n, k, &pw, e)) ||
        (rc = b8_sgemm(pw, st->sample, k, S, yref, n, B8_POST_NONE, false, e))) {
        b8_sgemm_w_free(pw);
        b8_free_aligned(yref);
        return rc;
    }
    b8_sgemm_w_free(pw);
    b8_qlinear *best = NULL;
    double best_err = INFINITY;
    for (size_t i = 0; i < sizeof ALPHA_GRID / sizeof *ALPHA_GRID; i++) {
        b8_qlinear *q = NULL;
        if ((rc = b8_qlinear_from_fp32(w, b, n, k, st->amax, ALPHA_GRID[i], p->scheme, &q, e))) break;
        double err = candidate_error(w, n, k, st, yref, q, p->scheme, e);
        if (err < best_err) {
            b8_qlinear_free(best);
            best = q;
            best_err = err;
        } else {
            b8_qlinear_free(q);
        }
    }
    b8_free_aligned(yref);
    if (!best) return rc ? rc : b8_fail(e, BERT8_ERR_INTERNAL, "alpha search found no candidate");
    *out = best;
    return BERT8_OK;
}

bert8_quant_params bert8_default_quant_params(void) {
    bert8_quant_params p = {BERT8_SCHEME_STATIC, 0.5f, 1, 512, NULL, 0};
    return p;
}

/* true when a tensor name matches one of the comma-separated glob patterns */
static bool keep_fp32(const char *patterns, const char *name) {
    if (!patterns || !*patterns) return false;
    char buf[256];
    const char *p = patterns;
    while (*p) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        if (len > 0 && len < sizeof buf) {
            memcpy(buf, p, len);
            buf[len] = 0;
            if (fnmatch(buf, name, 0) == 0) return true;
        }
        if (!c) break;
        p = c + 1;
    }
    return false;
}

/* A bar redrawn in place on a terminal; elsewhere (logs, CI) only the final line. */
static void progress(const char *what, int64_t done, int64_t total) {
    if (!isatty(2)) {
        if (done == total) fprintf(stderr, "%s: %lld/%lld done\n", what, (long long)done, (long long)total);
        return;
    }
    int width = 30, fill = total ? (int)(width * done / total) : width;
    fprintf(stderr, "\r%s [", what);
    for (int i = 0; i < width; i++) fputc(i < fill ? '#' : '.', stderr);
    fprintf(stderr, "] %lld/%lld", (long long)done, (long long)total);
    if (done == total) fputc('\n', stderr);
    fflush(stderr);
}

/* the checkpoint names of a Linear group's weights (for --keep-fp32 and saving); "" past the last */
static void group_names(const bert8_model *m, int64_t l, int g, char names[3][256]) {
    static const int parts[B8_SITES][3] = {{B8_PART_Q, B8_PART_K, B8_PART_V},
                                           {B8_PART_ATTN_OUT, -1, -1},
                                           {B8_PART_FFN_IN, -1, -1},
                                           {B8_PART_FFN_OUT, -1, -1}};
    for (int i = 0; i < 3; i++) {
        if (parts[g][i] >= 0) b8_layer_part_name(m, l, parts[g][i], true, names[i], 256);
        else names[i][0] = 0;
    }
}

bert8_status bert8_quantize(const bert8_model *fp32, const bert8_batch *calib, size_t n_calib,
                            const bert8_quant_params *params, bert8_model **out, char *err,
                            size_t err_len) {
    b8_err e;
    b8_err_clear(&e);
    if (out) *out = NULL;
    bert8_quant_params p = params ? *params : bert8_default_quant_params();
    if (!fp32 || !out || (!calib && n_calib)) {
        if (err && err_len) snprintf(err, err_len, "bert8_quantize: model and out must not be NULL");
        return BERT8_ERR_INVALID_ARG;
    }
    if (fp32->quantized) {
        if (err && err_len) snprintf(err, err_len, "%s is already quantized", fp32->dir);
        return BERT8_ERR_INVALID_ARG;
    }
    if (n_calib == 0) {
        if (err && err_len) snprintf(err, err_len, "calibration needs at least one sequence");
        return BERT8_ERR_INVALID_ARG;
    }
    if (p.alpha > 1.0f || (p.alpha != p.alpha)) {
        if (err && err_len) snprintf(err, err_len, "alpha %g is outside [0, 1]", (double)p.alpha);
        return BERT8_ERR_INVALID_ARG;
    }
    const int64_t L = fp32->cfg.num_layers;
    calib_state cs = {0};
    cs.rng = 0x2545F4914F6CDD1DULL;
    cs.want_samples = p.smooth && p.alpha < 0;
    bert8_status st = BERT8_OK;
    bert8_model *m = NULL;
    bert8_session *s = NULL;
    cs.sites = calloc((size_t)(L * B8_SITES) + 1, sizeof *cs.sites);
    if (!cs.sites) {
        st = b8_fail(&e, BERT8_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int64_t l = 0; l < L; l++)
        for (int k = 0; k < B8_SITES; k++) {
            site_stats *ss = &cs.sites[l * B8_SITES + k];
            ss->k = k == B8_SITE_FFN_OUT ? fp32->cfg.intermediate_size : fp32->cfg.hidden_size;
            ss->amax = calloc((size_t)ss->k, sizeof(float));
            if (cs.want_samples) ss->sample = malloc((size_t)(SAMPLE_ROWS * ss->k) * sizeof(float));
            if (!ss->amax || (cs.want_samples && !ss->sample)) {
                st = b8_fail(&e, BERT8_ERR_NOMEM, "out of memory");
                goto done;
            }
        }
    /* 1. run the FP32 model over the calibration set, recording every Linear's input */
    if ((st = bert8_session_create(fp32, &s))) goto done;
    s->observe = observe;
    s->observe_ctx = &cs;
    int64_t seqs = 0, total = 0;
    for (size_t i = 0; i < n_calib; i++) total += calib[i].batch;
    if (p.max_samples > 0 && total > p.max_samples) total = p.max_samples;
    for (size_t i = 0; i < n_calib && seqs < total; i++) {
        bert8_batch b = calib[i];
        if (b.batch > total - seqs) b.batch = total - seqs;
        if ((st = bert8_forward(s, &b, NULL))) {
            snprintf(e.msg, sizeof e.msg, "calibration batch %zu: %s", i, bert8_session_last_error(s));
            goto done;
        }
        seqs += b.batch;
        if (p.progress) progress("calibrating", seqs, total);
    }
    /* 2. a fresh copy of the model (its own mapping of the checkpoint), then int8 Linears */
    char lerr[1024];
    bert8_load_params lp = bert8_default_load_params();
    if ((st = bert8_model_load(fp32->dir, &lp, &m, lerr, sizeof lerr))) {
        snprintf(e.msg, sizeof e.msg, "%s", lerr);
        goto done;
    }
    m->quantized = true;
    m->info.quantized = 1;
    m->scheme = p.scheme;
    m->calib_samples = seqs;
    snprintf(m->keep_fp32, sizeof m->keep_fp32, "%s", p.keep_fp32 ? p.keep_fp32 : "");
    for (int64_t l = 0; l < L; l++) {
        b8_layer *ly = &m->layers[l];
        const int64_t H = m->cfg.hidden_size, I = m->cfg.intermediate_size;
        for (int g = 0; g < B8_SITES; g++) {
            char names[3][256], wname[600];
            group_names(m, l, g, names);
            bool keep = false;
            for (int i = 0; i < 3 && names[i][0]; i++) {
                snprintf(wname, sizeof wname, "%.255s.weight", names[i]);
                keep |= keep_fp32(p.keep_fp32, wname);
            }
            if (keep) continue;
            site_stats *ss = &cs.sites[l * B8_SITES + g];
            b8_qlinear *q = NULL;
            if (g == B8_SITE_QKV) {
                float *w, *b;
                if ((st = b8_layer_join_qkv(ly, H, &w, &b, &e))) goto done;
                st = quantize_group(w, b, 3 * H, H, ss, &p, &q, &e);
                b8_free_aligned(w);
                b8_free_aligned(b);
                ly->qkv_q = q;
            } else {
                b8_linear *lin = g == B8_SITE_ATTN_OUT ? &ly->attn_out : g == B8_SITE_FFN_IN ? &ly->ffn_in : &ly->ffn_out;
                st = quantize_group(lin->w, lin->b, lin->n, lin->k, ss, &p, &q, &e);
                if (g == B8_SITE_ATTN_OUT) ly->attn_out_q = q;
                else if (g == B8_SITE_FFN_IN) ly->ffn_in_q = q;
                else ly->ffn_out_q = q;
            }
            if (st) goto done;
            (void)I;
        }
        if (p.progress) progress("quantizing", l + 1, L);
    }
    if ((st = b8_quant_finalize(m, &e))) goto done;
    /* the FP32 packed copies of quantized Linears are no longer needed */
    for (int64_t l = 0; l < L; l++) {
        b8_layer *ly = &m->layers[l];
        if (ly->qkv_q) b8_sgemm_w_free(ly->qkv), ly->qkv = NULL;
        if (ly->attn_out_q) b8_sgemm_w_free(ly->attn_out.f32), ly->attn_out.f32 = NULL;
        if (ly->ffn_in_q) b8_sgemm_w_free(ly->ffn_in.f32), ly->ffn_in.f32 = NULL;
        if (ly->ffn_out_q) b8_sgemm_w_free(ly->ffn_out.f32), ly->ffn_out.f32 = NULL;
    }
done:
    bert8_session_free(s);
    if (cs.sites) {
        for (int64_t i = 0; i < L * B8_SITES; i++) {
            free(cs.sites[i].amax);
            free(cs.sites[i].sample);
        }
        free(cs.sites);
    }
    if (st) {
        if (err && err_len) snprintf(err, err_len, "%s", e.msg);
        bert8_model_free(m);
        return st;
    }
    *out = m;
    return BERT8_OK;
}

/* ---- quantized folders ------------------------------------------------------------------ */

#define QUANT_METHOD "bert8-smoothquant"
#define QUANT_VERSION 1

bert8_status b8_quant_read_config(bert8_model *m, b8_err *e) {
    char path[4096];
    snprintf(path, sizeof path, "%s/quantization_config.json", m->dir);
    struct stat sb;
    bool has_i8 = false;
    for (size_t i = 0; i < b8_st_count(m->st) && !has_i8; i++) has_i8 = b8_st_at(m->st, i)->dtype == B8_I8;
    if (stat(path, &sb) != 0) {
        if (has_i8)
            return b8_fail(e, BERT8_ERR_MISSING, "%s: the checkpoint has I8 tensors but no quantization_config.json",
                           m->dir);
        return BERT8_OK;
    }
    size_t n;
    char *text = b8_read_file(path, &n, e);
    if (!text) return e->status;
    cJSON *root = cJSON_Parse(text);
    free(text);
    bert8_status st = BERT8_OK;
    const cJSON *method = root ? cJSON_GetObjectItemCaseSensitive(root, "quant_method") : NULL;
    const cJSON *scheme = root ? cJSON_GetObjectItemCaseSensitive(root, "scheme") : NULL;
    const cJSON *ver = root ? cJSON_GetObjectItemCaseSensitive(root, "version") : NULL;
    const cJSON *samples = root ? cJSON_GetObjectItemCaseSensitive(root, "calibration_samples") : NULL;
    if (!root || !cJSON_IsObject(root)) {
        st = b8_fail(e, BERT8_ERR_FORMAT, "%s: not a JSON object", path);
    } else if (!cJSON_IsString(method) || strcmp(method->valuestring, QUANT_METHOD)) {
        st = b8_fail(e, BERT8_ERR_UNSUPPORTED, "%s: quant_method must be \"%s\"", path, QUANT_METHOD);
    } else if (!cJSON_IsNumber(ver) || ver->valueint > QUANT_VERSION) {
        st = b8_fail(e, BERT8_ERR_UNSUPPORTED, "%s: version must be at most %d", path, QUANT_VERSION);
    } else if (!cJSON_IsString(scheme) ||
               (strcmp(scheme->valuestring, "static") && strcmp(scheme->valuestring, "dynamic"))) {
        st = b8_fail(e, BERT8_ERR_FORMAT, "%s: scheme must be \"static\" or \"dynamic\"", path);
    } else if (!has_i8) {
        st = b8_fail(e, BERT8_ERR_FORMAT, "%s: quantization_config.json present but no I8 weights", m->dir);
    } else {
        m->quantized = true;
        m->scheme = strcmp(scheme->valuestring, "static") ? BERT8_SCHEME_DYNAMIC : BERT8_SCHEME_STATIC;
        m->calib_samples = cJSON_IsNumber(samples) ? (int64_t)samples->valuedouble : 0;
    }
    cJSON_Delete(root);
    return st;
}

/* growable list of tensors to write */
typedef struct wlist {
    b8_st_write_item *it;
    void **owned;
    size_t n, cap, n_owned, cap_owned;
    bool oom;
} wlist;

static void wl_add(wlist *w, const char *name, b8_dtype dt, int ndim, int64_t d0, int64_t d1, const void *data,
                   bool owned) {
    if (w->oom) return;
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 256;
        b8_st_write_item *ni = realloc(w->it, cap * sizeof *ni);
        if (!ni) {
            w->oom = true;
            return;
        }
        w->it = ni;
        w->cap = cap;
    }
    char *nm = strdup(name);
    if (!nm) {
        w->oom = true;
        return;
    }
    b8_st_write_item item = {nm, dt, ndim, {d0, d1}, data};
    w->it[w->n++] = item;
    if (owned) {
        if (w->n_owned == w->cap_owned) {
            size_t cap = w->cap_owned ? w->cap_owned * 2 : 64;
            void **no = realloc(w->owned, cap * sizeof *no);
            if (!no) {
                w->oom = true;
                return;
            }
            w->owned = no;
            w->cap_owned = cap;
        }
        w->owned[w->n_owned++] = (void *)data;
    }
}

static float *copy_floats(const float *src, int64_t n) {
    float *d = malloc((size_t)n * sizeof(float));
    if (d) memcpy(d, src, (size_t)n * sizeof(float));
    return d;
}

/* rows [r0, r0+n) of a quantized Linear written under `base` */
static void wl_qlinear(wlist *w, const char *base, const b8_qlinear *q, int64_t r0, int64_t n, bert8_scheme scheme) {
    char name[512];
    snprintf(name, sizeof name, "%s.weight", base);
    wl_add(w, name, B8_I8, 2, n, q->k, q->wq + r0 * q->k, false);
    snprintf(name, sizeof name, "%s.weight_scale", base);
    wl_add(w, name, B8_F32, 1, n, 0, q->w_scale + r0, false);
    snprintf(name, sizeof name, "%s.bias", base);
    wl_add(w, name, B8_F32, 1, n, 0, q->bias + r0, false);
    snprintf(name, sizeof name, "%s.smooth_factor", base);
    wl_add(w, name, B8_F32, 1, q->k, 0, q->smooth, false);
    if (scheme == BERT8_SCHEME_STATIC) {
        snprintf(name, sizeof name, "%s.input_scale", base);
        wl_add(w, name, B8_F32, 1, 1, 0, copy_floats(&q->a_scale, 1), true);
    }
}


static bert8_status copy_file(const char *from, const char *to, b8_err *e) {
    size_t n;
    char *data = b8_read_file(from, &n, e);
    if (!data) return e->status;
    FILE *f = fopen(to, "wb");
    bool ok = f && fwrite(data, 1, n, f) == n;
    if (f && fclose(f) != 0) ok = false;
    free(data);
    return ok ? BERT8_OK : b8_fail(e, BERT8_ERR_IO, "cannot write %s: %s", to, strerror(errno));
}

bert8_status bert8_model_save(const bert8_model *m, const char *out_dir, char *err, size_t err_len) {
    b8_err e;
    b8_err_clear(&e);
    bert8_status st = BERT8_OK;
    if (!m || !out_dir) {
        if (err && err_len) snprintf(err, err_len, "bert8_model_save: model and out_dir must not be NULL");
        return BERT8_ERR_INVALID_ARG;
    }
    if (!m->quantized) {
        if (err && err_len) snprintf(err, err_len, "bert8_model_save writes quantized models; %s is FP32", m->dir);
        return BERT8_ERR_INVALID_ARG;
    }
    wlist w = {0};
    char path[4096], from[4096];
    if (mkdir(out_dir, 0755) != 0 && errno != EEXIST) {
        st = b8_fail(&e, BERT8_ERR_IO, "cannot create %s: %s", out_dir, strerror(errno));
        goto done;
    }
    /* 1. every Linear that runs INT8 is written from its quantized form, under its names */
    const int64_t L = m->cfg.num_layers, H = m->cfg.hidden_size;
    for (int64_t l = 0; l < L; l++) {
        const b8_layer *ly = &m->layers[l];
        const b8_qlinear *qs[4] = {ly->qkv_q, ly->attn_out_q, ly->ffn_in_q, ly->ffn_out_q};
        for (int g = 0; g < 4; g++) {
            if (!qs[g]) continue;
            char names[3][256];
            group_names(m, l, g, names);
            if (g == 0)
                for (int i = 0; i < 3; i++) wl_qlinear(&w, names[i], qs[0], i * H, H, m->scheme);
            else
                wl_qlinear(&w, names[0], qs[g], 0, qs[g]->n, m->scheme);
        }
    }
    /* 2. every other tensor of the source checkpoint is copied as it is */
    size_t nq = w.n;
    for (size_t i = 0; i < b8_st_count(m->st); i++) {
        const b8_st_tensor *t = b8_st_at(m->st, i);
        bool replaced = false;
        for (size_t j = 0; j < nq && !replaced; j++) {
            /* a quantized group's tensors all start with "<base>." */
            const char *nm = w.it[j].name;
            const char *dot = strrchr(nm, '.');
            size_t bl = (size_t)(dot - nm);
            replaced = strncmp(t->name, nm, bl) == 0 && t->name[bl] == '.' && strchr(t->name + bl + 1, '.') == NULL;
        }
        if (replaced) continue;
        b8_st_write_item item = {0};
        item.name = t->name;
        item.dtype = t->dtype;
        item.ndim = t->ndim;
        for (int d = 0; d < t->ndim; d++) item.shape[d] = t->shape[d];
        item.data = t->data;
        if (w.n == w.cap) wl_add(&w, "", B8_F32, 0, 0, 0, NULL, false), w.n--; /* grow */
        if (w.oom) break;
        w.it[w.n] = item;
        w.it[w.n].name = strdup(t->name);
        if (!w.it[w.n].name) w.oom = true;
        else w.n++;
    }
    if (w.oom) {
        st = b8_fail(&e, BERT8_ERR_NOMEM, "out of memory");
        goto done;
    }
    snprintf(path, sizeof path, "%s/model.safetensors", out_dir);
    const char *meta[] = {"format", "pt", "quantized_by", "bert8 " BERT8_VERSION_STRING, NULL};
    if ((st = b8_st_write(path, w.it, w.n, meta, &e))) goto done;
    /* 3. config.json unchanged, tokenizer files copied, quantization_config.json */
    static const char *const files[] = {"config.json", "vocab.txt", "tokenizer.json", "tokenizer_config.json",
                                        "special_tokens_map.json", "sentencepiece.bpe.model", "added_tokens.json",
                                        "modules.json", "sentence_bert_config.json", NULL};
    for (int i = 0; files[i]; i++) {
        struct stat sb;
        snprintf(from, sizeof from, "%s/%s", m->dir, files[i]);
        if (stat(from, &sb) != 0) continue;
        snprintf(path, sizeof path, "%s/%s", out_dir, files[i]);
        if (strcmp(from, path) && (st = copy_file(from, path, &e))) goto done;
    }
    snprintf(from, sizeof from, "%s/1_Pooling/config.json", m->dir);
    struct stat sb;
    if (stat(from, &sb) == 0) {
        snprintf(path, sizeof path, "%s/1_Pooling", out_dir);
        mkdir(path, 0755);
        snprintf(path, sizeof path, "%s/1_Pooling/config.json", out_dir);
        if ((st = copy_file(from, path, &e))) goto done;
    }
    cJSON *qc = cJSON_CreateObject();
    cJSON_AddStringToObject(qc, "quant_method", QUANT_METHOD);
    cJSON_AddNumberToObject(qc, "version", QUANT_VERSION);
    cJSON_AddStringToObject(qc, "scheme", m->scheme == BERT8_SCHEME_STATIC ? "static" : "dynamic");
    cJSON_AddStringToObject(qc, "weights", "int8, symmetric, per output channel (weight_scale)");
    cJSON_AddStringToObject(qc, "activations", m->scheme == BERT8_SCHEME_STATIC
                                                   ? "int8, symmetric, per tensor (input_scale, calibrated)"
                                                   : "int8, symmetric, per token (computed at run time)");
    cJSON_AddNumberToObject(qc, "calibration_samples", (double)m->calib_samples);
    cJSON_AddStringToObject(qc, "keep_fp32", m->keep_fp32);
    cJSON *alphas = cJSON_AddArrayToObject(qc, "alpha_per_layer");
    for (int64_t l = 0; l < L; l++) {
        const b8_layer *ly = &m->layers[l];
        cJSON *o = cJSON_CreateObject();
        const b8_qlinear *qs[4] = {ly->qkv_q, ly->attn_out_q, ly->ffn_in_q, ly->ffn_out_q};
        const char *keys[4] = {"qkv", "attention_output", "ffn_in", "ffn_out"};
        for (int g = 0; g < 4; g++) {
            if (!qs[g]) cJSON_AddStringToObject(o, keys[g], "fp32");
            else if (qs[g]->alpha < 0) cJSON_AddNullToObject(o, keys[g]);
            else cJSON_AddNumberToObject(o, keys[g], (double)qs[g]->alpha);
        }
        cJSON_AddItemToArray(alphas, o);
    }
    char *text = cJSON_Print(qc);
    cJSON_Delete(qc);
    snprintf(path, sizeof path, "%s/quantization_config.json", out_dir);
    FILE *f = fopen(path, "w");
    bool ok = text && f && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
    if (f && fclose(f) != 0) ok = false;
    free(text);
    if (!ok) st = b8_fail(&e, BERT8_ERR_IO, "cannot write %s", path);
done:
    for (size_t i = 0; i < w.n; i++) free((void *)w.it[i].name);
    for (size_t i = 0; i < w.n_owned; i++) free(w.owned[i]);
    free(w.it);
    free(w.owned);
    if (st && err && err_len) snprintf(err, err_len, "%s", e.msg);
    return st;
}
