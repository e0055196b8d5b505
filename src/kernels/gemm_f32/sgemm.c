/* sgemm.c: FP32 Linear layers and attention products on oneDNN matmul primitives.
 *
 * Weights are reordered once into the blocked layout oneDNN's brgemm kernels want for a
 * nominal M; the same packed layout is accepted for every other M, so a per-weight cache of
 * primitives keyed by (M, strides, post-op) serves all batch shapes. Bias, activation and the
 * residual add run as the matmul's post-ops, so the output is written once. */
#include "kernels/gemm_f32/sgemm.h"

#include <dnnl.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* The CPU engine is created once and never changes: it is configuration, not state. */
static dnnl_engine_t g_engine;
static dnnl_status_t g_engine_status = dnnl_runtime_error;
static pthread_once_t g_engine_once = PTHREAD_ONCE_INIT;

static void engine_init(void) { g_engine_status = dnnl_engine_create(&g_engine, dnnl_cpu, 0); }

static dnnl_engine_t engine(void) {
    pthread_once(&g_engine_once, engine_init);
    return g_engine_status == dnnl_success ? g_engine : NULL;
}

#define PRIM_CACHE 8

typedef struct prim_entry {
    int64_t m, lda, ldc;
    int threads; /* oneDNN sizes a primitive's parallel split when it is created */
    int post;
    bool acc;
    dnnl_primitive_t prim;
    uint64_t last_use;
} prim_entry;

struct b8_sgemm_w {
    int64_t n, k;
    void *packed;   /* blocked weights, 64-byte aligned */
    float *bias;    /* [n] */
    dnnl_memory_desc_t wmd;
    pthread_mutex_t mu;
    prim_entry cache[PRIM_CACHE];
    uint64_t tick;
    /* Evicted primitives may still be running in another thread, so they are only destroyed
     * with the weight. */
    dnnl_primitive_t *retired;
    size_t n_retired, cap_retired;
};

int64_t b8_sgemm_w_n(const b8_sgemm_w *w) { return w->n; }
int64_t b8_sgemm_w_k(const b8_sgemm_w *w) { return w->k; }

static bert8_status dnnl_fail(b8_err *e, dnnl_status_t s, const char *what) {
    return b8_fail(e, s == dnnl_out_of_memory ? BERT8_ERR_NOMEM : BERT8_ERR_INTERNAL,
                   "oneDNN %s failed (status %d)", what, (int)s);
}

static void md_2d(dnnl_memory_desc_t *md, int64_t r, int64_t c, int64_t ld) {
    dnnl_dims_t dims = {r, c}, strides = {ld, 1};
    dnnl_memory_desc_init_by_strides(md, 2, dims, dnnl_f32, strides);
}

static dnnl_alg_kind_t post_alg(b8_post p) {
    switch (p) {
    case B8_POST_GELU: return dnnl_eltwise_gelu_erf;
    case B8_POST_GELU_TANH: return dnnl_eltwise_gelu_tanh;
    case B8_POST_RELU: return dnnl_eltwise_relu;
    case B8_POST_TANH: return dnnl_eltwise_tanh;
    default: return dnnl_alg_kind_undef;
    }
}

/* Creates the matmul primitive descriptor for M rows; weights_md NULL asks for "any". */
static dnnl_status_t make_pd(dnnl_primitive_desc_t *pd, int64_t m, int64_t n, int64_t k,
                             int64_t lda, int64_t ldc, const dnnl_memory_desc_t *weights_md,
                             b8_post post, bool acc) {
    dnnl_engine_t eng = engine();
    if (!eng) return dnnl_runtime_error;
    dnnl_memory_desc_t a, w, bias, c;
    md_2d(&a, m, k, lda);
    md_2d(&c, m, n, ldc);
    dnnl_dims_t bd = {1, n};
    dnnl_memory_desc_init_by_tag(&bias, 2, bd, dnnl_f32, dnnl_ab);
    if (weights_md) {
        w = *weights_md;
    } else {
        dnnl_dims_t wd = {k, n};
        dnnl_memory_desc_init_by_tag(&w, 2, wd, dnnl_f32, dnnl_format_tag_any);
    }
    dnnl_matmul_desc_t desc;
    dnnl_status_t s = dnnl_matmul_desc_init(&desc, &a, &w, &bias, &c);
    if (s != dnnl_success) return s;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    if (post != B8_POST_NONE || acc) {
        if ((s = dnnl_primitive_attr_create(&attr)) != dnnl_success) return s;
        if ((s = dnnl_post_ops_create(&po)) != dnnl_success) goto out;
        if (post != B8_POST_NONE &&
            (s = dnnl_post_ops_append_eltwise(po, 1.0f, post_alg(post), 0.0f, 0.0f)) != dnnl_success)
            goto out;
        if (acc && (s = dnnl_post_ops_append_sum(po, 1.0f)) != dnnl_success) goto out;
        if ((s = dnnl_primitive_attr_set_post_ops(attr, po)) != dnnl_success) goto out;
    }
    s = dnnl_primitive_desc_create(pd, &desc, attr, eng, NULL);
out:
    if (po) dnnl_post_ops_destroy(po);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return s;
}

