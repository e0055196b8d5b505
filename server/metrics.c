/* metrics.c: the server's Prometheus metrics. TEI's names where TEI has the metric
 * (te_request_*, te_batch_*, te_queue_size), bert8_* for the rest. One mutex guards them all:
 * an update is a few adds, far below the cost of the request it counts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

static const int STATUSES[] = {200, 400, 401, 404, 405, 408, 413, 415, 422, 424, 429, 500, 503};
#define N_STATUS ((int)(sizeof STATUSES / sizeof *STATUSES) + 1) /* + "other" */
#define MAX_BUCKETS 40
#define MAX_LABELED 64

static const char *const ROUTE_NAMES[R_COUNT] = {
    "/health", "/info", "/metrics", "/embed", "/embed_all", "/predict", "/rerank", "/similarity",
    "/tokenize", "/decode", "/v1/embeddings", "/", "/docs", "/openapi.json", "/embed_sparse", "other"};

typedef struct hist {
    const char *name, *help;
    int nb;
    double bounds[MAX_BUCKETS];
    uint64_t counts[MAX_BUCKETS + 1]; /* last: +Inf */
    double sum;
    uint64_t n;
} hist;

typedef struct labeled {
    const char *name, *label, *value; /* static strings */
    uint64_t n;
} labeled;

struct srv_metrics {
    pthread_mutex_t mu;
    uint64_t requests[R_COUNT][N_STATUS];
    hist h[H_COUNT];
    labeled lab[MAX_LABELED];
    int nlab;
};

const char *srv_route_name(srv_route_id r) { return (unsigned)r < R_COUNT ? ROUTE_NAMES[r] : "other"; }

static void geometric(hist *h, double first, double factor, int n) {
    h->nb = n;
    double v = first;
    for (int i = 0; i < n; i++, v *= factor) h->bounds[i] = v;
}

srv_metrics *srv_metrics_new(void) {
    srv_metrics *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    if (pthread_mutex_init(&m->mu, NULL)) {
        free(m);
        return NULL;
    }
    static const struct {
        const char *name, *help;
    } H[H_COUNT] = {
        {"te_request_duration", "Time from the request's body to its response (s)"},
        {"te_request_tokenization_duration", "Validation and tokenization time per request (s)"},
        {"te_request_queue_duration", "Time a request waited in the queue (s)"},
        {"te_request_inference_duration", "Forward pass time of the batches a request ran in (s)"},
        {"te_request_input_length", "Real tokens per input"},
        {"te_batch_next_size", "Inputs per forward batch"},
        {"te_batch_next_tokens", "Real tokens per forward batch"},
        {"te_batch_inference_duration", "Time of one forward batch (s)"},
    };
    for (int i = 0; i < H_COUNT; i++) m->h[i].name = H[i].name, m->h[i].help = H[i].help;
    /* TEI's duration buckets: 1.5e-5 s growing by 1.5 (35 buckets, up to ~22 min) */
    for (int i = H_DURATION; i <= H_INFERENCE; i++) geometric(&m->h[i], 1.5e-5, 1.5, 35);
    geometric(&m->h[H_BATCH_INFERENCE], 1.5e-5, 1.5, 35);
    geometric(&m->h[H_INPUT_LENGTH], 1, 2, 20);
    geometric(&m->h[H_BATCH_SIZE], 1, 2, 13);
    geometric(&m->h[H_BATCH_TOKENS], 1, 2, 21);
    return m;
}

void srv_metrics_free(srv_metrics *m) {
    if (!m) return;
    pthread_mutex_destroy(&m->mu);
    free(m);
}

void srv_metrics_request(srv_metrics *m, srv_route_id r, int status) {
    if (!m) return;
    int si = N_STATUS - 1;
    for (int i = 0; i < N_STATUS - 1; i++)
        if (STATUSES[i] == status) si = i;
    if ((unsigned)r >= R_COUNT) r = R_OTHER;
    pthread_mutex_lock(&m->mu);
    m->requests[r][si]++;
    pthread_mutex_unlock(&m->mu);
}

void srv_metrics_observe(srv_metrics *m, srv_hist_id id, double v) {
    if (!m || (unsigned)id >= H_COUNT) return;
    hist *h = &m->h[id];
    int b = 0;
    while (b < h->nb && v > h->bounds[b]) b++;
    pthread_mutex_lock(&m->mu);
    h->counts[b]++;
    h->sum += v;
    h->n++;
    pthread_mutex_unlock(&m->mu);
}

