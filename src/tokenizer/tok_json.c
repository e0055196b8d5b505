/* tok_json.c: reads a Hugging Face tokenizer.json ("fast" format) into the same tokenizer
 * object the vocab.txt / sentencepiece paths build: WordPiece with a BertNormalizer, or
 * Unigram with a precompiled charsmap and Metaspace, plus added tokens and the
 * post-processor's template. The behaviour is that of the slow tokenizers either way. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "base/json_nul.h"
#include "tokenizer/added_index.h"
#include "tokenizer/bpe_load.h"
#include "tokenizer/json_vocab.h"
#include "tokenizer/piece_trie.h"
#include "tokenizer/tok_json.h"
#include "tokenizer/tok_jsonget.h"
#include "tokenizer/tok_object.h"
#include "tokenizer/unigram.h"

static int b64_val(int c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
}

/* Standard base64 (padding optional); returns the decoded length or -1. */
static ptrdiff_t b64_decode(const char *s, uint8_t *out) {
    uint32_t acc = 0;
    int bits = 0;
    ptrdiff_t n = 0;
    for (; *s; s++) {
        if (*s == '=') break;
        if (*s == '\n' || *s == '\r' || *s == ' ') continue;
        int v = b64_val((unsigned char)*s);
        if (v < 0) return -1;
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[n++] = (uint8_t)(acc >> bits);
        }
    }
    return n;
}

/* ---- Models ---------------------------------------------------------------------------- */

static bert8_status parse_wordpiece(b8_tokenizer *t, const cJSON *model, const char *path,
                                    b8_err *e) {
    bert8_status st = b8_tokjson_vocab(t, get(model, "vocab"), path, e);
    if (st != BERT8_OK) return st;
    const char *prefix = get_str(model, "continuing_subword_prefix");
    free(t->wp.prefix);
    t->wp.prefix = strdup(prefix ? prefix : "##");
    if (!t->wp.prefix) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
    const cJSON *mc = get(model, "max_input_chars_per_word");
    int64_t mcv;
    if (get_id(mc, 0, 1000000000, &mcv)) t->wp.max_chars = (int)mcv;
    const char *unk = get_str(model, "unk_token");
    if (!unk) return b8_fail(e, BERT8_ERR_MISSING, "%s: model.unk_token is missing", path);
    t->wp.unk_id = b8_ptrie_get(&t->trie, unk, strlen(unk));
    if (t->wp.unk_id < 0)
        return b8_fail(e, BERT8_ERR_MISSING, "%s: unk_token \"%s\" is not in model.vocab", path,
                       unk);
    t->wp.unk_token = strdup(unk);
    if (!t->wp.unk_token) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
    t->special[B8_SPECIAL_UNK] = t->wp.unk_id;
    return BERT8_OK;
}

