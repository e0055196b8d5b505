/* pool.c: the thread pool of pool.h.
 *
 * One job at a time, described by one 64-bit word (state) that every claim changes with a
 * compare-and-swap: the job's epoch (24 bits), the worker slots still free (8), the chunks in
 * all (16) and the next chunk to hand out (16). A worker joins a job by taking a free slot, then
 * claims chunks while the epoch is the one it joined; the job's other fields (fn, ctx, n, grain)
 * are read only after a successful claim, which proves the job is still running (it cannot end
 * before the claimed chunk is done), and they are written only by the next job's caller after
 * every chunk of this one is done. The caller counts finished chunks in `done`.
 *
 * Waiting: workers spin on state for spin_ns, then sleep on the futex `seq` (bumped at each
 * publication; `sleepers` tells the caller whether to wake). The caller, out of chunks, spins on
 * `done`, then sleeps on it; the worker that finishes the last chunk wakes it. */
#define _GNU_SOURCE
#include "base/pool.h"

#include <limits.h>
#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#endif

#include "bert8.h"

#define MAX_SLOTS 255   /* workers per job: the 8-bit slot field */
#define MAX_CHUNKS 65535

#define ST_NEXT(s) ((uint32_t)((s) & 0xffff))
#define ST_TOTAL(s) ((uint32_t)(((s) >> 16) & 0xffff))
#define ST_SLOTS(s) ((uint32_t)(((s) >> 32) & 0xff))
#define ST_EPOCH(s) ((uint32_t)((s) >> 40))
#define ST_MAKE(epoch, slots, total, next)                                                        \
    (((uint64_t)(epoch) << 40) | ((uint64_t)(slots) << 32) | ((uint64_t)(total) << 16) | (uint64_t)(next))
#define EPOCH_MASK 0xffffffu

static struct {
    /* the word every participant reads and claims from, alone on its cache line */
    _Alignas(64) _Atomic uint64_t state;
    _Alignas(64) _Atomic uint32_t done; /* chunks of the current job finished */
    _Atomic uint32_t seq;          /* futex: bumped when a job is published */
    _Atomic uint32_t sleepers;     /* workers asleep (or about to be) on seq */
    _Atomic uint32_t caller_waits; /* the caller sleeps on done */
    atomic_flag busy;              /* a caller owns the pool */
    /* the current job, on its own line: read-only while it runs (see the top of the file for
     * who reads and writes it when) */
    _Alignas(64) b8_par_fn fn;
    void *ctx;
    int64_t n, grain;
    uint32_t epoch; /* the owner's: the epoch of the last job published */
    pthread_mutex_t grow;
    _Atomic int workers; /* started */
    int64_t spin_ns;
} g = {.busy = ATOMIC_FLAG_INIT, .grow = PTHREAD_MUTEX_INITIALIZER, .spin_ns = -1};

static _Thread_local int t_omp; /* b8_par_set_omp */
static _Thread_local int t_in_chunk; /* running a chunk of a loop on the pool: loops inside it run here alone */
static _Thread_local int t_alone;    /* b8_par_set_alone */

int b8_par_set_alone(int on) {
    int was = t_alone;
    t_alone = on != 0;
    return was;
}

int b8_par_set_omp(int on) {
    int was = t_omp;
    t_omp = on != 0;
    return was;
}

int b8_par_threads(void) {
    if (t_in_chunk || t_alone) return 1; /* a loop started here runs on this thread alone (b8_par_for) */
    int n = bert8_get_threads();
    return n > 0 ? n : 1;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void futex_wait(_Atomic uint32_t *addr, uint32_t val) {
#ifdef __linux__
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
#else
    if (atomic_load(addr) == val) sched_yield();
#endif
}

static void futex_wake(_Atomic uint32_t *addr, int count) {
#ifdef __linux__
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, count, NULL, NULL, 0);
#else
    (void)addr;
    (void)count;
#endif
}

