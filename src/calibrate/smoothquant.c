/* smoothquant.c: bert8_quantize: calibrate an FP32 model, choose SmoothQuant factors (a fixed
 * alpha or a per-group search on sampled activations) and build the INT8 model. */
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibrate/smoothquant.h"
#include "calibrate/units.h"
#include "kernels/quantize/quantize.h"

static const float ALPHA_GRID[] = {0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f, 0.9f};

bert8_quant_params bert8_default_quant_params(void) {
    bert8_quant_params p = {.scheme = BERT8_SCHEME_STATIC, .alpha = -1.0f, .smooth = 1, .max_samples = 512,
                            .keep_fp32 = NULL, .progress = 0, .int8_attention = -1, .int8_embeddings = 0,
                            .unit_modes = NULL, .weight_bits = 8, .ffn_out_per_token = -1,
                            .ffn_in_per_token = -1, .outliers = -1};
    return p;
}

/* Output error of one candidate on the sampled rows: || X W^T - dq(q(X/s)) dq(q(W s))^T ||^2.
 * A dynamic q quantizes each row as the forward pass does: with a zero point per row. */
static bert8_status candidate_error(int64_t n, int64_t k, const b8_site_stats *ss, const float *yref,
                                    const b8_qlinear *q, double *err, b8_err *e) {
    const int64_t S = ss->kept;
    float *wd = b8_malloc_aligned((size_t)(n * k) * sizeof(float));
    float *xd = b8_malloc_aligned((size_t)(S * k) * sizeof(float));
    float *y = b8_malloc_aligned((size_t)(S * n) * sizeof(float));
    b8_sgemm_w *pw = NULL;
    bert8_status st = BERT8_OK;
    if (!wd || !xd || !y) {
        st = b8_fail(e, BERT8_ERR_NOMEM, "out of memory in the alpha search");
        goto out;
    }
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < k; j++) wd[i * k + j] = q->wq[i * k + j] * q->w_scale[i];
    /* outlier channels: their exact fp32 products (the weight columns read them, the int8
     * quantizer sees 0) */
    for (int64_t i = 0; i < n; i++)
        for (int64_t o = 0; o < q->n_out; o++) wd[i * k + q->out_idx[o]] = q->out_w[i * q->n_out + o];
    for (int64_t r = 0; r < S; r++) {
        const float *xr = ss->sample + r * k;
        float a = q->a_scale, z = q->a_zero;
        int64_t o = 0;
        if (q->mode == B8_QMODE_DYNAMIC) {
            float lo = 0, hi = 0, inv;
            for (int64_t j = 0; j < k; j++) {
                if (o < q->n_out && q->out_idx[o] == j) {
                    o++;
                    continue;
                }
                const float v = xr[j] / q->smooth[j];
                lo = v < lo ? v : lo;
                hi = v > hi ? v : hi;
            }
            b8_qzp_params(lo, hi, &a, &inv, &z);
        }
        o = 0;
        for (int64_t j = 0; j < k; j++) {
            if (o < q->n_out && q->out_idx[o] == j) {
                xd[r * k + j] = xr[j];
                o++;
                continue;
            }
            xd[r * k + j] = ((float)b8_q8(xr[j] / q->smooth[j] / a + z) - z) * a;
        }
    }
    if ((st = b8_sgemm_w_pack(wd, NULL, n, k, B8_ACT_NONE, false, &pw, e)) ||
        (st = b8_sgemm(pw, xd, k, S, y, n, e)))
        goto out;
    double sum = 0;
    for (int64_t i = 0; i < S * n; i++) {
        double d = (double)y[i] - yref[i];
        sum += d * d;
    }
    *err = sum;
out:
    b8_sgemm_w_free(pw);
    b8_free_aligned(wd);
    b8_free_aligned(xd);
    b8_free_aligned(y);
    return st;
}

bert8_status b8_group_output_error(const float *w, int64_t n, int64_t k, const b8_site_stats *ss, const b8_qlinear *q,
                                   double *rel, b8_err *e) {
    *rel = NAN;
    if (ss->kept == 0 || !ss->sample)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "the output error needs sampled calibration rows");
    const int64_t S = ss->kept;
    size_t cnt;
    if (!b8_mul_ok((size_t)S, (size_t)n, &cnt) || !b8_mul_ok(cnt, sizeof(float), &cnt))
        return b8_fail(e, BERT8_ERR_TOO_LARGE, "%lld x %lld output rows are too many", (long long)S, (long long)n);
    float *yref = b8_malloc_aligned(cnt);
    b8_sgemm_w *pw = NULL;
    bert8_status st;
    double err = 0, ref = 0;
    if (!yref) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory for the output error");
    if ((st = b8_sgemm_w_pack(w, NULL, n, k, B8_ACT_NONE, false, &pw, e)) ||
        (st = b8_sgemm(pw, ss->sample, k, S, yref, n, e)) || (st = candidate_error(n, k, ss, yref, q, &err, e)))
        goto done;
    for (int64_t i = 0; i < S * n; i++) ref += (double)yref[i] * yref[i];
    *rel = ref > 0 ? err / ref : err;
