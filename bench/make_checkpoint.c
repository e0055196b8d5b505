/* make_checkpoint.c: writes a random checkpoint folder in the exact Hugging Face layout
 * (config.json + model.safetensors with transformers' tensor names), for benchmarks and
 * tests that need a model of a given size, e.g. BERT-base:
 *   make_checkpoint OUT_DIR --arch bert --layers 12 --hidden 768 --heads 12 --inter 3072 */
#include "base/common.h"
#include "io/safetensors.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct item_list {
    b8_st_write_item *items;
    float **bufs;
    size_t n, cap;
    uint64_t rng;
} item_list;

static float randn(uint64_t *s) {
    /* xorshift64* pairs through Box-Muller: fast and reproducible */
    double u1, u2;
    *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
    u1 = ((*s * 2685821657736338717ULL) >> 11) * (1.0 / 9007199254740992.0);
    *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
    u2 = ((*s * 2685821657736338717ULL) >> 11) * (1.0 / 9007199254740992.0);
    if (u1 < 1e-300) u1 = 1e-300;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* kind: 0 = N(0, std), 1 = 1 + 0.1 N (LayerNorm weight), 2 = 0.02 N (bias) */
static void add(item_list *L, const char *name, int64_t d0, int64_t d1, int kind, float std) {
    if (L->n == L->cap) {
        L->cap = L->cap ? L->cap * 2 : 64;
        L->items = realloc(L->items, L->cap * sizeof *L->items);
        L->bufs = realloc(L->bufs, L->cap * sizeof *L->bufs);
    }
    size_t count = (size_t)d0 * (size_t)(d1 ? d1 : 1);
    float *buf = malloc(count * sizeof(float));
    for (size_t i = 0; i < count; i++) {
        float r = randn(&L->rng);
        buf[i] = kind == 1 ? 1.0f + 0.1f * r : kind == 2 ? 0.02f * r : std * r;
    }
    b8_st_write_item it = {strdup(name), B8_F32, d1 ? 2 : 1, {d0, d1}, buf};
    L->items[L->n] = it;
    L->bufs[L->n++] = buf;
}

static void linear(item_list *L, const char *base, int64_t n, int64_t k) {
    char name[256];
    snprintf(name, sizeof name, "%s.weight", base);
    add(L, name, n, k, 0, 0.02f);
    snprintf(name, sizeof name, "%s.bias", base);
    add(L, name, n, 0, 2, 0);
}

static void layernorm(item_list *L, const char *base, int64_t h) {
    char name[256];
    snprintf(name, sizeof name, "%s.weight", base);
    add(L, name, h, 0, 1, 0);
    snprintf(name, sizeof name, "%s.bias", base);
    add(L, name, h, 0, 2, 0);
}

static long arg_long(int argc, char **argv, const char *name, long def) {
    for (int i = 0; i + 1 < argc; i++)
        if (!strcmp(argv[i], name)) return strtol(argv[i + 1], NULL, 10);
    return def;
}

static const char *arg_str(int argc, char **argv, const char *name, const char *def) {
    for (int i = 0; i + 1 < argc; i++)
        if (!strcmp(argv[i], name)) return argv[i + 1];
    return def;
}

int main(int argc, char **argv) {
    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: make_checkpoint OUT_DIR [--arch bert|distilbert|xlm-roberta] "
                        "[--head base|seqcls|tokcls|qa] [--layers 12] [--hidden 768] [--heads 12] "
                        "[--inter 3072] [--vocab 30522] [--maxpos 512] [--labels 2] [--seed 1]\n");
        return 2;
    }
    const char *out = argv[1];
    const char *arch = arg_str(argc, argv, "--arch", "bert");
    const char *head = arg_str(argc, argv, "--head", "base");
    long Lr = arg_long(argc, argv, "--layers", 12), H = arg_long(argc, argv, "--hidden", 768);
    long A = arg_long(argc, argv, "--heads", 12), I = arg_long(argc, argv, "--inter", 3072);
    long V = arg_long(argc, argv, "--vocab", 30522), P = arg_long(argc, argv, "--maxpos", 512);
    long NL = arg_long(argc, argv, "--labels", 2);
    bool distil = !strcmp(arch, "distilbert"), xlmr = !strcmp(arch, "xlm-roberta");
    if (!distil && !xlmr && strcmp(arch, "bert")) {
        fprintf(stderr, "make_checkpoint: unknown --arch %s\n", arch);
        return 2;
    }
    mkdir(out, 0755);
    item_list L = {0};
    L.rng = 0x9E3779B97F4A7C15ULL ^ (uint64_t)arg_long(argc, argv, "--seed", 1);
    const char *pre = "";
    bool task = strcmp(head, "base") != 0;
    if (task) pre = distil ? "distilbert." : xlmr ? "roberta." : "bert.";
    char n[256];
