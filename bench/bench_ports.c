/* bench_ports.c: which float instructions share the INT8 product's issue slots on this CPU. A
 * program, not a test.
 *
 * The INT8 Linears' epilogues (dequantize, GELU) and the INT8 attention's softmax (exp) are
 * float arithmetic run between the integer products. Whether that arithmetic costs time of its
 * own or hides behind the products depends on the core: where the product instruction issues
 * to the same pipes as the float multiply (AMD Zen 4 runs vpdpbusd on its FMA pipes), every
 * multiply of the epilogue adds to the product time one for one, and only fewer operations make
 * it cheaper. This program measures it: for each instruction X, a loop of 8 independent X
 * alone, a loop of 12 independent products alone, and both interleaved in one loop; the time
 * the mix adds to the products, as a share of X's own time, is what X costs beside them (1: it
 * runs on the products' pipes; 0: it is hidden).
 *
 *   bench_ports [--iters N]
 *
 * The product is vpdpbusd (512 bits) on a CPU with AVX512-VNNI, else vpmaddwd (256 bits, with
 * the vpaddd that accumulates it, as the AVX2 kernels run it; BERT8_MAX_ISA=avx2 picks it on an
 * AVX-512 CPU too). Each time is the best of 5. */
#define _GNU_SOURCE
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define T512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni"), noinline))
#define T256 __attribute__((target("avx2,fma"), noinline))
#define KEEP(x) __asm__ volatile("" : "+v"(x))
#define KEEPS(x) KEEP(x);

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static long iters = 20000000;
static volatile float sink;

/* X applied to 8 independent registers f0..f7 (floats) or i0..i7 (int32). */
#define EIGHT(E) E(f0, i0) E(f1, i1) E(f2, i2) E(f3, i3) E(f4, i4) E(f5, i5) E(f6, i6) E(f7, i7)
#define TWELVE(P) P(a0) P(a1) P(a2) P(a3) P(a4) P(a5) P(a6) P(a7) P(a8) P(a9) P(a10) P(a11)
#define ALL_A(F) F(a0) F(a1) F(a2) F(a3) F(a4) F(a5) F(a6) F(a7) F(a8) F(a9) F(a10) F(a11)
#define ALL_F(F) F(f0) F(f1) F(f2) F(f3) F(f4) F(f5) F(f6) F(f7)
#define ALL_I(F) F(i0) F(i1) F(i2) F(i3) F(i4) F(i5) F(i6) F(i7)

/* The registers of one measurement: 12 product accumulators a*, their operands pb / pc, 8 float
 * chains f* and 8 int chains i*, the float operands m / c (VI / VF: the vector types). */
#define DECL(VI, VF, SET1I, SET1F, B, C)                                                          \
    VI a0 = SET1I(1), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0, a8 = a0;    \
    VI a9 = a0, a10 = a0, a11 = a0;                                                               \
    const VI pb = SET1I(B), pc = SET1I(C);                                                        \
    VF f0 = SET1F(1.0f), f1 = f0, f2 = f0, f3 = f0, f4 = f0, f5 = f0, f6 = f0, f7 = f0;          \
    VI i0 = pb, i1 = pb, i2 = pb, i3 = pb, i4 = pb, i5 = pb, i6 = pb, i7 = pb;                    \
    const VF m = SET1F(0.9999f), c = SET1F(1e-7f);                                                \
    (void)m, (void)c;                                                                             \
    ALL_A(KEEPS) ALL_F(KEEPS) ALL_I(KEEPS)

/* One measurement function per instruction X and vector width P (V5, V2): 12 products and/or 8
 * X per step, as with_prod / with_x say. */
