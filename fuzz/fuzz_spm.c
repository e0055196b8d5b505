/* fuzz_spm.c: a sentencepiece ModelProto (sentencepiece.bpe.model, protobuf wire format)
 * through the Unigram loader, then tokenization with the invariants of fuzz_tok.h.
 * Input: model bytes [\n#####\n text]. */
#include "fuzz_tok.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (4u << 20)) return 0;
    const uint8_t *part[2];
    size_t len[2];
    fuzz_split(data, size, part, len, 2);
    const char *path = fuzz_path("sentencepiece.bpe.model");
    if (fuzz_write(path, part[0], len[0]) != 0) abort();
    b8_tokenizer *t = NULL;
    b8_err e;
    b8_err_clear(&e);
    bert8_status s = b8_tokenizer_load_files(B8_TOK_UNIGRAM, path, NULL, &t, &e);
    if (s == BERT8_OK) {
        char *text = fuzz_str(part[1], len[1]);
        fuzz_exercise(t, text, len[1]);
        free(text);
        b8_tokenizer_free(t);
    } else {
        FUZZ_CHECK(t == NULL && e.msg[0] != '\0');
    }
    return 0;
}
