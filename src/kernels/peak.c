/* peak.c: the machine's ceilings for a roofline: the FP32 FMA rate, the INT8 dot-product rates
 * (vpdpbusd, AMX tdpbssd where the CPU and BERT8_MAX_ISA allow it, vpmaddwd on AVX2 without VNNI) and the memory read
 * bandwidth, measured with short loops on the OpenMP pool. The
 * loops run many independent accumulator chains, so they measure throughput, not latency. */
#include <immintrin.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "base/cpu.h"
#include "kernels/amx.h"

#define CHAINS 12

/* The chain loops are written in assembly: from C with an accumulator array, GCC 12 copied every
 * accumulator to another register on each iteration (two moves per operation). Zen 4 eliminates
 * such moves; Ice Lake does not, and they halved the measured rate there (466 against 690 GOP/s
 * per core for vpdpbusd). Twelve independent chains cover the latency of two pipes. */
#define B8_CHAIN12(OP)                                                                      \
    OP " %[x], %[y], %[a0]\n\t" OP " %[x], %[y], %[a1]\n\t" OP " %[x], %[y], %[a2]\n\t"          \
    OP " %[x], %[y], %[a3]\n\t" OP " %[x], %[y], %[a4]\n\t" OP " %[x], %[y], %[a5]\n\t"          \
    OP " %[x], %[y], %[a6]\n\t" OP " %[x], %[y], %[a7]\n\t" OP " %[x], %[y], %[a8]\n\t"          \
    OP " %[x], %[y], %[a9]\n\t" OP " %[x], %[y], %[a10]\n\t" OP " %[x], %[y], %[a11]"
#define B8_CHAIN_OPERANDS                                                                      \
    : [a0] "+v"(a0), [a1] "+v"(a1), [a2] "+v"(a2), [a3] "+v"(a3), [a4] "+v"(a4), [a5] "+v"(a5), \
      [a6] "+v"(a6), [a7] "+v"(a7), [a8] "+v"(a8), [a9] "+v"(a9), [a10] "+v"(a10),            \
      [a11] "+v"(a11)                                                                          \
    : [x] "v"(x), [y] "v"(y)

__attribute__((target("avx512f"), noinline)) static double fma_avx512(int64_t iters) {
    __m512 a0 = _mm512_set1_ps(0.5f), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
           a7 = a0, a8 = a0, a9 = a0, a10 = a0, a11 = a0;
    __m512 x = _mm512_set1_ps(1.0000001f), y = _mm512_set1_ps(0.9999999f);
    for (int64_t it = 0; it < iters; it++)
        __asm__ volatile(B8_CHAIN12("vfmadd231ps") B8_CHAIN_OPERANDS);
    __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                             _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
    s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
    return _mm512_reduce_add_ps(s); /* keeps the loop alive */
}

__attribute__((target("avx2,fma"), noinline)) static double fma_avx2(int64_t iters) {
    __m256 a0 = _mm256_set1_ps(0.5f), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
           a7 = a0, a8 = a0, a9 = a0, a10 = a0, a11 = a0;
    __m256 x = _mm256_set1_ps(1.0000001f), y = _mm256_set1_ps(0.9999999f);
    for (int64_t it = 0; it < iters; it++)
        __asm__ volatile(B8_CHAIN12("vfmadd231ps") B8_CHAIN_OPERANDS);
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                             _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
    s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11)));
    float out[8];
    _mm256_storeu_ps(out, s);
    return out[0];
}

__attribute__((target("avx512f,avx512vnni"), noinline)) static double vnni_avx512(int64_t iters) {
    __m512i a0 = _mm512_set1_epi32(1), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
            a7 = a0, a8 = a0, a9 = a0, a10 = a0, a11 = a0;
    __m512i x = _mm512_set1_epi8(3), y = _mm512_set1_epi8(-2);
    for (int64_t it = 0; it < iters; it++)
        __asm__ volatile(B8_CHAIN12("vpdpbusd") B8_CHAIN_OPERANDS);
    __m512i s = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a0, a1), a2),
                                 _mm512_add_epi32(_mm512_add_epi32(a3, a4), a5));
    s = _mm512_add_epi32(s, _mm512_add_epi32(_mm512_add_epi32(a6, a7), a8));
    s = _mm512_add_epi32(s, _mm512_add_epi32(_mm512_add_epi32(a9, a10), a11));
    return _mm512_reduce_add_epi32(s);
}

/* AVX2 without VNNI: the INT8 kernels multiply on vpmaddwd (int16 pairs into int32), so that is
 * their ceiling. Each instruction here is independent of the last (a0 = x * y pairs): the rate
 * of the multiply pipes alone, without the vpaddd that accumulates in the kernels. */