#define FN(P, TARGET, NAME)                                                                       \
    TARGET static double P##_##NAME##_run(int with_prod, int with_x) {                           \
        P##_DECL double t = now();                                                                \
        for (long k = 0; k < iters; k++) {                                                        \
            if (with_prod) { TWELVE(P##_PROD) }                                                   \
            if (with_x) { EIGHT(P##_##NAME) }                                                     \
        }                                                                                         \
        t = now() - t;                                                                            \
        P##_SINK return t;                                                                        \
    }

/* ---- AVX-512: vpdpbusd beside 512-bit float instructions ---- */
#define V5_DECL DECL(__m512i, __m512, _mm512_set1_epi32, _mm512_set1_ps, 0x01020304, 0x05060708)
#define V5_SINK                                                                                   \
    {                                                                                             \
        __m512i s = a0;                                                                           \
        __m512 fs = f0;                                                                           \
        ALL_A(V5_ADDA) ALL_F(V5_ADDF) ALL_I(V5_ADDA)                                              \
        sink = (float)_mm512_reduce_or_epi32(s) + _mm512_reduce_add_ps(fs);                      \
    }
#define V5_ADDA(x) s = _mm512_xor_si512(s, x);
#define V5_ADDF(x) fs = _mm512_add_ps(fs, x);
#define V5_PROD(x) x = _mm512_dpbusd_epi32(x, pb, pc); KEEP(x);

#define V5_fma(f, i) f = _mm512_fmadd_ps(f, m, c); KEEP(f);
#define V5_mul(f, i) f = _mm512_mul_ps(f, m); KEEP(f);
#define V5_add(f, i) f = _mm512_add_ps(f, c); KEEP(f);
#define V5_max(f, i) f = _mm512_max_ps(f, c); KEEP(f);
#define V5_cvtdq2ps(f, i) f = _mm512_cvtepi32_ps(i); KEEP(f); KEEP(i);
#define V5_cvtps2dq(f, i) i = _mm512_cvtps_epi32(f); KEEP(f); KEEP(i);
#define NEAREST (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define V5_roundscale(f, i) f = _mm512_roundscale_ps(f, NEAREST); KEEP(f);
#define V5_scalef(f, i) f = _mm512_scalef_ps(f, m); KEEP(f);
#define V5_div(f, i) f = _mm512_div_ps(f, m); KEEP(f);
#define V5_rcp14(f, i) f = _mm512_rcp14_ps(f); KEEP(f);
#define V5_permps(f, i) f = _mm512_permutexvar_ps(i, f); KEEP(f);
#define V5_paddd(f, i) i = _mm512_add_epi32(i, pb); KEEP(i);

#define V5_FN(NAME) FN(V5, T512, NAME)

/* ---- AVX2: vpmaddwd + vpaddd beside 256-bit float instructions ---- */
#define V2_DECL DECL(__m256i, __m256, _mm256_set1_epi32, _mm256_set1_ps, 0x00010002, 0x00030004)
#define V2_SINK                                                                                   \
    {                                                                                             \
        __m256i s = a0;                                                                           \
        __m256 fs = f0;                                                                           \
        ALL_A(V2_ADDA) ALL_F(V2_ADDF) ALL_I(V2_ADDA)                                              \
        int32_t si[8];                                                                            \
        float sf[8];                                                                              \
        _mm256_storeu_si256((__m256i *)si, s);                                                    \
        _mm256_storeu_ps(sf, fs);                                                                 \
        sink = (float)si[0] + sf[0];                                                              \
    }
#define V2_ADDA(x) s = _mm256_add_epi32(s, x);
#define V2_ADDF(x) fs = _mm256_add_ps(fs, x);
#define V2_PROD(x) x = _mm256_add_epi32(x, _mm256_madd_epi16(pb, pc)); KEEP(x);

#define V2_fma(f, i) f = _mm256_fmadd_ps(f, m, c); KEEP(f);
#define V2_mul(f, i) f = _mm256_mul_ps(f, m); KEEP(f);
#define V2_add(f, i) f = _mm256_add_ps(f, c); KEEP(f);
#define V2_max(f, i) f = _mm256_max_ps(f, c); KEEP(f);
#define V2_cvtdq2ps(f, i) f = _mm256_cvtepi32_ps(i); KEEP(f); KEEP(i);
#define V2_cvtps2dq(f, i) i = _mm256_cvtps_epi32(f); KEEP(f); KEEP(i);
#define V2_roundscale(f, i) f = _mm256_round_ps(f, NEAREST); KEEP(f);
#define V2_scalef(f, i) f = _mm256_mul_ps(f, _mm256_castsi256_ps(i)); KEEP(f);
#define V2_div(f, i) f = _mm256_div_ps(f, m); KEEP(f);
#define V2_rcp14(f, i) f = _mm256_rcp_ps(f); KEEP(f);
#define V2_permps(f, i) f = _mm256_permutevar8x32_ps(f, i); KEEP(f);
#define V2_paddd(f, i) i = _mm256_add_epi32(i, pb); KEEP(i);

#define V2_FN(NAME) FN(V2, T256, NAME)

/* scalef on AVX2 has no instruction: the row stands for the multiply by 2^n the exp does there;
 * rcp14 is rcpps. */
#define OPS(X)                                                                                    \
    X(fma) X(mul) X(add) X(max) X(cvtdq2ps) X(cvtps2dq) X(roundscale) X(scalef) X(div) X(rcp14)   \
    X(permps) X(paddd)
OPS(V5_FN)
OPS(V2_FN)

typedef double (*run_fn)(int, int);

static double best(run_fn f, int with_prod, int with_x) {
    double b = 1e30;
    for (int r = 0; r < 5; r++) {
        double t = f(with_prod, with_x);
        if (t < b) b = t;
    }
    return b;
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atol(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_ports [--iters N]\n");
            return 2;
        }
    }
    if (iters < 1000) iters = 1000;
    __builtin_cpu_init();
    /* BERT8_MAX_ISA=avx2: the AVX2 kernels' product, as the library's cap picks them */
    const char *cap = getenv("BERT8_MAX_ISA");
    const int capped = cap && !strcmp(cap, "avx2");
    const int vnni = !capped && __builtin_cpu_supports("avx512vnni") &&
                     __builtin_cpu_supports("avx512bw") &&
                     __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    const int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (!vnni && !avx2) {
        fprintf(stderr, "bench_ports: this CPU has neither AVX512-VNNI nor AVX2 with FMA\n");
        return 1;
    }
    const char *names[] = {"fma", "mul", "add", "max", "cvtdq2ps", "cvtps2dq", "roundscale",
                           "scalef", "div", "rcp14", "permps", "paddd"};
#define FN5(X) V5_##X##_run,
#define FN2(X) V2_##X##_run,
    const run_fn f5[] = {OPS(FN5)};
    const run_fn f2[] = {OPS(FN2)};
    const run_fn *fs = vnni ? f5 : f2;
    const int n = (int)(sizeof names / sizeof names[0]);
    const double per = 1e9 / (double)iters;
    const double prod = best(fs[0], 1, 0) * per;
    printf("bench_ports: %s, 12 independent products per step: %.2f ns per step (%.3f ns each)\n",
           vnni ? "vpdpbusd zmm (AVX512-VNNI)" : "vpmaddwd + vpaddd ymm (AVX2)", prod, prod / 12);
    printf("%-11s %14s %16s %18s\n", "X (x8)", "alone ns/X", "with products +ns/X",
           "share of its time");
    for (int i = 0; i < n; i++) {
        const double alone = best(fs[i], 0, 1) * per / 8, mix = best(fs[i], 1, 1) * per;
        const double added = (mix - prod) / 8;
        printf("%-11s %14.3f %16.3f %17.0f%%\n", names[i], alone, added, 100.0 * added / alone);
    }
    printf("(alone: 8 independent chains, so a long-latency X shows its latency / 8 at most;\n"
           " share: 100%% = X runs on the products' pipes, 0%% = hidden behind them)\n");
    return 0;
}
