/* test_rowops.c: the AVX-512 and AVX2 row kernels (masked softmax, LayerNorm, attention, rotary
 * positions, the gated FFN's pass, disentangled attention's products) agree bit for bit with their scalar twins, and the twins agree
 * with plain libm maths. */
#include "testutil.h"
#include "base/cpu.h"
#include "kernels/rowops/glu.h"
#include "kernels/rowops/rotary.h"
#include "kernels/rowops/rowops.h"
#include "kernels/attention/attention.h"
#include "kernels/attention/rel_dot.h"
#include "kernels/quantize/quantize.h"
#include "kernels/vmath/vmath_avx2.h"

#include <float.h>
#include <stdlib.h>
#include <string.h>

static unsigned rng = 12345;
static float frand(float scale) {
    rng = rng * 1664525u + 1013904223u;
    return ((float)((rng >> 8) & 0xFFFFFF) / 16777216.0f - 0.5f) * 2.0f * scale;
}

static const int64_t SIZES[] = {1, 2, 15, 16, 17, 31, 64, 100, 128, 257, 768};
#define NS (sizeof SIZES / sizeof *SIZES)

TEST(expf_approx_close_to_libm) {
    double worst = 0;
    for (float x = -87.0f; x < 88.0f; x += 0.01371f) {
        double rel = fabs((double)b8_expf_approx(x) - exp((double)x)) / exp((double)x);
        if (rel > worst) worst = rel;
    }
    CHECKF(worst < 5e-7, "max relative error %g", worst);
    CHECK(b8_expf_approx(-FLT_MAX) == 0.0f);
    CHECK(b8_expf_approx(-100.0f) == 0.0f);
    CHECK(b8_expf_approx(0.0f) == 1.0f);
}

/* Each SIMD softmax the CPU can run (AVX-512, AVX2) against the scalar twin. */
TEST(softmax_simd_twins_match_scalar_bit_exact) {
    const struct {
        const char *name;
        b8_isa isa;
        b8_softmax_fn fn;
    } simd[] = {{"avx512", B8_ISA_AVX512, b8_softmax_rows__avx512}, {"avx2", B8_ISA_AVX2, b8_softmax_rows__avx2}};
    for (size_t w = 0; w < sizeof simd / sizeof *simd; w++) {
        if (!b8_cpu_allows(simd[w].isa)) {
            printf("  (no %s here: that SIMD twin not run)\n", simd[w].name);
            continue;
        }
        for (size_t si = 0; si < NS; si++) {
            int64_t n = SIZES[si], rows = 3;
            float *a = malloc(sizeof(float) * rows * n), *b = malloc(sizeof(float) * rows * n);
            int32_t *mask = malloc(sizeof(int32_t) * n);
            for (int64_t j = 0; j < n; j++) mask[j] = (j % 5 != 3);
            for (int mode = 0; mode < 2; mode++) {
                for (int use_mask = 0; use_mask < 2; use_mask++) {
                    for (int64_t i = 0; i < rows * n; i++) a[i] = b[i] = frand(12.0f);
                    if (n > 4) a[4] = b[4] = -100.0f; /* exp underflows to 0 past -87.3 */
                    b8_softmax_rows__scalar(a, rows, n, use_mask ? mask : NULL, (b8_mask_mode)mode);
                    simd[w].fn(b, rows, n, use_mask ? mask : NULL, (b8_mask_mode)mode);
                    CHECKF(memcmp(a, b, sizeof(float) * rows * n) == 0, "%s n=%lld mode=%d mask=%d", simd[w].name,
                           (long long)n, mode, use_mask);
                    double sum = 0;
                    for (int64_t j = 0; j < n; j++) sum += a[j];
                    CHECKF(fabs(sum - 1.0) < 1e-5, "row sums to %g", sum);
                    if (use_mask && n > 3) CHECK(a[3] == 0.0f);
                }
            }
            free(a);
            free(b);
            free(mask);
        }
    }
}

TEST(softmax_scalar_matches_reference_maths) {
    int64_t n = 77;
    float x[77], ref[77];
    double mx = -1e30, sum = 0;
    for (int64_t j = 0; j < n; j++) x[j] = frand(8.0f), mx = x[j] > mx ? x[j] : mx;
    for (int64_t j = 0; j < n; j++) sum += exp(x[j] - mx);
    for (int64_t j = 0; j < n; j++) ref[j] = (float)(exp(x[j] - mx) / sum);
    b8_softmax_rows__scalar(x, 1, n, NULL, B8_MASK_ADD_MIN);
    for (int64_t j = 0; j < n; j++) CHECKF(fabsf(x[j] - ref[j]) <= 1e-6f + 1e-5f * ref[j], "j=%lld", (long long)j);
}

TEST(layernorm_twins_bit_exact_and_correct) {
    for (size_t si = 0; si < NS; si++) {
        int64_t n = SIZES[si], rows = 7; /* a block of 4 interleaved rows and a tail of 3 */
        float *x = malloc(sizeof(float) * rows * n), *y1 = malloc(sizeof(float) * rows * n);
        float *y2 = malloc(sizeof(float) * rows * n), *g = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n);
        for (int64_t i = 0; i < rows * n; i++) x[i] = frand(5.0f) + 1.0f;
        for (int64_t j = 0; j < n; j++) {
            g[j] = 1.0f + frand(0.3f), b[j] = frand(0.2f);
        }
        b8_layernorm_rows__scalar(x, y1, rows, n, g, b, 1e-12f);
        /* against double-precision maths */
        for (int64_t r = 0; r < rows && n > 1; r++) {
            double mean = 0, var = 0;
            for (int64_t j = 0; j < n; j++) mean += x[r * n + j];
            mean /= n;
            for (int64_t j = 0; j < n; j++) var += (x[r * n + j] - mean) * (x[r * n + j] - mean);
            var /= n;
            for (int64_t j = 0; j < n; j++) {
                double want = (x[r * n + j] - mean) / sqrt(var + 1e-12) * g[j] + b[j];
                CHECKF(fabs(y1[r * n + j] - want) < 1e-4, "n=%lld", (long long)n);
            }
        }
        if (b8_cpu_allows(B8_ISA_AVX512)) {
            b8_layernorm_rows__avx512(x, y2, rows, n, g, b, 1e-12f);
            CHECKF(memcmp(y1, y2, sizeof(float) * rows * n) == 0, "LN n=%lld", (long long)n);
            memcpy(y2, x, sizeof(float) * rows * n); /* in place, as the forward pass runs it */
            b8_layernorm_rows__avx512(y2, y2, rows, n, g, b, 1e-12f);
            CHECKF(memcmp(y1, y2, sizeof(float) * rows * n) == 0, "LN in place n=%lld", (long long)n);
        }
        if (b8_cpu_allows(B8_ISA_AVX2)) {
            b8_layernorm_rows__avx2(x, y2, rows, n, g, b, 1e-12f);
            CHECKF(memcmp(y1, y2, sizeof(float) * rows * n) == 0, "LN avx2 n=%lld", (long long)n);
            memcpy(y2, x, sizeof(float) * rows * n);
            b8_layernorm_rows__avx2(y2, y2, rows, n, g, b, 1e-12f);
            CHECKF(memcmp(y1, y2, sizeof(float) * rows * n) == 0, "LN avx2 in place n=%lld", (long long)n);
        }
        free(x), free(y1), free(y2), free(g), free(b);
    }
}

