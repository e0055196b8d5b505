/* tok_load.c: loading a tokenizer from a model folder or from explicit files: vocab.txt,
 * sentencepiece models, and the JSON side files (tokenizer_config.json,
 * special_tokens_map.json, added_tokens.json) resolved the way from_pretrained does. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/json_nul.h"
#include "base/utf8.h"
#include "tokenizer/piece_trie.h"
#include "tokenizer/spm_model.h"
#include "tokenizer/tok_json.h"
#include "tokenizer/tok_object.h"

b8_tok_options b8_tok_default_options(void) {
    b8_tok_options o;
    o.lowercase = -1;
    o.strip_accents = -1;
    o.tokenize_chinese_chars = -1;
    o.model_max_length = 0;
    return o;
}

/* true when something is at path: a regular file, or anything else, which the reader then
 * refuses by name rather than skipping it silently or blocking on it (a FIFO) */
static bool file_exists(const char *path) {
    return b8_path_kind_of(path) != B8_PATH_NONE;
}

static bert8_status join(char *buf, size_t cap, const char *dir, const char *name, b8_err *e) {
    int n = snprintf(buf, cap, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= cap)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "path too long: %s/%s", dir, name);
    return BERT8_OK;
}

/* Parses an optional JSON file: *out is NULL when the file does not exist. */
static bert8_status read_json(const char *path, cJSON **out, b8_err *e) {
    *out = NULL;
    if (!file_exists(path)) return BERT8_OK;
    size_t n = 0;
    char *text = b8_read_file_max(path, B8_TOK_MAX_CONFIG_BYTES, &n, e);
    if (!text) return e ? e->status : BERT8_ERR_IO;
    cJSON *j = cJSON_ParseWithLength(text, n);
    if (!j) {
        const char *where = cJSON_GetErrorPtr();
        long off = where && where >= text && where <= text + n ? (long)(where - text) : -1;
        free(text);
        return b8_fail(e, BERT8_ERR_FORMAT, "%s: invalid JSON near byte offset %ld", path, off);
    }
    bert8_status st = b8_json_refuse_nul(text, n, path, e);
    free(text);
    if (st) {
        cJSON_Delete(j);
        return st;
    }
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return b8_fail(e, BERT8_ERR_FORMAT, "%s: the top level is not a JSON object", path);
    }
    *out = j;
    return BERT8_OK;
}

/* A JSON boolean field: 1/0, or -1 when absent or null. */
static int json_flag(const cJSON *obj, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (cJSON_IsTrue(v)) return 1;
    if (cJSON_IsFalse(v)) return 0;
    return -1;
}

/* ---- Special tokens as from_pretrained resolves them --------------------------------- */

/* transformers' SPECIAL_TOKENS_ATTRIBUTES order, which decides ids of appended tokens. */
static const char *const role_keys[7] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                         "pad_token", "cls_token", "mask_token"};
static const b8_special role_ids[7] = {B8_SPECIAL_BOS, B8_SPECIAL_EOS, B8_SPECIAL_UNK,
                                       B8_SPECIAL_SEP, B8_SPECIAL_PAD, B8_SPECIAL_CLS,
                                       B8_SPECIAL_MASK};

typedef struct tok_spec {
    char content[B8_TOK_MAX_TOKEN_BYTES + 1];
    bool set;
    bool lstrip, rstrip; /* a plain string strips both sides (see tokenize_seq) */
    bool single_word;
} tok_spec;

static bert8_status spec_set(tok_spec *s, const char *content, const char *path, const char *key,
                             b8_err *e) {
    size_t n = strlen(content);
    if (n > B8_TOK_MAX_TOKEN_BYTES)
        return b8_fail(e, BERT8_ERR_TOO_LARGE, "%s: \"%s\" is %zu bytes, over the limit of %d",
                       path, key, n, B8_TOK_MAX_TOKEN_BYTES);
    memcpy(s->content, content, n + 1);
    s->set = true;
    return BERT8_OK;
}

static void spec_plain(tok_spec *s, const char *content) {
    spec_set(s, content, "", "", NULL); /* built-in names: always short */
    s->lstrip = s->rstrip = true;
    s->single_word = false;
}

