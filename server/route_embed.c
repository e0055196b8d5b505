/* route_embed.c: the embedding routes: /embed, /embed_all, /v1/embeddings (OpenAI's request and
 * response), /similarity (cosines to a source sentence). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "routes.h"

/* /embed, /embed_all, /v1/embeddings */
int srv_embed_parse(srv_server *s, srv_call *c, const cJSON *root, srv_response *r) {
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
        if (rq_dimensions(root, s->info->dim, &dims, r, 1) || rq_prompt_name(root, c, r) ||
            rq_inputs(s, c, cJSON_GetObjectItemCaseSensitive(root, "input"), "input", 1, r))
            return -1;
    } else {
        if (rq_bool(root, "truncate", &truncate, r, 0) || rq_side(root, &side, r) || rq_prompt_name(root, c, r))
            return -1;
        if (c->route == R_EMBED && (rq_bool(root, "normalize", &normalize, r, 0) ||
                                    rq_dimensions(root, s->info->dim, &dims, r, 0)))
            return -1;
        if (rq_inputs(s, c, cJSON_GetObjectItemCaseSensitive(root, "inputs"), "inputs", 1, r)) return -1;
    }
    srv_metrics_count(s->metrics, "te_request_count", "method", c->single ? "single" : "batch");
    if (rq_need_model(s, c, s->mtype == MT_EMBEDDING, "Model is not an embedding model", r) ||
        rq_need_model(s, c, !s->cfg.splade || c->route == R_EMBED_ALL,
                   "`/embed` is not available for SPLADE models (--pooling splade): use `/embed_sparse`", r))
        return -1;
    if (rq_acquire(s, c, r) || rq_tokenize(s, c, truncate, side, 1, r)) return -1;
    rq_job_common(s, c, c->route == R_EMBED_ALL ? K_EMBED_ALL : K_EMBED, truncate, side);
    c->job.embed.normalize = normalize;
    c->job.embed.dimensions = dims;
    return rq_alloc_out(c, c->route == R_EMBED_ALL ? s->info->model->hidden_size : dims ? dims : s->info->dim, r);
}


int srv_similarity_parse(srv_server *s, srv_call *c, const cJSON *root, srv_response *r) {
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(root, "inputs");
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(root, "parameters");
    int truncate = s->cfg.auto_truncate;
    bert8_side side = BERT8_SIDE_RIGHT;
    if (params && !cJSON_IsNull(params) &&
        (!cJSON_IsObject(params) || rq_bool(params, "truncate", &truncate, r, 0) || rq_side(params, &side, r) ||
         rq_prompt_name(params, c, r))) {
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
        rq_fail_metric(s, "validation");
        return -1;
    }
    if (m + 1 > s->cfg.max_client_batch_size) {
        srv_error(r, E_VALIDATION, 0, "batch size %lld > maximum allowed batch size %lld", (long long)(m + 1),
                  (long long)s->cfg.max_client_batch_size);
        rq_fail_metric(s, "batch_size");
        return -1;
    }
    if (rq_alloc_inputs(c, m + 1, 0, r) || rq_text(src, &c->texts[0], "inputs.source_sentence", -1, r, 0)) return -1;
    int64_t i = 1;
    const cJSON *e;
    cJSON_ArrayForEach(e, sents) {
        if (rq_text(e, &c->texts[i], "inputs.sentences", i - 1, r, 0)) return -1;
        i++;
    }
    srv_metrics_count(s->metrics, "te_request_count", "method", "batch");
    if (rq_need_model(s, c, s->mtype == MT_EMBEDDING, "Model is not an embedding model", r)) return -1;
    if (rq_acquire(s, c, r) || rq_tokenize(s, c, truncate, side, 1, r)) return -1;
    rq_job_common(s, c, K_EMBED, truncate, side);
    c->job.embed.normalize = 0;
    return rq_alloc_out(c, s->info->dim, r);
}

static double cosine(const float *a, const float *b, int64_t d) {
    double ab = 0, aa = 0, bb = 0;
    for (int64_t i = 0; i < d; i++) ab += (double)a[i] * b[i], aa += (double)a[i] * a[i], bb += (double)b[i] * b[i];
    return aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : 0;
}

void srv_embed_build(srv_server *s, srv_call *c, srv_response *r) {
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
    default: break;
    }
    rq_json_response(r, &b);
}
