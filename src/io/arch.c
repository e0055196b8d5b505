/* arch.c: the architecture table (see arch.h). Defaults are those of transformers' config
 * classes; tensor names those of its modeling files. */
#include "io/arch.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define BERT_PARTS                                                                                                   \
    {"attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",                \
     "attention.output.LayerNorm", "intermediate.dense", "output.dense", "output.LayerNorm"}

/* JinaEmbeddingsV3's layer (GTE, NomicBERT) as save_pretrained writes it: Q, K and V fused into one
 * tensor (parts[] name the pieces in INT8 folders), the output projection, the two LayerNorms,
 * the FFN's first Linear (a gated FFN's gate), its last, and a gated FFN's up projection. */
#define ROTARY_PARTS(attn, out, ln1, ffn_in, ffn_out, ln2, up)                                                     \
    {[B8_PART_Q] = attn ".q_proj", [B8_PART_K] = attn ".k_proj", [B8_PART_V] = attn ".v_proj",                     \
     [B8_PART_ATTN_OUT] = out, [B8_PART_LN1] = ln1, [B8_PART_FFN_IN] = ffn_in, [B8_PART_FFN_OUT] = ffn_out,         \
     [B8_PART_LN2] = ln2, [B8_PART_FFN_UP] = up}

/* BertConfig's sizes; RoBERTa-style rows change the vocabulary, padding and positions. */
#define BERT_KEYS "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "hidden_act"

