/* test_tokenizer.c: one test per tokenizer rule (normalization, splitting, special tokens,
 * offsets, word ids, templates, truncation, overflow windows, padding, errors), on the real
 * bert-base-uncased / bert-base-cased vocabularies and the bert_e2e / xlmr_e2e folders. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bert8.h"
#include "testutil.h"
#include "tokenizer/tokenizer.h"

#define MS "\xe2\x96\x81" /* U+2581, SentencePiece's meta space */

static b8_tokenizer *uncased, *cased, *mbert, *xlmr, *bert_e2e, *xlmr_e2e;

static b8_tokenizer *load_vocab(const char *rel, b8_tok_kind kind, int lower) {
    b8_tok_options o = b8_tok_default_options();
    o.lowercase = lower;
    b8_tokenizer *t = NULL;
    b8_err e = {0};
    if (b8_tokenizer_load_files(kind, tu_shared_path(rel), &o, &t, &e) != BERT8_OK)
        printf("  cannot load %s: %s\n", rel, e.msg);
    return t;
}

static b8_tokenizer *load_dir(const char *rel) {
    b8_tokenizer *t = NULL;
    b8_err e = {0};
    if (b8_tokenizer_load_dir(tu_shared_path(rel), NULL, &t, &e) != BERT8_OK)
        printf("  cannot load %s: %s\n", rel, e.msg);
    return t;
}

static b8_tok_pieces tp; /* reused by toks() */

/* The tokens of text as one space-separated string (a static buffer). */
static const char *toks(const b8_tokenizer *t, const char *text) {
    static char buf[8192];
    b8_err e = {0};
    buf[0] = 0;
    if (!t) return "(no tokenizer)";
    if (b8_tokenizer_tokenize(t, text, strlen(text), &tp, &e) != BERT8_OK) {
        snprintf(buf, sizeof buf, "ERROR %s", e.msg);
        return buf;
    }
    size_t at = 0;
    for (int64_t i = 0; i < tp.n && at < sizeof buf - 256; i++)
        at += (size_t)snprintf(buf + at, sizeof buf - at, "%s%s", i ? " " : "",
                               tp.strings + tp.str_off[i]);
    return buf;
}

/* "start-end" per token. */
static const char *offs(const b8_tokenizer *t, const char *text, size_t len) {
    static char buf[8192];
    b8_tok_pieces p = {0};
    b8_err e = {0};
    buf[0] = 0;
    if (b8_tokenizer_tokenize(t, text, len, &p, &e) != BERT8_OK) {
        snprintf(buf, sizeof buf, "ERROR %s", e.msg);
        return buf;
    }
    size_t at = 0;
    for (int64_t i = 0; i < p.n && at < sizeof buf - 64; i++)
        at += (size_t)snprintf(buf + at, sizeof buf - at, "%s%lld-%lld", i ? " " : "",
                               (long long)p.offsets[2 * i], (long long)p.offsets[2 * i + 1]);
    b8_tok_pieces_free(&p);
    return buf;
}

#define CHECK_TOKS(t, text, want)                                                                  \
    do {                                                                                           \
        const char *got_ = toks(t, text);                                                          \
        CHECKF(!strcmp(got_, want), "got \"%s\", want \"%s\"", got_, want);                        \
    } while (0)

#define CHECK_STR(got, want)                                                                       \
    do {                                                                                           \
        const char *g_ = (got);                                                                    \
        CHECKF(!strcmp(g_, want), "got \"%s\", want \"%s\"", g_, want);                            \
    } while (0)

/* ---- WordPiece rules ------------------------------------------------------------------ */

TEST(wordpiece_greedy_longest_match_with_hashes) {
    CHECK_TOKS(uncased, "unaffable tokenization", "una ##ffa ##ble token ##ization");
}

TEST(wordpiece_splits_long_word_to_unk) {
    char word[128];
    memset(word, 'a', 101);
    word[101] = 0;
    CHECK_TOKS(uncased, word, "[UNK]");
    word[100] = 0; /* exactly 100 characters are still split into pieces */
    const char *got = toks(uncased, word);
    CHECK(strncmp(got, "aaa", 3) == 0 && strstr(got, "##") != NULL);
    /* the limit counts characters, not bytes: 60 two-byte letters are one word of 60 */
    char wide[256] = "";
    for (int i = 0; i < 60; i++)
        strcat(wide, "\xc3\xa9");
    CHECK(strcmp(toks(cased, wide), "[UNK]") != 0);
}

TEST(wordpiece_unmatchable_piece_makes_word_unk) {
    /* bert_e2e has no piece for the emoji, so the whole word is one [UNK] */
    CHECK_TOKS(bert_e2e,
               "ab\xf0\x9f\x99\x82"
               "cd x",
               "[UNK] x");
}

TEST(special_tokens_not_split_when_glued) {
    CHECK_TOKS(uncased, "prefix[MASK]suffix", "prefix [MASK] suffix");
    CHECK_TOKS(uncased, "[CLS]hello[SEP]", "[CLS] hello [SEP]");
    CHECK_TOKS(cased, "a[SEP]b", "a [SEP] b");
}

TEST(lowercase_spellings_of_specials_are_text) {
    CHECK_TOKS(uncased, "[mask] [Mask]", "[ mask ] [ mask ]");
    CHECK_TOKS(cased, "[mask]", "[ mask ]");
}

TEST(uncased_strips_accents) {
    CHECK_TOKS(uncased, "Café naïve Ångström", "cafe naive ang ##strom");
    CHECK_TOKS(uncased, "ÀÉÎÕÜ", "ae ##io ##u");
}

TEST(cased_keeps_accents_and_case) {
    CHECK_TOKS(cased, "Café", "Café");
    CHECK_TOKS(cased, "HELLO", "H ##EL ##L ##O");
}

