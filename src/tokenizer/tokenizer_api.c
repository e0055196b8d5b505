/* tokenizer_api.c: the public tokenizer API (bert8.h) over the internal tokenizers. */
#include "bert8.h"
#include "tokenizer/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct bert8_tokenizer {
    b8_tokenizer *t;
};

static void put_err(char *err, size_t len, const b8_err *e) {
    if (err && len) snprintf(err, len, "%s", e->msg);
}

bert8_status bert8_tokenizer_load(const char *dir, bert8_tokenizer **out, char *err, size_t err_len) {
    b8_err e;
    b8_err_clear(&e);
    if (!out || !dir) {
        if (err && err_len) snprintf(err, err_len, "bert8_tokenizer_load: dir and out must not be NULL");
        return BERT8_ERR_INVALID_ARG;
    }
    *out = NULL;
    bert8_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return BERT8_ERR_NOMEM;
    bert8_status st = b8_tokenizer_load_dir(dir, NULL, &t->t, &e);
    if (st) {
        put_err(err, err_len, &e);
        free(t);
        return st;
    }
    *out = t;
    return BERT8_OK;
}

void bert8_tokenizer_free(bert8_tokenizer *t) {
    if (!t) return;
    b8_tokenizer_free(t->t);
    free(t);
}

int32_t bert8_tokenizer_special_id(const bert8_tokenizer *t, bert8_special_token which) {
    static const b8_special map[] = {B8_SPECIAL_UNK, B8_SPECIAL_CLS, B8_SPECIAL_SEP, B8_SPECIAL_PAD,
                                     B8_SPECIAL_MASK};
    if (!t || (unsigned)which >= sizeof map / sizeof *map) return -1;
    int32_t id = b8_tokenizer_special_id(t->t, map[which]);
    /* XLM-R names them <s> / </s> */
    if (id < 0 && which == BERT8_TOKEN_CLS) id = b8_tokenizer_special_id(t->t, B8_SPECIAL_BOS);
    if (id < 0 && which == BERT8_TOKEN_SEP) id = b8_tokenizer_special_id(t->t, B8_SPECIAL_EOS);
    return id;
}

const char *bert8_tokenizer_id_to_token(const bert8_tokenizer *t, int32_t id) {
    return t ? b8_tokenizer_id_to_token(t->t, id, NULL) : NULL;
}

int64_t bert8_tokenizer_vocab_size(const bert8_tokenizer *t) { return t ? b8_tokenizer_vocab_size(t->t) : 0; }

int64_t bert8_tokenizer_model_max_length(const bert8_tokenizer *t) {
    return t ? b8_tokenizer_model_max_length(t->t) : 0;
}

bert8_encode_params bert8_default_encode_params(void) {
    bert8_encode_params p = {1, BERT8_TRUNCATE_NONE, 0, 0, 0, 0, 0};
    return p;
}

static void publish(bert8_encoding *o, b8_encoding *in) {
    o->rows = in->rows;
    o->seq = in->seq;
    o->input_ids = in->input_ids;
    o->attention_mask = in->attention_mask;
    o->token_type_ids = in->token_type_ids;
    o->special_mask = in->special_mask;
    o->sequence_ids = in->sequence_ids;
    o->word_ids = in->word_ids;
    o->offsets = in->offsets;
    o->lengths = in->lengths;
    o->row_input = in->row_input;
    o->row_window = in->row_window;
    o->priv = in;
}

/* Encodes n inputs with explicit lengths (lens NULL: strlen). */
static bert8_status encode(const bert8_tokenizer *t, int64_t n, const char *const *texts, const size_t *tl,
                           const char *const *pairs, const size_t *pl, const bert8_encode_params *params,
                           bert8_encoding *out, char *err, size_t err_len) {
    b8_err e;
    b8_err_clear(&e);
    bert8_encode_params p = params ? *params : bert8_default_encode_params();
    if ((unsigned)p.truncation > BERT8_TRUNCATE_ONLY_SECOND) {
        if (err && err_len) snprintf(err, err_len, "bert8_encode: unknown truncation %d", (int)p.truncation);
        return BERT8_ERR_INVALID_ARG;
    }
    b8_encode_params ip = b8_default_encode_params();
    ip.add_special_tokens = p.add_special_tokens;
    static const b8_truncation tmap[] = {B8_TRUNC_NONE, B8_TRUNC_LONGEST_FIRST, B8_TRUNC_ONLY_FIRST,
                                         B8_TRUNC_ONLY_SECOND};
    ip.truncation = tmap[p.truncation];
    ip.max_length = p.max_length;
    ip.return_overflow = p.return_overflow;
    ip.stride = p.stride;
    ip.padding = p.pad_to_max_length ? B8_PAD_MAX_LENGTH : B8_PAD_LONGEST;
    ip.truncate_left = p.truncate_left != 0;
    b8_encoding *in = out->priv;
    if (!in) {
        memset(out, 0, sizeof *out);
        in = calloc(1, sizeof *in);
        if (!in) return BERT8_ERR_NOMEM;
    }
    bert8_status st = b8_tokenizer_encode_batch(t->t, n, texts, tl, pairs, pl, &ip, in, &e);
    publish(out, in);
    if (st) put_err(err, err_len, &e);
    return st;
}

