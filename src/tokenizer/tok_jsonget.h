/* tok_jsonget.h: the tokenizer.json field readers tok_json.c (WordPiece, Unigram, the
 * post-processor), json_vocab.c (model.vocab) and bpe_load.c (BPE) share. */
#ifndef BERT8_TOK_JSONGET_H
#define BERT8_TOK_JSONGET_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdint.h>

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

/* A JSON number that is an integer in [lo, hi] (no fraction, no NaN), as *out. */
static inline bool get_id(const cJSON *v, int64_t lo, int64_t hi, int64_t *out) {
    if (!cJSON_IsNumber(v)) return false;
    double d = v->valuedouble;
    if (!(d >= (double)lo && d <= (double)hi)) return false;
    int64_t i = (int64_t)d;
    if ((double)i != d) return false;
    *out = i;
    return true;
}

/* What a field holds, for messages: "a string", "null", ... */
static inline const char *json_kind(const cJSON *v) {
    return cJSON_IsString(v) ? "a string" : cJSON_IsNumber(v) ? "a number" : cJSON_IsArray(v) ? "an array"
         : cJSON_IsObject(v) ? "an object" : cJSON_IsNull(v) ? "null" : cJSON_IsBool(v) ? "a boolean" : "invalid";
}

/* A boolean field as `tokenizers` deserializes it: *out is set when it is a boolean and kept
 * when absent (or null, where null_ok: an Option<bool>); any other value makes it return
 * false, since the reference refuses the file ("invalid type: string "yes", expected a
 * boolean"). */
static inline bool get_bool_strict(const cJSON *o, const char *k, bool null_ok, bool *out) {
    const cJSON *v = get(o, k);
    if (!v || (null_ok && cJSON_IsNull(v))) return true;
    if (!cJSON_IsBool(v)) return false;
    *out = cJSON_IsTrue(v);
    return true;
}

#endif
