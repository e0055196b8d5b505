/* fuzz_tok.h: the documented invariants of tokenizer output, checked by the tokenizer
 * harnesses after every successful call (tokenizer.h is the reference):
 *  - ids in [0, vocab_size);
 *  - offsets [start, end) inside the text, start <= end, starts non-decreasing (not for BPE:
 *    trimming a token's leading space can move its start past the next token's);
 *  - word ids non-decreasing and non-negative; token strings NUL-terminated in order;
 *  - encodings: real tokens then padding (pad id, attention 0, special 1, sequence -1, word -1,
 *    offsets 0,0); template tokens special with offsets 0,0; truncation and padding lengths as
 *    requested. */
#ifndef BERT8_FUZZ_TOK_H
#define BERT8_FUZZ_TOK_H

#include "fuzz_util.h"
#include "tokenizer/tokenizer.h"

static inline void fuzz_check_pieces(const b8_tokenizer *t, const b8_tok_pieces *p, size_t len) {
    int64_t vs = b8_tokenizer_vocab_size(t);
    for (int64_t i = 0; i < p->n; i++) {
        FUZZ_CHECK(p->ids[i] >= 0 && p->ids[i] < vs);
        int64_t s = p->offsets[2 * i], e = p->offsets[2 * i + 1];
        FUZZ_CHECK(s >= 0 && s <= e && (size_t)e <= len);
        if (i && b8_tokenizer_kind(t) != B8_TOK_BPE) FUZZ_CHECK(s >= p->offsets[2 * i - 2]);
        FUZZ_CHECK(p->word_ids[i] >= 0 && (i == 0 || p->word_ids[i] >= p->word_ids[i - 1]));
        FUZZ_CHECK(p->str_off[i + 1] > p->str_off[i]);
        FUZZ_CHECK(p->strings[p->str_off[i + 1] - 1] == '\0');
    }
}

/* Tokenizes text (if valid UTF-8) and a few fixed strings with t; checks every result. */
static inline void fuzz_exercise(const b8_tokenizer *t, const char *text, size_t len) {
    static const char *const fixed[] = {
        "Hello, world! [CLS] x[MASK]y <mask> <s></s> ##ing",
        "  \t\n caf\xc3\xa9 \xe6\x9d\xb1\xe4\xba\xac \xf0\x9f\x98\x80 \xe2\x96\x81 _ab a b o w",
        ""};
    b8_tok_pieces p = {0};
    b8_err e;
    for (int i = 0; i < 4; i++) {
        const char *s = i < 3 ? fixed[i] : text;
        size_t n = i < 3 ? strlen(fixed[i]) : len;
        if (!s) continue;
        bert8_status st = b8_tokenizer_tokenize(t, s, n, &p, &e);
        if (st == BERT8_OK) fuzz_check_pieces(t, &p, n);
        else FUZZ_CHECK(st == BERT8_ERR_ENCODING || st == BERT8_ERR_TOO_LARGE);
    }
    b8_tok_pieces_free(&p);
    /* every id back to a string and, for most, to the same id */
    int64_t vs = b8_tokenizer_vocab_size(t);
    for (int64_t id = 0; id < vs && id < 512; id++) {
        size_t l = 0;
        const char *s = b8_tokenizer_id_to_token(t, (int32_t)id, &l);
        FUZZ_CHECK(s != NULL && strlen(s) <= l);
        int32_t back = b8_tokenizer_token_to_id(t, s, l);
        FUZZ_CHECK(back >= -1 && back < vs);
    }
    for (int k = 0; k < B8_SPECIAL_COUNT; k++) {
        int32_t id = b8_tokenizer_special_id(t, (b8_special)k);
        FUZZ_CHECK(id >= -1 && id < vs);
    }
    FUZZ_CHECK(b8_tokenizer_id_to_token(t, (int32_t)vs, NULL) == NULL);
    FUZZ_CHECK(b8_tokenizer_id_to_token(t, -1, NULL) == NULL);
}

#endif