TEST(combining_sequences_are_composed_nfc) {
    /* e + U+0301 composes to é before the vocabulary lookup */
    CHECK_TOKS(cased, "e\xcc\x81", "é");
    /* ... and both code points map back to the two source characters */
    CHECK_STR(offs(cased, "xe\xcc\x81", 4), "0-1 1-4");
}

TEST(options_control_accents_and_cjk) {
    b8_tok_options o = b8_tok_default_options();
    o.lowercase = 1;
    o.strip_accents = 0; /* lower-case but keep accents */
    o.tokenize_chinese_chars = 0;
    b8_tokenizer *t = NULL;
    b8_err e = {0};
    CHECK(b8_tokenizer_load_files(B8_TOK_WORDPIECE,
                                  tu_shared_path("tokenizers/bert-base-uncased.vocab.txt"), &o, &t,
                                  &e) == BERT8_OK);
    if (!t) return;
    CHECK_TOKS(t, "CAFÉ", "[UNK]"); /* "café": the uncased vocabulary has no "##é" */
    CHECK_TOKS(t, "CAFE", "cafe");
    CHECK_TOKS(t, "中文", "中 ##文");
    b8_tokenizer_free(t);
}

TEST(uncased_final_sigma_is_sigma) {
    /* the lower-casing pre-pass works character by character: no final-sigma rule */
    CHECK_TOKS(uncased, "ΟΔΟΣ", "ο ##δ ##ο ##σ");
}

TEST(dotted_capital_i_lowers_to_i) {
    CHECK_TOKS(uncased, "İ", "i");
}

TEST(cjk_split_per_char) {
    CHECK_TOKS(uncased, "中文English混合", "中 文 english [UNK] 合"); /* 混 is not in the vocab */
    /* Extension B is in the CJK ranges too: split even when unknown to the vocabulary */
    CHECK_TOKS(uncased, "\xf0\xa0\x80\x80\xf0\xa0\x80\x81", "[UNK] [UNK]");
    /* kana is not: it stays inside its word */
    CHECK_TOKS(uncased, "こんにちは", "こ ##ん ##に ##ち ##は");
}

TEST(control_and_format_chars_removed) {
    CHECK_TOKS(uncased,
               "bell\x07"
               "char",
               "bell ##cha ##r");
    CHECK_TOKS(uncased, "zero\xe2\x80\x8bwidth", "zero ##wi ##dt ##h");
    CHECK_TOKS(uncased,
               "soft\xc2\xad"
               "hyphen",
               "soft ##hy ##ph ##en");
    /* vertical tab and form feed are controls (removed), not whitespace */
    CHECK_TOKS(uncased,
               "a\x0b"
               "b",
               "ab");
}

/* Unassigned code points (a noncharacter, an unassigned one, one assigned only after Unicode 14,
 * the last plane's end) stay inside their word, as the fast tokenizers keep them: the word is
 * [UNK]. Private use (U+E000) and a format tag (U+E0001) are removed, as the controls above. */
TEST(unassigned_code_points_stay_in_their_word) {
    CHECK_TOKS(uncased, "ab\xef\xbf\xbe" "cd", "[UNK]");          /* U+FFFE */
    CHECK_TOKS(uncased, "ab\xcd\xb8" "cd", "[UNK]");                /* U+0378 */
    CHECK_TOKS(uncased, "love it \xf0\x9f\xa9\xb7", "love it [UNK]"); /* U+1FA77, Unicode 15 */
    CHECK_TOKS(uncased, "ab\xf4\x8f\xbf\xbf" "cd", "[UNK]");      /* U+10FFFF */
    CHECK_TOKS(uncased, "ab\xee\x80\x80" "cd", "abc ##d");          /* U+E000 */
    CHECK_TOKS(uncased, "ab\xf3\xa0\x80\x81" "cd", "abc ##d");      /* U+E0001 */
}

/* CJK Extension E splits from U+2B920, as in the fast tokenizers; U+2B820..U+2B91F stay inside
 * their word. */
TEST(cjk_extension_e_splits_from_2b920) {
    CHECK_TOKS(uncased, "a\xf0\xab\xa0\xa0" "b", "[UNK]");           /* U+2B820 */
    CHECK_TOKS(uncased, "a\xf0\xab\xa4\x9f" "b", "[UNK]");           /* U+2B91F */
    CHECK_TOKS(uncased, "a\xf0\xab\xa4\xa0" "b", "a [UNK] b");       /* U+2B920 */
    CHECK_TOKS(uncased, "a\xf0\xab\xa0\x9f" "b", "a [UNK] b");       /* U+2B81F */
}

TEST(unicode_whitespace_separates_words) {
    CHECK_TOKS(uncased,
               "a\xc2\xa0"
               "b\xe3\x80\x80"
               "c\xe2\x80\xa8"
               "d\te\nf",
               "a b c d e f");
    CHECK_TOKS(uncased, "", "");
    CHECK_TOKS(uncased, " \t\n ", "");
}

TEST(punctuation_split) {
    CHECK_TOKS(uncased, "don't stop!!", "don ' t stop ! !");
    CHECK_TOKS(uncased, "a-b_c", "a - b _ c");
    CHECK_TOKS(uncased, "«x»", "« x »");
}

TEST(nul_byte_is_a_character) {
    b8_tok_pieces p = {0};
    b8_err e = {0};
    CHECK(b8_tokenizer_tokenize(xlmr, "null\0byte", 9, &p, &e) == BERT8_OK);
    CHECK(p.n == 3 && p.ids[1] == 3); /* '\0' is an unknown piece */
    CHECK(b8_tokenizer_tokenize(uncased, "null\0byte", 9, &p, &e) == BERT8_OK);
    CHECK(p.n >= 1); /* BERT drops it and joins the halves */
    b8_tok_pieces_free(&p);
}

