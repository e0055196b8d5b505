/* spm_model.c: a small, bounds-checked reader of the protobuf wire format for sentencepiece's
 * ModelProto (pieces, trainer_spec, normalizer_spec), and the Unigram set-up that follows
 * from it (fairseq ids as XLMRobertaTokenizer assigns them, piece trie, charsmap). */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/spm_model.h"
#include "tokenizer/tok_object.h"
#include "tokenizer/unigram.h"

typedef struct pb {
    const uint8_t *p, *end, *start;
} pb;

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

static bool pb_varint(pb *r, uint64_t *v) {
    uint64_t x = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end) return false;
        uint8_t b = *r->p++;
        x |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return true;
        }
    }
    return false;
}

/* Reads one field header and value. LEN values come back as a sub-reader in *sub. */
static bool pb_field(pb *r, uint32_t *field, int *wt, uint64_t *v, pb *sub) {
    uint64_t key;
    if (!pb_varint(r, &key)) return false;
    *field = (uint32_t)(key >> 3);
    *wt = (int)(key & 7);
    switch (*wt) {
    case WT_VARINT:
        return pb_varint(r, v);
    case WT_I64:
        if (r->end - r->p < 8) return false;
        memcpy(v, r->p, 8);
        r->p += 8;
        return true;
    case WT_I32: {
        if (r->end - r->p < 4) return false;
        uint32_t w;
        memcpy(&w, r->p, 4);
        *v = w;
        r->p += 4;
        return true;
    }
    case WT_LEN: {
        uint64_t len;
        if (!pb_varint(r, &len) || len > (uint64_t)(r->end - r->p)) return false;
        sub->start = r->start;
        sub->p = r->p;
        sub->end = r->p + len;
        r->p += len;
        *v = len;
        return true;
    }
    default:
        return false; /* groups (3, 4) never appear in ModelProto */
    }
}

#define BAD(what)                                                                                  \
    b8_fail(e, BERT8_ERR_FORMAT, "%s: malformed sentencepiece model (%s) at byte offset %td",      \
            path, what, (const uint8_t *)r.p - data)

typedef struct spm_piece {
    const char *s;
    size_t len;
    float score;
    int type;
    int32_t final_id;
} spm_piece;

