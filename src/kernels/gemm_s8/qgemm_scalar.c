/* qgemm_scalar.c: the scalar INT8 GEMM pieces: the oracle (plain loops on unpacked weights),
 * the scalar twins of the VNNI (8x32c4), AMX (32x32c4) and AVX2 (6x16c2, 4x24c4) micro-kernels
 * and packers, and the
 * scalar epilogue every SIMD epilogue must match bit for bit. */
#include "kernels/gemm_s8/qgemm_impl.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#include "kernels/vmath/vmath.h"

static inline float vmax(float x, float y) { return x > y ? x : y; }
static inline float vmin(float x, float y) { return x < y ? x : y; }

void b8_qepilogue__scalar(const int32_t *acc, size_t ld_acc, int rows, int cols, int64_t m0,
                          int64_t n0, const int32_t *comp, const float *w_scale,
                          const b8_qepilogue *ep) {
    for (int i = 0; i < rows; i++) {
        int64_t m = m0 + i;
        float as = ep->a_scale[ep->a_scale_per_row ? m : 0];
        for (int j = 0; j < cols; j++) {
            int64_t n = n0 + j;
            int32_t v = acc[i * ld_acc + j] - (comp ? comp[n] : 0);
            float s = as * w_scale[n];
            float t = ep->bias ? ep->bias[n] : 0.0f;
            for (int o = 0; o < ep->outliers; o++) t = fmaf(ep->ox[m * ep->ld_ox + o], ep->ow[o * ep->ld_ow + n], t);
            float y = fmaf(s, (float)v, t);
            switch (ep->act) {
            case B8_ACT_GELU: y = b8_vm_gelu(y); break;
            case B8_ACT_GELU_TANH: y = b8_vm_gelu_tanh(y); break;
            case B8_ACT_RELU: y = b8_vm_relu(y); break;
            default: break; /* NONE (b8_qgemm refuses the others) */
            }
            if (ep->residual) y = y + ep->residual[m * ep->ld_res + n];
            if (ep->out_f32) {
                ep->out_f32[m * ep->ldc + n] = y;
            } else {
                float q = vmin(vmax(fmaf(y, ep->out_mul[n], ep->out_zp), -B8_Q_MAX), B8_Q_MAX);
                ep->out_s8[m * ep->ldc + n] = (int8_t)(int32_t)rintf(q);
            }
        }
    }
}

b8_qepilogue_fn b8_qpick_epilogue__scalar(const b8_qepilogue *ep) {
    (void)ep;
    return b8_qepilogue__scalar;
}

void b8_qstore_s32__scalar(const int32_t *acc, size_t ld_acc, int rows, int cols,
                           const int32_t *comp, int32_t *C, int64_t ldc) {
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) C[i * ldc + j] = acc[i * ld_acc + j] - (comp ? comp[j] : 0);
}

/* ---- 8x32c4: twin of the AVX-512 VNNI kernel (u8 = A + 128 times s8 W, groups of 4 k) ---- */

static inline void pack_a_c4_body(const int mr, const int8_t *A, int64_t lda, int rows,
                                  int64_t k0, int64_t kc, void *dst) {
    uint8_t *d = dst;
    int64_t groups = (kc + 3) / 4;
    for (int64_t g = 0; g < groups; g++)
        for (int r = 0; r < mr; r++)
            for (int q = 0; q < 4; q++) {
                int64_t k = g * 4 + q;
                uint8_t v = 0x80; /* encodes 0 */
                if (r < rows && k < kc) v = (uint8_t)A[r * lda + k0 + k] ^ 0x80;
                d[(g * mr + r) * 4 + q] = v;
            }
}

static void pack_a_c4(const int8_t *A, int64_t lda, int rows, int64_t k0, int64_t kc, void *dst) {
    pack_a_c4_body(B8_VNNI_MR, A, lda, rows, k0, kc, dst);
}

