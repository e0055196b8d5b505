/* qgemm.c: INT8 GEMM front end: the best-first kernel table, the blocking table, weight
 * packing and kernel choice per shape, and the BLIS-style macro-kernel that drives the
 * micro-kernels over OpenMP threads (A packed once per call, then M x N blocks in parallel). */
#include "kernels/gemm_s8/qgemm_impl.h"

#include "base/pool.h"

#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>

/* Best first: the first entry this CPU allows (and that may be auto-selected) wins. */
static const b8_qkernel kernels[] = {
    {.name = "qs8_gemm_32x32c4__amx",
     .isa = B8_ISA_AMX,
     .auto_select = 1,
     .blis = &b8_qblis_32x32c4__amx},
    {.name = "qs8_gemm_8x32c4__avx512vnni",
     .isa = B8_ISA_AVX512_VNNI,
     .auto_select = 1,
     .blis = &b8_qblis_8x32c4__avx512vnni},
    /* oneDNN's int32 results are exact only with vpdpbusd: below VNNI it multiplies with the
     * saturating vpmaddubsw. Slower than the kernel above on this layer shape set, so it is
     * reached only when forced (kept for comparison). */
    {.name = "onednn",
     .isa = B8_ISA_AVX512_VNNI,
     .auto_select = 0,
     .prepare = b8_qgemm_dnnl_prepare,
     .release = b8_qgemm_dnnl_release,
     .run = b8_qgemm_dnnl_run},
    /* exact only for weights within +-64 (7-bit weights): the auto choice for those below
     * VNNI, passed by for any other weights */
    {.name = "qs8_gemm_4x24c4__avx2",
     .isa = B8_ISA_AVX2,
     .auto_select = 1,
     .blis = &b8_qblis_4x24c4__avx2,
     .w_abs_max = B8_W7_MAX},
    {.name = "qs8_gemm_6x16c2__avx2",
     .isa = B8_ISA_AVX2,
     .auto_select = 1,
     .blis = &b8_qblis_6x16c2__avx2},
    {.name = "qs8_gemm_8x32c4__scalar",
     .isa = B8_ISA_SCALAR,
     .auto_select = 1,
     .blis = &b8_qblis_8x32c4__scalar},
    {.name = "qs8_gemm_32x32c4__scalar",
     .isa = B8_ISA_SCALAR,
     .auto_select = 0,
     .blis = &b8_qblis_32x32c4__scalar},
    {.name = "qs8_gemm_6x16c2__scalar",
     .isa = B8_ISA_SCALAR,
     .auto_select = 0,
     .blis = &b8_qblis_6x16c2__scalar},
    {.name = "qs8_gemm_4x24c4__scalar",
     .isa = B8_ISA_SCALAR,
     .auto_select = 0,
     .blis = &b8_qblis_4x24c4__scalar,
     .w_abs_max = B8_W7_MAX},
    {.name = "qs8_gemm__scalar",
     .isa = B8_ISA_SCALAR,
     .auto_select = 0,
     .prepare = b8_qgemm_oracle_prepare,
     .run = b8_qgemm_oracle_run},
};
#define N_KERNELS ((int)(sizeof kernels / sizeof kernels[0]))

/* Blocking, one row per micro-kernel family (tuned on Zen 4: 32 KiB L1d, 1 MiB L2 per core).
 * kc_max: K per pass; an MR x kc A micro-panel (8 x 4096 = 32 KiB at most) stays in L1 while
 * W panels stream. w_block_bytes: the NC x kc slice of W a thread keeps in its L2 across the
 * row blocks of its unit. mc: rows per unit of parallel work. */
typedef struct b8_qblocking {
    const b8_qblis *blis;
    int mr, nr;
    int64_t kc_max, mc;
    size_t w_block_bytes;
    /* 1: a row operation runs inside the units (b8_qepilogue.rows_done, units of all N) only when
     * all of W fits one block (see run_blis) */
    int row_units_small_w;
    /* 1: a product one thread runs in two row blocks runs as one (see run_blis) */
    int one_thread_one_block;
    /* the multiply-adds a thread must get to join a product (run_blis): a fork and join of
     * bert8's pool costs about 0.6 us on 2 threads (Zen 4), 2^18 VNNI multiply-adds about 1.1 us.
     * AMX, 10x faster per multiply-add and not measured here, keeps on 2 threads the rule it had
     * (both threads from 2^22); on more, one thread per 2^21. */
    double macs_per_thread;
} b8_qblocking;

static const b8_qblocking blocking[] = {
    /* AMX: K in one pass (the 32-row A panel, 32 x 4096 = 128 KiB at most, streams from L2). */
    {&b8_qblis_32x32c4__amx, B8_AMX_MR, B8_AMX_NR, 65536, 128, 1024 * 1024, 1, 1, 1 << 21},
    {&b8_qblis_32x32c4__scalar, B8_AMX_MR, B8_AMX_NR, 65536, 128, 1024 * 1024, 1, 1, 1 << 21},
    {&b8_qblis_8x32c4__avx512vnni, B8_VNNI_MR, B8_VNNI_NR, 4096, 96, 512 * 1024, 0, 0, 1 << 18},
    {&b8_qblis_8x32c4__scalar, B8_VNNI_MR, B8_VNNI_NR, 4096, 96, 512 * 1024, 0, 0, 1 << 18},
    {&b8_qblis_6x16c2__avx2, B8_AVX2_MR, B8_AVX2_NR, 2048, 96, 384 * 1024, 0, 0, 1 << 18},
    {&b8_qblis_6x16c2__scalar, B8_AVX2_MR, B8_AVX2_NR, 2048, 96, 384 * 1024, 0, 0, 1 << 18},
    {&b8_qblis_4x24c4__avx2, B8_AVX2_C4_MR, B8_AVX2_C4_NR, 4096, 96, 384 * 1024, 0, 0, 1 << 18},
    {&b8_qblis_4x24c4__scalar, B8_AVX2_C4_MR, B8_AVX2_C4_NR, 4096, 96, 384 * 1024, 0, 0, 1 << 18},
};