static bert8_status parse_unigram(b8_tokenizer *t, const cJSON *model, const char *path,
                                  b8_err *e) {
    const cJSON *vocab = get(model, "vocab");
    if (!cJSON_IsArray(vocab))
        return b8_fail(e, BERT8_ERR_FORMAT, "%s: model.vocab is not an array", path);
    if (get_flag(model, "byte_fallback", 0))
        return b8_fail(e, BERT8_ERR_UNSUPPORTED, "%s: Unigram byte_fallback is not supported",
                       path);
    int n = cJSON_GetArraySize(vocab);
    if (n <= 0) return b8_fail(e, BERT8_ERR_FORMAT, "%s: model.vocab is empty", path);
    if (n > B8_TOK_MAX_VOCAB)
        return b8_fail(e, BERT8_ERR_TOO_LARGE, "%s: model.vocab has %d pieces, over the limit of %lld",
                       path, n, (long long)B8_TOK_MAX_VOCAB);
    const char **toks = calloc((size_t)n, sizeof *toks);
    size_t *lens = calloc((size_t)n, sizeof *lens);
    t->ug.score = calloc((size_t)n, sizeof *t->ug.score);
    t->ug.type = calloc((size_t)n, sizeof *t->ug.type);
    if (!toks || !lens || !t->ug.score || !t->ug.type) {
        free(toks);
        free(lens);
        return b8_fail(e, BERT8_ERR_NOMEM, "out of memory reading %s", path);
    }
    size_t bytes = 0;
    int i = 0;
    bert8_status st = BERT8_OK;
    for (const cJSON *it = vocab->child; it; it = it->next, i++) {
        const cJSON *s = cJSON_GetArrayItem(it, 0), *sc = cJSON_GetArrayItem(it, 1);
        if (!cJSON_IsString(s) || !cJSON_IsNumber(sc) || !s->valuestring[0]) {
            st = b8_fail(e, BERT8_ERR_FORMAT, "%s: model.vocab[%d] is not [\"piece\", score]", path,
                         i);
            break;
        }
        toks[i] = s->valuestring;
        lens[i] = strlen(s->valuestring);
        bytes += lens[i];
        t->ug.score[i] = (float)sc->valuedouble;
        t->ug.type[i] = B8_SP_NORMAL;
    }
    if (st == BERT8_OK && (st = b8_tok_set_tokens(t, toks, lens, n, e)) != BERT8_OK)
        b8_wrap(e, "%s: model.vocab", path);
    free(toks);
    free(lens);
    if (st != BERT8_OK) return st;
    const cJSON *unk = get(model, "unk_id");
    int64_t unk_id;
    if (!get_id(unk, 0, (int64_t)n - 1, &unk_id))
        return b8_fail(e, BERT8_ERR_MISSING, "%s: model.unk_id is missing or out of range", path);
    t->ug.unk_id = (int32_t)unk_id;
    t->ug.type[t->ug.unk_id] = B8_SP_UNKNOWN;
    t->special[B8_SPECIAL_UNK] = t->ug.unk_id;
    (void)bytes;
    return BERT8_OK;
}

/* After added tokens are known: special ones become control pieces (outside the Viterbi),
 * then the trie of the remaining pieces and the scores' range. */
static bert8_status finish_unigram(b8_tokenizer *t, const char *path, b8_err *e) {
    int nres = 0;
    for (int i = 0; i < t->n_added; i++)
        if (t->added[i].special && t->added[i].id != t->ug.unk_id) {
            t->ug.type[t->added[i].id] = B8_SP_CONTROL;
            nres++;
        }
    t->ug.reserved = calloc((size_t)nres + 2, sizeof *t->ug.reserved);
    t->ug.reserved_id = calloc((size_t)nres + 2, sizeof *t->ug.reserved_id);
    if (!t->ug.reserved || !t->ug.reserved_id) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < t->vocab_size; i++) {
        const char *s = b8_tokenizer_id_to_token(t, (int32_t)i, NULL);
        if (t->ug.type[i] == B8_SP_CONTROL || t->ug.type[i] == B8_SP_UNKNOWN) {
            char *c = strdup(s);
            if (!c) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
            t->ug.reserved[t->ug.n_reserved] = c;
            t->ug.reserved_id[t->ug.n_reserved++] = (int32_t)i;
            if (t->ug.n_reserved > nres + 1) break;
        }
    }
    bert8_status st = b8_ug_finish(t, e);
    if (st != BERT8_OK) b8_wrap(e, "%s", path);
    return st;
}

/* ---- Normalizer / pre-tokenizer --------------------------------------------------------- */

