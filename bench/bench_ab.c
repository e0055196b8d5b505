/* bench_ab.c: two builds of libbert8.so timed against each other in one process, their forward
 * passes alternated call by call (A, B, A, B, ...), so that both see the same machine: on a
 * shared 2-core guest, separate runs of the same binary differ by 10-20%, while the ratio of
 * alternated calls holds within a few percent. A program, not a test.
 *
 *   bench_ab LIB_A LIB_B MODEL_DIR [--batch B] [--seq S] [--threads T] [--iters N]
 *            [--lengths FILE] [--profile] [--env-a NAME=VALUE] [--env-b NAME=VALUE] [--model-b DIR]
 *
 * LIB_A and LIB_B may be the same file (it is then opened twice, through a private copy), with
 * --env-a/--env-b setting an environment variable while that side loads its model: the library's
 * own switches (BERT8_QGEMM_KERNEL, BERT8_HUGE_PAGES, BERT8_MAX_ISA) then differ between the two.
 * --model-b DIR has side B load another folder (two quantizations of one model, say) instead.
 *
 * Each library is opened with dlopen (RTLD_LOCAL: its own copy of every symbol) and loads
 * MODEL_DIR itself (an FP32 or INT8 folder). The batch is B random token ids of length S,
 * padded, or with --lengths FILE (one token count per line) B sequences of the first B lengths,
 * packed. Prints each library's median and best call time, the ratio of the medians (B over A:
 * above 1 means B is faster), the largest difference between the two last hidden states, and
 * with --profile the time share per op of each. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bert8.h"

typedef struct lib {
    const char *path;
    void *h;
    bert8_status (*load)(const char *, const bert8_load_params *, bert8_model **, char *, size_t);
    bert8_load_params (*defaults)(void);
    bert8_status (*session)(const bert8_model *, bert8_session **);
    bert8_status (*forward)(bert8_session *, const bert8_batch *, bert8_outputs *);
    bert8_status (*forward_packed)(bert8_session *, const bert8_packed_batch *, bert8_outputs *);
    const char *(*last_error)(const bert8_session *);
    void (*set_threads)(int);
    void (*set_profiling)(bert8_session *, int);
    void (*get_profile)(const bert8_session *, double *);
    const char *(*op_name)(bert8_op);
    const bert8_model_info *(*info)(const bert8_model *);
    bert8_model *model;
    bert8_session *s;
    double *t;
} lib;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int open_lib(lib *l, const char *path) {
    l->path = path;
    l->h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!l->h) {
        fprintf(stderr, "bench_ab: %s\n", dlerror());
        return -1;
    }
#define SYM(field, name)                                                                       \
    do {                                                                                       \
        *(void **)&l->field = dlsym(l->h, name);                                               \
        if (!l->field) {                                                                       \
            fprintf(stderr, "bench_ab: %s has no %s\n", path, name);                           \
            return -1;                                                                         \
        }                                                                                      \
    } while (0)
    SYM(load, "bert8_model_load");
    SYM(defaults, "bert8_default_load_params");
    SYM(session, "bert8_session_create");
    SYM(forward, "bert8_forward");
    SYM(forward_packed, "bert8_forward_packed");
    SYM(last_error, "bert8_session_last_error");
    SYM(set_threads, "bert8_set_threads");
    SYM(set_profiling, "bert8_session_set_profiling");
    SYM(get_profile, "bert8_session_get_profile");
    SYM(op_name, "bert8_op_name");
    SYM(info, "bert8_model_get_info");
#undef SYM
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const double *v, int n) {
    double *c = malloc((size_t)n * sizeof *c);
    memcpy(c, v, (size_t)n * sizeof *c);
    qsort(c, (size_t)n, sizeof *c, cmp_double);
    double m = n % 2 ? c[n / 2] : 0.5 * (c[n / 2 - 1] + c[n / 2]);
    free(c);
    return m;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s LIB_A LIB_B MODEL_DIR [--batch B] [--seq S] [--threads T] "
                        "[--iters N] [--lengths FILE] [--profile] [--env-a N=V] [--env-b N=V] [--model-b DIR]\n",
                argv[0]);
        return 2;
    }
    int64_t B = 8, S = 128;
    int threads = 2, iters = 20, profile = 0;
    const char *lengths = NULL, *env[2] = {NULL, NULL}, *dirs[2] = {argv[3], argv[3]};
    for (int i = 4; i < argc; i++) {
        if (!strcmp(argv[i], "--profile")) profile = 1;
        else if (i + 1 >= argc) {
            fprintf(stderr, "bench_ab: %s needs a value\n", argv[i]);
            return 2;
        } else if (!strcmp(argv[i], "--batch")) B = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--seq")) S = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--iters")) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--lengths")) lengths = argv[++i];
        else if (!strcmp(argv[i], "--env-a")) env[0] = argv[++i];
        else if (!strcmp(argv[i], "--env-b")) env[1] = argv[++i];
        else if (!strcmp(argv[i], "--model-b")) dirs[1] = argv[++i];
        else {
            fprintf(stderr, "bench_ab: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    if (B < 1 || S < 1 || iters < 1) {
        fprintf(stderr, "bench_ab: batch, seq and iters must be positive\n");
        return 2;
    }
    lib L[2];
    memset(L, 0, sizeof L);
    char copy[64] = "";
    for (int k = 0; k < 2; k++) {
        const char *path = argv[1 + k];
        if (k == 1 && !strcmp(argv[1], argv[2])) { /* dlopen would hand back the first copy */
            snprintf(copy, sizeof copy, "/tmp/bench_ab_%d.so", (int)getpid());
            char cmd[1024];
            snprintf(cmd, sizeof cmd, "cp '%s' %s", path, copy);
            if (system(cmd) != 0) {
                fprintf(stderr, "bench_ab: cannot copy %s\n", path);
                return 1;
            }
            path = copy;
        }
        if (open_lib(&L[k], path)) return 1;
        L[k].path = argv[1 + k];
        L[k].set_threads(threads);
        char err[512], name[256] = "";
        if (env[k]) {
            const char *eq = strchr(env[k], '=');
            snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - env[k]) : 0, env[k]);
            if (!eq || !name[0] || setenv(name, eq + 1, 1)) {
                fprintf(stderr, "bench_ab: --env-%c takes NAME=VALUE\n", 'a' + k);
                return 2;
            }
        }
        bert8_load_params lp = L[k].defaults();
        bert8_status lst = L[k].load(dirs[k], &lp, &L[k].model, err, sizeof err);
        if (name[0]) unsetenv(name);
        if (copy[0] && k == 1) unlink(copy);
        if (lst != BERT8_OK) {
            fprintf(stderr, "bench_ab: %s: %s\n", L[k].path, err);
            return 1;
        }
        if (L[k].session(L[k].model, &L[k].s) != BERT8_OK) return 1;
        L[k].t = calloc((size_t)iters, sizeof(double));
    }
    const int64_t vocab = L[0].info(L[0].model)->vocab_size;
    /* the batch: padded B x S, or packed with the first B lengths of the file */
    int64_t *cu = calloc((size_t)B + 1, sizeof *cu);
    if (lengths) {
        FILE *f = fopen(lengths, "r");
        if (!f) {
            fprintf(stderr, "bench_ab: cannot open %s\n", lengths);
            return 1;
        }
        long long x;
        for (int64_t b = 0; b < B; b++) {
            if (fscanf(f, "%lld", &x) != 1 || x < 1 || x > S) {
                fprintf(stderr, "bench_ab: %s: need %lld lengths in [1, %lld]\n", lengths, (long long)B, (long long)S);
                return 1;
            }
            cu[b + 1] = cu[b] + x;
        }
        fclose(f);
    } else {
        for (int64_t b = 0; b < B; b++) cu[b + 1] = cu[b] + S;
    }
    const int64_t tokens = cu[B];
    int32_t *ids = malloc((size_t)tokens * sizeof *ids);
    uint64_t r = 0x9e3779b97f4a7c15ull;
    for (int64_t i = 0; i < tokens; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)(1 + (r >> 33) % (uint64_t)(vocab - 1));
    }
    bert8_batch pb = {B, S, ids, NULL, NULL};
    bert8_packed_batch kb = {B, cu, ids, NULL};
    float *last[2] = {NULL, NULL};
    const int64_t H = L[0].info(L[0].model)->hidden_size;
    for (int it = -3; it < iters; it++) { /* 3 warm-up calls each */
        for (int k0 = 0; k0 < 2; k0++) {
            int k = (it & 1) ? 1 - k0 : k0; /* ABBA: neither always goes first */
            lib *l = &L[k];
            if (it == 0 && profile) l->set_profiling(l->s, 1);
            bert8_outputs o;
            double t0 = now();
            bert8_status st = lengths ? l->forward_packed(l->s, &kb, &o) : l->forward(l->s, &pb, &o);
            double t = now() - t0;
            if (st != BERT8_OK) {
                fprintf(stderr, "bench_ab: %s: %s\n", l->path, l->last_error(l->s));
                return 1;
            }
            if (it >= 0) l->t[it] = t;
            if (it == iters - 1) {
                last[k] = malloc((size_t)(tokens * H) * sizeof(float));
                memcpy(last[k], o.last_hidden_state.data, (size_t)(tokens * H) * sizeof(float));
            }
        }
    }
    double maxdiff = 0;
    for (int64_t i = 0; i < tokens * H; i++) maxdiff = fmax(maxdiff, fabs((double)last[0][i] - last[1][i]));
    double med[2];
    for (int k = 0; k < 2; k++) {
        double best = L[k].t[0];
        for (int i = 1; i < iters; i++) best = fmin(best, L[k].t[i]);
        med[k] = median(L[k].t, iters);
        printf("%s %s%s%s: median %.2f ms, best %.2f ms, %.2f seq/s\n", k ? "B" : "A", L[k].path, env[k] ? " " : "",
               env[k] ? env[k] : "", 1e3 * med[k], 1e3 * best, (double)B / med[k]);
    }
    /* the per-iteration ratio too: pairs taken back to back see the same minute */
    double *ratio = malloc((size_t)iters * sizeof *ratio);
    for (int i = 0; i < iters; i++) ratio[i] = L[0].t[i] / L[1].t[i];
    printf("B / A speed: %.3fx (ratio of medians), %.3fx (median of per-pair ratios); batch %lld, %lld tokens, "
           "%d threads, %d iterations; max |A - B| of the last hidden state %.3g\n",
           med[0] / med[1], median(ratio, iters), (long long)B, (long long)tokens, threads, iters, maxdiff);
    if (profile) {
        double p[2][BERT8_OP_COUNT], tot[2] = {0, 0};
        for (int k = 0; k < 2; k++) {
            L[k].get_profile(L[k].s, p[k]);
            for (int i = 0; i < BERT8_OP_COUNT; i++) tot[k] += p[k][i];
        }
        printf("%-12s %10s %10s   ms per call\n", "op", "A", "B");
        for (int i = 0; i < BERT8_OP_COUNT; i++)
            printf("%-12s %10.2f %10.2f\n", L[0].op_name((bert8_op)i), 1e3 * p[0][i] / iters, 1e3 * p[1][i] / iters);
        printf("%-12s %10.2f %10.2f\n", "total", 1e3 * tot[0] / iters, 1e3 * tot[1] / iters);
    }
    free(ratio);
    free(ids);
    free(cu);
    for (int k = 0; k < 2; k++) {
        free(L[k].t);
        free(last[k]);
    }
    return 0;
}
