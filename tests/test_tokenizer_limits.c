/* test_tokenizer_limits.c: hostile tokenizer files (issue 13). Far-away added-token ids,
 * id gaps, over-long tokens and non-integral numbers are refused quickly with a message
 * naming the problem; a FIFO under a tokenizer file name is refused instead of blocking;
 * single_word added tokens match only at word boundaries, as HF tokenizers decides it. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"
#include "base/utf8.h"
#include "tokenizer/added_index.h"
#include "tokenizer/tok_json.h"
#include "tokenizer/unicode_text.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A WordPiece tokenizer.json around the given added_tokens array and extra top-level text. */
static const char *wp_json(const char *added, const char *extra) {
    static char buf[8192];
    snprintf(buf, sizeof buf,
             "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":%s,"
             "\"normalizer\":{\"type\":\"BertNormalizer\",\"clean_text\":true,"
             "\"handle_chinese_chars\":true,\"strip_accents\":false,\"lowercase\":false},"
             "\"pre_tokenizer\":{\"type\":\"BertPreTokenizer\"},\"post_processor\":null,"
             "\"decoder\":null,\"model\":{\"type\":\"WordPiece\",\"unk_token\":\"[UNK]\","
             "\"continuing_subword_prefix\":\"##\",\"max_input_chars_per_word\":100,"
             "\"vocab\":{\"[UNK]\":0,\"hello\":1,\"world\":2,\"o\":3,\"w\":4,\"h\":5,\"##ell\":6,"
             "\"##o\":7,\"##orld\":8,\"a\":9,\"x\":10,\"b\":11,\"##b\":12}}%s}",
             added, extra ? extra : "");
    return buf;
}

/* Loads text as a tokenizer.json; returns the status, *out the tokenizer (or NULL). */
static bert8_status load_json(const char *text, b8_tokenizer **out, b8_err *e) {
    char path[512];
    snprintf(path, sizeof path, "%s/tokenizer.json", tu_tmpdir());
    CHECK(tu_write_file(path, text, strlen(text)) == 0);
    b8_err_clear(e);
    *out = NULL;
    return b8_tokenizer_load_files(B8_TOK_AUTO, path, NULL, out, e);
}

static void expect_refused(const char *text, bert8_status want, const char *n1, const char *n2) {
    b8_tokenizer *t = NULL;
    b8_err e;
    double t0 = now_s();
    bert8_status st = load_json(text, &t, &e);
    double dt = now_s() - t0;
    CHECKF(st == want, "status %s, wanted %s (%s)", bert8_status_string(st),
           bert8_status_string(want), e.msg);
    CHECK(t == NULL);
    CHECKF(!n1 || strstr(e.msg, n1), "message \"%s\" lacks \"%s\"", e.msg, n1);
    CHECKF(!n2 || strstr(e.msg, n2), "message \"%s\" lacks \"%s\"", e.msg, n2);
    /* decided before allocating: far below a second even under the sanitizers */
    CHECKF(dt < 0.5, "took %.3f s", dt);
    b8_tokenizer_free(t);
}

TEST(added_token_id_far_past_vocabulary_is_refused_fast) {
    expect_refused(wp_json("[{\"id\":1000000,\"content\":\"far\",\"special\":true}]", NULL),
                   BERT8_ERR_TOO_LARGE, "\"far\"", "1000000");
    expect_refused(wp_json("[{\"id\":2147483000,\"content\":\"farther\",\"special\":true}]", NULL),
                   BERT8_ERR_TOO_LARGE, "2147483000", "13 tokens");
    /* past the largest id a JSON number may name at all */
    expect_refused(wp_json("[{\"id\":1e300,\"content\":\"x\"}]", NULL), BERT8_ERR_FORMAT,
                   "added_tokens", NULL);
    expect_refused(wp_json("[{\"id\":-1,\"content\":\"x\"}]", NULL), BERT8_ERR_FORMAT,
                   "added_tokens", NULL);
    expect_refused(wp_json("[{\"id\":13.5,\"content\":\"x\"}]", NULL), BERT8_ERR_FORMAT,
                   "added_tokens", NULL);
}

