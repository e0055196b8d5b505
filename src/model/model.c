/* model.c: loading a Hugging Face checkpoint folder (FP32 or a bert8 INT8 folder) into a
 * bert8_model.
 *
 * Tensor names follow transformers (io/names.h): an optional prefix (bert., roberta.,
 * distilbert.), legacy LayerNorm.gamma/.beta accepted for .weight/.bias, and every shape is
 * checked against config.json before any weight is used. Each Linear group of a layer is
 * either packed for the FP32 GEMM or, when the checkpoint stores it in I8, loaded as an INT8
 * Linear (quant/qlinear.h) in the mode quantization_config.json gives. */
#include "model/model.h"

#include "base/cpu.h"
#include "kernels/quantize/quantize.h"
#include "kernels/rowops/rowops.h"
#include "model/lora.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct loader {
    bert8_model *m;
    b8_err *e;
    b8_qconfig qc; /* quantization_config.json, when present */
    b8_lora lora;  /* the LoRA task to fold (lora.task < 0: none) */
} loader;

static bert8_status keep_owned(bert8_model *m, float *p, b8_err *e) {
    if (m->n_owned == m->cap_owned) {
        size_t cap = m->cap_owned ? m->cap_owned * 2 : 64;
        float **np = realloc(m->owned, cap * sizeof *np);
        if (!np) {
            b8_free_aligned(p);
            return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
        }
        m->owned = np;
        m->cap_owned = cap;
    }
    m->owned[m->n_owned++] = p;
    return BERT8_OK;
}

/* Finds prefix+name, accepting the legacy gamma/beta spelling of LayerNorm parameters and a
 * LoRA-parametrized module's "<base>.parametrizations.weight.original" for "<base>.weight". */
static const b8_st_tensor *find_tensor(const bert8_model *m, const char *name, bool with_prefix) {
    char full[512];
    snprintf(full, sizeof full, "%s%s", with_prefix ? m->prefix : "", name);
    const b8_st_tensor *t = b8_st_find(m->st, full);
    if (t) return t;
    size_t n = strlen(full);
    const char *wt = ".weight";
    if (n > strlen(wt) && !strcmp(full + n - strlen(wt), wt) && n - strlen(wt) + strlen(B8_LORA_ORIGINAL) < sizeof full) {
        strcpy(full + n - strlen(wt), B8_LORA_ORIGINAL);
        if ((t = b8_st_find(m->st, full))) return t;
        full[n - strlen(wt)] = '\0';
        strcat(full, wt);
    }
    const char *w = "LayerNorm.weight", *b = "LayerNorm.bias";
    if (n > strlen(w) && !strcmp(full + n - strlen(w), w)) {
        strcpy(full + n - strlen("weight"), "gamma");
        return b8_st_find(m->st, full);
    }
    if (n > strlen(b) && !strcmp(full + n - strlen(b), b)) {
        strcpy(full + n - strlen("bias"), "beta");
        return b8_st_find(m->st, full);
    }
    return NULL;
}

static bool has(const bert8_model *m, const char *name) { return find_tensor(m, name, false) != NULL; }

/* The word embeddings' tensor base name (b8_arch_desc.word_emb). */
static const char *word_emb_name(const bert8_model *m) {
    return m->cfg.desc->word_emb ? m->cfg.desc->word_emb : "embeddings.word_embeddings";
}

/* Folds the LoRA task's adapter into w [n][k], the converted copy of the parametrized base weight
 * `orig` ("<base>.parametrizations.weight.original") asked for as `name`, and records it for
 * bert8_model_save. The embedding tables multiply A B, every other module B A. */
static bert8_status fold_lora(loader *L, const char *orig, const char *name, float *w, int64_t n, int64_t k) {
    bert8_model *m = L->m;
    char base[512], emb[160];
    const size_t bl = strlen(orig) - strlen(B8_LORA_ORIGINAL);
    if (strlen(orig) <= strlen(B8_LORA_ORIGINAL) || strcmp(orig + bl, B8_LORA_ORIGINAL) || bl >= sizeof base)
        return BERT8_OK; /* an adapter tensor itself asked for by name: nothing to fold */
    memcpy(base, orig, bl);
    base[bl] = '\0';
    snprintf(emb, sizeof emb, "%s.weight", word_emb_name(m));
    const bool table = !strcmp(name, emb) || !strcmp(name, "embeddings.token_type_embeddings.weight");
    bool applied = false;
    bert8_status st = b8_lora_fold(m->st, &L->lora, base, table, w, n, k, &applied, L->e);
    if (st) return b8_wrap(L->e, "%s: LoRA task \"%s\"", m->dir, m->lora_task);
    if (!applied) return BERT8_OK;
    struct b8_lora_folded *nf = realloc(m->lora_folded, (m->n_lora_folded + 1) * sizeof *nf);
    if (!nf) return b8_fail(L->e, BERT8_ERR_NOMEM, "out of memory");
    m->lora_folded = nf;
    if (!(nf[m->n_lora_folded].base = strdup(base))) return b8_fail(L->e, BERT8_ERR_NOMEM, "out of memory");
    nf[m->n_lora_folded].w = w;
    nf[m->n_lora_folded].n = n;
    nf[m->n_lora_folded].k = k;
    m->n_lora_folded++;
    return BERT8_OK;
}

/* Every float tensor the loader takes is checked once: a NaN or infinity anywhere would make
 * every output NaN (or garbage) without a word. */
static bert8_status check_finite(loader *L, const char *name, const float *v, size_t n) {
    const size_t bad = b8_first_nonfinite(v, n);
    if (bad == n) return BERT8_OK;
    return b8_fail(L->e, BERT8_ERR_FORMAT, "%s: tensor \"%s\"[%zu] = %g is not finite", L->m->dir, name, bad,
                   (double)v[bad]);
}

/* Returns the tensor as FP32 with exactly the given shape: in place when it is aligned F32,
 * else converted once into a buffer the model owns; finite. */
static bert8_status get_f32(loader *L, const char *name, bool with_prefix, int ndim,
                            const int64_t *shape, const float **out) {
    bert8_model *m = L->m;
    *out = NULL;
    const b8_st_tensor *t = find_tensor(m, name, with_prefix);
    if (!t)
        return b8_fail(L->e, BERT8_ERR_MISSING, "%s: tensor \"%s%s\" is missing", m->dir,
                       with_prefix ? m->prefix : "", name);
    bool ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++) ok = t->shape[i] == shape[i];
    if (!ok) {
        char want[128] = "", got[128] = "";
        for (int i = 0; i < ndim; i++)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", i ? "," : "",
                     (long long)shape[i]);
        for (int i = 0; i < t->ndim; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", i ? "," : "",
                     (long long)t->shape[i]);
        return b8_fail(L->e, BERT8_ERR_SHAPE,
                       "%s: tensor \"%s\" has shape [%s] but config.json implies [%s]", m->dir,
                       t->name, got, want);
    }
    size_t count = b8_st_numel(t);
    const bool lora = L->lora.task >= 0 && ndim == 2 && b8_lora_is_param(t->name);
    if (!lora && t->dtype == B8_F32 && ((uintptr_t)t->data % sizeof(float)) == 0) {
        *out = t->data;
        return check_finite(L, t->name, *out, count);
    }
    if (t->dtype != B8_F32 && t->dtype != B8_F16 && t->dtype != B8_BF16 && t->dtype != B8_F64)
        return b8_fail(L->e, BERT8_ERR_UNSUPPORTED, "%s: tensor \"%s\" has dtype %s; expected a float type",
                       m->dir, t->name, b8_dtype_name(t->dtype));
    float *buf = NULL;
    bert8_status st = b8_st_to_f32(t, count, &buf, L->e);
    if (st) return st;
    if ((st = keep_owned(m, buf, L->e))) return st;
    *out = buf;
    if (lora && (st = fold_lora(L, t->name, name, buf, shape[0], shape[1]))) return st;
    return check_finite(L, t->name, buf, count); /* after the fold: the adapters' values too */
}

/* weight [n][k] and bias [n] views of a Linear stored in float under base. */
static bert8_status get_views(loader *L, const char *base, bool with_prefix, int64_t n, int64_t k,
                              const float **w, const float **b) {
    char name[1024];
    int64_t ws[2] = {n, k}, bs[1] = {n};
    bert8_status st;
    snprintf(name, sizeof name, "%s.weight", base);
    if ((st = get_f32(L, name, with_prefix, 2, ws, w))) return st;
    snprintf(name, sizeof name, "%s.bias", base);
    return get_f32(L, name, with_prefix, 1, bs, b);
}