static const b8_qblocking *blocking_for(const b8_qblis *b) {
    for (size_t i = 0; i < sizeof blocking / sizeof blocking[0]; i++)
        if (blocking[i].blis == b) return &blocking[i];
    return NULL;
}

int b8_qgemm_kernel_count(void) { return N_KERNELS; }

const char *b8_qgemm_kernel_name(int i) {
    return (i >= 0 && i < N_KERNELS) ? kernels[i].name : NULL;
}

b8_isa b8_qgemm_kernel_isa(int i) {
    return (i >= 0 && i < N_KERNELS) ? kernels[i].isa : B8_ISA_COUNT;
}

int b8_qgemm_kernel_w_abs_max(int i) {
    return (i >= 0 && i < N_KERNELS) ? kernels[i].w_abs_max : 0;
}

/* ---- packing and selection ---- */

static int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/* The offset of W[n][k] in a BLIS kernel's packed weights: panels of nr columns, each contiguous
 * over all of K, [Kp/kq][nr][kq] inside or the AMX tile layout. */
static inline size_t w_offset(const b8_qblis *b, int64_t Kp, int64_t n, int64_t k) {
    const int64_t nr = b->nr, kq = b->kq, c = n % nr;
    const size_t panel = (size_t)(n / nr) * (size_t)(Kp * nr);
    if (b->amx_tiles) return panel + (size_t)B8_AMX_W_INDEX(c, k);
    return panel + (size_t)(((k / kq) * nr + c) * kq + k % kq);
}

static bert8_status pack_blis(b8_qweight *w, const int8_t *src, const b8_qblis *b, b8_err *e) {
    int64_t N = w->N, K = w->K, nr = b->nr, kq = b->kq;
    w->Np = round_up(N, nr);
    w->Kp = round_up(K, b->kalign > kq ? b->kalign : kq);
    size_t bytes;
    if (!b8_mul_ok((size_t)w->Np, (size_t)w->Kp, &bytes))
        return b8_fail(e, BERT8_ERR_TOO_LARGE, "packed weights %lld x %lld overflow size_t",
                       (long long)w->Np, (long long)w->Kp);
    w->packed = b8_calloc_aligned(bytes, 1);
    if (!w->packed)
        return b8_fail(e, BERT8_ERR_NOMEM, "out of memory for %zu packed weight bytes", bytes);
    w->packed_bytes = bytes;
    for (int64_t n = 0; n < N; n++) {
        const int8_t *row = src + n * K;
        for (int64_t k = 0; k < K; k++) w->packed[w_offset(b, w->Kp, n, k)] = row[k];
    }
    if (b->shift128) {
        w->comp = b8_calloc_aligned((size_t)w->Np, sizeof(int32_t));
        if (!w->comp) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory for compensation");
        for (int64_t n = 0; n < N; n++) {
            int32_t s = 0;
            for (int64_t k = 0; k < K; k++) s += src[n * K + k];
            w->comp[n] = 128 * s;
        }
    }
    return BERT8_OK;
}

static const b8_qkernel *find_kernel(const char *name) {
    for (int i = 0; i < N_KERNELS; i++)
        if (strcasecmp(kernels[i].name, name) == 0) return &kernels[i];
    return NULL;
}

/* The largest |w| of the weights (128 for -128). */
static int weights_abs_max(const int8_t *w, size_t n) {
    int lo = 0, hi = 0;
    for (size_t i = 0; i < n; i++) {
        lo = w[i] < lo ? w[i] : lo;
        hi = w[i] > hi ? w[i] : hi;
    }
    return -lo > hi ? -lo : hi;
}

static bert8_status choose_kernel(const char *force, int64_t N, int64_t K, int w_abs,
                                  const b8_qkernel **out, b8_err *e) {
    const b8_cpu *cpu = b8_cpu_get();
    const char *why = "forced by the caller";
    if (!force) {
        const char *env = getenv("BERT8_QGEMM_KERNEL");
        if (env && env[0]) {
            force = env;
            why = "forced by BERT8_QGEMM_KERNEL";
        }
    }
    if (force) {
        const b8_qkernel *k = find_kernel(force);
        if (!k) {
            char names[512] = "";
            for (int i = 0; i < N_KERNELS; i++) {
                strncat(names, i ? ", " : "", sizeof names - strlen(names) - 1);
                strncat(names, kernels[i].name, sizeof names - strlen(names) - 1);
            }
            return b8_fail(e, BERT8_ERR_INVALID_ARG, "unknown INT8 GEMM kernel '%s' (known: %s)",
                           force, names);
        }
        if (cpu->level < k->isa)
            return b8_fail(e, BERT8_ERR_UNSUPPORTED,
                           "INT8 GEMM kernel %s needs %s, but this CPU allows %s%s", k->name,
                           b8_isa_name(k->isa), b8_isa_name(cpu->level),
                           cpu->level < cpu->hw_level ? " (capped by BERT8_MAX_ISA)" : "");
        if (k->w_abs_max && w_abs > k->w_abs_max)
            return b8_fail(e, BERT8_ERR_UNSUPPORTED,
                           "INT8 GEMM kernel %s is exact only for weights within +-%d (7-bit "
                           "weights: quantize with weight_bits 7), but these reach %d",
                           k->name, k->w_abs_max, w_abs);
        b8_cpu_log("qgemm N=%lld K=%lld: %s (%s)", (long long)N, (long long)K, k->name, why);
        *out = k;
        return BERT8_OK;
    }
    char skipped[768] = "";
    for (int i = 0; i < N_KERNELS; i++) {
        const b8_qkernel *k = &kernels[i];
        const char *reason = NULL;
        if (!k->auto_select) reason = "only when forced";
        else if (cpu->level < k->isa) reason = b8_isa_name(k->isa);
        else if (k->w_abs_max && w_abs > k->w_abs_max) reason = "weights within +-64";
        if (!reason) {
            b8_cpu_log("qgemm N=%lld K=%lld: %s (best the CPU allows at level %s%s%s)",
                       (long long)N, (long long)K, k->name, b8_isa_name(cpu->level),
                       skipped[0] ? "; skipped: " : "", skipped);
            *out = k;
            return BERT8_OK;
        }
        size_t len = strlen(skipped);
        snprintf(skipped + len, sizeof skipped - len, "%s%s [%s%s]", len ? ", " : "", k->name,
                 k->auto_select ? "needs " : "", reason);
    }
    return b8_fail(e, BERT8_ERR_INTERNAL, "no INT8 GEMM kernel accepts N=%lld K=%lld",
                   (long long)N, (long long)K);
}