bert8_status b8_sgemm_w_pack(const float *wsrc, const float *bias, int64_t n, int64_t k,
                             b8_sgemm_w **out, b8_err *e) {
    *out = NULL;
    if (n <= 0 || k <= 0) return b8_fail(e, BERT8_ERR_INVALID_ARG, "sgemm: bad shape %lld x %lld",
                                         (long long)n, (long long)k);
    dnnl_engine_t eng = engine();
    if (!eng) return b8_fail(e, BERT8_ERR_INTERNAL, "oneDNN CPU engine could not be created");
    b8_sgemm_w *w = calloc(1, sizeof *w);
    if (!w) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
    w->n = n;
    w->k = k;
    pthread_mutex_init(&w->mu, NULL);
    bert8_status st = BERT8_OK;
    dnnl_primitive_desc_t pd = NULL, rpd = NULL;
    dnnl_primitive_t reorder = NULL;
    dnnl_memory_t msrc = NULL, mdst = NULL;
    dnnl_stream_t stream = NULL;
    dnnl_status_t s;
    /* A nominal M of 512 rows picks the layout of the large-batch kernels. */
    if ((s = make_pd(&pd, 512, n, k, k, n, NULL, B8_POST_NONE, false)) != dnnl_success) {
        st = dnnl_fail(e, s, "matmul descriptor");
        goto fail;
    }
    w->wmd = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    size_t bytes = dnnl_memory_desc_get_size(&w->wmd);
    w->packed = b8_malloc_aligned(bytes);
    w->bias = b8_calloc_aligned((size_t)n, sizeof(float));
    if (!w->packed || !w->bias) {
        st = b8_fail(e, BERT8_ERR_NOMEM, "out of memory packing a %lld x %lld weight", (long long)n,
                     (long long)k);
        goto fail;
    }
    if (bias) memcpy(w->bias, bias, (size_t)n * sizeof(float));
    dnnl_memory_desc_t plain;
    dnnl_dims_t wd = {k, n};
    dnnl_memory_desc_init_by_tag(&plain, 2, wd, dnnl_f32, dnnl_ba); /* W stored as [n][k] */
    if ((s = dnnl_memory_create(&msrc, &plain, eng, (void *)wsrc)) != dnnl_success ||
        (s = dnnl_memory_create(&mdst, &w->wmd, eng, w->packed)) != dnnl_success ||
        (s = dnnl_reorder_primitive_desc_create(&rpd, &plain, eng, &w->wmd, eng, NULL)) !=
            dnnl_success ||
        (s = dnnl_primitive_create(&reorder, rpd)) != dnnl_success ||
        (s = dnnl_stream_create(&stream, eng, dnnl_stream_default_flags)) != dnnl_success) {
        st = dnnl_fail(e, s, "weight reorder setup");
        goto fail;
    }
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, msrc}, {DNNL_ARG_TO, mdst}};
    if ((s = dnnl_primitive_execute(reorder, stream, 2, args)) != dnnl_success ||
        (s = dnnl_stream_wait(stream)) != dnnl_success) {
        st = dnnl_fail(e, s, "weight reorder");
        goto fail;
    }
    goto done;
fail:
    b8_sgemm_w_free(w);
    w = NULL;
done:
    if (stream) dnnl_stream_destroy(stream);
    if (reorder) dnnl_primitive_destroy(reorder);
    if (rpd) dnnl_primitive_desc_destroy(rpd);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (msrc) dnnl_memory_destroy(msrc);
    if (mdst) dnnl_memory_destroy(mdst);
    *out = w;
    return st;
}

void b8_sgemm_w_free(b8_sgemm_w *w) {
    if (!w) return;
    for (int i = 0; i < PRIM_CACHE; i++)
        if (w->cache[i].prim) dnnl_primitive_destroy(w->cache[i].prim);
    for (size_t i = 0; i < w->n_retired; i++) dnnl_primitive_destroy(w->retired[i]);
    free(w->retired);
    pthread_mutex_destroy(&w->mu);
    b8_free_aligned(w->packed);
    b8_free_aligned(w->bias);
    free(w);
}

