/* test_qgemm.c: every INT8 GEMM kernel against the scalar oracle (qs8_gemm__scalar): int32
 * accumulators bit-exact over a sweep of M, N, K (edges, K not a multiple of 4, K split in
 * passes), extreme values, every fused epilogue bit-exact (oneDNN within a documented
 * tolerance), the SIMD epilogue math against its scalar twin and libm, kernel selection under
 * each BERT8_MAX_ISA cap (re-run in a child process), and argument errors. */
#include "testutil.h"

#include <float.h>
#include <omp.h>
#include <stdlib.h>

#include "base/cpu.h"
#include "kernels/gemm_s8/qgemm.h"
#include "kernels/vmath/vmath.h"
#include "kernels/vmath/vmath_avx2.h"
#include "kernels/vmath/vmath_avx512.h"

int tcpu_spawn_with_cap(const char *isa, const char *child_arg);

static const char *ORACLE = "qs8_gemm__scalar";

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}
static float rndf(float lo, float hi) { return lo + (hi - lo) * (float)(rnd() & 0xffffff) / 16777216.0f; }
static void fill_s8(int8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = (int8_t)(rnd() & 0xff);
}

static bool kernel_runs_here(int i) { return b8_cpu_level() >= b8_qgemm_kernel_isa(i); }

/* Weights the tests make: any int8 (W_LIMIT 0), or within +-W_LIMIT (7-bit weights, which
 * the kernels with a weight limit take too). */
static int W_LIMIT = 0;
static void fill_w(int8_t *p, size_t n) {
    if (!W_LIMIT) {
        fill_s8(p, n);
        return;
    }
    for (size_t i = 0; i < n; i++) p[i] = (int8_t)((int)(rnd() % (2u * W_LIMIT + 1)) - W_LIMIT);
}

/* The kernel runs on this CPU and takes the weights fill_w makes. */
static bool kernel_usable(int i) {
    int lim = b8_qgemm_kernel_w_abs_max(i);
    return kernel_runs_here(i) && (!lim || (W_LIMIT && W_LIMIT <= lim));
}

/* Packs w with a named kernel; NULL (and a printed reason) when that fails. */
static b8_qweight *pack(const int8_t *w, int64_t N, int64_t K, const float *ws, const char *name) {
    b8_qweight *q = NULL;
    b8_err e;
    b8_err_clear(&e);
    if (b8_qweight_pack(w, N, K, ws, name, &q, &e) != BERT8_OK) {
        printf("  pack %s N=%lld K=%lld failed: %s\n", name ? name : "(auto)", (long long)N,
               (long long)K, e.msg);
        return NULL;
    }
    return q;
}

/* int32 results of every runnable kernel against the oracle for one shape; lda/ldc padded. */
static int check_s32_shape(int64_t M, int64_t N, int64_t K, int pad) {
    int64_t lda = K + pad, ldc = N + pad;
    int8_t *A = malloc((size_t)(M * lda)), *W = malloc((size_t)(N * K));
    float *ws = malloc((size_t)N * sizeof(float));
    int32_t *ref = malloc((size_t)(M * ldc) * 4), *got = malloc((size_t)(M * ldc) * 4);
    fill_s8(A, (size_t)(M * lda));
    fill_w(W, (size_t)(N * K));
    for (int64_t n = 0; n < N; n++) ws[n] = 1.0f;
    int bad = 0;
    b8_err e;
    b8_qweight *qo = pack(W, N, K, ws, ORACLE);
    if (!qo || b8_qgemm_s32(A, lda, M, qo, ref, ldc, &e) != BERT8_OK) bad++;
    for (int i = 0; i < b8_qgemm_kernel_count() && !bad; i++) {
        const char *name = b8_qgemm_kernel_name(i);
        if (!kernel_usable(i) || strcmp(name, ORACLE) == 0) continue;
        b8_qweight *q = pack(W, N, K, ws, name);
        if (!q) {
            bad++;
            continue;
        }
        memset(got, 0x5a, (size_t)(M * ldc) * 4);
        if (b8_qgemm_s32(A, lda, M, q, got, ldc, &e) != BERT8_OK) {
            printf("  %s: %s\n", name, e.msg);
            bad++;
        }
        for (int64_t m = 0; m < M && !bad; m++)
            for (int64_t n = 0; n < N; n++)
                if (got[m * ldc + n] != ref[m * ldc + n]) {
                    printf("  %s M=%lld N=%lld K=%lld: C[%lld][%lld] = %d, oracle %d\n", name,
                           (long long)M, (long long)N, (long long)K, (long long)m, (long long)n,
                           got[m * ldc + n], ref[m * ldc + n]);
                    bad++;
                    break;
                }
        b8_qweight_free(q);
    }
    b8_qweight_free(qo);
    free(A);
    free(W);
    free(ws);
    free(ref);
    free(got);
    return bad;
}

static const int64_t SWEEP_M[] = {1, 2, 3, 7, 16, 33, 100};
static const int64_t SWEEP_N[] = {1, 5, 16, 17, 48, 64, 65, 130};
static const int64_t SWEEP_K[] = {1, 3, 4, 5, 31, 64, 65, 257, 768};
#define LEN(a) (sizeof(a) / sizeof((a)[0]))

static int run_s32_sweep(int stride) {
    int bad = 0, shape = 0;
    for (size_t a = 0; a < LEN(SWEEP_M); a++)
        for (size_t b = 0; b < LEN(SWEEP_N); b++)
            for (size_t c = 0; c < LEN(SWEEP_K); c++, shape++) {
                if (shape % stride) continue;
                bad += check_s32_shape(SWEEP_M[a], SWEEP_N[b], SWEEP_K[c], shape % 3 == 0 ? 3 : 0);
                if (bad) return bad;
            }
    return bad;
}

TEST(accumulators_match_oracle_on_shape_sweep) { CHECK(run_s32_sweep(1) == 0); }

/* K above one pass (kc_max 4096 / 2048) exercises the partial-sum buffer. */
TEST(accumulators_match_oracle_when_k_is_split_in_passes) {
    CHECK(check_s32_shape(9, 70, 4099, 1) == 0);
    CHECK(check_s32_shape(17, 33, 5001, 0) == 0);
}

/* The +128 trick and the int16 path at their limits, against closed forms. K=1000 keeps
 * |sum| below 2^24; K=4099 goes beyond, where oneDNN's int32 output is only float-exact (it
 * passes the accumulators through fp32), which is checked and reported as such. */
