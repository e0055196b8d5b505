/* request.c: the request parsing helpers of every route (routes.h): TEI's fields and their
 * errors, inputs as text or token ids, prompts, tokenization with the token limit, permits, and
 * the job a model route queues. These run on the HTTP worker threads. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "routes.h"

static const struct {
    int status;
    const char *name, *metric;
} ERRORS[] = {
    [E_VALIDATION] = {422, "Validation", "validation"}, [E_TOKENIZER] = {422, "Tokenizer", "tokenizer"},
    [E_OVERLOADED] = {429, "Overloaded", "overloaded"}, [E_BACKEND] = {424, "Backend", "backend"},
    [E_EMPTY] = {400, "Empty", "empty"},                [E_UNHEALTHY] = {503, "Unhealthy", "unhealthy"},
};

void srv_error(srv_response *r, srv_error_type t, int openai, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    jbuf b = {0};
    if (openai) {
        jb_puts(&b, "{\"message\":");
        jb_cstr(&b, msg);
        jb_printf(&b, ",\"code\":%d,\"type\":\"%s\"}", ERRORS[t].status, ERRORS[t].name);
    } else {
        jb_puts(&b, "{\"error\":");
        jb_cstr(&b, msg);
        jb_printf(&b, ",\"error_type\":\"%s\"}", ERRORS[t].name);
    }
    free(r->body);
    *r = (srv_response){0};
    r->status = ERRORS[t].status;
    r->content_type = "application/json";
    r->body = jb_take(&b, &r->len);
}

void rq_fail_metric(srv_server *s, const char *err) { srv_metrics_count(s->metrics, "te_request_failure", "err", err); }


/* ---- request fields -------------------------------------------------------------------- */

int rq_bool(const cJSON *o, const char *name, int *out, srv_response *r, int openai) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsBool(v)) {
        srv_error(r, E_VALIDATION, openai, "`%s` must be a boolean", name);
        return -1;
    }
    *out = cJSON_IsTrue(v) ? 1 : 0;
    return 0;
}

int rq_side(const cJSON *o, bert8_side *out, srv_response *r) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "truncation_direction");
    if (!v || cJSON_IsNull(v)) return 0;
    const char *t = cJSON_IsString(v) ? v->valuestring : NULL;
    if (t && (!strcmp(t, "right") || !strcmp(t, "Right"))) *out = BERT8_SIDE_RIGHT;
    else if (t && (!strcmp(t, "left") || !strcmp(t, "Left"))) *out = BERT8_SIDE_LEFT;
    else {
        srv_error(r, E_VALIDATION, 0, "`truncation_direction` must be \"left\" or \"right\"");
        return -1;
    }
    return 0;
}

int rq_dimensions(const cJSON *o, int64_t dim, int64_t *out, srv_response *r, int openai) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "dimensions");
    *out = 0;
    if (!v || cJSON_IsNull(v)) return 0;
    double d = cJSON_IsNumber(v) ? v->valuedouble : -1;
    if (!cJSON_IsNumber(v) || d < 0 || d != floor(d) || d > 1e15) {
        srv_error(r, E_VALIDATION, openai, "`dimensions` must be a non-negative integer");
        return -1;
    }
    if (d == 0) {
        srv_error(r, E_VALIDATION, openai, "`dimensions` should be positive");
        return -1;
    }
    if (d > (double)dim) {
        srv_error(r, E_VALIDATION, openai, "`dimensions` (%.0f) must not exceed the model's embedding size %lld", d,
                  (long long)dim);
        return -1;
    }
    *out = (int64_t)d;
    return 0;
}

