/* qgemm_avx2.c: the AVX2 INT8 GEMM for CPUs without AVX-512: qs8_gemm_<R>x16c2__avx2.
 *
 * Why int16 and vpmaddwd rather than vpmaddubsw: vpmaddubsw adds two u8 x s8 products into a
 * saturating int16 (255 * -128 * 2 does not fit), so it is exact only for restricted inputs.
 * Sign-extending both operands to int16 and using vpmaddwd (two products into an int32) is
 * exact for every int8 value, needs no +128 shift or compensation, and costs the same number
 * of multiply-port operations per multiply-add as vpmaddubsw + vpmaddwd (16 per instruction
 * on 256 bits). W stays int8 in memory and is widened on load (vpmovsxbw); A is packed as
 * int16. Twin of the 6x16c2 scalar code in qgemm_scalar.c; bit-identical results. */
#include "kernels/gemm_s8/qgemm_impl.h"

#include <string.h>

#include "kernels/vmath/vmath_avx2.h"

#define MR B8_AVX2_MR
#define NR B8_AVX2_NR
#define NV (NR / 8)

static B8_T256 void pack_a(const int8_t *A, int64_t lda, int rows, int64_t k0, int64_t kc,
                           void *dst) {
    int16_t *d = dst;
    int64_t groups = (kc + 1) / 2, g = 0;
    if (rows == MR) {
        /* 16 k of one row widen to 8 int16 pairs; each pair is one dword of the panel. */
        for (; (g + 8) * 2 <= kc; g += 8) {
            for (int r = 0; r < MR; r++) {
                __m256i v = _mm256_cvtepi8_epi16(
                    _mm_loadu_si128((const __m128i *)(A + r * lda + k0 + g * 2)));
                int32_t pairs[8];
                _mm256_storeu_si256((__m256i *)pairs, v);
                for (int t = 0; t < 8; t++) memcpy(d + ((g + t) * MR + r) * 2, &pairs[t], 4);
            }
        }
    }
    for (; g < groups; g++)
        for (int r = 0; r < MR; r++)
            for (int q = 0; q < 2; q++) {
                int64_t k = g * 2 + q;
                d[(g * MR + r) * 2 + q] = (r < rows && k < kc) ? A[r * lda + k0 + k] : 0;
            }
}

static inline __attribute__((always_inline)) B8_T256 void
ukr_body(const int rows, size_t kg, const int16_t *a, const int8_t *w, int32_t *c, size_t ldc,
         int accumulate) {
    __m256i acc[MR][NV];
#pragma GCC unroll 8
    for (int i = 0; i < rows; i++)
#pragma GCC unroll 4
        for (int j = 0; j < NV; j++)
            acc[i][j] = accumulate ? _mm256_loadu_si256((const __m256i *)(c + i * ldc + 8 * j))
                                   : _mm256_setzero_si256();
    for (size_t g = 0; g < kg; g++) {
        __m256i b[NV];
#pragma GCC unroll 4
        for (int j = 0; j < NV; j++)
            b[j] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w + 16 * j)));
#pragma GCC unroll 8
        for (int i = 0; i < rows; i++) {
            int32_t a2;
            memcpy(&a2, a + 2 * i, 4);
            __m256i av = _mm256_set1_epi32(a2);
#pragma GCC unroll 4
            for (int j = 0; j < NV; j++)
                acc[i][j] = _mm256_add_epi32(acc[i][j], _mm256_madd_epi16(av, b[j]));
        }
        a += 2 * MR;
        w += 2 * NR;
    }
#pragma GCC unroll 8
    for (int i = 0; i < rows; i++)
#pragma GCC unroll 4
        for (int j = 0; j < NV; j++)
            _mm256_storeu_si256((__m256i *)(c + i * ldc + 8 * j), acc[i][j]);
}

#define UKR(R)                                                                                 \
    static B8_T256 void qs8_gemm_##R##x16c2__avx2(size_t kg, const void *a, const int8_t *w,  \
                                                  int32_t *c, size_t ldc, int accumulate) {   \
        ukr_body(R, kg, a, w, c, ldc, accumulate);                                             \
    }
UKR(1)
UKR(2)
UKR(3)
UKR(4)
UKR(5)
UKR(6)

static inline B8_T256 __m256i cols_mask(int cols, int j) {
    int left = cols - 8 * j;
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(left), lane);
}

