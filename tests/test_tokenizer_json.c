/* test_tokenizer_json.c: the tokenizer.json ("fast" format) loading path. Small
 * tokenizer.json files equivalent to vocab.txt / sentencepiece configurations are written at
 * test time, and both paths must tokenize a corpus of texts identically (ids, offsets, word
 * ids, pair encodings, special ids). */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tokenizer/tok_types.h"

/* The corpus: every text of a golden file plus some edge cases. */
static char **texts;
static size_t *text_lens;
static int ntexts;

static void add_text(const char *s, size_t n) {
    texts = realloc(texts, (size_t)(ntexts + 1) * sizeof *texts);
    text_lens = realloc(text_lens, (size_t)(ntexts + 1) * sizeof *text_lens);
    texts[ntexts] = malloc(n + 1);
    memcpy(texts[ntexts], s, n);
    texts[ntexts][n] = 0;
    text_lens[ntexts++] = n;
}

static void load_corpus(void) {
    b8_err e = {0};
    size_t n = 0;
    char *data = b8_read_file(tu_shared_path("golden/tokenizers/bert-base-cased.jsonl"), &n, &e);
    for (char *line = data; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        cJSON *r = cJSON_Parse(line);
        const char *keys[2] = {"text", "text_pair"};
        for (int k = 0; r && k < 2; k++) {
            const cJSON *v = cJSON_GetObjectItem(r, keys[k]);
            if (cJSON_IsString(v)) add_text(v->valuestring, strlen(v->valuestring));
        }
        cJSON_Delete(r);
        line = nl ? nl + 1 : NULL;
    }
    free(data);
    static const char *extra[] = {"prefix[MASK]suffix",     "a <mask> b", "<s>x</s><pad>",
                                  "[UNK] [PAD] <unk>",      "  \t ",      "ΟΔΟΣ İ ﬁ ½",
                                  "東京タワーは333メートル"};
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++)
        add_text(extra[i], strlen(extra[i]));
}

/* Both tokenizers must agree on every text and on pairs of neighbouring texts. */
static void check_same(const b8_tokenizer *a, const b8_tokenizer *b, const char *what) {
    b8_tok_pieces pa = {0}, pb = {0};
    b8_encoding ea = {0}, eb = {0};
    b8_err e = {0};
    int diffs = 0;
    for (int i = 0; i < ntexts && diffs < 5; i++) {
        bert8_status sa = b8_tokenizer_tokenize(a, texts[i], text_lens[i], &pa, &e);
        bert8_status sb = b8_tokenizer_tokenize(b, texts[i], text_lens[i], &pb, &e);
        int same = sa == BERT8_OK && sb == BERT8_OK && pa.n == pb.n &&
                   !memcmp(pa.ids, pb.ids, (size_t)pa.n * sizeof *pa.ids) &&
                   !memcmp(pa.offsets, pb.offsets, (size_t)pa.n * 2 * sizeof *pa.offsets) &&
                   !memcmp(pa.word_ids, pb.word_ids, (size_t)pa.n * sizeof *pa.word_ids);
        int j = (i + 1) % ntexts;
        b8_encode_params ep = b8_default_encode_params();
        sa = b8_tokenizer_encode(a, texts[i], text_lens[i], texts[j], text_lens[j], &ep, &ea, &e);
        sb = b8_tokenizer_encode(b, texts[i], text_lens[i], texts[j], text_lens[j], &ep, &eb, &e);
        same = same && sa == BERT8_OK && sb == BERT8_OK && ea.seq == eb.seq &&
               !memcmp(ea.input_ids, eb.input_ids, (size_t)ea.seq * sizeof *ea.input_ids) &&
               !memcmp(ea.token_type_ids, eb.token_type_ids, (size_t)ea.seq * sizeof(int32_t));
        if (!same) {
            diffs++;
            printf("  %s: text %d (\"%.40s\") differs\n", what, i, texts[i]);
        }
    }
    CHECK(diffs == 0);
    for (int s = 0; s < B8_SPECIAL_COUNT; s++)
        CHECKF(b8_tokenizer_special_id(a, (b8_special)s) ==
                   b8_tokenizer_special_id(b, (b8_special)s),
               "%s: special %d: %d vs %d", what, s, b8_tokenizer_special_id(a, (b8_special)s),
               b8_tokenizer_special_id(b, (b8_special)s));
    CHECK(b8_tokenizer_kind(a) == b8_tokenizer_kind(b));
    b8_tok_pieces_free(&pa);
    b8_tok_pieces_free(&pb);
    b8_encoding_free(&ea);
    b8_encoding_free(&eb);
}

