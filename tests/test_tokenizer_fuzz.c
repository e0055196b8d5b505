/* test_tokenizer_fuzz.c: random bytes, random Unicode and random encode parameters never
 * crash the tokenizers (run it under ASan/UBSan too), and every result keeps its invariants:
 * ids in range, offsets inside the text and in order, word ids counting up, rows consistent
 * with their template, truncation limits respected. Deterministic seed, bounded counts. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tokenizer/tokenizer.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
static uint32_t below(uint32_t n) {
    return (uint32_t)(rnd() % n);
}

static size_t put_cp(uint32_t cp, char *out) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* A random scalar value, biased toward what tokenizers treat specially. */
static uint32_t rand_cp(void) {
    static const uint32_t picks[] = {0x20,   0x09,   0x0A,   0x00,   0x7F,   0x85,   0xA0,
                                     0xAD,   0x130,  0x3A3,  0x301,  0x200B, 0x200D, 0x2028,
                                     0x3000, 0xFEFF, 0xFFFD, 0xFB01, 0xBD,   0x1100, 0x1161,
                                     0x11A8, 0xF900, 0x2581, 0xFE0F, 0xE000, 0xFFFF, 0x10FFFF};
    switch (below(10)) {
    case 0:
    case 1:
    case 2:
        return 0x20 + below(0x5F); /* printable ASCII */
    case 3:
        return picks[below(sizeof picks / sizeof picks[0])];
    case 4:
        return 0x300 + below(0x70); /* combining marks */
    case 5:
        return 0x4E00 + below(0x5200); /* CJK */
    case 6:
        return 0xAC00 + below(0x2BA4); /* Hangul syllables */
    case 7:
        return below(0x800);
    case 8: {
        uint32_t cp = below(0x10000);
        return (cp >= 0xD800 && cp < 0xE000) ? 0x41 : cp;
    }
    default:
        return 0x10000 + below(0x100000);
    }
}

static size_t rand_text(char *buf, size_t cap) {
    size_t n = 0, want = below(4) ? below(40) : below(400);
    static const char *const specials[] = {"[CLS]",  "[SEP]", "[MASK]", "<s>",   "</s>",
                                           "<mask>", "<pad>", "<unk>",  "[UNK]", "##"};
    for (size_t i = 0; i < want && n + 8 < cap; i++) {
        if (below(30) == 0) {
            const char *s = specials[below(sizeof specials / sizeof specials[0])];
            size_t l = strlen(s);
            if (n + l < cap) {
                memcpy(buf + n, s, l);
                n += l;
            }
            continue;
        }
        n += put_cp(rand_cp(), buf + n);
    }
    return n;
}

static size_t rand_bytes(char *buf, size_t cap) {
    size_t n = below(64);
    if (n > cap) n = cap;
    for (size_t i = 0; i < n; i++) {
        uint32_t r = below(4);
        buf[i] = (char)(r == 0 ? 0x80 + below(0x80) : r == 1 ? 0xC0 + below(0x40) : below(0x100));
    }
    return n;
}

static int check_pieces(const b8_tokenizer *t, const b8_tok_pieces *p, size_t len) {
    int64_t vs = b8_tokenizer_vocab_size(t);
    int32_t last_word = -1;
    int64_t last_start = 0;
    for (int64_t i = 0; i < p->n; i++) {
        int64_t s = p->offsets[2 * i], e = p->offsets[2 * i + 1];
        if (p->ids[i] < 0 || p->ids[i] >= vs) return 0;
        if (s < 0 || s > e || e > (int64_t)len || s < last_start) return 0;
        if (p->word_ids[i] < last_word || p->word_ids[i] > last_word + 1) return 0;
        if (p->str_off[i + 1] <= p->str_off[i]) return 0;
        last_start = s;
        last_word = p->word_ids[i];
    }
    return 1;
}

static void fuzz_tokenize(const b8_tokenizer *t, int rounds) {
    static char buf[4096];
    b8_tok_pieces p = {0};
    int bad_ok = 0, bad_err = 0;
    for (int r = 0; r < rounds; r++) {
        size_t n = (r & 1) ? rand_bytes(buf, sizeof buf) : rand_text(buf, sizeof buf);
        b8_err e = {0};
        bert8_status st = b8_tokenizer_tokenize(t, buf, n, &p, &e);
        if (st == BERT8_OK) {
            if (!check_pieces(t, &p, n)) bad_ok++;
        } else if (st != BERT8_ERR_ENCODING || !strstr(e.msg, "byte offset") || !(r & 1)) {
            bad_err++;
            if (bad_err < 3) printf("  round %d: %s\n", r, e.msg);
        }
    }
    CHECK(bad_ok == 0);
    CHECK(bad_err == 0);
    b8_tok_pieces_free(&p);
}

