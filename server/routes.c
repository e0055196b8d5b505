/* routes.c: TEI's routes over the pipeline. For each POST route: parse the JSON body, check it
 * as TEI does (types, empty and oversized batches, the model's type, prompt names), take one
 * permit per input (429 past --max-concurrent-requests), tokenize (the prompt prepended; 422 for
 * an input too long without truncation), then queue a job that carries the token ids, so the
 * model thread never tokenizes again; when the job has run, write TEI's response. These run on
 * the HTTP worker threads, so parsing and tokenization never hold up the model thread. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

typedef struct srv_call {
    srv_route_id route;  /* what runs (the default route resolved) */
    int openai;          /* error and success bodies in OpenAI's shape */
    int single;          /* the request gave one input, not a list */
    cJSON *root;         /* the parsed body; texts point into it */
    int64_t n;           /* inputs */
    bert8_text *texts, *pairs;
    int64_t *tokens;
    bert8_token_ids *ids;  /* [n] into encs */
    bert8_encoding *encs;  /* the request's encodings, chunk by chunk */
    int64_t n_encs;
    const char *prompt_name; /* the request's (points into root), NULL: the default */
    int32_t **given;       /* NULL or [n]: token ids an input gave instead of text (TEI's ids inputs) */
    int64_t *given_n;
    char **decoded;        /* NULL or [n]: an ids input decoded to text, to take a prompt */
    int64_t permits;
    int64_t chars, total_tokens;
    int64_t tokenization_ns;
    int raw_scores, return_text, base64;
    srv_job job;
} srv_call;

/* ---- errors ---------------------------------------------------------------------------- */

static const struct {
    int status;
    const char *name, *metric;
} ERRORS[] = {
    [E_VALIDATION] = {422, "Validation", "validation"}, [E_TOKENIZER] = {422, "Tokenizer", "tokenizer"},
    [E_OVERLOADED] = {429, "Overloaded", "overloaded"}, [E_BACKEND] = {424, "Backend", "backend"},
    [E_EMPTY] = {400, "Empty", "empty"},                [E_UNHEALTHY] = {503, "Unhealthy", "unhealthy"},
};

int srv_error_status(srv_error_type t) { return ERRORS[t].status; }
const char *srv_error_name(srv_error_type t) { return ERRORS[t].name; }

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

static void fail_metric(srv_server *s, const char *err) { srv_metrics_count(s->metrics, "te_request_failure", "err", err); }

/* ---- routing --------------------------------------------------------------------------- */

static const struct {
    const char *path;
    srv_route_id id;
    int post;
} ROUTES[] = {
    {"/health", R_HEALTH, 0},       {"/ping", R_HEALTH, 0},         {"/info", R_INFO, 0},
    {"/metrics", R_METRICS, 0},     {"/embed", R_EMBED, 1},         {"/embed_all", R_EMBED_ALL, 1},
    {"/predict", R_PREDICT, 1},     {"/rerank", R_RERANK, 1},       {"/similarity", R_SIMILARITY, 1},
    {"/tokenize", R_TOKENIZE, 1},   {"/decode", R_DECODE, 1},       {"/v1/embeddings", R_OPENAI, 1},
    {"/embeddings", R_OPENAI, 1},   {"/invocations", R_DEFAULT, 1}, {"/docs", R_DOCS, 0},
    {"/docs/", R_DOCS, 0},          {"/openapi.json", R_OPENAPI, 0}, {"/api-doc/openapi.json", R_OPENAPI, 0},
    {"/embed_sparse", R_EMBED_SPARSE, 1},
};

srv_route_id srv_route_lookup(const srv_server *s, const char *url, const char *method, int *method_ok) {
    int post = !strcmp(method, "POST"), get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
    *method_ok = 1;
    if (!strcmp(url, "/")) { /* GET / is the health check, POST / the model's task (as TEI) */
        if (get) return R_HEALTH;
        if (post) return R_DEFAULT;
        *method_ok = 0;
        return R_DEFAULT;
    }
    for (size_t i = 0; i < sizeof ROUTES / sizeof *ROUTES; i++)
        if (!strcmp(url, ROUTES[i].path)) {
            *method_ok = ROUTES[i].post ? post : get;
            return ROUTES[i].id;
        }
    return R_OTHER;
}

int srv_route_needs_auth(srv_route_id r) { return r != R_HEALTH && r != R_METRICS && r != R_DOCS && r != R_OPENAPI; }

/* ---- request fields -------------------------------------------------------------------- */

/* Each getter leaves *out at its default when the field is absent or null; a wrong type fills
 * resp with a 422 and returns -1. */
static int get_bool(const cJSON *o, const char *name, int *out, srv_response *r, int openai) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsBool(v)) {
        srv_error(r, E_VALIDATION, openai, "`%s` must be a boolean", name);
        return -1;
    }
    *out = cJSON_IsTrue(v) ? 1 : 0;
    return 0;
}