/* Rotary positions: the table against double maths, the SIMD twins bit-exact to the scalar one,
 * the scalar one against the rotate_half formula, for head sizes with and without a tail. */
TEST(rotary_twins_bit_exact_and_correct) {
    const int64_t ds[] = {2, 8, 16, 30, 32, 64, 128};
    for (size_t di = 0; di < sizeof ds / sizeof *ds; di++) {
        const int64_t d = ds[di], T = 37, heads = 3, ld = heads * d + 5, rows = 11, pos0 = T - rows;
        const float theta = di % 2 ? 10000.0f : 160000.0f;
        float *cs = malloc(sizeof(float) * T * d), *x = malloc(sizeof(float) * rows * ld);
        float *y1 = malloc(sizeof(float) * rows * ld), *y2 = malloc(sizeof(float) * rows * ld);
        b8_rotary_table(cs, T, d, theta);
        for (int64_t t = 0; t < T; t++)
            for (int64_t i = 0; i < d / 2; i++) {
                const double a = (double)t / pow((double)theta, (double)(2 * i) / (double)d);
                CHECKF(fabs(cs[t * d + i] - cos(a)) < 2e-5 && fabs(cs[t * d + d / 2 + i] - sin(a)) < 2e-5,
                       "table d=%lld t=%lld i=%lld", (long long)d, (long long)t, (long long)i);
            }
        for (int64_t i = 0; i < rows * ld; i++) x[i] = frand(3.0f);
        memcpy(y1, x, sizeof(float) * rows * ld);
        b8_rotary_rows__scalar(y1, ld, rows, heads, d, cs, pos0);
        for (int64_t r = 0; r < rows; r++) {
            const float *c = cs + (pos0 + r) * d;
            for (int64_t h = 0; h < heads; h++)
                for (int64_t j = 0; j < d; j++) {
                    const int64_t o = r * ld + h * d, jj = j % (d / 2);
                    const double rot = j < d / 2 ? -(double)x[o + j + d / 2] : (double)x[o + j - d / 2];
                    const double want = x[o + j] * (double)c[jj] + rot * (double)c[d / 2 + jj];
                    CHECKF(fabs(y1[o + j] - want) < 1e-5, "rotary d=%lld", (long long)d);
                }
            for (int64_t j = heads * d; j < ld; j++) CHECK(y1[r * ld + j] == x[r * ld + j]); /* untouched */
        }
        const struct {
            b8_isa isa;
            b8_rotary_fn fn;
            const char *name;
        } simd[] = {{B8_ISA_AVX512, b8_rotary_rows__avx512, "avx512"}, {B8_ISA_AVX2, b8_rotary_rows__avx2, "avx2"}};
        for (size_t k = 0; k < 2; k++) {
            if (!b8_cpu_allows(simd[k].isa)) continue;
            memcpy(y2, x, sizeof(float) * rows * ld);
            simd[k].fn(y2, ld, rows, heads, d, cs, pos0);
            CHECKF(memcmp(y1, y2, sizeof(float) * rows * ld) == 0, "rotary %s d=%lld", simd[k].name, (long long)d);
        }
        free(cs), free(x), free(y1), free(y2);
    }
}

/* Disentangled attention's products: the SIMD twins bit-exact to the scalar one for row counts
 * and widths around every tile edge (strided operands, c filled with NaN: written, never read,
 * nothing outside [m][n] touched), the scalar one within float rounding of double maths. */
TEST(rel_dot_twins_bit_exact_and_correct) {
    /* its data come from the shared generator, which is put back afterwards: the tests after this
     * one keep the data their thresholds were set on (the INT8 attention's accuracy bound is
     * close on some draws) */
    const unsigned saved_rng = rng;
    const int64_t ms[] = {1, 2, 3, 4, 5, 7, 9, 128}, ns[] = {1, 7, 8, 9, 16, 17, 24, 25, 48, 63, 64, 65, 97, 255};
    const int64_t ks[] = {1, 3, 64, 65};
    const float nan = NAN;
    for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++)
        for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++)
            for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++) {
                const int64_t k = ks[ki], m = ms[mi], n = ns[ni], lda = 3 * k + 1, ldb = n + 5, ldc = n + 3;
                float *a = malloc(sizeof(float) * m * lda), *b = malloc(sizeof(float) * k * ldb);
                float *c1 = malloc(sizeof(float) * m * ldc), *c2 = malloc(sizeof(float) * m * ldc);
                for (int64_t i = 0; i < m * lda; i++) a[i] = frand(2.0f);
                for (int64_t i = 0; i < k * ldb; i++) b[i] = frand(1.5f);
                for (int64_t i = 0; i < m * ldc; i++) c1[i] = nan;
                b8_rel_dot__scalar(a, lda, m, b, ldb, k, n, c1, ldc);
                for (int64_t i = 0; i < m; i++) {
                    for (int64_t j = 0; j < n; j++) {
                        double want = 0, mag = 0;
                        for (int64_t t = 0; t < k; t++) {
                            want += (double)a[i * lda + t] * b[t * ldb + j];
                            mag += fabs((double)a[i * lda + t] * b[t * ldb + j]);
                        }
                        CHECKF(fabs(c1[i * ldc + j] - want) <= 1e-6 * (double)k * mag + 1e-30,
                               "rel_dot scalar m=%lld n=%lld k=%lld", (long long)m, (long long)n, (long long)k);
                    }
                    for (int64_t j = n; j < ldc; j++) CHECK(isnan(c1[i * ldc + j])); /* untouched */
                }
                const struct {
                    b8_isa isa;
                    b8_rel_dot_fn fn;
                    const char *name;
                } simd[] = {{B8_ISA_AVX512, b8_rel_dot_4x64__avx512, "avx512"}, {B8_ISA_AVX2, b8_rel_dot_4x24__avx2, "avx2"}};
                for (size_t s = 0; s < 2; s++) {
                    if (!b8_cpu_allows(simd[s].isa)) continue;
                    for (int64_t i = 0; i < m * ldc; i++) c2[i] = nan;
                    simd[s].fn(a, lda, m, b, ldb, k, n, c2, ldc);
                    CHECKF(memcmp(c1, c2, sizeof(float) * m * ldc) == 0, "rel_dot %s m=%lld n=%lld k=%lld", simd[s].name,
                           (long long)m, (long long)n, (long long)k);
                }
                free(a), free(b), free(c1), free(c2);
            }
    rng = saved_rng;
}

