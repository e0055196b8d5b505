/* sgemm.c: FP32 Linear layers on oneDNN matmul primitives with a run-time M.
 *
 * Why run-time M: a oneDNN primitive made for one exact M (its brgemm kernels) costs about a
 * millisecond to create and runs only that M. Padding-free batches give a new M almost every
 * call, so such primitives would have to be created per call or cached without bound. One
 * primitive per weight with M and the row strides left to run time is created once, at pack
 * time, and serves every batch; oneDNN then runs its jit GEMM on a plain [K][N] weight (a few
 * percent slower than brgemm at a fixed M on this machine, measured in docs/architecture.md).
 * Bias, activation and the residual add are the primitive's post-ops, so C is written once. */
#include "kernels/gemm_f32/sgemm.h"

#include <dnnl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/cpu.h"
#include "base/pool.h"
#include "kernels/dispatch.h"
#include "kernels/gemm_f32/sgemm_rows.h"

#include <math.h>

/* The CPU engine is created once and never changes: it is configuration, not state. */
static dnnl_engine_t g_engine;
static dnnl_status_t g_engine_status = dnnl_runtime_error;
static pthread_once_t g_engine_once = PTHREAD_ONCE_INIT;

static void engine_init(void) {
    b8_sgemm_apply_isa_cap();
    g_engine_status = dnnl_engine_create(&g_engine, dnnl_cpu, 0);
}

static dnnl_engine_t engine(void) {
    pthread_once(&g_engine_once, engine_init);
    return g_engine_status == dnnl_success ? g_engine : NULL;
}

static pthread_once_t g_cap_once = PTHREAD_ONCE_INIT;

static void cap_init(void) {
    static const dnnl_cpu_isa_t isa[B8_ISA_COUNT] = {
        [B8_ISA_SCALAR] = dnnl_cpu_isa_sse41, /* oneDNN's lowest jit level; its reference code below */
        [B8_ISA_AVX2] = dnnl_cpu_isa_avx2,
        [B8_ISA_AVX512] = dnnl_cpu_isa_avx512_core,
        [B8_ISA_AVX512_VNNI] = dnnl_cpu_isa_avx512_core_vnni,
        [B8_ISA_AMX] = dnnl_cpu_isa_all,
    };
    const b8_cpu *cpu = b8_cpu_get();
    if (!cpu->cap_set) return;
    dnnl_status_t s = dnnl_set_max_cpu_isa(isa[cpu->level]);
    b8_cpu_log("onednn: max cpu isa capped to bert8 level %s (%s)", b8_isa_name(cpu->level),
               s == dnnl_success ? "applied" : "oneDNN refused: it was already used");
}

void b8_sgemm_apply_isa_cap(void) { pthread_once(&g_cap_once, cap_init); }

struct b8_sgemm_w {
    int64_t n, k;
    b8_act post;
    bool acc;
    bool scalar;     /* the scalar twin runs it: packed is W [n][k] as given */
    bool rows;       /* a task head: sgemm_rows runs it (batch-invariant), packed is W [n][k] */
    void *packed;    /* W in the primitive's layout (or [n][k] for the twin), 64-byte aligned */
    float *bias;     /* [n] */
    dnnl_memory_desc_t wmd;
    dnnl_primitive_t prim;
    dnnl_memory_desc_t spmd; /* the primitive's scratchpad (user-managed; usually 0 bytes) */
    size_t sp_bytes;
};

/* The scalar twin: plain loops, k ascending, then the epilogue in oneDNN's order (post-op,
 * then the accumulate). What BERT8_MAX_ISA=scalar runs, so that a capped run is capped. */
static float post_scalar(b8_act p, float v) {
    switch (p) {
    case B8_ACT_GELU: return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    case B8_ACT_GELU_TANH:
        return 0.5f * v * (1.0f + tanhf(0.79788456080286536f * (v + 0.044715f * v * v * v)));
    case B8_ACT_RELU: return v > 0.0f ? v : 0.0f;
    case B8_ACT_TANH: return tanhf(v);
    default: return v;
    }
}

typedef struct sjob {
    const b8_sgemm_w *w;
    const float *a;
    int64_t lda, m;
    float *c;
    int64_t ldc;
} sjob;

static void scalar_rows(void *ctx, int64_t i0, int64_t i1, int slot) {
    (void)slot;
    const sjob *j = ctx;
    const b8_sgemm_w *w = j->w;
    for (int64_t i = i0; i < i1; i++)
        for (int64_t n = 0; n < w->n; n++) {
            const float *wr = (const float *)w->packed + n * w->k, *ar = j->a + i * j->lda;
            float s = 0.0f;
            for (int64_t k = 0; k < w->k; k++) s = fmaf(ar[k], wr[k], s);
            float v = post_scalar(w->post, s + w->bias[n]);
            j->c[i * j->ldc + n] = w->acc ? j->c[i * j->ldc + n] + v : v;
        }
}

