/* test_dispatch.c: kernel choice under a BERT8_MAX_ISA cap. Run once per level by ctest (the
 * cap comes from the environment, the level to expect from argv[1]); a level this CPU cannot
 * run is reported as skipped. Checks that every op runs the first implementation of its table
 * the capped CPU allows, that every table ends in a scalar twin, and that the chosen kernels
 * give what their scalar twins give (bit for bit; the FP32 GEMM to rounding, as oneDNN orders
 * its sums its own way). With argv[1] "bad-cap" it checks that a misspelled cap is an error at
 * load. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpu.h"
#include "bert8_pipeline.h"
#include "kernels/attention/attention.h"
#include "kernels/attention/rel_dot.h"
#include "kernels/registry.h"
#include "kernels/gemm_f32/sgemm.h"
#include "kernels/gemm_f32/sgemm_rows.h"
#include "kernels/gemm_s8/qgemm.h"
#include "kernels/quantize/quantize.h"
#include "kernels/rowops/rowops.h"
#include "testutil.h"

static b8_isa want;

static float *rnd(size_t n, uint32_t seed, float scale) {
    float *p = b8_malloc_aligned(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (((seed >> 8) & 0xFFFF) / 65536.0f - 0.5f) * scale;
    }
    return p;
}

TEST(every_op_runs_the_first_implementation_the_cap_allows) {
    CHECK(b8_cpu_level() == want);
    for (int i = 0; i < b8_dispatch_op_count(); i++) {
        b8_op_table *t = b8_dispatch_op(i);
        const b8_impl *c = b8_dispatch(t);
        CHECKF(t->impls[t->n - 1].isa == B8_ISA_SCALAR && strstr(t->impls[t->n - 1].name, "scalar"),
               "%s: the table does not end in a scalar twin", t->op);
        int first = t->n - 1;
        for (int k = 0; k < t->n; k++)
            if (t->impls[k].isa <= want) {
                first = k;
                break;
            }
        CHECKF(c == &t->impls[first], "%s runs %s, expected %s", t->op, c->name, t->impls[first].name);
        CHECKF(c->isa <= want, "%s: %s needs %s above the cap %s", t->op, c->name, b8_isa_name(c->isa),
               b8_isa_name(want));
        CHECK(b8_dispatch_choice(t->op) && !strcmp(b8_dispatch_choice(t->op), c->name));
        printf("  %-20s %s\n", t->op, c->name);
    }
}

static const b8_impl *scalar_of(b8_op_table *t) { return &t->impls[t->n - 1]; }
static b8_op_table *op(const char *name) {
    for (int i = 0; i < b8_dispatch_op_count(); i++)
        if (!strcmp(b8_dispatch_op(i)->op, name)) return b8_dispatch_op(i);
    return NULL;
}

TEST(chosen_row_kernels_match_their_scalar_twins_bit_for_bit) {
    const int64_t rows = 7, n = 77;
    float *x = rnd((size_t)(rows * n), 1, 8.0f), *g = rnd((size_t)n, 2, 2.0f), *b = rnd((size_t)n, 3, 1.0f);
    float *y0 = b8_malloc_aligned((size_t)(rows * n) * sizeof(float)), *y1 = b8_malloc_aligned((size_t)(rows * n) * sizeof(float));
    b8_layernorm_fn ln = b8_layernorm_rows_best(), ls = (b8_layernorm_fn)scalar_of(op("layernorm"))->fn;
    ln(x, y0, rows, n, g, b, 1e-12f);
    ls(x, y1, rows, n, g, b, 1e-12f);
    CHECK(!memcmp(y0, y1, (size_t)(rows * n) * sizeof(float)));
    int8_t q0[7 * 77], q1[7 * 77];
    float s0[7], s1[7];
    b8_quantize_static(x, n, rows, n, g, 0.5f, -3.0f, q0, n);
    ((b8_quantize_static_fn)scalar_of(op("quantize_static"))->fn)(x, n, rows, n, g, 0.5f, -3.0f, q1, n);
    CHECK(!memcmp(q0, q1, sizeof q0));
    b8_quantize_dynamic(x, n, rows, n, g, q0, n, s0);
    ((b8_quantize_dynamic_fn)scalar_of(op("quantize_dynamic"))->fn)(x, n, rows, n, g, q1, n, s1);
    CHECK(!memcmp(q0, q1, sizeof q0) && !memcmp(s0, s1, sizeof s0));
    b8_ln_quant lq = {g, b, g, b, y0, n, 1e-5f}, lq1 = lq;
    lq1.y = y1;
    b8_layernorm_quantize(x, n, rows, n, &lq, q0, n);
    ((b8_layernorm_quantize_fn)scalar_of(op("layernorm_quantize"))->fn)(x, n, rows, n, &lq1, q1, n);
    CHECK(!memcmp(q0, q1, sizeof q0) && !memcmp(y0, y1, (size_t)(rows * n) * sizeof(float)));
    /* attention over 3 heads of 16, 19 tokens, with a key mask */
    const int64_t T = 19, d = 16, H = 48;
    float *qkv = rnd((size_t)(T * 3 * H), 4, 3.0f), *c0 = b8_calloc_aligned((size_t)(T * H), sizeof(float)),
          *c1 = b8_calloc_aligned((size_t)(T * H), sizeof(float));
    float *scr = b8_malloc_aligned(b8_attention_scratch_floats(T, d) * sizeof(float));
    int32_t mask[19];
    for (int i = 0; i < 19; i++) mask[i] = i % 5 != 3;
    b8_attention_fn at = b8_attention_head_best(), as = (b8_attention_fn)scalar_of(op("attention"))->fn;
    for (int64_t h = 0; h < 3; h++) {
        at(qkv + h * d, qkv + H + h * d, qkv + 2 * H + h * d, 3 * H, T, d, 0.25f, mask, B8_MASK_ADD_MIN, NULL, NULL,
           c0 + h * d, H, scr);
        as(qkv + h * d, qkv + H + h * d, qkv + 2 * H + h * d, 3 * H, T, d, 0.25f, mask, B8_MASK_ADD_MIN, NULL, NULL,
           c1 + h * d, H, scr);
    }
    CHECK(!memcmp(c0, c1, (size_t)(T * H) * sizeof(float)));
    b8_free_aligned(x), b8_free_aligned(g), b8_free_aligned(b), b8_free_aligned(y0), b8_free_aligned(y1);
    b8_free_aligned(qkv), b8_free_aligned(c0), b8_free_aligned(c1), b8_free_aligned(scr);
}