/* A layer Linear's views; an architecture without that bias (b8_arch_desc.no_bias) gets zeros. */
static bert8_status get_part_views(loader *L, const char *base, b8_group g, int64_t n, int64_t k, const float **w,
                                   const float **b) {
    if (!L->m->cfg.desc->no_bias[g]) return get_views(L, base, false, n, k, w, b);
    char name[1024];
    int64_t ws[2] = {n, k};
    snprintf(name, sizeof name, "%s.weight", base);
    bert8_status st = get_f32(L, name, false, 2, ws, w);
    if (st) return st;
    float *z = b8_malloc_aligned((size_t)n * sizeof(float));
    if (!z) return b8_fail(L->e, BERT8_ERR_NOMEM, "out of memory");
    memset(z, 0, (size_t)n * sizeof(float));
    if ((st = keep_owned(L->m, z, L->e))) return st;
    *b = z;
    return BERT8_OK;
}

/* A group the checkpoint stores fused (b8_arch_desc.fused): one [np x pn][k] tensor under base,
 * whose rows become the views of the group's parts. */
static bert8_status get_fused_views(loader *L, const char *base, b8_group g, int np, int64_t pn, int64_t k,
                                    b8_layer *ly) {
    const b8_group_desc *d = &b8_group_table[g];
    const float *w, *b;
    bert8_status st = get_part_views(L, base, g, np * pn, k, &w, &b);
    if (st) return st;
    for (int i = 0; i < np; i++) {
        const int64_t at = d->gated && L->m->cfg.desc->fused_up_first ? np - 1 - i : i;
        ly->w[d->parts[i]] = w + at * pn * k;
        ly->b[d->parts[i]] = b + at * pn;
    }
    return BERT8_OK;
}

/* A Linear outside the encoder (pooler, heads), packed with its epilogue. */
static bert8_status get_linear(loader *L, const char *base, bool with_prefix, int64_t n, int64_t k,
                               b8_act post, b8_linear *lin) {
    lin->n = n;
    lin->k = k;
    bert8_status st = get_views(L, base, with_prefix, n, k, &lin->w, &lin->b);
    if (st == BERT8_ERR_MISSING && lin->w && L->m->cfg.desc->head_no_bias && !strcmp(base, "head.dense")) {
        float *z = b8_malloc_aligned((size_t)n * sizeof(float)); /* classifier_bias false */
        if (!z) return b8_fail(L->e, BERT8_ERR_NOMEM, "out of memory");
        memset(z, 0, (size_t)n * sizeof(float));
        if ((st = keep_owned(L->m, z, L->e))) return st;
        lin->b = z;
    }
    if (!st && (st = b8_sgemm_w_pack_head(lin->w, lin->b, n, k, post, &lin->f32, L->e)))
        return b8_wrap(L->e, "%s: packing \"%s\"", L->m->dir, base);
    return st;
}

void b8_model_part_name(const bert8_model *m, int64_t layer, b8_part part, char *out, size_t cap) {
    b8_part_name(m->cfg.arch, m->prefix, layer, part, out, cap);
}

static bool is_i8(const bert8_model *m, const char *base) {
    char name[1024];
    snprintf(name, sizeof name, "%s.weight", base);
    const b8_st_tensor *t = find_tensor(m, name, false);
    return t && t->dtype == B8_I8;
}

/* Reads a small F32 vector tensor that must be finite and positive (scales, smoothing). */
static bert8_status get_scales(loader *L, const char *base, const char *suffix, int64_t n, float *out) {
    char name[1024];
    snprintf(name, sizeof name, "%s.%s", base, suffix);
    int64_t shape[1] = {n};
    const float *v = NULL;
    bert8_status st = get_f32(L, name, false, 1, shape, &v);
    if (st) return st;
    for (int64_t i = 0; i < n; i++)
        if (!(v[i] > 0.0f) || isinf(v[i]))
            return b8_fail(L->e, BERT8_ERR_FORMAT, "%s: tensor \"%s\"[%lld] = %g is not a finite positive scale",
                           L->m->dir, name, (long long)i, (double)v[i]);
    memcpy(out, v, (size_t)n * sizeof(float));
    return BERT8_OK;
}

/* Loads one INT8 Linear stored under base (full name): I8 weight + bias + weight_scale +
 * smooth_factor [+ input_scale]. */
static bert8_status load_qlinear(loader *L, const char *base, int64_t n, int64_t k, b8_qmode mode,
                                 bool zero_ok, b8_qlinear **out) {
    bert8_model *m = L->m;
    char name[1024];
    *out = NULL;
    snprintf(name, sizeof name, "%s.weight", base);
    const b8_st_tensor *t = find_tensor(m, name, false);
    if (!t) return b8_fail(L->e, BERT8_ERR_MISSING, "%s: tensor \"%s\" is missing", m->dir, name);
    if (t->dtype != B8_I8 || t->ndim != 2 || t->shape[0] != n || t->shape[1] != k)
        return b8_fail(L->e, BERT8_ERR_SHAPE, "%s: tensor \"%s\" must be I8 [%lld,%lld] in a quantized checkpoint",
                       m->dir, t->name, (long long)n, (long long)k);
    b8_qlinear *q = b8_qlinear_alloc(n, k);
    if (!q) return b8_fail(L->e, BERT8_ERR_NOMEM, "out of memory");
    q->mode = mode;
    memcpy(q->wq, t->data, (size_t)(n * k));
    b8_st_release(m->st, t); /* copied: the mapped pages need not stay resident */
    const float *bias = NULL;
    int64_t bs[1] = {n};
    bert8_status st;
    snprintf(name, sizeof name, "%s.bias", base);
    if ((st = get_f32(L, name, false, 1, bs, &bias))) goto fail;
    memcpy(q->bias, bias, (size_t)n * sizeof(float));
    if ((st = get_scales(L, base, B8_QT_WEIGHT_SCALE, n, q->w_scale)) ||
        (st = get_scales(L, base, B8_QT_SMOOTH, k, q->smooth)))
        goto fail;
    if (mode == B8_QMODE_STATIC && (st = get_scales(L, base, B8_QT_INPUT_SCALE, 1, &q->a_scale))) goto fail;
    snprintf(name, sizeof name, "%s.%s", base, B8_QT_INPUT_SCALE);
    if (mode != B8_QMODE_STATIC && find_tensor(m, name, false)) { /* it would be ignored: which is right? */
        st = b8_fail(L->e, BERT8_ERR_FORMAT, "%s: tensor \"%s\" belongs to a static INT8 Linear, but "
                     "quantization_config.json makes %s %s", m->dir, name, base, b8_qmode_name(mode));
        goto fail;
    }
    snprintf(name, sizeof name, "%s.%s", base, B8_QT_INPUT_ZERO);
    if (find_tensor(m, name, false)) {
        const float *z = NULL;
        int64_t s1[1] = {1};
        if ((st = get_f32(L, name, false, 1, s1, &z))) goto fail;
        if (mode != B8_QMODE_STATIC || !zero_ok) {
            st = b8_fail(L->e, BERT8_ERR_FORMAT, "%s: tensor \"%s\": only a static FFN-out Linear takes an input zero point",
                         m->dir, name);
            goto fail;
        }
        if (!(z[0] >= -127.0f && z[0] <= 127.0f) || z[0] != rintf(z[0])) {
            st = b8_fail(L->e, BERT8_ERR_FORMAT, "%s: tensor \"%s\" = %g is not an integer in [-127, 127]", m->dir,
                         name, (double)z[0]);
            goto fail;
        }
        q->a_zero = z[0];
    }
    snprintf(name, sizeof name, "%s.%s", base, B8_QT_OUTLIER_INDEX);
    if ((t = find_tensor(m, name, false))) {
        const int64_t rmax = k / 8 < B8_MAX_OUTLIERS ? k / 8 : B8_MAX_OUTLIERS;
        if (t->dtype != B8_I32 || t->ndim != 1 || t->shape[0] < 1 || t->shape[0] > rmax) {
            st = b8_fail(L->e, BERT8_ERR_FORMAT, "%s: tensor \"%s\" must be I32 [r] with 1 <= r <= %lld", m->dir, name,
                         (long long)rmax);
            goto fail;
        }
        const int64_t r = t->shape[0];
        int32_t idx[B8_MAX_OUTLIERS]; /* a copy: the mapped data need not be aligned */
        memcpy(idx, t->data, (size_t)r * sizeof(int32_t));
        const float *ow = NULL;
        int64_t s2[2] = {n, r};
        snprintf(name, sizeof name, "%s.%s", base, B8_QT_OUTLIER_WEIGHT);
        if ((st = get_f32(L, name, false, 2, s2, &ow))) goto fail;
        if ((st = b8_qlinear_set_outliers(q, idx, r, ow, L->e))) {
            b8_wrap(L->e, "%s: %s", m->dir, base);
            goto fail;
        }
    } else {
        snprintf(name, sizeof name, "%s.%s", base, B8_QT_OUTLIER_WEIGHT);
        if (find_tensor(m, name, false)) {
            st = b8_fail(L->e, BERT8_ERR_FORMAT, "%s: tensor \"%s\" has no %s.%s beside it", m->dir, name, base,
                         B8_QT_OUTLIER_INDEX);
            goto fail;
        }
    }
    *out = q;
    return BERT8_OK;
fail:
    b8_qlinear_free(q);
    return st;
}

