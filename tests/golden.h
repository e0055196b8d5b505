/* golden.h: reading the golden cases.json files (inputs and transformers' outputs). */
#ifndef BERT8_TEST_GOLDEN_H
#define BERT8_TEST_GOLDEN_H

#include <cjson/cJSON.h>
#include <stdint.h>
#include "bert8.h"

typedef struct golden_case {
    const char *name;
    int64_t B, T;
    int32_t *ids, *mask, *types; /* types NULL when absent */
    const cJSON *outputs;        /* the "outputs" object */
    const cJSON *json;           /* the whole case */
} golden_case;

/* Loads golden/models/<model>/cases.json; returns the root (free with cJSON_Delete) or NULL. */
cJSON *golden_load(const char *model);
/* Fills c from the i-th case; returns 0 on success. Free with golden_case_free. */
int golden_case_get(const cJSON *root, int i, golden_case *c);
void golden_case_free(golden_case *c);
int golden_case_count(const cJSON *root);
/* The first cases of one model (at most GOLDEN_SET_MAX) with their batches, for tests that run
 * every case; cases that do not parse are skipped. Free with golden_set_free. */
#define GOLDEN_SET_MAX 8
typedef struct golden_set {
    cJSON *root;
    golden_case c[GOLDEN_SET_MAX];
    bert8_batch b[GOLDEN_SET_MAX];
    int n;
} golden_set;
void golden_set_load(golden_set *s, const char *model);
void golden_set_free(golden_set *s);
/* Compares an output tensor against the golden key, only rows whose mask is 1 when the tensor
 * is per-token; returns the number of elements outside |a-b| <= atol + rtol*|b| and the max error. */
int64_t golden_compare(const golden_case *c, const char *key, const bert8_tensor *t, double atol,
                       double rtol, double *max_err, char *why, size_t why_len);

#endif
