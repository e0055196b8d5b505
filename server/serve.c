/* serve.c: `bert8 serve`: parse the options, listen (answering 503 while the model loads), open
 * the pipeline, start the scheduler, then wait for SIGINT/SIGTERM: stop accepting, finish what
 * is queued and exit 0. */
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

int cmd_serve(int argc, char **argv);

static void log_line(const srv_server *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void log_line(const srv_server *s, const char *fmt, ...) {
    if (s->cfg.quiet) return;
    va_list ap;
    va_start(ap, fmt);
    fputs("bert8 serve: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* Opens the pipeline and decides what the model serves, as TEI does: a base model serves
 * embeddings, a sequence classifier with several labels /predict, one with one label is a
 * reranker (/rerank and /predict). */
static int open_model(srv_server *s, char *err, size_t err_len) {
    bert8_pipeline_params pp = bert8_default_pipeline_params();
    pp.threads = s->cfg.threads;
    pp.max_batch_tokens = s->cfg.max_batch_tokens;
    pp.max_batch_size = s->cfg.max_batch_requests ? s->cfg.max_batch_requests : s->cfg.max_batch_tokens;
    pp.max_text_bytes = s->cfg.payload_limit;
    pp.pooling = s->cfg.pooling;
    pp.dense_path = s->cfg.dense_path;
    pp.lora_task = s->cfg.lora_task;
    /* as TEI: a prompt only from the flags, never the folder's default_prompt_name */
    pp.default_prompt_name = s->cfg.default_prompt_name;
    pp.default_prompt = s->cfg.default_prompt ? s->cfg.default_prompt : s->cfg.default_prompt_name ? NULL : "";
    bert8_status st = bert8_pipeline_open(s->cfg.model_id, &pp, &s->pipe, err, err_len);
    if (st) return -1;
    s->info = bert8_pipeline_get_info(s->pipe);
    s->tok = bert8_pipeline_tokenizer(s->pipe);
    if (s->cfg.splade && !s->info->model->has_mlm_head) {
        snprintf(err, err_len, "--pooling splade needs a masked-LM head, and %s has none (architecture \"%s\")",
                 s->cfg.model_id, s->info->model->architecture);
        return -1;
    }
    switch (s->info->task) {
    case BERT8_TASK_EMBED: s->mtype = MT_EMBEDDING; break;
    case BERT8_TASK_CLASSIFY: s->mtype = s->info->num_labels > 1 ? MT_CLASSIFIER : MT_RERANKER; break;
    default:
        snprintf(err, err_len, "%s has a %s head; bert8 serve (like TEI) serves embedding models, sequence "
                 "classifiers and rerankers", s->cfg.model_id, s->info->task == BERT8_TASK_QA ? "question answering" :
                 "token classification");
        return -1;
    }
    int64_t base = s->info->max_length;
    if (base > s->cfg.max_batch_tokens) {
        if (!s->cfg.auto_truncate) {
            snprintf(err, err_len, "the maximum input length is %lld, over --max-batch-tokens=%lld: raise "
                     "--max-batch-tokens or set --auto-truncate true", (long long)base, (long long)s->cfg.max_batch_tokens);
            return -1;
        }
        base = s->cfg.max_batch_tokens;
    }
    s->max_input_length = base;
    return 0;
}

int cmd_serve(int argc, char **argv) {
    srv_server *s = calloc(1, sizeof *s);
    if (!s) return 1;
    int rc = srv_config_parse(&s->cfg, argc, argv);
    if (rc) {
        free(s);
        return rc < 0 ? 0 : rc;
    }
    /* Signals go to sigwait() below only; every thread started from here inherits the mask. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    atomic_init(&s->state, SRV_LOADING);
    atomic_init(&s->inflight, 0);
    atomic_init(&s->active, 0);
    atomic_init(&s->admitting, 0);
    char err[1024] = "";
    rc = 1;
    s->metrics = srv_metrics_new();
    if (!s->metrics) {
        fprintf(stderr, "bert8 serve: out of memory\n");
        goto out;
    }
    if (srv_http_start(s, err, sizeof err)) {
        fprintf(stderr, "bert8 serve: %s\n", err);
        goto out;
    }
    log_line(s, "listening on http://%s:%d, loading %s", s->cfg.hostname, s->cfg.port, s->cfg.model_id);
    if (open_model(s, err, sizeof err) ||
        srv_sched_start(&s->sched, s->pipe, s->cfg.threads, s->cfg.max_batch_tokens, s->cfg.max_batch_requests,
                        s->metrics, err, sizeof err)) {
        fprintf(stderr, "bert8 serve: %s\n", err);
        atomic_store(&s->state, SRV_FAILED);
        srv_http_stop(s, 1);
        goto out;
    }
    const bert8_model_info *mi = s->info->model;
    static const char *const TYPES[] = {"embedding", "classifier", "reranker"};
    atomic_store(&s->state, SRV_READY);
    log_line(s, "ready: %s model, %s%s, max_input_length %lld, max_batch_tokens %lld (http://%s:%d)",
             TYPES[s->mtype], mi->quantized ? "int8 " : "float32", mi->quantized ?
             (mi->scheme == BERT8_SCHEME_STATIC ? "static" : "dynamic") : "", (long long)s->max_input_length,
             (long long)s->cfg.max_batch_tokens, s->cfg.hostname, s->cfg.port);
    int sig = 0;
    while (sigwait(&sigs, &sig) != 0) {}
    log_line(s, "%s: finishing queued requests", sig == SIGINT ? "SIGINT" : "SIGTERM");
    srv_http_stop(s, 30);
    log_line(s, "stopped");
    rc = 0;
out:
    srv_sched_free(s->sched);
    bert8_pipeline_free(s->pipe);
    srv_metrics_free(s->metrics);
    free(s);
    return rc;
}