/* The gated FFN's pass act(gate) * up: every activation, the SIMD twins bit-exact to the scalar
 * one, the scalar one within the activations' accuracy of double maths. */
TEST(glu_twins_bit_exact_and_correct) {
    const b8_act acts[] = {B8_ACT_GELU, B8_ACT_GELU_TANH, B8_ACT_RELU, B8_ACT_SILU};
    const int64_t Is[] = {1, 7, 16, 37, 64, 100};
    for (size_t ai = 0; ai < sizeof acts / sizeof *acts; ai++)
        for (size_t ii = 0; ii < sizeof Is / sizeof *Is; ii++) {
            const int64_t I = Is[ii], rows = 5, ldx = 2 * I + 3, ldh = I + 2;
            float *x = malloc(sizeof(float) * rows * ldx), *h1 = calloc((size_t)(rows * ldh), sizeof(float));
            float *h2 = calloc((size_t)(rows * ldh), sizeof(float));
            for (int64_t i = 0; i < rows * ldx; i++) x[i] = frand(6.0f);
            b8_glu_rows__scalar(x, ldx, rows, I, acts[ai], h1, ldh);
            for (int64_t r = 0; r < rows; r++)
                for (int64_t i = 0; i < I; i++) {
                    const double g = x[r * ldx + i], u = x[r * ldx + I + i];
                    double a = g;
                    switch (acts[ai]) {
                    case B8_ACT_GELU: a = 0.5 * g * (1.0 + erf(g / sqrt(2.0))); break;
                    case B8_ACT_GELU_TANH: a = 0.5 * g * (1.0 + tanh(sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g))); break;
                    case B8_ACT_RELU: a = g > 0 ? g : 0; break;
                    default: a = g / (1.0 + exp(-g)); break;
                    }
                    CHECKF(fabs(h1[r * ldh + i] - a * u) < 1e-5 * (1.0 + fabs(a * u)), "glu act %d I=%lld", (int)acts[ai],
                           (long long)I);
                }
            const struct {
                b8_isa isa;
                b8_glu_fn fn;
                const char *name;
            } simd[] = {{B8_ISA_AVX512_VNNI, b8_glu_rows__avx512, "avx512"}, {B8_ISA_AVX2, b8_glu_rows__avx2, "avx2"}};
            for (size_t k = 0; k < 2; k++) {
                if (!b8_cpu_allows(simd[k].isa)) continue;
                memset(h2, 0, sizeof(float) * rows * ldh);
                simd[k].fn(x, ldx, rows, I, acts[ai], h2, ldh);
                CHECKF(memcmp(h1, h2, sizeof(float) * rows * ldh) == 0, "glu %s act %d I=%lld", simd[k].name,
                       (int)acts[ai], (long long)I);
            }
            free(x), free(h1), free(h2);
        }
}

