/* bert8_pipeline.h: task pipelines of bert8: text in, task results out.
 *
 * A pipeline is a model and its tokenizer with the task logic every front end needs: text
 * classification (softmax, sigmoid, id2label), sentence embeddings (a sentence-transformers
 * folder's modules: every pooling mode, Dense, Normalize; prompts), cross-encoder reranking, extractive question
 * answering (strided windows, best span, offsets into the original text) and token
 * classification (the aggregation strategies of the transformers pipeline). Each call takes
 * many texts, tokenizes them, groups them into forward passes of at most max_batch_tokens real
 * tokens (longest first; padding-free by default) and returns one result per input in input
 * order.
 *
 * Threads: a pipeline is immutable once opened; any number of threads may call it at once (it
 * keeps a pool of sessions, one per concurrent call). Each call runs on the process-wide OpenMP
 * pool of the calling thread.
 *
 * Texts carry explicit byte lengths (NUL bytes are ordinary characters) and must be UTF-8;
 * invalid UTF-8 fails the call with BERT8_ERR_ENCODING naming the input and the byte offset.
 * Every call reports failure through its status and, when err is not NULL, a message of at most
 * err_len bytes; a failed call writes no partial results that look valid (output buffers are
 * left in an unspecified state, allocated results are freed). Offsets are byte offsets into
 * the input text, with character (code point) offsets beside them as the Hugging Face
 * pipelines report them.
 *
 * Limits (bert8_pipeline_params, with documented defaults) bound what one call may cost: bytes
 * per text, inputs per call, overflow windows per text. A request past a limit fails with
 * BERT8_ERR_TOO_LARGE before any model work. */
#ifndef BERT8_PIPELINE_H
#define BERT8_PIPELINE_H

#include "bert8.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bert8_pipeline bert8_pipeline;

typedef enum bert8_task {
    BERT8_TASK_EMBED,    /* a base model: sentence embeddings */
    BERT8_TASK_CLASSIFY, /* a sequence classification head (also rerank with one label) */
    BERT8_TASK_QA,       /* a question answering head */
    BERT8_TASK_NER       /* a token classification head */
} bert8_task;

typedef enum bert8_pooling {
    BERT8_POOLING_DEFAULT, /* the folder's 1_Pooling/config.json, else mean */
    BERT8_POOLING_CLS,
    BERT8_POOLING_MEAN,
    BERT8_POOLING_MAX,
    BERT8_POOLING_MEAN_SQRT_LEN, /* sum / sqrt(tokens) (mean_sqrt_len_tokens) */
    BERT8_POOLING_WEIGHTED_MEAN, /* token t weighted t + 1 (weightedmean) */
    BERT8_POOLING_LAST_TOKEN     /* the last real token (lasttoken) */
} bert8_pooling;

typedef struct bert8_pipeline_params {
    int threads;              /* size of the OpenMP pool; 0: leave it as it is */
    int64_t max_batch_tokens; /* real tokens per forward pass (default 8192) */
    int64_t max_batch_size;   /* sequences per forward pass (default 128) */
    int64_t max_length;       /* tokens per sequence; 0: the model's and tokenizer's limit */
    int padding_free;         /* 1 (default): packed forward passes; 0: padded batches */
    /* limits per call */
    int64_t max_text_bytes;   /* bytes per text (default 1 MiB) */
    int64_t max_inputs;       /* texts per call (default 1,000,000) */
    int64_t max_windows;      /* overflow windows per text for qa and ner (default 256) */
    /* embeddings: how the folder's settings are overridden */
    bert8_pooling pooling;    /* DEFAULT: the folder's */
    int normalize;            /* -1 (default): the folder's (a Normalize module), 0, 1 */
    /* sentence-transformers folders (strings read while opening only) */
    const char *dense_path;   /* NULL: modules.json's; else a Dense folder (under dir, or absolute)
                                 that replaces the one Dense module, or follows the pooling when
                                 modules.json lists none (TEI's --dense-path) */
    const char *default_prompt_name; /* NULL: config_sentence_transformers.json's; else a name
                                 of its prompts applied when a call names none */
    const char *default_prompt; /* NULL: as default_prompt_name; else this text ("" for none),
                                 applied when a call names none */
    const char *lora_task;    /* bert8_pipeline_open: the LoRA task folded into the model's weights
                                 (bert8_load_params.lora_task); NULL: none */
} bert8_pipeline_params;