/* Claims and runs chunks of the job of `epoch` until none is left. */
static void run_chunks(uint32_t epoch, int slot) {
    uint64_t s = atomic_load_explicit(&g.state, memory_order_acquire);
    for (;;) {
        if (ST_EPOCH(s) != epoch || ST_NEXT(s) >= ST_TOTAL(s)) return;
        if (!atomic_compare_exchange_weak_explicit(&g.state, &s, s + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;
        const uint32_t total = ST_TOTAL(s);
        const int64_t i0 = (int64_t)ST_NEXT(s) * g.grain;
        const int64_t i1 = i0 + g.grain < g.n ? i0 + g.grain : g.n;
        t_in_chunk++;
        g.fn(g.ctx, i0, i1, slot);
        t_in_chunk--;
        if (atomic_fetch_add_explicit(&g.done, 1, memory_order_acq_rel) + 1 == total &&
            atomic_load(&g.caller_waits))
            futex_wake(&g.done, 1);
        s = atomic_load_explicit(&g.state, memory_order_acquire);
    }
}

/* A job this worker has not looked at yet, with work and a free slot. */
static inline int joinable(uint64_t s, uint32_t seen) {
    return ST_EPOCH(s) != seen && ST_NEXT(s) < ST_TOTAL(s) && ST_SLOTS(s) > 0;
}

static void *worker_main(void *arg) {
    (void)arg;
    uint32_t seen = ST_EPOCH(atomic_load(&g.state));
    for (;;) {
        uint64_t s = atomic_load_explicit(&g.state, memory_order_acquire);
        if (!joinable(s, seen)) {
            /* spin, then sleep until the next publication */
            const int64_t until = now_ns() + g.spin_ns;
            for (unsigned i = 1;; i++) {
                cpu_relax();
                s = atomic_load_explicit(&g.state, memory_order_acquire);
                if (joinable(s, seen)) break;
                if ((i & 63) == 0 && now_ns() >= until) {
                    uint32_t q = atomic_load(&g.seq);
                    atomic_fetch_add(&g.sleepers, 1);
                    s = atomic_load(&g.state);
                    if (!joinable(s, seen)) futex_wait(&g.seq, q);
                    atomic_fetch_sub(&g.sleepers, 1);
                    s = atomic_load_explicit(&g.state, memory_order_acquire);
                    if (joinable(s, seen)) break;
                    i = 0;
                }
            }
        }
        /* join: take a slot while the job still has work */
        const uint32_t epoch = ST_EPOCH(s);
        seen = epoch;
        int slot = 0;
        while (ST_EPOCH(s) == epoch && ST_NEXT(s) < ST_TOTAL(s) && ST_SLOTS(s) > 0) {
            if (atomic_compare_exchange_weak_explicit(&g.state, &s, s - ((uint64_t)1 << 32),
                                                      memory_order_acq_rel, memory_order_acquire)) {
                slot = (int)ST_SLOTS(s); /* the free count before: threads-1 .. 1 */
                break;
            }
        }
        if (slot) run_chunks(epoch, slot);
    }
    return NULL;
}

static void after_fork_child(void) {
    /* the child has no workers; the caller runs every chunk itself until it starts new ones */
    atomic_store(&g.workers, 0);
    atomic_store(&g.sleepers, 0);
    atomic_store(&g.caller_waits, 0);
    atomic_flag_clear(&g.busy);
    pthread_mutex_init(&g.grow, NULL);
}

static void init_once(void) {
    const char *v = getenv("BERT8_POOL_SPIN_US");
    long us = 100;
    if (v && *v) {
        char *end;
        long x = strtol(v, &end, 10);
        if (*end == '\0' && x >= 0 && x <= 1000000) us = x;
    }
    g.spin_ns = (int64_t)us * 1000;
    pthread_atfork(NULL, NULL, after_fork_child);
}

/* Starts workers until `want` run (or thread creation fails: fewer is only slower). */
static int ensure_workers(int want) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, init_once);
    int have = atomic_load(&g.workers);
    if (have >= want) return have;
    pthread_mutex_lock(&g.grow);
    have = atomic_load(&g.workers);
    while (have < want) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&t, &attr, worker_main, NULL);
        pthread_attr_destroy(&attr);
        if (rc != 0) break;
        atomic_store(&g.workers, ++have);
    }
    pthread_mutex_unlock(&g.grow);
    return have;
}

