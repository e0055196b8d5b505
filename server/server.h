/* server.h: `bert8 serve`, an HTTP server that speaks text-embeddings-inference's (TEI's) API.
 *
 * The server is a program over the public API only (bert8.h, bert8_pipeline.h). Its parts:
 *   config.c     flags and environment variables (TEI's names) -> srv_config
 *   jbuf.c       a growable byte buffer that writes JSON (strings, shortest floats, base64)
 *   metrics.c    Prometheus counters and histograms
 *   scheduler.c  the queue and the one batching thread that calls the pipeline
 *   routes.c     the route table; a request from JSON body to queued job to JSON response
 *   routes.h     what the route files share (private): request.c (field parsing, tokenization,
 *                the job), route_embed.c, route_classify.c, route_tokens.c, route_admin.c
 *   docs.c       GET /docs and /openapi.json (the description scripts/gen_openapi.py writes)
 *   http.c       libmicrohttpd: bodies, limits, auth, suspend/resume while a job runs, shutdown
 *   serve.c      `bert8 serve`: start-up, signals, graceful stop
 */
#ifndef BERT8_SERVER_H
#define BERT8_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "bert8.h"
#include "bert8_pipeline.h"

/* ---- configuration ------------------------------------------------------------------ */

typedef struct srv_config {
    const char *model_id;          /* model folder */
    const char *served_model_name; /* /info and the OpenAI "model" field; default model_id */
    const char *hostname;          /* default 0.0.0.0 */
    int port;                      /* default 3000 */
    int64_t max_batch_tokens;      /* real tokens per forward pass (16384) */
    int64_t max_batch_requests;    /* inputs per forward pass; 0: no limit */
    int64_t max_client_batch_size; /* inputs per request (32) */
    int64_t max_concurrent_requests; /* inputs in flight before 429 (512) */
    int64_t payload_limit;         /* body bytes before 413 (2,000,000) */
    int auto_truncate;             /* default for requests without "truncate" (true) */
    bert8_pooling pooling;         /* DEFAULT: the folder's */
    int splade;                    /* --pooling splade: /embed_sparse only (a masked-LM head) */
    const char *default_prompt_name; /* TEI: a prompt name applied when a request names none */
    const char *lora_task;           /* the LoRA task folded into the model's weights (Jina v3), or NULL */
    const char *default_prompt;    /* TEI: a prompt text applied when a request names none */
    const char *dense_path;        /* TEI: the Dense module folder */
    const char *api_key;           /* NULL: no auth */
    int threads;                   /* OpenMP threads of the forward pass; 0: physical cores */
    int tokenization_workers;      /* HTTP worker threads (parse, validate, tokenize) */
    int connection_timeout;        /* s a connection may stay idle */
    int request_timeout;           /* s a request body may take to arrive */
    int similarity_default;        /* TASK=sentence-similarity: POST / is /similarity */
    int quiet;                     /* no start-up / shutdown log lines */
} srv_config;

/* Parses argv (after "serve") and the environment. Returns 0, or prints the problem and returns
 * the exit code (2 usage, 0 after --help). */
int srv_config_parse(srv_config *c, int argc, char **argv);
void srv_config_usage(FILE *f);

/* ---- JSON output buffer ------------------------------------------------------------- */

typedef struct jbuf {
    char *data;
    size_t len, cap;
    int oom; /* an allocation failed: the content is incomplete */
} jbuf;

