/* config.c: config.json -> b8_config, following transformers v4.31's class defaults. */
#include "io/config.h"
#include "io/json_util.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <math.h>
#include <float.h>

/* config.json is at most this large (a real one is a few KiB). */
#define CONFIG_MAX_BYTES ((size_t)16 << 20)

/* The bound of integer fields that may be negative ("use the default" markers such as -1). */
static const int64_t big_int = (int64_t)1 << 31;


/* The field, or NULL when it is absent or null (both mean "use the default"). */
static const cJSON *field(const cJSON *root, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    return (v && !cJSON_IsNull(v)) ? v : NULL;
}

static bert8_status wrong_type(const char *path, const char *key, const char *want, const cJSON *v,
                               b8_err *e) {
    return b8_fail(e, BERT8_ERR_FORMAT, "%s: field \"%s\" must be %s, not %s", path, key, want,
                   b8_json_type_name(v));
}

/* Reads an integer field; absent keeps *out (the default). Wrong type or range is an error.
 * Numbers are printed with %.15g so that a huge or fractional value reads as written. */
static bert8_status get_int(const cJSON *root, const char *key, int64_t lo, int64_t hi,
                            int64_t *out, const char *path, b8_err *e) {
    const cJSON *v = field(root, key);
    if (!v) return BERT8_OK;
    if (!cJSON_IsNumber(v)) return wrong_type(path, key, "an integer", v, e);
    double d = v->valuedouble;
    if (!isfinite(d) || d != floor(d))
        return b8_fail(e, BERT8_ERR_FORMAT, "%s: field \"%s\" = %.15g is not an integer", path,
                       key, d);
    if (d < (double)lo || d > (double)hi)
        return b8_fail(e, BERT8_ERR_FORMAT,
                       "%s: field \"%s\" = %.15g is out of range [%lld, %lld]", path, key, d,
                       (long long)lo, (long long)hi);
    *out = (int64_t)d;
    return BERT8_OK;
}

static bert8_status get_str(const cJSON *root, const char *key, char *out, size_t cap,
                            const char *path, b8_err *e) {
    const cJSON *v = field(root, key);
    if (!v) return BERT8_OK;
    if (!cJSON_IsString(v)) return wrong_type(path, key, "a string", v, e);
    if (strlen(v->valuestring) >= cap)
        return b8_fail(e, BERT8_ERR_FORMAT, "%s: field \"%s\" (\"%.40s...\") is longer than %zu bytes",
                       path, key, v->valuestring, cap - 1);
    strcpy(out, v->valuestring);
    return BERT8_OK;
}

/* A boolean field; absent or null keeps *out. */
static bert8_status get_bool(const cJSON *root, const char *key, bool *out, const char *path,
                             b8_err *e) {
    const cJSON *v = field(root, key);
    if (!v) return BERT8_OK;
    if (!cJSON_IsBool(v)) return wrong_type(path, key, "true or false", v, e);
    *out = cJSON_IsTrue(v);
    return BERT8_OK;
}

/* Type checks of optional fields that bert8 reads or that change the maths if set: a value of
 * the wrong type is an error naming the field, never silently ignored. */
static bert8_status check_optional(const cJSON *root, const char *path, b8_err *e) {
    static const char *const objects[] = {"id2label", "label2id"};
    for (size_t i = 0; i < sizeof objects / sizeof *objects; i++) {
        const cJSON *v = field(root, objects[i]);
        if (v && !cJSON_IsObject(v)) return wrong_type(path, objects[i], "an object", v, e);
    }
    const cJSON *a = field(root, "architectures");
    if (a) {
        if (!cJSON_IsArray(a)) return wrong_type(path, "architectures", "an array of strings", a, e);
        int i = 0;
        for (const cJSON *it = a->child; it; it = it->next, i++)
            if (!cJSON_IsString(it))
                return b8_fail(e, BERT8_ERR_FORMAT,
                               "%s: field \"architectures\"[%d] must be a string, not %s", path, i,
                               b8_json_type_name(it));
    }
    const cJSON *pt = field(root, "problem_type");
    if (pt) {
        if (!cJSON_IsString(pt)) return wrong_type(path, "problem_type", "a string", pt, e);
        /* transformers refuses any other value when it builds the config */
        if (strcmp(pt->valuestring, "regression") &&
            strcmp(pt->valuestring, "single_label_classification") &&
            strcmp(pt->valuestring, "multi_label_classification"))
            return b8_fail(e, BERT8_ERR_FORMAT,
                           "%s: field \"problem_type\" = \"%.60s\" is not regression, "
                           "single_label_classification or multi_label_classification",
                           path, pt->valuestring);
    }
    bool decoder = false, cross = false;
    bert8_status st;
    if ((st = get_bool(root, "is_decoder", &decoder, path, e)) ||
        (st = get_bool(root, "add_cross_attention", &cross, path, e)))
        return st;
    if (decoder || cross)
        return b8_fail(e, BERT8_ERR_UNSUPPORTED,
                       "%s: field \"%s\" is true: bert8 runs encoders only", path,
                       decoder ? "is_decoder" : "add_cross_attention");
    return BERT8_OK;
}