static void sgemm__scalar(const b8_sgemm_w *w, const float *a, int64_t lda, int64_t m, float *c, int64_t ldc) {
    sjob j = {w, a, lda, m, c, ldc};
    b8_par_for(m, 1, b8_par_threads_for(m * w->n * w->k, 1 << 20), scalar_rows, &j);
}

/* Best first; oneDNN's matmul needs at least SSE4.1 jit code, so it sits at bert8's AVX2 level
 * and a scalar cap really runs scalar code. */
static void sgemm_onednn_marker(void) {}
static void sgemm_scalar_marker(void) {}
static const b8_impl sgemm_impls[] = {
    {"sgemm_onednn_matmul", B8_ISA_AVX2, sgemm_onednn_marker},
    {"sgemm__scalar", B8_ISA_SCALAR, sgemm_scalar_marker},
};
b8_op_table b8_op_sgemm = {"sgemm", sgemm_impls, 2, -1};

static bert8_status dnnl_fail(b8_err *e, dnnl_status_t s, const char *what) {
    return b8_fail(e, s == dnnl_out_of_memory ? BERT8_ERR_NOMEM : BERT8_ERR_INTERNAL,
                   "oneDNN %s failed (status %d)", what, (int)s);
}

static void md_2d(dnnl_memory_desc_t *md, int64_t r, int64_t c, int64_t ld) {
    dnnl_dims_t dims = {r, c}, strides = {ld, 1};
    dnnl_memory_desc_init_by_strides(md, 2, dims, dnnl_f32, strides);
}

static dnnl_alg_kind_t post_alg(b8_act p) {
    switch (p) {
    case B8_ACT_GELU: return dnnl_eltwise_gelu_erf;
    case B8_ACT_GELU_TANH: return dnnl_eltwise_gelu_tanh;
    case B8_ACT_RELU: return dnnl_eltwise_relu;
    case B8_ACT_TANH: return dnnl_eltwise_tanh;
    default: return dnnl_alg_kind_undef;
    }
}

/* The run-time-M matmul descriptor: A [?][k] and C [?][n] with run-time row strides. */
/* The weight's row stride (elements) in the primitive's layout, 0 for oneDNN's choice. On an
 * AVX2 CPU oneDNN's run-time-M GEMM reads W [K][N] in place at small M, and with N a multiple of
 * 1024 floats (4 KiB rows: ffn_in's N = 3072) its loads down K fall into the same cache sets:
 * M = 128 ran at 56-62 GFLOP/s against 110-122 for N = 768 or 2304 (AMD EPYC Zen 3, 2 threads).
 * A 64-byte pad on such rows removes it. Measured only there, so only there. */
static int64_t w_stride(int64_t n) {
    if (b8_cpu_level() != B8_ISA_AVX2) return 0;
    return (n * (int64_t)sizeof(float)) % 4096 == 0 ? n + 16 : 0;
}

