/* pipeline.c: opening a pipeline, its session pool, and the row runner every task uses. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "pipeline/pipeline_internal.h"

bert8_pipeline_params bert8_default_pipeline_params(void) {
    bert8_pipeline_params p;
    memset(&p, 0, sizeof p);
    p.max_batch_tokens = 8192;
    p.max_batch_size = 128;
    p.padding_free = 1;
    p.max_text_bytes = (int64_t)1 << 20;
    p.max_inputs = 1000000;
    p.max_windows = 256;
    p.pooling = BERT8_POOLING_DEFAULT;
    p.normalize = -1;
    return p;
}

bert8_run_options bert8_default_run_options(void) {
    bert8_run_options o = {1, BERT8_SIDE_RIGHT, 0};
    return o;
}

bert8_status b8_pipe_report(bert8_status st, const b8_err *e, char *err, size_t err_len) {
    if (st && err && err_len) snprintf(err, err_len, "%s", e->msg[0] ? e->msg : bert8_status_string(st));
    return st;
}

static bert8_status fail_out(char *err, size_t err_len, bert8_status st, const char *fmt, const char *a) {
    if (err && err_len) snprintf(err, err_len, fmt, a);
    return st;
}

static bert8_status check_params(const bert8_pipeline_params *p, b8_err *e) {
    if (p->threads < 0) return b8_fail(e, BERT8_ERR_INVALID_ARG, "threads %d is negative", p->threads);
    if (p->max_batch_tokens < 1 || p->max_batch_size < 1)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "max_batch_tokens (%lld) and max_batch_size (%lld) must be positive",
                       (long long)p->max_batch_tokens, (long long)p->max_batch_size);
    if (p->max_length < 0 || p->max_text_bytes < 1 || p->max_inputs < 1 || p->max_windows < 1)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "pipeline limits must be positive");
    if ((unsigned)p->pooling > BERT8_POOLING_LAST_TOKEN)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "unknown pooling %d", (int)p->pooling);
    if (p->normalize < -1 || p->normalize > 1)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "normalize must be -1, 0 or 1, not %d", p->normalize);
    if (p->padding_free != 0 && p->padding_free != 1)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "padding_free must be 0 or 1");
    if (p->default_prompt && p->default_prompt_name)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "default_prompt and default_prompt_name cannot both be set");
    return BERT8_OK;
}

unsigned b8_pool_bit(bert8_pooling p) {
    static const unsigned BITS[] = {
        [BERT8_POOLING_CLS] = B8_POOL_CLS,         [BERT8_POOLING_MEAN] = B8_POOL_MEAN,
        [BERT8_POOLING_MAX] = B8_POOL_MAX,         [BERT8_POOLING_MEAN_SQRT_LEN] = B8_POOL_MEAN_SQRT,
        [BERT8_POOLING_WEIGHTED_MEAN] = B8_POOL_WEIGHTED, [BERT8_POOLING_LAST_TOKEN] = B8_POOL_LAST,
    };
    return (unsigned)p < sizeof BITS / sizeof *BITS ? BITS[p] : 0;
}

static bert8_pooling first_mode(unsigned bits) {
    for (int m = BERT8_POOLING_CLS; m <= BERT8_POOLING_LAST_TOKEN; m++)
        if (b8_pool_bit((bert8_pooling)m) == (bits & -bits)) return (bert8_pooling)m;
    return BERT8_POOLING_MEAN;
}

int64_t b8_pool_width(unsigned bits, int64_t hidden) {
    int k = 0;
    for (; bits; bits &= bits - 1) k++;
    return k * hidden;
}

/* Checks that the chain of Dense modules fits pooled vectors of `width`; returns the final width. */
bert8_status b8_pipe_chain_width(const bert8_pipeline *p, int64_t width, int64_t *out, b8_err *e) {
    for (size_t i = 0; i < p->n_steps; i++) {
        const b8_st_dense *d = &p->st.steps[i].dense;
        if (p->st.steps[i].normalize) continue;
        if (d->in != width)
            return b8_fail(e, BERT8_ERR_SHAPE,
                           "the Dense module after the pooling takes %lld values but the pooling gives %lld (a pooling "
                           "other than the folder's changes the width)",
                           (long long)d->in, (long long)width);
        width = d->out;
    }
    *out = width;
    return BERT8_OK;
}