static bert8_status parse_labels(const cJSON *root, b8_config *cfg, const char *path, b8_err *e) {
    const cJSON *map = field(root, "id2label"); /* an object: check_optional saw to it */
    int64_t n = 2; /* transformers' PretrainedConfig default */
    int64_t nl = 2;
    bert8_status st = get_int(root, "num_labels", 1, B8_CONFIG_MAX_LABELS, &nl, path, e);
    if (st) return st;
    if (map) n = cJSON_GetArraySize(map);
    else n = nl; /* id2label wins when both are given, as in PretrainedConfig */
    if (n < 1 || n > B8_CONFIG_MAX_LABELS)
        return b8_fail(e, BERT8_ERR_FORMAT, "%s: %lld labels is out of range [1, %d]", path,
                       (long long)n, B8_CONFIG_MAX_LABELS);
    cfg->num_labels = n;
    cfg->labels = calloc((size_t)n, sizeof(char *));
    if (!cfg->labels) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
    if (map && cJSON_IsObject(map)) {
        const cJSON *it;
        cJSON_ArrayForEach(it, map) {
            char *end = NULL;
            long id = strtol(it->string, &end, 10);
            if (!end || end == it->string || *end || id < 0 || id >= n || !cJSON_IsString(it))
                return b8_fail(e, BERT8_ERR_FORMAT, "%s: id2label entry \"%s\" is not a label id in 0..%lld",
                               path, it->string, (long long)n - 1);
            if (cfg->labels[id])
                return b8_fail(e, BERT8_ERR_FORMAT, "%s: id2label has label %ld twice", path, id);
            cfg->labels[id] = strdup(it->valuestring);
            if (!cfg->labels[id]) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
        }
    }
    for (int64_t i = 0; i < n; i++) {
        if (!cfg->labels[i]) {
            char buf[32];
            snprintf(buf, sizeof buf, "LABEL_%lld", (long long)i);
            cfg->labels[i] = strdup(buf);
            if (!cfg->labels[i]) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
        }
    }
    return BERT8_OK;
}

/* Rotary positions as transformers' RotaryEmbeddingConfigMixin reads them: "rope_parameters" (or
 * the legacy "rope_scaling") with "rope_type" (or "type", default "default") and "rope_theta",
 * else a top-level "rope_theta", else the config class's default theta. Only the default rope
 * type is implemented; the rotated head size (head_dim, if given) must be the whole head. */
static bert8_status parse_rotary(const cJSON *root, const b8_arch_desc *d, b8_config *cfg, const char *path,
                                 b8_err *e) {
    const char *key = field(root, "rope_parameters") ? "rope_parameters" : "rope_scaling";
    const cJSON *rp = field(root, key);
    if (rp && !cJSON_IsObject(rp)) return wrong_type(path, key, "an object", rp, e);
    char type[32] = "default";
    bert8_status st;
    if (rp && (st = get_str(rp, field(rp, "rope_type") ? "rope_type" : "type", type, sizeof type, path, e)))
        return st;
    if (strcmp(type, "default") != 0)
        return b8_fail(e, BERT8_ERR_UNSUPPORTED, "%s: field \"%s\": rope_type \"%s\" is not supported (only \"default\")",
                       path, key, type);
    double theta = d->rope_theta;
    const cJSON *tv = rp ? field(rp, "rope_theta") : NULL;
    const char *tkey = tv ? "rope_parameters.rope_theta" : "rope_theta";
    if (!tv) tv = field(root, "rope_theta");
    /* jina-embeddings-v3's own configuration class names it rotary_emb_base */
    if (!tv && (tv = field(root, "rotary_emb_base"))) tkey = "rotary_emb_base";
    if (tv && !cJSON_IsNumber(tv)) return wrong_type(path, tkey, "a number", tv, e);
    if (tv) theta = tv->valuedouble;
    /* inv_freq = 1 / theta^(2i/d) in float: theta must be a finite float above 0 */
    if (!(theta > 0 && theta <= (double)FLT_MAX))
        return b8_fail(e, BERT8_ERR_FORMAT, "%s: field \"%s\" = %.15g is not a finite positive number", path, tkey,
                       theta);
    cfg->rope_theta = (float)theta;
    const int64_t d_head = cfg->hidden_size / cfg->num_heads;
    int64_t hd = d_head;
    if ((st = get_int(root, "head_dim", 1, 1 << 20, &hd, path, e))) return st;
    if (hd != d_head)
        return b8_fail(e, BERT8_ERR_UNSUPPORTED,
                       "%s: field \"head_dim\" = %lld is not hidden_size / num_attention_heads = %lld (not supported)",
                       path, (long long)hd, (long long)d_head);
    if (d_head % 2)
        return b8_fail(e, BERT8_ERR_SHAPE, "%s: head size %lld is odd: rotary positions rotate pairs of channels", path,
                       (long long)d_head);
    return BERT8_OK;
}

