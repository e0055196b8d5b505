/* model.h: the loaded model: configuration, the mapped checkpoint, and per-layer weights
 * (raw FP32 views for calibration plus packed copies for the GEMMs). Immutable after load. */
#ifndef BERT8_MODEL_H
#define BERT8_MODEL_H

#include "base/common.h"
#include "io/config.h"
#include "io/safetensors.h"
#include "kernels/gemm_f32/sgemm.h"
#include "kernels/gemm_s8/qgemm.h"

/* An INT8 Linear layer (SmoothQuant W8A8): y = (x / smooth) W'^T + b with W' = W * smooth,
 * stored int8 per output channel. */
typedef struct b8_qlinear {
    int64_t n, k;
    int8_t *wq;       /* [n][k] */
    float *w_scale;   /* [n] */
    float *bias;      /* [n] */
    float *smooth;    /* [k]: the input is divided by it */
    float a_scale;    /* static: scale of the smoothed input (x / smooth ~ a_scale * q); 0 dynamic */
    float alpha;      /* migration strength used (-1: smoothing off) */
    float *in_mul;    /* [k]: 1 / (smooth * a_scale) static, 1 / smooth dynamic */
    b8_qweight *packed;
} b8_qlinear;

/* One Linear layer: raw weight [n][k] and bias [n] (FP32, read-only) and its packed form. */
typedef struct b8_linear {
    int64_t n, k;
    const float *w; /* [n][k] */
    const float *b; /* [n] */
    b8_sgemm_w *f32;
} b8_linear;

typedef struct b8_layer {
    b8_linear q, k, v;     /* raw views; qkv packs the three as one [3H][H] product */
    b8_sgemm_w *qkv;
    b8_linear attn_out;    /* [H][H] */
    const float *ln1_g, *ln1_b; /* after attention (DistilBERT: sa_layer_norm) */
    b8_linear ffn_in;      /* [I][H] */
    b8_linear ffn_out;     /* [H][I] */
    const float *ln2_g, *ln2_b; /* after the FFN (DistilBERT: output_layer_norm) */
    /* INT8 (NULL when the layer runs in FP32) */
    b8_qlinear *qkv_q, *attn_out_q, *ffn_in_q, *ffn_out_q;
    /* static scheme: the LayerNorm feeding QKV (embeddings' or the previous layer's second)
     * and the one feeding FFN-in, with 1/(smooth * a_scale) folded into gamma and beta */
    float *qkv_qg, *qkv_qb, *ffn_qg, *ffn_qb;
} b8_layer;

struct bert8_model {
    b8_config cfg;
    bert8_model_info info;
    char *dir;
    b8_st *st;
    char prefix[16];            /* "bert.", "roberta.", "distilbert." or "" */
    const float *word_emb;      /* [vocab][H] */
    const float *pos_emb;       /* [max_pos][H] */
    const float *type_emb;      /* [type_vocab][H] or NULL (DistilBERT) */
    const float *emb_ln_g, *emb_ln_b;
    b8_layer *layers;           /* [num_layers] */
    bool has_pooler;
    b8_linear pooler;           /* [H][H], tanh */
    b8_linear cls_dense;        /* DistilBERT pre_classifier (ReLU) / XLM-R classifier.dense (tanh) */
    b8_linear cls_out;          /* classifier / classifier.out_proj / qa_outputs ([2][H]) */
    bool quantized;
    bert8_scheme scheme;
    int64_t calib_samples;
    char keep_fp32[256];
    /* converted tensors (F16/BF16 or unaligned F32) owned by the model */
    float **owned;
    size_t n_owned, cap_owned;
};

/* The parts of one encoder layer, in checkpoint order. */
enum {
    B8_PART_Q, B8_PART_K, B8_PART_V, B8_PART_ATTN_OUT, B8_PART_LN1, B8_PART_FFN_IN, B8_PART_FFN_OUT,
    B8_PART_LN2, B8_PART_COUNT
};
/* Writes the transformers name of a layer part, without ".weight"/".bias"
 * (e.g. "bert.encoder.layer.3.attention.self.query"); the model's prefix only when asked. */
void b8_layer_part_name(const bert8_model *m, int64_t layer, int part, bool with_prefix, char *out,
                        size_t cap);
/* Q, K and V of a layer as one [3H][H] weight and [3H] bias (free both with b8_free_aligned). */
bert8_status b8_layer_join_qkv(const b8_layer *ly, int64_t H, float **w, float **b, b8_err *e);

#endif
