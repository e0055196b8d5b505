/* test_packed.c: padding-free (packed) batches against padded ones. For every golden model
 * (BERT, DistilBERT, XLM-R; base, sequence classification, token classification and QA heads),
 * in FP32 and in INT8 (static and dynamic scales), random mixes of sequence lengths (1 and the
 * model's limit included) run once padded (B x longest, with a mask) and once packed; the
 * packed outputs must equal the mask-1 rows of the padded run: FP32 within 1e-5 relative, and
 * INT8's hidden states bit for bit (every INT8 kernel, the LayerNorms and the attention kernel
 * work row by row or sequence by sequence; the FP32 task heads on top still round like the FP32
 * GEMM, so the head outputs are held to 1e-5 there too). */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "bert8.h"
#include "testutil.h"

static const char *const MODELS[] = {"bert_model", "bert_gelu_new", "bert_seqcls", "bert_qa", "bert_tokcls",
                                     "bert_pretraining", "bert_legacy_names", "distilbert_model", "distilbert_seqcls",
                                     "distilbert_qa", "xlmr_model", "xlmr_seqcls", "xlmr_qa", "bert_e2e", "xlmr_e2e"};

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void) { return tu_xorshift(&rng); }

typedef struct mix {
    int64_t B, T, total;
    int64_t *cu;
    int32_t *pids, *ptypes;     /* packed */
    int32_t *ids, *mask, *types; /* padded [B][T] */
} mix;

static void make_mix(const bert8_model_info *in, int64_t B, bool with_max, mix *m) {
    m->B = B;
    m->cu = calloc((size_t)B + 1, sizeof *m->cu);
    int64_t *len = calloc((size_t)B, sizeof *len);
    m->T = 0;
    for (int64_t b = 0; b < B; b++) {
        len[b] = b == 0 ? 1 : (with_max && b == 1) ? in->max_seq_len : 1 + (int64_t)(next() % (uint64_t)in->max_seq_len);
        if (len[b] > m->T) m->T = len[b];
        m->cu[b + 1] = m->cu[b] + len[b];
    }
    m->total = m->cu[B];
    m->pids = malloc((size_t)m->total * sizeof(int32_t));
    m->ptypes = malloc((size_t)m->total * sizeof(int32_t));
    m->ids = calloc((size_t)(B * m->T), sizeof(int32_t));
    m->mask = calloc((size_t)(B * m->T), sizeof(int32_t));
    m->types = calloc((size_t)(B * m->T), sizeof(int32_t));
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < m->T; t++) {
            const bool real = t < len[b];
            int32_t id = (int32_t)(3 + next() % (uint64_t)(in->vocab_size - 3));
            if (id == in->pad_token_id) id++;
            int32_t ty = in->type_vocab_size > 1 && in->arch != BERT8_ARCH_DISTILBERT ? (int32_t)(next() % 2) : 0;
            m->ids[b * m->T + t] = real ? id : (int32_t)in->pad_token_id;
            m->mask[b * m->T + t] = real;
            m->types[b * m->T + t] = real ? ty : 0;
            if (real) {
                m->pids[m->cu[b] + t] = id;
                m->ptypes[m->cu[b] + t] = ty;
            }
        }
    free(len);
}

static void free_mix(mix *m) {
    free(m->cu), free(m->pids), free(m->ptypes), free(m->ids), free(m->mask), free(m->types);
}

/* Token rows: packed [total][w] against padded [B][T][w]. exact: bit for bit. */
static double cmp_tokens(const bert8_tensor *pk, const bert8_tensor *pd, const mix *m, int64_t w, bool exact,
                         int *diff) {
    double worst = 0;
    for (int64_t b = 0; b < m->B; b++)
        for (int64_t t = 0; t < m->cu[b + 1] - m->cu[b]; t++) {
            const float *x = pk->data + (m->cu[b] + t) * w, *y = pd->data + (b * m->T + t) * w;
            if (exact) *diff += memcmp(x, y, (size_t)w * sizeof(float)) != 0;
            for (int64_t j = 0; j < w; j++) worst = fmax(worst, fabs(x[j] - y[j]) / (1.0 + fabs(y[j])));
        }
    return worst;
}

static double cmp_rows(const bert8_tensor *pk, const bert8_tensor *pd, int64_t n) {
    double worst = 0;
    for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs(pk->data[i] - pd->data[i]) / (1.0 + fabs(pd->data[i])));
    return worst;
}

