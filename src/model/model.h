/* model.h: the loaded model: configuration, the mapped checkpoint, and per-layer weights (raw
 * FP32 views for calibration, packed FP32 products, INT8 products). Immutable once
 * bert8_model_load (or bert8_quantize) returns: any number of threads may share it. */
#ifndef BERT8_MODEL_H
#define BERT8_MODEL_H

#include "base/common.h"
#include "io/config.h"
#include "io/names.h"
#include "io/qformat.h"
#include "io/safetensors.h"
#include "kernels/gemm_f32/sgemm.h"
#include "quant/qlinear.h"

/* A Linear layer outside the encoder layers (pooler, task heads): raw views and packed form. */
typedef struct b8_linear {
    int64_t n, k;
    const float *w; /* [n][k] */
    const float *b; /* [n] */
    b8_sgemm_w *f32;
} b8_linear;

typedef struct b8_layer {
    /* FP32 views of every part (LayerNorms: gamma in w, beta in b), mapped or owned by the
     * model; NULL for the Linears a quantized checkpoint stores in INT8. */
    const float *w[B8_PART_COUNT];
    const float *b[B8_PART_COUNT];
    /* Each Linear group runs either FP32 (f32) or INT8 (q); the other is NULL. */
    b8_sgemm_w *f32[B8_GROUP_COUNT];
    b8_qlinear *q[B8_GROUP_COUNT];
    /* INT8 attention (needs an INT8 QKV group), or NULL: the attention products run FP32 */
    b8_qattn *att;
    /* Disentangled attention (cfg.c2p / cfg.p2c): the key and query projections of the relative
     * embeddings, Kr and Qr, per head and transposed: [heads][head size][2 x att_span] (an INT8
     * folder stores them as rows [2 x att_span][H]), owned by the model; NULL for an absent term */
    const float *rel_kr, *rel_qr;
} b8_layer;

struct bert8_model {
    b8_config cfg;
    bert8_model_info info;
    char *dir;
    b8_st *st;
    char prefix[16];            /* the architecture's prefix (b8_arch_desc.prefix) or "" */
    const float *word_emb;      /* [vocab][H], or NULL when the rows are int8: */
    const int8_t *word_emb_q;   /* [vocab][H] int8 rows, dequantized on gather with ... */
    const float *word_emb_scale;/* [vocab] one scale per row */
    const float *pos_emb;       /* [max_pos][H], NULL with rotary positions */
    const float *type_emb;      /* [type_vocab][H] or NULL (DistilBERT) */
    const float *emb_ln_g, *emb_ln_b;
    const float *final_ln_g, *final_ln_b; /* pre-norm: the LayerNorm after the last layer, else NULL */
    const float *cls_ln_g, *cls_ln_b;     /* B8_CLS_HEAD_NORM: the head's LayerNorm after cls_dense */
    const float *rel_bias;      /* [rel_buckets][heads], shared by all layers (MPNet), or NULL */
    b8_layer *layers;           /* [num_layers] */
    bool has_pooler;
    b8_linear pooler;           /* [H][H], tanh */
    b8_linear cls_dense;        /* DistilBERT pre_classifier (ReLU) / XLM-R classifier.dense (tanh) */
    b8_linear cls_out;          /* classifier / classifier.out_proj / qa_outputs ([2][H]) */
    /* the masked-LM head (b8_arch_desc.mlm_*), when the checkpoint has one */
    bool has_mlm;
    b8_linear mlm_dense;        /* [H][H] + activation */
    const float *mlm_ln_g, *mlm_ln_b;
    b8_sgemm_w *mlm_dec;        /* [vocab][H] + bias: the decoder (tied: the word embeddings) */
    const float *mlm_dec_w, *mlm_dec_b; /* its FP32 weights and bias */
    b8_qlinear *mlm_q;          /* an INT8 model's decoder: int8 per vocabulary row, the input
                                   per token (b8_model_prepare_int8) */
    /* INT8: how it was quantized (written back by bert8_model_save) */
    bool quantized;
    bert8_scheme scheme;
    int64_t calib_samples;
    int weight_bits;            /* quantized: 8, or 7 (weights within +-64); 0 for FP32 */
    char keep_fp32[256];
    bool int8_embeddings;       /* word_emb_q in use */
    int8_t *own_emb_q;          /* the int8 rows and scales when the model made them (quantize) */
    float *own_emb_scale;
    b8_qarena *qarena;          /* the packed INT8 weights of every layer (b8_model_prepare_int8) */
    /* A per-token (dynamic) input is quantized with a zero point per token (forward.c); true
     * when BERT8_DYNAMIC_ZERO_POINT=0 was in the environment at b8_model_prepare_int8: the
     * symmetric per-token scale of the versions before 2026-12-04, for A/B measurements */
    bool dyn_symmetric;
    /* An INT8 batch of several sequences runs as groups of whole sequences, one group per
     * thread (forward.c, split_forward); false when BERT8_SEQ_PARALLEL=0 was in the environment
     * at b8_model_prepare_int8 (every product then runs on all threads, op after op) */
    bool seq_parallel;
    /* LoRA (model/lora.h): the task folded into the weights ("" for none) and the weights it
     * changed, by module name ("<base>" of "<base>.parametrizations.weight.original"), for
     * bert8_model_save to write under "<base>.weight" */
    char lora_task[B8_LORA_NAME_MAX];
    struct b8_lora_folded {
        char *base;
        const float *w; /* [n][k], owned by the model */
        int64_t n, k;
    } *lora_folded;
    size_t n_lora_folded;
    /* converted tensors (F16/BF16 or unaligned F32) owned by the model */
    float **owned;
    size_t n_owned, cap_owned;
};

/* The transformers name of part `part` of layer `layer`, with the model's prefix. */
void b8_model_part_name(const bert8_model *m, int64_t layer, b8_part part, char *out, size_t cap);

/* The FP32 weight [n][k] and bias [n] of Linear group g of a layer (Q, K and V stacked into a
 * fresh [3H][H] copy). *owned says whether the caller must b8_free_aligned w and b. Fails
 * with BERT8_ERR_MISSING when the checkpoint stores that group in INT8 only. */
bert8_status b8_layer_group_fp32(const bert8_model *m, int64_t layer, b8_group g, const float **w,
                                 const float **b, bool *owned, b8_err *e);

/* Finishes the INT8 groups of every layer (multipliers, LayerNorm folds, packing) and drops
 * the packed FP32 products they replace. Called by the loader and by bert8_quantize. */
bert8_status b8_model_prepare_int8(bert8_model *m, b8_err *e);

/* Replaces the FP32 word embedding rows by int8 rows with one scale per row (the model owns them). */
bert8_status b8_model_quantize_embeddings(bert8_model *m, b8_err *e);

/* The mode group g of layer l runs in: B8_QMODE_FP32 or that of its INT8 form. */
static inline b8_qmode b8_layer_mode(const b8_layer *ly, b8_group g) {
    return ly->q[g] ? ly->q[g]->mode : B8_QMODE_FP32;
}

#endif