/* Returns a primitive for this call's shape, creating and caching it on first use. */
static dnnl_primitive_t get_prim(b8_sgemm_w *w, int64_t m, int64_t lda, int64_t ldc, b8_post post,
                                 bool acc, dnnl_status_t *err) {
    const int threads = omp_get_max_threads();
    pthread_mutex_lock(&w->mu);
    w->tick++;
    prim_entry *victim = &w->cache[0];
    for (int i = 0; i < PRIM_CACHE; i++) {
        prim_entry *c = &w->cache[i];
        if (c->prim && c->m == m && c->lda == lda && c->ldc == ldc && c->threads == threads &&
            c->post == (int)post && c->acc == acc) {
            c->last_use = w->tick;
            dnnl_primitive_t p = c->prim;
            pthread_mutex_unlock(&w->mu);
            return p;
        }
        if (!c->prim || c->last_use < victim->last_use) victim = c;
        if (!victim->prim) break;
    }
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t prim = NULL;
    *err = make_pd(&pd, m, w->n, w->k, lda, ldc, &w->wmd, post, acc);
    if (*err == dnnl_success) *err = dnnl_primitive_create(&prim, pd);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (prim && victim->prim) {
        if (w->n_retired == w->cap_retired) {
            size_t cap = w->cap_retired ? 2 * w->cap_retired : 16;
            dnnl_primitive_t *r = realloc(w->retired, cap * sizeof *r);
            if (r) {
                w->retired = r;
                w->cap_retired = cap;
            }
        }
        if (w->n_retired < w->cap_retired) {
            w->retired[w->n_retired++] = victim->prim;
        } else { /* out of memory: fail this call, keep the cache as it is */
            pthread_mutex_unlock(&w->mu);
            *err = dnnl_out_of_memory;
            dnnl_primitive_destroy(prim);
            return NULL;
        }
    }
    if (prim) *victim = (prim_entry){m, lda, ldc, threads, (int)post, acc, prim, w->tick};
    pthread_mutex_unlock(&w->mu);
    return prim;
}

bert8_status b8_sgemm(const b8_sgemm_w *wc, const float *a, int64_t lda, int64_t m, float *c,
                      int64_t ldc, b8_post post, bool accumulate, b8_err *e) {
    b8_sgemm_w *w = (b8_sgemm_w *)wc; /* only the primitive cache changes, under its mutex */
    if (m <= 0) return BERT8_OK;
    dnnl_status_t s = dnnl_success;
    dnnl_primitive_t prim = get_prim(w, m, lda, ldc, post, accumulate, &s);
    if (!prim) return dnnl_fail(e, s, "matmul primitive creation");
    dnnl_engine_t eng = engine();
    dnnl_memory_desc_t amd, cmd, bmd;
    md_2d(&amd, m, w->k, lda);
    md_2d(&cmd, m, w->n, ldc);
    dnnl_dims_t bd = {1, w->n};
    dnnl_memory_desc_init_by_tag(&bmd, 2, bd, dnnl_f32, dnnl_ab);
    dnnl_memory_t ma = NULL, mw = NULL, mb = NULL, mc = NULL;
    dnnl_stream_t stream = NULL;
    bert8_status st = BERT8_OK;
    if ((s = dnnl_memory_create(&ma, &amd, eng, (void *)a)) != dnnl_success ||
        (s = dnnl_memory_create(&mw, &w->wmd, eng, w->packed)) != dnnl_success ||
        (s = dnnl_memory_create(&mb, &bmd, eng, w->bias)) != dnnl_success ||
        (s = dnnl_memory_create(&mc, &cmd, eng, c)) != dnnl_success ||
        (s = dnnl_stream_create(&stream, eng, dnnl_stream_default_flags)) != dnnl_success) {
        st = dnnl_fail(e, s, "matmul setup");
    } else {
        dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mw},
                                   {DNNL_ARG_BIAS, mb}, {DNNL_ARG_DST, mc}};
        if ((s = dnnl_primitive_execute(prim, stream, 4, args)) != dnnl_success ||
            (s = dnnl_stream_wait(stream)) != dnnl_success)
            st = dnnl_fail(e, s, "matmul");
    }
    if (stream) dnnl_stream_destroy(stream);
    if (ma) dnnl_memory_destroy(ma);
    if (mw) dnnl_memory_destroy(mw);
    if (mb) dnnl_memory_destroy(mb);
    if (mc) dnnl_memory_destroy(mc);
    return st;
}
