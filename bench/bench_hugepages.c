/* bench_hugepages.c: the packed INT8 weights on huge pages or not, alternated in one process.
 * The same FP32 checkpoint is quantized twice (static, built-in calibration on the timing ids),
 * once with BERT8_HUGE_PAGES=0 (each Linear's weights in its own allocation) and once with the
 * huge-page arena; forward passes of the two alternate, and the medians are compared. A program,
 * not a test.
 *
 *   bench_hugepages MODEL_DIR [--batch B] [--seq T] [--rounds R] [--threads N]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bert8.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static long anon_huge_kb(void) {
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "AnonHugePages:", 14)) kb = atol(line + 14);
    if (f) fclose(f);
    return kb;
}

int main(int argc, char **argv) {
    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: bench_hugepages MODEL_DIR [--batch B] [--seq T] [--rounds R] [--threads N]\n");
        return 2;
    }
    int B = 1, T = 128, R = 30, threads = 2;
    for (int i = 2; i + 1 < argc; i += 2) {
        int v = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--batch")) B = v;
        else if (!strcmp(argv[i], "--seq")) T = v;
        else if (!strcmp(argv[i], "--rounds")) R = v;
        else if (!strcmp(argv[i], "--threads")) threads = v;
        else {
            fprintf(stderr, "bench_hugepages: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (B < 1 || B > 256 || T < 2 || T > 512 || R < 3 || R > 100000) {
        fprintf(stderr, "bench_hugepages: --batch 1..256, --seq 2..512, --rounds 3.. please\n");
        return 2;
    }
    char err[512];
    bert8_model *f = NULL, *q[2] = {NULL, NULL};
    bert8_set_threads(threads);
    if (bert8_model_load(argv[1], NULL, &f, err, sizeof err)) {
        fprintf(stderr, "bench_hugepages: %s\n", err);
        return 1;
    }
    const bert8_model_info *info = bert8_model_get_info(f);
    size_t n = (size_t)B * (size_t)T;
    int32_t *ids = malloc(n * sizeof *ids), *mask = malloc(n * sizeof *mask);
    double *t[2] = {malloc((size_t)R * sizeof(double)), malloc((size_t)R * sizeof(double))};
    if (!ids || !mask || !t[0] || !t[1]) return 1;
    for (size_t i = 0; i < n; i++) {
        ids[i] = (int32_t)(5 + (i * 7919) % (size_t)(info->vocab_size - 5));
        mask[i] = 1;
    }
    bert8_batch b = {B, T, ids, mask, NULL};
    bert8_quant_params qp = bert8_default_quant_params();
    long huge[2];
    for (int v = 0; v < 2; v++) {
        setenv("BERT8_HUGE_PAGES", v ? "1" : "0", 1);
        if (bert8_quantize(f, &b, 1, &qp, &q[v], err, sizeof err)) {
            fprintf(stderr, "bench_hugepages: %s\n", err);
            return 1;
        }
        huge[v] = anon_huge_kb();
    }
    unsetenv("BERT8_HUGE_PAGES");
    bert8_model_free(f);
    bert8_session *s[2] = {NULL, NULL};
    bert8_outputs o;
    for (int v = 0; v < 2; v++)
        if (bert8_session_create(q[v], &s[v]) || bert8_forward(s[v], &b, &o)) {
            fprintf(stderr, "bench_hugepages: forward failed\n");
            return 1;
        }
    for (int r = 0; r < R; r++)
        for (int k = 0; k < 2; k++) {
            int v = (r + k) % 2;
            double t0 = now();
            bert8_forward(s[v], &b, &o);
            t[v][r] = now() - t0;
        }
    for (int v = 0; v < 2; v++) qsort(t[v], (size_t)R, sizeof(double), cmp);
    printf("%s, batch %d x %d, %d thread(s), %d alternated passes each (AnonHugePages after each "
           "quantize: %ld kB, %ld kB)\n",
           argv[1], B, T, threads, R, huge[0], huge[1]);
    printf("  4 KiB pages:      median %8.2f ms, best %8.2f ms\n", t[0][R / 2] * 1e3, t[0][0] * 1e3);
    printf("  huge-page arena:  median %8.2f ms, best %8.2f ms\n", t[1][R / 2] * 1e3, t[1][0] * 1e3);
    printf("  speed, arena / 4 KiB pages: %.3fx (median), %.3fx (best)\n", t[0][R / 2] / t[1][R / 2],
           t[0][0] / t[1][0]);
    for (int v = 0; v < 2; v++) {
        bert8_session_free(s[v]);
        bert8_model_free(q[v]);
    }
    free(ids);
    free(mask);
    free(t[0]);
    free(t[1]);
    return 0;
}