static void check_extremes(int64_t K, int w_lo, int w_hi) {
    const int64_t M = 9, N = 37;
    int8_t *A = malloc(M * K), *W = malloc(N * K);
    int32_t *C = malloc(M * N * 4);
    float *ws = malloc(N * sizeof(float));
    for (int64_t n = 0; n < N; n++) ws[n] = 1.0f;
    const int vals[][2] = {{-128, w_lo}, {-128, w_hi}, {127, w_lo}, {127, w_hi}};
    for (size_t v = 0; v < LEN(vals); v++) {
        memset(A, vals[v][0], M * K);
        memset(W, vals[v][1], N * K);
        int32_t want = (int32_t)vals[v][0] * vals[v][1] * (int32_t)K;
        for (int i = 0; i < b8_qgemm_kernel_count(); i++) {
            int lim = b8_qgemm_kernel_w_abs_max(i);
            if (!kernel_runs_here(i) || (lim && (w_lo < -lim || w_hi > lim))) continue;
            const char *name = b8_qgemm_kernel_name(i);
            b8_qweight *q = pack(W, N, K, ws, name);
            CHECK(q != NULL);
            if (!q) continue;
            b8_err e;
            memset(C, 0, M * N * 4);
            CHECK(b8_qgemm_s32(A, K, M, q, C, N, &e) == BERT8_OK);
            bool float_exact_only = strcmp(name, "onednn") == 0 && abs(want) > (1 << 24);
            int wrong = 0;
            for (int64_t j = 0; j < M * N; j++)
                /* (with AMX, oneDNN gives the exact sum for some blocks and the fp32-rounded one
                 * for others) */
                wrong += float_exact_only ? C[j] != (int32_t)(float)want && C[j] != want
                                          : C[j] != want;
            CHECKF(wrong == 0, "%s K=%lld: A=%d W=%d: %d wrong (C[0]=%d, want %d)", name,
                   (long long)K, vals[v][0], vals[v][1], wrong, C[0], want);
            if (float_exact_only && C[0] != want && v == LEN(vals) - 1)
                printf("  note: onednn int32 output %d for exact %d (rounded through fp32)\n",
                       C[0], want);
            b8_qweight_free(q);
        }
    }
    free(A);
    free(W);
    free(C);
    free(ws);
}

TEST(extreme_values_give_exact_closed_form_sums) {
    check_extremes(1000, -128, 127);
    check_extremes(4099, -128, 127);
    /* 7-bit weights at their edges: 255 * 64 * 2 is the largest vpmaddubsw pair (no saturation) */
    check_extremes(1000, -64, 64);
    check_extremes(4099, -64, 64);
}

/* An input zero point z: every kernel's raw products are sum_k (A - z) W, exactly; oneDNN
 * refuses it by name. */
TEST(input_zero_point_is_subtracted_exactly) {
    const int64_t M = 13, N = 37, K = 300;
    int8_t *A = malloc(M * K), *W = malloc(N * K);
    int32_t *C = malloc(M * N * 4), *ref = malloc(M * N * 4);
    float *ws = malloc(N * 4);
    fill_s8(A, M * K);
    fill_w(W, N * K);
    for (int64_t n = 0; n < N; n++) ws[n] = 1.0f;
    const int32_t z = -117;
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            int32_t acc = 0;
            for (int64_t k = 0; k < K; k++) acc += ((int32_t)A[m * K + k] - z) * W[n * K + k];
            ref[m * N + n] = acc;
        }
    for (int i = 0; i < b8_qgemm_kernel_count(); i++) {
        const char *name = b8_qgemm_kernel_name(i);
        b8_err e;
        b8_qweight *q = NULL;
        if (b8_qweight_pack(W, N, K, ws, name, &q, &e) != BERT8_OK) continue; /* not on this CPU */
        bert8_status st = b8_qweight_set_input_zero(q, z, &e);
        if (strcmp(name, "onednn") == 0) {
            CHECK(st == BERT8_ERR_UNSUPPORTED && strstr(e.msg, "zero point"));
        } else {
            CHECK(st == BERT8_OK);
            /* set twice: the compensation follows the new value, not the sum of both */
            CHECK(b8_qweight_set_input_zero(q, 5, &e) == BERT8_OK && b8_qweight_set_input_zero(q, z, &e) == BERT8_OK);
            CHECK(b8_qgemm_s32(A, K, M, q, C, N, &e) == BERT8_OK);
            if (memcmp(C, ref, M * N * 4)) printf("  %s: raw products with a zero point differ\n", name);
            CHECK(memcmp(C, ref, M * N * 4) == 0);
        }
        CHECK(b8_qweight_set_input_zero(q, 128, &e) == BERT8_ERR_INVALID_ARG);
        b8_qweight_free(q);
    }
    free(A);
    free(W);
    free(C);
    free(ref);
    free(ws);
}

/* Per-row zero points of A (b8_qepilogue.a_zero): every kernel of bert8's own gives
 * sum_k (A[m][k] - z[m]) W[n][k] exactly, also with K split in passes (4099: weights within
 * +-8 keep the sums float-exact for the fp32 output); oneDNN and K above 32768 are refused, as
 * are a_zero without per-row scales and zero points outside [-127, 127]. */
static int check_row_zero(int64_t M, int64_t N, int64_t K, int w_abs) {
    int8_t *A = malloc(M * K), *W = malloc(N * K);
    float *ws = malloc(N * 4), *as = malloc(M * 4), *out = malloc(M * N * 4);
    int32_t *z = malloc(M * 4);
    double *ref = malloc(M * N * sizeof(double));
    fill_s8(A, M * K);
    for (int64_t i = 0; i < N * K; i++) W[i] = (int8_t)((int)(rnd() % (2u * w_abs + 1)) - w_abs);
    for (int64_t n = 0; n < N; n++) ws[n] = 1.0f;
    for (int64_t m = 0; m < M; m++) {
        as[m] = 1.0f;
        z[m] = m == 0 ? -127 : m == 1 ? 127 : (int32_t)(rnd() % 255) - 127;
        for (int64_t n = 0; n < N; n++) {
            double acc = 0;
            for (int64_t k = 0; k < K; k++) acc += ((double)A[m * K + k] - z[m]) * W[n * K + k];
            ref[m * N + n] = acc;
        }
    }
    b8_qepilogue ep = {.a_scale = as, .a_scale_per_row = 1, .a_zero = z, .out_f32 = out, .ldc = N};
    int bad = 0;
    for (int i = 0; i < b8_qgemm_kernel_count(); i++) {
        const char *name = b8_qgemm_kernel_name(i);
        int lim = b8_qgemm_kernel_w_abs_max(i);
        if (!kernel_runs_here(i) || (lim && w_abs > lim)) continue;
        b8_qweight *q = pack(W, N, K, ws, name);
        if (!q) {
            bad++;
            continue;
        }
        b8_err e;
        memset(out, 0, M * N * 4);
        bert8_status st = b8_qgemm(A, K, M, q, &ep, NULL, &e);
        if (strcmp(name, "onednn") == 0) {
            CHECK(!b8_qweight_takes_row_zero(q) && st == BERT8_ERR_UNSUPPORTED && strstr(e.msg, "zero points"));
        } else {
            CHECK(b8_qweight_takes_row_zero(q) && st == BERT8_OK);
            int wrong = 0;
            for (int64_t j = 0; j < M * N; j++) wrong += (double)out[j] != ref[j];
            CHECKF(wrong == 0, "%s M=%lld N=%lld K=%lld: %d wrong", name, (long long)M, (long long)N, (long long)K,
                   wrong);
            bad += wrong != 0;
        }
        b8_qweight_free(q);
    }
    free(A), free(W), free(ws), free(as), free(out), free(z), free(ref);
    return bad;
}