int64_t rq_count_chars(const char *s, size_t n) {
    int64_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

/* A string value as a text, checked to be UTF-8 (cJSON keeps bytes as they came). */
int rq_text(const cJSON *v, bert8_text *t, const char *what, int64_t i, srv_response *r, int openai) {
    if (!cJSON_IsString(v) || !v->valuestring) {
        if (i >= 0) srv_error(r, E_VALIDATION, openai, "`%s[%lld]` must be a string", what, (long long)i);
        else srv_error(r, E_VALIDATION, openai, "`%s` must be a string", what);
        return -1;
    }
    size_t len = strlen(v->valuestring), bad = 0;
    if (!bert8_utf8_valid(v->valuestring, len, &bad)) {
        if (i >= 0)
            srv_error(r, E_VALIDATION, openai, "`%s[%lld]` is not valid UTF-8 (byte %zu)", what, (long long)i, bad);
        else srv_error(r, E_VALIDATION, openai, "`%s` is not valid UTF-8 (byte %zu)", what, bad);
        return -1;
    }
    *t = (bert8_text){v->valuestring, len};
    return 0;
}

int rq_alloc_inputs(srv_call *c, int64_t n, int pairs, srv_response *r) {
    size_t m = (size_t)(n > 0 ? n : 1);
    c->n = n;
    c->texts = calloc(m, sizeof *c->texts);
    c->tokens = calloc(m, sizeof *c->tokens);
    c->ids = calloc(m, sizeof *c->ids);
    c->pairs = pairs ? calloc(m, sizeof *c->pairs) : NULL;
    if (!c->texts || !c->tokens || !c->ids || (pairs && !c->pairs)) {
        srv_error(r, E_BACKEND, c->openai, "out of memory");
        return -1;
    }
    return 0;
}

int rq_check_batch(srv_server *s, srv_call *c, int64_t n, const char *what, srv_response *r) {
    if (n == 0) {
        srv_error(r, E_EMPTY, c->openai, "`%s` cannot be empty", what);
        rq_fail_metric(s, "validation");
        return -1;
    }
    if (n > s->cfg.max_client_batch_size) {
        srv_error(r, E_VALIDATION, c->openai, "batch size %lld > maximum allowed batch size %lld", (long long)n,
                  (long long)s->cfg.max_client_batch_size);
        rq_fail_metric(s, "batch_size");
        return -1;
    }
    return 0;
}

/* TEI's prompt_name: one of config_sentence_transformers.json's prompts, prepended to each
 * text (an unknown name is refused when the texts are tokenized, in TEI's words). */
int rq_prompt_name(const cJSON *o, srv_call *c, srv_response *r) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "prompt_name");
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsString(v)) {
        srv_error(r, E_VALIDATION, c->openai, "`prompt_name` must be a string");
        return -1;
    }
    c->prompt_name = v->valuestring;
    return 0;
}

/* The text of a prompt name (TEI's error when the folder has no such prompt), or the server's
 * default prompt when name is NULL; *text NULL: no prompt. */
int rq_prompt_text(srv_server *s, const char *name, const char **text, int openai, srv_response *r) {
    *text = name ? NULL : s->info->default_prompt;
    if (!name) return 0;
    const char *pn, *pt;
    for (int64_t i = 0; bert8_pipeline_prompt(s->pipe, i, &pn, &pt); i++)
        if (!strcmp(pn, name)) {
            *text = pt;
            return 0;
        }
    if (!s->info->prompts) {
        srv_error(r, E_VALIDATION, openai,
                  "`default-prompt-name` is set to `%s` but no prompts were found in the Sentence Transformers "
                  "configuration",
                  name);
        return -1;
    }
    jbuf b = {0};
    for (int64_t i = 0; bert8_pipeline_prompt(s->pipe, i, &pn, NULL); i++) {
        jb_puts(&b, i ? ", " : "[");
        jb_cstr(&b, pn);
    }
    jb_putc(&b, ']');
    jb_putc(&b, 0);
    srv_error(r, E_VALIDATION, openai,
              "`default-prompt-name` is set to `%s` but it was not found in the Sentence Transformers prompts. "
              "Available prompts: %s",
              name, b.oom ? "?" : b.data);
    jb_free(&b);
    return -1;
}