bert8_pipeline_params bert8_default_pipeline_params(void);

/* Opens the model and tokenizer of a folder, with its sentence-transformers modules when it
 * has them: modules.json in order (Transformer, Pooling, Dense, Normalize; another module is
 * BERT8_ERR_UNSUPPORTED naming it), prompts, max_seq_length and do_lower_case. */
bert8_status bert8_pipeline_open(const char *dir, const bert8_pipeline_params *params, bert8_pipeline **out,
                                 char *err, size_t err_len);
/* A pipeline over a model and a tokenizer the caller keeps (e.g. a model quantized in memory);
 * both must outlive the pipeline. dir (may be NULL) is read for 1_Pooling/config.json and
 * modules.json. */
bert8_status bert8_pipeline_wrap(const bert8_model *model, const bert8_tokenizer *tok, const char *dir,
                                 const bert8_pipeline_params *params, bert8_pipeline **out, char *err,
                                 size_t err_len);
void bert8_pipeline_free(bert8_pipeline *p); /* NULL is a no-op */

typedef struct bert8_pipeline_info {
    bert8_task task;            /* what the model's head does */
    const bert8_model_info *model;
    int64_t max_length;         /* tokens per sequence */
    int64_t dim;                /* embedding width: the pooled hidden states (times the pooling
                                   modes concatenated), or the last Dense module's out_features */
    int64_t num_labels;         /* classification / token classification labels (0 otherwise) */
    bert8_pooling pooling;      /* the pooling embed uses by default (never DEFAULT; the first
                                   mode when the folder concatenates several) */
    int normalize;              /* 1 when embed normalises by default */
    int64_t dense_modules;      /* Dense modules after the pooling */
    int include_prompt;         /* 0: the pooling leaves the prompt's tokens out */
    int64_t prompts;            /* named prompts (bert8_pipeline_prompt) */
    const char *default_prompt; /* the prompt a call without one gets; NULL: none */
    bert8_pipeline_params params;
} bert8_pipeline_info;

const bert8_pipeline_info *bert8_pipeline_get_info(const bert8_pipeline *p);
const bert8_model *bert8_pipeline_model(const bert8_pipeline *p);
const bert8_tokenizer *bert8_pipeline_tokenizer(const bert8_pipeline *p);
/* id2label name of label i, or NULL. */
const char *bert8_pipeline_label(const bert8_pipeline *p, int64_t i);
/* Named prompt i (config_sentence_transformers.json's "prompts"): 1 with *name and *text set
 * (owned by the pipeline), 0 when i is out of range. */
int bert8_pipeline_prompt(const bert8_pipeline *p, int64_t i, const char **name, const char **text);

/* ---- Per-call options ---------------------------------------------------------------- */

typedef enum bert8_score_fn {
    BERT8_SCORE_AUTO,    /* as transformers: sigmoid for one label, softmax for several */
    BERT8_SCORE_SOFTMAX,
    BERT8_SCORE_SIGMOID,
    BERT8_SCORE_NONE     /* raw logits */
} bert8_score_fn;

typedef enum bert8_side { BERT8_SIDE_RIGHT, BERT8_SIDE_LEFT } bert8_side;

typedef struct bert8_run_options {
    int truncate;            /* 1 (default): cut texts past max_length; 0: such a text fails the
                                call with BERT8_ERR_TOO_LARGE naming it */
    bert8_side truncation_side; /* which end is cut (default RIGHT) */
    int64_t max_length;      /* 0 (default): the pipeline's */
} bert8_run_options;

