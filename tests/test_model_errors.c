/* test_model_errors.c: broken checkpoint folders are refused with a clear message naming the
 * problem, through the public loader (run under ASan in CI to prove nothing leaks). */
#define _GNU_SOURCE
#include "testutil.h"
#include "bert8.h"
#include "io/safetensors.h"
#include "io/st_config.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

/* Makes tmp/<name>/ holding a copy of golden/models/<src>'s config.json, and returns its path. */
static const char *make_dir(const char *name, const char *src, const char *config_override) {
    static char dir[512];
    snprintf(dir, sizeof dir, "%s/%s", tu_tmpdir(), name);
    mkdir(dir, 0755);
    char rel[256], path[600];
    snprintf(rel, sizeof rel, "golden/models/%s/config.json", src);
    size_t n;
    char *cfg = tu_read_file(tu_shared_path(rel), &n);
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (config_override) tu_write_file(path, config_override, strlen(config_override));
    else tu_write_file(path, cfg, n);
    free(cfg);
    return dir;
}

/* Writes dir/model.safetensors from golden <src>'s file: its header passed through `edit`
 * (which may change the JSON), re-padded, then the original data; or raw bytes when raw. */
typedef void (*header_edit)(cJSON *h);
static void write_st(const char *dir, const char *src, header_edit edit, size_t truncate_to) {
    char rel[256], path[600];
    snprintf(rel, sizeof rel, "golden/models/%s/model.safetensors", src);
    size_t n;
    char *buf = tu_read_file(tu_shared_path(rel), &n);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (!edit) {
        tu_write_file(path, buf, truncate_to ? truncate_to : n);
        free(buf);
        return;
    }
    uint64_t hl;
    memcpy(&hl, buf, 8);
    char *hjson = strndup(buf + 8, hl);
    cJSON *h = cJSON_Parse(hjson);
    edit(h);
    char *out = cJSON_PrintUnformatted(h);
    size_t ol = strlen(out), padded = (ol + 7) / 8 * 8;
    size_t total = 8 + padded + (n - 8 - hl);
    char *img = malloc(total);
    uint64_t nl = padded;
    memcpy(img, &nl, 8);
    memset(img + 8, ' ', padded);
    memcpy(img + 8, out, ol);
    memcpy(img + 8 + padded, buf + 8 + hl, n - 8 - hl);
    tu_write_file(path, img, total);
    free(img);
    free(out);
    cJSON_Delete(h);
    free(hjson);
    free(buf);
}

/* Loads dir and expects failure with `status` and a message containing every `needle`. */
static void expect_error(const char *dir, bert8_status status, const char *n1, const char *n2) {
    char err[1024] = "";
    bert8_model *m = (bert8_model *)1;
    bert8_status st = bert8_model_load(dir, NULL, &m, err, sizeof err);
    CHECKF(st == status, "status %s, wanted %s (message: %s)", bert8_status_string(st),
           bert8_status_string(status), err);
    CHECKF(m == NULL, "model handle not cleared");
    CHECKF(n1 == NULL || strstr(err, n1), "message \"%s\" does not name \"%s\"", err, n1);
    CHECKF(n2 == NULL || strstr(err, n2), "message \"%s\" does not name \"%s\"", err, n2);
    if (st == BERT8_OK) bert8_model_free(m);
}

TEST(missing_folder_is_named) {
    expect_error("/nonexistent/bert8/model", BERT8_ERR_IO, "/nonexistent/bert8/model", "does not exist");
}

TEST(missing_config_is_named) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/noconfig", tu_tmpdir());
    mkdir(dir, 0755);
    expect_error(dir, BERT8_ERR_IO, "config.json", NULL);
}

TEST(missing_safetensors_is_named) {
    expect_error(make_dir("nost", "bert_model", NULL), BERT8_ERR_IO, "model.safetensors", NULL);
}