/* TEI's text for a prompt name the folder does not have. */
static bert8_status unknown_prompt(const bert8_pipeline *p, const char *name, b8_err *e) {
    if (!p->st.n_prompts)
        return b8_fail(e, BERT8_ERR_INVALID_ARG,
                       "`default-prompt-name` is set to `%s` but no prompts were found in the Sentence Transformers "
                       "configuration",
                       name);
    char list[512];
    size_t at = 0;
    list[0] = 0;
    for (size_t i = 0; i < p->st.n_prompts && at < sizeof list; i++)
        at += (size_t)snprintf(list + at, sizeof list - at, "%s\"%s\"", i ? ", " : "", p->st.prompts[i].name);
    return b8_fail(e, BERT8_ERR_INVALID_ARG,
                   "`default-prompt-name` is set to `%s` but it was not found in the Sentence Transformers prompts. "
                   "Available prompts: [%s]",
                   name, list);
}

static bert8_status setup_embed(bert8_pipeline *pl, const bert8_pipeline_params *p, b8_err *e) {
    bert8_pipeline_info *in = &pl->info;
    const int64_t H = in->model->hidden_size;
    pl->pool = p->pooling != BERT8_POOLING_DEFAULT ? b8_pool_bit(p->pooling) : pl->st.pool ? pl->st.pool : B8_POOL_MEAN;
    in->pooling = first_mode(pl->pool);
    pl->n_steps = pl->st.n_steps;
    const bool trailing_norm = pl->n_steps && pl->st.steps[pl->n_steps - 1].normalize;
    if (trailing_norm) pl->n_steps--;
    in->normalize = p->normalize >= 0 ? p->normalize : trailing_norm;
    in->include_prompt = pl->st.include_prompt;
    for (size_t i = 0; i < pl->n_steps; i++) in->dense_modules += !pl->st.steps[i].normalize;
    bert8_status st = b8_pipe_chain_width(pl, b8_pool_width(pl->pool, H), &in->dim, e);
    if (st) return st;
    const char *dp = NULL;
    if (p->default_prompt) dp = p->default_prompt;
    else if (p->default_prompt_name && !(dp = b8_st_prompt_text(&pl->st, p->default_prompt_name)))
        return unknown_prompt(pl, p->default_prompt_name, e);
    else if (!p->default_prompt_name && pl->st.default_prompt_name)
        dp = b8_st_prompt_text(&pl->st, pl->st.default_prompt_name);
    if (dp && dp[0]) {
        size_t bad;
        if (!bert8_utf8_valid(dp, strlen(dp), &bad))
            return b8_fail(e, BERT8_ERR_ENCODING, "the default prompt is not valid UTF-8 (at byte %zu)", bad);
        if ((int64_t)strlen(dp) > p->max_text_bytes)
            return b8_fail(e, BERT8_ERR_TOO_LARGE, "the default prompt has %zu bytes, over the limit of %lld", strlen(dp),
                           (long long)p->max_text_bytes);
        if (!(pl->default_prompt = strdup(dp))) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
    }
    in->default_prompt = pl->default_prompt;
    in->prompts = (int64_t)pl->st.n_prompts;
    return BERT8_OK;
}

static bert8_status setup(bert8_pipeline *pl, const char *dir, const bert8_pipeline_params *params, b8_err *e) {
    bert8_pipeline_params p = params ? *params : bert8_default_pipeline_params();
    bert8_status st = check_params(&p, e);
    if (st) return st;
    const bert8_model_info *mi = bert8_model_get_info(pl->model);
    int64_t tv = bert8_tokenizer_vocab_size(pl->tok);
    if (tv > mi->vocab_size)
        return b8_fail(e, BERT8_ERR_SHAPE, "the tokenizer has %lld tokens but the model's vocabulary has only %lld",
                       (long long)tv, (long long)mi->vocab_size);
    bert8_pipeline_info *in = &pl->info;
    in->model = mi;
    in->params = p;
    in->dim = mi->hidden_size;
    in->task = mi->head == BERT8_HEAD_SEQ_CLS     ? BERT8_TASK_CLASSIFY
               : mi->head == BERT8_HEAD_QA        ? BERT8_TASK_QA
               : mi->head == BERT8_HEAD_TOKEN_CLS ? BERT8_TASK_NER
                                                  : BERT8_TASK_EMBED;
    in->num_labels = mi->head == BERT8_HEAD_SEQ_CLS || mi->head == BERT8_HEAD_TOKEN_CLS ? mi->num_labels : 0;
    int64_t max_len = bert8_tokenizer_model_max_length(pl->tok);
    if (max_len <= 0 || max_len > mi->max_seq_len) max_len = mi->max_seq_len;
    /* the folder's sentence-transformers modules; the chain after the transformer matters to
     * embeddings only (a classifier's folder may carry one it does not use) */
    pl->st.include_prompt = true;
    if (dir && (st = b8_st_folder_read(dir, p.dense_path, in->task == BERT8_TASK_EMBED, mi->hidden_size, &pl->st, e)))
        return st;
    /* a sentence-transformers folder truncates where its sentence_bert_config.json says (256 for
     * all-MiniLM-L6-v2, whose tokenizer allows 512), unless the caller chose a length */
    const int64_t st_len = p.max_length == 0 ? pl->st.max_seq_length : 0;
    if (st_len > 0 && st_len < max_len) max_len = st_len;
    if (p.max_length > 0) {
        if (p.max_length > max_len)
            return b8_fail(e, BERT8_ERR_TOO_LARGE, "max_length %lld exceeds the model's limit of %lld tokens",
                           (long long)p.max_length, (long long)max_len);
        max_len = p.max_length;
    }
    in->max_length = max_len;
    pl->use_types = mi->type_vocab_size > 1;
    /* embeddings: the folder's sentence-transformers modules, then the caller's */
    if ((st = setup_embed(pl, &p, e))) return st;
    in->params.dense_path = in->params.default_prompt_name = in->params.default_prompt = NULL; /* not kept */
    b8_err_clear(e);
    if (pthread_mutex_init(&pl->mu, NULL)) return b8_fail(e, BERT8_ERR_INTERNAL, "mutex initialisation failed");
    return BERT8_OK;
}