bert8_status b8_qweight_pack(const int8_t *w, int64_t N, int64_t K, const float *w_scale,
                             const char *force_kernel, b8_qweight **out, b8_err *e) {
    if (!out) return b8_fail(e, BERT8_ERR_INVALID_ARG, "b8_qweight_pack: out is NULL");
    *out = NULL;
    if (!w || !w_scale)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "b8_qweight_pack: %s is NULL",
                       !w ? "weights" : "w_scale");
    if (N < 1 || K < 1)
        return b8_fail(e, BERT8_ERR_SHAPE, "b8_qweight_pack: shape N=%lld K=%lld is empty",
                       (long long)N, (long long)K);
    /* 65536 * 255 * 128 < 2^31: the u8 x s8 accumulators of every kernel cannot overflow. */
    if (K > 65536)
        return b8_fail(e, BERT8_ERR_UNSUPPORTED,
                       "b8_qweight_pack: K=%lld exceeds 65536 (int32 accumulators could "
                       "overflow)",
                       (long long)K);
    size_t nk;
    if (!b8_mul_ok((size_t)N, (size_t)K, &nk))
        return b8_fail(e, BERT8_ERR_TOO_LARGE, "b8_qweight_pack: N=%lld x K=%lld overflows",
                       (long long)N, (long long)K);
    bert8_status st = b8_cpu_check_env(e);
    if (st != BERT8_OK) return st;
    const b8_qkernel *k;
    st = choose_kernel(force_kernel, N, K, weights_abs_max(w, nk), &k, e);
    if (st != BERT8_OK) return st;

    b8_qweight *q = calloc(1, sizeof *q);
    if (!q) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory for packed weights");
    q->kernel = k;
    q->N = q->Np = N;
    q->K = q->Kp = K;
    if (k->blis) st = pack_blis(q, w, k->blis, e);
    else st = k->prepare(q, w, e);
    if (st == BERT8_OK) {
        q->w_scale = b8_calloc_aligned((size_t)q->Np, sizeof(float));
        q->wsum = b8_calloc_aligned((size_t)q->Np, sizeof(int32_t));
        if (!q->w_scale || !q->wsum) st = b8_fail(e, BERT8_ERR_NOMEM, "out of memory for weight scales");
        else memcpy(q->w_scale, w_scale, (size_t)N * sizeof(float));
    }
    for (int64_t n = 0; st == BERT8_OK && n < N; n++) {
        int32_t s = 0; /* |s| <= 128 * 65536 */
        for (int64_t k = 0; k < K; k++) s += w[n * K + k];
        q->wsum[n] = s;
    }
    if (st != BERT8_OK) {
        b8_qweight_free(q);
        return st;
    }
    *out = q;
    return BERT8_OK;
}

void b8_qweight_free(b8_qweight *w) {
    if (!w) return;
    if (w->kernel && w->kernel->release) w->kernel->release(w);
    if (!w->in_arena) b8_free_aligned(w->packed);
    b8_free_aligned(w->comp);
    b8_free_aligned(w->wsum);
    b8_free_aligned(w->w_scale);
    free(w);
}

bert8_status b8_qweight_set_input_zero(b8_qweight *w, int32_t z, b8_err *e) {
    if (!w) return b8_fail(e, BERT8_ERR_INVALID_ARG, "qweight_set_input_zero: NULL weights");
    if (z < -127 || z > 127)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "an input zero point must lie in [-127, 127], not %d", (int)z);
    if (z == w->in_zero) return BERT8_OK;
    if (!w->kernel->blis && w->kernel->prepare != b8_qgemm_oracle_prepare)
        return b8_fail(e, BERT8_ERR_UNSUPPORTED, "the %s INT8 GEMM takes no input zero point", w->kernel->name);
    const int64_t n_comp = w->Np > w->N ? w->Np : w->N;
    int8_t *wt = b8_malloc_aligned((size_t)(w->N * w->K));
    if (!wt) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory for an input zero point");
    if (!w->comp && !(w->comp = b8_calloc_aligned((size_t)n_comp, sizeof(int32_t)))) {
        b8_free_aligned(wt);
        return b8_fail(e, BERT8_ERR_NOMEM, "out of memory for an input zero point");
    }
    bert8_status st = b8_qweight_unpack(w, wt, e);
    if (st == BERT8_OK) {
        /* |z * sum| <= 254 * 127 * 65536 < 2^31: K is at most 65536 */
        for (int64_t n = 0; n < w->N; n++) {
            int32_t s = 0;
            for (int64_t k = 0; k < w->K; k++) s += wt[n * w->K + k];
            w->comp[n] += (z - w->in_zero) * s;
        }
        w->in_zero = z;
    }
    b8_free_aligned(wt);
    return st;
}

/* Per-row zero points: acc stays within int32 for K <= 32768 with the +128 trick
 * (32768 * 255 * 128 + 127 * 128 * 32768 < 2^31). */
#define B8_ROW_ZERO_MAX_K 32768

bool b8_qweight_takes_row_zero(const b8_qweight *w) {
    return w && w->K <= B8_ROW_ZERO_MAX_K && (w->kernel->blis || w->kernel->prepare == b8_qgemm_oracle_prepare);
}

/* ---- the weight arena ---- */

