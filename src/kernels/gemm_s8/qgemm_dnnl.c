/* qgemm_dnnl.c: the oneDNN (2.x C API) matmul backend of the INT8 GEMM, for comparison with
 * bert8's own kernels. s8 activations x s8 weights (prepacked once into oneDNN's preferred
 * layout), int32 or fused fp32/int8 output.
 *
 * Fused form: output scales a_scale * w_scale[n] (per column), then post-ops: binary add of
 * the bias (oneDNN's own bias would be added before the scales), eltwise GELU (erf or tanh) or
 * ReLU, binary add of the residual, and for int8 output a binary multiply by out_mul and a
 * clip to [-127, 127] (oneDNN rounds to nearest even when it converts to s8). oneDNN rounds
 * after the scale and again after the bias where bert8 uses one fused multiply-add, and has
 * its own GELU: results agree within a few ulp, not bit for bit. Its int32 output goes
 * through fp32, so it is exact only while |sum| < 2^24.
 *
 * The scales are fixed when a primitive is created (oneDNN 2.6's brgemm matmul rejects
 * run-time scales and falls back to its reference code), so a_scale is part of the cache key
 * with M, the strides and the epilogue form; a static-scale layer needs one primitive per M.
 * (oneDNN 2.6's int8 matmul with a run-time M rejects binary post-ops and falls to slower
 * code, so this comparison backend keeps fixed-M primitives.) The cache holds at most
 * CACHE_SLOTS primitives per weight; shapes past that get a primitive made and destroyed
 * within the call, so memory stays bounded whatever shapes a process sees.
 * Dynamic per-row activation scales would need an M x N scale array in oneDNN 2.x, so that
 * case runs oneDNN to int32 and then bert8's scalar epilogue. Primitives are cached in the
 * weight object under a mutex. */
#include "kernels/gemm_s8/qgemm_impl.h"
#include "kernels/gemm_f32/sgemm.h"

#include <dnnl.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define CACHE_SLOTS 24

typedef struct prim_key {
    int64_t M, lda, ldc, ld_res;
    int nthr;  /* oneDNN fixes its thread count when a primitive is created */
    int out;   /* 0: s32, 1: f32, 2: s8 */
    float a_scale; /* folded into the output scales at creation */
    int bias, act, residual;
} prim_key;

typedef struct prim_slot {
    int used;
    prim_key key;
    dnnl_primitive_t prim;
} prim_slot;

typedef struct dnnl_state {
    dnnl_engine_t eng;
    dnnl_memory_desc_t w_md; /* packed weights, oneDNN's layout */
    void *w_buf;
    pthread_mutex_t mu;
    prim_slot slots[CACHE_SLOTS];
} dnnl_state;

static bert8_status dfail(b8_err *e, dnnl_status_t s, const char *what) {
    return b8_fail(e, BERT8_ERR_INTERNAL, "oneDNN %s failed (status %d)", what, (int)s);
}

static void md_2d(dnnl_memory_desc_t *md, int64_t r, int64_t c, int64_t ld_row, int64_t ld_col,
                  dnnl_data_type_t dt) {
    dnnl_dims_t dims = {r, c}, strides = {ld_row, ld_col};
    dnnl_memory_desc_init_by_strides(md, 2, dims, dt, strides);
}

/* Matmul descriptor for weights [K][N] in layout w_md (NULL: any). */
static dnnl_status_t make_pd(dnnl_primitive_desc_t *pd, dnnl_engine_t eng, const b8_qweight *w,
                             const dnnl_memory_desc_t *w_md, const prim_key *k,
                             const dnnl_primitive_attr_t attr) {
    dnnl_memory_desc_t src, wei, dst;
    md_2d(&src, k->M, w->K, k->lda, 1, dnnl_s8);
    if (w_md) {
        wei = *w_md;
    } else {
        dnnl_dims_t wd = {w->K, w->N};
        dnnl_memory_desc_init_by_tag(&wei, 2, wd, dnnl_s8, dnnl_format_tag_any);
    }
    md_2d(&dst, k->M, w->N, k->ldc, 1, k->out == 0 ? dnnl_s32 : k->out == 1 ? dnnl_f32 : dnnl_s8);
    dnnl_matmul_desc_t d;
    dnnl_status_t s = dnnl_matmul_desc_init(&d, &src, &wei, NULL, &dst);
    if (s != dnnl_success) return s;
    return dnnl_primitive_desc_create(pd, &d, attr, eng, NULL);
}

