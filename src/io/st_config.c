/* st_config.c: a sentence-transformers folder read whole (see st_config.h). */
#include "io/st_config.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/utf8.h"
#include "io/json_util.h"
#include "io/safetensors.h"

/* Reads path when it exists as a regular file (at most 1 MiB); NULL with *absent otherwise. */
static char *read_small(const char *path, bool *absent, b8_err *e) {
    struct stat sb;
    *absent = false;
    if (stat(path, &sb) != 0) {
        *absent = errno == ENOENT || errno == ENOTDIR;
        if (!*absent) b8_fail(e, BERT8_ERR_IO, "cannot read %s: %s", path, strerror(errno));
        return NULL;
    }
    if (!S_ISREG(sb.st_mode)) {
        b8_fail(e, BERT8_ERR_IO, "%s is not a regular file", path);
        return NULL;
    }
    if (sb.st_size > (1 << 20)) {
        b8_fail(e, BERT8_ERR_TOO_LARGE, "%s is over 1 MiB", path);
        return NULL;
    }
    return b8_read_file(path, NULL, e);
}

/* Parses path as a JSON object into *root (NULL when the file is absent). */
static bert8_status read_json(const char *path, cJSON **root, b8_err *e) {
    bool absent;
    *root = NULL;
    char *text = read_small(path, &absent, e);
    if (!text) return absent ? BERT8_OK : (e && e->status ? e->status : BERT8_ERR_IO);
    *root = cJSON_Parse(text);
    bert8_status st = *root ? b8_json_refuse_nul(text, strlen(text), path, e) : BERT8_OK;
    free(text);
    if (st) {
        cJSON_Delete(*root);
        *root = NULL;
        return st;
    }
    if (!*root || !cJSON_IsObject(*root)) {
        cJSON_Delete(*root);
        *root = NULL;
        return b8_fail(e, BERT8_ERR_FORMAT, "%s is not a JSON object", path);
    }
    return BERT8_OK;
}

static bool exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* A boolean field: *out keeps its default when absent or null. */
static bert8_status get_bool(const cJSON *o, const char *key, bool *out, const char *path, b8_err *e) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) return BERT8_OK;
    if (!cJSON_IsBool(v)) return b8_fail(e, BERT8_ERR_FORMAT, "%s: %s must be a boolean, not %s", path, key, b8_json_type_name(v));
    *out = cJSON_IsTrue(v);
    return BERT8_OK;
}

/* A positive integer field: *out = 0 when absent or null. */
static bert8_status get_count(const cJSON *o, const char *key, int64_t *out, const char *path, b8_err *e) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    *out = 0;
    if (!v || cJSON_IsNull(v)) return BERT8_OK;
    const double d = cJSON_IsNumber(v) ? v->valuedouble : -1;
    if (!(d >= 1 && d <= 1048576) || d != floor(d))
        return b8_fail(e, BERT8_ERR_FORMAT, "%s: %s must be a positive integer", path, key);
    *out = (int64_t)d;
    return BERT8_OK;
}

/* ---- sentence_bert_config.json and config_sentence_transformers.json --------------------- */

static bert8_status read_sbert_config(const char *dir, b8_st_folder *f, b8_err *e) {
    char path[4096];
    snprintf(path, sizeof path, "%s/sentence_bert_config.json", dir);
    cJSON *root;
    bert8_status st = read_json(path, &root, e);
    if (st || !root) return st;
    if (!(st = get_count(root, "max_seq_length", &f->max_seq_length, path, e)))
        st = get_bool(root, "do_lower_case", &f->do_lower_case, path, e);
    cJSON_Delete(root);
    return st;
}

