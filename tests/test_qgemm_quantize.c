/* test_qgemm_quantize.c: the activation quantizers: AVX-512 and AVX2 twins bit-identical to the
 * scalar oracle (static, dynamic, dynamic with a zero point, LayerNorm -> int8) over row lengths with every tail, strides
 * and special values; the oracle itself against a double-precision reference; the dispatching
 * entry points under each BERT8_MAX_ISA cap (child processes). */
#include "testutil.h"

#include <float.h>
#include <stdlib.h>

#include "base/cpu.h"
#include "kernels/quantize/quantize.h"
#include "kernels/rowops/rowops.h"

int tcpu_spawn_with_cap(const char *isa, const char *child_arg);

static uint64_t rng = 0x2545f4914f6cdd1dull;
static float rndf(float lo, float hi) {
    return lo + (hi - lo) * (float)(tu_xorshift(&rng) >> 40) / 16777216.0f;
}

typedef struct twins {
    const char *name;
    b8_isa isa;
    b8_quantize_static_fn st;
    b8_quantize_dynamic_fn dy;
    b8_layernorm_quantize_fn ln;
    b8_quantize_dynamic_zp_fn zp;
} twins;

static const twins SIMD[] = {
    {"avx2", B8_ISA_AVX2, b8_quantize_static__avx2, b8_quantize_dynamic__avx2,
     b8_layernorm_quantize__avx2, b8_quantize_dynamic_zp__avx2},
    {"avx512", B8_ISA_AVX512, b8_quantize_static__avx512, b8_quantize_dynamic__avx512,
     b8_layernorm_quantize__avx512, b8_quantize_dynamic_zp__avx512},
};

static const int64_t NS[] = {1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 100, 768, 1000, 3072};
#define LEN(a) (sizeof(a) / sizeof((a)[0]))

typedef struct data {
    int64_t rows, n, ld;
    float *x, *mul, *qg, *qb, *g, *b;
} data;

/* rows x n with stride n + 5; a few rows scaled wide, one row zero, specials sprinkled. */
static data make_data(int64_t rows, int64_t n) {
    data d = {.rows = rows, .n = n, .ld = n + 5};
    d.x = malloc(rows * d.ld * 4);
    d.mul = malloc(n * 4);
    d.qg = malloc(n * 4);
    d.qb = malloc(n * 4);
    d.g = malloc(n * 4);
    d.b = malloc(n * 4);
    for (int64_t r = 0; r < rows; r++) {
        float span = r % 3 == 0 ? 50.0f : 3.0f;
        for (int64_t j = 0; j < d.ld; j++) d.x[r * d.ld + j] = r == 1 ? 0.0f : rndf(-span, span);
    }
    if (rows > 2 && n > 2) {
        d.x[2 * d.ld + 0] = FLT_MAX;
        d.x[2 * d.ld + 1] = -1e30f;
        d.x[2 * d.ld + 2] = 1e-30f;
    }
    for (int64_t j = 0; j < n; j++) {
        d.mul[j] = rndf(0.2f, 5.0f);
        d.qg[j] = rndf(5.0f, 60.0f);
        d.qb[j] = rndf(-20.0f, 20.0f);
        d.g[j] = rndf(0.5f, 1.5f);
        d.b[j] = rndf(-0.5f, 0.5f);
    }
    return d;
}

static void free_data(data *d) {
    free(d->x);
    free(d->mul);
    free(d->qg);
    free(d->qb);
    free(d->g);
    free(d->b);
}

/* Runs (which: 0 static, 1 static without mul, 2 dynamic, 3 LN with y, 4 LN without y, 5
 * dynamic with a zero point: scales in aux[0..rows), zero points as int32 after them) with one
 * twin set, writing q (and scales / y). */
static void run(const twins *t, const data *d, int which, int8_t *q, float *aux) {
    int64_t ldq = d->n + 3;
    switch (which) {
    case 0: t->st(d->x, d->ld, d->rows, d->n, d->mul, 0.37f, 0.0f, q, ldq); break;
    case 1: t->st(d->x, d->ld, d->rows, d->n, NULL, 2.5f, -101.0f, q, ldq); break; /* with a zero point */
    case 2: t->dy(d->x, d->ld, d->rows, d->n, d->mul, q, ldq, aux); break;
    case 5: t->zp(d->x, d->ld, d->rows, d->n, d->mul, q, ldq, aux, (int32_t *)(aux + d->rows)); break;
    default: {
        b8_ln_quant p = {d->qg, d->qb, d->g, d->b, which == 3 ? aux : NULL, d->n + 1, 1e-12f};
        t->ln(d->x, d->ld, d->rows, d->n, &p, q, ldq);
    }
    }
}

