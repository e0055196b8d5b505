/* metrics.h: the standard evaluation metrics of the tasks `bert8 eval` scores (accuracy,
 * binary F1, Pearson, Spearman with average ranks, SQuAD v1.1 exact match and F1). Pure
 * functions with no I/O, so they are unit-tested on hand-made cases. */
#ifndef BERT8_METRICS_H
#define BERT8_METRICS_H

#include <stddef.h>
#include <stdint.h>

/* Fraction of i with pred[i] == gold[i]; NaN when n == 0. */
double metric_accuracy(const int *pred, const int *gold, size_t n);

typedef struct metric_prf {
    int64_t tp, fp, fn;
    double precision, recall, f1; /* 0 when the denominator is 0 (sklearn's zero_division=0) */
} metric_prf;

/* Precision, recall and F1 of the class `positive`. */
metric_prf metric_binary_f1(const int *pred, const int *gold, size_t n, int positive);

/* Pearson's r; NaN when n < 2 or either side is constant. */
double metric_pearson(const double *x, const double *y, size_t n);

/* 1-based ranks with ties given their average rank (as scipy.stats.rankdata "average").
 * Returns 0, or -1 when out of memory. */
int metric_average_ranks(const double *x, size_t n, double *ranks);

/* Spearman's rho: Pearson's r of the average ranks. NaN when undefined or out of memory. */
double metric_spearman(const double *x, const double *y, size_t n);

/* The official SQuAD v1.1 normalize_answer: lower-case, drop ASCII punctuation
 * (string.punctuation), drop the words a/an/the, collapse whitespace. Returns a new string
 * (free() it) or NULL when out of memory or s is not valid UTF-8. */
char *squad_normalize(const char *s);

/* Max over the gold answers of exact match (0/1) and of token F1, as the official
 * evaluate-v1.1.py computes them. Return -1 when out of memory or n_gold == 0. */
double squad_exact_match(const char *pred, const char *const *golds, size_t n_gold);
double squad_f1(const char *pred, const char *const *golds, size_t n_gold);

#endif
