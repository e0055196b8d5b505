/* threads.c: the process-wide OpenMP pool that oneDNN and bert8's own kernels share. */
#include "bert8.h"

#include <omp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Physical cores = distinct (physical id, core id) pairs in /proc/cpuinfo; falls back to the
 * online CPU count. */
int bert8_physical_cores(void) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (online < 1) online = 1;
    if (!f) return (int)online;
    char line[256];
    int phys = -1, pairs[1024][2], n = 0;
    while (fgets(line, sizeof line, f)) {
        int v;
        if (sscanf(line, "physical id : %d", &v) == 1) phys = v;
        else if (sscanf(line, "core id : %d", &v) == 1) {
            int seen = 0;
            for (int i = 0; i < n && !seen; i++) seen = pairs[i][0] == phys && pairs[i][1] == v;
            if (!seen && n < 1024) {
                pairs[n][0] = phys;
                pairs[n][1] = v;
                n++;
            }
        }
    }
    fclose(f);
    if (n < 1 || n > online) return (int)online;
    return n;
}

void bert8_set_threads(int n) {
    if (n <= 0) n = bert8_physical_cores();
    omp_set_num_threads(n);
}

int bert8_get_threads(void) { return omp_get_max_threads(); }