TEST(special_ids_come_from_vocab) {
    CHECK(b8_tokenizer_special_id(bert_e2e, B8_SPECIAL_PAD) == 0);
    CHECK(b8_tokenizer_special_id(bert_e2e, B8_SPECIAL_UNK) == 1);
    CHECK(b8_tokenizer_special_id(bert_e2e, B8_SPECIAL_CLS) == 2);
    CHECK(b8_tokenizer_special_id(bert_e2e, B8_SPECIAL_SEP) == 3);
    CHECK(b8_tokenizer_special_id(bert_e2e, B8_SPECIAL_MASK) == 4);
    CHECK(b8_tokenizer_special_id(uncased, B8_SPECIAL_CLS) == 101);
    CHECK(b8_tokenizer_special_id(uncased, B8_SPECIAL_BOS) == -1);
    CHECK(b8_tokenizer_vocab_size(uncased) == 30522);
    CHECK(b8_tokenizer_model_max_length(bert_e2e) == 512);
}

TEST(token_id_round_trip) {
    size_t len = 0;
    const char *s = b8_tokenizer_id_to_token(uncased, 7592, &len);
    CHECK(s && !strcmp(s, "hello") && len == 5);
    CHECK(b8_tokenizer_token_to_id(uncased, "hello", 5) == 7592);
    CHECK(b8_tokenizer_token_to_id(uncased, "no-such-token", 13) == -1);
    CHECK(b8_tokenizer_id_to_token(uncased, -1, NULL) == NULL);
    CHECK(b8_tokenizer_id_to_token(uncased, 30522, NULL) == NULL);
}

/* ---- Unigram rules -------------------------------------------------------------------- */

TEST(xlmr_fairseq_ids) {
    CHECK(b8_tokenizer_special_id(xlmr, B8_SPECIAL_CLS) == 0);
    CHECK(b8_tokenizer_special_id(xlmr, B8_SPECIAL_PAD) == 1);
    CHECK(b8_tokenizer_special_id(xlmr, B8_SPECIAL_SEP) == 2);
    CHECK(b8_tokenizer_special_id(xlmr, B8_SPECIAL_UNK) == 3);
    CHECK(b8_tokenizer_special_id(xlmr, B8_SPECIAL_MASK) == 250001);
    CHECK(b8_tokenizer_vocab_size(xlmr) == 250002);
    CHECK(b8_tokenizer_special_id(xlmr_e2e, B8_SPECIAL_MASK) == 1001);
    CHECK(b8_tokenizer_vocab_size(xlmr_e2e) == 1002);
    /* spm id + 1: "," is spm piece 3 */
    CHECK(b8_tokenizer_token_to_id(xlmr, ",", 1) == 4);
    CHECK_STR(b8_tokenizer_id_to_token(xlmr, 250001, NULL), "<mask>");
    CHECK_STR(b8_tokenizer_id_to_token(xlmr, 1, NULL), "<pad>");
}

TEST(unigram_whitespace_becomes_meta_space) {
    CHECK_TOKS(xlmr, "Hello world", MS "Hello " MS "world");
    CHECK_TOKS(xlmr, "  leading   and trailing  ", MS "leading " MS "and " MS "trail ing");
    CHECK_TOKS(xlmr, "   ", "");
}

TEST(unigram_nmt_nfkc_normalizes) {
    /* the ligature and the fraction are compatibility-decomposed by the charsmap */
    CHECK_TOKS(xlmr, "\xef\xac\x81", MS "fi");
    CHECK_TOKS(xlmr, "½",
               MS "1\xe2\x81\x84"
                  "2");
}

TEST(unigram_unknown_runs_merge_into_one_unk) {
    b8_tok_pieces p = {0};
    b8_err e = {0};
    /* three emoji unknown to the 1000-piece model: one <unk>, spanning all three */
    const char *s = "a \xf0\x9f\x99\x82\xf0\x9f\x99\x83\xf0\x9f\x99\x84 b";
    CHECK(b8_tokenizer_tokenize(xlmr_e2e, s, strlen(s), &p, &e) == BERT8_OK);
    int unks = 0;
    for (int64_t i = 0; i < p.n; i++) {
        if (p.ids[i] != 3) continue;
        unks++;
        CHECK(p.offsets[2 * i] == 2 && p.offsets[2 * i + 1] == 14);
    }
    CHECK(unks == 1);
    b8_tok_pieces_free(&p);
}

TEST(mask_lstrip_eats_space_before) {
    /* "<mask>" is AddedToken(lstrip=True): the space before it is not a piece of its own */
    CHECK_TOKS(xlmr, "a <mask> b", MS "a <mask> " MS "b");
    CHECK_TOKS(xlmr, "<s>x</s>", "<s> " MS "x </s>");
    CHECK_TOKS(xlmr, "[MASK]", MS "[ MAS K ]");
}

/* ---- Offsets and word ids ------------------------------------------------------------------ */

TEST(offsets_point_into_text) {
    const char *s = "Hello, world!";
    CHECK_STR(offs(uncased, s, strlen(s)), "0-5 5-6 7-12 12-13");
    CHECK_STR(offs(uncased, "unaffable", 9), "0-3 3-6 6-9");
    /* a removed control character inside a word is skipped, not counted */
    CHECK_STR(offs(uncased,
                   "ab\x07"
                   "c",
                   4),
              "0-4");
    /* multi-byte characters: offsets are bytes */
    CHECK_STR(offs(uncased, "Café x", 7), "0-5 6-7");
    /* Unigram: the meta space is not part of the span */
    CHECK_STR(offs(xlmr, "Hello world", 11), "0-5 6-11");
    /* every token's span, cut from the text, reads as the token */
    const char *t = "The quick brown fox";
    b8_tok_pieces p = {0};
    b8_err e = {0};
    CHECK(b8_tokenizer_tokenize(cased, t, strlen(t), &p, &e) == BERT8_OK);
    for (int64_t i = 0; i < p.n; i++) {
        const char *tok = p.strings + p.str_off[i];
        if (!strncmp(tok, "##", 2)) tok += 2;
        size_t l = (size_t)(p.offsets[2 * i + 1] - p.offsets[2 * i]);
        CHECK(l == strlen(tok) && !memcmp(t + p.offsets[2 * i], tok, l));
    }
    b8_tok_pieces_free(&p);
}