__attribute__((target("avx2"), noinline)) static double maddwd_avx2(int64_t iters) {
    __m256i a0 = _mm256_set1_epi32(1), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
            a7 = a0, a8 = a0, a9 = a0, a10 = a0, a11 = a0;
    __m256i x = _mm256_set1_epi16(3), y = _mm256_set1_epi16(-2);
    for (int64_t it = 0; it < iters; it++)
        __asm__ volatile(B8_CHAIN12("vpmaddwd") B8_CHAIN_OPERANDS);
    __m256i s = _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(a0, a1), a2),
                                 _mm256_add_epi32(_mm256_add_epi32(a3, a4), a5));
    s = _mm256_add_epi32(s, _mm256_add_epi32(_mm256_add_epi32(a6, a7), a8));
    s = _mm256_add_epi32(s, _mm256_add_epi32(_mm256_add_epi32(a9, a10), a11));
    int32_t out[8];
    _mm256_storeu_si256((__m256i *)out, s);
    return out[0];
}

/* AMX: twelve tdpbssd per iteration into four accumulator tiles (16 x 16 int32, each product
 * 16 x 16 x 64 multiply-adds), sources tmm4-7 zero; the tile state is released at the end. */
#define B8_TDP4 "tdpbssd %%tmm4, %%tmm5, %%tmm0\n\ttdpbssd %%tmm4, %%tmm6, %%tmm1\n\t" \
                "tdpbssd %%tmm5, %%tmm7, %%tmm2\n\ttdpbssd %%tmm6, %%tmm7, %%tmm3\n\t"

__attribute__((target("amx-tile,amx-int8"), noinline)) static double amx_int8(int64_t iters) {
    b8_amx_tilecfg cfg;
    b8_amx_tilecfg_16x64(&cfg);
    __asm__ volatile("ldtilecfg %0" ::"m"(cfg));
    __asm__ volatile("tilezero %%tmm0\n\ttilezero %%tmm1\n\ttilezero %%tmm2\n\ttilezero %%tmm3\n\t"
                     "tilezero %%tmm4\n\ttilezero %%tmm5\n\ttilezero %%tmm6\n\ttilezero %%tmm7" ::);
    for (int64_t it = 0; it < iters; it++) __asm__ volatile(B8_TDP4 B8_TDP4 B8_TDP4 ::);
    int32_t out[16 * 16];
    __asm__ volatile("tilestored %%tmm0, (%0,%1,1)" ::"r"(out), "r"((long)64) : "memory");
    __asm__ volatile("tilerelease" ::);
    return out[0];
}

/* Rate in operations per second of `per_iter` operations a loop iteration, over `threads`. */
static double rate(double (*loop)(int64_t), double per_iter, int threads) {
    const int64_t iters = 20000000 / CHAINS;
    double best = 0, sink = 0;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = omp_get_wtime();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
        sink += loop(iters);
        double t = omp_get_wtime() - t0;
        double r = per_iter * (double)iters * CHAINS * threads / t;
        if (r > best) best = r;
    }
    return sink == 12345.6789 ? 0 : best;
}

static double mem_read(int threads) {
    const size_t n = (size_t)64 << 20; /* 256 MiB of floats: far past any cache */
    float *buf = b8_malloc_aligned(n * sizeof(float));
    if (!buf) return 0;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (size_t i = 0; i < n; i++) buf[i] = (float)(i & 7);
    double best = 0, sink = 0;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = omp_get_wtime();
#pragma omp parallel for num_threads(threads) schedule(static) reduction(+ : sink)
        for (size_t i = 0; i < n; i += 16) sink += buf[i] + buf[i + 3] + buf[i + 7] + buf[i + 11];
        /* every cache line of the buffer is read */
        double t = omp_get_wtime() - t0;
        double r = (double)(n * sizeof(float)) / t;
        if (r > best) best = r;
    }
    b8_free_aligned(buf);
    return sink < -1 ? 0 : best;
}

bert8_status bert8_measure_peaks(int threads, bert8_peaks *out) {
    if (!out) return BERT8_ERR_INVALID_ARG;
    memset(out, 0, sizeof *out);
    if (threads <= 0) threads = bert8_get_threads();
    out->threads = threads;
    if (b8_cpu_allows(B8_ISA_AVX512)) out->fp32_gflops = rate(fma_avx512, 32, threads) / 1e9;
    else if (b8_cpu_allows(B8_ISA_AVX2)) out->fp32_gflops = rate(fma_avx2, 16, threads) / 1e9;
    /* one vpdpbusd: 16 lanes x 4 u8 x s8 products, each a multiply and an add */
    if (b8_cpu_allows(B8_ISA_AVX512_VNNI))
        out->int8_vnni_gops = rate(vnni_avx512, 128, threads) / 1e9;
    /* one tdpbssd: 16 x 16 x 64 products */
    if (b8_cpu_allows(B8_ISA_AMX)) out->int8_amx_gops = rate(amx_int8, 32768, threads) / 1e9;
    /* one vpmaddwd: 8 lanes x 2 int16 products */
    if (!b8_cpu_allows(B8_ISA_AVX512_VNNI) && b8_cpu_allows(B8_ISA_AVX2))
        out->int8_avx2_gops = rate(maddwd_avx2, 32, threads) / 1e9;
    out->int8_gops = out->int8_amx_gops > 0    ? out->int8_amx_gops
                     : out->int8_vnni_gops > 0 ? out->int8_vnni_gops
                                               : out->int8_avx2_gops;
    out->mem_gbps = mem_read(threads) / 1e9;
    return BERT8_OK;
}