TEST(row_zero_points_are_subtracted_exactly) {
    CHECK(check_row_zero(13, 37, 300, 127) == 0);
    CHECK(check_row_zero(1, 5, 3, 127) == 0);
    CHECK(check_row_zero(9, 70, 4099, 8) == 0);
    /* refusals */
    int8_t A[8 * 4] = {0}, W[3 * 4] = {1, 2, 3, 4};
    float ws[3] = {1, 1, 1}, as[8] = {1, 1, 1, 1, 1, 1, 1, 1}, out[8 * 3];
    int32_t z[8] = {0, 0, 0, 128, 0, 0, 0, 0};
    b8_qweight *q = pack(W, 3, 4, ws, NULL);
    CHECK(q != NULL);
    b8_err e;
    b8_qepilogue ep = {.a_scale = as, .a_scale_per_row = 0, .a_zero = z, .out_f32 = out, .ldc = 3};
    CHECK(b8_qgemm(A, 4, 8, q, &ep, NULL, &e) == BERT8_ERR_INVALID_ARG && strstr(e.msg, "a_scale_per_row"));
    ep.a_scale_per_row = 1;
    CHECK(b8_qgemm(A, 4, 8, q, &ep, NULL, &e) == BERT8_ERR_INVALID_ARG && strstr(e.msg, "a_zero[3] = 128"));
    CHECK(b8_qgemm(A, 4, 3, q, &ep, NULL, &e) == BERT8_OK); /* rows past M are not read */
    b8_qweight_free(q);
    int8_t *Wk = calloc(2 * 40000, 1);
    float wk[2] = {1, 1};
    q = pack(Wk, 2, 40000, wk, NULL);
    CHECK(q != NULL && !b8_qweight_takes_row_zero(q));
    b8_qweight_free(q);
    free(Wk);
}

/* fp32 outlier channels (b8_qepilogue.outliers): the output is the int8 product plus the
 * outliers' own fp32 product, on every kernel of bert8's own; oneDNN refuses them, as it does
 * malformed strides. Small integers keep every sum exact, so the check is exact. */
TEST(outlier_channels_add_their_fp32_product) {
    enum { M = 11, N = 37, K = 70, R = 5 };
    int8_t A[M * K], W[N * K];
    float ws[N], as[M], bias[N], ox[M * R], ow[R * (N + 1)], out[M * N];
    double ref[M * N];
    fill_s8(A, sizeof A);
    fill_w(W, sizeof W);
    for (int n = 0; n < N; n++) ws[n] = 1.0f, bias[n] = (float)((int)(rnd() % 9) - 4);
    for (int m = 0; m < M; m++) as[m] = (float)(1 + m % 3);
    for (int i = 0; i < M * R; i++) ox[i] = (float)((int)(rnd() % 41) - 20);
    for (int i = 0; i < R * (N + 1); i++) ow[i] = (float)((int)(rnd() % 7) - 3) * 0.5f;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double acc = 0, t = bias[n];
            for (int k = 0; k < K; k++) acc += (double)A[m * K + k] * W[n * K + k];
            for (int o = 0; o < R; o++) t += (double)ox[m * R + o] * ow[o * (N + 1) + n];
            ref[m * N + n] = as[m] * acc + t;
        }
    b8_qepilogue ep = {.a_scale = as, .a_scale_per_row = 1, .bias = bias, .outliers = R, .ox = ox, .ld_ox = R,
                       .ow = ow, .ld_ow = N + 1, .out_f32 = out, .ldc = N};
    for (int i = 0; i < b8_qgemm_kernel_count(); i++) {
        const char *name = b8_qgemm_kernel_name(i);
        if (!kernel_usable(i)) continue;
        b8_qweight *q = pack(W, N, K, ws, name);
        CHECKF(q != NULL, "%s", name);
        if (!q) continue;
        b8_err e;
        memset(out, 0, sizeof out);
        bert8_status st = b8_qgemm(A, K, M, q, &ep, NULL, &e);
        if (strcmp(name, "onednn") == 0) {
            CHECK(st == BERT8_ERR_UNSUPPORTED && strstr(e.msg, "outlier"));
        } else {
            int wrong = 0;
            for (int j = 0; j < M * N; j++) wrong += (double)out[j] != ref[j];
            CHECKF(st == BERT8_OK && wrong == 0, "%s: %d wrong", name, wrong);
            b8_qepilogue bad = ep;
            bad.ld_ow = N - 1;
            CHECK(b8_qgemm(A, K, M, q, &bad, NULL, &e) == BERT8_ERR_INVALID_ARG && strstr(e.msg, "ld_ow"));
            bad = ep;
            bad.ox = NULL;
            CHECK(b8_qgemm(A, K, M, q, &bad, NULL, &e) == BERT8_ERR_INVALID_ARG && strstr(e.msg, "outlier"));
        }
        b8_qweight_free(q);
    }
}

/* ---- fused epilogues ---- */

typedef struct epi_case {
    b8_act act;
    int per_row, bias, residual, s8;
    int zero; /* an input zero point on W, and an output zero point with s8 */
    int row_zero; /* per-row zero points of A (with per_row) */
    int outliers; /* 3 fp32 outlier channels joining the bias */
} epi_case;

static bool bits_equal(const void *a, const void *b, size_t n) { return memcmp(a, b, n) == 0; }

/* Runs one kernel and the oracle with the same epilogue; returns the number of outputs that
 * differ (bitwise, or by more than tol relative/absolute when tol > 0). */
