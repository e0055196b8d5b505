/* cmd_model.c: `bert8 info` and `bert8 forward` (token ids in, model outputs out). */
#include "cli.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *head_name(bert8_head h) {
    switch (h) {
    case BERT8_HEAD_BASE: return "base (last_hidden_state)";
    case BERT8_HEAD_SEQ_CLS: return "sequence classification";
    case BERT8_HEAD_TOKEN_CLS: return "token classification";
    case BERT8_HEAD_QA: return "question answering";
    }
    return "?";
}

/* The quantization units of an INT8 model: as a JSON array, or one table row per layer. */
static void print_units_json(const bert8_model *m) {
    printf(",\"units\":[");
    for (int64_t u = 0; u < bert8_model_unit_count(m); u++) {
        bert8_unit_info ui;
        if (bert8_model_unit(m, u, &ui)) continue;
        printf("%s{\"layer\":%lld,\"kind\":\"%s\",\"mode\":\"%s\",\"alpha\":", u ? "," : "", (long long)ui.layer,
               ui.kind, bert8_unit_mode_name(ui.mode));
        if (ui.alpha < 0) printf("null}");
        else printf("%g}", (double)ui.alpha);
    }
    printf("]");
}

static void print_units_text(const bert8_model *m) {
    const int64_t n = bert8_model_unit_count(m);
    int64_t count[3] = {0, 0, 0};
    bert8_unit_info ui;
    for (int64_t u = 0; u < n; u++)
        if (!bert8_model_unit(m, u, &ui) && ui.mode >= BERT8_UNIT_FP32 && ui.mode <= BERT8_UNIT_INT8_DYNAMIC)
            count[ui.mode]++;
    printf("units:            %lld int8_static, %lld int8_dynamic, %lld fp32 (a=: SmoothQuant alpha)\n",
           (long long)count[BERT8_UNIT_INT8_STATIC], (long long)count[BERT8_UNIT_INT8_DYNAMIC],
           (long long)count[BERT8_UNIT_FP32]);
    int64_t layer = -1;
    for (int64_t u = 0; u < n; u++) {
        if (bert8_model_unit(m, u, &ui)) continue;
        if (ui.layer != layer) {
            printf("%s  layer %-3lld", layer >= 0 ? "\n" : "", (long long)ui.layer);
            layer = ui.layer;
        }
        char alpha[32] = "";
        if (ui.mode != BERT8_UNIT_FP32 && ui.alpha >= 0) snprintf(alpha, sizeof alpha, " a=%.2f", (double)ui.alpha);
        printf("  %s %s%s", ui.kind, bert8_unit_mode_name(ui.mode), alpha);
    }
    if (layer >= 0) printf("\n");
}

