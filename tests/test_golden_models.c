/* test_golden_models.c: every case of every golden checkpoint matches transformers' outputs
 * within 1e-4 + 1e-4*|expected| on positions whose mask is 1. */
#include "golden.h"
#include "testutil.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static const char *const MODELS[] = {
    "bert_model",       "bert_gelu_new",    "bert_seqcls",     "bert_qa",
    "bert_tokcls",      "bert_pretraining", "bert_legacy_names", "distilbert_model",
    "distilbert_seqcls", "distilbert_qa",   "xlmr_model",      "xlmr_seqcls",
    "xlmr_qa",          "bert_e2e",         "xlmr_e2e",
};

/* Outputs the engine produces; hidden_states and pre-training heads are not served. */
static const char *const KEYS[] = {"last_hidden_state", "pooler_output", "logits", "start_logits",
                                   "end_logits"};

static const bert8_tensor *output_by_key(const bert8_outputs *o, const char *key) {
    if (!strcmp(key, "last_hidden_state")) return &o->last_hidden_state;
    if (!strcmp(key, "pooler_output")) return &o->pooler_output;
    if (!strcmp(key, "logits")) return &o->logits;
    if (!strcmp(key, "start_logits")) return &o->start_logits;
    if (!strcmp(key, "end_logits")) return &o->end_logits;
    return NULL;
}

static void check_model(const char *name) {
    char rel[256];
    snprintf(rel, sizeof rel, "golden/models/%s", name);
    char err[1024];
    bert8_model *m = NULL;
    bert8_status st = bert8_model_load(tu_shared_path(rel), NULL, &m, err, sizeof err);
    CHECKF(st == BERT8_OK, "%s: %s", name, err);
    if (st) return;
    cJSON *root = golden_load(name);
    CHECKF(root != NULL, "%s: cases.json unreadable", name);
    bert8_session *s = NULL;
    CHECK(bert8_session_create(m, &s) == BERT8_OK);
    int ncases = root ? golden_case_count(root) : 0, compared = 0;
    for (int i = 0; i < ncases; i++) {
        golden_case c;
        CHECK(golden_case_get(root, i, &c) == 0);
        bert8_batch bt = {c.B, c.T, c.ids, c.mask, c.types};
        bert8_outputs out;
        st = bert8_forward(s, &bt, &out);
        CHECKF(st == BERT8_OK, "%s/%s: %s", name, c.name, bert8_session_last_error(s));
        for (size_t k = 0; st == BERT8_OK && k < sizeof KEYS / sizeof *KEYS; k++) {
            if (!cJSON_GetObjectItem(c.outputs, KEYS[k])) {
                /* Task heads also expose the encoder's hidden states (and BERT's pooler),
                 * but a head output must match the model's head. */
                const bert8_tensor *t = output_by_key(&out, KEYS[k]);
                bool encoder_output = !strcmp(KEYS[k], "last_hidden_state") || !strcmp(KEYS[k], "pooler_output");
                CHECKF(encoder_output || t->data == NULL, "%s/%s: produced %s that the golden lacks", name, c.name, KEYS[k]);
                continue;
            }
            double maxe;
            char why[256];
            int64_t bad = golden_compare(&c, KEYS[k], output_by_key(&out, KEYS[k]), 1e-4, 1e-4, &maxe,
                                         why, sizeof why);
            CHECKF(bad == 0, "%s/%s/%s: %lld elements out of tolerance (max err %.3g) %s", name, c.name,
                   KEYS[k], (long long)bad, maxe, why);
            compared++;
        }
        golden_case_free(&c);
    }
    CHECKF(compared >= ncases, "%s: only %d outputs compared over %d cases", name, compared, ncases);
    printf("  %s: %d cases, %d outputs compared\n", name, ncases, compared);
    bert8_session_free(s);
    cJSON_Delete(root);
    bert8_model_free(m);
}

#define MODEL_TEST(n) TEST(golden_##n) { check_model(#n); }
MODEL_TEST(bert_model)
MODEL_TEST(bert_gelu_new)
MODEL_TEST(bert_seqcls)
MODEL_TEST(bert_qa)
MODEL_TEST(bert_tokcls)
MODEL_TEST(bert_pretraining)
MODEL_TEST(bert_legacy_names)
MODEL_TEST(distilbert_model)
MODEL_TEST(distilbert_seqcls)
MODEL_TEST(distilbert_qa)
MODEL_TEST(xlmr_model)
MODEL_TEST(xlmr_seqcls)
MODEL_TEST(xlmr_qa)
MODEL_TEST(bert_e2e)
MODEL_TEST(xlmr_e2e)

int main(void) {
    (void)MODELS;
    RUN(golden_bert_model);
    RUN(golden_bert_gelu_new);
    RUN(golden_bert_seqcls);
    RUN(golden_bert_qa);
    RUN(golden_bert_tokcls);
    RUN(golden_bert_pretraining);
    RUN(golden_bert_legacy_names);
    RUN(golden_distilbert_model);
    RUN(golden_distilbert_seqcls);
    RUN(golden_distilbert_qa);
    RUN(golden_xlmr_model);
    RUN(golden_xlmr_seqcls);
    RUN(golden_xlmr_qa);
    RUN(golden_bert_e2e);
    RUN(golden_xlmr_e2e);
    return tu_finish();
}
