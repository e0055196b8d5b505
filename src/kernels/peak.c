/* peak.c: the machine's ceilings for a roofline: the FP32 FMA rate, the INT8 dot-product rate
 * (vpdpbusd) and the memory read bandwidth, measured with short loops on the OpenMP pool. The
 * loops run many independent accumulator chains, so they measure throughput, not latency; the
 * chain loop is unrolled so that the accumulators live in registers (rolled, -O2 kept them on
 * the stack and measured a load, the operation and a store: half the VNNI rate). */
#include <immintrin.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "base/cpu.h"

#define CHAINS 12

__attribute__((target("avx512f"))) static double fma_avx512(int64_t iters) {
    __m512 acc[CHAINS], a = _mm512_set1_ps(1.0000001f), b = _mm512_set1_ps(0.9999999f);
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_set1_ps((float)i);
    for (int64_t it = 0; it < iters; it++)
#pragma GCC unroll 16
        for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
    __m512 s = acc[0];
    for (int i = 1; i < CHAINS; i++) s = _mm512_add_ps(s, acc[i]);
    float out[16];
    _mm512_storeu_ps(out, s);
    return out[0]; /* keeps the loop alive */
}

__attribute__((target("avx2,fma"))) static double fma_avx2(int64_t iters) {
    __m256 acc[CHAINS], a = _mm256_set1_ps(1.0000001f), b = _mm256_set1_ps(0.9999999f);
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm256_set1_ps((float)i);
    for (int64_t it = 0; it < iters; it++)
#pragma GCC unroll 16
        for (int i = 0; i < CHAINS; i++) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
    __m256 s = acc[0];
    for (int i = 1; i < CHAINS; i++) s = _mm256_add_ps(s, acc[i]);
    float out[8];
    _mm256_storeu_ps(out, s);
    return out[0];
}

__attribute__((target("avx512f,avx512vnni"))) static double vnni_avx512(int64_t iters) {
    __m512i acc[CHAINS], a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_set1_epi32(i);
    for (int64_t it = 0; it < iters; it++)
#pragma GCC unroll 16
        for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
    __m512i s = acc[0];
    for (int i = 1; i < CHAINS; i++) s = _mm512_add_epi32(s, acc[i]);
    int32_t out[16];
    _mm512_storeu_si512(out, s);
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
    if (b8_cpu_allows(B8_ISA_AVX512_VNNI)) out->int8_gops = rate(vnni_avx512, 128, threads) / 1e9;
    out->mem_gbps = mem_read(threads) / 1e9;
    return BERT8_OK;
}