static bert8_status wp_normalizer(b8_tokenizer *t, const cJSON *norm, const char *path, b8_err *e) {
    if (!norm || cJSON_IsNull(norm)) {
        t->wp.clean_text = t->wp.chinese = t->wp.lowercase = t->wp.strip_accents = false;
        return BERT8_OK;
    }
    const char *type = get_str(norm, "type");
    if (!type || strcmp(type, "BertNormalizer"))
        return b8_fail(e, BERT8_ERR_UNSUPPORTED,
                       "%s: normalizer \"%s\" is not supported with WordPiece (BertNormalizer is)",
                       path, type ? type : "?");
    t->wp.clean_text = get_flag(norm, "clean_text", 1);
    t->wp.chinese = get_flag(norm, "handle_chinese_chars", 1);
    t->wp.lowercase = get_flag(norm, "lowercase", 1);
    int strip = get_flag(norm, "strip_accents", -1);
    t->wp.strip_accents = strip == 1 || (strip == -1 && t->wp.lowercase);
    return BERT8_OK;
}

static bert8_status ug_precompiled(b8_tokenizer *t, const cJSON *norm, const char *path,
                                   b8_err *e) {
    const char *b64 = get_str(norm, "precompiled_charsmap");
    if (!b64) return BERT8_OK; /* null: no normalization rules */
    size_t n = strlen(b64);
    uint8_t *buf = malloc(n / 4 * 3 + 4);
    if (!buf) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
    ptrdiff_t m = b64_decode(b64, buf);
    bert8_status st;
    if (m < 0)
        st = b8_fail(e, BERT8_ERR_FORMAT, "%s: precompiled_charsmap is not base64", path);
    else
        st = b8_ug_set_charsmap(t, buf, (size_t)m, path, e);
    free(buf);
    return st;
}

static bert8_status ug_normalizer(b8_tokenizer *t, const cJSON *norm, const char *path, b8_err *e) {
    if (!norm || cJSON_IsNull(norm)) return BERT8_OK;
    const char *type = get_str(norm, "type");
    if (type && !strcmp(type, "Precompiled")) return ug_precompiled(t, norm, path, e);
    if (type && !strcmp(type, "Sequence")) {
        const cJSON *list = get(norm, "normalizers");
        for (const cJSON *it = list ? list->child : NULL; it; it = it->next) {
            const char *ty = get_str(it, "type");
            if (ty && !strcmp(ty, "Precompiled")) {
                bert8_status st = ug_precompiled(t, it, path, e);
                if (st != BERT8_OK) return st;
            } else if (ty && (!strcmp(ty, "Replace") || !strcmp(ty, "Strip"))) {
                /* collapsing / trimming spaces: the sentencepiece normalizer does it anyway */
            } else {
                return b8_fail(e, BERT8_ERR_UNSUPPORTED,
                               "%s: normalizer \"%s\" is not supported with Unigram", path,
                               ty ? ty : "?");
            }
        }
        return BERT8_OK;
    }
    return b8_fail(e, BERT8_ERR_UNSUPPORTED, "%s: normalizer \"%s\" is not supported with Unigram",
                   path, type ? type : "?");
}

static bert8_status ug_metaspace(b8_tokenizer *t, const cJSON *pre, const char *path, b8_err *e) {
    const char *type = get_str(pre, "type");
    if (type && !strcmp(type, "Sequence")) {
        const cJSON *list = get(pre, "pretokenizers");
        for (const cJSON *it = list ? list->child : NULL; it; it = it->next) {
            const char *ty = get_str(it, "type");
            if (ty && !strcmp(ty, "WhitespaceSplit")) continue;
            return ug_metaspace(t, it, path, e);
        }
        return b8_fail(e, BERT8_ERR_UNSUPPORTED, "%s: no Metaspace pre-tokenizer", path);
    }
    if (!type || strcmp(type, "Metaspace"))
        return b8_fail(e, BERT8_ERR_UNSUPPORTED,
                       "%s: pre_tokenizer \"%s\" is not supported with Unigram (Metaspace is)",
                       path, type ? type : "?");
    const char *rep = get_str(pre, "replacement");
    if (rep && strcmp(rep, "\xe2\x96\x81"))
        return b8_fail(e, BERT8_ERR_UNSUPPORTED, "%s: Metaspace replacement must be U+2581", path);
    int prefix = get_flag(pre, "add_prefix_space", -1);
    const char *scheme = get_str(pre, "prepend_scheme");
    if (prefix < 0) prefix = !(scheme && !strcmp(scheme, "never"));
    t->ug.add_dummy_prefix = prefix;
    t->ug.remove_extra_ws = true;
    t->ug.escape_ws = true;
    return BERT8_OK;
}

