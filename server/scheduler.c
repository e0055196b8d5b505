/* scheduler.c: the request queue and the one thread that runs the model.
 *
 * Requests arrive validated and tokenized: a job carries its inputs' token ids, and the pipeline
 * runs those (bert8_embed_ids, ...), so no text is tokenized twice. The thread takes
 * them in arrival order into a batch of at most max_batch_tokens real tokens (and at most
 * max_batch_requests inputs when set); a request larger than what is left is split, its first
 * inputs go now and the rest lead the next batch. A batch's inputs that ask for the same thing
 * (task and options) go to the pipeline in one call, which runs them padding-free, longest first;
 * the results are copied back to each request. When a request's last input has run, its done()
 * callback wakes the HTTP side. A call that fails is retried request by request, so a bad request
 * can fail only itself. */
#include <stdlib.h>
#include <string.h>

#include "server.h"

typedef struct item {
    srv_job *job;
    int64_t i0, n; /* inputs [i0, i0+n) of the job */
    int ran;
} item;

struct srv_sched {
    const bert8_pipeline *p;
    int threads;
    int64_t max_tokens, max_inputs;
    srv_metrics *m;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    srv_job *head, *tail;
    int64_t q_inputs, q_requests;
    int stopping, started;
    _Atomic int healthy;
    pthread_t th;
    /* scratch reused from batch to batch */
    item *items;
    size_t cap_items;
    bert8_token_ids *ids;
    size_t cap_ids;
    item **group;
    size_t cap_group;
    float *out;
    size_t cap_out;
};

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    if (c > SIZE_MAX / elem) return -1;
    void *q = realloc(*p, c * elem);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

static int same_work(const srv_job *a, const srv_job *b) {
    /* truncation and prompts are in the token ids already */
    return a->kind == b->kind && a->width == b->width && a->embed.pooling == b->embed.pooling && a->embed.normalize == b->embed.normalize &&
           a->embed.dimensions == b->embed.dimensions && a->score_fn == b->score_fn;
}

static void fail(srv_job *j, bert8_status st, const char *msg) {
    if (j->status) return;
    j->status = st ? st : BERT8_ERR_INTERNAL;
    snprintf(j->err, sizeof j->err, "%s", msg && *msg ? msg : bert8_status_string(j->status));
}

/* Runs items[0..n) (all the same work) in one pipeline call; returns the status. */
static bert8_status run_group(srv_sched *s, item **g, size_t n, char *err, size_t err_len) {
    srv_job *j0 = g[0]->job;
    int64_t total = 0;
    for (size_t i = 0; i < n; i++) total += g[i]->n;
    if (grow((void **)&s->ids, &s->cap_ids, (size_t)total, sizeof *s->ids)) {
        snprintf(err, err_len, "out of memory");
        return BERT8_ERR_NOMEM;
    }
    int64_t k = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(s->ids + k, g[i]->job->ids + g[i]->i0, (size_t)g[i]->n * sizeof *s->ids);
        k += g[i]->n;
    }
    bert8_status st;
    if (j0->kind == K_SPARSE) {
        bert8_sparse_embeddings sp = {0};
        st = bert8_embed_sparse_ids(s->p, total, s->ids, &sp, err, err_len);
        k = 0;
        for (size_t i = 0; i < n && !st; i++) {
            srv_job *j = g[i]->job;
            for (int64_t t = 0; t < g[i]->n && !st; t++, k++) {
                const int64_t at = g[i]->i0 + t, nz = sp.offsets[k + 1] - sp.offsets[k];
                j->rows[at] = malloc((size_t)(nz ? nz : 1) * sizeof(float));
                j->sp_index[at] = malloc((size_t)(nz ? nz : 1) * sizeof(int32_t));
                if (!j->rows[at] || !j->sp_index[at]) {
                    st = BERT8_ERR_NOMEM;
                    snprintf(err, err_len, "out of memory");
                    break;
                }
                memcpy(j->rows[at], sp.values + sp.offsets[k], (size_t)nz * sizeof(float));
                memcpy(j->sp_index[at], sp.indices + sp.offsets[k], (size_t)nz * sizeof(int32_t));
                j->row_count[at] = nz;
            }
        }
        bert8_sparse_embeddings_free(&sp);
        return st;
    }
    if (j0->kind == K_EMBED_ALL) {
        bert8_token_embeddings te = {0};
        st = bert8_embed_tokens_ids(s->p, total, s->ids, &te, err, err_len);
        if (!st) {
            k = 0;
            for (size_t i = 0; i < n && !st; i++) {
                srv_job *j = g[i]->job;
                for (int64_t t = 0; t < g[i]->n; t++, k++) {
                    int64_t rows = te.offsets[k + 1] - te.offsets[k], at = g[i]->i0 + t;
                    size_t bytes = (size_t)rows * (size_t)te.dim * sizeof(float);
                    j->rows[at] = malloc(bytes ? bytes : 1);
                    if (!j->rows[at]) {
                        st = BERT8_ERR_NOMEM;
                        snprintf(err, err_len, "out of memory");
                        break;
                    }
                    memcpy(j->rows[at], te.data + te.offsets[k] * te.dim, bytes);
                    j->row_count[at] = rows;
                }
            }
        }
        bert8_token_embeddings_free(&te);
        return st;
    }
    if ((uint64_t)total > SIZE_MAX / sizeof(float) / (uint64_t)(j0->width > 0 ? j0->width : 1) ||
        grow((void **)&s->out, &s->cap_out, (size_t)total * (size_t)j0->width, sizeof(float))) {
        snprintf(err, err_len, "out of memory");
        return BERT8_ERR_NOMEM;
    }
    if (j0->kind == K_EMBED)
        st = bert8_embed_ids(s->p, total, s->ids, &j0->embed, s->out, err, err_len);
    else
        st = bert8_classify_ids(s->p, total, s->ids, j0->score_fn, s->out, err, err_len);
    if (st) return st;
    k = 0;
    for (size_t i = 0; i < n; i++) {
        srv_job *j = g[i]->job;
        memcpy(j->out + g[i]->i0 * j->width, s->out + k * j->width, (size_t)g[i]->n * (size_t)j->width * sizeof(float));
        k += g[i]->n;
    }
    return BERT8_OK;
}

