/* arch.h: the architecture table. Everything that differs between the encoder families bert8
 * runs is one row of b8_arch_table: config.json's field names and transformers' defaults, the
 * tensor names, how positions are made, how the attention mask is applied, the pooler and
 * the sequence-classification head. The config parser, the loader, the forward pass and the
 * pipelines read these traits; none of them tests an architecture by name.
 *
 * Adding an architecture of the same layer shape (post-LN, Q/K/V + output + a two-Linear or
 * gated FFN, absolute, relative or rotary positions) is one row here; docs/architecture.md
 * walks through MPNet as the worked example. */
#ifndef BERT8_ARCH_H
#define BERT8_ARCH_H

#include "base/common.h"
#include "io/layer.h"

/* How position ids are made. */
typedef enum b8_pos_ids {
    B8_POS_ABSOLUTE, /* 0, 1, 2, ... in each sequence (BERT, DistilBERT) */
    B8_POS_FROM_PAD, /* RoBERTa's: pad_token_id + 1 + the count of non-pad tokens so far, pad_token_id
                        for pad tokens; max_position_embeddings - pad_token_id - 1 usable positions */
    B8_POS_ROTARY    /* no position table: Q and K of every layer are rotated by position 0, 1, 2, ...
                        of each sequence (Llama's rotate_half form, inv_freq = theta^(-2i/d)) */
} b8_pos_ids;

/* The FFN's form. */
typedef enum b8_ffn_kind {
    B8_FFN_PLAIN, /* act(x W1 + b1) W2 + b2 */
    B8_FFN_GLU    /* (act(x Wgate) * (x Wup)) Wdown: FFN-in is the stacked [2I][H] product of gate and
                     up (B8_PART_FFN_IN, B8_PART_FFN_UP) */
} b8_ffn_kind;

/* The sequence-classification head on the last hidden state. */
typedef enum b8_cls_head {
    B8_CLS_POOLER,    /* BERT: the pooler (dense + tanh on the first token), then "classifier" */
    B8_CLS_DENSE_TANH,/* RoBERTa, XLM-R, MPNet: "classifier.dense" + tanh on the first token, then
                         "classifier.out_proj" */
    B8_CLS_PRE_RELU,  /* DistilBERT: "pre_classifier" + ReLU on the first token, then "classifier" */
    B8_CLS_HEAD_NORM, /* ModernBERT: "head.dense" + classifier_activation + "head.norm" on the first
                         token or the mean of the tokens (classifier_pooling), then "classifier";
                         token classification and QA run the same transform on every token */
    B8_CLS_CONTEXT    /* DeBERTa's ContextPooler: "pooler.dense" (outside the base model) +
                         pooler_hidden_act on the first token, then "classifier" */
} b8_cls_head;

