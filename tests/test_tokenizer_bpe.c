/* test_tokenizer_bpe.c: the byte-level BPE tokenizer against `tokenizers`. Every record of
 * tests/data/bpe/golden.jsonl (scripts/train_bpe_tokenizer.py's tokenizer on the hostile-text
 * corpus, singles and pairs) must give the reference's tokens, ids, type ids, attention mask,
 * byte offsets, word ids and decoded text; malformed tokenizer.json files are refused with a
 * message naming what is wrong. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tokenizer/tok_json.h"

#define BPE_JSON "tests/data/bpe/tokenizer.json"
#define BPE_GOLDEN "tests/data/bpe/golden.jsonl"

/* Hex string -> bytes (malloc'd, NUL-terminated); *n gets the length. */
static char *unhex(const char *h, size_t *n) {
    size_t l = h ? strlen(h) / 2 : 0;
    char *out = malloc(l + 1);
    for (size_t i = 0; i < l; i++) {
        unsigned v = 0;
        sscanf(h + 2 * i, "%2x", &v);
        out[i] = (char)v;
    }
    out[l] = 0;
    *n = l;
    return out;
}

static b8_tokenizer *load_bpe(void) {
    b8_tokenizer *t = NULL;
    b8_err e = {0};
    bert8_status st = b8_tokenizer_load_files(B8_TOK_AUTO, BPE_JSON, NULL, &t, &e);
    CHECKF(st == BERT8_OK, "%s", e.msg);
    if (t) CHECK(b8_tokenizer_kind(t) == B8_TOK_BPE);
    return t;
}

static int same_tokens(const cJSON *want, const b8_tok_pieces *got, const char *id) {
    int n = cJSON_GetArraySize(want);
    if (n != got->n) {
        printf("  %s: %d tokens expected, %lld produced\n", id, n, (long long)got->n);
        return 0;
    }
    int i = 0;
    for (const cJSON *it = want->child; it; it = it->next, i++) {
        size_t wl = 0;
        char *w = unhex(it->valuestring, &wl);
        const char *g = got->strings + got->str_off[i];
        size_t gl = (size_t)(got->str_off[i + 1] - got->str_off[i] - 1);
        int ok = wl == gl && !memcmp(w, g, gl);
        if (!ok) printf("  %s: token %d is \"%s\", expected \"%s\"\n", id, i, g, w);
        free(w);
        if (!ok) return 0;
    }
    return 1;
}

static int same_ints(const cJSON *want, const int32_t *got, int64_t n, const char *what,
                     const char *id) {
    if (cJSON_GetArraySize(want) != n) {
        printf("  %s: %s has %d entries expected, %lld produced\n", id, what,
               cJSON_GetArraySize(want), (long long)n);
        return 0;
    }
    int i = 0;
    for (const cJSON *it = want->child; it; it = it->next, i++)
        if (it->valueint != got[i]) {
            printf("  %s: %s[%d] is %d, expected %d\n", id, what, i, got[i], it->valueint);
            return 0;
        }
    return 1;
}

static int same_offsets(const cJSON *want, const int64_t *got, int64_t n, const char *id) {
    if (cJSON_GetArraySize(want) != n) return 0;
    int i = 0;
    for (const cJSON *it = want->child; it; it = it->next, i++) {
        int a = cJSON_GetArrayItem(it, 0)->valueint, b = cJSON_GetArrayItem(it, 1)->valueint;
        if (got[2 * i] != a || got[2 * i + 1] != b) {
            printf("  %s: offsets[%d] is (%lld, %lld), expected (%d, %d)\n", id, i,
                   (long long)got[2 * i], (long long)got[2 * i + 1], a, b);
            return 0;
        }
    }
    return 1;
}

static int same_decode(const b8_tokenizer *t, const b8_encoding *enc, bool skip, const char *hex,
                       const char *id) {
    char *got = NULL;
    b8_err e = {0};
    if (b8_tokenizer_decode(t, enc->input_ids, enc->seq, skip, &got, &e) != BERT8_OK) {
        printf("  %s: decode failed: %s\n", id, e.msg);
        return 0;
    }
    size_t wl = 0;
    char *w = unhex(hex, &wl);
    wl = strlen(w); /* the decoded text is NUL-terminated: a NUL in it ends it */
    int ok = strlen(got) == wl && !memcmp(got, w, wl);
    if (!ok) printf("  %s: decode%s gives \"%s\", expected \"%s\"\n", id, skip ? "(skip)" : "", got, w);
    free(w);
    free(got);
    return ok;
}

