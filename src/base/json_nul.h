/* json_nul.h: finds a NUL character written into a JSON string (\u0000). cJSON decodes it into
 * the string, where every C reader stops: "1_Pooling\u0000junk" would read as "1_Pooling". The
 * readers of files whose strings name files, modules, tensors or tokens refuse such a file by
 * the field's name instead (b8_json_refuse_nul). */
#ifndef BERT8_JSON_NUL_H
#define BERT8_JSON_NUL_H

#include "base/common.h"

/* Scans JSON text (len bytes; it need not be valid JSON) for a string holding \u0000. Returns
 * true when one is found, with *offset its byte offset in text and where (cap bytes) the
 * field's place, e.g. "added_tokens[3].content" or "a key of model.vocab". */
bool b8_json_find_nul(const char *text, size_t len, size_t *offset, char *where, size_t cap);

/* BERT8_OK, or an error naming path and the field when text holds a NUL in a string. */
bert8_status b8_json_refuse_nul(const char *text, size_t len, const char *path, b8_err *e);

#endif
