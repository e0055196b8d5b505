/* status.c: status strings and the version call. */
#include "bert8.h"

#define B8_STR2(x) #x
#define B8_STR(x) B8_STR2(x)

const char *bert8_version(void) {
    return B8_STR(BERT8_VERSION_MAJOR) "." B8_STR(BERT8_VERSION_MINOR) "." B8_STR(BERT8_VERSION_PATCH);
}

const char *bert8_status_string(bert8_status status) {
    static const char *const names[BERT8_STATUS_COUNT] = {
        [BERT8_OK] = "ok",
        [BERT8_ERR_INVALID_ARG] = "invalid argument",
        [BERT8_ERR_IO] = "input/output error",
        [BERT8_ERR_FORMAT] = "malformed file",
        [BERT8_ERR_UNSUPPORTED] = "unsupported",
        [BERT8_ERR_SHAPE] = "shape mismatch",
        [BERT8_ERR_MISSING] = "missing tensor or field",
        [BERT8_ERR_NOMEM] = "out of memory",
        [BERT8_ERR_TOO_LARGE] = "request too large",
        [BERT8_ERR_ENCODING] = "invalid text encoding",
        [BERT8_ERR_INTERNAL] = "internal error",
    };
    if ((unsigned)status >= BERT8_STATUS_COUNT) return "unknown status";
    return names[status];
}
