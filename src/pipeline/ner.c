/* ner.c: token classification with the aggregation strategies of the transformers pipeline.
 *
 * Long texts run in overlapping windows (only_first truncation with overflow); a token seen in
 * several windows takes the prediction of the window where it has the most context on both
 * sides. Then, as TokenClassificationPipeline does:
 *   none      every token is an entity with its argmax label;
 *   simple    tokens grouped by their tags;
 *   first     words (the tokenizer's word ids) take their first token's argmax and score;
 *   average   words take the argmax of their tokens' mean probabilities;
 *   max       words take the label of their most confident token;
 * and grouping merges consecutive items of one type where an item tagged B- starts a new group
 * (I-X and a bare X continue it); a group's score is the mean of its items' scores and its span
 * runs from the first item's start to the last item's end. Groups labelled "O" are dropped
 * unless keep_outside. Spans are byte offsets into the text (blanks at both ends trimmed), with
 * character offsets beside them; the text of a group is that span of the input (transformers
 * rebuilds it from tokens, which lower-cases for uncased models). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/pipeline_internal.h"

bert8_ner_options bert8_default_ner_options(void) {
    bert8_ner_options o = {BERT8_AGG_FIRST, -1, 0};
    return o;
}

/* One token of an input, across its windows. */
typedef struct ntok {
    int64_t start, end; /* bytes */
    int32_t word;
    int64_t ctx;        /* tokens between it and its window's edge; -1: not seen yet */
    int64_t index;      /* its position in the window row that supplied the prediction */
} ntok;

typedef struct ner_ctx {
    const bert8_encoding *enc;
    const int64_t *tok_base; /* [inputs of the chunk + 1]: first token of each input in toks */
    const int64_t *step;     /* [inputs]: window w of an input starts at token w * step */
    ntok *toks;
    float *probs;            /* [tokens][L] */
    int64_t L;
} ner_ctx;

static bert8_status ner_row(void *ctx, const b8_rowout *o, b8_err *e) {
    ner_ctx *c = ctx;
    if (!o->tok_logits) return b8_fail(e, BERT8_ERR_INTERNAL, "the model gave no token logits");
    const bert8_encoding *en = c->enc;
    const int64_t row = o->tag, in = en->row_input[row], w = en->row_window[row];
    const int32_t *seq = en->sequence_ids + row * en->seq, *wid = en->word_ids + row * en->seq;
    const int64_t *off = en->offsets + 2 * row * en->seq;
    int64_t c0 = -1, c1 = -1;
    for (int64_t t = 0; t < o->len; t++)
        if (seq[t] == 0) {
            if (c0 < 0) c0 = t;
            c1 = t;
        }
    for (int64_t t = 0; t < o->len; t++) {
        if (seq[t] != 0) continue;
        const int64_t a = c->tok_base[in] + w * c->step[in] + (t - c0);
        if (a >= c->tok_base[in + 1]) return b8_fail(e, BERT8_ERR_INTERNAL, "window token outside its input");
        ntok *k = &c->toks[a];
        const int64_t ctx_t = t - c0 < c1 - t ? t - c0 : c1 - t;
        if (k->ctx >= 0 && ctx_t <= k->ctx) continue;
        k->start = off[2 * t];
        k->end = off[2 * t + 1];
        k->word = wid[t];
        k->ctx = ctx_t;
        k->index = t;
        b8_softmax_d(o->tok_logits + t * c->L, c->L, c->probs + a * c->L);
    }
    return BERT8_OK;
}

/* ---- the result ------------------------------------------------------------------------------ */

typedef struct elist {
    bert8_entity *v;
    int64_t n, cap;
} elist;

typedef struct ner_priv {
    elist ents, words;
    int64_t *eoff, *woff;
} ner_priv;

static bool push(elist *l, bert8_entity x) {
    if (l->n == l->cap) {
        int64_t cap = l->cap ? 2 * l->cap : 64;
        bert8_entity *v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v) return false;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = x;
    return true;
}

