/* test_tokenizer_golden.c: every record of golden/tokenizers/<name>.jsonl (four real vocabularies,
 * singles and pairs) must give the reference's tokens, ids, token types and id strings, and
 * the *_e2e model folders must turn their cases' texts into exactly the cases' input_ids. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tokenizer/tokenizer.h"

/* cJSON ends strings at "\u0000", and the goldens have a NUL inside a text, so strings are
 * decoded here: JSON string at *p (at its opening quote) into a malloc'd buffer. */
static char *jstring(const char **p, size_t *len) {
    const char *s = *p;
    if (*s != '"') return NULL;
    s++;
    size_t cap = strlen(s) + 1, n = 0;
    char *out = malloc(cap);
    while (*s && *s != '"') {
        unsigned cp;
        if (*s != '\\') {
            out[n++] = *s++;
            continue;
        }
        s++;
        switch (*s) {
        case 'n':
            cp = '\n';
            break;
        case 't':
            cp = '\t';
            break;
        case 'r':
            cp = '\r';
            break;
        case 'b':
            cp = '\b';
            break;
        case 'f':
            cp = '\f';
            break;
        case 'u': {
            cp = (unsigned)strtoul((char[5]){s[1], s[2], s[3], s[4], 0}, NULL, 16);
            s += 4;
            if (cp >= 0xD800 && cp < 0xDC00 && s[1] == '\\' && s[2] == 'u') {
                unsigned lo = (unsigned)strtoul((char[5]){s[3], s[4], s[5], s[6], 0}, NULL, 16);
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                s += 6;
            }
            break;
        }
        default:
            cp = (unsigned char)*s;
        }
        s++;
        if (cp < 0x80) {
            out[n++] = (char)cp;
        } else if (cp < 0x800) {
            out[n++] = (char)(0xC0 | cp >> 6);
            out[n++] = (char)(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            out[n++] = (char)(0xE0 | cp >> 12);
            out[n++] = (char)(0x80 | (cp >> 6 & 0x3F));
            out[n++] = (char)(0x80 | (cp & 0x3F));
        } else {
            out[n++] = (char)(0xF0 | cp >> 18);
            out[n++] = (char)(0x80 | (cp >> 12 & 0x3F));
            out[n++] = (char)(0x80 | (cp >> 6 & 0x3F));
            out[n++] = (char)(0x80 | (cp & 0x3F));
        }
    }
    out[n] = 0;
    *len = n;
    *p = *s ? s + 1 : s;
    return out;
}

/* The raw value of top-level key in a one-line JSON object (NULL when absent). */
static const char *jfind(const char *line, const char *key) {
    const char *p = strchr(line, '{');
    if (!p) return NULL;
    p++;
    for (;;) {
        while (*p == ' ' || *p == ',')
            p++;
        if (*p != '"') return NULL;
        size_t kl = 0;
        char *k = jstring(&p, &kl);
        while (*p == ' ' || *p == ':')
            p++;
        int hit = k && !strcmp(k, key);
        free(k);
        if (hit) return p;
        int depth = 0; /* skip the value */
        do {
            if (*p == '"') {
                size_t l = 0;
                free(jstring(&p, &l));
                continue;
            }
            if (*p == '[' || *p == '{') depth++;
            if (*p == ']' || *p == '}') depth--;
            if (depth < 0 || !*p) return NULL;
            p++;
        } while (depth > 0 || (*p != ',' && *p != '}'));
    }
}

/* Strings of a JSON array value at p: a NUL-separated buffer and the count. */
typedef struct jstrs {
    char *buf;
    size_t *len, *off;
    int n;
} jstrs;

static void jstrs_free(jstrs *s) {
    free(s->buf);
    free(s->len);
    free(s->off);
}

static jstrs jarray(const char *p) {
    jstrs r = {0};
    if (!p || *p != '[') return r;
    size_t cap = strlen(p) + 1, at = 0;
    r.buf = malloc(cap);
    r.len = malloc(cap * sizeof *r.len);
    r.off = malloc(cap * sizeof *r.off);
    p++;
    while (*p && *p != ']') {
        while (*p == ' ' || *p == ',')
            p++;
        if (*p != '"') break;
        size_t l = 0;
        char *s = jstring(&p, &l);
        memcpy(r.buf + at, s, l + 1);
        r.off[r.n] = at;
        r.len[r.n++] = l;
        at += l + 1;
        free(s);
        while (*p == ' ' || *p == ',')
            p++;
    }
    return r;
}

/* Compares a JSON array of strings with the pieces; prints the first difference. */
static int same_tokens(const char *want_json, const b8_tok_pieces *got, const char *id) {
    jstrs w = jarray(want_json);
    int ok = 1;
    if (w.n != got->n) {
        printf("  %s: %d tokens expected, %lld produced\n", id, w.n, (long long)got->n);
        ok = 0;
    }
    for (int i = 0; ok && i < w.n; i++) {
        const char *g = got->strings + got->str_off[i];
        size_t gl = (size_t)(got->str_off[i + 1] - got->str_off[i] - 1);
        if (w.len[i] != gl || memcmp(w.buf + w.off[i], g, gl)) {
            printf("  %s: token %d is \"%s\", expected \"%s\"\n", id, i, g, w.buf + w.off[i]);
            ok = 0;
        }
    }
    jstrs_free(&w);
    return ok;
}

static int same_ints(const cJSON *want, const int32_t *got, int64_t n, const char *what,
                     const char *id) {
    int wn = cJSON_GetArraySize(want);
    if (wn != n) {
        printf("  %s: %s has %d entries expected, %lld produced\n", id, what, wn, (long long)n);
        return 0;
    }
    int i = 0;
    for (const cJSON *it = want->child; it; it = it->next, i++) {
        if (!cJSON_IsNumber(it) || it->valueint != got[i]) {
            printf("  %s: %s[%d] is %d, expected %d\n", id, what, i, got[i],
                   cJSON_IsNumber(it) ? it->valueint : -999);
            return 0;
        }
    }
    return 1;
}

/* Runs every record of one jsonl file; returns the number of records that passed. */
static int run_jsonl(const char *file, b8_tokenizer *t, int *records) {
    size_t n = 0;
    char *text = tu_read_file(tu_shared_path(file), &n);
    if (!text) return 0;
    b8_tok_pieces pieces = {0};
    b8_encoding enc = {0};
    b8_encode_params ep = b8_default_encode_params();
    int passed = 0;
    *records = 0;
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        cJSON *r = cJSON_Parse(line);
        const char *raw = line;
        line = nl ? nl + 1 : NULL;
        if (!r) continue;
        (*records)++;
        const char *id = cJSON_GetObjectItem(r, "id")->valuestring;
        const char *pa = jfind(raw, "text"), *pp = jfind(raw, "text_pair");
        size_t la = 0, lb = 0;
        char *a = pa ? jstring(&pa, &la) : NULL;
        char *b = pp && *pp == '"' ? jstring(&pp, &lb) : NULL;
        b8_err e = {0};
        int ok = a != NULL;
        if (ok && b8_tokenizer_tokenize(t, a, la, &pieces, &e) != BERT8_OK) {
            printf("  %s: tokenize failed: %s\n", id, e.msg);
            ok = 0;
        } else if (ok) {
            ok = same_tokens(jfind(raw, "tokens"), &pieces, id);
        }
        if (ok && b) {
            if (b8_tokenizer_tokenize(t, b, lb, &pieces, &e) != BERT8_OK) {
                printf("  %s: tokenize(pair) failed: %s\n", id, e.msg);
                ok = 0;
            } else {
                ok = same_tokens(jfind(raw, "tokens_pair"), &pieces, id);
            }
        }
        if (ok && b8_tokenizer_encode(t, a, la, b, lb, &ep, &enc, &e) != BERT8_OK) {
            printf("  %s: encode failed: %s\n", id, e.msg);
            ok = 0;
        }
        if (ok) ok = enc.rows == 1 && enc.lengths[0] == enc.seq;
        if (ok)
            ok = same_ints(cJSON_GetObjectItem(r, "input_ids"), enc.input_ids, enc.seq, "input_ids",
                           id);
        const cJSON *tt = cJSON_GetObjectItem(r, "token_type_ids");
        if (ok && tt) ok = same_ints(tt, enc.token_type_ids, enc.seq, "token_type_ids", id);
        jstrs idt = jarray(jfind(raw, "id_tokens"));
        for (int i = 0; ok && i < idt.n; i++) {
            size_t sl = 0;
            const char *s = b8_tokenizer_id_to_token(t, enc.input_ids[i], &sl);
            if (!s || sl != idt.len[i] || memcmp(s, idt.buf + idt.off[i], sl)) {
                printf("  %s: id %d prints as \"%s\", expected \"%s\"\n", id, enc.input_ids[i],
                       s ? s : "(null)", idt.buf + idt.off[i]);
                ok = 0;
            }
        }
        jstrs_free(&idt);
        passed += ok;
        free(a);
        free(b);
        cJSON_Delete(r);
    }
    b8_tok_pieces_free(&pieces);
    b8_encoding_free(&enc);
    free(text);
    return passed;
}

