/* bench_layernorm.c: the LayerNorm that writes the next Linear's int8 input
 * (b8_layernorm_quantize, static scheme: fp32 output in place plus int8), on M x 768 rows as
 * between BERT-base's layers: time and the bytes it moves per second, on 1 and 2 threads, and
 * with the rows last written by the same core, by the other core, or in alternating 96-row
 * blocks (what the GEMM's dynamically scheduled units leave before it). A program, not a test.
 *
 *   bench_layernorm [--m M] [--iters N]
 *
 * Each number: best and mean (after a quarter of warm-up) over N calls; the rows are rewritten
 * before each call by the threads the mode names. */
#define _GNU_SOURCE
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/quantize/quantize.h"

#define H 768

static const char *mode_name[] = {"same core", "other core", "96-row blocks alternating"};

/* Which of two threads last writes row r before the LayerNorm, by mode. */
static int writer(int mode, int64_t r, int64_t M) {
    if (mode == 0) return r < M / 2 ? 0 : 1;
    if (mode == 1) return r < M / 2 ? 1 : 0;
    return (int)((r / 96) % 2);
}

int main(int argc, char **argv) {
    int64_t M = 1024;
    int iters = 400;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--m") && i + 1 < argc) M = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_layernorm [--m M] [--iters N]\n");
            return 2;
        }
    }
    if (M < 2 || M > (1 << 20) || iters < 4) {
        fprintf(stderr, "bench_layernorm: --m must be 2..1048576 and --iters at least 4\n");
        return 2;
    }
    size_t nx = (size_t)M * H;
    float *x = aligned_alloc(64, nx * sizeof(float)), *x0 = aligned_alloc(64, nx * sizeof(float));
    int8_t *q = aligned_alloc(64, nx);
    float *g = malloc(H * sizeof(float)), *b = malloc(H * sizeof(float));
    float *qg = malloc(H * sizeof(float)), *qb = malloc(H * sizeof(float));
    if (!x || !x0 || !q || !g || !b || !qg || !qb) {
        fprintf(stderr, "bench_layernorm: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < nx; i++) x0[i] = (float)((i * 2654435761u) % 1000) / 100.0f - 5.0f;
    for (int j = 0; j < H; j++) {
        g[j] = 1.0f + 0.001f * (float)j;
        b[j] = 0.01f;
        qg[j] = 20.0f * g[j];
        qb[j] = 20.0f * b[j];
    }
    /* reads x, writes x in place and q */
    double bytes = (double)nx * (2 * sizeof(float) + 1);
    printf("b8_layernorm_quantize, %lld x %d rows, %d calls each (%.2f MB moved per call)\n",
           (long long)M, H, iters, bytes / 1e6);
    printf("%-8s %-27s %10s %10s %8s\n", "threads", "rows last written by", "best us", "mean us",
           "GB/s");
    for (int nt = 1; nt <= 2; nt++)
        for (int mode = 0; mode < (nt == 1 ? 1 : 3); mode++) {
            double best = 1e30, sum = 0;
            int n = 0;
            omp_set_num_threads(nt);
            for (int it = 0; it < iters; it++) {
#pragma omp parallel num_threads(2)
                {
                    int t = omp_get_thread_num();
                    for (int64_t r = 0; r < M; r++)
                        if ((nt == 1 ? 0 : writer(mode, r, M)) == t)
                            memcpy(x + r * H, x0 + r * H, H * sizeof(float));
                }
                b8_ln_quant p = {qg, qb, g, b, x, H, 1e-12f};
                double t0 = omp_get_wtime();
                b8_layernorm_quantize(x, H, M, H, &p, q, H);
                double dt = omp_get_wtime() - t0;
                if (dt < best) best = dt;
                if (it >= iters / 4) {
                    sum += dt;
                    n++;
                }
            }
            printf("%-8d %-27s %10.1f %10.1f %8.1f\n", nt, nt == 1 ? "this thread" : mode_name[mode],
                   best * 1e6, sum / n * 1e6, bytes / best / 1e9);
        }
    free(x);
    free(x0);
    free(q);
    free(g);
    free(b);
    free(qg);
    free(qb);
    return 0;
}
