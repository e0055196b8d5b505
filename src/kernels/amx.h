/* amx.h: the AMX tile configuration bert8's kernels share: palette 1, tmm0-7 each 16 rows of 64
 * bytes (a 16 x 16 int32 block of C, 16 rows x 64 int8 of A, or 16 groups of 4 k x 16 columns of
 * B). Each kernel loads it (LDTILECFG) before its tile code and releases the tiles after. */
#ifndef BERT8_AMX_H
#define BERT8_AMX_H

#include <stdint.h>
#include <string.h>

/* The 64-byte LDTILECFG operand. */
typedef struct b8_amx_tilecfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} b8_amx_tilecfg;

static inline void b8_amx_tilecfg_16x64(b8_amx_tilecfg *c) {
    memset(c, 0, sizeof *c);
    c->palette = 1;
    for (int t = 0; t < 8; t++) {
        c->colsb[t] = 64;
        c->rows[t] = 16;
    }
}

/* GCC 12's tile intrinsics are asm statements without a memory clobber: this barrier keeps the
 * compiler from moving plain loads and stores across them. */
#define B8_AMX_BARRIER() __asm__ volatile("" ::: "memory")

#endif