bert8_status bert8_pipeline_open(const char *dir, const bert8_pipeline_params *params, bert8_pipeline **out,
                                 char *err, size_t err_len) {
    if (out) *out = NULL;
    if (!dir || !out) return fail_out(err, err_len, BERT8_ERR_INVALID_ARG, "%s", "bert8_pipeline_open: dir and out must not be NULL");
    bert8_pipeline *pl = calloc(1, sizeof *pl);
    if (!pl) return fail_out(err, err_len, BERT8_ERR_NOMEM, "%s", "out of memory");
    b8_err e;
    b8_err_clear(&e);
    char msg[1024];
    bert8_status st = bert8_tokenizer_load(dir, &pl->own_tok, msg, sizeof msg);
    if (st) {
        b8_fail(&e, st, "loading the tokenizer of %s: %s", dir, msg);
        goto fail;
    }
    bert8_load_params lp = bert8_default_load_params();
    lp.threads = params ? params->threads : 0;
    lp.lora_task = params ? params->lora_task : NULL;
    if ((st = bert8_model_load(dir, &lp, &pl->own_model, msg, sizeof msg))) {
        b8_fail(&e, st, "%s", msg);
        goto fail;
    }
    pl->model = pl->own_model;
    pl->tok = pl->own_tok;
    if ((st = setup(pl, dir, params, &e))) goto fail;
    *out = pl;
    return BERT8_OK;
fail:
    b8_st_folder_free(&pl->st);
    free(pl->default_prompt);
    bert8_model_free(pl->own_model);
    bert8_tokenizer_free(pl->own_tok);
    free(pl);
    return b8_pipe_report(st, &e, err, err_len);
}

bert8_status bert8_pipeline_wrap(const bert8_model *model, const bert8_tokenizer *tok, const char *dir,
                                 const bert8_pipeline_params *params, bert8_pipeline **out, char *err,
                                 size_t err_len) {
    if (out) *out = NULL;
    if (!model || !tok || !out)
        return fail_out(err, err_len, BERT8_ERR_INVALID_ARG, "%s", "bert8_pipeline_wrap: model, tok and out must not be NULL");
    bert8_pipeline *pl = calloc(1, sizeof *pl);
    if (!pl) return fail_out(err, err_len, BERT8_ERR_NOMEM, "%s", "out of memory");
    pl->model = model;
    pl->tok = tok;
    if (params && params->threads > 0) bert8_set_threads(params->threads);
    b8_err e;
    b8_err_clear(&e);
    bert8_status st = setup(pl, dir, params, &e);
    if (st) {
        b8_st_folder_free(&pl->st);
        free(pl->default_prompt);
        free(pl);
        return b8_pipe_report(st, &e, err, err_len);
    }
    *out = pl;
    return BERT8_OK;
}

void bert8_pipeline_free(bert8_pipeline *p) {
    if (!p) return;
    for (size_t i = 0; i < p->n_idle; i++) bert8_session_free(p->idle[i]);
    free(p->idle);
    pthread_mutex_destroy(&p->mu);
    b8_st_folder_free(&p->st);
    free(p->default_prompt);
    bert8_model_free(p->own_model);
    bert8_tokenizer_free(p->own_tok);
    free(p);
}

