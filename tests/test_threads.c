/* test_threads.c: one model shared by several threads (the thread-safety promise of bert8.h),
 * through the public API only. A FP32 model loaded from the golden bert_seqcls folder and an
 * INT8 model quantized from it (static and dynamic) each serve 4 pthreads, every thread with
 * its own session, running batches of different shapes in a different order; every output
 * must match a single-threaded reference run. scripts/tsan.sh runs this under
 * ThreadSanitizer (label "threads").
 *
 * oneDNN is not instrumented, so ThreadSanitizer cannot see a misuse of its primitives; the
 * comparison with one thread does. (An earlier per-shape primitive cache in sgemm.c failed it
 * about one run in five; every oneDNN primitive now has one run-time-M shape and a
 * user-managed scratchpad, so concurrent execution of one primitive is allowed.) */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bert8.h"
#include "testutil.h"

#define NTHREADS 4
#define NBATCH 6
#define ROUNDS 3

typedef struct ref_batch {
    bert8_batch b;
    int32_t *ids, *mask, *types;
    float *hidden, *logits; /* reference outputs */
    size_t n_hidden, n_logits;
} ref_batch;

static ref_batch batches[NBATCH];

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)rng_state;
}

static void make_batches(int64_t vocab) {
    static const int64_t shapes[NBATCH][2] = {{1, 5}, {2, 16}, {3, 9}, {1, 64}, {4, 12}, {2, 33}};
    for (int i = 0; i < NBATCH; i++) {
        ref_batch *r = &batches[i];
        int64_t B = shapes[i][0], T = shapes[i][1];
        size_t n = (size_t)(B * T);
        r->ids = malloc(n * sizeof(int32_t));
        r->mask = malloc(n * sizeof(int32_t));
        r->types = malloc(n * sizeof(int32_t));
        for (int64_t b = 0; b < B; b++) {
            int64_t len = T - (b * 3) % T; /* rows of different lengths: padding masks */
            for (int64_t t = 0; t < T; t++) {
                size_t k = (size_t)(b * T + t);
                r->ids[k] = t < len ? (int32_t)(rnd() % (uint32_t)vocab) : 0;
                r->mask[k] = t < len;
                r->types[k] = t >= len / 2 && t < len;
            }
        }
        r->b = (bert8_batch){B, T, r->ids, r->mask, r->types};
    }
}

static void free_refs(void) {
    for (int i = 0; i < NBATCH; i++) {
        free(batches[i].hidden);
        free(batches[i].logits);
        batches[i].hidden = batches[i].logits = NULL;
    }
}

static size_t numel(const bert8_tensor *t) {
    size_t n = 1;
    for (int d = 0; d < t->ndim; d++)
        n *= (size_t)t->shape[d];
    return t->data ? n : 0;
}

static float *copy_of(const bert8_tensor *t, size_t *n) {
    *n = numel(t);
    if (!*n) return NULL;
    float *p = malloc(*n * sizeof(float));
    memcpy(p, t->data, *n * sizeof(float));
    return p;
}

/* Single-threaded reference outputs of model m for every batch. */
static void reference(const bert8_model *m) {
    free_refs();
    bert8_session *s = NULL;
    CHECK(bert8_session_create(m, &s) == BERT8_OK);
    for (int i = 0; i < NBATCH && s; i++) {
        bert8_outputs o;
        bert8_status st = bert8_forward(s, &batches[i].b, &o);
        CHECKF(st == BERT8_OK, "%s", bert8_session_last_error(s));
        if (st) continue;
        batches[i].hidden = copy_of(&o.last_hidden_state, &batches[i].n_hidden);
        batches[i].logits = copy_of(&o.logits, &batches[i].n_logits);
    }
    bert8_session_free(s);
}

typedef struct worker {
    const bert8_model *m;
    int id;
    int failures;
    double worst; /* largest difference from the reference, relative to 1 + |ref| */
    char msg[256];
} worker;

static double max_rel_diff(const float *a, const float *ref, size_t n) {
    double w = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)ref[i]) / (1.0 + fabs((double)ref[i]));
        if (!(d <= w)) w = d; /* NaN counts as the worst */
    }
    return w;
}

