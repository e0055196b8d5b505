/* qlinear.c: INT8 Linear layers (see qlinear.h).
 *
 * Post-LN BERT feeds each LayerNorm's output both to the next Linear and to the residual path,
 * so 1/s cannot be folded into the LayerNorm's own gamma/beta: the fused LayerNorm kernel
 * writes the fp32 output with gamma/beta and, with a second folded pair gamma/(s*a),
 * beta/(s*a), the int8 input of the next GEMM. */
#include "quant/qlinear.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/quantize/quantize.h"

#define SMOOTH_MIN 1e-5f
#define SMOOTH_MAX 1e5f

void b8_qlinear_free(b8_qlinear *q) {
    if (!q) return;
    b8_qweight_free(q->packed);
    b8_free_aligned(q->wq);
    b8_free_aligned(q->w_scale);
    b8_free_aligned(q->bias);
    b8_free_aligned(q->smooth);
    b8_free_aligned(q->in_mul);
    b8_free_aligned(q->ln_qg);
    b8_free_aligned(q->ln_qb);
    free(q->out_idx);
    b8_free_aligned(q->out_w);
    b8_free_aligned(q->out_wt);
    free(q);
}

b8_qlinear *b8_qlinear_alloc(int64_t n, int64_t k) {
    size_t nk;
    if (n <= 0 || k <= 0 || !b8_mul_ok((size_t)n, (size_t)k, &nk)) return NULL;
    b8_qlinear *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    q->n = n;
    q->k = k;
    q->alpha = -1.0f;
    q->mode = B8_QMODE_STATIC;
    q->wq = b8_calloc_aligned(nk, 1);
    q->w_scale = b8_calloc_aligned((size_t)n, sizeof(float));
    q->bias = b8_calloc_aligned((size_t)n, sizeof(float));
    q->smooth = b8_calloc_aligned((size_t)k, sizeof(float));
    if (!q->wq || !q->w_scale || !q->bias || !q->smooth) {
        b8_qlinear_free(q);
        return NULL;
    }
    return q;
}

/* SmoothQuant factors: s_j = max|X_j|^a / max|W_j|^(1-a), clamped; 1 where a channel is dead. */
static bert8_status smooth_factors(const float *w, int64_t n, int64_t k, const float *amax, float alpha,
                                   float *s, b8_err *e) {
    for (int64_t j = 0; j < k; j++) s[j] = 1.0f;
    if (!amax || alpha < 0) return BERT8_OK;
    float *wmax = calloc((size_t)k, sizeof(float));
    if (!wmax) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
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
    return BERT8_OK;
}

/* Quantizes W * s per output channel to [-qmax, qmax]; columns with skip[j] (skip may be NULL)
 * become 0 and do not count towards the scale. */
static void quantize_weights(const float *w, int64_t n, int64_t k, const float *s, const uint8_t *skip, float qmax,
                             int8_t *wq, float *w_scale) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float m = 0;
        for (int64_t j = 0; j < k; j++)
            if (!skip || !skip[j]) m = fmaxf(m, fabsf(w[i * k + j] * s[j]));
        float sc = m > 0 ? m / qmax : 1.0f;
        w_scale[i] = sc;
        float inv = 1.0f / sc;
        for (int64_t j = 0; j < k; j++) wq[i * k + j] = skip && skip[j] ? 0 : b8_q8(w[i * k + j] * s[j] * inv);
    }
}

/* The count channels of largest amax (ties: the lower index), ascending, into idx. */
static void pick_outliers(const float *amax, int64_t k, int64_t count, int32_t *idx, uint8_t *mark) {
    memset(mark, 0, (size_t)k);
    for (int64_t o = 0; o < count; o++) {
        int64_t best = -1;
        for (int64_t j = 0; j < k; j++)
            if (!mark[j] && (best < 0 || amax[j] > amax[best])) best = j;
        if (best < 0) break;
        mark[best] = 1;
    }
    int64_t o = 0;
    for (int64_t j = 0; j < k; j++)
        if (mark[j]) idx[o++] = (int32_t)j;
}

