/* fuzz_st_index.c: model.safetensors.index.json, the sharded-checkpoint index. The input is
 * the index text; the folder beside it holds two small valid shards (and one in a
 * sub-folder), made once at start-up. An accepted index must map every listed tensor to the
 * shard it names, and only files inside the folder may be opened. */
#include "fuzz_util.h"
#include "io/safetensors.h"

static char dir[600];

static void make_shard(const char *name, const char *t0, const char *t1) {
    static const float v[6] = {1, 2, 3, 4, 5, 6};
    b8_st_write_item it[2] = {{t0, B8_F32, 2, {2, 3}, v}, {t1, B8_F16, 1, {3}, v}};
    char path[800];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    const char *meta[] = {"format", "pt", NULL};
    b8_err e;
    if (b8_st_write(path, it, 2, meta, &e) != BERT8_OK) {
        fprintf(stderr, "cannot make %s: %s\n", path, e.msg);
        abort();
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    snprintf(dir, sizeof dir, "%s", fuzz_path("index"));
    mkdir(dir, 0755);
    char sub[700];
    snprintf(sub, sizeof sub, "%s/sub", dir);
    mkdir(sub, 0755);
    make_shard("model-00001-of-00002.safetensors", "a.weight", "a.bias");
    make_shard("model-00002-of-00002.safetensors", "b.weight", "b.bias");
    make_shard("sub/c.safetensors", "c.weight", "c.bias");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1u << 20)) return 0;
    char path[800];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    if (fuzz_write(path, data, size) != 0) abort();
    b8_st *st = NULL;
    b8_err e;
    b8_err_clear(&e);
    bert8_status s = b8_st_open_dir(dir, &st, &e);
    if (s == BERT8_OK) {
        FUZZ_CHECK(st != NULL);
        size_t dl = strlen(dir);
        for (size_t i = 0; i < b8_st_count(st); i++) {
            const b8_st_tensor *t = b8_st_at(st, i);
            FUZZ_CHECK(!strncmp(t->file, dir, dl) && t->file[dl] == '/');
            FUZZ_CHECK(strstr(t->file + dl, "/../") == NULL);
            FUZZ_CHECK(b8_st_find(st, t->name) == t);
            float *f = NULL;
            if (b8_st_to_f32(t, b8_st_numel(t), &f, &e) == BERT8_OK) b8_free_aligned(f);
        }
        b8_st_close(st);
    } else {
        FUZZ_CHECK(st == NULL && e.msg[0] != '\0');
    }
    return 0;
}
