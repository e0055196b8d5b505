/* fuzz_quant.c: an INT8 model folder through the public loader, bert8_model_load: the fuzzer
 * writes quantization_config.json and overwrites 4-byte values of the INT8 scale tensors
 * (weight_scale, smooth_factor, input_scale) and, in a dynamic folder, of the fp32 outlier
 * channels (outlier_index I32, outlier_weight) in model.safetensors; an accepted folder then
 * runs one forward pass. The INT8 checkpoint is made once at start-up from the golden bert_e2e
 * model (bert8_quantize + bert8_model_save, static or dynamic by the flag below), so the
 * harness does not depend on how the quantizer's files are laid out inside the library.
 * Input: quantization_config.json [\n#####\n patch]; the patch is read in records of 6 bytes
 * (little-endian u16 index into all those values, then 4 bytes). An empty first part
 * means no quantization_config.json. */
#include "fuzz_util.h" /* first: it defines _GNU_SOURCE */

#include <cjson/cJSON.h>
#include <math.h>

#include "bert8.h"
#include "io/safetensors.h"

static char dir[600];
static uint8_t *st_ref;
static size_t st_len;
static size_t *scale_off; /* file offsets of every scale float */
static size_t n_scale;

static void die(const char *what, const char *err) {
    fprintf(stderr, "fuzz_quant: %s: %s\n", what, err);
    abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    bert8_set_threads(1);
    char err[1024];
    bert8_model *f = NULL, *q = NULL;
    if (bert8_model_load(fuzz_shared("golden/models/bert_e2e"), NULL, &f, err, sizeof err))
        die("loading bert_e2e", err);
    int32_t ids[2][8] = {{1, 30, 41, 52, 63, 74, 85, 2}, {1, 99, 7, 120, 2, 0, 0, 0}};
    int32_t mask[2][8] = {{1, 1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 0, 0, 0}};
    bert8_batch b = {2, 8, &ids[0][0], &mask[0][0], NULL};
    bert8_quant_params p = bert8_default_quant_params();
    if (getenv("FUZZ_QUANT_DYNAMIC")) p.scheme = BERT8_SCHEME_DYNAMIC;
    if (bert8_quantize(f, &b, 1, &p, &q, err, sizeof err)) die("quantizing", err);
    char ref[600];
    snprintf(ref, sizeof ref, "%s", fuzz_path("q8_ref"));
    if (bert8_model_save(q, ref, err, sizeof err)) die("saving", err);
    bert8_model_free(q);
    bert8_model_free(f);
    snprintf(dir, sizeof dir, "%s", fuzz_path("q8"));
    mkdir(dir, 0755);
    static const char *const copy[] = {"config.json", "vocab.txt"};
    for (int i = 0; i < 2; i++) {
        char from[800], to[800];
        snprintf(from, sizeof from, "%s/%s", ref, copy[i]);
        snprintf(to, sizeof to, "%s/%s", dir, copy[i]);
        size_t n;
        unsigned char *d = fuzz_read(from, &n);
        if (!d || fuzz_write(to, d, n)) die("copying", from);
        free(d);
    }
    char stp[800];
    snprintf(stp, sizeof stp, "%s/model.safetensors", ref);
    st_ref = fuzz_read(stp, &st_len);
    b8_st *st = NULL;
    b8_err e;
    if (!st_ref || b8_st_open(stp, &st, &e)) die("reading the INT8 checkpoint", e.msg);
    scale_off = malloc(sizeof *scale_off * (st_len / 4 + 1));
    for (size_t i = 0; i < b8_st_count(st); i++) {
        const b8_st_tensor *t = b8_st_at(st, i);
        size_t nl = strlen(t->name);
        static const char *const suf[] = {".weight_scale", ".smooth_factor", ".input_scale", ".outlier_index",
                                          ".outlier_weight"};
        for (int k = 0; k < 5; k++) {
            size_t sl = strlen(suf[k]);
            if (nl > sl && !strcmp(t->name + nl - sl, suf[k]) && (t->dtype == B8_F32 || t->dtype == B8_I32))
                for (size_t j = 0; j < t->nbytes / 4; j++)
                    scale_off[n_scale++] = t->file_offset + 4 * j;
        }
    }
    b8_st_close(st);
    if (!n_scale) die("the INT8 checkpoint has no scale tensors", "");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1u << 16)) return 0;
    const uint8_t *part[2];
    size_t len[2];
    fuzz_split(data, size, part, len, 2);
    char path[800];
    snprintf(path, sizeof path, "%s/quantization_config.json", dir);
    if (len[0]) {
        if (fuzz_write(path, part[0], len[0])) die("cannot write the scratch file", path);
    } else {
        unlink(path);
    }
    uint8_t *img = malloc(st_len);
    memcpy(img, st_ref, st_len);
    for (size_t r = 0; r + 6 <= len[1]; r += 6) {
        size_t idx = (size_t)(part[1][r] | part[1][r + 1] << 8) % n_scale;
        memcpy(img + scale_off[idx], part[1] + r + 2, 4);
    }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (fuzz_write(path, img, st_len)) die("cannot write the scratch file", path);
    free(img);
    char err[1024] = "";
    bert8_model *m = NULL;
    bert8_status s = bert8_model_load(dir, NULL, &m, err, sizeof err);
    if (s != BERT8_OK) {
        FUZZ_CHECK(m == NULL && err[0] != '\0');
        return 0;
    }
    const bert8_model_info *info = bert8_model_get_info(m);
    FUZZ_CHECK(info && info->quantized);
    bert8_session *sess = NULL;
    FUZZ_CHECK(bert8_session_create(m, &sess) == BERT8_OK);
    int32_t ids[6] = {1, 17, 230, 999, 5, 2};
    bert8_batch b = {1, 6, ids, NULL, NULL};
    bert8_outputs o;
    FUZZ_CHECK(bert8_forward(sess, &b, &o) == BERT8_OK);
    FUZZ_CHECK(o.last_hidden_state.data != NULL);
    bert8_session_free(sess);
    bert8_model_free(m);
    return 0;
}
