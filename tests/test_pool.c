/* test_pool.c: the thread pool of src/base/pool.h. Every item of a loop runs exactly once, in
 * chunks of the grain; slots stay below the thread count and no slot runs two chunks at once;
 * loops from several threads at once, loops inside loops, OpenMP mode, more chunks than the
 * state word counts, a loop whose worker is held up (the caller takes its share), and a child
 * process after fork(). scripts/tsan.sh runs it under ThreadSanitizer (label threads). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/pool.h"
#include "bert8.h"
#include "testutil.h"

#define MAX_THREADS 16

typedef struct loop {
    int64_t n, grain; /* grain: the one the pool uses (raised to at most 65,535 chunks) */
    int threads;
    _Atomic int *hits;              /* [n] */
    _Atomic int busy[MAX_THREADS];  /* a slot running a chunk */
    _Atomic int bad_slot, bad_chunk, overlap;
    _Atomic int64_t sum;
    int nested;                     /* run a small loop inside each chunk */
    int sleep_slot;                 /* > 0: that slot sleeps 20 ms in its first chunk */
    _Atomic int slept;
} loop;

static void body(void *ctx, int64_t i0, int64_t i1, int slot) {
    loop *l = ctx;
    if (slot < 0 || slot >= l->threads || slot >= MAX_THREADS) {
        atomic_fetch_add(&l->bad_slot, 1);
        return;
    }
    if (atomic_exchange(&l->busy[slot], 1)) atomic_fetch_add(&l->overlap, 1);
    if (i0 < 0 || i1 > l->n || i1 <= i0 || i1 - i0 > l->grain || i0 % l->grain)
        atomic_fetch_add(&l->bad_chunk, 1);
    if (l->sleep_slot && slot == l->sleep_slot && !atomic_exchange(&l->slept, 1)) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    for (int64_t i = i0; i < i1 && i >= 0 && i < l->n; i++) {
        atomic_fetch_add(&l->hits[i], 1);
        atomic_fetch_add(&l->sum, i);
    }
    if (l->nested) {
        loop in = {.n = 37, .grain = 5, .threads = 4};
        _Atomic int hits[37] = {0};
        in.hits = hits;
        b8_par_for(in.n, in.grain, in.threads, body, &in);
        int ok = 1;
        for (int i = 0; i < 37; i++) ok &= hits[i] == 1;
        if (!ok || in.bad_slot || in.bad_chunk || in.overlap) atomic_fetch_add(&l->bad_chunk, 1);
    }
    atomic_store(&l->busy[slot], 0);
}

/* Runs one loop and checks it; returns the number of problems. */
static int run_loop(int64_t n, int64_t grain, int threads, int nested, int sleep_slot) {
    loop *l = calloc(1, sizeof *l);
    l->n = n;
    l->grain = grain < 1 ? 1 : grain;
    if ((n + l->grain - 1) / l->grain > 65535) l->grain = (n + 65534) / 65535;
    l->threads = threads < 1 ? 1 : threads;
    l->nested = nested;
    l->sleep_slot = sleep_slot;
    l->hits = calloc((size_t)(n > 0 ? n : 1), sizeof *l->hits);
    b8_par_for(n, grain, threads, body, l);
    int bad = 0;
    for (int64_t i = 0; i < n; i++) bad += l->hits[i] != 1;
    if (n > 0 && atomic_load(&l->sum) != n * (n - 1) / 2) bad++;
    bad += atomic_load(&l->bad_slot) + atomic_load(&l->bad_chunk) + atomic_load(&l->overlap);
    free(l->hits);
    free(l);
    return bad;
}

TEST(every_item_once) {
    const int64_t ns[] = {0, 1, 2, 7, 64, 1000, 100003};
    const int64_t grains[] = {1, 3, 64, 1000};
    const int threads[] = {1, 2, 3, 4, 8, 16};
    for (size_t a = 0; a < sizeof ns / sizeof *ns; a++)
        for (size_t b = 0; b < sizeof grains / sizeof *grains; b++)
            for (size_t c = 0; c < sizeof threads / sizeof *threads; c++) {
                int bad = run_loop(ns[a], grains[b], threads[c], 0, 0);
                CHECKF(bad == 0, "n=%lld grain=%lld threads=%d: %d problems", (long long)ns[a],
                       (long long)grains[b], threads[c], bad);
            }
}

TEST(many_loops_in_a_row) {
    /* workers go back to wait between loops and join the next one; a wrong epoch would run a
     * chunk of an old loop or miss one */
    int bad = 0;
    for (int i = 0; i < 3000; i++) bad += run_loop(1 + i % 97, 1 + i % 5, 2 + i % 3, 0, 0);
    CHECK(bad == 0);
}

TEST(more_chunks_than_the_state_word_counts) {
    int bad = run_loop(200000, 1, 4, 0, 0); /* 200,000 chunks of 1: the grain is raised */
    CHECK(bad == 0);
}

TEST(loops_inside_loops) {
    CHECK(run_loop(500, 7, 4, 1, 0) == 0);
}