static int compare_epilogue(const char *name, int64_t M, int64_t N, int64_t K, epi_case c,
                            float tol, float *max_err) {
    int64_t lda = K + 1, ldc = N + 2;
    int8_t *A = malloc(M * lda), *W = malloc(N * K);
    float *ws = malloc(N * 4), *bias = malloc(N * 4), *as = malloc(M * 4), *omul = malloc(N * 4);
    float *res = malloc(M * ldc * 4);
    float *of_ref = malloc(M * ldc * 4), *of = malloc(M * ldc * 4);
    int8_t *os_ref = malloc(M * ldc), *os = malloc(M * ldc);
    fill_s8(A, M * lda);
    fill_w(W, N * K);
    /* Scales put y in roughly [-6, 6]: the interesting range of GELU, and int8 outputs that
     * both saturate and round. */
    float acc_scale = 1.0f / (60.0f * sqrtf((float)K) + 1.0f);
    for (int64_t n = 0; n < N; n++) {
        ws[n] = acc_scale * rndf(0.5f, 2.0f);
        bias[n] = rndf(-2.0f, 2.0f);
        omul[n] = rndf(5.0f, 40.0f);
    }
    int32_t *az = malloc(M * 4);
    for (int64_t m = 0; m < M; m++) {
        as[m] = rndf(0.5f, 2.0f);
        az[m] = (int32_t)(rnd() % 255) - 127;
    }
    for (int64_t i = 0; i < M * ldc; i++) res[i] = rndf(-3.0f, 3.0f);
    enum { NO = 3 };
    float *ox = malloc(M * (NO + 1) * 4), *ow = malloc(NO * (N + 3) * 4);
    for (int64_t i = 0; i < M * (NO + 1); i++) ox[i] = rndf(-8.0f, 8.0f);
    for (int64_t i = 0; i < NO * (N + 3); i++) ow[i] = rndf(-0.2f, 0.2f);
    b8_qepilogue ep = {.a_scale = as,
                       .outliers = c.outliers ? NO : 0,
                       .ox = ox,
                       .ld_ox = NO + 1,
                       .ow = ow,
                       .ld_ow = N + 3,
                       .a_scale_per_row = c.per_row,
                       .a_zero = c.row_zero ? az : NULL,
                       .bias = c.bias ? bias : NULL,
                       .act = c.act,
                       .residual = c.residual ? res : NULL,
                       .ld_res = ldc,
                       .ldc = ldc,
                       .out_mul = c.s8 ? omul : NULL};
    int bad = 0;
    b8_err e;
    b8_qweight *qo = pack(W, N, K, ws, ORACLE), *q = pack(W, N, K, ws, name);
    if (!qo || !q) bad = 1;
    if (!bad && c.zero) {
        if (b8_qweight_set_input_zero(qo, -93, &e) || b8_qweight_set_input_zero(q, -93, &e)) {
            printf("  %s: %s\n", name, e.msg);
            bad = 1;
        }
        ep.out_zp = c.s8 ? 57.0f : 0.0f;
    }
    for (int pass = 0; pass < 2 && !bad; pass++) {
        memset(of, 0, M * ldc * 4);
        memset(os, 0, M * ldc);
        ep.out_f32 = c.s8 ? NULL : (pass ? of : of_ref);
        ep.out_s8 = c.s8 ? (pass ? os : os_ref) : NULL;
        if (b8_qgemm(A, lda, M, pass ? q : qo, &ep, NULL, &e) != BERT8_OK) {
            printf("  %s: %s\n", name, e.msg);
            bad = 1;
        }
    }
    for (int64_t m = 0; m < M && !bad; m++)
        for (int64_t n = 0; n < N; n++) {
            size_t i = m * ldc + n;
            if (c.s8) {
                int d = abs(os[i] - os_ref[i]);
                if (d > (tol > 0 ? 1 : 0)) bad++;
                if (d > *max_err) *max_err = (float)d;
            } else if (tol > 0) {
                float d = fabsf(of[i] - of_ref[i]) / (1.0f + fabsf(of_ref[i]));
                if (!(d <= tol)) bad++;
                if (d > *max_err) *max_err = d;
            } else if (!bits_equal(&of[i], &of_ref[i], 4)) {
                if (bad < 3)
                    printf("  %s [%lld][%lld]: %.9g, oracle %.9g\n", name, (long long)m,
                           (long long)n, of[i], of_ref[i]);
                bad++;
            }
        }
    b8_qweight_free(qo);
    b8_qweight_free(q);
    free(A);
    free(W);
    free(ws);
    free(bias);
    free(as);
    free(omul);
    free(res);
    free(of_ref);
    free(of);
    free(os_ref);
    free(os);
    free(az);
    free(ox);
    free(ow);
    return bad;
}

static int run_epilogue_sweep(const char *name, float tol, float *max_err) {
    static const int64_t shapes[][3] = {{1, 5, 3}, {7, 17, 31}, {33, 65, 257}, {16, 130, 768}};
    /* oneDNN creates a primitive per form and shape: two shapes keep its run short. */
    size_t nshapes = strcmp(name, "onednn") == 0 ? 2 : LEN(shapes);
    int bad = 0;
    for (size_t s = 0; s < nshapes; s++)
        for (int act = B8_ACT_NONE; act <= B8_ACT_RELU; act++)
            for (int bits = 0; bits < 128; bits++) {
                epi_case c = {(b8_act)act, bits & 1, (bits >> 1) & 1, (bits >> 2) & 1,
                              (bits >> 3) & 1, (bits >> 4) & 1, (bits >> 5) & 1, (bits >> 6) & 1};
                /* the oneDNN backend takes no zero points (it refuses them); per-row zero
                 * points come with per-row scales, once with every output form */
                if ((c.zero || c.row_zero || c.outliers) && strcmp(name, "onednn") == 0) continue;
                /* outlier channels: with every output form, not with every zero point form */
                if (c.outliers && c.zero) continue;
                if (c.row_zero && (!c.per_row || c.zero)) continue;
                int b = compare_epilogue(name, shapes[s][0], shapes[s][1], shapes[s][2], c, tol,
                                         max_err);
                if (b)
                    printf("  %s M=%lld N=%lld K=%lld act=%d per_row=%d bias=%d residual=%d "
                           "s8=%d zero=%d row_zero=%d outliers=%d: %d outputs differ\n",
                           name, (long long)shapes[s][0], (long long)shapes[s][1],
                           (long long)shapes[s][2], act, c.per_row, c.bias, c.residual, c.s8, c.zero, c.row_zero,
                           c.outliers, b);
                bad += b;
            }
    return bad;
}

TEST(fused_epilogues_are_bit_exact_for_own_kernels) {
    for (int i = 0; i < b8_qgemm_kernel_count(); i++) {
        const char *name = b8_qgemm_kernel_name(i);
        if (!kernel_usable(i) || strcmp(name, "onednn") == 0 || strcmp(name, ORACLE) == 0)
            continue;
        float max_err = 0;
        CHECKF(run_epilogue_sweep(name, 0.0f, &max_err) == 0, "%s", name);
    }
}

/* oneDNN adds the bias and applies GELU with its own op order: fp32 within 1e-5 relative to
 * (1 + |y|), int8 within one step. Its int32 results are checked exactly by the sweeps. */
TEST(onednn_fused_outputs_within_tolerance) {
    int i = 0;
    while (i < b8_qgemm_kernel_count() && strcmp(b8_qgemm_kernel_name(i), "onednn") != 0) i++;
    if (i == b8_qgemm_kernel_count() || !kernel_runs_here(i)) TU_SKIP("onednn's int8 matmul needs avx512_vnni");
    float max_err = 0;
    CHECK(run_epilogue_sweep("onednn", 1e-5f, &max_err) == 0);
    printf("  onednn max deviation %.3g\n", max_err);
}

/* ---- epilogue math twins ---- */

static B8_T512 void v16_apply(int which, const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        __m512 r = which == 0   ? b8_v16_exp(v)
                   : which == 1 ? b8_v16_gelu(v)
                   : which == 2 ? b8_v16_gelu_tanh(v)
                                : b8_v16_silu(v);
        _mm512_storeu_ps(y + i, r);
    }
}
static B8_T256 void v8_apply(int which, const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m256 r = which == 0   ? b8_v8_exp(v)
                   : which == 1 ? b8_v8_gelu(v)
                   : which == 2 ? b8_v8_gelu_tanh(v)
                                : b8_v8_silu(v);
        _mm256_storeu_ps(y + i, r);
    }
}