TEST(chosen_gemm_kernels_match_their_scalar_twins) {
    const int64_t M = 37, N = 70, K = 129;
    float *w = rnd((size_t)(N * K), 5, 1.0f), *bias = rnd((size_t)N, 6, 1.0f), *a = rnd((size_t)(M * K), 7, 2.0f);
    float *c = b8_malloc_aligned((size_t)(M * N) * sizeof(float)), *r = b8_malloc_aligned((size_t)(M * N) * sizeof(float));
    b8_sgemm_w *pw = NULL;
    b8_err e;
    CHECK(b8_sgemm_w_pack(w, bias, N, K, B8_ACT_GELU, false, &pw, &e) == BERT8_OK);
    CHECK(pw && b8_sgemm(pw, a, K, M, c, N, &e) == BERT8_OK);
    double worst = 0;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = bias[j];
            for (int64_t k = 0; k < K; k++) s += (double)a[i * K + k] * w[j * K + k];
            s = 0.5 * s * (1.0 + erf(s / sqrt(2.0)));
            double err = fabs(c[i * N + j] - s) / (1.0 + fabs(s));
            if (err > worst) worst = err;
        }
    CHECKF(worst < 1e-5, "fp32 gemm (%s) deviates %.3g from double", b8_dispatch_choice("sgemm"), worst);
    b8_sgemm_w_free(pw);
    /* int8: the default kernel against the scalar oracle, int32 accumulators bit for bit */
    int8_t *wq = malloc((size_t)(N * K)), *aq = malloc((size_t)(M * K));
    for (int64_t i = 0; i < N * K; i++) wq[i] = (int8_t)((i * 37 % 255) - 127);
    for (int64_t i = 0; i < M * K; i++) aq[i] = (int8_t)((i * 91 % 255) - 127);
    float *ws = rnd((size_t)N, 8, 1.0f);
    b8_qweight *q = NULL, *o = NULL;
    int32_t *c32 = malloc((size_t)(M * N) * sizeof(int32_t)), *o32 = malloc((size_t)(M * N) * sizeof(int32_t));
    CHECK(b8_qweight_pack(wq, N, K, ws, NULL, &q, &e) == BERT8_OK);
    CHECK(b8_qweight_pack(wq, N, K, ws, "qs8_gemm__scalar", &o, &e) == BERT8_OK);
    if (q && o) {
        printf("  qgemm: %s\n", b8_qweight_kernel_name(q));
        CHECK(b8_isa_parse("scalar", &(b8_isa){0}));
        CHECK(b8_qgemm_s32(aq, K, M, q, c32, N, &e) == BERT8_OK && b8_qgemm_s32(aq, K, M, o, o32, N, &e) == BERT8_OK);
        CHECK(!memcmp(c32, o32, (size_t)(M * N) * sizeof(int32_t)));
    }
    b8_qweight_free(q);
    b8_qweight_free(o);
    free(wq), free(aq), free(c32), free(o32);
    b8_free_aligned(w), b8_free_aligned(bias), b8_free_aligned(a), b8_free_aligned(c), b8_free_aligned(r), b8_free_aligned(ws);
}

