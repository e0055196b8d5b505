/* eval_set.h: the evaluation sets of `bert8 eval`, loaded once and scored with any pipeline on
 * all of their examples or on a subset. `bert8 eval` scores a whole set; `bert8 quantize
 * --max-drop` scores candidate models on a tuning slice and reports on the rest.
 *
 *   sst2   accuracy                 sentence<TAB>label (0 negative, 1 positive)
 *   xnli   accuracy                 label, sentence1_<lang>, sentence2_<lang> (lang: en if present)
 *   mrpc   accuracy, F1 of class 1  Quality, #1 String, #2 String
 *   stsb   Spearman, Pearson        sentence1, sentence2, score (a regression head)
 *   squad  exact match, F1          SQuAD v1.1 JSON, official normalisation
 *
 * Metrics are fractions in [0, 1]. Class ids map to the task's labels through id2label when
 * every model label names one, else by id order. Pairs are encoded with longest_first truncation
 * at max_len. SQuAD runs as `bert8 qa` does (only_second windows). */
#ifndef BERT8_EVAL_SET_H
#define BERT8_EVAL_SET_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "bert8.h"
#include "bert8_pipeline.h"
#include "tasks.h"

typedef enum eval_task { TASK_SST2, TASK_XNLI, TASK_MRPC, TASK_STSB, TASK_SQUAD } eval_task;

/* The task of a name ("sst2", ...) and the head its model needs; false when unknown. */
bool eval_task_parse(const char *name, eval_task *task, bert8_head *head);

typedef struct eval_opts {
    eval_task task;
    const char *task_name, *data, *split_path, *lang;
    int64_t limit, row_lo, row_hi; /* rows [row_lo, row_hi) of the data file; row_hi -1: all */
    long batch, threads, max_len, stride, max_answer;
    bool json, progress, prob;
} eval_opts;

/* Sentence tasks: one example per kept row, pointing into the table. */
typedef struct seq_set {
    const char **a, **b;
    int *gold;     /* class tasks */
    double *score; /* stsb */
    int64_t n;
} seq_set;

typedef struct eval_set {
    eval_opts o;        /* squad: max_len, stride and max_answer resolved */
    const char *cmd;    /* for messages */
    cJSON *split;       /* split.json, or NULL */
    tsv_table t;
    seq_set s;
    squad_set q;
    const char **titles;
    int64_t n;          /* examples (rows or questions) */
} eval_set;

/* Loads the examples o selects (data file, split.json, rows, limit). max_tokens is the longest
 * row the model accepts (SQuAD's window length is capped by it). Prints the error naming cmd and
 * returns false on failure. */
bool eval_set_load(eval_set *es, const char *cmd, const eval_opts *o, int64_t max_tokens);
void eval_set_free(eval_set *es);

typedef struct eval_result {
    int64_t n;                       /* examples scored */
    int64_t correct;                 /* class tasks */
    double accuracy, f1, precision, recall; /* class tasks (F1 of class 1: mrpc) */
    double spearman, pearson;        /* stsb */
    double exact_match, squad_f1;    /* squad */
    int64_t failed;                  /* squad questions that failed (scored as empty) */
    double seconds;
} eval_result;

#define EVAL_PROGRESS 1u /* a progress bar on stderr */
#define EVAL_NOTES 2u    /* notes on stderr (labels mapped by name) */

/* Scores examples idx[0..n) (idx NULL: all of them, n ignored) with pipeline pl over the model
 * to evaluate. per_example (may be NULL; [n], in idx order) receives each example's own score
 * where the headline metric is a mean of them: 1 or 0 for a right or wrong class, a question's
 * F1 for squad; NAN for stsb (a correlation has none). Returns BERT8_OK, or a status with a
 * message in err. */
bert8_status eval_set_score(const eval_set *es, const bert8_pipeline *pl, const int64_t *idx, int64_t n,
                            unsigned flags, eval_result *r, double *per_example, char *err, size_t err_len);

/* The task's headline metric in points (x 100): accuracy (sst2, xnli, mrpc), Spearman (stsb),
 * F1 (squad); and its name. */
double eval_headline(eval_task task, const eval_result *r);
const char *eval_headline_name(eval_task task);

#endif
