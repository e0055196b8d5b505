/* session.h: per-request state: scratch buffers sized for the largest batch seen, the outputs
 * of the last call, the last error message, and the calibration hook. One session serves one
 * call at a time; the model it runs is shared and never changed. */
#ifndef BERT8_SESSION_H
#define BERT8_SESSION_H

#include "model/model.h"

/* Calibration hook: sees the FP32 activation at each site of each layer (io/layer.h): rows x
 * cols values with row stride ld. rows are tokens; mask (may be NULL) says which rows are real
 * tokens. */
typedef void (*b8_observer)(void *ctx, int64_t layer, b8_site site, const float *x, int64_t rows,
                            int64_t cols, int64_t ld, const int32_t *mask);

struct bert8_session {
    const bert8_model *model;
    b8_err err;
    b8_observer observe;
    void *observe_ctx;
    /* fp32 activations: hidden [M][H], Q|K|V [M][3H], context [M][H], FFN [M][I] */
    b8_buf x, qkv, ctx, ffn;
    /* int8 activations of the Linear inputs ([M][H] and [M][I]) and their per-row scales */
    b8_buf xq, hq, rowscale, rowscale2;
    /* int32 [M]: the zero points of a per-token input (row_zero, forward.c): rowzero with
     * rowscale, rowzero2 with rowscale2 (FFN-out) */
    b8_buf rowzero, rowzero2;
    b8_buf ox;      /* a dynamic group's fp32 outlier channels [M][n_out] (b8_qlinear.out_idx) */
    b8_buf qkvq;    /* INT8 attention: int8 Q|K|V [M][3H] */
    b8_buf att;     /* attention scratch, one slice per thread */
    b8_buf gemm_ws; /* INT8 GEMM scratch (packed activations, tiles) */
    b8_buf relb;    /* relative-position bias per head over offsets -(T-1)..T-1 (MPNet) */
    b8_buf relidx;  /* disentangled attention: the relative embedding of offsets -(T-1)..T-1 (int32) */
    b8_buf mlm;     /* the masked-LM head's transformed rows */
    b8_buf rope;    /* rotary positions: cos | sin of positions 0..rope_T-1 [rope_T][head size] */
    int64_t rope_T;
    b8_buf rope_local; /* desc->sliding: the sliding layers' table (cfg.rope_theta_local), as rope */
    b8_buf gate;    /* a gated FFN's gate | up product [M][2I] */
    /* heads and outputs */
    b8_buf starts, first, pooled, tmp, logits, start, end;
    bert8_outputs out;
    int profiling;
    double prof[BERT8_OP_COUNT];
    /* Profiling the row operations INT8 products run (forward.c, rows_timed): thread nanoseconds
     * of the current product's row operation, and seconds already charged to their own op that
     * the next prof_mark takes off the product's. */
    int64_t prof_rows_ns;
    double prof_carry;
    /* Sequence-parallel calls (forward.c, split_forward): a session per group of sequences, each
     * group run on one thread (the first also runs the op-by-op calls of a model whose calls may
     * split, kid_forward); the plan's order of the sequences, and for packed batches each
     * group's cu_seqlens (from 0), input_ids and token_type_ids gathered. */
    struct bert8_session **kids;
    int nkids;
    int groups; /* the groups of the last call, 0 when it ran op after op */
    b8_buf splitcu, split_order, split_ids, split_types;
};

/* Installs (or with fn NULL removes) the calibration hook. */
void b8_session_set_observer(bert8_session *s, b8_observer fn, void *ctx);

#endif