static void golden_file(const char *vocab, const char *jsonl, b8_tok_kind kind, int lower) {
    b8_tok_options o = b8_tok_default_options();
    o.lowercase = lower;
    b8_tokenizer *t = NULL;
    b8_err e = {0};
    char vp[256];
    snprintf(vp, sizeof vp, "tokenizers/%s", vocab);
    bert8_status st = b8_tokenizer_load_files(kind, tu_shared_path(vp), &o, &t, &e);
    CHECKF(st == BERT8_OK, "%s", e.msg);
    if (st != BERT8_OK) return;
    char jp[256];
    snprintf(jp, sizeof jp, "golden/tokenizers/%s", jsonl);
    int records = 0;
    int passed = run_jsonl(jp, t, &records);
    printf("  %s: %d/%d records identical\n", jsonl, passed, records);
    CHECK(records == 226);
    CHECK(passed == records);
    b8_tokenizer_free(t);
}

TEST(bert_base_uncased_matches_golden) {
    golden_file("bert-base-uncased.vocab.txt", "bert-base-uncased.jsonl", B8_TOK_WORDPIECE, 1);
}
TEST(bert_base_cased_matches_golden) {
    golden_file("bert-base-cased.vocab.txt", "bert-base-cased.jsonl", B8_TOK_WORDPIECE, 0);
}
TEST(bert_multilingual_cased_matches_golden) {
    golden_file("bert-base-multilingual-cased.vocab.txt", "bert-base-multilingual-cased.jsonl",
                B8_TOK_WORDPIECE, 0);
}
TEST(xlm_roberta_matches_golden) {
    golden_file("xlm-roberta.sentencepiece.rebuilt.model", "xlm-roberta.jsonl", B8_TOK_UNIGRAM, -1);
}