struct b8_qarena {
    void *base;
    size_t bytes;
};

#define ARENA_ALIGN ((size_t)2 << 20) /* a transparent huge page */

static size_t round_up_size(size_t x, size_t m) { return (x + m - 1) / m * m; }

/* Weights the arena can hold: a BLIS layout with bytes (oneDNN's is opaque). */
static bool gatherable(const b8_qweight *w) { return w && w->kernel->blis && w->packed && w->packed_bytes; }

bert8_status b8_qweights_gather(b8_qweight *const *ws, int64_t n, b8_qarena **out, b8_err *e) {
    *out = NULL;
    const char *env = getenv("BERT8_HUGE_PAGES");
    if (env && !strcmp(env, "0")) return BERT8_OK;
    size_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!gatherable(ws[i])) continue;
        if (!b8_add_ok(total, round_up_size(ws[i]->packed_bytes, 64), &total))
            return b8_fail(e, BERT8_ERR_TOO_LARGE, "packed weights overflow size_t");
    }
    if (!total) return BERT8_OK;
    size_t bytes = round_up_size(total, 4096), span;
    if (!b8_add_ok(bytes, ARENA_ALIGN, &span))
        return b8_fail(e, BERT8_ERR_TOO_LARGE, "packed weights overflow size_t");
    /* Map ARENA_ALIGN more than needed, then unmap what lies outside the aligned block. */
    uint8_t *raw = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return BERT8_OK; /* an optimisation: the weights stay where they are */
    uint8_t *base = (uint8_t *)round_up_size((size_t)raw, ARENA_ALIGN);
    if (base > raw) munmap(raw, (size_t)(base - raw));
    if (raw + span > base + bytes) munmap(base + bytes, (size_t)(raw + span - (base + bytes)));
#ifdef MADV_HUGEPAGE
    madvise(base, bytes, MADV_HUGEPAGE); /* advice only: without THP the arena still works */
#endif
    b8_qarena *a = malloc(sizeof *a);
    if (!a) {
        munmap(base, bytes);
        return BERT8_OK;
    }
    a->base = base;
    a->bytes = bytes;
    size_t off = 0;
    for (int64_t i = 0; i < n; i++) {
        b8_qweight *w = ws[i];
        if (!gatherable(w)) continue;
        int8_t *dst = (int8_t *)(base + off);
        memcpy(dst, w->packed, w->packed_bytes);
        if (!w->in_arena) b8_free_aligned(w->packed);
        w->packed = dst;
        w->in_arena = 1;
        off += round_up_size(w->packed_bytes, 64);
    }
    *out = a;
    return BERT8_OK;
}

void b8_qarena_free(b8_qarena *a) {
    if (!a) return;
    munmap(a->base, a->bytes);
    free(a);
}

size_t b8_qarena_bytes(const b8_qarena *a) { return a ? a->bytes : 0; }

bert8_status b8_qweight_unpack(const b8_qweight *w, int8_t *dst, b8_err *e) {
    if (!w || !dst) return b8_fail(e, BERT8_ERR_INVALID_ARG, "qweight_unpack: NULL argument");
    const b8_qblis *b = w->kernel->blis;
    if (b) {
        for (int64_t n = 0; n < w->N; n++)
            for (int64_t k = 0; k < w->K; k++) dst[n * w->K + k] = w->packed[w_offset(b, w->Kp, n, k)];
        return BERT8_OK;
    }
    if (w->kernel->prepare == b8_qgemm_oracle_prepare) {
        memcpy(dst, w->packed, (size_t)(w->N * w->K));
        return BERT8_OK;
    }
    return b8_fail(e, BERT8_ERR_UNSUPPORTED, "the %s kernel's weight layout cannot be read back", w->kernel->name);
}

const char *b8_qweight_kernel_name(const b8_qweight *w) { return w ? w->kernel->name : NULL; }
int64_t b8_qweight_n(const b8_qweight *w) { return w ? w->N : 0; }
int64_t b8_qweight_k(const b8_qweight *w) { return w ? w->K : 0; }

/* ---- the macro-kernel ---- */

/* A tile's correction for per-row zero points of A: c[i][j] -= z[i] * wsum[j], i < rows,
 * j < cols (exact int32: b8_qgemm keeps K within B8_ROW_ZERO_MAX_K). The SIMD twins do the same
 * integer operations, so every twin gives the same tile. */
typedef void (*b8_row_zero_fn)(int32_t *c, size_t ldt, int rows, int cols, const int32_t *z, const int32_t *wsum);

static void row_zero__scalar(int32_t *c, size_t ldt, int rows, int cols, const int32_t *z, const int32_t *wsum) {
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) c[i * ldt + j] -= z[i] * wsum[j];
}

__attribute__((target("avx2"))) static void row_zero__avx2(int32_t *c, size_t ldt, int rows, int cols,
                                                           const int32_t *z, const int32_t *wsum) {
    for (int i = 0; i < rows; i++) {
        const __m256i zi = _mm256_set1_epi32(z[i]);
        int j = 0;
        for (; j + 8 <= cols; j += 8) {
            __m256i *d = (__m256i *)(c + i * ldt + j);
            const __m256i w = _mm256_loadu_si256((const __m256i *)(wsum + j));
            _mm256_storeu_si256(d, _mm256_sub_epi32(_mm256_loadu_si256(d), _mm256_mullo_epi32(zi, w)));
        }
        for (; j < cols; j++) c[i * ldt + j] -= z[i] * wsum[j];
    }
}

__attribute__((target("avx512f"))) static void row_zero__avx512(int32_t *c, size_t ldt, int rows, int cols,
                                                                const int32_t *z, const int32_t *wsum) {
    for (int i = 0; i < rows; i++) {
        const __m512i zi = _mm512_set1_epi32(z[i]);
        for (int j = 0; j < cols; j += 16) {
            const __mmask16 k = cols - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (cols - j)) - 1);
            int32_t *d = c + i * ldt + j;
            const __m512i w = _mm512_maskz_loadu_epi32(k, wsum + j);
            _mm512_mask_storeu_epi32(d, k, _mm512_sub_epi32(_mm512_maskz_loadu_epi32(k, d), _mm512_mullo_epi32(zi, w)));
        }
    }
}

