/* tok_jsonget.h: the tokenizer.json field readers tok_json.c (WordPiece, Unigram, the
 * post-processor) and bpe_load.c (BPE) share. */
#ifndef BERT8_TOK_JSONGET_H
#define BERT8_TOK_JSONGET_H

#include <cjson/cJSON.h>

static inline const cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

/* The field as a string, or NULL when absent or of another type. */
static inline const char *get_str(const cJSON *o, const char *k) {
    const cJSON *v = get(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* A boolean field; dflt when absent or not a boolean. */
static inline int get_flag(const cJSON *o, const char *k, int dflt) {
    const cJSON *v = get(o, k);
    if (cJSON_IsTrue(v)) return 1;
    if (cJSON_IsFalse(v)) return 0;
    return dflt;
}

#endif
