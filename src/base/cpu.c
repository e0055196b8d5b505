/* cpu.c: reads the CPU features once (CPUID, XGETBV, Linux AMX permission), applies
 * BERT8_MAX_ISA and BERT8_VERBOSE, and counts physical cores. */
#define _GNU_SOURCE
#include "base/cpu.h"

#include <strings.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define B8_X86 1
#endif
#if defined(__linux__)
#include <sys/syscall.h>
#endif

static b8_cpu g_cpu;
static pthread_once_t g_cpu_once = PTHREAD_ONCE_INIT;

static const char *const isa_names[B8_ISA_COUNT] = {
    [B8_ISA_SCALAR] = "scalar",
    [B8_ISA_AVX2] = "avx2",
    [B8_ISA_AVX512] = "avx512",
    [B8_ISA_AVX512_VNNI] = "avx512_vnni",
    [B8_ISA_AMX] = "amx",
};

const char *b8_isa_name(b8_isa isa) {
    if ((unsigned)isa >= B8_ISA_COUNT) return "?";
    return isa_names[isa];
}

bool b8_isa_parse(const char *s, b8_isa *out) {
    if (!s) return false;
    for (int i = 0; i < B8_ISA_COUNT; i++) {
        if (strcasecmp(s, isa_names[i]) == 0) {
            if (out) *out = (b8_isa)i;
            return true;
        }
    }
    return false;
}

#ifdef B8_X86
/* XGETBV through inline assembly: the intrinsic needs -mxsave, and the library is built for
 * baseline x86-64. Only called after CPUID says OSXSAVE is set. */
static uint64_t read_xcr0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

/* Linux hands out the 8 KiB AMX tile state only on request (arch_prctl XCOMP_PERM); without
 * the grant the first tile instruction raises SIGILL even though CPUID and XCR0 say yes. */
static bool request_amx_permission(void) {
#if defined(__linux__) && defined(SYS_arch_prctl)
    enum { ARCH_GET_XCOMP_PERM = 0x1022, ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0) return false;
    unsigned long bitmask = 0;
    if (syscall(SYS_arch_prctl, ARCH_GET_XCOMP_PERM, &bitmask) != 0) return false;
    return (bitmask >> XFEATURE_XTILEDATA) & 1;
#else
    return false;
#endif
}

static void detect_features(b8_cpu *c) {
    unsigned a, b, cx, d;
    if (!__get_cpuid(0, &a, &b, &cx, &d)) return;
    unsigned max_leaf = a;
    memcpy(c->vendor, &b, 4);
    memcpy(c->vendor + 4, &d, 4);
    memcpy(c->vendor + 8, &cx, 4);
    c->vendor[12] = '\0';

    __get_cpuid(1, &a, &b, &cx, &d);
    c->sse41 = (cx >> 19) & 1;
    c->fma = (cx >> 12) & 1;
    c->avx = (cx >> 28) & 1;
    c->f16c = (cx >> 29) & 1;
    bool osxsave = (cx >> 27) & 1;
    uint64_t xcr0 = osxsave ? read_xcr0() : 0;
    c->os_ymm = (xcr0 & 0x6) == 0x6;          /* SSE + AVX state */
    c->os_zmm = (xcr0 & 0xe6) == 0xe6;        /* + opmask, ZMM_Hi256, Hi16_ZMM */
    c->os_amx_xcr0 = (xcr0 & 0x60000) == 0x60000; /* XTILECFG + XTILEDATA */

    if (max_leaf >= 7) {
        __cpuid_count(7, 0, a, b, cx, d);
        unsigned max_sub = a;
        c->avx2 = (b >> 5) & 1;
        c->avx512f = (b >> 16) & 1;
        c->avx512dq = (b >> 17) & 1;
        c->avx512bw = (b >> 30) & 1;
        c->avx512vl = (b >> 31) & 1;
        c->avx512vnni = (cx >> 11) & 1;
        c->amx_bf16 = (d >> 22) & 1;
        c->amx_tile = (d >> 24) & 1;
        c->amx_int8 = (d >> 25) & 1;
        if (max_sub >= 1) {
            __cpuid_count(7, 1, a, b, cx, d);
            c->avx_vnni = (a >> 4) & 1;
            c->avx512bf16 = (a >> 5) & 1;
        }
    }
    if (c->amx_tile && c->amx_int8 && c->os_amx_xcr0) c->os_amx_granted = request_amx_permission();
}
#else
static void detect_features(b8_cpu *c) { strcpy(c->vendor, "non-x86"); }
#endif