/* An input of token ids (TEI's InputType::Ids): integers in the vocabulary, at least one. */
static int get_ids(srv_server *s, srv_call *c, const cJSON *v, const char *what, int64_t i, srv_response *r) {
    if (!c->given && (!(c->given = calloc((size_t)c->n, sizeof *c->given)) ||
                      !(c->given_n = calloc((size_t)c->n, sizeof *c->given_n)))) {
        srv_error(r, E_BACKEND, c->openai, "out of memory");
        return -1;
    }
    int64_t m = cJSON_GetArraySize(v), vocab = bert8_tokenizer_vocab_size(s->tok), k = 0;
    if (m == 0) {
        srv_error(r, E_EMPTY, c->openai, "`inputs` cannot be empty"); /* TEI's words for empty ids */
        return -1;
    }
    if (!(c->given[i] = malloc((size_t)m * sizeof **c->given))) {
        srv_error(r, E_BACKEND, c->openai, "out of memory");
        return -1;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, v) {
        double d = cJSON_IsNumber(e) ? e->valuedouble : -1;
        if (!cJSON_IsNumber(e) || d < 0 || d != floor(d) || d >= (double)vocab) {
            srv_error(r, E_VALIDATION, c->openai, "`%s[%lld][%lld]` must be a token id in [0, %lld)", what, (long long)i,
                      (long long)k, (long long)vocab);
            return -1;
        }
        c->given[i][k++] = (int32_t)d;
    }
    c->given_n[i] = m;
    c->texts[i] = (bert8_text){"", 0}; /* a placeholder: the ids are the input */
    return 0;
}

static int all_numbers(const cJSON *v) {
    const cJSON *e;
    cJSON_ArrayForEach(e, v) if (!cJSON_IsNumber(e)) return 0;
    return cJSON_GetArraySize(v) > 0;
}

/* inputs: a string, a list of token ids, or a list of strings and lists of token ids (TEI's
 * Input); allow_ids 0: strings only. */
int rq_inputs(srv_server *s, srv_call *c, const cJSON *v, const char *what, int allow_ids, srv_response *r) {
    if (allow_ids && cJSON_IsArray(v) && all_numbers(v)) { /* one input of ids */
        c->single = 1;
        return rq_alloc_inputs(c, 1, 0, r) || get_ids(s, c, v, what, 0, r) ? -1 : 0;
    }
    if (!v) {
        srv_error(r, E_VALIDATION, c->openai, "missing field `%s`", what);
        return -1;
    }
    if (cJSON_IsString(v)) {
        c->single = 1;
        if (rq_alloc_inputs(c, 1, 0, r)) return -1;
        return rq_text(v, &c->texts[0], what, -1, r, c->openai);
    }
    if (!cJSON_IsArray(v)) {
        srv_error(r, E_VALIDATION, c->openai, "`%s` must be a string or a list of strings%s", what,
                  allow_ids ? " or token ids" : "");
        return -1;
    }
    int64_t n = cJSON_GetArraySize(v);
    if (rq_check_batch(s, c, n, what, r) || rq_alloc_inputs(c, n, 0, r)) return -1;
    int64_t i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, v) {
        if (allow_ids && cJSON_IsArray(e)) {
            if (get_ids(s, c, e, what, i++, r)) return -1;
            continue;
        }
        if (cJSON_IsNumber(e) || cJSON_IsArray(e)) {
            srv_error(r, E_VALIDATION, c->openai, "`%s[%lld]` must be a string", what, (long long)i);
            return -1;
        }
        if (rq_text(e, &c->texts[i], what, i, r, c->openai)) return -1;
        i++;
    }
    return 0;
}

/* inputs of text only (/tokenize: TEI's TokenizeInput). */
int rq_string_inputs(srv_server *s, srv_call *c, const cJSON *v, const char *what, srv_response *r) {
    return rq_inputs(s, c, v, what, 0, r);
}