static int check_record(const b8_tokenizer *t, const cJSON *r, b8_tok_pieces *pieces,
                        b8_encoding *enc) {
    const char *id = cJSON_GetObjectItem(r, "id")->valuestring;
    const cJSON *jp = cJSON_GetObjectItem(r, "text_pair");
    size_t la = 0, lb = 0;
    char *a = unhex(cJSON_GetObjectItem(r, "text")->valuestring, &la);
    char *b = jp ? unhex(jp->valuestring, &lb) : NULL;
    b8_err e = {0};
    b8_encode_params ep = b8_default_encode_params();
    int ok = 1;
    if (b8_tokenizer_tokenize(t, a, la, pieces, &e) != BERT8_OK) {
        printf("  %s: tokenize failed: %s\n", id, e.msg);
        ok = 0;
    }
    if (ok) ok = same_tokens(cJSON_GetObjectItem(r, "tokens"), pieces, id);
    if (ok && b) {
        ok = b8_tokenizer_tokenize(t, b, lb, pieces, &e) == BERT8_OK &&
             same_tokens(cJSON_GetObjectItem(r, "tokens_pair"), pieces, id);
    }
    if (ok && b8_tokenizer_encode(t, a, la, b, lb, &ep, enc, &e) != BERT8_OK) {
        printf("  %s: encode failed: %s\n", id, e.msg);
        ok = 0;
    }
    if (ok) ok = enc->rows == 1 && enc->lengths[0] == enc->seq;
    if (ok) ok = same_ints(cJSON_GetObjectItem(r, "input_ids"), enc->input_ids, enc->seq, "input_ids", id);
    if (ok) ok = same_ints(cJSON_GetObjectItem(r, "type_ids"), enc->token_type_ids, enc->seq, "type_ids", id);
    if (ok)
        ok = same_ints(cJSON_GetObjectItem(r, "attention_mask"), enc->attention_mask, enc->seq,
                       "attention_mask", id);
    if (ok) ok = same_ints(cJSON_GetObjectItem(r, "word_ids"), enc->word_ids, enc->seq, "word_ids", id);
    if (ok) ok = same_offsets(cJSON_GetObjectItem(r, "offsets"), enc->offsets, enc->seq, id);
    if (ok) ok = same_decode(t, enc, false, cJSON_GetObjectItem(r, "decode")->valuestring, id);
    if (ok) ok = same_decode(t, enc, true, cJSON_GetObjectItem(r, "decode_skip")->valuestring, id);
    free(a);
    free(b);
    return ok;
}

TEST(bpe_matches_tokenizers_on_hostile_corpus) {
    b8_tokenizer *t = load_bpe();
    if (!t) return;
    char *text = tu_read_file(BPE_GOLDEN, NULL);
    CHECK(text != NULL);
    b8_tok_pieces pieces = {0};
    b8_encoding enc = {0};
    int records = 0, passed = 0, pairs = 0;
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        cJSON *r = cJSON_Parse(line);
        line = nl ? nl + 1 : NULL;
        if (!r) continue;
        records++;
        pairs += cJSON_GetObjectItem(r, "text_pair") != NULL;
        passed += check_record(t, r, &pieces, &enc);
        cJSON_Delete(r);
    }
    printf("  %d/%d records identical (%d pairs)\n", passed, records, pairs);
    CHECK(records >= 270 && pairs >= 25);
    CHECK(passed == records);
    b8_tok_pieces_free(&pieces);
    b8_encoding_free(&enc);
    free(text);
    b8_tokenizer_free(t);
}

TEST(bpe_specials_and_roles) {
    b8_tokenizer *t = load_bpe();
    if (!t) return;
    CHECK(b8_tokenizer_special_id(t, B8_SPECIAL_CLS) == 0);
    CHECK(b8_tokenizer_special_id(t, B8_SPECIAL_PAD) == 1);
    CHECK(b8_tokenizer_special_id(t, B8_SPECIAL_SEP) == 2);
    CHECK(b8_tokenizer_special_id(t, B8_SPECIAL_UNK) == 3);
    CHECK(b8_tokenizer_special_id(t, B8_SPECIAL_MASK) == 4);
    CHECK(b8_tokenizer_num_special_tokens(t, 0) == 2);
    CHECK(b8_tokenizer_num_special_tokens(t, 1) == 4);
    b8_tokenizer_free(t);
}

