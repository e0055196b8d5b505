/* cpu.h: the CPU features bert8's kernels may use, read once (CPUID + XGETBV + Linux AMX
 * permission) and capped by BERT8_MAX_ISA; the only process-wide table the library keeps.
 *
 * Levels are ordered: a level implies every level below it. BERT8_MAX_ISA=scalar|avx2|avx512|
 * avx512_vnni|amx caps the level (a cap above what the CPU grants changes nothing), and
 * BERT8_VERBOSE=1 prints the detection and every kernel choice to stderr. Both are read once,
 * on the first call; the table is read-only afterwards and safe to share between threads. */
#ifndef BERT8_CPU_H
#define BERT8_CPU_H

#include <stdbool.h>

#include "base/common.h"

typedef enum b8_isa {
    B8_ISA_SCALAR = 0,  /* plain C */
    B8_ISA_AVX2,        /* AVX2 + FMA, OS saves YMM */
    B8_ISA_AVX512,      /* AVX-512 F/BW/VL/DQ, OS saves ZMM and opmasks */
    B8_ISA_AVX512_VNNI, /* + AVX512_VNNI (vpdpbusd) */
    B8_ISA_AMX,         /* + AMX-TILE/AMX-INT8, OS saves tile data and Linux granted it */
    B8_ISA_COUNT
} b8_isa;

typedef struct b8_cpu {
    char vendor[13];
    /* What the CPU reports (CPUID) ... */
    bool sse41, avx, avx2, fma, f16c;
    bool avx512f, avx512bw, avx512vl, avx512dq, avx512vnni, avx512bf16, avx_vnni;
    bool amx_tile, amx_int8, amx_bf16;
    /* ... and what the OS really saves on a context switch (XCR0), plus Linux's AMX grant. */
    bool os_ymm, os_zmm, os_amx_xcr0, os_amx_granted;
    b8_isa hw_level; /* the best level CPU and OS allow */
    b8_isa level;    /* hw_level capped by BERT8_MAX_ISA: what kernels may use */
    bool cap_set;    /* BERT8_MAX_ISA was set to a valid value */
    bool cap_invalid;           /* BERT8_MAX_ISA was set to something unknown (ignored) */
    char cap_value[32];         /* the raw BERT8_MAX_ISA value (truncated) when set */
    bool verbose;               /* BERT8_VERBOSE set to a value other than "0" */
    int physical_cores;
} b8_cpu;

/* The table, detected on the first call (pthread_once); never NULL. */
const b8_cpu *b8_cpu_get(void);

/* Shorthands for b8_cpu_get()->level and ->level >= isa. */
b8_isa b8_cpu_level(void);
bool b8_cpu_allows(b8_isa isa);

/* "scalar", "avx2", "avx512", "avx512_vnni", "amx"; "?" when out of range. */
const char *b8_isa_name(b8_isa isa);
/* Parses a level name (case-insensitive); false when s is not one of the names above. */
bool b8_isa_parse(const char *s, b8_isa *out);

/* BERT8_OK, or BERT8_ERR_INVALID_ARG naming the bad BERT8_MAX_ISA value and the valid ones.
 * Kernel selection calls this so that a typo in the cap is reported rather than ignored. */
bert8_status b8_cpu_check_env(b8_err *e);

/* Physical cores this process may run on (SMT siblings counted once); at least 1. */
int b8_cpu_physical_cores(void);

/* When BERT8_VERBOSE is set: prints "bert8: <message>\n" to stderr. The one place library
 * code prints; used to say which kernel was chosen and why. */
void b8_cpu_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