void srv_metrics_count(srv_metrics *m, const char *name, const char *label, const char *value) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    int i = 0;
    while (i < m->nlab && !(!strcmp(m->lab[i].name, name) && !strcmp(m->lab[i].value, value))) i++;
    if (i == m->nlab && m->nlab < MAX_LABELED) m->lab[m->nlab++] = (labeled){name, label, value, 0};
    if (i < m->nlab) m->lab[i].n++;
    pthread_mutex_unlock(&m->mu);
}

/* Resident and peak resident memory from /proc/self/status, in bytes (0 when unknown). */
static void rss(int64_t *now, int64_t *peak) {
    *now = *peak = 0;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return;
    char line[256];
    long long kb;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "VmRSS: %lld kB", &kb) == 1) *now = kb * 1024;
        if (sscanf(line, "VmHWM: %lld kB", &kb) == 1) *peak = kb * 1024;
    }
    fclose(f);
}

void srv_metrics_render(srv_metrics *m, jbuf *o, int64_t queue_inputs, int64_t queue_requests,
                        int64_t inflight_inputs) {
    pthread_mutex_lock(&m->mu);
    jb_puts(o, "# HELP bert8_http_requests_total HTTP requests by route and status\n"
               "# TYPE bert8_http_requests_total counter\n");
    for (int r = 0; r < R_COUNT; r++)
        for (int s = 0; s < N_STATUS; s++)
            if (m->requests[r][s]) {
                char st[16];
                if (s < N_STATUS - 1) snprintf(st, sizeof st, "%d", STATUSES[s]);
                else snprintf(st, sizeof st, "other");
                jb_printf(o, "bert8_http_requests_total{route=\"%s\",status=\"%s\"} %llu\n", ROUTE_NAMES[r], st,
                          (unsigned long long)m->requests[r][s]);
            }
    /* labelled counters, grouped by name in first-seen order */
    for (int i = 0; i < m->nlab; i++) {
        int first = 1;
        for (int j = 0; j < i; j++)
            if (!strcmp(m->lab[j].name, m->lab[i].name)) first = 0;
        if (!first) continue;
        jb_printf(o, "# TYPE %s counter\n", m->lab[i].name);
        for (int j = i; j < m->nlab; j++)
            if (!strcmp(m->lab[j].name, m->lab[i].name))
                jb_printf(o, "%s{%s=\"%s\"} %llu\n", m->lab[j].name, m->lab[j].label, m->lab[j].value,
                          (unsigned long long)m->lab[j].n);
    }
    for (int i = 0; i < H_COUNT; i++) {
        const hist *h = &m->h[i];
        jb_printf(o, "# HELP %s %s\n# TYPE %s histogram\n", h->name, h->help, h->name);
        uint64_t cum = 0;
        for (int b = 0; b < h->nb; b++) {
            cum += h->counts[b];
            jb_printf(o, "%s_bucket{le=\"%.9g\"} %llu\n", h->name, h->bounds[b], (unsigned long long)cum);
        }
        cum += h->counts[h->nb];
        jb_printf(o, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.9g\n%s_count %llu\n", h->name, (unsigned long long)cum,
                  h->name, h->sum, h->name, (unsigned long long)h->n);
    }
    pthread_mutex_unlock(&m->mu);
    int64_t now, peak;
    rss(&now, &peak);
    jb_printf(o,
              "# HELP te_queue_size Inputs waiting for a forward batch\n# TYPE te_queue_size gauge\n"
              "te_queue_size %lld\n"
              "# HELP bert8_queue_requests Requests waiting for a forward batch\n"
              "# TYPE bert8_queue_requests gauge\nbert8_queue_requests %lld\n"
              "# HELP bert8_inflight_inputs Inputs holding one of --max-concurrent-requests permits\n"
              "# TYPE bert8_inflight_inputs gauge\nbert8_inflight_inputs %lld\n"
              "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes %lld\n"
              "# TYPE bert8_peak_resident_memory_bytes gauge\nbert8_peak_resident_memory_bytes %lld\n",
              (long long)queue_inputs, (long long)queue_requests, (long long)inflight_inputs, (long long)now,
              (long long)peak);
}