/* The e2e folders: load_dir + batch encoding must give the cases' padded matrices. */
static void e2e_folder(const char *name, int with_types) {
    char dir[256];
    snprintf(dir, sizeof dir, "golden/models/%s", name);
    b8_tokenizer *t = NULL;
    b8_err e = {0};
    bert8_status st = b8_tokenizer_load_dir(tu_shared_path(dir), NULL, &t, &e);
    CHECKF(st == BERT8_OK, "%s", e.msg);
    if (st != BERT8_OK) return;
    char cp[300];
    snprintf(cp, sizeof cp, "%s/cases.json", dir);
    size_t n = 0;
    char *text = tu_read_file(tu_shared_path(cp), &n);
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    CHECK(root != NULL);
    const cJSON *cases = root ? cJSON_GetObjectItem(root, "cases") : NULL;
    int ncases = 0;
    b8_encoding enc = {0};
    for (const cJSON *c = cases ? cases->child : NULL; c; c = c->next) {
        const cJSON *texts = cJSON_GetObjectItem(c, "texts");
        if (!texts) continue;
        const cJSON *pairs = cJSON_GetObjectItem(c, "text_pairs");
        const char *cname = cJSON_GetObjectItem(c, "name")->valuestring;
        int b = cJSON_GetArraySize(texts);
        const char *tv[8] = {0}, *pv[8] = {0};
        for (int i = 0; i < b && i < 8; i++) {
            tv[i] = cJSON_GetArrayItem(texts, i)->valuestring;
            const cJSON *p = pairs ? cJSON_GetArrayItem(pairs, i) : NULL;
            pv[i] = cJSON_IsString(p) ? p->valuestring : NULL;
        }
        b8_encode_params ep = b8_default_encode_params();
        st = b8_tokenizer_encode_batch(t, b, tv, NULL, pv, NULL, &ep, &enc, &e);
        CHECKF(st == BERT8_OK, "%s: %s", cname, e.msg);
        if (st != BERT8_OK) continue;
        ncases++;
        int T = cJSON_GetObjectItem(c, "seq_len")->valueint;
        CHECKF(enc.rows == b && enc.seq == T, "%s: %lldx%lld, expected %dx%d", cname,
               (long long)enc.rows, (long long)enc.seq, b, T);
        if (enc.rows != b || enc.seq != T) continue;
        const char *keys[3] = {"input_ids", "attention_mask", "token_type_ids"};
        const int32_t *got[3] = {enc.input_ids, enc.attention_mask, enc.token_type_ids};
        for (int k = 0; k < (with_types ? 3 : 2); k++) {
            const cJSON *rows = cJSON_GetObjectItem(c, keys[k]);
            for (int r = 0; r < b; r++) {
                char what[64];
                snprintf(what, sizeof what, "%s row %d", keys[k], r);
                CHECK(same_ints(cJSON_GetArrayItem(rows, r), got[k] + (size_t)r * (size_t)T, T,
                                what, cname));
            }
        }
    }
    CHECK(ncases >= 4);
    printf("  %s: %d cases\n", name, ncases);
    b8_encoding_free(&enc);
    cJSON_Delete(root);
    free(text);
    b8_tokenizer_free(t);
}

TEST(bert_e2e_folder_gives_case_input_ids) {
    e2e_folder("bert_e2e", 1);
}
TEST(xlmr_e2e_folder_gives_case_input_ids) {
    e2e_folder("xlmr_e2e", 0);
}

int main(void) {
    RUN(bert_base_uncased_matches_golden);
    RUN(bert_base_cased_matches_golden);
    RUN(bert_multilingual_cased_matches_golden);
    RUN(xlm_roberta_matches_golden);
    RUN(bert_e2e_folder_gives_case_input_ids);
    RUN(xlmr_e2e_folder_gives_case_input_ids);
    return tu_finish();
}
