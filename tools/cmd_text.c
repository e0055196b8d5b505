/* cmd_text.c: `bert8 tokenize`, `bert8 classify` and `bert8 embed`, text commands with one result
 * per input (the input, the batch loop and the common options: text_cmd.c).
 *
 * What each prints:
 *   tokenize  input_ids, token_type_ids (zeros for XLM-R, as its HF tokenizer gives),
 *             tokens, offsets into the token's own text, sequence_ids, word_ids (null for
 *             special tokens). No truncation unless --max-length.
 *   classify  label, label_id, score and all scores (softmax, keyed by id2label); a
 *             regression head (one label) prints its value as score. --logits adds logits.
 *   embed     embedding: a sentence-transformers folder's modules (every pooling mode,
 *             Dense, Normalize) and default prompt, else mean pooling; --pooling and
 *             --normalize/--no-normalize override the folder, --prompt-name NAME /
 *             --prompt TEXT choose the prompt prepended to each text.
 */
#include "text_cmd.h"

#include <stdlib.h>
#include <string.h>

/* ---- tokenize ------------------------------------------------------------------------------- */

static bert8_status tokenize_compute(tcmd *c, int64_t n, const bert8_text *a, const bert8_text *b) {
    c->r.err[0] = 0;
    bert8_status st = bert8_encode_texts(c->r.tok, n, a, b, &c->ep, &c->r.enc, c->r.err, sizeof c->r.err);
    if (st && !c->r.err[0]) snprintf(c->r.err, sizeof c->r.err, "%s", bert8_status_string(st));
    return st;
}


static void print_ids(const int32_t *v, int64_t n, bool null_negative) {
    putchar('[');
    for (int64_t i = 0; i < n; i++) {
        if (i) putchar(',');
        if (null_negative && v[i] < 0)
            fputs("null", stdout);
        else
            printf("%d", v[i]);
    }
    putchar(']');
}

static void tokenize_print(tcmd *c, const item *it, int64_t k) {
    const bert8_encoding *e = &c->r.enc;
    const int64_t T = e->seq, L = e->lengths[k];
    const int64_t *off = e->offsets + 2 * k * T;
    const int32_t *seq = e->sequence_ids + k * T;
    text_chars ca, cb;
    text_chars_init(&ca, it->a, strlen(it->a));
    text_chars_init(&cb, it->b ? it->b : "", it->b ? strlen(it->b) : 0);
    tcmd_print_head(it);
    printf("\"input_ids\":");
    print_ids(e->input_ids + k * T, L, false);
    printf(",\"token_type_ids\":");
    print_ids(e->token_type_ids + k * T, L, false);
    printf(",\"tokens\":[");
    for (int64_t j = 0; j < L; j++) {
        const char *s = bert8_tokenizer_id_to_token(c->r.tok, e->input_ids[k * T + j]);
        if (j) putchar(',');
        cli_print_json_string(stdout, s ? s : "");
    }
    printf("],\"offsets\":[");
    for (int64_t j = 0; j < L; j++) {
        text_chars *tc = seq[j] == 1 ? &cb : &ca;
        int64_t s = seq[j] < 0 ? 0 : text_chars_at(tc, off[2 * j]),
                f = seq[j] < 0 ? 0 : text_chars_at(tc, off[2 * j + 1]);
        printf("%s[%lld,%lld]", j ? "," : "", (long long)s, (long long)f);
    }
    printf("],\"byte_offsets\":[");
    for (int64_t j = 0; j < L; j++)
        printf("%s[%lld,%lld]", j ? "," : "", (long long)off[2 * j], (long long)off[2 * j + 1]);
    printf("],\"sequence_ids\":");
    print_ids(seq, L, true);
    printf(",\"word_ids\":");
    print_ids(e->word_ids + k * T, L, true);
    printf("}\n");
}

/* ---- classify ------------------------------------------------------------------------------ */

static bert8_status classify_compute(tcmd *c, int64_t n, const bert8_text *a, const bert8_text *b) {
    if (!tcmd_grow((void **)&c->out, (size_t)n * (size_t)c->width, sizeof(float))) {
        snprintf(c->r.err, sizeof c->r.err, "out of memory");
        return BERT8_ERR_NOMEM;
    }
    bert8_run_options o = tcmd_run_opts(c);
    return bert8_classify(c->r.pl, n, a, b, &o, BERT8_SCORE_NONE, c->out, c->r.err, sizeof c->r.err);
}