/* The heads' product: the chosen kernel gives its scalar twin's bits, for every activation, with
 * and without accumulation, at K with and without a tail of 8; through b8_sgemm, a row gives
 * the same bits alone as in a batch of 37, on one thread and on all of them. */
TEST(head_gemm_matches_its_scalar_twin_and_ignores_the_batch) {
    const int64_t M = 37, N = 70;
    const int64_t ks[] = {1, 8, 13, 64, 129};
    for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
        const int64_t K = ks[ki];
        float *w = rnd((size_t)(N * K), 11, 1.0f), *bias = rnd((size_t)N, 12, 1.0f), *a = rnd((size_t)(M * K), 13, 2.0f);
        float *c0 = rnd((size_t)(M * N), 14, 1.0f), *c1 = b8_malloc_aligned((size_t)(M * N) * sizeof(float));
        for (int act = 0; act < B8_ACT_COUNT; act++)
            for (int acc = 0; acc < 2; acc++) {
                memcpy(c1, c0, (size_t)(M * N) * sizeof(float));
                float *d0 = b8_malloc_aligned((size_t)(M * N) * sizeof(float));
                memcpy(d0, c0, (size_t)(M * N) * sizeof(float));
                b8_sgemm_rows_best()(a, K, M, w, bias, K, (b8_act)act, acc, d0, N, 0, N);
                ((b8_sgemm_rows_fn)scalar_of(op("sgemm_rows"))->fn)(a, K, M, w, bias, K, (b8_act)act, acc, c1, N, 0, N);
                CHECKF(!memcmp(d0, c1, (size_t)(M * N) * sizeof(float)), "%s K=%lld act %d acc %d",
                       b8_dispatch_choice("sgemm_rows"), (long long)K, act, acc);
                b8_free_aligned(d0);
            }
        b8_sgemm_w *pw = NULL;
        b8_err e;
        CHECK(b8_sgemm_w_pack_head(w, bias, N, K, B8_ACT_TANH, &pw, &e) == BERT8_OK);
        int nt = bert8_get_threads();
        for (int threads = 1; threads <= nt; threads += nt > 1 ? nt - 1 : 1) {
            bert8_set_threads(threads);
            CHECK(pw && b8_sgemm(pw, a, K, M, c0, N, &e) == BERT8_OK);
            for (int64_t i = 0; i < M; i++) {
                CHECK(b8_sgemm(pw, a + i * K, K, 1, c1 + i * N, N, &e) == BERT8_OK);
                for (int64_t j = 0; j < N; j++) {
                    double s = bias[j];
                    for (int64_t k = 0; k < K; k++) s += (double)a[i * K + k] * w[j * K + k];
                    CHECK(fabs(c0[i * N + j] - tanh(s)) < 1e-5);
                }
            }
            CHECK(!memcmp(c0, c1, (size_t)(M * N) * sizeof(float)));
        }
        bert8_set_threads(nt);
        b8_sgemm_w_free(pw);
        b8_free_aligned(w), b8_free_aligned(bias), b8_free_aligned(a), b8_free_aligned(c0), b8_free_aligned(c1);
    }
}

