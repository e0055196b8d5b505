/* qgemm_avx2.c: the AVX2 INT8 GEMMs for CPUs without AVX-512: qs8_gemm_<R>x16c2__avx2 for
 * any int8 weights, and qs8_gemm_<R>x24c4__avx2 for weights within +-64 (7-bit weights).
 *
 * Why int16 and vpmaddwd rather than vpmaddubsw: vpmaddubsw adds two u8 x s8 products into a
 * saturating int16 (255 * -128 * 2 does not fit), so it is exact only for restricted inputs.
 * Sign-extending both operands to int16 and using vpmaddwd (two products into an int32) is
 * exact for every int8 value, needs no +128 shift or compensation, and costs the same number
 * of multiply-port operations per multiply-add as vpmaddubsw + vpmaddwd (16 per instruction
 * on 256 bits). W stays int8 in memory and is widened on load (vpmovsxbw); A is packed as
 * int16. Twin of the 6x16c2 scalar code in qgemm_scalar.c; bit-identical results.
 *
 * The c4 kernel is the exception that makes vpmaddubsw exact: with A fed as u8 (A + 128, as
 * the VNNI kernel does) and every weight in [-64, 64], a pair |a0 w0 + a1 w1| <= 255 * 64 * 2
 * = 32640 fits int16, so vpmaddubsw never saturates, and vpmaddwd by ones sums the pairs into
 * int32: exactly vpdpbusd's result. Three instructions per 32 multiply-adds instead of four,
 * and a broadcast carries 4 k instead of 2 (on AMD Zen 3 the int32 adds compete with the
 * multiplies for the vector pipes, so the op count is the speed). b8_qweight_pack gives it
 * only weights within the range (a model quantized with weight_bits = 7). Twin of the
 * 4x24c4 scalar code. */
#include "kernels/gemm_s8/qgemm_impl.h"

#include <string.h>

#include "kernels/vmath/vmath_avx2.h"

#define MR B8_AVX2_MR
#define NR B8_AVX2_NR
#define NV (NR / 8)
#define MR4 B8_AVX2_C4_MR
#define NR4 B8_AVX2_C4_NR
#define NV4 (NR4 / 8)
#define NVMAX (NV > NV4 ? NV : NV4)

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

/* Same operation order as b8_qepilogue__scalar. act, to_s8 (no fp32 output) and add_res (a
 * residual) are constants in each variant below, as in the VNNI kernel: one body testing them per
 * vector ran at 16% of all-MiniLM-L6-v2's samples on AVX2 (8 x 128). */