/* The best level, and for verbose output the first requirement that stops the next one. */
static b8_isa hw_level(const b8_cpu *c, const char **stop) {
    *stop = NULL;
    if (!(c->avx2 && c->fma && c->avx)) {
        *stop = "avx2: CPU lacks AVX2/FMA";
        return B8_ISA_SCALAR;
    }
    if (!c->os_ymm) {
        *stop = "avx2: OS does not save YMM state (XCR0)";
        return B8_ISA_SCALAR;
    }
    if (!(c->avx512f && c->avx512bw && c->avx512vl && c->avx512dq)) {
        *stop = "avx512: CPU lacks AVX-512 F/BW/VL/DQ";
        return B8_ISA_AVX2;
    }
    if (!c->os_zmm) {
        *stop = "avx512: OS does not save ZMM/opmask state (XCR0)";
        return B8_ISA_AVX2;
    }
    if (!c->avx512vnni) {
        *stop = "avx512_vnni: CPU lacks AVX512_VNNI";
        return B8_ISA_AVX512;
    }
    if (!(c->amx_tile && c->amx_int8)) {
        *stop = "amx: CPU lacks AMX-TILE/AMX-INT8";
        return B8_ISA_AVX512_VNNI;
    }
    if (!c->os_amx_xcr0) {
        *stop = "amx: OS does not save tile state (XCR0 bits 17/18)";
        return B8_ISA_AVX512_VNNI;
    }
    if (!c->os_amx_granted) {
        *stop = "amx: Linux refused ARCH_REQ_XCOMP_PERM for tile data";
        return B8_ISA_AVX512_VNNI;
    }
    return B8_ISA_AMX;
}

static int count_physical_cores(void) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (online < 1) online = 1;
    cpu_set_t set;
    bool have_set = sched_getaffinity(0, sizeof set, &set) == 0;
    int allowed = have_set ? CPU_COUNT(&set) : (int)online;
    if (allowed < 1) allowed = 1;
    /* A CPU is a core's first hardware thread when it leads its thread_siblings_list. */
    int cores = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (have_set && !CPU_ISSET(cpu, &set)) continue;
        if (!have_set && cpu >= online) break;
        char path[96];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list",
                 cpu);
        FILE *f = fopen(path, "r");
        if (!f) return allowed;
        int first = -1;
        int got = fscanf(f, "%d", &first);
        fclose(f);
        if (got != 1) return allowed;
        /* A sibling outside the affinity mask leaves this CPU as the core's only member. */
        if (first == cpu || (have_set && !CPU_ISSET(first, &set))) cores++;
    }
    if (cores < 1 || cores > allowed) return allowed;
    return cores;
}

static void cpu_init(void) {
    b8_cpu *c = &g_cpu;
    detect_features(c);
    const char *stop;
    c->hw_level = hw_level(c, &stop);
    c->level = c->hw_level;

    const char *verbose = getenv("BERT8_VERBOSE");
    c->verbose = verbose && verbose[0] && strcmp(verbose, "0") != 0;

    const char *cap = getenv("BERT8_MAX_ISA");
    if (cap && cap[0]) {
        snprintf(c->cap_value, sizeof c->cap_value, "%s", cap);
        b8_isa want;
        if (b8_isa_parse(cap, &want)) {
            c->cap_set = true;
            if (want < c->level) c->level = want;
        } else {
            c->cap_invalid = true;
        }
    }
    c->physical_cores = count_physical_cores();

    if (c->verbose) {
        fprintf(stderr,
                "bert8: cpu: %s, avx2=%d fma=%d avx512f/bw/vl/dq=%d/%d/%d/%d vnni=%d "
                "amx-tile/int8=%d/%d, XCR0 ymm=%d zmm=%d tiles=%d, amx granted=%d\n",
                c->vendor, c->avx2, c->fma, c->avx512f, c->avx512bw, c->avx512vl, c->avx512dq,
                c->avx512vnni, c->amx_tile, c->amx_int8, c->os_ymm, c->os_zmm, c->os_amx_xcr0,
                c->os_amx_granted);
        fprintf(stderr, "bert8: cpu: hardware level %s%s%s\n", b8_isa_name(c->hw_level),
                stop ? "; no higher because " : "", stop ? stop : "");
        if (c->cap_invalid)
            fprintf(stderr,
                    "bert8: cpu: BERT8_MAX_ISA='%s' is not one of scalar|avx2|avx512|"
                    "avx512_vnni|amx; ignored here, and kernel selection reports it as an error\n",
                    c->cap_value);
        else if (c->cap_set)
            fprintf(stderr, "bert8: cpu: BERT8_MAX_ISA=%s caps the level at %s\n", c->cap_value,
                    b8_isa_name(c->level));
        fprintf(stderr, "bert8: cpu: kernels may use level %s; %d physical core(s)\n",
                b8_isa_name(c->level), c->physical_cores);
    }
}

const b8_cpu *b8_cpu_get(void) {
    pthread_once(&g_cpu_once, cpu_init);
    return &g_cpu;
}

b8_isa b8_cpu_level(void) { return b8_cpu_get()->level; }

bool b8_cpu_allows(b8_isa isa) { return b8_cpu_get()->level >= isa; }

bert8_status b8_cpu_check_env(b8_err *e) {
    const b8_cpu *c = b8_cpu_get();
    if (c->cap_invalid)
        return b8_fail(e, BERT8_ERR_INVALID_ARG,
                       "environment variable BERT8_MAX_ISA='%s' is not one of scalar, avx2, "
                       "avx512, avx512_vnni, amx",
                       c->cap_value);
    return BERT8_OK;
}

int b8_cpu_physical_cores(void) { return b8_cpu_get()->physical_cores; }

void b8_cpu_log(const char *fmt, ...) {
    if (!b8_cpu_get()->verbose) return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "bert8: %s\n", buf);
}