/* Pops the next batch under the lock; returns its item count (0 when the queue is empty). */
static size_t take_batch(srv_sched *s, int64_t *tokens_out, int64_t *inputs_out) {
    size_t ni = 0;
    int64_t tokens = 0, inputs = 0;
    int64_t now = srv_now_ns();
    while (s->head) {
        srv_job *j = s->head;
        int64_t i0 = j->next, k = i0;
        while (k < j->n) {
            int64_t t = j->tokens ? j->tokens[k] : 1;
            if (inputs > 0 && (tokens + t > s->max_tokens || (s->max_inputs > 0 && inputs >= s->max_inputs))) break;
            tokens += t;
            inputs++;
            k++;
        }
        if (k > i0) {
            if (grow((void **)&s->items, &s->cap_items, ni + 1, sizeof *s->items)) break;
            s->items[ni++] = (item){j, i0, k - i0, 0};
            if (i0 == 0) j->t_started = now;
        }
        s->q_inputs -= k - i0;
        j->next = k;
        if (k < j->n) break; /* the budget is spent; the rest leads the next batch */
        s->head = j->qnext;
        if (!s->head) s->tail = NULL;
        s->q_requests--;
    }
    *tokens_out = tokens;
    *inputs_out = inputs;
    return ni;
}

static void run_batch(srv_sched *s, size_t ni) {
    char err[512];
    if (grow((void **)&s->group, &s->cap_group, ni, sizeof *s->group)) {
        for (size_t a = 0; a < ni; a++) fail(s->items[a].job, BERT8_ERR_NOMEM, "out of memory");
        return;
    }
    item **g = s->group;
    for (size_t a = 0; a < ni; a++) {
        item *it = &s->items[a];
        if (it->ran) continue;
        if (it->job->status) { /* an earlier part of the request failed: skip the rest */
            it->ran = 1;
            continue;
        }
        size_t n = 0;
        for (size_t b = a; b < ni; b++)
            if (!s->items[b].ran && !s->items[b].job->status && same_work(it->job, s->items[b].job))
                g[n++] = &s->items[b];
        item **grp = g;
        err[0] = 0;
        bert8_status st = run_group(s, grp, n, err, sizeof err);
        if (st && n > 1) { /* find the request at fault: each alone */
            for (size_t i = 0; i < n; i++) {
                err[0] = 0;
                bert8_status st1 = run_group(s, &grp[i], 1, err, sizeof err);
                if (st1) fail(grp[i]->job, st1, err);
            }
        } else if (st) {
            fail(grp[0]->job, st, err);
        }
        if (st && st != BERT8_ERR_TOO_LARGE && st != BERT8_ERR_ENCODING && st != BERT8_ERR_INVALID_ARG)
            atomic_store(&s->healthy, 0);
        else
            atomic_store(&s->healthy, 1);
        for (size_t i = 0; i < n; i++) grp[i]->ran = 1;
    }
}

