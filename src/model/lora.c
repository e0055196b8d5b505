/* lora.c: folding a task's LoRA adapter into its base weight (see lora.h). */
#include "model/lora.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Slice t of a [T][a][b] adapter as FP32 (a fresh buffer of a * b floats). */
static bert8_status slice_f32(const b8_st_tensor *t, int64_t task, int64_t a, int64_t b, float **out, b8_err *e) {
    *out = NULL;
    if (t->dtype != B8_F32 && t->dtype != B8_F16 && t->dtype != B8_BF16 && t->dtype != B8_F64)
        return b8_fail(e, BERT8_ERR_UNSUPPORTED, "LoRA tensor \"%s\" has dtype %s; expected a float type", t->name,
                       b8_dtype_name(t->dtype));
    b8_st_tensor s = *t;
    const size_t per = (size_t)(a * b);
    s.data = (const char *)t->data + (size_t)task * per * b8_dtype_size(t->dtype);
    s.nbytes = per * b8_dtype_size(t->dtype);
    s.ndim = 2;
    s.shape[0] = a;
    s.shape[1] = b;
    return b8_st_to_f32(&s, per, out, e);
}

static bool shape3(const b8_st_tensor *t, int64_t d0, int64_t d1, int64_t d2) {
    return t->ndim == 3 && t->shape[0] == d0 && t->shape[1] == d1 && t->shape[2] == d2;
}

bert8_status b8_lora_fold(const b8_st *st, const b8_lora *lo, const char *base, bool table, float *w, int64_t n,
                          int64_t k, bool *applied, b8_err *e) {
    *applied = false;
    if (lo->task < 0) return BERT8_OK;
    char an[512], bn[512];
    if (snprintf(an, sizeof an, "%s%s", base, B8_LORA_A) >= (int)sizeof an ||
        snprintf(bn, sizeof bn, "%s%s", base, B8_LORA_B) >= (int)sizeof bn)
        return b8_fail(e, BERT8_ERR_FORMAT, "tensor name \"%.80s...\" is too long", base);
    const b8_st_tensor *ta = b8_st_find(st, an), *tb = b8_st_find(st, bn);
    if (!ta && !tb) return BERT8_OK;
    if (!ta || !tb)
        return b8_fail(e, BERT8_ERR_MISSING, "LoRA tensor \"%s\" is missing (its twin \"%s\" is present)",
                       ta ? bn : an, ta ? an : bn);
    const int64_t T = lo->tasks, r = lo->rank;
    /* Linear: A [T][r][k], B [T][n][r]; Embedding: A [T][n][r], B [T][r][k] */
    const int64_t a0 = table ? n : r, a1 = table ? r : k, b0 = table ? r : n, b1 = table ? k : r;
    if (!shape3(ta, T, a0, a1) || !shape3(tb, T, b0, b1))
        return b8_fail(e, BERT8_ERR_SHAPE,
                       "LoRA tensors \"%s\" [%lld,%lld,%lld] and \"%s\" [%lld,%lld,%lld] do not fit %s [%lld,%lld] "
                       "with %lld tasks (lora_adaptations) of rank %lld (lora_rank): expected [%lld,%lld,%lld] and "
                       "[%lld,%lld,%lld]",
                       an, (long long)(ta->ndim > 0 ? ta->shape[0] : 0), (long long)(ta->ndim > 1 ? ta->shape[1] : 0),
                       (long long)(ta->ndim > 2 ? ta->shape[2] : 0), bn, (long long)(tb->ndim > 0 ? tb->shape[0] : 0),
                       (long long)(tb->ndim > 1 ? tb->shape[1] : 0), (long long)(tb->ndim > 2 ? tb->shape[2] : 0),
                       table ? "the embedding" : "the Linear", (long long)n, (long long)k, (long long)T, (long long)r,
                       (long long)T, (long long)a0, (long long)a1, (long long)T, (long long)b0, (long long)b1);
    float *A = NULL, *B = NULL;
    bert8_status s = slice_f32(ta, lo->task, a0, a1, &A, e);
    if (!s) s = slice_f32(tb, lo->task, b0, b1, &B, e);
    if (s) {
        b8_free_aligned(A);
        b8_free_aligned(B);
        return s;
    }
    /* the low-rank product first, then the scale, then the sum: the parametrization's order
     * (W + (B A) * scale); L and R are the left [n][r] and right [r][k] factors */
    const float *Lf = table ? A : B, *Rf = table ? B : A;
    const float scale = lo->scale;
#pragma omp parallel for schedule(static) if (n * k > (1 << 16))
    for (int64_t i = 0; i < n; i++) {
        float *wr = w + i * k;
        const float *li = Lf + i * r;
        for (int64_t j = 0; j < k; j++) {
            float d = 0.0f;
            for (int64_t q = 0; q < r; q++) d += li[q] * Rf[q * k + j];
            wr[j] += d * scale;
        }
    }
    b8_free_aligned(A);
    b8_free_aligned(B);
    *applied = true;
    return BERT8_OK;
}

bool b8_lora_is_param(const char *name) { return strstr(name, ".parametrizations.weight.") != NULL; }