typedef struct b8_arch_desc {
    bert8_arch arch;
    const char *name;           /* what `bert8 info` prints */
    const char *model_type;     /* config.json "model_type" */
    /* config.json: the field names of the sizes and their defaults (transformers' config class) */
    const char *key_hidden, *key_layers, *key_heads, *key_inter, *key_act;
    const char *default_act;    /* hidden_act's default, NULL for "gelu" */
    int64_t vocab, hidden, layers, heads, inter, max_pos, type_vocab, pad;
    double eps;                 /* layer_norm_eps default */
    const char *key_eps;        /* its config.json field, NULL for "layer_norm_eps" */
    bool eps_fixed;             /* the model ignores config.json's layer_norm_eps (DistilBERT) */
    bool abs_pos_type;          /* config.json may name "position_embedding_type" (only "absolute") */
    double rope_theta;          /* B8_POS_ROTARY: theta when config.json gives none (rope_parameters
                                   ["rope_theta"], or the legacy top-level "rope_theta") */
    b8_ffn_kind ffn;
    bool no_bias[B8_GROUP_COUNT];            /* per Linear group (b8_group): the checkpoint has no bias; the
                                   loader uses zeros */
    /* tensors */
    const char *prefix;         /* the base model's prefix in a task checkpoint, e.g. "bert." */
    const char *layer_prefix;   /* "encoder.layer" */
    const char *parts[B8_PART_COUNT]; /* B8_PART_FFN_UP: only for B8_FFN_GLU */
    /* Groups the checkpoint stores as one fused tensor per layer ([sum of the parts' N][K], under
     * layer_prefix.i.fused[g]), or NULL. The loader splits it into the group's parts by rows: in
     * part order, except that fused_up_first puts a gated FFN's up rows before the gate's.
     * parts[] then name the pieces only in bert8's INT8 folders (which store them apart). */
    const char *fused[B8_GROUP_COUNT];
    bool fused_up_first;
    const char *emb_ln;         /* the embedding LayerNorm, NULL for "embeddings.LayerNorm" */
    const char *word_emb;       /* the word embeddings, NULL for "embeddings.word_embeddings" */
    bool ln_no_bias;            /* no LayerNorm has a bias (norm_bias false): the loader uses zeros */
    /* Pre-norm layers: LN1 normalizes the layer's input for attention (a layer without it stored,
     * ModernBERT's first, takes its input as is), LN2 the residual stream for the FFN; the
     * residual stream itself is never normalized until final_norm after the last layer. Post-norm
     * (false): LN1 after attention's residual add, LN2 after the FFN's. */
    bool pre_norm;
    const char *final_norm;     /* pre_norm: the LayerNorm after the last layer */
    /* Layers of two kinds (config.json "layer_types", else every global_attn_every_n_layers-th
     * layer global): "full_attention" and "sliding_attention", whose query i sees keys j with
     * |i - j| <= local_attention / 2; rope_parameters per kind ("global_rope_theta" and
     * "local_rope_theta" in older files) */
    bool sliding;
    double rope_theta_local;    /* sliding layers' theta default */
    bool token_types;           /* has embeddings.token_type_embeddings (and token_type_ids) */
    b8_pos_ids pos;
    const char *rel_bias;       /* relative-position bias shared by all layers, [buckets][heads]
                                   (MPNet: T5-style bidirectional log buckets), or NULL */
    const char *rel_buckets_key;/* config.json field of its bucket count */
    int64_t rel_buckets;        /* its default */
    int64_t rel_max_distance;   /* distance past which every offset shares the last bucket */
    /* Disentangled attention (DeBERTa-v2/v3): scores = (q_i.k_j + c2p + p2c) / sqrt(d x (1 + the
     * number of relative terms)), c2p[i][j] = q_i . Kr[r(i - j)], p2c[i][j] = k_j . Qr[r(i - j)],
     * where Kr and Qr are the key and query projections of the (LayerNormed) relative embeddings
     * and r the log-bucketed offset (b8_rel_log_bucket) shifted by the span. config.json decides
     * which terms exist (relative_attention, pos_att_type), whether the layer's own key_proj and
     * query_proj project the embeddings (share_att_key) or the parts rel_parts[] name, and whether
     * the word embeddings get a position table (position_biased_input). */
    bool disentangled;
    const char *rel_emb;        /* the relative embeddings [2 x span][H] (under the base prefix) */
    const char *rel_ln;         /* their LayerNorm (norm_rel_ebd "layer_norm") */
    const char *rel_parts[2];   /* per layer, without share_att_key: the key and query projections of
                                   the relative embeddings (c2p, p2c) */
    const char *rel_tables[2];  /* per layer, in bert8's INT8 folders: those projections computed
                                   (Kr, Qr [2 x span][H]), as the INT8 key/query weights cannot
                                   make them */
    bool mask_replace;          /* masked scores are set to the float minimum instead of having it
                                   added (DistilBERT) */
    bool pooler;                /* the base model may have pooler.dense */
    b8_cls_head cls;
    bool head_no_bias;          /* B8_CLS_HEAD_NORM: "head.dense" has no bias (classifier_bias false) */
    bool bare_classifier_tokens;/* with no "architectures", a lone classifier.weight means token
                                   classification (DistilBERT) rather than sequence */
    /* The masked-LM head, loaded when its transform is stored (no base prefix): a dense layer +
     * activation + LayerNorm, then the decoder to the vocabulary, tied to the word embeddings
     * unless "<mlm_decoder>.weight" is stored; its bias is mlm_bias or "<mlm_decoder>.bias". */
    const char *mlm_dense, *mlm_norm, *mlm_decoder, *mlm_bias;
    /* Task-specific LoRA adapters may be stored on the embeddings and on every Linear (Jina v3's
     * XLMRobertaLoRA): config.json's lora_adaptations, lora_rank and lora_alpha are read, and the
     * loader folds the chosen task's adapters into the base weights (model/lora.h) */
    bool lora;
    bool mlm_gelu;              /* the transform's activation is exact GELU whatever hidden_act
                                   says (RoBERTa, XLM-R, MPNet); else hidden_act */
} b8_arch_desc;

extern const b8_arch_desc b8_arch_table[];
extern const int b8_arch_count;

/* The row for config.json's model_type, or NULL. */
const b8_arch_desc *b8_arch_by_model_type(const char *model_type);
/* The row of an architecture (never NULL for a valid enum value; the BERT row otherwise). */
const b8_arch_desc *b8_arch_of(bert8_arch arch);
/* Writes "bert, distilbert, ...": the model types bert8 reads, for messages. */
void b8_arch_model_types(char *out, size_t cap);

/* The bucket of relative position rel = key - query for the T5/MPNet bidirectional scheme with
 * `buckets` buckets and max_distance: exact small offsets, log-spaced larger ones, the same
 * float steps as transformers. */
int64_t b8_rel_bucket(int64_t rel, int64_t buckets, int64_t max_distance);

/* DeBERTa's relative position of offset rel = query - key: rel itself while |rel| <= buckets / 2,
 * beyond it sign(rel) (ceil(log(|rel| / mid) / log((max_position - 1) / mid) x (mid - 1)) + mid)
 * with mid = buckets / 2, in transformers' float steps; rel unchanged when buckets or
 * max_position is not positive. */
int64_t b8_rel_log_bucket(int64_t rel, int64_t buckets, int64_t max_position);

#endif
