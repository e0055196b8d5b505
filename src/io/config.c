/* config.c: config.json -> b8_config, following transformers v4.31's class defaults. */
#include "io/config.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

/* Reads an integer field; absent keeps *out (the default). Wrong type or range is an error. */
static bert8_status get_int(const cJSON *root, const char *key, int64_t lo, int64_t hi,
                            int64_t *out, const char *path, b8_err *e) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v)) return BERT8_OK;
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble))
        return b8_fail(e, BERT8_ERR_FORMAT, "%s: field \"%s\" must be an integer", path, key);
    if (v->valuedouble < (double)lo || v->valuedouble > (double)hi)
        return b8_fail(e, BERT8_ERR_FORMAT, "%s: field \"%s\" = %.0f is out of range [%lld, %lld]",
                       path, key, v->valuedouble, (long long)lo, (long long)hi);
    *out = (int64_t)v->valuedouble;
    return BERT8_OK;
}

static bert8_status get_str(const cJSON *root, const char *key, char *out, size_t cap,
                            const char *path, b8_err *e) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v)) return BERT8_OK;
    if (!cJSON_IsString(v))
        return b8_fail(e, BERT8_ERR_FORMAT, "%s: field \"%s\" must be a string", path, key);
    if (strlen(v->valuestring) >= cap)
        return b8_fail(e, BERT8_ERR_FORMAT, "%s: field \"%s\" is too long", path, key);
    strcpy(out, v->valuestring);
    return BERT8_OK;
}

