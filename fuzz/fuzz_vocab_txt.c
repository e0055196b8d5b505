/* fuzz_vocab_txt.c: a WordPiece vocab.txt (one token per line) through the loader, then
 * tokenization with the invariants of fuzz_tok.h. Input: vocab.txt [\n#####\n text]; the
 * first byte of the text part, when present, also picks the lower-casing options. */
#include "fuzz_tok.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1u << 20)) return 0;
    const uint8_t *part[2];
    size_t len[2];
    fuzz_split(data, size, part, len, 2);
    const char *path = fuzz_path("vocab.txt");
    if (fuzz_write(path, part[0], len[0]) != 0) abort();
    b8_tok_options o = b8_tok_default_options();
    if (len[1]) {
        o.lowercase = (part[1][0] & 3) == 3 ? -1 : (part[1][0] & 1);
        o.strip_accents = (part[1][0] >> 2 & 3) == 3 ? -1 : (part[1][0] >> 2 & 1);
        o.tokenize_chinese_chars = (part[1][0] >> 4 & 1);
    }
    b8_tokenizer *t = NULL;
    b8_err e;
    b8_err_clear(&e);
    bert8_status s = b8_tokenizer_load_files(B8_TOK_WORDPIECE, path, &o, &t, &e);
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
