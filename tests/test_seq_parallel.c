/* test_seq_parallel.c: sequence-parallel INT8 calls (forward.c, split_forward) against the same
 * calls run op after op on all threads. Golden models with each task head, quantized static and
 * dynamic twice from the same calibration (once with BERT8_SEQ_PARALLEL=0 in the environment),
 * run on 2 and 3 threads: padded batches and packed mixes of lengths (1 and the model's limit
 * included) must give every output bit for bit, with the same shapes; a batch that cannot be
 * cut evenly runs op after op; the profile of a split call is charged. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "bert8.h"
#include "model/session.h"
#include "testutil.h"

static const char *const MODELS[] = {"bert_model", "bert_seqcls", "bert_qa", "bert_tokcls", "distilbert_seqcls",
                                     "xlmr_qa"};

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void) { return tu_xorshift(&rng); }

typedef struct batch {
    int64_t B, T, total;
    int64_t cu[65];
    int32_t *ids, *mask, *types; /* padded [B][T] */
    int32_t *pids, *ptypes;      /* packed [total] */
} batch;

/* B sequences; len[b] tokens each (padded to the longest). */
static void make_batch(const bert8_model_info *in, int64_t B, const int64_t *len, batch *x) {
    x->B = B;
    x->T = 0;
    x->cu[0] = 0;
    for (int64_t b = 0; b < B; b++) {
        x->T = len[b] > x->T ? len[b] : x->T;
        x->cu[b + 1] = x->cu[b] + len[b];
    }
    x->total = x->cu[B];
    x->ids = calloc((size_t)(B * x->T), sizeof(int32_t));
    x->mask = calloc((size_t)(B * x->T), sizeof(int32_t));
    x->types = calloc((size_t)(B * x->T), sizeof(int32_t));
    x->pids = calloc((size_t)x->total, sizeof(int32_t));
    x->ptypes = calloc((size_t)x->total, sizeof(int32_t));
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < x->T; t++) {
            const bool real = t < len[b];
            int32_t id = (int32_t)(3 + next() % (uint64_t)(in->vocab_size - 3));
            if (id == in->pad_token_id) id++;
            const int32_t ty = in->type_vocab_size > 1 && in->arch != BERT8_ARCH_DISTILBERT ? (int32_t)(next() % 2) : 0;
            x->ids[b * x->T + t] = real ? id : (int32_t)in->pad_token_id;
            x->mask[b * x->T + t] = real;
            x->types[b * x->T + t] = real ? ty : 0;
            if (real) {
                x->pids[x->cu[b] + t] = id;
                x->ptypes[x->cu[b] + t] = ty;
            }
        }
}

static void free_batch(batch *x) { free(x->ids), free(x->mask), free(x->types), free(x->pids), free(x->ptypes); }

static int same_tensor(const bert8_tensor *a, const bert8_tensor *b) {
    if (!a->data != !b->data || a->ndim != b->ndim) return 0;
    if (!a->data) return 1;
    int64_t n = 1;
    for (int d = 0; d < a->ndim; d++) {
        if (a->shape[d] != b->shape[d]) return 0;
        n *= a->shape[d];
    }
    return memcmp(a->data, b->data, (size_t)n * sizeof(float)) == 0;
}

static int same_outputs(const bert8_outputs *a, const bert8_outputs *b) {
    int ok = same_tensor(&a->last_hidden_state, &b->last_hidden_state) && same_tensor(&a->pooler_output, &b->pooler_output) &&
             same_tensor(&a->logits, &b->logits) && same_tensor(&a->start_logits, &b->start_logits) &&
             same_tensor(&a->end_logits, &b->end_logits) && a->num_sequences == b->num_sequences &&
             !a->cu_seqlens == !b->cu_seqlens;
    for (int64_t i = 0; ok && a->cu_seqlens && i <= a->num_sequences; i++) ok = a->cu_seqlens[i] == b->cu_seqlens[i];
    return ok;
}

/* One batch padded and packed on both models; split[0] (padded) and split[1] (packed) say whether
 * the call must split. */