TEST(word_ids_follow_pretokenized_words) {
    b8_tok_pieces p = {0};
    b8_err e = {0};
    const char *s = "unaffable, ok";
    CHECK(b8_tokenizer_tokenize(uncased, s, strlen(s), &p, &e) == BERT8_OK);
    /* una ##ffa ##ble , ok */
    int32_t want[5] = {0, 0, 0, 1, 2};
    CHECK(p.n == 5);
    for (int i = 0; i < 5 && i < p.n; i++)
        CHECK(p.word_ids[i] == want[i]);
    s = "Hello world";
    CHECK(b8_tokenizer_tokenize(xlmr_e2e, s, strlen(s), &p, &e) == BERT8_OK);
    CHECK(p.n == 2 && p.word_ids[0] == 0 && p.word_ids[1] == 1);
    b8_tok_pieces_free(&p);
}

/* ---- Templates, truncation, overflow, padding ----------------------------------------- */

static b8_encoding enc;

static const char *row_toks(const b8_tokenizer *t, int64_t r) {
    static char buf[4096];
    size_t at = 0;
    buf[0] = 0;
    for (int64_t i = 0; i < enc.lengths[r] && at < sizeof buf - 128; i++)
        at += (size_t)snprintf(buf + at, sizeof buf - at, "%s%s", i ? " " : "",
                               b8_tokenizer_id_to_token(t, enc.input_ids[r * enc.seq + i], NULL));
    return buf;
}

TEST(pair_template_bert) {
    b8_encode_params ep = b8_default_encode_params();
    b8_err e = {0};
    CHECK(b8_tokenizer_encode(uncased, "How old?", 8, "Six.", 4, &ep, &enc, &e) == BERT8_OK);
    CHECK_STR(row_toks(uncased, 0), "[CLS] how old ? [SEP] six . [SEP]");
    int32_t types[8] = {0, 0, 0, 0, 0, 1, 1, 1}, seqs[8] = {-1, 0, 0, 0, -1, 1, 1, -1};
    CHECK(enc.seq == 8);
    for (int i = 0; i < 8 && enc.seq == 8; i++) {
        CHECK(enc.token_type_ids[i] == types[i]);
        CHECK(enc.sequence_ids[i] == seqs[i]);
        CHECK(enc.attention_mask[i] == 1);
    }
    bert8_batch bb = b8_encoding_batch(&enc);
    CHECK(bb.batch == 1 && bb.seq == 8 && bb.input_ids[0] == 101 && bb.token_type_ids[7] == 1 &&
          bb.attention_mask[7] == 1);
    /* offsets of the second sequence index the second text */
    CHECK(enc.offsets[2 * 5] == 0 && enc.offsets[2 * 5 + 1] == 3);
    CHECK(b8_tokenizer_num_special_tokens(uncased, 1) == 3);
}

TEST(pair_template_xlmr) {
    b8_encode_params ep = b8_default_encode_params();
    b8_err e = {0};
    CHECK(b8_tokenizer_encode(xlmr, "a", 1, "b", 1, &ep, &enc, &e) == BERT8_OK);
    CHECK_STR(row_toks(xlmr, 0), "<s> " MS "a </s> </s> " MS "b </s>");
    for (int64_t i = 0; i < enc.seq; i++)
        CHECK(enc.token_type_ids[i] == 0);
    CHECK(b8_tokenizer_num_special_tokens(xlmr, 1) == 4);
}

TEST(empty_texts_give_only_specials) {
    b8_encode_params ep = b8_default_encode_params();
    b8_err e = {0};
    CHECK(b8_tokenizer_encode(uncased, "", 0, NULL, 0, &ep, &enc, &e) == BERT8_OK);
    CHECK_STR(row_toks(uncased, 0), "[CLS] [SEP]");
    CHECK(b8_tokenizer_encode(uncased, "  ", 2, "", 0, &ep, &enc, &e) == BERT8_OK);
    CHECK_STR(row_toks(uncased, 0), "[CLS] [SEP] [SEP]");
    ep.add_special_tokens = 0;
    CHECK(b8_tokenizer_encode(uncased, "a b", 3, "c", 1, &ep, &enc, &e) == BERT8_OK);
    CHECK_STR(row_toks(uncased, 0), "a b c");
    CHECK(enc.token_type_ids[2] == 0);
}

TEST(truncation_longest_first) {
    b8_encode_params ep = b8_default_encode_params();
    ep.truncation = B8_TRUNC_LONGEST_FIRST;
    ep.max_length = 9;
    b8_err e = {0};
    /* 6 + 3 tokens + 3 specials = 12: three come off the longer first */
    CHECK(b8_tokenizer_encode(uncased, "a b c d e f", 11, "x y z", 5, &ep, &enc, &e) == BERT8_OK);
    CHECK_STR(row_toks(uncased, 0), "[CLS] a b c [SEP] x y z [SEP]");
    /* ties come off the second sequence */
    ep.max_length = 7;
    CHECK(b8_tokenizer_encode(uncased, "a b c", 5, "x y z", 5, &ep, &enc, &e) == BERT8_OK);
    CHECK_STR(row_toks(uncased, 0), "[CLS] a b [SEP] x y [SEP]");
    ep.max_length = 6;
    CHECK(b8_tokenizer_encode(uncased, "a b c", 5, "x y z", 5, &ep, &enc, &e) == BERT8_OK);
    CHECK_STR(row_toks(uncased, 0), "[CLS] a b [SEP] x [SEP]");
    /* a single text just loses its tail */
    ep.max_length = 4;
    CHECK(b8_tokenizer_encode(uncased, "a b c d", 7, NULL, 0, &ep, &enc, &e) == BERT8_OK);
    CHECK_STR(row_toks(uncased, 0), "[CLS] a b [SEP]");
}