TEST(truncated_file_rejected) {
    const char *d = make_dir("trunc", "bert_model", NULL);
    write_st(d, "bert_model", NULL, 5000);
    char err[1024];
    bert8_model *m = NULL;
    bert8_status st = bert8_model_load(d, NULL, &m, err, sizeof err);
    CHECKF(st == BERT8_ERR_FORMAT, "status %s: %s", bert8_status_string(st), err);
    CHECKF(strstr(err, "model.safetensors") != NULL, "message: %s", err);
    CHECK(m == NULL);
}

TEST(header_length_past_end_rejected) {
    const char *d = make_dir("hlen", "bert_model", NULL);
    char path[600];
    snprintf(path, sizeof path, "%s/model.safetensors", d);
    unsigned char img[64] = {0};
    uint64_t big = 1u << 30;
    memcpy(img, &big, 8);
    memcpy(img + 8, "{\"a\":1}", 7);
    tu_write_file(path, img, sizeof img);
    expect_error(d, BERT8_ERR_FORMAT, "header", NULL);
}

TEST(header_not_json_rejected) {
    const char *d = make_dir("notjson", "bert_model", NULL);
    char path[600];
    snprintf(path, sizeof path, "%s/model.safetensors", d);
    unsigned char img[48];
    uint64_t hl = 16;
    memcpy(img, &hl, 8);
    memcpy(img + 8, "this is not json", 16);
    memset(img + 24, 0, sizeof img - 24);
    tu_write_file(path, img, sizeof img);
    expect_error(d, BERT8_ERR_FORMAT, "JSON", NULL);
}

static const char *first_tensor = "embeddings.word_embeddings.weight";

static void edit_unknown_dtype(cJSON *h) {
    cJSON *t = cJSON_GetObjectItem(h, first_tensor);
    cJSON_ReplaceItemInObject(t, "dtype", cJSON_CreateString("Q7"));
}
TEST(unknown_dtype_rejected) {
    const char *d = make_dir("dtype", "bert_model", NULL);
    write_st(d, "bert_model", edit_unknown_dtype, 0);
    expect_error(d, BERT8_ERR_UNSUPPORTED, "Q7", first_tensor);
}

static void edit_offsets_out_of_range(cJSON *h) {
    cJSON *t = cJSON_GetObjectItem(h, first_tensor);
    cJSON *off = cJSON_GetObjectItem(t, "data_offsets");
    double b = cJSON_GetArrayItem(off, 0)->valuedouble, e = cJSON_GetArrayItem(off, 1)->valuedouble;
    cJSON_ReplaceItemInArray(off, 0, cJSON_CreateNumber(b + 1e9));
    cJSON_ReplaceItemInArray(off, 1, cJSON_CreateNumber(e + 1e9));
}
TEST(offsets_out_of_range_rejected) {
    const char *d = make_dir("offrange", "bert_model", NULL);
    write_st(d, "bert_model", edit_offsets_out_of_range, 0);
    expect_error(d, BERT8_ERR_FORMAT, first_tensor, NULL);
}

static void edit_overlap(cJSON *h) {
    /* point the second tensor of the data area at the first one's bytes */
    cJSON *a = NULL, *b = NULL, *it;
    cJSON_ArrayForEach(it, h) {
        if (!strcmp(it->string, "__metadata__")) continue;
        cJSON *off = cJSON_GetObjectItem(it, "data_offsets");
        if (cJSON_GetArrayItem(off, 0)->valuedouble == 0) a = it;
    }
    cJSON_ArrayForEach(it, h) {
        if (!strcmp(it->string, "__metadata__") || it == a) continue;
        cJSON *off = cJSON_GetObjectItem(it, "data_offsets");
        double len = cJSON_GetArrayItem(off, 1)->valuedouble - cJSON_GetArrayItem(off, 0)->valuedouble;
        if (len > 0 && len <= cJSON_GetArrayItem(cJSON_GetObjectItem(a, "data_offsets"), 1)->valuedouble) {
            b = it;
            cJSON_ReplaceItemInArray(off, 0, cJSON_CreateNumber(0));
            cJSON_ReplaceItemInArray(off, 1, cJSON_CreateNumber(len));
            break;
        }
    }
    (void)b;
}
TEST(overlapping_offsets_rejected) {
    const char *d = make_dir("overlap", "bert_model", NULL);
    write_st(d, "bert_model", edit_overlap, 0);
    expect_error(d, BERT8_ERR_FORMAT, "overlap", NULL);
}