TEST(a_held_up_worker_delays_nothing_it_has_not_started) {
    /* slot 1 sleeps 20 ms in its first chunk; the others take the rest */
    CHECK(run_loop(400, 1, 2, 0, 1) == 0);
    CHECK(run_loop(400, 1, 4, 0, 2) == 0);
}

TEST(openmp_mode) {
    int was = b8_par_set_omp(1);
    CHECK(run_loop(1000, 3, 2, 0, 0) == 0);
    CHECK(run_loop(1000, 3, 4, 1, 0) == 0);
    b8_par_set_omp(was);
    CHECK(run_loop(1000, 3, 2, 0, 0) == 0);
}

static void *caller_thread(void *arg) {
    intptr_t bad = 0;
    for (int i = 0; i < 300; i++) bad += run_loop(50 + (i * 7 + (int)(intptr_t)arg) % 300, 1 + i % 4, 2 + i % 2, i % 10 == 0, 0);
    return (void *)bad;
}

TEST(several_callers_at_once) {
    pthread_t t[4];
    for (intptr_t i = 0; i < 4; i++) CHECK(pthread_create(&t[i], NULL, caller_thread, (void *)i) == 0);
    intptr_t bad = 0;
    for (int i = 0; i < 4; i++) {
        void *r = NULL;
        pthread_join(t[i], &r);
        bad += (intptr_t)r;
    }
    CHECK(bad == 0);
}

#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif

TEST(child_after_fork) {
#ifdef UNDER_TSAN
    TU_SKIP("ThreadSanitizer does not start threads after a multi-threaded fork");
#endif
    CHECK(run_loop(1000, 1, 2, 0, 0) == 0); /* the parent has workers */
    pid_t pid = fork();
    if (pid == 0) {
        int bad = 0;
        for (int i = 0; i < 50; i++) bad += run_loop(1000, 1 + i % 3, 2 + i % 3, 0, 0);
        _exit(bad == 0 ? 0 : 1);
    }
    CHECK(pid > 0);
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(run_loop(1000, 1, 2, 0, 0) == 0);
}

/* b8_par_threads_per: all threads when each gets `per`, fewer in proportion, one below 2 x per */
TEST(threads_by_work_per_thread) {
    const int was = bert8_get_threads();
    bert8_set_threads(8);
    CHECK(b8_par_threads() == 8);
    CHECK(b8_par_threads_per(0.0, 100.0) == 1);
    CHECK(b8_par_threads_per(199.0, 100.0) == 1);
    CHECK(b8_par_threads_per(200.0, 100.0) == 2);
    CHECK(b8_par_threads_per(550.0, 100.0) == 5);
    CHECK(b8_par_threads_per(800.0, 100.0) == 8);
    CHECK(b8_par_threads_per(1e18, 100.0) == 8);
    bert8_set_threads(1);
    CHECK(b8_par_threads_per(1e18, 100.0) == 1);
    bert8_set_threads(was);
}

/* Inside a chunk on the pool, and in alone mode anywhere, b8_par_threads() says 1 and a loop runs
 * every chunk on its caller, in order (slot 0). */
typedef struct alone_job {
    _Atomic int seen_threads_above_1, chunks_off_slot_0;
} alone_job;

static void count_inner(void *ctx, int64_t i0, int64_t i1, int slot) {
    (void)i0, (void)i1;
    alone_job *j = ctx;
    if (slot) atomic_fetch_add(&j->chunks_off_slot_0, 1);
}

static void outer_chunk(void *ctx, int64_t i0, int64_t i1, int slot) {
    (void)i0, (void)i1, (void)slot;
    alone_job *j = ctx;
    if (b8_par_threads() != 1) atomic_fetch_add(&j->seen_threads_above_1, 1);
    b8_par_for(64, 1, 8, count_inner, ctx);
}

TEST(loops_in_a_chunk_or_alone_are_sized_for_one_thread) {
    const int was = bert8_get_threads();
    bert8_set_threads(4);
    alone_job j = {0, 0};
    b8_par_for(16, 1, 4, outer_chunk, &j);
    CHECK(j.seen_threads_above_1 == 0 && j.chunks_off_slot_0 == 0);
    CHECK(b8_par_threads() == 4); /* outside any chunk again */
    CHECK(b8_par_set_alone(1) == 0);
    CHECK(b8_par_threads() == 1 && b8_par_threads_per(1e18, 1.0) == 1);
    b8_par_for(256, 1, 4, count_inner, &j);
    CHECK(j.chunks_off_slot_0 == 0);
    CHECK(b8_par_set_alone(0) == 1);
    CHECK(b8_par_threads() == 4);
    bert8_set_threads(was);
}

int main(void) {
    RUN(every_item_once);
    RUN(many_loops_in_a_row);
    RUN(more_chunks_than_the_state_word_counts);
    RUN(loops_inside_loops);
    RUN(a_held_up_worker_delays_nothing_it_has_not_started);
    RUN(openmp_mode);
    RUN(several_callers_at_once);
    RUN(child_after_fork);
    RUN(threads_by_work_per_thread);
    RUN(loops_in_a_chunk_or_alone_are_sized_for_one_thread);
    return tu_finish();
}