static dnnl_status_t make_pd(dnnl_primitive_desc_t *pd, int64_t n, int64_t k, b8_act post,
                             bool acc) {
    dnnl_engine_t eng = engine();
    if (!eng) return dnnl_runtime_error;
    const int64_t R = DNNL_RUNTIME_DIM_VAL;
    dnnl_memory_desc_t a, w, bias, c;
    md_2d(&a, R, k, R);
    md_2d(&c, R, n, R);
    dnnl_dims_t bd = {1, n}, wd = {k, n};
    dnnl_memory_desc_init_by_tag(&bias, 2, bd, dnnl_f32, dnnl_ab);
    const int64_t ldw = w_stride(n);
    if (ldw) {
        dnnl_dims_t ws = {ldw, 1};
        dnnl_memory_desc_init_by_strides(&w, 2, wd, dnnl_f32, ws);
    } else {
        dnnl_memory_desc_init_by_tag(&w, 2, wd, dnnl_f32, dnnl_format_tag_any);
    }
    dnnl_matmul_desc_t desc;
    dnnl_status_t s = dnnl_matmul_desc_init(&desc, &a, &w, &bias, &c);
    if (s != dnnl_success) return s;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    /* A user-managed scratchpad: several threads execute one primitive at once (one weight
     * shared by every session), so each call brings its own scratch memory, if any is needed. */
    if ((s = dnnl_primitive_attr_create(&attr)) != dnnl_success) return s;
    if ((s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user)) != dnnl_success) goto out;
    if (post != B8_ACT_NONE || acc) {
        if ((s = dnnl_post_ops_create(&po)) != dnnl_success) goto out;
        if (post != B8_ACT_NONE &&
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

static bert8_status pack(const float *wsrc, const float *bias, int64_t n, int64_t k, b8_act post,
                         bool accumulate, bool rows, b8_sgemm_w **out, b8_err *e) {
    *out = NULL;
    if (n <= 0 || k <= 0 || !wsrc)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "sgemm: bad weight %lld x %lld", (long long)n, (long long)k);
    if ((unsigned)post > B8_ACT_TANH)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "sgemm: unknown post-op %d", (int)post);
    b8_sgemm_w *w = calloc(1, sizeof *w);
    if (!w) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
    w->n = n;
    w->k = k;
    w->post = post;
    w->acc = accumulate;
    w->rows = rows;
    if (rows || b8_dispatch(&b8_op_sgemm)->fn == sgemm_scalar_marker) {
        size_t nk;
        w->scalar = !rows;
        w->bias = b8_calloc_aligned((size_t)n, sizeof(float));
        w->packed = b8_mul_ok((size_t)n, (size_t)k, &nk) ? b8_malloc_aligned(nk * sizeof(float)) : NULL;
        if (!w->packed || !w->bias) {
            b8_sgemm_w_free(w);
            return b8_fail(e, BERT8_ERR_NOMEM, "out of memory packing a %lld x %lld weight", (long long)n, (long long)k);
        }
        memcpy(w->packed, wsrc, nk * sizeof(float));
        if (bias) memcpy(w->bias, bias, (size_t)n * sizeof(float));
        *out = w;
        return BERT8_OK;
    }
    dnnl_engine_t eng = engine();
    if (!eng) {
        b8_sgemm_w_free(w);
        return b8_fail(e, BERT8_ERR_INTERNAL, "oneDNN CPU engine could not be created");
    }
    bert8_status st = BERT8_OK;
    dnnl_primitive_desc_t pd = NULL, rpd = NULL;
    dnnl_primitive_t reorder = NULL;
    dnnl_memory_t msrc = NULL, mdst = NULL;
    dnnl_stream_t stream = NULL;
    dnnl_status_t s;
    if ((s = make_pd(&pd, n, k, post, accumulate)) != dnnl_success ||
        (s = dnnl_primitive_create(&w->prim, pd)) != dnnl_success) {
        st = dnnl_fail(e, s, "matmul primitive creation");
        goto fail;
    }
    const char *impl = NULL;
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    b8_cpu_log("sgemm N=%lld K=%lld: oneDNN matmul %s (M at run time)", (long long)n, (long long)k,
               impl ? impl : "?");
    w->wmd = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *spmd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    if (spmd && (w->sp_bytes = dnnl_memory_desc_get_size(spmd)) > 0) w->spmd = *spmd;
    size_t bytes = dnnl_memory_desc_get_size(&w->wmd);
    w->packed = b8_malloc_aligned(bytes);
    w->bias = b8_calloc_aligned((size_t)n, sizeof(float));
    if (!w->packed || !w->bias) {
        st = b8_fail(e, BERT8_ERR_NOMEM, "out of memory packing a %lld x %lld weight", (long long)n, (long long)k);
        goto fail;
    }
    if (bias) memcpy(w->bias, bias, (size_t)n * sizeof(float));
    dnnl_memory_desc_t plain;
    dnnl_dims_t wd = {k, n};
    dnnl_memory_desc_init_by_tag(&plain, 2, wd, dnnl_f32, dnnl_ba); /* W stored as [n][k] */
    if ((s = dnnl_memory_create(&msrc, &plain, eng, (void *)wsrc)) != dnnl_success ||
        (s = dnnl_memory_create(&mdst, &w->wmd, eng, w->packed)) != dnnl_success ||
        (s = dnnl_reorder_primitive_desc_create(&rpd, &plain, eng, &w->wmd, eng, NULL)) != dnnl_success ||
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

bert8_status b8_sgemm_w_pack(const float *wsrc, const float *bias, int64_t n, int64_t k, b8_act post,
                             bool accumulate, b8_sgemm_w **out, b8_err *e) {
    return pack(wsrc, bias, n, k, post, accumulate, false, out, e);
}

bert8_status b8_sgemm_w_pack_head(const float *wsrc, const float *bias, int64_t n, int64_t k, b8_act post,
                                  b8_sgemm_w **out, b8_err *e) {
    return pack(wsrc, bias, n, k, post, false, true, out, e);
}

/* A head's product in tiles of 16 rows x 64 outputs; every output is summed in the same order
 * whatever the tiling (sgemm_rows.h), so the threads change nothing in the result. */
#define ROWS_RB 16
#define ROWS_CB 64

static void rows_tiles(void *ctx, int64_t t0, int64_t t1, int slot) {
    (void)slot;
    const sjob *j = ctx;
    const b8_sgemm_w *w = j->w;
    const b8_sgemm_rows_fn fn = b8_sgemm_rows_best();
    const int64_t ct = (w->n + ROWS_CB - 1) / ROWS_CB;
    for (int64_t t = t0; t < t1; t++) {
        int64_t i0 = t / ct * ROWS_RB, j0 = t % ct * ROWS_CB;
        int64_t mi = j->m - i0 < ROWS_RB ? j->m - i0 : ROWS_RB, j1 = w->n - j0 < ROWS_CB ? w->n : j0 + ROWS_CB;
        fn(j->a + i0 * j->lda, j->lda, mi, w->packed, w->bias, w->k, w->post, w->acc, j->c + i0 * j->ldc, j->ldc,
           j0, j1);
    }
}

static void sgemm_rows(const b8_sgemm_w *w, const float *a, int64_t lda, int64_t m, float *c, int64_t ldc) {
    const int64_t rt = (m + ROWS_RB - 1) / ROWS_RB, ct = (w->n + ROWS_CB - 1) / ROWS_CB;
    sjob j = {w, a, lda, m, c, ldc};
    b8_par_for(rt * ct, 1, b8_par_threads_for(m * w->n * w->k, 1 << 18), rows_tiles, &j);
}

void b8_sgemm_w_free(b8_sgemm_w *w) {
    if (!w) return;
    if (w->prim) dnnl_primitive_destroy(w->prim);
    b8_free_aligned(w->packed);
    b8_free_aligned(w->bias);
    free(w);
}

bert8_status b8_sgemm(const b8_sgemm_w *w, const float *a, int64_t lda, int64_t m, float *c, int64_t ldc,
                      b8_err *e) {
    if (m <= 0) return BERT8_OK;
    if (!w || !a || !c || lda < w->k || ldc < w->n)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "sgemm: bad call (lda %lld, ldc %lld)", (long long)lda,
                       (long long)ldc);
    if (w->rows) {
        sgemm_rows(w, a, lda, m, c, ldc);
        return BERT8_OK;
    }
    if (w->scalar) {
        sgemm__scalar(w, a, lda, m, c, ldc);
        return BERT8_OK;
    }
    dnnl_engine_t eng = engine();
    dnnl_memory_desc_t amd, cmd, bmd;
    md_2d(&amd, m, w->k, lda);
    md_2d(&cmd, m, w->n, ldc);
    dnnl_dims_t bd = {1, w->n};
    dnnl_memory_desc_init_by_tag(&bmd, 2, bd, dnnl_f32, dnnl_ab);
    dnnl_memory_t ma = NULL, mw = NULL, mb = NULL, mc = NULL, msp = NULL;
    dnnl_stream_t stream = NULL;
    bert8_status st = BERT8_OK;
    dnnl_status_t s;
    void *scratch = w->sp_bytes ? b8_malloc_aligned(w->sp_bytes) : NULL;
    if (w->sp_bytes && !scratch) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory (matmul scratchpad)");
    if ((w->sp_bytes && (s = dnnl_memory_create(&msp, &w->spmd, eng, scratch)) != dnnl_success) ||
        (s = dnnl_memory_create(&ma, &amd, eng, (void *)a)) != dnnl_success ||
        (s = dnnl_memory_create(&mw, &w->wmd, eng, w->packed)) != dnnl_success ||
        (s = dnnl_memory_create(&mb, &bmd, eng, w->bias)) != dnnl_success ||
        (s = dnnl_memory_create(&mc, &cmd, eng, c)) != dnnl_success ||
        (s = dnnl_stream_create(&stream, eng, dnnl_stream_default_flags)) != dnnl_success) {
        st = dnnl_fail(e, s, "matmul setup");
    } else {
        dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_BIAS, mb}, {DNNL_ARG_DST, mc},
                                   {DNNL_ARG_SCRATCHPAD, msp}};
        if ((s = dnnl_primitive_execute(w->prim, stream, msp ? 5 : 4, args)) != dnnl_success ||
            (s = dnnl_stream_wait(stream)) != dnnl_success)
            st = dnnl_fail(e, s, "matmul");
    }
    if (stream) dnnl_stream_destroy(stream);
    if (ma) dnnl_memory_destroy(ma);
    if (mw) dnnl_memory_destroy(mw);
    if (mb) dnnl_memory_destroy(mb);
    if (mc) dnnl_memory_destroy(mc);
    if (msp) dnnl_memory_destroy(msp);
    b8_free_aligned(scratch);
    return st;
}