static float static_scale(const float *amax, const float *s, int64_t k) {
    float m = 0;
    for (int64_t j = 0; j < k; j++) m = fmaxf(m, amax[j] / s[j]);
    return m > 0 ? m / 127.0f : 1.0f;
}

void b8_qlinear_set_range(b8_qlinear *q, const float *cmin, const float *cmax) {
    if (q->mode != B8_QMODE_STATIC) return;
    float lo = 0.0f, hi = 0.0f;
    for (int64_t j = 0; j < q->k; j++) {
        lo = fminf(lo, cmin[j] / q->smooth[j]);
        hi = fmaxf(hi, cmax[j] / q->smooth[j]);
    }
    if (!(hi - lo > 0.0f)) return; /* a dead input: the symmetric scale stays */
    const float a = (hi - lo) / 254.0f;
    /* lo maps to -127 (or above, rounding the zero point), hi to 127 (or below) */
    const float z = fminf(fmaxf(rintf(-127.0f - lo / a), -127.0f), 127.0f);
    q->a_scale = a;
    q->a_zero = z;
}

bert8_status b8_qlinear_from_fp32(const float *w, const float *b, int64_t n, int64_t k, const float *amax,
                                  float alpha, b8_qmode mode, int weight_bits, int64_t outliers, b8_qlinear **out,
                                  b8_err *e) {
    *out = NULL;
    if (weight_bits != 7 && weight_bits != 8)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "weight_bits must be 7 or 8, not %d", weight_bits);
    if (mode != B8_QMODE_STATIC && mode != B8_QMODE_DYNAMIC)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "an INT8 Linear needs mode int8_static or int8_dynamic, not %s",
                       b8_qmode_name(mode));
    if (mode == B8_QMODE_STATIC && !amax)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "a static INT8 Linear needs calibrated activation ranges");
    b8_qlinear *q = b8_qlinear_alloc(n, k);
    if (!q)
        return b8_fail(e, BERT8_ERR_NOMEM, "out of memory quantizing a %lld x %lld weight", (long long)n,
                       (long long)k);
    bert8_status st = smooth_factors(w, n, k, amax, alpha, q->smooth, e);
    if (st) {
        b8_qlinear_free(q);
        return st;
    }
    const int64_t lim = k / 8 < B8_MAX_OUTLIERS ? k / 8 : B8_MAX_OUTLIERS;
    const int64_t r = mode == B8_QMODE_DYNAMIC && amax && outliers > 0 ? (outliers < lim ? outliers : lim) : 0;
    int32_t idx[B8_MAX_OUTLIERS];
    uint8_t *mark = r > 0 ? malloc((size_t)k) : NULL;
    float *ow = r > 0 ? malloc((size_t)(n * r) * sizeof(float)) : NULL;
    if (r > 0 && (!mark || !ow)) {
        free(mark);
        free(ow);
        b8_qlinear_free(q);
        return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
    }
    if (r > 0) {
        pick_outliers(amax, k, r, idx, mark);
        for (int64_t o = 0; o < r; o++) q->smooth[idx[o]] = 1.0f;
        for (int64_t i = 0; i < n; i++)
            for (int64_t o = 0; o < r; o++) ow[i * r + o] = w[i * k + idx[o]];
    }
    quantize_weights(w, n, k, q->smooth, mark, weight_bits == 7 ? 64.0f : 127.0f, q->wq, q->w_scale);
    free(mark);
    q->mode = mode;
    st = r > 0 ? b8_qlinear_set_outliers(q, idx, r, ow, e) : BERT8_OK;
    free(ow);
    if (st) {
        b8_qlinear_free(q);
        return st;
    }
    if (b) memcpy(q->bias, b, (size_t)n * sizeof(float));
    q->alpha = amax && alpha >= 0 ? alpha : -1.0f;
    q->a_scale = mode == B8_QMODE_STATIC ? static_scale(amax, q->smooth, k) : 0.0f;
    *out = q;
    return BERT8_OK;
}

