/* qformat.c: quantization_config.json read and write (see qformat.h). */
#include "io/qformat.h"

#include "base/json_nul.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *b8_qmode_name(b8_qmode m) {
    switch (m) {
    case B8_QMODE_FP32: return "fp32";
    case B8_QMODE_STATIC: return "int8_static";
    case B8_QMODE_DYNAMIC: return "int8_dynamic";
    }
    return "?";
}

static bool qmode_parse(const char *s, b8_qmode *out) {
    for (int m = B8_QMODE_FP32; m <= B8_QMODE_DYNAMIC; m++)
        if (!strcmp(s, b8_qmode_name((b8_qmode)m))) {
            *out = (b8_qmode)m;
            return true;
        }
    return false;
}

void b8_qconfig_free(b8_qconfig *cfg) {
    if (!cfg) return;
    free(cfg->groups);
    free(cfg->attn_int8);
    memset(cfg, 0, sizeof *cfg);
}

/* An alpha value: a number in [0, 1], or null (smoothing off). */
static bool parse_alpha(const cJSON *v, float *out) {
    if (!v || cJSON_IsNull(v)) {
        *out = -1.0f;
        return true;
    }
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0.0 && v->valuedouble <= 1.0)) return false;
    *out = (float)v->valuedouble;
    return true;
}

/* "layers" (version 2) or "alpha_per_layer" (version 1) into cfg->groups. */
static bert8_status parse_layers(const cJSON *root, const char *path, b8_qconfig *cfg, b8_err *e) {
    const bool v2 = cfg->version >= 2;
    const char *key = v2 ? "layers" : "alpha_per_layer";
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!arr || cJSON_IsNull(arr)) {
        if (v2) return b8_fail(e, BERT8_ERR_FORMAT, "%s: field \"layers\" is missing", path);
        return BERT8_OK; /* version 1 files may leave it out */
    }
    if (!cJSON_IsArray(arr))
        return b8_fail(e, BERT8_ERR_FORMAT, "%s: field \"%s\" must be an array", path, key);
    int n = cJSON_GetArraySize(arr);
    if (n > 100000) return b8_fail(e, BERT8_ERR_TOO_LARGE, "%s: \"%s\" has %d entries", path, key, n);
    cfg->layers = n;
    cfg->groups = calloc((size_t)(n ? n : 1) * B8_GROUP_COUNT, sizeof *cfg->groups);
    cfg->attn_int8 = calloc((size_t)(n ? n : 1), 1);
    if (!cfg->groups || !cfg->attn_int8) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
    const b8_qmode dflt = cfg->scheme == BERT8_SCHEME_STATIC ? B8_QMODE_STATIC : B8_QMODE_DYNAMIC;
    int l = 0;
    const cJSON *row;
    cJSON_ArrayForEach(row, arr) {
        if (!cJSON_IsObject(row))
            return b8_fail(e, BERT8_ERR_FORMAT, "%s: %s[%d] must be an object", path, key, l);
        const cJSON *att = cJSON_GetObjectItemCaseSensitive(row, "attention");
        if (att && !cJSON_IsNull(att) &&
            (!cJSON_IsString(att) || (strcmp(att->valuestring, "int8") && strcmp(att->valuestring, "fp32"))))
            return b8_fail(e, BERT8_ERR_FORMAT, "%s: %s[%d].attention must be \"int8\" or \"fp32\"", path, key, l);
        cfg->attn_int8[l] = cJSON_IsString(att) ? !strcmp(att->valuestring, "int8") : cfg->int8_attention;
        for (int g = 0; g < B8_GROUP_COUNT; g++) {
            b8_qgroup *q = &cfg->groups[(size_t)l * B8_GROUP_COUNT + (size_t)g];
            const char *gk = b8_group_table[g].key;
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(row, gk);
            if (v2) {
                const cJSON *mode = v ? cJSON_GetObjectItemCaseSensitive(v, "mode") : NULL;
                if (!cJSON_IsObject(v) || !cJSON_IsString(mode) || !qmode_parse(mode->valuestring, &q->mode))
                    return b8_fail(e, BERT8_ERR_FORMAT,
                                   "%s: layers[%d].%s must be {\"mode\": \"int8_static\" | \"int8_dynamic\" | "
                                   "\"fp32\", \"alpha\": number or null}",
                                   path, l, gk);
                if (!parse_alpha(cJSON_GetObjectItemCaseSensitive(v, "alpha"), &q->alpha))
                    return b8_fail(e, BERT8_ERR_FORMAT, "%s: layers[%d].%s.alpha must be a number in [0, 1] or null",
                                   path, l, gk);
            } else if (cJSON_IsString(v) && !strcmp(v->valuestring, "fp32")) {
                q->mode = B8_QMODE_FP32;
                q->alpha = -1.0f;
            } else {
                q->mode = dflt;
                if (!parse_alpha(v, &q->alpha))
                    return b8_fail(e, BERT8_ERR_FORMAT,
                                   "%s: alpha_per_layer[%d].%s must be a number in [0, 1], null or \"fp32\"", path,
                                   l, gk);
            }
        }
        l++;
    }
    return BERT8_OK;
}