/* FFN-in's activation runs in its epilogue, except in a gated FFN (the GLU pass applies it). */
static b8_act group_post(const b8_config *c, b8_group g) {
    return g == B8_GROUP_FFN_IN && c->desc->ffn != B8_FFN_GLU ? c->act : B8_ACT_NONE;
}

/* Residual groups add into the hidden state (the matmul's accumulate). */
static bool group_acc(b8_group g) { return g == B8_GROUP_ATTN_OUT || g == B8_GROUP_FFN_OUT; }

bert8_status b8_layer_group_fp32(const bert8_model *m, int64_t l, b8_group g, const float **w, const float **b,
                                 bool *owned, b8_err *e) {
    const b8_layer *ly = &m->layers[l];
    const b8_group_desc *d = &b8_group_table[g];
    int64_t n, k;
    b8_group_dims(m->cfg.desc, g, m->cfg.hidden_size, m->cfg.intermediate_size, &n, &k);
    const int np = b8_group_nparts(m->cfg.desc, g);
    *owned = false;
    for (int i = 0; i < np; i++)
        if (!ly->w[d->parts[i]]) {
            char name[256];
            b8_model_part_name(m, l, d->parts[i], name, sizeof name);
            return b8_fail(e, BERT8_ERR_MISSING, "%s: \"%s\" has no FP32 weights (stored in INT8)", m->dir, name);
        }
    if (np == 1) {
        *w = ly->w[d->parts[0]];
        *b = ly->b[d->parts[0]];
        return BERT8_OK;
    }
    const int64_t pn = n / np;
    float *jw = b8_malloc_aligned((size_t)(n * k) * sizeof(float));
    float *jb = b8_malloc_aligned((size_t)n * sizeof(float));
    if (!jw || !jb) {
        b8_free_aligned(jw);
        b8_free_aligned(jb);
        return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < np; i++) {
        memcpy(jw + i * pn * k, ly->w[d->parts[i]], (size_t)(pn * k) * sizeof(float));
        memcpy(jb + i * pn, ly->b[d->parts[i]], (size_t)pn * sizeof(float));
    }
    *w = jw;
    *b = jb;
    *owned = true;
    return BERT8_OK;
}

/* The mode quantization_config.json gives group g of layer l. */
static b8_qmode config_mode(const loader *L, int64_t l, b8_group g) {
    if (L->qc.groups && l < L->qc.layers) return L->qc.groups[l * B8_GROUP_COUNT + g].mode;
    return L->m->scheme == BERT8_SCHEME_STATIC ? B8_QMODE_STATIC : B8_QMODE_DYNAMIC;
}

static bert8_status load_group(loader *L, int64_t l, b8_group g) {
    bert8_model *m = L->m;
    b8_layer *ly = &m->layers[l];
    const b8_group_desc *d = &b8_group_table[g];
    const b8_config *c = &m->cfg;
    int64_t n, k;
    b8_group_dims(c->desc, g, c->hidden_size, c->intermediate_size, &n, &k);
    const int np = b8_group_nparts(c->desc, g);
    const int64_t pn = n / np;
    char names[3][256];
    int n_i8 = 0;
    for (int i = 0; i < np; i++) {
        b8_model_part_name(m, l, d->parts[i], names[i], sizeof names[i]);
        n_i8 += is_i8(m, names[i]);
    }
    bert8_status st;
    if (n_i8 == 0) {
        if (m->quantized && L->qc.groups && config_mode(L, l, g) != B8_QMODE_FP32)
            return b8_fail(L->e, BERT8_ERR_FORMAT, "%s: quantization_config.json says \"%s\" of layer %lld is %s, "
                           "but \"%s.weight\" is not I8", m->dir, d->key, (long long)l,
                           b8_qmode_name(config_mode(L, l, g)), names[0]);
        char fused[256], wname[300];
        snprintf(wname, sizeof wname, "%s.weight", names[0]);
        const bool fz = b8_fused_name(c->arch, m->prefix, l, g, fused, sizeof fused) && !has(m, wname);
        if (fz && (st = get_fused_views(L, fused, g, np, pn, k, ly))) return st;
        for (int i = 0; i < np && !fz; i++)
            if ((st = get_part_views(L, names[i], g, pn, k, &ly->w[d->parts[i]], &ly->b[d->parts[i]]))) return st;
        const float *w, *b;
        bool owned;
        if ((st = b8_layer_group_fp32(m, l, g, &w, &b, &owned, L->e))) return st;
        st = b8_sgemm_w_pack(w, b, n, k, group_post(c, g), group_acc(g), &ly->f32[g], L->e);
        if (owned) {
            b8_free_aligned((void *)w);
            b8_free_aligned((void *)b);
        }
        /* packed: the mapped weights need not stay resident (they fault back in if read) */
        for (int i = 0; i < (fz ? 1 : np); i++) {
            char name[1024];
            snprintf(name, sizeof name, "%s.weight", fz ? fused : names[i]);
            const b8_st_tensor *t = find_tensor(m, name, false);
            if (t) b8_st_release(m->st, t);
        }
        return st ? b8_wrap(L->e, "%s: packing \"%s\"", m->dir, names[0]) : BERT8_OK;
    }
    if (n_i8 != np)
        return b8_fail(L->e, BERT8_ERR_FORMAT, "%s: %s: the Linears of one group must all be I8 or all float",
                       m->dir, names[0]);
    if (!m->quantized)
        return b8_fail(L->e, BERT8_ERR_MISSING, "%s: the checkpoint has I8 tensors but no quantization_config.json",
                       m->dir);
    b8_qmode mode = config_mode(L, l, g);
    if (mode == B8_QMODE_FP32)
        return b8_fail(L->e, BERT8_ERR_FORMAT, "%s: quantization_config.json says \"%s\" of layer %lld is fp32, "
                       "but \"%s.weight\" is I8", m->dir, d->key, (long long)l, names[0]);
    b8_qlinear *parts[3] = {NULL, NULL, NULL};
    st = BERT8_OK;
    for (int i = 0; i < np && !st; i++) st = load_qlinear(L, names[i], pn, k, mode, b8_group_zero_ok(g), &parts[i]);
    if (!st && np == 1) {
        ly->q[g] = parts[0];
        parts[0] = NULL;
    } else if (!st) {
        char what[300];
        snprintf(what, sizeof what, "%s: %s", m->dir, names[0]);
        st = b8_qlinear_stack(parts, np, what, &ly->q[g], L->e);
    }
    for (int i = 0; i < np; i++) b8_qlinear_free(parts[i]);
    if (!st && L->qc.groups && l < L->qc.layers) ly->q[g]->alpha = L->qc.groups[l * B8_GROUP_COUNT + g].alpha;
    return st;
}

static bert8_status get_ln(loader *L, const char *base, bool with_prefix, const float **g, const float **b) {
    char name[1024];
    int64_t s[1] = {L->m->cfg.hidden_size};
    bert8_status st;
    snprintf(name, sizeof name, "%s.weight", base);
    if ((st = get_f32(L, name, with_prefix, 1, s, g))) return st;
    snprintf(name, sizeof name, "%s.bias", base);
    if (!L->m->cfg.desc->ln_no_bias) return get_f32(L, name, with_prefix, 1, s, b);
    float *z = b8_malloc_aligned((size_t)s[0] * sizeof(float)); /* LayerNorms without a bias */
    if (!z) return b8_fail(L->e, BERT8_ERR_NOMEM, "out of memory");
    memset(z, 0, (size_t)s[0] * sizeof(float));
    if ((st = keep_owned(L->m, z, L->e))) return st;
    *b = z;
    return BERT8_OK;
}