TEST(added_token_id_a_little_past_vocabulary_pads_in_one_step) {
    b8_tokenizer *t = NULL;
    b8_err e;
    CHECK(load_json(wp_json("[{\"id\":40000,\"content\":\"[NEW]\",\"special\":true}]", NULL), &t,
                    &e) == BERT8_OK);
    if (!t) return;
    CHECK(b8_tokenizer_vocab_size(t) == 40001);
    size_t len = 99;
    const char *s = b8_tokenizer_id_to_token(t, 20000, &len);
    CHECK(s != NULL && len == 0); /* an unused id maps to "" */
    CHECK(b8_tokenizer_token_to_id(t, "[NEW]", 5) == 40000);
    b8_tok_pieces p = {0};
    CHECK(b8_tokenizer_tokenize(t, "hello[NEW]world", 15, &p, &e) == BERT8_OK);
    CHECK(p.n == 3 && p.ids[0] == 1 && p.ids[1] == 40000 && p.ids[2] == 2);
    b8_tok_pieces_free(&p);
    b8_tokenizer_free(t);
}

/* Found by fuzz_tokenizer_json: the second entry of a token re-numbered it past the vocabulary
 * without growing it, so encoding produced an id >= vocab_size (and a Unigram model wrote its
 * piece type past the table). */
TEST(added_token_given_twice_with_a_new_id_grows_the_vocabulary) {
    b8_tokenizer *t = NULL;
    b8_err e;
    CHECK(load_json(wp_json("[{\"id\":1,\"content\":\"<new>\"},{\"id\":88,\"content\":"
                            "\"<new>\"}]",
                            NULL),
                    &t, &e) == BERT8_OK);
    if (t) {
        CHECK(b8_tokenizer_vocab_size(t) == 89);
        CHECK(b8_tokenizer_token_to_id(t, "<new>", 5) == 88);
        b8_tok_pieces p = {0};
        CHECK(b8_tokenizer_tokenize(t, "a<new>", 6, &p, &e) == BERT8_OK);
        CHECK(p.n == 2 && p.ids[1] == 88);
        b8_tok_pieces_free(&p);
        b8_tokenizer_free(t);
    }
    const char *ug = "{\"model\":{\"type\":\"Unigram\",\"unk_id\":0,\"vocab\":[[\"<unk>\",0],"
                     "[\"\xe2\x96\x81" "a\",-1]]},\"pre_tokenizer\":{\"type\":\"Metaspace\"},"
                     "\"added_tokens\":[{\"id\":1,\"content\":\"<x>\",\"special\":true},{\"id\":"
                     "70,\"content\":\"<x>\",\"special\":true}]}";
    CHECK(load_json(ug, &t, &e) == BERT8_OK);
    if (t) {
        CHECK(b8_tokenizer_vocab_size(t) == 71 && b8_tokenizer_token_to_id(t, "<x>", 3) == 70);
        b8_tokenizer_free(t);
    }
}

TEST(vocab_id_gap_and_huge_ids_are_refused_before_allocating) {
    const char *gap =
        "{\"model\":{\"type\":\"WordPiece\",\"unk_token\":\"[UNK]\",\"vocab\":{\"[UNK]\":0,"
        "\"a\":2000000000}},\"normalizer\":null,\"pre_tokenizer\":{\"type\":"
        "\"BertPreTokenizer\"}}";
    expect_refused(gap, BERT8_ERR_TOO_LARGE, "2000000000", "limit");
    const char *gap2 =
        "{\"model\":{\"type\":\"WordPiece\",\"unk_token\":\"[UNK]\",\"vocab\":{\"[UNK]\":0,"
        "\"a\":9000000}},\"normalizer\":null,\"pre_tokenizer\":{\"type\":"
        "\"BertPreTokenizer\"}}";
    expect_refused(gap2, BERT8_ERR_TOO_LARGE, "unused ids", "9000000");
}