static inline __attribute__((always_inline)) B8_T256 void
epilogue_body(const int nv, const int32_t *acc, size_t ld_acc, int rows, int cols, int64_t m0,
              int64_t n0, const int32_t *comp, const float *w_scale, const b8_qepilogue *ep,
              const b8_act act, const int to_s8, const int add_res) {
    /* Per-column values staged in aligned local arrays and re-read per row: three 8-column
     * vectors of five arrays would not stay in 16 registers beside GELU's constants. */
    __m256i mk[NVMAX];
    int32_t cvb[NVMAX * 8] __attribute__((aligned(32)));
    float wsb[NVMAX * 8] __attribute__((aligned(32))), biasb[NVMAX * 8] __attribute__((aligned(32))),
        omulb[NVMAX * 8] __attribute__((aligned(32)));
    int live[NVMAX];
    for (int j = 0; j < nv; j++) {
        mk[j] = cols_mask(cols, j);
        live[j] = cols > 8 * j;
        _mm256_store_si256((__m256i *)(cvb + 8 * j),
                           comp ? _mm256_loadu_si256((const __m256i *)(comp + n0 + 8 * j))
                                : _mm256_setzero_si256());
        _mm256_store_ps(wsb + 8 * j, _mm256_loadu_ps(w_scale + n0 + 8 * j));
        _mm256_store_ps(biasb + 8 * j, ep->bias ? _mm256_maskload_ps(ep->bias + n0 + 8 * j, mk[j])
                                                : _mm256_setzero_ps());
        _mm256_store_ps(omulb + 8 * j, ep->out_s8
                                           ? _mm256_maskload_ps(ep->out_mul + n0 + 8 * j, mk[j])
                                           : _mm256_setzero_ps());
    }
    for (int i = 0; i < rows; i++) {
        int64_t m = m0 + i;
        __m256 as = _mm256_set1_ps(ep->a_scale[ep->a_scale_per_row ? m : 0]);
        for (int j = 0; j < nv; j++) {
            if (!live[j]) continue;
            int64_t n = n0 + 8 * j;
            __m256i v = _mm256_sub_epi32(
                _mm256_loadu_si256((const __m256i *)(acc + i * ld_acc + 8 * j)),
                _mm256_load_si256((const __m256i *)(cvb + 8 * j)));
            __m256 s = _mm256_mul_ps(as, _mm256_load_ps(wsb + 8 * j));
            __m256 t = _mm256_load_ps(biasb + 8 * j);
            for (int o = 0; o < ep->outliers; o++)
                t = _mm256_fmadd_ps(_mm256_set1_ps(ep->ox[m * ep->ld_ox + o]),
                                    _mm256_maskload_ps(ep->ow + o * ep->ld_ow + n, mk[j]), t);
            __m256 y = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(v), t);
            if (act == B8_ACT_GELU) y = b8_v8_gelu(y);
            else if (act == B8_ACT_GELU_TANH) y = b8_v8_gelu_tanh(y);
            else if (act == B8_ACT_RELU) y = b8_v8_relu(y);
            if (add_res)
                y = _mm256_add_ps(y, _mm256_maskload_ps(ep->residual + m * ep->ld_res + n, mk[j]));
            if (!to_s8) {
                _mm256_maskstore_ps(ep->out_f32 + m * ep->ldc + n, mk[j], y);
            } else {
                __m256 q = _mm256_fmadd_ps(y, _mm256_load_ps(omulb + 8 * j), _mm256_set1_ps(ep->out_zp));
                q = _mm256_min_ps(_mm256_max_ps(q, _mm256_set1_ps(-B8_Q_MAX)),
                                  _mm256_set1_ps(B8_Q_MAX));
                /* q is within +-127: the saturating packs only narrow it */
                __m256i qi = _mm256_cvtps_epi32(q);
                qi = _mm256_packs_epi16(_mm256_packs_epi32(qi, qi), qi);
                uint64_t b8 = (uint64_t)_mm_cvtsi128_si64(_mm_unpacklo_epi32(
                    _mm256_castsi256_si128(qi), _mm256_extracti128_si256(qi, 1)));
                int8_t *o = ep->out_s8 + m * ep->ldc + n;
                int left = cols - 8 * j;
                if (left >= 8) memcpy(o, &b8, 8);
                else
                    for (int t = 0; t < left; t++) o[t] = (int8_t)(b8 >> (8 * t));
            }
        }
    }
}

#define EPI_VARIANT(NAME, NVC, ACT, S8, RES)                                                    \
    static B8_T256 void NAME(const int32_t *acc, size_t ld_acc, int rows, int cols, int64_t m0, \
                             int64_t n0, const int32_t *comp, const float *w_scale,           \
                             const b8_qepilogue *ep) {                                        \
        epilogue_body(NVC, acc, ld_acc, rows, cols, m0, n0, comp, w_scale, ep, ACT, S8, RES);  \
    }