/* OpenMP mode; a loop inside a chunk stays in OpenMP mode on every thread of the team (and so
 * runs on that thread: OpenMP does not nest by default). */
static void run_omp(int64_t chunks, int64_t n, int64_t grain, int threads, b8_par_fn fn, void *ctx) {
#pragma omp parallel num_threads(threads)
    {
        const int was = b8_par_set_omp(1);
#pragma omp for schedule(dynamic, 1)
        for (int64_t c = 0; c < chunks; c++) {
            const int64_t i0 = c * grain;
            fn(ctx, i0, i0 + grain < n ? i0 + grain : n, omp_get_thread_num());
        }
        b8_par_set_omp(was);
    }
}

/* Every chunk on the caller, in order. */
static void run_inline(int64_t n, int64_t grain, b8_par_fn fn, void *ctx) {
    for (int64_t i0 = 0; i0 < n; i0 += grain) fn(ctx, i0, i0 + grain < n ? i0 + grain : n, 0);
}

void b8_par_for(int64_t n, int64_t grain, int threads, b8_par_fn fn, void *ctx) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    if ((n + grain - 1) / grain > MAX_CHUNKS) grain = (n + MAX_CHUNKS - 1) / MAX_CHUNKS;
    const int64_t chunks = (n + grain - 1) / grain;
    if (threads > chunks) threads = (int)chunks;
    if (threads > MAX_SLOTS + 1) threads = MAX_SLOTS + 1;
    if (threads <= 1 || t_alone) {
        run_inline(n, grain, fn, ctx);
        return;
    }
    if (t_omp) {
        run_omp(chunks, n, grain, threads, fn, ctx);
        return;
    }
    const int workers = ensure_workers(threads - 1);
    if (workers < 1 || atomic_flag_test_and_set_explicit(&g.busy, memory_order_acquire)) {
        run_inline(n, grain, fn, ctx); /* the pool is taken (another thread's loop, or a loop in a loop) */
        return;
    }
    g.fn = fn;
    g.ctx = ctx;
    g.n = n;
    g.grain = grain;
    atomic_store_explicit(&g.done, 0, memory_order_relaxed);
    g.epoch = (g.epoch + 1) & EPOCH_MASK;
    const uint32_t slots = (uint32_t)(threads - 1 < workers ? threads - 1 : workers);
    atomic_store(&g.state, ST_MAKE(g.epoch, slots, (uint32_t)chunks, 0));
    atomic_fetch_add(&g.seq, 1);
    if (atomic_load(&g.sleepers) > 0) futex_wake(&g.seq, INT_MAX);

    run_chunks(g.epoch, 0);

    /* every chunk is handed out; wait for the ones still running */
    const uint32_t total = (uint32_t)chunks;
    if (atomic_load_explicit(&g.done, memory_order_acquire) != total) {
        const int64_t until = now_ns() + g.spin_ns;
        for (unsigned i = 1; atomic_load_explicit(&g.done, memory_order_acquire) != total; i++) {
            cpu_relax();
            if ((i & 63) == 0 && now_ns() >= until) {
                atomic_store(&g.caller_waits, 1);
                uint32_t d;
                while ((d = atomic_load(&g.done)) != total) futex_wait(&g.done, d);
                atomic_store(&g.caller_waits, 0);
                break;
            }
        }
    }
    atomic_flag_clear_explicit(&g.busy, memory_order_release);
}