bert8_run_options bert8_default_run_options(void);

/* ---- Tasks ----------------------------------------------------------------------------- */

/* Sequence classification of n texts (pairs may be NULL, or hold entries with data NULL for
 * single texts). scores: [n][num_labels], after score_fn. */
bert8_status bert8_classify(const bert8_pipeline *p, int64_t n, const bert8_text *texts, const bert8_text *pairs,
                            const bert8_run_options *opt, bert8_score_fn score_fn, float *scores, char *err,
                            size_t err_len);

typedef struct bert8_embed_options {
    bert8_pooling pooling;   /* DEFAULT: the pipeline's */
    int normalize;           /* -1: the pipeline's, 0, 1 (L2, as sentence-transformers' Normalize) */
    int64_t dimensions;      /* 0: all; else keep the first `dimensions` values (Matryoshka),
                                after the Dense modules, before normalising */
    /* the prompt prepended to every text, as sentence-transformers' encode(prompt=,
     * prompt_name=): prompt.data non-NULL: that text ("" for none); else prompt_name non-NULL: a
     * named prompt (an unknown name is BERT8_ERR_INVALID_ARG listing the names); else the
     * pipeline's default_prompt. A prompt with text pairs is BERT8_ERR_INVALID_ARG. */
    const char *prompt_name;
    bert8_text prompt;
} bert8_embed_options;

bert8_embed_options bert8_default_embed_options(void);

/* Sentence embeddings of n texts (pairs as for classify). out: [n][dim], dim = the options'
 * dimensions or the hidden size. An empty text (of a pair: both texts empty) is
 * BERT8_ERR_INVALID_ARG naming it ("text 2 is empty: `inputs` cannot be empty"), as TEI refuses it:
 * it has nothing to embed but the special tokens. So do bert8_embed_tokens and bert8_embed_sparse. */
bert8_status bert8_embed(const bert8_pipeline *p, int64_t n, const bert8_text *texts, const bert8_text *pairs,
                         const bert8_run_options *opt, const bert8_embed_options *eo, float *out, char *err,
                         size_t err_len);

/* The last hidden state of every token (special tokens included), per text. */
typedef struct bert8_token_embeddings {
    int64_t n, dim;
    const int64_t *offsets; /* [n + 1]: text i has rows [offsets[i], offsets[i+1]) */
    const float *data;      /* [offsets[n]][dim] */
    void *priv;
} bert8_token_embeddings;

bert8_status bert8_embed_tokens(const bert8_pipeline *p, int64_t n, const bert8_text *texts,
                                const bert8_run_options *opt, bert8_token_embeddings *out, char *err,
                                size_t err_len);
void bert8_token_embeddings_free(bert8_token_embeddings *t); /* NULL is a no-op */

/* ---- Pre-tokenized inputs ---------------------------------------------------------------
 * A front end that tokenizes a request itself (to count and validate its tokens) hands the
 * token ids over rather than the texts, so that each text is tokenized once. */

typedef struct bert8_token_ids {
    const int32_t *ids;      /* [len], special tokens included */
    const int32_t *type_ids; /* [len] or NULL (all 0) */
    int64_t len;             /* 1..the pipeline's max_length */
    int64_t prompt_len;      /* leading tokens that are the prompt: a pooling that excludes the
                                prompt (include_prompt false) leaves them out; 0: none */
} bert8_token_ids;

/* Encodes n texts (and pairs) as bert8_embed (eo not NULL: with its prompt, resolved as there)
 * or bert8_classify (eo NULL) would: lowercased when the folder says, cut at the options'
 * max_length; one row per input (rows == n). With opt->truncate 0 rows are left whole: a row
 * longer than max_length is the caller's to refuse (the *_ids calls do). *prompt_len (may be
 * NULL): the prompt's tokens at the start of each row, as bert8_token_ids.prompt_len wants. */