static void edit_shape_overflow(cJSON *h) {
    cJSON *t = cJSON_GetObjectItem(h, first_tensor);
    cJSON *shape = cJSON_CreateArray();
    cJSON_AddItemToArray(shape, cJSON_CreateNumber(4294967296.0));
    cJSON_AddItemToArray(shape, cJSON_CreateNumber(4294967296.0));
    cJSON_AddItemToArray(shape, cJSON_CreateNumber(4294967296.0));
    cJSON_ReplaceItemInObject(t, "shape", shape);
}
TEST(shape_product_overflow_rejected) {
    const char *d = make_dir("overflow", "bert_model", NULL);
    write_st(d, "bert_model", edit_shape_overflow, 0);
    expect_error(d, BERT8_ERR_FORMAT, first_tensor, NULL);
}

static void edit_drop_tensor(cJSON *h) { cJSON_DeleteItemFromObject(h, "encoder.layer.1.output.dense.weight"); }
TEST(missing_tensor_is_named) {
    const char *d = make_dir("missing", "bert_model", NULL);
    write_st(d, "bert_model", edit_drop_tensor, 0);
    expect_error(d, BERT8_ERR_MISSING, "encoder.layer.1.output.dense.weight", "missing");
}

/* tmp/<name>/: golden bert_model's weights beside its config.json with one integer field changed. */
static const char *dir_with_field(const char *name, const char *field, int value) {
    size_t n;
    char *cfg = tu_read_file(tu_shared_path("golden/models/bert_model/config.json"), &n);
    cJSON *c = cJSON_Parse(cfg);
    cJSON_ReplaceItemInObject(c, field, cJSON_CreateNumber(value));
    char *text = cJSON_Print(c);
    const char *d = make_dir(name, "bert_model", text);
    write_st(d, "bert_model", NULL, 0);
    free(text);
    cJSON_Delete(c);
    free(cfg);
    return d;
}

TEST(shape_disagreeing_with_config_is_named) {
    const char *d = dir_with_field("shape", "intermediate_size", 128);
    expect_error(d, BERT8_ERR_SHAPE, "intermediate.dense.weight", "config.json");
}

/* type_vocab_size 0 beside a token-type table in the file: the table is named, not dropped. */
TEST(token_types_disagreeing_with_config_are_named) {
    const char *d = dir_with_field("types0", "type_vocab_size", 0);
    expect_error(d, BERT8_ERR_SHAPE, "token_type_embeddings", "config.json");
}

TEST(unknown_model_type_is_named) {
    const char *d = make_dir("mtype", "bert_model", "{\"model_type\": \"gpt2\", \"n_layer\": 2}");
    write_st(d, "bert_model", NULL, 0);
    expect_error(d, BERT8_ERR_UNSUPPORTED, "gpt2", "model_type");
}

TEST(config_not_json_is_named) {
    const char *d = make_dir("cfgjson", "bert_model", "{\"model_type\": \"bert\", ");
    write_st(d, "bert_model", NULL, 0);
    expect_error(d, BERT8_ERR_FORMAT, "config.json", "JSON");
}

TEST(intact_copy_loads) {
    /* the harness itself must not break a good checkpoint */
    const char *d = make_dir("intact", "bert_model", NULL);
    write_st(d, "bert_model", NULL, 0);
    char err[1024];
    bert8_model *m = NULL;
    CHECKF(bert8_model_load(d, NULL, &m, err, sizeof err) == BERT8_OK, "%s", err);
    bert8_model_free(m);
    bert8_model_free(NULL);
}