static bert8_status read_prompts(const char *dir, b8_st_folder *f, b8_err *e) {
    char path[4096];
    snprintf(path, sizeof path, "%s/config_sentence_transformers.json", dir);
    cJSON *root;
    bert8_status st = read_json(path, &root, e);
    if (st || !root) return st;
    const cJSON *prompts = cJSON_GetObjectItemCaseSensitive(root, "prompts");
    const cJSON *def = cJSON_GetObjectItemCaseSensitive(root, "default_prompt_name");
    if (prompts && !cJSON_IsNull(prompts) && !cJSON_IsObject(prompts)) {
        st = b8_fail(e, BERT8_ERR_FORMAT, "%s: prompts must be an object of strings, not %s", path, b8_json_type_name(prompts));
        goto done;
    }
    const int n = prompts && cJSON_IsObject(prompts) ? cJSON_GetArraySize(prompts) : 0;
    if (n > 0 && !(f->prompts = calloc((size_t)n, sizeof *f->prompts))) {
        st = b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
        goto done;
    }
    const cJSON *p;
    if (n > 0)
        cJSON_ArrayForEach(p, prompts) {
            size_t bad;
            if (!cJSON_IsString(p) || !p->string) {
                st = b8_fail(e, BERT8_ERR_FORMAT, "%s: prompt \"%s\" must be a string, not %s", path,
                             p->string ? p->string : "", b8_json_type_name(p));
                goto done;
            }
            if (!bert8_utf8_valid(p->string, strlen(p->string), &bad) ||
                !bert8_utf8_valid(p->valuestring, strlen(p->valuestring), &bad)) {
                st = b8_fail(e, BERT8_ERR_FORMAT, "%s: a prompt name or text is not valid UTF-8", path);
                goto done;
            }
            b8_st_prompt *q = &f->prompts[f->n_prompts];
            if (!(q->name = strdup(p->string)) || !(q->text = strdup(p->valuestring))) {
                st = b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
                goto done;
            }
            f->n_prompts++;
        }
    if (def && !cJSON_IsNull(def)) {
        if (!cJSON_IsString(def)) {
            st = b8_fail(e, BERT8_ERR_FORMAT, "%s: default_prompt_name must be a string, not %s", path, b8_json_type_name(def));
            goto done;
        }
        if (!b8_st_prompt_text(f, def->valuestring)) {
            st = b8_fail(e, BERT8_ERR_FORMAT, "%s: default_prompt_name \"%s\" is not one of its prompts", path,
                         def->valuestring);
            goto done;
        }
        if (!(f->default_prompt_name = strdup(def->valuestring))) st = b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
    }
done:
    cJSON_Delete(root);
    return st;
}

/* ---- Pooling ---------------------------------------------------------------------------- */

static const struct {
    const char *name, *legacy;
    unsigned bit;
} POOL_MODES[] = {
    {"cls", "pooling_mode_cls_token", B8_POOL_CLS},
    {"max", "pooling_mode_max_tokens", B8_POOL_MAX},
    {"mean", "pooling_mode_mean_tokens", B8_POOL_MEAN},
    {"mean_sqrt_len_tokens", "pooling_mode_mean_sqrt_len_tokens", B8_POOL_MEAN_SQRT},
    {"weightedmean", "pooling_mode_weightedmean_tokens", B8_POOL_WEIGHTED},
    {"lasttoken", "pooling_mode_lasttoken", B8_POOL_LAST},
};

static bert8_status pool_mode_bit(const cJSON *v, const char *path, unsigned *bits, b8_err *e) {
    if (!cJSON_IsString(v)) return b8_fail(e, BERT8_ERR_FORMAT, "%s: pooling_mode must be a string or a list of strings", path);
    for (size_t i = 0; i < sizeof POOL_MODES / sizeof *POOL_MODES; i++)
        if (!strcmp(v->valuestring, POOL_MODES[i].name)) {
            if (*bits & POOL_MODES[i].bit)
                return b8_fail(e, BERT8_ERR_UNSUPPORTED, "%s: pooling mode \"%s\" is listed twice", path, v->valuestring);
            *bits |= POOL_MODES[i].bit;
            return BERT8_OK;
        }
    return b8_fail(e, BERT8_ERR_UNSUPPORTED,
                   "%s: pooling mode \"%s\" is not one of cls, max, mean, mean_sqrt_len_tokens, weightedmean, lasttoken",
                   path, v->valuestring);
}