static const twins SCALAR = {"scalar", B8_ISA_SCALAR, b8_quantize_static__scalar,
                             b8_quantize_dynamic__scalar, b8_layernorm_quantize__scalar,
                             b8_quantize_dynamic_zp__scalar};
static const twins PUBLIC = {"dispatch", B8_ISA_SCALAR, NULL, NULL, NULL, NULL};

/* The dispatching entry points wrapped in the twin signature. */
static void pub_static(const float *x, int64_t ldx, int64_t rows, int64_t n, const float *mul,
                       float inv, float zero, int8_t *q, int64_t ldq) {
    b8_quantize_static(x, ldx, rows, n, mul, inv, zero, q, ldq);
}
static void pub_dynamic(const float *x, int64_t ldx, int64_t rows, int64_t n, const float *mul,
                        int8_t *q, int64_t ldq, float *s) {
    b8_quantize_dynamic(x, ldx, rows, n, mul, q, ldq, s);
}
static void pub_zp(const float *x, int64_t ldx, int64_t rows, int64_t n, const float *mul,
                   int8_t *q, int64_t ldq, float *s, int32_t *z) {
    b8_quantize_dynamic_zp(x, ldx, rows, n, mul, q, ldq, s, z);
}
static void pub_ln(const float *x, int64_t ldx, int64_t rows, int64_t n, const b8_ln_quant *p,
                   int8_t *q, int64_t ldq) {
    b8_layernorm_quantize(x, ldx, rows, n, p, q, ldq);
}

static int compare_twin(const twins *t, int64_t rows) {
    int bad = 0;
    for (size_t s = 0; s < LEN(NS); s++) {
        data d = make_data(rows, NS[s]);
        size_t qn = rows * (NS[s] + 3), an = rows * (NS[s] + 1);
        int8_t *q0 = malloc(qn), *q1 = malloc(qn);
        float *a0 = malloc(an * 4), *a1 = malloc(an * 4);
        for (int w = 0; w < 6; w++) {
            memset(q0, 0x11, qn);
            memset(q1, 0x11, qn);
            memset(a0, 0, an * 4);
            memset(a1, 0, an * 4);
            run(&SCALAR, &d, w, q0, a0);
            run(t, &d, w, q1, a1);
            if (memcmp(q0, q1, qn) || memcmp(a0, a1, an * 4)) {
                printf("  %s differs from scalar: n=%lld rows=%lld mode %d\n", t->name,
                       (long long)NS[s], (long long)rows, w);
                bad++;
            }
        }
        free(q0);
        free(q1);
        free(a0);
        free(a1);
        free_data(&d);
    }
    return bad;
}

TEST(simd_twins_match_scalar_bit_for_bit) {
    for (size_t i = 0; i < LEN(SIMD); i++) {
        if (!b8_cpu_allows(SIMD[i].isa)) {
            printf("  %s not available here\n", SIMD[i].name);
            continue;
        }
        CHECK(compare_twin(&SIMD[i], 7) == 0);
    }
}

