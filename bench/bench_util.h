/* bench_util.h: the clock and the order statistics the benchmark programs share. */
#ifndef BERT8_BENCH_UTIL_H
#define BERT8_BENCH_UTIL_H

#include <time.h>

/* seconds on the monotonic clock */
static inline double bench_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* qsort comparator of doubles, ascending */
static inline int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* nearest-rank percentile of n sorted values, as bench/peers/common.py computes it */
static inline double bench_percentile(const double *sorted, int n, int q) {
    int k = (q * n + 99) / 100;
    if (k < 1) k = 1;
    if (k > n) k = n;
    return sorted[k - 1];
}

#endif