/* INT8 attention: the output scales of query, key and value, when the checkpoint has them. */
static bert8_status load_attention(loader *L, int64_t l) {
    bert8_model *m = L->m;
    b8_layer *ly = &m->layers[l];
    const b8_part parts[3] = {B8_PART_Q, B8_PART_K, B8_PART_V};
    char base[3][256], name[1024];
    int have = 0;
    for (int i = 0; i < 3; i++) {
        b8_model_part_name(m, l, parts[i], base[i], sizeof base[i]);
        snprintf(name, sizeof name, "%s.%s", base[i], B8_QT_OUTPUT_SCALE);
        have += find_tensor(m, name, false) != NULL;
    }
    const bool want = L->qc.attn_int8 && l < L->qc.layers ? L->qc.attn_int8[l] : (m->quantized && L->qc.int8_attention);
    if (have == 0 && !want) return BERT8_OK;
    if (have != 3 || !want)
        return b8_fail(L->e, BERT8_ERR_FORMAT,
                       "%s: layer %lld: INT8 attention needs %s.%s and its key and value twins, and "
                       "\"attention\": \"int8\" in quantization_config.json (found %d of 3 scales)",
                       m->dir, (long long)l, base[0], B8_QT_OUTPUT_SCALE, have);
    if (!ly->q[B8_GROUP_QKV])
        return b8_fail(L->e, BERT8_ERR_FORMAT, "%s: layer %lld: INT8 attention needs an INT8 query/key/value product",
                       m->dir, (long long)l);
    const int64_t H = m->cfg.hidden_size, d = H / m->cfg.num_heads;
    if (d % 4)
        return b8_fail(L->e, BERT8_ERR_UNSUPPORTED, "%s: INT8 attention needs a head size that is a multiple of 4, not %lld",
                       m->dir, (long long)d);
    float sc[3];
    bert8_status st;
    for (int i = 0; i < 2; i++)
        if ((st = get_scales(L, base[i], B8_QT_OUTPUT_SCALE, 1, &sc[i]))) return st;
    /* V: one scale, or one per channel */
    snprintf(name, sizeof name, "%s.%s", base[2], B8_QT_OUTPUT_SCALE);
    const b8_st_tensor *tv = find_tensor(m, name, false);
    if (tv->ndim == 1 && tv->shape[0] == H && H > 1) {
        float *sv_ch = malloc((size_t)H * sizeof(float));
        if (!sv_ch) return b8_fail(L->e, BERT8_ERR_NOMEM, "out of memory");
        st = get_scales(L, base[2], B8_QT_OUTPUT_SCALE, H, sv_ch);
        if (!st) st = b8_qattn_make(sc[0], sc[1], 1.0f, sv_ch, H, &ly->att, L->e);
        free(sv_ch);
        return st;
    }
    if ((st = get_scales(L, base[2], B8_QT_OUTPUT_SCALE, 1, &sc[2]))) return st;
    return b8_qattn_make(sc[0], sc[1], sc[2], NULL, H, &ly->att, L->e);
}

/* The quantization_config.json version that introduced each kind of INT8 tensor: a folder
 * claiming an older version than its tensors contradicts itself. */
static const struct {
    const char *suffix, *what;
    int version;
} TENSOR_VERSIONS[] = {
    {"." B8_QT_OUTPUT_SCALE, "INT8 attention", 2},
    {".word_embeddings.weight_scale", "INT8 word embeddings", 2},
    {"." B8_QT_INPUT_ZERO, "a static input's zero point", 4},
    {"." B8_QT_OUTLIER_INDEX, "fp32 outlier channels", 5},
    {"." B8_QT_OUTLIER_WEIGHT, "fp32 outlier channels", 5},
};

static bool ends_with(const char *s, const char *suffix); /* below, with the head detection */

/* An INT8 folder's version against the tensors it holds (a per-channel value scale needs 3,
 * 7-bit weights 3, a LoRA task 4), before anything is loaded. */
static bert8_status check_int8_version(loader *L) {
    const bert8_model *m = L->m;
    const int v = L->qc.version;
    for (size_t i = 0; i < b8_st_count(m->st); i++) {
        const b8_st_tensor *t = b8_st_at(m->st, i);
        for (size_t k = 0; k < sizeof TENSOR_VERSIONS / sizeof *TENSOR_VERSIONS; k++)
            if (v < TENSOR_VERSIONS[k].version && ends_with(t->name, TENSOR_VERSIONS[k].suffix))
                return b8_fail(L->e, BERT8_ERR_FORMAT, "%s: quantization_config.json says version %d, but tensor \"%s\" "
                               "(%s) needs version %d or later", m->dir, v, t->name, TENSOR_VERSIONS[k].what,
                               TENSOR_VERSIONS[k].version);
        if (v < 3 && ends_with(t->name, "." B8_QT_OUTPUT_SCALE) && t->ndim == 1 && t->shape[0] > 1)
            return b8_fail(L->e, BERT8_ERR_FORMAT, "%s: quantization_config.json says version %d, but tensor \"%s\" "
                           "(per-channel value scales) needs version 3 or later", m->dir, v, t->name);
    }
    if (v < 3 && L->qc.weight_bits == 7)
        return b8_fail(L->e, BERT8_ERR_FORMAT, "%s: quantization_config.json says version %d, but weight_bits 7 needs "
                       "version 3 or later", m->dir, v);
    if (v < 4 && L->qc.lora_task[0])
        return b8_fail(L->e, BERT8_ERR_FORMAT, "%s: quantization_config.json says version %d, but lora_task needs "
                       "version 4 or later", m->dir, v);
    return BERT8_OK;
}

/* An INT8 folder's scheme against the modes its Linears loaded in (the per-group checks, a mode
 * against the I8 weight, input_scale and outliers, run as each group loads). */
static bert8_status check_int8_scheme(loader *L) {
    const bert8_model *m = L->m;
    int64_t first_static = -1, n_int8 = 0;
    int static_group = 0;
    for (int64_t l = 0; l < m->cfg.num_layers; l++)
        for (int g = 0; g < B8_GROUP_COUNT; g++) {
            const b8_qlinear *q = m->layers[l].q[g];
            n_int8 += q != NULL;
            if (q && q->mode == B8_QMODE_STATIC && first_static < 0) {
                first_static = l;
                static_group = g;
            }
        }
    if (m->scheme == BERT8_SCHEME_DYNAMIC && first_static >= 0)
        return b8_fail(L->e, BERT8_ERR_FORMAT, "%s: quantization_config.json says scheme \"dynamic\", but layer %lld's "
                       "%s is int8_static (it has an input_scale): the folder contradicts itself", m->dir,
                       (long long)first_static, b8_group_table[static_group].key);
    if (m->scheme == BERT8_SCHEME_STATIC && n_int8 > 0 && first_static < 0)
        return b8_fail(L->e, BERT8_ERR_FORMAT, "%s: quantization_config.json says scheme \"static\", but every INT8 "
                       "Linear is int8_dynamic (no input_scale): the folder contradicts itself", m->dir);
    return BERT8_OK;
}

static bert8_status load_layer(loader *L, int64_t l) {
    b8_layer *ly = &L->m->layers[l];
    char name[256];
    bert8_status st;
    for (int g = 0; g < B8_GROUP_COUNT; g++)
        if ((st = load_group(L, l, (b8_group)g))) return st;
    if ((st = load_attention(L, l))) return st;
    const b8_part lns[2] = {B8_PART_LN1, B8_PART_LN2};
    for (int i = 0; i < 2; i++) {
        b8_model_part_name(L->m, l, lns[i], name, sizeof name);
        char wname[300];
        snprintf(wname, sizeof wname, "%s.weight", name);
        /* pre-norm: the first layer may have no attention norm (ModernBERT's is the identity) */
        if (L->m->cfg.desc->pre_norm && l == 0 && lns[i] == B8_PART_LN1 && !has(L->m, wname)) continue;
        if ((st = get_ln(L, name, false, &ly->w[lns[i]], &ly->b[lns[i]]))) return st;
    }
    return BERT8_OK;
}

