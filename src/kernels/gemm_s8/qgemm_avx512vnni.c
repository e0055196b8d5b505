/* qgemm_avx512vnni.c: the AVX-512 VNNI INT8 GEMM: qs8_gemm_<R>x32c4__avx512vnni micro-kernels
 * (vpdpbusd, u8 = A + 128 against s8 W, 4 k per int32 lane), the A packer and the fused
 * epilogue. Twin of the 8x32c4 scalar code in qgemm_scalar.c; bit-identical results. */
#include "kernels/gemm_s8/qgemm_impl.h"

#include <string.h>

#include "kernels/vmath/vmath_avx512.h"

#define MR B8_VNNI_MR
#define NR B8_VNNI_NR
#define NV (NR / 16)

/* One micro-panel: per group of 4 k, MR rows x 4 bytes (A ^ 0x80). Full 8-row panels go
 * 16 k at a time: rows 0-3 and 4-7 as two zmm of 4 dwords each, then one vpermt2d per
 * output zmm gathers dword g of every row. */
static B8_T512 void pack_a(const int8_t *A, int64_t lda, int rows, int64_t k0, int64_t kc,
                           void *dst) {
    uint8_t *d = dst;
    int64_t groups = (kc + 3) / 4, g = 0;
    if (rows == MR) {
        const __m512i flip = _mm512_set1_epi8((char)0x80);
        const __m512i idx0 = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17,
                                               21, 25, 29);
        const __m512i idx1 = _mm512_add_epi32(idx0, _mm512_set1_epi32(2));
        for (; (g + 4) * 4 <= kc; g += 4) {
            const int8_t *s = A + k0 + g * 4;
            __m512i x = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)s));
            x = _mm512_inserti32x4(x, _mm_loadu_si128((const __m128i *)(s + lda)), 1);
            x = _mm512_inserti32x4(x, _mm_loadu_si128((const __m128i *)(s + 2 * lda)), 2);
            x = _mm512_inserti32x4(x, _mm_loadu_si128((const __m128i *)(s + 3 * lda)), 3);
            __m512i y = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(s + 4 * lda)));
            y = _mm512_inserti32x4(y, _mm_loadu_si128((const __m128i *)(s + 5 * lda)), 1);
            y = _mm512_inserti32x4(y, _mm_loadu_si128((const __m128i *)(s + 6 * lda)), 2);
            y = _mm512_inserti32x4(y, _mm_loadu_si128((const __m128i *)(s + 7 * lda)), 3);
            x = _mm512_xor_si512(x, flip);
            y = _mm512_xor_si512(y, flip);
            _mm512_storeu_si512(d + g * MR * 4, _mm512_permutex2var_epi32(x, idx0, y));
            _mm512_storeu_si512(d + g * MR * 4 + 64, _mm512_permutex2var_epi32(x, idx1, y));
        }
    }
    for (; g < groups; g++)
        for (int r = 0; r < MR; r++)
            for (int q = 0; q < 4; q++) {
                int64_t k = g * 4 + q;
                uint8_t v = 0x80;
                if (r < rows && k < kc) v = (uint8_t)A[r * lda + k0 + k] ^ 0x80;
                d[(g * MR + r) * 4 + q] = v;
            }
}

/* The tile loop; `rows` is a constant in each instantiation, so the accumulators live in
 * registers (rows x 2 zmm) and the row loops unroll. */