TEST(truncation_only_second) {
    b8_encode_params ep = b8_default_encode_params();
    ep.truncation = B8_TRUNC_ONLY_SECOND;
    ep.max_length = 8;
    b8_err e = {0};
    CHECK(b8_tokenizer_encode(uncased, "a b c", 5, "u v w x y z", 11, &ep, &enc, &e) == BERT8_OK);
    CHECK_STR(row_toks(uncased, 0), "[CLS] a b c [SEP] u v [SEP]");
    CHECK(enc.rows == 1 && enc.lengths[0] == 8);
    /* the first sequence alone is too long: an error, not a silent overflow */
    ep.max_length = 5;
    CHECK(b8_tokenizer_encode(uncased, "a b c", 5, "u v", 3, &ep, &enc, &e) == BERT8_ERR_TOO_LARGE);
    CHECK(strstr(e.msg, "max_length") != NULL);
    ep.truncation = B8_TRUNC_ONLY_FIRST;
    ep.max_length = 6;
    CHECK(b8_tokenizer_encode(uncased, "a b c d", 7, "u v", 3, &ep, &enc, &e) == BERT8_OK);
    CHECK_STR(row_toks(uncased, 0), "[CLS] a [SEP] u v [SEP]");
}

TEST(overflow_windows_with_stride) {
    /* question kept whole; the context (10 tokens) split into windows of 4 that overlap by 2 */
    b8_encode_params ep = b8_default_encode_params();
    ep.truncation = B8_TRUNC_ONLY_SECOND;
    ep.max_length = 9; /* 3 specials + 2 question tokens leave 4 for the context */
    ep.return_overflow = 1;
    ep.stride = 2;
    b8_err e = {0};
    const char *q = "who am", *c = "c0 c1 c2 c3 c4 c5 c6 c7 c8 c9";
    CHECK(b8_tokenizer_encode(uncased, q, strlen(q), c, strlen(c), &ep, &enc, &e) == BERT8_OK);
    /* ... but "c0" is two tokens (c ##0): use word ids to see the layout instead */
    b8_tok_pieces p = {0};
    CHECK(b8_tokenizer_tokenize(uncased, c, strlen(c), &p, &e) == BERT8_OK);
    int64_t n = p.n, budget = 4, step = budget - ep.stride;
    int64_t want_rows = 1 + (n - budget + step - 1) / step;
    CHECK(enc.rows == want_rows);
    for (int64_t r = 0; r < enc.rows; r++) {
        const int32_t *ids = enc.input_ids + r * enc.seq;
        CHECK(enc.row_input[r] == 0 && enc.row_window[r] == r);
        CHECK(ids[0] == 101 && ids[3] == 102 && ids[enc.lengths[r] - 1] == 102);
        CHECK(enc.sequence_ids[r * enc.seq + 1] == 0 && enc.sequence_ids[r * enc.seq + 4] == 1);
        /* window r holds context tokens [r*step, r*step+4) */
        for (int64_t k = 0; k < enc.lengths[r] - 5; k++)
            CHECK(ids[4 + k] == p.ids[r * step + k]);
        if (r + 1 < enc.rows) CHECK(enc.lengths[r] == 9);
    }
    /* the last window ends at the last context token */
    int64_t last = enc.rows - 1;
    CHECK(enc.input_ids[last * enc.seq + enc.lengths[last] - 2] == p.ids[n - 1]);
    /* offsets of the context tokens point into the context */
    CHECK(enc.offsets[2 * (enc.seq + 4)] == p.offsets[2 * step]);
    /* stride must be below the window */
    ep.stride = 4;
    CHECK(b8_tokenizer_encode(uncased, q, strlen(q), c, strlen(c), &ep, &enc, &e) ==
          BERT8_ERR_INVALID_ARG);
    b8_tok_pieces_free(&p);
}

TEST(overflow_windows_for_single_texts_and_batches) {
    b8_encode_params ep = b8_default_encode_params();
    ep.truncation = B8_TRUNC_LONGEST_FIRST;
    ep.max_length = 5;
    ep.return_overflow = 1;
    ep.stride = 1;
    b8_err e = {0};
    const char *texts[2] = {"a b c d e f g", "h"};
    CHECK(b8_tokenizer_encode_batch(uncased, 2, texts, NULL, NULL, NULL, &ep, &enc, &e) ==
          BERT8_OK);
    /* 7 tokens, windows of 3 stepping by 2: [a b c] [c d e] [e f g], then "h" */
    CHECK(enc.rows == 4);
    CHECK_STR(row_toks(uncased, 0), "[CLS] a b c [SEP]");
    CHECK_STR(row_toks(uncased, 1), "[CLS] c d e [SEP]");
    CHECK_STR(row_toks(uncased, 2), "[CLS] e f g [SEP]");
    CHECK_STR(row_toks(uncased, 3), "[CLS] h [SEP]");
    CHECK(enc.row_input[3] == 1 && enc.row_window[3] == 0 && enc.row_window[2] == 2);
    /* pairs with longest_first cannot say which side to window */
    const char *pairs[2] = {"x", "y"};
    CHECK(b8_tokenizer_encode_batch(uncased, 2, texts, NULL, pairs, NULL, &ep, &enc, &e) ==
          BERT8_ERR_UNSUPPORTED);
}

