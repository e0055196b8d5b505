/* text_cmd.h: what the text-level commands `bert8 tokenize | classify | embed | qa | ner | fill-mask`
 * share (text_cmd.c): reading the input, the batch loop, the common options, the error lines.
 *
 * Input (stdin), one input per line:
 *   - a JSON object: {"text": ..., "text_pair": ...} ({"question": ..., "context": ...} for qa;
 *     an optional "id" of any type is echoed in the output line);
 *   - or plain text: the line is the text; "A<TAB>B" is a pair (qa: question<TAB>context;
 *     ner takes no pairs). --plain treats every line as plain text, also lines starting '{'.
 * Empty lines are skipped. Output (stdout): one JSON object per input line, in input order.
 * A bad line (invalid JSON or UTF-8, a missing field, a NUL byte, longer than
 * --max-line-bytes, or text the model cannot take) prints "bert8 CMD: line N: why" on stderr
 * and {"line": N, "error": "why"} on stdout, and the command goes on; the exit status is then 1
 * (--strict stops after the batch holding the first bad line). Offsets: "start"/"end" and
 * "offsets" count Unicode characters (as Hugging Face's offset_mapping and pipelines do);
 * the *_byte variants count UTF-8 bytes.
 *
 * A command (cmd_text.c: tokenize, classify, embed; cmd_text_tokens.c: qa, ner, fill-mask) fills
 * a tcmd with its JSON field names, its compute (the library call on a batch of texts) and its
 * print (one output line), then runs tcmd_drive. */
#ifndef BERT8_TEXT_CMD_H
#define BERT8_TEXT_CMD_H

#include <stdbool.h>
#include <stdint.h>

#include "cli.h"
#include "text_io.h"
#include "text_runner.h"

#define MAX_BATCH 4096

typedef struct item {
    int64_t line;
    char *a, *b; /* text and pair (pair NULL for a single text) */
    char *id;    /* the "id" value as JSON, or NULL */
    char *error; /* why this line cannot be processed (NULL if out of memory) */
    bool bad;    /* the line cannot be processed */
} item;

typedef struct tcmd tcmd;
struct tcmd {
    const char *name;
    const char *fa, *fb; /* JSON field names (fb NULL: no second text) */
    bool pair_needed;
    bool refuse_empty;     /* an empty text (of a pair: both) is a bad line, as the library and TEI say */
    bool with_model;
    bool plain, strict;
    const char *lora_task; /* --lora-task */
    size_t max_line;
    int64_t batch, max_len, stride;
    text_runner r;
    bert8_encode_params ep;
    int64_t failed;
    bert8_status (*compute)(tcmd *c, int64_t n, const bert8_text *a, const bert8_text *b);
    void (*print)(tcmd *c, const item *it, int64_t k);
    /* classify / embed */
    float *out;
    float *tmp; /* [width] scratch for a softmax */
    int64_t width;
    bool logits;
    bert8_pooling pool;
    int normalize; /* -1: the folder's */
    const char *prompt_name, *prompt; /* embed: --prompt-name, --prompt (NULL: the folder's default) */
    /* qa */
    bert8_qa_answer *answers;
    bert8_qa_options qo;
    /* ner */
    bert8_ner_result ner;
    /* embed --pooling splade */
    bool splade;
    bert8_sparse_embeddings sparse;
    /* fill-mask */
    bert8_fill_mask_result fm;
    int64_t top_k;
};

/* Runs the command over stdin: lines into items, batches of --batch through compute, one output
 * line per input line; returns the exit status (1 when a line failed). */
int tcmd_drive(tcmd *c);
/* tcmd_drive for commands that take a softmax over the model's labels (c->width of them). */
int tcmd_drive_labels(tcmd *c);
void tcmd_free(tcmd *c);
/* --help / -h: prints usage and the common options; true when asked. */
bool tcmd_want_help(cli_args *a, const char *usage);
/* The options every text command takes; false after printing why. */
bool tcmd_options(tcmd *c, cli_args *a, long *threads, long *max_len);
/* No argument left over, then the model opened, its head checked (head < 0: any) and c->max_len
 * settled (dflt_len: the command's own default); -1 to go on, else the exit status. */
int tcmd_finish(tcmd *c, cli_args *a, const char *dir, long threads, long max_len, int head, int64_t dflt_len);
/* The run options of the model commands: longest_first truncation at --max-length. */
bert8_run_options tcmd_run_opts(const tcmd *c);
/* *p grown to count items of size bytes; false when out of memory or on overflow. */
bool tcmd_grow(void **p, size_t count, size_t size);
/* Output pieces: '{' with the item's "id", a float array, a span's character and byte offsets. */
void tcmd_print_head(const item *it);
void tcmd_print_floats(const float *v, int64_t n);
void tcmd_print_span(text_chars *tc, int64_t b0, int64_t b1);

#endif
