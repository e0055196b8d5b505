/* http.c: the HTTP side, on libmicrohttpd. A pool of worker threads reads requests; each body is
 * collected under --payload-limit, then parsed, validated and tokenized on the worker (routes.c).
 * A request with model work is queued and its connection suspended, so a worker never waits for
 * the model; the scheduler's done callback resumes it and the worker writes the response.
 *
 * Lifetimes: a request's state (conn_req) is freed by libmicrohttpd's completion callback, except
 * while its job is still with the scheduler (a client that left): then the done callback frees it.
 * Slow clients: idle connections close after --connection-timeout, a body that takes longer than
 * --request-timeout is dropped, and connections are capped. */
#include <microhttpd.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "server.h"

typedef struct conn_req {
    srv_server *s;
    struct MHD_Connection *conn;
    srv_route_id route;
    char *body;
    size_t len, cap;
    int too_large;
    int64_t t_first;
    int phase; /* 0 reading the body, 1 queued, 2 answered */
    pthread_mutex_t mu;
    int suspended, finished, orphaned;
    srv_call *call;
} conn_req;

int64_t srv_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void req_free(conn_req *q) {
    srv_server *s = q->s;
    free(q->body);
    pthread_mutex_destroy(&q->mu);
    free(q);
    atomic_fetch_sub(&s->active, 1);
}

static void add_ms(struct MHD_Response *resp, const char *name, int64_t ns) {
    char v[32];
    snprintf(v, sizeof v, "%lld", (long long)(ns / 1000000));
    MHD_add_response_header(resp, name, v);
}

static enum MHD_Result send_response(conn_req *q, srv_response *r) {
    srv_server *s = q->s;
    struct MHD_Response *resp =
        r->body ? MHD_create_response_from_buffer(r->len, r->body, MHD_RESPMEM_MUST_FREE)
                : MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!resp) {
        free(r->body);
        return MHD_NO;
    }
    r->body = NULL; /* owned by the response now */
    if (r->content_type) MHD_add_response_header(resp, "Content-Type", r->content_type);
    int64_t total = srv_now_ns() - q->t_first;
    if (r->timing) {
        char v[32];
        MHD_add_response_header(resp, "x-compute-type", "cpu");
        add_ms(resp, "x-compute-time", total);
        add_ms(resp, "x-total-time", total);
        snprintf(v, sizeof v, "%lld", (long long)r->compute_chars);
        MHD_add_response_header(resp, "x-compute-characters", v);
        snprintf(v, sizeof v, "%lld", (long long)r->compute_tokens);
        MHD_add_response_header(resp, "x-compute-tokens", v);
        add_ms(resp, "x-tokenization-time", r->tokenization_ns);
        add_ms(resp, "x-queue-time", r->queue_ns);
        add_ms(resp, "x-inference-time", r->inference_ns);
    }
    if (atomic_load(&s->state) == SRV_STOPPING) MHD_add_response_header(resp, "Connection", "close");
    enum MHD_Result ret = MHD_queue_response(q->conn, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    q->phase = 2;
    srv_metrics_request(s->metrics, q->route, r->status);
    if (r->status == 200 && q->route != R_HEALTH && q->route != R_METRICS && q->route != R_INFO &&
        q->route != R_DOCS && q->route != R_OPENAPI)
        srv_metrics_observe(s->metrics, H_DURATION, (double)total * 1e-9);
    return ret;
}

static enum MHD_Result send_status(conn_req *q, int status, int json_error, const char *msg) {
    srv_response r = {0};
    if (json_error) srv_error(&r, E_VALIDATION, q->route == R_OPENAI, "%s", msg);
    r.status = status;
    return send_response(q, &r);
}

/* Scheduler thread: the job is done; wake the connection (or free what the client left). */
static void job_done(srv_job *j, void *arg) {
    (void)j;
    conn_req *q = arg;
    pthread_mutex_lock(&q->mu);
    q->finished = 1;
    if (q->orphaned) {
        pthread_mutex_unlock(&q->mu);
        srv_call_free(q->s, q->call);
        req_free(q);
        return;
    }
    if (q->suspended) {
        q->suspended = 0;
        MHD_resume_connection(q->conn);
    }
    pthread_mutex_unlock(&q->mu);
}