static cJSON *added_token(int id, const char *content, int lstrip) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "id", id);
    cJSON_AddStringToObject(o, "content", content);
    cJSON_AddBoolToObject(o, "single_word", 0);
    cJSON_AddBoolToObject(o, "lstrip", lstrip);
    cJSON_AddBoolToObject(o, "rstrip", 0);
    cJSON_AddBoolToObject(o, "normalized", 0);
    cJSON_AddBoolToObject(o, "special", 1);
    return o;
}

static cJSON *tmpl_item(const char *kind, const char *id, int type_id) {
    cJSON *o = cJSON_CreateObject(), *b = cJSON_CreateObject();
    cJSON_AddStringToObject(b, "id", id);
    cJSON_AddNumberToObject(b, "type_id", type_id);
    cJSON_AddItemToObject(o, kind, b);
    return o;
}

static int write_json(const char *path, cJSON *root) {
    char *s = cJSON_PrintUnformatted(root);
    int rc = s ? tu_write_file(path, s, strlen(s)) : -1;
    free(s);
    cJSON_Delete(root);
    return rc;
}

static int make_dir(const char *dir) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    return system(cmd);
}

/* A tokenizer.json equivalent to a vocab.txt with BertTokenizer's defaults. */
static int write_wordpiece_json(const char *path, const b8_tokenizer *ref, int lower,
                                int bert_processing) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "version", "1.0");
    cJSON_AddNullToObject(root, "truncation");
    cJSON_AddNullToObject(root, "padding");
    static const char *const specials[5] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
    cJSON *added = cJSON_AddArrayToObject(root, "added_tokens");
    for (int i = 0; i < 5; i++)
        cJSON_AddItemToArray(
            added, added_token(b8_tokenizer_token_to_id(ref, specials[i], strlen(specials[i])),
                               specials[i], 0));
    cJSON *norm = cJSON_AddObjectToObject(root, "normalizer");
    cJSON_AddStringToObject(norm, "type", "BertNormalizer");
    cJSON_AddBoolToObject(norm, "clean_text", 1);
    cJSON_AddBoolToObject(norm, "handle_chinese_chars", 1);
    cJSON_AddNullToObject(norm, "strip_accents");
    cJSON_AddBoolToObject(norm, "lowercase", lower);
    cJSON_AddStringToObject(cJSON_AddObjectToObject(root, "pre_tokenizer"), "type",
                            "BertPreTokenizer");
    int32_t cls = b8_tokenizer_special_id(ref, B8_SPECIAL_CLS);
    int32_t sep = b8_tokenizer_special_id(ref, B8_SPECIAL_SEP);
    cJSON *post = cJSON_AddObjectToObject(root, "post_processor");
    if (bert_processing) {
        cJSON_AddStringToObject(post, "type", "BertProcessing");
        cJSON *s = cJSON_AddArrayToObject(post, "sep"), *c = cJSON_AddArrayToObject(post, "cls");
        cJSON_AddItemToArray(s, cJSON_CreateString("[SEP]"));
        cJSON_AddItemToArray(s, cJSON_CreateNumber(sep));
        cJSON_AddItemToArray(c, cJSON_CreateString("[CLS]"));
        cJSON_AddItemToArray(c, cJSON_CreateNumber(cls));
    } else {
        cJSON_AddStringToObject(post, "type", "TemplateProcessing");
        cJSON *single = cJSON_AddArrayToObject(post, "single");
        cJSON_AddItemToArray(single, tmpl_item("SpecialToken", "[CLS]", 0));
        cJSON_AddItemToArray(single, tmpl_item("Sequence", "A", 0));
        cJSON_AddItemToArray(single, tmpl_item("SpecialToken", "[SEP]", 0));
        cJSON *pair = cJSON_AddArrayToObject(post, "pair");
        cJSON_AddItemToArray(pair, tmpl_item("SpecialToken", "[CLS]", 0));
        cJSON_AddItemToArray(pair, tmpl_item("Sequence", "A", 0));
        cJSON_AddItemToArray(pair, tmpl_item("SpecialToken", "[SEP]", 0));
        cJSON_AddItemToArray(pair, tmpl_item("Sequence", "B", 1));
        cJSON_AddItemToArray(pair, tmpl_item("SpecialToken", "[SEP]", 1));
        cJSON *st = cJSON_AddObjectToObject(post, "special_tokens");
        const char *names[2] = {"[CLS]", "[SEP]"};
        int ids[2] = {cls, sep};
        for (int i = 0; i < 2; i++) {
            cJSON *o = cJSON_AddObjectToObject(st, names[i]);
            cJSON_AddStringToObject(o, "id", names[i]);
            cJSON_AddItemToObject(o, "ids", cJSON_CreateIntArray(&ids[i], 1));
            cJSON_AddItemToObject(o, "tokens", cJSON_CreateStringArray(&names[i], 1));
        }
    }
    cJSON *model = cJSON_AddObjectToObject(root, "model");
    cJSON_AddStringToObject(model, "type", "WordPiece");
    cJSON_AddStringToObject(model, "unk_token", "[UNK]");
    cJSON_AddStringToObject(model, "continuing_subword_prefix", "##");
    cJSON_AddNumberToObject(model, "max_input_chars_per_word", 100);
    cJSON *vocab = cJSON_AddObjectToObject(model, "vocab");
    for (int32_t i = 0; i < b8_tokenizer_vocab_size(ref); i++) {
        size_t len = 0;
        const char *s = b8_tokenizer_id_to_token(ref, i, &len);
        /* duplicates in vocab.txt: the dict keeps the last id */
        if (b8_tokenizer_token_to_id(ref, s, len) != i) continue;
        cJSON_AddNumberToObject(vocab, s, i);
    }
    return write_json(path, root);
}