static void run_batch(const char *name, const bert8_model *op, const bert8_model *sp, const batch *x, int nt,
                      const bool split[2]) {
    bert8_session *so = NULL, *ss = NULL;
    CHECK(bert8_session_create(op, &so) == BERT8_OK && bert8_session_create(sp, &ss) == BERT8_OK);
    for (int mode = 0; mode < 2 && so && ss; mode++) {
        bert8_batch pad = {x->B, x->T, x->ids, x->mask, x->types};
        bert8_packed_batch pk = {x->B, x->cu, x->pids, x->ptypes};
        bert8_outputs a, b;
        bert8_status s1 = mode ? bert8_forward_packed(so, &pk, &a) : bert8_forward(so, &pad, &a);
        bert8_status s2 = mode ? bert8_forward_packed(ss, &pk, &b) : bert8_forward(ss, &pad, &b);
        CHECKF(s1 == BERT8_OK && s2 == BERT8_OK, "%s: %s / %s", name, bert8_session_last_error(so),
               bert8_session_last_error(ss));
        if (s1 || s2) continue;
        CHECKF(so->nkids == 0 && so->groups == 0 && ss->groups == (split[mode] ? nt : 0),
               "%s %s B=%lld, %d threads: %d groups (split expected: %d)", name, mode ? "packed" : "padded",
               (long long)x->B, nt, ss->groups, (int)split[mode]);
        CHECKF(same_outputs(&a, &b), "%s %s B=%lld T=%lld, %d threads: outputs differ from the op-by-op call", name,
               mode ? "packed" : "padded", (long long)x->B, (long long)x->T, nt);
        /* a session whose calls may split keeps no workspace of its own: its op-by-op calls ran in
         * the first group's session (kid_forward) */
        CHECKF(ss->nkids >= 1 && !ss->qkv.p && !ss->ffn.p && !ss->gemm_ws.p && !ss->att.p,
               "%s %s: the call's session allocated a workspace beside its groups'", name, mode ? "packed" : "padded");
    }
    bert8_session_free(so);
    bert8_session_free(ss);
}

static void run_models(const char *name, const bert8_model *op, const bert8_model *sp) {
    const bert8_model_info *in = bert8_model_get_info(op);
    const int64_t L = in->max_seq_len;
    static const bool yes[2] = {true, true}, no[2] = {false, false}, packed_only[2] = {false, true};
    for (int nt = 2; nt <= 3; nt++) {
        bert8_set_threads(nt);
        int64_t len[64];
        batch x;
        /* padded: nt and 2 nt sequences of one length */
        for (int64_t B = nt; B <= 2 * nt; B += nt) {
            const int64_t T = 1 + (int64_t)(next() % (uint64_t)L);
            for (int64_t b = 0; b < B; b++) len[b] = T;
            make_batch(in, B, len, &x);
            run_batch(name, op, sp, &x, nt, yes);
            free_batch(&x);
        }
        /* packed: each of 4 random lengths (1 and L among them) nt times, shuffled: even groups */
        const int64_t base[4] = {1, L, 1 + (int64_t)(next() % (uint64_t)L), 1 + (int64_t)(next() % (uint64_t)L)};
        int64_t B = 0;
        for (int r = 0; r < nt; r++)
            for (int k = 0; k < 4; k++) len[B++] = base[k];
        for (int64_t b = B - 1; b > 0; b--) {
            const int64_t o = (int64_t)(next() % (uint64_t)(b + 1)), t = len[b];
            len[b] = len[o], len[o] = t;
        }
        make_batch(in, B, len, &x);
        run_batch(name, op, sp, &x, nt, yes);
        free_batch(&x);
        /* packed: nt - 1 sequences of 2 tokens and two of 1, so that one group holds only
         * length-1 sequences (as many token rows as sequences there, not in the batch); padded,
         * nt + 1 sequences do not cut evenly */
        B = 0;
        for (int r = 0; r < nt - 1; r++) len[B++] = 2;
        len[B++] = 1;
        len[B++] = 1;
        make_batch(in, B, len, &x);
        run_batch(name, op, sp, &x, nt, packed_only);
        free_batch(&x);
        /* too few sequences to cut evenly (one short of 2 nt, all one length): op after op */
        for (int64_t b = 0; b < 2 * nt - 1; b++) len[b] = 3;
        make_batch(in, 2 * nt - 1, len, &x);
        run_batch(name, op, sp, &x, nt, no);
        free_batch(&x);
    }
}