static int auth_ok(const srv_server *s, struct MHD_Connection *conn) {
    const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncmp(h, "Bearer ", 7)) return 0;
    h += 7;
    size_t a = strlen(h), b = strlen(s->cfg.api_key);
    unsigned char diff = a != b;
    for (size_t i = 0; i < a && i < b; i++) diff |= (unsigned char)(h[i] ^ s->cfg.api_key[i]); /* constant time */
    return !diff;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                               const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    srv_server *s = cls;
    conn_req *q = *con_cls;
    if (!q) { /* headers are in: route, method, auth and declared length before any body */
        q = calloc(1, sizeof *q);
        if (!q) return MHD_NO;
        if (pthread_mutex_init(&q->mu, NULL)) {
            free(q);
            return MHD_NO;
        }
        atomic_fetch_add(&s->active, 1);
        q->s = s;
        q->conn = conn;
        q->t_first = srv_now_ns();
        *con_cls = q;
        int method_ok = 1;
        q->route = srv_route_lookup(s, url, method, &method_ok);
        if (q->route == R_OTHER) return send_status(q, 404, 0, NULL);
        if (!method_ok) return send_status(q, 405, 0, NULL);
        if (s->cfg.api_key && srv_route_needs_auth(q->route) && !auth_ok(s, conn)) return send_status(q, 401, 0, NULL);
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > (unsigned long long)s->cfg.payload_limit) {
            char msg[128];
            snprintf(msg, sizeof msg, "the body (%s bytes) is over the payload limit of %lld bytes", cl,
                     (long long)s->cfg.payload_limit);
            return send_status(q, 413, 1, msg);
        }
        return MHD_YES;
    }
    if (*upload_size) {
        if (q->phase != 0) { /* an early answer is queued: drop the rest */
            *upload_size = 0;
            return MHD_YES;
        }
        if (srv_now_ns() - q->t_first > (int64_t)s->cfg.request_timeout * 1000000000) return MHD_NO; /* too slow */
        size_t n = *upload_size;
        *upload_size = 0;
        if (q->too_large) return MHD_YES;
        if (n > (size_t)s->cfg.payload_limit - q->len) {
            q->too_large = 1; /* chunked or lying about its length: discard, answer 413 at the end */
            free(q->body);
            q->body = NULL;
            q->len = q->cap = 0;
            return MHD_YES;
        }
        if (q->len + n > q->cap) {
            size_t cap = q->cap ? q->cap : 4096;
            while (cap < q->len + n) cap *= 2;
            if (cap > (size_t)s->cfg.payload_limit) cap = (size_t)s->cfg.payload_limit;
            char *b = realloc(q->body, cap);
            if (!b) return MHD_NO;
            q->body = b;
            q->cap = cap;
        }
        memcpy(q->body + q->len, upload, n);
        q->len += n;
        return MHD_YES;
    }
    if (q->phase == 0) { /* the whole body is in */
        if (q->too_large) {
            char msg[128];
            snprintf(msg, sizeof msg, "the body is over the payload limit of %lld bytes", (long long)s->cfg.payload_limit);
            return send_status(q, 413, 1, msg);
        }
        q->phase = 1;
        srv_response r = {0};
        srv_call *call = NULL;
        int queued = srv_route_begin(s, q->route, q->body, q->len, &r, &call, job_done, q);
        free(q->body);
        q->body = NULL;
        q->len = q->cap = 0;
        if (!queued) return send_response(q, &r);
        pthread_mutex_lock(&q->mu);
        q->call = call;
        if (!q->finished) {
            MHD_suspend_connection(conn);
            q->suspended = 1;
            pthread_mutex_unlock(&q->mu);
            return MHD_YES;
        }
        pthread_mutex_unlock(&q->mu);
    }
    if (q->phase == 1) { /* resumed: the job is done */
        pthread_mutex_lock(&q->mu);
        int finished = q->finished;
        srv_call *call = q->call;
        if (finished) q->call = NULL;
        pthread_mutex_unlock(&q->mu);
        if (!finished) return MHD_YES; /* not ours to answer yet */
        srv_response r = {0};
        srv_call_finish(s, call, &r);
        return send_response(q, &r);
    }
    return MHD_YES;
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)cls, (void)conn, (void)toe;
    conn_req *q = *con_cls;
    if (!q) return;
    *con_cls = NULL;
    pthread_mutex_lock(&q->mu);
    if (q->call && !q->finished) { /* the scheduler still has the job: it frees q when done */
        q->orphaned = 1;
        pthread_mutex_unlock(&q->mu);
        return;
    }
    srv_call *call = q->call;
    q->call = NULL;
    pthread_mutex_unlock(&q->mu);
    if (call) srv_call_free(q->s, call);
    req_free(q);
}

int srv_http_start(srv_server *s, char *err, size_t err_len) {
    struct addrinfo hints = {0}, *ai = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char port[16];
    snprintf(port, sizeof port, "%d", s->cfg.port);
    int gai = getaddrinfo(s->cfg.hostname, port, &hints, &ai);
    if (gai || !ai) {
        snprintf(err, err_len, "cannot resolve --hostname %s: %s", s->cfg.hostname, gai_strerror(gai));
        return -1;
    }
    unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    int64_t limit = s->cfg.max_concurrent_requests + 256;
    if (limit > 10000) limit = 10000;
    s->daemon = MHD_start_daemon(flags, (uint16_t)s->cfg.port, NULL, NULL, handler, s, MHD_OPTION_SOCK_ADDR,
                                 ai->ai_addr, MHD_OPTION_THREAD_POOL_SIZE, (unsigned)s->cfg.tokenization_workers,
                                 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->cfg.connection_timeout,
                                 MHD_OPTION_CONNECTION_LIMIT, (unsigned)limit, MHD_OPTION_NOTIFY_COMPLETED, completed, s,
                                 MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->daemon) {
        snprintf(err, err_len, "cannot listen on %s:%d (address in use, or not an address of this machine)",
                 s->cfg.hostname, s->cfg.port);
        return -1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    if (di && di->port) s->cfg.port = di->port;
    return 0;
}

void srv_http_stop(srv_server *s, int timeout_s) {
    if (!s->daemon) return;
    /* No new connections. The daemon's worker threads take the listening socket out of their
     * epoll sets after this returns, so it is only shut down here (new connections are refused at
     * once) and closed after MHD_stop_daemon: closing it now raced with them, and libmicrohttpd
     * aborts when that removal fails ("Failed to remove listen FD from epoll set"). */
    MHD_socket fd = MHD_quiesce_daemon(s->daemon);
    if (fd != MHD_INVALID_SOCKET) shutdown(fd, SHUT_RDWR);
    atomic_store(&s->state, SRV_STOPPING);
    int64_t deadline = srv_now_ns() + (int64_t)timeout_s * 1000000000;
    /* requests that found the server ready finish their way into the queue first */
    while (atomic_load(&s->admitting) > 0 && srv_now_ns() < deadline) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    srv_sched_stop(s->sched); /* runs what is queued; every suspended connection is resumed */
    while (atomic_load(&s->active) > 0 && srv_now_ns() < deadline) {
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
    }
    MHD_stop_daemon(s->daemon);
    s->daemon = NULL;
    if (fd != MHD_INVALID_SOCKET) close(fd);
}