#define EPI_ACT(K, NVC, A, ACT)                                                                \
    EPI_VARIANT(qs8_gemm_##K##__avx2_##A##_f32, NVC, ACT, 0, 0)                                \
    EPI_VARIANT(qs8_gemm_##K##__avx2_##A##_f32_res, NVC, ACT, 0, 1)                            \
    EPI_VARIANT(qs8_gemm_##K##__avx2_##A##_s8, NVC, ACT, 1, 0)                                 \
    EPI_VARIANT(qs8_gemm_##K##__avx2_##A##_s8_res, NVC, ACT, 1, 1)
#define EPI_KERNEL(K, NVC)                                                                     \
    EPI_ACT(K, NVC, none, B8_ACT_NONE)                                                         \
    EPI_ACT(K, NVC, gelu, B8_ACT_GELU)                                                         \
    EPI_ACT(K, NVC, gelu_tanh, B8_ACT_GELU_TANH)                                               \
    EPI_ACT(K, NVC, relu, B8_ACT_RELU)
EPI_KERNEL(6x16c2, NV)
EPI_KERNEL(4x24c4, NV4)

#define EPI_ROW(K, A)                                                                          \
    {{qs8_gemm_##K##__avx2_##A##_f32, qs8_gemm_##K##__avx2_##A##_f32_res},                     \
     {qs8_gemm_##K##__avx2_##A##_s8, qs8_gemm_##K##__avx2_##A##_s8_res}}
/* [act][s8][residual] */
static const b8_qepilogue_fn epilogues[4][2][2] = {EPI_ROW(6x16c2, none), EPI_ROW(6x16c2, gelu),
                                                   EPI_ROW(6x16c2, gelu_tanh), EPI_ROW(6x16c2, relu)};
static const b8_qepilogue_fn epilogues_c4[4][2][2] = {EPI_ROW(4x24c4, none), EPI_ROW(4x24c4, gelu),
                                                      EPI_ROW(4x24c4, gelu_tanh), EPI_ROW(4x24c4, relu)};
#undef EPI_ROW
#undef EPI_KERNEL
#undef EPI_ACT
#undef EPI_VARIANT

/* b8_qgemm refuses activations past RELU; an fp32 output wins over an int8 one, as before */
static b8_qepilogue_fn pick_epilogue(const b8_qepilogue *ep) {
    return epilogues[ep->act][ep->out_f32 == NULL][ep->residual != NULL];
}

static b8_qepilogue_fn pick_epilogue_c4(const b8_qepilogue *ep) {
    return epilogues_c4[ep->act][ep->out_f32 == NULL][ep->residual != NULL];
}

static inline __attribute__((always_inline)) B8_T256 void
store_body(const int nv, const int32_t *acc, size_t ld_acc, int rows, int cols,
           const int32_t *comp, int32_t *C, int64_t ldc) {
    for (int j = 0; j < nv; j++) {
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

static B8_T256 void store_s32(const int32_t *acc, size_t ld_acc, int rows, int cols,
                              const int32_t *comp, int32_t *C, int64_t ldc) {
    store_body(NV, acc, ld_acc, rows, cols, comp, C, ldc);
}

static B8_T256 void store_s32_c4(const int32_t *acc, size_t ld_acc, int rows, int cols,
                                 const int32_t *comp, int32_t *C, int64_t ldc) {
    store_body(NV4, acc, ld_acc, rows, cols, comp, C, ldc);
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

/* ---- 4x24c4: u8 A (A + 128) times s8 W in [-64, 64], groups of 4 k ---- */

/* Per group of 4 k, MR4 rows of 4 bytes each; 16 k of the 4 rows are a 4 x 4 transpose of
 * dwords. k beyond kc and rows beyond `rows` hold 0x80 (the u8 that encodes 0). */
static B8_T256 void pack_a_c4(const int8_t *A, int64_t lda, int rows, int64_t k0, int64_t kc,
                              void *dst) {
    uint8_t *d = dst;
    int64_t groups = (kc + 3) / 4, g = 0;
    if (rows == MR4) {
        const __m128i flip = _mm_set1_epi8((char)0x80);
        for (; (g + 4) * 4 <= kc; g += 4) {
            __m128i r0 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(A + k0 + g * 4)), flip);
            __m128i r1 = _mm_xor_si128(
                _mm_loadu_si128((const __m128i *)(A + lda + k0 + g * 4)), flip);
            __m128i r2 = _mm_xor_si128(
                _mm_loadu_si128((const __m128i *)(A + 2 * lda + k0 + g * 4)), flip);
            __m128i r3 = _mm_xor_si128(
                _mm_loadu_si128((const __m128i *)(A + 3 * lda + k0 + g * 4)), flip);
            __m128i t0 = _mm_unpacklo_epi32(r0, r1), t1 = _mm_unpackhi_epi32(r0, r1);
            __m128i t2 = _mm_unpacklo_epi32(r2, r3), t3 = _mm_unpackhi_epi32(r2, r3);
            _mm_storeu_si128((__m128i *)(d + g * 16), _mm_unpacklo_epi64(t0, t2));
            _mm_storeu_si128((__m128i *)(d + g * 16 + 16), _mm_unpackhi_epi64(t0, t2));
            _mm_storeu_si128((__m128i *)(d + g * 16 + 32), _mm_unpacklo_epi64(t1, t3));
            _mm_storeu_si128((__m128i *)(d + g * 16 + 48), _mm_unpackhi_epi64(t1, t3));
        }
    }
    for (; g < groups; g++)
        for (int r = 0; r < MR4; r++)
            for (int q = 0; q < 4; q++) {
                int64_t k = g * 4 + q;
                d[(g * MR4 + r) * 4 + q] =
                    (r < rows && k < kc) ? (uint8_t)A[r * lda + k0 + k] ^ 0x80 : 0x80;
            }
}

static const int16_t ONES16[16] __attribute__((aligned(32))) = {1, 1, 1, 1, 1, 1, 1, 1,
                                                                 1, 1, 1, 1, 1, 1, 1, 1};

static inline __attribute__((always_inline)) B8_T256 void
ukr_c4_body(const int rows, size_t kg, const uint8_t *a, const int8_t *w, int32_t *c, size_t ldc,
            int accumulate) {
    __m256i acc[MR4][NV4];
#pragma GCC unroll 4
    for (int i = 0; i < rows; i++)
#pragma GCC unroll 3
        for (int j = 0; j < NV4; j++)
            acc[i][j] = accumulate ? _mm256_loadu_si256((const __m256i *)(c + i * ldc + 8 * j))
                                   : _mm256_setzero_si256();
    /* ones is read from memory by each vpmaddwd (a load costs no vector pipe; a register for it
     * would leave the 4 x 3 accumulators, 3 weight vectors and the broadcast one short) */
    const __m256i *ones = (const __m256i *)ONES16;
    for (size_t g = 0; g < kg; g++) {
        __m256i b[NV4];
#pragma GCC unroll 3
        for (int j = 0; j < NV4; j++) b[j] = _mm256_loadu_si256((const __m256i *)(w + 32 * j));
#pragma GCC unroll 4
        for (int i = 0; i < rows; i++) {
            int32_t a4;
            memcpy(&a4, a + 4 * i, 4);
            __m256i av = _mm256_set1_epi32(a4);
#pragma GCC unroll 3
            for (int j = 0; j < NV4; j++)
                acc[i][j] = _mm256_add_epi32(
                    acc[i][j], _mm256_madd_epi16(_mm256_maddubs_epi16(av, b[j]),
                                                 _mm256_load_si256(ones)));
        }
        a += 4 * MR4;
        w += 4 * NR4;
    }
#pragma GCC unroll 4
    for (int i = 0; i < rows; i++)
#pragma GCC unroll 3
        for (int j = 0; j < NV4; j++)
            _mm256_storeu_si256((__m256i *)(c + i * ldc + 8 * j), acc[i][j]);
}

#define UKR_C4(R)                                                                              \
    static B8_T256 void qs8_gemm_##R##x24c4__avx2(size_t kg, const void *a, const int8_t *w,  \
                                                  int32_t *c, size_t ldc, int accumulate) {   \
        ukr_c4_body(R, kg, a, w, c, ldc, accumulate);                                          \
    }
UKR_C4(1)
UKR_C4(2)
UKR_C4(3)
UKR_C4(4)

const b8_qblis b8_qblis_4x24c4__avx2 = {
    .mr = MR4,
    .nr = NR4,
    .kq = 4,
    .a_bytes = 1,
    .shift128 = 1,
    .pack_a = pack_a_c4,
    .ukr = {NULL, qs8_gemm_1x24c4__avx2, qs8_gemm_2x24c4__avx2, qs8_gemm_3x24c4__avx2,
            qs8_gemm_4x24c4__avx2},
    .pick_epilogue = pick_epilogue_c4,
    .store_s32 = store_s32_c4,
};
