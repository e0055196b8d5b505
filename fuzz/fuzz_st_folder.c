/* fuzz_st_folder.c: a sentence-transformers folder through b8_st_folder_read, for a transformer
 * 4 values wide: modules.json, 1_Pooling/config.json and 2_Dense/config.json from the input,
 * beside a fixed Dense weight file (linear.weight [2][4], linear.bias [2]). Input:
 * modules.json [\n#####\n 1_Pooling/config.json [\n#####\n 2_Dense/config.json [\n#####\n w]]],
 * where w (4 bytes) replaces weight [1][1] (a NaN there must be refused); an empty part means
 * the file is absent. An accepted folder must pool by some mode, chain widths that agree and
 * hold only finite weights. */
#include "fuzz_util.h" /* first: it defines _GNU_SOURCE */

#include <math.h>

#include "io/safetensors.h"
#include "io/st_config.h"

static char dir[600];

static void put(const char *name, const uint8_t *data, size_t n) {
    char path[800];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!n) {
        unlink(path);
        return;
    }
    if (fuzz_write(path, data, n)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1u << 16)) return 0;
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "%s", fuzz_path("st_folder"));
        char sub[700];
        mkdir(dir, 0755);
        snprintf(sub, sizeof sub, "%s/1_Pooling", dir);
        mkdir(sub, 0755);
        snprintf(sub, sizeof sub, "%s/2_Dense", dir);
        mkdir(sub, 0755);
    }
    const uint8_t *part[4];
    size_t len[4];
    fuzz_split(data, size, part, len, 4);
    put("modules.json", part[0], len[0]);
    put("1_Pooling/config.json", part[1], len[1]);
    put("2_Dense/config.json", part[2], len[2]);
    float w[8] = {0.5f, -1, 0, 2, 1, 0.25f, -0.5f, 0}, b[2] = {0.1f, -0.1f};
    if (len[3] >= 4) memcpy(&w[5], part[3], 4);
    b8_st_write_item it[2] = {{"linear.weight", B8_F32, 2, {2, 4}, w}, {"linear.bias", B8_F32, 1, {2}, b}};
    char path[800];
    snprintf(path, sizeof path, "%s/2_Dense/model.safetensors", dir);
    b8_err e;
    b8_err_clear(&e);
    if (b8_st_write(path, it, 2, NULL, &e)) abort();
    b8_st_folder f;
    b8_err_clear(&e);
    bert8_status s = b8_st_folder_read(dir, NULL, true, 4, &f, &e);
    if (s != BERT8_OK) {
        FUZZ_CHECK(e.msg[0] != '\0');
        return 0;
    }
    FUZZ_CHECK(!f.has_modules || (f.pool && !(f.pool & ~(unsigned)B8_POOL_ALL)));
    int modes = 0;
    for (unsigned m = f.pool; m; m &= m - 1) modes++;
    int64_t width = (modes ? modes : 1) * 4;
    for (size_t i = 0; i < f.n_steps; i++) {
        const b8_st_dense *d = &f.steps[i].dense;
        if (f.steps[i].normalize) continue;
        FUZZ_CHECK(d->in == width && d->out >= 1 && d->w);
        for (int64_t k = 0; k < d->in * d->out; k++) FUZZ_CHECK(isfinite(d->w[k]));
        for (int64_t k = 0; d->b && k < d->out; k++) FUZZ_CHECK(isfinite(d->b[k]));
        width = d->out;
    }
    b8_st_folder_free(&f);
    return 0;
}