const b8_arch_desc b8_arch_table[] = {
    {.arch = BERT8_ARCH_BERT, .name = "bert", .model_type = "bert", BERT_KEYS,
     .vocab = 30522, .hidden = 768, .layers = 12, .heads = 12, .inter = 3072, .max_pos = 512, .type_vocab = 2,
     .pad = 0, .eps = 1e-12, .abs_pos_type = true,
     .prefix = "bert.", .layer_prefix = "encoder.layer", .parts = BERT_PARTS, .token_types = true,
     .pos = B8_POS_ABSOLUTE, .pooler = true, .cls = B8_CLS_POOLER,
     .mlm_dense = "cls.predictions.transform.dense", .mlm_norm = "cls.predictions.transform.LayerNorm",
     .mlm_decoder = "cls.predictions.decoder", .mlm_bias = "cls.predictions.bias"},
    {.arch = BERT8_ARCH_DISTILBERT, .name = "distilbert", .model_type = "distilbert",
     .key_hidden = "dim", .key_layers = "n_layers", .key_heads = "n_heads", .key_inter = "hidden_dim",
     .key_act = "activation",
     .vocab = 30522, .hidden = 768, .layers = 6, .heads = 12, .inter = 3072, .max_pos = 512, .type_vocab = 0,
     .pad = 0, .eps = 1e-12, .eps_fixed = true,
     .prefix = "distilbert.", .layer_prefix = "transformer.layer",
     .parts = {"attention.q_lin", "attention.k_lin", "attention.v_lin", "attention.out_lin", "sa_layer_norm",
               "ffn.lin1", "ffn.lin2", "output_layer_norm"},
     .pos = B8_POS_ABSOLUTE, .mask_replace = true, .cls = B8_CLS_PRE_RELU, .bare_classifier_tokens = true,
     .mlm_dense = "vocab_transform", .mlm_norm = "vocab_layer_norm", .mlm_decoder = "vocab_projector",
     .mlm_bias = "vocab_projector.bias"},
    {.arch = BERT8_ARCH_XLMR, .name = "xlm-roberta", .model_type = "xlm-roberta", BERT_KEYS,
     .vocab = 30522, .hidden = 768, .layers = 12, .heads = 12, .inter = 3072, .max_pos = 512, .type_vocab = 2,
     .pad = 1, .eps = 1e-12, .abs_pos_type = true,
     .prefix = "roberta.", .layer_prefix = "encoder.layer", .parts = BERT_PARTS, .token_types = true,
     .pos = B8_POS_FROM_PAD, .pooler = true, .cls = B8_CLS_DENSE_TANH,
     .mlm_dense = "lm_head.dense", .mlm_norm = "lm_head.layer_norm", .mlm_decoder = "lm_head.decoder",
     .mlm_bias = "lm_head.bias", .mlm_gelu = true},
    {.arch = BERT8_ARCH_ROBERTA, .name = "roberta", .model_type = "roberta", BERT_KEYS,
     .vocab = 50265, .hidden = 768, .layers = 12, .heads = 12, .inter = 3072, .max_pos = 512, .type_vocab = 2,
     .pad = 1, .eps = 1e-12, .abs_pos_type = true,
     .prefix = "roberta.", .layer_prefix = "encoder.layer", .parts = BERT_PARTS, .token_types = true,
     .pos = B8_POS_FROM_PAD, .pooler = true, .cls = B8_CLS_DENSE_TANH,
     .mlm_dense = "lm_head.dense", .mlm_norm = "lm_head.layer_norm", .mlm_decoder = "lm_head.decoder",
     .mlm_bias = "lm_head.bias", .mlm_gelu = true},
    {.arch = BERT8_ARCH_CAMEMBERT, .name = "camembert", .model_type = "camembert", BERT_KEYS,
     .vocab = 30522, .hidden = 768, .layers = 12, .heads = 12, .inter = 3072, .max_pos = 512, .type_vocab = 2,
     .pad = 1, .eps = 1e-12, .abs_pos_type = true,
     .prefix = "roberta.", .layer_prefix = "encoder.layer", .parts = BERT_PARTS, .token_types = true,
     .pos = B8_POS_FROM_PAD, .pooler = true, .cls = B8_CLS_DENSE_TANH,
     .mlm_dense = "lm_head.dense", .mlm_norm = "lm_head.layer_norm", .mlm_decoder = "lm_head.decoder",
     .mlm_bias = "lm_head.bias", .mlm_gelu = true},
    {.arch = BERT8_ARCH_MPNET, .name = "mpnet", .model_type = "mpnet", BERT_KEYS,
     .vocab = 30527, .hidden = 768, .layers = 12, .heads = 12, .inter = 3072, .max_pos = 512, .type_vocab = 0,
     .pad = 1, .eps = 1e-12,
     .prefix = "mpnet.", .layer_prefix = "encoder.layer",
     .parts = {"attention.attn.q", "attention.attn.k", "attention.attn.v", "attention.attn.o",
               "attention.LayerNorm", "intermediate.dense", "output.dense", "output.LayerNorm"},
     .pos = B8_POS_FROM_PAD, .rel_bias = "encoder.relative_attention_bias.weight",
     .rel_buckets_key = "relative_attention_num_buckets", .rel_buckets = 32, .rel_max_distance = 128,
     .pooler = true, .cls = B8_CLS_DENSE_TANH,
     .mlm_dense = "lm_head.dense", .mlm_norm = "lm_head.layer_norm", .mlm_decoder = "lm_head.decoder",
     .mlm_bias = "lm_head.bias", .mlm_gelu = true},
    /* The JinaEmbeddingsV3 layer family: post-norm, rotary positions, no position table, fused QKV
     * (tensor names as transformers' save_pretrained writes them, its conversion_mapping.py). */
    {.arch = BERT8_ARCH_GTE, .name = "gte", .model_type = "gte", BERT_KEYS,
     .vocab = 250048, .hidden = 768, .layers = 12, .heads = 12, .inter = 3072, .max_pos = 8192, .type_vocab = 1,
     .pad = 1, .eps = 1e-12, .rope_theta = 160000.0, .ffn = B8_FFN_GLU, .no_bias = {[B8_GROUP_FFN_IN] = true},
     .prefix = "gte.", .layer_prefix = "encoder.layer",
     .parts = ROTARY_PARTS("attention", "attention.o_proj", "attn_ln", "mlp.gate_proj", "mlp.down_proj", "mlp_ln",
                           "mlp.up_proj"),
     .fused = {[B8_GROUP_QKV] = "attention.qkv_proj", [B8_GROUP_FFN_IN] = "mlp.up_gate_proj"}, .fused_up_first = true,
     .token_types = true, .pos = B8_POS_ROTARY, .pooler = true, .cls = B8_CLS_POOLER,
     .mlm_dense = "lm_head.dense", .mlm_norm = "lm_head.norm", .mlm_decoder = "lm_head.decoder",
     .mlm_bias = "lm_head.bias", .mlm_gelu = true},
    {.arch = BERT8_ARCH_NOMIC_BERT, .name = "nomic_bert", .model_type = "nomic_bert", BERT_KEYS,
     .default_act = "silu",
     .vocab = 30528, .hidden = 768, .layers = 12, .heads = 12, .inter = 3072, .max_pos = 2048, .type_vocab = 2,
     .pad = 0, .eps = 1e-12, .rope_theta = 1000.0, .ffn = B8_FFN_GLU,
     .no_bias = {[B8_GROUP_QKV] = true, [B8_GROUP_ATTN_OUT] = true, [B8_GROUP_FFN_IN] = true,
                 [B8_GROUP_FFN_OUT] = true},
     .prefix = "nomic_bert.", .layer_prefix = "encoder.layers",
     .parts = ROTARY_PARTS("attn", "attn.out_proj", "norm1", "mlp.fc12", "mlp.fc2", "norm2", "mlp.fc11"),
     .fused = {[B8_GROUP_QKV] = "attn.Wqkv"}, .emb_ln = "emb_ln",
     .token_types = true, .pos = B8_POS_ROTARY, .pooler = true, .cls = B8_CLS_POOLER},
    {.arch = BERT8_ARCH_JINA_V3, .name = "jina_embeddings_v3", .model_type = "jina_embeddings_v3", BERT_KEYS,
     .vocab = 250002, .hidden = 1024, .layers = 24, .heads = 16, .inter = 4096, .max_pos = 8194, .type_vocab = 1,
     .pad = 1, .eps = 1e-5, .rope_theta = 20000.0, .ffn = B8_FFN_PLAIN,
     .prefix = "roberta.", .layer_prefix = "encoder.layers",
     .parts = ROTARY_PARTS("mixer", "mixer.out_proj", "norm1", "mlp.fc1", "mlp.fc2", "norm2", NULL),
     .fused = {[B8_GROUP_QKV] = "mixer.Wqkv"}, .emb_ln = "emb_ln", .lora = true,
     .token_types = true, .pos = B8_POS_ROTARY, .pooler = true, .cls = B8_CLS_DENSE_TANH,
     .mlm_dense = "lm_head.dense", .mlm_norm = "lm_head.layer_norm", .mlm_decoder = "lm_head.decoder",
     .mlm_bias = "lm_head.bias", .mlm_gelu = true},
    /* ModernBERT: pre-norm, rotary positions with a theta per layer kind, alternating global and
     * sliding-window attention, GeGLU (Wi's first half is activated), no biases anywhere */
    {.arch = BERT8_ARCH_MODERNBERT, .name = "modernbert", .model_type = "modernbert",
     .key_hidden = "hidden_size", .key_layers = "num_hidden_layers", .key_heads = "num_attention_heads",
     .key_inter = "intermediate_size", .key_act = "hidden_activation",
     .vocab = 50368, .hidden = 768, .layers = 22, .heads = 12, .inter = 1152, .max_pos = 8192, .type_vocab = 0,
     .pad = 50283, .eps = 1e-5, .key_eps = "norm_eps", .rope_theta = 160000.0, .rope_theta_local = 10000.0,
     .ffn = B8_FFN_GLU,
     .no_bias = {[B8_GROUP_QKV] = true, [B8_GROUP_ATTN_OUT] = true, [B8_GROUP_FFN_IN] = true,
                 [B8_GROUP_FFN_OUT] = true},
     .prefix = "model.", .layer_prefix = "layers",
     .parts = ROTARY_PARTS("attn", "attn.Wo", "attn_norm", "mlp.Wi_gate", "mlp.Wo", "mlp_norm", "mlp.Wi_up"),
     .fused = {[B8_GROUP_QKV] = "attn.Wqkv", [B8_GROUP_FFN_IN] = "mlp.Wi"}, .emb_ln = "embeddings.norm",
     .word_emb = "embeddings.tok_embeddings", .ln_no_bias = true, .pre_norm = true, .final_norm = "final_norm",
     .sliding = true, .pos = B8_POS_ROTARY, .cls = B8_CLS_HEAD_NORM, .head_no_bias = true,
     .mlm_dense = "head.dense", .mlm_norm = "head.norm", .mlm_decoder = "decoder", .mlm_bias = "decoder.bias"},
    /* DeBERTa-v2/v3: BERT's post-norm layer with disentangled attention (relative embeddings
     * projected by the layer's key/query, log-bucketed offsets), an optional position table and
     * token types, no pooler in the base model, the ContextPooler before the classifier, the
     * legacy masked-LM head (BERT's cls.predictions names, decoder tied) */
    {.arch = BERT8_ARCH_DEBERTA_V2, .name = "deberta-v2", .model_type = "deberta-v2", BERT_KEYS,
     .vocab = 128100, .hidden = 1536, .layers = 24, .heads = 24, .inter = 6144, .max_pos = 512, .type_vocab = 0,
     .pad = 0, .eps = 1e-7,
     .prefix = "deberta.", .layer_prefix = "encoder.layer",
     .parts = {"attention.self.query_proj", "attention.self.key_proj", "attention.self.value_proj",
               "attention.output.dense", "attention.output.LayerNorm", "intermediate.dense", "output.dense",
               "output.LayerNorm"},
     .token_types = true, .pos = B8_POS_ABSOLUTE, .disentangled = true, .rel_emb = "encoder.rel_embeddings.weight",
     .rel_ln = "encoder.LayerNorm", .rel_parts = {"attention.self.pos_key_proj", "attention.self.pos_query_proj"},
     .rel_tables = {"attention.self.rel_key_table", "attention.self.rel_query_table"}, .mask_replace = true,
     .cls = B8_CLS_CONTEXT,
     .mlm_dense = "cls.predictions.transform.dense", .mlm_norm = "cls.predictions.transform.LayerNorm",
     .mlm_decoder = "cls.predictions.decoder", .mlm_bias = "cls.predictions.bias"},
};
const int b8_arch_count = (int)(sizeof b8_arch_table / sizeof *b8_arch_table);