TEST(scalar_quantizers_match_double_reference) {
    data d = make_data(6, 1000);
    int64_t n = d.n, ldq = n + 3;
    int8_t *q = malloc(6 * ldq);
    float *aux = malloc(6 * (n + 1) * 4);
    /* static: exact rounding of the product */
    run(&SCALAR, &d, 0, q, aux);
    int bad = 0;
    for (int64_t r = 0; r < 6; r++)
        for (int64_t j = 0; j < n; j++) {
            double v = (double)(d.x[r * d.ld + j] * d.mul[j]) * 0.37f;
            v = v < -127 ? -127 : v > 127 ? 127 : v;
            bad += fabs(q[r * ldq + j] - v) > 0.5 + 1e-6;
        }
    CHECK(bad == 0);
    /* dynamic: the row maximum maps to +-127, q * s reconstructs within s / 2 */
    run(&SCALAR, &d, 2, q, aux);
    for (int64_t r = 0; r < 6; r++) {
        int peak = 0;
        for (int64_t j = 0; j < n; j++) {
            double v = (double)d.x[r * d.ld + j] * d.mul[j];
            if (r != 2) bad += fabs(q[r * ldq + j] * (double)aux[r] - v) > 0.5001 * aux[r];
            peak = abs(q[r * ldq + j]) > peak ? abs(q[r * ldq + j]) : peak;
        }
        CHECKF(r == 1 ? peak == 0 && aux[r] == 1.0f : peak == 127, "row %lld peak %d",
               (long long)r, peak);
    }
    CHECK(bad == 0);
    /* LayerNorm: against double statistics (row 2 holds FLT_MAX and is skipped) */
    run(&SCALAR, &d, 3, q, aux);
    for (int64_t r = 0; r < 6; r++) {
        if (r == 2 || r == 1) continue;
        double mean = 0, var = 0;
        for (int64_t j = 0; j < n; j++) mean += d.x[r * d.ld + j];
        mean /= n;
        for (int64_t j = 0; j < n; j++) var += (d.x[r * d.ld + j] - mean) * (d.x[r * d.ld + j] - mean);
        double rstd = 1.0 / sqrt(var / n + 1e-12);
        for (int64_t j = 0; j < n; j++) {
            double h = (d.x[r * d.ld + j] - mean) * rstd;
            double y = h * d.g[j] + d.b[j], qv = h * d.qg[j] + d.qb[j];
            qv = qv < -127 ? -127 : qv > 127 ? 127 : qv;
            bad += fabs(aux[r * (n + 1) + j] - y) > 1e-5 * (1 + fabs(y));
            bad += fabs(q[r * ldq + j] - qv) > 0.5 + 1e-3;
        }
    }
    CHECK(bad == 0);
    /* an all-zero row: mean 0, output is beta */
    for (int64_t j = 0; j < n; j++) bad += aux[1 * (n + 1) + j] != d.b[j];
    CHECK(bad == 0);
    free(q);
    free(aux);
    free_data(&d);
}

/* The zero-point quantizer on one-sided rows (a GELU output: >= -0.17) and on mixed ones: x is
 * reconstructed as s * (q - z) within s / 2 (plus the zero point's rounding), the row's range
 * spans the 255 levels, and a one-sided row's error is about half the symmetric quantizer's. */
TEST(zero_point_quantizer_reconstructs_and_halves_one_sided_error) {
    enum { ROWS = 8, N = 3072 };
    float *x = malloc(ROWS * N * 4), *mul = malloc(N * 4), sz[2 * ROWS], ss[ROWS];
    int8_t *q = malloc(ROWS * N), *qs = malloc(ROWS * N);
    for (int64_t j = 0; j < N; j++) mul[j] = rndf(0.5f, 2.0f);
    for (int64_t r = 0; r < ROWS; r++)
        for (int64_t j = 0; j < N; j++) {
            float v = rndf(-3.0f, 3.0f) * (r + 1);
            /* rows 0-5 GELU-like (tanh form), rows 6-7 two-sided; row 7 all zero */
            x[r * N + j] = r == 7 ? 0.0f : r < 6 ? 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v))) : v;
        }
    b8_quantize_dynamic_zp__scalar(x, N, ROWS, N, mul, q, N, sz, (int32_t *)(sz + ROWS));
    b8_quantize_dynamic__scalar(x, N, ROWS, N, mul, qs, N, ss);
    const int32_t *zp = (const int32_t *)(sz + ROWS);
    int bad = 0;
    for (int64_t r = 0; r < ROWS; r++) {
        double e_zp = 0, e_sym = 0;
        int lo = 127, hi = -127;
        for (int64_t j = 0; j < N; j++) {
            const double v = (double)x[r * N + j] * mul[j];
            const double rz = sz[r] * ((double)q[r * N + j] - zp[r]), rs = ss[r] * (double)qs[r * N + j];
            bad += fabs(rz - v) > 1.0001 * sz[r];
            e_zp += (rz - v) * (rz - v);
            e_sym += (rs - v) * (rs - v);
            lo = q[r * N + j] < lo ? q[r * N + j] : lo;
            hi = q[r * N + j] > hi ? q[r * N + j] : hi;
        }
        if (r == 7) {
            CHECKF(sz[r] == 1.0f && zp[r] == 0 && lo == 0 && hi == 0, "zero row: s %g z %d", sz[r], zp[r]);
            continue;
        }
        CHECKF(zp[r] >= -127 && zp[r] <= 127 && lo <= -126 && hi >= 126, "row %lld: z %d, q in [%d, %d]",
               (long long)r, zp[r], lo, hi);
        if (r < 6) CHECKF(e_zp < 0.35 * e_sym, "row %lld: error %g, symmetric %g", (long long)r, e_zp, e_sym);
        else CHECKF(e_zp <= 1.1 * e_sym, "row %lld: error %g, symmetric %g", (long long)r, e_zp, e_sym);
    }
    CHECK(bad == 0);
    /* NaN is skipped by the range and saturates to -127, infinities saturate; no UB */
    float sp[4] = {NAN, 1.0f, -0.5f, 0.25f}, s1;
    int32_t z1;
    int8_t q1[4];
    b8_quantize_dynamic_zp__scalar(sp, 4, 1, 4, NULL, q1, 4, &s1, &z1);
    CHECK(q1[0] == -127 && q1[1] == 127 && q1[2] == -127 && s1 == 1.5f / 254.0f);
    free(x), free(mul), free(q), free(qs);
}

