/* pipeline_internal.h: what the task files of the pipeline layer share: the pipeline object,
 * its session pool, the row runner (rows of token ids -> batched forward passes -> per-row
 * outputs) and small helpers. The pipeline layer sits on the public API (bert8.h) only. */
#ifndef BERT8_PIPELINE_INTERNAL_H
#define BERT8_PIPELINE_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>

#include "base/common.h"
#include "bert8_pipeline.h"
#include "io/st_config.h"

struct bert8_pipeline {
    bert8_model *own_model; /* NULL when wrapped */
    bert8_tokenizer *own_tok;
    const bert8_model *model;
    const bert8_tokenizer *tok;
    bert8_pipeline_info info;
    bool use_types; /* pass token_type_ids (the model has more than one type) */
    /* embeddings: the sentence-transformers modules after the transformer */
    b8_st_folder st;        /* the folder as read (prompts, do_lower_case, the module chain) */
    unsigned pool;          /* B8_POOL_* bits of the default pooling */
    size_t n_steps;         /* st.steps[0..n_steps): the chain, a trailing Normalize dropped
                               (it is info.normalize) */
    char *default_prompt;   /* NULL: none */
    /* sessions not in use, for the next call */
    pthread_mutex_t mu;
    bert8_session **idle;
    size_t n_idle, cap_idle;
};

/* One encoded sequence to run: tokens [0, len) of ids/types (types may be NULL). */
typedef struct b8_row {
    const int32_t *ids, *types;
    int64_t len;
    int64_t prompt_len; /* leading prompt tokens (a pooling without the prompt skips them) */
    int64_t tag; /* the caller's index for this row */
} b8_row;

/* What the model produced for one row; pointers valid during the callback only. */
typedef struct b8_rowout {
    int64_t tag, len, prompt_len;
    const float *hidden;      /* [len][H] */
    const float *pooled;      /* [H] or NULL */
    const float *seq_logits;  /* [labels] (sequence classification) or NULL */
    const float *tok_logits;  /* [len][labels] (token classification) or NULL */
    const float *start, *end; /* [len] (question answering) or NULL */
} b8_rowout;

typedef bert8_status (*b8_row_fn)(void *ctx, const b8_rowout *o, b8_err *e);

/* Runs rows through the model: longest first, in forward passes of at most max_batch_tokens
 * real tokens and max_batch_size rows (packed, or padded to each batch's longest), calling fn
 * once per row (in no particular order). rows is reordered. */
bert8_status b8_pipe_run(const bert8_pipeline *p, b8_row *rows, int64_t n, b8_row_fn fn, void *ctx, b8_err *e);

/* The rows of an encoding (tag = row index, prompt_len as given), appended to *rows (grown
 * with realloc). */
bert8_status b8_pipe_rows(const bert8_pipeline *p, const bert8_encoding *enc, int64_t prompt_len, b8_row **rows,
                          int64_t *n, int64_t *cap, b8_err *e);
/* Rows over pre-tokenized inputs (tag = input index), checked: lengths in [1, max_length], ids in
 * the vocabulary, type ids below the model's type count, prompt_len in [0, len]. *rows is
 * malloc'd. */
bert8_status b8_pipe_id_rows(const bert8_pipeline *p, int64_t n, const bert8_token_ids *in, b8_row **rows,
                             b8_err *e);

/* Checks a call's texts: count against max_inputs, each length against max_text_bytes, UTF-8.
 * what names them in messages ("text", "question", ...). texts may hold data NULL entries
 * when allow_null (absent pairs). */
bert8_status b8_pipe_check_texts(const bert8_pipeline *p, int64_t n, const bert8_text *texts, const char *what,
                                 bool allow_null, b8_err *e);

/* Refuses an empty input of an embedding or reranking call, as TEI does (its tokenization's
 * is_empty: a text is empty when it has no bytes, a pair when both texts have none): an empty
 * input has no text to embed or score, only the special tokens. BERT8_ERR_INVALID_ARG naming the
 * first one ("text 3 is empty"; with query, rerank's shared first text: "the query and text 3
 * are empty"). pairs may be NULL. */
bert8_status b8_pipe_check_nonempty(int64_t n, const bert8_text *texts, const bert8_text *pairs,
                                    const bert8_text *query, b8_err *e);

/* Encode parameters for single texts / pairs cut at max_length (or not, with !truncate). */
bert8_encode_params b8_pipe_encode_params(const bert8_pipeline *p, const bert8_run_options *o);
/* The max_length a call runs with. */
int64_t b8_pipe_max_length(const bert8_pipeline *p, const bert8_run_options *o);
/* Encodes texts (and pairs) for classify/embed/rerank: prompt (may be NULL or empty) prepended
 * to each text, all of it lowercased when the folder's do_lower_case says; with !o->truncate a
 * text past max_length is BERT8_ERR_TOO_LARGE naming it, unless keep_long. */
bert8_status b8_pipe_encode_ex(const bert8_pipeline *p, int64_t n, const bert8_text *texts, const bert8_text *pairs,
                               const bert8_run_options *o, const char *prompt, bool keep_long, bert8_encoding *enc,
                               b8_err *e);
bert8_status b8_pipe_encode(const bert8_pipeline *p, int64_t n, const bert8_text *texts, const bert8_text *pairs,
                            const bert8_run_options *o, bert8_encoding *enc, b8_err *e);
/* The prompt text of a call as a malloc'd string (NULL: none), resolved as bert8_embed_options
 * says; and the tokens
 * it takes at the start of a row (sentence-transformers' prompt_length: its encoding with
 * special tokens, less a trailing special token). */
bert8_status b8_pipe_prompt(const bert8_pipeline *p, const bert8_embed_options *eo, bool pairs, char **prompt,
                            b8_err *e);
bert8_status b8_pipe_prompt_len(const bert8_pipeline *p, const char *prompt, int64_t *len, b8_err *e);

/* Pooling: the B8_POOL_* bit of a mode; the width of pooled vectors; the width after the Dense
 * chain (BERT8_ERR_SHAPE when the first Dense does not take `width` values). */
unsigned b8_pool_bit(bert8_pooling p);
int64_t b8_pool_width(unsigned bits, int64_t hidden);
bert8_status b8_pipe_chain_width(const bert8_pipeline *p, int64_t width, int64_t *out, b8_err *e);

/* Copies e's message into err. Returns st. */
bert8_status b8_pipe_report(bert8_status st, const b8_err *e, char *err, size_t err_len);

/* Softmax of n logits into p (may alias) in double precision; returns the argmax. */
int64_t b8_softmax_d(const float *logits, int64_t n, float *p);

/* Byte -> character offsets of one text, cheap for increasing offsets. */
typedef struct b8_chars {
    const char *s;
    size_t len, byte;
    int64_t chr;
} b8_chars;
void b8_chars_init(b8_chars *c, const char *s, size_t len);
int64_t b8_chars_at(b8_chars *c, int64_t byte);

/* Narrows [*b0, *b1) past ASCII blanks at either end (a SentencePiece piece spans the space
 * before its word). */
void b8_trim_span(const char *s, size_t len, int64_t *b0, int64_t *b1);

/* Inputs per encoding chunk: bounds the memory of one call whatever its size. */
#define B8_PIPE_CHUNK 512

#endif
