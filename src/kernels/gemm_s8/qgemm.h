/* qgemm.h: the INT8 matrix product of bert8's quantized Linear layers (W8A8, SmoothQuant).
 *
 *   acc[m][n] = sum_k A[m][k] * W[n][k]            int8 x int8 -> int32, exact
 *   t         = bias[n] or 0;  t = fma(ox[m][i], ow[i][n], t) for i = 0 .. outliers-1
 *   y         = fma(a_scale[m or 0] * w_scale[n], (float)acc[m][n], t)
 *   y         = act(y)                             none, GELU (erf), GELU (tanh), ReLU
 *   y         = y + residual[m][n]                 optional, fp32
 *   out       = y (fp32)   or   sat127(rne(fma(y, out_mul[n], out_zp))) (int8 in [-127, 127])
 *
 * W is [N][K] (out x in, PyTorch layout), int8 symmetric per output channel (w_scale[n]);
 * A is int8, per tensor (one a_scale, static calibration) or per row (a_scale[m], dynamic); a
 * static A may carry a zero point z (x ~ a_scale * (q - z), b8_qweight_set_input_zero), so
 * that a one-sided range (a GELU output) uses all 255 levels: acc then sums (A - z) W. A
 * per-row A may carry a zero point per row the same way (b8_qepilogue.a_zero, the dynamic
 * asymmetric quantizer's): acc[m][n] = sum_k (A[m][k] - a_zero[m]) W[n][k], exactly.
 * A few input channels may be kept out of int8 (b8_qepilogue.outliers: the channels whose
 * magnitude would set every token's scale): the caller zeroes them in A and in W and passes
 * their fp32 values ox and weights ow, whose small product joins the bias in the epilogue.
 * The weights are packed once by b8_qweight_pack into the layout of the kernel chosen for
 * their shape; b8_qgemm then runs on the process-wide OpenMP pool.
 *
 * Every kernel of bert8's own gives bit-identical int32 accumulators and bit-identical fused
 * outputs (same float operation order, see kernels/vmath.h). The oneDNN backend ("onednn",
 * only when forced by name) gives identical int32 results while |sum| < 2^24 (it passes them
 * through fp32) and fp32/int8 outputs within a few ulp (its own bias and GELU order).
 *
 * Thread safety: a packed b8_qweight is read-only and may be used by any number of threads at
 * once (the oneDNN backend guards its primitive cache with a mutex). */
#ifndef BERT8_QGEMM_H
#define BERT8_QGEMM_H

#include "base/act.h"
#include "base/common.h"
#include "base/cpu.h"

/* Packed weights for one Linear layer, plus the kernel chosen for them. */
typedef struct b8_qweight b8_qweight;

typedef struct b8_qepilogue {
    const float *a_scale; /* activation scale: 1 value, or M values when a_scale_per_row */
    int a_scale_per_row;
    /* [M] per-row zero points of A in [-127, 127] (only with a_scale_per_row), or NULL: acc
     * then sums (A - a_zero[m]) W. Only the kernels b8_qweight_takes_row_zero accepts. */
    const int32_t *a_zero;
    /* Internal: set by b8_qgemm (callers leave it NULL) for the epilogues that take the a_zero
     * correction in their own pass over the tile: [Np] sum_k W[n][k]. */
    const int32_t *wsum;
    const float *bias;    /* [N] or NULL */
    /* Outlier channels in fp32 (0: none): ox [M][ld_ox] (the first `outliers` values of each
     * row), ow [outliers][ld_ow] (ld_ow >= N); added to the bias in order, before the scale. */
    int outliers;
    const float *ox;
    int64_t ld_ox;
    const float *ow;
    int64_t ld_ow;
    b8_act act;           /* NONE, GELU, GELU_TANH or RELU */
    const float *residual; /* [M][ld_res] added after the activation, or NULL; may equal out_f32 */
    int64_t ld_res;
    float *out_f32;       /* exactly one of out_f32 / out_s8, both with row stride ldc */
    int64_t ldc;
    int8_t *out_s8;
    const float *out_mul; /* [N] requantization multipliers, required with out_s8 */
    float out_zp;         /* out_s8's zero point (an integer in [-127, 127]; 0: symmetric) */
    /* Called on complete output rows [m0, m1) once every column of them is written, or NULL:
     * a row operation (a LayerNorm) fused into the product. Each row is passed exactly once.
     * Where M allows, units of work own whole rows and the call comes from the thread that
     * wrote them, while they are still in its cache; otherwise the rows are passed out in
     * blocks over the pool after the product. */
    void (*rows_done)(void *ctx, int64_t m0, int64_t m1);
    void *rows_ctx;
} b8_qepilogue;