/* The ids inputs of a call that takes a prompt become text (TEI decodes them, skipping special
 * tokens, and tokenizes prompt + text); the others stay ids. */
static int decode_given(srv_server *s, srv_call *c, int embed, srv_response *r) {
    if (!c->given || !embed || (!c->prompt_name && !s->info->default_prompt)) return 0;
    if (!(c->decoded = calloc((size_t)c->n, sizeof *c->decoded))) {
        srv_error(r, E_BACKEND, c->openai, "out of memory");
        return -1;
    }
    for (int64_t i = 0; i < c->n; i++) {
        if (!c->given[i]) continue;
        char err[512] = "";
        bert8_status st = bert8_decode(s->tok, c->given[i], c->given_n[i], 1, &c->decoded[i], err, sizeof err);
        if (st) {
            srv_error(r, E_TOKENIZER, c->openai, "%s", err[0] ? err : bert8_status_string(st));
            return -1;
        }
        c->texts[i] = (bert8_text){c->decoded[i], strlen(c->decoded[i])};
        free(c->given[i]);
        c->given[i] = NULL;
    }
    return 0;
}

/* ---- tokenization: count real tokens, reject long inputs without truncation ---------------- */

int rq_tokenize(srv_server *s, srv_call *c, int truncate, bert8_side side, int embed, srv_response *r) {
    int64_t t0 = srv_now_ns();
    bert8_run_options ro = bert8_default_run_options();
    ro.truncate = truncate;
    ro.truncation_side = side;
    ro.max_length = s->max_input_length;
    bert8_embed_options eo = bert8_default_embed_options();
    eo.prompt_name = c->prompt_name;
    char err[512];
    /* an empty text (of a pair: both empty) is refused as TEI refuses it, before it is tokenized */
    for (int64_t i = 0; i < c->n; i++) {
        if ((c->given && c->given[i]) || c->texts[i].len || (c->pairs && c->pairs[i].data && c->pairs[i].len)) continue;
        srv_error(r, E_EMPTY, c->openai, "`inputs` cannot be empty");
        rq_fail_metric(s, "validation");
        return -1;
    }
    int rc = decode_given(s, c, embed, r);
    if (rc) return rc;
    const int64_t CHUNK = 32; /* bounds each padded encoding's size */
    c->encs = calloc((size_t)((c->n + CHUNK - 1) / CHUNK + 1), sizeof *c->encs);
    if (!c->encs) {
        srv_error(r, E_BACKEND, c->openai, "out of memory");
        return -1;
    }
    for (int64_t i0 = 0; i0 < c->n && !rc; i0 += CHUNK) {
        int64_t nb = c->n - i0 < CHUNK ? c->n - i0 : CHUNK, plen = 0;
        bert8_encoding *enc = &c->encs[c->n_encs++];
        err[0] = 0;
        bert8_status st = bert8_pipeline_encode(s->pipe, nb, c->texts + i0, c->pairs ? c->pairs + i0 : NULL, &ro,
                                                embed ? &eo : NULL, enc, &plen, err, sizeof err);
        if (st) {
            int client = st == BERT8_ERR_ENCODING || st == BERT8_ERR_TOO_LARGE || st == BERT8_ERR_INVALID_ARG;
            srv_error(r, client ? E_VALIDATION : E_TOKENIZER, c->openai, "%s", err[0] ? err : bert8_status_string(st));
            rq_fail_metric(s, client ? "validation" : "tokenizer");
            rc = -1;
            break;
        }
        for (int64_t row = 0; row < enc->rows; row++) {
            int64_t in = i0 + enc->row_input[row];
            if (in >= c->n) continue;
            c->tokens[in] = enc->lengths[row];
            c->ids[in] = (bert8_token_ids){enc->input_ids + row * enc->seq, enc->token_type_ids + row * enc->seq,
                                           enc->lengths[row], plen};
        }
        for (int64_t i = i0; c->given && i < i0 + nb; i++) { /* ids inputs run as given (cut when truncating) */
            if (!c->given[i]) continue;
            int64_t len = c->given_n[i], skip = 0;
            if (truncate && len > s->max_input_length) {
                if (side == BERT8_SIDE_LEFT) skip = len - s->max_input_length;
                len = s->max_input_length;
            }
            c->tokens[i] = len;
            c->ids[i] = (bert8_token_ids){c->given[i] + skip, NULL, len, 0};
        }
        for (int64_t i = i0; i < i0 + nb; i++) {
            if (!truncate && c->tokens[i] > s->max_input_length) {
                srv_error(r, E_VALIDATION, c->openai, "`inputs` must have less than %lld tokens. Given: %lld",
                          (long long)s->max_input_length, (long long)c->tokens[i]);
                rq_fail_metric(s, "validation");
                rc = -1;
                break;
            }
            srv_metrics_observe(s->metrics, H_INPUT_LENGTH, (double)c->tokens[i]);
            c->total_tokens += c->tokens[i];
            c->chars += rq_count_chars(c->texts[i].data, c->texts[i].len);
            if (c->pairs && c->pairs[i].data) c->chars += rq_count_chars(c->pairs[i].data, c->pairs[i].len);
        }
    }
    c->tokenization_ns = srv_now_ns() - t0;
    return rc;
}

