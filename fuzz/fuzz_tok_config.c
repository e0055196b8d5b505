/* fuzz_tok_config.c: the tokenizer side files of a model folder: tokenizer_config.json,
 * special_tokens_map.json and added_tokens.json, resolved against a fixed vocabulary the way
 * from_pretrained does. Input: tokenizer_config.json \n#####\n special_tokens_map.json
 * \n#####\n added_tokens.json \n#####\n text (a missing or empty part means no such file).
 * The vocabulary is picked by the input length: a multiple of 3 uses the golden XLM-R
 * sentencepiece model, one more the golden BERT vocab.txt, two more a small tokenizer.json
 * (where the side files only name roles and model_max_length). */
#include "fuzz_tok.h"

static char dirs[3][600];

static void copy_into(const char *dir, const char *rel, const char *name) {
    size_t n = 0;
    unsigned char *d = fuzz_read(fuzz_shared(rel), &n);
    if (!d) {
        fprintf(stderr, "cannot read %s\n", fuzz_shared(rel));
        abort();
    }
    char path[800];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (fuzz_write(path, d, n) != 0) abort();
    free(d);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    for (int i = 0; i < 3; i++) {
        snprintf(dirs[i], sizeof dirs[i], "%s/tok%d", fuzz_dir(), i);
        mkdir(dirs[i], 0755);
    }
    copy_into(dirs[0], "golden/models/xlmr_e2e/sentencepiece.bpe.model", "sentencepiece.bpe.model");
    copy_into(dirs[1], "golden/models/bert_e2e/vocab.txt", "vocab.txt");
    static const char json[] =
        "{\"added_tokens\":[{\"id\":0,\"content\":\"[UNK]\",\"special\":true},{\"id\":1,"
        "\"content\":\"[CLS]\",\"special\":true},{\"id\":2,\"content\":\"[SEP]\",\"special\":"
        "true},{\"id\":3,\"content\":\"[PAD]\",\"special\":true},{\"id\":4,\"content\":"
        "\"[MASK]\",\"special\":true}],\"normalizer\":{\"type\":\"BertNormalizer\"},"
        "\"pre_tokenizer\":{\"type\":\"BertPreTokenizer\"},\"post_processor\":{\"type\":"
        "\"BertProcessing\",\"sep\":[\"[SEP]\",2],\"cls\":[\"[CLS]\",1]},\"model\":{\"type\":"
        "\"WordPiece\",\"unk_token\":\"[UNK]\",\"vocab\":{\"[UNK]\":0,\"[CLS]\":1,\"[SEP]\":2,"
        "\"[PAD]\":3,\"[MASK]\":4,\"hello\":5,\"world\":6,\"##s\":7,\"a\":8,\",\":9}}}";
    char path[800];
    snprintf(path, sizeof path, "%s/tokenizer.json", dirs[2]);
    if (fuzz_write(path, json, strlen(json)) != 0) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1u << 20)) return 0;
    const uint8_t *part[4];
    size_t len[4];
    fuzz_split(data, size, part, len, 4);
    const char *dir = dirs[size % 3];
    static const char *const names[3] = {"tokenizer_config.json", "special_tokens_map.json",
                                         "added_tokens.json"};
    for (int i = 0; i < 3; i++) {
        char path[800];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (len[i]) {
            if (fuzz_write(path, part[i], len[i]) != 0) abort();
        } else {
            unlink(path);
        }
    }
    b8_tokenizer *t = NULL;
    b8_err e;
    b8_err_clear(&e);
    bert8_status s = b8_tokenizer_load_dir(dir, NULL, &t, &e);
    if (s == BERT8_OK) {
        char *text = fuzz_str(part[3], len[3]);
        fuzz_exercise(t, text, len[3]);
        free(text);
        b8_tokenizer_free(t);
    } else {
        FUZZ_CHECK(t == NULL && e.msg[0] != '\0');
    }
    return 0;
}
