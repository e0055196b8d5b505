/* config.c: `bert8 serve` options. TEI's spelling where TEI has the option, and the same
 * environment variable TEI reads for it (the flag wins over the variable). */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server.h"

typedef enum opt_type { O_STR, O_INT, O_BOOL, O_POOLING, O_FLAG } opt_type;

typedef struct opt {
    const char *flag, *env;
    opt_type type;
    size_t offset;     /* into srv_config */
    int64_t lo, hi;    /* O_INT range */
    const char *help;
} opt;

#define OFF(f) offsetof(srv_config, f)
static const opt OPTS[] = {
    {"--model-id", "MODEL_ID", O_STR, OFF(model_id), 0, 0,
     "DIR      model folder (FP32 or INT8); also the first positional argument"},
    {"--served-model-name", "SERVED_MODEL_NAME", O_STR, OFF(served_model_name), 0, 0,
     "NAME   name in /info and /v1/embeddings (default: --model-id)"},
    {"--hostname", "HOSTNAME", O_STR, OFF(hostname), 0, 0, "ADDR      address to listen on (0.0.0.0)"},
    {"--port", "PORT", O_INT, OFF(port), 0, 65535, "N             port (3000)"},
    {"--max-batch-tokens", "MAX_BATCH_TOKENS", O_INT, OFF(max_batch_tokens), 1, INT32_MAX,
     "N  real tokens per forward pass (16384)"},
    {"--max-batch-requests", "MAX_BATCH_REQUESTS", O_INT, OFF(max_batch_requests), 1, INT32_MAX,
     "N  inputs per forward pass (no limit)"},
    {"--max-client-batch-size", "MAX_CLIENT_BATCH_SIZE", O_INT, OFF(max_client_batch_size), 1, INT32_MAX,
     "N  inputs per request (32)"},
    {"--max-concurrent-requests", "MAX_CONCURRENT_REQUESTS", O_INT, OFF(max_concurrent_requests), 1, INT32_MAX,
     "N  inputs in flight before 429 (512)"},
    {"--payload-limit", "PAYLOAD_LIMIT", O_INT, OFF(payload_limit), 1, INT32_MAX,
     "BYTES  request body limit before 413 (2000000)"},
    {"--auto-truncate", "AUTO_TRUNCATE", O_BOOL, OFF(auto_truncate), 0, 0,
     "[true|false]  truncate long inputs unless a request says otherwise (true)"},
    {"--pooling", "POOLING", O_POOLING, OFF(pooling), 0, 0,
     "MODE  embedding pooling: cls, mean, max, last-token, weightedmean, mean_sqrt_len_tokens (the folder's "
     "1_Pooling, else mean), or splade (a masked-LM model: POST /embed_sparse)"},
    {"--default-prompt-name", "DEFAULT_PROMPT_NAME", O_STR, OFF(default_prompt_name), 0, 0,
     "NAME  prompt of config_sentence_transformers.json applied when a request names none (none)"},
    {"--default-prompt", "DEFAULT_PROMPT", O_STR, OFF(default_prompt), 0, 0,
     "TEXT  prompt applied when a request names none (none; not with --default-prompt-name)"},
    {"--lora-task", "BERT8_LORA_TASK", O_STR, OFF(lora_task), 0, 0,
     "NAME  the task whose LoRA adapters are folded into the weights (Jina v3: retrieval.query, ...; none)"},
    {"--dense-path", "DENSE_PATH", O_STR, OFF(dense_path), 0, 0,
     "DIR  the Dense module to use (e.g. 2_Dense_1024): replaces modules.json's one, or follows the pooling"},
    {"--api-key", "API_KEY", O_STR, OFF(api_key), 0, 0,
     "KEY        require Authorization: Bearer KEY (not on /health, /metrics)"},
    {"--tokenization-workers", "TOKENIZATION_WORKERS", O_INT, OFF(tokenization_workers), 1, 256,
     "N  HTTP worker threads (physical cores, at least 2)"},
    {"--threads", "BERT8_THREADS", O_INT, OFF(threads), 0, 4096, "N          threads of the forward pass (physical cores)"},
    {"--connection-timeout", "BERT8_CONNECTION_TIMEOUT", O_INT, OFF(connection_timeout), 1, 86400, "S  idle connections close after S seconds (30)"},
    {"--request-timeout", "BERT8_REQUEST_TIMEOUT", O_INT, OFF(request_timeout), 1, 86400, "S  a request body must arrive within S seconds (60)"},
    {"--quiet", NULL, O_FLAG, OFF(quiet), 0, 0, "  no start-up and shutdown lines on stderr"},
};
#define N_OPTS (sizeof OPTS / sizeof *OPTS)

