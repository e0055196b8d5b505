/* bench_qgemm.c: INT8 GEMM throughput on the four BERT-base Linear shapes at M=1024 (or those of
 * another hidden size: --hidden 384 gives all-MiniLM-L6-v2's), for each kernel, 1 and 2 threads: GOP/s (2*M*N*K / time) and the share of the vpdpbusd peak measured
 * in this same run by a register-only loop (without VNNI: of bert8_measure_peaks' INT8 rate, the
 * vpmaddwd one on AVX2). A program, not a test.
 *
 *   bench_qgemm [--m M] [--hidden H] [--threads 1,2] [--kernels a,b] [--shapes qkv,ffn_in]
 *               [--all] [--time SEC] [--repeat R] [--cold N]
 *
 * --hidden H: the shapes of a BERT layer of hidden size H (QKV 3H x H, attention output H x H,
 * FFN-in 4H x H, FFN-out H x 4H; default 768).
 *
 * --cold N packs N copies of each weight and calls them in turn, so that with N times the weight
 * bytes past the last-level cache every call streams its weights from memory, as a model's
 * layers do (each Linear's weights are read once per forward pass).
 *
 * Each number is the best (minimum time) of repeated calls over at least --time seconds, the
 * whole measurement repeated --repeat times, best kept: the other core may be busy. The median
 * call (the lowest of the repeats) is printed beside it: a forward pass pays for the typical
 * call, not the best. f32+res (attn_out, ffn_out) adds the residual in place, as the model does. */
#define _GNU_SOURCE
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/cpu.h"
#include "bert8.h"
#include "kernels/gemm_s8/qgemm.h"

#define STATED_PEAK_PER_CORE 468.0 /* GOP/s: 1 zmm vpdpbusd (128 ops) per cycle at 3.66 GHz */

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* 12 independent accumulators hide vpdpbusd's latency; the loop touches no memory. */
__attribute__((target("avx512f,avx512vnni"), noinline)) static int32_t peak_loop(long iters) {
    __m512i a0 = _mm512_set1_epi32(1), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
            a7 = a0, a8 = a0, a9 = a0, a10 = a0, a11 = a0;
    __m512i x = _mm512_set1_epi32(0x01010101), y = _mm512_set1_epi32(0x02020202);
    for (long i = 0; i < iters; i++) {
        __asm__ volatile("vpdpbusd %[x], %[y], %[a0]\n\tvpdpbusd %[x], %[y], %[a1]\n\t"
                         "vpdpbusd %[x], %[y], %[a2]\n\tvpdpbusd %[x], %[y], %[a3]\n\t"
                         "vpdpbusd %[x], %[y], %[a4]\n\tvpdpbusd %[x], %[y], %[a5]\n\t"
                         "vpdpbusd %[x], %[y], %[a6]\n\tvpdpbusd %[x], %[y], %[a7]\n\t"
                         "vpdpbusd %[x], %[y], %[a8]\n\tvpdpbusd %[x], %[y], %[a9]\n\t"
                         "vpdpbusd %[x], %[y], %[a10]\n\tvpdpbusd %[x], %[y], %[a11]"
                         : [a0] "+v"(a0), [a1] "+v"(a1), [a2] "+v"(a2), [a3] "+v"(a3),
                           [a4] "+v"(a4), [a5] "+v"(a5), [a6] "+v"(a6), [a7] "+v"(a7),
                           [a8] "+v"(a8), [a9] "+v"(a9), [a10] "+v"(a10), [a11] "+v"(a11)
                         : [x] "v"(x), [y] "v"(y));
    }
    __m512i s = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a0, a1), a2),
                                 _mm512_add_epi32(_mm512_add_epi32(a3, a4), a5));
    s = _mm512_add_epi32(s, _mm512_add_epi32(_mm512_add_epi32(a6, a7), a8));
    s = _mm512_add_epi32(s, _mm512_add_epi32(_mm512_add_epi32(a9, a10), a11));
    return _mm512_reduce_add_epi32(s);
}