void jb_reserve(jbuf *b, size_t extra);
void jb_put(jbuf *b, const char *s, size_t n);
void jb_puts(jbuf *b, const char *s);
void jb_putc(jbuf *b, char c);
void jb_printf(jbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A JSON string of n bytes; invalid UTF-8 becomes U+FFFD (as from_utf8_lossy). */
void jb_str(jbuf *b, const char *s, size_t n);
void jb_cstr(jbuf *b, const char *s);
/* Shortest text that reads back as the same float (as the CLI prints); null for NaN/Inf. */
void jb_float(jbuf *b, float v);
void jb_floats(jbuf *b, const float *v, int64_t n); /* [v0,v1,...] */
void jb_int(jbuf *b, int64_t v);
/* Standard base64 (with padding) of n bytes, inside quotes. */
void jb_base64(jbuf *b, const void *data, size_t n);
void jb_free(jbuf *b);
/* Hands the bytes to the caller (NULL on oom); the buffer is left empty. */
char *jb_take(jbuf *b, size_t *len);

/* ---- metrics ------------------------------------------------------------------------ */

typedef enum srv_route_id {
    R_HEALTH, R_INFO, R_METRICS, R_EMBED, R_EMBED_ALL, R_PREDICT, R_RERANK, R_SIMILARITY,
    R_TOKENIZE, R_DECODE, R_OPENAI, R_DEFAULT, R_DOCS, R_OPENAPI, R_EMBED_SPARSE, R_OTHER, R_COUNT
} srv_route_id;

typedef enum srv_hist_id {
    H_DURATION, H_TOKENIZATION, H_QUEUE, H_INFERENCE, /* per request, seconds */
    H_INPUT_LENGTH,                                    /* tokens per input */
    H_BATCH_SIZE, H_BATCH_TOKENS, H_BATCH_INFERENCE,   /* per forward batch */
    H_COUNT
} srv_hist_id;

typedef struct srv_metrics srv_metrics;
srv_metrics *srv_metrics_new(void);
void srv_metrics_free(srv_metrics *m);
void srv_metrics_request(srv_metrics *m, srv_route_id r, int status);
void srv_metrics_observe(srv_metrics *m, srv_hist_id h, double v);
void srv_metrics_count(srv_metrics *m, const char *name, const char *label, const char *value);
/* Prometheus text exposition; gauges passed in. */
void srv_metrics_render(srv_metrics *m, jbuf *out, int64_t queue_inputs, int64_t queue_requests,
                        int64_t inflight_inputs);
const char *srv_route_name(srv_route_id r);

/* ---- scheduler ---------------------------------------------------------------------- */

typedef enum srv_kind {
    K_EMBED,     /* bert8_embed: pooled vectors [n][width] */
    K_EMBED_ALL, /* bert8_embed_tokens: hidden states per token */
    K_CLASSIFY,  /* bert8_classify: scores [n][width] */
    K_SPARSE     /* bert8_embed_sparse: SPLADE entries per input (sp_index, rows, row_count) */
} srv_kind;

/* One request's model work. The route fills the inputs and calls srv_sched_submit; the
 * scheduler fills the outputs and calls done() once, from its thread, when every input has run
 * (or failed); after that it never touches the job again. */
typedef struct srv_job {
    srv_kind kind;
    int64_t n;
    const bert8_token_ids *ids;  /* [n] the inputs, tokenized by the route (prompt included) */
    const int64_t *tokens;       /* [n] real tokens of each input (the batching budget) */
    bert8_run_options run;       /* how the route tokenized (kept for the record) */
    bert8_embed_options embed;
    bert8_score_fn score_fn;
    int64_t width;               /* K_EMBED: dimensions; K_CLASSIFY: labels */
    /* outputs */
    float *out;                  /* K_EMBED / K_CLASSIFY: [n][width] */
    float **rows;                /* K_EMBED_ALL: [n] arrays of [row_count[i]][width];
                                    K_SPARSE: [n] arrays of row_count[i] weights */
    int32_t **sp_index;          /* K_SPARSE: [n] arrays of row_count[i] vocabulary ids */
    int64_t *row_count;          /* K_EMBED_ALL, K_SPARSE: [n] */
    bert8_status status;
    char err[512];
    /* times, ns since an arbitrary epoch */
    int64_t t_enqueue, t_started, inference_ns;
    void (*done)(struct srv_job *j, void *arg);
    void *done_arg;
    /* scheduler bookkeeping */
    int64_t next, finished;
    struct srv_job *qnext;
} srv_job;

typedef struct srv_sched srv_sched;

/* Starts the batching thread over a pipeline (which must outlive it). */
bert8_status srv_sched_start(srv_sched **out, const bert8_pipeline *p, int threads, int64_t max_batch_tokens,
                             int64_t max_batch_requests, srv_metrics *m, char *err, size_t err_len);
/* Queues a job (never blocks on model work). Returns 0, or -1 once stopping began. */
int srv_sched_submit(srv_sched *s, srv_job *j);
/* Stops taking jobs, runs what is queued, joins the thread. */
void srv_sched_stop(srv_sched *s);
void srv_sched_free(srv_sched *s);
void srv_sched_depth(srv_sched *s, int64_t *inputs, int64_t *requests);
/* 1 while the last forward pass succeeded (or none ran yet). */
int srv_sched_healthy(srv_sched *s);

/* ---- the server --------------------------------------------------------------------- */

typedef enum srv_model_type { MT_EMBEDDING, MT_CLASSIFIER, MT_RERANKER } srv_model_type;

typedef struct srv_server {
    srv_config cfg;
    _Atomic int state;           /* 0 loading, 1 ready, 2 stopping, 3 failed */
    bert8_pipeline *pipe;        /* set once ready */
    const bert8_pipeline_info *info;
    const bert8_tokenizer *tok;
    srv_model_type mtype;
    int64_t max_input_length;
    srv_sched *sched;
    srv_metrics *metrics;
    _Atomic int64_t inflight;    /* inputs holding a permit */
    _Atomic int64_t active;      /* requests between their first byte and their completion */
    _Atomic int64_t admitting;   /* requests in srv_route_begin: from reading the state to queueing */
    struct MHD_Daemon *daemon;
} srv_server;

enum { SRV_LOADING = 0, SRV_READY = 1, SRV_STOPPING = 2, SRV_FAILED = 3 };

int64_t srv_now_ns(void);

/* A response as the routes produce it; http.c sends it. */
typedef struct srv_response {
    int status;
    char *body;          /* malloc'd; may be NULL for an empty body */
    size_t len;
    const char *content_type;
    int timing;          /* add the x-* timing headers below */
    int64_t compute_tokens, compute_chars;
    int64_t tokenization_ns, queue_ns, inference_ns;
} srv_response;

/* TEI's error kinds and their HTTP codes. */
typedef enum srv_error_type { E_VALIDATION, E_TOKENIZER, E_OVERLOADED, E_BACKEND, E_EMPTY, E_UNHEALTHY } srv_error_type;
/* A JSON error body {"error", "error_type"} (or OpenAI's {"message", "code", "type"}). */
void srv_error(srv_response *r, srv_error_type t, int openai, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* One HTTP request's route state (routes.c); opaque to http.c. */
typedef struct srv_call srv_call;

/* The route a path and method name, or R_OTHER; *method_ok is 0 for a known path with the
 * wrong method. */
srv_route_id srv_route_lookup(const srv_server *s, const char *url, const char *method, int *method_ok);
int srv_route_needs_auth(srv_route_id r);
/* Starts a request whose body is complete: either fills *resp (done) and returns 0, or submits a
 * job and returns 1 with *call set (call srv_call_finish after its done callback). The job's
 * done callback is given by the caller. */
int srv_route_begin(srv_server *s, srv_route_id r, char *body, size_t len, srv_response *resp, srv_call **call,
                    void (*done)(srv_job *, void *), void *arg);
/* Builds the response of a call whose job finished, and frees the call. */
void srv_call_finish(srv_server *s, srv_call *c, srv_response *resp);
/* Frees a call whose job finished without anyone to answer (the client left). */
void srv_call_free(srv_server *s, srv_call *c);

/* docs.c: GET /docs (a Swagger UI page over /openapi.json) and GET /openapi.json. */
void srv_docs_route(srv_route_id r, srv_response *resp);

/* http.c */
int srv_http_start(srv_server *s, char *err, size_t err_len);
/* Stops accepting, waits (up to timeout_s) for requests in progress, stops the daemon. */
void srv_http_stop(srv_server *s, int timeout_s);

#endif
