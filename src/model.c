/* model.c: loading a Hugging Face checkpoint folder into a bert8_model.
 *
 * Tensor names follow transformers: an optional prefix (bert., roberta., distilbert.),
 * legacy LayerNorm.gamma/.beta accepted for .weight/.bias, and every shape is checked against
 * config.json before any weight is used. */
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
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

static bert8_status get_linear(loader *L, const char *base, bool with_prefix, int64_t n, int64_t k,
                               bool pack, b8_linear *lin) {
    char name[512];
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

static bert8_status load_layer(loader *L, int64_t i, b8_layer *ly) {
    const b8_config *c = &L->m->cfg;
    const int64_t H = c->hidden_size, I = c->intermediate_size;
    char p[128], n[256];
    bert8_status st;
    bool distil = c->arch == BERT8_ARCH_DISTILBERT;
    if (distil) {
        snprintf(p, sizeof p, "transformer.layer.%lld.", (long long)i);
#define NM(s) (snprintf(n, sizeof n, "%s%s", p, s), n)
        if ((st = get_linear(L, NM("attention.q_lin"), true, H, H, false, &ly->q)) ||
            (st = get_linear(L, NM("attention.k_lin"), true, H, H, false, &ly->k)) ||
            (st = get_linear(L, NM("attention.v_lin"), true, H, H, false, &ly->v)) ||
            (st = get_linear(L, NM("attention.out_lin"), true, H, H, true, &ly->attn_out)) ||
            (st = get_ln(L, NM("sa_layer_norm"), &ly->ln1_g, &ly->ln1_b)) ||
            (st = get_linear(L, NM("ffn.lin1"), true, I, H, true, &ly->ffn_in)) ||
            (st = get_linear(L, NM("ffn.lin2"), true, H, I, true, &ly->ffn_out)) ||
            (st = get_ln(L, NM("output_layer_norm"), &ly->ln2_g, &ly->ln2_b)))
            return st;
    } else {
        snprintf(p, sizeof p, "encoder.layer.%lld.", (long long)i);
        if ((st = get_linear(L, NM("attention.self.query"), true, H, H, false, &ly->q)) ||
            (st = get_linear(L, NM("attention.self.key"), true, H, H, false, &ly->k)) ||
            (st = get_linear(L, NM("attention.self.value"), true, H, H, false, &ly->v)) ||
            (st = get_linear(L, NM("attention.output.dense"), true, H, H, true, &ly->attn_out)) ||
            (st = get_ln(L, NM("attention.output.LayerNorm"), &ly->ln1_g, &ly->ln1_b)) ||
            (st = get_linear(L, NM("intermediate.dense"), true, I, H, true, &ly->ffn_in)) ||
            (st = get_linear(L, NM("output.dense"), true, H, I, true, &ly->ffn_out)) ||
            (st = get_ln(L, NM("output.LayerNorm"), &ly->ln2_g, &ly->ln2_b)))
            return st;
#undef NM
    }
    /* Q, K and V run as one [3H][H] product: one pass over the activations. */
    size_t hh = (size_t)H * (size_t)H;
    float *w = b8_malloc_aligned(3 * hh * sizeof(float));
    float *b = b8_malloc_aligned(3 * (size_t)H * sizeof(float));
    if (!w || !b) {
        b8_free_aligned(w);
        b8_free_aligned(b);
        return b8_fail(L->e, BERT8_ERR_NOMEM, "out of memory");
    }
    memcpy(w, ly->q.w, hh * sizeof(float));
    memcpy(w + hh, ly->k.w, hh * sizeof(float));
    memcpy(w + 2 * hh, ly->v.w, hh * sizeof(float));
    memcpy(b, ly->q.b, (size_t)H * sizeof(float));
    memcpy(b + H, ly->k.b, (size_t)H * sizeof(float));
    memcpy(b + 2 * H, ly->v.b, (size_t)H * sizeof(float));
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
    fill_info(m);
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

const char *bert8_model_label(const bert8_model *m, int64_t i) {
    if (!m || i < 0 || i >= m->cfg.num_labels || !m->cfg.labels) return NULL;
    return m->cfg.labels[i];
}
