/* json_vocab.c: model.vocab of a tokenizer.json ({"token": id, ...}) into the id -> token
 * table and the piece trie, below both loaders that read one: tok_json.c (WordPiece) and
 * bpe_load.c (BPE). */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/json_vocab.h"
#include "tokenizer/piece_trie.h"
#include "tokenizer/tok_jsonget.h"
#include "tokenizer/tok_object.h"

bert8_status b8_tokjson_vocab(b8_tokenizer *t, const void *vocab_json, const char *path,
                              b8_err *e) {
    const cJSON *vocab = vocab_json;
    if (!cJSON_IsObject(vocab))
        return b8_fail(e, BERT8_ERR_FORMAT, "%s: model.vocab is not an object", path);
    int64_t maxid = -1, count = 0;
    for (const cJSON *it = vocab->child; it; it = it->next) {
        int64_t id;
        if (!get_id(it, 0, B8_TOK_MAX_VOCAB - 1, &id) || !it->string) {
            if (cJSON_IsNumber(it) && it->valuedouble >= (double)B8_TOK_MAX_VOCAB)
                return b8_fail(e, BERT8_ERR_TOO_LARGE,
                               "%s: model.vocab entry \"%.60s\" has id %.15g, over the limit of "
                               "%lld ids",
                               path, it->string ? it->string : "", it->valuedouble,
                               (long long)B8_TOK_MAX_VOCAB);
            return b8_fail(e, BERT8_ERR_FORMAT, "%s: model.vocab entry \"%.60s\" has no valid id",
                           path, it->string ? it->string : "");
        }
        if (id > maxid) maxid = id;
        count++;
    }
    if (count == 0) return b8_fail(e, BERT8_ERR_FORMAT, "%s: model.vocab is empty", path);
    /* decided before the id table is allocated */
    if (maxid + 1 - count > B8_TOK_MAX_ID_GAP)
        return b8_fail(e, BERT8_ERR_TOO_LARGE,
                       "%s: model.vocab has %lld entries but ids up to %lld: more than %lld "
                       "unused ids",
                       path, (long long)count, (long long)maxid, (long long)B8_TOK_MAX_ID_GAP);
    const char **toks = calloc((size_t)maxid + 1, sizeof *toks);
    size_t *lens = calloc((size_t)maxid + 1, sizeof *lens);
    if (!toks || !lens) {
        free(toks);
        free(lens);
        return b8_fail(e, BERT8_ERR_NOMEM, "out of memory reading %s", path);
    }
    b8_ptrie_key *keys = malloc((size_t)count * sizeof *keys);
    bert8_status st = BERT8_OK;
    if (!keys) st = b8_fail(e, BERT8_ERR_NOMEM, "out of memory reading %s", path);
    size_t nk = 0;
    for (const cJSON *it = vocab->child; it && st == BERT8_OK; it = it->next) {
        int64_t id = (int64_t)it->valuedouble;
        size_t len = strlen(it->string);
        if (toks[id]) {
            st = b8_fail(e, BERT8_ERR_FORMAT, "%s: model.vocab gives id %lld twice", path,
                         (long long)id);
            break;
        }
        toks[id] = it->string;
        lens[id] = len;
        keys[nk++] = (b8_ptrie_key){it->string, (uint32_t)len, (int32_t)id, 0};
    }
    /* a repeated key in the JSON object: the last one wins, as in a dict */
    if (st == BERT8_OK) st = b8_ptrie_build(&t->trie, keys, nk, NULL, NULL, false, NULL, e);
    free(keys);
    for (int64_t i = 0; i <= maxid && st == BERT8_OK; i++)
        if (!toks[i]) toks[i] = "";
    if (st == BERT8_OK && (st = b8_tok_set_tokens(t, toks, lens, maxid + 1, e)) != BERT8_OK)
        b8_wrap(e, "%s: model.vocab", path);
    free(toks);
    free(lens);
    if (st != BERT8_OK) return st;
    return BERT8_OK;
}