TEST(split_calls_give_the_outputs_of_op_by_op_calls_bit_for_bit) {
    const int was = bert8_get_threads();
    for (size_t i = 0; i < sizeof MODELS / sizeof *MODELS; i++) {
        char dir[1024], err[1024];
        snprintf(dir, sizeof dir, "%s/%s", tu_shared_path("golden/models"), MODELS[i]);
        bert8_model *m = NULL;
        CHECKF(bert8_model_load(dir, NULL, &m, err, sizeof err) == BERT8_OK, "%s: %s", dir, err);
        if (!m) continue;
        const bert8_model_info *in = bert8_model_get_info(m);
        int64_t len[4] = {in->max_seq_len, 5, 9, 2};
        batch cal;
        make_batch(in, 4, len, &cal);
        bert8_batch cb = {cal.B, cal.T, cal.ids, cal.mask, cal.types};
        for (int sc = 0; sc < 2; sc++) {
            bert8_quant_params qp = bert8_default_quant_params();
            qp.scheme = sc ? BERT8_SCHEME_DYNAMIC : BERT8_SCHEME_STATIC;
            bert8_model *op = NULL, *sp = NULL;
            setenv("BERT8_SEQ_PARALLEL", "0", 1);
            CHECKF(bert8_quantize(m, &cb, 1, &qp, &op, err, sizeof err) == BERT8_OK, "%s: %s", MODELS[i], err);
            unsetenv("BERT8_SEQ_PARALLEL");
            CHECKF(bert8_quantize(m, &cb, 1, &qp, &sp, err, sizeof err) == BERT8_OK, "%s: %s", MODELS[i], err);
            if (op && sp) run_models(MODELS[i], op, sp);
            bert8_model_free(op);
            bert8_model_free(sp);
        }
        free_batch(&cal);
        bert8_model_free(m);
    }
    bert8_set_threads(was);
}

TEST(a_split_call_is_profiled) {
    char err[1024];
    bert8_model *m = NULL, *q = NULL;
    CHECK(bert8_model_load(tu_shared_path("golden/models/bert_model"), NULL, &m, err, sizeof err) == BERT8_OK);
    if (!m) return;
    const bert8_model_info *in = bert8_model_get_info(m);
    int64_t len[4] = {7, 7, 7, 7};
    batch x;
    make_batch(in, 4, len, &x);
    bert8_batch b = {x.B, x.T, x.ids, x.mask, x.types};
    bert8_quant_params qp = bert8_default_quant_params();
    CHECKF(bert8_quantize(m, &b, 1, &qp, &q, err, sizeof err) == BERT8_OK, "%s", err);
    const int was = bert8_get_threads();
    bert8_set_threads(2);
    bert8_session *s = NULL;
    if (q && bert8_session_create(q, &s) == BERT8_OK) {
        bert8_session_set_profiling(s, 1);
        bert8_outputs o;
        CHECK(bert8_forward(s, &b, &o) == BERT8_OK && s->groups == 2);
        double sec[BERT8_OP_COUNT];
        bert8_session_get_profile(s, sec);
        CHECK(sec[BERT8_OP_QKV] > 0 && sec[BERT8_OP_FFN_IN] > 0 && sec[BERT8_OP_ATTENTION] > 0);
        bert8_session_free(s);
    }
    bert8_set_threads(was);
    free_batch(&x);
    bert8_model_free(q);
    bert8_model_free(m);
}

int main(void) {
    RUN(split_calls_give_the_outputs_of_op_by_op_calls_bit_for_bit);
    RUN(a_split_call_is_profiled);
    return tu_finish();
}