TEST(attention_twins_bit_exact_and_correct) {
    static const int64_t TS[] = {1, 3, 5, 16, 17, 64, 130};
    static const int64_t DS[] = {1, 16, 32, 48, 64, 80};
    for (size_t ti = 0; ti < sizeof TS / sizeof *TS; ti++)
        for (size_t di = 0; di < sizeof DS / sizeof *DS; di++) {
            int64_t T = TS[ti], d = DS[di], ld = 3 * d + 5, ldo = d + 3;
            float *qkv = malloc(sizeof(float) * (size_t)(T * ld));
            float *c1 = calloc((size_t)(T * ldo), sizeof(float)), *c2 = calloc((size_t)(T * ldo), sizeof(float));
            float *scr = malloc(sizeof(float) * b8_attention_scratch_floats(T, d));
            int32_t *mask = malloc(sizeof(int32_t) * (size_t)T);
            float *relv = malloc(sizeof(float) * (size_t)(2 * T - 1)); /* a relative-position bias (MPNet) */
            float *biasv = malloc(sizeof(float) * (size_t)(T * T));  /* a bias per score (DeBERTa) */
            for (int64_t i = 0; i < T * ld; i++) qkv[i] = frand(1.5f);
            for (int64_t i = 0; i < 2 * T - 1; i++) relv[i] = 0.8f * sinf(0.7f * (float)i); /* outside frand: the other data stay as before */
            for (int64_t i = 0; i < T * T; i++) biasv[i] = 1.3f * cosf(0.37f * (float)i + 0.2f);
            for (int64_t j = 0; j < T; j++) mask[j] = j == 0 || j % 4 != 2;
            float alpha = 1.0f / sqrtf((float)d);
            for (int cfg = 0; cfg < 8; cfg++) {
                const int mode = cfg & 1;
                const float *rel = cfg & 2 ? relv : NULL, *bias = cfg & 4 ? biasv : NULL;
                const int32_t *mk = mode ? mask : NULL;
                b8_attention_head__scalar(qkv, qkv + d, qkv + 2 * d, ld, T, d, alpha, mk, (b8_mask_mode)mode, rel, bias,
                                          c1, ldo, scr);
                if (b8_cpu_allows(B8_ISA_AVX512)) {
                    b8_attention_head__avx512(qkv, qkv + d, qkv + 2 * d, ld, T, d, alpha, mk, (b8_mask_mode)mode, rel, bias,
                                              c2, ldo, scr);
                    CHECKF(memcmp(c1, c2, sizeof(float) * (size_t)(T * ldo)) == 0, "T=%lld d=%lld cfg=%d",
                           (long long)T, (long long)d, cfg);
                }
                if (b8_cpu_allows(B8_ISA_AVX2)) {
                    memset(c2, 0, sizeof(float) * (size_t)(T * ldo));
                    b8_attention_head__avx2(qkv, qkv + d, qkv + 2 * d, ld, T, d, alpha, mk, (b8_mask_mode)mode, rel, bias, c2,
                                            ldo, scr);
                    CHECKF(memcmp(c1, c2, sizeof(float) * (size_t)(T * ldo)) == 0, "avx2 T=%lld d=%lld cfg=%d",
                           (long long)T, (long long)d, cfg);
                }
                /* against double-precision attention */
                for (int64_t i = 0; i < T; i += (T > 8 ? 7 : 1)) {
                    double sc[130], mx = -1e300, sum = 0;
                    for (int64_t j = 0; j < T; j++) {
                        double a = 0;
                        for (int64_t k = 0; k < d; k++) a += (double)qkv[i * ld + k] * qkv[j * ld + d + k];
                        sc[j] = mk && !mk[j] ? -1e300
                                           : a * alpha + (rel ? rel[T - 1 + j - i] : 0.0) + (bias ? bias[i * T + j] : 0.0);
                        if (sc[j] > mx) mx = sc[j];
                    }
                    for (int64_t j = 0; j < T; j++) sum += (sc[j] = exp(sc[j] - mx));
                    for (int64_t k = 0; k < d; k++) {
                        double want = 0;
                        for (int64_t j = 0; j < T; j++) want += sc[j] / sum * qkv[j * ld + 2 * d + k];
                        CHECKF(fabs(c1[i * ldo + k] - want) < 1e-4, "T=%lld d=%lld: %g vs %g", (long long)T,
                               (long long)d, c1[i * ldo + k], want);
                    }
                }
                /* the stride gap of ctx is never written */
                if (ldo > d) CHECK(c1[ldo - 1] == 0.0f);
            }
            free(qkv), free(c1), free(c2), free(scr), free(mask), free(relv), free(biasv);
        }
}

/* Sliding-window attention (ModernBERT): the AVX-512 twin bit for bit against the scalar one, both
 * against double-precision attention over |i - j| <= w only, and a window covering every key equal
 * to full attention (within rounding). */
TEST(window_attention_twins_bit_exact_and_correct) {
    static const int64_t TS[] = {1, 3, 5, 16, 17, 64, 130};
    static const int64_t DS[] = {1, 16, 48, 64, 80};
    static const int64_t WS[] = {0, 1, 2, 5, 8, 64, 200};
    for (size_t ti = 0; ti < sizeof TS / sizeof *TS; ti++)
        for (size_t di = 0; di < sizeof DS / sizeof *DS; di++)
            for (size_t wi = 0; wi < sizeof WS / sizeof *WS; wi++) {
                const int64_t T = TS[ti], d = DS[di], w = WS[wi], ld = 3 * d + 5, ldo = d + 3;
                float *qkv = malloc(sizeof(float) * (size_t)(T * ld));
                float *c1 = calloc((size_t)(T * ldo), sizeof(float)), *c2 = calloc((size_t)(T * ldo), sizeof(float));
                float *scr = malloc(sizeof(float) * b8_attention_scratch_floats(T, d));
                int32_t *mask = malloc(sizeof(int32_t) * (size_t)T);
                for (int64_t i = 0; i < T * ld; i++) qkv[i] = frand(1.5f);
                for (int64_t j = 0; j < T; j++) mask[j] = j < T - T / 4; /* padding at the end */
                const float alpha = 1.0f / sqrtf((float)d);
                for (int mode = 0; mode < 2; mode++) {
                    const int32_t *mk = mode ? mask : NULL;
                    b8_attention_window__scalar(qkv, qkv + d, qkv + 2 * d, ld, T, d, alpha, w, mk, (b8_mask_mode)mode, c1,
                                                ldo, scr);
                    if (b8_cpu_allows(B8_ISA_AVX512)) {
                        memset(c2, 0, sizeof(float) * (size_t)(T * ldo));
                        b8_attention_window__avx512(qkv, qkv + d, qkv + 2 * d, ld, T, d, alpha, w, mk, (b8_mask_mode)mode,
                                                    c2, ldo, scr);
                        CHECKF(memcmp(c1, c2, sizeof(float) * (size_t)(T * ldo)) == 0, "window T=%lld d=%lld w=%lld mode=%d",
                               (long long)T, (long long)d, (long long)w, mode);
                    }
                    if (b8_cpu_allows(B8_ISA_AVX2)) {
                        memset(c2, 0, sizeof(float) * (size_t)(T * ldo));
                        b8_attention_window__avx2(qkv, qkv + d, qkv + 2 * d, ld, T, d, alpha, w, mk, (b8_mask_mode)mode,
                                                  c2, ldo, scr);
                        CHECKF(memcmp(c1, c2, sizeof(float) * (size_t)(T * ldo)) == 0,
                               "avx2 window T=%lld d=%lld w=%lld mode=%d", (long long)T, (long long)d, (long long)w, mode);
                    }
                    for (int64_t i = 0; i < T; i += (T > 8 ? 5 : 1)) {
                        double sc[130], mx = -1e300, sum = 0;
                        int64_t seen = 0;
                        for (int64_t j = 0; j < T; j++) {
                            double a = 0;
                            for (int64_t k = 0; k < d; k++) a += (double)qkv[i * ld + k] * qkv[j * ld + d + k];
                            const bool in = (i > j ? i - j : j - i) <= w, keep = in && !(mk && !mk[j]);
                            sc[j] = keep ? a * alpha : -1e300;
                            seen += keep;
                            if (sc[j] > mx) mx = sc[j];
                        }
                        if (!seen) continue; /* every key of the window masked: no reference */
                        for (int64_t j = 0; j < T; j++) sum += (sc[j] = sc[j] <= -1e299 ? 0.0 : exp(sc[j] - mx));
                        for (int64_t k = 0; k < d; k++) {
                            double want = 0;
                            for (int64_t j = 0; j < T; j++) want += sc[j] / sum * qkv[j * ld + 2 * d + k];
                            CHECKF(fabs(c1[i * ldo + k] - want) < 1e-4, "window T=%lld d=%lld w=%lld: %g vs %g",
                                   (long long)T, (long long)d, (long long)w, c1[i * ldo + k], want);
                        }
                    }
                    if (ldo > d) CHECK(c1[ldo - 1] == 0.0f);
                }
                free(qkv), free(c1), free(c2), free(scr), free(mask);
            }
}