/* Packs W [N][K] (row-major, contiguous) and copies w_scale [N]. force_kernel: NULL selects
 * the best kernel this CPU and BERT8_MAX_ISA allow (BERT8_QGEMM_KERNEL=<name> in the
 * environment forces one for every layer); otherwise a name from b8_qgemm_kernel_name(),
 * refused with BERT8_ERR_UNSUPPORTED when the CPU (or the cap) cannot run it. With
 * BERT8_VERBOSE=1 the choice and the reason are printed. K is limited to 65536 so that int32
 * accumulators cannot overflow. */
bert8_status b8_qweight_pack(const int8_t *w, int64_t N, int64_t K, const float *w_scale,
                             const char *force_kernel, b8_qweight **out, b8_err *e);
void b8_qweight_free(b8_qweight *w); /* NULL is a no-op */
/* The zero point z (in [-127, 127]) of the int8 A this weight is multiplied with: the products
 * then compute sum_k (A[m][k] - z) W[n][k], exactly (z * sum_k W[n][k] joins the int32 column
 * compensation). Set once, before use; BERT8_ERR_UNSUPPORTED for the oneDNN backend. */
bert8_status b8_qweight_set_input_zero(b8_qweight *w, int32_t z, b8_err *e);
/* Whether b8_qgemm takes per-row zero points of A (b8_qepilogue.a_zero) with these weights:
 * bert8's own kernels do, for K up to 32768 (the int32 accumulators stay exact); oneDNN does
 * not. */
bool b8_qweight_takes_row_zero(const b8_qweight *w);

/* One block of memory for the packed weights of many layers, on 2 MiB-aligned pages that Linux is
 * advised to back with transparent huge pages (madvise): a forward pass streams every layer's
 * weights from memory, and with 4 KiB pages each 4 KiB costs a TLB miss and a restart of the
 * hardware prefetcher. b8_qweights_gather copies the packed weights of ws[0..n) (NULL entries
 * and backends with an opaque layout are skipped) into a new arena and frees their old copies
 * (or leaves an older arena to its owner, who frees it once nothing points into it). The weights
 * work as before; free them, then the arena. *out is NULL when there was nothing to gather,
 * when the memory could not be mapped, or when BERT8_HUGE_PAGES=0 is set in the environment (the
 * weights then stay where they were: the arena is an optimisation, never a reason to fail). */
typedef struct b8_qarena b8_qarena;
bert8_status b8_qweights_gather(b8_qweight *const *ws, int64_t n, b8_qarena **out, b8_err *e);
void b8_qarena_free(b8_qarena *a); /* NULL is a no-op */
size_t b8_qarena_bytes(const b8_qarena *a);
/* The int8 weights [N][K] back out of the packed layout (so the caller need not keep a copy);
 * BERT8_ERR_UNSUPPORTED for a backend whose layout is opaque (oneDNN). */
bert8_status b8_qweight_unpack(const b8_qweight *w, int8_t *dst, b8_err *e);
const char *b8_qweight_kernel_name(const b8_qweight *w);
int64_t b8_qweight_n(const b8_qweight *w);
int64_t b8_qweight_k(const b8_qweight *w);

/* out = epilogue(A [M][lda] x W^T). M may be 0. ws: the caller's scratch (packed A and per-thread
 * tiles), grown as needed and reused across calls; NULL allocates and frees one per call. A ws
 * must not be used by two calls at once. */
bert8_status b8_qgemm(const int8_t *A, int64_t lda, int64_t M, const b8_qweight *W,
                      const b8_qepilogue *ep, b8_buf *ws, b8_err *e);

/* The raw accumulators, for tests: C[m*ldc + n] = sum_k A[m][k] * W[n][k]. */
bert8_status b8_qgemm_s32(const int8_t *A, int64_t lda, int64_t M, const b8_qweight *W,
                          int32_t *C, int64_t ldc, b8_err *e);

/* The kernel registry, best first (for tests, the benchmark and verbose output). */
int b8_qgemm_kernel_count(void);
const char *b8_qgemm_kernel_name(int i); /* NULL when out of range */
b8_isa b8_qgemm_kernel_isa(int i);       /* the level a kernel needs */
int b8_qgemm_kernel_w_abs_max(int i);    /* > 0: the kernel takes only weights within +-that */

#endif