void bert8_ner_result_free(bert8_ner_result *r) {
    if (!r) return;
    ner_priv *pv = r->priv;
    if (pv) {
        free(pv->ents.v);
        free(pv->words.v);
        free(pv->eoff);
        free(pv->woff);
        free(pv);
    }
    memset(r, 0, sizeof *r);
}

/* Splits a label into its type and whether it begins an entity (B-, as transformers' get_tag
 * with "_" also accepted). */
static const char *tag_of(const char *label, bool *begin) {
    *begin = false;
    if (!label) return "";
    if ((label[0] == 'B' || label[0] == 'I') && (label[1] == '-' || label[1] == '_')) {
        *begin = label[0] == 'B';
        return label + 2;
    }
    return label;
}

/* An item before grouping: a token or a word with its label and score. */
typedef struct item {
    int64_t start, end, index;
    int32_t label;
    float score;
} item;

/* Items of one input's tokens for the strategy. */
static int64_t make_items(const ntok *t, const float *probs, int64_t nt, int64_t L, bert8_aggregation agg,
                          item *out, float *avg) {
    int64_t n = 0;
    for (int64_t i = 0; i < nt;) {
        if (t[i].ctx < 0) { /* a token no window kept (cannot happen with a valid stride) */
            i++;
            continue;
        }
        int64_t j = i + 1;
        if (agg >= BERT8_AGG_FIRST)
            while (j < nt && t[j].ctx >= 0 && t[j].word == t[i].word) j++;
        item it = {t[i].start, t[j - 1].end, agg == BERT8_AGG_NONE ? t[i].index : -1, 0, 0};
        for (int64_t k = i; k < j; k++)
            if (t[k].end > it.end) it.end = t[k].end;
        if (agg == BERT8_AGG_AVERAGE) {
            for (int64_t l = 0; l < L; l++) {
                double s = 0;
                for (int64_t k = i; k < j; k++) s += probs[k * L + l];
                avg[l] = (float)(s / (double)(j - i));
            }
        }
        const float *p = probs + i * L;
        if (agg == BERT8_AGG_AVERAGE) p = avg;
        if (agg == BERT8_AGG_MAX) {
            int64_t best = i;
            float bs = -1;
            for (int64_t k = i; k < j; k++)
                for (int64_t l = 0; l < L; l++)
                    if (probs[k * L + l] > bs) bs = probs[k * L + l], best = k;
            p = probs + best * L;
        }
        int64_t arg = 0;
        for (int64_t l = 1; l < L; l++)
            if (p[l] > p[arg]) arg = l;
        it.label = (int32_t)arg;
        it.score = p[arg];
        out[n++] = it;
        i = j;
    }
    return n;
}

static bert8_entity entity(const bert8_text *tx, b8_chars *ch, const char *label, float score, int64_t b0, int64_t b1,
                           int64_t index) {
    b8_trim_span(tx->data, tx->len, &b0, &b1);
    bert8_entity x = {label, score, b0, b1, b8_chars_at(ch, b0), b8_chars_at(ch, b1), index};
    return x;
}