TEST(over_long_tokens_are_refused) {
    char *big = malloc(3000);
    memset(big, 'z', 2000);
    big[2000] = 0;
    char *added = malloc(4000);
    snprintf(added, 4000, "[{\"id\":13,\"content\":\"%s\"}]", big);
    expect_refused(wp_json(added, NULL), BERT8_ERR_TOO_LARGE, "2000 bytes", "limit");
    /* the same through a vocab.txt line */
    char path[512];
    snprintf(path, sizeof path, "%s/long_vocab.txt", tu_tmpdir());
    char *vocab = malloc(2100);
    snprintf(vocab, 2100, "[UNK]\n%s\n", big);
    CHECK(tu_write_file(path, vocab, strlen(vocab)) == 0);
    b8_tokenizer *t = NULL;
    b8_err e = {0};
    CHECK(b8_tokenizer_load_files(B8_TOK_WORDPIECE, path, NULL, &t, &e) == BERT8_ERR_TOO_LARGE);
    CHECK(t == NULL && strstr(e.msg, "long_vocab.txt") && strstr(e.msg, "token 1"));
    free(vocab);
    free(added);
    free(big);
}

/* wp_json("[]") with one top-level "key":null replaced by "key":value. */
static const char *wp_json_with(const char *key, const char *value) {
    static char out[8192];
    const char *base = wp_json("[]", NULL);
    char from[64];
    snprintf(from, sizeof from, "\"%s\":null", key);
    const char *at = strstr(base, from);
    CHECK(at != NULL);
    if (!at) return base;
    snprintf(out, sizeof out, "%.*s\"%s\":%s%s", (int)(at - base), base, key, value,
             at + strlen(from));
    return out;
}

TEST(non_integral_and_out_of_range_numbers_are_refused) {
    expect_refused(wp_json_with("padding", "{\"pad_id\":1e300}"), BERT8_ERR_FORMAT, "pad_id",
                   NULL);
    expect_refused(wp_json_with("padding", "{\"pad_id\":0.5}"), BERT8_ERR_FORMAT, "pad_id", NULL);
    expect_refused(wp_json_with("padding", "{\"pad_id\":13}"), BERT8_ERR_FORMAT, "pad_id", NULL);
    char tmpl[2048];
    const char *fmt = "{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":"
                      "\"[UNK]\",\"type_id\":%s}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],"
                      "\"pair\":[{\"Sequence\":{\"id\":\"A\",\"type_id\":0}},{\"Sequence\":{"
                      "\"id\":\"B\",\"type_id\":1}}],\"special_tokens\":{\"[UNK]\":{\"id\":"
                      "\"[UNK]\",\"ids\":[%s],\"tokens\":[\"[UNK]\"]}}}";
    snprintf(tmpl, sizeof tmpl, fmt, "0", "1e300");
    expect_refused(wp_json_with("post_processor", tmpl), BERT8_ERR_FORMAT, "[UNK]", "no id");
    snprintf(tmpl, sizeof tmpl, fmt, "0", "-3");
    expect_refused(wp_json_with("post_processor", tmpl), BERT8_ERR_FORMAT, "[UNK]", "no id");
    snprintf(tmpl, sizeof tmpl, fmt, "1e300", "0");
    expect_refused(wp_json_with("post_processor", tmpl), BERT8_ERR_FORMAT, "type_id", NULL);
    snprintf(tmpl, sizeof tmpl, fmt, "0", "0");
    b8_tokenizer *t = NULL;
    b8_err e;
    CHECK(load_json(wp_json_with("post_processor", tmpl), &t, &e) == BERT8_OK);
    b8_tokenizer_free(t);
    const char *bert = "{\"type\":\"BertProcessing\",\"sep\":[\"[UNK]\",1e300],\"cls\":[\"[UNK]\",0]}";
    expect_refused(wp_json_with("post_processor", bert), BERT8_ERR_FORMAT, "cls/sep", NULL);
}

/* Ids from HF tokenizers 0.23 (AddedToken(..., single_word=True, normalized=False)) on this
 * very tokenizer.json. */