TEST(bpe_refuses_invalid_utf8) {
    b8_tokenizer *t = load_bpe();
    if (!t) return;
    b8_encoding enc = {0};
    b8_err e = {0};
    const char bad[] = "ok \xC3\x28 no";
    bert8_status st = b8_tokenizer_encode(t, bad, sizeof bad - 1, NULL, 0, NULL, &enc, &e);
    CHECK(st == BERT8_ERR_ENCODING);
    CHECKF(strstr(e.msg, "byte offset 3") != NULL, "%s", e.msg);
    b8_encoding_free(&enc);
    b8_tokenizer_free(t);
}

TEST(bpe_pairs_truncate_and_pad) {
    b8_tokenizer *t = load_bpe();
    if (!t) return;
    const char *texts[2] = {"a fairly long first sentence about the movie", "short"};
    const char *pairs[2] = {"and a second one that is also long enough", "pair"};
    b8_encode_params p = b8_default_encode_params();
    p.truncation = B8_TRUNC_LONGEST_FIRST;
    p.max_length = 12;
    b8_encoding enc = {0};
    b8_err e = {0};
    bert8_status st = b8_tokenizer_encode_batch(t, 2, texts, NULL, pairs, NULL, &p, &enc, &e);
    CHECKF(st == BERT8_OK, "%s", e.msg);
    if (st == BERT8_OK) {
        CHECK(enc.rows == 2 && enc.seq == 12);
        int64_t l1 = enc.lengths[1];
        CHECK(enc.lengths[0] == 12 && l1 >= 6 && l1 < 12);
        CHECK(enc.input_ids[0] == 0 && enc.input_ids[11] == 2);
        /* <s> short </s></s> pair </s> <pad>... */
        CHECK(enc.input_ids[12] == 0 && enc.input_ids[12 + l1 - 1] == 2);
        CHECK(enc.input_ids[12 + l1] == 1 && enc.attention_mask[12 + l1] == 0);
        /* longest_first: the two sequences keep 4 tokens each (12 - 4 specials) */
        int sep = 0;
        for (int k = 1; k < 12; k++)
            if (enc.input_ids[k] == 2 && !sep) sep = k;
        CHECK(sep == 5 && enc.input_ids[6] == 2);
    }
    b8_encoding_free(&enc);
    b8_tokenizer_free(t);
}

/* A tiny BPE file with the given merges (JSON text) and extra model fields. */
static bert8_status tiny(const char *merges, const char *extra, b8_tokenizer **t, b8_err *e) {
    char json[2048];
    snprintf(json, sizeof json,
             "{\"added_tokens\":[],\"normalizer\":null,"
             "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true},"
             "\"post_processor\":null,\"decoder\":{\"type\":\"ByteLevel\"},"
             "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"c\":2,\"ab\":3,\"abc\":4,"
             "\"\\u0120\":5}%s%s}}",
             merges ? ",\"merges\":" : "", merges ? merges : "");
    if (extra) {
        size_t n = strlen(json);
        snprintf(json + n - 2, sizeof json - n + 2, ",%s}}", extra);
    }
    *t = NULL;
    return b8_tokjson_parse(json, strlen(json), "tiny.json", NULL, t, e);
}

static void ids_of(const b8_tokenizer *t, const char *text, int32_t *ids, int64_t *n) {
    b8_tok_pieces p = {0};
    b8_err e = {0};
    *n = -1;
    if (b8_tokenizer_tokenize(t, text, strlen(text), &p, &e) == BERT8_OK) {
        *n = p.n;
        for (int64_t i = 0; i < p.n && i < 16; i++)
            ids[i] = p.ids[i];
    }
    b8_tok_pieces_free(&p);
}

