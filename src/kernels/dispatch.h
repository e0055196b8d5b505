/* dispatch.h: choosing a kernel for an op from its best-first table.
 *
 * Every op of the forward pass (FP32 GEMM, INT8 GEMM, attention, LayerNorm, the quantizers)
 * has one table of implementations, best first, whose last entry is the portable scalar twin.
 * The first entry the CPU allows (b8_cpu_level(), capped by BERT8_MAX_ISA) wins; the choice is
 * made once per op and, with BERT8_VERBOSE=1, printed with the reason and what was skipped. */
#ifndef BERT8_DISPATCH_H
#define BERT8_DISPATCH_H

#include "base/cpu.h"

typedef void (*b8_fnptr)(void);

typedef struct b8_impl {
    const char *name; /* e.g. "layernorm_rows__avx512" */
    b8_isa isa;       /* the level it needs */
    b8_fnptr fn;
} b8_impl;

/* One op's table and its choice, filled on first use (thread-safe). */
typedef struct b8_op_table {
    const char *op;
    const b8_impl *impls;
    int n;
    /* the choice */
    int chosen; /* index into impls, -1 until chosen */
} b8_op_table;

/* The chosen implementation of an op (never NULL: the scalar twin always qualifies). */
const b8_impl *b8_dispatch(b8_op_table *t);

#endif