TEST(single_word_added_tokens_match_only_at_word_boundaries) {
    b8_tokenizer *t = NULL;
    b8_err e;
    const char *added = "[{\"id\":13,\"content\":\"o w\",\"single_word\":true,\"lstrip\":false,"
                        "\"rstrip\":false,\"normalized\":false,\"special\":false},"
                        "{\"id\":14,\"content\":\"ab\",\"single_word\":true,\"lstrip\":false,"
                        "\"rstrip\":false,\"normalized\":false,\"special\":false},"
                        "{\"id\":15,\"content\":\"xab\",\"single_word\":true,\"lstrip\":false,"
                        "\"rstrip\":false,\"normalized\":false,\"special\":false}]";
    CHECK(load_json(wp_json(added, NULL), &t, &e) == BERT8_OK);
    if (!t) return;
    static const struct {
        const char *text;
        int n;
        int32_t ids[4];
    } cases[] = {
        {"hello world", 2, {1, 2}},
        {"x o w x", 3, {10, 13, 10}},
        {"hello,o w.", 4, {1, 0, 13, 0}},
        {"o wx", 2, {3, 0}},
        {"_o w", 3, {0, 3, 4}},
        {"ab", 1, {14}},
        {"ab!", 2, {14, 0}},
        {"ab_", 3, {9, 12, 0}},
        {"1xab", 1, {0}},
        {"xab", 1, {15}},
        {" ab ", 1, {14}},
        {"h\xc3\xa9" "ab", 1, {0}},
        {"ab\xcc\x81", 1, {0}},             /* U+0301, a mark, is a word character */
        {"a\xe2\x80\x8d" "ab", 1, {0}},     /* U+200D joins words */
        {"\xe2\x93\x90" "ab", 1, {0}},      /* circled a: Other_Alphabetic */
        {"\xc2\xbd" "ab\xc2\xbd", 3, {0, 14, 0}}, /* one half: a number, not \w */
        {"\xe6\x97\xa5" "ab\xe6\x97\xa5", 4, {0, 9, 12, 0}},
    };
    b8_tok_pieces p = {0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK(b8_tokenizer_tokenize(t, cases[i].text, strlen(cases[i].text), &p, &e) == BERT8_OK);
        bool same = p.n == cases[i].n;
        for (int k = 0; same && k < cases[i].n; k++)
            same = p.ids[k] == cases[i].ids[k];
        CHECKF(same, "\"%s\": %lld tokens, first id %d", cases[i].text, (long long)p.n,
               p.n ? p.ids[0] : -1);
    }
    /* offsets of the accepted matches are the token's bytes */
    CHECK(b8_tokenizer_tokenize(t, "x o w x", 7, &p, &e) == BERT8_OK);
    CHECK(p.n == 3 && p.offsets[2] == 2 && p.offsets[3] == 5);
    b8_tok_pieces_free(&p);
    b8_tokenizer_free(t);
}

TEST(fifo_under_a_tokenizer_file_name_is_refused_not_waited_on) {
    alarm(30); /* a regression would block in open(); fail instead of hanging the suite */
    static const char *const names[] = {"tokenizer.json", "vocab.txt", "sentencepiece.bpe.model",
                                        "tokenizer_config.json"};
    for (int i = 0; i < 4; i++) {
        char dir[512], path[600];
        snprintf(dir, sizeof dir, "%s/fifo%d", tu_tmpdir(), i);
        mkdir(dir, 0755);
        if (i == 3) { /* a real vocabulary beside a FIFO config */
            snprintf(path, sizeof path, "%s/vocab.txt", dir);
            CHECK(tu_write_file(path, "[UNK]\n[CLS]\n[SEP]\n[PAD]\n[MASK]\na\n", 32) == 0);
        }
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        CHECK(mkfifo(path, 0644) == 0);
        b8_tokenizer *t = NULL;
        b8_err e = {0};
        bert8_status st = b8_tokenizer_load_dir(dir, NULL, &t, &e);
        CHECKF(st == BERT8_ERR_IO, "%s: %s (%s)", names[i], bert8_status_string(st), e.msg);
        CHECKF(strstr(e.msg, names[i]) && strstr(e.msg, "FIFO"), "%s", e.msg);
        CHECK(t == NULL);
    }
    alarm(0);
}

