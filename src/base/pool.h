/* pool.h: bert8's own thread pool for the parallel loops of its kernels and forward pass.
 *
 * Why not OpenMP's: at the end of a parallel region every thread of an OpenMP team has to
 * arrive at the barrier, including one that has not started because another process holds its
 * core; the thread waiting for it spins (GOMP: 300,000 rounds by default) and each of the
 * hundreds of regions of a forward pass can cost a scheduler time slice. A 2-core machine with
 * one other busy process ran all-MiniLM-L6-v2 at 22 sequences/s instead of 178 (batch 8 x 128,
 * docs/benchmarks.md). Here the work of a loop is handed out one chunk at a time to whoever asks:
 * the caller takes part, a worker that wakes late finds the work done and goes back to wait, and
 * the caller waits only for chunks already started.
 *
 * Workers spin for a short while after each loop (BERT8_POOL_SPIN_US microseconds, default 100),
 * then sleep on a futex. One loop runs on the pool at a time: a loop started while another
 * thread's loop runs (two sessions at once), or from inside a loop, runs on its caller alone.
 * Correctness never depends on a worker showing up: the caller can run every chunk itself (after
 * fork() the child has no workers and does). */
#ifndef BERT8_POOL_H
#define BERT8_POOL_H

#include <stdint.h>

/* A loop body: items [i0, i1) on the participant `slot` (0 = the caller, 1..threads-1 = pool
 * workers). A slot runs one chunk at a time, so scratch indexed by slot needs no lock. */
typedef void (*b8_par_fn)(void *ctx, int64_t i0, int64_t i1, int slot);

/* Runs fn over [0, n) in consecutive chunks of `grain` items (the last one shorter; grain is
 * raised so that there are at most 65,535 chunks) on up to `threads` participants, and returns
 * when every chunk has run. threads <= 1 or a single chunk: every chunk on the caller, in order.
 * In OpenMP mode (b8_par_set_omp) the chunks run in an OpenMP parallel loop instead, slot =
 * omp_get_thread_num(). */
void b8_par_for(int64_t n, int64_t grain, int threads, b8_par_fn fn, void *ctx);

/* The thread count a loop uses: bert8_set_threads' count, else OpenMP's (OMP_NUM_THREADS); 1 inside
 * a chunk of a loop running on the pool, where a loop runs on its caller alone, so that work
 * sized there (scratch per thread, units per thread) is sized for one thread. */
int b8_par_threads(void);

/* b8_par_threads() when a loop has at least min_work units of work, else 1 (the caller alone):
 * below that, waking the pool costs more than the loop. */
static inline int b8_par_threads_for(int64_t work, int64_t min_work) {
    return work >= min_work ? b8_par_threads() : 1;
}

/* The thread count for a loop whose participants should each get at least `per` units of work:
 * b8_par_threads(), fewer when the work does not give each that much, 1 below 2 * per. */
static inline int b8_par_threads_per(double work, double per) {
    const int nt = b8_par_threads();
    if (work >= (double)nt * per) return nt;
    return work < 2.0 * per ? 1 : (int)(work / per);
}

/* OpenMP mode for the calling thread's loops (1) or the pool (0, the default); returns the
 * previous mode. A forward pass whose layers run on oneDNN (an FP32 model) keeps its own loops in
 * OpenMP too, so that two pools do not spin against each other. */
int b8_par_set_omp(int on);

/* Alone mode for the calling thread (1): its loops run on it alone and b8_par_threads() says 1,
 * as inside a chunk; returns the previous mode. A group of sequences run as one chunk of a
 * sequence-parallel call (forward.c) sets it, so that its work is sized for one thread whether
 * the chunk runs on the pool or, the pool being taken, on its caller. */
int b8_par_set_alone(int on);

#endif
