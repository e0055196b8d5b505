/* text_runner.h: a model with its tokenizer, run on text through the public API. Shared by
 * the text commands (tokenize, classify, embed, qa, ner) and `bert8 eval`: encoding with the
 * limits the model allows, the forward pass in chunks of rows, softmax and the QA span
 * search. */
#ifndef BERT8_TEXT_RUNNER_H
#define BERT8_TEXT_RUNNER_H

#include <stdbool.h>
#include <stdint.h>

#include "bert8.h"

typedef struct text_runner {
    const char *cmd;    /* the command name, for messages */
    bert8_model *model; /* NULL when only the tokenizer was loaded */
    bert8_tokenizer *tok;
    bert8_session *sess;
    const bert8_model_info *info; /* NULL without a model */
    int64_t max_tokens;           /* longest row the model (and tokenizer) accepts */
    int64_t batch;                /* rows per forward call */
    bool use_types;               /* pass token_type_ids (the model has more than one type) */
    bert8_encoding enc;           /* the latest encoding, reused between calls */
    char err[1024];               /* the message of the last failure */
} text_runner;

/* Loads the tokenizer and, with_model, the model of dir (threads as --threads: 0 means the
 * physical cores). Prints the error (naming cmd) and returns false on failure. */
bool text_runner_open(text_runner *r, const char *cmd, const char *dir, bool with_model,
                      int threads, int64_t batch);
void text_runner_close(text_runner *r);

/* Encodes n inputs into r->enc. On failure r->err holds the message. */
bert8_status text_runner_encode(text_runner *r, int64_t n, const char *const *texts,
                                const char *const *pairs, const bert8_encode_params *p);

/* Encodes (question, context) inputs with p (only_second truncation and overflow windows).
 * A lone input whose question leaves less room than p->stride is retried with the stride
 * halved to fit, so long questions still get windows that advance. */
bert8_status text_runner_encode_qa(text_runner *r, int64_t n, const char *const *questions,
                                   const char *const *contexts, const bert8_encode_params *p);

/* Runs the forward pass over every row of r->enc, r->batch rows at a time, and calls fn for
 * each chunk (outputs hold rows [row0, row0 + n)). A non-zero return from fn stops the run
 * and is returned as BERT8_ERR_INTERNAL. On failure r->err holds the message. */
typedef int (*text_chunk_fn)(void *ctx, const bert8_outputs *o, int64_t row0, int64_t n);
bert8_status text_runner_forward(text_runner *r, text_chunk_fn fn, void *ctx);

/* Softmax of n logits into p (may alias); returns the index of the largest. */
int64_t text_softmax(const float *logits, int64_t n, float *p);

/* The best answer span among the context tokens (sequence id 1) of encoded rows. Call
 * text_qa_scan once per row of one input; best starts with found = false. */
typedef struct text_qa_span {
    bool found;
    int64_t start, end;              /* byte offsets [start, end) into the context */
    int64_t tok_start, tok_end, row; /* token indices (inclusive) within that row */
    double score;                    /* see text_qa_scan */
} text_qa_span;

/* Scans row `row` of enc: spans start <= end, both context tokens, at most max_answer_len
 * tokens long. With prob, score = softmax(start over the row's context tokens)[s] *
 * softmax(end over them)[e] (the pipeline's probability), else start_logit + end_logit (the
 * SQuAD reference post-processing). Keeps the higher score in *best. */
void text_qa_scan(const bert8_encoding *enc, int64_t row, const float *start_logits,
                  const float *end_logits, int64_t max_answer_len, bool prob, text_qa_span *best);

#endif