/* The AMX kernel's head sizes below 64 (16, 32 and 48: depths past d zero on the 64-depth tiles)
 * against the scalar twin bit for bit, with and without a mask and a relative bias, long rows too. */
TEST(int8_attention_amx_small_heads_bit_exact) {
    if (!b8_cpu_allows(B8_ISA_AMX)) TU_SKIP("no AMX: the AMX kernel did not run");
    rng = 777;
    static const int64_t TS[] = {1, 15, 33, 200};
    static const int64_t DS[] = {16, 32, 48};
    for (size_t ti = 0; ti < sizeof TS / sizeof *TS; ti++)
        for (size_t di = 0; di < sizeof DS / sizeof *DS; di++) {
            const int64_t T = TS[ti], d = DS[di], ld = 3 * d + 7, ldo = d + 1;
            int8_t *qkv = malloc((size_t)(T * ld)), *o1 = calloc((size_t)(T * ldo), 1), *o2 = calloc((size_t)(T * ldo), 1);
            float *c1 = calloc((size_t)(T * ldo), sizeof(float)), *c2 = calloc((size_t)(T * ldo), sizeof(float));
            float *mul = malloc((size_t)d * sizeof(float)), *relv = malloc(sizeof(float) * (size_t)(2 * T - 1));
            int32_t *mask = malloc(sizeof(int32_t) * (size_t)T);
            void *scr = b8_malloc_aligned(b8_attention_s8_scratch_bytes(T, d));
            for (int64_t i = 0; i < T * ld; i++) qkv[i] = (int8_t)(frand(254.0f));
            for (int64_t i = 0; i < 2 * T - 1; i++) relv[i] = 0.5f * cosf(0.3f * (float)i);
            for (int64_t j = 0; j < T; j++) mask[j] = j % 3 != 1;
            for (int64_t k = 0; k < d; k++) mul[k] = 30.0f + frand(20.0f);
            for (int cfg = 0; cfg < 4; cfg++) {
                b8_attn_s8_params p = {0.02f * 0.015f / sqrtf((float)d), 0.03f, mul, NULL, cfg & 2 ? relv : NULL};
                const int32_t *mk = cfg & 1 ? mask : NULL;
                b8_attention_s8__scalar(qkv, qkv + d, qkv + 2 * d, ld, T, d, &p, mk, B8_MASK_ADD_MIN, c1, NULL, ldo, scr);
                b8_attention_s8__scalar(qkv, qkv + d, qkv + 2 * d, ld, T, d, &p, mk, B8_MASK_ADD_MIN, NULL, o1, ldo, scr);
                b8_attention_s8__amx(qkv, qkv + d, qkv + 2 * d, ld, T, d, &p, mk, B8_MASK_ADD_MIN, c2, NULL, ldo, scr);
                b8_attention_s8__amx(qkv, qkv + d, qkv + 2 * d, ld, T, d, &p, mk, B8_MASK_ADD_MIN, NULL, o2, ldo, scr);
                CHECKF(!memcmp(c1, c2, sizeof(float) * (size_t)(T * ldo)) && !memcmp(o1, o2, (size_t)(T * ldo)),
                       "amx: T=%lld d=%lld cfg=%d", (long long)T, (long long)d, cfg);
            }
            free(qkv), free(o1), free(o2), free(c1), free(c2), free(mul), free(relv), free(mask);
            b8_free_aligned(scr);
        }
}

/* INT8 attention: the AMX, VNNI and AVX2 kernels against their scalar twin bit for bit (fp32 and int8 outputs),
 * and the scalar twin against double-precision attention on the dequantized Q, K, V. */
