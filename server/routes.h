/* routes.h: what the route files of `bert8 serve` share (private to server/): one request's state
 * (srv_call), the request parsing helpers of request.c (each fills resp with TEI's error and returns
 * -1 on a bad field), and each family's parse, build and route functions:
 *   route_embed.c     /embed, /embed_all, /v1/embeddings, /similarity
 *   route_classify.c  /predict, /rerank
 *   route_tokens.c    /embed_sparse, /tokenize, /decode
 *   route_admin.c     /health, /info, /metrics (and /docs, /openapi.json: docs.c)
 *   routes.c          the route table, one request from body to queued job, the response
 * To add a route: its srv_route_id and path in routes.c, a parse function (fields into the
 * srv_call, tokenize, srv_job) and a build function (the job's results as TEI's JSON). */
#ifndef BERT8_ROUTES_H
#define BERT8_ROUTES_H

#include <cjson/cJSON.h>

#include "server.h"

struct srv_call {
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
};

/* ---- request.c: request fields, tokenization, the job ------------------------------------------ */

void rq_fail_metric(srv_server *s, const char *err);
/* Each getter leaves *out at its default when the field is absent or null. */
int rq_bool(const cJSON *o, const char *name, int *out, srv_response *r, int openai);
int rq_side(const cJSON *o, bert8_side *out, srv_response *r);
int rq_dimensions(const cJSON *o, int64_t dim, int64_t *out, srv_response *r, int openai);
int64_t rq_count_chars(const char *s, size_t n);
/* A string value as a text, checked to be UTF-8; i >= 0 names its index in the message. */
int rq_text(const cJSON *v, bert8_text *t, const char *what, int64_t i, srv_response *r, int openai);
int rq_alloc_inputs(srv_call *c, int64_t n, int pairs, srv_response *r);
/* An empty batch (400) or one over --max-client-batch-size (422). */
int rq_check_batch(srv_server *s, srv_call *c, int64_t n, const char *what, srv_response *r);
int rq_prompt_name(const cJSON *o, srv_call *c, srv_response *r);
int rq_prompt_text(srv_server *s, const char *name, const char **text, int openai, srv_response *r);
/* inputs: a string, a list of token ids, or a list of strings and lists of token ids (TEI's
 * Input); allow_ids 0: strings only. */
int rq_inputs(srv_server *s, srv_call *c, const cJSON *v, const char *what, int allow_ids, srv_response *r);
int rq_string_inputs(srv_server *s, srv_call *c, const cJSON *v, const char *what, srv_response *r);
/* Tokenizes the call's inputs (embed: with the prompt): counts real tokens, refuses empty texts
 * and, without truncation, inputs over the limit. */
int rq_tokenize(srv_server *s, srv_call *c, int truncate, bert8_side side, int embed, srv_response *r);
/* One permit per input (429 past --max-concurrent-requests). */
int rq_acquire(srv_server *s, srv_call *c, srv_response *r);
/* ok 0: the route is not for this model (424 with msg). */
int rq_need_model(srv_server *s, srv_call *c, int ok, const char *msg, srv_response *r);
void rq_job_common(srv_server *s, srv_call *c, srv_kind kind, int truncate, bert8_side side);
int rq_alloc_out(srv_call *c, int64_t width, srv_response *r);
/* b as the 200 JSON response (500 when it ran out of memory). */
void rq_json_response(srv_response *r, jbuf *b);

/* ---- the route families ------------------------------------------------------------------- */

int srv_embed_parse(srv_server *s, srv_call *c, const cJSON *root, srv_response *r);
int srv_similarity_parse(srv_server *s, srv_call *c, const cJSON *root, srv_response *r);
void srv_embed_build(srv_server *s, srv_call *c, srv_response *r);
int srv_predict_parse(srv_server *s, srv_call *c, const cJSON *root, srv_response *r);
int srv_rerank_parse(srv_server *s, srv_call *c, const cJSON *root, srv_response *r);
void srv_rank_build(srv_server *s, srv_call *c, srv_response *r);
int srv_sparse_parse(srv_server *s, srv_call *c, const cJSON *root, srv_response *r);
void srv_sparse_build(srv_server *s, srv_call *c, srv_response *r);
void srv_tokenize_route(srv_server *s, srv_call *c, const cJSON *root, srv_response *r);
void srv_decode_route(srv_server *s, const cJSON *root, srv_response *r);
/* GET /health in server state `state`: 200, or 503 while loading or unhealthy. */
void srv_health_route(srv_server *s, int state, srv_response *r);
void srv_info_route(srv_server *s, srv_response *r);
void srv_metrics_route(srv_server *s, srv_response *r);

#endif