/* Disentangled attention's products: the chosen kernel gives its scalar twin's bits, and a row
 * gives the same bits alone as in a block of 37 rows (packed and padded batches agree). */
TEST(rel_dot_matches_its_scalar_twin_and_ignores_the_rows) {
    const int64_t M = 37, K = 64, N = 255, ldb = 512;
    float *a = rnd((size_t)(M * K), 21, 2.0f), *b = rnd((size_t)(K * ldb), 22, 1.0f);
    float *c0 = b8_malloc_aligned((size_t)(M * N) * sizeof(float)), *c1 = b8_malloc_aligned((size_t)(M * N) * sizeof(float));
    b8_rel_dot_best()(a, K, M, b + 3, ldb, K, N, c0, N);
    ((b8_rel_dot_fn)scalar_of(op("rel_dot"))->fn)(a, K, M, b + 3, ldb, K, N, c1, N);
    CHECKF(!memcmp(c0, c1, (size_t)(M * N) * sizeof(float)), "%s", b8_dispatch_choice("rel_dot"));
    for (int64_t i = 0; i < M; i++) b8_rel_dot_best()(a + i * K, K, 1, b + 3, ldb, K, N, c1 + i * N, N);
    CHECKF(!memcmp(c0, c1, (size_t)(M * N) * sizeof(float)), "%s: one row at a time", b8_dispatch_choice("rel_dot"));
    b8_free_aligned(a), b8_free_aligned(b), b8_free_aligned(c0), b8_free_aligned(c1);
}

TEST(a_misspelled_cap_is_an_error_at_load) {
    char err[1024] = "";
    bert8_model *m = NULL;
    bert8_status st = bert8_model_load(tu_shared_path("golden/models/bert_model"), NULL, &m, err, sizeof err);
    CHECKF(st == BERT8_ERR_INVALID_ARG && !m, "status %d", (int)st);
    CHECKF(strstr(err, "BERT8_MAX_ISA") && strstr(err, "avx512_vnni"), "message: %s", err);
    bert8_pipeline *p = NULL;
    st = bert8_pipeline_open(tu_shared_path("golden/models/bert_e2e"), NULL, &p, err, sizeof err);
    CHECKF(st == BERT8_ERR_INVALID_ARG && !p && strstr(err, "BERT8_MAX_ISA"), "pipeline: status %d: %s", (int)st, err);
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "bad-cap")) {
        RUN(a_misspelled_cap_is_an_error_at_load);
        return tu_finish();
    }
    if (argc < 2 || !b8_isa_parse(argv[1], &want)) {
        printf("usage: test_dispatch LEVEL|bad-cap (with BERT8_MAX_ISA=LEVEL)\n");
        return 2;
    }
    if (b8_cpu_get()->hw_level < want) {
        printf("skip: this CPU (and OS) run level %s, below %s\n", b8_isa_name(b8_cpu_get()->hw_level),
               b8_isa_name(want));
        return TU_SKIP_CODE;
    }
    RUN(every_op_runs_the_first_implementation_the_cap_allows);
    RUN(chosen_row_kernels_match_their_scalar_twins_bit_for_bit);
    RUN(chosen_gemm_kernels_match_their_scalar_twins);
    RUN(head_gemm_matches_its_scalar_twin_and_ignores_the_batch);
    RUN(rel_dot_matches_its_scalar_twin_and_ignores_the_rows);
    return tu_finish();
}
