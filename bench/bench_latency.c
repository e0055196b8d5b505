/* bench_latency.c: per-call latency of one model folder (FP32, or INT8 as `bert8 quantize` wrote it)
 * under the timing rule of bench/peers' runners: warm-up calls, then calls until both --min-iters
 * calls and --budget seconds are done (at most --max-iters); prints the median, p50 and p99 call
 * times. The ids are `bert8 bench`'s (id = 5 + (i * 2654435761) mod (vocab - 5)), the mask all
 * ones. Public API only.
 *
 * A p99 is given only from at least P99_MIN_CALLS calls (then 100 or more calls lie above it);
 * from fewer, the output says what the nearest-rank value is instead: "p99 n/a (N calls, fewer than
 * 10000: the slowest K start at X ms)", and in --json "p99_s": null beside "tail_1pct_s" (the
 * value) and "tail_1pct_rank" (K). --p99 asks for
 * enough calls (--min-iters P99_MIN_CALLS, and --max-iters at least that).
 *
 *   bench_latency MODEL_DIR [--batch B] [--seq S] [--threads T] [--warmup N] [--budget SECONDS]
 *                 [--min-iters N] [--max-iters N] [--p99] [--json]                              */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "bert8.h"

#define P99_MIN_CALLS 10000

int main(int argc, char **argv) {
    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: bench_latency MODEL_DIR [--batch B] [--seq S] [--threads T] [--warmup N] "
                        "[--budget SECONDS] [--min-iters N] [--max-iters N] [--p99] [--json]\n");
        return 2;
    }
    int64_t B = 1, S = 16;
    int threads = 0, warmup = 3, min_iters = 5, max_iters = 0, json = 0; /* max_iters 0: 2000, or --min-iters */
    double budget = 10.0;
    for (int i = 2; i < argc; i++) {
        const char *o = argv[i];
        int has = i + 1 < argc;
        if (!strcmp(o, "--json")) json = 1;
        else if (!strcmp(o, "--p99")) min_iters = min_iters > P99_MIN_CALLS ? min_iters : P99_MIN_CALLS;
        else if (!strcmp(o, "--batch") && has) B = atoll(argv[++i]);
        else if (!strcmp(o, "--seq") && has) S = atoll(argv[++i]);
        else if (!strcmp(o, "--threads") && has) threads = atoi(argv[++i]);
        else if (!strcmp(o, "--warmup") && has) warmup = atoi(argv[++i]);
        else if (!strcmp(o, "--budget") && has) budget = atof(argv[++i]);
        else if (!strcmp(o, "--min-iters") && has) min_iters = atoi(argv[++i]);
        else if (!strcmp(o, "--max-iters") && has) max_iters = atoi(argv[++i]);
        else {
            fprintf(stderr, "bench_latency: unknown argument \"%s\"\n", o);
            return 2;
        }
    }
    if (max_iters == 0) max_iters = min_iters > 2000 ? min_iters : 2000;
    if (B < 1 || S < 1 || B > 4096 || S > 4096 || min_iters < 1 || max_iters < min_iters) {
        fprintf(stderr, "bench_latency: --batch and --seq must be 1..4096, 1 <= --min-iters <= --max-iters\n");
        return 2;
    }
    bert8_load_params lp = bert8_default_load_params();
    lp.threads = threads;
    bert8_model *m = NULL;
    char err[1024];
    double t_load = bench_now_s();
    if (bert8_model_load(argv[1], &lp, &m, err, sizeof err)) {
        fprintf(stderr, "bench_latency: %s\n", err);
        return 1;
    }
    t_load = bench_now_s() - t_load;
    const bert8_model_info *in = bert8_model_get_info(m);
    if (S > in->max_seq_len) {
        fprintf(stderr, "bench_latency: --seq %lld is over the model's %lld positions\n", (long long)S,
                (long long)in->max_seq_len);
        bert8_model_free(m);
        return 1;
    }
    bert8_session *s = NULL;
    if (bert8_session_create(m, &s)) {
        fprintf(stderr, "bench_latency: could not create a session\n");
        bert8_model_free(m);
        return 1;
    }
    int32_t *ids = malloc((size_t)(B * S) * sizeof(int32_t));
    double *times = malloc((size_t)max_iters * sizeof(double));
    if (!ids || !times) {
        fprintf(stderr, "bench_latency: out of memory\n");
        return 1;
    }
    uint64_t vm = (uint64_t)in->vocab_size - 5;
    for (int64_t i = 0; i < B * S; i++) ids[i] = (int32_t)(5 + ((uint64_t)i * 2654435761u) % vm);
    bert8_batch b = {B, S, ids, NULL, NULL};
    bert8_outputs o;
    double t_first = bench_now_s();
    for (int i = 0; i < (warmup > 0 ? warmup : 1); i++) {
        if (bert8_forward(s, &b, &o)) {
            fprintf(stderr, "bench_latency: %s\n", bert8_session_last_error(s));
            return 1;
        }
        if (i == 0) t_first = bench_now_s() - t_first;
    }
    int n = 0;
    double start = bench_now_s();
    while (n < max_iters) {
        double t0 = bench_now_s();
        if (bert8_forward(s, &b, &o)) {
            fprintf(stderr, "bench_latency: %s\n", bert8_session_last_error(s));
            return 1;
        }
        times[n++] = bench_now_s() - t0;
        if (n >= min_iters && bench_now_s() - start >= budget) break;
    }
    double *sorted = malloc((size_t)n * sizeof(double));
    if (!sorted) return 1;
    memcpy(sorted, times, (size_t)n * sizeof(double));
    qsort(sorted, (size_t)n, sizeof(double), bench_cmp_double);
    double med = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
    double p50 = bench_percentile(sorted, n, 50), p99 = bench_percentile(sorted, n, 99);
    const int has_p99 = n >= P99_MIN_CALLS; /* else the nearest-rank value is the tail of few calls */
    const int tail_rank = n - (99 * n + 99) / 100 + 1; /* p99's position from the slowest */
    char p99_text[160];
    if (has_p99) snprintf(p99_text, sizeof p99_text, "p99 %.3f ms", 1e3 * p99);
    else
        snprintf(p99_text, sizeof p99_text, "p99 n/a (%d calls, fewer than %d: the slowest %d start at %.3f ms)", n,
                 P99_MIN_CALLS, tail_rank, 1e3 * p99);
    if (json) {
        printf("{\"model\":\"%s\",\"quantized\":%d,\"batch\":%lld,\"seq\":%lld,\"threads\":%d,\"load_s\":%.4f,"
               "\"first_call_s\":%.6f,\"iterations\":%d,\"median_s\":%.9f,\"p50_s\":%.9f,",
               argv[1], in->quantized, (long long)B, (long long)S, bert8_get_threads(), t_load, t_first, n, med, p50);
        if (has_p99) printf("\"p99_s\":%.9f,", p99);
        else printf("\"p99_s\":null,\"p99_min_calls\":%d,", P99_MIN_CALLS);
        printf("\"tail_1pct_s\":%.9f,\"tail_1pct_rank\":%d,\"best_s\":%.9f,\"seq_per_s\":%.4f,\"times_s\":[", p99,
               tail_rank, sorted[0], (double)B / med);
        for (int i = 0; i < n; i++) printf("%s%.9f", i ? "," : "", times[i]);
        printf("]}\n");
    } else {
        printf("%s (%s), %lld x %lld, %d thread(s): %d calls, median %.3f ms, p50 %.3f ms, %s, "
               "best %.3f ms, %.1f seq/s\n",
               argv[1], in->quantized ? "INT8" : "FP32", (long long)B, (long long)S, bert8_get_threads(), n,
               1e3 * med, 1e3 * p50, p99_text, 1e3 * sorted[0], (double)B / med);
    }
    free(sorted);
    free(times);
    free(ids);
    bert8_session_free(s);
    bert8_model_free(m);
    return 0;
}