TEST(int8_attention_twins_bit_exact_and_close_to_fp32) {
    rng = 4242; /* its own data, whatever ran before it (some earlier tests draw per ISA) */
    static const int64_t TS[] = {1, 3, 5, 16, 17, 45, 64, 130, 257}; /* 45: 48 keys, three blocks of 16 */
    static const int64_t DS[] = {4, 16, 20, 32, 48, 64, 80, 128};
    const bool vnni = b8_cpu_allows(B8_ISA_AVX512_VNNI), amx = b8_cpu_allows(B8_ISA_AMX), avx2 = b8_cpu_allows(B8_ISA_AVX2);
    for (size_t ti = 0; ti < sizeof TS / sizeof *TS; ti++)
        for (size_t di = 0; di < sizeof DS / sizeof *DS; di++) {
            const int64_t T = TS[ti], d = DS[di], ld = 3 * d + 5, ldo = d + 3;
            int8_t *qkv = malloc((size_t)(T * ld)), *o1 = calloc((size_t)(T * ldo), 1), *o2 = calloc((size_t)(T * ldo), 1);
            float *c1 = calloc((size_t)(T * ldo), sizeof(float)), *c2 = calloc((size_t)(T * ldo), sizeof(float));
            float *mul = malloc((size_t)d * sizeof(float));
            void *scr = b8_malloc_aligned(b8_attention_s8_scratch_bytes(T, d));
            int32_t *mask = malloc(sizeof(int32_t) * (size_t)T);
            float *relv = malloc(sizeof(float) * (size_t)(2 * T - 1)); /* a relative-position bias (MPNet) */
            for (int64_t i = 0; i < T * ld; i++) qkv[i] = (int8_t)(frand(254.0f));
            for (int64_t i = 0; i < 2 * T - 1; i++) relv[i] = 0.8f * sinf(0.7f * (float)i); /* outside frand: the other data stay as before */
            for (int64_t j = 0; j < T; j++) mask[j] = j == 0 || j % 4 != 2;
            for (int64_t k = 0; k < d; k++) mul[k] = 40.0f + frand(30.0f);
            const float sq = 0.02f, sk = 0.015f, sv = 0.03f;
            /* V per tensor (sv), then per channel (ch: the fp32 output scaled per channel, the
             * int8 one with mul x ch folded, as the forward pass does) */
            float *ch = malloc((size_t)d * sizeof(float)), *mulch = malloc((size_t)d * sizeof(float));
            for (int64_t k = 0; k < d; k++) ch[k] = (k % 5 == 0 ? 0.5f : 0.002f) + 0.01f * frand(1.0f), mulch[k] = mul[k] * ch[k];
            for (int perch = 0; perch < 2; perch++)
            for (int cfg = 0; cfg < 4; cfg++) {
                const int mode = cfg & 1;
                const float *rel = cfg & 2 ? relv : NULL;
                b8_attn_s8_params p = {sq * sk / sqrtf((float)d), perch ? 1.0f : sv, perch ? mulch : mul, perch ? ch : NULL,
                                       rel};
                const int32_t *mk = mode ? mask : NULL;
                b8_attention_s8__scalar(qkv, qkv + d, qkv + 2 * d, ld, T, d, &p, mk, (b8_mask_mode)mode, c1, NULL, ldo, scr);
                b8_attention_s8__scalar(qkv, qkv + d, qkv + 2 * d, ld, T, d, &p, mk, (b8_mask_mode)mode, NULL, o1, ldo, scr);
                if (vnni) {
                    b8_attention_s8__avx512vnni(qkv, qkv + d, qkv + 2 * d, ld, T, d, &p, mk, (b8_mask_mode)mode, c2, NULL,
                                                ldo, scr);
                    b8_attention_s8__avx512vnni(qkv, qkv + d, qkv + 2 * d, ld, T, d, &p, mk, (b8_mask_mode)mode, NULL, o2,
                                                ldo, scr);
                    CHECKF(!memcmp(c1, c2, sizeof(float) * (size_t)(T * ldo)) && !memcmp(o1, o2, (size_t)(T * ldo)),
                           "T=%lld d=%lld cfg=%d", (long long)T, (long long)d, cfg);
                }
                if (avx2) {
                    memset(c2, 0, sizeof(float) * (size_t)(T * ldo));
                    memset(o2, 0, (size_t)(T * ldo));
                    b8_attention_s8__avx2(qkv, qkv + d, qkv + 2 * d, ld, T, d, &p, mk, (b8_mask_mode)mode, c2, NULL, ldo,
                                          scr);
                    b8_attention_s8__avx2(qkv, qkv + d, qkv + 2 * d, ld, T, d, &p, mk, (b8_mask_mode)mode, NULL, o2, ldo,
                                          scr);
                    CHECKF(!memcmp(c1, c2, sizeof(float) * (size_t)(T * ldo)) && !memcmp(o1, o2, (size_t)(T * ldo)),
                           "avx2: T=%lld d=%lld cfg=%d perch=%d", (long long)T, (long long)d, cfg, perch);
                }
                if (amx) { /* d a multiple of 64 on tiles, other d through its VNNI fallback */
                    memset(c2, 0, sizeof(float) * (size_t)(T * ldo));
                    memset(o2, 0, (size_t)(T * ldo));
                    b8_attention_s8__amx(qkv, qkv + d, qkv + 2 * d, ld, T, d, &p, mk, (b8_mask_mode)mode, c2, NULL, ldo,
                                         scr);
                    b8_attention_s8__amx(qkv, qkv + d, qkv + 2 * d, ld, T, d, &p, mk, (b8_mask_mode)mode, NULL, o2, ldo,
                                         scr);
                    CHECKF(!memcmp(c1, c2, sizeof(float) * (size_t)(T * ldo)) && !memcmp(o1, o2, (size_t)(T * ldo)),
                           "amx: T=%lld d=%lld cfg=%d", (long long)T, (long long)d, cfg);
                }
                double worst = 0;
                for (int64_t i = 0; i < T; i++) {
                    double sc[257], mx = -1e300, sum = 0;
                    for (int64_t j = 0; j < T; j++) {
                        double a = 0;
                        for (int64_t k = 0; k < d; k++) a += (double)qkv[i * ld + k] * sq * qkv[j * ld + d + k] * sk;
                        sc[j] = mk && !mk[j] ? -1e300 : a / sqrt((double)d) + (rel ? rel[T - 1 + j - i] : 0.0);
                        if (sc[j] > mx) mx = sc[j];
                    }
                    for (int64_t j = 0; j < T; j++) sum += (sc[j] = exp(sc[j] - mx));
                    for (int64_t k = 0; k < d; k++) {
                        double want = 0;
                        const double svk = perch ? ch[k] : sv;
                        for (int64_t j = 0; j < T; j++) want += sc[j] / sum * qkv[j * ld + 2 * d + k] * svk;
                        worst = fmax(worst, fabs(c1[i * ldo + k] - want) / (127 * svk));
                        /* the int8 output is the fp32 one requantized (per channel, the product of
                         * the two multipliers is rounded once more: within one step) */
                        if (!perch) CHECK(o1[i * ldo + k] == b8_q8(c1[i * ldo + k] * mul[k]));
                        else CHECK(abs(o1[i * ldo + k] - b8_q8(c1[i * ldo + k] * mul[k])) <= 1);
                    }
                }
                /* probabilities on 8 bits (per-row scale): about 1/255 of V's range typically; the
                 * one draw of the data reached 4.2/255 (T=64, d=128), hence 5/255 */
                CHECKF(worst < 5.0 / 255, "T=%lld d=%lld: int8 attention deviates %.3g of V's range", (long long)T,
                       (long long)d, worst);
                if (ldo > d) CHECK(c1[ldo - 1] == 0.0f && o1[ldo - 1] == 0);
            }
            free(qkv), free(o1), free(o2), free(c1), free(c2), free(mul), free(mask), free(ch), free(mulch), free(relv);
            b8_free_aligned(scr);
        }
    if (!vnni && !avx2) TU_SKIP("no AVX512-VNNI or AVX2: only the scalar twin was checked");
}

