/* fillmask.c: fill-mask, as transformers' FillMaskPipeline: the masked-LM head's top-k tokens
 * at every mask token of each text, with their softmax scores and the text decoded with each
 * token in place of the mask. */
#include <stdlib.h>
#include <string.h>

#include "pipeline/pipeline_internal.h"

typedef struct fm_ctx {
    const bert8_encoding *enc;
    int32_t mask_id;
    const int64_t *slot0; /* [rows]: the first mask slot of each row */
    int64_t H;
    float *hidden;        /* [masks][H] */
} fm_ctx;

static bert8_status fm_row(void *ctx, const b8_rowout *o, b8_err *e) {
    (void)e;
    fm_ctx *c = ctx;
    const int32_t *ids = c->enc->input_ids + o->tag * c->enc->seq;
    int64_t k = c->slot0[o->tag];
    for (int64_t t = 0; t < o->len; t++)
        if (ids[t] == c->mask_id) memcpy(c->hidden + (k++) * c->H, o->hidden + t * c->H, (size_t)c->H * sizeof(float));
    return BERT8_OK;
}

typedef struct fm_priv {
    int64_t *offsets;
    bert8_fill_mask_pred *preds;
    char **strings; /* every token_str and sequence, freed with the result */
    int64_t n_strings;
} fm_priv;

void bert8_fill_mask_result_free(bert8_fill_mask_result *r) {
    if (!r) return;
    fm_priv *pv = r->priv;
    if (pv) {
        for (int64_t i = 0; i < pv->n_strings; i++) free(pv->strings[i]);
        free(pv->strings);
        free(pv->offsets);
        free(pv->preds);
        free(pv);
    }
    memset(r, 0, sizeof *r);
}

/* The top k of n scores (descending, ties by lower id) into idx. */
static void top_k(const float *s, int64_t n, int64_t k, int32_t *idx) {
    int64_t have = 0;
    for (int64_t j = 0; j < n; j++) {
        if (have == k && s[j] <= s[idx[k - 1]]) continue;
        int64_t pos = have < k ? have++ : k - 1;
        while (pos > 0 && s[idx[pos - 1]] < s[j]) {
            idx[pos] = idx[pos - 1];
            pos--;
        }
        idx[pos] = (int32_t)j;
    }
}

/* Decodes ids (n of them) with position `at` replaced by tok, pad ids dropped as transformers
 * drops them (at < 0: tok alone). */
static bert8_status decode_with(const bert8_pipeline *p, const int32_t *ids, int64_t n, int64_t at, int32_t tok,
                                int skip_special, int32_t *scratch, char **out, b8_err *e) {
    const int32_t pad = bert8_tokenizer_special_id(p->tok, BERT8_TOKEN_PAD);
    int64_t m = 0;
    if (at < 0) {
        scratch[m++] = tok;
    } else {
        for (int64_t i = 0; i < n; i++) {
            const int32_t id = i == at ? tok : ids[i];
            if (id != pad) scratch[m++] = id;
        }
    }
    char msg[256];
    bert8_status st = bert8_decode(p->tok, scratch, m, skip_special, out, msg, sizeof msg);
    return st ? b8_fail(e, st, "%s", msg) : BERT8_OK;
}

static bert8_status keep_string(fm_priv *pv, int64_t *cap, char *s, b8_err *e) {
    if (pv->n_strings == *cap) {
        int64_t nc = *cap ? *cap * 2 : 64;
        char **ns = realloc(pv->strings, (size_t)nc * sizeof *ns);
        if (!ns) {
            free(s);
            return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
        }
        pv->strings = ns;
        *cap = nc;
    }
    pv->strings[pv->n_strings++] = s;
    return BERT8_OK;
}