static inline __attribute__((always_inline)) B8_T512 void
ukr_body(const int rows, size_t kg, const uint8_t *a, const int8_t *w, int32_t *c, size_t ldc,
         int accumulate, const int8_t *pf) {
    __m512i acc[MR][NV];
#pragma GCC unroll 8
    for (int i = 0; i < rows; i++)
#pragma GCC unroll 4
        for (int j = 0; j < NV; j++)
            acc[i][j] = accumulate ? _mm512_loadu_si512(c + i * ldc + 16 * j)
                                   : _mm512_setzero_si512();
    for (size_t g = 0; g < kg; g++) {
        if (pf) { /* a constant NULL in the plain kernels: no code */
            _mm_prefetch((const char *)pf + g * 64, _MM_HINT_T1);
        }
        __m512i b[NV];
#pragma GCC unroll 4
        for (int j = 0; j < NV; j++) b[j] = _mm512_loadu_si512(w + 64 * j);
#pragma GCC unroll 8
        for (int i = 0; i < rows; i++) {
            int32_t a4;
            memcpy(&a4, a + 4 * i, 4);
            __m512i av = _mm512_set1_epi32(a4);
#pragma GCC unroll 4
            for (int j = 0; j < NV; j++) acc[i][j] = _mm512_dpbusd_epi32(acc[i][j], av, b[j]);
        }
        a += 4 * MR;
        w += 4 * NR;
    }
#pragma GCC unroll 8
    for (int i = 0; i < rows; i++)
#pragma GCC unroll 4
        for (int j = 0; j < NV; j++) _mm512_storeu_si512(c + i * ldc + 16 * j, acc[i][j]);
}

#define UKR(R)                                                                                 \
    static B8_T512 void qs8_gemm_##R##x32c4__avx512vnni(size_t kg, const void *a,             \
                                                        const int8_t *w, int32_t *c,          \
                                                        size_t ldc, int accumulate) {         \
        ukr_body(R, kg, a, w, c, ldc, accumulate, NULL);                                       \
    }                                                                                          \
    static B8_T512 void qs8_gemm_##R##x32c4__avx512vnni_pf(size_t kg, const void *a,          \
                                                           const int8_t *w, int32_t *c,       \
                                                           size_t ldc, int accumulate,        \
                                                           const int8_t *pf) {                \
        ukr_body(R, kg, a, w, c, ldc, accumulate, pf);                                         \
    }
UKR(1)
UKR(2)
UKR(3)
UKR(4)
UKR(5)
UKR(6)
UKR(7)
UKR(8)

static inline B8_T512 __mmask16 cols_mask(int cols, int j) {
    int left = cols - 16 * j;
    if (left >= 16) return 0xffff;
    if (left <= 0) return 0;
    return (__mmask16)((1u << left) - 1);
}

/* ---- the fused epilogue (same operation order as b8_qepilogue__scalar) ---- */

/* Per-tile constants: column masks, compensation, s = a_scale * w_scale (per tensor: once per
 * tile; per row: recomputed in epi_row, the same product), bias, requantization multipliers. */
typedef struct epi_ctx {
    __mmask16 mk[NV];
    __m512i cv[NV], wsv[NV]; /* wsv: sum_k W[n][k] for per-row zero points (ep->wsum) */
    __m512 ws[NV], s[NV], bias[NV], omul[NV];
} epi_ctx;

static inline __attribute__((always_inline)) B8_T512 void
epi_setup(epi_ctx *x, int cols, int64_t n0, const int32_t *comp, const float *w_scale,
          const b8_qepilogue *ep, const int to_s8) {
    /* per-row scales are read row by row in epi_row: a_scale[0] is then another unit's row, which
     * its thread may be writing (a row operation of the product filling the next input's scales) */
    __m512 as = _mm512_set1_ps(ep->a_scale_per_row ? 0.0f : ep->a_scale[0]);
#pragma GCC unroll 4
    for (int j = 0; j < NV; j++) {
        x->mk[j] = cols_mask(cols, j);
        /* comp and w_scale are padded to the panel width; bias and out_mul are not. */
        x->cv[j] = comp ? _mm512_loadu_si512(comp + n0 + 16 * j) : _mm512_setzero_si512();
        x->wsv[j] = ep->wsum ? _mm512_loadu_si512(ep->wsum + n0 + 16 * j) : _mm512_setzero_si512();
        x->ws[j] = _mm512_loadu_ps(w_scale + n0 + 16 * j);
        x->s[j] = _mm512_mul_ps(as, x->ws[j]);
        x->bias[j] = ep->bias ? _mm512_maskz_loadu_ps(x->mk[j], ep->bias + n0 + 16 * j)
                              : _mm512_setzero_ps();
        x->omul[j] = to_s8 ? _mm512_maskz_loadu_ps(x->mk[j], ep->out_mul + n0 + 16 * j)
                           : _mm512_setzero_ps();
    }
}