/* Appends one input's words and entities. */
static bool aggregate(const bert8_pipeline *p, const bert8_text *tx, const ntok *t, const float *probs, int64_t nt,
                      const bert8_ner_options *o, item *items, float *avg, ner_priv *pv) {
    const int64_t L = p->info.num_labels;
    const int64_t ni = make_items(t, probs, nt, L, o->aggregation, items, avg);
    b8_chars ch;
    b8_chars_init(&ch, tx->data, tx->len);
    /* trimmed spans first: groups run from the first item's start to the last item's end */
    for (int64_t i = 0; i < ni; i++) b8_trim_span(tx->data, tx->len, &items[i].start, &items[i].end);
    for (int64_t i = 0; i < ni; i++) {
        const char *label = bert8_pipeline_label(p, items[i].label);
        if (!push(&pv->words, entity(tx, &ch, label, items[i].score, items[i].start, items[i].end, items[i].index)))
            return false;
    }
    if (o->aggregation == BERT8_AGG_NONE) {
        b8_chars_init(&ch, tx->data, tx->len);
        for (int64_t i = 0; i < ni; i++) {
            const char *label = bert8_pipeline_label(p, items[i].label);
            if (!o->keep_outside && label && !strcmp(label, "O")) continue;
            if (!push(&pv->ents, entity(tx, &ch, label, items[i].score, items[i].start, items[i].end, items[i].index)))
                return false;
        }
        return true;
    }
    b8_chars_init(&ch, tx->data, tx->len);
    const char *open = NULL;
    int64_t b0 = 0, b1 = 0, cnt = 0;
    double sum = 0;
    for (int64_t i = 0; i <= ni; i++) {
        bool begin = false;
        const char *tag = i < ni ? tag_of(bert8_pipeline_label(p, items[i].label), &begin) : NULL;
        if (open && (!tag || begin || strcmp(tag, open))) {
            if (o->keep_outside || strcmp(open, "O"))
                if (!push(&pv->ents, entity(tx, &ch, open, (float)(sum / (double)cnt), b0, b1, -1))) return false;
            open = NULL;
        }
        if (!tag) continue;
        if (!open) {
            open = tag;
            b0 = items[i].start;
            sum = 0;
            cnt = 0;
        }
        b1 = items[i].end;
        sum += items[i].score;
        cnt++;
    }
    return true;
}