TEST(batch_padding_and_mask) {
    b8_encode_params ep = b8_default_encode_params();
    b8_err e = {0};
    const char *texts[3] = {"hello world", "hi", ""};
    const char *pairs[3] = {NULL, "there", NULL};
    CHECK(b8_tokenizer_encode_batch(xlmr_e2e, 3, texts, NULL, pairs, NULL, &ep, &enc, &e) ==
          BERT8_OK);
    CHECK(enc.rows == 3);
    int64_t longest = 0;
    for (int r = 0; r < 3; r++)
        if (enc.lengths[r] > longest) longest = enc.lengths[r];
    CHECK(enc.seq == longest);
    for (int r = 0; r < 3; r++)
        for (int64_t i = 0; i < enc.seq; i++) {
            size_t k = (size_t)(r * enc.seq + i);
            int valid = i < enc.lengths[r];
            CHECK(enc.attention_mask[k] == valid);
            if (!valid) CHECK(enc.input_ids[k] == 1 && enc.word_ids[k] == -1);
        }
    CHECK(enc.lengths[2] == 2);
    /* pad to max_length and to a multiple */
    ep.padding = B8_PAD_MAX_LENGTH;
    ep.max_length = 10;
    CHECK(b8_tokenizer_encode_batch(bert_e2e, 3, texts, NULL, pairs, NULL, &ep, &enc, &e) ==
          BERT8_OK);
    CHECK(enc.seq == 10 && enc.input_ids[2 * 10 + 5] == 0); /* bert_e2e's [PAD] is 0 */
    ep.padding = B8_PAD_LONGEST;
    ep.pad_to_multiple_of = 8;
    CHECK(b8_tokenizer_encode_batch(bert_e2e, 3, texts, NULL, pairs, NULL, &ep, &enc, &e) ==
          BERT8_OK);
    CHECK(enc.seq == 8);
    CHECK(b8_tokenizer_encode_batch(bert_e2e, 0, NULL, NULL, NULL, NULL, &ep, &enc, &e) ==
          BERT8_OK);
    CHECK(enc.rows == 0);
}

/* ---- Errors ----------------------------------------------------------------------------- */

TEST(invalid_utf8_rejected) {
    static const struct {
        const char *s;
        size_t len, at;
    } bad[] = {
        {"ab\xff", 3, 2},             /* not a lead byte */
        {"a\x80", 2, 1},              /* lone continuation */
        {"\xc0\xaf", 2, 0},           /* overlong '/' */
        {"x\xe0\x80\xaf", 4, 1},      /* overlong three-byte */
        {"\xed\xa0\x80", 3, 0},       /* a surrogate */
        {"ok\xf4\x90\x80\x80", 6, 2}, /* past U+10FFFF */
        {"\xe4\xb8", 2, 0},           /* truncated at the end */
        {"\xe4"
         "a\xad",
         3, 0}, /* interrupted */
    };
    b8_tok_pieces p = {0};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        b8_err e = {0};
        bert8_status st = b8_tokenizer_tokenize(uncased, bad[i].s, bad[i].len, &p, &e);
        CHECKF(st == BERT8_ERR_ENCODING, "case %zu", i);
        char want[64];
        snprintf(want, sizeof want, "byte offset %zu", bad[i].at);
        CHECKF(strstr(e.msg, want) != NULL, "case %zu: %s", i, e.msg);
        st = b8_tokenizer_encode(xlmr, "fine", 4, bad[i].s, bad[i].len, NULL, &enc, &e);
        CHECK(st == BERT8_ERR_ENCODING && strstr(e.msg, "text_pair") != NULL);
    }
    b8_tok_pieces_free(&p);
}

TEST(load_errors_are_values) {
    b8_tokenizer *t = (b8_tokenizer *)&t;
    b8_err e = {0};
    CHECK(b8_tokenizer_load_dir("/nonexistent-dir", NULL, &t, &e) == BERT8_ERR_MISSING);
    CHECK(t == NULL && strstr(e.msg, "/nonexistent-dir") != NULL);
    CHECK(b8_tokenizer_load_files(B8_TOK_WORDPIECE, "/nonexistent/vocab.txt", NULL, &t, &e) ==
          BERT8_ERR_IO);
    /* a truncated sentencepiece model */
    char path[512];
    snprintf(path, sizeof path, "%s/cut.model", tu_tmpdir());
    size_t n = 0;
    char *data =
        b8_read_file(tu_shared_path("golden/models/xlmr_e2e/sentencepiece.bpe.model"), &n, &e);
    CHECK(data != NULL);
    if (data) {
        CHECK(tu_write_file(path, data, 5000) == 0);
        CHECK(b8_tokenizer_load_files(B8_TOK_UNIGRAM, path, NULL, &t, &e) == BERT8_ERR_FORMAT);
        CHECK(strstr(e.msg, "cut.model") != NULL);
        free(data);
    }
    /* a vocabulary that is not UTF-8 names its line */
    snprintf(path, sizeof path, "%s/bad_vocab.txt", tu_tmpdir());
    CHECK(tu_write_file(path, "[UNK]\nok\nbad\xff\n", 14) == 0);
    CHECK(b8_tokenizer_load_files(B8_TOK_WORDPIECE, path, NULL, &t, &e) == BERT8_ERR_FORMAT);
    CHECK(strstr(e.msg, "line 3") != NULL);
    /* no unknown token */
    CHECK(tu_write_file(path, "a\nb\n", 4) == 0);
    CHECK(b8_tokenizer_load_files(B8_TOK_WORDPIECE, path, NULL, &t, &e) == BERT8_ERR_MISSING);
    b8_tokenizer_free(NULL);
    b8_encoding_free(NULL);
    b8_tok_pieces_free(NULL);
}

/* ---- Config files ------------------------------------------------------------------------ */