static bert8_status parse_labels(const cJSON *root, b8_config *cfg, const char *path, b8_err *e) {
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(root, "id2label");
    int64_t n = 2; /* transformers' PretrainedConfig default */
    if (map && cJSON_IsObject(map)) n = cJSON_GetArraySize(map);
    const cJSON *nl = cJSON_GetObjectItemCaseSensitive(root, "num_labels");
    if (nl && cJSON_IsNumber(nl) && !(map && cJSON_IsObject(map))) n = (int64_t)nl->valuedouble;
    if (n < 1 || n > 100000)
        return b8_fail(e, BERT8_ERR_FORMAT, "%s: %lld labels is out of range", path, (long long)n);
    cfg->num_labels = n;
    cfg->labels = calloc((size_t)n, sizeof(char *));
    if (!cfg->labels) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
    if (map && cJSON_IsObject(map)) {
        const cJSON *it;
        cJSON_ArrayForEach(it, map) {
            char *end = NULL;
            long id = strtol(it->string, &end, 10);
            if (!end || *end || id < 0 || id >= n || !cJSON_IsString(it))
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

bert8_status b8_config_parse(const char *text, const char *path, b8_config *cfg, b8_err *e) {
    memset(cfg, 0, sizeof *cfg);
    cJSON *root = cJSON_Parse(text);
    if (!root) return b8_fail(e, BERT8_ERR_FORMAT, "%s: not valid JSON", path);
    bert8_status st = BERT8_OK;
    if (!cJSON_IsObject(root)) {
        st = b8_fail(e, BERT8_ERR_FORMAT, "%s: top level is not a JSON object", path);
        goto done;
    }
    if ((st = get_str(root, "model_type", cfg->model_type, sizeof cfg->model_type, path, e))) goto done;
    if (!cfg->model_type[0]) {
        st = b8_fail(e, BERT8_ERR_MISSING, "%s: no \"model_type\" field", path);
        goto done;
    }
    const cJSON *archs = cJSON_GetObjectItemCaseSensitive(root, "architectures");
    if (cJSON_IsArray(archs) && cJSON_GetArraySize(archs) > 0) {
        const cJSON *a0 = cJSON_GetArrayItem(archs, 0);
        if (cJSON_IsString(a0) && strlen(a0->valuestring) < sizeof cfg->architecture)
            strcpy(cfg->architecture, a0->valuestring);
    }
    const int64_t big = (int64_t)1 << 31;
    strcpy(cfg->act_name, "gelu");
    if (!strcmp(cfg->model_type, "bert") || !strcmp(cfg->model_type, "xlm-roberta") ||
        !strcmp(cfg->model_type, "roberta")) {
        bool xlmr = strcmp(cfg->model_type, "bert") != 0;
        cfg->arch = xlmr ? BERT8_ARCH_XLMR : BERT8_ARCH_BERT;
        /* BertConfig / XLMRobertaConfig defaults */
        cfg->vocab_size = xlmr ? 30522 : 30522;
        cfg->hidden_size = 768;
        cfg->num_layers = 12;
        cfg->num_heads = 12;
        cfg->intermediate_size = 3072;
        cfg->max_position_embeddings = 512;
        cfg->type_vocab_size = 2;
        cfg->pad_token_id = xlmr ? 1 : 0;
        double eps = 1e-12;
        if ((st = get_int(root, "vocab_size", 1, big, &cfg->vocab_size, path, e)) ||
            (st = get_int(root, "hidden_size", 1, 1 << 20, &cfg->hidden_size, path, e)) ||
            (st = get_int(root, "num_hidden_layers", 0, 4096, &cfg->num_layers, path, e)) ||
            (st = get_int(root, "num_attention_heads", 1, 4096, &cfg->num_heads, path, e)) ||
            (st = get_int(root, "intermediate_size", 1, 1 << 22, &cfg->intermediate_size, path, e)) ||
            (st = get_int(root, "max_position_embeddings", 1, 1 << 22, &cfg->max_position_embeddings, path, e)) ||
            (st = get_int(root, "type_vocab_size", 0, 1 << 20, &cfg->type_vocab_size, path, e)) ||
            (st = get_int(root, "pad_token_id", -1, big, &cfg->pad_token_id, path, e)) ||
            (st = get_str(root, "hidden_act", cfg->act_name, sizeof cfg->act_name, path, e)))
            goto done;
        const cJSON *ev = cJSON_GetObjectItemCaseSensitive(root, "layer_norm_eps");
        if (ev && cJSON_IsNumber(ev)) eps = ev->valuedouble;
        else if (ev && !cJSON_IsNull(ev)) {
            st = b8_fail(e, BERT8_ERR_FORMAT, "%s: field \"layer_norm_eps\" must be a number", path);
            goto done;
        }
        if (!(eps > 0 && eps < 1)) {
            st = b8_fail(e, BERT8_ERR_FORMAT, "%s: layer_norm_eps %g is out of range", path, eps);
            goto done;
        }
        cfg->layer_norm_eps = (float)eps;
        const cJSON *pet = cJSON_GetObjectItemCaseSensitive(root, "position_embedding_type");
        if (pet && cJSON_IsString(pet) && strcmp(pet->valuestring, "absolute") != 0) {
            st = b8_fail(e, BERT8_ERR_UNSUPPORTED, "%s: position_embedding_type \"%s\" is not supported (only \"absolute\")",
                         path, pet->valuestring);
            goto done;
        }
    } else if (!strcmp(cfg->model_type, "distilbert")) {
        cfg->arch = BERT8_ARCH_DISTILBERT;
        cfg->vocab_size = 30522;
        cfg->hidden_size = 768;
        cfg->num_layers = 6;
        cfg->num_heads = 12;
        cfg->intermediate_size = 3072;
        cfg->max_position_embeddings = 512;
        cfg->type_vocab_size = 0;
        cfg->pad_token_id = 0;
        cfg->layer_norm_eps = 1e-12f; /* DistilBERT hard-codes it */
        if ((st = get_int(root, "vocab_size", 1, big, &cfg->vocab_size, path, e)) ||
            (st = get_int(root, "dim", 1, 1 << 20, &cfg->hidden_size, path, e)) ||
            (st = get_int(root, "n_layers", 0, 4096, &cfg->num_layers, path, e)) ||
            (st = get_int(root, "n_heads", 1, 4096, &cfg->num_heads, path, e)) ||
            (st = get_int(root, "hidden_dim", 1, 1 << 22, &cfg->intermediate_size, path, e)) ||
            (st = get_int(root, "max_position_embeddings", 1, 1 << 22, &cfg->max_position_embeddings, path, e)) ||
            (st = get_int(root, "pad_token_id", -1, big, &cfg->pad_token_id, path, e)) ||
            (st = get_str(root, "activation", cfg->act_name, sizeof cfg->act_name, path, e)))
            goto done;
        const cJSON *sin = cJSON_GetObjectItemCaseSensitive(root, "sinusoidal_pos_embds");
        if (sin && cJSON_IsTrue(sin)) {
            /* the table is still stored in the checkpoint, so loading it works unchanged */
        }
    } else {
        st = b8_fail(e, BERT8_ERR_UNSUPPORTED,
                     "%s: model_type \"%s\" is not supported (bert, distilbert, xlm-roberta, roberta)",
                     path, cfg->model_type);
        goto done;
    }
    if (!strcmp(cfg->act_name, "gelu")) cfg->act = B8_ACT_GELU;
    else if (!strcmp(cfg->act_name, "gelu_new") || !strcmp(cfg->act_name, "gelu_pytorch_tanh"))
        cfg->act = B8_ACT_GELU_TANH;
    else if (!strcmp(cfg->act_name, "relu")) cfg->act = B8_ACT_RELU;
    else {
        st = b8_fail(e, BERT8_ERR_UNSUPPORTED, "%s: activation \"%s\" is not supported (gelu, gelu_new, relu)",
                     path, cfg->act_name);
        goto done;
    }
    if (cfg->hidden_size % cfg->num_heads != 0) {
        st = b8_fail(e, BERT8_ERR_SHAPE, "%s: hidden size %lld is not a multiple of the %lld heads", path,
                     (long long)cfg->hidden_size, (long long)cfg->num_heads);
        goto done;
    }
    if ((st = parse_labels(root, cfg, path, e))) goto done;
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(root, "problem_type");
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
    char *text = b8_read_file(path, &n, e);
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
}