bert8_status bert8_ner(const bert8_pipeline *p, int64_t n, const bert8_text *texts, const bert8_ner_options *no,
                       bert8_ner_result *out, char *err, size_t err_len) {
    b8_err e;
    b8_err_clear(&e);
    if (!p || !out)
        return b8_pipe_report(b8_fail(&e, BERT8_ERR_INVALID_ARG, "bert8_ner: pipeline and out must not be NULL"), &e, err, err_len);
    memset(out, 0, sizeof *out);
    if (p->info.task != BERT8_TASK_NER)
        return b8_pipe_report(b8_fail(&e, BERT8_ERR_UNSUPPORTED, "the model is not a token classification model (architecture \"%s\")",
                                      p->info.model->architecture), &e, err, err_len);
    bert8_ner_options o = no ? *no : bert8_default_ner_options();
    const int64_t max_len = p->info.max_length, L = p->info.num_labels;
    const int64_t stride = o.stride >= 0 ? o.stride : max_len / 4;
    bert8_status st = BERT8_OK;
    if ((unsigned)o.aggregation > BERT8_AGG_MAX)
        st = b8_fail(&e, BERT8_ERR_INVALID_ARG, "unknown aggregation strategy %d", (int)o.aggregation);
    else if (stride >= max_len / 2)
        st = b8_fail(&e, BERT8_ERR_INVALID_ARG, "stride %lld must be below half of max_length %lld", (long long)stride,
                     (long long)max_len);
    if (st || (st = b8_pipe_check_texts(p, n, texts, "text", false, &e))) return b8_pipe_report(st, &e, err, err_len);
    bert8_encode_params ep = bert8_default_encode_params();
    ep.truncation = BERT8_TRUNCATE_ONLY_FIRST;
    ep.max_length = max_len;
    ep.return_overflow = 1;
    ep.stride = stride;
    ner_priv *pv = calloc(1, sizeof *pv);
    bert8_encoding enc = {0};
    b8_row *rows = NULL;
    int64_t cap = 0, *tok_base = NULL, *step = NULL;
    ntok *toks = NULL;
    float *probs = NULL, *avg = malloc((size_t)L * sizeof(float));
    item *items = NULL;
    if (!pv || !avg || !(pv->eoff = calloc((size_t)n + 1, sizeof(int64_t))) ||
        !(pv->woff = calloc((size_t)n + 1, sizeof(int64_t))) ||
        !(tok_base = calloc((size_t)B8_PIPE_CHUNK + 1, sizeof *tok_base)) ||
        !(step = calloc((size_t)B8_PIPE_CHUNK, sizeof *step))) {
        st = b8_fail(&e, BERT8_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int64_t i0 = 0; i0 < n && !st; i0 += B8_PIPE_CHUNK) {
        const int64_t nb = n - i0 < B8_PIPE_CHUNK ? n - i0 : B8_PIPE_CHUNK;
        char msg[1024];
        if ((st = bert8_encode_texts(p->tok, nb, texts + i0, NULL, &ep, &enc, msg, sizeof msg))) {
            b8_fail(&e, st, "%s", msg);
            break;
        }
        /* tokens per input: window w starts w * step content tokens in */
        int64_t *count = calloc((size_t)nb, sizeof *count);
        if (!count) {
            st = b8_fail(&e, BERT8_ERR_NOMEM, "out of memory");
            break;
        }
        for (int64_t r = 0; r < enc.rows && !st; r++) {
            const int64_t in = enc.row_input[r], w = enc.row_window[r];
            int64_t content = 0;
            for (int64_t t = 0; t < enc.lengths[r]; t++) content += enc.sequence_ids[r * enc.seq + t] == 0;
            if (w == 0) step[in] = content - stride;
            if (w >= p->info.params.max_windows)
                st = b8_fail(&e, BERT8_ERR_TOO_LARGE, "text %lld needs more than %lld windows of %lld tokens",
                             (long long)(i0 + in), (long long)p->info.params.max_windows, (long long)max_len);
            if (w * step[in] + content > count[in]) count[in] = w * step[in] + content;
        }
        tok_base[0] = 0;
        for (int64_t i = 0; i < nb; i++) tok_base[i + 1] = tok_base[i] + count[i];
        free(count);
        if (st) break;
        const int64_t total = tok_base[nb];
        ntok *nt2 = realloc(toks, (size_t)(total ? total : 1) * sizeof *toks);
        if (nt2) toks = nt2;
        float *np2 = nt2 ? realloc(probs, (size_t)(total ? total : 1) * (size_t)L * sizeof(float)) : NULL;
        if (np2) probs = np2;
        item *ni2 = np2 ? realloc(items, (size_t)(total ? total : 1) * sizeof *items) : NULL;
        if (ni2) items = ni2;
        if (!ni2) {
            st = b8_fail(&e, BERT8_ERR_NOMEM, "out of memory for %lld tokens", (long long)total);
            break;
        }
        for (int64_t k = 0; k < total; k++) toks[k].ctx = -1;
        int64_t nr = 0;
        if ((st = b8_pipe_rows(p, &enc, 0, &rows, &nr, &cap, &e))) break;
        ner_ctx c = {&enc, tok_base, step, toks, probs, L};
        if ((st = b8_pipe_run(p, rows, nr, ner_row, &c, &e))) break;
        for (int64_t i = 0; i < nb; i++) {
            if (!aggregate(p, &texts[i0 + i], toks + tok_base[i], probs + tok_base[i] * L, tok_base[i + 1] - tok_base[i],
                           &o, items, avg, pv)) {
                st = b8_fail(&e, BERT8_ERR_NOMEM, "out of memory");
                break;
            }
            pv->eoff[i0 + i + 1] = pv->ents.n;
            pv->woff[i0 + i + 1] = pv->words.n;
        }
    }
out:
    free(rows);
    free(tok_base);
    free(step);
    free(toks);
    free(probs);
    free(items);
    free(avg);
    bert8_encoding_free(&enc);
    if (st) {
        if (pv) {
            free(pv->ents.v);
            free(pv->words.v);
            free(pv->eoff);
            free(pv->woff);
            free(pv);
        }
        return b8_pipe_report(st, &e, err, err_len);
    }
    out->n = n;
    out->entity_offsets = pv->eoff;
    out->entities = pv->ents.v;
    out->word_offsets = pv->woff;
    out->words = pv->words.v;
    out->priv = pv;
    return BERT8_OK;
}