TEST(config_files_set_flags_and_special_tokens) {
    /* a folder with a tiny vocab, a cased config, an object-valued special token and an
     * added token */
    char dir[512], path[600];
    snprintf(dir, sizeof dir, "%s/cfg", tu_tmpdir());
    char cmd[700];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    CHECK(system(cmd) == 0);
    const char *vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nHello\nhello\n##s\n!\n";
    snprintf(path, sizeof path, "%s/vocab.txt", dir);
    CHECK(tu_write_file(path, vocab, strlen(vocab)) == 0);
    const char *cfg = "{\"do_lower_case\": false, \"model_max_length\": 64,"
                      " \"mask_token\": {\"content\": \"[MASK]\", \"lstrip\": true}}";
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    CHECK(tu_write_file(path, cfg, strlen(cfg)) == 0);
    const char *added = "{\"<new>\": 9}";
    snprintf(path, sizeof path, "%s/added_tokens.json", dir);
    CHECK(tu_write_file(path, added, strlen(added)) == 0);
    b8_tokenizer *t = NULL;
    b8_err e = {0};
    CHECK(b8_tokenizer_load_dir(dir, NULL, &t, &e) == BERT8_OK);
    if (!t) {
        printf("  %s\n", e.msg);
        return;
    }
    CHECK_TOKS(t, "Hello hellos!", "Hello hello ##s !");
    CHECK_TOKS(t, "x<new>Hello", "[UNK] <new> Hello");
    CHECK(b8_tokenizer_token_to_id(t, "<new>", 5) == 9);
    CHECK(b8_tokenizer_vocab_size(t) == 10);
    CHECK(b8_tokenizer_model_max_length(t) == 64);
    CHECK(b8_tokenizer_special_id(t, B8_SPECIAL_MASK) == 4);
    b8_tok_options o = b8_tok_default_options();
    o.lowercase = 1; /* options override the config */
    b8_tokenizer *t2 = NULL;
    CHECK(b8_tokenizer_load_dir(dir, &o, &t2, &e) == BERT8_OK);
    CHECK_TOKS(t2, "HELLO", "hello");
    b8_tokenizer_free(t2);
    b8_tokenizer_free(t);
}

/* ---- decode ------------------------------------------------------------------------------- */

/* A copy of a golden folder's tokenizer files whose tokenizer_config.json has
 * clean_up_tokenization_spaces set to flag (-1: the key removed). */
static const char *cleanup_folder(const char *golden, const char *const *files, int flag) {
    static char dir[4][600];
    static int k;
    char *d = dir[k++ % 4], path[900], cmd[1400];
    snprintf(d, sizeof dir[0], "%s/cleanup_%s_%d", tu_tmpdir(), golden, flag);
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", d);
    if (system(cmd) != 0) return NULL;
    for (int i = 0; files[i]; i++) {
        snprintf(path, sizeof path, "golden/models/%s/%s", golden, files[i]);
        size_t n;
        char *data = tu_read_file(tu_shared_path(path), &n);
        if (!data) return NULL;
        if (!strcmp(files[i], "tokenizer_config.json")) {
            cJSON *cfg = cJSON_Parse(data);
            free(data);
            cJSON_DeleteItemFromObject(cfg, "clean_up_tokenization_spaces");
            if (flag >= 0) cJSON_AddBoolToObject(cfg, "clean_up_tokenization_spaces", flag);
            data = cJSON_Print(cfg);
            cJSON_Delete(cfg);
            n = data ? strlen(data) : 0;
        }
        snprintf(path, sizeof path, "%s/%s", d, files[i]);
        int bad = !data || tu_write_file(path, data, n);
        free(data);
        if (bad) return NULL;
    }
    return d;
}

/* text encoded, then decoded without the special tokens */
static char *round_trip(const char *dir, const char *text) {
    bert8_tokenizer *t = NULL;
    bert8_encoding enc = {0};
    char err[512], *out = NULL;
    bert8_encode_params p = bert8_default_encode_params();
    if (dir && !bert8_tokenizer_load(dir, &t, err, sizeof err) &&
        !bert8_encode(t, 1, &text, NULL, &p, &enc, err, sizeof err) &&
        bert8_decode(t, enc.input_ids, enc.lengths[0], 1, &out, err, sizeof err))
        out = NULL;
    bert8_encoding_free(&enc);
    bert8_tokenizer_free(t);
    return out;
}

/* What transformers 5.25 (tokenizers 0.23) decodes from the same folders: the WordPiece decoder's
 * own cleanup (a space before , . ! ? dropped per token) always; then clean_up_tokenization
 * (contractions, " ' ") only when tokenizer_config.json says clean_up_tokenization_spaces true;
 * absent, it is false (transformers' default since 4.45). SentencePiece: no cleanup of its own. */
TEST(decode_honours_clean_up_tokenization_spaces_as_transformers) {
    static const char *const bert_files[] = {"vocab.txt", "special_tokens_map.json", "tokenizer_config.json", NULL};
    static const char *const xlmr_files[] = {"sentencepiece.bpe.model", "special_tokens_map.json",
                                             "tokenizer_config.json", NULL};
    const char *text = "Hello , world ! Isn 't it a do not test ? Yes . I 'm fine , you 're ' ok ' .";
    static const struct {
        const char *golden;
        int flag;
        const char *want;
    } cases[] = {
        {"bert_e2e", 1, "hello, world! isn't it a do not test? yes. i'm fine, you're'ok '."},
        {"bert_e2e", 0, "hello, world! isn ' t it a do not test? yes. i ' m fine, you ' re ' ok '."},
        {"bert_e2e", -1, "hello, world! isn ' t it a do not test? yes. i ' m fine, you ' re ' ok '."},
        {"xlmr_e2e", 1, "Hello, world! Isn 't it a do not test? es. I'm fine, you're'ok '."},
        {"xlmr_e2e", 0, "Hello , world ! Isn 't it a do not test ? es . I 'm fine , you 're ' ok ' ."},
        {"xlmr_e2e", -1, "Hello , world ! Isn 't it a do not test ? es . I 'm fine , you 're ' ok ' ."},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const bool bert = !strcmp(cases[i].golden, "bert_e2e");
        char *got = round_trip(cleanup_folder(cases[i].golden, bert ? bert_files : xlmr_files, cases[i].flag), text);
        CHECKF(got && !strcmp(got, cases[i].want), "%s, clean_up_tokenization_spaces %d: got \"%s\", want \"%s\"",
               cases[i].golden, cases[i].flag, got ? got : "(error)", cases[i].want);
        free(got);
    }
}