static void classify_print(tcmd *c, const item *it, int64_t k) {
    const int64_t L = c->width;
    const float *lg = c->out + k * L;
    tcmd_print_head(it);
    if (L == 1) { /* a regression head: the value itself */
        printf("\"score\":");
        cli_print_float(stdout, lg[0]);
    } else {
        float *p = c->tmp;
        int64_t best = text_softmax(lg, L, p);
        printf("\"label\":");
        cli_print_json_string(stdout, bert8_model_label(c->r.model, best));
        printf(",\"label_id\":%lld,\"score\":", (long long)best);
        cli_print_float(stdout, p[best]);
        printf(",\"scores\":{");
        for (int64_t j = 0; j < L; j++) {
            if (j) putchar(',');
            cli_print_json_string(stdout, bert8_model_label(c->r.model, j));
            putchar(':');
            cli_print_float(stdout, p[j]);
        }
        putchar('}');
    }
    if (c->logits) {
        printf(",\"logits\":");
        tcmd_print_floats(lg, L);
    }
    printf("}\n");
}

/* ---- embed --------------------------------------------------------------------------------- */

static bert8_status embed_compute(tcmd *c, int64_t n, const bert8_text *a, const bert8_text *b) {
    if (!tcmd_grow((void **)&c->out, (size_t)n * (size_t)c->width, sizeof(float))) {
        snprintf(c->r.err, sizeof c->r.err, "out of memory");
        return BERT8_ERR_NOMEM;
    }
    bert8_run_options o = tcmd_run_opts(c);
    bert8_embed_options eo = bert8_default_embed_options();
    eo.prompt_name = c->prompt_name;
    if (c->prompt) eo.prompt = (bert8_text){c->prompt, strlen(c->prompt)};
    return bert8_embed(c->r.pl, n, a, b, &o, &eo, c->out, c->r.err, sizeof c->r.err);
}

static void embed_print(tcmd *c, const item *it, int64_t k) {
    tcmd_print_head(it);
    printf("\"embedding\":");
    tcmd_print_floats(c->out + k * c->width, c->width);
    printf("}\n");
}

static bert8_status sparse_compute(tcmd *c, int64_t n, const bert8_text *a, const bert8_text *b) {
    (void)b;
    bert8_sparse_embeddings_free(&c->sparse);
    bert8_run_options o = tcmd_run_opts(c);
    return bert8_embed_sparse(c->r.pl, n, a, &o, &c->sparse, c->r.err, sizeof c->r.err);
}

/* TEI's sparse form: the non-zero entries as {"index", "value"}, by index. */
static void sparse_print(tcmd *c, const item *it, int64_t k) {
    const bert8_sparse_embeddings *r = &c->sparse;
    tcmd_print_head(it);
    printf("\"embedding\":[");
    for (int64_t j = r->offsets[k]; j < r->offsets[k + 1]; j++) {
        printf("%s{\"index\":%d,\"value\":", j > r->offsets[k] ? "," : "", r->indices[j]);
        cli_print_float(stdout, r->values[j]);
        putchar('}');
    }
    printf("]}\n");
}

/* ---- commands ------------------------------------------------------------------------------- */

int cmd_tokenize(int argc, char **argv) {
    tcmd c = {.name = "tokenize", .fa = "text", .fb = "text_pair"};
    cli_args a;
    cli_args_init(&a, argc, argv);
    if (tcmd_want_help(
            &a, "usage: bert8 tokenize MODEL_DIR [--max-length N] [--no-special-tokens] < lines\n"))
        return 0;
    long threads, max_len;
    if (!tcmd_options(&c, &a, &threads, &max_len)) return 1;
    bool nospecial = cli_flag(&a, "--no-special-tokens");
    const char *dir = cli_positional(&a);
    int rc = tcmd_finish(&c, &a, dir, threads, max_len, -1, 0);
    if (rc < 0) {
        c.ep = bert8_default_encode_params();
        c.ep.add_special_tokens = !nospecial;
        if (max_len > 0) {
            c.ep.truncation = BERT8_TRUNCATE_LONGEST_FIRST;
            c.ep.max_length = max_len;
        }
        c.compute = tokenize_compute;
        c.print = tokenize_print;
        rc = tcmd_drive(&c);
    }
    tcmd_free(&c);
    return rc;
}

int cmd_classify(int argc, char **argv) {
    tcmd c = {.name = "classify", .fa = "text", .fb = "text_pair", .with_model = true};
    cli_args a;
    cli_args_init(&a, argc, argv);
    if (tcmd_want_help(&a, "usage: bert8 classify MODEL_DIR [--logits] < lines\n")) return 0;
    long threads, max_len;
    if (!tcmd_options(&c, &a, &threads, &max_len)) return 1;
    c.logits = cli_flag(&a, "--logits");
    const char *dir = cli_positional(&a);
    int rc = tcmd_finish(&c, &a, dir, threads, max_len, BERT8_HEAD_SEQ_CLS, 0);
    if (rc < 0) {
        c.width = c.r.info->num_labels;
        c.ep = bert8_default_encode_params();
        c.ep.truncation = BERT8_TRUNCATE_LONGEST_FIRST;
        c.ep.max_length = c.max_len;
        c.compute = classify_compute;
        c.print = classify_print;
        rc = tcmd_drive_labels(&c);
    }
    tcmd_free(&c);
    return rc;
}