TEST(simd_math_matches_scalar_twin_bit_for_bit) {
    const int64_t n = 1 << 20;
    float *x = malloc(n * 4), *ys = malloc(n * 4), *yv = malloc(n * 4);
    /* Dense over [-12, 12] plus specials. */
    for (int64_t i = 0; i < n; i++) x[i] = -12.0f + 24.0f * (float)i / (float)n;
    /* 16 / 2.875 and 1 / 2.875: GELU's last and first table boundaries (vmath.h) */
    const float special[] = {0.0f, -0.0f, 0.9f, -0.9f, 3.92f, -3.92f, 88.0f, -87.0f, 1e-30f,
                             -1e-30f, FLT_MAX, -FLT_MAX, INFINITY, -INFINITY, 100.0f, -100.0f,
                             5.56521750f, -5.56521750f, 5.56521702f, 0.347826093f, -0.347826093f};
    memcpy(x, special, sizeof special);
    float (*const scalar[4])(float) = {b8_vm_exp, b8_vm_gelu, b8_vm_gelu_tanh, b8_vm_silu};
    const char *names[4] = {"exp", "gelu", "gelu_tanh", "silu"};
    for (int w = 0; w < 4; w++) {
        for (int64_t i = 0; i < n; i++) ys[i] = scalar[w](x[i]);
        for (int isa = 0; isa < 2; isa++) {
            if (!b8_cpu_allows(isa ? B8_ISA_AVX512 : B8_ISA_AVX2)) continue;
            if (isa) v16_apply(w, x, yv, n);
            else v8_apply(w, x, yv, n);
            int64_t diff = 0, first = -1;
            for (int64_t i = 0; i < n; i++)
                if (!bits_equal(&ys[i], &yv[i], 4)) {
                    if (first < 0) first = i;
                    diff++;
                }
            CHECKF(diff == 0, "%s %s: %lld differ, first x=%.9g scalar %.9g simd %.9g",
                   names[w], isa ? "avx512" : "avx2", (long long)diff, first >= 0 ? x[first] : 0,
                   first >= 0 ? ys[first] : 0, first >= 0 ? yv[first] : 0);
        }
    }
    free(x);
    free(ys);
    free(yv);
}

TEST(epilogue_math_accuracy_against_libm) {
    double worst_exp = 0, worst_gelu = 0, worst_gt = 0, worst_silu = 0;
    for (float x = -87.0f; x < 88.0f; x += 0.00731f) {
        double r = exp((double)x);
        worst_exp = fmax(worst_exp, fabs(b8_vm_exp(x) - r) / r);
    }
    for (float x = -6.0f; x < 6.0f; x += 0.000173f) {
        double g = 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
        worst_gelu = fmax(worst_gelu, fabs(b8_vm_gelu(x) - g) / (1.0 + fabs(g)));
        double u = sqrt(2.0 / M_PI) * (x + 0.044715 * (double)x * x * x);
        double gt = 0.5 * x * (1.0 + tanh(u));
        worst_gt = fmax(worst_gt, fabs(b8_vm_gelu_tanh(x) - gt) / (1.0 + fabs(gt)));
    }
    for (float x = -90.0f; x < 90.0f; x += 0.00137f) {
        double si = x / (1.0 + exp(-(double)x));
        worst_silu = fmax(worst_silu, fabs(b8_vm_silu(x) - si) / (1.0 + fabs(si)));
    }
    printf("  max error: exp %.3g rel, gelu %.3g, gelu_tanh %.3g, silu %.3g (rel to 1+|y|)\n",
           worst_exp, worst_gelu, worst_gt, worst_silu);
    /* GELU: the table's fit, 2.1e-7 (scripts/fit_gelu_table.py --check) */
    CHECK(worst_exp < 2e-7);
    CHECK(worst_gelu < 2.5e-7);
    CHECK(worst_gt < 2e-7);
    CHECK(worst_silu < 3e-7);
    CHECK(b8_vm_silu(0.0f) == 0.0f && fabsf(b8_vm_silu(-100.0f)) < 1e-30f && b8_vm_silu(100.0f) == 100.0f);
    CHECK(b8_vm_gelu(-20.0f) == 0.0f && b8_vm_gelu(20.0f) == 20.0f && b8_vm_gelu(0.0f) == 0.0f);
    CHECK(isnan(b8_vm_gelu(NAN)) && b8_vm_gelu(INFINITY) == INFINITY && b8_vm_gelu(-INFINITY) == 0.0f);
    CHECK(b8_vm_relu(-1.0f) == 0.0f && b8_vm_relu(2.5f) == 2.5f);
}

/* ---- threads, selection, errors ---- */

TEST(results_do_not_depend_on_thread_count) {
    const int64_t M = 300, N = 130, K = 257; /* above the serial threshold */
    int8_t *A = malloc(M * K), *W = malloc(N * K);
    float *ws = malloc(N * 4), as = 0.01f, *o1 = malloc(M * N * 4), *o2 = malloc(M * N * 4);
    fill_s8(A, M * K);
    fill_w(W, N * K);
    for (int64_t n = 0; n < N; n++) ws[n] = 0.02f;
    b8_qweight *q = pack(W, N, K, ws, NULL);
    CHECK(q != NULL);
    int saved = omp_get_max_threads();
    b8_qepilogue ep = {.a_scale = &as, .act = B8_ACT_GELU, .ldc = N};
    b8_err e;
    omp_set_num_threads(1);
    ep.out_f32 = o1;
    CHECK(q && b8_qgemm(A, K, M, q, &ep, NULL, &e) == BERT8_OK);
    omp_set_num_threads(3);
    ep.out_f32 = o2;
    CHECK(q && b8_qgemm(A, K, M, q, &ep, NULL, &e) == BERT8_OK);
    omp_set_num_threads(saved);
    CHECK(bits_equal(o1, o2, M * N * 4));
    b8_qweight_free(q);
    free(A);
    free(W);
    free(ws);
    free(o1);
    free(o2);
}

/* rows_done (a row operation fused into the product, the model's LayerNorm): every row is passed
 * exactly once, when all its columns hold their final values, and nothing writes to it after. */
typedef struct rows_probe {
    const float *ref, *out;
    float *out_w;
    int64_t N, ldc;
    int *seen;
    int bad;
} rows_probe;

static void probe_rows(void *ctx, int64_t m0, int64_t m1) {
    rows_probe *p = ctx;
    for (int64_t m = m0; m < m1; m++) {
        __atomic_fetch_add(&p->seen[m], 1, __ATOMIC_RELAXED);
        if (memcmp(p->out + m * p->ldc, p->ref + m * p->ldc, (size_t)p->N * 4))
            __atomic_fetch_add(&p->bad, 1, __ATOMIC_RELAXED);
        for (int64_t n = 0; n < p->N; n++) p->out_w[m * p->ldc + n] = -1.0f; /* the "LayerNorm" */
    }
}

