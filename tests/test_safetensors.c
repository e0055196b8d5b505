/* test_safetensors.c: the safetensors reader against the golden checkpoints and against
 * hand-made bad files, the sharded index, the writer (round trip and byte-exact re-write of
 * the goldens), the float16/bfloat16 conversions and a deterministic corruption fuzz. */
#define _GNU_SOURCE
#include "testutil.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "io/safetensors.h"

/* ---- helpers ---------------------------------------------------------------------------- */

static char *tmp_path(const char *name) {
    static char buf[16][512];
    static int k;
    char *b = buf[k++ % 16];
    snprintf(b, sizeof buf[0], "%s/%s", tu_tmpdir(), name);
    return b;
}

/* A file made of the 8-byte length of `header`, `header` itself, then data_len bytes whose
 * value is their index mod 251 (so misplaced reads show). */
static const char *make_st(const char *name, const char *header, size_t data_len) {
    size_t hn = strlen(header);
    size_t total = 8 + hn + data_len;
    unsigned char *buf = malloc(total ? total : 1);
    for (int i = 0; i < 8; i++)
        buf[i] = (unsigned char)((uint64_t)hn >> (8 * i));
    memcpy(buf + 8, header, hn);
    for (size_t i = 0; i < data_len; i++)
        buf[8 + hn + i] = (unsigned char)(i % 251);
    const char *p = tmp_path(name);
    if (tu_write_file(p, buf, total) != 0) printf("  cannot write %s\n", p);
    free(buf);
    return p;
}

/* Opens `path` expecting failure with `status` and a message containing every keyword. */
static int expect_fail_(const char *path, bert8_status status, const char *kw1, const char *kw2,
                        int line) {
    b8_err e;
    b8_err_clear(&e);
    b8_st *st = (b8_st *)1;
    bert8_status s = b8_st_open(path, &st, &e);
    int ok = 1;
    if (s != status) {
        printf("  line %d: status %d (%s), expected %d; message: %s\n", line, s,
               bert8_status_string(s), status, e.msg);
        ok = 0;
    }
    if (st != NULL) {
        printf("  line %d: *out not NULL after a failure\n", line);
        ok = 0;
        if (s == BERT8_OK) b8_st_close(st);
    }
    if (kw1 && !strstr(e.msg, kw1)) {
        printf("  line %d: message lacks \"%s\": %s\n", line, kw1, e.msg);
        ok = 0;
    }
    if (kw2 && !strstr(e.msg, kw2)) {
        printf("  line %d: message lacks \"%s\": %s\n", line, kw2, e.msg);
        ok = 0;
    }
    return ok;
}
#define EXPECT_FAIL(path, status, kw1, kw2) CHECK(expect_fail_(path, status, kw1, kw2, __LINE__))

static unsigned char *read_all(const char *path, size_t *len) {
    b8_err e;
    char *p = b8_read_file(path, len, &e);
    if (!p) printf("  %s\n", e.msg);
    return (unsigned char *)p;
}

static int golden_model_names(char names[][64], int cap) {
    DIR *d = opendir(tu_shared_path("golden/models"));
    if (!d) return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < cap) {
        if (de->d_name[0] == '.') continue;
        snprintf(names[n++], 64, "%.63s", de->d_name);
    }
    closedir(d);
    return n;
}

/* ---- golden checkpoints ----------------------------------------------------------------- */

TEST(opens_every_golden_checkpoint) {
    char names[64][64];
    int nm = golden_model_names(names, 64);
    CHECKF(nm == 15, "found %d model folders under golden/models", nm);
    for (int m = 0; m < nm; m++) {
        char rel[256];
        snprintf(rel, sizeof rel, "golden/models/%.63s", names[m]);
        const char *dir = tu_shared_path(rel);
        b8_err e;
        b8_st *st = NULL;
        bert8_status s = b8_st_open_dir(dir, &st, &e);
        CHECKF(s == BERT8_OK, "%s: %s", names[m], e.msg);
        if (s) continue;
        snprintf(rel, sizeof rel, "golden/models/%.63s/cases.json", names[m]);
        size_t len;
        char *text = (char *)read_all(tu_shared_path(rel), &len);
        cJSON *root = text ? cJSON_Parse(text) : NULL;
        const cJSON *want = cJSON_GetObjectItemCaseSensitive(root, "safetensors_tensors");
        CHECKF(cJSON_IsObject(want), "%s: cases.json lacks safetensors_tensors", names[m]);
        CHECKF((size_t)cJSON_GetArraySize(want) == b8_st_count(st), "%s: %d tensors expected, %zu",
               names[m], cJSON_GetArraySize(want), b8_st_count(st));
        size_t i = 0, bytes = 0;
        for (const cJSON *w = want ? want->child : NULL; w; w = w->next, i++) {
            const b8_st_tensor *t = b8_st_at(st, i);
            if (!t) break;
            bytes += t->nbytes;
            /* cases.json lists the tensors in file order */
            CHECKF(strcmp(t->name, w->string) == 0, "%s: tensor %zu is %s, expected %s", names[m],
                   i, t->name, w->string);
            CHECK(b8_st_find(st, w->string) != NULL);
            const cJSON *dt = cJSON_GetObjectItemCaseSensitive(w, "dtype");
            CHECKF(cJSON_IsString(dt) && strcmp(dt->valuestring, b8_dtype_name(t->dtype)) == 0,
                   "%s: %s dtype %s", names[m], t->name, b8_dtype_name(t->dtype));
            const cJSON *sh = cJSON_GetObjectItemCaseSensitive(w, "shape");
            CHECK(cJSON_GetArraySize(sh) == t->ndim);
            int d = 0;
            size_t numel = 1;
            for (const cJSON *x = sh ? sh->child : NULL; x && d < t->ndim; x = x->next, d++) {
                CHECKF(x->valuedouble == (double)t->shape[d], "%s: %s dim %d", names[m], t->name,
                       d);
                numel *= (size_t)t->shape[d];
            }
            CHECK(b8_st_numel(t) == numel);
            CHECK(t->nbytes == numel * b8_dtype_size(t->dtype));
            CHECK(t->data != NULL && t->file != NULL && strstr(t->file, "model.safetensors"));
        }
        CHECK(b8_st_data_bytes(st) == bytes);
        const char *fmt = b8_st_metadata(st, "format");
        CHECKF(fmt && strcmp(fmt, "pt") == 0, "%s: metadata format %s", names[m],
               fmt ? fmt : "(absent)");
        CHECK(b8_st_metadata(st, "no-such-key") == NULL);
        CHECK(b8_st_find(st, "no.such.tensor") == NULL);
        CHECK(b8_st_at(st, b8_st_count(st)) == NULL);
        cJSON_Delete(root);
        free(text);
        b8_st_close(st);
    }
}

