/* threads.c: the process-wide thread count that oneDNN and bert8's own kernels share.
 *
 * OpenMP keeps the team size per calling thread (omp_set_num_threads sets the caller's value),
 * so a count set from one thread would not reach calls made from others (a server's scheduler,
 * Python threads). bert8 keeps the count here and every entry point that computes applies it to
 * its calling thread first (b8_threads_apply). */
#include "base/threads.h"

#include <omp.h>

#include "base/cpu.h"
#include "bert8.h"

static int g_threads; /* 0: not set, OpenMP's own default */

int bert8_physical_cores(void) { return b8_cpu_physical_cores(); }

void bert8_set_threads(int n) {
    if (n <= 0) n = bert8_physical_cores();
    __atomic_store_n(&g_threads, n, __ATOMIC_RELAXED);
    omp_set_num_threads(n);
}

int bert8_get_threads(void) {
    int n = __atomic_load_n(&g_threads, __ATOMIC_RELAXED);
    return n > 0 ? n : omp_get_max_threads();
}

void b8_threads_apply(void) {
    int n = __atomic_load_n(&g_threads, __ATOMIC_RELAXED);
    if (n > 0 && omp_get_max_threads() != n) omp_set_num_threads(n);
}