TEST(forward_rejects_bad_ids) {
    char err[1024];
    bert8_model *m = NULL;
    CHECKF(bert8_model_load(tu_shared_path("golden/models/bert_model"), NULL, &m, err, sizeof err) == 0, "%s", err);
    if (!m) return;
    bert8_session *s = NULL;
    CHECK(bert8_session_create(m, &s) == BERT8_OK);
    int32_t ids[3] = {101, 5000, 102};
    bert8_batch bt = {1, 3, ids, NULL, NULL};
    CHECK(bert8_forward(s, &bt, NULL) == BERT8_ERR_INVALID_ARG);
    CHECKF(strstr(bert8_session_last_error(s), "input_ids[0][1]") != NULL, "%s", bert8_session_last_error(s));
    int32_t long_ids[200] = {0};
    bert8_batch bl = {1, 200, long_ids, NULL, NULL};
    CHECK(bert8_forward(s, &bl, NULL) == BERT8_ERR_TOO_LARGE);
    int32_t types[3] = {0, 7, 0}, ok_ids[3] = {101, 5, 102};
    bert8_batch bty = {1, 3, ok_ids, NULL, types};
    CHECK(bert8_forward(s, &bty, NULL) == BERT8_ERR_INVALID_ARG);
    bert8_batch bz = {0, 3, ok_ids, NULL, NULL};
    CHECK(bert8_forward(s, &bz, NULL) == BERT8_ERR_INVALID_ARG);
    bert8_session_free(s);
    bert8_model_free(m);
}

/* More batch shapes than a weight caches primitives for: evicted primitives are retired, not
 * destroyed, and every shape still gives the same result as in a fresh session. */
TEST(many_batch_shapes_agree_with_fresh_sessions) {
    char err[1024];
    bert8_model *m = NULL;
    CHECKF(bert8_model_load(tu_shared_path("golden/models/bert_model"), NULL, &m, err, sizeof err) == 0, "%s", err);
    if (!m) return;
    bert8_session *s = NULL;
    CHECK(bert8_session_create(m, &s) == BERT8_OK);
    int32_t ids[40];
    for (int i = 0; i < 40; i++) ids[i] = 101 + (i * 37) % 800;
    for (int round = 0; round < 2; round++)
        for (int64_t T = 2; T <= 20; T++) {
            bert8_batch b = {2, T, ids, NULL, NULL};
            bert8_outputs o, f;
            CHECK(bert8_forward(s, &b, &o) == BERT8_OK);
            bert8_session *fresh = NULL;
            CHECK(bert8_session_create(m, &fresh) == BERT8_OK);
            CHECK(bert8_forward(fresh, &b, &f) == BERT8_OK);
            CHECKF(memcmp(o.last_hidden_state.data, f.last_hidden_state.data, sizeof(float) * (size_t)(2 * T * 64)) == 0,
                   "T=%lld round %d", (long long)T, round);
            bert8_session_free(fresh);
        }
    bert8_session_free(s);
    bert8_model_free(m);
}

TEST(status_strings_are_static_and_distinct) {
    for (int i = 0; i < BERT8_STATUS_COUNT; i++) {
        CHECK(bert8_status_string((bert8_status)i) != NULL);
        for (int j = 0; j < i; j++)
            CHECK(strcmp(bert8_status_string((bert8_status)i), bert8_status_string((bert8_status)j)) != 0);
    }
    CHECK(strcmp(bert8_status_string((bert8_status)999), "unknown status") == 0);
    CHECK(strcmp(bert8_version(), "0.1.0") == 0);
}

/* ---- Broken sentence-transformers folders (issue 41) ---------------------------------------- */

/* tmp/<name>/ with modules.json (text), 1_Pooling/config.json (pool; NULL: none) and a Dense
 * module in 2_Dense (4 -> 2, Tanh) whose weight [1][1] is w11. */