/* Every key masked (a padded row of nothing but padding): each row attends to all keys alike, in
 * every twin, for row counts that fill the VNNI kernel's 4-row blocks and ones that leave a tail. */
TEST(int8_attention_with_every_key_masked) {
    static const int64_t TS[] = {1, 4, 6, 17, 64};
    const bool vnni = b8_cpu_allows(B8_ISA_AVX512_VNNI), amx = b8_cpu_allows(B8_ISA_AMX), avx2 = b8_cpu_allows(B8_ISA_AVX2);
    for (size_t ti = 0; ti < sizeof TS / sizeof *TS; ti++) {
        const int64_t T = TS[ti], d = 64, ld = 3 * d, ldo = d;
        int8_t *qkv = malloc((size_t)(T * ld)), *o1 = calloc((size_t)(T * ldo), 1), *o2 = calloc((size_t)(T * ldo), 1);
        float *c1 = calloc((size_t)(T * ldo), sizeof(float)), *c2 = calloc((size_t)(T * ldo), sizeof(float));
        float mul[64];
        int32_t *mask = calloc((size_t)T, sizeof(int32_t));
        void *scr = b8_malloc_aligned(b8_attention_s8_scratch_bytes(T, d));
        for (int64_t i = 0; i < T * ld; i++) qkv[i] = (int8_t)(frand(254.0f));
        for (int k = 0; k < 64; k++) mul[k] = 50.0f;
        const b8_attn_s8_params p = {0.001f, 0.03f, mul, NULL, NULL};
        for (int mode = 0; mode < 2; mode++) {
            b8_attention_s8__scalar(qkv, qkv + d, qkv + 2 * d, ld, T, d, &p, mask, (b8_mask_mode)mode, c1, NULL, ldo, scr);
            b8_attention_s8__scalar(qkv, qkv + d, qkv + 2 * d, ld, T, d, &p, mask, (b8_mask_mode)mode, NULL, o1, ldo, scr);
            for (int64_t k = 0; k < d; k++) { /* the mean of V */
                double want = 0;
                for (int64_t j = 0; j < T; j++) want += qkv[j * ld + 2 * d + k] * 0.03 / (double)T;
                for (int64_t i = 0; i < T; i++)
                    CHECKF(fabs(c1[i * ldo + k] - want) < 0.03 * 127 / 255.0, "T=%lld: %g vs %g", (long long)T,
                           c1[i * ldo + k], want);
            }
            for (int which = 0; which < 3; which++) {
                if (which == 0 ? !vnni : which == 1 ? !amx : !avx2) continue;
                b8_attention_s8_fn f = which == 0 ? b8_attention_s8__avx512vnni : which == 1 ? b8_attention_s8__amx : b8_attention_s8__avx2;
                memset(c2, 0, sizeof(float) * (size_t)(T * ldo));
                memset(o2, 0, (size_t)(T * ldo));
                f(qkv, qkv + d, qkv + 2 * d, ld, T, d, &p, mask, (b8_mask_mode)mode, c2, NULL, ldo, scr);
                f(qkv, qkv + d, qkv + 2 * d, ld, T, d, &p, mask, (b8_mask_mode)mode, NULL, o2, ldo, scr);
                CHECKF(!memcmp(c1, c2, sizeof(float) * (size_t)(T * ldo)) && !memcmp(o1, o2, (size_t)(T * ldo)),
                       "%s: T=%lld mode=%d", which == 0 ? "vnni" : which == 1 ? "amx" : "avx2", (long long)T, mode);
            }
        }
        free(qkv), free(o1), free(o2), free(c1), free(c2), free(mask), b8_free_aligned(scr);
    }
}

/* The largest e * 255 of the AVX2 exp over every float x in [-1, 0]: the AVX2 INT8 attention stores
 * rne(e * 255) without the twins' min(., 255), which is the same only while this is at most 255
 * (below -1, e < 0.37). */