bert8_status bert8_pipeline_encode(const bert8_pipeline *p, int64_t n, const bert8_text *texts,
                                   const bert8_text *pairs, const bert8_run_options *opt,
                                   const bert8_embed_options *eo, bert8_encoding *enc, int64_t *prompt_len,
                                   char *err, size_t err_len);

/* bert8_embed, bert8_classify and bert8_embed_tokens over pre-tokenized inputs (eo's prompt is
 * ignored: it is in the ids). Ids must be in the model's vocabulary, lengths in
 * [1, max_length]. */
bert8_status bert8_embed_ids(const bert8_pipeline *p, int64_t n, const bert8_token_ids *in,
                             const bert8_embed_options *eo, float *out, char *err, size_t err_len);
bert8_status bert8_classify_ids(const bert8_pipeline *p, int64_t n, const bert8_token_ids *in,
                                bert8_score_fn score_fn, float *scores, char *err, size_t err_len);
bert8_status bert8_embed_tokens_ids(const bert8_pipeline *p, int64_t n, const bert8_token_ids *in,
                                    bert8_token_embeddings *out, char *err, size_t err_len);

/* Cross-encoder reranking: the score of (query, texts[i]) for each i. One-label heads give
 * sigmoid(logit) (raw_scores: the logit); several labels give softmax(logits)[last] (raw: that
 * logit). order (may be NULL): [n] indices sorted by descending score (stable). A pair whose query
 * and text are both empty is BERT8_ERR_INVALID_ARG naming it, as TEI refuses it. */
bert8_status bert8_rerank(const bert8_pipeline *p, bert8_text query, int64_t n, const bert8_text *texts,
                          const bert8_run_options *opt, int raw_scores, float *scores, int64_t *order, char *err,
                          size_t err_len);

typedef struct bert8_qa_options {
    int64_t max_answer_len;  /* tokens (default 30) */
    int64_t doc_stride;      /* overlap of context windows in tokens; -1 (default):
                                min(128, max_length / 3) */
    int64_t max_length;      /* tokens per window; 0 (default): min(384, the model's limit) */
    int score_logits;        /* 0 (default): p(start) p(end), each a softmax over the window's
                                context tokens (transformers' pipeline); 1: start + end logits
                                (the SQuAD reference post-processing) */
} bert8_qa_options;

bert8_qa_options bert8_default_qa_options(void);

typedef struct bert8_qa_answer {
    int found;                     /* 0 when the context is empty */
    double score;
    int64_t start, end;            /* bytes into the context, blanks at both ends trimmed */
    int64_t start_char, end_char;  /* the same in characters */
} bert8_qa_answer;

bert8_status bert8_qa(const bert8_pipeline *p, int64_t n, const bert8_text *questions, const bert8_text *contexts,
                      const bert8_qa_options *qo, bert8_qa_answer *out, char *err, size_t err_len);

typedef enum bert8_aggregation {
    BERT8_AGG_NONE,    /* every token with its own label */
    BERT8_AGG_SIMPLE,  /* tokens grouped into entities by their B-/I- tags */
    BERT8_AGG_FIRST,   /* words take the label of their first token, then grouped */
    BERT8_AGG_AVERAGE, /* words take the argmax of their tokens' mean scores, then grouped */
    BERT8_AGG_MAX      /* words take the label of their most confident token, then grouped */
} bert8_aggregation;

typedef struct bert8_ner_options {
    bert8_aggregation aggregation; /* default FIRST */
    int64_t stride;          /* overlap of windows for long texts; -1 (default): max_length / 4 */
    int keep_outside;        /* 1: entities keep the "O" label too; 0 (default): dropped as
                                transformers' ignore_labels does */
} bert8_ner_options;

bert8_ner_options bert8_default_ner_options(void);