static const char *st_dir(const char *name, const char *modules, const char *pool, float w11) {
    static char dir[512];
    char path[700];
    snprintf(dir, sizeof dir, "%s/%s", tu_tmpdir(), name);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/1_Pooling", dir);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/2_Dense", dir);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/modules.json", dir);
    CHECK(tu_write_file(path, modules, strlen(modules)) == 0);
    snprintf(path, sizeof path, "%s/1_Pooling/config.json", dir);
    if (pool) CHECK(tu_write_file(path, pool, strlen(pool)) == 0);
    else unlink(path);
    const char *dense = "{\"in_features\": 4, \"out_features\": 2, \"bias\": true, "
                        "\"activation_function\": \"torch.nn.modules.activation.Tanh\"}";
    snprintf(path, sizeof path, "%s/2_Dense/config.json", dir);
    CHECK(tu_write_file(path, dense, strlen(dense)) == 0);
    float w[8] = {1, 0, 0, 0, 0, 1, 0, 0}, b[2] = {0, 0};
    w[5] = w11;
    b8_st_write_item it[2] = {{"linear.weight", B8_F32, 2, {2, 4}, w}, {"linear.bias", B8_F32, 1, {2}, b}};
    b8_err e;
    snprintf(path, sizeof path, "%s/2_Dense/model.safetensors", dir);
    CHECKF(b8_st_write(path, it, 2, NULL, &e) == BERT8_OK, "%s", e.msg);
    return dir;
}

#define ST_MODULES(pool_path, pool_type)                                                        \
    "[{\"idx\": 0, \"name\": \"0\", \"path\": \"\", \"type\": \"sentence_transformers.models.Transformer\"}, " \
    "{\"idx\": 1, \"name\": \"1\", " pool_path "\"type\": \"" pool_type "\"}, "                  \
    "{\"idx\": 2, \"name\": \"2\", \"path\": \"2_Dense\", \"type\": \"sentence_transformers.models.Dense\"}]"
#define POOLING "sentence_transformers.models.Pooling"

/* Reads dir as a 4-wide model; returns the status, the message in msg. */
static bert8_status read_st(const char *dir, b8_st_folder *f, char *msg, size_t cap) {
    b8_err e;
    b8_err_clear(&e);
    bert8_status st = b8_st_folder_read(dir, NULL, true, 4, f, &e);
    snprintf(msg, cap, "%s", e.msg);
    if (!st) CHECK(f->n_steps == 1 && !f->steps[0].normalize);
    return st;
}

static void expect_st_error(const char *dir, const char *n1, const char *n2) {
    b8_st_folder f;
    char msg[1024];
    bert8_status st = read_st(dir, &f, msg, sizeof msg);
    CHECKF(st != BERT8_OK, "%s loaded", dir);
    CHECKF(strstr(msg, n1), "message \"%s\" lacks \"%s\"", msg, n1);
    CHECKF(!n2 || strstr(msg, n2), "message \"%s\" lacks \"%s\"", msg, n2);
    if (!st) b8_st_folder_free(&f);
}