/* Every row must be the template around (a window of) its texts. */
static int check_rows(const b8_tokenizer *t, const b8_encoding *enc, const b8_encode_params *ep,
                      const size_t *la, const size_t *lb, int have_pair) {
    int64_t vs = b8_tokenizer_vocab_size(t);
    for (int64_t r = 0; r < enc->rows; r++) {
        int64_t in = enc->row_input[r];
        if (enc->lengths[r] > enc->seq) return 0;
        if (ep->truncation != B8_TRUNC_NONE && ep->max_length > 0 &&
            enc->lengths[r] > ep->max_length && ep->truncation != B8_TRUNC_LONGEST_FIRST)
            return 0;
        int32_t last_seq = -2;
        for (int64_t i = 0; i < enc->seq; i++) {
            size_t k = (size_t)(r * enc->seq + i);
            int valid = i < enc->lengths[r];
            if (enc->attention_mask[k] != valid) return 0;
            if (enc->input_ids[k] < 0 || enc->input_ids[k] >= vs) return 0;
            int32_t sq = enc->sequence_ids[k];
            if (!valid || enc->special_mask[k]) {
                if (sq != -1 || enc->word_ids[k] != -1) return 0;
                continue;
            }
            if (sq < 0 || sq > 1 || (sq == 1 && !have_pair) || sq < last_seq) return 0;
            last_seq = sq;
            size_t len = sq ? lb[in] : la[in];
            if (enc->offsets[2 * k] < 0 || enc->offsets[2 * k] > enc->offsets[2 * k + 1] ||
                enc->offsets[2 * k + 1] > (int64_t)len)
                return 0;
        }
    }
    return 1;
}

static void fuzz_encode(const b8_tokenizer *t, int rounds) {
    static char bufs[4][2048];
    b8_encoding enc = {0};
    int bad = 0, errors = 0;
    for (int r = 0; r < rounds; r++) {
        int n = 1 + (int)below(2), pair = below(2);
        const char *texts[2], *pairs[2];
        size_t la[2], lb[2];
        for (int i = 0; i < n; i++) {
            la[i] = rand_text(bufs[2 * i], sizeof bufs[0]);
            lb[i] = rand_text(bufs[2 * i + 1], sizeof bufs[0]);
            texts[i] = bufs[2 * i];
            pairs[i] = bufs[2 * i + 1];
        }
        b8_encode_params ep = b8_default_encode_params();
        ep.add_special_tokens = below(5) != 0;
        ep.truncation = (b8_truncation)below(4);
        ep.max_length = below(3) ? 4 + below(60) : 0;
        ep.return_overflow = below(2);
        ep.stride = below(4);
        ep.padding = (b8_padding)below(2);
        ep.pad_to_multiple_of = below(3) ? 0 : 1 + below(8);
        b8_err e = {0};
        bert8_status st =
            b8_tokenizer_encode_batch(t, n, texts, la, pair ? pairs : NULL, lb, &ep, &enc, &e);
        if (st == BERT8_OK) {
            if (!check_rows(t, &enc, &ep, la, lb, pair)) {
                bad++;
                if (bad < 3) printf("  round %d: bad rows\n", r);
            }
        } else if (st != BERT8_ERR_TOO_LARGE && st != BERT8_ERR_INVALID_ARG &&
                   st != BERT8_ERR_UNSUPPORTED) {
            bad++;
            printf("  round %d: unexpected %s: %s\n", r, bert8_status_string(st), e.msg);
        } else {
            errors++;
        }
    }
    CHECK(bad == 0);
    CHECK(errors < rounds); /* most parameter draws must be accepted */
    b8_encoding_free(&enc);
}

static b8_tokenizer *load(const char *rel, int dir, b8_tok_kind kind, int lower) {
    b8_tokenizer *t = NULL;
    b8_err e = {0};
    b8_tok_options o = b8_tok_default_options();
    o.lowercase = lower;
    bert8_status st = dir ? b8_tokenizer_load_dir(tu_shared_path(rel), NULL, &t, &e)
                          : b8_tokenizer_load_files(kind, tu_shared_path(rel), &o, &t, &e);
    if (st != BERT8_OK) printf("  cannot load %s: %s\n", rel, e.msg);
    return t;
}

static b8_tokenizer *tk[4];