static bert8_status read_pooling(const char *path, int64_t hidden, b8_st_folder *f, b8_err *e) {
    cJSON *root;
    bert8_status st = read_json(path, &root, e);
    if (st || !root) return st;
    unsigned bits = 0;
    const cJSON *mode = cJSON_GetObjectItemCaseSensitive(root, "pooling_mode");
    if (mode) {
        /* sentence-transformers refuses these (null is not iterable, no mode gives torch.cat
         * nothing to join) */
        if (cJSON_IsNull(mode) || (cJSON_IsArray(mode) && !mode->child))
            st = b8_fail(e, BERT8_ERR_FORMAT, "%s: pooling_mode is %s: it must name at least one mode", path,
                         cJSON_IsNull(mode) ? "null" : "an empty list");
        else if (cJSON_IsArray(mode)) {
            /* concatenated in sentence-transformers' fixed order whatever the list's order; a list
             * out of that order would be a different vector */
            const cJSON *m;
            unsigned last = 0;
            cJSON_ArrayForEach(m, mode) {
                unsigned before = bits;
                if ((st = pool_mode_bit(m, path, &bits, e))) break;
                unsigned bit = bits & ~before;
                if (bit < last) {
                    st = b8_fail(e, BERT8_ERR_UNSUPPORTED,
                                 "%s: pooling_mode lists its modes out of the order cls, max, mean, mean_sqrt_len_tokens, "
                                 "weightedmean, lasttoken",
                                 path);
                    break;
                }
                last = bit;
            }
        } else {
            st = pool_mode_bit(mode, path, &bits, e);
        }
    } else {
        for (size_t i = 0; i < sizeof POOL_MODES / sizeof *POOL_MODES && !st; i++) {
            bool on = false;
            st = get_bool(root, POOL_MODES[i].legacy, &on, path, e);
            if (on) bits |= POOL_MODES[i].bit;
        }
    }
    /* no mode on (every legacy flag false, or none given): sentence-transformers 6 pools by mean */
    if (!st && !bits) bits = B8_POOL_MEAN;
    if (!st) st = get_bool(root, "include_prompt", &f->include_prompt, path, e);
    int64_t dim = 0;
    if (!st && !(st = get_count(root, "embedding_dimension", &dim, path, e)) && !dim)
        st = get_count(root, "word_embedding_dimension", &dim, path, e);
    /* Pooling's one required argument: a config without it (as "{}", or a model's config.json
     * read as one) is refused by sentence-transformers too */
    if (!st && !dim)
        st = b8_fail(e, BERT8_ERR_FORMAT, "%s: embedding_dimension (or word_embedding_dimension) is missing: not a "
                     "Pooling config", path);
    if (!st && dim && dim != hidden)
        st = b8_fail(e, BERT8_ERR_SHAPE, "%s: embedding_dimension %lld differs from the model's hidden size %lld", path,
                     (long long)dim, (long long)hidden);
    cJSON_Delete(root);
    if (!st) f->pool = bits;
    return st;
}

/* ---- Dense ------------------------------------------------------------------------------- */

static const struct {
    const char *name;
    b8_st_act act;
} ACTS[] = {
    {"Identity", B8_ACT_IDENTITY}, {"Tanh", B8_ACT_TANH},       {"ReLU", B8_ACT_RELU},
    {"GELU", B8_ACT_GELU},         {"Sigmoid", B8_ACT_SIGMOID}, {"SiLU", B8_ACT_SILU},
    {"LeakyReLU", B8_ACT_LEAKY_RELU},
};

static bert8_status parse_act(const cJSON *v, const char *path, b8_st_act *act, b8_err *e) {
    *act = B8_ACT_TANH; /* sentence-transformers' default */
    if (!v) return BERT8_OK;
    if (!cJSON_IsString(v)) return b8_fail(e, BERT8_ERR_FORMAT, "%s: activation_function must be a string", path);
    const char *s = v->valuestring, *dot = strrchr(s, '.');
    if (!strncmp(s, "torch.", 6) && dot)
        for (size_t i = 0; i < sizeof ACTS / sizeof *ACTS; i++)
            if (!strcmp(dot + 1, ACTS[i].name)) {
                *act = ACTS[i].act;
                return BERT8_OK;
            }
    return b8_fail(e, BERT8_ERR_UNSUPPORTED,
                   "%s: activation_function \"%s\" is not supported (torch.nn Identity, Tanh, ReLU, GELU, Sigmoid, SiLU "
                   "or LeakyReLU)",
                   path, s);
}