TEST(read_file_refuses_non_regular_files_and_files_over_the_limit) {
    b8_err e = {0};
    size_t n = 0;
    CHECK(b8_read_file(tu_tmpdir(), &n, &e) == NULL);
    CHECK(e.status == BERT8_ERR_IO && strstr(e.msg, "a folder"));
    char path[512];
    snprintf(path, sizeof path, "%s/ten.txt", tu_tmpdir());
    CHECK(tu_write_file(path, "0123456789", 10) == 0);
    CHECK(b8_read_file_max(path, 9, &n, &e) == NULL);
    CHECK(e.status == BERT8_ERR_TOO_LARGE && strstr(e.msg, "ten.txt") && strstr(e.msg, "9-byte"));
    char *s = b8_read_file_max(path, 10, &n, &e);
    CHECK(s && n == 10 && s[10] == 0 && !memcmp(s, "0123456789", 10));
    free(s);
}

/* Found by fuzz_spm: a model with one piece overflowed the fairseq id table. */
TEST(sentencepiece_model_with_too_few_pieces_is_refused) {
    /* ModelProto { pieces: {piece: "<unk>", score: 0, type: UNKNOWN} [, {piece: "<s>"...}] } */
    static const unsigned char one[] = {0x0a, 0x09, 0x0a, 0x05, '<', 'u', 'n', 'k', '>', 0x18, 0x02};
    static const unsigned char two[] = {0x0a, 0x09, 0x0a, 0x05, '<', 'u', 'n', 'k', '>', 0x18, 0x02,
                                        0x0a, 0x07, 0x0a, 0x03, '<', 's', '>', 0x18, 0x03};
    const unsigned char *models[2] = {one, two};
    size_t sizes[2] = {sizeof one, sizeof two};
    for (int i = 0; i < 2; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/few%d.model", tu_tmpdir(), i);
        CHECK(tu_write_file(path, models[i], sizes[i]) == 0);
        b8_tokenizer *t = NULL;
        b8_err e = {0};
        CHECK(b8_tokenizer_load_files(B8_TOK_UNIGRAM, path, NULL, &t, &e) == BERT8_ERR_FORMAT);
        CHECKF(t == NULL && strstr(e.msg, "at least"), "%s", e.msg);
    }
}

TEST(encode_output_over_the_limit_is_refused_before_allocating) {
    b8_tokenizer *t = NULL;
    b8_err e;
    CHECK(load_json(wp_json_with("padding", "{\"pad_id\":0}"), &t, &e) == BERT8_OK);
    if (!t) return;
    b8_encoding enc = {0};
    b8_encode_params p = b8_default_encode_params();
    p.padding = B8_PAD_MAX_LENGTH;
    p.max_length = INT32_MAX; /* 2^31 slots: 80 GB of output arrays */
    double t0 = now_s();
    CHECK(b8_tokenizer_encode(t, "hello", 5, NULL, 0, &p, &enc, &e) == BERT8_ERR_TOO_LARGE);
    CHECKF(strstr(e.msg, "limit") && now_s() - t0 < 0.5, "%s", e.msg);
    p.max_length = 1000; /* within the limit: works */
    CHECK(b8_tokenizer_encode(t, "hello", 5, NULL, 0, &p, &enc, &e) == BERT8_OK);
    CHECKF(enc.rows == 1 && enc.seq == 1000, "%lld x %lld", (long long)enc.rows, (long long)enc.seq);
    b8_encoding_free(&enc);
    b8_tokenizer_free(t);
}

/* ---- Many added tokens (issue 41) ----------------------------------------------------------- */

/* Process CPU time: what the bound below is about, whatever else the machine runs. */
static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* tests/data/bpe/tokenizer.json with n added tokens "tok00000"... (ids from vocab up; every
 * other one normalized) put first in its added_tokens list. */
static char *bpe_with_added(int64_t vocab, int n) {
    char *json = tu_read_file("tests/data/bpe/tokenizer.json", NULL);
    const char *at = json ? strstr(json, "\"added_tokens\"") : NULL;
    const char *open = at ? strchr(at, '[') : NULL;
    if (!open) {
        free(json);
        return NULL;
    }
    const size_t head = (size_t)(open + 1 - json), per = 160;
    char *out = malloc(strlen(json) + (size_t)n * per + 2);
    memcpy(out, json, head);
    size_t k = head;
    for (int i = 0; i < n; i++)
        k += (size_t)snprintf(out + k, per,
                              "{\"id\":%lld,\"content\":\"tok%05d\",\"single_word\":false,\"lstrip\":false,"
                              "\"rstrip\":false,\"normalized\":%s,\"special\":false},",
                              (long long)(vocab + i), i, i % 2 ? "true" : "false");
    strcpy(out + k, open + 1); /* the list had entries: the comma stays before them */
    free(json);
    return out;
}