typedef struct bert8_entity {
    const char *label;             /* the token's or the group's label (owned by the pipeline) */
    float score;
    int64_t start, end;            /* bytes into the text (blanks at both ends trimmed) */
    int64_t start_char, end_char;
    int64_t index;                 /* NONE: the token's position in its window; else -1 */
} bert8_entity;

typedef struct bert8_ner_result {
    int64_t n;
    /* per text i: entities [entity_offsets[i], entity_offsets[i+1]) */
    const int64_t *entity_offsets;
    const bert8_entity *entities;
    /* per text i: words [word_offsets[i], word_offsets[i+1]): every word (tokens for NONE and
     * SIMPLE) with its label before grouping, "O" included */
    const int64_t *word_offsets;
    const bert8_entity *words;
    void *priv;
} bert8_ner_result;

bert8_status bert8_ner(const bert8_pipeline *p, int64_t n, const bert8_text *texts, const bert8_ner_options *no,
                       bert8_ner_result *out, char *err, size_t err_len);
void bert8_ner_result_free(bert8_ner_result *r); /* NULL is a no-op */

/* ---- Fill-mask (models with a masked-LM head, bert8_model_info.has_mlm_head) ---------- */

typedef struct bert8_fill_mask_pred {
    int32_t token;          /* vocabulary id */
    float score;            /* softmax probability of the token at the mask */
    const char *token_str;  /* the token decoded alone */
    const char *sequence;   /* the text decoded with the token in place of this mask (special
                               tokens skipped when the text has one mask, as transformers does) */
} bert8_fill_mask_pred;

typedef struct bert8_fill_mask_result {
    int64_t n;                   /* texts */
    const int64_t *mask_offsets; /* [n + 1]: text i's masks are [mask_offsets[i], mask_offsets[i+1]),
                                    in the order they appear */
    int64_t top_k;               /* predictions per mask */
    const bert8_fill_mask_pred *preds; /* [masks][top_k]: each mask's best first */
    void *priv;
} bert8_fill_mask_result;

/* transformers' fill-mask pipeline: every text needs at least one mask token (the tokenizer's,
 * e.g. "[MASK]" or "<mask>"); top_k in [1, vocab]. */
bert8_status bert8_fill_mask(const bert8_pipeline *p, int64_t n, const bert8_text *texts, const bert8_run_options *opt,
                             int64_t top_k, bert8_fill_mask_result *out, char *err, size_t err_len);
void bert8_fill_mask_result_free(bert8_fill_mask_result *r); /* NULL is a no-op */

/* ---- Sparse embeddings: SPLADE (models with a masked-LM head) -------------------------- */

typedef struct bert8_sparse_embeddings {
    int64_t n, dim;          /* texts; the vocabulary size */
    const int64_t *offsets;  /* [n + 1]: text i's entries are [offsets[i], offsets[i+1]) */
    const int32_t *indices;  /* vocabulary ids, increasing within a text */
    const float *values;     /* their weights, all > 0 */
    void *priv;
} bert8_sparse_embeddings;

/* SPLADE: max over a text's tokens of log(1 + relu(masked-LM logits)), the non-zero entries
 * (sentence-transformers' SparseEncoder with SpladePooling, TEI's --pooling splade). */
bert8_status bert8_embed_sparse(const bert8_pipeline *p, int64_t n, const bert8_text *texts,
                                const bert8_run_options *opt, bert8_sparse_embeddings *out, char *err, size_t err_len);
/* The same over pre-tokenized inputs (as bert8_embed_ids takes them). */
bert8_status bert8_embed_sparse_ids(const bert8_pipeline *p, int64_t n, const bert8_token_ids *in,
                                    bert8_sparse_embeddings *out, char *err, size_t err_len);
void bert8_sparse_embeddings_free(bert8_sparse_embeddings *r); /* NULL is a no-op */

#ifdef __cplusplus
}
#endif
#endif