/* GOP/s of `threads` copies of the loop running at once: best of `repeat` runs of ~3 ms each,
 * short enough that some of them run without being preempted on a shared machine. */
static double measure_peak(int threads, int repeat) {
    const long iters = 1000000;
    double best = 1e30;
    volatile int32_t sink = 0;
    for (int r = 0; r < repeat; r++) {
        double t0 = now();
#pragma omp parallel num_threads(threads)
        {
            int32_t v = peak_loop(iters);
#pragma omp atomic
            sink += v;
        }
        double t = now() - t0;
        if (t < best) best = t;
    }
    (void)sink;
    return (double)threads * iters * 12.0 * 128.0 / best / 1e9;
}

typedef struct shape {
    const char *name;
    int64_t N, K;
    b8_act act;   /* fused activation of the layer in BERT */
    int residual; /* the layer adds the residual in its epilogue */
} shape;

/* N and K in units of the hidden size */
static const shape SHAPES[] = {
    {"qkv", 3, 1, B8_ACT_NONE, 0},
    {"attn_out", 1, 1, B8_ACT_NONE, 1},
    {"ffn_in", 4, 1, B8_ACT_GELU, 0},
    {"ffn_out", 1, 4, B8_ACT_NONE, 1},
};

typedef enum mode { MODE_S32, MODE_F32, MODE_GELU_S8, MODE_F32_RES, MODE_COUNT } mode;
static const char *MODE_NAMES[] = {"s32", "f32+bias", "gelu->s8", "f32+res"};

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#define MAX_CALLS 100000

/* Best seconds per call of one configuration; *median gets the median call. f32+res adds the
 * output to itself as the residual, in place, as the model's attn_out and ffn_out do. */
static double time_gemm(const int8_t *A, int64_t M, b8_qweight *const *ws, int nw, mode md,
                        int32_t *c32, float *cf, int8_t *c8, const float *bias, const float *omul,
                        double min_time, double *median) {
    const b8_qweight *w = ws[0];
    float as = 0.02f;
    b8_qepilogue ep = {.a_scale = &as, .bias = bias, .ldc = b8_qweight_n(w)};
    if (md == MODE_F32 || md == MODE_F32_RES) ep.out_f32 = cf;
    if (md == MODE_F32_RES) {
        ep.residual = cf;
        ep.ld_res = b8_qweight_n(w);
    }
    if (md == MODE_GELU_S8) {
        ep.act = B8_ACT_GELU;
        ep.out_s8 = c8;
        ep.out_mul = omul;
    }
    b8_err e;
    static double times[MAX_CALLS];
    double best = 1e30, start = now();
    int calls = 0;
    while ((calls < 3 || now() - start < min_time) && calls < MAX_CALLS) {
        w = ws[calls % nw];
        double t0 = now();
        bert8_status st = md == MODE_S32 ? b8_qgemm_s32(A, b8_qweight_k(w), M, w, c32,
                                                        b8_qweight_n(w), &e)
                                         : b8_qgemm(A, b8_qweight_k(w), M, w, &ep, NULL, &e);
        double t = now() - t0;
        if (st != BERT8_OK) {
            fprintf(stderr, "qgemm failed: %s\n", e.msg);
            return -1;
        }
        if (calls > 0 && t < best) best = t; /* the first call warms caches and primitives */
        if (calls > 0) times[calls - 1] = t;
        calls++;
    }
    qsort(times, (size_t)(calls - 1), sizeof times[0], cmp_double);
    *median = times[(calls - 1) / 2];
    return best;
}

static int in_list(const char *list, const char *name) {
    if (!list) return 1;
    const char *p = list;
    size_t n = strlen(name);
    while ((p = strstr(p, name))) {
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == '\0')) return 1;
        p += n;
    }
    return 0;
}

