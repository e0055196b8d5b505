/* threads.h: applying the process-wide thread count (bert8_set_threads) to the calling thread. */
#ifndef BERT8_THREADS_H
#define BERT8_THREADS_H

/* Makes the calling thread's OpenMP team size the count bert8_set_threads set (if any). Called
 * at the start of every entry point that computes. */
void b8_threads_apply(void);

#endif