bert8_status b8_model_prepare_int8(bert8_model *m, b8_err *e) {
    bert8_status st;
    const char *zp = getenv("BERT8_DYNAMIC_ZERO_POINT");
    m->dyn_symmetric = zp && !strcmp(zp, "0");
    const char *sp = getenv("BERT8_SEQ_PARALLEL");
    m->seq_parallel = !(sp && !strcmp(sp, "0"));
    /* The masked-LM decoder, the largest Linear of such a model: INT8 with per-token input
     * scales (no calibration: it needs none), as SPLADE and fill-mask run it on every token. */
    if (m->has_mlm && !m->mlm_q) {
        if ((st = b8_qlinear_from_fp32(m->mlm_dec_w, m->mlm_dec_b, m->cfg.vocab_size, m->cfg.hidden_size, NULL, -1.0f,
                                       B8_QMODE_DYNAMIC, m->weight_bits == 7 ? 7 : 8, 0, &m->mlm_q, e)) ||
            (st = b8_qlinear_prepare(m->mlm_q, NULL, NULL, e)))
            return b8_wrap(e, "the masked-LM decoder");
        b8_sgemm_w_free(m->mlm_dec);
        m->mlm_dec = NULL;
    }
    for (int64_t l = 0; l < m->cfg.num_layers; l++) {
        b8_layer *ly = &m->layers[l];
        for (int g = 0; g < B8_GROUP_COUNT; g++) {
            if (!ly->q[g]) continue;
            /* the LayerNorm whose output feeds the group: folded into it for static scales */
            const float *lg = NULL, *lb = NULL;
            if (m->cfg.desc->pre_norm) { /* the layer's own norms (none before a first layer without LN1) */
                const b8_part p = g == B8_GROUP_QKV ? B8_PART_LN1 : B8_PART_LN2;
                if (g == B8_GROUP_QKV || g == B8_GROUP_FFN_IN) {
                    lg = ly->w[p];
                    lb = ly->b[p];
                }
            } else if (g == B8_GROUP_QKV) {
                lg = l == 0 ? m->emb_ln_g : m->layers[l - 1].w[B8_PART_LN2];
                lb = l == 0 ? m->emb_ln_b : m->layers[l - 1].b[B8_PART_LN2];
            } else if (g == B8_GROUP_FFN_IN) {
                lg = ly->w[B8_PART_LN1];
                lb = ly->b[B8_PART_LN1];
            }
            if ((st = b8_qlinear_prepare(ly->q[g], lg, lb, e)))
                return b8_wrap(e, "layer %lld %s", (long long)l, b8_group_table[g].key);
            b8_sgemm_w_free(ly->f32[g]);
            ly->f32[g] = NULL;
        }
    }
    /* Every layer's packed weights into one huge-page arena (again after a change: the new
     * arena takes the weights of the old one, which is then freed). */
    int64_t n = m->cfg.num_layers * B8_GROUP_COUNT, k = 0;
    if (n <= 0) return BERT8_OK;
    b8_qweight **ws = calloc((size_t)n, sizeof *ws);
    if (!ws) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
    for (int64_t l = 0; l < m->cfg.num_layers; l++)
        for (int g = 0; g < B8_GROUP_COUNT; g++)
            if (m->layers[l].q[g]) ws[k++] = m->layers[l].q[g]->packed;
    b8_qarena *a = NULL;
    st = b8_qweights_gather(ws, k, &a, e);
    free(ws);
    if (st) return st;
    if (a) {
        b8_qarena_free(m->qarena);
        m->qarena = a;
    }
    return BERT8_OK;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}


static bert8_status detect_prefix_and_head(loader *L) {
    bert8_model *m = L->m;
    const b8_config *c = &m->cfg;
    const char *cands[2] = {c->desc->prefix, ""};
    const int nc = 2;
    bool found = false;
    char wname[128];
    snprintf(wname, sizeof wname, "%s.weight", word_emb_name(m));
    for (int i = 0; i < nc && !found; i++) {
        strcpy(m->prefix, cands[i]);
        found = find_tensor(m, wname, true) != NULL;
    }
    if (!found)
        return b8_fail(L->e, BERT8_ERR_MISSING,
                       "%s: tensor \"%s%s\" is missing (no encoder found for model_type \"%s\")", m->dir, cands[0],
                       wname, c->model_type);
    const char *a = c->architecture;
    bert8_head head = BERT8_HEAD_BASE;
    if (ends_with(a, "ForSequenceClassification")) head = BERT8_HEAD_SEQ_CLS;
    else if (ends_with(a, "ForTokenClassification")) head = BERT8_HEAD_TOKEN_CLS;
    else if (ends_with(a, "ForQuestionAnswering")) head = BERT8_HEAD_QA;
    else if (!a[0]) {
        /* No "architectures": infer the head from the tensors present. */
        if (has(m, "qa_outputs.weight")) head = BERT8_HEAD_QA;
        else if (has(m, "classifier.dense.weight") || has(m, "pre_classifier.weight"))
            head = BERT8_HEAD_SEQ_CLS;
        else if (has(m, "classifier.weight"))
            head = c->desc->bare_classifier_tokens ? BERT8_HEAD_TOKEN_CLS : BERT8_HEAD_SEQ_CLS;
    }
    m->info.head = head;
    return BERT8_OK;
}

static bert8_status load_heads(loader *L) {
    bert8_model *m = L->m;
    const b8_config *c = &m->cfg;
    const int64_t H = c->hidden_size;
    bert8_status st;
    m->has_pooler = c->desc->pooler && find_tensor(m, "pooler.dense.weight", true);
    if (m->has_pooler && (st = get_linear(L, "pooler.dense", true, H, H, B8_ACT_TANH, &m->pooler))) return st;
    switch (m->info.head) {
    case BERT8_HEAD_BASE: return BERT8_OK;
    default: break;
    }
    if (c->desc->cls == B8_CLS_HEAD_NORM) { /* every head: dense + act + norm, then the classifier */
        if ((st = get_linear(L, "head.dense", false, H, H, c->head_act, &m->cls_dense)) ||
            (st = get_ln(L, "head.norm", false, &m->cls_ln_g, &m->cls_ln_b)))
            return st;
        return get_linear(L, "classifier", false, m->info.head == BERT8_HEAD_QA ? 2 : c->num_labels, H, B8_ACT_NONE,
                          &m->cls_out);
    }
    switch (m->info.head) {
    case BERT8_HEAD_BASE: return BERT8_OK;
    case BERT8_HEAD_QA: return get_linear(L, "qa_outputs", false, 2, H, B8_ACT_NONE, &m->cls_out);
    case BERT8_HEAD_TOKEN_CLS: return get_linear(L, "classifier", false, c->num_labels, H, B8_ACT_NONE, &m->cls_out);
    case BERT8_HEAD_SEQ_CLS:
        if (c->desc->cls == B8_CLS_PRE_RELU) {
            if ((st = get_linear(L, "pre_classifier", false, H, H, B8_ACT_RELU, &m->cls_dense))) return st;
            return get_linear(L, "classifier", false, c->num_labels, H, B8_ACT_NONE, &m->cls_out);
        }
        if (c->desc->cls == B8_CLS_CONTEXT) { /* DeBERTa's ContextPooler, outside the base model */
            if ((st = get_linear(L, "pooler.dense", false, H, H, c->pooler_act, &m->cls_dense))) return st;
            return get_linear(L, "classifier", false, c->num_labels, H, B8_ACT_NONE, &m->cls_out);
        }
        if (c->desc->cls == B8_CLS_DENSE_TANH) {
            if ((st = get_linear(L, "classifier.dense", false, H, H, B8_ACT_TANH, &m->cls_dense))) return st;
            return get_linear(L, "classifier.out_proj", false, c->num_labels, H, B8_ACT_NONE, &m->cls_out);
        }
        if (!m->has_pooler)
            return b8_fail(L->e, BERT8_ERR_MISSING,
                           "%s: tensor \"%spooler.dense.weight\" is missing (BERT sequence classification "
                           "classifies the pooled first token)", m->dir, m->prefix);
        return get_linear(L, "classifier", false, c->num_labels, H, B8_ACT_NONE, &m->cls_out);
    }
    return BERT8_OK;
}