int cmd_info(int argc, char **argv) {
    cli_args a;
    cli_args_init(&a, argc, argv);
    bool json = cli_flag(&a, "--json");
    const char *lora_task = cli_opt(&a, "--lora-task");
    const char *dir = cli_positional(&a);
    const char *left = cli_leftover(&a);
    if (left) return cli_error("info", "unknown argument \"%s\"", left);
    bert8_model *m = cli_load_model("info", dir, 1, lora_task);
    if (!m) return 1;
    const bert8_model_info *i = bert8_model_get_info(m);
    if (json) {
        printf("{\"model_type\":\"%s\",\"arch\":\"%s\",\"architecture\":\"%s\",\"head\":\"%s\","
               "\"vocab_size\":%lld,\"hidden_size\":%lld,\"num_layers\":%lld,\"num_heads\":%lld,"
               "\"intermediate_size\":%lld,\"max_position_embeddings\":%lld,\"type_vocab_size\":%lld,"
               "\"num_labels\":%lld,\"hidden_act\":\"%s\",\"layer_norm_eps\":%g,\"has_pooler\":%s,"
               "\"ffn_gated\":%s,\"sliding_layers\":%lld,\"attention_window\":%lld,\"quantized\":%s,"
               "\"tensor_count\":%lld,\"weight_bytes\":%lld,\"param_count\":%lld",
               i->model_type, bert8_arch_name(i->arch), i->architecture, head_name(i->head),
               (long long)i->vocab_size, (long long)i->hidden_size, (long long)i->num_layers,
               (long long)i->num_heads, (long long)i->intermediate_size,
               (long long)i->max_position_embeddings, (long long)i->type_vocab_size,
               (long long)i->num_labels, i->hidden_act, i->layer_norm_eps,
               i->has_pooler ? "true" : "false", i->ffn_gated ? "true" : "false", (long long)i->sliding_layers,
               (long long)i->attention_window, i->quantized ? "true" : "false",
               (long long)i->tensor_count, (long long)i->weight_bytes, (long long)i->param_count);
        if (i->lora_task[0]) {
            printf(",\"lora_task\":");
            cli_print_json_string(stdout, i->lora_task);
        }
        if (i->quantized) print_units_json(m);
        printf("}\n");
    } else {
        printf("model:            %s\n", dir);
        printf("model_type:       %s (%s)\n", i->model_type, bert8_arch_name(i->arch));
        printf("architecture:     %s\n", i->architecture[0] ? i->architecture : "(not given)");
        printf("head:             %s\n", head_name(i->head));
        printf("layers:           %lld\n", (long long)i->num_layers);
        printf("hidden size:      %lld\n", (long long)i->hidden_size);
        printf("attention heads:  %lld (head size %lld)\n", (long long)i->num_heads,
               (long long)(i->hidden_size / i->num_heads));
        printf("intermediate:     %lld (%s%s)\n", (long long)i->intermediate_size, i->hidden_act,
               i->ffn_gated ? ", gated" : "");
        printf("vocabulary:       %lld\n", (long long)i->vocab_size);
        printf("max positions:    %lld\n", (long long)i->max_position_embeddings);
        printf("token types:      %lld\n", (long long)i->type_vocab_size);
        printf("pooler:           %s\n", i->has_pooler ? "yes" : "no");
        if (i->lora_task[0]) printf("LoRA task:        %s (adapters folded into the weights)\n", i->lora_task);
        if (i->num_labels) {
            printf("labels:           %lld:", (long long)i->num_labels);
            for (int64_t k = 0; k < i->num_labels && i->head != BERT8_HEAD_QA; k++)
                printf(" %s", bert8_model_label(m, k));
            printf("\n");
        }
        printf("layer norm eps:   %g\n", i->layer_norm_eps);
        printf("precision:        %s\n", i->quantized ? "int8 (quantized)" : "fp32");
        if (i->quantized) print_units_text(m);
        printf("tensors:          %lld (%.2f MB)\n", (long long)i->tensor_count, i->weight_bytes / 1e6);
        printf("parameters:       %lld\n", (long long)i->param_count);
    }
    bert8_model_free(m);
    return 0;
}

/* Reads a [B][T] integer array; returns NULL (with a message) when it is not rectangular. */
static int32_t *read_ids(const cJSON *arr, const char *key, int64_t *B, int64_t *T, bool fix) {
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) < 1) {
        cli_error("forward", "\"%s\" must be a non-empty array of arrays of integers", key);
        return NULL;
    }
    int64_t b = cJSON_GetArraySize(arr), t = cJSON_GetArraySize(cJSON_GetArrayItem(arr, 0));
    if (fix && (b != *B || t != *T)) {
        cli_error("forward", "\"%s\" is %lld x %lld but input_ids is %lld x %lld", key, (long long)b,
                  (long long)t, (long long)*B, (long long)*T);
        return NULL;
    }
    if (t < 1 || b > (1 << 20) || t > (1 << 20)) {
        cli_error("forward", "\"%s\" has an unusable shape %lld x %lld", key, (long long)b, (long long)t);
        return NULL;
    }
    int32_t *out = malloc((size_t)(b * t) * sizeof *out);
    if (!out) {
        cli_error("forward", "out of memory");
        return NULL;
    }
    for (int64_t i = 0; i < b; i++) {
        const cJSON *row = cJSON_GetArrayItem(arr, (int)i);
        if (!cJSON_IsArray(row) || cJSON_GetArraySize(row) != t) {
            cli_error("forward", "\"%s\" row %lld does not have %lld entries", key, (long long)i, (long long)t);
            free(out);
            return NULL;
        }
        for (int64_t j = 0; j < t; j++) {
            const cJSON *v = cJSON_GetArrayItem(row, (int)j);
            if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || fabs(v->valuedouble) > 2147483647.0) {
                cli_error("forward", "\"%s\"[%lld][%lld] is not an integer", key, (long long)i, (long long)j);
                free(out);
                return NULL;
            }
            out[i * t + j] = (int32_t)v->valuedouble;
        }
    }
    *B = b;
    *T = t;
    return out;
}