TEST(rows_done_gets_each_finished_row_once) {
    static const int64_t Ms[] = {1, 9, 16, 40, 100, 200, 301}; /* 200: one thread's two row blocks as one (AMX) */
    static const int64_t shapes[][2] = {{17, 65}, {130, 257}, {800, 768}}; /* N, K: 800 x 768 spans two L2 blocks of W */
    int saved = omp_get_max_threads();
    omp_set_num_threads(2);
    for (size_t si = 0; si < LEN(shapes); si++) {
        const int64_t N = shapes[si][0], K = shapes[si][1], ldc = N + 3, Mmax = 301;
        int8_t *A = malloc(Mmax * K), *W = malloc(N * K);
        float *ws = malloc(N * 4), *bias = malloc(N * 4), as = 0.01f;
        float *res = malloc(Mmax * ldc * 4), *ref = malloc(Mmax * ldc * 4), *out = malloc(Mmax * ldc * 4);
        int *seen = malloc(Mmax * sizeof(int));
        fill_s8(A, Mmax * K);
        fill_w(W, N * K);
        for (int64_t n = 0; n < N; n++) {
            ws[n] = rndf(0.5f, 2.0f) / (float)K;
            bias[n] = rndf(-1.0f, 1.0f);
        }
        for (int64_t i = 0; i < Mmax * ldc; i++) res[i] = rndf(-3.0f, 3.0f);
        for (int ki = 0; ki < b8_qgemm_kernel_count(); ki++) {
            if (!kernel_usable(ki)) continue;
            const char *name = b8_qgemm_kernel_name(ki);
            b8_qweight *q = pack(W, N, K, ws, name);
            CHECK(q != NULL);
            for (size_t mi = 0; q && mi < LEN(Ms); mi++) {
                const int64_t M = Ms[mi];
                b8_err e;
                /* the reference: the same product without rows_done, residual in place as in the model */
                memcpy(ref, res, M * ldc * 4);
                b8_qepilogue ep = {.a_scale = &as, .bias = bias, .residual = ref, .ld_res = ldc, .out_f32 = ref, .ldc = ldc};
                CHECK(b8_qgemm(A, K, M, q, &ep, NULL, &e) == BERT8_OK);
                memcpy(out, res, M * ldc * 4);
                memset(seen, 0, M * sizeof(int));
                rows_probe pr = {ref, out, out, N, ldc, seen, 0};
                ep.residual = ep.out_f32 = out;
                ep.rows_done = probe_rows;
                ep.rows_ctx = &pr;
                CHECK(b8_qgemm(A, K, M, q, &ep, NULL, &e) == BERT8_OK);
                int once = 1, marked = 1;
                for (int64_t m = 0; m < M; m++) {
                    once &= seen[m] == 1;
                    for (int64_t n = 0; n < N; n++) marked &= out[m * ldc + n] == -1.0f;
                }
                CHECKF(once && marked && pr.bad == 0,
                       "%s M=%lld N=%lld K=%lld: each row once %d, untouched after %d, complete when passed (rows not: %d)",
                       name, (long long)M, (long long)N, (long long)K, once, marked, pr.bad);
            }
            b8_qweight_free(q);
        }
        free(A);
        free(W);
        free(ws);
        free(bias);
        free(res);
        free(ref);
        free(out);
        free(seen);
    }
    omp_set_num_threads(saved);
}