/* Runs every mix padded and packed on one model; int8: hidden states must match exactly. */
static void run_model(const char *name, const bert8_model *m, bool int8) {
    const bert8_model_info *in = bert8_model_get_info(m);
    bert8_session *s1 = NULL, *s2 = NULL;
    CHECK(bert8_session_create(m, &s1) == BERT8_OK && bert8_session_create(m, &s2) == BERT8_OK);
    const int64_t H = in->hidden_size;
    for (int k = 0; k < 4; k++) {
        mix mx;
        make_mix(in, k == 0 ? 1 : 1 + (int64_t)(next() % 6), k == 1, &mx);
        bert8_batch pad = {mx.B, mx.T, mx.ids, mx.mask, mx.types};
        bert8_packed_batch pk = {mx.B, mx.cu, mx.pids, mx.ptypes};
        bert8_outputs a, b;
        bert8_status st1 = bert8_forward(s1, &pad, &a), st2 = bert8_forward_packed(s2, &pk, &b);
        CHECKF(st1 == BERT8_OK && st2 == BERT8_OK, "%s: %s / %s", name, bert8_session_last_error(s1),
               bert8_session_last_error(s2));
        if (st1 || st2) {
            free_mix(&mx);
            continue;
        }
        CHECK(b.cu_seqlens && b.num_sequences == mx.B && b.last_hidden_state.ndim == 2 &&
              b.last_hidden_state.shape[0] == mx.total && b.last_hidden_state.shape[1] == H);
        int diff = 0;
        double w = cmp_tokens(&b.last_hidden_state, &a.last_hidden_state, &mx, H, int8, &diff);
        CHECKF(w < 1e-5 && diff == 0, "%s%s B=%lld T=%lld: hidden states deviate %.3g (%d rows not bit-identical)",
               name, int8 ? " int8" : "", (long long)mx.B, (long long)mx.T, w, diff);
        if (a.pooler_output.data) CHECK(cmp_rows(&b.pooler_output, &a.pooler_output, mx.B * H) < 1e-5);
        if (in->head == BERT8_HEAD_SEQ_CLS)
            CHECKF(cmp_rows(&b.logits, &a.logits, mx.B * in->num_labels) < 1e-5, "%s: sequence logits", name);
        if (in->head == BERT8_HEAD_TOKEN_CLS) {
            int d2 = 0;
            CHECKF(b.logits.ndim == 2 && cmp_tokens(&b.logits, &a.logits, &mx, in->num_labels, false, &d2) < 1e-5,
                   "%s: token logits", name);
        }
        if (in->head == BERT8_HEAD_QA) {
            int d2 = 0;
            CHECKF(b.start_logits.ndim == 1 && cmp_tokens(&b.start_logits, &a.start_logits, &mx, 1, false, &d2) < 1e-5 &&
                       cmp_tokens(&b.end_logits, &a.end_logits, &mx, 1, false, &d2) < 1e-5,
                   "%s: start/end logits", name);
        }
        free_mix(&mx);
    }
    bert8_session_free(s1);
    bert8_session_free(s2);
}

TEST(packed_outputs_equal_the_mask_1_rows_of_padded_runs) {
    for (size_t i = 0; i < sizeof MODELS / sizeof *MODELS; i++) {
        char dir[1024], err[1024];
        snprintf(dir, sizeof dir, "%s", tu_shared_path("golden/models"));
        snprintf(dir + strlen(dir), sizeof dir - strlen(dir), "/%s", MODELS[i]);
        bert8_model *m = NULL;
        CHECKF(bert8_model_load(dir, NULL, &m, err, sizeof err) == BERT8_OK, "%s: %s", dir, err);
        if (!m) continue;
        run_model(MODELS[i], m, false);
        /* INT8, static and dynamic, calibrated on a few random mixes */
        const bert8_model_info *in = bert8_model_get_info(m);
        mix cal[3];
        bert8_batch cb[3];
        for (int k = 0; k < 3; k++) {
            make_mix(in, 4, false, &cal[k]);
            cb[k] = (bert8_batch){cal[k].B, cal[k].T, cal[k].ids, cal[k].mask, cal[k].types};
        }
        for (int sc = 0; sc < 2; sc++) {
            bert8_quant_params qp = bert8_default_quant_params();
            qp.scheme = sc ? BERT8_SCHEME_DYNAMIC : BERT8_SCHEME_STATIC;
            bert8_model *q = NULL;
            CHECKF(bert8_quantize(m, cb, 3, &qp, &q, err, sizeof err) == BERT8_OK, "%s: %s", MODELS[i], err);
            if (q) run_model(MODELS[i], q, true);
            bert8_model_free(q);
        }
        for (int k = 0; k < 3; k++) free_mix(&cal[k]);
        bert8_model_free(m);
    }
}

TEST(bad_packed_batches_are_refused) {
    char err[1024];
    bert8_model *m = NULL;
    CHECK(bert8_model_load(tu_shared_path("golden/models/bert_model"), NULL, &m, err, sizeof err) == BERT8_OK);
    bert8_session *s = NULL;
    CHECK(m && bert8_session_create(m, &s) == BERT8_OK);
    if (!s) return;
    int32_t ids[300];
    for (int i = 0; i < 300; i++) ids[i] = 5;
    bert8_outputs o;
    int64_t cu0[3] = {1, 2, 3}, cu1[3] = {0, 2, 2}, cu2[3] = {0, 200, 201}, cu3[3] = {0, 3, 2};
    bert8_packed_batch b = {2, cu0, ids, NULL};
    CHECK(bert8_forward_packed(s, &b, &o) == BERT8_ERR_INVALID_ARG && strstr(bert8_session_last_error(s), "cu_seqlens[0]"));
    b.cu_seqlens = cu1;
    CHECK(bert8_forward_packed(s, &b, &o) == BERT8_ERR_INVALID_ARG && strstr(bert8_session_last_error(s), "sequence 1"));
    b.cu_seqlens = cu3;
    CHECK(bert8_forward_packed(s, &b, &o) == BERT8_ERR_INVALID_ARG);
    b.cu_seqlens = cu2;
    CHECK(bert8_forward_packed(s, &b, &o) == BERT8_ERR_TOO_LARGE && strstr(bert8_session_last_error(s), "sequence 0"));
    b.num_sequences = 0;
    CHECK(bert8_forward_packed(s, &b, &o) == BERT8_ERR_INVALID_ARG);
    CHECK(bert8_forward_packed(s, NULL, &o) == BERT8_ERR_INVALID_ARG);
    ids[1] = 1000000;
    b.num_sequences = 1;
    int64_t cu4[2] = {0, 4};
    b.cu_seqlens = cu4;
    CHECK(bert8_forward_packed(s, &b, &o) == BERT8_ERR_INVALID_ARG && strstr(bert8_session_last_error(s), "vocabulary"));
    bert8_session_free(s);
    bert8_model_free(m);
}

int main(void) {
    RUN(packed_outputs_equal_the_mask_1_rows_of_padded_runs);
    RUN(bad_packed_batches_are_refused);
    return tu_finish();
}