/* The twin the CPU (and BERT8_MAX_ISA) allows. */
static b8_row_zero_fn pick_row_zero(void) {
    const b8_isa level = b8_cpu_level();
    return level >= B8_ISA_AVX512 ? row_zero__avx512 : level >= B8_ISA_AVX2 ? row_zero__avx2 : row_zero__scalar;
}

typedef struct run_plan {
    const b8_qblis *b;
    const b8_qweight *w;
    const int8_t *A;
    int64_t lda, M;
    const b8_qepilogue *ep; /* NULL: raw int32 into C */
    b8_qepilogue_fn epilogue;
    b8_row_zero_fn row_zero; /* ep->a_zero: the per-row zero points' correction of a tile */
    int32_t *C;
    int64_t ldc;
    uint8_t *apack;      /* ceil(M/mr) micro-panels of mr x Kp */
    size_t panel_bytes;
    int64_t kc, npc;     /* K per pass (multiple of kq), passes */
    int64_t mc, nc, mb, nb;
    int64_t nsub;        /* columns of W a unit keeps in L2 while it runs its row panels */
    int row_units;       /* units own whole rows: each calls ep->rows_done on its rows */
    /* The loop order inside a unit. With many row blocks (mb > nt + 1) a thread runs several
     * units on the same W block, which stays in its L2: the row panels go outside, each with its
     * A micro-panel in L1 while the W panels stream from L2. With few, every unit reads its W
     * block from memory once (a model's weights do not stay in cache from one pass to the
     * next): the W panels go outside, each read once and used by every row panel while the
     * next one is fetched. Row panels outside would ask for the whole W block at the speed of
     * one row panel, twice what memory delivers on the Zen 5 machine (docs/benchmarks.md). */
    int w_outer;
    size_t scratch_bytes; /* per thread: one tile, plus mc x nc partial sums when npc > 1 */
    uint8_t *scratch;     /* scratch_bytes per slot of the pool */
} run_plan;

typedef struct rows_done_job {
    const b8_qepilogue *ep;
    int64_t M;
} rows_done_job;

/* The packed A micro-panel of rows ir.., from k0. */
static inline const uint8_t *panel_a(const run_plan *p, int64_t ir, int64_t k0) {
    const b8_qblis *b = p->b;
    return p->apack + (size_t)(ir / b->mr) * p->panel_bytes +
           (size_t)(k0 / b->kq) * (size_t)(b->mr * b->kq * b->a_bytes);
}

/* One tile of C: the micro-kernel over this pass's k (prefetching pf when not NULL), then on the
 * last pass the epilogue or the raw store. With several passes the tile accumulates in the
 * unit's partial sums (scratch after the tile), else in the tile at the start of scratch. */
static inline void tile(const run_plan *p, const uint8_t *a, const int8_t *wp, int64_t ir, int rows,
                        int64_t jr, int cols, int64_t m0, int64_t n0, int64_t kcur, int64_t pc,
                        const int8_t *pf, int32_t *scratch) {
    const b8_qblis *b = p->b;
    const b8_qweight *w = p->w;
    int32_t *c = scratch;
    size_t ldt = (size_t)b->nr;
    if (p->npc > 1) {
        c = scratch + b->mr * b->nr + (ir - m0) * p->nc + (jr - n0);
        ldt = (size_t)p->nc;
    }
    const size_t kg = (size_t)(kcur / b->kq);
    if (pc == p->npc - 1 && p->ep && p->ep->residual) {
        /* The epilogue's residual lines, asked for (into L2) before the product so that they
         * arrive while it runs: a load that misses there stalls the epilogue, where a store
         * would not (prefetching the plain outputs the same way gained nothing). */
        const float *res = p->ep->residual + ir * p->ep->ld_res + jr;
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < cols; j += 16) __builtin_prefetch(res + i * p->ep->ld_res + j, 0, 2);
    }
    if (pf) b->ukr_pf[rows](kg, a, wp, c, ldt, pc > 0, pf);
    else b->ukr[rows](kg, a, wp, c, ldt, pc > 0);
    if (pc != p->npc - 1) return;
    if (p->ep && p->ep->a_zero && p->row_zero) /* sum (A - z[m]) W = sum A W - z[m] * sum W */
        p->row_zero(c, ldt, rows, cols, p->ep->a_zero + ir, w->wsum + jr);
    if (p->ep) p->epilogue(c, ldt, rows, cols, ir, jr, w->comp, w->w_scale, p->ep);
    else
        b->store_s32(c, ldt, rows, cols, w->comp ? w->comp + jr : NULL, p->C + ir * p->ldc + jr,
                     p->ldc);
}