const b8_arch_desc *b8_arch_by_model_type(const char *model_type) {
    for (int i = 0; model_type && i < b8_arch_count; i++)
        if (!strcmp(b8_arch_table[i].model_type, model_type)) return &b8_arch_table[i];
    return NULL;
}

const b8_arch_desc *b8_arch_of(bert8_arch arch) {
    for (int i = 0; i < b8_arch_count; i++)
        if (b8_arch_table[i].arch == arch) return &b8_arch_table[i];
    return &b8_arch_table[0];
}

void b8_arch_model_types(char *out, size_t cap) {
    size_t n = 0;
    if (!cap) return;
    out[0] = '\0';
    for (int i = 0; i < b8_arch_count; i++) {
        int w = snprintf(out + n, cap - n, "%s%s", i ? ", " : "", b8_arch_table[i].model_type);
        if (w < 0 || (size_t)w >= cap - n) break;
        n += (size_t)w;
    }
}

int64_t b8_rel_bucket(int64_t rel, int64_t buckets, int64_t max_distance) {
    const int64_t half = buckets / 2, exact = half / 2;
    int64_t ret = rel > 0 ? half : 0; /* keys after the query get the upper half */
    const int64_t n = rel < 0 ? -rel : rel;
    if (n < exact) return ret + n;
    /* float steps as transformers takes them: log(n / exact) / log(max / exact) * (half - exact),
     * truncated */
    const float lg = logf((float)n / (float)exact) / (float)log((double)max_distance / (double)exact);
    int64_t v = exact + (int64_t)(lg * (float)(half - exact));
    if (v > half - 1) v = half - 1;
    return ret + v;
}

int64_t b8_rel_log_bucket(int64_t rel, int64_t buckets, int64_t max_position) {
    if (buckets <= 0 || max_position <= 0) return rel;
    const int64_t mid = buckets / 2, n = rel < 0 ? -rel : rel;
    if (n <= mid) return rel;
    /* transformers' float32 steps: |rel| / mid, its log over log((max_position - 1) / mid) (a
     * double rounded to float), times mid - 1, rounded up */
    const float den = logf((float)((double)(max_position - 1) / (double)mid));
    float v = ceilf(logf((float)n / (float)mid) / den * (float)(mid - 1)) + (float)mid;
    if (!(v < 1e9f)) v = 1e9f; /* past any span: the caller clamps it to the last position */
    return rel < 0 ? -(int64_t)v : (int64_t)v;
}

const char *bert8_arch_name(bert8_arch arch) {
    for (int i = 0; i < b8_arch_count; i++)
        if (b8_arch_table[i].arch == arch) return b8_arch_table[i].name;
    return "unknown";
}