/* ---- Post-processor -------------------------------------------------------------------- */

static bert8_status tmpl_special(b8_tokenizer *t, const cJSON *specials, const char *name,
                                 int32_t *id, const char *path, b8_err *e) {
    const cJSON *sp = specials ? get(specials, name) : NULL;
    const cJSON *ids = sp ? get(sp, "ids") : NULL;
    if (cJSON_IsArray(ids)) {
        int64_t v;
        if (cJSON_GetArraySize(ids) != 1 || !cJSON_IsNumber(ids->child))
            return b8_fail(e, BERT8_ERR_UNSUPPORTED,
                           "%s: template special token \"%s\" must map to exactly one id", path,
                           name);
        *id = get_id(ids->child, 0, t->vocab_size - 1, &v) ? (int32_t)v : -1;
    } else {
        *id = b8_tokenizer_token_to_id(t, name, strlen(name));
    }
    if (*id < 0 || *id >= t->vocab_size)
        return b8_fail(e, BERT8_ERR_FORMAT, "%s: template special token \"%s\" has no id", path,
                       name);
    return BERT8_OK;
}

static bert8_status parse_template(b8_tokenizer *t, const cJSON *list, const cJSON *specials,
                                   b8_tmpl_item *items, int *n, const char *path, b8_err *e) {
    *n = 0;
    if (!cJSON_IsArray(list))
        return b8_fail(e, BERT8_ERR_FORMAT, "%s: TemplateProcessing without a template", path);
    for (const cJSON *it = list->child; it; it = it->next) {
        if (*n >= B8_TMPL_MAX)
            return b8_fail(e, BERT8_ERR_UNSUPPORTED, "%s: template longer than %d items", path,
                           B8_TMPL_MAX);
        const cJSON *sp = get(it, "SpecialToken"), *sq = get(it, "Sequence");
        const cJSON *body = sp ? sp : sq;
        const char *name = body ? get_str(body, "id") : NULL;
        const cJSON *ty = body ? get(body, "type_id") : NULL;
        if (!name) return b8_fail(e, BERT8_ERR_FORMAT, "%s: template item without an id", path);
        int64_t type_id = 0;
        if (ty && !get_id(ty, 0, 127, &type_id))
            return b8_fail(e, BERT8_ERR_FORMAT, "%s: template item \"%s\": type_id is not in 0..127",
                           path, name);
        b8_tmpl_item ti = {B8_TMPL_SPECIAL, (int8_t)type_id, 0};
        if (sp) {
            bert8_status st = tmpl_special(t, specials, name, &ti.id, path, e);
            if (st != BERT8_OK) return st;
        } else if (!strcmp(name, "A")) {
            ti.kind = B8_TMPL_SEQ_A;
        } else if (!strcmp(name, "B")) {
            ti.kind = B8_TMPL_SEQ_B;
        } else {
            return b8_fail(e, BERT8_ERR_FORMAT, "%s: template sequence \"%s\"", path, name);
        }
        items[(*n)++] = ti;
    }
    return BERT8_OK;
}

/* BertProcessing / RobertaProcessing hold ["token", id] pairs. */
static int32_t pair_id(const cJSON *v) {
    int64_t id;
    return get_id(cJSON_GetArrayItem(v, 1), 0, INT32_MAX, &id) ? (int32_t)id : -1;
}