/* The masked-LM head, when the checkpoint stores its transform. */
static bert8_status load_mlm(loader *L) {
    bert8_model *m = L->m;
    const b8_config *c = &m->cfg;
    const b8_arch_desc *d = c->desc;
    char name[256];
    if (!d->mlm_dense) return BERT8_OK;
    snprintf(name, sizeof name, "%s.weight", d->mlm_dense);
    if (!find_tensor(m, name, false)) return BERT8_OK;
    /* B8_CLS_HEAD_NORM: the task heads' transform has the same name; only a model without a task
     * head has a masked-LM head, with classifier_activation */
    const bool shared = d->cls == B8_CLS_HEAD_NORM;
    if (shared && m->info.head != BERT8_HEAD_BASE) return BERT8_OK;
    const b8_act act = shared ? c->head_act : d->mlm_gelu ? B8_ACT_GELU : c->act;
    const int64_t H = c->hidden_size, V = c->vocab_size;
    bert8_status st;
    if ((st = get_linear(L, d->mlm_dense, false, H, H, act, &m->mlm_dense)) ||
        (st = get_ln(L, d->mlm_norm, false, &m->mlm_ln_g, &m->mlm_ln_b)))
        return st;
    const float *w = NULL, *b = NULL;
    int64_t sw[2] = {V, H}, sb[1] = {V};
    snprintf(name, sizeof name, "%s.weight", d->mlm_decoder);
    if (find_tensor(m, name, false)) {
        if ((st = get_f32(L, name, false, 2, sw, &w))) return st;
    } else if (m->word_emb) {
        w = m->word_emb; /* tied */
    } else { /* tied to int8 word embeddings: the decoder gets them dequantized */
        size_t n;
        if (!b8_mul_ok((size_t)V, (size_t)H, &n)) return b8_fail(L->e, BERT8_ERR_TOO_LARGE, "embedding size overflows");
        float *deq = b8_malloc_aligned(n * sizeof(float));
        if (!deq) return b8_fail(L->e, BERT8_ERR_NOMEM, "out of memory for the masked-LM decoder");
        if ((st = keep_owned(m, deq, L->e))) return st;
        for (int64_t i = 0; i < V; i++)
            for (int64_t h = 0; h < H; h++) deq[i * H + h] = (float)m->word_emb_q[i * H + h] * m->word_emb_scale[i];
        w = deq;
    }
    snprintf(name, sizeof name, "%s.bias", d->mlm_decoder);
    const char *bias_name = find_tensor(m, d->mlm_bias, false) ? d->mlm_bias : name;
    if ((st = get_f32(L, bias_name, false, 1, sb, &b))) return st;
    if ((st = b8_sgemm_w_pack(w, b, V, H, B8_ACT_NONE, false, &m->mlm_dec, L->e)))
        return b8_wrap(L->e, "%s: packing the masked-LM decoder", m->dir);
    m->mlm_dec_w = w;
    m->mlm_dec_b = b;
    m->has_mlm = true;
    return BERT8_OK;
}

/* The name of layer l's tensor `part` (a part outside b8_part: desc->rel_parts, rel_tables). */
static void layer_tensor_name(const bert8_model *m, int64_t l, const char *part, char *out, size_t cap) {
    snprintf(out, cap, "%s%s.%lld.%s", m->prefix, m->cfg.desc->layer_prefix, (long long)l, part);
}

/* Rows [R][H] -> per head and transposed, [heads][d][R], into a buffer the model owns: the
 * disentangled products (kernels/attention/rel_dot.h) read a window of R as whole vectors. */
static bert8_status by_head(loader *L, const float *x, int64_t R, const float **out) {
    const int64_t H = L->m->cfg.hidden_size, A = L->m->cfg.num_heads, d = H / A;
    float *y = b8_malloc_aligned((size_t)(R * H) * sizeof(float));
    if (!y) return b8_fail(L->e, BERT8_ERR_NOMEM, "out of memory for the relative projections");
    for (int64_t h = 0; h < A; h++)
        for (int64_t t = 0; t < d; t++)
            for (int64_t r = 0; r < R; r++) y[(h * d + t) * R + r] = x[r * H + h * d + t];
    *out = y;
    return keep_owned(L->m, y, L->e);
}

/* Disentangled attention: each layer's Kr and Qr. A bert8 INT8 folder stores them
 * (desc->rel_tables); otherwise they are computed as transformers does, once: the relative
 * embeddings (LayerNormed with norm_rel_ebd "layer_norm") times the layer's key / query weights
 * (share_att_key) or its own pos_key_proj / pos_query_proj, plus their biases. */
static bert8_status load_disentangled(loader *L) {
    bert8_model *m = L->m;
    const b8_config *c = &m->cfg;
    const b8_arch_desc *d = c->desc;
    if (!d->disentangled || !(c->c2p || c->p2c)) return BERT8_OK;
    const int64_t H = c->hidden_size, R = 2 * c->att_span;
    const bool want[2] = {c->c2p, c->p2c};
    const b8_part shared[2] = {B8_PART_K, B8_PART_Q};
    char name[512], wname[600];
    bert8_status st;
    layer_tensor_name(m, 0, d->rel_tables[c->c2p ? 0 : 1], name, sizeof name);
    const int64_t s_tab[2] = {R, H};
    if (c->num_layers > 0 && find_tensor(m, name, false)) { /* a bert8 INT8 folder */
        for (int64_t l = 0; l < c->num_layers; l++)
            for (int t = 0; t < 2; t++) {
                if (!want[t]) continue;
                const float *x;
                layer_tensor_name(m, l, d->rel_tables[t], name, sizeof name);
                if ((st = get_f32(L, name, false, 2, s_tab, &x)) ||
                    (st = by_head(L, x, R, t ? &m->layers[l].rel_qr : &m->layers[l].rel_kr)))
                    return st;
            }
        return BERT8_OK;
    }
    const float *emb, *g = NULL, *b = NULL;
    if ((st = get_f32(L, d->rel_emb, true, 2, s_tab, &emb))) return st;
    if (c->rel_norm && (st = get_ln(L, d->rel_ln, true, &g, &b))) return st;
    float *e = b8_malloc_aligned((size_t)(R * H) * sizeof(float));
    float *y = b8_malloc_aligned((size_t)(R * H) * sizeof(float));
    if (!e || !y) {
        b8_free_aligned(e);
        b8_free_aligned(y);
        return b8_fail(L->e, BERT8_ERR_NOMEM, "out of memory for the relative embeddings");
    }
    if (g) b8_layernorm_rows_best()(emb, e, R, H, g, b, c->layer_norm_eps);
    else memcpy(e, emb, (size_t)(R * H) * sizeof(float));
    st = BERT8_OK;
    for (int64_t l = 0; l < c->num_layers && !st; l++) {
        b8_layer *ly = &m->layers[l];
        for (int t = 0; t < 2 && !st; t++) {
            if (!want[t]) continue;
            const float *w = NULL, *wb = NULL;
            if (c->share_att_key) {
                w = ly->w[shared[t]];
                wb = ly->b[shared[t]];
                if (!w) {
                    b8_model_part_name(m, l, shared[t], name, sizeof name);
                    layer_tensor_name(m, l, d->rel_tables[t], wname, sizeof wname);
                    st = b8_fail(L->e, BERT8_ERR_MISSING,
                                 "%s: tensor \"%s\" is missing (share_att_key: \"%s\" is stored in INT8 only)", m->dir,
                                 wname, name);
                    break;
                }
            } else {
                layer_tensor_name(m, l, d->rel_parts[t], name, sizeof name);
                if ((st = get_views(L, name, false, H, H, &w, &wb))) break;
            }
            b8_sgemm_w *pw = NULL;
            if ((st = b8_sgemm_w_pack(w, wb, H, H, B8_ACT_NONE, false, &pw, L->e)) ||
                (st = b8_sgemm(pw, e, H, R, y, H, L->e)) ||
                (st = by_head(L, y, R, t ? &ly->rel_qr : &ly->rel_kr)))
                b8_wrap(L->e, "%s: layer %lld: the relative %s projection", m->dir, (long long)l, t ? "query" : "key");
            b8_sgemm_w_free(pw);
        }
    }
    b8_free_aligned(e);
    b8_free_aligned(y);
    return st;
}