void srv_config_usage(FILE *f) {
    fprintf(f, "usage: bert8 serve [MODEL_DIR] [options]\n"
               "An HTTP server with text-embeddings-inference's API (/embed, /predict, /rerank, /v1/embeddings, ...).\n"
               "Each option may also come from the environment variable in brackets.\n");
    for (size_t i = 0; i < N_OPTS; i++) {
        /* help is "ARG  description": the argument, blanks, then what it does */
        const char *h = OPTS[i].help, *sp = strstr(h, "  ");
        const char *desc = sp ? sp : h;
        while (*desc == ' ') desc++;
        char lhs[96];
        snprintf(lhs, sizeof lhs, "%s%s%.*s", OPTS[i].flag, sp && sp > h ? " " : "", sp ? (int)(sp - h) : 0, h);
        fprintf(f, "  %-30s %s%s%s%s\n", lhs, desc, OPTS[i].env ? " [" : "", OPTS[i].env ? OPTS[i].env : "",
                OPTS[i].env ? "]" : "");
    }
    fprintf(f, "  TASK=sentence-similarity in the environment makes POST / answer as /similarity.\n");
}

static int parse_bool(const char *v, int *out) {
    if (!strcasecmp(v, "true") || !strcmp(v, "1") || !strcasecmp(v, "yes") || !strcasecmp(v, "on")) *out = 1;
    else if (!strcasecmp(v, "false") || !strcmp(v, "0") || !strcasecmp(v, "no") || !strcasecmp(v, "off")) *out = 0;
    else return -1;
    return 0;
}

static int set(srv_config *c, const opt *o, const char *v, const char *from) {
    char *base = (char *)c + o->offset;
    switch (o->type) {
    case O_STR:
        *(const char **)base = v;
        return 0;
    case O_FLAG:
        *(int *)base = 1;
        return 0;
    case O_BOOL:
        if (parse_bool(v, (int *)base)) {
            fprintf(stderr, "bert8 serve: %s: \"%s\" is not true or false\n", from, v);
            return 2;
        }
        return 0;
    case O_POOLING: {
        bert8_pooling *p = (bert8_pooling *)base;
        static const struct {
            const char *name;
            bert8_pooling p;
        } POOLS[] = {{"cls", BERT8_POOLING_CLS},
                     {"mean", BERT8_POOLING_MEAN},
                     {"max", BERT8_POOLING_MAX},
                     {"last-token", BERT8_POOLING_LAST_TOKEN},
                     {"lasttoken", BERT8_POOLING_LAST_TOKEN},
                     {"weightedmean", BERT8_POOLING_WEIGHTED_MEAN},
                     {"mean_sqrt_len_tokens", BERT8_POOLING_MEAN_SQRT_LEN}};
        srv_config *cfg = (srv_config *)((char *)base - offsetof(srv_config, pooling));
        cfg->splade = !strcmp(v, "splade");
        if (cfg->splade) {
            *p = BERT8_POOLING_DEFAULT;
            return 0;
        }
        for (size_t i = 0; i < sizeof POOLS / sizeof *POOLS; i++)
            if (!strcmp(v, POOLS[i].name)) {
                *p = POOLS[i].p;
                return 0;
            }
        fprintf(stderr, "bert8 serve: %s: pooling \"%s\" is not supported (cls, mean, max, last-token, weightedmean, "
                        "mean_sqrt_len_tokens, splade)\n", from, v);
        return 2;
    }
    case O_INT: {
        char *end;
        errno = 0;
        long long x = strtoll(v, &end, 10);
        if (errno || end == v || *end || x < o->lo || x > o->hi) {
            fprintf(stderr, "bert8 serve: %s: \"%s\" is not an integer in [%lld, %lld]\n", from, v, (long long)o->lo,
                    (long long)o->hi);
            return 2;
        }
        if (o->offset == OFF(port) || o->offset == OFF(tokenization_workers) || o->offset == OFF(threads) ||
            o->offset == OFF(connection_timeout) || o->offset == OFF(request_timeout))
            *(int *)base = (int)x;
        else
            *(int64_t *)base = x;
        return 0;
    }
    }
    return 2;
}

