/* bench_fp32.c: FP32 throughput of a checkpoint (sequences/s), and how close the end-to-end
 * matmul rate comes to the rate oneDNN reaches on the model's GEMM shapes alone.
 *   bench_fp32 MODEL_DIR [--batch 8] [--seq 128] [--threads 1,2] [--iters N] */
#include "bert8.h"
#include "model/model.h"
#include "kernels/gemm_f32/sgemm.h"
#include "kernels/attention/attention.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double now(void) { return omp_get_wtime(); }

static float *rand_buf(size_t n, unsigned seed) {
    float *p = b8_malloc_aligned(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = ((seed >> 8) & 0xFFFF) / 65536.0f - 0.5f;
    }
    return p;
}

/* Best-of-reps time of one Linear shape on the same library, plain (no post-op). */
static double time_gemm(int64_t m, int64_t n, int64_t k, int reps) {
    float *w = rand_buf((size_t)(n * k), 1), *a = rand_buf((size_t)(m * k), 2);
    float *c = b8_malloc_aligned((size_t)(m * n) * sizeof(float));
    b8_sgemm_w *pw = NULL;
    b8_err e;
    if (b8_sgemm_w_pack(w, NULL, n, k, B8_ACT_NONE, false, &pw, &e)) {
        fprintf(stderr, "pack failed: %s\n", e.msg);
        exit(1);
    }
    double best = 1e30;
    for (int r = 0; r < reps + 1; r++) {
        double t0 = now();
        b8_sgemm(pw, a, k, m, c, n, &e);
        double t = now() - t0;
        if (r && t < best) best = t;
    }
    b8_sgemm_w_free(pw);
    b8_free_aligned(w);
    b8_free_aligned(a);
    b8_free_aligned(c);
    return best;
}

/* Best-of-reps time of the fused attention kernel over all (sequence, head) pairs. */
static double time_attn(int64_t B, int64_t A, int64_t T, int64_t d, int reps) {
    int64_t H = A * d;
    float *qkv = rand_buf((size_t)(B * T * 3 * H), 3);
    float *ctx = b8_malloc_aligned((size_t)(B * T * H) * sizeof(float));
    size_t per = b8_attention_scratch_floats(T, d);
    int nt = omp_get_max_threads();
    float *scratch = b8_malloc_aligned((size_t)nt * per * sizeof(float));
    b8_attention_fn att = b8_attention_head_best();
    double best = 1e30;
    for (int r = 0; r < reps + 1; r++) {
        double t0 = now();
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < B * A; i++) {
            const float *base = qkv + (i / A) * T * 3 * H + (i % A) * d;
            att(base, base + H, base + 2 * H, 3 * H, T, d, 0.125f, NULL, B8_MASK_ADD_MIN, NULL, NULL,
                ctx + (i / A) * T * H + (i % A) * d, H, scratch + (size_t)omp_get_thread_num() * per);
        }
        double t = now() - t0;
        if (r && t < best) best = t;
    }
    b8_free_aligned(qkv);
    b8_free_aligned(ctx);
    b8_free_aligned(scratch);
    return best;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_fp32 MODEL_DIR [--batch 8] [--seq 128] [--threads 1,2] [--iters N]\n");
        return 2;
    }
    int64_t B = 8, T = 128;
    int iters = 0;
    const char *threads = "1,2";
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--batch")) B = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--seq")) T = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) threads = argv[i + 1];
        else if (!strcmp(argv[i], "--iters")) iters = atoi(argv[i + 1]);
    }
    char err[1024];
    bert8_model *m = NULL;
    if (bert8_model_load(argv[1], NULL, &m, err, sizeof err)) {
        fprintf(stderr, "bench_fp32: %s\n", err);
        return 1;
    }
    const bert8_model_info *in = bert8_model_get_info(m);
    const int64_t H = in->hidden_size, I = in->intermediate_size, L = in->num_layers, A = in->num_heads;
    const int64_t M = B * T;
    double lin = 2.0 * M * (4.0 * H * H + 2.0 * H * I), att = 4.0 * B * T * T * H;
    double flops = L * (lin + att);
    int32_t *ids = malloc((size_t)M * sizeof *ids);
    for (int64_t i = 0; i < M; i++) ids[i] = (int32_t)((i * 7919 + 13) % (in->vocab_size - 200) + 100);
    bert8_batch bt = {B, T, ids, NULL, NULL};
    bert8_session *s = NULL;
    bert8_session_create(m, &s);
    printf("model %s: %lld layers, hidden %lld, intermediate %lld, heads %lld; batch %lld x seq %lld\n",
           argv[1], (long long)L, (long long)H, (long long)I, (long long)A, (long long)B, (long long)T);
    printf("matmul work per forward: %.1f GFLOP (%.1f linear + %.1f attention)\n", flops / 1e9,
           L * lin / 1e9, L * att / 1e9);
    char tl[64];
    snprintf(tl, sizeof tl, "%s", threads);
    for (char *tok = strtok(tl, ","); tok; tok = strtok(NULL, ",")) {
        int nt = atoi(tok);
        bert8_set_threads(nt);
        int reps = iters > 0 ? iters : (nt == 1 ? 3 : 5);
        bert8_outputs o;
        if (bert8_forward(s, &bt, &o)) {
            fprintf(stderr, "forward failed: %s\n", bert8_session_last_error(s));
            return 1;
        }
        double best = 1e30, total = 0;
        for (int r = 0; r < reps; r++) {
            double t0 = now();
            bert8_forward(s, &bt, &o);
            double t = now() - t0;
            total += t;
            if (t < best) best = t;
        }
        int gr = 3;
        double tg = time_gemm(M, 3 * H, H, gr) + time_gemm(M, H, H, gr) + time_gemm(M, I, H, gr) +
                    time_gemm(M, H, I, gr);
        double ta = time_attn(B, A, T, H / A, gr);
        double alone = L * (tg + ta);
        double rate_e2e = flops / best / 1e9, rate_alone = flops / alone / 1e9;
        printf("threads %d: %.2f seq/s (best of %d, mean %.2f seq/s); end-to-end %.1f GFLOP/s, GEMM shapes "
               "alone %.1f GFLOP/s (linear %.1f, attention %.1f); end-to-end / alone = %.1f%%; "
               "of FP32 FMA peak (117 GFLOP/s/core): %.1f%%\n",
               nt, B / best, reps, B * reps / total, rate_e2e, rate_alone, L * lin / (L * tg) / 1e9,
               L * att / (L * ta) / 1e9, 100.0 * rate_e2e / rate_alone, 100.0 * rate_e2e / (117.0 * nt));
        fflush(stdout);
    }
    bert8_session_free(s);
    free(ids);
    bert8_model_free(m);
    return 0;
}