bert8_status b8_qgemm_dnnl_prepare(b8_qweight *w, const int8_t *src, b8_err *e) {
    dnnl_state *st = calloc(1, sizeof *st);
    if (!st) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory for the oneDNN backend");
    w->backend = st;
    pthread_mutex_init(&st->mu, NULL);
    b8_sgemm_apply_isa_cap();
    dnnl_status_t s = dnnl_engine_create(&st->eng, dnnl_cpu, 0);
    if (s != dnnl_success) return dfail(e, s, "engine creation");

    /* Let oneDNN pick the weight layout for a typical M (a BERT batch of sequences). */
    prim_key k = {.M = 512, .lda = w->K, .ldc = w->N, .out = 0};
    dnnl_primitive_desc_t pd = NULL;
    if ((s = make_pd(&pd, st->eng, w, NULL, &k, NULL)) != dnnl_success)
        return dfail(e, s, "matmul descriptor for weight packing");
    st->w_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const char *impl = NULL;
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    b8_cpu_log("qgemm onednn N=%lld K=%lld: matmul implementation %s", (long long)w->N,
               (long long)w->K, impl ? impl : "?");
    dnnl_primitive_desc_destroy(pd);

    size_t bytes = dnnl_memory_desc_get_size(&st->w_md);
    st->w_buf = b8_malloc_aligned(bytes);
    if (!st->w_buf) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory for oneDNN weights");
    w->packed_bytes = bytes;

    /* Our [N][K] rows are oneDNN's [K][N] weights with strides {1, K}. */
    dnnl_memory_desc_t user_md;
    md_2d(&user_md, w->K, w->N, 1, w->K, dnnl_s8);
    dnnl_memory_t um = NULL, pm = NULL;
    dnnl_primitive_desc_t rpd = NULL;
    dnnl_primitive_t reorder = NULL;
    dnnl_stream_t stream = NULL;
    bert8_status ret = BERT8_OK;
    if ((s = dnnl_memory_create(&um, &user_md, st->eng, (void *)src)) != dnnl_success ||
        (s = dnnl_memory_create(&pm, &st->w_md, st->eng, st->w_buf)) != dnnl_success ||
        (s = dnnl_reorder_primitive_desc_create(&rpd, &user_md, st->eng, &st->w_md, st->eng,
                                                NULL)) != dnnl_success ||
        (s = dnnl_primitive_create(&reorder, rpd)) != dnnl_success ||
        (s = dnnl_stream_create(&stream, st->eng, dnnl_stream_default_flags)) != dnnl_success) {
        ret = dfail(e, s, "weight reorder setup");
    } else {
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, um}, {DNNL_ARG_TO, pm}};
        if ((s = dnnl_primitive_execute(reorder, stream, 2, args)) != dnnl_success ||
            (s = dnnl_stream_wait(stream)) != dnnl_success)
            ret = dfail(e, s, "weight reorder");
    }
    if (stream) dnnl_stream_destroy(stream);
    if (reorder) dnnl_primitive_destroy(reorder);
    if (rpd) dnnl_primitive_desc_destroy(rpd);
    if (um) dnnl_memory_destroy(um);
    if (pm) dnnl_memory_destroy(pm);
    return ret;
}

void b8_qgemm_dnnl_release(b8_qweight *w) {
    dnnl_state *st = w->backend;
    if (!st) return;
    for (int i = 0; i < CACHE_SLOTS; i++)
        if (st->slots[i].used) dnnl_primitive_destroy(st->slots[i].prim);
    b8_free_aligned(st->w_buf);
    if (st->eng) dnnl_engine_destroy(st->eng);
    pthread_mutex_destroy(&st->mu);
    free(st);
    w->backend = NULL;
}

