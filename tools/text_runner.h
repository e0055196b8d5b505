/* text_runner.h: a model folder opened for the text commands (tokenize, classify, embed, qa,
 * ner) and `bert8 eval`: its tokenizer, and for the model commands a pipeline of the library
 * (bert8_pipeline.h) over the model, with the CLI's messages on failure. */
#ifndef BERT8_TEXT_RUNNER_H
#define BERT8_TEXT_RUNNER_H

#include <stdbool.h>
#include <stdint.h>

#include "bert8.h"
#include "bert8_pipeline.h"

typedef struct text_runner {
    const char *cmd;    /* the command name, for messages */
    bert8_model *model; /* NULL when only the tokenizer was loaded */
    bert8_tokenizer *tok;
    bert8_pipeline *pl;           /* over model and tok; NULL without a model */
    const bert8_model_info *info; /* NULL without a model */
    int64_t max_tokens;           /* longest row the model (and tokenizer) accepts */
    bert8_encoding enc;           /* the latest encoding of text_runner_encode */
    char err[1024];               /* the message of the last failure */
} text_runner;

/* What the pipeline is opened with, besides the folder. */
typedef struct text_runner_opts {
    int threads;             /* 0: the physical cores */
    int64_t batch;           /* sequences per forward pass */
    int64_t max_length;      /* 0: the model's limit */
    bert8_pooling pooling;   /* embed */
    int normalize;           /* embed: -1 the folder's */
    int64_t max_text_bytes;  /* bytes per text (--max-line-bytes); 0: the library's default */
    const char *lora_task;   /* --lora-task: the LoRA task folded into the model, or NULL */
} text_runner_opts;

/* The pipeline parameters the runner opens its pipeline with, for a model whose rows are at most
 * max_tokens long (also for pipelines over models made in memory). */
bert8_pipeline_params text_runner_pipeline_params(const text_runner_opts *o, int64_t max_tokens);

/* Loads the tokenizer and, with_model, the model and its pipeline. Prints the error (naming
 * cmd) and returns false on failure. */
bool text_runner_open(text_runner *r, const char *cmd, const char *dir, bool with_model, const text_runner_opts *o);
void text_runner_close(text_runner *r);

/* Encodes n inputs into r->enc (tokenize). On failure r->err holds the message. */
bert8_status text_runner_encode(text_runner *r, int64_t n, const char *const *texts, const char *const *pairs,
                                const bert8_encode_params *p);

/* Softmax of n logits into p (may alias); returns the index of the largest. */
int64_t text_softmax(const float *logits, int64_t n, float *p);

#endif
