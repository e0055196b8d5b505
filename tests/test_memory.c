/* test_memory.c: a model a server can hold for weeks. Thousands of forward passes with random
 * lengths 1..max, FP32 and INT8, padded and packed, from two threads at once (each with its own
 * session, one shared model): the resident set stops growing after warm-up. Under
 * AddressSanitizer (whose quarantine keeps freed memory resident) the loop still runs, for the
 * sanitizer's sake, but the size check reports itself skipped. */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bert8.h"
#include "testutil.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define UNDER_SANITIZER 1
#else
#define UNDER_SANITIZER 0
#endif

static long rss_kb(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, res = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &res) != 2) res = 0;
        fclose(f);
    }
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}

typedef struct worker {
    bert8_model *const *models; /* [2]: FP32 and INT8 */
    uint64_t seed;
    int warm, per, rounds;
    pthread_barrier_t *bar;
    int failures;
} worker;

/* One forward pass of B random lengths (padded or packed) on session s. */
static bert8_status one(bert8_session *s, const bert8_model_info *in, uint64_t *r, int it, int32_t *ids, int32_t *mask) {
    const int64_t maxlen = in->max_seq_len;
    int64_t cu[5];
    *r ^= *r << 13, *r ^= *r >> 7, *r ^= *r << 17;
    /* Warm-up first: the largest batch (3 x maxlen; on 2 threads it runs op after op), then, packed,
     * the largest group each of the 2 sessions of a sequence-parallel call can get (forward.c,
     * split_forward: groups within 5% of each other, so at most maxlen + 10.5% beside maxlen):
     * lengths {maxlen, maxlen, e} give the first group maxlen + e, {maxlen, maxlen - 1, e + 1}
     * the second. */
    static const int64_t warm_len[3][3] = {{0, 0, 0}, {0, 0, 1}, {0, -1, 2}}; /* 0: maxlen, 1: e, 2: e + 1, -1: maxlen - 1 */
    const int64_t e = maxlen * 105 / 1000;
    const int64_t B = it < 6 ? 3 : 1 + (int64_t)(*r % 3);
    cu[0] = 0;
    int64_t T = 0;
    for (int64_t b = 0; b < B; b++) {
        *r ^= *r << 13, *r ^= *r >> 7, *r ^= *r << 17;
        const int64_t w = it < 6 ? warm_len[it / 2][b] : 0;
        int64_t len = it >= 6 ? 1 + (int64_t)(*r % (uint64_t)maxlen) : w == 0 ? maxlen : w == -1 ? maxlen - 1 : w == 1 ? e : e + 1;
        cu[b + 1] = cu[b] + len;
        if (len > T) T = len;
    }
    for (int64_t i = 0; i < B * T; i++) ids[i] = (int32_t)(5 + (i * 7919 + it) % (in->vocab_size - 5));
    bert8_outputs o;
    if (it % 2) {
        bert8_packed_batch pb = {B, cu, ids, NULL};
        return bert8_forward_packed(s, &pb, &o);
    }
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) mask[b * T + t] = t < cu[b + 1] - cu[b];
    bert8_batch pb = {B, T, ids, mask, NULL};
    return bert8_forward(s, &pb, &o);
}

static void *run(void *arg) {
    worker *w = arg;
    bert8_session *s[2] = {NULL, NULL};
    const bert8_model_info *in[2] = {bert8_model_get_info(w->models[0]), bert8_model_get_info(w->models[1])};
    const int64_t maxlen = in[0]->max_seq_len;
    int32_t *ids = malloc((size_t)(4 * maxlen) * sizeof(int32_t)), *mask = malloc((size_t)(4 * maxlen) * sizeof(int32_t));
    for (int k = 0; k < 2; k++)
        if (bert8_session_create(w->models[k], &s[k])) w->failures++;
    uint64_t r = w->seed;
    int it = 0;
    for (int round = 0; round <= w->rounds; round++) {
        const int n = round == 0 ? w->warm : w->per;
        for (int i = 0; i < n && !w->failures; i++, it++)
            for (int k = 0; k < 2; k++)
                if (one(s[k], in[k], &r, it, ids, mask)) w->failures++;
        pthread_barrier_wait(w->bar); /* the main thread reads the resident size */
        pthread_barrier_wait(w->bar);
    }
    for (int k = 0; k < 2; k++) bert8_session_free(s[k]);
    free(ids);
    free(mask);
    return NULL;
}

TEST(resident_memory_stops_growing_after_warm_up) {
    char err[1024];
    bert8_model *m = NULL, *q = NULL;
    CHECKF(bert8_model_load("models/sst2-bert-mini", NULL, &m, err, sizeof err) == BERT8_OK, "%s", err);
    if (!m) return;
    /* INT8, quantized in memory from a few batches */
    int32_t cal[4 * 64];
    for (int i = 0; i < 4 * 64; i++) cal[i] = 5 + (i * 31) % 4000;
    bert8_batch cb = {4, 64, cal, NULL, NULL};
    bert8_quant_params qp = bert8_default_quant_params();
    CHECKF(bert8_quantize(m, &cb, 1, &qp, &q, err, sizeof err) == BERT8_OK, "%s", err);
    if (!q) {
        bert8_model_free(m);
        return;
    }
    bert8_model *models[2] = {m, q};
    const int warm = UNDER_SANITIZER ? 20 : 150, rounds = 4, per = UNDER_SANITIZER ? 20 : 200;
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 3);
    worker w[2] = {{models, 11, warm, per, rounds, &bar, 0}, {models, 23, warm, per, rounds, &bar, 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, run, &w[i]);
    long base = 0, peak = 0;
    for (int round = 0; round <= rounds; round++) {
        pthread_barrier_wait(&bar);
        long now = rss_kb();
        if (round == 0) base = peak = now;
        if (now > peak) peak = now;
        if (round) printf("  after %d more forward passes: rss %ld kB (after warm-up %ld kB)\n", 4 * per * round, now, base);
        pthread_barrier_wait(&bar);
    }
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);
    CHECKF(w[0].failures + w[1].failures == 0, "%d forward passes failed", w[0].failures + w[1].failures);
    bert8_model_free(q);
    bert8_model_free(m);
    if (UNDER_SANITIZER) TU_SKIP("resident-size check off under a sanitizer (quarantined memory stays resident)");
    /* 4 rounds x 200 x 2 threads x 2 models = 3,200 forward passes after warm-up */
    CHECKF(peak - base < 2 * 1024, "resident set grew by %ld kB after warm-up", peak - base);
}

int main(void) {
    RUN(resident_memory_stops_growing_after_warm_up);
    return tu_finish();
}
