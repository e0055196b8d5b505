/* route_admin.c: the routes that run no model: /health (and GET /, /ping), /info, /metrics; the
 * OpenAPI description and the Swagger page are docs.c's. */
#include <stdlib.h>
#include <string.h>

#include "routes.h"

void srv_health_route(srv_server *s, int state, srv_response *r) {
    if (state == SRV_READY && srv_sched_healthy(s->sched)) {
        r->status = 200;
        return;
    }
    srv_error(r, E_UNHEALTHY, 0, state == SRV_LOADING ? "the model is loading" : "unhealthy");
}

void srv_info_route(srv_server *s, srv_response *r) {
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
    rq_json_response(r, &b);
}
void srv_metrics_route(srv_server *s, srv_response *r) {
    jbuf b = {0};
    int64_t qi = 0, qr = 0;
    srv_sched_depth(s->sched, &qi, &qr);
    srv_metrics_render(s->metrics, &b, qi, qr, atomic_load(&s->inflight));
    rq_json_response(r, &b);
    r->content_type = "text/plain; version=0.0.4";
}
