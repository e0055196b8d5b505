/* session.h: per-request state: scratch buffers sized for the largest batch seen, the
 * outputs of the last call, and the last error message. */
#ifndef BERT8_SESSION_H
#define BERT8_SESSION_H

#include "model/model.h"

typedef struct b8_buf {
    void *p;
    size_t cap; /* bytes */
} b8_buf;

/* Calibration hook: sees the FP32 input of each Linear group of each layer. site: 0 = QKV
 * input, 1 = attention-output input (context), 2 = FFN-in input, 3 = FFN-out input (after the
 * activation). rows are tokens; mask (may be NULL) says which rows are real tokens. */
enum { B8_SITE_QKV, B8_SITE_ATTN_OUT, B8_SITE_FFN_IN, B8_SITE_FFN_OUT, B8_SITES };
typedef void (*b8_observer)(void *ctx, int64_t layer, int site, const float *x, int64_t rows,
                            int64_t cols, const int32_t *mask);

struct bert8_session {
    const bert8_model *model;
    b8_err err;
    b8_observer observe;
    void *observe_ctx;
    b8_buf xq, hq, rowscale, rowscale2;
    b8_buf x, qkv, scores, ctx, ffn, first, pooled, tmp, logits, start, end, ids;
    bert8_outputs out;
    int profiling;
    double prof[BERT8_OP_COUNT];
};

/* Grows buf to at least `count * size` bytes (64-byte aligned); contents are not kept. */
bert8_status b8_buf_reserve(b8_buf *buf, size_t count, size_t size, b8_err *e);

#endif