int srv_config_parse(srv_config *c, int argc, char **argv) {
    *c = (srv_config){0};
    c->hostname = "0.0.0.0";
    c->port = 3000;
    c->max_batch_tokens = 16384;
    c->max_client_batch_size = 32;
    c->max_concurrent_requests = 512;
    c->payload_limit = 2000000;
    c->auto_truncate = 1;
    c->pooling = BERT8_POOLING_DEFAULT;
    c->connection_timeout = 30;
    c->request_timeout = 60;
    c->tokenization_workers = 0;
    /* environment first, flags override */
    for (size_t i = 0; i < N_OPTS; i++) {
        const char *v = OPTS[i].env ? getenv(OPTS[i].env) : NULL;
        if (v && *v) {
            int rc = set(c, &OPTS[i], v, OPTS[i].env);
            if (rc) return rc;
        }
    }
    const char *task = getenv("TASK");
    c->similarity_default = task && !strcmp(task, "sentence-similarity");
    int positional = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            srv_config_usage(stdout);
            return -1;
        }
        if (a[0] != '-') {
            if (positional++) {
                fprintf(stderr, "bert8 serve: unexpected argument \"%s\"\n", a);
                return 2;
            }
            c->model_id = a;
            continue;
        }
        const char *eq = strchr(a, '=');
        size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
        const opt *o = NULL;
        for (size_t k = 0; k < N_OPTS; k++)
            if (strlen(OPTS[k].flag) == nlen && !strncmp(OPTS[k].flag, a, nlen)) o = &OPTS[k];
        for (size_t k = 0; !o && !strcmp(a, "-p") && k < N_OPTS; k++)
            if (!strcmp(OPTS[k].flag, "--port")) o = &OPTS[k];
        if (!o) {
            fprintf(stderr, "bert8 serve: unknown option \"%s\" (see bert8 serve --help)\n", a);
            return 2;
        }
        const char *v = eq ? eq + 1 : NULL;
        if (o->type == O_FLAG) {
            if (v) {
                fprintf(stderr, "bert8 serve: %s takes no value\n", o->flag);
                return 2;
            }
        } else if (o->type == O_BOOL && !v) {
            /* TEI: a bare --auto-truncate means true; a following true/false is its value */
            int tmp;
            if (i + 1 < argc && !parse_bool(argv[i + 1], &tmp)) v = argv[++i];
            else v = "true";
        } else if (!v) {
            if (i + 1 >= argc) {
                fprintf(stderr, "bert8 serve: %s needs a value\n", o->flag);
                return 2;
            }
            v = argv[++i];
        }
        int rc = set(c, o, v, o->flag);
        if (rc) return rc;
    }
    if (!c->model_id || !*c->model_id) {
        fprintf(stderr, "bert8 serve: missing the model folder (--model-id DIR or MODEL_ID)\n");
        return 2;
    }
    if (!c->served_model_name) c->served_model_name = c->model_id;
    if (c->default_prompt && c->default_prompt_name) {
        fprintf(stderr, "bert8 serve: --default-prompt and --default-prompt-name cannot be used together\n");
        return 2;
    }
    if (c->api_key && !*c->api_key) c->api_key = NULL;
    if (c->threads <= 0) c->threads = bert8_physical_cores(); /* as the CLI: one thread per physical core */
    if (c->tokenization_workers <= 0) {
        int n = bert8_physical_cores();
        c->tokenization_workers = n < 2 ? 2 : n;
    }
    return 0;
}
