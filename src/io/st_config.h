/* st_config.h: a sentence-transformers folder read whole: modules.json in order (Transformer,
 * Pooling, Dense, Normalize), 1_Pooling/config.json (every pooling mode, include_prompt),
 * N_Dense/config.json and its weights, config_sentence_transformers.json (prompts,
 * default_prompt_name) and sentence_bert_config.json (max_seq_length, do_lower_case).
 *
 * A module bert8 does not compute is an error naming modules.json and the module's type, never a
 * silently different embedding. */
#ifndef BERT8_ST_CONFIG_H
#define BERT8_ST_CONFIG_H

#include "base/common.h"

/* Pooling modes as bits, concatenated in this order (sentence-transformers' Pooling.forward). */
enum {
    B8_POOL_CLS = 1 << 0,
    B8_POOL_MAX = 1 << 1,
    B8_POOL_MEAN = 1 << 2,
    B8_POOL_MEAN_SQRT = 1 << 3, /* sum / sqrt(tokens) */
    B8_POOL_WEIGHTED = 1 << 4,  /* weights 1, 2, ... by position */
    B8_POOL_LAST = 1 << 5,      /* the last real token */
    B8_POOL_ALL = (1 << 6) - 1
};

/* Activations a Dense module may name (torch.nn class names). */
typedef enum b8_st_act {
    B8_ACT_IDENTITY, B8_ACT_TANH, B8_ACT_RELU, B8_ACT_GELU, B8_ACT_SIGMOID, B8_ACT_SILU, B8_ACT_LEAKY_RELU
} b8_st_act;

/* y = act(W x + b) (+ x, or + R x, with use_residual) */
typedef struct b8_st_dense {
    int64_t in, out;
    float *w;        /* [out][in] (64-byte aligned, b8_free_aligned) */
    float *b;        /* [out] or NULL */
    float *res;      /* [out][in]: use_residual with in != out; else NULL */
    bool residual;   /* use_residual */
    b8_st_act act;
} b8_st_dense;

/* One step after pooling, in modules.json order. */
typedef struct b8_st_step {
    bool normalize; /* a Normalize module; else dense */
    b8_st_dense dense;
} b8_st_step;

typedef struct b8_st_prompt {
    char *name, *text;
} b8_st_prompt;

typedef struct b8_st_folder {
    bool has_modules;          /* modules.json was there */
    unsigned pool;             /* B8_POOL_* bits; 0: no pooling configured (the caller's default) */
    bool include_prompt;       /* Pooling's include_prompt (default true) */
    b8_st_step *steps;         /* after pooling, in order */
    size_t n_steps;
    int64_t max_seq_length;    /* 0: not set */
    bool do_lower_case;
    b8_st_prompt *prompts;
    size_t n_prompts;
    char *default_prompt_name; /* NULL: none */
} b8_st_folder;

/* Reads what of dir's sentence-transformers files is there (a plain transformers folder reads as
 * all defaults). dense_path (may be NULL), a folder under dir or a path, replaces the one Dense
 * module of modules.json, or adds one after pooling when modules.json lists none (TEI's
 * --dense-path). modules (false: only max_seq_length, do_lower_case and the prompts) says whether
 * the module chain is read at all: heads other than a base model do not use it. hidden is the
 * transformer's output width, checked against the pooling and Dense shapes. On failure f holds
 * nothing (freed). */
bert8_status b8_st_folder_read(const char *dir, const char *dense_path, bool modules, int64_t hidden,
                               b8_st_folder *f, b8_err *e);
void b8_st_folder_free(b8_st_folder *f); /* NULL is a no-op */

/* The prompt text of a name, or NULL. */
const char *b8_st_prompt_text(const b8_st_folder *f, const char *name);

#endif