TEST(fifty_thousand_added_tokens_load_and_encode_within_a_bound) {
    b8_err e;
    b8_err_clear(&e);
    b8_tokenizer *plain = NULL;
    if (b8_tokenizer_load_files(B8_TOK_AUTO, "tests/data/bpe/tokenizer.json", NULL, &plain, &e) != BERT8_OK)
        TU_SKIP("no tests/data/bpe/tokenizer.json");
    const int64_t vocab = b8_tokenizer_vocab_size(plain);
    b8_tokenizer_free(plain);
    const int n = 50000;
    char *json = bpe_with_added(vocab, n);
    CHECK(json != NULL);
    if (!json) return;
    /* two lines as an embedding request sends them, long enough that a scan of every token at
     * each of their 't's would show */
    char line[2][4096];
    size_t ll[2] = {0, 0};
    for (int r = 0; r < 60; r++) {
        ll[0] += (size_t)snprintf(line[0] + ll[0], sizeof line[0] - ll[0], "the tok%05d tot ", (r * 811) % n);
        ll[1] += (size_t)snprintf(line[1] + ll[1], sizeof line[1] - ll[1], "tok%05dx tiny ", (r * 409 + 1) % n);
    }
    b8_tokenizer *t = NULL;
    b8_encoding enc = {0};
    b8_encode_params ep = b8_default_encode_params();
    const double c0 = cpu_s();
    CHECKF(b8_tokjson_parse(json, strlen(json), "tokenizer.json", NULL, &t, &e) == BERT8_OK, "%s", e.msg);
    for (int k = 0; t && k < 2; k++)
        CHECKF(b8_tokenizer_encode(t, line[k], ll[k], NULL, 0, &ep, &enc, &e) == BERT8_OK, "%s", e.msg);
    const double dt = cpu_s() - c0;
    /* about 0.15 s in a release build on one core, under 1 s with the sanitizers; it took
     * 19 s when every load step and every match scanned all the tokens */
    CHECKF(dt < 4.0, "load + encode of %d added tokens took %.2f s of CPU", n, dt);
    printf("  %d added tokens: load + encode %.3f s cpu\n", n, dt);
    if (t) {
        /* the last line's tokens: <s>, then its first added token */
        CHECK(enc.lengths[0] > 100);
        CHECK(enc.input_ids[1] == (int32_t)(vocab + 1)); /* "tok00001x": the token, then x */
        CHECK(b8_tokenizer_token_to_id(t, "tok49999", 8) == (int32_t)(vocab + 49999));
    }
    b8_encoding_free(&enc);
    b8_tokenizer_free(t);
    free(json);
}

/* What the matcher replaced: the first token of t->added (longest first) that the text at s
 * starts with, else the first fold token that the text lower-cases to. */
static size_t lowered_len(const uint8_t *s, size_t n, const char *tok, size_t tl) {
    size_t i = 0, j = 0;
    while (j < tl) {
        if (i >= n) return 0;
        uint32_t cp, lc[2];
        int l = b8_utf8_next(s + i, &cp);
        int k = b8_uni_lower(cp, lc);
        for (int m = 0; m < k; m++) {
            uint8_t buf[4];
            int bl = b8_utf8_put(lc[m], buf);
            if (j + (size_t)bl > tl || memcmp(tok + j, buf, (size_t)bl)) return 0;
            j += (size_t)bl;
        }
        i += (size_t)l;
    }
    return i;
}

