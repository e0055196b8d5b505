/* qgemm_impl.h: what the INT8 GEMM kernels share inside the library: the packed-weight
 * struct, the BLIS-style kernel description (packing, micro-kernels, epilogue) that the
 * macro-kernel in qgemm.c drives, and the per-ISA entry points. */
#ifndef BERT8_QGEMM_IMPL_H
#define BERT8_QGEMM_IMPL_H

#include "kernels/gemm_s8/qgemm.h"

/* Tiles. A VNNI "c4" micro-kernel consumes 4 consecutive k per int32 lane (vpdpbusd); the
 * AVX2 "c2" one 2 (vpmaddwd on int16). */
#define B8_VNNI_MR 8
#define B8_VNNI_NR 32
#define B8_AVX2_MR 6
#define B8_AVX2_NR 16
/* AVX2 vpmaddubsw kernel for 7-bit weights (|w| <= B8_W7_MAX; see qgemm_avx2.c) */
#define B8_AVX2_C4_MR 4
#define B8_AVX2_C4_NR 24
#define B8_W7_MAX 64
/* AMX: a 32 x 32 block of C in four 16 x 16 tiles; k padded to whole 64-byte tile rows. */
#define B8_AMX_MR 32
#define B8_AMX_NR 32
#define B8_AMX_KALIGN 64
/* The tile layouts of the 32x32c4 kernels, so that every tile load reads 1 KiB in one piece:
 * A: one micro-panel is [Kp/64][32 rows][64 k] (tile rows 0-15 of a 64-k step, then rows
 * 16-31); W: one 32-column panel is [Kp/64][2][16 groups of 4 k][16 columns][4] (the B tile of
 * columns 0-15 of a 64-k step, then that of columns 16-31). Offsets inside a panel: */
#define B8_AMX_A_INDEX(r, k) (((k) / 64) * 2048 + (r) * 64 + (k) % 64)
#define B8_AMX_W_INDEX(c, k) ((((k) / 64) * 2 + (c) / 16) * 1024 + (((k) % 64) / 4) * 64 + ((c) % 16) * 4 + (k) % 4)
#define B8_MAX_MR 32
#define B8_MAX_NR 32

/* A micro-kernel: the rows x NR tile of C for kgroups groups of kq values of k, from a
 * packed A micro-panel (MR rows interleaved per k-group, of which the first `rows` are read;
 * `rows` is fixed per function) and a packed W panel. Writes c[i*ldc + j]; with accumulate it
 * adds to c, otherwise c is never read. No edge code: packing zero-pads K and N. */
typedef void (*b8_qukernel)(size_t kgroups, const void *a, const int8_t *w, int32_t *c,
                            size_t ldc, int accumulate);
/* The same with a prefetch: while it streams its W panel, it asks for kgroups x 64 bytes at pf
 * (a cache line per k group: half of the next W panel's slice) to be brought into L2. */
typedef void (*b8_qukernel_pf)(size_t kgroups, const void *a, const int8_t *w, int32_t *c,
                               size_t ldc, int accumulate, const int8_t *pf);

/* Packs rows (<= MR) rows of A, k in [k0, k0 + kc), into one micro-panel: per k-group, MR rows
 * of kq values; k beyond kc (up to the next multiple of kq) filled with the value that encodes
 * 0. c4 kernels store A + 128 as u8 (the VNNI u8 operand), c2 kernels int16. */
typedef void (*b8_qpack_a)(const int8_t *A, int64_t lda, int rows, int64_t k0, int64_t kc,
                           void *dst);

/* Applies the fused epilogue to a tile of accumulators acc[i*ld_acc + j], i < rows, j < cols,
 * for output rows m0.. and columns n0..; comp (per column, +128 trick) may be NULL. */
typedef void (*b8_qepilogue_fn)(const int32_t *acc, size_t ld_acc, int rows, int cols,
                                int64_t m0, int64_t n0, const int32_t *comp,
                                const float *w_scale, const b8_qepilogue *ep);
/* Stores acc - comp into C (raw int32 output). */
typedef void (*b8_qstore_fn)(const int32_t *acc, size_t ld_acc, int rows, int cols,
                             const int32_t *comp, int32_t *C, int64_t ldc);

typedef struct b8_qblis {
    int mr, nr, kq;     /* tile rows, tile columns, k values per group */
    int kalign;         /* K padded to this multiple in packed W and A (0: kq); a kernel with
                           kalign > kq runs K in one pass (its A panel is not split in k) */
    int amx_tiles;      /* W packed in the AMX tile layout (B8_AMX_W_INDEX), not [Kp/kq][nr][kq] */
    int a_bytes;        /* bytes per packed A element (1: u8, 2: int16) */
    int shift128;       /* A fed as A + 128 (u8); comp[n] = 128 * sum_k W[n][k] subtracted */
    b8_qpack_a pack_a;
    b8_qukernel ukr[B8_MAX_MR + 1]; /* ukr[r]: r rows, 1 <= r <= mr */
    b8_qukernel_pf ukr_pf[B8_MAX_MR + 1]; /* with a prefetch of the next W panel, or NULL */
    int pf_whole;       /* 1: ukr_pf asks for the whole next panel in one call; 0: half of it
                           (the first two row panels of a unit each ask for one half) */
    b8_qepilogue_fn (*pick_epilogue)(const b8_qepilogue *ep); /* chosen once per call */
    b8_qstore_fn store_s32;
    int epi_row_zero;   /* its epilogue subtracts a_zero[m] * wsum[n] itself (b8_qepilogue.wsum), so
                           the tile needs no correction pass of its own */
    /* Called by each thread around its units of work (NULL: nothing); AMX loads and
     * releases its tile configuration here. */
    void (*unit_begin)(void);
    void (*unit_end)(void);
} b8_qblis;