bert8_status b8_spm_parse(b8_tokenizer *t, const uint8_t *data, size_t n, const char *path,
                          b8_err *e) {
    pb r = {data, data + n, data};
    spm_piece *pieces = NULL;
    size_t np = 0, cap = 0;
    const uint8_t *charsmap = NULL;
    size_t charsmap_len = 0;
    bool dummy = true, extra_ws = true, escape = true;
    uint64_t model_type = 1, byte_fallback = 0, ws_suffix = 0;
    bert8_status st = BERT8_OK;
    uint32_t f;
    int wt;
    uint64_t v;
    pb sub;
    while (r.p < r.end) {
        if (!pb_field(&r, &f, &wt, &v, &sub)) {
            st = BAD("truncated field");
            goto out;
        }
        if (f == 1 && wt == WT_LEN) {
            spm_piece sp = {NULL, 0, 0.0f, B8_SP_NORMAL, 0};
            bool has_piece = false;
            pb q = sub;
            while (q.p < q.end) {
                pb s2;
                uint32_t f2;
                int w2;
                uint64_t v2;
                if (!pb_field(&q, &f2, &w2, &v2, &s2)) {
                    r.p = q.p;
                    st = BAD("truncated piece");
                    goto out;
                }
                if (f2 == 1 && w2 == WT_LEN) {
                    sp.s = (const char *)s2.p;
                    sp.len = (size_t)(s2.end - s2.p);
                    has_piece = true;
                } else if (f2 == 2 && w2 == WT_I32) {
                    uint32_t bits = (uint32_t)v2;
                    memcpy(&sp.score, &bits, 4);
                } else if (f2 == 3 && w2 == WT_VARINT) {
                    sp.type = (int)v2;
                }
            }
            if (!has_piece || sp.len == 0) {
                st = b8_fail(e, BERT8_ERR_FORMAT, "%s: sentencepiece piece %zu is empty", path, np);
                goto out;
            }
            if (sp.type < B8_SP_NORMAL || sp.type > B8_SP_BYTE) {
                st = b8_fail(e, BERT8_ERR_FORMAT, "%s: piece %zu has unknown type %d", path, np,
                             sp.type);
                goto out;
            }
            if (np + 2 >= (size_t)B8_TOK_MAX_VOCAB) {
                st = b8_fail(e, BERT8_ERR_TOO_LARGE,
                             "%s: more than %lld sentencepiece pieces (the limit)", path,
                             (long long)B8_TOK_MAX_VOCAB - 2);
                goto out;
            }
            if (np == cap) {
                size_t nc = cap ? cap * 2 : 1024;
                spm_piece *npcs = realloc(pieces, nc * sizeof *npcs);
                if (!npcs) {
                    st = b8_fail(e, BERT8_ERR_NOMEM, "out of memory reading %s", path);
                    goto out;
                }
                pieces = npcs;
                cap = nc;
            }
            pieces[np++] = sp;
        } else if (f == 2 && wt == WT_LEN) {
            pb q = sub;
            while (q.p < q.end) {
                pb s2;
                uint32_t f2;
                int w2;
                uint64_t v2;
                if (!pb_field(&q, &f2, &w2, &v2, &s2)) {
                    r.p = q.p;
                    st = BAD("truncated trainer_spec");
                    goto out;
                }
                if (w2 != WT_VARINT) continue;
                if (f2 == 3) model_type = v2;
                if (f2 == 24) ws_suffix = v2;
                if (f2 == 35) byte_fallback = v2;
            }
        } else if (f == 3 && wt == WT_LEN) {
            pb q = sub;
            while (q.p < q.end) {
                pb s2;
                uint32_t f2;
                int w2;
                uint64_t v2;
                if (!pb_field(&q, &f2, &w2, &v2, &s2)) {
                    r.p = q.p;
                    st = BAD("truncated normalizer_spec");
                    goto out;
                }
                if (f2 == 2 && w2 == WT_LEN) {
                    charsmap = s2.p;
                    charsmap_len = (size_t)(s2.end - s2.p);
                } else if (w2 == WT_VARINT && f2 == 3) {
                    dummy = v2 != 0;
                } else if (w2 == WT_VARINT && f2 == 4) {
                    extra_ws = v2 != 0;
                } else if (w2 == WT_VARINT && f2 == 5) {
                    escape = v2 != 0;
                }
            }
        }
    }
    if (np == 0) {
        st = b8_fail(e, BERT8_ERR_FORMAT,
                     "%s: no sentencepiece pieces (not a sentencepiece model?)", path);
        goto out;
    }
    if (np < 3) {
        /* XLMRobertaTokenizer's fixed ids (<s> <pad> </s> <unk>) sit over spm pieces 0..2 */
        st = b8_fail(e, BERT8_ERR_FORMAT,
                     "%s: %zu sentencepiece pieces; an XLM-R model has at least <unk>, <s> and "
                     "</s>",
                     path, np);
        goto out;
    }
    if (model_type != 1) {
        st = b8_fail(e, BERT8_ERR_UNSUPPORTED,
                     "%s: sentencepiece model_type %llu is not Unigram (1)", path,
                     (unsigned long long)model_type);
        goto out;
    }
    if (byte_fallback || ws_suffix) {
        st = b8_fail(e, BERT8_ERR_UNSUPPORTED, "%s: sentencepiece %s is not supported", path,
                     byte_fallback ? "byte_fallback" : "treat_whitespace_as_suffix");
        goto out;
    }

    /* XLMRobertaTokenizer: <s>=0 <pad>=1 </s>=2 <unk>=3, every other piece spm id + 1,
     * <mask> right after the last piece. */
    {
        int64_t vs = (int64_t)np + 2;
        const char **toks = calloc((size_t)vs, sizeof *toks);
        size_t *lens = calloc((size_t)vs, sizeof *lens);
        if (!toks || !lens) {
            free(toks);
            free(lens);
            st = b8_fail(e, BERT8_ERR_NOMEM, "out of memory reading %s", path);
            goto out;
        }
        static const char *const fixed[4] = {"<s>", "<pad>", "</s>", "<unk>"};
        for (size_t i = 1; i < np; i++) {
            toks[i + 1] = pieces[i].s;
            lens[i + 1] = pieces[i].len;
        }
        for (int i = 0; i < 4; i++) {
            toks[i] = fixed[i];
            lens[i] = strlen(fixed[i]);
        }
        toks[np + 1] = "<mask>";
        lens[np + 1] = 6;
        st = b8_tok_set_tokens(t, toks, lens, vs, e);
        free(toks);
        free(lens);
        if (st != BERT8_OK) {
            b8_wrap(e, "%s", path);
            goto out;
        }
        t->ug.score = calloc((size_t)vs, sizeof *t->ug.score);
        t->ug.type = calloc((size_t)vs, sizeof *t->ug.type);
        if (!t->ug.score || !t->ug.type) {
            st = b8_fail(e, BERT8_ERR_NOMEM, "out of memory reading %s", path);
            goto out;
        }
        t->ug.fairseq = true;
        t->ug.spm_size = (int64_t)np;
        t->ug.unk_id = -1;
        int nres = 0;
        for (size_t i = 0; i < np; i++)
            if (pieces[i].type == B8_SP_CONTROL || pieces[i].type == B8_SP_UNKNOWN) nres++;
        t->ug.reserved = calloc((size_t)nres + 1, sizeof *t->ug.reserved);
        t->ug.reserved_id = calloc((size_t)nres + 1, sizeof *t->ug.reserved_id);
        if (!t->ug.reserved || !t->ug.reserved_id) {
            st = b8_fail(e, BERT8_ERR_NOMEM, "out of memory reading %s", path);
            goto out;
        }
        for (size_t i = 0; i < np; i++) {
            const spm_piece *sp = &pieces[i];
            int32_t id = (int32_t)i + 1;
            for (int k = 0; k < 4; k++)
                if (sp->len == strlen(fixed[k]) && !memcmp(sp->s, fixed[k], sp->len)) id = k;
            pieces[i].final_id = id;
            if (sp->type == B8_SP_UNKNOWN) {
                if (t->ug.unk_id >= 0) {
                    st = b8_fail(e, BERT8_ERR_FORMAT, "%s: more than one unknown piece (%zu)", path,
                                 i);
                    goto out;
                }
                /* HF maps every piece sentencepiece calls unknown to the <unk> id */
                t->ug.unk_id = 3;
                id = 3;
                pieces[i].final_id = 3;
            }
            t->ug.score[id] = sp->score;
            t->ug.type[id] = (uint8_t)sp->type;
            if (sp->type == B8_SP_CONTROL || sp->type == B8_SP_UNKNOWN) {
                char *c = malloc(sp->len + 1);
                if (!c) {
                    st = b8_fail(e, BERT8_ERR_NOMEM, "out of memory reading %s", path);
                    goto out;
                }
                memcpy(c, sp->s, sp->len);
                c[sp->len] = 0;
                t->ug.reserved[t->ug.n_reserved] = c;
                t->ug.reserved_id[t->ug.n_reserved++] = id;
            }
        }
        if (t->ug.unk_id < 0) {
            st = b8_fail(e, BERT8_ERR_FORMAT, "%s: the model defines no unknown piece", path);
            goto out;
        }
    }
    t->ug.add_dummy_prefix = dummy;
    t->ug.remove_extra_ws = extra_ws;
    t->ug.escape_ws = escape;
    st = b8_ug_set_charsmap(t, charsmap, charsmap_len, path, e);
    if (st != BERT8_OK) goto out;

    st = b8_ug_finish(t, e);
    if (st != BERT8_OK) b8_wrap(e, "%s", path);
out:
    free(pieces);
    return st;
}