int main(int argc, char **argv) {
    int64_t M = 1024, H = 768;
    const char *threads_list = "1,2", *kernels = NULL, *shapes = NULL;
    int all = 0, repeat = 2, cold = 1;
    double min_time = 0.4;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--m") && i + 1 < argc) M = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--hidden") && i + 1 < argc) H = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads_list = argv[++i];
        else if (!strcmp(argv[i], "--kernels") && i + 1 < argc) kernels = argv[++i];
        else if (!strcmp(argv[i], "--shapes") && i + 1 < argc) shapes = argv[++i];
        else if (!strcmp(argv[i], "--all")) all = 1;
        else if (!strcmp(argv[i], "--time") && i + 1 < argc) min_time = atof(argv[++i]);
        else if (!strcmp(argv[i], "--repeat") && i + 1 < argc) repeat = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--cold") && i + 1 < argc) cold = atoi(argv[++i]);
        else {
            fprintf(stderr,
                    "usage: %s [--m M] [--hidden H] [--threads 1,2] [--kernels a,b] [--shapes a,b] "
                    "[--all] [--time SEC] [--repeat R] [--cold N]\n",
                    argv[0]);
            return 2;
        }
    }
    const b8_cpu *cpu = b8_cpu_get();
    if (cold < 1 || cold > 64) {
        fprintf(stderr, "--cold must be 1..64\n");
        return 2;
    }
    if (M < 1 || M > 65536 || H < 16 || H > 8192 || H % 4) {
        fprintf(stderr, "--m must be 1..65536 and --hidden a multiple of 4 in 16..8192\n");
        return 2;
    }
    printf("bench_qgemm: M=%lld, hidden %lld, level %s, %d physical cores%s\n", (long long)M, (long long)H,
           b8_isa_name(cpu->level), cpu->physical_cores,
           cold > 1 ? ", weights cold (copies called in turn)" : "");
    int tl[8], ntl = 0;
    for (const char *p = threads_list; *p && ntl < 8;) {
        tl[ntl++] = atoi(p);
        p = strchr(p, ',');
        if (!p) break;
        p++;
    }
    double peak[8] = {0};
    if (cpu->avx512vnni && cpu->os_zmm) {
        for (int t = 0; t < ntl; t++) {
            peak[t] = measure_peak(tl[t], 60);
            printf("vpdpbusd peak, %d thread(s): %.1f GOP/s measured (%.1f per core), stated "
                   "%.0f per core\n",
                   tl[t], peak[t], peak[t] / tl[t], STATED_PEAK_PER_CORE);
        }
    } else {
        /* the library's ceiling for this CPU (vpmaddwd on AVX2), else the stated VNNI figure */
        for (int t = 0; t < ntl; t++) {
            bert8_peaks pk;
            peak[t] = bert8_measure_peaks(tl[t], &pk) == BERT8_OK && pk.int8_gops > 0 ? pk.int8_gops : 0;
            if (peak[t] > 0)
                printf("no AVX512_VNNI: %% peak is of the vpmaddwd rate, %d thread(s): %.1f GOP/s (%.1f per core)\n",
                       tl[t], peak[t], peak[t] / tl[t]);
            else {
                peak[t] = STATED_PEAK_PER_CORE * tl[t];
                printf("no AVX512_VNNI: percentages are of the stated %.0f GOP/s per core\n", STATED_PEAK_PER_CORE);
            }
        }
    }

    int64_t maxN = 4 * H, maxK = 4 * H;
    int8_t *A = malloc((size_t)(M * maxK)), *W = malloc((size_t)(maxN * maxK));
    int8_t *W7 = malloc((size_t)(maxN * maxK)); /* 7-bit weights, for kernels limited to them */
    int32_t *c32 = malloc((size_t)(M * maxN) * 4);
    float *cf = malloc((size_t)(M * maxN) * 4), *ws = malloc(maxN * 4), *bias = malloc(maxN * 4),
          *omul = malloc(maxN * 4);
    int8_t *c8 = malloc((size_t)(M * maxN));
    if (!A || !W || !c32 || !cf || !ws || !bias || !omul || !c8) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    uint32_t x = 12345;
    for (int64_t i = 0; i < M * maxK; i++) A[i] = (int8_t)((x = x * 1664525u + 1013904223u) >> 24);
    for (int64_t i = 0; i < maxN * maxK; i++) W[i] = (int8_t)((x = x * 1664525u + 1013904223u) >> 24);
    for (int64_t i = 0; i < maxN * maxK; i++) W7[i] = (int8_t)(W[i] / 2);
    for (int64_t n = 0; n < maxN; n++) {
        ws[n] = 0.001f;
        bias[n] = 0.1f;
        omul[n] = 10.0f;
    }

    printf("\n%-28s %-9s %-9s %3s %9s %8s %10s %9s %8s\n", "kernel", "shape", "output", "thr", "GOP/s",
           "% peak", "% stated", "median", "% peak");
    for (int ki = 0; ki < b8_qgemm_kernel_count(); ki++) {
        const char *kn = b8_qgemm_kernel_name(ki);
        if (cpu->level < b8_qgemm_kernel_isa(ki)) continue;
        if (!in_list(kernels, kn)) continue;
        if (!kernels && !all && strstr(kn, "scalar")) continue; /* minutes per shape */
        for (size_t s = 0; s < sizeof SHAPES / sizeof SHAPES[0]; s++) {
            const shape *sh = &SHAPES[s];
            if (!in_list(shapes, sh->name)) continue;
            const int64_t N = sh->N * H, K = sh->K * H;
            double gop = 2.0 * (double)M * (double)N * (double)K / 1e9;
            for (int t = 0; t < ntl; t++) {
                /* Packed per thread count: oneDNN fixes its threads when it builds a primitive. */
                omp_set_num_threads(tl[t]);
                b8_qweight *w[64] = {0};
                b8_err e;
                int packed = 0;
                for (; packed < cold; packed++)
                    if (b8_qweight_pack(b8_qgemm_kernel_w_abs_max(ki) ? W7 : W, N, K, ws, kn,
                                        &w[packed], &e) != BERT8_OK)
                        break;
                if (packed < cold) {
                    printf("%-28s %-9s pack failed: %s\n", kn, sh->name, e.msg);
                    for (int i = 0; i < packed; i++) b8_qweight_free(w[i]);
                    continue;
                }
                for (int md = 0; md < MODE_COUNT; md++) {
                    if (md == MODE_GELU_S8 && sh->act != B8_ACT_GELU) continue;
                    if (md == MODE_F32_RES && !sh->residual) continue;
                    double best = 1e30, med = 1e30;
                    for (int r = 0; r < repeat; r++) {
                        double m, sec = time_gemm(A, M, w, cold, (mode)md, c32, cf, c8, bias, omul,
                                                  min_time, &m);
                        if (sec > 0 && sec < best) best = sec;
                        if (sec > 0 && m < med) med = m;
                    }
                    double rate = gop / best, mrate = gop / med;
                    printf("%-28s %-9s %-9s %3d %9.1f %7.1f%% %9.1f%% %9.1f %7.1f%%\n", kn, sh->name,
                           MODE_NAMES[md], tl[t], rate, 100.0 * rate / peak[t],
                           100.0 * rate / (STATED_PEAK_PER_CORE * tl[t]), mrate, 100.0 * mrate / peak[t]);
                    fflush(stdout);
                }
                for (int i = 0; i < cold; i++) b8_qweight_free(w[i]);
            }
        }
    }
    free(A);
    free(W);
    free(W7);
    free(c32);
    free(cf);
    free(ws);
    free(bias);
    free(omul);
    free(c8);
    return 0;
}