struct b8_qweight {
    const struct b8_qkernel *kernel;
    int64_t N, K;       /* logical shape */
    int64_t Np, Kp;     /* padded to the panel width and to the k-group */
    float *w_scale;     /* [Np], zero padded */
    int32_t *comp;      /* [Np] (128 + in_zero) * sum_k W[n][k] (in_zero * sum without the
                           +128 trick), or NULL when both are 0 */
    int32_t in_zero;    /* the zero point of A (b8_qweight_set_input_zero) */
    int32_t *wsum;      /* [Np] sum_k W[n][k] (0 past N): per-row zero points of A */
    int8_t *packed;     /* BLIS kernels: [Np/nr][Kp/kq][nr][kq]; oracle: W copy [N][K] */
    size_t packed_bytes;
    int in_arena;       /* packed lies in a b8_qarena (b8_qweights_gather), not freed with w */
    void *backend;      /* oneDNN state */
};

/* A kernel: either BLIS-layered (blis != NULL: qgemm.c packs and drives it) or a backend
 * with its own hooks. run computes the fused epilogue when ep != NULL, else raw int32 into C. */
typedef struct b8_qkernel {
    const char *name;
    b8_isa isa;              /* level the CPU must allow */
    int auto_select;         /* 0: only when forced by name */
    const b8_qblis *blis;
    int w_abs_max;           /* > 0: exact only for weights within +-w_abs_max; packing any
                                other weights with it is refused, and auto-selection passes
                                it by */
    bert8_status (*prepare)(b8_qweight *w, const int8_t *src, b8_err *e);
    void (*release)(b8_qweight *w);
    bert8_status (*run)(const int8_t *A, int64_t lda, int64_t M, const b8_qweight *w,
                        const b8_qepilogue *ep, int32_t *C, int64_t ldc, b8_err *e);
} b8_qkernel;

/* Per-ISA pieces (each file fills in its b8_qblis). */
extern const b8_qblis b8_qblis_8x32c4__avx512vnni;
extern const b8_qblis b8_qblis_8x32c4__scalar;
extern const b8_qblis b8_qblis_6x16c2__avx2;
extern const b8_qblis b8_qblis_6x16c2__scalar;
extern const b8_qblis b8_qblis_4x24c4__avx2;
extern const b8_qblis b8_qblis_4x24c4__scalar;
extern const b8_qblis b8_qblis_32x32c4__amx;
extern const b8_qblis b8_qblis_32x32c4__scalar;

/* The A packer of the 32x32c4 kernels (AMX and its twin): 32 rows x round_up(kc, 64) bytes in
 * the tile layout (B8_AMX_A_INDEX), rows >= `rows` and k >= kc zero. Plain C: it is a copy. */
void b8_qpack_a_32rows__scalar(const int8_t *A, int64_t lda, int rows, int64_t k0, int64_t kc,
                               void *dst);

/* Scalar epilogue and raw store, shared by the scalar kernels and the oracle. */
void b8_qepilogue__scalar(const int32_t *acc, size_t ld_acc, int rows, int cols, int64_t m0,
                          int64_t n0, const int32_t *comp, const float *w_scale,
                          const b8_qepilogue *ep);
b8_qepilogue_fn b8_qpick_epilogue__scalar(const b8_qepilogue *ep);
void b8_qstore_s32__scalar(const int32_t *acc, size_t ld_acc, int rows, int cols,
                           const int32_t *comp, int32_t *C, int64_t ldc);

/* The oracle: plain loops over the unpacked weights. */
bert8_status b8_qgemm_oracle_prepare(b8_qweight *w, const int8_t *src, b8_err *e);
bert8_status b8_qgemm_oracle_run(const int8_t *A, int64_t lda, int64_t M, const b8_qweight *w,
                                 const b8_qepilogue *ep, int32_t *C, int64_t ldc, b8_err *e);

/* oneDNN matmul backend (qgemm_dnnl.c). */
bert8_status b8_qgemm_dnnl_prepare(b8_qweight *w, const int8_t *src, b8_err *e);
void b8_qgemm_dnnl_release(b8_qweight *w);
bert8_status b8_qgemm_dnnl_run(const int8_t *A, int64_t lda, int64_t M, const b8_qweight *w,
                               const b8_qepilogue *ep, int32_t *C, int64_t ldc, b8_err *e);

/* The requantization both twins use: clamp to [-127, 127] (NaN -> -127), round half even. */
#define B8_Q_MAX 127.0f

#endif
