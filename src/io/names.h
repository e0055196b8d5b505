/* names.h: the tensor-name table of a Hugging Face BERT-family checkpoint and the table of
 * Linear groups: which checkpoint tensors each encoder-layer part is stored under, which parts
 * run as one matrix product, and where a group's input is observed during calibration.
 *
 * One table instead of hand-written lists: the loader, the quantizer, the INT8 folder writer
 * and the forward pass all walk b8_group_table. */
#ifndef BERT8_NAMES_H
#define BERT8_NAMES_H

#include "base/common.h"

/* The parts of one encoder layer, in checkpoint order. */
typedef enum b8_part {
    B8_PART_Q,
    B8_PART_K,
    B8_PART_V,
    B8_PART_ATTN_OUT,
    B8_PART_LN1, /* after attention (DistilBERT: sa_layer_norm) */
    B8_PART_FFN_IN,
    B8_PART_FFN_OUT,
    B8_PART_LN2, /* after the FFN (DistilBERT: output_layer_norm) */
    B8_PART_FFN_UP, /* a gated FFN's up projection (B8_PART_FFN_IN is then its gate) */
    B8_PART_COUNT
} b8_part;

/* Linear groups: the matrix products of one layer. Q, K and V share their input and run as
 * one [3H][H] product; so do a gated FFN's gate and up ([2I][H]). */
typedef enum b8_group {
    B8_GROUP_QKV,
    B8_GROUP_ATTN_OUT,
    B8_GROUP_FFN_IN,
    B8_GROUP_FFN_OUT,
    B8_GROUP_COUNT
} b8_group;

/* Calibration sites: activations the quantizer observes. Each Linear group reads one; sites
 * that are not Linear inputs (the attention operands) follow the group inputs. */
typedef enum b8_site {
    B8_SITE_QKV_IN,      /* the LayerNorm output entering Q, K, V */
    B8_SITE_ATTN_OUT_IN, /* the attention context */
    B8_SITE_FFN_IN_IN,   /* the LayerNorm output entering the FFN */
    B8_SITE_FFN_OUT_IN,  /* the FFN activation (after GELU; gated: act(gate) * up) */
    B8_SITE_Q,           /* attention operands, per layer: Q (scaled), K, V [tokens][H] */
    B8_SITE_K,
    B8_SITE_V,
    B8_SITE_PROBS,       /* the softmax probabilities (max only: [rows][1]) */
    B8_SITE_COUNT
} b8_site;

typedef struct b8_group_desc {
    const char *key;   /* its name in quantization_config.json ("qkv", "attention_output", ...) */
    int n_parts;       /* checkpoint Linears stacked into the product (N = n_parts x part N) at most */
    b8_part parts[3];
    bool gated;        /* the last part exists only in a gated FFN (b8_group_nparts) */
    bool part_n_inter; /* a part's N is the intermediate size (else the hidden size) */
    bool k_inter;      /* K is the intermediate size (else the hidden size) */
    b8_site site;      /* where its input is observed */
} b8_group_desc;

extern const b8_group_desc b8_group_table[B8_GROUP_COUNT];

/* Whether group g's static input may have a zero point: FFN-out, whose input (a GELU output,
 * one-sided) FFN-in's epilogue requantizes and can shift. The LayerNorm-fed groups and
 * attention-output (fed by the INT8 attention) stay symmetric. */
static inline bool b8_group_zero_ok(b8_group g) { return g == B8_GROUP_FFN_OUT; }

struct b8_arch_desc;

/* How many checkpoint Linears group g stacks in architecture a (FFN-in: 2 when gated). */
int b8_group_nparts(const struct b8_arch_desc *a, b8_group g);

/* N and K of a group's product in architecture a for hidden size H and intermediate size I. */
void b8_group_dims(const struct b8_arch_desc *a, b8_group g, int64_t H, int64_t I, int64_t *n, int64_t *k);

/* Writes the transformers name of a layer part without ".weight"/".bias", e.g.
 * "bert.encoder.layer.3.attention.self.query"; prefix ("bert.", "roberta.", "distilbert." or
 * "") is prepended as given. */
void b8_part_name(bert8_arch arch, const char *prefix, int64_t layer, b8_part part, char *out,
                  size_t cap);

/* Writes the name of layer `layer`'s fused tensor of group g (b8_arch_desc.fused), without
 * ".weight"/".bias"; false (and "") when the architecture stores that group unfused. */
bool b8_fused_name(bert8_arch arch, const char *prefix, int64_t layer, b8_group g, char *out, size_t cap);

/* The tensor suffixes of an INT8 Linear in a bert8 INT8 folder (beside "<base>.weight" I8 and
 * "<base>.bias" F32). */
#define B8_QT_WEIGHT_SCALE "weight_scale"   /* F32 [n]: per output channel */
#define B8_QT_SMOOTH "smooth_factor"        /* F32 [k]: SmoothQuant s, the input is divided by it */
#define B8_QT_INPUT_SCALE "input_scale"     /* F32 [1]: static scheme, scale of the smoothed input */
#define B8_QT_INPUT_ZERO "input_zero_point" /* F32 [1], optional: static, the input's zero point (an
                                               integer in [-127, 127]; FFN-out only; version 4) */
/* Optional, dynamic Linears only: the input channels kept in fp32 (bert8_quant_params.outliers):
 * "<base>.outlier_index" I32 [r] (strictly ascending) and "<base>.outlier_weight" F32 [n][r],
 * their unsmoothed weights; the int8 weight columns there are 0 and their smooth_factor 1. */
#define B8_QT_OUTLIER_INDEX "outlier_index"
#define B8_QT_OUTLIER_WEIGHT "outlier_weight"
/* INT8 attention: "<query|key|value base>.output_scale", F32 [1], the per-tensor scale of the
 * int8 Q, K and V the QKV product emits. */
#define B8_QT_OUTPUT_SCALE "output_scale"
/* INT8 word embeddings: "embeddings.word_embeddings.weight" I8 [vocab][H] with
 * "embeddings.word_embeddings.weight_scale" F32 [vocab], one scale per row. */

#endif