static int get_side(const cJSON *o, bert8_side *out, srv_response *r) {
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

static int get_dimensions(const cJSON *o, int64_t dim, int64_t *out, srv_response *r, int openai) {
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

static int64_t count_chars(const char *s, size_t n) {
    int64_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

/* A string value as a text, checked to be UTF-8 (cJSON keeps bytes as they came). */
static int as_text(const cJSON *v, bert8_text *t, const char *what, int64_t i, srv_response *r, int openai) {
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

static int alloc_inputs(srv_call *c, int64_t n, int pairs, srv_response *r) {
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

static int check_batch(srv_server *s, srv_call *c, int64_t n, const char *what, srv_response *r) {
    if (n == 0) {
        srv_error(r, E_EMPTY, c->openai, "`%s` cannot be empty", what);
        fail_metric(s, "validation");
        return -1;
    }
    if (n > s->cfg.max_client_batch_size) {
        srv_error(r, E_VALIDATION, c->openai, "batch size %lld > maximum allowed batch size %lld", (long long)n,
                  (long long)s->cfg.max_client_batch_size);
        fail_metric(s, "batch_size");
        return -1;
    }
    return 0;
}

/* TEI's prompt_name: one of config_sentence_transformers.json's prompts, prepended to each
 * text (an unknown name is refused when the texts are tokenized, in TEI's words). */
static int get_prompt_name(const cJSON *o, srv_call *c, srv_response *r) {
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
static int prompt_text(srv_server *s, const char *name, const char **text, int openai, srv_response *r) {
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
static int get_inputs(srv_server *s, srv_call *c, const cJSON *v, const char *what, int allow_ids, srv_response *r) {
    if (allow_ids && cJSON_IsArray(v) && all_numbers(v)) { /* one input of ids */
        c->single = 1;
        return alloc_inputs(c, 1, 0, r) || get_ids(s, c, v, what, 0, r) ? -1 : 0;
    }
    if (!v) {
        srv_error(r, E_VALIDATION, c->openai, "missing field `%s`", what);
        return -1;
    }
    if (cJSON_IsString(v)) {
        c->single = 1;
        if (alloc_inputs(c, 1, 0, r)) return -1;
        return as_text(v, &c->texts[0], what, -1, r, c->openai);
    }
    if (!cJSON_IsArray(v)) {
        srv_error(r, E_VALIDATION, c->openai, "`%s` must be a string or a list of strings%s", what,
                  allow_ids ? " or token ids" : "");
        return -1;
    }
    int64_t n = cJSON_GetArraySize(v);
    if (check_batch(s, c, n, what, r) || alloc_inputs(c, n, 0, r)) return -1;
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
        if (as_text(e, &c->texts[i], what, i, r, c->openai)) return -1;
        i++;
    }
    return 0;
}

/* inputs of text only (/tokenize: TEI's TokenizeInput). */
static int get_string_inputs(srv_server *s, srv_call *c, const cJSON *v, const char *what, srv_response *r) {
    return get_inputs(s, c, v, what, 0, r);
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

static int tokenize_inputs(srv_server *s, srv_call *c, int truncate, bert8_side side, int embed, srv_response *r) {
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
        fail_metric(s, "validation");
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
            fail_metric(s, client ? "validation" : "tokenizer");
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
                fail_metric(s, "validation");
                rc = -1;
                break;
            }
            srv_metrics_observe(s->metrics, H_INPUT_LENGTH, (double)c->tokens[i]);
            c->total_tokens += c->tokens[i];
            c->chars += count_chars(c->texts[i].data, c->texts[i].len);
            if (c->pairs && c->pairs[i].data) c->chars += count_chars(c->pairs[i].data, c->pairs[i].len);
        }
    }
    c->tokenization_ns = srv_now_ns() - t0;
    return rc;
}

static int acquire(srv_server *s, srv_call *c, srv_response *r) {
    int64_t before = atomic_fetch_add(&s->inflight, c->n);
    if (before + c->n > s->cfg.max_concurrent_requests) {
        atomic_fetch_sub(&s->inflight, c->n);
        srv_error(r, E_OVERLOADED, c->openai, "Model is overloaded");
        fail_metric(s, "overloaded");
        return -1;
    }
    c->permits = c->n;
    return 0;
}

static int need_model(srv_server *s, srv_call *c, int ok, const char *msg, srv_response *r) {
    if (ok) return 0;
    srv_error(r, E_BACKEND, c->openai, "%s", msg);
    fail_metric(s, "model_type");
    return -1;
}

/* ---- GET routes -------------------------------------------------------------------------- */

static void json_response(srv_response *r, jbuf *b) {
    r->status = b->oom ? 500 : 200;
    r->content_type = "application/json";
    r->body = jb_take(b, &r->len);
}

static void info_route(srv_server *s, srv_response *r) {
    jbuf b = {0};
    const bert8_model_info *mi = s->info->model;
    jb_puts(&b, "{\"model_id\":");
    jb_cstr(&b, s->cfg.model_id);
    jb_puts(&b, ",\"model_sha\":null,\"model_dtype\":");
    jb_cstr(&b, mi->quantized ? "int8" : "float32");
    jb_puts(&b, ",\"quantization\":");
    if (mi->quantized) jb_cstr(&b, mi->scheme == BERT8_SCHEME_STATIC ? "static" : "dynamic");
    else jb_puts(&b, "null");
    jb_puts(&b, ",\"served_model_name\":");
    jb_cstr(&b, s->cfg.served_model_name);
    jb_puts(&b, ",\"model_type\":");
    if (s->mtype == MT_EMBEDDING) {
        static const char *const POOL[] = {[BERT8_POOLING_DEFAULT] = "mean", [BERT8_POOLING_CLS] = "cls",
                                           [BERT8_POOLING_MEAN] = "mean", [BERT8_POOLING_MAX] = "max",
                                           [BERT8_POOLING_MEAN_SQRT_LEN] = "mean_sqrt_len_tokens",
                                           [BERT8_POOLING_WEIGHTED_MEAN] = "weightedmean",
                                           [BERT8_POOLING_LAST_TOKEN] = "last_token"};
        const unsigned pi = (unsigned)s->info->pooling;
        jb_printf(&b, "{\"embedding\":{\"pooling\":\"%s\"}}", pi < sizeof POOL / sizeof *POOL ? POOL[pi] : "mean");
    } else {
        jb_printf(&b, "{\"%s\":{\"id2label\":{", s->mtype == MT_RERANKER ? "reranker" : "classifier");
        for (int64_t i = 0; i < s->info->num_labels; i++) {
            jb_printf(&b, "%s\"%lld\":", i ? "," : "", (long long)i);
            jb_cstr(&b, bert8_pipeline_label(s->pipe, i));
        }
        jb_puts(&b, "},\"label2id\":{");
        for (int64_t i = 0; i < s->info->num_labels; i++) {
            if (i) jb_putc(&b, ',');
            jb_cstr(&b, bert8_pipeline_label(s->pipe, i));
            jb_printf(&b, ":%lld", (long long)i);
        }
        jb_puts(&b, "}}}");
    }
    jb_printf(&b,
              ",\"max_concurrent_requests\":%lld,\"max_input_length\":%lld,\"max_batch_tokens\":%lld,"
              "\"max_batch_requests\":",
              (long long)s->cfg.max_concurrent_requests, (long long)s->max_input_length,
              (long long)s->cfg.max_batch_tokens);
    if (s->cfg.max_batch_requests) jb_int(&b, s->cfg.max_batch_requests);
    else jb_puts(&b, "null");
    jb_printf(&b,
              ",\"max_client_batch_size\":%lld,\"auto_truncate\":%s,\"tokenization_workers\":%d,"
              "\"threads\":%d,\"version\":\"%s\",\"sha\":null,\"docker_label\":null}",
              (long long)s->cfg.max_client_batch_size, s->cfg.auto_truncate ? "true" : "false",
              s->cfg.tokenization_workers, s->cfg.threads,
              bert8_version());
    json_response(r, &b);
}

static void metrics_route(srv_server *s, srv_response *r) {
    jbuf b = {0};
    int64_t qi = 0, qr = 0;
    srv_sched_depth(s->sched, &qi, &qr);
    srv_metrics_render(s->metrics, &b, qi, qr, atomic_load(&s->inflight));
    json_response(r, &b);
    r->content_type = "text/plain; version=0.0.4";
}

/* ---- /tokenize and /decode (no model work) --------------------------------------------------- */

static void tokenize_route(srv_server *s, srv_call *c, const cJSON *root, srv_response *r) {
    int add_special = 1;
    const char *prompt;
    if (get_bool(root, "add_special_tokens", &add_special, r, 0) || get_prompt_name(root, c, r) ||
        get_string_inputs(s, c, cJSON_GetObjectItemCaseSensitive(root, "inputs"), "inputs", r) ||
        prompt_text(s, c->prompt_name, &prompt, 0, r))
        return;
    /* TEI tokenizes prompt + text, and the offsets point into that string */
    char *joined = NULL;
    bert8_text *texts = c->texts;
    if (prompt && prompt[0]) {
        size_t plen = strlen(prompt), total = 0;
        for (int64_t i = 0; i < c->n; i++) total += plen + c->texts[i].len;
        bert8_text *t = malloc((size_t)c->n * sizeof *t);
        joined = malloc(total ? total : 1);
        if (!t || !joined) {
            free(t);
            free(joined);
            srv_error(r, E_BACKEND, 0, "out of memory");
            return;
        }
        char *w = joined;
        for (int64_t i = 0; i < c->n; i++) {
            memcpy(w, prompt, plen);
            memcpy(w + plen, c->texts[i].data, c->texts[i].len);
            t[i] = (bert8_text){w, plen + c->texts[i].len};
            w += t[i].len;
        }
        texts = t;
    }
    bert8_encode_params ep = bert8_default_encode_params();
    ep.add_special_tokens = add_special;
    ep.truncation = BERT8_TRUNCATE_NONE;
    bert8_encoding enc = {0};
    char err[512] = "";
    bert8_status st = bert8_encode_texts(s->tok, c->n, texts, NULL, &ep, &enc, err, sizeof err);
    if (st) {
        if (texts != c->texts) free(texts);
        free(joined);
        srv_error(r, st == BERT8_ERR_ENCODING ? E_VALIDATION : E_TOKENIZER, 0, "%s", err[0] ? err : bert8_status_string(st));
        fail_metric(s, "tokenizer");
        return;
    }
    jbuf b = {0};
    jb_putc(&b, '[');
    for (int64_t row = 0; row < enc.rows; row++) {
        const bert8_text *t = &texts[enc.row_input[row]];
        jb_puts(&b, row ? ",[" : "[");
        for (int64_t k = 0; k < enc.lengths[row]; k++) {
            int64_t at = row * enc.seq + k;
            int32_t id = enc.input_ids[at];
            int special = enc.special_mask[at] != 0;
            jb_printf(&b, "%s{\"id\":%d,\"text\":", k ? "," : "", (int)id);
            int64_t a = enc.offsets[2 * at], e = enc.offsets[2 * at + 1];
            if (special || a < 0 || e < a || (uint64_t)e > t->len) {
                jb_cstr(&b, bert8_tokenizer_id_to_token(s->tok, id));
                jb_puts(&b, ",\"special\":");
                jb_puts(&b, special ? "true" : "false");
                jb_puts(&b, ",\"start\":null,\"stop\":null}");
            } else {
                jb_str(&b, t->data + a, (size_t)(e - a));
                jb_printf(&b, ",\"special\":false,\"start\":%lld,\"stop\":%lld}", (long long)a, (long long)e);
            }
        }
        jb_putc(&b, ']');
    }
    jb_putc(&b, ']');
    bert8_encoding_free(&enc);
    if (texts != c->texts) free(texts);
    free(joined);
    json_response(r, &b);
}

static int ids_of(srv_server *s, const cJSON *a, int32_t **ids, int64_t *n, int64_t which, srv_response *r) {
    int64_t m = cJSON_GetArraySize(a);
    *ids = malloc((size_t)(m > 0 ? m : 1) * sizeof **ids);
    *n = 0;
    if (!*ids) {
        srv_error(r, E_BACKEND, 0, "out of memory");
        return -1;
    }
    const cJSON *e;
    int64_t vocab = bert8_tokenizer_vocab_size(s->tok);
    cJSON_ArrayForEach(e, a) {
        double d = cJSON_IsNumber(e) ? e->valuedouble : -1;
        if (!cJSON_IsNumber(e) || d < 0 || d != floor(d) || d >= (double)vocab) {
            if (which >= 0)
                srv_error(r, E_VALIDATION, 0, "`ids[%lld][%lld]` must be a token id in [0, %lld)", (long long)which,
                          (long long)*n, (long long)vocab);
            else
                srv_error(r, E_VALIDATION, 0, "`ids[%lld]` must be a token id in [0, %lld)", (long long)*n,
                          (long long)vocab);
            return -1;
        }
        (*ids)[(*n)++] = (int32_t)d;
    }
    return 0;
}

static void decode_route(srv_server *s, const cJSON *root, srv_response *r) {
    int skip = 1;
    if (get_bool(root, "skip_special_tokens", &skip, r, 0)) return;
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(root, "ids");
    if (!cJSON_IsArray(ids)) {
        srv_error(r, E_VALIDATION, 0, "`ids` must be a list of token ids or a list of such lists");
        return;
    }
    int batch = cJSON_GetArraySize(ids) > 0 && cJSON_IsArray(cJSON_GetArrayItem(ids, 0));
    int64_t n = batch ? cJSON_GetArraySize(ids) : 1;
    if (batch && n > s->cfg.max_client_batch_size) {
        srv_error(r, E_VALIDATION, 0, "batch size %lld > maximum allowed batch size %lld", (long long)n,
                  (long long)s->cfg.max_client_batch_size);
        fail_metric(s, "batch_size");
        return;
    }
    jbuf b = {0};
    jb_putc(&b, '[');
    for (int64_t i = 0; i < n; i++) {
        const cJSON *a = batch ? cJSON_GetArrayItem(ids, (int)i) : ids;
        if (!cJSON_IsArray(a)) {
            srv_error(r, E_VALIDATION, 0, "`ids[%lld]` must be a list of token ids", (long long)i);
            jb_free(&b);
            return;
        }
        int32_t *v = NULL;
        int64_t m = 0;
        char *text = NULL, err[512] = "";
        if (ids_of(s, a, &v, &m, batch ? i : -1, r)) {
            free(v);
            jb_free(&b);
            return;
        }
        bert8_status st = bert8_decode(s->tok, v, m, skip, &text, err, sizeof err);
        free(v);
        if (st) {
            srv_error(r, E_TOKENIZER, 0, "%s", err[0] ? err : bert8_status_string(st));
            jb_free(&b);
            return;
        }
        if (i) jb_putc(&b, ',');
        jb_cstr(&b, text);
        free(text);
    }
    jb_putc(&b, ']');
    json_response(r, &b);
}

/* ---- model routes: parse into a job ------------------------------------------------------- */

static void job_common(srv_server *s, srv_call *c, srv_kind kind, int truncate, bert8_side side) {
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

static int alloc_out(srv_call *c, int64_t width, srv_response *r) {
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

/* /embed, /embed_all, /v1/embeddings */
static int embed_parse(srv_server *s, srv_call *c, const cJSON *root, srv_response *r) {
    int truncate = s->cfg.auto_truncate, normalize = 1;
    bert8_side side = BERT8_SIDE_RIGHT;
    int64_t dims = 0;
    const int openai = c->route == R_OPENAI;
    if (openai) {
        const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "encoding_format");
        if (fmt && !cJSON_IsNull(fmt)) {
            if (cJSON_IsString(fmt) && !strcmp(fmt->valuestring, "base64")) c->base64 = 1;
            else if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "float")) {
                srv_error(r, E_VALIDATION, 1, "`encoding_format` must be \"float\" or \"base64\"");
                return -1;
            }
        }
        /* prompt_name is not in TEI's OpenAI request; bert8 honours it there too */
        if (get_dimensions(root, s->info->dim, &dims, r, 1) || get_prompt_name(root, c, r) ||
            get_inputs(s, c, cJSON_GetObjectItemCaseSensitive(root, "input"), "input", 1, r))
            return -1;
    } else {
        if (get_bool(root, "truncate", &truncate, r, 0) || get_side(root, &side, r) || get_prompt_name(root, c, r))
            return -1;
        if (c->route == R_EMBED && (get_bool(root, "normalize", &normalize, r, 0) ||
                                    get_dimensions(root, s->info->dim, &dims, r, 0)))
            return -1;
        if (get_inputs(s, c, cJSON_GetObjectItemCaseSensitive(root, "inputs"), "inputs", 1, r)) return -1;
    }
    srv_metrics_count(s->metrics, "te_request_count", "method", c->single ? "single" : "batch");
    if (need_model(s, c, s->mtype == MT_EMBEDDING, "Model is not an embedding model", r) ||
        need_model(s, c, !s->cfg.splade || c->route == R_EMBED_ALL,
                   "`/embed` is not available for SPLADE models (--pooling splade): use `/embed_sparse`", r))
        return -1;
    if (acquire(s, c, r) || tokenize_inputs(s, c, truncate, side, 1, r)) return -1;
    job_common(s, c, c->route == R_EMBED_ALL ? K_EMBED_ALL : K_EMBED, truncate, side);
    c->job.embed.normalize = normalize;
    c->job.embed.dimensions = dims;
    return alloc_out(c, c->route == R_EMBED_ALL ? s->info->model->hidden_size : dims ? dims : s->info->dim, r);
}

/* /embed_sparse: TEI's SPLADE route (inputs, truncate, truncation_direction, prompt_name) */
static int sparse_parse(srv_server *s, srv_call *c, const cJSON *root, srv_response *r) {
    int truncate = s->cfg.auto_truncate;
    bert8_side side = BERT8_SIDE_RIGHT;
    if (get_bool(root, "truncate", &truncate, r, 0) || get_side(root, &side, r) || get_prompt_name(root, c, r) ||
        get_inputs(s, c, cJSON_GetObjectItemCaseSensitive(root, "inputs"), "inputs", 1, r))
        return -1;
    srv_metrics_count(s->metrics, "te_request_count", "method", c->single ? "single" : "batch");
    if (need_model(s, c, bert8_pipeline_get_info(s->pipe)->model->has_mlm_head,
                   "`/embed_sparse` is only available for models with a masked-LM head (SPLADE pooling)", r))
        return -1;
    if (acquire(s, c, r) || tokenize_inputs(s, c, truncate, side, 1, r)) return -1;
    job_common(s, c, K_SPARSE, truncate, side);
    return alloc_out(c, 0, r);
}

static int similarity_parse(srv_server *s, srv_call *c, const cJSON *root, srv_response *r) {
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(root, "inputs");
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(root, "parameters");
    int truncate = s->cfg.auto_truncate;
    bert8_side side = BERT8_SIDE_RIGHT;
    if (params && !cJSON_IsNull(params) &&
        (!cJSON_IsObject(params) || get_bool(params, "truncate", &truncate, r, 0) || get_side(params, &side, r) ||
         get_prompt_name(params, c, r))) {
        if (!r->body) srv_error(r, E_VALIDATION, 0, "`parameters` must be an object");
        return -1;
    }
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(in, "source_sentence");
    const cJSON *sents = cJSON_GetObjectItemCaseSensitive(in, "sentences");
    if (!cJSON_IsObject(in) || !src || !cJSON_IsArray(sents)) {
        srv_error(r, E_VALIDATION, 0, "`inputs` must be {\"source_sentence\": string, \"sentences\": [string]}");
        return -1;
    }
    int64_t m = cJSON_GetArraySize(sents);
    if (m == 0) {
        srv_error(r, E_EMPTY, 0, "`inputs.sentences` cannot be empty");
        fail_metric(s, "validation");
        return -1;
    }
    if (m + 1 > s->cfg.max_client_batch_size) {
        srv_error(r, E_VALIDATION, 0, "batch size %lld > maximum allowed batch size %lld", (long long)(m + 1),
                  (long long)s->cfg.max_client_batch_size);
        fail_metric(s, "batch_size");
        return -1;
    }
    if (alloc_inputs(c, m + 1, 0, r) || as_text(src, &c->texts[0], "inputs.source_sentence", -1, r, 0)) return -1;
    int64_t i = 1;
    const cJSON *e;
    cJSON_ArrayForEach(e, sents) {
        if (as_text(e, &c->texts[i], "inputs.sentences", i - 1, r, 0)) return -1;
        i++;
    }
    srv_metrics_count(s->metrics, "te_request_count", "method", "batch");
    if (need_model(s, c, s->mtype == MT_EMBEDDING, "Model is not an embedding model", r)) return -1;
    if (acquire(s, c, r) || tokenize_inputs(s, c, truncate, side, 1, r)) return -1;
    job_common(s, c, K_EMBED, truncate, side);
    c->job.embed.normalize = 0;
    return alloc_out(c, s->info->dim, r);
}

/* One predict input: "a" | ["a"] | ["a", "b"]. */
static int predict_sequence(srv_call *c, const cJSON *v, int64_t i, srv_response *r) {
    if (cJSON_IsString(v)) return as_text(v, &c->texts[i], "inputs", i, r, 0);
    int m = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 0;
    if (m != 1 && m != 2) {
        srv_error(r, E_VALIDATION, 0,
                  "`inputs` must be a string, a pair of strings [string, string] or a batch of mixed strings and pairs "
                  "[[string], [string, string], ...]");
        return -1;
    }
    if (as_text(cJSON_GetArrayItem(v, 0), &c->texts[i], "inputs", i, r, 0)) return -1;
    if (m == 2 && as_text(cJSON_GetArrayItem(v, 1), &c->pairs[i], "inputs", i, r, 0)) return -1;
    return 0;
}

static int predict_parse(srv_server *s, srv_call *c, const cJSON *root, srv_response *r) {
    int truncate = s->cfg.auto_truncate;
    bert8_side side = BERT8_SIDE_RIGHT;
    if (get_bool(root, "truncate", &truncate, r, 0) || get_side(root, &side, r) ||
        get_bool(root, "raw_scores", &c->raw_scores, r, 0))
        return -1;
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(root, "inputs");
    const char *shape_err = "`inputs` must be a string, a pair of strings [string, string] or a batch of mixed "
                            "strings and pairs [[string], [string, string], ...]";
    if (cJSON_IsString(in)) {
        c->single = 1;
        if (alloc_inputs(c, 1, 1, r) || predict_sequence(c, in, 0, r)) return -1;
    } else if (cJSON_IsArray(in) && cJSON_GetArraySize(in) > 0 && cJSON_IsString(cJSON_GetArrayItem(in, 0))) {
        c->single = 1; /* ["a"] or ["a", "b"]: one input */
        if (alloc_inputs(c, 1, 1, r) || predict_sequence(c, in, 0, r)) return -1;
    } else if (cJSON_IsArray(in) && cJSON_GetArraySize(in) > 0) {
        int64_t n = cJSON_GetArraySize(in);
        if (check_batch(s, c, n, "inputs", r) || alloc_inputs(c, n, 1, r)) return -1;
        int64_t i = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, in) {
            if (!cJSON_IsArray(e)) {
                srv_error(r, E_VALIDATION, 0, "%s", shape_err);
                return -1;
            }
            if (predict_sequence(c, e, i++, r)) return -1;
        }
    } else {
        srv_error(r, E_VALIDATION, 0, "%s", shape_err);
        return -1;
    }
    srv_metrics_count(s->metrics, "te_request_count", "method", c->single ? "single" : "batch");
    if (need_model(s, c, s->mtype != MT_EMBEDDING, "Model is not a classifier model", r)) return -1;
    if (acquire(s, c, r) || tokenize_inputs(s, c, truncate, side, 0, r)) return -1;
    job_common(s, c, K_CLASSIFY, truncate, side);
    c->job.score_fn = c->raw_scores ? BERT8_SCORE_NONE : BERT8_SCORE_AUTO;
    return alloc_out(c, s->info->num_labels, r);
}

static int rerank_parse(srv_server *s, srv_call *c, const cJSON *root, srv_response *r) {
    int truncate = s->cfg.auto_truncate;
    bert8_side side = BERT8_SIDE_RIGHT;
    if (get_bool(root, "truncate", &truncate, r, 0) || get_side(root, &side, r) ||
        get_bool(root, "raw_scores", &c->raw_scores, r, 0) || get_bool(root, "return_text", &c->return_text, r, 0))
        return -1;
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(root, "query");
    const cJSON *texts = cJSON_GetObjectItemCaseSensitive(root, "texts");
    bert8_text query;
    if (as_text(q, &query, "query", -1, r, 0)) return -1;
    if (!cJSON_IsArray(texts)) {
        srv_error(r, E_VALIDATION, 0, "`texts` must be a list of strings");
        return -1;
    }
    int64_t n = cJSON_GetArraySize(texts);
    if (n == 0) {
        srv_error(r, E_EMPTY, 0, "`texts` cannot be empty");
        fail_metric(s, "validation");
        return -1;
    }
    if (need_model(s, c, s->mtype == MT_RERANKER, "model is not a re-ranker model", r)) return -1;
    if (check_batch(s, c, n, "texts", r) || alloc_inputs(c, n, 1, r)) return -1;
    int64_t i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, texts) {
        c->texts[i] = query;
        if (as_text(e, &c->pairs[i], "texts", i, r, 0)) return -1;
        i++;
    }
    srv_metrics_count(s->metrics, "te_request_count", "method", "batch");
    if (acquire(s, c, r) || tokenize_inputs(s, c, truncate, side, 0, r)) return -1;
    job_common(s, c, K_CLASSIFY, truncate, side);
    /* one label: sigmoid(logit), as bert8_rerank; raw: the logit */
    c->job.score_fn = c->raw_scores ? BERT8_SCORE_NONE : BERT8_SCORE_SIGMOID;
    return alloc_out(c, s->info->num_labels, r);
}

/* ---- begin / finish ------------------------------------------------------------------------ */

static void call_release(srv_server *s, srv_call *c) {
    if (!c) return;
    if (c->permits) atomic_fetch_sub(&s->inflight, c->permits);
    if (c->job.rows)
        for (int64_t i = 0; i < c->n; i++) free(c->job.rows[i]);
    if (c->job.sp_index)
        for (int64_t i = 0; i < c->n; i++) free(c->job.sp_index[i]);
    free(c->job.rows);
    free(c->job.sp_index);
    free(c->job.row_count);
    free(c->job.out);
    free(c->texts);
    free(c->pairs);
    free(c->tokens);
    free(c->ids);
    for (int64_t i = 0; i < c->n && (c->given || c->decoded); i++) {
        if (c->given) free(c->given[i]);
        if (c->decoded) free(c->decoded[i]);
    }
    free(c->given);
    free(c->given_n);
    free(c->decoded);
    for (int64_t i = 0; i < c->n_encs; i++) bert8_encoding_free(&c->encs[i]);
    free(c->encs);
    cJSON_Delete(c->root);
    free(c);
}

void srv_call_free(srv_server *s, srv_call *c) { call_release(s, c); }

static int route_begin(srv_server *s, srv_route_id route, char *body, size_t len, srv_response *r, srv_call **out,
                       void (*done)(srv_job *, void *), void *arg) {
    *out = NULL;
    *r = (srv_response){0};
    int state = atomic_load(&s->state);
    if (route == R_HEALTH) {
        if (state == SRV_READY && srv_sched_healthy(s->sched)) {
            r->status = 200;
            return 0;
        }
        srv_error(r, E_UNHEALTHY, 0, state == SRV_LOADING ? "the model is loading" : "unhealthy");
        return 0;
    }
    if (route == R_METRICS) {
        metrics_route(s, r);
        return 0;
    }
    if (route == R_DOCS || route == R_OPENAPI) {
        srv_docs_route(route, r);
        return 0;
    }
    if (state != SRV_READY) {
        srv_error(r, E_UNHEALTHY, route == R_OPENAI, "%s",
                  state == SRV_LOADING ? "the model is loading" : "the server is shutting down");
        return 0;
    }
    if (route == R_INFO) {
        info_route(s, r);
        return 0;
    }
    srv_call *c = calloc(1, sizeof *c);
    if (!c) {
        srv_error(r, E_BACKEND, 0, "out of memory");
        return 0;
    }
    c->route = route;
    c->openai = route == R_OPENAI;
    const char *end = NULL;
    c->root = cJSON_ParseWithLengthOpts(body ? body : "", len, &end, 0);
    if (c->root) {
        while (end && end < body + len && (*end == ' ' || *end == '\n' || *end == '\r' || *end == '\t')) end++;
        if (end && end < body + len) {
            srv_error(r, E_VALIDATION, c->openai, "trailing characters after the JSON body at byte %lld",
                      (long long)(end - body));
            call_release(s, c);
            return 0;
        }
    }
    if (!c->root || !cJSON_IsObject(c->root)) {
        if (!c->root)
            srv_error(r, E_VALIDATION, c->openai, "the body is not valid JSON (error at byte %lld of %zu)",
                      (long long)(end && body ? end - body : 0), len);
        else srv_error(r, E_VALIDATION, c->openai, "the body must be a JSON object");
        fail_metric(s, "validation");
        call_release(s, c);
        return 0;
    }
    if (route == R_DEFAULT) {
        const cJSON *in = cJSON_GetObjectItemCaseSensitive(c->root, "inputs");
        if (s->mtype == MT_CLASSIFIER) c->route = R_PREDICT;
        else if (s->mtype == MT_RERANKER) c->route = R_RERANK;
        else if (s->cfg.similarity_default || cJSON_IsObject(in)) c->route = R_SIMILARITY;
        else c->route = R_EMBED;
    }
    int rc;
    switch (c->route) {
    case R_TOKENIZE: tokenize_route(s, c, c->root, r); call_release(s, c); return 0;
    case R_DECODE: decode_route(s, c->root, r); call_release(s, c); return 0;
    case R_EMBED:
    case R_EMBED_ALL:
    case R_OPENAI: rc = embed_parse(s, c, c->root, r); break;
    case R_EMBED_SPARSE: rc = sparse_parse(s, c, c->root, r); break;
    case R_SIMILARITY: rc = similarity_parse(s, c, c->root, r); break;
    case R_PREDICT: rc = predict_parse(s, c, c->root, r); break;
    case R_RERANK: rc = rerank_parse(s, c, c->root, r); break;
    default: srv_error(r, E_VALIDATION, 0, "unknown route"); rc = -1;
    }
    if (rc) {
        call_release(s, c);
        return 0;
    }
    c->job.done = done;
    c->job.done_arg = arg;
    if (srv_sched_submit(s->sched, &c->job)) {
        srv_error(r, E_UNHEALTHY, c->openai, "the server is shutting down");
        call_release(s, c);
        return 0;
    }
    *out = c;
    return 1;
}

/* Counted in s->admitting from before the state is read until the job is queued or refused:
 * srv_http_stop sets SRV_STOPPING, then waits for the count to fall to 0 before it stops the
 * scheduler, so a request that found the server ready (and may still be tokenizing) is queued
 * and answered, never refused with 503 half way. */
int srv_route_begin(srv_server *s, srv_route_id route, char *body, size_t len, srv_response *r, srv_call **out,
                    void (*done)(srv_job *, void *), void *arg) {
    atomic_fetch_add(&s->admitting, 1);
    int rc = route_begin(s, route, body, len, r, out, done, arg);
    atomic_fetch_sub(&s->admitting, 1);
    return rc;
}

/* ---- responses ----------------------------------------------------------------------------- */

typedef struct ranked {
    float score;
    int64_t index;
} ranked;

/* TEI sorts ascending and reverses: descending scores, ties in descending index order. */
static int by_score(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return x->index > y->index ? -1 : x->index < y->index;
}

static int sort_scores(const float *v, int64_t n, ranked *rk, srv_response *r) {
    for (int64_t i = 0; i < n; i++) {
        if (isnan(v[i])) {
            srv_error(r, E_BACKEND, 0, "score is NaN");
            return -1;
        }
        rk[i] = (ranked){v[i], i};
    }
    qsort(rk, (size_t)n, sizeof *rk, by_score);
    return 0;
}

static double cosine(const float *a, const float *b, int64_t d) {
    double ab = 0, aa = 0, bb = 0;
    for (int64_t i = 0; i < d; i++) ab += (double)a[i] * b[i], aa += (double)a[i] * a[i], bb += (double)b[i] * b[i];
    return aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : 0;
}

static void build(srv_server *s, srv_call *c, srv_response *r) {
    const srv_job *j = &c->job;
    jbuf b = {0};
    int64_t w = j->width;
    switch (c->route) {
    case R_EMBED:
        jb_putc(&b, '[');
        for (int64_t i = 0; i < c->n; i++) {
            if (i) jb_putc(&b, ',');
            jb_floats(&b, j->out + i * w, w);
        }
        jb_putc(&b, ']');
        break;
    case R_EMBED_ALL:
        jb_putc(&b, '[');
        for (int64_t i = 0; i < c->n; i++) {
            jb_puts(&b, i ? ",[" : "[");
            for (int64_t t = 0; t < j->row_count[i]; t++) {
                if (t) jb_putc(&b, ',');
                jb_floats(&b, j->rows[i] + t * w, w);
            }
            jb_putc(&b, ']');
        }
        jb_putc(&b, ']');
        break;
    case R_EMBED_SPARSE: /* [[{"index", "value"}]] */
        jb_putc(&b, '[');
        for (int64_t i = 0; i < c->n; i++) {
            jb_puts(&b, i ? ",[" : "[");
            for (int64_t t = 0; t < j->row_count[i]; t++) {
                jb_printf(&b, "%s{\"index\":%d,\"value\":", t ? "," : "", j->sp_index[i][t]);
                jb_float(&b, j->rows[i][t]);
                jb_putc(&b, '}');
            }
            jb_putc(&b, ']');
        }
        jb_putc(&b, ']');
        break;
    case R_OPENAI:
        jb_puts(&b, "{\"object\":\"list\",\"data\":[");
        for (int64_t i = 0; i < c->n; i++) {
            jb_puts(&b, i ? ",{\"object\":\"embedding\",\"embedding\":" : "{\"object\":\"embedding\",\"embedding\":");
            /* base64 of the little-endian float32 bytes, as TEI and OpenAI send them (x86 is little-endian) */
            if (c->base64) jb_base64(&b, j->out + i * w, (size_t)w * sizeof(float));
            else jb_floats(&b, j->out + i * w, w);
            jb_printf(&b, ",\"index\":%lld}", (long long)i);
        }
        jb_puts(&b, "],\"model\":");
        jb_cstr(&b, s->cfg.served_model_name);
        jb_printf(&b, ",\"usage\":{\"prompt_tokens\":%lld,\"total_tokens\":%lld}}", (long long)c->total_tokens,
                  (long long)c->total_tokens);
        break;
    case R_SIMILARITY:
        jb_putc(&b, '[');
        for (int64_t i = 1; i < c->n; i++) {
            if (i > 1) jb_putc(&b, ',');
            jb_float(&b, (float)cosine(j->out, j->out + i * w, w));
        }
        jb_putc(&b, ']');
        break;
    case R_PREDICT:
    case R_RERANK: {
        int64_t m = c->route == R_PREDICT ? w : c->n;
        ranked *rk = malloc((size_t)(m > 0 ? m : 1) * sizeof *rk);
        float *col = c->route == R_RERANK ? malloc((size_t)(m > 0 ? m : 1) * sizeof *col) : NULL;
        if (!rk || (c->route == R_RERANK && !col)) {
            free(rk);
            free(col);
            jb_free(&b);
            srv_error(r, E_BACKEND, 0, "out of memory");
            return;
        }
        if (c->route == R_RERANK) {
            for (int64_t i = 0; i < c->n; i++) col[i] = j->out[i * w + (w - 1)];
            int bad = sort_scores(col, c->n, rk, r);
            jb_putc(&b, '[');
            for (int64_t k = 0; k < c->n && !bad; k++) {
                int64_t i = rk[k].index;
                jb_printf(&b, "%s{\"index\":%lld,", k ? "," : "", (long long)i);
                if (c->return_text) {
                    jb_puts(&b, "\"text\":");
                    jb_str(&b, c->pairs[i].data, c->pairs[i].len);
                    jb_putc(&b, ',');
                }
                jb_puts(&b, "\"score\":");
                jb_float(&b, rk[k].score);
                jb_putc(&b, '}');
            }
            jb_putc(&b, ']');
        } else {
            if (!c->single) jb_putc(&b, '[');
            for (int64_t i = 0; i < c->n; i++) {
                if (sort_scores(j->out + i * w, w, rk, r)) break;
                jb_puts(&b, i ? ",[" : "[");
                for (int64_t k = 0; k < w; k++) {
                    jb_puts(&b, k ? ",{\"score\":" : "{\"score\":");
                    jb_float(&b, rk[k].score);
                    jb_puts(&b, ",\"label\":");
                    jb_cstr(&b, bert8_pipeline_label(s->pipe, rk[k].index));
                    jb_putc(&b, '}');
                }
                jb_putc(&b, ']');
            }
            if (!c->single) jb_putc(&b, ']');
        }
        free(rk);
        free(col);
        if (r->body) { /* a NaN score */
            jb_free(&b);
            return;
        }
        break;
    }
    default: break;
    }
    json_response(r, &b);
}

void srv_call_finish(srv_server *s, srv_call *c, srv_response *r) {
    *r = (srv_response){0};
    const srv_job *j = &c->job;
    if (j->status) {
        int client = j->status == BERT8_ERR_TOO_LARGE || j->status == BERT8_ERR_ENCODING ||
                     j->status == BERT8_ERR_INVALID_ARG;
        srv_error(r, client ? E_VALIDATION : E_BACKEND, c->openai, "%s", j->err);
        fail_metric(s, client ? "validation" : "backend");
    } else {
        build(s, c, r);
        if (r->status == 200) {
            srv_metrics_count(s->metrics, "te_request_success", "method", c->single ? "single" : "batch");
            r->timing = 1;
            r->compute_tokens = c->total_tokens;
            r->compute_chars = c->chars;
            r->tokenization_ns = c->tokenization_ns;
            r->queue_ns = j->t_started - j->t_enqueue;
            r->inference_ns = j->inference_ns;
            srv_metrics_observe(s->metrics, H_TOKENIZATION, (double)r->tokenization_ns * 1e-9);
            srv_metrics_observe(s->metrics, H_QUEUE, (double)r->queue_ns * 1e-9);
            srv_metrics_observe(s->metrics, H_INFERENCE, (double)r->inference_ns * 1e-9);
        }
    }
    call_release(s, c);
}