static dnnl_status_t create_prim(const dnnl_state *st, const b8_qweight *w, const prim_key *k,
                                 dnnl_primitive_t *out) {
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t s = dnnl_primitive_attr_create(&attr);
    /* user-managed scratchpad: a cached primitive runs in several threads at once, each call
     * brings its own scratch memory (if the primitive needs any) */
    if (s == dnnl_success) s = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    if (s == dnnl_success && k->out != 0) {
        float *sc = malloc((size_t)w->N * sizeof(float));
        if (!sc) s = dnnl_out_of_memory;
        for (int64_t n = 0; sc && n < w->N; n++) sc[n] = k->a_scale * w->w_scale[n];
        if (sc) s = dnnl_primitive_attr_set_output_scales(attr, w->N, 1 << 1, sc);
        free(sc);
        if (s == dnnl_success) s = dnnl_post_ops_create(&po);
        dnnl_memory_desc_t row_md, res_md;
        md_2d(&row_md, 1, w->N, w->N, 1, dnnl_f32);
        md_2d(&res_md, k->M, w->N, k->ld_res, 1, dnnl_f32);
        if (s == dnnl_success && k->bias) s = dnnl_post_ops_append_binary(po, dnnl_binary_add, &row_md);
        if (s == dnnl_success && k->act != B8_ACT_NONE) {
            dnnl_alg_kind_t alg = k->act == B8_ACT_GELU        ? dnnl_eltwise_gelu_erf
                                  : k->act == B8_ACT_GELU_TANH ? dnnl_eltwise_gelu_tanh
                                                               : dnnl_eltwise_relu;
            s = dnnl_post_ops_append_eltwise(po, 1.0f, alg, 0.0f, 0.0f);
        }
        if (s == dnnl_success && k->residual)
            s = dnnl_post_ops_append_binary(po, dnnl_binary_add, &res_md);
        if (s == dnnl_success && k->out == 2) {
            s = dnnl_post_ops_append_binary(po, dnnl_binary_mul, &row_md);
            if (s == dnnl_success)
                s = dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_clip, -B8_Q_MAX, B8_Q_MAX);
        }
        if (s == dnnl_success) s = dnnl_primitive_attr_set_post_ops(attr, po);
    }
    if (s == dnnl_success) s = make_pd(&pd, st->eng, w, &st->w_md, k, attr);
    if (s == dnnl_success) s = dnnl_primitive_create(out, pd);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (po) dnnl_post_ops_destroy(po);
    if (attr) dnnl_primitive_attr_destroy(attr);
    return s;
}

/* The cached primitive for k; *owned set when the cache was full and the caller must destroy
 * it. Cached primitives live until the weights are freed (execution is thread-safe). */
static dnnl_status_t get_prim(dnnl_state *st, const b8_qweight *w, const prim_key *k,
                              dnnl_primitive_t *out, int *owned) {
    *owned = 0;
    pthread_mutex_lock(&st->mu);
    dnnl_status_t s = dnnl_success;
    int i = 0;
    for (; i < CACHE_SLOTS && st->slots[i].used; i++)
        if (memcmp(&st->slots[i].key, k, sizeof *k) == 0) break;
    if (i < CACHE_SLOTS && st->slots[i].used) {
        *out = st->slots[i].prim;
    } else {
        s = create_prim(st, w, k, out);
        if (s == dnnl_success && i < CACHE_SLOTS) {
            st->slots[i].used = 1;
            st->slots[i].key = *k;
            st->slots[i].prim = *out;
        } else if (s == dnnl_success) {
            *owned = 1;
        }
    }
    pthread_mutex_unlock(&st->mu);
    return s;
}