static void wordpiece_case(const char *vocab, int lower, int bert_processing) {
    b8_tok_options o = b8_tok_default_options();
    o.lowercase = lower;
    b8_tokenizer *ref = NULL, *js = NULL;
    b8_err e = {0};
    bert8_status st =
        b8_tokenizer_load_files(B8_TOK_WORDPIECE, tu_shared_path(vocab), &o, &ref, &e);
    CHECKF(st == BERT8_OK, "%s", e.msg);
    if (!ref) return;
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/wp_%d_%d", tu_tmpdir(), lower, bert_processing);
    CHECK(make_dir(dir) == 0);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    CHECK(write_wordpiece_json(path, ref, lower, bert_processing) == 0);
    /* from the folder (tokenizer.json wins over anything else) and as a file */
    st = b8_tokenizer_load_dir(dir, NULL, &js, &e);
    CHECKF(st == BERT8_OK, "%s", e.msg);
    if (js) check_same(ref, js, vocab);
    b8_tokenizer_free(js);
    js = NULL;
    st = b8_tokenizer_load_files(B8_TOK_AUTO, path, NULL, &js, &e);
    CHECKF(st == BERT8_OK, "%s", e.msg);
    if (js) {
        CHECK(b8_tokenizer_kind(js) == B8_TOK_WORDPIECE);
        check_same(ref, js, vocab);
    }
    b8_tokenizer_free(js);
    b8_tokenizer_free(ref);
}

TEST(tokenizer_json_wordpiece_uncased_matches_vocab_txt) {
    wordpiece_case("tokenizers/bert-base-uncased.vocab.txt", 1, 0);
}
TEST(tokenizer_json_wordpiece_cased_bert_processing_matches_vocab_txt) {
    wordpiece_case("tokenizers/bert-base-cased.vocab.txt", 0, 1);
}
TEST(tokenizer_json_wordpiece_custom_special_ids) {
    /* bert_e2e puts [PAD] [UNK] [CLS] [SEP] [MASK] at 0..4 */
    wordpiece_case("golden/models/bert_e2e/vocab.txt", 1, 0);
}

static char *base64(const uint8_t *p, size_t n) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
                     (i + 2 < n ? p[i + 2] : 0);
        *o++ = tab[v >> 18 & 63];
        *o++ = tab[v >> 12 & 63];
        *o++ = i + 1 < n ? tab[v >> 6 & 63] : '=';
        *o++ = i + 2 < n ? tab[v & 63] : '=';
    }
    *o = 0;
    return out;
}

