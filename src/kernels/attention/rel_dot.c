/* rel_dot.c: disentangled attention's products (rel_dot.h says in what order), AVX-512, AVX2 and
 * the scalar twin. The SIMD kernels hold a tile of 4 rows x 4 (AVX-512) or 3 (AVX2) vectors of
 * outputs in registers; per k they load the vectors of b's row k once and broadcast each row's
 * a[i][k] into them. The last vector of a tile is masked, so no edge code runs another order. */
#include "kernels/attention/rel_dot.h"

#include <immintrin.h>
#include <math.h>

#include "kernels/dispatch.h"

#define AVX2 __attribute__((target("avx2,fma")))
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define INLINE static inline __attribute__((always_inline))

void b8_rel_dot__scalar(const float *a, int64_t lda, int64_t m, const float *b, int64_t ldb, int64_t k, int64_t n,
                        float *c, int64_t ldc) {
    for (int64_t i = 0; i < m; i++) {
        float *ci = c + i * ldc;
        for (int64_t j = 0; j < n; j++) ci[j] = 0.0f;
        /* k outside j: each output still takes its multiply-adds in k order */
        for (int64_t t = 0; t < k; t++) {
            const float at = a[i * lda + t];
            const float *bt = b + t * ldb;
            for (int64_t j = 0; j < n; j++) ci[j] = fmaf(at, bt[j], ci[j]);
        }
    }
}

/* R rows x V vectors of 16 (constants after inlining); the last vector takes the lanes of `last`. */
INLINE AVX512 void tile512(const int R, const int V, const float *a, int64_t lda, const float *b, int64_t ldb,
                           int64_t k, float *c, int64_t ldc, __mmask16 last) {
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int v = 0; v < V; v++) acc[r][v] = _mm512_setzero_ps();
    for (int64_t t = 0; t < k; t++) {
        const float *bt = b + t * ldb;
        __m512 bv[4];
#pragma GCC unroll 4
        for (int v = 0; v < V; v++)
            bv[v] = v == V - 1 ? _mm512_maskz_loadu_ps(last, bt + 16 * v) : _mm512_loadu_ps(bt + 16 * v);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const __m512 av = _mm512_set1_ps(a[r * lda + t]);
#pragma GCC unroll 4
            for (int v = 0; v < V; v++) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int v = 0; v < V; v++) {
            if (v == V - 1) _mm512_mask_storeu_ps(c + r * ldc + 16 * v, last, acc[r][v]);
            else _mm512_storeu_ps(c + r * ldc + 16 * v, acc[r][v]);
        }
}

/* The R of a row block picks its tile (V vectors). */
#define TILE_ROWS(fn, V, ...)                                                                                       \
    switch (R) {                                                                                                    \
    case 4: fn(4, V, __VA_ARGS__); break;                                                                           \
    case 3: fn(3, V, __VA_ARGS__); break;                                                                           \
    case 2: fn(2, V, __VA_ARGS__); break;                                                                           \
    default: fn(1, V, __VA_ARGS__); break;                                                                          \
    }

AVX512 void b8_rel_dot_4x64__avx512(const float *a, int64_t lda, int64_t m, const float *b, int64_t ldb, int64_t k,
                                    int64_t n, float *c, int64_t ldc) {
    for (int64_t j = 0; j < n; j += 64) {
        const int64_t cols = n - j >= 64 ? 64 : n - j;
        const int V = (int)((cols + 15) / 16), tail = (int)(cols - 16 * (V - 1));
        const __mmask16 last = (__mmask16)(tail == 16 ? 0xFFFFu : (1u << tail) - 1u);
        for (int64_t i = 0; i < m; i += 4) {
            const int R = m - i >= 4 ? 4 : (int)(m - i);
            const float *ai = a + i * lda, *bj = b + j;
            float *cij = c + i * ldc + j;
            switch (V) {
            case 4: TILE_ROWS(tile512, 4, ai, lda, bj, ldb, k, cij, ldc, last) break;
            case 3: TILE_ROWS(tile512, 3, ai, lda, bj, ldb, k, cij, ldc, last) break;
            case 2: TILE_ROWS(tile512, 2, ai, lda, bj, ldb, k, cij, ldc, last) break;
            default: TILE_ROWS(tile512, 1, ai, lda, bj, ldb, k, cij, ldc, last) break;
            }
        }
    }
}

/* R rows x V vectors of 8; the last vector takes the lanes of `last` (maskload, maskstore). */
INLINE AVX2 void tile256(const int R, const int V, const float *a, int64_t lda, const float *b, int64_t ldb,
                         int64_t k, float *c, int64_t ldc, __m256i last) {
    __m256 acc[4][3];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 3
        for (int v = 0; v < V; v++) acc[r][v] = _mm256_setzero_ps();
    for (int64_t t = 0; t < k; t++) {
        const float *bt = b + t * ldb;
        __m256 bv[3];
#pragma GCC unroll 3
        for (int v = 0; v < V; v++)
            bv[v] = v == V - 1 ? _mm256_maskload_ps(bt + 8 * v, last) : _mm256_loadu_ps(bt + 8 * v);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const __m256 av = _mm256_broadcast_ss(a + r * lda + t);
#pragma GCC unroll 3
            for (int v = 0; v < V; v++) acc[r][v] = _mm256_fmadd_ps(av, bv[v], acc[r][v]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 3
        for (int v = 0; v < V; v++) {
            if (v == V - 1) _mm256_maskstore_ps(c + r * ldc + 8 * v, last, acc[r][v]);
            else _mm256_storeu_ps(c + r * ldc + 8 * v, acc[r][v]);
        }
}

AVX2 void b8_rel_dot_4x24__avx2(const float *a, int64_t lda, int64_t m, const float *b, int64_t ldb, int64_t k,
                                int64_t n, float *c, int64_t ldc) {
    for (int64_t j = 0; j < n; j += 24) {
        const int64_t cols = n - j >= 24 ? 24 : n - j;
        const int V = (int)((cols + 7) / 8), tail = (int)(cols - 8 * (V - 1));
        const __m256i last = _mm256_cmpgt_epi32(_mm256_set1_epi32(tail), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        for (int64_t i = 0; i < m; i += 4) {
            const int R = m - i >= 4 ? 4 : (int)(m - i);
            const float *ai = a + i * lda, *bj = b + j;
            float *cij = c + i * ldc + j;
            switch (V) {
            case 3: TILE_ROWS(tile256, 3, ai, lda, bj, ldb, k, cij, ldc, last) break;
            case 2: TILE_ROWS(tile256, 2, ai, lda, bj, ldb, k, cij, ldc, last) break;
            default: TILE_ROWS(tile256, 1, ai, lda, bj, ldb, k, cij, ldc, last) break;
            }
        }
    }
}

static const b8_impl rel_dot_impls[] = {
    {"rel_dot_4x64__avx512", B8_ISA_AVX512, (b8_fnptr)b8_rel_dot_4x64__avx512},
    {"rel_dot_4x24__avx2", B8_ISA_AVX2, (b8_fnptr)b8_rel_dot_4x24__avx2},
    {"rel_dot__scalar", B8_ISA_SCALAR, (b8_fnptr)b8_rel_dot__scalar},
};
b8_op_table b8_op_rel_dot = {"rel_dot", rel_dot_impls, (int)(sizeof rel_dot_impls / sizeof *rel_dot_impls), -1};

b8_rel_dot_fn b8_rel_dot_best(void) { return (b8_rel_dot_fn)b8_dispatch(&b8_op_rel_dot)->fn; }