static void *work(void *arg) {
    worker *w = arg;
    bert8_session *s = NULL;
    if (bert8_session_create(w->m, &s) != BERT8_OK) {
        w->failures++;
        snprintf(w->msg, sizeof w->msg, "thread %d: cannot create a session", w->id);
        return NULL;
    }
    for (int round = 0; round < ROUNDS; round++) {
        for (int k = 0; k < NBATCH; k++) {
            /* each thread walks the batches in its own order, so shapes change under it */
            int i = (k * (w->id + 1) + round + w->id) % NBATCH;
            bert8_outputs o;
            if (bert8_forward(s, &batches[i].b, &o) != BERT8_OK) {
                w->failures++;
                snprintf(w->msg, sizeof w->msg, "thread %d batch %d: %s", w->id, i,
                         bert8_session_last_error(s));
                continue;
            }
            if (numel(&o.last_hidden_state) != batches[i].n_hidden ||
                numel(&o.logits) != batches[i].n_logits) {
                w->failures++;
                snprintf(w->msg, sizeof w->msg, "thread %d batch %d: output shapes differ", w->id,
                         i);
                continue;
            }
            double d1 = batches[i].n_hidden ? max_rel_diff(o.last_hidden_state.data,
                                                           batches[i].hidden, batches[i].n_hidden)
                                            : 0;
            double d2 = batches[i].n_logits
                            ? max_rel_diff(o.logits.data, batches[i].logits, batches[i].n_logits)
                            : 0;
            double d = d1 > d2 ? d1 : d2;
            if (!(d <= w->worst)) w->worst = d;
        }
    }
    bert8_session_free(s);
    return NULL;
}

/* Runs NTHREADS workers on m and checks them against the reference. The tolerance allows for
 * a different OpenMP split of a reduction in another thread; a race shows up far above it. */
static void run_threads(const bert8_model *m, const char *what) {
    reference(m);
    pthread_t th[NTHREADS];
    worker ws[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        ws[i] = (worker){m, i, 0, 0.0, ""};
        CHECK(pthread_create(&th[i], NULL, work, &ws[i]) == 0);
    }
    double worst = 0;
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(th[i], NULL);
        CHECKF(ws[i].failures == 0, "%s: %s", what, ws[i].msg);
        if (!(ws[i].worst <= worst)) worst = ws[i].worst;
    }
    printf("  %s: %d threads x %d forward calls, largest difference from one thread %.3g\n", what,
           NTHREADS, ROUNDS * NBATCH, worst);
    CHECKF(worst <= 1e-5, "%s: outputs differ from the single-threaded run by %g", what, worst);
}

static bert8_model *fp32;

TEST(fp32_model_shared_by_four_threads) {
    run_threads(fp32, "FP32");
}

TEST(int8_models_shared_by_four_threads) {
    bert8_batch calib[3] = {batches[1].b, batches[2].b, batches[4].b};
    static const bert8_scheme schemes[2] = {BERT8_SCHEME_STATIC, BERT8_SCHEME_DYNAMIC};
    for (int k = 0; k < 2; k++) {
        bert8_quant_params p = bert8_default_quant_params();
        p.scheme = schemes[k];
        bert8_model *q = NULL;
        char err[512];
        bert8_status st = bert8_quantize(fp32, calib, 3, &p, &q, err, sizeof err);
        CHECKF(st == BERT8_OK, "%s", err);
        if (st) continue;
        run_threads(q, k ? "INT8 dynamic" : "INT8 static");
        bert8_model_free(q);
    }
}

/* Sessions created and freed while other threads run forward passes on the same model. */
static void *churn(void *arg) {
    const bert8_model *m = arg;
    for (int i = 0; i < 8; i++) {
        bert8_session *s = NULL;
        if (bert8_session_create(m, &s) != BERT8_OK) return (void *)1;
        bert8_outputs o;
        if (bert8_forward(s, &batches[i % NBATCH].b, &o) != BERT8_OK) {
            bert8_session_free(s);
            return (void *)1;
        }
        bert8_session_free(s);
    }
    return NULL;
}

TEST(sessions_come_and_go_while_others_run) {
    pthread_t th[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        CHECK(pthread_create(&th[i], NULL, churn, fp32) == 0);
    for (int i = 0; i < NTHREADS; i++) {
        void *rc = NULL;
        pthread_join(th[i], &rc);
        CHECK(rc == NULL);
    }
}

int main(void) {
    char err[512];
    bert8_status st =
        bert8_model_load(tu_shared_path("golden/models/bert_seqcls"), NULL, &fp32, err, sizeof err);
    CHECKF(st == BERT8_OK, "%s", err);
    if (st) return tu_finish();
    make_batches(bert8_model_get_info(fp32)->vocab_size);
    RUN(fp32_model_shared_by_four_threads);
    RUN(int8_models_shared_by_four_threads);
    RUN(sessions_come_and_go_while_others_run);
    free_refs();
    for (int i = 0; i < NBATCH; i++) {
        free(batches[i].ids);
        free(batches[i].mask);
        free(batches[i].types);
    }
    bert8_model_free(fp32);
    return tu_finish();
}