/* The outlier channels' fp32 product joined to the bias (b8_qepilogue.outliers) for 8 rows
 * m0.. at once (rows past `rows` repeat the last one): tb[i][j] = bias, then per channel o in
 * order tb = fma(ox[m][o], ow[o][n], tb), as the scalar epilogue does per element. Sixteen
 * independent chains in named registers (one row's dependent FMAs alone would wait on each
 * other, and an array indexed in the loop would live on the stack); tb is written once. */
#define B8_OUT_ROW(i)                                                                          \
    do {                                                                                       \
        const __m512 a = _mm512_set1_ps(p##i[o]);                                              \
        t##i##0 = _mm512_fmadd_ps(a, w0, t##i##0);                                             \
        t##i##1 = _mm512_fmadd_ps(a, w1, t##i##1);                                             \
    } while (0)
static inline __attribute__((always_inline)) B8_T512 void
epi_outliers(const epi_ctx *x, const b8_qepilogue *ep, int64_t m0, int rows, int64_t n0, __m512 tb[8][NV]) {
    _Static_assert(NV == 2, "epi_outliers holds two vectors per row");
#define B8_OUT_PTR(i) const float *p##i = ep->ox + (m0 + ((i) < rows ? (i) : rows - 1)) * ep->ld_ox
    B8_OUT_PTR(0); B8_OUT_PTR(1); B8_OUT_PTR(2); B8_OUT_PTR(3);
    B8_OUT_PTR(4); B8_OUT_PTR(5); B8_OUT_PTR(6); B8_OUT_PTR(7);
#undef B8_OUT_PTR
    __m512 t00 = x->bias[0], t01 = x->bias[1], t10 = t00, t11 = t01, t20 = t00, t21 = t01, t30 = t00, t31 = t01;
    __m512 t40 = t00, t41 = t01, t50 = t00, t51 = t01, t60 = t00, t61 = t01, t70 = t00, t71 = t01;
    for (int o = 0; o < ep->outliers; o++) {
        const float *w = ep->ow + o * ep->ld_ow + n0;
        const __m512 w0 = _mm512_maskz_loadu_ps(x->mk[0], w), w1 = _mm512_maskz_loadu_ps(x->mk[1], w + 16);
        B8_OUT_ROW(0); B8_OUT_ROW(1); B8_OUT_ROW(2); B8_OUT_ROW(3);
        B8_OUT_ROW(4); B8_OUT_ROW(5); B8_OUT_ROW(6); B8_OUT_ROW(7);
    }
    tb[0][0] = t00, tb[0][1] = t01, tb[1][0] = t10, tb[1][1] = t11, tb[2][0] = t20, tb[2][1] = t21;
    tb[3][0] = t30, tb[3][1] = t31, tb[4][0] = t40, tb[4][1] = t41, tb[5][0] = t50, tb[5][1] = t51;
    tb[6][0] = t60, tb[6][1] = t61, tb[7][0] = t70, tb[7][1] = t71;
}
#undef B8_OUT_ROW

/* One output row m from its NV accumulator vectors; tb (NULL: the bias) is the row's bias with
 * the outlier channels' product joined (epi_outliers). */
static inline __attribute__((always_inline)) B8_T512 void
epi_row(const epi_ctx *x, const __m512i *acc, int64_t m, int64_t n0, const b8_qepilogue *ep,
        const b8_act act, const int to_s8, const int add_res, const __m512 *tb) {
    __m512 s[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; j++) s[j] = x->s[j];
    if (ep->a_scale_per_row) {
        __m512 as = _mm512_set1_ps(ep->a_scale[m]);
#pragma GCC unroll 4
        for (int j = 0; j < NV; j++) s[j] = _mm512_mul_ps(as, x->ws[j]);
    }
#pragma GCC unroll 4
    for (int j = 0; j < NV; j++) {
        int64_t n = n0 + 16 * j;
        __m512i v = _mm512_sub_epi32(acc[j], x->cv[j]);
        /* sum (A - z[m]) W = sum A W - z[m] sum W: exact int32, so the same as a pass of its own */
        if (ep->wsum) v = _mm512_sub_epi32(v, _mm512_mullo_epi32(_mm512_set1_epi32(ep->a_zero[m]), x->wsv[j]));
        __m512 y = _mm512_fmadd_ps(s[j], _mm512_cvtepi32_ps(v), tb ? tb[j] : x->bias[j]);
        if (act == B8_ACT_GELU) y = b8_v16_gelu(y);
        else if (act == B8_ACT_GELU_TANH) y = b8_v16_gelu_tanh(y);
        else if (act == B8_ACT_RELU) y = b8_v16_relu(y);
        if (add_res)
            y = _mm512_add_ps(y, _mm512_maskz_loadu_ps(x->mk[j], ep->residual + m * ep->ld_res + n));
        if (!to_s8) {
            _mm512_mask_storeu_ps(ep->out_f32 + m * ep->ldc + n, x->mk[j], y);
        } else {
            __m512 q = _mm512_fmadd_ps(y, x->omul[j], _mm512_set1_ps(ep->out_zp));
            q = _mm512_min_ps(_mm512_max_ps(q, _mm512_set1_ps(-B8_Q_MAX)),
                              _mm512_set1_ps(B8_Q_MAX));
            _mm_mask_storeu_epi8(ep->out_s8 + m * ep->ldc + n, x->mk[j],
                                 _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(q)));
        }
    }
}