bert8_status b8_qgemm_dnnl_run(const int8_t *A, int64_t lda, int64_t M, const b8_qweight *w,
                               const b8_qepilogue *ep, int32_t *C, int64_t ldc, b8_err *e) {
    dnnl_state *st = w->backend;
    int64_t N = w->N;
    int32_t *tmp = NULL;
    const b8_qepilogue *fused = ep;
    if (ep && ep->a_scale_per_row) {
        /* int32 from oneDNN, then bert8's scalar epilogue (see the header comment). */
        size_t n;
        if (!b8_mul_ok((size_t)M, (size_t)N * sizeof(int32_t), &n))
            return b8_fail(e, BERT8_ERR_TOO_LARGE, "oneDNN int32 buffer overflows");
        tmp = b8_malloc_aligned(n);
        if (!tmp) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory for oneDNN int32 output");
        C = tmp;
        ldc = N;
        fused = NULL;
    }
    prim_key k = {.M = M, .lda = lda, .ldc = fused ? fused->ldc : ldc,
                  .nthr = omp_get_max_threads()};
    if (fused) {
        k.out = fused->out_f32 ? 1 : 2;
        k.bias = fused->bias != NULL;
        k.act = fused->act;
        k.residual = fused->residual != NULL;
        k.ld_res = fused->residual ? fused->ld_res : 0;
        k.a_scale = fused->a_scale[0];
    }
    dnnl_primitive_t prim = NULL;
    int owned = 0;
    dnnl_status_t s = get_prim(st, w, &k, &prim, &owned);
    bert8_status ret = BERT8_OK;
    dnnl_memory_t mem[9] = {0};
    int nm = 0;
    dnnl_exec_arg_t args[9];
    void *scratch = NULL;
    dnnl_stream_t stream = NULL;
    if (s != dnnl_success) {
        ret = dfail(e, s, "matmul primitive creation");
        goto done;
    }
#define ADD_ARG(ARG, MD, PTR)                                                                  \
    do {                                                                                       \
        if ((s = dnnl_memory_create(&mem[nm], (MD), st->eng, (void *)(PTR))) != dnnl_success) { \
            ret = dfail(e, s, "memory creation");                                              \
            goto done;                                                                         \
        }                                                                                      \
        args[nm] = (dnnl_exec_arg_t){(ARG), mem[nm]};                                          \
        nm++;                                                                                  \
    } while (0)
    dnnl_memory_desc_t src_md, dst_md, row_md, res_md;
    md_2d(&src_md, M, w->K, lda, 1, dnnl_s8);
    md_2d(&row_md, 1, N, N, 1, dnnl_f32);
    ADD_ARG(DNNL_ARG_SRC, &src_md, A);
    ADD_ARG(DNNL_ARG_WEIGHTS, &st->w_md, st->w_buf);
    if (!fused) {
        md_2d(&dst_md, M, N, ldc, 1, dnnl_s32);
        ADD_ARG(DNNL_ARG_DST, &dst_md, C);
    } else {
        md_2d(&dst_md, M, N, fused->ldc, 1, fused->out_f32 ? dnnl_f32 : dnnl_s8);
        if (fused->out_f32) ADD_ARG(DNNL_ARG_DST, &dst_md, fused->out_f32);
        else ADD_ARG(DNNL_ARG_DST, &dst_md, fused->out_s8);
        int idx = 0;
        if (fused->bias) ADD_ARG(DNNL_ARG_ATTR_MULTIPLE_POST_OP(idx) | DNNL_ARG_SRC_1, &row_md,
                                 fused->bias);
        idx += fused->bias != NULL;
        idx += fused->act != B8_ACT_NONE;
        if (fused->residual) {
            md_2d(&res_md, M, N, fused->ld_res, 1, dnnl_f32);
            ADD_ARG(DNNL_ARG_ATTR_MULTIPLE_POST_OP(idx) | DNNL_ARG_SRC_1, &res_md,
                    fused->residual);
            idx++;
        }
        if (fused->out_s8)
            ADD_ARG(DNNL_ARG_ATTR_MULTIPLE_POST_OP(idx) | DNNL_ARG_SRC_1, &row_md, fused->out_mul);
    }
    {
        const_dnnl_primitive_desc_t ppd = NULL;
        const dnnl_memory_desc_t *spmd = NULL;
        size_t sp_bytes = 0;
        if (dnnl_primitive_get_primitive_desc(prim, &ppd) == dnnl_success &&
            (spmd = dnnl_primitive_desc_query_md(ppd, dnnl_query_scratchpad_md, 0)) != NULL)
            sp_bytes = dnnl_memory_desc_get_size(spmd);
        if (sp_bytes) {
            if (!(scratch = b8_malloc_aligned(sp_bytes))) {
                ret = b8_fail(e, BERT8_ERR_NOMEM, "out of memory (matmul scratchpad)");
                goto done;
            }
            ADD_ARG(DNNL_ARG_SCRATCHPAD, spmd, scratch);
        }
    }
#undef ADD_ARG
    if ((s = dnnl_stream_create(&stream, st->eng, dnnl_stream_default_flags)) != dnnl_success ||
        (s = dnnl_primitive_execute(prim, stream, nm, args)) != dnnl_success ||
        (s = dnnl_stream_wait(stream)) != dnnl_success) {
        ret = dfail(e, s, "matmul execution");
        goto done;
    }
    if (tmp) {
        for (int64_t m0 = 0; m0 < M; m0 += 64) {
            int rows = (int)(M - m0 < 64 ? M - m0 : 64);
            for (int64_t n0 = 0; n0 < N; n0 += 1 << 20) {
                int cols = (int)(N - n0 < (1 << 20) ? N - n0 : (1 << 20));
                b8_qepilogue__scalar(tmp + m0 * N + n0, (size_t)N, rows, cols, m0, n0, NULL,
                                     w->w_scale, ep);
            }
        }
    }
done:
    if (stream) dnnl_stream_destroy(stream);
    for (int i = 0; i < nm; i++) dnnl_memory_destroy(mem[i]);
    if (owned) dnnl_primitive_destroy(prim);
    b8_free_aligned(tmp);
    b8_free_aligned(scratch);
    return ret;
}
