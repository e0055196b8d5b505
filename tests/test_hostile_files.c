/* test_hostile_files.c: hostile model folders (issue 13), through the public loader and the
 * safetensors reader: wrong-typed or out-of-range config.json values are errors naming the
 * field; FIFOs under checkpoint file names are refused instead of blocking; the header and
 * tensor-count limits answer BERT8_ERR_TOO_LARGE before allocating; and a small checkpoint
 * truncated on disk while it is loaded does not fault the process. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bert8.h"
#include "io/config.h"
#include "io/safetensors.h"
#include "base/json_nul.h"
#include "testutil.h"

/* tmp/<name>/ with the golden bert_seqcls config.json, `key` set to the JSON text `value`
 * (NULL removes nothing), and a link to the golden model.safetensors. */
static const char *config_dir(const char *name, const char *key, const char *value) {
    static char dir[512];
    snprintf(dir, sizeof dir, "%s/%s", tu_tmpdir(), name);
    mkdir(dir, 0755);
    size_t n;
    char *text = tu_read_file(tu_shared_path("golden/models/bert_seqcls/config.json"), &n);
    cJSON *cfg = cJSON_Parse(text);
    free(text);
    if (key) {
        /* the value goes in as text, so that 1e999 or 1e-320 reach the parser as written */
        cJSON_DeleteItemFromObjectCaseSensitive(cfg, key);
        cJSON_AddStringToObject(cfg, key, "@VALUE@");
    }
    char *out = cJSON_Print(cfg);
    char *at = strstr(out, "\"@VALUE@\"");
    char *text2 = malloc(strlen(out) + (value ? strlen(value) : 0) + 1);
    if (at)
        sprintf(text2, "%.*s%s%s", (int)(at - out), out, value, at + strlen("\"@VALUE@\""));
    else
        strcpy(text2, out);
    char path[600];
    snprintf(path, sizeof path, "%s/config.json", dir);
    CHECK(tu_write_file(path, text2, strlen(text2)) == 0);
    free(text2);
    free(out);
    cJSON_Delete(cfg);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    unlink(path);
    CHECK(symlink(tu_shared_path("golden/models/bert_seqcls/model.safetensors"), path) == 0);
    return dir;
}

static void expect_load(const char *dir, bert8_status want, const char *n1, const char *n2) {
    char err[1024] = "";
    bert8_model *m = NULL;
    bert8_status st = bert8_model_load(dir, NULL, &m, err, sizeof err);
    CHECKF(st == want, "%s: status %s, wanted %s (%s)", dir, bert8_status_string(st),
           bert8_status_string(want), err);
    CHECKF(!n1 || strstr(err, n1), "message \"%s\" lacks \"%s\"", err, n1);
    CHECKF(!n2 || strstr(err, n2), "message \"%s\" lacks \"%s\"", err, n2);
    CHECKF(strlen(err) < 400, "message is %zu bytes long", strlen(err));
    bert8_model_free(m);
}