static void *loop(void *arg) {
    srv_sched *s = arg;
    if (s->threads > 0) bert8_set_threads(s->threads); /* OpenMP keeps its count per thread */
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->head && !s->stopping) pthread_cond_wait(&s->cv, &s->mu);
        if (!s->head && s->stopping) {
            pthread_mutex_unlock(&s->mu);
            break;
        }
        int64_t tokens, inputs;
        size_t ni = take_batch(s, &tokens, &inputs);
        pthread_mutex_unlock(&s->mu);
        if (!ni) continue;
        int64_t t0 = srv_now_ns();
        run_batch(s, ni);
        int64_t dt = srv_now_ns() - t0;
        srv_metrics_observe(s->m, H_BATCH_SIZE, (double)inputs);
        srv_metrics_observe(s->m, H_BATCH_TOKENS, (double)tokens);
        srv_metrics_observe(s->m, H_BATCH_INFERENCE, (double)dt * 1e-9);
        for (size_t a = 0; a < ni; a++) {
            srv_job *j = s->items[a].job;
            j->inference_ns += dt;
            j->finished += s->items[a].n;
            if (j->finished == j->n) j->done(j, j->done_arg); /* the job is not ours from here */
        }
    }
    return NULL;
}

bert8_status srv_sched_start(srv_sched **out, const bert8_pipeline *p, int threads, int64_t max_batch_tokens,
                             int64_t max_batch_requests, srv_metrics *m, char *err, size_t err_len) {
    *out = NULL;
    srv_sched *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, err_len, "out of memory");
        return BERT8_ERR_NOMEM;
    }
    s->p = p;
    s->threads = threads;
    s->max_tokens = max_batch_tokens;
    s->max_inputs = max_batch_requests;
    s->m = m;
    atomic_init(&s->healthy, 1);
    if (pthread_mutex_init(&s->mu, NULL) || pthread_cond_init(&s->cv, NULL)) {
        free(s);
        snprintf(err, err_len, "cannot create the scheduler's lock");
        return BERT8_ERR_INTERNAL;
    }
    if (pthread_create(&s->th, NULL, loop, s)) {
        pthread_cond_destroy(&s->cv);
        pthread_mutex_destroy(&s->mu);
        free(s);
        snprintf(err, err_len, "cannot start the scheduler thread");
        return BERT8_ERR_INTERNAL;
    }
    s->started = 1;
    *out = s;
    return BERT8_OK;
}

int srv_sched_submit(srv_sched *s, srv_job *j) {
    j->next = j->finished = 0;
    j->qnext = NULL;
    j->status = BERT8_OK;
    j->inference_ns = 0;
    j->t_enqueue = j->t_started = srv_now_ns();
    pthread_mutex_lock(&s->mu);
    if (s->stopping) {
        pthread_mutex_unlock(&s->mu);
        return -1;
    }
    if (s->tail) s->tail->qnext = j;
    else s->head = j;
    s->tail = j;
    s->q_inputs += j->n;
    s->q_requests++;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

void srv_sched_stop(srv_sched *s) {
    if (!s || !s->started) return;
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->th, NULL);
    s->started = 0;
}

void srv_sched_free(srv_sched *s) {
    if (!s) return;
    srv_sched_stop(s);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s->items);
    free(s->ids);
    free(s->group);
    free(s->out);
    free(s);
}

void srv_sched_depth(srv_sched *s, int64_t *inputs, int64_t *requests) {
    *inputs = *requests = 0;
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    *inputs = s->q_inputs;
    *requests = s->q_requests;
    pthread_mutex_unlock(&s->mu);
}

int srv_sched_healthy(srv_sched *s) { return s ? atomic_load(&s->healthy) : 0; }