/* A config value: a string, an AddedToken object, or null (the role is unset). */
static bert8_status spec_from_json(tok_spec *s, const cJSON *v, bool string_is_lstrip_obj,
                                   const char *path, const char *key, b8_err *e) {
    if (!v) return BERT8_OK;
    if (cJSON_IsNull(v)) {
        s->set = false;
        return BERT8_OK;
    }
    if (cJSON_IsString(v)) {
        bert8_status st = spec_set(s, v->valuestring, path, key, e);
        if (st != BERT8_OK) return st;
        s->lstrip = s->rstrip = true;
        s->single_word = false;
        if (string_is_lstrip_obj) s->rstrip = false; /* XLMRobertaTokenizer's <mask> */
        return BERT8_OK;
    }
    if (cJSON_IsObject(v)) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(v, "content");
        if (!cJSON_IsString(c))
            return b8_fail(e, BERT8_ERR_FORMAT, "%s: \"%s\" has no string \"content\"", path, key);
        bert8_status st = spec_set(s, c->valuestring, path, key, e);
        if (st != BERT8_OK) return st;
        s->lstrip = json_flag(v, "lstrip") == 1;
        s->rstrip = json_flag(v, "rstrip") == 1;
        s->single_word = json_flag(v, "single_word") == 1;
        return BERT8_OK;
    }
    return b8_fail(e, BERT8_ERR_FORMAT, "%s: \"%s\" is neither a string nor a token object", path,
                   key);
}

static bert8_status add_spec(b8_tokenizer *t, const tok_spec *s, bool special, b8_err *e) {
    return b8_tok_add_token(t, s->content, strlen(s->content), -1, s->lstrip, s->rstrip,
                            s->single_word, special, e);
}

typedef struct added_item {
    const cJSON *it;
    int pos; /* in the file: equal ids keep file order */
} added_item;