static bert8_status parse_post(b8_tokenizer *t, const cJSON *post, const char *path, b8_err *e) {
    if (!post || cJSON_IsNull(post)) {
        t->n_single = 1;
        t->tmpl_single[0] = (b8_tmpl_item){B8_TMPL_SEQ_A, 0, 0};
        t->n_pair = 2;
        t->tmpl_pair[0] = (b8_tmpl_item){B8_TMPL_SEQ_A, 0, 0};
        t->tmpl_pair[1] = (b8_tmpl_item){B8_TMPL_SEQ_B, t->kind != B8_TOK_UNIGRAM, 0};
        return BERT8_OK;
    }
    const char *type = get_str(post, "type");
    if (type && !strcmp(type, "Sequence")) {
        /* e.g. ByteLevel (offsets) then TemplateProcessing (special tokens) */
        const cJSON *list = get(post, "processors");
        if (!cJSON_IsArray(list))
            return b8_fail(e, BERT8_ERR_FORMAT, "%s: Sequence post_processor without a list", path);
        bert8_status st = parse_post(t, NULL, path, e);
        for (const cJSON *it = list->child; it && st == BERT8_OK; it = it->next) {
            const char *ty = get_str(it, "type");
            if (ty && !strcmp(ty, "Sequence"))
                return b8_fail(e, BERT8_ERR_UNSUPPORTED, "%s: nested post_processor Sequence", path);
            st = parse_post(t, it, path, e);
        }
        return st;
    }
    if (type && (!strcmp(type, "RobertaProcessing") || !strcmp(type, "ByteLevel"))) {
        if (t->kind != B8_TOK_BPE && !strcmp(type, "ByteLevel"))
            return b8_fail(e, BERT8_ERR_UNSUPPORTED, "%s: a ByteLevel post_processor needs a BPE model",
                           path);
        /* offset trimming of byte-level tokens (defaults as in `tokenizers`) */
        t->bpe.trim_offsets = t->kind == B8_TOK_BPE && get_flag(post, "trim_offsets", 1) == 1;
        t->bpe.trim_prefix_space = get_flag(post, "add_prefix_space", 1) == 1;
        if (!strcmp(type, "ByteLevel")) /* no special tokens of its own */
            return t->n_single ? BERT8_OK : parse_post(t, NULL, path, e);
    }
    if (type && (!strcmp(type, "BertProcessing") || !strcmp(type, "RobertaProcessing"))) {
        int32_t cls = pair_id(get(post, "cls")), sep = pair_id(get(post, "sep"));
        if (cls < 0 || sep < 0 || cls >= t->vocab_size || sep >= t->vocab_size)
            return b8_fail(e, BERT8_ERR_FORMAT, "%s: %s without cls/sep ids", path, type);
        t->special[B8_SPECIAL_CLS] = cls;
        t->special[B8_SPECIAL_SEP] = sep;
        b8_tok_kind keep = t->kind;
        /* the default templates are BERT's and XLM-R's; pick by processor, not model */
        t->kind = !strcmp(type, "BertProcessing") ? B8_TOK_WORDPIECE : B8_TOK_UNIGRAM;
        b8_tok_default_templates(t);
        t->kind = keep;
        return BERT8_OK;
    }
    if (type && !strcmp(type, "TemplateProcessing")) {
        const cJSON *specials = get(post, "special_tokens");
        bert8_status st =
            parse_template(t, get(post, "single"), specials, t->tmpl_single, &t->n_single, path, e);
        if (st == BERT8_OK)
            st = parse_template(t, get(post, "pair"), specials, t->tmpl_pair, &t->n_pair, path, e);
        if (st != BERT8_OK) return st;
        /* roles: the first special is the classifier token, the last the separator */
        for (int i = 0; i < t->n_single; i++) {
            if (t->tmpl_single[i].kind != B8_TMPL_SPECIAL) continue;
            if (i == 0)
                t->special[B8_SPECIAL_CLS] = t->tmpl_single[i].id;
            else
                t->special[B8_SPECIAL_SEP] = t->tmpl_single[i].id;
        }
        return BERT8_OK;
    }
    return b8_fail(e, BERT8_ERR_UNSUPPORTED, "%s: post_processor \"%s\" is not supported", path,
                   type ? type : "?");
}

