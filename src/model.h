/* model.h: the loaded model: configuration, the mapped checkpoint, and per-layer weights
 * (raw FP32 views for calibration plus packed copies for the GEMMs). Immutable after load. */
#ifndef BERT8_MODEL_H
#define BERT8_MODEL_H

#include "common.h"
#include "config.h"
#include "safetensors.h"
#include "kernels/sgemm.h"

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
    /* converted tensors (F16/BF16 or unaligned F32) owned by the model */
    float **owned;
    size_t n_owned, cap_owned;
};

#endif