TEST(nan_and_infinity_saturate_without_undefined_behaviour) {
    float x[4] = {NAN, INFINITY, -INFINITY, 126.5f}, one[4] = {1, 1, 1, 1};
    int8_t q[4];
    b8_quantize_static__scalar(x, 4, 1, 4, one, 1.0f, 0.0f, q, 4);
    CHECK(q[0] == -127 && q[1] == 127 && q[2] == -127 && q[3] == 126);
    for (size_t i = 0; i < LEN(SIMD); i++) {
        if (!b8_cpu_allows(SIMD[i].isa)) continue;
        int8_t qs[4];
        SIMD[i].st(x, 4, 1, 4, one, 1.0f, 0.0f, qs, 4);
        CHECK(memcmp(q, qs, 4) == 0);
    }
}

/* b8_layernorm_quantize_dynamic (dispatching, row-parallel) against the scalar LayerNorm then the
 * scalar dynamic quantizer: the normalised rows, q and the row scales bit for bit. */
static int fused_layernorm_dynamic_bad(int64_t rows) {
    int bad = 0;
    for (size_t s = 0; s < LEN(NS); s++) {
        data d = make_data(rows, NS[s]);
        const int64_t n = d.n, ld = d.ld, ldq = n + 3;
        float *x0 = malloc(rows * ld * 4), *x1 = malloc(rows * ld * 4), *s0 = malloc(rows * 4), *s1 = malloc(rows * 4);
        int8_t *q0 = calloc(rows * ldq, 1), *q1 = calloc(rows * ldq, 1);
        memcpy(x0, d.x, rows * ld * 4);
        memcpy(x1, d.x, rows * ld * 4);
        for (int64_t r = 0; r < rows; r++) {
            b8_layernorm_rows__scalar(x0 + r * ld, x0 + r * ld, 1, n, d.g, d.b, 1e-12f);
            b8_quantize_dynamic__scalar(x0 + r * ld, ld, 1, n, d.mul, q0 + r * ldq, ldq, s0 + r);
        }
        b8_layernorm_quantize_dynamic(x1, ld, rows, n, d.g, d.b, 1e-12f, d.mul, q1, ldq, s1);
        if (memcmp(x0, x1, rows * ld * 4) || memcmp(q0, q1, rows * ldq) || memcmp(s0, s1, rows * 4)) {
            printf("  layernorm_quantize_dynamic differs from LayerNorm + dynamic: n=%lld rows=%lld\n",
                   (long long)n, (long long)rows);
            bad++;
        }
        free(x0), free(x1), free(s0), free(s1), free(q0), free(q1);
        free_data(&d);
    }
    return bad;
}

static int dispatch_child(void) {
    twins pub = PUBLIC;
    pub.st = pub_static;
    pub.dy = pub_dynamic;
    pub.ln = pub_ln;
    pub.zp = pub_zp;
    /* 100 rows x 3072 is above the threshold where rows are split over threads. */
    int bad = compare_twin(&pub, 100) + fused_layernorm_dynamic_bad(7) + fused_layernorm_dynamic_bad(100);
    printf("  cap %s (level %s): %d difference(s)\n", getenv("BERT8_MAX_ISA"),
           b8_isa_name(b8_cpu_level()), bad);
    return bad ? 1 : 0;
}

TEST(dispatch_matches_scalar_under_every_cap) {
    const b8_cpu *c = b8_cpu_get();
    for (int i = 0; i <= (int)c->hw_level && i < B8_ISA_COUNT; i++)
        CHECKF(tcpu_spawn_with_cap(b8_isa_name((b8_isa)i), "--dispatch-child") == 0, "cap %s",
               b8_isa_name((b8_isa)i));
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--dispatch-child") == 0) return dispatch_child();
    RUN(simd_twins_match_scalar_bit_for_bit);
    RUN(scalar_quantizers_match_double_reference);
    RUN(zero_point_quantizer_reconstructs_and_halves_one_sided_error);
    RUN(nan_and_infinity_saturate_without_undefined_behaviour);
    RUN(dispatch_matches_scalar_under_every_cap);
    return tu_finish();
}