static void run_unit(const run_plan *p, int64_t mi, int64_t ni, int32_t *scratch) {
    const b8_qblis *b = p->b;
    const b8_qweight *w = p->w;
    const int mr = b->mr, nr = b->nr, kq = b->kq;
    const int64_t m0 = mi * p->mc, m1 = m0 + p->mc < p->M ? m0 + p->mc : p->M;
    const int64_t n0 = ni * p->nc, n1 = n0 + p->nc < w->Np ? n0 + p->nc : w->Np;
    if (b->unit_begin) b->unit_begin();
    for (int64_t pc = 0; pc < p->npc; pc++) {
        const int64_t k0 = pc * p->kc;
        const int64_t kcur = w->Kp - k0 < p->kc ? w->Kp - k0 : p->kc;
        for (int64_t s0 = n0; s0 < n1; s0 += p->nsub) {
            const int64_t s1 = s0 + p->nsub < n1 ? s0 + p->nsub : n1;
            if (p->w_outer) {
                /* Each W panel once, for every row panel of the unit; the next panel is asked
                 * for in halves during the first two row panels (see run_plan.w_outer). */
                const size_t half = (size_t)(kcur / kq) * 64;
                for (int64_t jr = s0; jr < s1; jr += nr) {
                    const int8_t *wp = w->packed + (jr / nr) * w->Kp * nr + k0 * nr;
                    const int8_t *next = jr + nr < n1 ? wp + w->Kp * nr : NULL;
                    const int cols = (int)(w->N - jr < nr ? w->N - jr : nr);
                    for (int64_t ir = m0; ir < m1; ir += mr) {
                        const int rows = (int)(m1 - ir < mr ? m1 - ir : mr);
                        const int8_t *pf = !next || !b->ukr_pf[rows] ? NULL
                                           : b->pf_whole ? (ir == m0 ? next : NULL)
                                           : ir - m0 < 2 * mr ? next + (ir == m0 ? 0 : half)
                                                              : NULL;
                        tile(p, panel_a(p, ir, k0), wp, ir, rows, jr, cols, m0, n0, kcur, pc, pf,
                             scratch);
                    }
                }
            } else {
                for (int64_t ir = m0; ir < m1; ir += mr) {
                    const int rows = (int)(m1 - ir < mr ? m1 - ir : mr);
                    const uint8_t *a = panel_a(p, ir, k0);
                    for (int64_t jr = s0; jr < s1; jr += nr) {
                        const int8_t *wp = w->packed + (jr / nr) * w->Kp * nr + k0 * nr;
                        const int cols = (int)(w->N - jr < nr ? w->N - jr : nr);
                        tile(p, a, wp, ir, rows, jr, cols, m0, n0, kcur, pc, NULL, scratch);
                    }
                }
            }
        }
    }
    if (b->unit_end) b->unit_end();
    if (p->row_units) p->ep->rows_done(p->ep->rows_ctx, m0, m1);
}

/* Rows handed to rows_done per call when they are passed out after the product. */
#define B8_ROWS_DONE_BLOCK 16

/* ep->rows_done over the row blocks [b0, b1). */
static void rows_done_body(void *ctx, int64_t b0, int64_t b1, int slot) {
    (void)slot;
    const b8_qepilogue *ep = ((const rows_done_job *)ctx)->ep;
    const int64_t M = ((const rows_done_job *)ctx)->M;
    for (int64_t i = b0; i < b1; i++) {
        int64_t m0 = i * B8_ROWS_DONE_BLOCK;
        ep->rows_done(ep->rows_ctx, m0, m0 + B8_ROWS_DONE_BLOCK < M ? m0 + B8_ROWS_DONE_BLOCK : M);
    }
}

/* ep->rows_done over all M rows in blocks, on nt threads. */
static void rows_done_blocks(const b8_qepilogue *ep, int64_t M, int nt) {
    rows_done_job j = {ep, M};
    b8_par_for((M + B8_ROWS_DONE_BLOCK - 1) / B8_ROWS_DONE_BLOCK, 1, nt, rows_done_body, &j);
}

static void pack_body(void *ctx, int64_t i0, int64_t i1, int slot) {
    (void)slot;
    const run_plan *p = ctx;
    const b8_qblis *b = p->b;
    const int mr = b->mr;
    for (int64_t i = i0; i < i1; i++) {
        int rows = (int)(p->M - i * mr < mr ? p->M - i * mr : mr);
        b->pack_a(p->A + i * mr * p->lda, p->lda, rows, 0, p->w->K, p->apack + (size_t)i * p->panel_bytes);
    }
}

static void unit_body(void *ctx, int64_t u0, int64_t u1, int slot) {
    const run_plan *p = ctx;
    int32_t *scratch = (int32_t *)(p->scratch + p->scratch_bytes * (size_t)slot);
    for (int64_t u = u0; u < u1; u++) run_unit(p, u % p->mb, u / p->mb, scratch);
}

