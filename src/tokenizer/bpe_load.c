/* bpe_load.c: the BPE parts of a tokenizer.json: model (vocab, merges in either form, unk
 * token, prefix/suffix, ignore_merges), normalizer, ByteLevel pre-tokenizer and decoder, and
 * the tables the merge loop reads (a hash of merge pairs, each byte's initial token). */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tokenizer/bpe.h"
#include "tokenizer/bpe_load.h"
#include "tokenizer/json_vocab.h"
#include "tokenizer/piece_trie.h"
#include "tokenizer/tok_jsonget.h"

/* Merges of one model: bounded so the hash table stays within memory. */
#define B8_BPE_MAX_MERGES ((int64_t)1 << 24)

/* The two sides of merges[i]: "a b" (exactly one space, as `tokenizers` requires) or
 * ["a", "b"]. a and b point into it or into buf. */
static bool merge_sides(const cJSON *it, char *buf, size_t cap, const char **a, size_t *al,
                        const char **b, size_t *bl) {
    if (cJSON_IsString(it)) {
        const char *s = it->valuestring;
        const char *sp = strchr(s, ' ');
        if (!sp || strchr(sp + 1, ' ')) return false;
        size_t n = (size_t)(sp - s);
        if (n >= cap) return false;
        memcpy(buf, s, n);
        buf[n] = 0;
        *a = buf;
        *al = n;
        *b = sp + 1;
        *bl = strlen(sp + 1);
        return true;
    }
    if (cJSON_IsArray(it) && cJSON_GetArraySize(it) == 2) {
        const cJSON *x = it->child, *y = x->next;
        if (!cJSON_IsString(x) || !cJSON_IsString(y)) return false;
        *a = x->valuestring;
        *al = strlen(*a);
        *b = y->valuestring;
        *bl = strlen(*b);
        return true;
    }
    return false;
}

static bert8_status parse_merges(b8_tokenizer *t, const cJSON *merges, const char *prefix,
                                 const char *path, b8_err *e) {
    if (!cJSON_IsArray(merges))
        return b8_fail(e, BERT8_ERR_FORMAT, "%s: model.merges is missing or not an array", path);
    int64_t n = cJSON_GetArraySize(merges);
    if (n > B8_BPE_MAX_MERGES)
        return b8_fail(e, BERT8_ERR_TOO_LARGE, "%s: model.merges has %lld entries, over the limit of %lld",
                       path, (long long)n, (long long)B8_BPE_MAX_MERGES);
    uint32_t slots = 16;
    while ((int64_t)slots < 2 * n)
        slots *= 2;
    t->bpe.merges = malloc((size_t)slots * sizeof *t->bpe.merges);
    if (!t->bpe.merges) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory reading %s", path);
    for (uint32_t i = 0; i < slots; i++)
        t->bpe.merges[i] = (b8_bpe_merge){-1, -1, 0, 0};
    t->bpe.merge_mask = slots - 1;
    size_t pl = prefix ? strlen(prefix) : 0;
    char buf[2 * B8_TOK_MAX_TOKEN_BYTES + 2];
    char joined[2 * B8_TOK_MAX_TOKEN_BYTES + 2];
    int64_t rank = 0;
    for (const cJSON *it = merges->child; it; it = it->next, rank++) {
        const char *a, *b;
        size_t al, bl;
        if (!merge_sides(it, buf, sizeof buf, &a, &al, &b, &bl))
            return b8_fail(e, BERT8_ERR_FORMAT,
                           "%s: model.merges[%lld] is neither \"a b\" (one space) nor [\"a\", \"b\"]",
                           path, (long long)rank);
        int32_t l = b8_ptrie_get(&t->trie, a, al), r = b8_ptrie_get(&t->trie, b, bl);
        if (l < 0 || r < 0)
            return b8_fail(e, BERT8_ERR_FORMAT,
                           "%s: model.merges[%lld] names \"%.60s\", which is not in model.vocab", path,
                           (long long)rank, l < 0 ? a : b);
        /* the merged token: a + b without b's continuing prefix */
        size_t skip = pl && bl >= pl && !memcmp(b, prefix, pl) ? pl : 0;
        if (al + bl - skip >= sizeof joined)
            return b8_fail(e, BERT8_ERR_TOO_LARGE, "%s: model.merges[%lld] is too long", path,
                           (long long)rank);
        memcpy(joined, a, al);
        memcpy(joined + al, b + skip, bl - skip);
        size_t jl = al + bl - skip;
        int32_t id = b8_ptrie_get(&t->trie, joined, jl);
        if (id < 0)
            return b8_fail(e, BERT8_ERR_FORMAT,
                           "%s: model.merges[%lld] makes \"%.*s\", which is not in model.vocab", path,
                           (long long)rank, (int)(jl < 80 ? jl : 80), joined);
        uint64_t k = ((uint64_t)(uint32_t)l << 32) | (uint32_t)r;
        k *= 0x9E3779B97F4A7C15ull;
        for (uint32_t h = (uint32_t)(k >> 32) & t->bpe.merge_mask;; h = (h + 1) & t->bpe.merge_mask) {
            b8_bpe_merge *m = &t->bpe.merges[h];
            if (m->left < 0) {
                *m = (b8_bpe_merge){l, r, (int32_t)rank, id};
                break;
            }
            if (m->left == l && m->right == r)
                return b8_fail(e, BERT8_ERR_FORMAT,
                               "%s: model.merges[%lld] repeats merges[%d] (\"%.60s\" + \"%.60s\")",
                               path, (long long)rank, (int)m->rank, a, b);
        }
    }
    t->bpe.n_merges = rank;
    return BERT8_OK;
}