static void fill_info(bert8_model *m) {
    const b8_config *c = &m->cfg;
    bert8_model_info *i = &m->info;
    i->arch = c->arch;
    i->model_type = c->model_type;
    i->architecture = c->architecture;
    i->vocab_size = c->vocab_size;
    i->hidden_size = c->hidden_size;
    i->num_layers = c->num_layers;
    i->num_heads = c->num_heads;
    i->intermediate_size = c->intermediate_size;
    i->max_position_embeddings = c->max_position_embeddings;
    /* RoBERTa-style positions start after the padding index: pad_token_id + 1 of them are unusable */
    i->max_seq_len = c->desc->pos == B8_POS_FROM_PAD ? c->max_position_embeddings - c->pad_token_id - 1
                                                     : c->max_position_embeddings;
    i->type_vocab_size = c->type_vocab_size;
    i->num_labels = i->head == BERT8_HEAD_BASE ? 0 : (i->head == BERT8_HEAD_QA ? 2 : c->num_labels);
    i->pad_token_id = c->pad_token_id;
    i->layer_norm_eps = c->layer_norm_eps;
    i->hidden_act = c->act_name;
    i->has_pooler = m->has_pooler;
    i->has_mlm_head = m->has_mlm;
    i->lora_task = m->lora_task;
    i->ffn_gated = c->desc->ffn == B8_FFN_GLU;
    i->sliding_layers = 0;
    for (int64_t l = 0; c->layer_sliding && l < c->num_layers; l++) i->sliding_layers += c->layer_sliding[l];
    i->attention_window = i->sliding_layers ? c->window : 0;
    i->quantized = m->quantized;
    i->scheme = m->scheme;
    i->weight_bits = m->quantized ? m->weight_bits : 0;
    i->tensor_count = (int64_t)b8_st_count(m->st);
    i->weight_bytes = (int64_t)b8_st_data_bytes(m->st);
    const int64_t H = c->hidden_size, I = c->intermediate_size;
    int64_t p = (c->vocab_size + (m->pos_emb ? c->max_position_embeddings : 0) +
                 (m->type_emb ? c->type_vocab_size : 0) + 2) * H;
    for (int g = 0; g < B8_GROUP_COUNT; g++) {
        int64_t n, k;
        b8_group_dims(c->desc, (b8_group)g, H, I, &n, &k);
        p += c->num_layers * (n * k + (c->desc->no_bias[g] ? 0 : n));
    }
    p += c->num_layers * 4 * H; /* two LayerNorms */
    if (m->has_pooler) p += H * H + H;
    if (m->rel_bias) p += c->rel_buckets * c->num_heads;
    if (c->c2p || c->p2c) /* the relative embeddings, their LayerNorm, projections of their own */
        p += 2 * c->att_span * H + (c->rel_norm ? 2 * H : 0) +
             (c->share_att_key ? 0 : c->num_layers * (c->c2p + c->p2c) * (H * H + H));
    if (m->cls_dense.w) p += H * H + H;
    if (m->cls_out.w) p += m->cls_out.n * (H + 1);
    if (m->has_mlm) p += H * H + 3 * H + c->vocab_size; /* the decoder's weights are counted when not tied */
    i->param_count = p;
}

/* The word embeddings: FP32 (any float dtype), or in an INT8 folder int8 rows with a scale each. */
static bert8_status load_word_embeddings(loader *L, const int64_t *shape) {
    bert8_model *m = L->m;
    char wname[128], sname[160];
    snprintf(wname, sizeof wname, "%s.weight", word_emb_name(m));
    snprintf(sname, sizeof sname, "%s.weight_scale", word_emb_name(m));
    const b8_st_tensor *t = find_tensor(m, wname, true);
    if (!t || t->dtype != B8_I8) {
        if (m->quantized && L->qc.int8_embeddings)
            return b8_fail(L->e, BERT8_ERR_FORMAT, "%s: quantization_config.json says the embeddings are int8, but "
                           "\"%s%s\" is not I8", m->dir, m->prefix, wname);
        bert8_status st = get_f32(L, wname, true, 2, shape, &m->word_emb);
        if (!st && t && m->word_emb == t->data) {
            b8_st_release(m->st, t); /* read once by the check: a row is read again when its token is seen */
            b8_st_advise_random(m->st, t);
        }
        return st;
    }
    if (!m->quantized || !L->qc.int8_embeddings)
        return b8_fail(L->e, BERT8_ERR_FORMAT, "%s: \"%s\" is I8 but quantization_config.json does not say "
                       "\"embeddings\": \"int8\"", m->dir, t->name);
    if (t->ndim != 2 || t->shape[0] != shape[0] || t->shape[1] != shape[1])
        return b8_fail(L->e, BERT8_ERR_SHAPE, "%s: tensor \"%s\" must be I8 [%lld,%lld]", m->dir, t->name,
                       (long long)shape[0], (long long)shape[1]);
    const float *sc = NULL;
    bert8_status st = get_f32(L, sname, true, 1, shape, &sc);
    if (st) return st;
    for (int64_t i = 0; i < shape[0]; i++)
        if (!(sc[i] > 0.0f) || isinf(sc[i]))
            return b8_fail(L->e, BERT8_ERR_FORMAT, "%s: %s[%lld] = %g is not a finite "
                           "positive scale", m->dir, sname, (long long)i, (double)sc[i]);
    m->word_emb_q = t->data; /* used in place: a row is read when its token is seen */
    b8_st_advise_random(m->st, t);
    m->word_emb_scale = sc;
    m->int8_embeddings = true;
    return BERT8_OK;
}

bert8_status b8_model_quantize_embeddings(bert8_model *m, b8_err *e) {
    if (m->int8_embeddings) return BERT8_OK;
    const int64_t V = m->cfg.vocab_size, H = m->cfg.hidden_size;
    size_t n;
    if (!b8_mul_ok((size_t)V, (size_t)H, &n)) return b8_fail(e, BERT8_ERR_TOO_LARGE, "embedding size overflows");
    int8_t *q = b8_malloc_aligned(n);
    float *sc = b8_malloc_aligned((size_t)V * sizeof(float));
    if (!q || !sc) {
        b8_free_aligned(q);
        b8_free_aligned(sc);
        return b8_fail(e, BERT8_ERR_NOMEM, "out of memory for %lld int8 embedding rows", (long long)V);
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < V; i++) {
        const float *r = m->word_emb + i * H;
        float mx = 0.0f;
        for (int64_t h = 0; h < H; h++) mx = fmaxf(mx, fabsf(r[h]));
        const float s = mx > 0.0f ? mx / 127.0f : 1.0f, inv = 1.0f / s;
        sc[i] = s;
        for (int64_t h = 0; h < H; h++) q[i * H + h] = b8_q8(r[h] * inv);
    }
    m->own_emb_q = q;
    m->own_emb_scale = sc;
    m->word_emb_q = q;
    m->word_emb_scale = sc;
    m->word_emb = NULL;
    m->int8_embeddings = true;
    return BERT8_OK;
}

/* The LoRA task of this load (bert8_load_params.lora_task; NULL or "" for none). An INT8 folder
 * holds the task it was quantized with already folded (quantization_config.json "lora_task"). */
static bert8_status choose_lora(loader *L, const char *task) {
    bert8_model *m = L->m;
    const b8_config *c = &m->cfg;
    L->lora.task = -1;
    if (task && !task[0]) task = NULL;
    if (m->quantized) {
        if (task && strcmp(task, L->qc.lora_task) != 0) {
            if (L->qc.lora_task[0])
                return b8_fail(L->e, BERT8_ERR_INVALID_ARG, "%s: this INT8 folder holds the LoRA adapters of task \"%s\" "
                               "folded into its weights; it cannot run task \"%s\" (quantize the FP32 folder with that task)",
                               m->dir, L->qc.lora_task, task);
            return b8_fail(L->e, BERT8_ERR_INVALID_ARG, "%s: this INT8 folder was quantized without a LoRA task; it cannot "
                           "run task \"%s\" (quantize the FP32 folder with that task)", m->dir, task);
        }
        snprintf(m->lora_task, sizeof m->lora_task, "%s", L->qc.lora_task);
        return BERT8_OK;
    }
    if (!task) return BERT8_OK;
    if (!c->desc->lora)
        return b8_fail(L->e, BERT8_ERR_INVALID_ARG, "%s: model_type \"%s\" has no LoRA adapters (LoRA task \"%s\" asked "
                       "for)", m->dir, c->model_type, task);
    char list[B8_LORA_MAX_TASKS * (B8_LORA_NAME_MAX + 2)] = "";
    for (int64_t i = 0; i < c->lora_count; i++) {
        if (!strcmp(c->lora_tasks[i], task)) {
            L->lora.task = i;
            L->lora.tasks = c->lora_count;
            L->lora.rank = c->lora_rank;
            L->lora.scale = c->lora_alpha / (float)c->lora_rank;
            snprintf(m->lora_task, sizeof m->lora_task, "%s", task);
            return BERT8_OK;
        }
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", c->lora_tasks[i]);
    }
    return b8_fail(L->e, BERT8_ERR_INVALID_ARG, "%s: unknown LoRA task \"%.80s\" (config.json lora_adaptations: %s)",
                   m->dir, task, list);
}

