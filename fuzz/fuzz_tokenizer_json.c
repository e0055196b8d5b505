/* fuzz_tokenizer_json.c: a Hugging Face tokenizer.json ("fast" format) through the loader,
 * then tokenization of fixed texts and of the text after the separator line, with the
 * output invariants of fuzz_tok.h. Input: tokenizer.json [\n#####\n text]. */
#include "fuzz_tok.h"
#include "tokenizer/tok_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1u << 20)) return 0;
    const uint8_t *part[2];
    size_t len[2];
    fuzz_split(data, size, part, len, 2);
    char *json = fuzz_str(part[0], len[0]);
    char *text = fuzz_str(part[1], len[1]);
    b8_tokenizer *t = NULL;
    b8_err e;
    b8_err_clear(&e);
    bert8_status s = b8_tokjson_parse(json, len[0], "tokenizer.json", NULL, &t, &e);
    if (s == BERT8_OK) {
        FUZZ_CHECK(t != NULL);
        fuzz_exercise(t, text, len[1]);
        b8_tokenizer_free(t);
    } else {
        FUZZ_CHECK(t == NULL && e.msg[0] != '\0');
    }
    free(json);
    free(text);
    return 0;
}