static const b8_added_token *scan_match(const b8_tokenizer *t, const uint8_t *s, size_t n, size_t *mlen) {
    for (int i = 0; i < t->n_added; i++)
        if (t->added[i].len <= n && !memcmp(t->added[i].content, s, t->added[i].len)) {
            *mlen = t->added[i].len;
            return &t->added[i];
        }
    for (int i = 0; i < t->n_added; i++) {
        size_t m = t->added[i].fold ? lowered_len(s, n, t->added[i].content, t->added[i].len) : 0;
        if (m) {
            *mlen = m;
            return &t->added[i];
        }
    }
    return NULL;
}

TEST(added_token_trie_finds_what_a_scan_of_every_token_finds) {
    /* a lower-casing WordPiece tokenizer whose added tokens share prefixes, some of them
     * their own lower case (fold: they match any case), from an alphabet where lower-casing
     * changes lengths (U+0130 -> i U+0307) */
    static const char *const alpha[] = {"a", "b", "A", "B", "<", "\xc4\xb0", "i", "\xcc\x87"};
    unsigned seed = 41;
    char added[6144];
    size_t k = (size_t)snprintf(added, sizeof added, "[");
    for (int i = 0; i < 100; i++) {
        char tok[64] = "";
        const int len = 1 + (int)((seed = seed * 1103515245u + 12345u) >> 16) % 5;
        for (int c = 0; c < len; c++)
            strcat(tok, alpha[((seed = seed * 1103515245u + 12345u) >> 16) % 8]);
        k += (size_t)snprintf(added + k, sizeof added - k, "%s{\"id\":%d,\"content\":\"%s\",\"special\":%s}",
                              i ? "," : "", 13 + i, tok, i % 3 ? "false" : "true");
    }
    snprintf(added + k, sizeof added - k, "]");
    char *json = strdup(wp_json(added, NULL));
    char *lower = strstr(json, "\"lowercase\":false");
    memcpy(lower, "\"lowercase\":true ", 17);
    b8_tokenizer *t = NULL;
    b8_err e;
    b8_err_clear(&e);
    CHECKF(b8_tokjson_parse(json, strlen(json), "tokenizer.json", NULL, &t, &e) == BERT8_OK, "%s", e.msg);
    free(json);
    if (!t) return;
    int folds = 0, found = 0;
    for (int i = 0; i < t->n_added; i++)
        folds += t->added[i].fold;
    CHECK(folds > 10 && folds < t->n_added);
    for (int r = 0; r < 3000; r++) {
        char text[128] = "";
        const int len = 1 + (int)((seed = seed * 1103515245u + 12345u) >> 16) % 12;
        for (int c = 0; c < len; c++)
            strcat(text, alpha[((seed = seed * 1103515245u + 12345u) >> 16) % 8]);
        size_t n = strlen(text), m1 = 0, m2 = 0;
        const b8_added_token *a = b8_added_match(t, 0, (const uint8_t *)text, n, &m1);
        const b8_added_token *b = scan_match(t, (const uint8_t *)text, n, &m2);
        CHECKF(a == b && m1 == m2, "\"%s\": trie %s (%zu bytes), scan %s (%zu bytes)", text, a ? a->content : "none",
               m1, b ? b->content : "none", m2);
        found += b != NULL;
        if (a != b) break;
    }
    CHECK(found > 1000); /* the texts do hit tokens */
    b8_tokenizer_free(t);
}

int main(void) {
    RUN(added_token_id_far_past_vocabulary_is_refused_fast);
    RUN(added_token_id_a_little_past_vocabulary_pads_in_one_step);
    RUN(added_token_given_twice_with_a_new_id_grows_the_vocabulary);
    RUN(vocab_id_gap_and_huge_ids_are_refused_before_allocating);
    RUN(over_long_tokens_are_refused);
    RUN(non_integral_and_out_of_range_numbers_are_refused);
    RUN(single_word_added_tokens_match_only_at_word_boundaries);
    RUN(fifo_under_a_tokenizer_file_name_is_refused_not_waited_on);
    RUN(read_file_refuses_non_regular_files_and_files_over_the_limit);
    RUN(sentencepiece_model_with_too_few_pieces_is_refused);
    RUN(encode_output_over_the_limit_is_refused_before_allocating);
    RUN(fifty_thousand_added_tokens_load_and_encode_within_a_bound);
    RUN(added_token_trie_finds_what_a_scan_of_every_token_finds);
    return tu_finish();
}