/* Epilogue on a tile the micro-kernel stored (8 x 32 int32, 1 KiB, still in L1). An earlier
 * variant applied the epilogue straight from the accumulator registers in the same function as
 * the K loop: GCC 12 then copied all 16 accumulators to other registers on every k group
 * (32 vmovdqa per 16 vpdpbusd, two of them spilled). Zen 4 hides such moves; on Ice Lake, which
 * has no zmm move elimination, they ran on the vpdpbusd ports: 190-270 GOP/s against 330-370
 * for this store-and-reload form (bench_qgemm, one core). */
static inline __attribute__((always_inline)) B8_T512 void
epilogue_t(const int32_t *acc, size_t ld_acc, int rows, int cols, int64_t m0, int64_t n0,
           const int32_t *comp, const float *w_scale, const b8_qepilogue *ep, const b8_act act,
           const int to_s8, const int add_res) {
    epi_ctx x;
    epi_setup(&x, cols, n0, comp, w_scale, ep, to_s8);
    if (ep->outliers) {
        for (int i0 = 0; i0 < rows; i0 += 8) {
            const int ri = rows - i0 < 8 ? rows - i0 : 8;
            __m512 tb[8][NV];
            epi_outliers(&x, ep, m0 + i0, ri, n0, tb);
            for (int i = i0; i < i0 + ri; i++) {
                __m512i v[NV];
#pragma GCC unroll 4
                for (int j = 0; j < NV; j++) v[j] = _mm512_loadu_si512(acc + i * ld_acc + 16 * j);
                epi_row(&x, v, m0 + i, n0, ep, act, to_s8, add_res, tb[i - i0]);
            }
        }
        return;
    }
    for (int i = 0; i < rows; i++) {
        __m512i v[NV];
#pragma GCC unroll 4
        for (int j = 0; j < NV; j++) v[j] = _mm512_loadu_si512(acc + i * ld_acc + 16 * j);
        epi_row(&x, v, m0 + i, n0, ep, act, to_s8, add_res, NULL);
    }
}