int rq_acquire(srv_server *s, srv_call *c, srv_response *r) {
    int64_t before = atomic_fetch_add(&s->inflight, c->n);
    if (before + c->n > s->cfg.max_concurrent_requests) {
        atomic_fetch_sub(&s->inflight, c->n);
        srv_error(r, E_OVERLOADED, c->openai, "Model is overloaded");
        rq_fail_metric(s, "overloaded");
        return -1;
    }
    c->permits = c->n;
    return 0;
}

int rq_need_model(srv_server *s, srv_call *c, int ok, const char *msg, srv_response *r) {
    if (ok) return 0;
    srv_error(r, E_BACKEND, c->openai, "%s", msg);
    rq_fail_metric(s, "model_type");
    return -1;
}

void rq_json_response(srv_response *r, jbuf *b) {
    r->status = b->oom ? 500 : 200;
    r->content_type = "application/json";
    r->body = jb_take(b, &r->len);
}

/* ---- the job ------------------------------------------------------------------------------- */

void rq_job_common(srv_server *s, srv_call *c, srv_kind kind, int truncate, bert8_side side) {
    srv_job *j = &c->job;
    j->kind = kind;
    j->n = c->n;
    j->ids = c->ids;
    j->tokens = c->tokens;
    j->run = bert8_default_run_options();
    j->run.truncate = truncate;
    j->run.truncation_side = side;
    j->run.max_length = s->max_input_length;
    j->embed = bert8_default_embed_options();
    j->embed.pooling = s->cfg.pooling;
    j->score_fn = BERT8_SCORE_AUTO;
}

int rq_alloc_out(srv_call *c, int64_t width, srv_response *r) {
    srv_job *j = &c->job;
    j->width = width;
    if (j->kind == K_EMBED_ALL || j->kind == K_SPARSE) {
        j->rows = calloc((size_t)c->n, sizeof *j->rows);
        j->row_count = calloc((size_t)c->n, sizeof *j->row_count);
        if (j->kind == K_SPARSE) j->sp_index = calloc((size_t)c->n, sizeof *j->sp_index);
        if (j->rows && j->row_count && (j->kind != K_SPARSE || j->sp_index)) return 0;
    } else if ((uint64_t)c->n <= SIZE_MAX / sizeof(float) / (uint64_t)(width > 0 ? width : 1)) {
        j->out = calloc((size_t)c->n * (size_t)(width > 0 ? width : 1), sizeof(float));
        if (j->out) return 0;
    }
    srv_error(r, E_BACKEND, c->openai, "out of memory");
    return -1;
}