bert8_status b8_bpe_parse_model(b8_tokenizer *t, const void *model_json, const char *path,
                                b8_err *e) {
    const cJSON *model = model_json;
    const cJSON *drop = get(model, "dropout");
    if (drop && !cJSON_IsNull(drop) && !(cJSON_IsNumber(drop) && drop->valuedouble == 0))
        return b8_fail(e, BERT8_ERR_UNSUPPORTED,
                       "%s: BPE dropout is not supported (model.dropout must be null: encoding "
                       "would be random)",
                       path);
    static const char *const flags[] = {"fuse_unk", "byte_fallback", "ignore_merges"};
    bool fv[3] = {false, false, false};
    for (int k = 0; k < 3; k++)
        if (!get_bool_strict(model, flags[k], true, &fv[k]))
            return b8_fail(e, BERT8_ERR_FORMAT, "%s: model.%s must be true, false or null, not %s", path, flags[k],
                           json_kind(get(model, flags[k])));
    if (fv[1]) return b8_fail(e, BERT8_ERR_UNSUPPORTED, "%s: BPE byte_fallback is not supported", path);
    const cJSON *pre = get(model, "continuing_subword_prefix");
    const cJSON *suf = get(model, "end_of_word_suffix");
    if ((pre && !cJSON_IsNull(pre) && !cJSON_IsString(pre)) ||
        (suf && !cJSON_IsNull(suf) && !cJSON_IsString(suf)))
        return b8_fail(e, BERT8_ERR_FORMAT,
                       "%s: model.continuing_subword_prefix / end_of_word_suffix must be strings or "
                       "null",
                       path);
    bert8_status st = b8_tokjson_vocab(t, get(model, "vocab"), path, e);
    if (st != BERT8_OK) return st;
    /* the word caches' tag: the load's time and address, so no two live loads share one */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    t->bpe.tag = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^
                 ((uint64_t)(uintptr_t)t << 20);
    const char *prefix = cJSON_IsString(pre) ? pre->valuestring : "";
    const char *suffix = cJSON_IsString(suf) ? suf->valuestring : "";
    st = parse_merges(t, get(model, "merges"), prefix[0] ? prefix : NULL, path, e);
    if (st != BERT8_OK) return st;
    t->bpe.fuse_unk = fv[0];
    t->bpe.ignore_merges = fv[2];
    const cJSON *unk = get(model, "unk_token");
    t->bpe.unk_id = -1;
    if (cJSON_IsString(unk)) {
        t->bpe.unk_id = b8_ptrie_get(&t->trie, unk->valuestring, strlen(unk->valuestring));
        /* named but absent: an error only when some byte needs it, as in the reference */
        if (t->bpe.unk_id < 0) t->bpe.unk_id = -2;
        else t->special[B8_SPECIAL_UNK] = t->bpe.unk_id;
    } else if (unk && !cJSON_IsNull(unk)) {
        return b8_fail(e, BERT8_ERR_FORMAT, "%s: model.unk_token must be a string or null", path);
    }
    /* each byte's initial symbol: the GPT-2 character, with the prefix when not first in
     * its word and the suffix when last */
    size_t pl = strlen(prefix), sl = strlen(suffix);
    if (pl > B8_TOK_MAX_TOKEN_BYTES || sl > B8_TOK_MAX_TOKEN_BYTES)
        return b8_fail(e, BERT8_ERR_TOO_LARGE, "%s: model prefix/suffix over %d bytes", path,
                       B8_TOK_MAX_TOKEN_BYTES);
    char buf[2 * B8_TOK_MAX_TOKEN_BYTES + 4];
    for (int tab = 0; tab < 4; tab++) {
        for (int byte = 0; byte < 256; byte++) {
            size_t n = 0;
            if (tab & 1) {
                memcpy(buf, prefix, pl);
                n = pl;
            }
            n += (size_t)b8_bpe_byte_char((uint8_t)byte, (uint8_t *)buf + n);
            if (tab & 2) {
                memcpy(buf + n, suffix, sl);
                n += sl;
            }
            t->bpe.byte_id[tab][byte] = b8_ptrie_get(&t->trie, buf, n);
        }
    }
    return BERT8_OK;
}