bert8_status b8_qconfig_parse(const char *text, const char *path, b8_qconfig *cfg, b8_err *e) {
    memset(cfg, 0, sizeof *cfg);
    cJSON *root = cJSON_Parse(text);
    bert8_status st = BERT8_OK;
    if (!root || !cJSON_IsObject(root)) {
        st = b8_fail(e, BERT8_ERR_FORMAT, "%s: not a JSON object", path);
        goto done;
    }
    if ((st = b8_json_refuse_nul(text, strlen(text), path, e))) goto done; /* scheme, lora_task, patterns */
    const cJSON *method = cJSON_GetObjectItemCaseSensitive(root, "quant_method");
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "version");
    const cJSON *scheme = cJSON_GetObjectItemCaseSensitive(root, "scheme");
    const cJSON *samples = cJSON_GetObjectItemCaseSensitive(root, "calibration_samples");
    const cJSON *keep = cJSON_GetObjectItemCaseSensitive(root, "keep_fp32");
    const cJSON *att = cJSON_GetObjectItemCaseSensitive(root, "attention");
    const cJSON *emb = cJSON_GetObjectItemCaseSensitive(root, "embeddings");
    const cJSON *wbits = cJSON_GetObjectItemCaseSensitive(root, "weight_bits");
    const cJSON *lora = cJSON_GetObjectItemCaseSensitive(root, "lora_task");
    if (lora && !cJSON_IsNull(lora) && (!cJSON_IsString(lora) || strlen(lora->valuestring) >= sizeof cfg->lora_task)) {
        st = b8_fail(e, BERT8_ERR_FORMAT, "%s: lora_task must be a string of at most %zu bytes", path,
                     sizeof cfg->lora_task - 1);
    } else if (emb && !cJSON_IsNull(emb) &&
        (!cJSON_IsString(emb) || (strcmp(emb->valuestring, "fp32") && strcmp(emb->valuestring, "int8")))) {
        st = b8_fail(e, BERT8_ERR_FORMAT, "%s: embeddings must be \"fp32\" or \"int8\"", path);
    } else if (!cJSON_IsString(method) || strcmp(method->valuestring, B8_QFORMAT_METHOD)) {
        st = b8_fail(e, BERT8_ERR_UNSUPPORTED, "%s: quant_method must be \"%s\"", path, B8_QFORMAT_METHOD);
    } else if (!ver || cJSON_IsNull(ver)) {
        st = b8_fail(e, BERT8_ERR_FORMAT, "%s: field \"version\" is missing", path);
    } else if (!cJSON_IsNumber(ver) || ver->valuedouble != floor(ver->valuedouble) || ver->valuedouble < 1) {
        st = b8_fail(e, BERT8_ERR_FORMAT, "%s: field \"version\" must be a positive integer", path);
    } else if (ver->valuedouble > B8_QFORMAT_VERSION) {
        st = b8_fail(e, BERT8_ERR_UNSUPPORTED, "%s: version %g is newer than this bert8 reads (at most %d)", path,
                     ver->valuedouble, B8_QFORMAT_VERSION);
    } else if (!cJSON_IsString(scheme) ||
               (strcmp(scheme->valuestring, "static") && strcmp(scheme->valuestring, "dynamic"))) {
        st = b8_fail(e, BERT8_ERR_FORMAT, "%s: scheme must be \"static\" or \"dynamic\"", path);
    } else if (samples && !cJSON_IsNull(samples) &&
               (!cJSON_IsNumber(samples) || !(samples->valuedouble >= 0 && samples->valuedouble < 9e15))) {
        st = b8_fail(e, BERT8_ERR_FORMAT, "%s: calibration_samples must be a non-negative number", path);
    } else if (keep && !cJSON_IsNull(keep) && (!cJSON_IsString(keep) || strlen(keep->valuestring) >= sizeof cfg->keep_fp32)) {
        st = b8_fail(e, BERT8_ERR_FORMAT, "%s: keep_fp32 must be a string of at most %zu bytes", path,
                     sizeof cfg->keep_fp32 - 1);
    } else if (att && !cJSON_IsNull(att) &&
               (!cJSON_IsString(att) || (strcmp(att->valuestring, "fp32") && strcmp(att->valuestring, "int8")))) {
        st = b8_fail(e, BERT8_ERR_FORMAT, "%s: attention must be \"fp32\" or \"int8\"", path);
    } else if (wbits && !cJSON_IsNull(wbits) &&
               (!cJSON_IsNumber(wbits) || (wbits->valuedouble != 7 && wbits->valuedouble != 8))) {
        st = b8_fail(e, BERT8_ERR_FORMAT, "%s: weight_bits must be 7 or 8", path);
    } else {
        cfg->version = (int)ver->valuedouble;
        cfg->weight_bits = cJSON_IsNumber(wbits) ? (int)wbits->valuedouble : 8;
        cfg->scheme = strcmp(scheme->valuestring, "static") ? BERT8_SCHEME_DYNAMIC : BERT8_SCHEME_STATIC;
        cfg->calib_samples = cJSON_IsNumber(samples) ? (int64_t)samples->valuedouble : 0;
        if (cJSON_IsString(keep)) snprintf(cfg->keep_fp32, sizeof cfg->keep_fp32, "%s", keep->valuestring);
        if (cJSON_IsString(lora)) snprintf(cfg->lora_task, sizeof cfg->lora_task, "%s", lora->valuestring);
        cfg->int8_attention = cJSON_IsString(att) && !strcmp(att->valuestring, "int8");
        cfg->int8_embeddings = cJSON_IsString(emb) && !strcmp(emb->valuestring, "int8");
        st = parse_layers(root, path, cfg, e);
    }