/* One layer kind's theta (desc->sliding): rope_parameters[kind] {"rope_type": "default",
 * "rope_theta"}, else the legacy top-level field legacy, else the default. */
static bert8_status kind_theta(const cJSON *root, const char *kind, const char *legacy, double def, float *out,
                               const char *path, b8_err *e) {
    const cJSON *rp = field(root, "rope_parameters");
    const cJSON *k = rp && cJSON_IsObject(rp) ? field(rp, kind) : NULL;
    if (k && !cJSON_IsObject(k)) return wrong_type(path, "rope_parameters.<layer type>", "an object", k, e);
    char type[32] = "default";
    bert8_status st;
    if (k && (st = get_str(k, "rope_type", type, sizeof type, path, e))) return st;
    if (strcmp(type, "default") != 0)
        return b8_fail(e, BERT8_ERR_UNSUPPORTED,
                       "%s: field \"rope_parameters.%s.rope_type\" = \"%s\" is not supported (only \"default\")", path,
                       kind, type);
    const cJSON *tv = k ? field(k, "rope_theta") : NULL;
    if (!tv) tv = field(root, legacy);
    if (tv && !cJSON_IsNumber(tv)) return wrong_type(path, legacy, "a number", tv, e);
    const double theta = tv ? tv->valuedouble : def;
    if (!(theta > 0 && theta <= (double)FLT_MAX))
        return b8_fail(e, BERT8_ERR_FORMAT,
                       "%s: the rope theta of \"%s\" layers = %.15g is not a finite positive number", path, kind,
                       theta);
    *out = (float)theta;
    return BERT8_OK;
}

/* desc->sliding: which layers attend globally ("layer_types", else every
 * global_attn_every_n_layers-th from layer 0), the window (local_attention, even: half on each
 * side of the query), the rope theta of each kind, and the head's pooling. */