done:
    b8_sgemm_w_free(pw);
    b8_free_aligned(yref);
    return st;
}

/* b8_qlinear_from_fp32, then the asymmetric static range where asked for */
static bert8_status make_group(const float *w, const float *b, int64_t n, int64_t k, const b8_site_stats *ss,
                               float alpha, b8_qmode mode, int wb, int outliers, bool zero_point, b8_qlinear **out,
                               b8_err *e) {
    bert8_status st = b8_qlinear_from_fp32(w, b, n, k, ss->amax, alpha, mode, wb, outliers, out, e);
    if (st == BERT8_OK && zero_point && mode == B8_QMODE_STATIC && ss->cmin && ss->cmax)
        b8_qlinear_set_range(*out, ss->cmin, ss->cmax);
    return st;
}

bert8_status b8_quantize_group(const float *w, const float *b, int64_t n, int64_t k, const b8_site_stats *ss,
                               const bert8_quant_params *p, b8_qmode mode, bool zero_point, b8_qlinear **out,
                               b8_err *e) {
    *out = NULL;
    /* smoothing off (s = 1) keeps the calibrated ranges: naive W8A8 still needs its static
     * activation scale. Without samples, auto falls back to 0.5. */
    const int wb = p->weight_bits; /* 7 or 8: b8_quant_resolve and b8_quant_check ran */
    const int no = p->outliers; /* resolved: 0 to 64 */
    if (!p->smooth) return make_group(w, b, n, k, ss, -1.0f, mode, wb, no, zero_point, out, e);
    if (p->alpha >= 0 || ss->kept == 0)
        return make_group(w, b, n, k, ss, p->alpha >= 0 ? p->alpha : 0.5f, mode, wb, no, zero_point, out, e);
    const int64_t S = ss->kept;
    float *yref = b8_malloc_aligned((size_t)(S * n) * sizeof(float));
    b8_sgemm_w *pw = NULL;
    bert8_status st;
    if (!yref) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
    if ((st = b8_sgemm_w_pack(w, NULL, n, k, B8_ACT_NONE, false, &pw, e)) ||
        (st = b8_sgemm(pw, ss->sample, k, S, yref, n, e)))
        goto done;
    b8_qlinear *best = NULL;
    double best_err = INFINITY;
    for (size_t i = 0; i < sizeof ALPHA_GRID / sizeof *ALPHA_GRID; i++) {
        b8_qlinear *q = NULL;
        double err = INFINITY;
        if ((st = make_group(w, b, n, k, ss, ALPHA_GRID[i], mode, wb, no, zero_point, &q, e)) ||
            (st = candidate_error(n, k, ss, yref, q, &err, e))) {
            b8_qlinear_free(q);
            b8_qlinear_free(best);
            best = NULL;
            goto done;
        }
        if (!best || err < best_err) {
            b8_qlinear_free(best);
            best = q;
            best_err = err;
        } else {
            b8_qlinear_free(q);
        }
    }
    *out = best;
done:
    b8_sgemm_w_free(pw);
    b8_free_aligned(yref);
    return st;
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

bool b8_group_kept(const bert8_model *m, int64_t l, b8_group g, const char *patterns) {
    const b8_group_desc *d = &b8_group_table[g];
    char base[256], wname[300];
    for (int i = 0; i < b8_group_nparts(m->cfg.desc, g); i++) {
        b8_model_part_name(m, l, d->parts[i], base, sizeof base);
        snprintf(wname, sizeof wname, "%s.weight", base);
        if (keep_fp32(patterns, wname)) return true;
    }
    /* a group the checkpoint stores fused is kept by the fused tensor's name too */
    if (!b8_fused_name(m->cfg.arch, m->prefix, l, g, base, sizeof base)) return false;
    snprintf(wname, sizeof wname, "%s.weight", base);
    return keep_fp32(patterns, wname);
}

/* Every keep_fp32 pattern must name at least one weight of the model: a pattern that
 * matches nothing (no glob stars, a misspelling) would silently quantize everything. */
static bert8_status check_keep_patterns(const bert8_model *m, const char *patterns, b8_err *e) {
    if (!patterns || !*patterns) return BERT8_OK;
    const char *p = patterns;
    while (*p) {
        const char *c = strchr(p, ',');
        const size_t len = c ? (size_t)(c - p) : strlen(p);
        char pat[256];
        if (len >= sizeof pat) return b8_fail(e, BERT8_ERR_INVALID_ARG, "keep_fp32: a pattern is longer than 255 bytes");
        memcpy(pat, p, len);
        pat[len] = 0;
        bool hit = false;
        char example[300] = "";
        for (int64_t l = 0; l < m->cfg.num_layers && !hit && len; l++)
            for (int g = 0; g < B8_GROUP_COUNT && !hit; g++) {
                hit = b8_group_kept(m, l, (b8_group)g, pat);
                if (!example[0]) {
                    b8_model_part_name(m, l, b8_group_table[g].parts[0], example, 256);
                    strcat(example, ".weight");
                }
            }
        /* a head's or an embedding's weight (FP32 anyway) is a match too */
        for (size_t i = 0; !hit && len && m->st && i < b8_st_count(m->st); i++)
            hit = keep_fp32(pat, b8_st_at(m->st, i)->name);
        if (!hit)
            return b8_fail(e, BERT8_ERR_INVALID_ARG,
                           "keep_fp32 pattern \"%s\" matches no weight of the model (names look like \"%s\"; "
                           "patterns are globs: \"*intermediate.dense*\")",
                           pat, example);
        if (!c) break;
        p = c + 1;
    }
    return BERT8_OK;
}

static bert8_status put_err(bert8_status st, char *err, size_t err_len, const char *msg) {
    if (err && err_len) snprintf(err, err_len, "%s", msg);
    return st;
}

void b8_quant_resolve(const bert8_model *fp32, bert8_quant_params *p) {
    const int64_t d = fp32->cfg.num_heads > 0 ? fp32->cfg.hidden_size / fp32->cfg.num_heads : 0;
    if (p->int8_attention == -1) p->int8_attention = d > 0 && d % 4 == 0;
    /* disentangled attention (DeBERTa) runs in fp32 between the INT8 products: it has no INT8
     * kernel */
    if (fp32->cfg.desc->disentangled) p->int8_attention = 0;
    if (p->weight_bits == 0) p->weight_bits = 8;
    if (p->ffn_out_per_token == -1) p->ffn_out_per_token = 1;
    if (p->ffn_in_per_token == -1) p->ffn_in_per_token = 1;
    /* the dynamic scheme is the accuracy-first one: its default keeps outlier channels in fp32
     * (2.5-4% of speed at 8 x 128); the static scheme's per-token groups keep none unless asked */
    if (p->outliers == -1) p->outliers = p->scheme == BERT8_SCHEME_DYNAMIC ? B8_DEFAULT_OUTLIERS : 0;
}

bert8_status b8_quant_check(const bert8_model *fp32, const bert8_quant_params *p, b8_err *e) {
    if (fp32->quantized) return b8_fail(e, BERT8_ERR_INVALID_ARG, "%s is already quantized", fp32->dir);
    if (p->scheme != BERT8_SCHEME_STATIC && p->scheme != BERT8_SCHEME_DYNAMIC)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "unknown scheme %d", (int)p->scheme);
    if (p->alpha > 1.0f || p->alpha != p->alpha)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "alpha %g is outside [0, 1]", (double)p->alpha);
    if (p->int8_attention != 0 && p->int8_attention != 1)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "int8_attention must be -1 (INT8 where the head size allows), 0 or 1, not %d", p->int8_attention);
    if (p->int8_embeddings != 0 && p->int8_embeddings != 1)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "int8_embeddings must be 0 or 1");
    if (p->weight_bits != 7 && p->weight_bits != 8)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "weight_bits must be 7 or 8, not %d", p->weight_bits);
    if (p->ffn_out_per_token != 0 && p->ffn_out_per_token != 1)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "ffn_out_per_token must be -1 (the default: per token), 0 or 1, not %d",
                       p->ffn_out_per_token);
    if (p->outliers < 0 || p->outliers > B8_MAX_OUTLIERS)
        return b8_fail(e, BERT8_ERR_INVALID_ARG,
                       "outliers must be -1 (the default: %d with the dynamic scheme, 0 with the static one), or 0 to %d, not %d",
                       B8_DEFAULT_OUTLIERS, B8_MAX_OUTLIERS, p->outliers);
    if (p->ffn_in_per_token != 0 && p->ffn_in_per_token != 1)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "ffn_in_per_token must be -1 (the default: per token), 0 or 1, not %d",
                       p->ffn_in_per_token);
    const int64_t d = fp32->cfg.hidden_size / fp32->cfg.num_heads;
    if (b8_quant_attention(p, fp32->cfg.num_layers) && d % 4)
        return b8_fail(e, BERT8_ERR_UNSUPPORTED, "INT8 attention needs a head size that is a multiple of 4, not %lld",
                       (long long)d);
    bert8_status st = check_keep_patterns(fp32, p->keep_fp32, e);
    if (st) return st;
    if (!p->unit_modes) return BERT8_OK;
    const int64_t U = bert8_model_unit_count(fp32);
    bool any_int8 = false;
    for (int64_t u = 0; u < U; u++) {
        const bert8_unit_mode mode = p->unit_modes[u];
        const b8_unit_desc *ud = &b8_unit_table[u % B8_UNITS_PER_LAYER];
        if (!b8_unit_mode_valid(mode))
            return b8_fail(e, BERT8_ERR_INVALID_ARG, "unit_modes[%lld] = %d is not a bert8_unit_mode", (long long)u,
                           (int)mode);
        if (ud->kind == B8_UNIT_ATTENTION && mode == BERT8_UNIT_INT8_DYNAMIC)
            return b8_fail(e, BERT8_ERR_INVALID_ARG, "unit_modes[%lld]: an attention unit runs int8_static or fp32",
                           (long long)u);
        if (ud->kind == B8_UNIT_ATTENTION && mode != BERT8_UNIT_FP32 &&
            p->unit_modes[u - u % B8_UNITS_PER_LAYER + B8_UNIT_QKV_POS] == BERT8_UNIT_FP32)
            return b8_fail(e, BERT8_ERR_INVALID_ARG,
                           "unit_modes[%lld]: INT8 attention of layer %lld needs its qkv unit in INT8", (long long)u,
                           (long long)(u / B8_UNITS_PER_LAYER));
        any_int8 = any_int8 || mode != BERT8_UNIT_FP32;
    }
    if (!any_int8) return b8_fail(e, BERT8_ERR_INVALID_ARG, "unit_modes keeps every unit FP32: nothing to quantize");
    return BERT8_OK;
}