/* One tensor of a Dense module's safetensors as [rows][cols] F32. */
static bert8_status dense_tensor(const b8_st *w, const char *file, const char *name, int64_t rows, int64_t cols,
                                 float **out, b8_err *e) {
    const b8_st_tensor *t = b8_st_find(w, name);
    if (!t) return b8_fail(e, BERT8_ERR_FORMAT, "%s: tensor %s is missing", file, name);
    const bool ok = cols ? t->ndim == 2 && t->shape[0] == rows && t->shape[1] == cols : t->ndim == 1 && t->shape[0] == rows;
    if (!ok)
        return b8_fail(e, BERT8_ERR_SHAPE, "%s: tensor %s has shape [%lld%s%lld] (%d dims), expected [%lld%s%lld] from config.json",
                       file, name, (long long)(t->ndim > 0 ? t->shape[0] : 0), t->ndim > 1 ? ", " : "",
                       (long long)(t->ndim > 1 ? t->shape[1] : 0), t->ndim, (long long)rows, cols ? ", " : "",
                       (long long)cols);
    const size_t n = (size_t)rows * (size_t)(cols ? cols : 1);
    bert8_status st = b8_st_to_f32(t, n, out, e);
    const size_t bad = st ? n : b8_first_nonfinite(*out, n);
    if (bad < n) {
        st = b8_fail(e, BERT8_ERR_FORMAT, "%s: tensor %s[%zu] = %g is not finite", file, name, bad, (double)(*out)[bad]);
        b8_free_aligned(*out);
        *out = NULL;
    }
    return st;
}

static bert8_status read_dense(const char *dir, int64_t in_width, b8_st_dense *d, b8_err *e) {
    char path[4096], wpath[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    cJSON *root;
    bert8_status st = read_json(path, &root, e);
    if (st) return st;
    if (!root) return b8_fail(e, BERT8_ERR_IO, "the Dense module's %s is missing", path);
    bool bias = true;
    if ((st = get_count(root, "in_features", &d->in, path, e)) || (st = get_count(root, "out_features", &d->out, path, e)) ||
        (st = get_bool(root, "bias", &bias, path, e)) || (st = get_bool(root, "use_residual", &d->residual, path, e)) ||
        (st = parse_act(cJSON_GetObjectItemCaseSensitive(root, "activation_function"), path, &d->act, e)))
        goto done;
    if (!d->in || !d->out) {
        st = b8_fail(e, BERT8_ERR_FORMAT, "%s: in_features and out_features are required", path);
        goto done;
    }
    static const char *const IO_NAMES[] = {"module_input_name", "module_output_name"};
    for (int k = 0; k < 2; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, IO_NAMES[k]);
        if (v && !cJSON_IsNull(v) && (!cJSON_IsString(v) || strcmp(v->valuestring, "sentence_embedding"))) {
            st = b8_fail(e, BERT8_ERR_UNSUPPORTED, "%s: %s must be \"sentence_embedding\" (a Dense over token embeddings is not supported)",
                         path, IO_NAMES[k]);
            goto done;
        }
    }
    if (d->in != in_width) {
        st = b8_fail(e, BERT8_ERR_SHAPE, "%s: in_features %lld does not match the %lld values the module before it gives", path,
                     (long long)d->in, (long long)in_width);
        goto done;
    }
    snprintf(wpath, sizeof wpath, "%s/model.safetensors", dir);
    if (!exists(wpath)) {
        snprintf(path, sizeof path, "%s/pytorch_model.bin", dir);
        st = exists(path) ? b8_fail(e, BERT8_ERR_UNSUPPORTED,
                                    "%s: bert8 reads Dense weights from model.safetensors only; convert it (e.g. load and "
                                    "save the model with sentence-transformers, safe_serialization=True)",
                                    path)
                          : b8_fail(e, BERT8_ERR_IO, "the Dense module's weights %s are missing", wpath);
        goto done;
    }
    b8_st *w = NULL;
    if (!(st = b8_st_open(wpath, &w, e))) {
        st = dense_tensor(w, wpath, "linear.weight", d->out, d->in, &d->w, e);
        if (!st && bias) st = dense_tensor(w, wpath, "linear.bias", d->out, 0, &d->b, e);
        if (!st && d->residual && d->in != d->out) st = dense_tensor(w, wpath, "residual.weight", d->out, d->in, &d->res, e);
        b8_st_close(w);
    }
done:
    cJSON_Delete(root);
    return st;
}

/* ---- modules.json ------------------------------------------------------------------------- */

/* A module path that is rooted (/x, \\x, C:x) or has a ".." component, as sentence-transformers
 * refuses it. */
