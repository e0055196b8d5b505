/* dispatch.c: best-first kernel choice per op (see dispatch.h). */
#include "kernels/dispatch.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

const b8_impl *b8_dispatch(b8_op_table *t) {
    int c = __atomic_load_n(&t->chosen, __ATOMIC_ACQUIRE);
    if (c >= 0) return &t->impls[c];
    pthread_mutex_lock(&g_mu);
    if (t->chosen < 0) {
        const b8_cpu *cpu = b8_cpu_get();
        char skipped[512] = "";
        int pick = t->n - 1; /* the scalar twin */
        for (int i = 0; i < t->n; i++) {
            if (t->impls[i].isa <= cpu->level) {
                pick = i;
                break;
            }
            size_t len = strlen(skipped);
            snprintf(skipped + len, sizeof skipped - len, "%s%s [needs %s]", len ? ", " : "", t->impls[i].name,
                     b8_isa_name(t->impls[i].isa));
        }
        b8_cpu_log("%s: %s (first the CPU allows at level %s%s%s%s)", t->op, t->impls[pick].name,
                   b8_isa_name(cpu->level), cpu->level < cpu->hw_level ? ", capped by BERT8_MAX_ISA" : "",
                   skipped[0] ? "; skipped: " : "", skipped);
        __atomic_store_n(&t->chosen, pick, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&g_mu);
    return &t->impls[t->chosen];
}