B8_T256 static float avx2_exp255_max(void) {
    float worst = 0.0f;
    for (uint32_t b = 0x80000000u; b <= 0xBF800000u; b += 8) { /* -0 .. -1 */
        const __m256i bits = _mm256_add_epi32(_mm256_set1_epi32((int)b), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        float f[8];
        _mm256_storeu_ps(f, _mm256_mul_ps(b8_v8_exp(_mm256_castsi256_ps(bits)), _mm256_set1_ps(255.0f)));
        for (int i = 0; i < 8; i++) worst = f[i] > worst ? f[i] : worst;
    }
    return worst;
}

TEST(int8_attention_avx2_probabilities_need_no_clamp) {
    if (!b8_cpu_allows(B8_ISA_AVX2)) TU_SKIP("no AVX2");
    const float worst = avx2_exp255_max();
    CHECKF(worst == 255.0f, "max e * 255 = %.9g", worst);
}

/* INT8 sliding-window attention: the VNNI and AVX2 kernels against their scalar twin bit for bit (fp32 and int8
 * outputs, padding masks), and the scalar twin against double-precision windowed attention on the
 * dequantized Q, K, V. */
TEST(int8_window_attention_twins_bit_exact_and_close_to_fp32) {
    rng = 4343; /* its own data, whatever ran before it */
    static const int64_t TS[] = {1, 3, 5, 16, 17, 40, 130};
    static const int64_t DS[] = {4, 16, 20, 48, 64, 80};
    static const int64_t WS[] = {0, 1, 3, 8, 17, 64, 200};
    const bool vnni = b8_cpu_allows(B8_ISA_AVX512_VNNI), avx2 = b8_cpu_allows(B8_ISA_AVX2);
    for (size_t ti = 0; ti < sizeof TS / sizeof *TS; ti++)
        for (size_t di = 0; di < sizeof DS / sizeof *DS; di++)
            for (size_t wi = 0; wi < sizeof WS / sizeof *WS; wi++) {
                const int64_t T = TS[ti], d = DS[di], w = WS[wi], ld = 3 * d + 5, ldo = d + 3;
                int8_t *qkv = malloc((size_t)(T * ld)), *o1 = calloc((size_t)(T * ldo), 1);
                int8_t *o2 = calloc((size_t)(T * ldo), 1);
                float *c1 = calloc((size_t)(T * ldo), sizeof(float)), *c2 = calloc((size_t)(T * ldo), sizeof(float));
                float *mul = malloc((size_t)d * sizeof(float));
                void *scr = b8_malloc_aligned(b8_attention_s8_window_scratch_bytes(T, d));
                int32_t *mask = malloc(sizeof(int32_t) * (size_t)T);
                for (int64_t i = 0; i < T * ld; i++) qkv[i] = (int8_t)(frand(254.0f));
                for (int64_t j = 0; j < T; j++) mask[j] = j < T - T / 3; /* padding at the end */
                for (int64_t k = 0; k < d; k++) mul[k] = 40.0f + frand(30.0f);
                const float sq = 0.02f, sk = 0.015f, sv = 0.03f;
                for (int useMask = 0; useMask < 2; useMask++) {
                    const int32_t *mk = useMask ? mask : NULL;
                    const b8_attn_s8_params p = {sq * sk / sqrtf((float)d), sv, mul, NULL, NULL};
                    b8_attention_s8_window__scalar(qkv, qkv + d, qkv + 2 * d, ld, T, d, &p, w, mk, c1, NULL, ldo, scr);
                    b8_attention_s8_window__scalar(qkv, qkv + d, qkv + 2 * d, ld, T, d, &p, w, mk, NULL, o1, ldo, scr);
                    if (vnni) {
                        memset(c2, 0, sizeof(float) * (size_t)(T * ldo));
                        memset(o2, 0, (size_t)(T * ldo));
                        b8_attention_s8_window__avx512vnni(qkv, qkv + d, qkv + 2 * d, ld, T, d, &p, w, mk, c2, NULL, ldo,
                                                           scr);
                        b8_attention_s8_window__avx512vnni(qkv, qkv + d, qkv + 2 * d, ld, T, d, &p, w, mk, NULL, o2, ldo,
                                                           scr);
                        CHECKF(memcmp(c1, c2, sizeof(float) * (size_t)(T * ldo)) == 0 &&
                                   memcmp(o1, o2, (size_t)(T * ldo)) == 0,
                               "int8 window T=%lld d=%lld w=%lld mask=%d", (long long)T, (long long)d, (long long)w,
                               useMask);
                    }
                    if (avx2) {
                        memset(c2, 0, sizeof(float) * (size_t)(T * ldo));
                        memset(o2, 0, (size_t)(T * ldo));
                        b8_attention_s8_window__avx2(qkv, qkv + d, qkv + 2 * d, ld, T, d, &p, w, mk, c2, NULL, ldo, scr);
                        b8_attention_s8_window__avx2(qkv, qkv + d, qkv + 2 * d, ld, T, d, &p, w, mk, NULL, o2, ldo, scr);
                        CHECKF(memcmp(c1, c2, sizeof(float) * (size_t)(T * ldo)) == 0 &&
                                   memcmp(o1, o2, (size_t)(T * ldo)) == 0,
                               "avx2 int8 window T=%lld d=%lld w=%lld mask=%d", (long long)T, (long long)d,
                               (long long)w, useMask);
                    }
                    /* against double precision over the window's real keys (rows that have one) */
                    double worst = 0;
                    for (int64_t i = 0; i < T; i++) {
                        double sc[130], mx = -1e300, sum = 0;
                        int64_t seen = 0;
                        for (int64_t j = 0; j < T; j++) {
                            double a = 0;
                            for (int64_t k = 0; k < d; k++) a += (double)qkv[i * ld + k] * sq * qkv[j * ld + d + k] * sk;
                            const bool keep = (i > j ? i - j : j - i) <= w && !(mk && !mk[j]);
                            sc[j] = keep ? a / sqrt((double)d) : -1e300;
                            seen += keep;
                            if (sc[j] > mx) mx = sc[j];
                        }
                        if (!seen) continue;
                        for (int64_t j = 0; j < T; j++) sum += (sc[j] = sc[j] <= -1e299 ? 0.0 : exp(sc[j] - mx));
                        for (int64_t k = 0; k < d; k++) {
                            double want = 0;
                            for (int64_t j = 0; j < T; j++) want += sc[j] / sum * qkv[j * ld + 2 * d + k] * sv;
                            const double e = fabs(c1[i * ldo + k] - want);
                            worst = e > worst ? e : worst;
                        }
                    }
                    /* the bound of the attention above (one draw here: 4.03/255) */
                    CHECKF(worst < 5.0 / 255 * 127 * sv, "int8 window T=%lld d=%lld w=%lld: deviates %.3g", (long long)T,
                           (long long)d, (long long)w, worst);
                }
                free(qkv), free(o1), free(o2), free(c1), free(c2), free(mul), free(mask);
                b8_free_aligned(scr);
            }
}

int main(void) {
    RUN(expf_approx_close_to_libm);
    RUN(softmax_simd_twins_match_scalar_bit_exact);
    RUN(softmax_scalar_matches_reference_maths);
    RUN(layernorm_twins_bit_exact_and_correct);
    RUN(rotary_twins_bit_exact_and_correct);
    RUN(glu_twins_bit_exact_and_correct);
    RUN(attention_twins_bit_exact_and_correct);
    RUN(int8_attention_twins_bit_exact_and_close_to_fp32);
    RUN(int8_attention_amx_small_heads_bit_exact);
    RUN(int8_attention_with_every_key_masked);
    RUN(int8_attention_avx2_probabilities_need_no_clamp);
    RUN(window_attention_twins_bit_exact_and_correct); /* last: its random draws leave the others' data as before */
    RUN(int8_window_attention_twins_bit_exact_and_close_to_fp32);
    RUN(rel_dot_twins_bit_exact_and_correct); /* after the others: their random data stay as before */
    return tu_finish();
}
