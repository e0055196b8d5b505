/* config.h: the hyper-parameters of a checkpoint, read from config.json with transformers'
 * defaults for every absent field. */
#ifndef BERT8_CONFIG_H
#define BERT8_CONFIG_H

#include "base/act.h"
#include "base/common.h"
#include "io/arch.h"

/* Most labels a classification head may have (id2label / num_labels). */
#define B8_CONFIG_MAX_LABELS 100000
/* LoRA task names (b8_arch_desc.lora): at most this many, each shorter than B8_LORA_NAME_MAX. */
#define B8_LORA_MAX_TASKS 32
#define B8_LORA_NAME_MAX 64

typedef struct b8_config {
    bert8_arch arch;
    const b8_arch_desc *desc; /* the architecture's row of b8_arch_table */
    char model_type[32];
    char architecture[96];    /* "architectures"[0] or "" */
    int64_t vocab_size;
    int64_t hidden_size;      /* DistilBERT: dim */
    int64_t num_layers;       /* DistilBERT: n_layers */
    int64_t num_heads;        /* DistilBERT: n_heads */
    int64_t intermediate_size;/* DistilBERT: hidden_dim */
    int64_t max_position_embeddings;
    int64_t type_vocab_size;  /* 0 for DistilBERT (no token-type table) */
    int64_t pad_token_id;
    int64_t rel_buckets;      /* relative-position buckets (desc->rel_bias), else 0 */
    float layer_norm_eps;
    float rope_theta;         /* rotary positions (desc->pos == B8_POS_ROTARY), else 0; the global
                                 layers' with desc->sliding */
    float rope_theta_local;   /* desc->sliding: the sliding layers' theta */
    int64_t window;           /* desc->sliding: a sliding layer's query i sees keys |i - j| <= window
                                 (local_attention / 2) */
    bool *layer_sliding;      /* desc->sliding: [num_layers], owned; NULL otherwise */
    b8_act head_act;          /* B8_CLS_HEAD_NORM: classifier_activation */
    bool cls_mean;            /* B8_CLS_HEAD_NORM: classifier_pooling "mean" (else "cls") */
    /* desc->disentangled (DeBERTa): */
    bool no_pos_table;        /* position_biased_input false: no absolute position table */
    bool c2p, p2c;            /* the relative terms present (relative_attention and pos_att_type) */
    bool share_att_key;       /* the layer's key_proj / query_proj project the relative embeddings */
    bool rel_norm;            /* norm_rel_ebd "layer_norm": the relative embeddings are LayerNormed */
    int64_t att_span;         /* position_buckets if positive, else max_relative_positions: offsets
                                 index 2 x att_span relative embeddings */
    int64_t pos_buckets;      /* position_buckets (<= 0: offsets are not bucketed) */
    int64_t max_rel_pos;      /* max_relative_positions (< 1 in config.json: max_position_embeddings) */
    int64_t scale_factor;     /* 1 + the number of relative terms named in pos_att_type */
    b8_act pooler_act;        /* B8_CLS_CONTEXT: pooler_hidden_act */
    b8_act act;               /* hidden_act: GELU, GELU_TANH, RELU (or SILU in a gated FFN) */
    char act_name[16];
    int64_t num_labels;
    char **labels;            /* [num_labels] id2label names, owned */
    bool regression;          /* problem_type == "regression" or num_labels == 1 */
    /* desc->lora: the adapters' tasks in slice order ("lora_adaptations"), "lora_rank" and
     * "lora_alpha" (defaults: Jina v3's five tasks, 4 and 1); lora_count 0 otherwise */
    int64_t lora_count;
    char lora_tasks[B8_LORA_MAX_TASKS][B8_LORA_NAME_MAX];
    int64_t lora_rank;
    float lora_alpha;
} b8_config;

/* Parses dir/config.json. */
bert8_status b8_config_load(const char *dir, b8_config *cfg, b8_err *e);
/* Parses config.json text (path is only for messages). */
bert8_status b8_config_parse(const char *text, const char *path, b8_config *cfg, b8_err *e);
void b8_config_free(b8_config *cfg);

#endif
