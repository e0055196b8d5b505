/* st_config.c: sentence-transformers folder settings (see st_config.h). */
#include "io/st_config.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

bert8_status b8_st_config_read(const char *dir, b8_st_pool *pool, bool *normalize, b8_err *e) {
    char path[4096];
    bool absent;
    *pool = B8_ST_POOL_UNSET;
    *normalize = false;
    snprintf(path, sizeof path, "%s/1_Pooling/config.json", dir);
    char *text = read_small(path, &absent, e);
    if (!text && !absent) return e ? e->status : BERT8_ERR_IO;
    if (text) {
        cJSON *root = cJSON_Parse(text);
        free(text);
        if (!root || !cJSON_IsObject(root)) {
            cJSON_Delete(root);
            return b8_fail(e, BERT8_ERR_FORMAT, "%s is not a JSON object", path);
        }
        static const struct {
            const char *key;
            b8_st_pool p;
        } modes[] = {{"pooling_mode_cls_token", B8_ST_POOL_CLS},
                     {"pooling_mode_mean_tokens", B8_ST_POOL_MEAN},
                     {"pooling_mode_max_tokens", B8_ST_POOL_MAX},
                     {"pooling_mode_mean_sqrt_len_tokens", B8_ST_POOL_UNSET},
                     {"pooling_mode_weightedmean_tokens", B8_ST_POOL_UNSET},
                     {"pooling_mode_lasttoken", B8_ST_POOL_UNSET}};
        int on = 0;
        bert8_status st = BERT8_OK;
        for (size_t i = 0; i < sizeof modes / sizeof *modes && !st; i++) {
            if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, modes[i].key))) continue;
            on++;
            if (modes[i].p == B8_ST_POOL_UNSET)
                st = b8_fail(e, BERT8_ERR_UNSUPPORTED, "%s: %s is not supported (choose cls, mean or max pooling)",
                             path, modes[i].key);
            else
                *pool = modes[i].p;
        }
        cJSON_Delete(root);
        if (st) return st;
        if (on > 1)
            return b8_fail(e, BERT8_ERR_UNSUPPORTED,
                           "%s: several pooling modes are on (concatenated); choose one pooling", path);
    }
    snprintf(path, sizeof path, "%s/modules.json", dir);
    text = read_small(path, &absent, e);
    if (!text && !absent) return e ? e->status : BERT8_ERR_IO;
    if (text) {
        cJSON *root = cJSON_Parse(text);
        free(text);
        const cJSON *m;
        if (cJSON_IsArray(root))
            cJSON_ArrayForEach(m, root) {
                const cJSON *type = cJSON_GetObjectItemCaseSensitive(m, "type");
                if (cJSON_IsString(type) && strstr(type->valuestring, "sentence_transformers.models.Normalize"))
                    *normalize = true;
            }
        cJSON_Delete(root);
    }
    return BERT8_OK;
}

bert8_status b8_st_max_seq_length(const char *dir, int64_t *n, b8_err *e) {
    char path[4096];
    bool absent;
    *n = 0;
    snprintf(path, sizeof path, "%s/sentence_bert_config.json", dir);
    char *text = read_small(path, &absent, e);
    if (!text) return absent ? BERT8_OK : (e ? e->status : BERT8_ERR_IO);
    cJSON *root = cJSON_Parse(text);
    free(text);
    bert8_status st = BERT8_OK;
    if (!root || !cJSON_IsObject(root)) {
        st = b8_fail(e, BERT8_ERR_FORMAT, "%s is not a JSON object", path);
    } else {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "max_seq_length");
        if (v && !cJSON_IsNull(v)) {
            const double d = cJSON_IsNumber(v) ? v->valuedouble : -1;
            if (!(d >= 1 && d <= 1048576) || d != (double)(int64_t)d)
                st = b8_fail(e, BERT8_ERR_FORMAT, "%s: max_seq_length must be a positive integer", path);
            else
                *n = (int64_t)d;
        }
    }
    cJSON_Delete(root);
    return st;
}
