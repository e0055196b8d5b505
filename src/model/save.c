/* save.c: bert8_model_save: an INT8 model written as a loadable folder (io/qformat.h):
 * model.safetensors with every INT8 group in its quantized form and every other tensor as in
 * the source checkpoint, config.json and the tokenizer files copied, quantization_config.json
 * recording how each group runs. The folder is written through io/atomic_dir.h: a temporary
 * sibling, fsynced, then swapped into place, so that a process killed at any point (or a full
 * disk) leaves out_dir holding the complete old folder or the complete new one. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/atomic_dir.h"
#include "model/lora.h"
#include "model/model.h"

/* The tensors to write: names always owned, data borrowed from the model or the mapping, or
 * owned (weights unpacked from the kernels' layout) when listed in keep. */
typedef struct wlist {
    b8_st_write_item *it;
    size_t n, cap;
    bool oom;
    void **keep;
    size_t n_keep;
} wlist;

static void wl_add(wlist *w, const char *name, b8_dtype dt, int ndim, const int64_t *shape, const void *data) {
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
    b8_st_write_item item;
    memset(&item, 0, sizeof item);
    item.name = strdup(name);
    if (!item.name) {
        w->oom = true;
        return;
    }
    item.dtype = dt;
    item.ndim = ndim;
    for (int d = 0; d < ndim; d++) item.shape[d] = shape[d];
    item.data = data;
    w->it[w->n++] = item;
}

static void wl_free(wlist *w) {
    for (size_t i = 0; i < w->n; i++) free((void *)w->it[i].name);
    for (size_t i = 0; i < w->n_keep; i++) b8_free_aligned(w->keep[i]);
    free(w->it);
    free(w->keep);
    memset(w, 0, sizeof *w);
}

/* rows [r0, r0+n) of an INT8 Linear written under base; wq: its int8 weights [q->n][q->k] */
static void wl_qlinear(wlist *w, const char *base, const b8_qlinear *q, const int8_t *wq, int64_t r0, int64_t n) {
    char name[512];
    int64_t s2[2] = {n, q->k}, sn[1] = {n}, sk[1] = {q->k}, s1[1] = {1};
    snprintf(name, sizeof name, "%s.weight", base);
    wl_add(w, name, B8_I8, 2, s2, wq + r0 * q->k);
    snprintf(name, sizeof name, "%s.bias", base);
    wl_add(w, name, B8_F32, 1, sn, q->bias + r0);
    snprintf(name, sizeof name, "%s.%s", base, B8_QT_WEIGHT_SCALE);
    wl_add(w, name, B8_F32, 1, sn, q->w_scale + r0);
    snprintf(name, sizeof name, "%s.%s", base, B8_QT_SMOOTH);
    wl_add(w, name, B8_F32, 1, sk, q->smooth);
    if (q->mode == B8_QMODE_STATIC) {
        snprintf(name, sizeof name, "%s.%s", base, B8_QT_INPUT_SCALE);
        wl_add(w, name, B8_F32, 1, s1, &q->a_scale);
    }
    if (q->a_zero != 0.0f) {
        snprintf(name, sizeof name, "%s.%s", base, B8_QT_INPUT_ZERO);
        wl_add(w, name, B8_F32, 1, s1, &q->a_zero);
    }
    if (q->n_out) {
        int64_t sr[1] = {q->n_out}, snr[2] = {n, q->n_out};
        snprintf(name, sizeof name, "%s.%s", base, B8_QT_OUTLIER_INDEX);
        wl_add(w, name, B8_I32, 1, sr, q->out_idx);
        snprintf(name, sizeof name, "%s.%s", base, B8_QT_OUTLIER_WEIGHT);
        wl_add(w, name, B8_F32, 2, snr, q->out_w + r0 * q->n_out);
    }
}

/* Whether tensor name is "<base>.<suffix>" for one of the quantized bases. */
static bool replaced(const char *name, char (*bases)[256], size_t nb) {
    for (size_t i = 0; i < nb; i++) {
        size_t bl = strlen(bases[i]);
        if (!strncmp(name, bases[i], bl) && name[bl] == '.' && !strchr(name + bl + 1, '.')) return true;
    }
    return false;
}