/* ---- Entry ------------------------------------------------------------------------------ */

static bert8_status parse(const cJSON *root, const char *path, const b8_tok_options *opt,
                          b8_tokenizer **out, b8_err *e) {
    const cJSON *model = get(root, "model");
    if (!cJSON_IsObject(model))
        return b8_fail(e, BERT8_ERR_FORMAT, "%s: no \"model\" object", path);
    const char *mtype = get_str(model, "type");
    const cJSON *vocab = get(model, "vocab");
    b8_tok_kind kind;
    if (mtype ? !strcmp(mtype, "BPE") : (cJSON_IsObject(vocab) && get(model, "merges")))
        kind = B8_TOK_BPE;
    else if (mtype ? !strcmp(mtype, "WordPiece") : cJSON_IsObject(vocab))
        kind = B8_TOK_WORDPIECE;
    else if (mtype ? !strcmp(mtype, "Unigram") : cJSON_IsArray(vocab))
        kind = B8_TOK_UNIGRAM;
    else
        return b8_fail(e, BERT8_ERR_UNSUPPORTED, "%s: model type \"%s\" is not supported", path,
                       mtype ? mtype : "?");
    b8_tokenizer *t = b8_tok_alloc(kind);
    if (!t) return b8_fail(e, BERT8_ERR_NOMEM, "out of memory");
    bert8_status st;
    if (kind == B8_TOK_WORDPIECE) {
        st = parse_wordpiece(t, model, path, e);
        if (st == BERT8_OK) st = wp_normalizer(t, get(root, "normalizer"), path, e);
        const cJSON *pre = get(root, "pre_tokenizer");
        const char *pty = pre ? get_str(pre, "type") : NULL;
        if (st == BERT8_OK && (!pty || strcmp(pty, "BertPreTokenizer")))
            st = b8_fail(e, BERT8_ERR_UNSUPPORTED,
                         "%s: pre_tokenizer \"%s\" is not supported with WordPiece "
                         "(BertPreTokenizer is)",
                         path, pty ? pty : "null");
        if (st == BERT8_OK && opt) {
            if (opt->lowercase >= 0) t->wp.lowercase = opt->lowercase;
            if (opt->strip_accents >= 0)
                t->wp.strip_accents = opt->strip_accents;
            else if (opt->lowercase >= 0)
                t->wp.strip_accents = t->wp.lowercase;
            if (opt->tokenize_chinese_chars >= 0) t->wp.chinese = opt->tokenize_chinese_chars;
        }
    } else if (kind == B8_TOK_BPE) {
        st = b8_bpe_parse_model(t, model, path, e);
        if (st == BERT8_OK) st = b8_bpe_parse_pipeline(t, root, path, e);
    } else {
        st = parse_unigram(t, model, path, e);
        if (st == BERT8_OK) st = ug_normalizer(t, get(root, "normalizer"), path, e);
        if (st == BERT8_OK) st = ug_metaspace(t, get(root, "pre_tokenizer"), path, e);
    }
    const cJSON *added = get(root, "added_tokens");
    int n_entry = 0;
    for (const cJSON *it = cJSON_IsArray(added) ? added->child : NULL; it && st == BERT8_OK;
         it = it->next, n_entry++) {
        const char *content = get_str(it, "content");
        int64_t id;
        if (!content || !get_id(get(it, "id"), 0, INT32_MAX - 16, &id)) {
            st = b8_fail(e, BERT8_ERR_FORMAT,
                         "%s: added_tokens entry without a string content and an integer id in "
                         "[0, %d]",
                         path, INT32_MAX - 16);
            break;
        }
        /* lstrip, rstrip, single_word, special, normalized (default: not special) */
        static const char *const flags[] = {"lstrip", "rstrip", "single_word", "special", "normalized"};
        bool fv[5] = {false, false, false, false, true};
        for (int k = 0; k < 5 && st == BERT8_OK; k++)
            if (!get_bool_strict(it, flags[k], false, &fv[k]))
                st = b8_fail(e, BERT8_ERR_FORMAT, "%s: added_tokens[%d].%s must be true or false, not %s", path, n_entry,
                             flags[k], json_kind(get(it, flags[k])));
        if (st != BERT8_OK) break;
        if (!get(it, "normalized")) fv[4] = !fv[3];
        st = b8_tok_add_token(t, content, strlen(content), (int32_t)id, fv[0], fv[1], fv[2], fv[3], e);
        if (st != BERT8_OK) b8_wrap(e, "%s: added_tokens", path);
        const int at = st == BERT8_OK ? b8_added_find(t, content, strlen(content)) : -1;
        if (at >= 0) t->added[at].normalized = fv[4];
    }
    if (st == BERT8_OK && kind == B8_TOK_UNIGRAM) st = finish_unigram(t, path, e);
    if (st == BERT8_OK) st = parse_post(t, get(root, "post_processor"), path, e);
    if (st == BERT8_OK) {
        /* roles the file itself implies; tokenizer_config.json may refine them later */
        static const char *const pads[] = {"[PAD]", "<pad>"}, *const masks[] = {"[MASK]", "<mask>"};
        const cJSON *pad = get(root, "padding");
        const cJSON *pid = pad ? get(pad, "pad_id") : NULL;
        int64_t pv;
        if (pid && !get_id(pid, 0, t->vocab_size - 1, &pv)) {
            st = b8_fail(e, BERT8_ERR_FORMAT, "%s: padding.pad_id is not an id in [0, %lld)", path,
                         (long long)t->vocab_size);
            b8_tokenizer_free(t);
            return st;
        }
        if (pid) t->special[B8_SPECIAL_PAD] = (int32_t)pv;
        for (int k = 0; k < 2; k++) {
            int32_t p = b8_tokenizer_token_to_id(t, pads[k], strlen(pads[k]));
            int32_t m = b8_tokenizer_token_to_id(t, masks[k], strlen(masks[k]));
            if (t->special[B8_SPECIAL_PAD] < 0 && p >= 0 && p != t->special[B8_SPECIAL_UNK])
                t->special[B8_SPECIAL_PAD] = p;
            if (t->special[B8_SPECIAL_MASK] < 0 && m >= 0 && m != t->special[B8_SPECIAL_UNK])
                t->special[B8_SPECIAL_MASK] = m;
        }
        if (kind != B8_TOK_WORDPIECE) {
            t->special[B8_SPECIAL_BOS] = t->special[B8_SPECIAL_CLS];
            t->special[B8_SPECIAL_EOS] = t->special[B8_SPECIAL_SEP];
        }
        const cJSON *trunc = get(root, "truncation");
        const cJSON *ml = trunc ? get(trunc, "max_length") : NULL;
        if (cJSON_IsNumber(ml) && ml->valuedouble >= 1 && ml->valuedouble < 9.0e18)
            t->model_max_length = (int64_t)ml->valuedouble;
        st = b8_tok_finish(t, e);
    }
    if (st != BERT8_OK) {
        b8_tokenizer_free(t);
        return st;
    }
    *out = t;
    return BERT8_OK;
}

bert8_status b8_tokjson_parse(const char *text, size_t len, const char *path,
                              const b8_tok_options *opt, b8_tokenizer **out, b8_err *e) {
    *out = NULL;
    cJSON *root = cJSON_ParseWithLength(text, len);
    if (!root) {
        const char *where = cJSON_GetErrorPtr();
        long off = where && where >= text && where <= text + len ? (long)(where - text) : -1;
        return b8_fail(e, BERT8_ERR_FORMAT, "%s: invalid JSON near byte offset %ld", path, off);
    }
    bert8_status st = b8_json_refuse_nul(text, len, path, e);
    if (!st) st = parse(root, path, opt, out, e);
    cJSON_Delete(root);
    return st;
}