#define EPI_VARIANT(NAME, ACT, S8, RES)                                                        \
    static B8_T512 void NAME(const int32_t *acc, size_t ld_acc, int rows, int cols, int64_t m0, \
                             int64_t n0, const int32_t *comp, const float *w_scale,           \
                             const b8_qepilogue *ep) {                                        \
        epilogue_t(acc, ld_acc, rows, cols, m0, n0, comp, w_scale, ep, ACT, S8, RES);          \
    }
#define EPI_ACT(A, ACT)                                                                        \
    EPI_VARIANT(qs8_gemm_8x32c4__avx512vnni_##A##_f32, ACT, 0, 0)                              \
    EPI_VARIANT(qs8_gemm_8x32c4__avx512vnni_##A##_f32_res, ACT, 0, 1)                          \
    EPI_VARIANT(qs8_gemm_8x32c4__avx512vnni_##A##_s8, ACT, 1, 0)                               \
    EPI_VARIANT(qs8_gemm_8x32c4__avx512vnni_##A##_s8_res, ACT, 1, 1)
EPI_ACT(none, B8_ACT_NONE)
EPI_ACT(gelu, B8_ACT_GELU)
EPI_ACT(gelu_tanh, B8_ACT_GELU_TANH)
EPI_ACT(relu, B8_ACT_RELU)

#define EPI_ROW(A)                                                                             \
    {{qs8_gemm_8x32c4__avx512vnni_##A##_f32, qs8_gemm_8x32c4__avx512vnni_##A##_f32_res},       \
     {qs8_gemm_8x32c4__avx512vnni_##A##_s8, qs8_gemm_8x32c4__avx512vnni_##A##_s8_res}}
/* [act][s8][residual] */
static const b8_qepilogue_fn epilogues[4][2][2] = {EPI_ROW(none), EPI_ROW(gelu),
                                                   EPI_ROW(gelu_tanh), EPI_ROW(relu)};

static b8_qepilogue_fn pick_epilogue(const b8_qepilogue *ep) {
    return epilogues[ep->act][ep->out_s8 != NULL][ep->residual != NULL];
}

static B8_T512 void store_s32(const int32_t *acc, size_t ld_acc, int rows, int cols,
                              const int32_t *comp, int32_t *C, int64_t ldc) {
    for (int j = 0; j < NV; j++) {
        __mmask16 mk = cols_mask(cols, j);
        if (!mk) continue;
        __m512i cv = comp ? _mm512_loadu_si512(comp + 16 * j) : _mm512_setzero_si512();
        for (int i = 0; i < rows; i++)
            _mm512_mask_storeu_epi32(C + i * ldc + 16 * j, mk,
                                     _mm512_sub_epi32(_mm512_loadu_si512(acc + i * ld_acc + 16 * j),
                                                      cv));
    }
}

const b8_qblis b8_qblis_8x32c4__avx512vnni = {
    .mr = MR,
    .nr = NR,
    .kq = 4,
    .a_bytes = 1,
    .shift128 = 1,
    .pack_a = pack_a,
    .ukr = {NULL, qs8_gemm_1x32c4__avx512vnni, qs8_gemm_2x32c4__avx512vnni,
            qs8_gemm_3x32c4__avx512vnni, qs8_gemm_4x32c4__avx512vnni,
            qs8_gemm_5x32c4__avx512vnni, qs8_gemm_6x32c4__avx512vnni,
            qs8_gemm_7x32c4__avx512vnni, qs8_gemm_8x32c4__avx512vnni},
    .ukr_pf = {NULL, qs8_gemm_1x32c4__avx512vnni_pf, qs8_gemm_2x32c4__avx512vnni_pf,
               qs8_gemm_3x32c4__avx512vnni_pf, qs8_gemm_4x32c4__avx512vnni_pf,
               qs8_gemm_5x32c4__avx512vnni_pf, qs8_gemm_6x32c4__avx512vnni_pf,
               qs8_gemm_7x32c4__avx512vnni_pf, qs8_gemm_8x32c4__avx512vnni_pf},
    .pick_epilogue = pick_epilogue,
    .store_s32 = store_s32,
    .epi_row_zero = 1,
};