static bert8_status parse_sliding(const cJSON *root, const b8_arch_desc *d, b8_config *cfg, const char *path,
                                  b8_err *e) {
    bert8_status st;
    int64_t la = 128, every = 3;
    if ((st = get_int(root, "local_attention", 2, 1 << 22, &la, path, e)) ||
        (st = get_int(root, "global_attn_every_n_layers", 1, 4096, &every, path, e)))
        return st;
    if (la % 2)
        return b8_fail(e, BERT8_ERR_FORMAT,
                       "%s: field \"local_attention\" = %lld is odd: the window is local_attention / 2 keys "
                       "on each side",
                       path, (long long)la);
    cfg->window = la / 2;
    if ((cfg->hidden_size / cfg->num_heads) % 2)
        return b8_fail(e, BERT8_ERR_SHAPE, "%s: head size %lld is odd: rotary positions rotate pairs of channels", path,
                       (long long)(cfg->hidden_size / cfg->num_heads));
    cfg->layer_sliding = calloc((size_t)(cfg->num_layers ? cfg->num_layers : 1), sizeof(bool));
    if (!cfg->layer_sliding) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
    const cJSON *lt = field(root, "layer_types");
    if (lt && !cJSON_IsArray(lt)) return wrong_type(path, "layer_types", "an array", lt, e);
    if (lt && cJSON_GetArraySize(lt) != cfg->num_layers)
        return b8_fail(e, BERT8_ERR_FORMAT, "%s: field \"layer_types\" has %d entries for %lld layers", path,
                       cJSON_GetArraySize(lt), (long long)cfg->num_layers);
    for (int64_t l = 0; l < cfg->num_layers; l++) {
        if (!lt) {
            cfg->layer_sliding[l] = l % every != 0;
            continue;
        }
        const cJSON *v = cJSON_GetArrayItem(lt, (int)l);
        if (!cJSON_IsString(v) ||
            (strcmp(v->valuestring, "full_attention") != 0 && strcmp(v->valuestring, "sliding_attention") != 0))
            return b8_fail(e, BERT8_ERR_UNSUPPORTED,
                           "%s: field \"layer_types\"[%lld] is not \"full_attention\" or \"sliding_attention\"", path,
                           (long long)l);
        cfg->layer_sliding[l] = !strcmp(v->valuestring, "sliding_attention");
    }
    if ((st = kind_theta(root, "full_attention", "global_rope_theta", d->rope_theta, &cfg->rope_theta, path, e)) ||
        (st = kind_theta(root, "sliding_attention", "local_rope_theta", d->rope_theta_local, &cfg->rope_theta_local,
                         path, e)))
        return st;
    char pool[16] = "cls";
    if ((st = get_str(root, "classifier_pooling", pool, sizeof pool, path, e))) return st;
    if (strcmp(pool, "cls") != 0 && strcmp(pool, "mean") != 0)
        return b8_fail(e, BERT8_ERR_UNSUPPORTED, "%s: classifier_pooling \"%s\" is not supported (cls, mean)", path,
                       pool);
    cfg->cls_mean = !strcmp(pool, "mean");
    char act[24] = "gelu";
    if ((st = get_str(root, "classifier_activation", act, sizeof act, path, e))) return st;
    if (!strcmp(act, "gelu")) cfg->head_act = B8_ACT_GELU;
    else if (!strcmp(act, "gelu_new") || !strcmp(act, "gelu_pytorch_tanh")) cfg->head_act = B8_ACT_GELU_TANH;
    else if (!strcmp(act, "relu")) cfg->head_act = B8_ACT_RELU;
    else if (!strcmp(act, "tanh")) cfg->head_act = B8_ACT_TANH;
    else
        return b8_fail(e, BERT8_ERR_UNSUPPORTED,
                       "%s: classifier_activation \"%s\" is not supported (gelu, gelu_new, relu, tanh)", path, act);
    static const char *const off[] = {"attention_bias", "mlp_bias", "norm_bias", "classifier_bias"};
    for (size_t i = 0; i < sizeof off / sizeof *off; i++) {
        bool on = false;
        if ((st = get_bool(root, off[i], &on, path, e))) return st;
        if (on) return b8_fail(e, BERT8_ERR_UNSUPPORTED, "%s: field \"%s\" = true is not supported", path, off[i]);
    }
    return BERT8_OK;
}

/* Task-specific LoRA adapters (b8_arch_desc.lora) as Jina v3's configuration class reads
 * them: "lora_adaptations" names the task of each adapter slice, "lora_rank" and "lora_alpha"
 * give the scale alpha / rank. The defaults are that class's. */