static bool leaves_folder(const char *rel) {
    if (rel[0] == '/' || rel[0] == '\\' || (rel[0] && rel[1] == ':')) return true;
    for (const char *p = rel; *p;) {
        const size_t n = strcspn(p, "/\\");
        if (n == 2 && p[0] == '.' && p[1] == '.') return true;
        p += n + (p[n] != '\0');
    }
    return false;
}

/* The class name of a module type, when it is one of sentence-transformers' ("...models.Dense",
 * "...base.modules.dense.Dense"); NULL otherwise. */
static const char *st_class(const char *type) {
    if (strncmp(type, "sentence_transformers.", 22)) return NULL;
    const char *dot = strrchr(type, '.');
    return dot ? dot + 1 : NULL;
}

static bert8_status add_step(b8_st_folder *f, b8_st_step **out, b8_err *e) {
    b8_st_step *s = realloc(f->steps, (f->n_steps + 1) * sizeof *s);
    if (!s) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
    f->steps = s;
    *out = memset(&s[f->n_steps++], 0, sizeof *s);
    return BERT8_OK;
}

static int64_t width_now(const b8_st_folder *f, int64_t hidden) {
    for (size_t i = f->n_steps; i-- > 0;)
        if (!f->steps[i].normalize) return f->steps[i].dense.out;
    int k = 0;
    for (unsigned b = f->pool; b; b &= b - 1) k++;
    return (k ? k : 1) * hidden;
}

static bert8_status add_dense(b8_st_folder *f, const char *dir, int64_t hidden, b8_err *e) {
    b8_st_step *s;
    int64_t in = width_now(f, hidden);
    bert8_status st = add_step(f, &s, e);
    return st ? st : read_dense(dir, in, &s->dense, e);
}

