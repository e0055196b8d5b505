/* routes.c: TEI's routes over the pipeline. For each POST route: parse the JSON body, check it
 * as TEI does (types, empty and oversized batches, the model's type, prompt names), take one
 * permit per input (429 past --max-concurrent-requests), tokenize (the prompt prepended; 422 for
 * an input too long without truncation), then queue a job that carries the token ids, so the
 * model thread never tokenizes again; when the job has run, write TEI's response. These run on
 * the HTTP worker threads, so parsing and tokenization never hold up the model thread.
 *
 * This file holds the route table and one request's way from body to queued job to response;
 * each family of routes has its own file (routes.h lists them), the request parsing helpers are
 * request.c's. */
#include <stdlib.h>
#include <string.h>

#include "routes.h"

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
        srv_health_route(s, state, r);
        return 0;
    }
    if (route == R_METRICS) {
        srv_metrics_route(s, r);
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
        srv_info_route(s, r);
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
        rq_fail_metric(s, "validation");
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
    case R_TOKENIZE: srv_tokenize_route(s, c, c->root, r); call_release(s, c); return 0;
    case R_DECODE: srv_decode_route(s, c->root, r); call_release(s, c); return 0;
    case R_EMBED:
    case R_EMBED_ALL:
    case R_OPENAI: rc = srv_embed_parse(s, c, c->root, r); break;
    case R_EMBED_SPARSE: rc = srv_sparse_parse(s, c, c->root, r); break;
    case R_SIMILARITY: rc = srv_similarity_parse(s, c, c->root, r); break;
    case R_PREDICT: rc = srv_predict_parse(s, c, c->root, r); break;
    case R_RERANK: rc = srv_rerank_parse(s, c, c->root, r); break;
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

static void build(srv_server *s, srv_call *c, srv_response *r) {
    switch (c->route) {
    case R_EMBED:
    case R_EMBED_ALL:
    case R_OPENAI:
    case R_SIMILARITY: srv_embed_build(s, c, r); break;
    case R_EMBED_SPARSE: srv_sparse_build(s, c, r); break;
    case R_PREDICT:
    case R_RERANK: srv_rank_build(s, c, r); break;
    default: {
        jbuf b = {0};
        rq_json_response(r, &b);
    }
    }
}

void srv_call_finish(srv_server *s, srv_call *c, srv_response *r) {
    *r = (srv_response){0};
    const srv_job *j = &c->job;
    if (j->status) {
        int client = j->status == BERT8_ERR_TOO_LARGE || j->status == BERT8_ERR_ENCODING ||
                     j->status == BERT8_ERR_INVALID_ARG;
        srv_error(r, client ? E_VALIDATION : E_BACKEND, c->openai, "%s", j->err);
        rq_fail_metric(s, client ? "validation" : "backend");
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