static bool same_folder(const char *a, const char *b) {
    char ra[PATH_MAX], rb[PATH_MAX];
    if (!realpath(a, ra) || !realpath(b, rb)) return false;
    return strcmp(ra, rb) == 0;
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
    if (same_folder(m->dir, out_dir)) {
        if (err && err_len)
            snprintf(err, err_len, "the output folder %s is the model's own folder; write the INT8 model elsewhere",
                     out_dir);
        return BERT8_ERR_INVALID_ARG;
    }
    wlist w = {0};
    b8_qconfig qc = {0};
    b8_atomic_dir *ad = NULL;
    const int64_t L = m->cfg.num_layers;
    char path[4096], from[4096];
    char(*bases)[256] = calloc((size_t)(L * (B8_PART_COUNT + B8_GROUP_COUNT)) + 2, sizeof *bases);
    size_t nb = 0;
    qc.groups = calloc((size_t)(L * B8_GROUP_COUNT) + 1, sizeof *qc.groups);
    if (!bases || !qc.groups) {
        st = b8_fail(&e, BERT8_ERR_NOMEM, "out of memory");
        goto done;
    }
    if ((st = b8_atomic_dir_begin(out_dir, m->dir, &ad, &e))) goto done;
    const char *tmp = b8_atomic_dir_path(ad);
    /* 1. every group that runs INT8 is written from its quantized form, under its part names */
    for (int64_t l = 0; l < L; l++) {
        const b8_layer *ly = &m->layers[l];
        for (int g = 0; g < B8_GROUP_COUNT; g++) {
            const b8_group_desc *d = &b8_group_table[g];
            const b8_qlinear *q = ly->q[g];
            b8_qgroup *qg = &qc.groups[l * B8_GROUP_COUNT + g];
            qg->mode = q ? q->mode : B8_QMODE_FP32;
            qg->alpha = q ? q->alpha : -1.0f;
            if (!q) continue;
            const int np = b8_group_nparts(m->cfg.desc, (b8_group)g);
            const int64_t pn = q->n / np;
            int8_t *wq = b8_malloc_aligned((size_t)(q->n * q->k));
            void **nk = wq ? realloc(w.keep, (w.n_keep + 1) * sizeof *nk) : NULL;
            if (!nk) {
                b8_free_aligned(wq);
                st = b8_fail(&e, BERT8_ERR_NOMEM, "out of memory");
                goto done;
            }
            w.keep = nk;
            w.keep[w.n_keep++] = wq;
            if ((st = b8_qlinear_weights(q, wq, &e))) goto done;
            for (int i = 0; i < np; i++) {
                b8_model_part_name(m, l, d->parts[i], bases[nb], sizeof bases[nb]);
                wl_qlinear(&w, bases[nb], q, wq, i * pn, pn);
                if (g == B8_GROUP_QKV && ly->att) {
                    char name[300];
                    static const int64_t s1[1] = {1};
                    const int64_t sh[1] = {m->cfg.hidden_size};
                    const float *sc[3] = {&ly->att->sq, &ly->att->sk, ly->att->sv_ch ? ly->att->sv_ch : &ly->att->sv};
                    snprintf(name, sizeof name, "%s.%s", bases[nb], B8_QT_OUTPUT_SCALE);
                    wl_add(&w, name, B8_F32, 1, i == 2 && ly->att->sv_ch ? sh : s1, sc[i]); /* V: per channel */
                }
                nb++;
            }
            /* the fused FP32 tensor the parts came from is not copied (step 2) */
            if (b8_fused_name(m->cfg.arch, m->prefix, l, (b8_group)g, bases[nb], sizeof bases[nb])) nb++;
        }
    }
    /* int8 word embeddings: rows and their scales */
    if (m->int8_embeddings) {
        char name[300];
        const int64_t se[2] = {m->cfg.vocab_size, m->cfg.hidden_size}, ss[1] = {m->cfg.vocab_size};
        snprintf(bases[nb], sizeof bases[nb], "%s%s", m->prefix,
                 m->cfg.desc->word_emb ? m->cfg.desc->word_emb : "embeddings.word_embeddings");
        snprintf(name, sizeof name, "%s.weight", bases[nb]);
        wl_add(&w, name, B8_I8, 2, se, m->word_emb_q);
        snprintf(name, sizeof name, "%s.weight_scale", bases[nb]);
        wl_add(&w, name, B8_F32, 1, ss, m->word_emb_scale);
        nb++;
    }
    /* disentangled attention: each layer's relative key / query projections, which the INT8
     * key and query weights cannot remake (rows [2 x att_span][H], as a Linear writes them) */
    const b8_config *c = &m->cfg;
    for (int64_t l = 0; l < L && c->desc->disentangled; l++)
        for (int t = 0; t < 2; t++) {
            const float *src = t ? m->layers[l].rel_qr : m->layers[l].rel_kr;
            if (!src) continue;
            const int64_t H = c->hidden_size, A = c->num_heads, dh = H / A, R = 2 * c->att_span, sh[2] = {R, H};
            float *rows = b8_malloc_aligned((size_t)(R * H) * sizeof(float));
            void **nk = rows ? realloc(w.keep, (w.n_keep + 1) * sizeof *nk) : NULL;
            if (!nk) {
                b8_free_aligned(rows);
                st = b8_fail(&e, BERT8_ERR_NOMEM, "out of memory");
                goto done;
            }
            w.keep = nk;
            w.keep[w.n_keep++] = rows;
            for (int64_t h = 0; h < A; h++) /* the model holds them [heads][dh][R] */
                for (int64_t t = 0; t < dh; t++)
                    for (int64_t r = 0; r < R; r++) rows[r * H + h * dh + t] = src[(h * dh + t) * R + r];
            char name[512];
            snprintf(name, sizeof name, "%s%s.%lld.%s", m->prefix, c->desc->layer_prefix, (long long)l,
                     c->desc->rel_tables[t]);
            wl_add(&w, name, B8_F32, 2, sh, rows);
        }
    /* 2. every other tensor of the source checkpoint is copied as it is, except LoRA
     * parametrizations: the adapters are dropped and each original weight is written as a plain
     * "<base>.weight", with the task's adapter folded in when one was */
    for (size_t i = 0; i < b8_st_count(m->st); i++) {
        const b8_st_tensor *t = b8_st_at(m->st, i);
        if (!b8_lora_is_param(t->name)) {
            if (!replaced(t->name, bases, nb)) wl_add(&w, t->name, t->dtype, t->ndim, t->shape, t->data);
            continue;
        }
        const size_t n = strlen(t->name), ol = strlen(B8_LORA_ORIGINAL);
        char name[512];
        if (n <= ol || strcmp(t->name + n - ol, B8_LORA_ORIGINAL) || n - ol + 8 > sizeof name) continue;
        snprintf(name, sizeof name, "%.*s.weight", (int)(n - ol), t->name);
        if (replaced(name, bases, nb)) continue;
        const struct b8_lora_folded *f = NULL;
        for (size_t j = 0; j < m->n_lora_folded && !f; j++)
            if (strlen(m->lora_folded[j].base) == n - ol && !strncmp(m->lora_folded[j].base, t->name, n - ol))
                f = &m->lora_folded[j];
        if (f) {
            const int64_t sh[2] = {f->n, f->k};
            wl_add(&w, name, B8_F32, 2, sh, f->w);
        } else {
            wl_add(&w, name, t->dtype, t->ndim, t->shape, t->data);
        }
    }
    if (w.oom) {
        st = b8_fail(&e, BERT8_ERR_NOMEM, "out of memory");
        goto done;
    }
    snprintf(path, sizeof path, "%s/model.safetensors", tmp);
    char by[64];
    snprintf(by, sizeof by, "bert8 %s", bert8_version());
    const char *meta[] = {"format", "pt", "quantized_by", by, NULL};
    if ((st = b8_st_write(path, w.it, w.n, meta, &e))) goto done;
    /* 3. config.json unchanged, tokenizer files copied, quantization_config.json */
    static const char *const files[] = {"config.json", "vocab.txt", "tokenizer.json", "tokenizer_config.json",
                                        "special_tokens_map.json", "sentencepiece.bpe.model", "added_tokens.json",
                                        "modules.json", "sentence_bert_config.json", "1_Pooling/config.json", NULL};
    for (int i = 0; files[i]; i++) {
        struct stat sb;
        snprintf(from, sizeof from, "%s/%s", m->dir, files[i]);
        if (stat(from, &sb) != 0) continue;
        if ((st = b8_atomic_dir_copy_file(ad, from, files[i], &e))) goto done;
    }
    qc.version = B8_QFORMAT_VERSION;
    /* the scheme says what the folder holds (the loader checks it): static when some Linear is;
     * a static run whose every Linear ended per token (unit modes, a budget) is a dynamic folder */
    qc.scheme = BERT8_SCHEME_DYNAMIC;
    for (int64_t l = 0; l < L; l++)
        for (int g = 0; g < B8_GROUP_COUNT; g++)
            if (m->layers[l].q[g] && m->layers[l].q[g]->mode == B8_QMODE_STATIC) qc.scheme = BERT8_SCHEME_STATIC;
    qc.calib_samples = m->calib_samples;
    qc.weight_bits = m->weight_bits;
    qc.int8_embeddings = m->int8_embeddings;
    snprintf(qc.lora_task, sizeof qc.lora_task, "%s", m->lora_task);
    snprintf(qc.keep_fp32, sizeof qc.keep_fp32, "%s", m->keep_fp32);
    qc.layers = L;
    if (!(qc.attn_int8 = calloc((size_t)L + 1, 1))) {
        st = b8_fail(&e, BERT8_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int64_t l = 0; l < L; l++) qc.int8_attention |= (qc.attn_int8[l] = m->layers[l].att != NULL);
    snprintf(path, sizeof path, "%s/quantization_config.json", tmp);
    if ((st = b8_qconfig_write(path, &qc, &e))) goto done;
    st = b8_atomic_dir_commit(ad, &e);
done:
    b8_atomic_dir_free(ad);
    wl_free(&w);
    free(bases);
    b8_qconfig_free(&qc);
    if (st && err && err_len) snprintf(err, err_len, "%s", e.msg);
    return st;
}
