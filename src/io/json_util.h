/* json_util.h: small helpers for the io layer's JSON readers (config.json, safetensors headers). */
#ifndef BERT8_JSON_UTIL_H
#define BERT8_JSON_UTIL_H

#include <cjson/cJSON.h>

#include "base/json_nul.h" /* b8_json_refuse_nul: every reader of names refuses \u0000 */

/* "a string", "a number", ... for messages that say what a field held instead. */
static inline const char *b8_json_type_name(const cJSON *v) {
    if (!v) return "missing";
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsArray(v)) return "an array";
    if (cJSON_IsObject(v)) return "an object";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNull(v)) return "null";
    return "invalid";
}

#endif