static bert8_status fill_mask(const bert8_pipeline *p, int64_t n, const bert8_text *texts, const bert8_run_options *o,
                              int64_t k, bert8_fill_mask_result *out, b8_err *e) {
    const bert8_model_info *mi = bert8_model_get_info(p->model);
    if (!mi->has_mlm_head)
        return b8_fail(e, BERT8_ERR_UNSUPPORTED, "the model has no masked-LM head (architecture \"%s\")",
                       mi->architecture);
    const int32_t mask_id = bert8_tokenizer_special_id(p->tok, BERT8_TOKEN_MASK);
    if (mask_id < 0) return b8_fail(e, BERT8_ERR_UNSUPPORTED, "the tokenizer has no mask token");
    const int64_t V = mi->vocab_size, H = mi->hidden_size;
    if (k < 1 || k > V)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "top_k = %lld is outside [1, %lld]", (long long)k, (long long)V);
    bert8_status st = b8_pipe_check_texts(p, n, texts, "text", false, e);
    if (st) return st;
    bert8_encoding enc = {0};
    b8_row *rows = NULL;
    int64_t nr = 0, cap = 0, masks = 0, scap = 0;
    int64_t *slot0 = NULL;
    float *hidden = NULL, *logits = NULL;
    int32_t *idx = NULL, *scratch = NULL;
    bert8_session *s = NULL;
    fm_priv *pv = calloc(1, sizeof *pv);
    if (!pv) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
    if ((st = b8_pipe_encode(p, n, texts, NULL, o, &enc, e))) goto done;
    if (!(slot0 = malloc((size_t)(enc.rows + 1) * sizeof *slot0)) || !(pv->offsets = calloc((size_t)n + 1, sizeof(int64_t)))) {
        st = b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int64_t r = 0; r < enc.rows; r++) {
        slot0[r] = masks;
        int64_t c = 0;
        for (int64_t t = 0; t < enc.lengths[r]; t++) c += enc.input_ids[r * enc.seq + t] == mask_id;
        if (c == 0) {
            st = b8_fail(e, BERT8_ERR_INVALID_ARG, "text %lld has no mask token (%s)", (long long)enc.row_input[r],
                         bert8_tokenizer_id_to_token(p->tok, mask_id));
            goto done;
        }
        masks += c;
        pv->offsets[enc.row_input[r] + 1] = c;
    }
    slot0[enc.rows] = masks;
    for (int64_t i = 0; i < n; i++) pv->offsets[i + 1] += pv->offsets[i];
    if (!(hidden = malloc((size_t)(masks * H) * sizeof(float))) ||
        !(logits = malloc((size_t)V * sizeof(float))) || !(idx = malloc((size_t)k * sizeof(int32_t))) ||
        !(scratch = malloc((size_t)(enc.seq + 1) * sizeof(int32_t))) ||
        !(pv->preds = calloc((size_t)(masks * k), sizeof *pv->preds))) {
        st = b8_fail(e, BERT8_ERR_NOMEM, "out of memory for %lld masks", (long long)masks);
        goto done;
    }
    fm_ctx c = {&enc, mask_id, slot0, H, hidden};
    if ((st = b8_pipe_rows(p, &enc, 0, &rows, &nr, &cap, e)) || (st = b8_pipe_run(p, rows, nr, fm_row, &c, e))) goto done;
    if ((st = bert8_session_create(p->model, &s))) {
        b8_fail(e, st, "out of memory creating a session");
        goto done;
    }
    /* row by row in encoding order, so that mask slots run in order */
    for (int64_t r = 0; r < enc.rows && !st; r++) {
        const int32_t *ids = enc.input_ids + r * enc.seq;
        const int64_t len = enc.lengths[r], nm = slot0[r + 1] - slot0[r];
        const int single = nm == 1; /* as transformers: one mask decodes without special tokens */
        int64_t m = slot0[r];
        for (int64_t t = 0; t < len && !st; t++) {
            if (ids[t] != mask_id) continue;
            if ((st = bert8_mlm_logits(s, hidden + m * H, 1, logits))) {
                b8_fail(e, st, "%s", bert8_session_last_error(s));
                break;
            }
            b8_softmax_d(logits, V, logits);
            top_k(logits, V, k, idx);
            for (int64_t j = 0; j < k && !st; j++) {
                bert8_fill_mask_pred *pr = &pv->preds[m * k + j];
                char *ts = NULL, *seq = NULL;
                pr->token = idx[j];
                pr->score = logits[idx[j]];
                if ((st = decode_with(p, ids, 1, -1, idx[j], 0, scratch, &ts, e)) ||
                    (st = keep_string(pv, &scap, ts, e)))
                    break;
                pr->token_str = ts;
                if ((st = decode_with(p, ids, len, t, idx[j], single, scratch, &seq, e)) ||
                    (st = keep_string(pv, &scap, seq, e)))
                    break;
                pr->sequence = seq;
            }
            m++;
        }
    }
done:
    bert8_session_free(s);
    free(rows);
    free(slot0);
    free(hidden);
    free(logits);
    free(idx);
    free(scratch);
    bert8_encoding_free(&enc);
    out->priv = pv;
    if (st) {
        bert8_fill_mask_result_free(out);
        return st;
    }
    out->n = n;
    out->top_k = k;
    out->mask_offsets = pv->offsets;
    out->preds = pv->preds;
    return BERT8_OK;
}

bert8_status bert8_fill_mask(const bert8_pipeline *p, int64_t n, const bert8_text *texts, const bert8_run_options *opt,
                             int64_t top_k, bert8_fill_mask_result *out, char *err, size_t err_len) {
    b8_err e;
    b8_err_clear(&e);
    if (out) memset(out, 0, sizeof *out);
    if (!p || !out || (n > 0 && !texts))
        return b8_pipe_report(b8_fail(&e, BERT8_ERR_INVALID_ARG, "bert8_fill_mask: pipeline, texts and out must not be NULL"),
                              &e, err, err_len);
    return b8_pipe_report(fill_mask(p, n, texts, opt, top_k, out, &e), &e, err, err_len);
}