const bert8_pipeline_info *bert8_pipeline_get_info(const bert8_pipeline *p) { return p ? &p->info : NULL; }
const bert8_model *bert8_pipeline_model(const bert8_pipeline *p) { return p ? p->model : NULL; }
const bert8_tokenizer *bert8_pipeline_tokenizer(const bert8_pipeline *p) { return p ? p->tok : NULL; }
const char *bert8_pipeline_label(const bert8_pipeline *p, int64_t i) {
    return p ? bert8_model_label(p->model, i) : NULL;
}
int bert8_pipeline_prompt(const bert8_pipeline *p, int64_t i, const char **name, const char **text) {
    if (!p || i < 0 || (size_t)i >= p->st.n_prompts) return 0;
    if (name) *name = p->st.prompts[i].name;
    if (text) *text = p->st.prompts[i].text;
    return 1;
}

/* ---- sessions ---------------------------------------------------------------------------- */

static bert8_session *acquire(const bert8_pipeline *cp) {
    bert8_pipeline *p = (bert8_pipeline *)cp; /* the pool is the one mutable part, under its mutex */
    bert8_session *s = NULL;
    pthread_mutex_lock(&p->mu);
    if (p->n_idle) s = p->idle[--p->n_idle];
    pthread_mutex_unlock(&p->mu);
    if (!s && bert8_session_create(p->model, &s)) s = NULL;
    return s;
}

static void release(const bert8_pipeline *cp, bert8_session *s) {
    bert8_pipeline *p = (bert8_pipeline *)cp;
    pthread_mutex_lock(&p->mu);
    if (p->n_idle == p->cap_idle) {
        size_t cap = p->cap_idle ? 2 * p->cap_idle : 4;
        bert8_session **n = realloc(p->idle, cap * sizeof *n);
        if (n) {
            p->idle = n;
            p->cap_idle = cap;
        }
    }
    if (p->n_idle < p->cap_idle) {
        p->idle[p->n_idle++] = s;
        s = NULL;
    }
    pthread_mutex_unlock(&p->mu);
    bert8_session_free(s); /* out of memory for the list: just drop it */
}

/* ---- the row runner ------------------------------------------------------------------------ */

static int by_len_desc(const void *a, const void *b) {
    const b8_row *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return x->tag < y->tag ? -1 : x->tag > y->tag;
}

bert8_status b8_pipe_rows(const bert8_pipeline *p, const bert8_encoding *enc, int64_t prompt_len, b8_row **rows,
                          int64_t *n, int64_t *cap, b8_err *e) {
    if (*n + enc->rows > *cap) {
        int64_t nc = *cap ? *cap : 64;
        while (nc < *n + enc->rows) nc *= 2;
        b8_row *r = realloc(*rows, (size_t)nc * sizeof *r);
        if (!r) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
        *rows = r;
        *cap = nc;
    }
    for (int64_t i = 0; i < enc->rows; i++) {
        b8_row *r = &(*rows)[(*n)++];
        r->ids = enc->input_ids + i * enc->seq;
        r->types = p->use_types ? enc->token_type_ids + i * enc->seq : NULL;
        r->len = enc->lengths[i];
        r->prompt_len = prompt_len < r->len ? prompt_len : r->len;
        r->tag = i;
    }
    return BERT8_OK;
}

bert8_status b8_pipe_id_rows(const bert8_pipeline *p, int64_t n, const bert8_token_ids *in, b8_row **rows,
                             b8_err *e) {
    const bert8_pipeline_params *pp = &p->info.params;
    *rows = NULL;
    if (n < 0 || (n > 0 && !in)) return b8_fail(e, BERT8_ERR_INVALID_ARG, "%lld inputs at %p", (long long)n, (const void *)in);
    if (n > pp->max_inputs)
        return b8_fail(e, BERT8_ERR_TOO_LARGE, "%lld inputs in one call, over the limit of %lld", (long long)n,
                       (long long)pp->max_inputs);
    const bert8_model_info *mi = p->info.model;
    for (int64_t i = 0; i < n; i++) {
        const bert8_token_ids *t = &in[i];
        if (!t->ids || t->len < 1 || t->len > p->info.max_length)
            return b8_fail(e, t->len > p->info.max_length ? BERT8_ERR_TOO_LARGE : BERT8_ERR_INVALID_ARG,
                           "input %lld has %lld tokens (1 to %lld allowed)%s", (long long)i, (long long)t->len,
                           (long long)p->info.max_length, t->ids ? "" : " and no ids");
        if (t->prompt_len < 0 || t->prompt_len > t->len)
            return b8_fail(e, BERT8_ERR_INVALID_ARG, "input %lld: prompt_len %lld is not in [0, %lld]", (long long)i,
                           (long long)t->prompt_len, (long long)t->len);
        for (int64_t k = 0; k < t->len; k++) {
            if (t->ids[k] < 0 || t->ids[k] >= mi->vocab_size)
                return b8_fail(e, BERT8_ERR_INVALID_ARG, "input %lld: token %lld has id %d, outside the vocabulary of %lld",
                               (long long)i, (long long)k, (int)t->ids[k], (long long)mi->vocab_size);
            if (t->type_ids && (t->type_ids[k] < 0 || t->type_ids[k] >= (mi->type_vocab_size > 0 ? mi->type_vocab_size : 1)))
                return b8_fail(e, BERT8_ERR_INVALID_ARG, "input %lld: token %lld has type id %d (the model has %lld)",
                               (long long)i, (long long)k, (int)t->type_ids[k], (long long)mi->type_vocab_size);
        }
    }
    if (!(*rows = malloc((size_t)(n > 0 ? n : 1) * sizeof **rows))) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < n; i++)
        (*rows)[i] = (b8_row){in[i].ids, p->use_types ? in[i].type_ids : NULL, in[i].len, in[i].prompt_len, i};
    return BERT8_OK;
}

