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

/* The name of the implementation an op runs, by op name ("layernorm", "attention", ...), or
 * NULL when no such op has been dispatched yet. For tests and diagnostics. */
const char *b8_dispatch_choice(const char *op);

/* Every op's table, in a fixed order, for tests: the tables register themselves here. */
int b8_dispatch_op_count(void);
b8_op_table *b8_dispatch_op(int i);

#endif