TEST(wrong_typed_optional_config_keys_are_errors) {
    static const struct {
        const char *key, *value, *n1, *n2;
    } cases[] = {
        {"position_embedding_type", "1.5", "position_embedding_type", "a string"},
        {"num_labels", "\"1e999\"", "num_labels", "an integer, not a string"},
        {"num_labels", "2.5", "num_labels", "2.5"},
        {"id2label", "[\"a\",\"b\"]", "id2label", "an object"},
        {"label2id", "7", "label2id", "an object"},
        {"architectures", "\"BertForSequenceClassification\"", "architectures", "an array"},
        {"architectures", "[3]", "architectures\"[0]", "a string"},
        {"problem_type", "3", "problem_type", "a string"},
        {"problem_type", "\"ranking\"", "problem_type", "ranking"},
        {"is_decoder", "\"yes\"", "is_decoder", "true or false"},
        {"hidden_act", "[\"gelu\"]", "hidden_act", "a string"},
        {"layer_norm_eps", "\"1e-12\"", "layer_norm_eps", "a number"},
        {"vocab_size", "true", "vocab_size", "a boolean"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        expect_load(config_dir("types", cases[i].key, cases[i].value), BERT8_ERR_FORMAT,
                    cases[i].n1, cases[i].n2);
    expect_load(config_dir("decoder", "is_decoder", "true"), BERT8_ERR_UNSUPPORTED, "is_decoder",
                NULL);
    /* right types still load; null means "the default" */
    expect_load(config_dir("ok1", "problem_type", "\"single_label_classification\""), BERT8_OK,
                NULL, NULL);
    expect_load(config_dir("ok2", "position_embedding_type", "null"), BERT8_OK, NULL, NULL);
    expect_load(config_dir("ok3", "is_decoder", "false"), BERT8_OK, NULL, NULL);
}

TEST(out_of_range_numbers_are_printed_sanely) {
    expect_load(config_dir("huge", "hidden_size", "-1e308"), BERT8_ERR_FORMAT, "hidden_size",
                "-1e+308");
    expect_load(config_dir("frac", "hidden_size", "64.5"), BERT8_ERR_FORMAT, "64.5",
                "not an integer");
    expect_load(config_dir("inf", "num_hidden_layers", "1e999"), BERT8_ERR_FORMAT,
                "num_hidden_layers", "inf");
    /* a subnormal epsilon would vanish in float: refused, as are zero and >= 1 */
    expect_load(config_dir("eps1", "layer_norm_eps", "1e-320"), BERT8_ERR_FORMAT, "layer_norm_eps",
                "normal positive float");
    expect_load(config_dir("eps2", "layer_norm_eps", "0"), BERT8_ERR_FORMAT, "layer_norm_eps",
                NULL);
    expect_load(config_dir("eps3", "layer_norm_eps", "1"), BERT8_ERR_FORMAT, "layer_norm_eps",
                NULL);
    expect_load(config_dir("eps4", "layer_norm_eps", "1e-30"), BERT8_OK, NULL, NULL);
    expect_load(config_dir("labels", "num_labels", "1e9"), BERT8_ERR_FORMAT, "num_labels",
                "1000000000");
}

TEST(config_parse_accepts_every_golden_config) {
    static const char *const names[] = {"bert_model", "bert_qa", "distilbert_seqcls",
                                        "xlmr_seqcls", "bert_legacy_names", "xlmr_e2e"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char rel[256];
        snprintf(rel, sizeof rel, "golden/models/%s/config.json", names[i]);
        size_t n;
        char *text = tu_read_file(tu_shared_path(rel), &n);
        b8_config c;
        b8_err e = {0};
        CHECKF(b8_config_parse(text, rel, &c, &e) == BERT8_OK, "%s: %s", names[i], e.msg);
        b8_config_free(&c);
        free(text);
    }
}

/* Parses config.json text; returns the status, the message in msg. */
static bert8_status parse_text(const char *text, b8_config *c, char *msg, size_t cap) {
    b8_err e = {0};
    bert8_status st = b8_config_parse(text, "config.json", c, &e);
    snprintf(msg, cap, "%s", e.msg);
    return st;
}

/* Rotary positions (GTE, NomicBERT, Jina v3): theta from rope_parameters, the legacy rope_theta
 * or the config class's default; other rope types, a head_dim that is not the head size, an odd
 * head size and a bad theta are errors naming the field. */
TEST(rotary_config_fields_read_and_checked) {
    static const struct {
        const char *text;
        bert8_status want;
        float theta;
        const char *n1, *n2;
    } cases[] = {
        {"{\"model_type\": \"gte\"}", BERT8_OK, 160000.0f, NULL, NULL},
        {"{\"model_type\": \"nomic_bert\"}", BERT8_OK, 1000.0f, NULL, NULL},
        {"{\"model_type\": \"jina_embeddings_v3\"}", BERT8_OK, 20000.0f, NULL, NULL},
        {"{\"model_type\": \"gte\", \"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 500}}",
         BERT8_OK, 500.0f, NULL, NULL},
        {"{\"model_type\": \"gte\", \"rope_theta\": 10000}", BERT8_OK, 10000.0f, NULL, NULL},
        {"{\"model_type\": \"gte\", \"rope_theta\": 7, \"rope_parameters\": {\"rope_theta\": 9}}", BERT8_OK,
         9.0f, NULL, NULL},
        {"{\"model_type\": \"nomic_bert\", \"rope_scaling\": {\"type\": \"default\"}, \"rope_theta\": 3}",
         BERT8_OK, 3.0f, NULL, NULL},
        {"{\"model_type\": \"gte\", \"head_dim\": 64}", BERT8_OK, 160000.0f, NULL, NULL},
        {"{\"model_type\": \"gte\", \"rope_parameters\": {\"rope_type\": \"yarn\", \"factor\": 2}}",
         BERT8_ERR_UNSUPPORTED, 0, "rope_type", "yarn"},
        {"{\"model_type\": \"nomic_bert\", \"rope_scaling\": {\"type\": \"dynamic\"}}", BERT8_ERR_UNSUPPORTED, 0,
         "rope_scaling", "dynamic"},
        {"{\"model_type\": \"gte\", \"rope_parameters\": 5}", BERT8_ERR_FORMAT, 0, "rope_parameters", "an object"},
        {"{\"model_type\": \"gte\", \"rope_parameters\": {\"rope_theta\": \"big\"}}", BERT8_ERR_FORMAT, 0,
         "rope_parameters.rope_theta", "a number"},
        {"{\"model_type\": \"gte\", \"rope_theta\": -1}", BERT8_ERR_FORMAT, 0, "rope_theta", "positive"},
        {"{\"model_type\": \"gte\", \"rope_theta\": 1e300}", BERT8_ERR_FORMAT, 0, "rope_theta", "finite"},
        {"{\"model_type\": \"nomic_bert\", \"head_dim\": 32}", BERT8_ERR_UNSUPPORTED, 0, "head_dim", "32"},
        {"{\"model_type\": \"gte\", \"hidden_size\": 30, \"num_attention_heads\": 2}", BERT8_ERR_SHAPE, 0,
         "head size 15", "odd"},
        {"{\"model_type\": \"bert\", \"hidden_act\": \"silu\"}", BERT8_ERR_UNSUPPORTED, 0, "silu", NULL},
        {"{\"model_type\": \"jina_embeddings_v3\", \"hidden_act\": \"silu\"}", BERT8_ERR_UNSUPPORTED, 0, "silu",
         NULL},
        {"{\"model_type\": \"gte\", \"hidden_act\": \"swish\"}", BERT8_OK, 160000.0f, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        b8_config c;
        char msg[1024];
        const bert8_status st = parse_text(cases[i].text, &c, msg, sizeof msg);
        CHECKF(st == cases[i].want, "%s: %s (%s)", cases[i].text, bert8_status_string(st), msg);
        if (st == BERT8_OK) {
            CHECKF(c.rope_theta == cases[i].theta, "%s: theta %g", cases[i].text, (double)c.rope_theta);
            b8_config_free(&c);
        }
        CHECKF(!cases[i].n1 || strstr(msg, cases[i].n1), "message \"%s\" lacks \"%s\"", msg, cases[i].n1);
        CHECKF(!cases[i].n2 || strstr(msg, cases[i].n2), "message \"%s\" lacks \"%s\"", msg, cases[i].n2);
    }
    b8_config c;
    char msg[1024];
    CHECK(parse_text("{\"model_type\": \"nomic_bert\"}", &c, msg, sizeof msg) == BERT8_OK);
    CHECK(c.act == B8_ACT_SILU && c.desc->ffn == B8_FFN_GLU && c.desc->pos == B8_POS_ROTARY);
    b8_config_free(&c);
    CHECK(parse_text("{\"model_type\": \"bert\"}", &c, msg, sizeof msg) == BERT8_OK);
    CHECK(c.rope_theta == 0.0f && c.act == B8_ACT_GELU);
    b8_config_free(&c);
}

/* DeBERTa (desc->disentangled): the relative terms, buckets and span, the position table and the
 * ContextPooler's activation from config.json as DebertaV2Config reads them; fields bert8 does not
 * run are errors naming them. */
TEST(disentangled_config_fields_read_and_checked) {
    static const struct {
        const char *text;
        bert8_status want;
        int c2p, p2c, scale, share, norm, no_pos;
        int64_t span;
        const char *n1;
    } cases[] = {
        /* DebertaV2Config's defaults: no relative attention, a position table */
        {"{\"model_type\": \"deberta-v2\"}", BERT8_OK, 0, 0, 1, 0, 0, 0, 512, NULL},
        /* the scale counts the named terms even without relative attention */
        {"{\"model_type\": \"deberta-v2\", \"pos_att_type\": [\"p2c\", \"c2p\"]}", BERT8_OK, 0, 0, 3, 0, 0, 0, 512,
         NULL},
        {"{\"model_type\": \"deberta-v2\", \"relative_attention\": true, \"pos_att_type\": [\"p2c\", \"c2p\"], "
         "\"share_att_key\": true, \"position_buckets\": 256, \"max_relative_positions\": -1, \"norm_rel_ebd\": "
         "\"layer_norm\", \"position_biased_input\": false}",
         BERT8_OK, 1, 1, 3, 1, 1, 1, 256, NULL},
        /* the "|" string form: items lowered and stripped, unknown ones ignored */
        {"{\"model_type\": \"deberta-v2\", \"relative_attention\": true, \"pos_att_type\": \" C2P|p2p \", "
         "\"max_relative_positions\": 48, \"norm_rel_ebd\": \"none | Layer_Norm\"}",
         BERT8_OK, 1, 0, 2, 0, 1, 0, 48, NULL},
        {"{\"model_type\": \"deberta-v2\", \"relative_attention\": true, \"pos_att_type\": null}", BERT8_OK, 0, 0, 1,
         0, 0, 0, 512, NULL},
        {"{\"model_type\": \"deberta-v2\", \"pos_att_type\": 3}", BERT8_ERR_FORMAT, 0, 0, 0, 0, 0, 0, 0, "pos_att_type"},
        {"{\"model_type\": \"deberta-v2\", \"pos_att_type\": [\"c2p\", 2]}", BERT8_ERR_FORMAT, 0, 0, 0, 0, 0, 0, 0,
         "pos_att_type\"[1]"},
        {"{\"model_type\": \"deberta-v2\", \"position_buckets\": 1}", BERT8_ERR_FORMAT, 0, 0, 0, 0, 0, 0, 0,
         "position_buckets"},
        {"{\"model_type\": \"deberta-v2\", \"position_buckets\": 256, \"max_relative_positions\": 129}",
         BERT8_ERR_FORMAT, 0, 0, 0, 0, 0, 0, 0, "max_relative_positions"},
        {"{\"model_type\": \"deberta-v2\", \"conv_kernel_size\": 3}", BERT8_ERR_UNSUPPORTED, 0, 0, 0, 0, 0, 0, 0,
         "conv_kernel_size"},
        {"{\"model_type\": \"deberta-v2\", \"conv_kernel_size\": 0}", BERT8_OK, 0, 0, 1, 0, 0, 0, 512, NULL},
        {"{\"model_type\": \"deberta-v2\", \"embedding_size\": 128}", BERT8_ERR_UNSUPPORTED, 0, 0, 0, 0, 0, 0, 0,
         "embedding_size"},
        {"{\"model_type\": \"deberta-v2\", \"attention_head_size\": 32}", BERT8_ERR_UNSUPPORTED, 0, 0, 0, 0, 0, 0, 0,
         "attention_head_size"},
        {"{\"model_type\": \"deberta-v2\", \"pooler_hidden_size\": 768}", BERT8_ERR_UNSUPPORTED, 0, 0, 0, 0, 0, 0, 0,
         "pooler_hidden_size"},
        {"{\"model_type\": \"deberta-v2\", \"pooler_hidden_act\": \"silu\"}", BERT8_ERR_UNSUPPORTED, 0, 0, 0, 0, 0, 0,
         0, "pooler_hidden_act"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        b8_config c;
        char msg[1024];
        const bert8_status st = parse_text(cases[i].text, &c, msg, sizeof msg);
        CHECKF(st == cases[i].want, "%s: %s (%s)", cases[i].text, bert8_status_string(st), msg);
        if (st == BERT8_OK) {
            CHECKF(c.c2p == cases[i].c2p && c.p2c == cases[i].p2c && c.scale_factor == cases[i].scale &&
                       c.share_att_key == cases[i].share && c.rel_norm == cases[i].norm &&
                       c.no_pos_table == cases[i].no_pos && c.att_span == cases[i].span,
                   "%s: c2p %d p2c %d scale %lld share %d norm %d no_pos %d span %lld", cases[i].text, c.c2p, c.p2c,
                   (long long)c.scale_factor, c.share_att_key, c.rel_norm, c.no_pos_table, (long long)c.att_span);
            b8_config_free(&c);
        }
        CHECKF(!cases[i].n1 || strstr(msg, cases[i].n1), "message \"%s\" lacks \"%s\"", msg, cases[i].n1);
    }
    b8_config c;
    char msg[1024];
    CHECK(parse_text("{\"model_type\": \"deberta-v2\", \"pooler_hidden_act\": \"tanh\"}", &c, msg, sizeof msg) ==
          BERT8_OK);
    CHECK(c.pooler_act == B8_ACT_TANH && c.desc->cls == B8_CLS_CONTEXT && c.layer_norm_eps == 1e-7f);
    b8_config_free(&c);
}

/* make_log_bucket_position's values (transformers 5.25) at a few offsets: deberta-v3's 256
 * buckets over 512 positions, and 16 over 64. */
TEST(deberta_log_buckets_match_transformers) {
    static const int64_t r1[] = {0, 1, -5, 127, 128, 129, -129, 200, 511, 512, 519, -519, 2000, 5000};
    static const int64_t w1[] = {0, 1, -5, 127, 128, 129, -129, 169, 255, 256, 257, -257, 381, 465};
    for (size_t i = 0; i < sizeof r1 / sizeof *r1; i++)
        CHECKF(b8_rel_log_bucket(r1[i], 256, 512) == w1[i], "offset %lld: %lld", (long long)r1[i],
               (long long)b8_rel_log_bucket(r1[i], 256, 512));
    static const int64_t r2[] = {0, 7, 8, 9, -9, 20, 39, 63, 64, 100};
    static const int64_t w2[] = {0, 7, 8, 9, -9, 12, 14, 15, 16, 17};
    for (size_t i = 0; i < sizeof r2 / sizeof *r2; i++)
        CHECKF(b8_rel_log_bucket(r2[i], 16, 64) == w2[i], "offset %lld: %lld", (long long)r2[i],
               (long long)b8_rel_log_bucket(r2[i], 16, 64));
    CHECK(b8_rel_log_bucket(-700, -1, 512) == -700 && b8_rel_log_bucket(700, 256, 0) == 700);
}

/* A regression of the FIFO bug blocks in open(); the alarm fails the test instead. */
TEST(fifo_checkpoint_files_are_refused_not_waited_on) {
    alarm(30);
    char dir[512], path[600];
    /* config.json */
    snprintf(dir, sizeof dir, "%s/fifo_cfg", tu_tmpdir());
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/config.json", dir);
    CHECK(mkfifo(path, 0644) == 0);
    expect_load(dir, BERT8_ERR_IO, "config.json", "FIFO");
    /* model.safetensors */
    const char *d2 = config_dir("fifo_st", NULL, NULL);
    snprintf(path, sizeof path, "%s/model.safetensors", d2);
    unlink(path);
    CHECK(mkfifo(path, 0644) == 0);
    expect_load(d2, BERT8_ERR_IO, "model.safetensors", "FIFO");
    /* the index, and a shard it names */
    const char *d3 = config_dir("fifo_index", NULL, NULL);
    snprintf(path, sizeof path, "%s/model.safetensors", d3);
    unlink(path);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", d3);
    CHECK(mkfifo(path, 0644) == 0);
    expect_load(d3, BERT8_ERR_IO, "index.json", "FIFO");
    unlink(path);
    const char *idx = "{\"weight_map\":{\"bert.embeddings.word_embeddings.weight\":"
                      "\"model-00001-of-00001.safetensors\"}}";
    CHECK(tu_write_file(path, idx, strlen(idx)) == 0);
    snprintf(path, sizeof path, "%s/model-00001-of-00001.safetensors", d3);
    CHECK(mkfifo(path, 0644) == 0);
    expect_load(d3, BERT8_ERR_IO, "model-00001-of-00001.safetensors", "FIFO");
    /* a folder where the checkpoint should be */
    const char *d4 = config_dir("dir_st", NULL, NULL);
    snprintf(path, sizeof path, "%s/model.safetensors", d4);
    unlink(path);
    CHECK(mkdir(path, 0755) == 0);
    expect_load(d4, BERT8_ERR_IO, "model.safetensors", "a folder");
    alarm(0);
}

/* A safetensors image of `hdr` (padded to 8) and `data_len` zero bytes. */
static uint8_t *st_image(const char *hdr, size_t hl, size_t data_len, size_t *len) {
    size_t padded = (hl + 7) / 8 * 8;
    *len = 8 + padded + data_len;
    uint8_t *b = calloc(1, *len);
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    memcpy(b + 8, hdr, hl);
    memset(b + 8 + hl, ' ', padded - hl);
    return b;
}

TEST(tensor_count_and_header_value_limits_answer_too_large) {
    /* B8_ST_MAX_TENSORS + 2 entries: refused by the scan before the JSON is parsed (so the
     * entries need not even be tensors) */
    size_t n = B8_ST_MAX_TENSORS + 2, cap = n * 16 + 16, k = 0;
    char *h = malloc(cap);
    h[k++] = '{';
    for (size_t i = 0; i < n; i++)
        k += (size_t)snprintf(h + k, cap - k, "%s\"%zu\":0", i ? "," : "", i);
    h[k++] = '}';
    size_t len;
    uint8_t *img = st_image(h, k, 0, &len);
    b8_st *st = NULL;
    b8_err e = {0};
    CHECK(b8_st_open_memory(img, len, "many.safetensors", &st, &e) == BERT8_ERR_TOO_LARGE);
    CHECKF(st == NULL && strstr(e.msg, "many.safetensors") && strstr(e.msg, "1048576"), "%s",
           e.msg);
    free(img);
    /* about 2^24 + 1 numbers in one shape */
    k = 0;
    n = B8_ST_MAX_HEADER_VALUES + 1;
    free(h);
    cap = 2 * n + 64;
    h = malloc(cap);
    k += (size_t)snprintf(h, cap, "{\"a\":{\"dtype\":\"U8\",\"data_offsets\":[0,0],\"shape\":[");
    for (size_t i = 0; i < n; i++) {
        h[k++] = i ? ',' : ' ';
        h[k++] = '0';
    }
    k += (size_t)snprintf(h + k, cap - k, "]}}");
    img = st_image(h, k, 0, &len);
    CHECK(b8_st_open_memory(img, len, "values.safetensors", &st, &e) == BERT8_ERR_TOO_LARGE);
    CHECKF(st == NULL && strstr(e.msg, "JSON values"), "%s", e.msg);
    free(img);
    free(h);
    /* a string holding the structural characters does not count them */
    const char *quoted = "{\"__metadata__\":{\"k\":\"[[[,,,:::{{{\\\"]]]\"}}";
    img = st_image(quoted, strlen(quoted), 0, &len);
    CHECK(b8_st_open_memory(img, len, "quoted.safetensors", &st, &e) == BERT8_OK);
    CHECK(st && b8_st_metadata(st, "k") && !strcmp(b8_st_metadata(st, "k"), "[[[,,,:::{{{\"]]]"));
    b8_st_close(st);
    free(img);
}

TEST(small_checkpoint_truncated_while_loaded_does_not_fault) {
    /* files up to B8_ST_COPY_MAX are copied at load, so the loaded model no longer depends on
     * the file: truncating it (which would raise SIGBUS on a mapping) changes nothing */
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/trunc", tu_tmpdir());
    mkdir(dir, 0755);
    static const char *const files[] = {"config.json", "model.safetensors"};
    for (int i = 0; i < 2; i++) {
        char rel[256];
        snprintf(rel, sizeof rel, "golden/models/bert_seqcls/%s", files[i]);
        size_t n;
        char *d = tu_read_file(tu_shared_path(rel), &n);
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        CHECK(d && tu_write_file(path, d, n) == 0);
        free(d);
    }
    char err[512];
    bert8_model *m = NULL;
    CHECK(bert8_model_load(dir, NULL, &m, err, sizeof err) == BERT8_OK);
    if (!m) return;
    bert8_session *s = NULL;
    CHECK(bert8_session_create(m, &s) == BERT8_OK);
    int32_t ids[8] = {2, 17, 99, 5, 64, 3, 7, 3};
    bert8_batch b = {1, 8, ids, NULL, NULL};
    bert8_outputs o;
    CHECK(bert8_forward(s, &b, &o) == BERT8_OK);
    float before[8];
    int64_t nl = o.logits.shape[1];
    memcpy(before, o.logits.data, (size_t)nl * sizeof(float));
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    CHECK(truncate(path, 0) == 0);
    CHECK(bert8_forward(s, &b, &o) == BERT8_OK);
    CHECK(memcmp(before, o.logits.data, (size_t)nl * sizeof(float)) == 0);
    bert8_session_free(s);
    bert8_model_free(m);
}

/* ---- NUL characters in names (issue 41) ----------------------------------------------------- */

TEST(json_nul_is_found_with_its_place) {
    size_t off;
    char where[300];
    const char *t1 = "{\"model\": {\"vocab\": {\"a\": 1, \"b\\u0000c\": 2}}}";
    CHECK(b8_json_find_nul(t1, strlen(t1), &off, where, sizeof where));
    CHECKF(!strcmp(where, "a key of model.vocab"), "%s", where);
    CHECK(off == (size_t)(strstr(t1, "\\u0000") - t1));
    const char *t2 = "{\"added_tokens\": [{\"content\": \"x\"}, {\"id\": 3, \"content\": \"<s\\u0000>\"}]}";
    CHECK(b8_json_find_nul(t2, strlen(t2), &off, where, sizeof where));
    CHECKF(!strcmp(where, "added_tokens[1].content"), "%s", where);
    /* an escaped backslash before u0000 is text, not a NUL; other escapes are fine */
    const char *t3 = "{\"a\": \"x\\\\u0000\", \"b\": \"\\u0001\\\"\\u00000\"}";
    CHECK(b8_json_find_nul(t3, strlen(t3), &off, where, sizeof where));
    CHECKF(!strcmp(where, "b"), "%s", where);
    const char *t4 = "{\"a\": \"x\\\\u0000\", \"b\": [\"\\u0001\", {\"c\": \"\\\\\"}]}";
    CHECK(!b8_json_find_nul(t4, strlen(t4), &off, where, sizeof where));
}

TEST(nul_in_config_and_tensor_names_is_refused) {
    /* config.json's model_type "bert\u0000junk" used to read as "bert" */
    char err[1024] = "";
    bert8_model *m = NULL;
    const char *dir = config_dir("nul-model-type", "model_type", "\"bert\\u0000junk\"");
    CHECK(bert8_model_load(dir, NULL, &m, err, sizeof err) == BERT8_ERR_FORMAT);
    CHECKF(strstr(err, "config.json: model_type holds a NUL character"), "%s", err);
    bert8_model_free(m);
    /* a safetensors tensor name */
    char path[700];
    snprintf(path, sizeof path, "%s/nul-name.safetensors", tu_tmpdir());
    const char *hdr = "{\"a\\u0000b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
    const size_t hl = strlen(hdr);
    unsigned char img[256] = {0};
    for (int i = 0; i < 8; i++) img[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(img + 8, hdr, hl);
    CHECK(tu_write_file(path, img, 8 + hl + 4) == 0);
    b8_st *st = NULL;
    b8_err e;
    b8_err_clear(&e);
    CHECK(b8_st_open(path, &st, &e) == BERT8_ERR_FORMAT);
    CHECKF(strstr(e.msg, "a key of the top-level object holds a NUL"), "%s", e.msg);
    b8_st_close(st);
}

int main(void) {
    RUN(wrong_typed_optional_config_keys_are_errors);
    RUN(out_of_range_numbers_are_printed_sanely);
    RUN(config_parse_accepts_every_golden_config);
    RUN(rotary_config_fields_read_and_checked);
    RUN(disentangled_config_fields_read_and_checked);
    RUN(deberta_log_buckets_match_transformers);
    RUN(fifo_checkpoint_files_are_refused_not_waited_on);
    RUN(tensor_count_and_header_value_limits_answer_too_large);
    RUN(small_checkpoint_truncated_while_loaded_does_not_fault);
    RUN(json_nul_is_found_with_its_place);
    RUN(nul_in_config_and_tensor_names_is_refused);
    return tu_finish();
}