/* Scratch of one batch: the packed or padded token arrays. */
typedef struct batch_buf {
    int32_t *ids, *types, *mask;
    int64_t *cu;
    size_t cap_tok, cap_seq;
} batch_buf;

static bool bb_reserve(batch_buf *b, size_t tok, size_t seq) {
    if (tok > b->cap_tok) {
        int32_t *i = realloc(b->ids, tok * sizeof *i), *t = i ? realloc(b->types, tok * sizeof *t) : NULL;
        if (i) b->ids = i;
        if (t) b->types = t;
        int32_t *m = t ? realloc(b->mask, tok * sizeof *m) : NULL;
        if (m) b->mask = m;
        if (!i || !t || !m) return false;
        b->cap_tok = tok;
    }
    if (seq > b->cap_seq) {
        int64_t *c = realloc(b->cu, seq * sizeof *c);
        if (!c) return false;
        b->cu = c;
        b->cap_seq = seq;
    }
    return true;
}

static bert8_status run_batch(const bert8_pipeline *p, bert8_session *s, const b8_row *rows, int64_t nb,
                              batch_buf *bb, b8_row_fn fn, void *ctx, b8_err *e) {
    const bool packed = p->info.params.padding_free;
    const int64_t T = rows[0].len; /* the longest: rows are sorted */
    int64_t tokens = 0;
    for (int64_t i = 0; i < nb; i++) tokens += rows[i].len;
    if (!bb_reserve(bb, (size_t)(packed ? tokens : nb * T), (size_t)nb + 1))
        return b8_fail(e, BERT8_ERR_NOMEM, "out of memory for a batch of %lld tokens", (long long)tokens);
    bool types = false; /* pre-tokenized rows may mix given and absent (all 0) type ids */
    for (int64_t i = 0; i < nb && !types; i++) types = rows[i].types != NULL;
    bert8_outputs o;
    bert8_status st;
    if (packed) {
        int64_t at = 0;
        bb->cu[0] = 0;
        for (int64_t i = 0; i < nb; i++) {
            memcpy(bb->ids + at, rows[i].ids, (size_t)rows[i].len * sizeof(int32_t));
            if (types && rows[i].types) memcpy(bb->types + at, rows[i].types, (size_t)rows[i].len * sizeof(int32_t));
            else if (types) memset(bb->types + at, 0, (size_t)rows[i].len * sizeof(int32_t));
            at += rows[i].len;
            bb->cu[i + 1] = at;
        }
        bert8_packed_batch b = {nb, bb->cu, bb->ids, types ? bb->types : NULL};
        st = bert8_forward_packed(s, &b, &o);
    } else {
        const int32_t pad = (int32_t)bert8_model_get_info(p->model)->pad_token_id;
        for (int64_t i = 0; i < nb; i++) {
            const int64_t len = rows[i].len;
            for (int64_t t = 0; t < T; t++) {
                bb->ids[i * T + t] = t < len ? rows[i].ids[t] : pad;
                bb->types[i * T + t] = t < len && rows[i].types ? rows[i].types[t] : 0;
                bb->mask[i * T + t] = t < len;
            }
        }
        bert8_batch b = {nb, T, bb->ids, bb->mask, types ? bb->types : NULL};
        st = bert8_forward(s, &b, &o);
    }
    if (st) return b8_fail(e, st, "%s", bert8_session_last_error(s));
    const int64_t H = p->info.model->hidden_size;
    const int64_t L = o.logits.data ? o.logits.shape[o.logits.ndim - 1] : 0;
    const bool tok_logits = o.logits.data && bert8_model_get_info(p->model)->head == BERT8_HEAD_TOKEN_CLS;
    int64_t at = 0;
    for (int64_t i = 0; i < nb; i++) {
        const int64_t r0 = packed ? at : i * T; /* the row's first token in the outputs */
        b8_rowout ro = {rows[i].tag, rows[i].len, rows[i].prompt_len, o.last_hidden_state.data + r0 * H,
                        o.pooler_output.data ? o.pooler_output.data + i * H : NULL,
                        o.logits.data && !tok_logits ? o.logits.data + i * L : NULL,
                        tok_logits ? o.logits.data + r0 * L : NULL,
                        o.start_logits.data ? o.start_logits.data + r0 : NULL,
                        o.end_logits.data ? o.end_logits.data + r0 : NULL};
        if ((st = fn(ctx, &ro, e))) return st;
        at += rows[i].len;
    }
    return BERT8_OK;
}