bert8_status bert8_encode(const bert8_tokenizer *t, int64_t n, const char *const *texts,
                          const char *const *pairs, const bert8_encode_params *params,
                          bert8_encoding *out, char *err, size_t err_len) {
    if (!t || !out || (n > 0 && !texts) || n < 0) {
        if (err && err_len) snprintf(err, err_len, "bert8_encode: bad arguments");
        return BERT8_ERR_INVALID_ARG;
    }
    for (int64_t i = 0; i < n; i++)
        if (!texts[i]) {
            if (err && err_len) snprintf(err, err_len, "bert8_encode: text %lld is NULL", (long long)i);
            return BERT8_ERR_INVALID_ARG;
        }
    return encode(t, n, texts, NULL, pairs, NULL, params, out, err, err_len);
}

bert8_status bert8_encode_texts(const bert8_tokenizer *t, int64_t n, const bert8_text *texts,
                                const bert8_text *pairs, const bert8_encode_params *params,
                                bert8_encoding *out, char *err, size_t err_len) {
    if (!t || !out || (n > 0 && !texts) || n < 0) {
        if (err && err_len) snprintf(err, err_len, "bert8_encode_texts: bad arguments");
        return BERT8_ERR_INVALID_ARG;
    }
    size_t cnt = n > 0 ? (size_t)n : 1;
    const char **tp = malloc(cnt * sizeof *tp), **pp = pairs ? malloc(cnt * sizeof *pp) : NULL;
    size_t *tl = malloc(cnt * sizeof *tl), *pl = pairs ? malloc(cnt * sizeof *pl) : NULL;
    bert8_status st = BERT8_OK;
    if (!tp || !tl || (pairs && (!pp || !pl))) {
        st = BERT8_ERR_NOMEM;
        if (err && err_len) snprintf(err, err_len, "out of memory");
        goto out;
    }
    for (int64_t i = 0; i < n; i++) {
        if (!texts[i].data && texts[i].len) {
            st = BERT8_ERR_INVALID_ARG;
            if (err && err_len) snprintf(err, err_len, "bert8_encode_texts: text %lld is NULL", (long long)i);
            goto out;
        }
        tp[i] = texts[i].data ? texts[i].data : "";
        tl[i] = texts[i].len;
        if (pairs) {
            pp[i] = pairs[i].data;
            pl[i] = pairs[i].data ? pairs[i].len : 0;
        }
    }
    st = encode(t, n, tp, tl, pp, pl, params, out, err, err_len);
out:
    free(tp);
    free(pp);
    free(tl);
    free(pl);
    return st;
}

bert8_status bert8_decode(const bert8_tokenizer *t, const int32_t *ids, int64_t n, int skip_special_tokens,
                          char **out, char *err, size_t err_len) {
    if (out) *out = NULL;
    if (!t || !out) {
        if (err && err_len) snprintf(err, err_len, "bert8_decode: tokenizer and out must not be NULL");
        return BERT8_ERR_INVALID_ARG;
    }
    b8_err e;
    b8_err_clear(&e);
    bert8_status st = b8_tokenizer_decode(t->t, ids, n, skip_special_tokens != 0, out, &e);
    if (st) put_err(err, err_len, &e);
    return st;
}

int bert8_tokenizer_is_special(const bert8_tokenizer *t, int32_t id) {
    return t && b8_tokenizer_is_special(t->t, id);
}

void bert8_encoding_free(bert8_encoding *enc) {
    if (!enc || !enc->priv) return;
    b8_encoding_free(enc->priv);
    free(enc->priv);
    memset(enc, 0, sizeof *enc);
}

bert8_batch bert8_encoding_batch(const bert8_encoding *enc, int64_t row0, int64_t n) {
    bert8_batch b = {0, 0, NULL, NULL, NULL};
    if (!enc || row0 < 0 || n <= 0 || row0 + n > enc->rows) return b;
    b.batch = n;
    b.seq = enc->seq;
    b.input_ids = enc->input_ids + row0 * enc->seq;
    b.attention_mask = enc->attention_mask + row0 * enc->seq;
    b.token_type_ids = enc->token_type_ids + row0 * enc->seq;
    return b;
}
