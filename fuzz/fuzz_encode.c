/* fuzz_encode.c: encoding arbitrary bytes with arbitrary encode parameters on four fixed
 * tokenizers (golden BERT and XLM-R folders, bert-base-uncased's vocabulary, and a
 * tokenizer.json with lstrip/rstrip/single_word added tokens). Checks the documented
 * invariants: ids in range, offsets inside the text and non-decreasing within a sequence,
 * padding after the real tokens, truncation and padding lengths as asked, and overflow windows
 * that tile the truncated sequence with exactly `stride` tokens of overlap. (A max_length below
 * the number of template tokens leaves rows of just those tokens, as in the reference.)
 * Input: 6 parameter bytes, then text [\n#####\n pair]:
 *   [0] tokenizer (mod 4)  [1] flags: 1 special tokens, 2 overflow, 4 pad to max_length,
 *   8 has pair, 16 batch of two (text/pair and pair/text)  [2] truncation (mod 4)
 *   [3] max_length (0: the model's)  [4] stride  [5] pad_to_multiple_of (mod 16) */
#include "fuzz_tok.h"
#include "tokenizer/tok_json.h"

static b8_tokenizer *toks[4];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    b8_err e;
    b8_tok_options lower = b8_tok_default_options();
    lower.lowercase = 1;
    static const char json[] =
        "{\"added_tokens\":[{\"id\":0,\"content\":\"[UNK]\",\"special\":true},{\"id\":1,"
        "\"content\":\"[CLS]\",\"special\":true},{\"id\":2,\"content\":\"[SEP]\",\"special\":"
        "true},{\"id\":3,\"content\":\"[PAD]\",\"special\":true},{\"id\":4,\"content\":"
        "\"[MASK]\",\"special\":true,\"lstrip\":true},{\"id\":11,\"content\":\"o w\","
        "\"single_word\":true},{\"id\":12,\"content\":\"<r>\",\"rstrip\":true},{\"id\":13,"
        "\"content\":\"\xc3\xa9t\xc3\xa9\",\"single_word\":true,\"lstrip\":true}],"
        "\"normalizer\":{\"type\":\"BertNormalizer\",\"lowercase\":true},\"pre_tokenizer\":{"
        "\"type\":\"BertPreTokenizer\"},\"post_processor\":{\"type\":\"TemplateProcessing\","
        "\"single\":[{\"SpecialToken\":{\"id\":\"[CLS]\",\"type_id\":0}},{\"Sequence\":{\"id\":"
        "\"A\",\"type_id\":0}},{\"SpecialToken\":{\"id\":\"[SEP]\",\"type_id\":0}}],\"pair\":[{"
        "\"SpecialToken\":{\"id\":\"[CLS]\",\"type_id\":0}},{\"Sequence\":{\"id\":\"A\","
        "\"type_id\":0}},{\"SpecialToken\":{\"id\":\"[SEP]\",\"type_id\":0}},{\"Sequence\":{"
        "\"id\":\"B\",\"type_id\":1}},{\"SpecialToken\":{\"id\":\"[SEP]\",\"type_id\":1}}],"
        "\"special_tokens\":{\"[CLS]\":{\"id\":\"[CLS]\",\"ids\":[1]},\"[SEP]\":{\"id\":"
        "\"[SEP]\",\"ids\":[2]}}},\"model\":{\"type\":\"WordPiece\",\"unk_token\":\"[UNK]\","
        "\"max_input_chars_per_word\":12,\"vocab\":{\"[UNK]\":0,\"[CLS]\":1,\"[SEP]\":2,"
        "\"[PAD]\":3,\"[MASK]\":4,\"hello\":5,\"world\":6,\"##s\":7,\"a\":8,\",\":9,\"o\":10}}}";
    if (b8_tokenizer_load_dir(fuzz_shared("golden/models/bert_e2e"), NULL, &toks[0], &e) ||
        b8_tokenizer_load_dir(fuzz_shared("golden/models/xlmr_e2e"), NULL, &toks[1], &e) ||
        b8_tokenizer_load_files(B8_TOK_WORDPIECE,
                                fuzz_shared("tokenizers/bert-base-uncased.vocab.txt"),
                                &lower, &toks[2], &e) ||
        b8_tokjson_parse(json, strlen(json), "fuzz_encode.json", NULL, &toks[3], &e)) {
        fprintf(stderr, "fuzz_encode: cannot load the tokenizers: %s\n", e.msg);
        abort();
    }
    return 0;
}