bert8_status b8_pipe_run(const bert8_pipeline *p, b8_row *rows, int64_t n, b8_row_fn fn, void *ctx, b8_err *e) {
    if (n == 0) return BERT8_OK;
    qsort(rows, (size_t)n, sizeof *rows, by_len_desc);
    bert8_session *s = acquire(p);
    if (!s) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory creating a session");
    const bert8_pipeline_params *pp = &p->info.params;
    batch_buf bb = {0};
    bert8_status st = BERT8_OK;
    for (int64_t i = 0; i < n && !st;) {
        /* rows [i, j): under the token budget (padded: rows x the longest) and the size cap */
        int64_t j = i + 1, tokens = rows[i].len;
        while (j < n && j - i < pp->max_batch_size) {
            int64_t next = pp->padding_free ? tokens + rows[j].len : (j - i + 1) * rows[i].len;
            if (next > pp->max_batch_tokens) break;
            tokens = next;
            j++;
        }
        st = run_batch(p, s, rows + i, j - i, &bb, fn, ctx, e);
        i = j;
    }
    free(bb.ids);
    free(bb.types);
    free(bb.mask);
    free(bb.cu);
    release(p, s);
    return st;
}

/* ---- inputs -------------------------------------------------------------------------------- */

bert8_status b8_pipe_check_texts(const bert8_pipeline *p, int64_t n, const bert8_text *texts, const char *what,
                                 bool allow_null, b8_err *e) {
    const bert8_pipeline_params *pp = &p->info.params;
    if (n < 0) return b8_fail(e, BERT8_ERR_INVALID_ARG, "%lld %ss", (long long)n, what);
    if (n > pp->max_inputs)
        return b8_fail(e, BERT8_ERR_TOO_LARGE, "%lld %ss in one call, over the limit of %lld", (long long)n, what,
                       (long long)pp->max_inputs);
    if (n > 0 && !texts) return b8_fail(e, BERT8_ERR_INVALID_ARG, "%ss are NULL", what);
    for (int64_t i = 0; i < n; i++) {
        const bert8_text *t = &texts[i];
        if (!t->data) {
            if (allow_null || t->len == 0) continue;
            return b8_fail(e, BERT8_ERR_INVALID_ARG, "%s %lld is NULL", what, (long long)i);
        }
        if ((int64_t)t->len > pp->max_text_bytes || t->len > ((size_t)1 << 31))
            return b8_fail(e, BERT8_ERR_TOO_LARGE, "%s %lld has %zu bytes, over the limit of %lld", what, (long long)i,
                           t->len, (long long)pp->max_text_bytes);
        size_t bad;
        if (!bert8_utf8_valid(t->data, t->len, &bad))
            return b8_fail(e, BERT8_ERR_ENCODING, "%s %lld is not valid UTF-8 (at byte %zu)", what, (long long)i, bad);
    }
    return BERT8_OK;
}

bert8_status b8_pipe_check_nonempty(int64_t n, const bert8_text *texts, const bert8_text *pairs,
                                    const bert8_text *query, b8_err *e) {
    for (int64_t i = 0; i < n; i++) {
        if (texts[i].len || (pairs && pairs[i].data && pairs[i].len) || (query && query->len)) continue;
        if (query)
            return b8_fail(e, BERT8_ERR_INVALID_ARG,
                           "the query and text %lld are empty: `inputs` cannot be empty (as TEI answers)", (long long)i);
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "text %lld is empty%s: `inputs` cannot be empty (as TEI answers)",
                       (long long)i, pairs && pairs[i].data ? ", and so is its pair" : "");
    }
    return BERT8_OK;
}