static bert8_status read_modules(const char *dir, const char *dense_path, int64_t hidden, b8_st_folder *f, b8_err *e) {
    char path[4096], sub[4096];
    snprintf(path, sizeof path, "%s/modules.json", dir);
    bool absent;
    char *text = read_small(path, &absent, e);
    if (!text && !absent) return e && e->status ? e->status : BERT8_ERR_IO;
    bert8_status st = BERT8_OK;
    int n_dense = 0;
    if (text) {
        f->has_modules = true;
        cJSON *root = cJSON_Parse(text);
        st = root ? b8_json_refuse_nul(text, strlen(text), path, e) : BERT8_OK;
        free(text);
        if (st) {
            cJSON_Delete(root);
            return st;
        }
        if (!cJSON_IsArray(root)) {
            cJSON_Delete(root);
            return b8_fail(e, BERT8_ERR_FORMAT, "%s is not a JSON list of modules", path);
        }
        const cJSON *m;
        int i = 0;
        bool pooled = false;
        cJSON_ArrayForEach(m, root) {
            const cJSON *type = cJSON_GetObjectItemCaseSensitive(m, "type");
            const cJSON *mp = cJSON_GetObjectItemCaseSensitive(m, "path");
            if (!cJSON_IsObject(m) || !cJSON_IsString(type) || (mp && !cJSON_IsString(mp))) {
                st = b8_fail(e, BERT8_ERR_FORMAT, "%s: module %d must be an object with a string \"type\" and \"path\"", path, i);
                break;
            }
            if (!mp) { /* sentence-transformers needs it too (a KeyError); "" is the folder itself */
                st = b8_fail(e, BERT8_ERR_FORMAT, "%s: module %d (%s) has no \"path\"", path, i, type->valuestring);
                break;
            }
            const char *cls = st_class(type->valuestring), *rel = mp->valuestring;
            if (leaves_folder(rel)) {
                st = b8_fail(e, BERT8_ERR_FORMAT, "%s: module %d's path \"%s\" leaves the folder", path, i, rel);
                break;
            }
            snprintf(sub, sizeof sub, "%s/%s", dir, rel);
            const bool first = i == 0;
            if (cls && !strcmp(cls, "Transformer") && first) {
                if (rel[0])
                    st = b8_fail(e, BERT8_ERR_UNSUPPORTED,
                                 "%s: the Transformer module lives in \"%s\"; bert8 loads the model from the folder itself "
                                 "(point it at %s)",
                                 path, rel, sub);
            } else if (cls && !strcmp(cls, "Pooling") && i == 1) {
                snprintf(sub, sizeof sub, "%s/%s/config.json", dir, rel);
                if (!exists(sub)) st = b8_fail(e, BERT8_ERR_IO, "%s: the Pooling module's %s is missing", path, sub);
                else st = read_pooling(sub, hidden, f, e);
                pooled = true;
            } else if (cls && !strcmp(cls, "Dense") && pooled) {
                if (++n_dense > 1 && dense_path) {
                    st = b8_fail(e, BERT8_ERR_UNSUPPORTED, "%s lists several Dense modules; a dense path replaces only one", path);
                    break;
                }
                char dd[4096];
                if (dense_path && dense_path[0] == '/') snprintf(dd, sizeof dd, "%s", dense_path);
                else snprintf(dd, sizeof dd, "%s/%s", dir, dense_path ? dense_path : rel);
                st = add_dense(f, dd, hidden, e);
            } else if (cls && !strcmp(cls, "Normalize") && pooled) {
                b8_st_step *s;
                st = add_step(f, &s, e);
                if (!st) s->normalize = true;
            } else if (cls && !strcmp(cls, "Dropout") && pooled) {
                /* the identity at inference */
            } else {
                st = b8_fail(e, BERT8_ERR_UNSUPPORTED,
                             "%s: module %d (%s) is not supported here: bert8 computes a Transformer, then a Pooling, then "
                             "Dense and Normalize modules",
                             path, i, type->valuestring);
            }
            if (st) break;
            i++;
        }
        if (!st && !pooled)
            st = b8_fail(e, BERT8_ERR_UNSUPPORTED, "%s lists no Pooling module after the Transformer: no sentence embedding to compute",
                         path);
        cJSON_Delete(root);
        if (st) return st;
    } else {
        /* no modules.json: a 1_Pooling/config.json alone still says how to pool */
        snprintf(sub, sizeof sub, "%s/1_Pooling/config.json", dir);
        if ((st = read_pooling(sub, hidden, f, e))) return st;
    }
    if (dense_path && !n_dense) { /* TEI's --dense-path on a folder whose modules list none: after pooling */
        char dd[4096];
        if (dense_path[0] == '/') snprintf(dd, sizeof dd, "%s", dense_path);
        else snprintf(dd, sizeof dd, "%s/%s", dir, dense_path);
        const int64_t in = width_now(f, hidden); /* no Dense yet: the pooled width */
        b8_st_step *s;
        if ((st = add_step(f, &s, e))) return st;
        /* first after pooling, before any Normalize */
        memmove(&f->steps[1], &f->steps[0], (f->n_steps - 1) * sizeof *f->steps);
        memset(&f->steps[0], 0, sizeof *f->steps);
        if ((st = read_dense(dd, in, &f->steps[0].dense, e))) return st;
    }
    return BERT8_OK;
}

/* ---- the folder ----------------------------------------------------------------------------- */

bert8_status b8_st_folder_read(const char *dir, const char *dense_path, bool modules, int64_t hidden,
                               b8_st_folder *f, b8_err *e) {
    memset(f, 0, sizeof *f);
    f->include_prompt = true;
    bert8_status st = read_sbert_config(dir, f, e);
    if (!st) st = read_prompts(dir, f, e);
    if (!st && modules) st = read_modules(dir, dense_path, hidden, f, e);
    if (st) b8_st_folder_free(f);
    return st;
}

void b8_st_folder_free(b8_st_folder *f) {
    if (!f) return;
    for (size_t i = 0; i < f->n_steps; i++) {
        b8_free_aligned(f->steps[i].dense.w);
        b8_free_aligned(f->steps[i].dense.b);
        b8_free_aligned(f->steps[i].dense.res);
    }
    free(f->steps);
    for (size_t i = 0; i < f->n_prompts; i++) {
        free(f->prompts[i].name);
        free(f->prompts[i].text);
    }
    free(f->prompts);
    free(f->default_prompt_name);
    memset(f, 0, sizeof *f);
}

const char *b8_st_prompt_text(const b8_st_folder *f, const char *name) {
    for (size_t i = 0; name && i < f->n_prompts; i++)
        if (!strcmp(f->prompts[i].name, name)) return f->prompts[i].text;
    return NULL;
}