static bert8_status run_blis(const int8_t *A, int64_t lda, int64_t M, const b8_qweight *w,
                             const b8_qepilogue *ep, int32_t *C, int64_t ldc, b8_buf *ws,
                             b8_err *e) {
    const b8_qblis *b = w->kernel->blis;
    const b8_qblocking *bl = blocking_for(b);
    if (!bl || bl->mr != b->mr || bl->nr != b->nr || bl->mc % b->mr)
        return b8_fail(e, BERT8_ERR_INTERNAL, "blocking table does not fit kernel %s",
                       w->kernel->name);
    run_plan p = {.b = b, .w = w, .A = A, .lda = lda, .M = M, .ep = ep, .C = C, .ldc = ldc};
    if (ep) p.epilogue = b->pick_epilogue(ep);
    /* per-row zero points: the epilogue's own correction where it has one, else a pass over each
     * tile before it */
    b8_qepilogue epz;
    if (ep && ep->a_zero && b->epi_row_zero) {
        epz = *ep;
        epz.wsum = w->wsum;
        p.ep = &epz;
    } else if (ep && ep->a_zero) {
        p.row_zero = pick_row_zero();
    }
    int mr = b->mr, nr = b->nr, kq = b->kq;

    p.npc = (w->Kp + bl->kc_max - 1) / bl->kc_max;
    p.kc = round_up((w->Kp + p.npc - 1) / p.npc, kq);
    p.npc = (w->Kp + p.kc - 1) / p.kc;
    if (b->kalign > kq && p.npc != 1)
        return b8_fail(e, BERT8_ERR_INTERNAL, "kernel %s must run K=%lld in one pass",
                       w->kernel->name, (long long)w->K);

    /* as many threads as get bl->macs_per_thread each. The rule was a flat 2^22 for the whole
     * product, which kept all-MiniLM-L6-v2's products at 4 and 8 tokens (0.6-3.5 M) on one of
     * two threads: with 2^18 per thread (VNNI) 1.32-1.35x and 1.20-1.22x faster, 16 tokens
     * 1.02-1.05x, BERT-base at 4 tokens 1.03-1.04x; the AVX2 kernels (BERT8_MAX_ISA=avx2) 1.55x,
     * 1.17-1.20x, 1.05x at 4, 8, 16 tokens (`bench_ab`, Zen 4, both orders). */
    int nt = b8_par_threads_per((double)M * (double)w->N * (double)w->K, bl->macs_per_thread);
    int64_t panels_n = w->Np / nr;
    int64_t nc = (int64_t)(bl->w_block_bytes / (size_t)p.kc) / nr * nr;
    if (nc < nr) nc = nr;
    int64_t nb = (w->Np + nc - 1) / nc;
    int64_t mc = bl->mc;
    int64_t mb = (M + mc - 1) / mc;
    mc = round_up((M + mb - 1) / mb, mr); /* row blocks of equal height, not 96 + a remainder */
    /* A product one thread runs (a group of whole sequences of a batch, see the model's
     * sequence-parallel calls) in two row blocks streams each W block twice, the second time for
     * fewer rows; as one row block each W panel comes once for all of them (w_outer below). On the
     * Xeon with AMX (129-256 rows per thread), `bench_ab` on 2 threads: BERT-base 8 x 40 tokens
     * 1.02-1.03x, 8 x 64 1.01-1.03x, 3 x 128 1.00-1.02x, 8 x 25 (one block already) and
     * all-MiniLM-L6-v2 8 x 40 level. The VNNI kernel under the VNNI cap on the same Xeon: level
     * (0.99-1.02x at 8 x 25, 8 x 40, 8 x 64, 3 x 128); not measured on a Zen, so it keeps two. */
    if (bl->one_thread_one_block && nt == 1 && mb == 2) {
        mb = 1;
        mc = round_up(M, mr);
    }
    /* A row operation after the product (ep->rows_done) runs inside the units when they can own
     * whole rows, on rows still in the cache of the thread that wrote them: units of all N, a
     * row-block count the threads share evenly, each unit reading all of W nsub columns at a
     * time. That pays where each thread runs several units anyway (more row blocks than threads
     * + 1, see w_outer); with fewer it would multiply the reads of W, so the rows are passed
     * out after the product instead (BERT-base at batch 1: 1.05x with this rule). */
    /* On the Xeon with AMX (2 MiB L2, an L3 that delivers 27 GB/s to one core) that pays only when
     * all of W fits one block: units of all N re-read a larger W from L3 once per row block, and
     * BERT-base's FFN-out (2.4 MiB of W) then ran 1.13x faster with the LayerNorm as a pass of
     * its own after the product (8 x 128, 1 thread; FFN-in with a per-token FFN-out, whose rows
     * are quantized the same way, 1.17x). */
    p.row_units = ep && ep->rows_done && mb > nt + 1 &&
                  (!bl->row_units_small_w || (size_t)w->Np * (size_t)p.kc <= bl->w_block_bytes);
    if (p.row_units) {
        nb = 1;
        mb = round_up(mb, nt);
        mc = round_up((M + mb - 1) / mb, mr);
        mb = (M + mc - 1) / mc;
    }
    /* Enough units for every thread: first split N finer, then M. */
    while (!p.row_units && mb * nb < nt && nb < panels_n) nb++;
    /* A count of units that the threads share evenly: 3 units on 2 threads (BERT-base's FFN
     * at batch 1: N = 3072 in blocks of 1 MiB of W) leave one thread idle a third of the time. */
    for (int64_t more = 0; !p.row_units && (mb * nb) % nt && more < nt && nb < panels_n; more++) nb++;
    if (!p.row_units && mb * nb < nt) {
        int64_t want_mb = (nt + nb - 1) / nb;
        mc = round_up((M + want_mb - 1) / want_mb, mr);
        mb = (M + mc - 1) / mc;
    }
    p.nc = round_up((w->Np + nb - 1) / nb, nr);
    p.nb = (w->Np + p.nc - 1) / p.nc;
    p.mc = mc;
    p.mb = mb;
    p.nsub = p.row_units ? nc : p.nc;
    /* Measured with the VNNI kernel, and with AMX on the Xeon (its prefetching kernel asks for
     * the whole next W panel during the first row panel): 1.09-1.13x at 1 x 128, 2 x 128 and the
     * SST-2 batches of 8 (135-320 rows), where W came cold from memory panel after panel. */
    p.w_outer = p.mb <= nt + 1 && b->ukr_pf[b->mr];

    int64_t panels_m = (M + mr - 1) / mr;
    size_t apack_bytes;
    p.panel_bytes = (size_t)mr * (size_t)w->Kp * (size_t)b->a_bytes;
    if (!b8_mul_ok((size_t)panels_m, p.panel_bytes, &apack_bytes))
        return b8_fail(e, BERT8_ERR_TOO_LARGE, "packed activations M=%lld x K=%lld overflow",
                       (long long)M, (long long)w->K);
    size_t tile_bytes = (size_t)mr * (size_t)nr * sizeof(int32_t);
    size_t cbuf_bytes = p.npc > 1 ? (size_t)p.mc * (size_t)p.nc * sizeof(int32_t) : 0;
    p.scratch_bytes = (tile_bytes + cbuf_bytes + 63) & ~(size_t)63;
    size_t scratch_total;
    if (!b8_mul_ok(p.scratch_bytes, (size_t)nt, &scratch_total) ||
        !b8_add_ok(scratch_total, apack_bytes, &scratch_total))
        return b8_fail(e, BERT8_ERR_TOO_LARGE, "INT8 GEMM scratch size overflows");
    b8_buf local = {0};
    if (!ws) ws = &local;
    if (b8_buf_reserve(ws, scratch_total, 1, NULL) != BERT8_OK)
        return b8_fail(e, BERT8_ERR_NOMEM, "out of memory for %zu bytes of INT8 GEMM scratch",
                       scratch_total);
    uint8_t *mem = ws->p;
    p.apack = mem + p.scratch_bytes * (size_t)nt;

    p.scratch = mem;
    /* A packed first (in chunks of 4 panels), then the units. N-major order: threads move
     * through the W blocks together, each keeping the current block in its own L2. Handed out one
     * at a time, so a thread that loses its core to another process does not hold up the call. */
    b8_par_for(panels_m, 4, nt, pack_body, &p);
    b8_par_for(p.mb * p.nb, 1, nt, unit_body, &p);
    if (ep && ep->rows_done && !p.row_units) rows_done_blocks(ep, M, nt);
    b8_buf_free(&local);
    return BERT8_OK;
}