int cmd_forward(int argc, char **argv) {
    cli_args a;
    cli_args_init(&a, argc, argv);
    const char *input = cli_opt(&a, "--input");
    const char *th = cli_opt(&a, "--threads"), *lora_task = cli_opt(&a, "--lora-task");
    const char *dir = cli_positional(&a);
    const char *left = cli_leftover(&a);
    long threads = 0;
    if (left) return cli_error("forward", "unknown argument \"%s\"", left);
    if (!input || !*input) return cli_error("forward", "missing --input FILE.json");
    if (th && !cli_int("forward", "--threads", th, 1, 1024, &threads)) return 1;
    FILE *f = !strcmp(input, "-") ? stdin : fopen(input, "rb");
    if (!f) return cli_error("forward", "cannot open %s", input);
    size_t cap = 1 << 16, n = 0;
    char *text = malloc(cap);
    for (size_t got; text && (got = fread(text + n, 1, cap - n - 1, f)) > 0;) {
        n += got;
        if (n + 1 == cap) {
            char *nt = realloc(text, cap *= 2);
            if (!nt) free(text);
            text = nt;
        }
    }
    if (f != stdin) fclose(f);
    if (!text) return cli_error("forward", "out of memory reading %s", input);
    text[n] = 0;
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return cli_error("forward", "%s is not a JSON object", input);
    }
    int rc = 1;
    int64_t B = 0, T = 0;
    int32_t *ids = NULL, *mask = NULL, *types = NULL;
    bert8_model *m = NULL;
    bert8_session *s = NULL;
    ids = read_ids(cJSON_GetObjectItemCaseSensitive(root, "input_ids"), "input_ids", &B, &T, false);
    if (!ids) goto out;
    const cJSON *jm = cJSON_GetObjectItemCaseSensitive(root, "attention_mask");
    const cJSON *jt = cJSON_GetObjectItemCaseSensitive(root, "token_type_ids");
    if (jm && !(mask = read_ids(jm, "attention_mask", &B, &T, true))) goto out;
    if (jt && !(types = read_ids(jt, "token_type_ids", &B, &T, true))) goto out;
    if (!(m = cli_load_model("forward", dir, (int)threads, lora_task))) goto out;
    if (bert8_session_create(m, &s)) {
        cli_error("forward", "out of memory");
        goto out;
    }
    bert8_batch bt = {B, T, ids, mask, types};
    bert8_outputs o;
    bert8_status st = bert8_forward(s, &bt, &o);
    if (st) {
        cli_error("forward", "%s (%s)", bert8_session_last_error(s), bert8_status_string(st));
        goto out;
    }
    const struct {
        const char *key;
        const bert8_tensor *t;
    } outs[] = {{"last_hidden_state", &o.last_hidden_state}, {"pooler_output", &o.pooler_output},
                {"logits", &o.logits}, {"start_logits", &o.start_logits}, {"end_logits", &o.end_logits}};
    const bert8_model_info *info = bert8_model_get_info(m);
    bool first = true;
    putchar('{');
    for (size_t k = 0; k < sizeof outs / sizeof *outs; k++) {
        if (!outs[k].t->data) continue;
        /* Task models print their head's outputs; base models the hidden states. */
        if (info->head != BERT8_HEAD_BASE && k < 2) continue;
        printf("%s\"%s\":", first ? "" : ",", outs[k].key);
        cli_print_tensor(stdout, outs[k].t);
        first = false;
    }
    printf("}\n");
    rc = ferror(stdout) ? 1 : 0;
out:
    bert8_session_free(s);
    bert8_model_free(m);
    free(ids);
    free(mask);
    free(types);
    cJSON_Delete(root);
    return rc;
}