bool b8_quant_attention(const bert8_quant_params *p, int64_t layers) {
    if (!p->unit_modes) return p->int8_attention;
    for (int64_t l = 0; l < layers; l++)
        if (p->unit_modes[l * B8_UNITS_PER_LAYER + B8_UNIT_ATTENTION_POS] != BERT8_UNIT_FP32) return true;
    return false;
}

void b8_qattn_scales(const b8_calib *cs, int64_t l, float sc[3], float *sv_ch) {
    const b8_site sites[3] = {B8_SITE_Q, B8_SITE_K, B8_SITE_V};
    for (int i = 0; i < 3; i++) {
        const b8_site_stats *ss = b8_calib_site(cs, l, sites[i]);
        float mx = 0;
        for (int64_t j = 0; j < ss->k; j++) mx = ss->amax[j] > mx ? ss->amax[j] : mx;
        sc[i] = mx > 0 ? mx / 127.0f : 1.0f;
        /* V per channel; a channel (nearly) silent in calibration gets at most 256 times the
         * per-tensor resolution, so that an unseen value there saturates gracefully */
        for (int64_t j = 0; i == 2 && sv_ch && j < ss->k; j++) {
            const float s = ss->amax[j] / 127.0f, floor = sc[2] / 256.0f;
            sv_ch[j] = s > floor ? s : floor;
        }
    }
}

