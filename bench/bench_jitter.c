/* bench_jitter.c: the per-call jitter floor of the machine itself, for reading a p99 / p50 of
 * short calls (bench/peers' 1 x 16 column). A fixed unit of arithmetic (a dependent chain of
 * multiply-adds, no memory traffic, sized to --unit-us on this CPU) is run as one "call" on T
 * threads at once, fork-join like a parallel op: spinning workers start it when the caller
 * bumps a generation counter, and the call ends when the last of them has finished. Any spread of
 * the call times beyond the unit's own is the host's (preemption, interrupts, frequency), which
 * no engine run on the machine can be below.
 *
 *   bench_jitter [--unit-us U] [--calls N] [--threads T] [--json]
 *
 * Prints p50, p90, p99, max and p99 / p50 of the call times. No bert8 code involved. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"

/* The unit: n steps of a dependent multiply-add chain (the result is kept so it is not elided). */
static double unit(int64_t n, double seed) {
    double x = seed;
    for (int64_t i = 0; i < n; i++) x = x * 0.999999 + 1e-7;
    return x;
}

typedef struct pool {
    _Atomic uint64_t gen;  /* bumped by the caller to start a call */
    _Atomic int done;      /* workers finished with the current call */
    _Atomic int quit;
    int64_t steps;
    double sink[64];
} pool;

typedef struct worker {
    pool *p;
    int id;
} worker;

static void *work(void *arg) {
    worker *w = arg;
    pool *p = w->p;
    uint64_t seen = 0;
    for (;;) {
        uint64_t g;
        while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen)
            if (atomic_load_explicit(&p->quit, memory_order_relaxed)) return NULL;
        seen = g;
        p->sink[w->id] += unit(p->steps, (double)w->id);
        atomic_fetch_add_explicit(&p->done, 1, memory_order_acq_rel);
    }
}

int main(int argc, char **argv) {
    double unit_us = 800;
    int calls = 10000, threads = 2, json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--unit-us") && i + 1 < argc) unit_us = atof(argv[++i]);
        else if (!strcmp(argv[i], "--calls") && i + 1 < argc) calls = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--json")) json = 1;
        else {
            fprintf(stderr, "usage: bench_jitter [--unit-us U] [--calls N] [--threads T] [--json]\n");
            return 2;
        }
    }
    if (!(unit_us > 0) || calls < 10 || threads < 1 || threads > 64) {
        fprintf(stderr, "bench_jitter: --unit-us > 0, --calls >= 10, 1 <= --threads <= 64\n");
        return 2;
    }
    /* size the unit: the fastest of 20 timings of a trial chain */
    const int64_t trial = 1 << 20;
    double best = 1e9, sink = 0;
    for (int r = 0; r < 20; r++) {
        double t0 = bench_now_s();
        sink += unit(trial, 1.0);
        double t = bench_now_s() - t0;
        best = t < best ? t : best;
    }
    pool p = {.steps = (int64_t)((double)trial * unit_us * 1e-6 / best)};
    if (p.steps < 1) p.steps = 1;
    pthread_t tid[64];
    worker ws[64];
    for (int t = 1; t < threads; t++) {
        ws[t] = (worker){&p, t};
        if (pthread_create(&tid[t], NULL, work, &ws[t])) {
            fprintf(stderr, "bench_jitter: cannot start a thread\n");
            return 1;
        }
    }
    double *ms = malloc((size_t)calls * sizeof(double));
    if (!ms) return 1;
    for (int c = -calls / 10; c < calls; c++) { /* the first tenth warms up, not counted */
        double t0 = bench_now_s();
        atomic_store_explicit(&p.done, 0, memory_order_relaxed);
        atomic_fetch_add_explicit(&p.gen, 1, memory_order_acq_rel);
        p.sink[0] += unit(p.steps, 0.5);
        while (atomic_load_explicit(&p.done, memory_order_acquire) < threads - 1) {
        }
        double t = 1e3 * (bench_now_s() - t0);
        if (c >= 0) ms[c] = t;
    }
    atomic_store(&p.quit, 1);
    atomic_fetch_add(&p.gen, 1);
    for (int t = 1; t < threads; t++) pthread_join(tid[t], NULL);
    for (int t = 0; t < threads; t++) sink += p.sink[t];
    qsort(ms, (size_t)calls, sizeof(double), bench_cmp_double);
    double p50 = bench_percentile(ms, calls, 50), p90 = bench_percentile(ms, calls, 90), p99 = bench_percentile(ms, calls, 99);
    double mx = ms[calls - 1];
    if (json)
        printf("{\"unit_us\": %.1f, \"threads\": %d, \"calls\": %d, \"p50_ms\": %.4f, \"p90_ms\": %.4f, "
               "\"p99_ms\": %.4f, \"max_ms\": %.4f, \"p99_over_p50\": %.3f}\n",
               unit_us, threads, calls, p50, p90, p99, mx, p99 / p50);
    else
        printf("bench_jitter: %d calls of a %.0f us unit on %d thread(s): p50 %.3f ms, p90 %.3f, p99 %.3f, max %.3f; "
               "p99 / p50 %.2f (checksum %.6g)\n",
               calls, unit_us, threads, p50, p90, p99, mx, p99 / p50, sink);
    free(ms);
    return 0;
}
