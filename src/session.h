/* session.h: per-request state: scratch buffers sized for the largest batch seen, the
 * outputs of the last call, and the last error message. */
#ifndef BERT8_SESSION_H
#define BERT8_SESSION_H

#include "model.h"

typedef struct b8_buf {
    void *p;
    size_t cap; /* bytes */
} b8_buf;

struct bert8_session {
    const bert8_model *model;
    b8_err err;
    b8_buf x, qkv, scores, ctx, ffn, first, pooled, tmp, logits, start, end, ids;
    bert8_outputs out;
};

/* Grows buf to at least `count * size` bytes (64-byte aligned); contents are not kept. */
bert8_status b8_buf_reserve(b8_buf *buf, size_t count, size_t size, b8_err *e);

#endif