#define NM(...) (snprintf(n, sizeof n, __VA_ARGS__), n)
    add(&L, NM("%sembeddings.word_embeddings.weight", pre), V, H, 0, 0.02f);
    add(&L, NM("%sembeddings.position_embeddings.weight", pre), P, H, 0, 0.02f);
    if (!distil) add(&L, NM("%sembeddings.token_type_embeddings.weight", pre), xlmr ? 1 : 2, H, 0, 0.02f);
    layernorm(&L, NM("%sembeddings.LayerNorm", pre), H);
    for (long l = 0; l < Lr; l++) {
        char b[128];
        if (distil) {
            snprintf(b, sizeof b, "%stransformer.layer.%ld.", pre, l);
            linear(&L, NM("%sattention.q_lin", b), H, H);
            linear(&L, NM("%sattention.k_lin", b), H, H);
            linear(&L, NM("%sattention.v_lin", b), H, H);
            linear(&L, NM("%sattention.out_lin", b), H, H);
            layernorm(&L, NM("%ssa_layer_norm", b), H);
            linear(&L, NM("%sffn.lin1", b), I, H);
            linear(&L, NM("%sffn.lin2", b), H, I);
            layernorm(&L, NM("%soutput_layer_norm", b), H);
        } else {
            snprintf(b, sizeof b, "%sencoder.layer.%ld.", pre, l);
            linear(&L, NM("%sattention.self.query", b), H, H);
            linear(&L, NM("%sattention.self.key", b), H, H);
            linear(&L, NM("%sattention.self.value", b), H, H);
            linear(&L, NM("%sattention.output.dense", b), H, H);
            layernorm(&L, NM("%sattention.output.LayerNorm", b), H);
            linear(&L, NM("%sintermediate.dense", b), I, H);
            linear(&L, NM("%soutput.dense", b), H, I);
            layernorm(&L, NM("%soutput.LayerNorm", b), H);
        }
    }
    const char *archname = NULL;
    const char *cls = distil ? "DistilBert" : xlmr ? "XLMRoberta" : "Bert";
    char archbuf[96];
    if (!task) {
        if (!distil) linear(&L, NM("%spooler.dense", pre), H, H);
        snprintf(archbuf, sizeof archbuf, "%sModel", cls);
    } else if (!strcmp(head, "seqcls")) {
        if (distil) {
            linear(&L, "pre_classifier", H, H);
            linear(&L, "classifier", NL, H);
        } else if (xlmr) {
            linear(&L, "classifier.dense", H, H);
            linear(&L, "classifier.out_proj", NL, H);
        } else {
            linear(&L, NM("%spooler.dense", pre), H, H);
            linear(&L, "classifier", NL, H);
        }
        snprintf(archbuf, sizeof archbuf, "%sForSequenceClassification", cls);
    } else if (!strcmp(head, "tokcls")) {
        linear(&L, "classifier", NL, H);
        snprintf(archbuf, sizeof archbuf, "%sForTokenClassification", cls);
    } else if (!strcmp(head, "qa")) {
        linear(&L, "qa_outputs", 2, H);
        snprintf(archbuf, sizeof archbuf, "%sForQuestionAnswering", cls);
    } else {
        fprintf(stderr, "make_checkpoint: unknown --head %s\n", head);
        return 2;
    }
    archname = archbuf;
    cJSON *c = cJSON_CreateObject();
    cJSON *archs = cJSON_AddArrayToObject(c, "architectures");
    cJSON_AddItemToArray(archs, cJSON_CreateString(archname));
    cJSON_AddStringToObject(c, "model_type", distil ? "distilbert" : xlmr ? "xlm-roberta" : "bert");
    cJSON_AddNumberToObject(c, "vocab_size", (double)V);
    cJSON_AddNumberToObject(c, "max_position_embeddings", (double)P);
    if (distil) {
        cJSON_AddNumberToObject(c, "dim", (double)H);
        cJSON_AddNumberToObject(c, "n_layers", (double)Lr);
        cJSON_AddNumberToObject(c, "n_heads", (double)A);
        cJSON_AddNumberToObject(c, "hidden_dim", (double)I);
    } else {
        cJSON_AddNumberToObject(c, "hidden_size", (double)H);
        cJSON_AddNumberToObject(c, "num_hidden_layers", (double)Lr);
        cJSON_AddNumberToObject(c, "num_attention_heads", (double)A);
        cJSON_AddNumberToObject(c, "intermediate_size", (double)I);
        cJSON_AddNumberToObject(c, "type_vocab_size", xlmr ? 1 : 2);
        cJSON_AddNumberToObject(c, "pad_token_id", xlmr ? 1 : 0);
        cJSON_AddStringToObject(c, "hidden_act", "gelu");
        cJSON_AddNumberToObject(c, "layer_norm_eps", xlmr ? 1e-5 : 1e-12);
    }
    if (task && strcmp(head, "qa") && NL != 2) {
        cJSON *id2 = cJSON_AddObjectToObject(c, "id2label");
        for (long i = 0; i < NL; i++) {
            char k[32], v[32];
            snprintf(k, sizeof k, "%ld", i);
            snprintf(v, sizeof v, "LABEL_%ld", i);
            cJSON_AddStringToObject(id2, k, v);
        }
    }
    cJSON_AddStringToObject(c, "torch_dtype", "float32");
    char *text = cJSON_Print(c);
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", out);
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fputc('\n', f) < 0 || fclose(f) != 0) {
        fprintf(stderr, "make_checkpoint: cannot write %s\n", path);
        return 1;
    }
    free(text);
    cJSON_Delete(c);
    snprintf(path, sizeof path, "%s/model.safetensors", out);
    const char *meta[] = {"format", "pt", NULL};
    b8_err e;
    b8_err_clear(&e);
    if (b8_st_write(path, L.items, L.n, meta, &e)) {
        fprintf(stderr, "make_checkpoint: %s\n", e.msg);
        return 1;
    }
    for (size_t i = 0; i < L.n; i++) {
        free((void *)L.items[i].name);
        free(L.bufs[i]);
    }
    free(L.items);
    free(L.bufs);
    printf("wrote %s (%s, %zu tensors)\n", out, archname, L.n);
    return 0;
}