bert8_status b8_qlinear_set_outliers(b8_qlinear *q, const int32_t *idx, int64_t count, const float *w, b8_err *e) {
    if (q->mode != B8_QMODE_DYNAMIC)
        return b8_fail(e, BERT8_ERR_FORMAT, "outlier channels belong to a dynamic INT8 Linear, not a %s one",
                       b8_qmode_name(q->mode));
    if (count <= 0 || count > q->k / 8 || count > B8_MAX_OUTLIERS)
        return b8_fail(e, BERT8_ERR_FORMAT, "%lld outlier channels for %lld inputs (1 to %lld, at most %d)",
                       (long long)count, (long long)q->k, (long long)(q->k / 8), B8_MAX_OUTLIERS);
    for (int64_t o = 0; o < count; o++) {
        if (idx[o] < 0 || idx[o] >= q->k || (o > 0 && idx[o] <= idx[o - 1]))
            return b8_fail(e, BERT8_ERR_FORMAT, "outlier channel %lld is %d: the indices must rise strictly within [0, %lld)",
                           (long long)o, (int)idx[o], (long long)q->k);
        if (q->smooth[idx[o]] != 1.0f)
            return b8_fail(e, BERT8_ERR_FORMAT, "outlier channel %d has smoothing %g, not 1", (int)idx[o],
                           (double)q->smooth[idx[o]]);
        for (int64_t i = 0; q->wq && i < q->n; i++)
            if (q->wq[i * q->k + idx[o]] != 0)
                return b8_fail(e, BERT8_ERR_FORMAT, "outlier channel %d has a nonzero int8 weight in row %lld",
                               (int)idx[o], (long long)i);
    }
    for (int64_t i = 0; i < q->n * count; i++)
        if (!isfinite(w[i]))
            return b8_fail(e, BERT8_ERR_FORMAT, "outlier weight [%lld][%lld] is %g, not finite", (long long)(i / count),
                           (long long)(i % count), (double)w[i]);
    int32_t *ni = malloc((size_t)count * sizeof(int32_t));
    float *nw = b8_malloc_aligned((size_t)(q->n * count) * sizeof(float));
    if (!ni || !nw) {
        free(ni);
        b8_free_aligned(nw);
        return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
    }
    memcpy(ni, idx, (size_t)count * sizeof(int32_t));
    memcpy(nw, w, (size_t)(q->n * count) * sizeof(float));
    free(q->out_idx);
    b8_free_aligned(q->out_w);
    b8_free_aligned(q->out_wt);
    q->out_wt = NULL;
    q->out_idx = ni;
    q->out_w = nw;
    q->n_out = count;
    return BERT8_OK;
}

b8_qlinear *b8_qlinear_copy(const b8_qlinear *q) {
    b8_qlinear *c = b8_qlinear_alloc(q->n, q->k);
    if (!c) return NULL;
    if (b8_qlinear_weights(q, c->wq, NULL) != BERT8_OK) {
        b8_qlinear_free(c);
        return NULL;
    }
    memcpy(c->w_scale, q->w_scale, (size_t)q->n * sizeof(float));
    memcpy(c->bias, q->bias, (size_t)q->n * sizeof(float));
    memcpy(c->smooth, q->smooth, (size_t)q->k * sizeof(float));
    c->mode = q->mode;
    c->a_scale = q->a_scale;
    c->a_zero = q->a_zero;
    c->alpha = q->alpha;
    if (q->n_out && b8_qlinear_set_outliers(c, q->out_idx, q->n_out, q->out_w, NULL) != BERT8_OK) {
        b8_qlinear_free(c);
        return NULL;
    }
    return c;
}