bert8_load_params bert8_default_load_params(void) {
    bert8_load_params p = {0, 0, NULL};
    return p;
}

bert8_status bert8_model_load(const char *dir, const bert8_load_params *params, bert8_model **out, char *err,
                              size_t err_len) {
    b8_err e;
    b8_err_clear(&e);
    if (out) *out = NULL;
    if (!dir || !out) {
        if (err && err_len) snprintf(err, err_len, "bert8_model_load: dir and out must not be NULL");
        return BERT8_ERR_INVALID_ARG;
    }
    bert8_status st = b8_cpu_check_env(&e);
    if (st) {
        if (err && err_len) snprintf(err, err_len, "%s", e.msg);
        return st;
    }
    if (params && params->threads > 0) bert8_set_threads(params->threads);
    bert8_model *m = calloc(1, sizeof *m);
    if (!m || !(m->dir = strdup(dir))) {
        free(m);
        if (err && err_len) snprintf(err, err_len, "out of memory");
        return BERT8_ERR_NOMEM;
    }
    loader L = {m, &e, {0}, {-1, 0, 0, 0.0f}};
    struct stat sb;
    bool qpresent = false;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        st = b8_fail(&e, BERT8_ERR_IO, "model folder %s does not exist or is not a folder", dir);
        goto fail;
    }
    if ((st = b8_config_load(dir, &m->cfg, &e))) goto fail;
    if ((st = b8_st_open_dir(dir, &m->st, &e))) goto fail;
    if ((st = b8_qconfig_read(dir, &qpresent, &L.qc, &e))) goto fail;
    if (qpresent) {
        bool has_i8 = false;
        for (size_t i = 0; i < b8_st_count(m->st) && !has_i8; i++) has_i8 = b8_st_at(m->st, i)->dtype == B8_I8;
        if (!has_i8) {
            st = b8_fail(&e, BERT8_ERR_FORMAT, "%s: quantization_config.json present but no I8 weights", dir);
            goto fail;
        }
        if (L.qc.groups && L.qc.layers != m->cfg.num_layers) {
            st = b8_fail(&e, BERT8_ERR_FORMAT, "%s: quantization_config.json describes %lld layers, config.json %lld",
                         dir, (long long)L.qc.layers, (long long)m->cfg.num_layers);
            goto fail;
        }
        m->quantized = true;
        m->scheme = L.qc.scheme;
        m->calib_samples = L.qc.calib_samples;
        m->weight_bits = L.qc.weight_bits;
        snprintf(m->keep_fp32, sizeof m->keep_fp32, "%s", L.qc.keep_fp32);
    }
    if ((st = detect_prefix_and_head(&L))) goto fail;
    if (m->quantized && (st = check_int8_version(&L))) goto fail;
    if ((st = choose_lora(&L, params ? params->lora_task : NULL))) goto fail;
    const b8_config *c = &m->cfg;
    const int64_t H = c->hidden_size;
    int64_t s_word[2] = {c->vocab_size, H}, s_pos[2] = {c->max_position_embeddings, H};
    int64_t s_type[2] = {c->type_vocab_size, H};
    if ((st = load_word_embeddings(&L, s_word)) ||
        (c->desc->pos != B8_POS_ROTARY && !c->no_pos_table &&
         (st = get_f32(&L, "embeddings.position_embeddings.weight", true, 2, s_pos, &m->pos_emb))) ||
        (st = get_ln(&L, c->desc->emb_ln ? c->desc->emb_ln : "embeddings.LayerNorm", true, &m->emb_ln_g,
                     &m->emb_ln_b)) ||
        (c->desc->final_norm && (st = get_ln(&L, c->desc->final_norm, true, &m->final_ln_g, &m->final_ln_b))))
        goto fail;
    /* type_vocab_size 0: no token types. A token-type table in the file then disagrees with the
     * config (transformers refuses such a folder) and is named, not dropped; a [0, H] one is none. */
    if (c->desc->token_types &&
        (c->type_vocab_size > 0 || find_tensor(m, "embeddings.token_type_embeddings.weight", true))) {
        if ((st = get_f32(&L, "embeddings.token_type_embeddings.weight", true, 2, s_type, &m->type_emb)))
            goto fail;
        if (c->type_vocab_size == 0) m->type_emb = NULL;
    }
    int64_t s_rel[2] = {c->rel_buckets, c->num_heads};
    if (c->desc->rel_bias && (st = get_f32(&L, c->desc->rel_bias, true, 2, s_rel, &m->rel_bias))) goto fail;
    if (c->num_layers > 0 && !(m->layers = calloc((size_t)c->num_layers, sizeof *m->layers))) {
        st = b8_fail(&e, BERT8_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (int64_t i = 0; i < c->num_layers; i++)
        if ((st = load_layer(&L, i))) goto fail;
    if ((st = load_disentangled(&L)) || (st = load_heads(&L)) || (st = load_mlm(&L))) goto fail;
    if (m->quantized && (st = check_int8_scheme(&L))) goto fail;
    if (L.lora.task >= 0 && m->n_lora_folded == 0) {
        st = b8_fail(&e, BERT8_ERR_MISSING, "%s: LoRA task \"%s\" asked for, but the checkpoint has no LoRA adapters "
                     "(no \"*%s\" tensors on the modules bert8 loads)", dir, m->lora_task, B8_LORA_A);
        goto fail;
    }
    if (m->quantized && (st = b8_model_prepare_int8(m, &e))) goto fail;
    fill_info(m);
    if (params && params->verbose)
        fprintf(stderr, "bert8: loaded %s (%s, %lld layers, hidden %lld)\n", dir, c->model_type,
                (long long)c->num_layers, (long long)H);
    b8_qconfig_free(&L.qc);
    *out = m;
    return BERT8_OK;
fail:
    if (err && err_len) snprintf(err, err_len, "%s", e.msg);
    b8_qconfig_free(&L.qc);
    bert8_model_free(m);
    return st;
}

void bert8_model_free(bert8_model *m) {
    if (!m) return;
    if (m->layers) {
        for (int64_t i = 0; i < m->cfg.num_layers; i++) {
            b8_layer *ly = &m->layers[i];
            for (int g = 0; g < B8_GROUP_COUNT; g++) {
                b8_sgemm_w_free(ly->f32[g]);
                b8_qlinear_free(ly->q[g]);
            }
            b8_qattn_free(ly->att);
        }
        free(m->layers);
    }
    b8_qarena_free(m->qarena); /* after the weights that point into it */
    b8_sgemm_w_free(m->pooler.f32);
    b8_sgemm_w_free(m->cls_dense.f32);
    b8_sgemm_w_free(m->cls_out.f32);
    b8_sgemm_w_free(m->mlm_dense.f32);
    b8_sgemm_w_free(m->mlm_dec);
    b8_qlinear_free(m->mlm_q);
    b8_free_aligned(m->own_emb_q);
    b8_free_aligned(m->own_emb_scale);
    for (size_t i = 0; i < m->n_owned; i++) b8_free_aligned(m->owned[i]);
    free(m->owned);
    for (size_t i = 0; i < m->n_lora_folded; i++) free(m->lora_folded[i].base);
    free(m->lora_folded);
    b8_st_close(m->st);
    b8_config_free(&m->cfg);
    free(m->dir);
    free(m);
}

const bert8_model_info *bert8_model_get_info(const bert8_model *m) { return m ? &m->info : NULL; }

const char *bert8_model_dir(const bert8_model *m) { return m ? m->dir : NULL; }

const char *bert8_model_label(const bert8_model *m, int64_t i) {
    if (!m || i < 0 || i >= m->cfg.num_labels || !m->cfg.labels) return NULL;
    return m->cfg.labels[i];
}
