/* fuzz_server_http.c: `bert8 serve`'s request handling, from raw bytes on a socket to the
 * response. Three servers run in this process (the server sources compiled in unchanged, each on
 * 127.0.0.1 and a port of its own): an embedding model (the golden bert_e2e), a classifier
 * (models/sst2-bert-mini) and a reranker (models/stsb-bert-mini), with small limits (payload
 * 4096 bytes, 4 inputs per request, max-batch-tokens 256) so that the limit paths are reached.
 *
 * Input: byte 0 picks the server (mod 3); the rest is sent as it is, as one HTTP connection's
 * bytes: request line, headers (libmicrohttpd parses them; the server reads the route, method,
 * Authorization and Content-Length from it) and body (the server's JSON parsing, validation,
 * tokenization, batching and response writing). The write side is then shut, the first
 * response is read, and the connection closed. Invariant: a response that starts with a
 * status line has a 3-digit status; the sanitizers watch the rest (server threads included). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <strings.h>

#include "fuzz_util.h"
#include "server.h"

#define N_SERVERS 3

static srv_server *servers[N_SERVERS];

static srv_server *start(const char *model, const char *api_key) {
    srv_server *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    char *argv[] = {(char *)model, "--hostname", "127.0.0.1", "--port", "0", "--threads", "1",
                    "--tokenization-workers", "2", "--payload-limit", "4096", "--max-client-batch-size",
                    "4", "--max-batch-tokens", "256", "--connection-timeout", "5", "--quiet",
                    api_key ? "--api-key" : NULL, (char *)api_key, NULL};
    int argc = 0;
    while (argv[argc]) argc++;
    if (srv_config_parse(&s->cfg, argc, argv)) return NULL;
    atomic_init(&s->state, SRV_LOADING);
    atomic_init(&s->inflight, 0);
    atomic_init(&s->active, 0);
    atomic_init(&s->admitting, 0);
    char err[1024];
    bert8_pipeline_params pp = bert8_default_pipeline_params();
    pp.threads = 1;
    pp.max_batch_tokens = s->cfg.max_batch_tokens;
    pp.max_batch_size = s->cfg.max_batch_tokens;
    pp.max_text_bytes = s->cfg.payload_limit;
    if (!(s->metrics = srv_metrics_new()) ||
        bert8_pipeline_open(model, &pp, &s->pipe, err, sizeof err) != BERT8_OK) {
        fprintf(stderr, "fuzz_server_http: cannot open %s: %s\n", model, err);
        return NULL;
    }
    s->info = bert8_pipeline_get_info(s->pipe);
    s->tok = bert8_pipeline_tokenizer(s->pipe);
    s->mtype = s->info->task == BERT8_TASK_EMBED ? MT_EMBEDDING
               : s->info->num_labels > 1    ? MT_CLASSIFIER
                                            : MT_RERANKER;
    s->max_input_length = s->info->max_length < s->cfg.max_batch_tokens ? s->info->max_length
                                                                        : s->cfg.max_batch_tokens;
    if (srv_http_start(s, err, sizeof err) ||
        srv_sched_start(&s->sched, s->pipe, 1, s->cfg.max_batch_tokens, 0, s->metrics, err, sizeof err)) {
        fprintf(stderr, "fuzz_server_http: cannot start: %s\n", err);
        return NULL;
    }
    atomic_store(&s->state, SRV_READY);
    return s;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    signal(SIGPIPE, SIG_IGN);
    const char *models[N_SERVERS] = {fuzz_shared("golden/models/bert_e2e"), "models/sst2-bert-mini",
                                     "models/stsb-bert-mini"};
    for (int i = 0; i < N_SERVERS; i++) {
        /* the classifier also checks Authorization (Bearer fuzz) */
        if (!(servers[i] = start(models[i], i == 1 ? "fuzz" : NULL))) return -1;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 16384) return 0;
    srv_server *s = servers[data[0] % N_SERVERS];
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s->cfg.port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {10, 0};
    int fd = -1;
    /* The client closes first, so each input leaves one local port in TIME_WAIT for 60 s: at a
     * few hundred inputs a second the loopback runs out of ephemeral ports (EADDRNOTAVAIL), a
     * limit of this harness and not of the server. Wait for ports to free up then. */
    for (int tries = 0;; tries++) {
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        FUZZ_CHECK(fd >= 0);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) break;
        int err = errno;
        close(fd);
        /* EINTR: libFuzzer's -timeout alarm (SIGALRM) interrupted the connect; try again */
        if ((err != EADDRNOTAVAIL && err != EAGAIN && err != EINTR) || tries == 600) {
            fprintf(stderr, "connect to the server on port %d: %s\n", s->cfg.port, strerror(err));
            FUZZ_CHECK(!"connect failed");
        }
        if (err != EINTR) usleep(100 * 1000);
    }
    size_t off = 1;
    while (off < size) {
        ssize_t w = send(fd, data + off, size - off, MSG_NOSIGNAL);
        if (w <= 0) break; /* the server may close early (e.g. 413 before the body) */
        off += (size_t)w;
    }
    shutdown(fd, SHUT_WR);
    /* Read until the first response is complete (its header block and Content-Length bytes),
     * the server closes, or nothing arrives for a while: libmicrohttpd rightly waits for the
     * rest of an incomplete request (up to the connection timeout), and an idle keep-alive
     * connection stays open, so waiting for the close would cost seconds per input. Closing
     * early is itself a case the server must handle (a client that leaves). */
    static char resp[1 << 16];
    size_t got = 0;
    int wait_ms = 50;
    for (;;) {
        struct pollfd pfd = {fd, POLLIN, 0};
        int pr = poll(&pfd, 1, wait_ms);
        if (pr <= 0) break;
        ssize_t r = recv(fd, resp + got, sizeof resp - 1 - got, 0);
        if (r <= 0) break;
        got += (size_t)r;
        resp[got] = '\0';
        wait_ms = 2000; /* a response has begun: it must go on */
        const char *end = strstr(resp, "\r\n\r\n");
        if (end) {
            const char *cl = strcasestr(resp, "\r\ncontent-length:");
            size_t body = cl && cl < end ? (size_t)strtoull(cl + 17, NULL, 10) : 0;
            if ((size_t)(end + 4 - resp) + body <= got) break;
        }
        if (got == sizeof resp - 1) break;
    }
    char head[16] = "";
    memcpy(head, resp, got < 15 ? got : 15);
    head[got < 15 ? got : 15] = '\0';
    close(fd);
    if (getenv("FUZZ_VERBOSE")) fprintf(stderr, "server %d: %.15s\n", data[0] % N_SERVERS, head);
    if (!strncmp(head, "HTTP/1.", 7) && strlen(head) >= 12)
        FUZZ_CHECK(head[8] == ' ' && head[9] >= '1' && head[9] <= '5' && head[10] >= '0' && head[10] <= '9' &&
                   head[11] >= '0' && head[11] <= '9');
    return 0;
}
