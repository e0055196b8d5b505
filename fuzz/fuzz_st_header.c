/* fuzz_st_header.c: the JSON header of a .safetensors file on its own. The harness supplies a
 * consistent length prefix and a data area of 4096 patterned bytes, so that every mutation
 * reaches the header checks (dtypes, shapes, offsets, overlaps, metadata, names) instead of
 * breaking the length. Invariants as in fuzz_safetensors.c. */
#include "fuzz_util.h"
#include "io/safetensors.h"

#define DATA_LEN 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1u << 20)) return 0;
    size_t total = 8 + size + DATA_LEN;
    uint8_t *buf = malloc(total);
    for (int i = 0; i < 8; i++)
        buf[i] = (uint8_t)((uint64_t)size >> (8 * i));
    if (size) memcpy(buf + 8, data, size);
    for (size_t i = 0; i < DATA_LEN; i++)
        buf[8 + size + i] = (uint8_t)(i * 37 + 11);
    b8_st *st = NULL;
    b8_err e;
    b8_err_clear(&e);
    bert8_status s = b8_st_open_memory(buf, total, "header.safetensors", &st, &e);
    if (s == BERT8_OK) {
        FUZZ_CHECK(st != NULL);
        size_t n = b8_st_count(st), prev_end = 0;
        for (size_t i = 0; i < n; i++) {
            const b8_st_tensor *t = b8_st_at(st, i);
            FUZZ_CHECK(t->file_offset >= 8 + size || t->nbytes == 0);
            FUZZ_CHECK(t->file_offset + t->nbytes <= total);
            FUZZ_CHECK(t->nbytes == b8_st_numel(t) * b8_dtype_size(t->dtype));
            if (t->nbytes) {
                FUZZ_CHECK(t->file_offset >= prev_end);
                prev_end = t->file_offset + t->nbytes;
            }
            FUZZ_CHECK(b8_st_find(st, t->name) == t);
            float *f = NULL;
            if (b8_st_to_f32(t, b8_st_numel(t), &f, &e) == BERT8_OK) b8_free_aligned(f);
        }
        b8_st_close(st);
    } else {
        FUZZ_CHECK(st == NULL && e.status == s && e.msg[0] != '\0');
    }
    free(buf);
    return 0;
}