int64_t b8_pipe_max_length(const bert8_pipeline *p, const bert8_run_options *o) {
    int64_t m = p->info.max_length;
    if (o && o->max_length > 0 && o->max_length < m) m = o->max_length;
    return m;
}

bert8_encode_params b8_pipe_encode_params(const bert8_pipeline *p, const bert8_run_options *o) {
    bert8_encode_params ep = bert8_default_encode_params();
    ep.max_length = b8_pipe_max_length(p, o);
    ep.truncation = !o || o->truncate ? BERT8_TRUNCATE_LONGEST_FIRST : BERT8_TRUNCATE_NONE;
    ep.truncate_left = o && o->truncation_side == BERT8_SIDE_LEFT;
    return ep;
}

static bert8_status check_options(const bert8_run_options *o, b8_err *e) {
    if (!o) return BERT8_OK;
    if (o->truncate != 0 && o->truncate != 1) return b8_fail(e, BERT8_ERR_INVALID_ARG, "truncate must be 0 or 1");
    if ((unsigned)o->truncation_side > BERT8_SIDE_LEFT)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "unknown truncation side %d", (int)o->truncation_side);
    if (o->max_length < 0) return b8_fail(e, BERT8_ERR_INVALID_ARG, "max_length %lld is negative", (long long)o->max_length);
    return BERT8_OK;
}

/* The texts a call encodes: prompt + text, lowercased when the folder says (pairs lowercased
 * too, as sentence-transformers lowercases every column). *arena holds the bytes. */
static bert8_status prepare_texts(const bert8_pipeline *p, int64_t n, const bert8_text *texts, const bert8_text *pairs,
                                  const char *prompt, bert8_text *out_t, bert8_text *out_p, char **arena, b8_err *e) {
    const bool lower = p->st.do_lower_case;
    const size_t plen = prompt ? strlen(prompt) : 0, grow = lower ? 2 : 1;
    size_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        total += (plen + texts[i].len) * grow;
        if (pairs && pairs[i].data) total += pairs[i].len * grow;
    }
    if (!(*arena = malloc(total ? total : 1))) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory for %zu bytes of text", total);
    char *w = *arena;
    for (int64_t i = 0; i < n; i++) {
        char *start = w;
        if (lower) {
            w += b8_utf8_lower(prompt ? prompt : "", plen, w);
            w += texts[i].len ? b8_utf8_lower(texts[i].data, texts[i].len, w) : 0;
        } else {
            if (plen) memcpy(w, prompt, plen);
            if (texts[i].len) memcpy(w + plen, texts[i].data, texts[i].len);
            w += plen + texts[i].len;
        }
        out_t[i] = (bert8_text){start, (size_t)(w - start)};
        if (out_p) {
            out_p[i] = pairs[i];
            if (pairs[i].data && lower) {
                start = w;
                w += pairs[i].len ? b8_utf8_lower(pairs[i].data, pairs[i].len, w) : 0;
                out_p[i] = (bert8_text){start, (size_t)(w - start)};
            }
        }
    }
    return BERT8_OK;
}

bert8_status b8_pipe_encode_ex(const bert8_pipeline *p, int64_t n, const bert8_text *texts, const bert8_text *pairs,
                               const bert8_run_options *o, const char *prompt, bool keep_long, bert8_encoding *enc,
                               b8_err *e) {
    bert8_status st = check_options(o, e);
    if (st) return st;
    bert8_encode_params ep = b8_pipe_encode_params(p, o);
    char msg[1024];
    bert8_text *tt = NULL, *pp = NULL;
    char *arena = NULL;
    if ((prompt && prompt[0]) || p->st.do_lower_case) {
        tt = malloc((size_t)(n > 0 ? n : 1) * sizeof *tt);
        pp = pairs ? malloc((size_t)(n > 0 ? n : 1) * sizeof *pp) : NULL;
        if (!tt || (pairs && !pp)) st = b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
        else st = prepare_texts(p, n, texts, pairs, prompt, tt, pp, &arena, e);
        texts = tt;
        pairs = pp;
    }
    if (!st && (st = bert8_encode_texts(p->tok, n, texts, pairs, &ep, enc, msg, sizeof msg))) b8_fail(e, st, "%s", msg);
    free(tt);
    free(pp);
    free(arena);
    if (st) return st;
    if (ep.truncation == BERT8_TRUNCATE_NONE && !keep_long)
        for (int64_t i = 0; i < enc->rows; i++)
            if (enc->lengths[i] > ep.max_length)
                return b8_fail(e, BERT8_ERR_TOO_LARGE, "input %lld has %lld tokens, over the limit of %lld",
                               (long long)enc->row_input[i], (long long)enc->lengths[i], (long long)ep.max_length);
    return BERT8_OK;
}