bert8_status bert8_quantize(const bert8_model *fp32, const bert8_batch *calib, size_t n_calib,
                            const bert8_quant_params *params, bert8_model **out, char *err, size_t err_len) {
    if (out) *out = NULL;
    bert8_quant_params p = params ? *params : bert8_default_quant_params();
    if (!fp32 || !out || (!calib && n_calib))
        return put_err(BERT8_ERR_INVALID_ARG, err, err_len, "bert8_quantize: model and out must not be NULL");
    const b8_qmode scheme_mode = p.scheme == BERT8_SCHEME_STATIC ? B8_QMODE_STATIC : B8_QMODE_DYNAMIC;
    const int64_t L = fp32->cfg.num_layers;
    b8_err e;
    b8_err_clear(&e);
    b8_calib cs;
    bert8_model *m = NULL;
    b8_quant_resolve(fp32, &p);
    bert8_status st = b8_quant_check(fp32, &p, &e);
    if (st) return put_err(st, err, err_len, e.msg);
    if (n_calib == 0) return put_err(BERT8_ERR_INVALID_ARG, err, err_len, "calibration needs at least one sequence");
    const bool attention = b8_quant_attention(&p, L);
    if ((st = b8_calib_init(&cs, fp32, p.smooth && p.alpha < 0, attention, &e)))
        return put_err(st, err, err_len, e.msg);
    /* 1. run the FP32 model over the calibration set, recording every Linear's input */
    if ((st = b8_calib_run(&cs, fp32, calib, n_calib, p.max_samples, p.progress, &e))) goto done;
    /* 2. a fresh copy of the model (its own mapping of the checkpoint), then INT8 Linears */
    char lerr[1024];
    bert8_load_params lp = bert8_default_load_params();
    lp.lora_task = fp32->lora_task; /* the same adapters folded */
    if ((st = bert8_model_load(fp32->dir, &lp, &m, lerr, sizeof lerr))) {
        b8_fail(&e, st, "%s", lerr);
        goto done;
    }
    m->quantized = true;
    m->scheme = p.scheme;
    m->calib_samples = cs.sequences;
    m->weight_bits = p.weight_bits;
    snprintf(m->keep_fp32, sizeof m->keep_fp32, "%s", p.keep_fp32 ? p.keep_fp32 : "");
    for (int64_t l = 0; l < L; l++) {
        for (int g = 0; g < B8_GROUP_COUNT; g++) {
            if (b8_group_kept(m, l, (b8_group)g, p.keep_fp32)) continue;
            b8_qmode mode = scheme_mode;
            if (g == B8_GROUP_FFN_OUT && p.ffn_out_per_token) mode = B8_QMODE_DYNAMIC;
            if (g == B8_GROUP_FFN_IN && p.ffn_in_per_token) mode = B8_QMODE_DYNAMIC;
            if (p.unit_modes)
                for (int i = 0; i < B8_UNITS_PER_LAYER; i++)
                    if (b8_unit_table[i].kind == B8_UNIT_LINEAR && b8_unit_table[i].group == (b8_group)g)
                        mode = b8_qmode_of_unit_mode(p.unit_modes[l * B8_UNITS_PER_LAYER + i]);
            if (mode == B8_QMODE_FP32) continue;
            const float *w, *b;
            bool owned;
            int64_t n, k;
            b8_group_dims(m->cfg.desc, (b8_group)g, m->cfg.hidden_size, m->cfg.intermediate_size, &n, &k);
            if ((st = b8_layer_group_fp32(m, l, (b8_group)g, &w, &b, &owned, &e))) goto done;
            const b8_site_stats *ss = b8_calib_site(&cs, l, b8_group_table[g].site);
            st = b8_quantize_group(w, b, n, k, ss, &p, mode, b8_group_zero_ok((b8_group)g), &m->layers[l].q[g], &e);
            if (owned) {
                b8_free_aligned((void *)w);
                b8_free_aligned((void *)b);
            }
            if (st) {
                b8_wrap(&e, "layer %lld %s", (long long)l, b8_group_table[g].key);
                goto done;
            }
        }
        const bool att_l =
            !m->cfg.desc->disentangled &&
            (p.unit_modes ? p.unit_modes[l * B8_UNITS_PER_LAYER + B8_UNIT_ATTENTION_POS] != BERT8_UNIT_FP32
                          : p.int8_attention);
        if (att_l && m->layers[l].q[B8_GROUP_QKV]) {
            float sc[3], *sv_ch = malloc((size_t)m->cfg.hidden_size * sizeof(float));
            if (!sv_ch) {
                st = b8_fail(&e, BERT8_ERR_NOMEM, "out of memory");
                goto done;
            }
            b8_qattn_scales(&cs, l, sc, sv_ch);
            st = b8_qattn_make(sc[0], sc[1], sc[2], sv_ch, m->cfg.hidden_size, &m->layers[l].att, &e);
            free(sv_ch);
            if (st) goto done;
        }
        if (p.progress) b8_calib_progress("quantizing", l + 1, L);
    }
    if ((st = b8_model_prepare_int8(m, &e))) goto done;
    if (p.int8_embeddings && (st = b8_model_quantize_embeddings(m, &e))) goto done;
    m->info.quantized = 1;
    m->info.scheme = p.scheme;
    m->info.weight_bits = p.weight_bits;
done:
    b8_calib_free(&cs);
    if (st) {
        bert8_model_free(m);
        return put_err(st, err, err_len, e.msg);
    }
    *out = m;
    return BERT8_OK;
}