TEST(bpe_merge_forms_agree) {
    b8_tokenizer *s = NULL, *a = NULL;
    b8_err e = {0};
    CHECKF(tiny("[\"a b\",\"ab c\"]", NULL, &s, &e) == BERT8_OK, "%s", e.msg);
    CHECKF(tiny("[[\"a\",\"b\"],[\"ab\",\"c\"]]", NULL, &a, &e) == BERT8_OK, "%s", e.msg);
    if (s && a) {
        int32_t x[16], y[16];
        int64_t nx, ny;
        ids_of(s, "abcab", x, &nx);
        ids_of(a, "abcab", y, &ny);
        CHECK(nx == 2 && ny == 2 && x[0] == 4 && x[1] == 3 && y[0] == 4 && y[1] == 3);
        /* missing bytes are dropped without an unk token */
        ids_of(s, "abd", x, &nx);
        CHECK(nx == 1 && x[0] == 3);
    }
    b8_tokenizer_free(s);
    b8_tokenizer_free(a);
    b8_tokenizer *im = NULL;
    CHECKF(tiny("[\"a b\"]", "\"ignore_merges\":true", &im, &e) == BERT8_OK, "%s", e.msg);
    if (im) {
        int32_t x[16];
        int64_t nx;
        ids_of(im, "abc", x, &nx); /* in the vocabulary whole, though no merge makes it */
        CHECK(nx == 1 && x[0] == 4);
    }
    b8_tokenizer_free(im);
}

TEST(bpe_malformed_files_are_refused_by_name) {
    static const struct {
        const char *merges, *extra, *want;
    } cases[] = {
        {NULL, NULL, "model.merges is missing"},
        {"[\"a x\"]", NULL, "names \"x\", which is not in model.vocab"},
        {"[\"a b\",\"a b\"]", NULL, "merges[1] repeats merges[0]"},
        {"[\"b c\"]", NULL, "makes \"bc\", which is not in model.vocab"},
        {"[\"a  b\"]", NULL, "merges[0] is neither"},
        {"[[\"a\"]]", NULL, "merges[0] is neither"},
        {"[7]", NULL, "merges[0] is neither"},
        {"{}", NULL, "model.merges is missing or not an array"},
        {"[]", "\"dropout\":0.1", "dropout is not supported"},
        {"[]", "\"byte_fallback\":true", "byte_fallback is not supported"},
        {"[]", "\"unk_token\":5", "unk_token must be a string"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        b8_tokenizer *t = NULL;
        b8_err e = {0};
        bert8_status st = tiny(cases[i].merges, cases[i].extra, &t, &e);
        CHECKF(st != BERT8_OK && t == NULL && strstr(e.msg, cases[i].want) && strstr(e.msg, "tiny.json"),
               "case %zu: got \"%s\", expected \"%s\"", i, e.msg, cases[i].want);
        b8_tokenizer_free(t);
    }
    static const struct {
        const char *json, *want;
    } files[] = {
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":\"x\"},\"merges\":[]}}", "has no valid id"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":1e300},\"merges\":[]}}", "over the limit"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":0},\"merges\":[]}}", "gives id 0 twice"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":[],\"merges\":[]}}", "model.vocab is not an object"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},"
         "\"pre_tokenizer\":{\"type\":\"Whitespace\"}}",
         "pre_tokenizer \"Whitespace\" is not supported with BPE"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},"
         "\"pre_tokenizer\":{\"type\":\"ByteLevel\"},\"normalizer\":{\"type\":\"NFKD\"}}",
         "normalizer \"NFKD\" is not supported with BPE"},
        {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},"
         "\"pre_tokenizer\":{\"type\":\"ByteLevel\"},\"decoder\":{\"type\":\"WordPiece\"}}",
         "decoder \"WordPiece\" is not supported with BPE"},
    };
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        b8_tokenizer *t = NULL;
        b8_err e = {0};
        bert8_status st = b8_tokjson_parse(files[i].json, strlen(files[i].json), "f.json", NULL, &t, &e);
        CHECKF(st != BERT8_OK && t == NULL && strstr(e.msg, files[i].want),
               "file %zu: got \"%s\", expected \"%s\"", i, e.msg, files[i].want);
        b8_tokenizer_free(t);
    }
}

int main(void) {
    RUN(bpe_matches_tokenizers_on_hostile_corpus);
    RUN(bpe_specials_and_roles);
    RUN(bpe_refuses_invalid_utf8);
    RUN(bpe_pairs_truncate_and_pad);
    RUN(bpe_merge_forms_agree);
    RUN(bpe_malformed_files_are_refused_by_name);
    return tu_finish();
}