static inline void ukr_c4_body(const int mr, const int nr, int rows, size_t kgroups,
                               const uint8_t *a, const int8_t *w, int32_t *c, size_t ldc,
                               int accumulate) {
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < nr; j++) {
            int32_t s = accumulate ? c[i * ldc + j] : 0;
            for (size_t g = 0; g < kgroups; g++)
                for (int q = 0; q < 4; q++)
                    s += (int32_t)a[(g * mr + i) * 4 + q] * (int32_t)w[(g * nr + j) * 4 + q];
            c[i * ldc + j] = s;
        }
}

/* One scalar c4 micro-kernel: R rows of an MR x NR tile (the VNNI twin 8x32, the AVX2 4x24). */
#define UKR_C4(R, MR, NR)                                                                      \
    static void qs8_gemm_##R##x##NR##c4__scalar(size_t kg, const void *a, const int8_t *w,    \
                                                int32_t *c, size_t ldc, int accumulate) {     \
        ukr_c4_body(MR, NR, R, kg, a, w, c, ldc, accumulate);                                  \
    }
UKR_C4(1, 8, 32)
UKR_C4(2, 8, 32)
UKR_C4(3, 8, 32)
UKR_C4(4, 8, 32)
UKR_C4(5, 8, 32)
UKR_C4(6, 8, 32)
UKR_C4(7, 8, 32)
UKR_C4(8, 8, 32)
_Static_assert(B8_VNNI_MR == 8 && B8_VNNI_NR == 32 && B8_AVX2_C4_MR == 4 && B8_AVX2_C4_NR == 24,
               "the scalar c4 twins are instantiated with these tile sizes");

const b8_qblis b8_qblis_8x32c4__scalar = {
    .mr = B8_VNNI_MR,
    .nr = B8_VNNI_NR,
    .kq = 4,
    .a_bytes = 1,
    .shift128 = 1,
    .pack_a = pack_a_c4,
    .ukr = {NULL, qs8_gemm_1x32c4__scalar, qs8_gemm_2x32c4__scalar, qs8_gemm_3x32c4__scalar,
            qs8_gemm_4x32c4__scalar, qs8_gemm_5x32c4__scalar, qs8_gemm_6x32c4__scalar,
            qs8_gemm_7x32c4__scalar, qs8_gemm_8x32c4__scalar},
    .pick_epilogue = b8_qpick_epilogue__scalar,
    .store_s32 = b8_qstore_s32__scalar,
};

/* ---- 32x32c4: twin of the AMX kernel (s8 A times s8 W, 16 x 16 tiles, 64 k per tile) ---- */

void b8_qpack_a_32rows__scalar(const int8_t *A, int64_t lda, int rows, int64_t k0, int64_t kc,
                               void *dst) {
    int8_t *d = dst;
    const int64_t full = kc / B8_AMX_KALIGN, steps = (kc + B8_AMX_KALIGN - 1) / B8_AMX_KALIGN;
    /* whole 64-byte pieces: a copy of constant size, which the compiler turns into vector moves */
    for (int r = 0; r < rows; r++)
        for (int64_t s = 0; s < full; s++)
            memcpy(d + (s * B8_AMX_MR + r) * B8_AMX_KALIGN, A + r * lda + k0 + s * B8_AMX_KALIGN, B8_AMX_KALIGN);
    for (int64_t s = 0; s < steps; s++) {
        const int64_t ks = s * B8_AMX_KALIGN, n = kc - ks < B8_AMX_KALIGN ? kc - ks : B8_AMX_KALIGN;
        for (int r = 0; r < B8_AMX_MR; r++) {
            int8_t *o = d + (s * B8_AMX_MR + r) * B8_AMX_KALIGN;
            if (r >= rows) memset(o, 0, B8_AMX_KALIGN);
            else if (n < B8_AMX_KALIGN) {
                memcpy(o, A + r * lda + k0 + ks, (size_t)n);
                memset(o + n, 0, (size_t)(B8_AMX_KALIGN - n));
            }
        }
    }
}

/* Like the AMX kernel, it writes whole rows of tiles: 16 rows, or 32 when rows > 16. A and W in
 * the tile layouts of qgemm_impl.h (B8_AMX_A_INDEX, B8_AMX_W_INDEX). */