bert8_status b8_qlinear_stack(b8_qlinear *const *parts, int count, const char *what, b8_qlinear **out,
                              b8_err *e) {
    *out = NULL;
    const b8_qlinear *p0 = parts[0];
    int64_t n = 0;
    for (int i = 0; i < count; i++) {
        const b8_qlinear *p = parts[i];
        if (p->k != p0->k || p->mode != p0->mode || p->a_scale != p0->a_scale || p->a_zero != p0->a_zero ||
            memcmp(p->smooth, p0->smooth, (size_t)p0->k * sizeof(float)) || p->n_out != p0->n_out ||
            (p->n_out && memcmp(p->out_idx, p0->out_idx, (size_t)p0->n_out * sizeof(int32_t))))
            return b8_fail(e, BERT8_ERR_FORMAT,
                           "%s: the stacked Linears must share smooth_factor, input_scale, outlier channels and mode", what);
        n += p->n;
    }
    b8_qlinear *q = b8_qlinear_alloc(n, p0->k);
    if (!q) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
    q->mode = p0->mode;
    q->a_scale = p0->a_scale;
    q->a_zero = p0->a_zero;
    q->alpha = p0->alpha;
    memcpy(q->smooth, p0->smooth, (size_t)p0->k * sizeof(float));
    const int64_t no = p0->n_out;
    if (no && (!(q->out_idx = malloc((size_t)no * sizeof(int32_t))) ||
               !(q->out_w = b8_malloc_aligned((size_t)(n * no) * sizeof(float))))) {
        b8_qlinear_free(q);
        return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
    }
    q->n_out = no;
    if (no) memcpy(q->out_idx, p0->out_idx, (size_t)no * sizeof(int32_t));
    int64_t r = 0;
    for (int i = 0; i < count; i++) {
        const b8_qlinear *p = parts[i];
        memcpy(q->wq + r * q->k, p->wq, (size_t)(p->n * p->k));
        memcpy(q->w_scale + r, p->w_scale, (size_t)p->n * sizeof(float));
        memcpy(q->bias + r, p->bias, (size_t)p->n * sizeof(float));
        if (no) memcpy(q->out_w + r * no, p->out_w, (size_t)(p->n * no) * sizeof(float));
        r += p->n;
    }
    *out = q;
    return BERT8_OK;
}

bert8_status b8_qlinear_prepare(b8_qlinear *q, const float *ln_g, const float *ln_b, b8_err *e) {
    const bool stat = q->mode == B8_QMODE_STATIC;
    if (stat && !(q->a_scale > 0) )
        return b8_fail(e, BERT8_ERR_FORMAT, "static INT8 Linear %lld x %lld has no positive input scale",
                       (long long)q->n, (long long)q->k);
    if (q->a_zero != 0.0f && (!stat || !(q->a_zero >= -127.0f && q->a_zero <= 127.0f) || q->a_zero != rintf(q->a_zero)))
        return b8_fail(e, BERT8_ERR_FORMAT, "INT8 Linear %lld x %lld: input zero point %g is not an integer in [-127, 127]%s",
                       (long long)q->n, (long long)q->k, (double)q->a_zero, stat ? "" : " of a static input");
    if (!q->in_mul && !(q->in_mul = b8_malloc_aligned((size_t)q->k * sizeof(float))))
        return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
    for (int64_t j = 0; j < q->k; j++) q->in_mul[j] = stat ? 1.0f / (q->smooth[j] * q->a_scale) : 1.0f / q->smooth[j];
    if (q->n_out) {
        if (stat)
            return b8_fail(e, BERT8_ERR_FORMAT, "INT8 Linear %lld x %lld: outlier channels need a dynamic input",
                           (long long)q->n, (long long)q->k);
        /* the quantizer sees 0 on an outlier channel: it neither sets the row's scale nor
         * reaches the (zero) int8 weights; the epilogue adds its fp32 product */
        for (int64_t o = 0; o < q->n_out; o++) q->in_mul[q->out_idx[o]] = 0.0f;
        if (!q->out_wt) {
            if (!(q->out_wt = b8_malloc_aligned((size_t)(q->n * q->n_out) * sizeof(float))))
                return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
            for (int64_t i = 0; i < q->n; i++)
                for (int64_t o = 0; o < q->n_out; o++) q->out_wt[o * q->n + i] = q->out_w[i * q->n_out + o];
        }
    }
    if (stat && ln_g && ln_b && !q->ln_qg) {
        q->ln_qg = b8_malloc_aligned((size_t)q->k * sizeof(float));
        q->ln_qb = b8_malloc_aligned((size_t)q->k * sizeof(float));
        if (!q->ln_qg || !q->ln_qb) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
        for (int64_t j = 0; j < q->k; j++) {
            q->ln_qg[j] = ln_g[j] * q->in_mul[j];
            q->ln_qb[j] = ln_b[j] * q->in_mul[j];
        }
    }
    if (q->packed) return BERT8_OK;
    bert8_status st = b8_qweight_pack(q->wq, q->n, q->k, q->w_scale, NULL, &q->packed, e);
    if (st) return st;
    if (q->a_zero != 0.0f && (st = b8_qweight_set_input_zero(q->packed, (int32_t)q->a_zero, e))) {
        b8_qweight_free(q->packed);
        q->packed = NULL;
        return st;
    }
    /* one copy of the weights: the packed layout gives them back (save, re-quantization) */
    int8_t *check = b8_malloc_aligned((size_t)(q->n * q->k));
    if (check && b8_qweight_unpack(q->packed, check, NULL) == BERT8_OK && !memcmp(check, q->wq, (size_t)(q->n * q->k))) {
        b8_free_aligned(q->wq);
        q->wq = NULL;
    }
    b8_free_aligned(check);
    return BERT8_OK;
}