TEST(golden_values_match_file_bytes) {
    /* The first tensor of bert_model is embeddings.LayerNorm.bias at data offset 0. */
    const char *path = tu_shared_path("golden/models/bert_model/model.safetensors");
    size_t len;
    unsigned char *raw = read_all(path, &len);
    b8_err e;
    b8_st *st = NULL;
    CHECKF(b8_st_open(path, &st, &e) == BERT8_OK, "%s", e.msg);
    if (!st || !raw) {
        free(raw);
        b8_st_close(st);
        return;
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | raw[i];
    const b8_st_tensor *t = b8_st_find(st, "embeddings.LayerNorm.bias");
    CHECK(t && t->file_offset == 8 + hlen && t->nbytes == 64 * 4);
    for (size_t i = 0; i < b8_st_count(st); i++) {
        const b8_st_tensor *u = b8_st_at(st, i);
        CHECK(u->file_offset + u->nbytes <= len);
        CHECK(memcmp(u->data, raw + u->file_offset, u->nbytes) == 0);
    }
    float *f = NULL;
    CHECKF(t && b8_st_to_f32(t, 64, &f, &e) == BERT8_OK, "%s", e.msg);
    if (f) {
        CHECK(((uintptr_t)f & 63) == 0);
        CHECK(memcmp(f, raw + t->file_offset, 64 * 4) == 0);
    }
    b8_free_aligned(f);
    free(raw);
    b8_st_close(st);
}

TEST(legacy_i64_position_ids_read) {
    b8_err e;
    b8_st *st = NULL;
    CHECKF(b8_st_open_dir(tu_shared_path("golden/models/bert_legacy_names"), &st, &e) == BERT8_OK,
           "%s", e.msg);
    if (!st) return;
    const b8_st_tensor *t = b8_st_find(st, "bert.embeddings.position_ids");
    CHECK(t != NULL);
    if (t) {
        CHECK(t->dtype == B8_I64);
        CHECK(t->ndim == 2 && t->shape[0] == 1 && t->shape[1] == 128);
        CHECK(t->nbytes == 128 * 8);
        CHECK(b8_st_at(st, 0) == t); /* I64 sorts before F32 */
        int bad = 0;
        for (int i = 0; i < 128; i++) {
            int64_t v;
            memcpy(&v, (const char *)t->data + 8 * i, 8);
            if (v != i) bad++;
        }
        CHECKF(bad == 0, "%d position ids differ from 0..127", bad);
        float *f = (float *)1;
        CHECK(b8_st_to_f32(t, 128, &f, &e) == BERT8_ERR_UNSUPPORTED);
        CHECK(f == NULL && strstr(e.msg, "I64"));
    }
    const b8_st_tensor *g = b8_st_find(st, "bert.embeddings.LayerNorm.gamma");
    CHECK(g && g->dtype == B8_F32 && g->ndim == 1 && g->shape[0] == 64);
    CHECK(b8_st_find(st, "bert.embeddings.LayerNorm.weight") == NULL);
    b8_st_close(st);
}

/* ---- bad files -------------------------------------------------------------------------- */

TEST(rejects_missing_file) {
    EXPECT_FAIL(tmp_path("does-not-exist.safetensors"), BERT8_ERR_IO, "does-not-exist", NULL);
    EXPECT_FAIL(tu_tmpdir(), BERT8_ERR_IO, "regular file", NULL);
}

TEST(rejects_truncated_file) {
    const char *p = tmp_path("empty.safetensors");
    CHECK(tu_write_file(p, "", 0) == 0);
    EXPECT_FAIL(p, BERT8_ERR_FORMAT, "truncated", "0 bytes");
    p = tmp_path("five.safetensors");
    CHECK(tu_write_file(p, "\x10\0\0\0\0", 5) == 0);
    EXPECT_FAIL(p, BERT8_ERR_FORMAT, "truncated", "5 bytes");
    /* A golden file cut short inside its data: the last tensor now runs out of range. */
    size_t len;
    unsigned char *raw = read_all(tu_shared_path("golden/models/bert_e2e/model.safetensors"), &len);
    if (!raw) return;
    p = tmp_path("cut.safetensors");
    CHECK(tu_write_file(p, raw, len - 100) == 0);
    EXPECT_FAIL(p, BERT8_ERR_FORMAT, "out of range", "data_offsets");
    free(raw);
}

TEST(rejects_header_length_past_end) {
    unsigned char b[24] = {0x40, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
    const char *p = tmp_path("hlen.safetensors");
    CHECK(tu_write_file(p, b, sizeof b) == 0);
    EXPECT_FAIL(p, BERT8_ERR_FORMAT, "past the end", "64");
    memset(b, 0xFF, 8); /* 2^64-1: the end offset itself overflows */
    CHECK(tu_write_file(p, b, sizeof b) == 0);
    EXPECT_FAIL(p, BERT8_ERR_FORMAT, "past the end", "18446744073709551615");
}

TEST(rejects_absurd_header_length) {
    /* 100 MB + 8 of spaces after "{}" is well-formed but over the limit: a sparse file keeps
     * it cheap. */
    const char *p = tmp_path("huge.safetensors");
    FILE *f = fopen(p, "wb");
    CHECK(f != NULL);
    if (!f) return;
    uint64_t n = 100000008;
    unsigned char lb[8];
    for (int i = 0; i < 8; i++)
        lb[i] = (unsigned char)(n >> (8 * i));
    fwrite(lb, 1, 8, f);
    fwrite("{}", 1, 2, f);
    fseek(f, (long)(8 + n - 1), SEEK_SET);
    fputc(' ', f);
    fclose(f);
    EXPECT_FAIL(p, BERT8_ERR_TOO_LARGE, "limit", "100000008");
}

TEST(rejects_header_not_json) {
    EXPECT_FAIL(make_st("nj1.safetensors", "{\"a\":{\"dtype\":\"F32\",", 0), BERT8_ERR_FORMAT,
                "not valid JSON", "offset");
    EXPECT_FAIL(make_st("nj2.safetensors", "hello world", 0), BERT8_ERR_FORMAT, "not valid JSON",
                NULL);
    EXPECT_FAIL(make_st("nj3.safetensors", "{}  xx  ", 0), BERT8_ERR_FORMAT, "not valid JSON",
                "offset 12");
    EXPECT_FAIL(make_st("nj4.safetensors", "{\"\xC3\x28\":1}", 0), BERT8_ERR_FORMAT, "UTF-8",
                "offset 10");
    /* a NUL inside the header */
    const char *p = make_st("nj5.safetensors", "{\"a\":{}} ", 0);
    size_t len;
    unsigned char *raw = read_all(p, &len);
    if (raw) {
        raw[8 + 8] = 0;
        CHECK(tu_write_file(p, raw, len) == 0);
        EXPECT_FAIL(p, BERT8_ERR_FORMAT, "NUL", "offset 16");
    }
    free(raw);
}

TEST(rejects_header_not_object) {
    EXPECT_FAIL(make_st("no1.safetensors", "[1,2,3] ", 0), BERT8_ERR_FORMAT, "not a JSON object",
                "an array");
    EXPECT_FAIL(make_st("no2.safetensors", "{\"w\":[0,4]}", 4), BERT8_ERR_FORMAT, "'w'",
                "not an object");
}

TEST(rejects_missing_or_mistyped_fields) {
    EXPECT_FAIL(make_st("mf1.safetensors", "{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4),
                BERT8_ERR_FORMAT, "'w'", "\"dtype\"");
    EXPECT_FAIL(make_st("mf2.safetensors", "{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4),
                BERT8_ERR_FORMAT, "'w'", "\"shape\"");
    EXPECT_FAIL(make_st("mf3.safetensors", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4),
                BERT8_ERR_FORMAT, "'w'", "\"data_offsets\"");
    EXPECT_FAIL(make_st("mf4.safetensors",
                        "{\"w\":{\"dtype\":32,\"shape\":[1],\"data_offsets\":[0,4]}}", 4),
                BERT8_ERR_FORMAT, "\"dtype\" is a number", NULL);
    EXPECT_FAIL(make_st("mf5.safetensors",
                        "{\"w\":{\"dtype\":\"F32\",\"shape\":1,\"data_offsets\":[0,4]}}", 4),
                BERT8_ERR_FORMAT, "\"shape\" is a number", NULL);
    EXPECT_FAIL(make_st("mf6.safetensors",
                        "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 8),
                BERT8_ERR_FORMAT, "data_offsets", "two integers");
    EXPECT_FAIL(make_st("mf7.safetensors",
                        "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,\"4\"]}}", 4),
                BERT8_ERR_FORMAT, "data_offsets", "non-negative integers");
    EXPECT_FAIL(make_st("mf8.safetensors",
                        "{\"__metadata__\":{\"format\":1},\"w\":{\"dtype\":\"F32\",\"shape\":[1],"
                        "\"data_offsets\":[0,4]}}",
                        4),
                BERT8_ERR_FORMAT, "__metadata__", "format");
    EXPECT_FAIL(make_st("mf9.safetensors", "{\"__metadata__\":[]}", 0), BERT8_ERR_FORMAT,
                "__metadata__", "not an object");
}

TEST(rejects_unknown_dtype) {
    EXPECT_FAIL(make_st("ud.safetensors",
                        "{\"w\":{\"dtype\":\"F128\",\"shape\":[1],\"data_offsets\":[0,16]}}", 16),
                BERT8_ERR_UNSUPPORTED, "unknown dtype", "F128");
    EXPECT_FAIL(make_st("ud2.safetensors",
                        "{\"w\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4),
                BERT8_ERR_UNSUPPORTED, "unknown dtype", "'w'");
}

TEST(rejects_bad_shape_dims) {
    EXPECT_FAIL(make_st("sd1.safetensors",
                        "{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4),
                BERT8_ERR_FORMAT, "shape dim 0", "non-negative integer");
    EXPECT_FAIL(make_st("sd2.safetensors",
                        "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,1.5],\"data_offsets\":[0,12]}}",
                        12),
                BERT8_ERR_FORMAT, "shape dim 1", "1.5");
    EXPECT_FAIL(make_st("sd3.safetensors",
                        "{\"w\":{\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,8]}}", 8),
                BERT8_ERR_FORMAT, "shape dim 0 is a string", NULL);
    EXPECT_FAIL(
        make_st("sd4.safetensors",
                "{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}",
                4),
        BERT8_ERR_UNSUPPORTED, "9 dims", NULL);
}

TEST(rejects_offsets_out_of_range) {
    /* header is 64 bytes, so the data area starts at file byte 72 */
    const char *h = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}         ";
    CHECK(strlen(h) == 64);
    EXPECT_FAIL(make_st("or1.safetensors", h, 8), BERT8_ERR_FORMAT, "out of range",
                "file bytes 76..84");
    EXPECT_FAIL(make_st("or2.safetensors",
                        "{\"w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,4]}}", 8),
                BERT8_ERR_FORMAT, "begin after end", "[8,4]");
}

TEST(rejects_overlapping_offsets) {
    EXPECT_FAIL(make_st("ov.safetensors",
                        "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                        "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                        12),
                BERT8_ERR_FORMAT, "overlapping", "'a'");
    /* listed out of order, overlapping by one element inside a larger one */
    EXPECT_FAIL(make_st("ov2.safetensors",
                        "{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]},"
                        "\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}",
                        16),
                BERT8_ERR_FORMAT, "overlapping", "'b'");
}

TEST(rejects_shape_product_overflow) {
    EXPECT_FAIL(make_st("po.safetensors",
                        "{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],"
                        "\"data_offsets\":[0,0]}}",
                        0),
                BERT8_ERR_FORMAT, "overflows", "'w'");
    /* elements fit, bytes do not */
    EXPECT_FAIL(make_st("po2.safetensors",
                        "{\"w\":{\"dtype\":\"F64\",\"shape\":[4294967296,536870912],"
                        "\"data_offsets\":[0,0]}}",
                        0),
                BERT8_ERR_FORMAT, "overflows", NULL);
}

TEST(rejects_size_mismatch) {
    EXPECT_FAIL(make_st("sm.safetensors",
                        "{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8),
                BERT8_ERR_FORMAT, "size mismatch", "needs 12 bytes");
}

TEST(rejects_duplicate_names) {
    EXPECT_FAIL(make_st("dn.safetensors",
                        "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                        "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                        8),
                BERT8_ERR_FORMAT, "duplicate", "'w'");
    EXPECT_FAIL(make_st("dm.safetensors", "{\"__metadata__\":{\"k\":\"a\",\"k\":\"b\"}}", 0),
                BERT8_ERR_FORMAT, "\"k\" twice", NULL);
}

TEST(accepts_zero_sized_scalar_and_unaligned) {
    /* 67-byte header: the data start at file byte 75, so nothing is aligned */
    const char *h = "{\"z\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[0,0]},"
                    "\"s\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[0,8]},"
                    "\"e\":{\"dtype\":\"I8\",\"shape\":[0],\"data_offsets\":[8,8]},"
                    "\"x\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[8,12]}}";
    const char *p = make_st("zs.safetensors", h, 12);
    b8_err e;
    b8_st *st = NULL;
    CHECKF(b8_st_open(p, &st, &e) == BERT8_OK, "%s", e.msg);
    if (!st) return;
    CHECK(b8_st_count(st) == 4 && b8_st_data_bytes(st) == 12);
    CHECK(b8_st_metadata_count(st) == 0);
    const b8_st_tensor *z = b8_st_find(st, "z"), *s = b8_st_find(st, "s");
    CHECK(z && z->nbytes == 0 && z->ndim == 2 && b8_st_numel(z) == 0);
    CHECK(s && s->ndim == 0 && s->nbytes == 8 && b8_st_numel(s) == 1);
    /* file order is data order; equal offsets keep header order */
    CHECK(b8_st_at(st, 0) == z && b8_st_at(st, 1) == s);
    CHECK(strcmp(b8_st_at(st, 2)->name, "e") == 0 && strcmp(b8_st_at(st, 3)->name, "x") == 0);
    float *f = NULL;
    CHECKF(z && b8_st_to_f32(z, 0, &f, &e) == BERT8_OK, "%s", e.msg);
    b8_free_aligned(f);
    f = NULL;
    CHECK(s && b8_st_to_f32(s, 1, &f, &e) == BERT8_OK && f);
    if (f) {
        double d;
        memcpy(&d, "\x00\x01\x02\x03\x04\x05\x06\x07", 8);
        CHECK(f[0] == (float)d);
    }
    b8_free_aligned(f);
    b8_st_close(st);
}

/* ---- lookup and metadata ----------------------------------------------------------------- */

TEST(metadata_and_find) {
    const char *p = make_st("md.safetensors",
                            "{\"__metadata__\":{\"format\":\"pt\",\"note\":\"a\\\"b\\u00e9\"},"
                            "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[2,4]},"
                            "\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
                            "\"c\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[4,6]}}",
                            6);
    b8_err e;
    b8_st *st = NULL;
    CHECKF(b8_st_open(p, &st, &e) == BERT8_OK, "%s", e.msg);
    if (!st) return;
    CHECK(b8_st_metadata_count(st) == 2);
    const char *k = NULL, *v = NULL;
    CHECK(b8_st_metadata_at(st, 1, &k, &v) && strcmp(k, "note") == 0);
    CHECK(v && strcmp(v, "a\"b\xC3\xA9") == 0);
    CHECK(!b8_st_metadata_at(st, 2, &k, &v));
    CHECK(strcmp(b8_st_metadata(st, "format"), "pt") == 0);
    const char *names[] = {"a", "b", "c"};
    for (int i = 0; i < 3; i++) {
        const b8_st_tensor *t = b8_st_find(st, names[i]);
        CHECK(t && t == b8_st_at(st, (size_t)i));
        CHECK(t && ((const unsigned char *)t->data)[0] == 2 * i);
    }
    CHECK(b8_st_find(st, "") == NULL && b8_st_find(st, "d") == NULL);
    CHECK(b8_st_find(NULL, "a") == NULL && b8_st_count(NULL) == 0);
    b8_st_close(st);
    b8_st_close(NULL);
}

TEST(open_memory_parses_a_buffer) {
    size_t len;
    unsigned char *raw = read_all(tu_shared_path("golden/models/bert_e2e/model.safetensors"), &len);
    if (!raw) return;
    b8_err e;
    b8_st *st = NULL;
    CHECKF(b8_st_open_memory(raw, len, "mem", &st, &e) == BERT8_OK, "%s", e.msg);
    CHECK(st && b8_st_count(st) > 0 && strcmp(b8_st_at(st, 0)->file, "mem") == 0);
    b8_st_close(st);
    CHECK(b8_st_open_memory(raw, 7, "mem7", &st, &e) == BERT8_ERR_FORMAT && st == NULL);
    CHECK(strstr(e.msg, "mem7") && strstr(e.msg, "truncated"));
    free(raw);
}

/* ---- sharded index ----------------------------------------------------------------------- */

static const float SH_A[4] = {1, 2, 3, 4}, SH_B[2] = {5, 6}, SH_C[3] = {7, 8, 9};

/* Makes folder `name` with shards 1 (a, b) and 2 (c), and the given index text. */
static const char *make_sharded(const char *name, const char *index_json, int write_shard2) {
    const char *dir = tmp_path(name);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    CHECK(system(cmd) == 0);
    b8_err e;
    char p[600];
    b8_st_write_item s1[2] = {{"a", B8_F32, 2, {2, 2}, SH_A}, {"b", B8_F32, 1, {2}, SH_B}};
    b8_st_write_item s2[1] = {{"c", B8_F32, 1, {3}, SH_C}};
    const char *meta[] = {"format", "pt", NULL};
    snprintf(p, sizeof p, "%s/model-00001-of-00002.safetensors", dir);
    CHECKF(b8_st_write(p, s1, 2, meta, &e) == BERT8_OK, "%s", e.msg);
    if (write_shard2) {
        snprintf(p, sizeof p, "%s/model-00002-of-00002.safetensors", dir);
        CHECKF(b8_st_write(p, s2, 1, meta, &e) == BERT8_OK, "%s", e.msg);
    }
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    CHECK(tu_write_file(p, index_json, strlen(index_json)) == 0);
    return dir;
}

#define GOOD_INDEX                                                                                 \
    "{\"metadata\":{\"total_size\":36},\"weight_map\":{"                                           \
    "\"a\":\"model-00001-of-00002.safetensors\",\"b\":\"model-00001-of-00002.safetensors\","       \
    "\"c\":\"model-00002-of-00002.safetensors\"}}"

static int expect_dir_fail_(const char *dir, bert8_status status, const char *kw1, const char *kw2,
                            int line) {
    b8_err e;
    b8_err_clear(&e);
    b8_st *st = (b8_st *)1;
    bert8_status s = b8_st_open_dir(dir, &st, &e);
    int ok =
        s == status && st == NULL && (!kw1 || strstr(e.msg, kw1)) && (!kw2 || strstr(e.msg, kw2));
    if (!ok) printf("  line %d: status %d, expected %d; message: %s\n", line, s, status, e.msg);
    if (s == BERT8_OK) b8_st_close(st);
    return ok;
}
#define EXPECT_DIR_FAIL(dir, status, kw1, kw2)                                                     \
    CHECK(expect_dir_fail_(dir, status, kw1, kw2, __LINE__))

TEST(sharded_index_opens) {
    const char *dir = make_sharded("sharded_ok", GOOD_INDEX, 1);
    b8_err e;
    b8_st *st = NULL;
    CHECKF(b8_st_open_dir(dir, &st, &e) == BERT8_OK, "%s", e.msg);
    if (!st) return;
    CHECK(b8_st_count(st) == 3 && b8_st_data_bytes(st) == 36);
    const b8_st_tensor *a = b8_st_find(st, "a"), *b = b8_st_find(st, "b"), *c = b8_st_find(st, "c");
    CHECK(a && b && c);
    if (a && b && c) {
        CHECK(memcmp(a->data, SH_A, sizeof SH_A) == 0 && a->ndim == 2 && a->shape[1] == 2);
        CHECK(memcmp(b->data, SH_B, sizeof SH_B) == 0);
        CHECK(memcmp(c->data, SH_C, sizeof SH_C) == 0);
        CHECK(strstr(a->file, "model-00001-of-00002") && strstr(c->file, "model-00002-of-00002"));
        CHECK(b8_st_at(st, 2) == c); /* shards in name order */
    }
    CHECK(b8_st_metadata(st, "format") && strcmp(b8_st_metadata(st, "format"), "pt") == 0);
    CHECK(b8_st_metadata_count(st) == 1);
    b8_st_close(st);
}

TEST(sharded_index_rejects_missing_shard) {
    const char *dir = make_sharded("sharded_missing", GOOD_INDEX, 0);
    EXPECT_DIR_FAIL(dir, BERT8_ERR_IO, "shard 'model-00002-of-00002.safetensors'", "cannot open");
}

TEST(sharded_index_rejects_path_escape) {
    const char *dir = make_sharded(
        "sharded_escape",
        "{\"weight_map\":{\"a\":\"model-00001-of-00002.safetensors\",\"b\":\"../x.safetensors\"}}",
        1);
    EXPECT_DIR_FAIL(dir, BERT8_ERR_FORMAT, "escapes", "../x.safetensors");
    dir = make_sharded("sharded_escape2", "{\"weight_map\":{\"a\":\"/etc/passwd\"}}", 1);
    EXPECT_DIR_FAIL(dir, BERT8_ERR_FORMAT, "escapes", "/etc/passwd");
    dir = make_sharded("sharded_escape3", "{\"weight_map\":{\"a\":\"sub/../../y\"}}", 1);
    EXPECT_DIR_FAIL(dir, BERT8_ERR_FORMAT, "escapes", NULL);
}

TEST(sharded_index_rejects_tensor_absent_from_shard) {
    const char *dir = make_sharded("sharded_absent",
                                   "{\"weight_map\":{\"a\":\"model-00001-of-00002.safetensors\","
                                   "\"zz\":\"model-00002-of-00002.safetensors\"}}",
                                   1);
    EXPECT_DIR_FAIL(dir, BERT8_ERR_MISSING, "'zz'", "absent");
    /* listed for the wrong shard */
    dir = make_sharded("sharded_wrong",
                       "{\"weight_map\":{\"a\":\"model-00002-of-00002.safetensors\","
                       "\"b\":\"model-00001-of-00002.safetensors\","
                       "\"c\":\"model-00002-of-00002.safetensors\"}}",
                       1);
    EXPECT_DIR_FAIL(dir, BERT8_ERR_MISSING, "'a'", "found in");
}

TEST(sharded_index_rejects_bad_index) {
    const char *dir = make_sharded("sharded_nojson", "{\"weight_map\":", 1);
    EXPECT_DIR_FAIL(dir, BERT8_ERR_FORMAT, "not valid JSON", "index.json");
    dir = make_sharded("sharded_nomap", "{\"metadata\":{}}", 1);
    EXPECT_DIR_FAIL(dir, BERT8_ERR_FORMAT, "weight_map", "missing");
    dir = make_sharded("sharded_trailing", "{\"weight_map\":{}} x", 1);
    EXPECT_DIR_FAIL(dir, BERT8_ERR_FORMAT, "not valid JSON", NULL);
    dir = make_sharded("sharded_empty", "{\"weight_map\":{}}\n", 1);
    EXPECT_DIR_FAIL(dir, BERT8_ERR_FORMAT, "weight_map", "empty");
    dir = make_sharded("sharded_num", "{\"weight_map\":{\"a\":3}}", 1);
    EXPECT_DIR_FAIL(dir, BERT8_ERR_FORMAT, "'a'", "not a file name");
}

TEST(sharded_index_rejects_duplicate_across_shards) {
    const char *dir = make_sharded("sharded_dup", GOOD_INDEX, 1);
    /* shard 2 now also holds "a" */
    char p[600];
    snprintf(p, sizeof p, "%s/model-00002-of-00002.safetensors", dir);
    b8_st_write_item s2[2] = {{"c", B8_F32, 1, {3}, SH_C}, {"a", B8_F32, 1, {3}, SH_C}};
    b8_err e;
    CHECKF(b8_st_write(p, s2, 2, NULL, &e) == BERT8_OK, "%s", e.msg);
    EXPECT_DIR_FAIL(dir, BERT8_ERR_FORMAT, "duplicate tensor name 'a'", "model-00002");
}

TEST(open_dir_prefers_single_file_and_reports_empty_folder) {
    const char *dir = make_sharded("dir_both", "{not json", 1);
    char p[600];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    b8_st_write_item one = {"only", B8_I32, 1, {1}, "\1\0\0\0"};
    b8_err e;
    CHECK(b8_st_write(p, &one, 1, NULL, &e) == BERT8_OK);
    b8_st *st = NULL;
    CHECKF(b8_st_open_dir(dir, &st, &e) == BERT8_OK, "%s", e.msg);
    CHECK(st && b8_st_count(st) == 1 && b8_st_find(st, "only"));
    b8_st_close(st);
    const char *empty = tmp_path("empty_dir");
    snprintf(p, sizeof p, "mkdir -p '%s'", empty);
    CHECK(system(p) == 0);
    EXPECT_DIR_FAIL(empty, BERT8_ERR_IO, "no model.safetensors", "empty_dir");
}

/* ---- writer ------------------------------------------------------------------------------ */

TEST(writer_roundtrip) {
    int8_t q[6] = {-128, -1, 0, 1, 2, 127};
    float sc[3] = {0.5f, -1.25f, 3e-8f};
    int32_t acc[2] = {INT32_MIN, 123456};
    uint16_t h[2] = {0x3C00, 0xC000};
    uint8_t flags[3] = {1, 0, 1};
    int64_t pos[4] = {0, 1, 2, -5};
    double dd[1] = {1.0 / 3.0};
    b8_st_write_item items[] = {
        {"layer.0.w_q", B8_I8, 2, {2, 3}, q},        {"layer.0.scale", B8_F32, 1, {3}, sc},
        {"layer.0.acc", B8_I32, 1, {2}, acc},        {"half", B8_F16, 1, {2}, h},
        {"flags", B8_BOOL, 1, {3}, flags},           {"pos", B8_I64, 2, {1, 4}, pos},
        {"empty", B8_F32, 2, {0, 5}, NULL},          {"third", B8_F64, 0, {0}, dd},
        {"we\"ird\n\x01name", B8_U8, 1, {3}, flags},
    };
    size_t n = sizeof items / sizeof items[0];
    const char *meta[] = {"format", "pt", "quantized", "int8", NULL};
    const char *p = tmp_path("rt.safetensors");
    b8_err e;
    CHECKF(b8_st_write(p, items, n, meta, &e) == BERT8_OK, "%s", e.msg);
    b8_st *st = NULL;
    CHECKF(b8_st_open(p, &st, &e) == BERT8_OK, "%s", e.msg);
    if (!st) return;
    CHECK(b8_st_count(st) == n);
    /* reference order: I64, F64, F32 (by name), I32, F16, I8, U8, BOOL */
    const char *order[] = {"pos",         "third", "empty",       "layer.0.scale",
                           "layer.0.acc", "half",  "layer.0.w_q", "we\"ird\n\x01name",
                           "flags"};
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        const b8_st_tensor *t = b8_st_at(st, i);
        CHECKF(strcmp(t->name, order[i]) == 0, "position %zu holds %s", i, t->name);
        if (i == 0) off = t->file_offset;
        CHECK(t->file_offset == off); /* packed, no gaps */
        off += t->nbytes;
    }
    for (size_t i = 0; i < n; i++) {
        const b8_st_tensor *t = b8_st_find(st, items[i].name);
        CHECK(t != NULL);
        if (!t) continue;
        CHECK(t->dtype == items[i].dtype && t->ndim == items[i].ndim);
        for (int d = 0; d < t->ndim; d++)
            CHECK(t->shape[d] == items[i].shape[d]);
        CHECK(t->nbytes == 0 || memcmp(t->data, items[i].data, t->nbytes) == 0);
    }
    CHECK(strcmp(b8_st_metadata(st, "quantized"), "int8") == 0);
    b8_st_close(st);
    /* header padded to a multiple of 8, escapes as serde_json writes them */
    size_t len;
    unsigned char *raw = read_all(p, &len);
    if (raw) {
        uint64_t hl = 0;
        for (int i = 7; i >= 0; i--)
            hl = (hl << 8) | raw[i];
        CHECK(hl % 8 == 0);
        CHECK(memmem(raw, len, "\"we\\\"ird\\n\\u0001name\"", 21) != NULL);
        CHECK(memcmp(raw + 8, "{\"__metadata__\":{\"format\":\"pt\",\"quantized\":\"int8\"},",
                     51) == 0);
    }
    free(raw);
    /* no metadata: the key is left out, as the reference does for None */
    CHECK(b8_st_write(p, items, 1, NULL, &e) == BERT8_OK);
    raw = read_all(p, &len);
    if (raw) CHECK(memcmp(raw + 8, "{\"layer.0.w_q\":{\"dtype\":\"I8\",\"shape\":[2,3]", 42) == 0);
    free(raw);
    /* nothing at all */
    CHECK(b8_st_write(p, NULL, 0, NULL, &e) == BERT8_OK);
    raw = read_all(p, &len);
    CHECK(raw && len == 16 && memcmp(raw, "\x08\0\0\0\0\0\0\0{}      ", 16) == 0);
    free(raw);
    b8_st *empty = NULL;
    CHECKF(b8_st_open(p, &empty, &e) == BERT8_OK, "%s", e.msg);
    CHECK(empty && b8_st_count(empty) == 0 && b8_st_data_bytes(empty) == 0);
    CHECK(b8_st_find(empty, "x") == NULL && b8_st_at(empty, 0) == NULL);
    b8_st_close(empty);
}

TEST(writer_rejects_bad_items) {
    float x[2] = {1, 2};
    const char *p = tmp_path("bad_w.safetensors");
    b8_err e;
    b8_st_write_item dup[2] = {{"w", B8_F32, 1, {2}, x}, {"w", B8_F32, 1, {2}, x}};
    CHECK(b8_st_write(p, dup, 2, NULL, &e) == BERT8_ERR_INVALID_ARG && strstr(e.msg, "duplicate"));
    b8_st_write_item nodata = {"w", B8_F32, 1, {2}, NULL};
    CHECK(b8_st_write(p, &nodata, 1, NULL, &e) == BERT8_ERR_INVALID_ARG &&
          strstr(e.msg, "no data"));
    b8_st_write_item neg = {"w", B8_F32, 1, {-2}, x};
    CHECK(b8_st_write(p, &neg, 1, NULL, &e) == BERT8_ERR_INVALID_ARG && strstr(e.msg, "negative"));
    b8_st_write_item dims = {"w", B8_F32, 9, {1}, x};
    CHECK(b8_st_write(p, &dims, 1, NULL, &e) == BERT8_ERR_INVALID_ARG && strstr(e.msg, "ndim"));
    const char *meta[] = {"k", "v", "k", "w", NULL};
    b8_st_write_item ok = {"w", B8_F32, 1, {2}, x};
    CHECK(b8_st_write(p, &ok, 1, meta, &e) == BERT8_ERR_INVALID_ARG && strstr(e.msg, "twice"));
    FILE *f = fopen(p, "rb");
    CHECK(f == NULL); /* nothing was written */
    if (f) fclose(f);
    CHECK(b8_st_write(tmp_path("no/such/dir/x.safetensors"), &ok, 1, NULL, &e) == BERT8_ERR_IO);
}

TEST(writer_matches_golden_bytes) {
    char names[64][64];
    int nm = golden_model_names(names, 64);
    CHECK(nm > 0);
    for (int m = 0; m < nm; m++) {
        char rel[256];
        snprintf(rel, sizeof rel, "golden/models/%.63s/model.safetensors", names[m]);
        const char *path = tu_shared_path(rel);
        b8_err e;
        b8_st *st = NULL;
        CHECKF(b8_st_open(path, &st, &e) == BERT8_OK, "%s", e.msg);
        if (!st) continue;
        size_t n = b8_st_count(st);
        b8_st_write_item *items = calloc(n, sizeof *items);
        /* hand them over in reverse name order so the writer has to sort */
        for (size_t i = 0; i < n; i++) {
            const b8_st_tensor *t = b8_st_at(st, n - 1 - i);
            items[i].name = t->name;
            items[i].dtype = t->dtype;
            items[i].ndim = t->ndim;
            memcpy(items[i].shape, t->shape, sizeof t->shape);
            items[i].data = t->data;
        }
        const char *meta[16] = {0};
        size_t k = 0;
        for (size_t i = 0; i < b8_st_metadata_count(st) && k + 2 < 16; i++, k += 2)
            b8_st_metadata_at(st, i, &meta[k], &meta[k + 1]);
        const char *out = tmp_path("rewrite.safetensors");
        CHECKF(b8_st_write(out, items, n, meta, &e) == BERT8_OK, "%s", e.msg);
        size_t la, lb;
        unsigned char *a = read_all(path, &la), *b = read_all(out, &lb);
        CHECKF(a && b && la == lb && memcmp(a, b, la) == 0, "%s: re-written bytes differ",
               names[m]);
        free(a);
        free(b);
        free(items);
        b8_st_close(st);
    }
}

/* ---- conversions ------------------------------------------------------------------------- */

static uint32_t fbits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

TEST(f16_bf16_convert) {
    struct {
        uint16_t h;
        float f;
    } f16[] = {
        {0x0000, 0.0f},
        {0x8000, -0.0f},
        {0x3C00, 1.0f},
        {0xC000, -2.0f},
        {0x3555, 0.333251953125f},
        {0x7BFF, 65504.0f},
        {0x0400, 6.103515625e-05f} /* smallest normal */,
        {0x0001, 5.9604644775390625e-08f},
        {0x03FF, 6.097555160522461e-05f} /* largest subnormal */,
        {0x8001, -5.9604644775390625e-08f},
        {0x7C00, INFINITY},
        {0xFC00, -INFINITY},
    };
    for (size_t i = 0; i < sizeof f16 / sizeof f16[0]; i++) {
        float g = b8_f16_to_f32(f16[i].h);
        CHECKF(fbits(g) == fbits(f16[i].f), "f16 %04x -> %g", f16[i].h, g);
        CHECKF(b8_f32_to_f16(f16[i].f) == f16[i].h, "f32 %g -> f16 %04x", f16[i].f,
               b8_f32_to_f16(f16[i].f));
    }
    CHECK(isnan(b8_f16_to_f32(0x7E00)) && isnan(b8_f16_to_f32(0xFC01)));
    CHECK((b8_f32_to_f16(NAN) & 0x7C00) == 0x7C00 && (b8_f32_to_f16(NAN) & 0x3FF) != 0);
    /* a NaN whose payload sits only in the low bits must not become inf */
    float low_nan;
    uint32_t lb = 0x7F800001u;
    memcpy(&low_nan, &lb, 4);
    CHECK((b8_f32_to_f16(low_nan) & 0x3FF) != 0);
    /* rounding: ties to even, overflow to inf, underflow to zero */
    CHECK(b8_f32_to_f16(1.0f + 1.0f / 2048) == 0x3C00);         /* tie, even down */
    CHECK(b8_f32_to_f16(1.0f + 3.0f / 2048) == 0x3C02);         /* tie, even up */
    CHECK(b8_f32_to_f16(1.0f + 1.0f / 2048 + 1e-7f) == 0x3C01); /* above tie */
    CHECK(b8_f32_to_f16(65519.0f) == 0x7BFF && b8_f32_to_f16(65520.0f) == 0x7C00);
    CHECK(b8_f32_to_f16(1e10f) == 0x7C00 && b8_f32_to_f16(-1e10f) == 0xFC00);
    CHECK(b8_f32_to_f16(2.9802322387695312e-08f) == 0x0000); /* half of min subnormal */
    CHECK(b8_f32_to_f16(2.99e-08f) == 0x0001);
    CHECK(b8_f32_to_f16(6.1e-05f) == 0x03FF || b8_f32_to_f16(6.1e-05f) == 0x0400);
    CHECK(b8_f32_to_f16(6.1032e-05f) == 0x0400); /* rounds up into normals */
    /* every half value survives f16 -> f32 -> f16 */
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000u; h++) {
        if ((h & 0x7C00) == 0x7C00 && (h & 0x3FF)) continue; /* NaNs checked above */
        if (b8_f32_to_f16(b8_f16_to_f32((uint16_t)h)) != h) bad++;
    }
    CHECKF(bad == 0, "%d half values do not round-trip", bad);

    CHECK(b8_bf16_to_f32(0x3F80) == 1.0f && b8_bf16_to_f32(0xC040) == -3.0f);
    CHECK(b8_bf16_to_f32(0x0001) == 9.183549615799121e-41f); /* subnormal */
    CHECK(isinf(b8_bf16_to_f32(0x7F80)) && isnan(b8_bf16_to_f32(0x7FC0)));
    CHECK(b8_f32_to_bf16(1.0f) == 0x3F80 && b8_f32_to_bf16(-3.0f) == 0xC040);
    CHECK(b8_f32_to_bf16(1.0f + 1.0f / 256) == 0x3F80); /* tie, even down */
    CHECK(b8_f32_to_bf16(1.0f + 3.0f / 256) == 0x3F82); /* tie, even up */
    CHECK(b8_f32_to_bf16(3.4028235e38f) == 0x7F80);     /* rounds to inf */
    CHECK(b8_f32_to_bf16(INFINITY) == 0x7F80);
    CHECK((b8_f32_to_bf16(low_nan) & 0x7F) != 0 && (b8_f32_to_bf16(low_nan) & 0x7F80) == 0x7F80);
}

TEST(to_f32_converts_and_checks_count) {
    uint16_t h[4] = {0x3C00, 0x0001, 0x7C00, 0xC000};
    uint16_t bf[2] = {0x3F80, 0xC040};
    double d[2] = {0.1, -1e300};
    int32_t iv[1] = {7};
    b8_st_write_item items[] = {{"h", B8_F16, 1, {4}, h},
                                {"bf", B8_BF16, 2, {1, 2}, bf},
                                {"d", B8_F64, 1, {2}, d},
                                {"i", B8_I32, 1, {1}, iv}};
    const char *p = tmp_path("conv.safetensors");
    b8_err e;
    CHECKF(b8_st_write(p, items, 4, NULL, &e) == BERT8_OK, "%s", e.msg);
    b8_st *st = NULL;
    CHECKF(b8_st_open(p, &st, &e) == BERT8_OK, "%s", e.msg);
    if (!st) return;
    float *f = NULL;
    CHECK(b8_st_to_f32(b8_st_find(st, "h"), 4, &f, &e) == BERT8_OK && f);
    if (f) CHECK(f[0] == 1.0f && f[1] == 5.9604644775390625e-08f && isinf(f[2]) && f[3] == -2.0f);
    b8_free_aligned(f);
    f = NULL;
    CHECK(b8_st_to_f32(b8_st_find(st, "bf"), 2, &f, &e) == BERT8_OK && f);
    if (f) CHECK(f[0] == 1.0f && f[1] == -3.0f);
    b8_free_aligned(f);
    f = NULL;
    CHECK(b8_st_to_f32(b8_st_find(st, "d"), 2, &f, &e) == BERT8_OK && f);
    if (f) CHECK(f[0] == 0.1f && isinf(f[1]) && f[1] < 0);
    b8_free_aligned(f);
    f = (float *)1;
    CHECK(b8_st_to_f32(b8_st_find(st, "h"), 5, &f, &e) == BERT8_ERR_SHAPE && f == NULL);
    CHECK(strstr(e.msg, "'h'") && strstr(e.msg, "4 elements") && strstr(e.msg, "expected 5"));
    CHECK(b8_st_to_f32(b8_st_find(st, "i"), 1, &f, &e) == BERT8_ERR_UNSUPPORTED);
    CHECK(strstr(e.msg, "I32") != NULL);
    CHECK(b8_st_to_f32(NULL, 1, &f, &e) == BERT8_ERR_INVALID_ARG);
    b8_st_close(st);
}

TEST(dtype_names_and_sizes) {
    CHECK(strcmp(b8_dtype_name(B8_BF16), "BF16") == 0 && b8_dtype_size(B8_BF16) == 2);
    CHECK(b8_dtype_size(B8_I64) == 8 && b8_dtype_size(B8_BOOL) == 1);
    CHECK(strcmp(b8_dtype_name((b8_dtype)99), "?") == 0 && b8_dtype_size((b8_dtype)99) == 0);
    for (int i = 0; i < B8_DTYPE_COUNT; i++) {
        b8_dtype d;
        CHECK(b8_dtype_from_name(b8_dtype_name((b8_dtype)i), &d) && d == (b8_dtype)i);
    }
    CHECK(!b8_dtype_from_name("F128", NULL) && !b8_dtype_from_name(NULL, NULL));
}

/* ---- fuzz -------------------------------------------------------------------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Touches every byte of every tensor so an out-of-range pointer shows under ASan. */
static unsigned touch_all(const b8_st *st) {
    unsigned sum = 0;
    for (size_t i = 0; i < b8_st_count(st); i++) {
        const b8_st_tensor *t = b8_st_at(st, i);
        const unsigned char *d = t->data;
        for (size_t k = 0; k < t->nbytes; k++)
            sum += d[k];
        if (t->dtype == B8_F32 || t->dtype == B8_F16 || t->dtype == B8_BF16 || t->dtype == B8_F64) {
            float *f = NULL;
            b8_err e;
            if (b8_st_to_f32(t, b8_st_numel(t), &f, &e) == BERT8_OK) sum += (unsigned)(f != NULL);
            b8_free_aligned(f);
        }
    }
    return sum;
}

TEST(fuzz_corrupted_golden_never_crashes) {
    size_t len;
    unsigned char *orig =
        read_all(tu_shared_path("golden/models/bert_e2e/model.safetensors"), &len);
    if (!orig) return;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | orig[i];
    size_t hend = 8 + (size_t)hlen;
    const char *digits = "0123456789";
    const char *punct = "{}[],:\"-.e ";
    int opened = 0, failed = 0, bad_fail = 0;
    const int iters = 3000;
    for (int it = 0; it < iters; it++) {
        /* exact-size heap copies so that ASan sees any read past the end */
        size_t n = len;
        unsigned char *buf = malloc(len);
        memcpy(buf, orig, len);
        int kind = (int)(rng() % 10);
        int flips = 1 + (int)(rng() % 4);
        for (int k = 0; k < flips; k++) {
            size_t at = (kind < 8) ? (size_t)(rng() % hend) : (size_t)(rng() % len);
            uint64_t r = rng();
            switch (r % 4) {
            case 0:
                buf[at] ^= (unsigned char)(1u << (r >> 8) % 8);
                break;
            case 1:
                buf[at] = (unsigned char)(r >> 16);
                break;
            case 2:
                buf[at] = (unsigned char)digits[(r >> 16) % 10];
                break;
            default:
                buf[at] = (unsigned char)punct[(r >> 16) % strlen(punct)];
                break;
            }
        }
        if (kind == 9) n = (size_t)(rng() % (len + 1)); /* truncation */
        unsigned char *cut = malloc(n ? n : 1);
        memcpy(cut, buf, n);
        free(buf);
        b8_err e;
        b8_err_clear(&e);
        b8_st *st = NULL;
        bert8_status s = b8_st_open_memory(cut, n, "fuzz", &st, &e);
        if (s == BERT8_OK) {
            opened++;
            touch_all(st);
            b8_st_close(st);
        } else {
            failed++;
            if (st != NULL || e.msg[0] == '\0' || e.status != s) bad_fail++;
        }
        free(cut);
    }
    /* a few through the file path as well */
    for (int it = 0; it < 20; it++) {
        unsigned char *buf = malloc(len);
        memcpy(buf, orig, len);
        buf[rng() % hend] ^= (unsigned char)(1u << (rng() % 8));
        size_t n = (it % 2) ? len : (size_t)(rng() % len);
        const char *p = tmp_path("fuzz.safetensors");
        CHECK(tu_write_file(p, buf, n) == 0);
        b8_err e;
        b8_st *st = NULL;
        if (b8_st_open(p, &st, &e) == BERT8_OK) {
            touch_all(st);
            b8_st_close(st);
        } else {
            CHECK(st == NULL && e.msg[0] != '\0');
        }
        free(buf);
    }
    printf("  fuzz: %d opened, %d rejected\n", opened, failed);
    CHECK(opened + failed == iters);
    CHECK(failed > iters / 4); /* the corruption really reaches the validation */
    CHECKF(bad_fail == 0, "%d failures without a message or with a stale handle", bad_fail);
    free(orig);
}

int main(void) {
    RUN(opens_every_golden_checkpoint);
    RUN(golden_values_match_file_bytes);
    RUN(legacy_i64_position_ids_read);
    RUN(rejects_missing_file);
    RUN(rejects_truncated_file);
    RUN(rejects_header_length_past_end);
    RUN(rejects_absurd_header_length);
    RUN(rejects_header_not_json);
    RUN(rejects_header_not_object);
    RUN(rejects_missing_or_mistyped_fields);
    RUN(rejects_unknown_dtype);
    RUN(rejects_bad_shape_dims);
    RUN(rejects_offsets_out_of_range);
    RUN(rejects_overlapping_offsets);
    RUN(rejects_shape_product_overflow);
    RUN(rejects_size_mismatch);
    RUN(rejects_duplicate_names);
    RUN(accepts_zero_sized_scalar_and_unaligned);
    RUN(metadata_and_find);
    RUN(open_memory_parses_a_buffer);
    RUN(sharded_index_opens);
    RUN(sharded_index_rejects_missing_shard);
    RUN(sharded_index_rejects_path_escape);
    RUN(sharded_index_rejects_tensor_absent_from_shard);
    RUN(sharded_index_rejects_bad_index);
    RUN(sharded_index_rejects_duplicate_across_shards);
    RUN(open_dir_prefers_single_file_and_reports_empty_folder);
    RUN(writer_roundtrip);
    RUN(writer_rejects_bad_items);
    RUN(writer_matches_golden_bytes);
    RUN(f16_bf16_convert);
    RUN(to_f32_converts_and_checks_count);
    RUN(dtype_names_and_sizes);
    RUN(fuzz_corrupted_golden_never_crashes);
    return tu_finish();
}