static bert8_status check_call(const int8_t *A, int64_t lda, int64_t M, const b8_qweight *W,
                               b8_err *e) {
    if (!W) return b8_fail(e, BERT8_ERR_INVALID_ARG, "qgemm: weights are NULL");
    if (M < 0) return b8_fail(e, BERT8_ERR_INVALID_ARG, "qgemm: M=%lld < 0", (long long)M);
    if (M > 0 && !A) return b8_fail(e, BERT8_ERR_INVALID_ARG, "qgemm: A is NULL");
    if (lda < W->K)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "qgemm: lda=%lld < K=%lld", (long long)lda,
                       (long long)W->K);
    size_t span;
    if (!b8_mul_ok((size_t)M, (size_t)lda, &span))
        return b8_fail(e, BERT8_ERR_TOO_LARGE, "qgemm: M=%lld x lda=%lld overflows",
                       (long long)M, (long long)lda);
    return BERT8_OK;
}

bert8_status b8_qgemm(const int8_t *A, int64_t lda, int64_t M, const b8_qweight *W,
                      const b8_qepilogue *ep, b8_buf *ws, b8_err *e) {
    bert8_status st = check_call(A, lda, M, W, e);
    if (st != BERT8_OK) return st;
    if (!ep || !ep->a_scale)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "qgemm: %s is NULL",
                       !ep ? "epilogue" : "epilogue a_scale");
    if (!ep->out_f32 == !ep->out_s8)
        return b8_fail(e, BERT8_ERR_INVALID_ARG,
                       "qgemm: set exactly one of epilogue out_f32 and out_s8");
    if (ep->out_s8 && !ep->out_mul)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "qgemm: out_s8 needs out_mul");
    if (ep->ldc < W->N || (ep->residual && ep->ld_res < W->N))
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "qgemm: %s=%lld < N=%lld",
                       ep->ldc < W->N ? "ldc" : "ld_res",
                       (long long)(ep->ldc < W->N ? ep->ldc : ep->ld_res), (long long)W->N);
    if ((unsigned)ep->act > B8_ACT_RELU)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "qgemm: unknown activation %d", (int)ep->act);
    if (ep->out_zp != 0.0f && (!ep->out_s8 || !(ep->out_zp >= -127.0f && ep->out_zp <= 127.0f) ||
                               ep->out_zp != (float)(int)ep->out_zp))
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "qgemm: out_zp %g is not an integer in [-127, 127] with out_s8",
                       (double)ep->out_zp);
    if (ep->out_zp != 0.0f && !W->kernel->blis && W->kernel->prepare != b8_qgemm_oracle_prepare)
        return b8_fail(e, BERT8_ERR_UNSUPPORTED, "the %s INT8 GEMM takes no output zero point", W->kernel->name);
    if (ep->outliers) {
        if (ep->outliers < 0 || !ep->ox || !ep->ow || ep->ld_ox < ep->outliers || ep->ld_ow < W->N)
            return b8_fail(e, BERT8_ERR_INVALID_ARG,
                           "qgemm: %d outlier channels need ox with ld_ox >= %d and ow with ld_ow >= N=%lld",
                           ep->outliers, ep->outliers, (long long)W->N);
        if (!W->kernel->blis && W->kernel->prepare != b8_qgemm_oracle_prepare)
            return b8_fail(e, BERT8_ERR_UNSUPPORTED, "the %s INT8 GEMM takes no fp32 outlier channels", W->kernel->name);
    }
    if (ep->a_zero) {
        if (!ep->a_scale_per_row)
            return b8_fail(e, BERT8_ERR_INVALID_ARG, "qgemm: a_zero (per-row zero points) needs a_scale_per_row");
        if (!b8_qweight_takes_row_zero(W))
            return b8_fail(e, BERT8_ERR_UNSUPPORTED, "the %s INT8 GEMM takes no per-row zero points%s", W->kernel->name,
                           W->K > B8_ROW_ZERO_MAX_K ? " for K above 32768" : "");
        for (int64_t m = 0; m < M; m++)
            if (ep->a_zero[m] < -127 || ep->a_zero[m] > 127)
                return b8_fail(e, BERT8_ERR_INVALID_ARG, "qgemm: a_zero[%lld] = %d is outside [-127, 127]",
                               (long long)m, (int)ep->a_zero[m]);
    }
    if (M == 0) return BERT8_OK;
    if (W->kernel->blis) return run_blis(A, lda, M, W, ep, NULL, 0, ws, e);
    st = W->kernel->run(A, lda, M, W, ep, NULL, 0, e);
    if (st == BERT8_OK && ep->rows_done) rows_done_blocks(ep, M, b8_par_threads_for(M, 4 * B8_ROWS_DONE_BLOCK));
    return st;
}

bert8_status b8_qgemm_s32(const int8_t *A, int64_t lda, int64_t M, const b8_qweight *W,
                          int32_t *C, int64_t ldc, b8_err *e) {
    bert8_status st = check_call(A, lda, M, W, e);
    if (st != BERT8_OK) return st;
    if (M > 0 && !C) return b8_fail(e, BERT8_ERR_INVALID_ARG, "qgemm_s32: C is NULL");
    if (ldc < W->N)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "qgemm_s32: ldc=%lld < N=%lld",
                       (long long)ldc, (long long)W->N);
    if (M == 0) return BERT8_OK;
    if (W->kernel->blis) return run_blis(A, lda, M, W, NULL, C, ldc, NULL, e);
    return W->kernel->run(A, lda, M, W, NULL, C, ldc, e);
}