/* A tokenizer.json as transformers' converter writes it for XLM-R. */
static int write_unigram_json(const char *path, const b8_tokenizer *ref, int roberta) {
    cJSON *root = cJSON_CreateObject();
    cJSON *added = cJSON_AddArrayToObject(root, "added_tokens");
    static const char *const sp[4] = {"<s>", "<pad>", "</s>", "<unk>"};
    for (int i = 0; i < 4; i++)
        cJSON_AddItemToArray(added, added_token(i, sp[i], 0));
    int32_t mask = b8_tokenizer_special_id(ref, B8_SPECIAL_MASK);
    cJSON_AddItemToArray(added, added_token(mask, "<mask>", 1));
    cJSON *norm = cJSON_AddObjectToObject(root, "normalizer");
    cJSON_AddStringToObject(norm, "type", "Sequence");
    cJSON *list = cJSON_AddArrayToObject(norm, "normalizers");
    cJSON *pre = cJSON_CreateObject();
    cJSON_AddStringToObject(pre, "type", "Precompiled");
    size_t blob = 4 + ref->ug.da_units * 4 + ref->ug.norm_len;
    char *b64 = base64(ref->ug.charsmap, blob);
    cJSON_AddStringToObject(pre, "precompiled_charsmap", b64);
    free(b64);
    cJSON_AddItemToArray(list, pre);
    cJSON *rep = cJSON_CreateObject();
    cJSON_AddStringToObject(rep, "type", "Replace");
    cJSON_AddStringToObject(cJSON_AddObjectToObject(rep, "pattern"), "Regex", " {2,}");
    cJSON_AddStringToObject(rep, "content", " ");
    cJSON_AddItemToArray(list, rep);
    cJSON *pt = cJSON_AddObjectToObject(root, "pre_tokenizer");
    cJSON_AddStringToObject(pt, "type", "Metaspace");
    cJSON_AddStringToObject(pt, "replacement", "\xe2\x96\x81");
    cJSON_AddBoolToObject(pt, "add_prefix_space", 1);
    cJSON *post = cJSON_AddObjectToObject(root, "post_processor");
    if (roberta) {
        cJSON_AddStringToObject(post, "type", "RobertaProcessing");
        cJSON *s = cJSON_AddArrayToObject(post, "sep"), *c = cJSON_AddArrayToObject(post, "cls");
        cJSON_AddItemToArray(s, cJSON_CreateString("</s>"));
        cJSON_AddItemToArray(s, cJSON_CreateNumber(2));
        cJSON_AddItemToArray(c, cJSON_CreateString("<s>"));
        cJSON_AddItemToArray(c, cJSON_CreateNumber(0));
    } else {
        cJSON_AddStringToObject(post, "type", "TemplateProcessing");
        cJSON *single = cJSON_AddArrayToObject(post, "single");
        cJSON_AddItemToArray(single, tmpl_item("SpecialToken", "<s>", 0));
        cJSON_AddItemToArray(single, tmpl_item("Sequence", "A", 0));
        cJSON_AddItemToArray(single, tmpl_item("SpecialToken", "</s>", 0));
        cJSON *pair = cJSON_AddArrayToObject(post, "pair");
        cJSON_AddItemToArray(pair, tmpl_item("SpecialToken", "<s>", 0));
        cJSON_AddItemToArray(pair, tmpl_item("Sequence", "A", 0));
        cJSON_AddItemToArray(pair, tmpl_item("SpecialToken", "</s>", 0));
        cJSON_AddItemToArray(pair, tmpl_item("SpecialToken", "</s>", 0));
        cJSON_AddItemToArray(pair, tmpl_item("Sequence", "B", 0));
        cJSON_AddItemToArray(pair, tmpl_item("SpecialToken", "</s>", 0));
        cJSON *st = cJSON_AddObjectToObject(post, "special_tokens");
        const char *names[2] = {"<s>", "</s>"};
        int ids[2] = {0, 2};
        for (int i = 0; i < 2; i++) {
            cJSON *o = cJSON_AddObjectToObject(st, names[i]);
            cJSON_AddStringToObject(o, "id", names[i]);
            cJSON_AddItemToObject(o, "ids", cJSON_CreateIntArray(&ids[i], 1));
            cJSON_AddItemToObject(o, "tokens", cJSON_CreateStringArray(&names[i], 1));
        }
    }
    cJSON *model = cJSON_AddObjectToObject(root, "model");
    cJSON_AddStringToObject(model, "type", "Unigram");
    cJSON_AddNumberToObject(model, "unk_id", 3);
    cJSON *vocab = cJSON_AddArrayToObject(model, "vocab");
    for (int32_t i = 0; i < b8_tokenizer_vocab_size(ref); i++) {
        cJSON *pairv = cJSON_CreateArray();
        cJSON_AddItemToArray(pairv, cJSON_CreateString(b8_tokenizer_id_to_token(ref, i, NULL)));
        cJSON_AddItemToArray(pairv, cJSON_CreateNumber((double)ref->ug.score[i]));
        cJSON_AddItemToArray(vocab, pairv);
    }
    return write_json(path, root);
}