static inline void ukr_32x32(int tile_rows, size_t kgroups, const int8_t *a, const int8_t *w,
                             int32_t *c, size_t ldc, int accumulate) {
    const int64_t kp = (int64_t)kgroups * 4;
    for (int i = 0; i < tile_rows; i++)
        for (int j = 0; j < B8_AMX_NR; j++) {
            int32_t s = accumulate ? c[i * ldc + j] : 0;
            for (int64_t k = 0; k < kp; k++)
                s += (int32_t)a[B8_AMX_A_INDEX(i, k)] * (int32_t)w[B8_AMX_W_INDEX(j, k)];
            c[i * ldc + j] = s;
        }
}

static void qs8_gemm_16x32c4__scalar(size_t kg, const void *a, const int8_t *w, int32_t *c,
                                     size_t ldc, int accumulate) {
    ukr_32x32(16, kg, a, w, c, ldc, accumulate);
}

static void qs8_gemm_32x32c4__scalar(size_t kg, const void *a, const int8_t *w, int32_t *c,
                                     size_t ldc, int accumulate) {
    ukr_32x32(32, kg, a, w, c, ldc, accumulate);
}

#define S16 qs8_gemm_16x32c4__scalar
#define S32 qs8_gemm_32x32c4__scalar
const b8_qblis b8_qblis_32x32c4__scalar = {
    .mr = B8_AMX_MR,
    .nr = B8_AMX_NR,
    .kq = 4,
    .kalign = B8_AMX_KALIGN,
    .amx_tiles = 1,
    .a_bytes = 1,
    .shift128 = 0,
    .pack_a = b8_qpack_a_32rows__scalar,
    .ukr = {NULL, S16, S16, S16, S16, S16, S16, S16, S16, S16, S16, S16, S16, S16, S16, S16, S16,
            S32, S32, S32, S32, S32, S32, S32, S32, S32, S32, S32, S32, S32, S32, S32, S32},
    .pick_epilogue = b8_qpick_epilogue__scalar,
    .store_s32 = b8_qstore_s32__scalar,
};

/* ---- 6x16c2: twin of the AVX2 kernel (int16 A times int16 W, pairs of k) ---- */

static void pack_a_c2(const int8_t *A, int64_t lda, int rows, int64_t k0, int64_t kc, void *dst) {
    int16_t *d = dst;
    int64_t groups = (kc + 1) / 2;
    for (int64_t g = 0; g < groups; g++)
        for (int r = 0; r < B8_AVX2_MR; r++)
            for (int q = 0; q < 2; q++) {
                int64_t k = g * 2 + q;
                int16_t v = 0;
                if (r < rows && k < kc) v = A[r * lda + k0 + k];
                d[(g * B8_AVX2_MR + r) * 2 + q] = v;
            }
}

static inline void ukr_c2(int rows, size_t kgroups, const int16_t *a, const int8_t *w, int32_t *c,
                          size_t ldc, int accumulate) {
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < B8_AVX2_NR; j++) {
            int32_t s = accumulate ? c[i * ldc + j] : 0;
            for (size_t g = 0; g < kgroups; g++)
                for (int q = 0; q < 2; q++)
                    s += (int32_t)a[(g * B8_AVX2_MR + i) * 2 + q] *
                         (int32_t)w[(g * B8_AVX2_NR + j) * 2 + q];
            c[i * ldc + j] = s;
        }
}

#define UKR_C2(R)                                                                              \
    static void qs8_gemm_##R##x16c2__scalar(size_t kg, const void *a, const int8_t *w,        \
                                            int32_t *c, size_t ldc, int accumulate) {         \
        ukr_c2(R, kg, a, w, c, ldc, accumulate);                                               \
    }
UKR_C2(1)
UKR_C2(2)
UKR_C2(3)
UKR_C2(4)
UKR_C2(5)
UKR_C2(6)