bert8_status b8_qlinear_weights(const b8_qlinear *q, int8_t *dst, b8_err *e) {
    if (q->wq) {
        memcpy(dst, q->wq, (size_t)(q->n * q->k));
        return BERT8_OK;
    }
    if (!q->packed) return b8_fail(e, BERT8_ERR_INTERNAL, "an INT8 Linear has neither weights nor packed weights");
    return b8_qweight_unpack(q->packed, dst, e);
}

bert8_status b8_qattn_make(float sq, float sk, float sv, const float *sv_ch, int64_t H, b8_qattn **out, b8_err *e) {
    *out = NULL;
    if (sv_ch) sv = 1.0f;
    const float sc[3] = {sq, sk, sv};
    for (int i = 0; i < 3; i++)
        if (!(sc[i] > 0.0f) || isinf(sc[i]))
            return b8_fail(e, BERT8_ERR_FORMAT, "INT8 attention: scale of %c is %g, not finite and positive", "QKV"[i],
                           (double)sc[i]);
    for (int64_t j = 0; sv_ch && j < H; j++)
        if (!(sv_ch[j] > 0.0f) || isinf(sv_ch[j]))
            return b8_fail(e, BERT8_ERR_FORMAT, "INT8 attention: scale of V channel %lld is %g, not finite and positive",
                           (long long)j, (double)sv_ch[j]);
    b8_qattn *a = calloc(1, sizeof *a);
    if (!a || !(a->out_mul = b8_malloc_aligned((size_t)(3 * H) * sizeof(float))) ||
        (sv_ch && !(a->sv_ch = b8_malloc_aligned((size_t)H * sizeof(float))))) {
        b8_qattn_free(a);
        return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
    }
    a->sq = sq, a->sk = sk, a->sv = sv;
    for (int64_t j = 0; j < 3 * H; j++) a->out_mul[j] = 1.0f / sc[j / H];
    if (sv_ch) {
        memcpy(a->sv_ch, sv_ch, (size_t)H * sizeof(float));
        for (int64_t j = 0; j < H; j++) a->out_mul[2 * H + j] = 1.0f / sv_ch[j];
    }
    *out = a;
    return BERT8_OK;
}

void b8_qattn_free(b8_qattn *a) {
    if (!a) return;
    b8_free_aligned(a->out_mul);
    b8_free_aligned(a->sv_ch);
    free(a);
}
