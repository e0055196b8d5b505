/* model.c: loading a Hugging Face checkpoint folder into a bert8_model.
 *
 * Tensor names follow transformers: an optional prefix (bert., roberta., distilbert.),
 * legacy LayerNorm.gamma/.beta accepted for .weight/.bias, and every shape is checked against
 * config.json before any weight is used. */
#include "model/model.h"
#include "quant/quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

typedef struct loader {
    bert8_model *m;
    b8_err *e;
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

/* Finds prefix+name, accepting the legacy gamma/beta spelling of LayerNorm parameters. */
static const b8_st_tensor *find_tensor(const bert8_model *m, const char *name, bool with_prefix) {
    char full[512];
    snprintf(full, sizeof full, "%s%s", with_prefix ? m->prefix : "", name);
    const b8_st_tensor *t = b8_st_find(m->st, full);
    if (t) return t;
    size_t n = strlen(full);
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

/* Returns the tensor as FP32 with exactly the given shape: in place when it is aligned F32,
 * else converted once into a buffer the model owns. */
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
    if (t->dtype == B8_F32 && ((uintptr_t)t->data % sizeof(float)) == 0) {
        *out = t->data;
        return BERT8_OK;
    }
    if (t->dtype != B8_F32 && t->dtype != B8_F16 && t->dtype != B8_BF16 && t->dtype != B8_F64)
        return b8_fail(L->e, BERT8_ERR_UNSUPPORTED, "%s: tensor \"%s\" has dtype %s; expected a float type",
                       m->dir, t->name, b8_dtype_name(t->dtype));
    float *buf = NULL;
    bert8_status st = b8_st_to_f32(t, count, &buf, L->e);
    if (st) return st;
    if ((st = keep_owned(m, buf, L->e))) return st;
    *out = buf;
    return BERT8_OK;
}

static bool is_i8(const bert8_model *m, const char *base);

static bert8_status get_linear(loader *L, const char *base, bool with_prefix, int64_t n, int64_t k,
                               bool pack, b8_linear *lin) {
    char name[512];
    if (with_prefix && L->m->quantized && is_i8(L->m, base)) {
        lin->n = n; /* an INT8 Linear: loaded by load_layer_quantized */
        lin->k = k;
        return BERT8_OK;
    }
    int64_t ws[2] = {n, k}, bs[1] = {n};
    lin->n = n;
    lin->k = k;
    bert8_status st;
    snprintf(name, sizeof name, "%s.weight", base);
    if ((st = get_f32(L, name, with_prefix, 2, ws, &lin->w))) return st;
    snprintf(name, sizeof name, "%s.bias", base);
    if ((st = get_f32(L, name, with_prefix, 1, bs, &lin->b))) return st;
    if (pack && (st = b8_sgemm_w_pack(lin->w, lin->b, n, k, &lin->f32, L->e)))
        return b8_wrap(L->e, "%s: packing \"%s\"", L->m->dir, base);
    return BERT8_OK;
}

static bert8_status get_ln(loader *L, const char *base, const float **g, const float **b) {
    char name[512];
    int64_t s[1] = {L->m->cfg.hidden_size};
    bert8_status st;
    snprintf(name, sizeof name, "%s.weight", base);
    if ((st = get_f32(L, name, true, 1, s, g))) return st;
    snprintf(name, sizeof name, "%s.bias", base);
    return get_f32(L, name, true, 1, s, b);
}

void b8_layer_part_name(const bert8_model *m, int64_t layer, int part, bool with_prefix, char *out,
                        size_t cap) {
    static const char *const bert[B8_PART_COUNT] = {
        "attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
        "attention.output.LayerNorm", "intermediate.dense", "output.dense", "output.LayerNorm"};
    static const char *const distil[B8_PART_COUNT] = {
        "attention.q_lin", "attention.k_lin", "attention.v_lin", "attention.out_lin",
        "sa_layer_norm", "ffn.lin1", "ffn.lin2", "output_layer_norm"};
    bool d = m->cfg.arch == BERT8_ARCH_DISTILBERT;
    snprintf(out, cap, "%s%s.%lld.%s", with_prefix ? m->prefix : "", d ? "transformer.layer" : "encoder.layer",
             (long long)layer, (d ? distil : bert)[part]);
}

bert8_status b8_layer_join_qkv(const b8_layer *ly, int64_t H, float **w, float **b, b8_err *e) {
    const size_t hh = (size_t)H * (size_t)H;
    *w = b8_malloc_aligned(3 * hh * sizeof(float));
    *b = b8_malloc_aligned(3 * (size_t)H * sizeof(float));
    if (!*w || !*b) {
        b8_free_aligned(*w);
        b8_free_aligned(*b);
        *w = *b = NULL;
        return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
    }
    const b8_linear *parts[3] = {&ly->q, &ly->k, &ly->v};
    for (int i = 0; i < 3; i++) {
        memcpy(*w + i * hh, parts[i]->w, hh * sizeof(float));
        memcpy(*b + i * H, parts[i]->b, (size_t)H * sizeof(float));
    }
    return BERT8_OK;
}

/* Reads a small F32 vector tensor that must be finite and positive (scales, smoothing). */
static bert8_status get_scales(loader *L, const char *base, const char *suffix, int64_t n, float **out) {
    char name[512];
    snprintf(name, sizeof name, "%s.%s", base, suffix);
    int64_t shape[1] = {n};
    const float *v = NULL;
    bert8_status st = get_f32(L, name, true, 1, shape, &v);
    if (st) return st;
    for (int64_t i = 0; i < n; i++)
        if (!(v[i] > 0.0f) || isinf(v[i]))
            return b8_fail(L->e, BERT8_ERR_FORMAT, "%s: tensor \"%s%s\"[%lld] = %g is not a finite positive scale",
                           L->m->dir, L->m->prefix, name, (long long)i, (double)v[i]);
    *out = b8_malloc_aligned((size_t)n * sizeof(float));
    if (!*out) return b8_fail(L->e, BERT8_ERR_NOMEM, "out of memory");
    memcpy(*out, v, (size_t)n * sizeof(float));
    return BERT8_OK;
}

/* Loads one quantized Linear (I8 weight + weight_scale + bias + smooth_factor [+ input_scale]). */
static bert8_status load_qlinear(loader *L, const char *base, int64_t n, int64_t k, b8_qlinear **out) {
    bert8_model *m = L->m;
    char name[512];
    *out = NULL;
    snprintf(name, sizeof name, "%s.weight", base);
    const b8_st_tensor *t = find_tensor(m, name, true);
    if (!t) return b8_fail(L->e, BERT8_ERR_MISSING, "%s: tensor \"%s%s\" is missing", m->dir, m->prefix, name);
    if (t->dtype != B8_I8 || t->ndim != 2 || t->shape[0] != n || t->shape[1] != k)
        return b8_fail(L->e, BERT8_ERR_SHAPE, "%s: tensor \"%s\" must be I8 [%lld,%lld] in a quantized checkpoint",
                       m->dir, t->name, (long long)n, (long long)k);
    b8_qlinear *q = calloc(1, sizeof *q);
    if (!q) return b8_fail(L->e, BERT8_ERR_NOMEM, "out of memory");
    q->n = n;
    q->k = k;
    q->alpha = -1;
    bert8_status st;
    const float *bias = NULL;
    int64_t bs[1] = {n};
    float *a = NULL;
    q->wq = b8_malloc_aligned((size_t)(n * k));
    q->bias = b8_malloc_aligned((size_t)n * sizeof(float));
    q->in_mul = b8_calloc_aligned((size_t)k, sizeof(float));
    if (!q->wq || !q->bias || !q->in_mul) {
        st = b8_fail(L->e, BERT8_ERR_NOMEM, "out of memory");
        goto fail;
    }
    memcpy(q->wq, t->data, (size_t)(n * k));
    snprintf(name, sizeof name, "%s.bias", base);
    if ((st = get_f32(L, name, true, 1, bs, &bias))) goto fail;
    memcpy(q->bias, bias, (size_t)n * sizeof(float));
    if ((st = get_scales(L, base, "weight_scale", n, &q->w_scale)) ||
        (st = get_scales(L, base, "smooth_factor", k, &q->smooth)))
        goto fail;
    if (m->scheme == BERT8_SCHEME_STATIC) {
        if ((st = get_scales(L, base, "input_scale", 1, &a))) goto fail;
        q->a_scale = a[0];
        b8_free_aligned(a);
    }
    *out = q;
    return BERT8_OK;
fail:
    b8_qlinear_free(q);
    return st;
}

/* Joins the Q, K and V quantized Linears into one [3H][H] Linear; they must share the
 * smoothing factors and input scale (they share their input). */
static bert8_status join_qkv(loader *L, const char *name, b8_qlinear *p[3], b8_qlinear **out) {
    const int64_t H = p[0]->k;
    for (int i = 1; i < 3; i++)
        if (memcmp(p[i]->smooth, p[0]->smooth, (size_t)H * sizeof(float)) || p[i]->a_scale != p[0]->a_scale)
            return b8_fail(L->e, BERT8_ERR_FORMAT,
                           "%s: %s: query, key and value must share smooth_factor and input_scale", L->m->dir, name);
    b8_qlinear *q = calloc(1, sizeof *q);
    if (!q) return b8_fail(L->e, BERT8_ERR_NOMEM, "out of memory");
    q->n = 3 * H;
    q->k = H;
    q->alpha = -1;
    q->a_scale = p[0]->a_scale;
    q->wq = b8_malloc_aligned((size_t)(3 * H * H));
    q->w_scale = b8_malloc_aligned((size_t)(3 * H) * sizeof(float));
    q->bias = b8_malloc_aligned((size_t)(3 * H) * sizeof(float));
    q->smooth = b8_malloc_aligned((size_t)H * sizeof(float));
    q->in_mul = b8_calloc_aligned((size_t)H, sizeof(float));
    if (!q->wq || !q->w_scale || !q->bias || !q->smooth || !q->in_mul) {
        b8_qlinear_free(q);
        return b8_fail(L->e, BERT8_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < 3; i++) {
        memcpy(q->wq + i * H * H, p[i]->wq, (size_t)(H * H));
        memcpy(q->w_scale + i * H, p[i]->w_scale, (size_t)H * sizeof(float));
        memcpy(q->bias + i * H, p[i]->bias, (size_t)H * sizeof(float));
    }
    memcpy(q->smooth, p[0]->smooth, (size_t)H * sizeof(float));
    *out = q;
    return BERT8_OK;
}

static bool is_i8(const bert8_model *m, const char *base) {
    char name[512];
    snprintf(name, sizeof name, "%s.weight", base);
    const b8_st_tensor *t = find_tensor(m, name, true);
    return t && t->dtype == B8_I8;
}

/* A layer of a quantized checkpoint: Linears stored I8 load as INT8, others as FP32. */
static bert8_status load_layer_quantized(loader *L, int64_t i, b8_layer *ly) {
    const b8_config *c = &L->m->cfg;
    const int64_t H = c->hidden_size, I = c->intermediate_size;
    char n[B8_PART_COUNT][256];
    for (int k = 0; k < B8_PART_COUNT; k++) b8_layer_part_name(L->m, i, k, false, n[k], sizeof n[k]);
    bert8_status st;
    if (is_i8(L->m, n[0])) {
        b8_qlinear *p[3] = {NULL, NULL, NULL};
        if (!is_i8(L->m, n[1]) || !is_i8(L->m, n[2]))
            return b8_fail(L->e, BERT8_ERR_FORMAT, "%s: %s: query, key and value must all be I8 or all float",
                           L->m->dir, n[0]);
        st = BERT8_OK;
        for (int k = 0; k < 3 && !st; k++) st = load_qlinear(L, n[k], H, H, &p[k]);
        if (!st) st = join_qkv(L, n[0], p, &ly->qkv_q);
        for (int k = 0; k < 3; k++) b8_qlinear_free(p[k]);
        if (st) return st;
    }
    struct {
        int idx;
        int64_t rows, cols;
        b8_qlinear **q;
    } rest[3] = {{B8_PART_ATTN_OUT, H, H, &ly->attn_out_q},
                 {B8_PART_FFN_IN, I, H, &ly->ffn_in_q},
                 {B8_PART_FFN_OUT, H, I, &ly->ffn_out_q}};
    for (int k = 0; k < 3; k++)
        if (is_i8(L->m, n[rest[k].idx]) && (st = load_qlinear(L, n[rest[k].idx], rest[k].rows, rest[k].cols, rest[k].q)))
            return st;
    return BERT8_OK;
}

static bert8_status load_layer(loader *L, int64_t i, b8_layer *ly) {
    const b8_config *c = &L->m->cfg;
    const int64_t H = c->hidden_size, I = c->intermediate_size;
    char n[B8_PART_COUNT][256];
    for (int k = 0; k < B8_PART_COUNT; k++) b8_layer_part_name(L->m, i, k, false, n[k], sizeof n[k]);
    bert8_status st;
    if (L->m->quantized && (st = load_layer_quantized(L, i, ly))) return st;
    if ((st = get_linear(L, n[B8_PART_Q], true, H, H, false, &ly->q)) ||
        (st = get_linear(L, n[B8_PART_K], true, H, H, false, &ly->k)) ||
        (st = get_linear(L, n[B8_PART_V], true, H, H, false, &ly->v)) ||
        (st = get_linear(L, n[B8_PART_ATTN_OUT], true, H, H, true, &ly->attn_out)) ||
        (st = get_ln(L, n[B8_PART_LN1], &ly->ln1_g, &ly->ln1_b)) ||
        (st = get_linear(L, n[B8_PART_FFN_IN], true, I, H, true, &ly->ffn_in)) ||
        (st = get_linear(L, n[B8_PART_FFN_OUT], true, H, I, true, &ly->ffn_out)) ||
        (st = get_ln(L, n[B8_PART_LN2], &ly->ln2_g, &ly->ln2_b)))
        return st;
    if (ly->qkv_q) return BERT8_OK;
    /* Q, K and V run as one [3H][H] product: one pass over the activations. */
    float *w, *b;
    if ((st = b8_layer_join_qkv(ly, H, &w, &b, L->e))) return st;
    st = b8_sgemm_w_pack(w, b, 3 * H, H, &ly->qkv, L->e);
    b8_free_aligned(w);
    b8_free_aligned(b);
    return st;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

static bool has(const bert8_model *m, const char *name) { return find_tensor(m, name, false) != NULL; }

static bert8_status detect_prefix_and_head(loader *L) {
    bert8_model *m = L->m;
    const b8_config *c = &m->cfg;
    const char *cands[4] = {"", "", "", ""};
    int nc = 0;
    if (c->arch == BERT8_ARCH_BERT) cands[nc++] = "bert.";
    if (c->arch == BERT8_ARCH_XLMR) cands[nc++] = "roberta.";
    if (c->arch == BERT8_ARCH_DISTILBERT) cands[nc++] = "distilbert.";
    cands[nc++] = "";
    bool found = false;
    for (int i = 0; i < nc && !found; i++) {
        strcpy(m->prefix, cands[i]);
        found = find_tensor(m, "embeddings.word_embeddings.weight", true) != NULL;
    }
    if (!found)
        return b8_fail(L->e, BERT8_ERR_MISSING,
                       "%s: tensor \"%sembeddings.word_embeddings.weight\" is missing (no encoder found "
                       "for model_type \"%s\")",
                       m->dir, cands[0], c->model_type);
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
            head = (c->arch == BERT8_ARCH_DISTILBERT) ? BERT8_HEAD_TOKEN_CLS : BERT8_HEAD_SEQ_CLS;
    }
    m->info.head = head;
    return BERT8_OK;
}

static bert8_status load_heads(loader *L) {
    bert8_model *m = L->m;
    const b8_config *c = &m->cfg;
    const int64_t H = c->hidden_size;
    bert8_status st;
    m->has_pooler = c->arch != BERT8_ARCH_DISTILBERT && find_tensor(m, "pooler.dense.weight", true);
    if (m->has_pooler && (st = get_linear(L, "pooler.dense", true, H, H, true, &m->pooler))) return st;
    switch (m->info.head) {
    case BERT8_HEAD_BASE: return BERT8_OK;
    case BERT8_HEAD_QA: return get_linear(L, "qa_outputs", false, 2, H, true, &m->cls_out);
    case BERT8_HEAD_TOKEN_CLS:
        return get_linear(L, "classifier", false, c->num_labels, H, true, &m->cls_out);
    case BERT8_HEAD_SEQ_CLS:
        if (c->arch == BERT8_ARCH_DISTILBERT) {
            if ((st = get_linear(L, "pre_classifier", false, H, H, true, &m->cls_dense))) return st;
            return get_linear(L, "classifier", false, c->num_labels, H, true, &m->cls_out);
        }
        if (c->arch == BERT8_ARCH_XLMR) {
            if ((st = get_linear(L, "classifier.dense", false, H, H, true, &m->cls_dense))) return st;
            return get_linear(L, "classifier.out_proj", false, c->num_labels, H, true, &m->cls_out);
        }
        if (!m->has_pooler)
            return b8_fail(L->e, BERT8_ERR_MISSING,
                           "%s: tensor \"%spooler.dense.weight\" is missing (BERT sequence classification "
                           "classifies the pooled first token)", m->dir, m->prefix);
        return get_linear(L, "classifier", false, c->num_labels, H, true, &m->cls_out);
    }
    return BERT8_OK;
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
    i->type_vocab_size = c->type_vocab_size;
    i->num_labels = i->head == BERT8_HEAD_BASE ? 0 : (i->head == BERT8_HEAD_QA ? 2 : c->num_labels);
    i->pad_token_id = c->pad_token_id;
    i->layer_norm_eps = c->layer_norm_eps;
    i->hidden_act = c->act_name;
    i->has_pooler = m->has_pooler;
    i->tensor_count = (int64_t)b8_st_count(m->st);
    i->weight_bytes = (int64_t)b8_st_data_bytes(m->st);
    const int64_t H = c->hidden_size, I = c->intermediate_size;
    int64_t p = (c->vocab_size + c->max_position_embeddings + c->type_vocab_size + 2) * H;
    p += c->num_layers * (4 * (H * H + H) + 2 * H * I + I + H + 4 * H);
    if (m->has_pooler) p += H * H + H;
    if (m->cls_dense.w) p += H * H + H;
    if (m->cls_out.w) p += m->cls_out.n * (H + 1);
    i->param_count = p;
}

bert8_load_params bert8_default_load_params(void) {
    bert8_load_params p = {0, 0};
    return p;
}

bert8_status bert8_model_load(const char *dir, const bert8_load_params *params, bert8_model **out,
                              char *err, size_t err_len) {
    b8_err e;
    b8_err_clear(&e);
    if (out) *out = NULL;
    if (!dir || !out) {
        if (err && err_len) snprintf(err, err_len, "bert8_model_load: dir and out must not be NULL");
        return BERT8_ERR_INVALID_ARG;
    }
    if (params && params->threads > 0) bert8_set_threads(params->threads);
    bert8_model *m = calloc(1, sizeof *m);
    bert8_status st = BERT8_OK;
    if (!m || !(m->dir = strdup(dir))) {
        free(m);
        if (err && err_len) snprintf(err, err_len, "out of memory");
        return BERT8_ERR_NOMEM;
    }
    loader L = {m, &e};
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        st = b8_fail(&e, BERT8_ERR_IO, "model folder %s does not exist or is not a folder", dir);
        goto fail;
    }
    if ((st = b8_config_load(dir, &m->cfg, &e))) goto fail;
    if ((st = b8_st_open_dir(dir, &m->st, &e))) goto fail;
    if ((st = b8_quant_read_config(m, &e))) goto fail;
    if ((st = detect_prefix_and_head(&L))) goto fail;
    const b8_config *c = &m->cfg;
    const int64_t H = c->hidden_size;
    int64_t s_word[2] = {c->vocab_size, H}, s_pos[2] = {c->max_position_embeddings, H};
    int64_t s_type[2] = {c->type_vocab_size, H};
    if ((st = get_f32(&L, "embeddings.word_embeddings.weight", true, 2, s_word, &m->word_emb)) ||
        (st = get_f32(&L, "embeddings.position_embeddings.weight", true, 2, s_pos, &m->pos_emb)) ||
        (st = get_ln(&L, "embeddings.LayerNorm", &m->emb_ln_g, &m->emb_ln_b)))
        goto fail;
    if (c->arch != BERT8_ARCH_DISTILBERT && c->type_vocab_size > 0 &&
        (st = get_f32(&L, "embeddings.token_type_embeddings.weight", true, 2, s_type, &m->type_emb)))
        goto fail;
    if (c->num_layers > 0) {
        m->layers = calloc((size_t)c->num_layers, sizeof *m->layers);
        if (!m->layers) {
            st = b8_fail(&e, BERT8_ERR_NOMEM, "out of memory");
            goto fail;
        }
    }
    for (int64_t i = 0; i < c->num_layers; i++)
        if ((st = load_layer(&L, i, &m->layers[i]))) goto fail;
    if ((st = load_heads(&L))) goto fail;
    if (m->quantized && (st = b8_quant_finalize(m, &e))) goto fail;
    fill_info(m);
    m->info.quantized = m->quantized;
    if (params && params->verbose)
        fprintf(stderr, "bert8: loaded %s (%s, %lld layers, hidden %lld)\n", dir, c->model_type,
                (long long)c->num_layers, (long long)H);
    *out = m;
    return BERT8_OK;
fail:
    if (err && err_len) snprintf(err, err_len, "%s", e.msg);
    bert8_model_free(m);
    return st;
}

static void free_linear(b8_linear *l) { b8_sgemm_w_free(l->f32); }

void bert8_model_free(bert8_model *m) {
    if (!m) return;
    if (m->layers) {
        for (int64_t i = 0; i < m->cfg.num_layers; i++) {
            b8_layer *ly = &m->layers[i];
            b8_sgemm_w_free(ly->qkv);
            free_linear(&ly->attn_out);
            free_linear(&ly->ffn_in);
            free_linear(&ly->ffn_out);
            b8_qlinear_free(ly->qkv_q);
            b8_qlinear_free(ly->attn_out_q);
            b8_qlinear_free(ly->ffn_in_q);
            b8_qlinear_free(ly->ffn_out_q);
            b8_free_aligned(ly->qkv_qg);
            b8_free_aligned(ly->qkv_qb);
            b8_free_aligned(ly->ffn_qg);
            b8_free_aligned(ly->ffn_qb);
        }
        free(m->layers);
    }
    free_linear(&m->pooler);
    free_linear(&m->cls_dense);
    free_linear(&m->cls_out);
    for (size_t i = 0; i < m->n_owned; i++) b8_free_aligned(m->owned[i]);
    free(m->owned);
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