static bert8_status parse_lora(const cJSON *root, b8_config *cfg, const char *path, b8_err *e) {
    static const char *const tasks[] = {"retrieval.query", "retrieval.passage", "separation", "classification",
                                        "text-matching"};
    cfg->lora_rank = 4;
    cfg->lora_alpha = 1.0f;
    bert8_status st;
    if ((st = get_int(root, "lora_rank", 1, 1 << 16, &cfg->lora_rank, path, e))) return st;
    const cJSON *av = field(root, "lora_alpha");
    if (av && !cJSON_IsNumber(av)) return wrong_type(path, "lora_alpha", "a number", av, e);
    if (av && !(isfinite(av->valuedouble) && fabs(av->valuedouble) <= 1e30))
        return b8_fail(e, BERT8_ERR_FORMAT, "%s: field \"lora_alpha\" = %.15g is not a finite float", path,
                       av->valuedouble);
    if (av) cfg->lora_alpha = (float)av->valuedouble;
    const cJSON *a = field(root, "lora_adaptations");
    if (!a) {
        for (size_t i = 0; i < sizeof tasks / sizeof *tasks; i++)
            snprintf(cfg->lora_tasks[i], B8_LORA_NAME_MAX, "%s", tasks[i]);
        cfg->lora_count = (int64_t)(sizeof tasks / sizeof *tasks);
        return BERT8_OK;
    }
    if (!cJSON_IsArray(a)) return wrong_type(path, "lora_adaptations", "an array of strings", a, e);
    int64_t n = 0;
    for (const cJSON *it = a->child; it; it = it->next, n++) {
        if (n == B8_LORA_MAX_TASKS)
            return b8_fail(e, BERT8_ERR_TOO_LARGE, "%s: field \"lora_adaptations\" lists more than %d tasks", path,
                           B8_LORA_MAX_TASKS);
        if (!cJSON_IsString(it))
            return b8_fail(e, BERT8_ERR_FORMAT, "%s: field \"lora_adaptations\"[%lld] must be a string, not %s", path,
                           (long long)n, b8_json_type_name(it));
        const size_t len = strlen(it->valuestring);
        if (len == 0 || len >= B8_LORA_NAME_MAX)
            return b8_fail(e, BERT8_ERR_FORMAT,
                           "%s: field \"lora_adaptations\"[%lld] (\"%.40s\") must have 1 to %d bytes", path,
                           (long long)n, it->valuestring, B8_LORA_NAME_MAX - 1);
        for (int64_t j = 0; j < n; j++)
            if (!strcmp(cfg->lora_tasks[j], it->valuestring))
                return b8_fail(e, BERT8_ERR_FORMAT, "%s: field \"lora_adaptations\" names \"%s\" twice", path,
                               it->valuestring);
        memcpy(cfg->lora_tasks[n], it->valuestring, len + 1);
    }
    cfg->lora_count = n;
    return BERT8_OK;
}

/* A head activation by its transformers name (the heads' epilogue has these four). */
static bool head_act_of(const char *name, b8_act *out) {
    if (!strcmp(name, "gelu")) *out = B8_ACT_GELU;
    else if (!strcmp(name, "gelu_new") || !strcmp(name, "gelu_pytorch_tanh")) *out = B8_ACT_GELU_TANH;
    else if (!strcmp(name, "relu")) *out = B8_ACT_RELU;
    else if (!strcmp(name, "tanh")) *out = B8_ACT_TANH;
    else return false;
    return true;
}

/* Whether a "|"-separated list (DebertaV2Config lowers and strips each item) names item. */
static bool bar_list_has(const char *list, const char *item) {
    const size_t n = strlen(item);
    for (const char *p = list; *p;) {
        while (*p == ' ' || *p == '\t') p++;
        const char *end = strchr(p, '|');
        const char *stop = end ? end : p + strlen(p);
        const char *last = stop;
        while (last > p && (last[-1] == ' ' || last[-1] == '\t')) last--;
        if ((size_t)(last - p) == n && !strncasecmp(p, item, n)) return true;
        if (!end) break;
        p = end + 1;
    }
    return false;
}

/* desc->disentangled (DebertaV2Config): which relative terms exist and how offsets map to the
 * relative embeddings, the position table, the ContextPooler; fields that change the maths in
 * ways bert8 does not run (a convolution after the first layer, a projected embedding size, a
 * head size of its own) are refused by name. */