bert8_status b8_pipe_encode(const bert8_pipeline *p, int64_t n, const bert8_text *texts, const bert8_text *pairs,
                            const bert8_run_options *o, bert8_encoding *enc, b8_err *e) {
    return b8_pipe_encode_ex(p, n, texts, pairs, o, NULL, false, enc, e);
}

bert8_status b8_pipe_prompt(const bert8_pipeline *p, const bert8_embed_options *eo, bool pairs, char **out,
                            b8_err *e) {
    const char *prompt = p->default_prompt;
    size_t len = prompt ? strlen(prompt) : 0;
    *out = NULL;
    if (eo && eo->prompt.data) {
        size_t bad;
        if (eo->prompt.len > (size_t)p->info.params.max_text_bytes)
            return b8_fail(e, BERT8_ERR_TOO_LARGE, "the prompt has %zu bytes, over the limit of %lld", eo->prompt.len,
                           (long long)p->info.params.max_text_bytes);
        if (!bert8_utf8_valid(eo->prompt.data, eo->prompt.len, &bad))
            return b8_fail(e, BERT8_ERR_ENCODING, "the prompt is not valid UTF-8 (at byte %zu)", bad);
        if (memchr(eo->prompt.data, 0, eo->prompt.len))
            return b8_fail(e, BERT8_ERR_INVALID_ARG, "the prompt holds a NUL byte");
        prompt = eo->prompt.data;
        len = eo->prompt.len;
    } else if (eo && eo->prompt_name) {
        if (!(prompt = b8_st_prompt_text(&p->st, eo->prompt_name))) return unknown_prompt(p, eo->prompt_name, e);
        len = strlen(prompt);
    }
    if (!len) return BERT8_OK;
    if (pairs) return b8_fail(e, BERT8_ERR_INVALID_ARG, "`prompt_name` cannot be set with dual inputs");
    if (!(*out = malloc(len + 1))) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
    memcpy(*out, prompt, len);
    (*out)[len] = 0;
    return BERT8_OK;
}

bert8_status b8_pipe_prompt_len(const bert8_pipeline *p, const char *prompt, int64_t *len, b8_err *e) {
    *len = 0;
    if (!prompt || !prompt[0]) return BERT8_OK;
    bert8_encoding enc = {0};
    bert8_run_options o = bert8_default_run_options();
    o.truncate = 0;
    bert8_status st = b8_pipe_encode_ex(p, 1, &(bert8_text){prompt, strlen(prompt)}, NULL, &o, NULL, true, &enc, e);
    if (!st && enc.rows == 1) {
        *len = enc.lengths[0];
        if (*len > 0 && enc.special_mask[*len - 1]) (*len)--; /* a trailing [SEP] / </s> */
    }
    bert8_encoding_free(&enc);
    return st;
}

/* ---- helpers ------------------------------------------------------------------------------- */

int64_t b8_softmax_d(const float *logits, int64_t n, float *p) {
    int64_t arg = 0;
    for (int64_t i = 1; i < n; i++)
        if (logits[i] > logits[arg]) arg = i;
    const float mx = logits[arg];
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += exp((double)logits[i] - mx);
    for (int64_t i = 0; i < n; i++) p[i] = (float)(exp((double)logits[i] - mx) / sum);
    return arg;
}

void b8_chars_init(b8_chars *c, const char *s, size_t len) {
    c->s = s;
    c->len = len;
    c->byte = 0;
    c->chr = 0;
}

int64_t b8_chars_at(b8_chars *c, int64_t byte) {
    size_t b = byte < 0 ? 0 : (size_t)byte;
    if (b > c->len) b = c->len;
    if (b < c->byte) c->byte = 0, c->chr = 0;
    for (; c->byte < b; c->byte++)
        if (((unsigned char)c->s[c->byte] & 0xC0) != 0x80) c->chr++;
    return c->chr;
}

void b8_trim_span(const char *s, size_t len, int64_t *b0, int64_t *b1) {
    if (*b0 < 0) *b0 = 0;
    if (*b1 > (int64_t)len) *b1 = (int64_t)len;
    if (*b1 < *b0) *b1 = *b0;
    while (*b0 < *b1 && strchr(" \t\n\r\v\f", s[*b0]) && s[*b0]) (*b0)++;
    while (*b1 > *b0 && strchr(" \t\n\r\v\f", s[*b1 - 1]) && s[*b1 - 1]) (*b1)--;
}