/* The rows of input `in` must be windows over the tokens of its truncated sequence. */
static void check_windows(const b8_tokenizer *t, const b8_encoding *enc, int64_t in, int seqid,
                          const char *text, size_t len, int64_t stride) {
    b8_tok_pieces p = {0};
    b8_err e;
    FUZZ_CHECK(b8_tokenizer_tokenize(t, text, len, &p, &e) == BERT8_OK);
    int64_t next = 0, prev_start = -1, prev_stop = -1, windows = 0;
    for (int64_t r = 0; r < enc->rows; r++) {
        if (enc->row_input[r] != in) continue;
        FUZZ_CHECK(enc->row_window[r] == windows);
        const int32_t *ids = enc->input_ids + r * enc->seq;
        const int32_t *sq = enc->sequence_ids + r * enc->seq;
        int64_t k = 0, start = -1, n = 0;
        for (; k < enc->lengths[r]; k++) {
            if (sq[k] != seqid) continue;
            if (start < 0) start = k;
            n++;
        }
        /* the window's tokens are a contiguous run of the sequence's tokens */
        int64_t at = windows == 0 ? 0 : prev_stop - stride;
        if (windows == 0) FUZZ_CHECK(n <= p.n);
        else FUZZ_CHECK(at == prev_start + (prev_stop - prev_start) - stride);
        FUZZ_CHECK(at >= 0 && at + n <= p.n);
        for (int64_t j = 0; j < n; j++)
            FUZZ_CHECK(ids[start + j] == p.ids[at + j]);
        prev_start = at;
        prev_stop = at + n;
        next = prev_stop;
        windows++;
    }
    FUZZ_CHECK(windows >= 1 && next == p.n); /* the last window reaches the end */
    b8_tok_pieces_free(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 6 || size > (1u << 16)) return 0;
    const b8_tokenizer *t = toks[data[0] % 4];
    b8_encode_params p = b8_default_encode_params();
    uint8_t fl = data[1];
    p.add_special_tokens = fl & 1;
    p.return_overflow = (fl >> 1) & 1;
    p.padding = (fl & 4) ? B8_PAD_MAX_LENGTH : B8_PAD_LONGEST;
    p.truncation = (b8_truncation)(data[2] % 4);
    p.max_length = data[3];
    p.stride = data[4];
    p.pad_to_multiple_of = data[5] % 16;
    const uint8_t *part[2];
    size_t len[2];
    fuzz_split(data + 6, size - 6, part, len, 2);
    bool has_pair = (fl & 8) != 0;
    int64_t n = (fl & 16) ? 2 : 1;
    char *a = fuzz_str(part[0], len[0]), *b = fuzz_str(part[1], len[1]);
    const char *texts[2] = {a, b}, *pairs[2] = {b, a};
    size_t tl[2] = {len[0], len[1]}, pl[2] = {len[1], len[0]};
    b8_encoding enc = {0};
    b8_err e;
    b8_err_clear(&e);
    bert8_status s = b8_tokenizer_encode_batch(t, n, texts, tl, has_pair ? pairs : NULL,
                                               has_pair ? pl : NULL, &p, &enc, &e);
    if (s != BERT8_OK) {
        FUZZ_CHECK(s == BERT8_ERR_ENCODING || s == BERT8_ERR_TOO_LARGE ||
                   s == BERT8_ERR_INVALID_ARG || s == BERT8_ERR_UNSUPPORTED);
        FUZZ_CHECK(e.msg[0] != '\0');
        goto out;
    }
    int64_t vs = b8_tokenizer_vocab_size(t), maxlen = p.max_length ? p.max_length
                                                                    : b8_tokenizer_model_max_length(t);
    int32_t pad = b8_tokenizer_special_id(t, B8_SPECIAL_PAD);
    FUZZ_CHECK(enc.rows >= n && enc.seq >= 0);
    if (p.padding == B8_PAD_MAX_LENGTH) FUZZ_CHECK(enc.seq >= maxlen);
    if (p.pad_to_multiple_of) FUZZ_CHECK(enc.seq % p.pad_to_multiple_of == 0);
    for (int64_t r = 0; r < enc.rows; r++) {
        int64_t in = enc.row_input[r];
        FUZZ_CHECK(in >= 0 && in < n && enc.lengths[r] >= 0 && enc.lengths[r] <= enc.seq);
        /* a max_length below the template's special tokens cannot be met; longest_first on a
         * pair then keeps only the specials, as the reference tokenizers do */
        int nspec = p.add_special_tokens ? b8_tokenizer_num_special_tokens(t, has_pair) : 0;
        if (p.truncation != B8_TRUNC_NONE)
            FUZZ_CHECK(enc.lengths[r] <= (maxlen > nspec ? maxlen : nspec));
        int64_t last[2] = {0, 0};
        for (int64_t k = 0; k < enc.seq; k++) {
            size_t i = (size_t)(r * enc.seq + k);
            int32_t sq = enc.sequence_ids[i];
            int64_t os = enc.offsets[2 * i], oe = enc.offsets[2 * i + 1];
            if (k >= enc.lengths[r]) {
                FUZZ_CHECK(enc.input_ids[i] == pad && enc.attention_mask[i] == 0);
                FUZZ_CHECK(enc.special_mask[i] == 1 && sq == -1 && enc.word_ids[i] == -1);
                FUZZ_CHECK(os == 0 && oe == 0 && enc.token_type_ids[i] == 0);
                continue;
            }
            FUZZ_CHECK(enc.input_ids[i] >= 0 && enc.input_ids[i] < vs);
            FUZZ_CHECK(enc.attention_mask[i] == 1);
            if (sq < 0) {
                FUZZ_CHECK(enc.special_mask[i] == 1 && enc.word_ids[i] == -1 && os == 0 && oe == 0);
                continue;
            }
            FUZZ_CHECK(sq == 0 || (sq == 1 && has_pair));
            FUZZ_CHECK(enc.special_mask[i] == 0 && enc.word_ids[i] >= 0);
            size_t tlen = sq == 0 ? tl[in] : pl[in];
            FUZZ_CHECK(os >= 0 && os <= oe && (size_t)oe <= tlen);
            FUZZ_CHECK(os >= last[sq]);
            last[sq] = os;
        }
    }
    if (p.return_overflow && p.truncation != B8_TRUNC_NONE && p.truncation != B8_TRUNC_LONGEST_FIRST)
        for (int64_t in = 0; in < n; in++) {
            bool second = p.truncation == B8_TRUNC_ONLY_SECOND && has_pair;
            const char *s = second ? pairs[in] : texts[in];
            size_t sl = second ? pl[in] : tl[in];
            check_windows(t, &enc, in, second ? 1 : 0, s, sl, p.stride);
        }
out:
    b8_encoding_free(&enc);
    free(a);
    free(b);
    return 0;
}
