/* layer.h: the vocabulary of one encoder layer, which every other table is written in: its parts
 * in checkpoint order (b8_part), its Linear groups (b8_group: which parts run as one matrix
 * product, their N and K, their key in quantization_config.json) and the calibration sites where
 * a group's input or an attention operand is observed (b8_site).
 *
 * It depends on nothing but base: the architecture table (io/arch.h) names each part's tensor in
 * these terms, and the name functions (io/names.h) combine the two. */
#ifndef BERT8_LAYER_H
#define BERT8_LAYER_H

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

#endif