static void unigram_case(const char *model_dir, int roberta) {
    b8_tokenizer *ref = NULL, *js = NULL;
    b8_err e = {0};
    bert8_status st = b8_tokenizer_load_dir(tu_shared_path(model_dir), NULL, &ref, &e);
    CHECKF(st == BERT8_OK, "%s", e.msg);
    if (!ref) return;
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/ug_%d", tu_tmpdir(), roberta);
    CHECK(make_dir(dir) == 0);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    CHECK(write_unigram_json(path, ref, roberta) == 0);
    st = b8_tokenizer_load_dir(dir, NULL, &js, &e);
    CHECKF(st == BERT8_OK, "%s", e.msg);
    if (js) {
        CHECK(b8_tokenizer_kind(js) == B8_TOK_UNIGRAM);
        CHECK(b8_tokenizer_vocab_size(js) == b8_tokenizer_vocab_size(ref));
        check_same(ref, js, model_dir);
    }
    b8_tokenizer_free(js);
    b8_tokenizer_free(ref);
}

TEST(tokenizer_json_unigram_template_matches_sentencepiece_model) {
    unigram_case("golden/models/xlmr_e2e", 0);
}
TEST(tokenizer_json_unigram_roberta_processing_matches_sentencepiece_model) {
    unigram_case("golden/models/xlmr_e2e", 1);
}

TEST(tokenizer_json_errors_name_the_problem) {
    char path[512];
    snprintf(path, sizeof path, "%s/bad.json", tu_tmpdir());
    b8_tokenizer *t = NULL;
    b8_err e = {0};
    CHECK(tu_write_file(path, "{\"model\": ", 10) == 0);
    CHECK(b8_tokenizer_load_files(B8_TOK_AUTO, path, NULL, &t, &e) == BERT8_ERR_FORMAT);
    CHECK(strstr(e.msg, "bad.json") != NULL && t == NULL);
    const char *bpe = "{\"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}}";
    CHECK(tu_write_file(path, bpe, strlen(bpe)) == 0);
    CHECK(b8_tokenizer_load_files(B8_TOK_AUTO, path, NULL, &t, &e) == BERT8_ERR_FORMAT);
    CHECK(strstr(e.msg, "model.vocab is empty") != NULL);
    const char *bpe_pre = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, "
                          "\"pre_tokenizer\": {\"type\": \"Whitespace\"}}";
    CHECK(tu_write_file(path, bpe_pre, strlen(bpe_pre)) == 0);
    CHECK(b8_tokenizer_load_files(B8_TOK_AUTO, path, NULL, &t, &e) == BERT8_ERR_UNSUPPORTED);
    CHECK(strstr(e.msg, "BPE (ByteLevel is)") != NULL);
    const char *nounk =
        "{\"model\": {\"type\": \"WordPiece\", \"unk_token\": \"[UNK]\", \"vocab\": "
        "{\"a\": 0}}, \"normalizer\": null, \"pre_tokenizer\": {\"type\": "
        "\"BertPreTokenizer\"}}";
    CHECK(tu_write_file(path, nounk, strlen(nounk)) == 0);
    CHECK(b8_tokenizer_load_files(B8_TOK_AUTO, path, NULL, &t, &e) == BERT8_ERR_MISSING);
    CHECK(strstr(e.msg, "[UNK]") != NULL);
}

int main(void) {
    load_corpus();
    CHECK(ntexts > 200);
    RUN(tokenizer_json_wordpiece_uncased_matches_vocab_txt);
    RUN(tokenizer_json_wordpiece_cased_bert_processing_matches_vocab_txt);
    RUN(tokenizer_json_wordpiece_custom_special_ids);
    RUN(tokenizer_json_unigram_template_matches_sentencepiece_model);
    RUN(tokenizer_json_unigram_roberta_processing_matches_sentencepiece_model);
    RUN(tokenizer_json_errors_name_the_problem);
    for (int i = 0; i < ntexts; i++)
        free(texts[i]);
    free(texts);
    free(text_lens);
    return tu_finish();
}