TEST(random_bytes_and_unicode_never_crash_tokenize) {
    for (int i = 0; i < 4; i++)
        if (tk[i]) fuzz_tokenize(tk[i], 1500);
}

TEST(random_encode_parameters_keep_row_invariants) {
    for (int i = 0; i < 4; i++)
        if (tk[i]) fuzz_encode(tk[i], 600);
}

TEST(long_text_in_one_call) {
    size_t cap = 200000, n = 0;
    char *buf = malloc(cap);
    while (n + 8 < cap)
        n += put_cp(rand_cp(), buf + n);
    b8_tok_pieces p = {0};
    b8_err e = {0};
    for (int i = 0; i < 4; i++) {
        if (!tk[i]) continue;
        CHECK(b8_tokenizer_tokenize(tk[i], buf, n, &p, &e) == BERT8_OK);
        CHECK(p.n > 1000 && check_pieces(tk[i], &p, n));
    }
    b8_tok_pieces_free(&p);
    free(buf);
}

/* On printable ASCII nothing is normalized away, so each token's span, cut from the text,
 * must read as the token: exactly (cased WordPiece, without "##"), lower-cased (uncased), or
 * without the meta space (Unigram). */
static int span_reads_as_token(const char *text, const b8_tok_pieces *p, int64_t i, int mode) {
    const char *tok = p->strings + p->str_off[i];
    const char *span = text + p->offsets[2 * i];
    size_t sl = (size_t)(p->offsets[2 * i + 1] - p->offsets[2 * i]);
    if (!strcmp(tok, "[UNK]") || !strcmp(tok, "<unk>")) return sl > 0;
    if (mode == 2 && !strncmp(tok, "\xe2\x96\x81", 3)) {
        tok += 3;
        if (!*tok) return sl <= 1; /* a lone meta space covers its space or nothing */
    }
    if (mode != 2 && !strncmp(tok, "##", 2) && i > 0 && p->word_ids[i] == p->word_ids[i - 1])
        tok += 2;
    if (strlen(tok) != sl) return 0;
    for (size_t k = 0; k < sl; k++) {
        char c = span[k];
        if (mode == 1 && c >= 'A' && c <= 'Z') c += 32;
        if (c != tok[k]) return 0;
    }
    return 1;
}

TEST(offsets_match_token_text_on_ascii) {
    static char buf[512];
    b8_tok_pieces p = {0};
    int modes[4] = {1, 0, 2, 2}; /* uncased, cased, unigram, unigram */
    for (int i = 0; i < 4; i++) {
        if (!tk[i]) continue;
        int bad = 0;
        for (int r = 0; r < 800; r++) {
            size_t n = below(80);
            for (size_t k = 0; k < n; k++)
                buf[k] = below(4) ? (char)(0x20 + below(0x5F)) : " aeiou"[below(6)];
            b8_err e = {0};
            if (b8_tokenizer_tokenize(tk[i], buf, n, &p, &e) != BERT8_OK) {
                bad++;
                continue;
            }
            for (int64_t k = 0; k < p.n; k++) {
                if (span_reads_as_token(buf, &p, k, modes[i])) continue;
                if (bad++ < 3)
                    printf("  tokenizer %d: \"%.*s\" token %lld \"%s\" at %lld-%lld\n", i, (int)n,
                           buf, (long long)k, p.strings + p.str_off[k], (long long)p.offsets[2 * k],
                           (long long)p.offsets[2 * k + 1]);
            }
        }
        CHECK(bad == 0);
    }
    b8_tok_pieces_free(&p);
}

int main(void) {
    tk[0] = load("tokenizers/bert-base-uncased.vocab.txt", 0, B8_TOK_WORDPIECE, 1);
    tk[1] = load("tokenizers/bert-base-multilingual-cased.vocab.txt", 0, B8_TOK_WORDPIECE, 0);
    tk[2] = load("tokenizers/xlm-roberta.sentencepiece.rebuilt.model", 0, B8_TOK_UNIGRAM, -1);
    tk[3] = load("golden/models/xlmr_e2e", 1, B8_TOK_UNIGRAM, -1);
    for (int i = 0; i < 4; i++)
        CHECK(tk[i] != NULL);
    RUN(random_bytes_and_unicode_never_crash_tokenize);
    RUN(random_encode_parameters_keep_row_invariants);
    RUN(long_text_in_one_call);
    RUN(offsets_match_token_text_on_ascii);
    for (int i = 0; i < 4; i++)
        b8_tokenizer_free(tk[i]);
    return tu_finish();
}