static bert8_status parse_disentangled(const cJSON *root, b8_config *cfg, const char *path, b8_err *e) {
    bert8_status st;
    bool rel = false, biased = true;
    if ((st = get_bool(root, "relative_attention", &rel, path, e)) ||
        (st = get_bool(root, "share_att_key", &cfg->share_att_key, path, e)) ||
        (st = get_bool(root, "position_biased_input", &biased, path, e)))
        return st;
    cfg->no_pos_table = !biased;
    bool c2p = false, p2c = false;
    const cJSON *pt = field(root, "pos_att_type");
    if (pt && cJSON_IsString(pt)) {
        c2p = bar_list_has(pt->valuestring, "c2p");
        p2c = bar_list_has(pt->valuestring, "p2c");
    } else if (pt && cJSON_IsArray(pt)) {
        int i = 0;
        for (const cJSON *it = pt->child; it; it = it->next, i++) {
            if (!cJSON_IsString(it))
                return b8_fail(e, BERT8_ERR_FORMAT, "%s: field \"pos_att_type\"[%d] must be a string, not %s", path, i,
                               b8_json_type_name(it));
            c2p = c2p || !strcmp(it->valuestring, "c2p");
            p2c = p2c || !strcmp(it->valuestring, "p2c");
        }
    } else if (pt) {
        return wrong_type(path, "pos_att_type", "a list of strings or a string", pt, e);
    }
    /* the scale counts the named terms even without relative attention, as transformers does */
    cfg->scale_factor = 1 + c2p + p2c;
    cfg->c2p = rel && c2p;
    cfg->p2c = rel && p2c;
    cfg->pos_buckets = -1;
    cfg->max_rel_pos = -1;
    if ((st = get_int(root, "position_buckets", -big_int, 1 << 16, &cfg->pos_buckets, path, e)) ||
        (st = get_int(root, "max_relative_positions", -big_int, 1 << 22, &cfg->max_rel_pos, path, e)))
        return st;
    if (cfg->max_rel_pos < 1) cfg->max_rel_pos = cfg->max_position_embeddings;
    cfg->att_span = cfg->pos_buckets > 0 ? cfg->pos_buckets : cfg->max_rel_pos;
    if (cfg->pos_buckets == 1)
        return b8_fail(e, BERT8_ERR_FORMAT, "%s: field \"position_buckets\" = 1 leaves no bucket on either side", path);
    if (cfg->pos_buckets > 1 && cfg->max_rel_pos - 1 <= cfg->pos_buckets / 2)
        return b8_fail(e, BERT8_ERR_FORMAT,
                       "%s: max_relative_positions %lld must exceed position_buckets / 2 + 1 = %lld (the log buckets "
                       "divide by log((max_relative_positions - 1) / (position_buckets / 2)))",
                       path, (long long)cfg->max_rel_pos, (long long)(cfg->pos_buckets / 2 + 1));
    char norm[64] = "none";
    if ((st = get_str(root, "norm_rel_ebd", norm, sizeof norm, path, e))) return st;
    cfg->rel_norm = bar_list_has(norm, "layer_norm");
    int64_t ph = cfg->hidden_size, conv = 0, emb = cfg->hidden_size, hs = cfg->hidden_size / cfg->num_heads;
    if ((st = get_int(root, "pooler_hidden_size", 1, 1 << 20, &ph, path, e)) ||
        (st = get_int(root, "conv_kernel_size", -big_int, 1 << 16, &conv, path, e)) ||
        (st = get_int(root, "embedding_size", 1, 1 << 20, &emb, path, e)) ||
        (st = get_int(root, "attention_head_size", 1, 1 << 20, &hs, path, e)))
        return st;
    if (ph != cfg->hidden_size)
        return b8_fail(e, BERT8_ERR_UNSUPPORTED, "%s: field \"pooler_hidden_size\" = %lld is not hidden_size %lld",
                       path, (long long)ph, (long long)cfg->hidden_size);
    if (conv > 0)
        return b8_fail(e, BERT8_ERR_UNSUPPORTED,
                       "%s: field \"conv_kernel_size\" = %lld: the convolution after the first layer is not supported",
                       path, (long long)conv);
    if (emb != cfg->hidden_size)
        return b8_fail(e, BERT8_ERR_UNSUPPORTED,
                       "%s: field \"embedding_size\" = %lld is not hidden_size %lld (embed_proj is not supported)",
                       path, (long long)emb, (long long)cfg->hidden_size);
    if (hs != cfg->hidden_size / cfg->num_heads)
        return b8_fail(e, BERT8_ERR_UNSUPPORTED,
                       "%s: field \"attention_head_size\" = %lld is not hidden_size / num_attention_heads = %lld", path,
                       (long long)hs, (long long)(cfg->hidden_size / cfg->num_heads));
    char act[24] = "gelu";
    if ((st = get_str(root, "pooler_hidden_act", act, sizeof act, path, e))) return st;
    if (!head_act_of(act, &cfg->pooler_act))
        return b8_fail(e, BERT8_ERR_UNSUPPORTED,
                       "%s: pooler_hidden_act \"%s\" is not supported (gelu, gelu_new, relu, tanh)", path, act);
    return BERT8_OK;
}

