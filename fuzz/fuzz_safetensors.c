/* fuzz_safetensors.c: a whole .safetensors file image (length prefix, JSON header, data)
 * through b8_st_open_memory. An accepted file must describe tensors that lie inside it, in
 * data order, findable by name, and convertible to F32 when they are float. A refused one
 * must come back with a message and no handle. */
#include "fuzz_util.h"
#include "io/safetensors.h"

static void check_open(const uint8_t *data, size_t size, b8_st *st) {
    size_t n = b8_st_count(st), sum = 0;
    const uint8_t *end = data + size;
    size_t prev_end = 0;
    for (size_t i = 0; i < n; i++) {
        const b8_st_tensor *t = b8_st_at(st, i);
        FUZZ_CHECK(t && t->name);
        FUZZ_CHECK(t->ndim >= 0 && t->ndim <= B8_ST_MAX_DIMS);
        FUZZ_CHECK(t->nbytes == b8_st_numel(t) * b8_dtype_size(t->dtype));
        const uint8_t *p = t->data;
        FUZZ_CHECK(t->nbytes == 0 || (p >= data && p + t->nbytes <= end));
        FUZZ_CHECK(t->file_offset + t->nbytes <= size);
        if (t->nbytes) {
            FUZZ_CHECK(t->file_offset >= prev_end); /* data order, no overlap */
            prev_end = t->file_offset + t->nbytes;
        }
        FUZZ_CHECK(b8_st_find(st, t->name) == t);
        sum += t->nbytes;
        /* read every byte: ASan sees any pointer past the buffer */
        volatile uint8_t acc = 0;
        for (size_t k = 0; k < t->nbytes; k++)
            acc ^= p[k];
        (void)acc;
        if (t->dtype == B8_F32 || t->dtype == B8_F16 || t->dtype == B8_BF16 ||
            t->dtype == B8_F64) {
            float *f = NULL;
            b8_err e;
            bert8_status s = b8_st_to_f32(t, b8_st_numel(t), &f, &e);
            FUZZ_CHECK(s == BERT8_OK || s == BERT8_ERR_NOMEM || s == BERT8_ERR_TOO_LARGE);
            b8_free_aligned(f);
        }
    }
    FUZZ_CHECK(sum == b8_st_data_bytes(st));
    for (size_t i = 0; i < b8_st_metadata_count(st); i++) {
        const char *k = NULL, *v = NULL;
        FUZZ_CHECK(b8_st_metadata_at(st, i, &k, &v) && k && v);
        FUZZ_CHECK(b8_st_metadata(st, k) != NULL);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* an exact-size copy, so that a read one byte past the image is an ASan report */
    uint8_t *buf = malloc(size ? size : 1);
    if (size) memcpy(buf, data, size);
    b8_st *st = NULL;
    b8_err e;
    b8_err_clear(&e);
    bert8_status s = b8_st_open_memory(buf, size, "fuzz.safetensors", &st, &e);
    if (s == BERT8_OK) {
        FUZZ_CHECK(st != NULL);
        check_open(buf, size, st);
        b8_st_close(st);
    } else {
        FUZZ_CHECK(st == NULL && e.status == s && e.msg[0] != '\0');
    }
    free(buf);
    return 0;
}