int cmd_embed(int argc, char **argv) {
    tcmd c = {.name = "embed", .fa = "text", .fb = "text_pair", .with_model = true, .normalize = -1,
              .refuse_empty = true};
    cli_args a;
    cli_args_init(&a, argc, argv);
    if (tcmd_want_help(&a, "usage: bert8 embed MODEL_DIR [--pooling cls|mean|max|mean_sqrt_len_tokens|weightedmean|lasttoken|splade] "
                      "[--normalize|--no-normalize] [--prompt-name NAME | --prompt TEXT] < lines\n"
                      "  a sentence-transformers folder's modules (pooling, Dense, Normalize) and default prompt apply\n"
                      "  unless flags say otherwise; --prompt-name picks one of config_sentence_transformers.json's\n"
                      "  prompts, --prompt prepends TEXT (\"\" for none)\n"
                      "  --pooling splade (masked-LM models): sparse {\"index\", \"value\"} entries, max over tokens of\n"
                      "  log(1 + relu(logits))\n"))
        return 0;
    long threads, max_len;
    if (!tcmd_options(&c, &a, &threads, &max_len)) return 1;
    const char *pool = cli_opt(&a, "--pooling");
    c.prompt_name = cli_opt(&a, "--prompt-name");
    c.prompt = cli_opt(&a, "--prompt");
    if (c.prompt_name && c.prompt) return cli_error(c.name, "--prompt-name and --prompt cannot both be given");
    bool norm_flag = cli_flag(&a, "--normalize"), no_norm = cli_flag(&a, "--no-normalize");
    c.splade = pool && !strcmp(pool, "splade");
    if (pool && !c.splade) {
        static const struct {
            const char *name;
            bert8_pooling p;
        } POOLS[] = {{"cls", BERT8_POOLING_CLS},
                     {"mean", BERT8_POOLING_MEAN},
                     {"max", BERT8_POOLING_MAX},
                     {"mean_sqrt_len_tokens", BERT8_POOLING_MEAN_SQRT_LEN},
                     {"weightedmean", BERT8_POOLING_WEIGHTED_MEAN},
                     {"lasttoken", BERT8_POOLING_LAST_TOKEN}};
        c.pool = BERT8_POOLING_DEFAULT;
        for (size_t i = 0; i < sizeof POOLS / sizeof *POOLS; i++)
            if (!strcmp(pool, POOLS[i].name)) c.pool = POOLS[i].p;
        if (c.pool == BERT8_POOLING_DEFAULT)
            return cli_error(c.name,
                             "--pooling must be cls, mean, max, mean_sqrt_len_tokens, weightedmean, lasttoken or splade, "
                             "not \"%s\"",
                             pool);
    }
    const char *dir = cli_positional(&a);
    if (norm_flag) c.normalize = 1;
    if (no_norm) c.normalize = 0;
    int rc = tcmd_finish(&c, &a, dir, threads, max_len, -1, 0);
    if (rc < 0 && c.prompt_name) { /* a name the folder lacks fails every line: say so once */
        const char *name;
        bool found = false;
        for (int64_t i = 0; bert8_pipeline_prompt(c.r.pl, i, &name, NULL); i++) found = found || !strcmp(name, c.prompt_name);
        if (!found) {
            cli_error(c.name, "--prompt-name \"%s\": %s has no such prompt (%lld in config_sentence_transformers.json)",
                      c.prompt_name, dir, (long long)bert8_pipeline_get_info(c.r.pl)->prompts);
            rc = 2;
        }
    }
    if (rc < 0 && c.splade && (c.prompt_name || c.prompt || norm_flag || no_norm)) {
        rc = cli_error(c.name, "--pooling splade takes no prompt and no normalization");
    } else if (rc < 0 && c.splade && !c.r.info->has_mlm_head) {
        rc = cli_error(c.name, "--pooling splade needs a masked-LM head, and %s has none (architecture \"%s\")", dir,
                       c.r.info->architecture);
    } else if (rc < 0) {
        c.width = bert8_pipeline_get_info(c.r.pl)->dim;
        c.ep = bert8_default_encode_params();
        c.ep.truncation = BERT8_TRUNCATE_LONGEST_FIRST;
        c.ep.max_length = c.max_len;
        c.compute = c.splade ? sparse_compute : embed_compute;
        c.print = c.splade ? sparse_print : embed_print;
        rc = tcmd_drive(&c);
    }
    tcmd_free(&c);
    return rc;
}
