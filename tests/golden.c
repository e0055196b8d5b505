/* golden.c: cases.json reader and tolerance comparison for the golden model tests. */
#include "golden.h"
#include "testutil.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

cJSON *golden_load(const char *model) {
    char rel[512];
    snprintf(rel, sizeof rel, "golden/models/%s/cases.json", model);
    char *buf = tu_read_file(tu_shared_path(rel), NULL);
    if (!buf) return NULL;
    cJSON *root = cJSON_Parse(buf);
    free(buf);
    return root;
}

int golden_case_count(const cJSON *root) {
    return cJSON_GetArraySize(cJSON_GetObjectItem(root, "cases"));
}

static int32_t *read_2d(const cJSON *arr, int64_t B, int64_t T) {
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) != B) return NULL;
    int32_t *out = malloc((size_t)(B * T) * sizeof *out);
    for (int64_t b = 0; b < B; b++) {
        const cJSON *row = cJSON_GetArrayItem(arr, (int)b);
        if (cJSON_GetArraySize(row) != T) {
            free(out);
            return NULL;
        }
        for (int64_t t = 0; t < T; t++) out[b * T + t] = (int32_t)cJSON_GetArrayItem(row, (int)t)->valuedouble;
    }
    return out;
}

int golden_case_get(const cJSON *root, int i, golden_case *c) {
    memset(c, 0, sizeof *c);
    const cJSON *cs = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "cases"), i);
    if (!cs) return -1;
    c->json = cs;
    c->name = cJSON_GetObjectItem(cs, "name")->valuestring;
    c->B = (int64_t)cJSON_GetObjectItem(cs, "batch_size")->valuedouble;
    c->T = (int64_t)cJSON_GetObjectItem(cs, "seq_len")->valuedouble;
    c->ids = read_2d(cJSON_GetObjectItem(cs, "input_ids"), c->B, c->T);
    c->mask = read_2d(cJSON_GetObjectItem(cs, "attention_mask"), c->B, c->T);
    const cJSON *tt = cJSON_GetObjectItem(cs, "token_type_ids");
    if (tt) c->types = read_2d(tt, c->B, c->T);
    c->outputs = cJSON_GetObjectItem(cs, "outputs");
    return (c->ids && c->mask && c->outputs) ? 0 : -1;
}

void golden_case_free(golden_case *c) {
    free(c->ids);
    free(c->mask);
    free(c->types);
}

int64_t golden_compare(const golden_case *c, const char *key, const bert8_tensor *t, double atol,
                       double rtol, double *max_err, char *why, size_t why_len) {
    *max_err = 0;
    const cJSON *o = cJSON_GetObjectItem(c->outputs, key);
    if (!o || !t->data) {
        snprintf(why, why_len, "%s: %s", key, !o ? "not in golden" : "not produced");
        return -1;
    }
    const cJSON *shape = cJSON_GetObjectItem(o, "shape"), *data = cJSON_GetObjectItem(o, "data");
    int nd = cJSON_GetArraySize(shape);
    if (nd != t->ndim) {
        snprintf(why, why_len, "%s: rank %d vs golden %d", key, t->ndim, nd);
        return -1;
    }
    int64_t total = 1;
    for (int i = 0; i < nd; i++) {
        int64_t g = (int64_t)cJSON_GetArrayItem(shape, i)->valuedouble;
        if (g != t->shape[i]) {
            snprintf(why, why_len, "%s: dim %d is %lld vs golden %lld", key, i, (long long)t->shape[i],
                     (long long)g);
            return -1;
        }
        total *= g;
    }
    if (cJSON_GetArraySize(data) != total) {
        snprintf(why, why_len, "%s: golden data size mismatch", key);
        return -1;
    }
    /* per-token tensors: dims 0,1 are [B, T] */
    bool per_token = nd >= 2 && t->shape[0] == c->B && t->shape[1] == c->T;
    int64_t inner = per_token ? total / (c->B * c->T) : 0;
    int64_t bad = 0, i = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, data) {
        bool use = true;
        if (per_token) use = c->mask[i / inner] == 1;
        if (use) {
            double want = v->valuedouble, got = t->data[i];
            double err = fabs(got - want);
            if (!(err <= atol + rtol * fabs(want))) bad++;
            if (err > *max_err || isnan(got)) *max_err = isnan(got) ? INFINITY : err;
        }
        i++;
    }
    why[0] = 0;
    return bad;
}

void golden_set_load(golden_set *s, const char *model) {
    memset(s, 0, sizeof *s);
    s->root = golden_load(model);
    int n = s->root ? golden_case_count(s->root) : 0;
    for (int i = 0; i < n && s->n < GOLDEN_SET_MAX; i++) {
        if (golden_case_get(s->root, i, &s->c[s->n]) != 0) continue;
        golden_case *g = &s->c[s->n];
        bert8_batch b = {g->B, g->T, g->ids, g->mask, g->types};
        s->b[s->n++] = b;
    }
}

void golden_set_free(golden_set *s) {
    for (int i = 0; i < s->n; i++) golden_case_free(&s->c[i]);
    cJSON_Delete(s->root);
}
