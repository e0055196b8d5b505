/* threads.c: the process-wide OpenMP pool that oneDNN and bert8's own kernels share. */
#include "bert8.h"
#include "base/cpu.h"

#include <omp.h>

int bert8_physical_cores(void) { return b8_cpu_physical_cores(); }

void bert8_set_threads(int n) {
    if (n <= 0) n = bert8_physical_cores();
    omp_set_num_threads(n);
}

int bert8_get_threads(void) { return omp_get_max_threads(); }
