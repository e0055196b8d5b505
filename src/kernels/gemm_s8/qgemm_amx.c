/* qgemm_amx.c: the AMX INT8 GEMM, qs8_gemm_32x32c4__amx: tdpbssd (s8 A x s8 W, exact int32,
 * no +128 shift) on a 32 x 32 block of C held in four 16 x 16 int32 tiles.
 *
 * Layouts (shared with the scalar twin qs8_gemm_32x32c4__scalar in qgemm_scalar.c): the tile
 * layouts of qgemm_impl.h, Kp a multiple of 64. Every tile load reads 1 KiB in one piece at a
 * stride of 64 bytes: A [Kp/64][32][64] (rows 0-15 then 16-31 of each 64-k step), W
 * [Kp/64][2][16][16][4] (the B tile of columns 0-15, then of 16-31). Against the earlier
 * layouts (A row-major 32 x Kp, W [Kp/4][32][4], whose tile rows lie 128 bytes or Kp apart) the
 * tile loop alone ran 8% faster in a microbenchmark on the BERT-base FFN-in shape (Xeon with AMX,
 * one core, 3,300 -> 3,580 GOP/s).
 * The tile configuration is loaded once per unit of work (b8_qblis.unit_begin) and released at
 * its end, so no other code on the thread ever sees this kernel's tiles. The epilogue is the
 * AVX-512 one, applied to the stored 32 x 32 block. */
#include "kernels/gemm_s8/qgemm_impl.h"

#include <immintrin.h>

#include "kernels/amx.h"

#define MR B8_AMX_MR
#define NR B8_AMX_NR

#define B8_TAMX __attribute__((target("amx-tile,amx-int8,avx512f")))

/* tmm0-3: C (16 x 16 int32); tmm4-5: A (16 x 64 s8); tmm6-7: B (16 groups x 16 cols x 4). */
static B8_TAMX void unit_begin(void) {
    b8_amx_tilecfg cfg;
    b8_amx_tilecfg_16x64(&cfg);
    B8_AMX_BARRIER();
    _tile_loadconfig(&cfg);
}

static B8_TAMX void unit_end(void) { _tile_release(); }

/* A 32 x 32 block of C (two rows of tiles, tmm0-3) or, with two == 0, its first 16 rows (tmm0,
 * tmm1): per 64 k, the A rows' tiles (tmm4, tmm5) times the two B tiles (tmm6, tmm7). */
static inline __attribute__((always_inline)) B8_TAMX void
ukr_amx(const int two, size_t kg, const void *a, const int8_t *w, int32_t *c, size_t ldc, int accumulate,
        const int8_t *pf) {
    const size_t ldb = (size_t)ldc * 4;
    const uint8_t *ap = a;
    B8_AMX_BARRIER();
    if (accumulate) {
        _tile_loadd(0, c, ldb);
        _tile_loadd(1, c + 16, ldb);
        if (two) {
            _tile_loadd(2, c + 16 * ldc, ldb);
            _tile_loadd(3, c + 16 * ldc + 16, ldb);
        }
    } else {
        _tile_zero(0);
        _tile_zero(1);
        if (two) {
            _tile_zero(2);
            _tile_zero(3);
        }
    }
    for (size_t b = 0; b < kg / 16; b++) {
        _tile_loadd(4, ap + 2048 * b, 64);
        _tile_loadd(6, w + 2048 * b, 64);
        _tile_loadd(7, w + 2048 * b + 1024, 64);
        if (two) _tile_loadd(5, ap + 2048 * b + 1024, 64);
        if (pf) /* a constant NULL in the plain kernels: no code */
            for (int l = 0; l < 32; l++) _mm_prefetch((const char *)pf + 2048 * b + 64 * l, _MM_HINT_T1);
        _tile_dpbssd(0, 4, 6);
        _tile_dpbssd(1, 4, 7);
        if (two) {
            _tile_dpbssd(2, 5, 6);
            _tile_dpbssd(3, 5, 7);
        }
    }
    _tile_stored(0, c, ldb);
    _tile_stored(1, c + 16, ldb);
    if (two) {
        _tile_stored(2, c + 16 * ldc, ldb);
        _tile_stored(3, c + 16 * ldc + 16, ldb);
    }
    B8_AMX_BARRIER();
}

static B8_TAMX void qs8_gemm_16x32c4__amx(size_t kg, const void *a, const int8_t *w, int32_t *c,
                                         size_t ldc, int accumulate) {
    ukr_amx(0, kg, a, w, c, ldc, accumulate, NULL);
}

static B8_TAMX void qs8_gemm_32x32c4__amx(size_t kg, const void *a, const int8_t *w, int32_t *c,
                                         size_t ldc, int accumulate) {
    ukr_amx(1, kg, a, w, c, ldc, accumulate, NULL);
}

static B8_TAMX void qs8_gemm_16x32c4__amx_pf(size_t kg, const void *a, const int8_t *w, int32_t *c,
                                            size_t ldc, int accumulate, const int8_t *pf) {
    ukr_amx(0, kg, a, w, c, ldc, accumulate, pf);
}

static B8_TAMX void qs8_gemm_32x32c4__amx_pf(size_t kg, const void *a, const int8_t *w, int32_t *c,
                                            size_t ldc, int accumulate, const int8_t *pf) {
    ukr_amx(1, kg, a, w, c, ldc, accumulate, pf);
}

static b8_qepilogue_fn pick_epilogue(const b8_qepilogue *ep) {
    return b8_qblis_8x32c4__avx512vnni.pick_epilogue(ep);
}

static void store_s32(const int32_t *acc, size_t ld_acc, int rows, int cols, const int32_t *comp,
                      int32_t *C, int64_t ldc) {
    b8_qblis_8x32c4__avx512vnni.store_s32(acc, ld_acc, rows, cols, comp, C, ldc);
}

#define U16 qs8_gemm_16x32c4__amx
#define U32 qs8_gemm_32x32c4__amx
#define P16 qs8_gemm_16x32c4__amx_pf
#define P32 qs8_gemm_32x32c4__amx_pf
const b8_qblis b8_qblis_32x32c4__amx = {
    .mr = MR,
    .nr = NR,
    .kq = 4,
    .kalign = B8_AMX_KALIGN,
    .amx_tiles = 1,
    .a_bytes = 1,
    .shift128 = 0,
    .pack_a = b8_qpack_a_32rows__scalar,
    .ukr = {NULL, U16, U16, U16, U16, U16, U16, U16, U16, U16, U16, U16, U16, U16, U16, U16, U16,
            U32, U32, U32, U32, U32, U32, U32, U32, U32, U32, U32, U32, U32, U32, U32, U32},
    .ukr_pf = {NULL, P16, P16, P16, P16, P16, P16, P16, P16, P16, P16, P16, P16, P16, P16, P16, P16,
               P32, P32, P32, P32, P32, P32, P32, P32, P32, P32, P32, P32, P32, P32, P32, P32},
    .pf_whole = 1,
    .pick_epilogue = pick_epilogue,
    .store_s32 = store_s32,
    .epi_row_zero = 1,
    .unit_begin = unit_begin,
    .unit_end = unit_end,
};