done:
    cJSON_Delete(root);
    if (st) b8_qconfig_free(cfg);
    return st;
}

bert8_status b8_qconfig_read(const char *dir, bool *present, b8_qconfig *cfg, b8_err *e) {
    memset(cfg, 0, sizeof *cfg);
    *present = false;
    char path[4096];
    if (snprintf(path, sizeof path, "%s/quantization_config.json", dir) >= (int)sizeof path)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "folder path is too long: %s", dir);
    struct stat sb;
    if (stat(path, &sb) != 0) {
        if (errno == ENOENT) return BERT8_OK;
        return b8_fail(e, BERT8_ERR_IO, "cannot read %s: %s", path, strerror(errno));
    }
    *present = true;
    if (!S_ISREG(sb.st_mode)) return b8_fail(e, BERT8_ERR_IO, "%s is not a regular file", path);
    if (sb.st_size > (1 << 24)) return b8_fail(e, BERT8_ERR_TOO_LARGE, "%s is over 16 MiB", path);
    size_t n;
    char *text = b8_read_file(path, &n, e);
    if (!text) return e ? e->status : BERT8_ERR_IO;
    bert8_status st = b8_qconfig_parse(text, path, cfg, e);
    free(text);
    return st;
}

bert8_status b8_qconfig_write(const char *path, const b8_qconfig *cfg, b8_err *e) {
    const bool stat_ = cfg->scheme == BERT8_SCHEME_STATIC;
    cJSON *qc = cJSON_CreateObject();
    if (!qc) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
    cJSON_AddStringToObject(qc, "quant_method", B8_QFORMAT_METHOD);
    cJSON_AddNumberToObject(qc, "version", B8_QFORMAT_VERSION);
    cJSON_AddStringToObject(qc, "scheme", stat_ ? "static" : "dynamic");
    cJSON_AddStringToObject(qc, "weights",
                            cfg->weight_bits == 7
                                ? "int8 within [-64, 64] (7 bits), symmetric, per output channel (weight_scale)"
                                : "int8, symmetric, per output channel (weight_scale)");
    cJSON_AddNumberToObject(qc, "weight_bits", cfg->weight_bits == 7 ? 7 : 8);
    cJSON_AddStringToObject(qc, "activations",
                            stat_ ? "int8, per tensor (input_scale, calibrated), symmetric, or with a zero point "
                                    "(input_zero_point) where the input is one-sided (FFN-out)"
                                  : "int8, symmetric, per token (computed at run time)");
    cJSON_AddNumberToObject(qc, "calibration_samples", (double)cfg->calib_samples);
    cJSON_AddStringToObject(qc, "keep_fp32", cfg->keep_fp32);
    cJSON_AddStringToObject(qc, "attention", cfg->int8_attention ? "int8" : "fp32");
    cJSON_AddStringToObject(qc, "embeddings", cfg->int8_embeddings ? "int8" : "fp32");
    if (cfg->lora_task[0]) cJSON_AddStringToObject(qc, "lora_task", cfg->lora_task);
    cJSON *layers = cJSON_AddArrayToObject(qc, "layers");
    for (int64_t l = 0; layers && l < cfg->layers; l++) {
        cJSON *o = cJSON_CreateObject();
        for (int g = 0; o && g < B8_GROUP_COUNT; g++) {
            const b8_qgroup *q = &cfg->groups[l * B8_GROUP_COUNT + g];
            cJSON *v = cJSON_AddObjectToObject(o, b8_group_table[g].key);
            if (!v) continue;
            cJSON_AddStringToObject(v, "mode", b8_qmode_name(q->mode));
            if (q->alpha < 0) cJSON_AddNullToObject(v, "alpha");
            else cJSON_AddNumberToObject(v, "alpha", (double)q->alpha);
        }
        if (o) cJSON_AddStringToObject(o, "attention", cfg->attn_int8 && cfg->attn_int8[l] ? "int8" : "fp32");
        cJSON_AddItemToArray(layers, o);
    }
    char *text = cJSON_Print(qc);
    cJSON_Delete(qc);
    if (!text) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
    FILE *f = fopen(path, "w");
    bool ok = f && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
    int err = errno;
    if (f && fclose(f) != 0) ok = false, err = errno;
    free(text);
    if (!ok) return b8_fail(e, BERT8_ERR_IO, "cannot write %s: %s", path, strerror(err));
    return BERT8_OK;
}