/* Same operation order as b8_qepilogue__scalar. */
static B8_T256 void epilogue(const int32_t *acc, size_t ld_acc, int rows, int cols, int64_t m0,
                             int64_t n0, const int32_t *comp, const float *w_scale,
                             const b8_qepilogue *ep) {
    __m256i mk[NV], cv[NV];
    __m256 ws[NV], bias[NV], omul[NV];
    int live[NV];
    for (int j = 0; j < NV; j++) {
        mk[j] = cols_mask(cols, j);
        live[j] = cols > 8 * j;
        cv[j] = comp ? _mm256_loadu_si256((const __m256i *)(comp + n0 + 8 * j))
                     : _mm256_setzero_si256();
        ws[j] = _mm256_loadu_ps(w_scale + n0 + 8 * j);
        bias[j] = ep->bias ? _mm256_maskload_ps(ep->bias + n0 + 8 * j, mk[j]) : _mm256_setzero_ps();
        omul[j] = ep->out_s8 ? _mm256_maskload_ps(ep->out_mul + n0 + 8 * j, mk[j])
                             : _mm256_setzero_ps();
    }
    for (int i = 0; i < rows; i++) {
        int64_t m = m0 + i;
        __m256 as = _mm256_set1_ps(ep->a_scale[ep->a_scale_per_row ? m : 0]);
        for (int j = 0; j < NV; j++) {
            if (!live[j]) continue;
            int64_t n = n0 + 8 * j;
            __m256i v = _mm256_sub_epi32(
                _mm256_loadu_si256((const __m256i *)(acc + i * ld_acc + 8 * j)), cv[j]);
            __m256 s = _mm256_mul_ps(as, ws[j]);
            __m256 y = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(v), bias[j]);
            switch (ep->act) {
            case B8_ACT_GELU: y = b8_v8_gelu(y); break;
            case B8_ACT_GELU_TANH: y = b8_v8_gelu_tanh(y); break;
            case B8_ACT_RELU: y = b8_v8_relu(y); break;
            default: break; /* NONE (b8_qgemm refuses the others) */
            }
            if (ep->residual)
                y = _mm256_add_ps(y, _mm256_maskload_ps(ep->residual + m * ep->ld_res + n, mk[j]));
            if (ep->out_f32) {
                _mm256_maskstore_ps(ep->out_f32 + m * ep->ldc + n, mk[j], y);
            } else {
                __m256 q = _mm256_mul_ps(y, omul[j]);
                q = _mm256_min_ps(_mm256_max_ps(q, _mm256_set1_ps(-B8_Q_MAX)),
                                  _mm256_set1_ps(B8_Q_MAX));
                int32_t qi[8];
                _mm256_storeu_si256((__m256i *)qi, _mm256_cvtps_epi32(q));
                int left = cols - 8 * j < 8 ? cols - 8 * j : 8;
                for (int t = 0; t < left; t++) ep->out_s8[m * ep->ldc + n + t] = (int8_t)qi[t];
            }
        }
    }
}

static b8_qepilogue_fn pick_epilogue(const b8_qepilogue *ep) {
    (void)ep;
    return epilogue;
}

static B8_T256 void store_s32(const int32_t *acc, size_t ld_acc, int rows, int cols,
                              const int32_t *comp, int32_t *C, int64_t ldc) {
    for (int j = 0; j < NV; j++) {
        if (cols <= 8 * j) continue;
        __m256i mk = cols_mask(cols, j);
        __m256i cv = comp ? _mm256_loadu_si256((const __m256i *)(comp + 8 * j))
                          : _mm256_setzero_si256();
        for (int i = 0; i < rows; i++)
            _mm256_maskstore_epi32(
                C + i * ldc + 8 * j, mk,
                _mm256_sub_epi32(_mm256_loadu_si256((const __m256i *)(acc + i * ld_acc + 8 * j)),
                                 cv));
    }
}

const b8_qblis b8_qblis_6x16c2__avx2 = {
    .mr = MR,
    .nr = NR,
    .kq = 2,
    .a_bytes = 2,
    .shift128 = 0,
    .pack_a = pack_a,
    .ukr = {NULL, qs8_gemm_1x16c2__avx2, qs8_gemm_2x16c2__avx2, qs8_gemm_3x16c2__avx2,
            qs8_gemm_4x16c2__avx2, qs8_gemm_5x16c2__avx2, qs8_gemm_6x16c2__avx2},
    .pick_epilogue = pick_epilogue,
    .store_s32 = store_s32,
};