TEST(bad_arguments_are_reported) {
    int8_t w[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, a[4] = {1, 1, 1, 1};
    float ws[3] = {1, 1, 1}, as = 1, out[3], omul[3] = {1, 1, 1};
    int8_t out8[3];
    b8_qweight *q = NULL;
    b8_err e;
    b8_err_clear(&e);
    CHECK(b8_qweight_pack(NULL, 3, 4, ws, NULL, &q, &e) == BERT8_ERR_INVALID_ARG && !q);
    CHECK(b8_qweight_pack(w, 0, 4, ws, NULL, &q, &e) == BERT8_ERR_SHAPE);
    CHECK(b8_qweight_pack(w, 3, 70000, ws, NULL, &q, &e) == BERT8_ERR_UNSUPPORTED);
    CHECK(b8_qweight_pack(w, 3, 4, ws, "no_such_kernel", &q, &e) == BERT8_ERR_INVALID_ARG);
    CHECK(strstr(e.msg, "no_such_kernel") != NULL);
    CHECK(b8_qweight_pack(w, 3, 4, ws, NULL, &q, &e) == BERT8_OK && q);
    b8_qepilogue ep = {.a_scale = &as, .out_f32 = out, .ldc = 3};
    CHECK(b8_qgemm(a, 4, 1, q, &ep, NULL, &e) == BERT8_OK);
    CHECK(out[0] == 10.0f && out[1] == 26.0f && out[2] == 42.0f);
    CHECK(b8_qgemm(a, 3, 1, q, &ep, NULL, &e) == BERT8_ERR_INVALID_ARG); /* lda < K */
    CHECK(b8_qgemm(NULL, 4, 1, q, &ep, NULL, &e) == BERT8_ERR_INVALID_ARG);
    CHECK(b8_qgemm(a, 4, 0, q, &ep, NULL, &e) == BERT8_OK); /* nothing to do */
    ep.out_s8 = out8;
    ep.out_mul = omul;
    CHECK(b8_qgemm(a, 4, 1, q, &ep, NULL, &e) == BERT8_ERR_INVALID_ARG); /* two outputs */
    ep.out_f32 = NULL;
    CHECK(b8_qgemm(a, 4, 1, q, &ep, NULL, &e) == BERT8_OK);
    CHECK(out8[0] == 10 && out8[1] == 26 && out8[2] == 42);
    ep.out_mul = NULL;
    CHECK(b8_qgemm(a, 4, 1, q, &ep, NULL, &e) == BERT8_ERR_INVALID_ARG);
    ep.out_mul = omul;
    ep.ldc = 2;
    CHECK(b8_qgemm(a, 4, 1, q, &ep, NULL, &e) == BERT8_ERR_INVALID_ARG);
    ep.ldc = 3;
    ep.a_scale = NULL;
    CHECK(b8_qgemm(a, 4, 1, q, &ep, NULL, &e) == BERT8_ERR_INVALID_ARG);
    CHECK(b8_qgemm(a, 4, 1, NULL, &ep, NULL, &e) == BERT8_ERR_INVALID_ARG);
    int32_t c32[3];
    CHECK(b8_qgemm_s32(a, 4, 1, q, c32, 2, &e) == BERT8_ERR_INVALID_ARG);
    CHECK(b8_qgemm_s32(a, 4, 1, q, c32, 3, &e) == BERT8_OK && c32[2] == 42);
    b8_qweight_free(q);
    b8_qweight_free(NULL);
}

/* The auto choice never needs more than the level allows, and forcing such a kernel fails. */
static int check_selection_rules(void) {
    int bad = 0;
    int8_t w[64];
    float ws[4] = {1, 1, 1, 1};
    fill_s8(w, sizeof w);
    w[0] = 100; /* beyond 7 bits: a kernel with a weight limit refuses these */
    b8_qweight *q = pack(w, 4, 16, ws, NULL);
    if (!q) return 1;
    for (int i = 0; i < b8_qgemm_kernel_count(); i++)
        if (strcmp(b8_qgemm_kernel_name(i), b8_qweight_kernel_name(q)) == 0 &&
            b8_qgemm_kernel_isa(i) > b8_cpu_level()) {
            printf("  auto-selected %s needs %s above level %s\n", b8_qweight_kernel_name(q),
                   b8_isa_name(b8_qgemm_kernel_isa(i)), b8_isa_name(b8_cpu_level()));
            bad++;
        }
    if (b8_cpu_level() < B8_ISA_AVX512 && strstr(b8_qweight_kernel_name(q), "avx512")) bad++;
    b8_qweight_free(q);
    for (int i = 0; i < b8_qgemm_kernel_count(); i++) {
        b8_qweight *f = NULL;
        b8_err e;
        b8_err_clear(&e);
        bert8_status st = b8_qweight_pack(w, 4, 16, ws, b8_qgemm_kernel_name(i), &f, &e);
        if (kernel_runs_here(i) && b8_qgemm_kernel_w_abs_max(i)) {
            if (st != BERT8_ERR_UNSUPPORTED || f || !strstr(e.msg, "within")) {
                printf("  %s took weights beyond its limit\n", b8_qgemm_kernel_name(i));
                bad++;
            }
        } else if (kernel_runs_here(i)) {
            if (st != BERT8_OK) {
                printf("  %s refused at level %s: %s\n", b8_qgemm_kernel_name(i),
                       b8_isa_name(b8_cpu_level()), e.msg);
                bad++;
            }
        } else if (st != BERT8_ERR_UNSUPPORTED || f || !strstr(e.msg, "needs")) {
            printf("  %s not refused at level %s\n", b8_qgemm_kernel_name(i),
                   b8_isa_name(b8_cpu_level()));
            bad++;
        }
        b8_qweight_free(f);
    }
    return bad;
}

TEST(selection_respects_level_and_refuses_kernels_the_cpu_cannot_run) {
    CHECK(check_selection_rules() == 0);
}

/* Under every cap the CPU can honour: the selection rules, a reduced s32 sweep and the fused
 * epilogues of the kernels that cap allows, in a child process. */
static int cap_child(void) {
    int bad = check_selection_rules();
    bad += run_s32_sweep(7);
    bad += check_s32_shape(5, 40, 4099, 0);
    for (int i = 0; i < b8_qgemm_kernel_count(); i++) {
        const char *name = b8_qgemm_kernel_name(i);
        if (!kernel_usable(i) || strcmp(name, ORACLE) == 0 || strcmp(name, "onednn") == 0)
            continue;
        float max_err = 0;
        bad += compare_epilogue(name, 13, 70, 100, (epi_case){B8_ACT_GELU, 1, 1, 1, 0, 0, 1, 1}, 0, &max_err);
        bad += compare_epilogue(name, 13, 70, 100, (epi_case){B8_ACT_GELU_TANH, 0, 1, 0, 1, 1, 0, 0}, 0,
                                &max_err);
    }
    printf("  cap %s: level %s, %d failure(s)\n", getenv("BERT8_MAX_ISA"),
           b8_isa_name(b8_cpu_level()), bad);
    return bad ? 1 : 0;
}

static int invalid_cap_child(void) {
    int8_t w[16] = {0};
    float ws[4] = {1, 1, 1, 1};
    b8_qweight *q = NULL;
    b8_err e;
    b8_err_clear(&e);
    bert8_status st = b8_qweight_pack(w, 4, 4, ws, NULL, &q, &e);
    printf("  pack under BERT8_MAX_ISA=%s: %s\n", getenv("BERT8_MAX_ISA"), e.msg);
    return st == BERT8_ERR_INVALID_ARG && !q && strstr(e.msg, "BERT8_MAX_ISA") ? 0 : 1;
}

TEST(every_isa_cap_runs_the_kernels_it_allows) {
    const b8_cpu *c = b8_cpu_get();
    for (int i = 0; i <= (int)c->hw_level && i < B8_ISA_COUNT; i++) {
        int rc = tcpu_spawn_with_cap(b8_isa_name((b8_isa)i), "--cap-child");
        CHECKF(rc == 0, "cap %s: child exit %d", b8_isa_name((b8_isa)i), rc);
    }
}

static int env_kernel_child(void) {
    int8_t w[64] = {0};
    float ws[4] = {1, 1, 1, 1};
    b8_qweight *q = pack(w, 4, 16, ws, NULL);
    int ok = q && strcmp(b8_qweight_kernel_name(q), getenv("BERT8_QGEMM_KERNEL")) == 0;
    b8_qweight_free(q);
    return ok ? 0 : 1;
}

TEST(environment_can_force_a_kernel_for_every_layer) {
    setenv("BERT8_QGEMM_KERNEL", "qs8_gemm_6x16c2__scalar", 1);
    CHECK(tcpu_spawn_with_cap(NULL, "--env-kernel-child") == 0);
    unsetenv("BERT8_QGEMM_KERNEL");
}

TEST(invalid_max_isa_is_reported_by_pack) {
    CHECK(tcpu_spawn_with_cap("avx512vnni", "--invalid-cap-child") == 0);
}

/* The huge-page arena: every runnable kernel's weights (the oracle's copy too) gathered into one
 * arena and then into a second one give the same int32 as before, unpack to the same bytes, and
 * free cleanly in either order of weights; BERT8_HUGE_PAGES=0 leaves the weights in place. */
TEST(weights_gathered_into_an_arena_give_the_same_results) {
    const int64_t M = 37, N = 70, K = 300;
    int8_t *A = malloc((size_t)(M * K)), *W = malloc((size_t)(N * K)), *back = malloc((size_t)(N * K));
    float *ws = malloc((size_t)N * sizeof(float));
    int32_t *ref = malloc((size_t)(M * N) * 4), *got = malloc((size_t)(M * N) * 4);
    fill_s8(A, (size_t)(M * K));
    fill_w(W, (size_t)(N * K));
    for (int64_t n = 0; n < N; n++) ws[n] = 1.0f;
    b8_qweight *q[16];
    int n = 0;
    for (int i = 0; i < b8_qgemm_kernel_count() && n < 15; i++)
        if (kernel_usable(i) && (q[n] = pack(W, N, K, ws, b8_qgemm_kernel_name(i)))) n++;
    q[n++] = NULL; /* skipped */
    CHECK(n >= 3);
    b8_err e;
    b8_err_clear(&e);
    CHECK(b8_qgemm_s32(A, K, M, q[0], ref, N, &e) == BERT8_OK);
    b8_qarena *a1 = NULL, *a2 = NULL;
    CHECK(b8_qweights_gather(q, n, &a1, &e) == BERT8_OK && a1 && b8_qarena_bytes(a1) >= (size_t)(N * K));
    CHECK(b8_qweights_gather(q, n, &a2, &e) == BERT8_OK && a2);
    b8_qarena_free(a1); /* nothing points into it any more */
    for (int i = 0; i + 1 < n; i++) {
        memset(got, 0x5a, (size_t)(M * N) * 4);
        CHECKF(b8_qgemm_s32(A, K, M, q[i], got, N, &e) == BERT8_OK && !memcmp(got, ref, (size_t)(M * N) * 4),
               "%s after the arena", b8_qweight_kernel_name(q[i]));
        if (b8_qweight_unpack(q[i], back, NULL) == BERT8_OK)
            CHECKF(!memcmp(back, W, (size_t)(N * K)), "%s unpacks differently", b8_qweight_kernel_name(q[i]));
    }
    for (int i = n - 2; i >= 0; i--) b8_qweight_free(q[i]);
    b8_qarena_free(a2);
    /* switched off: nothing moves */
    b8_qweight *w = pack(W, N, K, ws, NULL);
    CHECK(w);
    setenv("BERT8_HUGE_PAGES", "0", 1);
    b8_qarena *a3 = (b8_qarena *)1;
    CHECK(b8_qweights_gather(&w, 1, &a3, &e) == BERT8_OK && a3 == NULL);
    unsetenv("BERT8_HUGE_PAGES");
    CHECK(b8_qgemm_s32(A, K, M, w, got, N, &e) == BERT8_OK && !memcmp(got, ref, (size_t)(M * N) * 4));
    b8_qweight_free(w);
    free(A);
    free(W);
    free(back);
    free(ws);
    free(ref);
    free(got);
}

/* 7-bit weights (within +-64): every kernel, the limited ones included, against the oracle
 * (a thinned sweep, K in passes), and bit-exact fused epilogues; then the rows_done and arena
 * checks with them. */
TEST(seven_bit_weights_match_the_oracle_on_every_kernel) {
    W_LIMIT = 64; /* what weight_bits 7 gives */
    CHECK(run_s32_sweep(3) == 0);
    CHECK(check_s32_shape(9, 70, 4099, 1) == 0);
    for (int i = 0; i < b8_qgemm_kernel_count(); i++) {
        const char *name = b8_qgemm_kernel_name(i);
        if (!kernel_usable(i) || !b8_qgemm_kernel_w_abs_max(i)) continue;
        float max_err = 0;
        CHECKF(run_epilogue_sweep(name, 0.0f, &max_err) == 0, "%s", name);
    }
    test_rows_done_gets_each_finished_row_once();
    test_weights_gathered_into_an_arena_give_the_same_results();
    W_LIMIT = 0;
}

/* A kernel with a weight limit: chosen automatically below VNNI for weights within it (and
 * never for others), and refused by name for weights beyond it, with a message naming both. */
TEST(weight_limited_kernels_take_only_weights_within_their_limit) {
    int8_t w[4 * 16];
    float ws[4] = {1, 1, 1, 1};
    for (int i = 0; i < b8_qgemm_kernel_count(); i++) {
        int lim = b8_qgemm_kernel_w_abs_max(i);
        if (!lim || !kernel_runs_here(i)) continue;
        const char *name = b8_qgemm_kernel_name(i);
        for (int edge = 0; edge < 2; edge++) {
            memset(w, 1, sizeof w);
            w[37] = (int8_t)(edge ? -lim - 1 : lim + 1);
            b8_qweight *q = NULL;
            b8_err e;
            b8_err_clear(&e);
            bert8_status st = b8_qweight_pack(w, 4, 16, ws, name, &q, &e);
            CHECKF(st == BERT8_ERR_UNSUPPORTED && !q && strstr(e.msg, name) &&
                       strstr(e.msg, "reach 65"),
                   "%s took weight %d: %s", name, w[37], e.msg);
            b8_qweight_free(q);
            w[37] = (int8_t)(edge ? -lim : lim);
            CHECK((q = pack(w, 4, 16, ws, name)) != NULL);
            b8_qweight_free(q);
        }
    }
    /* the auto choice: the limited kernel only for limited weights */
    memset(w, 64, sizeof w);
    b8_qweight *q7 = pack(w, 4, 16, ws, NULL);
    w[5] = 65;
    b8_qweight *q8 = pack(w, 4, 16, ws, NULL);
    CHECK(q7 && q8);
    if (q7 && q8) {
        int i7 = 0, i8 = 0;
        while (strcmp(b8_qgemm_kernel_name(i7), b8_qweight_kernel_name(q7))) i7++;
        while (strcmp(b8_qgemm_kernel_name(i8), b8_qweight_kernel_name(q8))) i8++;
        printf("  auto: 7-bit weights %s, 8-bit %s\n", b8_qgemm_kernel_name(i7), b8_qgemm_kernel_name(i8));
        CHECK(b8_qgemm_kernel_w_abs_max(i8) == 0);
        if (b8_cpu_level() == B8_ISA_AVX2 || b8_cpu_level() == B8_ISA_AVX512)
            CHECK(strcmp(b8_qweight_kernel_name(q7), "qs8_gemm_4x24c4__avx2") == 0);
        else
            CHECK(i7 == i8);
    }
    b8_qweight_free(q7);
    b8_qweight_free(q8);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--cap-child") == 0) return cap_child();
    if (argc > 1 && strcmp(argv[1], "--invalid-cap-child") == 0) return invalid_cap_child();
    if (argc > 1 && strcmp(argv[1], "--env-kernel-child") == 0) return env_kernel_child();
    printf("  level %s; kernels:", b8_isa_name(b8_cpu_level()));
    for (int i = 0; i < b8_qgemm_kernel_count(); i++)
        printf(" %s%s", b8_qgemm_kernel_name(i), kernel_runs_here(i) ? "" : "(n/a)");
    printf("\n");
    RUN(bad_arguments_are_reported);
    RUN(epilogue_math_accuracy_against_libm);
    RUN(simd_math_matches_scalar_twin_bit_for_bit);
    RUN(accumulators_match_oracle_on_shape_sweep);
    RUN(accumulators_match_oracle_when_k_is_split_in_passes);
    RUN(extreme_values_give_exact_closed_form_sums);
    RUN(input_zero_point_is_subtracted_exactly);
    RUN(row_zero_points_are_subtracted_exactly);
    RUN(outlier_channels_add_their_fp32_product);
    RUN(fused_epilogues_are_bit_exact_for_own_kernels);
    RUN(onednn_fused_outputs_within_tolerance);
    RUN(results_do_not_depend_on_thread_count);
    RUN(rows_done_gets_each_finished_row_once);
    RUN(selection_respects_level_and_refuses_kernels_the_cpu_cannot_run);
    RUN(every_isa_cap_runs_the_kernels_it_allows);
    RUN(invalid_max_isa_is_reported_by_pack);
    RUN(environment_can_force_a_kernel_for_every_layer);
    RUN(weights_gathered_into_an_arena_give_the_same_results);
    RUN(seven_bit_weights_match_the_oracle_on_every_kernel);
    RUN(weight_limited_kernels_take_only_weights_within_their_limit);
    return tu_finish();
}