const b8_qblis b8_qblis_6x16c2__scalar = {
    .mr = B8_AVX2_MR,
    .nr = B8_AVX2_NR,
    .kq = 2,
    .a_bytes = 2,
    .shift128 = 0,
    .pack_a = pack_a_c2,
    .ukr = {NULL, qs8_gemm_1x16c2__scalar, qs8_gemm_2x16c2__scalar, qs8_gemm_3x16c2__scalar,
            qs8_gemm_4x16c2__scalar, qs8_gemm_5x16c2__scalar, qs8_gemm_6x16c2__scalar},
    .pick_epilogue = b8_qpick_epilogue__scalar,
    .store_s32 = b8_qstore_s32__scalar,
};

/* ---- 4x24c4: twin of the AVX2 vpmaddubsw kernel (u8 = A + 128 times s8 W in [-64, 64]) ---- */

static void pack_a_4x24c4(const int8_t *A, int64_t lda, int rows, int64_t k0, int64_t kc,
                          void *dst) {
    pack_a_c4_body(B8_AVX2_C4_MR, A, lda, rows, k0, kc, dst);
}

UKR_C4(1, 4, 24)
UKR_C4(2, 4, 24)
UKR_C4(3, 4, 24)
UKR_C4(4, 4, 24)

const b8_qblis b8_qblis_4x24c4__scalar = {
    .mr = B8_AVX2_C4_MR,
    .nr = B8_AVX2_C4_NR,
    .kq = 4,
    .a_bytes = 1,
    .shift128 = 1,
    .pack_a = pack_a_4x24c4,
    .ukr = {NULL, qs8_gemm_1x24c4__scalar, qs8_gemm_2x24c4__scalar, qs8_gemm_3x24c4__scalar,
            qs8_gemm_4x24c4__scalar},
    .pick_epilogue = b8_qpick_epilogue__scalar,
    .store_s32 = b8_qstore_s32__scalar,
};

/* ---- qs8_gemm__scalar: the oracle ---- */

bert8_status b8_qgemm_oracle_prepare(b8_qweight *w, const int8_t *src, b8_err *e) {
    size_t n;
    if (!b8_mul_ok((size_t)w->N, (size_t)w->K, &n))
        return b8_fail(e, BERT8_ERR_TOO_LARGE, "weights %lld x %lld overflow size_t",
                       (long long)w->N, (long long)w->K);
    w->packed = b8_malloc_aligned(n);
    if (!w->packed) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory for %zu weight bytes", n);
    memcpy(w->packed, src, n);
    w->packed_bytes = n;
    return BERT8_OK;
}

bert8_status b8_qgemm_oracle_run(const int8_t *A, int64_t lda, int64_t M, const b8_qweight *w,
                                 const b8_qepilogue *ep, int32_t *C, int64_t ldc, b8_err *e) {
    int64_t N = w->N, K = w->K;
    int nt = omp_get_max_threads();
    int32_t *rowbuf = b8_calloc_aligned((size_t)nt * (size_t)N, sizeof(int32_t));
    if (!rowbuf) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory for the oracle's row buffer");
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t m = 0; m < M; m++) {
        int32_t *acc = rowbuf + (size_t)omp_get_thread_num() * (size_t)N;
        for (int64_t n = 0; n < N; n++) {
            int32_t s = 0;
            for (int64_t k = 0; k < K; k++)
                s += (int32_t)A[m * lda + k] * (int32_t)w->packed[n * K + k];
            acc[n] = s - (ep && ep->a_zero ? ep->a_zero[m] * w->wsum[n] : 0);
        }
        /* Columns in chunks so the int `cols` of the epilogue cannot overflow. */
        for (int64_t n0 = 0; n0 < N; n0 += 1 << 20) {
            int cols = (int)(N - n0 < (1 << 20) ? N - n0 : (1 << 20));
            if (ep) b8_qepilogue__scalar(acc + n0, 0, 1, cols, m, n0, w->comp, w->w_scale, ep);
            else b8_qstore_s32__scalar(acc + n0, 0, 1, cols, w->comp ? w->comp + n0 : NULL, C + m * ldc + n0, ldc);
        }
    }
    b8_free_aligned(rowbuf);
    return BERT8_OK;
}
