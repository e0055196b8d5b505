/* route_tokens.c: the routes that answer token by token: /embed_sparse (SPLADE: a weight per
 * vocabulary token), /tokenize and /decode (the tokenizer alone, no model work). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "routes.h"

/* /embed_sparse: TEI's SPLADE route (inputs, truncate, truncation_direction, prompt_name) */
int srv_sparse_parse(srv_server *s, srv_call *c, const cJSON *root, srv_response *r) {
    int truncate = s->cfg.auto_truncate;
    bert8_side side = BERT8_SIDE_RIGHT;
    if (rq_bool(root, "truncate", &truncate, r, 0) || rq_side(root, &side, r) || rq_prompt_name(root, c, r) ||
        rq_inputs(s, c, cJSON_GetObjectItemCaseSensitive(root, "inputs"), "inputs", 1, r))
        return -1;
    srv_metrics_count(s->metrics, "te_request_count", "method", c->single ? "single" : "batch");
    if (rq_need_model(s, c, bert8_pipeline_get_info(s->pipe)->model->has_mlm_head,
                   "`/embed_sparse` is only available for models with a masked-LM head (SPLADE pooling)", r))
        return -1;
    if (rq_acquire(s, c, r) || rq_tokenize(s, c, truncate, side, 1, r)) return -1;
    rq_job_common(s, c, K_SPARSE, truncate, side);
    return rq_alloc_out(c, 0, r);
}
/* ---- /tokenize and /decode (no model work) --------------------------------------------------- */

void srv_tokenize_route(srv_server *s, srv_call *c, const cJSON *root, srv_response *r) {
    int add_special = 1;
    const char *prompt;
    if (rq_bool(root, "add_special_tokens", &add_special, r, 0) || rq_prompt_name(root, c, r) ||
        rq_string_inputs(s, c, cJSON_GetObjectItemCaseSensitive(root, "inputs"), "inputs", r) ||
        rq_prompt_text(s, c->prompt_name, &prompt, 0, r))
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
        rq_fail_metric(s, "tokenizer");
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
    rq_json_response(r, &b);
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

void srv_decode_route(srv_server *s, const cJSON *root, srv_response *r) {
    int skip = 1;
    if (rq_bool(root, "skip_special_tokens", &skip, r, 0)) return;
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
        rq_fail_metric(s, "batch_size");
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
    rq_json_response(r, &b);
}

/* [[{"index", "value"}]] */
void srv_sparse_build(srv_server *s, srv_call *c, srv_response *r) {
    (void)s;
    const srv_job *j = &c->job;
    jbuf b = {0};
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
    rq_json_response(r, &b);
}