bert8_status b8_config_parse(const char *text, const char *path, b8_config *cfg, b8_err *e) {
    memset(cfg, 0, sizeof *cfg);
    cJSON *root = cJSON_Parse(text);
    if (!root) return b8_fail(e, BERT8_ERR_FORMAT, "%s: not valid JSON", path);
    bert8_status st = b8_json_refuse_nul(text, strlen(text), path, e); /* model_type, labels, names */
    if (st) goto done;
    if (!cJSON_IsObject(root)) {
        st = b8_fail(e, BERT8_ERR_FORMAT, "%s: top level is not a JSON object", path);
        goto done;
    }
    if ((st = get_str(root, "model_type", cfg->model_type, sizeof cfg->model_type, path, e))) goto done;
    if (!cfg->model_type[0]) {
        st = b8_fail(e, BERT8_ERR_MISSING, "%s: no \"model_type\" field", path);
        goto done;
    }
    if ((st = check_optional(root, path, e))) goto done;
    const cJSON *archs = field(root, "architectures");
    if (archs && archs->child) {
        const char *a0 = archs->child->valuestring;
        if (strlen(a0) >= sizeof cfg->architecture) {
            st = b8_fail(e, BERT8_ERR_FORMAT,
                         "%s: field \"architectures\"[0] (\"%.40s...\") is longer than %zu bytes",
                         path, a0, sizeof cfg->architecture - 1);
            goto done;
        }
        strcpy(cfg->architecture, a0);
    }
    const int64_t big = (int64_t)1 << 31;
    const b8_arch_desc *d = b8_arch_by_model_type(cfg->model_type);
    /* jina-embeddings-v3 as published (its custom code, XLMRobertaLoRA): model_type "xlm-roberta"
     * with rotary positions, which no XLM-R has; its tensors are the Jina v3 row's */
    const cJSON *pet0 = field(root, "position_embedding_type");
    if (d && !strcmp(cfg->model_type, "xlm-roberta") && cJSON_IsString(pet0) && !strcmp(pet0->valuestring, "rotary"))
        d = b8_arch_by_model_type("jina_embeddings_v3");
    if (!d) {
        char list[256];
        b8_arch_model_types(list, sizeof list);
        st = b8_fail(e, BERT8_ERR_UNSUPPORTED, "%s: model_type \"%s\" is not supported (%s)", path, cfg->model_type,
                     list);
        goto done;
    }
    strcpy(cfg->act_name, d->default_act ? d->default_act : "gelu");
    cfg->desc = d;
    cfg->arch = d->arch;
    cfg->vocab_size = d->vocab;
    cfg->hidden_size = d->hidden;
    cfg->num_layers = d->layers;
    cfg->num_heads = d->heads;
    cfg->intermediate_size = d->inter;
    cfg->max_position_embeddings = d->max_pos;
    cfg->type_vocab_size = d->type_vocab;
    cfg->pad_token_id = d->pad;
    cfg->rel_buckets = d->rel_bias ? d->rel_buckets : 0;
    if ((st = get_int(root, "vocab_size", 1, big, &cfg->vocab_size, path, e)) ||
        (st = get_int(root, d->key_hidden, 1, 1 << 20, &cfg->hidden_size, path, e)) ||
        (st = get_int(root, d->key_layers, 0, 4096, &cfg->num_layers, path, e)) ||
        (st = get_int(root, d->key_heads, 1, 4096, &cfg->num_heads, path, e)) ||
        (st = get_int(root, d->key_inter, 1, 1 << 22, &cfg->intermediate_size, path, e)) ||
        (st = get_int(root, "max_position_embeddings", 1, 1 << 22, &cfg->max_position_embeddings, path, e)) ||
        (st = get_int(root, "pad_token_id", -1, big, &cfg->pad_token_id, path, e)) ||
        (st = get_str(root, d->key_act, cfg->act_name, sizeof cfg->act_name, path, e)))
        goto done;
    if (d->token_types && (st = get_int(root, "type_vocab_size", 0, 1 << 20, &cfg->type_vocab_size, path, e))) goto done;
    if (d->rel_bias && (st = get_int(root, d->rel_buckets_key, 2, 4096, &cfg->rel_buckets, path, e))) goto done;
    double eps = d->eps;
    const char *eps_key = d->key_eps ? d->key_eps : "layer_norm_eps";
    const cJSON *ev = d->eps_fixed ? NULL : field(root, eps_key);
    if (ev && !cJSON_IsNumber(ev)) {
        st = wrong_type(path, eps_key, "a number", ev, e);
        goto done;
    }
    if (ev) eps = ev->valuedouble;
    /* LayerNorm adds eps in float: it must be a normal float (a subnormal or zero one would
     * vanish or divide by zero on a constant row) and below 1. */
    if (!(eps >= (double)FLT_MIN && eps < 1)) {
        st = b8_fail(e, BERT8_ERR_FORMAT,
                     "%s: field \"%s\" = %.15g is out of range: it must be a "
                     "normal positive float below 1 (at least %g)",
                     path, eps_key, eps, (double)FLT_MIN);
        goto done;
    }
    cfg->layer_norm_eps = (float)eps;
    if (d->abs_pos_type) {
        const cJSON *pet = field(root, "position_embedding_type");
        if (pet && !cJSON_IsString(pet)) {
            st = wrong_type(path, "position_embedding_type", "a string", pet, e);
            goto done;
        }
        if (pet && strcmp(pet->valuestring, "absolute") != 0) {
            st = b8_fail(e, BERT8_ERR_UNSUPPORTED,
                         "%s: position_embedding_type \"%s\" is not supported (only \"absolute\")", path,
                         pet->valuestring);
            goto done;
        }
    }
    if (d->pos == B8_POS_FROM_PAD && (cfg->pad_token_id < 0 || cfg->pad_token_id + 1 >= cfg->max_position_embeddings)) {
        st = b8_fail(e, BERT8_ERR_FORMAT,
                     "%s: pad_token_id %lld leaves no positions: %s positions start after it and "
                     "max_position_embeddings is %lld",
                     path, (long long)cfg->pad_token_id, d->name, (long long)cfg->max_position_embeddings);
        goto done;
    }
    /* DistilBERT's sinusoidal tables are stored in the checkpoint, so loading works unchanged;
     * the flag is only type-checked */
    bool sin = false;
    if ((st = get_bool(root, "sinusoidal_pos_embds", &sin, path, e))) goto done;
    if (!strcmp(cfg->act_name, "gelu")) cfg->act = B8_ACT_GELU;
    else if (!strcmp(cfg->act_name, "gelu_new") || !strcmp(cfg->act_name, "gelu_pytorch_tanh"))
        cfg->act = B8_ACT_GELU_TANH;
    else if (!strcmp(cfg->act_name, "relu")) cfg->act = B8_ACT_RELU;
    else if (d->ffn == B8_FFN_GLU && (!strcmp(cfg->act_name, "silu") || !strcmp(cfg->act_name, "swish")))
        cfg->act = B8_ACT_SILU;
    else {
        st = b8_fail(e, BERT8_ERR_UNSUPPORTED, "%s: activation \"%s\" is not supported (gelu, gelu_new, relu%s)",
                     path, cfg->act_name, d->ffn == B8_FFN_GLU ? ", silu" : "");
        goto done;
    }
    if (cfg->hidden_size % cfg->num_heads != 0) {
        st = b8_fail(e, BERT8_ERR_SHAPE, "%s: hidden size %lld is not a multiple of the %lld heads", path,
                     (long long)cfg->hidden_size, (long long)cfg->num_heads);
        goto done;
    }
    if (d->pos == B8_POS_ROTARY && !d->sliding && (st = parse_rotary(root, d, cfg, path, e))) goto done;
    if (d->sliding && (st = parse_sliding(root, d, cfg, path, e))) goto done;
    if (d->disentangled && (st = parse_disentangled(root, cfg, path, e))) goto done;
    if ((st = parse_labels(root, cfg, path, e))) goto done;
    if (d->lora && (st = parse_lora(root, cfg, path, e))) goto done;
    const cJSON *pt = field(root, "problem_type");
    cfg->regression = (pt && cJSON_IsString(pt) && !strcmp(pt->valuestring, "regression")) ||
                      cfg->num_labels == 1;
done:
    cJSON_Delete(root);
    if (st) b8_config_free(cfg);
    return st;
}

bert8_status b8_config_load(const char *dir, b8_config *cfg, b8_err *e) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s/config.json", dir) >= (int)sizeof path)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "model folder path is too long");
    size_t n;
    char *text = b8_read_file_max(path, CONFIG_MAX_BYTES, &n, e);
    if (!text) return e ? e->status : BERT8_ERR_IO;
    bert8_status st = b8_config_parse(text, path, cfg, e);
    free(text);
    return st;
}

void b8_config_free(b8_config *cfg) {
    if (!cfg) return;
    if (cfg->labels) {
        for (int64_t i = 0; i < cfg->num_labels; i++) free(cfg->labels[i]);
        free(cfg->labels);
    }
    cfg->labels = NULL;
    free(cfg->layer_sliding);
    cfg->layer_sliding = NULL;
}