TEST(st_folder_damage_is_a_named_error) {
    const char *pool = "{\"word_embedding_dimension\": 4, \"pooling_mode_cls_token\": true}";
    b8_st_folder f;
    char msg[1024];
    /* the intact folder: CLS pooling, one Dense */
    CHECKF(read_st(st_dir("st-good", ST_MODULES("\"path\": \"1_Pooling\", ", POOLING), pool, 1.0f), &f, msg,
                   sizeof msg) == BERT8_OK, "%s", msg);
    CHECK(f.pool == B8_POOL_CLS);
    b8_st_folder_free(&f);
    /* a Pooling module without "path" used to read the model's own config.json and pool by mean */
    expect_st_error(st_dir("st-nopath", ST_MODULES("", POOLING), pool, 1.0f), "module 1", "has no \"path\"");
    /* "1_Pooling\u0000junk" used to read as "1_Pooling"; a module type the same */
    expect_st_error(st_dir("st-nulpath", ST_MODULES("\"path\": \"1_Pooling\\u0000junk\", ", POOLING), pool, 1.0f),
                    "modules.json: [1].path holds a NUL character", NULL);
    expect_st_error(st_dir("st-nultype", ST_MODULES("\"path\": \"1_Pooling\", ", POOLING "\\u0000x"), pool, 1.0f),
                    "[1].type holds a NUL character", NULL);
    expect_st_error(st_dir("st-dotdot", ST_MODULES("\"path\": \"x/../../1_Pooling\", ", POOLING), pool, 1.0f),
                    "leaves the folder", NULL);
    /* "1_Pooling..x" is a folder name, not a way out (sentence-transformers reads it) */
    expect_st_error(st_dir("st-dots", ST_MODULES("\"path\": \"1_Pooling..x\", ", POOLING), pool, 1.0f),
                    "1_Pooling..x/config.json is missing", NULL);
    /* Pooling configs as sentence-transformers 6.3 reads them: "{}" lacks the dimension (a
     * TypeError there), null and [] name no mode; every flag false pools by mean */
    expect_st_error(st_dir("st-pool-empty", ST_MODULES("\"path\": \"1_Pooling\", ", POOLING), "{}", 1.0f),
                    "embedding_dimension (or word_embedding_dimension) is missing", NULL);
    expect_st_error(st_dir("st-pool-null", ST_MODULES("\"path\": \"1_Pooling\", ", POOLING),
                           "{\"embedding_dimension\": 4, \"pooling_mode\": null}", 1.0f),
                    "pooling_mode is null", NULL);
    expect_st_error(st_dir("st-pool-list", ST_MODULES("\"path\": \"1_Pooling\", ", POOLING),
                           "{\"embedding_dimension\": 4, \"pooling_mode\": []}", 1.0f),
                    "pooling_mode is an empty list", NULL);
    CHECKF(read_st(st_dir("st-pool-false", ST_MODULES("\"path\": \"1_Pooling\", ", POOLING),
                          "{\"word_embedding_dimension\": 4, \"pooling_mode_cls_token\": false, "
                          "\"pooling_mode_mean_tokens\": false, \"pooling_mode_max_tokens\": false}",
                          1.0f),
                   &f, msg, sizeof msg) == BERT8_OK, "%s", msg);
    CHECK(f.pool == B8_POOL_MEAN);
    b8_st_folder_free(&f);
    /* NaN or infinite Dense weights: every embedding would be NaN */
    expect_st_error(st_dir("st-dense-nan", ST_MODULES("\"path\": \"1_Pooling\", ", POOLING), pool, NAN),
                    "2_Dense/model.safetensors: tensor linear.weight[5] = nan is not finite", NULL);
    expect_st_error(st_dir("st-dense-inf", ST_MODULES("\"path\": \"1_Pooling\", ", POOLING), pool, -INFINITY),
                    "linear.weight[5] = -inf is not finite", NULL);
}


int main(void) {
    RUN(missing_folder_is_named);
    RUN(missing_config_is_named);
    RUN(missing_safetensors_is_named);
    RUN(truncated_file_rejected);
    RUN(header_length_past_end_rejected);
    RUN(header_not_json_rejected);
    RUN(unknown_dtype_rejected);
    RUN(offsets_out_of_range_rejected);
    RUN(overlapping_offsets_rejected);
    RUN(shape_product_overflow_rejected);
    RUN(missing_tensor_is_named);
    RUN(shape_disagreeing_with_config_is_named);
    RUN(token_types_disagreeing_with_config_are_named);
    RUN(unknown_model_type_is_named);
    RUN(config_not_json_is_named);
    RUN(intact_copy_loads);
    RUN(forward_rejects_bad_ids);
    RUN(many_batch_shapes_agree_with_fresh_sessions);
    RUN(status_strings_are_static_and_distinct);
    RUN(st_folder_damage_is_a_named_error);
    return tu_finish();
}