static int cmp_added_id(const void *a, const void *b) {
    const added_item *x = a, *y = b;
    if (x->it->valuedouble != y->it->valuedouble)
        return x->it->valuedouble < y->it->valuedouble ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

/* Resolves roles, additional special tokens and added tokens for a model built from a vocab
 * file or sentencepiece model (the "slow" path). */
static bert8_status apply_slow_specials(b8_tokenizer *t, const cJSON *cfg, const char *cfg_path,
                                        const cJSON *map, const char *map_path, const cJSON *added,
                                        const char *added_path, b8_err *e) {
    tok_spec roles[7];
    memset(roles, 0, sizeof roles);
    bool xlmr = t->kind == B8_TOK_UNIGRAM;
    if (xlmr) {
        spec_plain(&roles[0], "<s>");
        spec_plain(&roles[1], "</s>");
        spec_plain(&roles[2], "<unk>");
        spec_plain(&roles[3], "</s>");
        spec_plain(&roles[4], "<pad>");
        spec_plain(&roles[5], "<s>");
        spec_plain(&roles[6], "<mask>");
        roles[6].rstrip = false; /* AddedToken("<mask>", lstrip=True, rstrip=False) */
    } else {
        spec_plain(&roles[2], "[UNK]");
        spec_plain(&roles[3], "[SEP]");
        spec_plain(&roles[4], "[PAD]");
        spec_plain(&roles[5], "[CLS]");
        spec_plain(&roles[6], "[MASK]");
    }
    bert8_status st;
    for (int i = 0; i < 7; i++) {
        if (cfg) {
            st = spec_from_json(&roles[i], cJSON_GetObjectItemCaseSensitive(cfg, role_keys[i]),
                                xlmr && i == 6, cfg_path, role_keys[i], e);
            if (st != BERT8_OK) return st;
        }
        /* special_tokens_map.json is applied last with setattr: strings stay plain */
        if (map) {
            st = spec_from_json(&roles[i], cJSON_GetObjectItemCaseSensitive(map, role_keys[i]),
                                false, map_path, role_keys[i], e);
            if (st != BERT8_OK) return st;
        }
    }
    /* the unknown token must exist before anything is added */
    if (roles[2].set) {
        size_t ul = strlen(roles[2].content);
        if (t->kind == B8_TOK_WORDPIECE) {
            int32_t id = b8_ptrie_get(&t->trie, roles[2].content, ul);
            if (id < 0)
                return b8_fail(e, BERT8_ERR_MISSING, "the vocabulary has no unknown token \"%s\"",
                               roles[2].content);
            t->wp.unk_id = id;
            free(t->wp.unk_token);
            t->wp.unk_token = strdup(roles[2].content);
            if (!t->wp.unk_token) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
        }
    } else if (t->kind == B8_TOK_WORDPIECE) {
        return b8_fail(e, BERT8_ERR_MISSING,
                       "no unk_token configured for the WordPiece vocabulary");
    }
    /* added_tokens.json: {"token": id}, taken in id order; each id is either the token's
     * own vocabulary id or the next free one, as from_pretrained requires */
    if (added) {
        int n = cJSON_GetArraySize(added);
        added_item *items = calloc((size_t)n + 1, sizeof *items);
        if (!items) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
        int k = 0;
        for (const cJSON *it = added->child; it; it = it->next) {
            if (!cJSON_IsNumber(it) || !it->string || !(it->valuedouble >= 0) ||
                it->valuedouble > (double)INT32_MAX - 1 ||
                it->valuedouble != (double)(int32_t)it->valuedouble) {
                free(items);
                return b8_fail(e, BERT8_ERR_FORMAT, "%s: entries must be \"token\": id",
                               added_path);
            }
            items[k].it = it;
            items[k].pos = k;
            k++;
        }
        /* by id, then file order */
        if (k > 1) qsort(items, (size_t)k, sizeof *items, cmp_added_id);
        st = BERT8_OK;
        for (int i = 0; i < k && st == BERT8_OK; i++) {
            const char *content = items[i].it->string;
            int32_t id = (int32_t)items[i].it->valuedouble;
            bool special = false;
            for (int r = 0; r < 7; r++)
                if (roles[r].set && !strcmp(roles[r].content, content)) special = true;
            char low[B8_TOK_MAX_TOKEN_BYTES + 1];
            if (strlen(content) >= sizeof low) {
                st = b8_fail(e, BERT8_ERR_TOO_LARGE,
                             "%s: token \"%.40s...\" is %zu bytes, over the limit of %d",
                             added_path, content, strlen(content), B8_TOK_MAX_TOKEN_BYTES);
                break;
            }
            if (!special && t->kind == B8_TOK_WORDPIECE && t->wp.lowercase) {
                /* _add_tokens lowercases non-special tokens of do_lower_case tokenizers */
                size_t m = 0;
                for (; content[m]; m++)
                    low[m] =
                        (content[m] >= 'A' && content[m] <= 'Z') ? content[m] + 32 : content[m];
                low[m] = 0;
                content = low;
            }
            size_t len = strlen(content);
            if (id == t->vocab_size) {
                if (b8_tok_append_token(t, content, len, e) < 0)
                    st = e ? e->status : BERT8_ERR_NOMEM;
            } else if (id > t->vocab_size || b8_tokenizer_token_to_id(t, content, len) != id) {
                st = b8_fail(e, BERT8_ERR_FORMAT,
                             "%s: token \"%s\" has id %d but the next free id is %lld", added_path,
                             content, (int)id, (long long)t->vocab_size);
            }
            if (st == BERT8_OK)
                st = b8_tok_add_token(t, content, len, id, true, true, false, special, e);
        }
        free(items);
        if (st != BERT8_OK) return st;
    }
    for (int i = 0; i < 7; i++) {
        if (!roles[i].set) continue;
        st = add_spec(t, &roles[i], true, e);
        if (st != BERT8_OK) return st;
    }
    const cJSON *extra[2] = {
        cfg ? cJSON_GetObjectItemCaseSensitive(cfg, "additional_special_tokens") : NULL,
        map ? cJSON_GetObjectItemCaseSensitive(map, "additional_special_tokens") : NULL};
    const char *extra_path[2] = {cfg_path, map_path};
    for (int k = 0; k < 2; k++) {
        if (!cJSON_IsArray(extra[k])) continue;
        for (const cJSON *it = extra[k]->child; it; it = it->next) {
            tok_spec s = {0};
            st = spec_from_json(&s, it, false, extra_path[k], "additional_special_tokens", e);
            if (st != BERT8_OK) return st;
            if (s.set && (st = add_spec(t, &s, true, e)) != BERT8_OK) return st;
        }
    }
    /* newer configs list every added token with its id and flags */
    const cJSON *dec = cfg ? cJSON_GetObjectItemCaseSensitive(cfg, "added_tokens_decoder") : NULL;
    if (cJSON_IsObject(dec)) {
        for (const cJSON *it = dec->child; it; it = it->next) {
            char *end = NULL;
            long id = strtol(it->string ? it->string : "", &end, 10);
            const cJSON *c = cJSON_GetObjectItemCaseSensitive(it, "content");
            if (!end || *end || id < 0 || id > INT32_MAX - 1 || !cJSON_IsString(c))
                return b8_fail(e, BERT8_ERR_FORMAT, "%s: bad added_tokens_decoder entry \"%s\"",
                               cfg_path, it->string ? it->string : "");
            st = b8_tok_add_token(t, c->valuestring, strlen(c->valuestring), (int32_t)id,
                                  json_flag(it, "lstrip") == 1, json_flag(it, "rstrip") == 1,
                                  json_flag(it, "single_word") == 1, json_flag(it, "special") == 1,
                                  e);
            if (st != BERT8_OK) return b8_wrap(e, "%s: added_tokens_decoder", cfg_path);
        }
    }
    for (int i = 0; i < 7; i++)
        t->special[role_ids[i]] =
            roles[i].set ? b8_tokenizer_token_to_id(t, roles[i].content, strlen(roles[i].content))
                         : -1;
    return BERT8_OK;
}

/* Roles for a tokenizer.json model: the ids are already there; the config only names them. */
static void apply_json_roles(b8_tokenizer *t, const cJSON *cfg, const cJSON *map) {
    const cJSON *src[2] = {cfg, map};
    for (int k = 0; k < 2; k++) {
        if (!src[k]) continue;
        for (int i = 0; i < 7; i++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(src[k], role_keys[i]);
            if (cJSON_IsObject(v)) v = cJSON_GetObjectItemCaseSensitive(v, "content");
            if (!cJSON_IsString(v)) continue;
            int32_t id = b8_tokenizer_token_to_id(t, v->valuestring, strlen(v->valuestring));
            if (id >= 0) t->special[role_ids[i]] = id;
        }
    }
}

static void apply_max_length(b8_tokenizer *t, const cJSON *cfg, const b8_tok_options *opt) {
    const cJSON *v = cfg ? cJSON_GetObjectItemCaseSensitive(cfg, "model_max_length") : NULL;
    if (cJSON_IsNumber(v) && v->valuedouble >= 1) {
        /* transformers writes int(1e30) for "no limit" */
        t->model_max_length = v->valuedouble >= 9.0e18 ? INT64_MAX : (int64_t)v->valuedouble;
    }
    if (opt && opt->model_max_length > 0) t->model_max_length = opt->model_max_length;
}

/* decode's clean_up_tokenization_spaces: transformers reads it from tokenizer_config.json; absent
 * (or not a boolean) it is false, the default of PreTrainedTokenizerBase since transformers 4.45
 * and of every tokenizer class bert8 reads. */
static void apply_decode_flags(b8_tokenizer *t, const cJSON *cfg) {
    t->clean_up = cfg && json_flag(cfg, "clean_up_tokenization_spaces") == 1;
}

/* ---- vocab.txt ---------------------------------------------------------------------- */

/* One token per line, lines split like Python's universal newlines (\n, \r\n, \r); a later
 * duplicate wins the string -> id lookup, as dict assignment does in load_vocab. */
static bert8_status read_vocab_txt(b8_tokenizer *t, const char *path, b8_err *e) {
    size_t n = 0;
    char *data = b8_read_file_max(path, B8_TOK_MAX_FILE_BYTES, &n, e);
    if (!data) return e ? e->status : BERT8_ERR_IO;
    bert8_status st = BERT8_OK;
    const char **toks = NULL;
    size_t *lens = NULL;
    b8_ptrie_key *keys = NULL;
    size_t bad = b8_utf8_invalid_at((const uint8_t *)data, n);
    if (bad < n) {
        size_t line = 1;
        for (size_t i = 0; i < bad; i++)
            line += data[i] == '\n';
        st = b8_fail(e, BERT8_ERR_FORMAT, "%s: line %zu is not valid UTF-8 (byte offset %zu)", path,
                     line, bad);
        goto out;
    }
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        if (data[i] == '\n' || (data[i] == '\r' && (i + 1 >= n || data[i + 1] != '\n'))) count++;
    if (n && data[n - 1] != '\n' && data[n - 1] != '\r') count++;
    if (count == 0) {
        st = b8_fail(e, BERT8_ERR_FORMAT, "%s: empty vocabulary", path);
        goto out;
    }
    if (count > (size_t)B8_TOK_MAX_VOCAB) {
        st = b8_fail(e, BERT8_ERR_TOO_LARGE, "%s: %zu tokens, over the limit of %lld", path, count,
                     (long long)B8_TOK_MAX_VOCAB);
        goto out;
    }
    toks = malloc(count * sizeof *toks);
    lens = malloc(count * sizeof *lens);
    if (!toks || !lens) {
        st = b8_fail(e, BERT8_ERR_NOMEM, "out of memory reading %s", path);
        goto out;
    }
    size_t k = 0, i = 0;
    while (i < n && k < count) {
        size_t j = i;
        while (j < n && data[j] != '\n' && data[j] != '\r')
            j++;
        toks[k] = data + i;
        lens[k] = j - i;
        k++;
        if (j < n && data[j] == '\r' && j + 1 < n && data[j + 1] == '\n') j++;
        i = j + 1;
    }
    st = b8_tok_set_tokens(t, toks, lens, (int64_t)k, e);
    if (st != BERT8_OK) {
        b8_wrap(e, "%s", path);
        goto out;
    }
    keys = malloc(k * sizeof *keys);
    if (!keys) {
        st = b8_fail(e, BERT8_ERR_NOMEM, "out of memory reading %s", path);
        goto out;
    }
    for (size_t m = 0; m < k; m++)
        keys[m] = (b8_ptrie_key){toks[m], (uint32_t)lens[m], (int32_t)m, 0};
    st = b8_ptrie_build(&t->trie, keys, k, NULL, NULL, false, NULL, e);
out:
    free(keys);
    free(toks);
    free(lens);
    free(data);
    return st;
}

static bert8_status wordpiece_flags(b8_tokenizer *t, const cJSON *cfg, const char *cfg_path,
                                    const b8_tok_options *opt, b8_err *e) {
    int lower = cfg ? json_flag(cfg, "do_lower_case") : -1;
    int strip = cfg ? json_flag(cfg, "strip_accents") : -1;
    int chinese = cfg ? json_flag(cfg, "tokenize_chinese_chars") : -1;
    if (cfg && json_flag(cfg, "do_basic_tokenize") == 0)
        return b8_fail(e, BERT8_ERR_UNSUPPORTED, "%s: do_basic_tokenize false is not supported",
                       cfg_path);
    if (opt && opt->lowercase >= 0) lower = opt->lowercase;
    if (opt && opt->strip_accents >= 0) strip = opt->strip_accents;
    if (opt && opt->tokenize_chinese_chars >= 0) chinese = opt->tokenize_chinese_chars;
    t->wp.lowercase = lower != 0; /* BertTokenizer's default is do_lower_case=True */
    /* strip_accents None follows lowercase; an explicit False keeps accents when lowercasing */
    t->wp.strip_accents = strip == 1 || (strip == -1 && t->wp.lowercase);
    t->wp.chinese = chinese != 0;
    t->wp.clean_text = true;
    return BERT8_OK;
}

/* Builds a slow-path tokenizer from a vocab file / model and optional side files. */
static bert8_status load_slow(b8_tok_kind kind, const char *vocab_path, const char *dir,
                              const b8_tok_options *opt, b8_tokenizer **out, b8_err *e) {
    char cfg_path[4096] = "", map_path[4096] = "", added_path[4096] = "";
    cJSON *cfg = NULL, *map = NULL, *added = NULL;
    bert8_status st = BERT8_OK;
    b8_tokenizer *t = b8_tok_alloc(kind);
    if (!t) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
    if (dir) {
        if ((st = join(cfg_path, sizeof cfg_path, dir, "tokenizer_config.json", e)) ||
            (st = join(map_path, sizeof map_path, dir, "special_tokens_map.json", e)) ||
            (st = join(added_path, sizeof added_path, dir, "added_tokens.json", e)) ||
            (st = read_json(cfg_path, &cfg, e)) || (st = read_json(map_path, &map, e)) ||
            (st = read_json(added_path, &added, e)))
            goto fail;
    }
    if (kind == B8_TOK_WORDPIECE) {
        st = wordpiece_flags(t, cfg, cfg_path, opt, e);
        if (st == BERT8_OK) st = read_vocab_txt(t, vocab_path, e);
    } else {
        size_t n = 0;
        char *data = b8_read_file_max(vocab_path, B8_TOK_MAX_FILE_BYTES, &n, e);
        if (!data) {
            st = e ? e->status : BERT8_ERR_IO;
            goto fail;
        }
        st = b8_spm_parse(t, (const uint8_t *)data, n, vocab_path, e);
        free(data);
    }
    if (st != BERT8_OK) goto fail;
    st = apply_slow_specials(t, cfg, cfg_path, map, map_path, added, added_path, e);
    if (st != BERT8_OK) goto fail;
    apply_max_length(t, cfg, opt);
    apply_decode_flags(t, cfg);
    b8_tok_default_templates(t);
    st = b8_tok_finish(t, e);
    if (st != BERT8_OK) goto fail;
    cJSON_Delete(cfg);
    cJSON_Delete(map);
    cJSON_Delete(added);
    *out = t;
    return BERT8_OK;
fail:
    cJSON_Delete(cfg);
    cJSON_Delete(map);
    cJSON_Delete(added);
    b8_tokenizer_free(t);
    return st;
}

static bert8_status load_json_file(const char *path, const char *dir, const b8_tok_options *opt,
                                   b8_tokenizer **out, b8_err *e) {
    size_t n = 0;
    char *text = b8_read_file_max(path, B8_TOK_MAX_FILE_BYTES, &n, e);
    if (!text) return e ? e->status : BERT8_ERR_IO;
    b8_tokenizer *t = NULL;
    bert8_status st = b8_tokjson_parse(text, n, path, opt, &t, e);
    free(text);
    if (st != BERT8_OK) return st;
    if (dir) {
        char cfg_path[4096], map_path[4096];
        cJSON *cfg = NULL, *map = NULL;
        if ((st = join(cfg_path, sizeof cfg_path, dir, "tokenizer_config.json", e)) ||
            (st = join(map_path, sizeof map_path, dir, "special_tokens_map.json", e)) ||
            (st = read_json(cfg_path, &cfg, e)) || (st = read_json(map_path, &map, e))) {
            cJSON_Delete(cfg);
            b8_tokenizer_free(t);
            return st;
        }
        apply_json_roles(t, cfg, map);
        apply_max_length(t, cfg, opt);
        apply_decode_flags(t, cfg);
        cJSON_Delete(cfg);
        cJSON_Delete(map);
    } else {
        apply_max_length(t, NULL, opt);
    }
    *out = t;
    return BERT8_OK;
}

bert8_status b8_tokenizer_load_dir(const char *dir, const b8_tok_options *opt, b8_tokenizer **out,
                                   b8_err *e) {
    if (!out) return b8_fail(e, BERT8_ERR_INVALID_ARG, "load_dir: out is NULL");
    *out = NULL;
    if (!dir) return b8_fail(e, BERT8_ERR_INVALID_ARG, "load_dir: dir is NULL");
    char path[4096];
    bert8_status st;
    if ((st = join(path, sizeof path, dir, "tokenizer.json", e))) return st;
    if (file_exists(path)) return load_json_file(path, dir, opt, out, e);
    if ((st = join(path, sizeof path, dir, "vocab.txt", e))) return st;
    if (file_exists(path)) return load_slow(B8_TOK_WORDPIECE, path, dir, opt, out, e);
    if ((st = join(path, sizeof path, dir, "sentencepiece.bpe.model", e))) return st;
    if (file_exists(path)) return load_slow(B8_TOK_UNIGRAM, path, dir, opt, out, e);
    return b8_fail(e, BERT8_ERR_MISSING,
                   "%s: no tokenizer.json, vocab.txt or sentencepiece.bpe.model", dir);
}

static bool ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

bert8_status b8_tokenizer_load_files(b8_tok_kind kind, const char *vocab_path,
                                     const b8_tok_options *opt, b8_tokenizer **out, b8_err *e) {
    if (!out) return b8_fail(e, BERT8_ERR_INVALID_ARG, "load_files: out is NULL");
    *out = NULL;
    if (!vocab_path) return b8_fail(e, BERT8_ERR_INVALID_ARG, "load_files: path is NULL");
    if (ends_with(vocab_path, ".json")) {
        bert8_status st = load_json_file(vocab_path, NULL, opt, out, e);
        if (st == BERT8_OK && kind != B8_TOK_AUTO && (*out)->kind != kind) {
            b8_tokenizer_free(*out);
            *out = NULL;
            return b8_fail(e, BERT8_ERR_FORMAT, "%s: the model is not of the requested kind",
                           vocab_path);
        }
        return st;
    }
    if (kind == B8_TOK_AUTO)
        kind = ends_with(vocab_path, ".model") ? B8_TOK_UNIGRAM : B8_TOK_WORDPIECE;
    if (kind != B8_TOK_WORDPIECE && kind != B8_TOK_UNIGRAM)
        return b8_fail(e, BERT8_ERR_INVALID_ARG, "load_files: unknown kind %d", (int)kind);
    return load_slow(kind, vocab_path, NULL, opt, out, e);
}