TEST(uncased_added_tokens_match_any_case) {
    /* transformers lower-cases the text (all but special tokens) before it looks for added
     * tokens, so an uncased tokenizer's added "covid" also takes "COVID" */
    char dir[512], path[600], cmd[700];
    snprintf(dir, sizeof dir, "%s/uncased_added", tu_tmpdir());
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    CHECK(system(cmd) == 0);
    const char *vocab = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nx\n-\n1\n##9\n";
    snprintf(path, sizeof path, "%s/vocab.txt", dir);
    CHECK(tu_write_file(path, vocab, strlen(vocab)) == 0);
    const char *added = "{\"covid\": 9, \"<new>\": 10}";
    snprintf(path, sizeof path, "%s/added_tokens.json", dir);
    CHECK(tu_write_file(path, added, strlen(added)) == 0);
    b8_tokenizer *t = NULL;
    b8_err e = {0};
    CHECK(b8_tokenizer_load_dir(dir, NULL, &t, &e) == BERT8_OK);
    if (!t) {
        printf("  %s\n", e.msg);
        return;
    }
    CHECK_TOKS(t, "COVID-19 x<NEW>x Covid", "covid - 1 ##9 x <new> x covid");
    CHECK_STR(offs(t, "xCoViD", 6), "0-1 1-6");
    CHECK_TOKS(t, "[mask] [MASK]", "[UNK] [UNK] [UNK] [MASK]");
    b8_tokenizer_free(t);
}

/* ---- Threads ----------------------------------------------------------------------------- */

static void *encode_many(void *arg) {
    const b8_tokenizer *t = arg;
    b8_encoding out = {0};
    b8_err e = {0};
    long bad = 0;
    for (int i = 0; i < 300; i++) {
        const char *s = (i & 1) ? "The café's naïve coördinator left." : "東京 and 北京 — ok?";
        if (b8_tokenizer_encode(t, s, strlen(s), NULL, 0, NULL, &out, &e) != BERT8_OK ||
            out.lengths[0] < 5)
            bad++;
    }
    b8_encoding_free(&out);
    return (void *)bad;
}

TEST(one_tokenizer_shared_by_threads) {
    pthread_t th[4];
    const b8_tokenizer *ts[4] = {uncased, xlmr, uncased, xlmr};
    for (int i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, encode_many, (void *)ts[i]);
    for (int i = 0; i < 4; i++) {
        void *r = NULL;
        pthread_join(th[i], &r);
        CHECK(r == NULL);
    }
}

int main(void) {
    uncased = load_vocab("tokenizers/bert-base-uncased.vocab.txt", B8_TOK_WORDPIECE, 1);
    cased = load_vocab("tokenizers/bert-base-cased.vocab.txt", B8_TOK_WORDPIECE, 0);
    mbert = load_vocab("tokenizers/bert-base-multilingual-cased.vocab.txt", B8_TOK_WORDPIECE, 0);
    xlmr = load_vocab("tokenizers/xlm-roberta.sentencepiece.rebuilt.model", B8_TOK_UNIGRAM, -1);
    bert_e2e = load_dir("golden/models/bert_e2e");
    xlmr_e2e = load_dir("golden/models/xlmr_e2e");
    if (!uncased || !cased || !mbert || !xlmr || !bert_e2e || !xlmr_e2e) {
        printf("cannot load the tokenizers\n");
        return 1;
    }
    RUN(wordpiece_greedy_longest_match_with_hashes);
    RUN(wordpiece_splits_long_word_to_unk);
    RUN(wordpiece_unmatchable_piece_makes_word_unk);
    RUN(special_tokens_not_split_when_glued);
    RUN(lowercase_spellings_of_specials_are_text);
    RUN(uncased_strips_accents);
    RUN(cased_keeps_accents_and_case);
    RUN(combining_sequences_are_composed_nfc);
    RUN(options_control_accents_and_cjk);
    RUN(uncased_final_sigma_is_sigma);
    RUN(dotted_capital_i_lowers_to_i);
    RUN(cjk_split_per_char);
    RUN(control_and_format_chars_removed);
    RUN(unassigned_code_points_stay_in_their_word);
    RUN(cjk_extension_e_splits_from_2b920);
    RUN(unicode_whitespace_separates_words);
    RUN(punctuation_split);
    RUN(nul_byte_is_a_character);
    RUN(special_ids_come_from_vocab);
    RUN(token_id_round_trip);
    RUN(xlmr_fairseq_ids);
    RUN(unigram_whitespace_becomes_meta_space);
    RUN(unigram_nmt_nfkc_normalizes);
    RUN(unigram_unknown_runs_merge_into_one_unk);
    RUN(mask_lstrip_eats_space_before);
    RUN(offsets_point_into_text);
    RUN(word_ids_follow_pretokenized_words);
    RUN(pair_template_bert);
    RUN(pair_template_xlmr);
    RUN(empty_texts_give_only_specials);
    RUN(truncation_longest_first);
    RUN(truncation_only_second);
    RUN(overflow_windows_with_stride);
    RUN(overflow_windows_for_single_texts_and_batches);
    RUN(batch_padding_and_mask);
    RUN(invalid_utf8_rejected);
    RUN(load_errors_are_values);
    RUN(config_files_set_flags_and_special_tokens);
    RUN(uncased_added_tokens_match_any_case);
    RUN(decode_honours_clean_up_tokenization_spaces_as_transformers);
    RUN(one_tokenizer_shared_by_threads);
    b8_encoding_free(&enc);
    b8_tok_pieces_free(&tp);
    b8_tokenizer_free(uncased);
    b8_tokenizer_free(cased);
    b8_tokenizer_free(mbert);
    b8_tokenizer_free(xlmr);
    b8_tokenizer_free(bert_e2e);
    b8_tokenizer_free(xlmr_e2e);
    return tu_finish();
}