/* ---- Normalizer, pre-tokenizer, decoder ------------------------------------------------- */

static bert8_status add_norm(b8_tokenizer *t, const cJSON *n, const char *path, b8_err *e) {
    const char *type = get_str(n, "type");
    if (type && !strcmp(type, "Sequence")) {
        const cJSON *list = get(n, "normalizers");
        if (!cJSON_IsArray(list))
            return b8_fail(e, BERT8_ERR_FORMAT, "%s: Sequence normalizer without a list", path);
        for (const cJSON *it = list->child; it; it = it->next) {
            bert8_status st = add_norm(t, it, path, e);
            if (st != BERT8_OK) return st;
        }
        return BERT8_OK;
    }
    uint8_t op = 0;
    if (type && !strcmp(type, "NFC")) op = B8_BPE_NORM_NFC;
    if (type && !strcmp(type, "Lowercase")) op = B8_BPE_NORM_LOWER;
    if (!op)
        return b8_fail(e, BERT8_ERR_UNSUPPORTED,
                       "%s: normalizer \"%s\" is not supported with BPE (NFC, Lowercase and "
                       "Sequences of them are)",
                       path, type ? type : "?");
    if (t->bpe.n_norm >= B8_BPE_MAX_NORM)
        return b8_fail(e, BERT8_ERR_UNSUPPORTED, "%s: more than %d normalizers", path,
                       B8_BPE_MAX_NORM);
    t->bpe.norm[t->bpe.n_norm++] = op;
    return BERT8_OK;
}

/* A ByteLevel pre-tokenizer, alone or as the only member of a Sequence. */
static bert8_status byte_level(b8_tokenizer *t, const cJSON *pre, const char *path, b8_err *e) {
    const char *type = pre ? get_str(pre, "type") : NULL;
    if (type && !strcmp(type, "Sequence")) {
        const cJSON *list = get(pre, "pretokenizers");
        if (cJSON_IsArray(list) && cJSON_GetArraySize(list) == 1)
            return byte_level(t, list->child, path, e);
    }
    if (!type || strcmp(type, "ByteLevel"))
        return b8_fail(e, BERT8_ERR_UNSUPPORTED,
                       "%s: pre_tokenizer \"%s\" is not supported with BPE (ByteLevel is)", path,
                       type ? type : "null");
    static const char *const keys[] = {"add_prefix_space", "trim_offsets", "use_regex"};
    bool v[3] = {true, true, true};
    for (int k = 0; k < 3; k++)
        if (!get_bool_strict(pre, keys[k], false, &v[k]))
            return b8_fail(e, BERT8_ERR_FORMAT, "%s: pre_tokenizer ByteLevel's %s must be true or false, not %s", path,
                           keys[k], json_kind(get(pre, keys[k])));
    t->bpe.add_prefix_space = v[0];
    t->bpe.use_regex = v[2];
    return BERT8_OK;
}

bert8_status b8_bpe_parse_pipeline(b8_tokenizer *t, const void *root_json, const char *path,
                                   b8_err *e) {
    const cJSON *root = root_json;
    const cJSON *norm = get(root, "normalizer");
    t->bpe.n_norm = 0;
    if (norm && !cJSON_IsNull(norm)) {
        bert8_status st = add_norm(t, norm, path, e);
        if (st != BERT8_OK) return st;
    }
    bert8_status st = byte_level(t, get(root, "pre_tokenizer"), path, e);
    if (st != BERT8_OK) return st;
    const cJSON *dec = get(root, "decoder");
    const char *dty = dec ? get_str(dec, "type") : NULL;
    if (dec && !cJSON_IsNull(dec) && (!dty || strcmp(dty, "ByteLevel")))
        return b8_fail(e, BERT8_ERR_UNSUPPORTED,
                       "%s: decoder \"%s\" is not supported with BPE (ByteLevel is)", path,
                       dty ? dty : "?");
    return BERT8_OK;
}
