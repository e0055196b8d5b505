/* cmd_text.c: the text-level commands `bert8 tokenize | classify | embed | qa | ner | fill-mask`.
 *
 * Input (stdin), one input per line:
 *   - a JSON object: {"text": ..., "text_pair": ...} ({"question": ..., "context": ...} for qa;
 *     an optional "id" of any type is echoed in the output line);
 *   - or plain text: the line is the text; "A<TAB>B" is a pair (qa: question<TAB>context;
 *     ner takes no pairs). --plain treats every line as plain text, also lines starting '{'.
 * Empty lines are skipped. Output (stdout): one JSON object per input line, in input order.
 * A bad line (invalid JSON or UTF-8, a missing field, a NUL byte, longer than
 * --max-line-bytes, or text the model cannot take) prints "bert8 CMD: line N: why" on stderr
 * and {"line": N, "error": "why"} on stdout, and the command goes on; the exit status is then 1
 * (--strict stops after the batch holding the first bad line). Offsets: "start"/"end" and
 * "offsets" count Unicode characters (as Hugging Face's offset_mapping and pipelines do);
 * the *_byte variants count UTF-8 bytes.
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
 *   qa        answer, score, start/end: the best span over all windows (only_second
 *             truncation, overflow windows of --max-length, default 384 or the model's
 *             limit, overlapping by --stride, default min(128, max_length / 3)) with start <=
 *             end, both in the context, at most --max-answer-len tokens (30). score is the
 *             product of the start and end softmax probabilities, each taken over the
 *             window's context tokens (HF's pipeline); --score logit ranks by the sum of
 *             the two logits instead (the SQuAD reference post-processing). An empty
 *             context gives "answer": null.
 *   ner       words: each pre-tokenized word with the label and probability of its first
 *             sub-token (long texts run in overlapping windows; a word seen twice takes
 *             the window where it has more context); entities: runs of words merged by
 *             B-X / I-X (a bare label X acts as I-X, "O" is outside), score = mean word
 *             score, text = the span from the first word's start to the last word's end.
 *   fill-mask predictions: for each mask token, the --top-k (5) most likely tokens with their
 *             softmax score, token id, token_str and the text with the token in place
 *             (transformers' fill-mask pipeline: a list for one mask, a list per mask for several).
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "text_io.h"
#include "text_runner.h"

#define MAX_BATCH 4096

typedef struct item {
    int64_t line;
    char *a, *b; /* text and pair (pair NULL for a single text) */
    char *id;    /* the "id" value as JSON, or NULL */
    char *error; /* why this line cannot be processed (NULL if out of memory) */
    bool bad;    /* the line cannot be processed */
} item;

typedef struct tcmd tcmd;
struct tcmd {
    const char *name;
    const char *fa, *fb; /* JSON field names (fb NULL: no second text) */
    bool pair_needed;
    bool with_model;
    bool plain, strict;
    const char *lora_task; /* --lora-task */
    size_t max_line;
    int64_t batch, max_len, stride;
    text_runner r;
    bert8_encode_params ep;
    int64_t failed;
    bert8_status (*compute)(tcmd *c, int64_t n, const bert8_text *a, const bert8_text *b);
    void (*print)(tcmd *c, const item *it, int64_t k);
    /* classify / embed */
    float *out;
    float *tmp; /* [width] scratch for a softmax */
    int64_t width;
    bool logits;
    bert8_pooling pool;
    int normalize; /* -1: the folder's */
    const char *prompt_name, *prompt; /* embed: --prompt-name, --prompt (NULL: the folder's default) */
    /* qa */
    bert8_qa_answer *answers;
    bert8_qa_options qo;
    /* ner */
    bert8_ner_result ner;
    /* embed --pooling splade */
    bool splade;
    bert8_sparse_embeddings sparse;
    /* fill-mask */
    bert8_fill_mask_result fm;
    int64_t top_k;
};

/* ---- input ------------------------------------------------------------------------------ */

static void item_clear(item *it) {
    free(it->a);
    free(it->b);
    free(it->id);
    free(it->error);
    memset(it, 0, sizeof *it);
}

static void item_fail(item *it, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void item_fail(item *it, const char *fmt, ...) {
    char msg[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    free(it->error);
    it->error = strdup(msg); /* NULL when out of memory: printed as such */
    it->bad = true;
}

static char *dup_n(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

/* Takes field `name` of a JSON object as a string; `optional` also allows absent or null. */
static bool json_text(item *it, const cJSON *root, const char *name, bool optional, char **out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
    if (!v || cJSON_IsNull(v)) {
        if (optional) return true;
        item_fail(it, "missing field \"%s\"", name);
        return false;
    }
    if (!cJSON_IsString(v) || !v->valuestring) {
        item_fail(it, "field \"%s\" is not a string", name);
        return false;
    }
    size_t bad, n = strlen(v->valuestring);
    if (!bert8_utf8_valid(v->valuestring, n, &bad)) {
        item_fail(it, "field \"%s\" is not valid UTF-8 (byte %zu, from a \\u escape)", name, bad);
        return false;
    }
    if (!(*out = dup_n(v->valuestring, n))) item_fail(it, "out of memory");
    return *out != NULL;
}

static void parse_item(tcmd *c, const text_line *l, item *it) {
    memset(it, 0, sizeof *it);
    it->line = l->lineno;
    size_t bad;
    if (l->too_long)
        return item_fail(it, "longer than %zu bytes (see --max-line-bytes)", c->max_line);
    if (l->has_nul) return item_fail(it, "contains a NUL byte (binary input?)");
    if (!bert8_utf8_valid(l->buf, l->len, &bad)) return item_fail(it, "invalid UTF-8 at byte %zu", bad);
    size_t lead = strspn(l->buf, " \t");
    if (!c->plain && l->buf[lead] == '{') {
        /* cJSON ends a string at an escaped NUL, which would silently cut the text. */
        for (const char *p = l->buf; (p = strstr(p, "\\u0000")) != NULL; p++) {
            size_t bs = 0;
            while (p - bs > l->buf && p[-(ptrdiff_t)bs - 1] == '\\')
                bs++;
            if (bs % 2 == 0)
                return item_fail(it, "a string holds an escaped NUL (\\u0000) at byte %zu",
                                 (size_t)(p - l->buf));
        }
        cJSON *root = cJSON_ParseWithLength(l->buf, l->len);
        if (!root || !cJSON_IsObject(root)) {
            const char *ep = cJSON_GetErrorPtr();
            if (!root && ep && ep >= l->buf && ep <= l->buf + l->len)
                item_fail(it, "invalid JSON near byte %zu", (size_t)(ep - l->buf));
            else
                item_fail(it, "not a JSON object");
            cJSON_Delete(root);
            return;
        }
        if (json_text(it, root, c->fa, false, &it->a) &&
            (!c->fb || json_text(it, root, c->fb, !c->pair_needed, &it->b))) {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(root, "id");
            if (id && !(it->id = cJSON_PrintUnformatted(id))) item_fail(it, "out of memory");
        }
        cJSON_Delete(root);
        return;
    }
    const char *tab = c->fb ? memchr(l->buf, '\t', l->len) : NULL;
    if (c->pair_needed && !tab)
        return item_fail(it, "expected \"%s<TAB>%s\" or a JSON object", c->fa, c->fb);
    size_t na = tab ? (size_t)(tab - l->buf) : l->len;
    it->a = dup_n(l->buf, na);
    if (tab) it->b = dup_n(tab + 1, l->len - na - 1);
    if (!it->a || (tab && !it->b)) item_fail(it, "out of memory");
}

/* ---- output ----------------------------------------------------------------------------- */

static void print_head(const item *it) {
    putchar('{');
    if (it->id) printf("\"id\":%s,", it->id);
}

static void print_error(tcmd *c, const item *it) {
    const char *why = it->error ? it->error : "out of memory";
    fprintf(stderr, "bert8 %s: line %lld: %s\n", c->name, (long long)it->line, why);
    print_head(it);
    printf("\"line\":%lld,\"error\":", (long long)it->line);
    cli_print_json_string(stdout, why);
    printf("}\n");
    c->failed++;
}

static void print_floats(const float *v, int64_t n) {
    putchar('[');
    for (int64_t i = 0; i < n; i++) {
        if (i) putchar(',');
        cli_print_float(stdout, v[i]);
    }
    putchar(']');
}

/* "start","end" (characters) and "start_byte","end_byte" of a span of text. */
static void print_span(text_chars *tc, int64_t b0, int64_t b1) {
    printf("\"start\":%lld,\"end\":%lld,\"start_byte\":%lld,\"end_byte\":%lld",
           (long long)text_chars_at(tc, b0), (long long)text_chars_at(tc, b1), (long long)b0,
           (long long)b1);
}

/* ---- the batch loop ----------------------------------------------------------------------- */

/* Runs the valid items of a group and prints every item in order. When the group fails as a
 * whole, each item is run on its own so the failure lands on the line that caused it. */
static void run_group(tcmd *c, item *it, int64_t n) {
    bert8_text a[MAX_BATCH], b[MAX_BATCH];
    int64_t nv = 0;
    for (int64_t i = 0; i < n; i++)
        if (!it[i].bad) {
            a[nv] = (bert8_text){it[i].a, strlen(it[i].a)};
            b[nv] = (bert8_text){it[i].b, it[i].b ? strlen(it[i].b) : 0};
            nv++;
        }
    if (nv) {
        bert8_status st = c->compute(c, nv, a, b);
        if (st && nv > 1) {
            for (int64_t i = 0; i < n; i++)
                run_group(c, it + i, 1);
            return;
        }
        if (st)
            for (int64_t i = 0; i < n; i++)
                if (!it[i].bad) item_fail(&it[i], "%s", c->r.err);
    }
    for (int64_t i = 0, k = 0; i < n; i++) {
        if (it[i].bad)
            print_error(c, &it[i]);
        else
            c->print(c, &it[i], k++);
    }
}

static int drive(tcmd *c) {
    item *items = calloc((size_t)c->batch, sizeof *items);
    if (!items) return cli_error(c->name, "out of memory");
    text_line line = {0};
    int64_t n = 0;
    int got;
    while ((got = text_read_line(stdin, &line, c->max_line)) == 1) {
        if (line.len == 0 && !line.too_long) continue;
        parse_item(c, &line, &items[n++]);
        if (n == c->batch) {
            run_group(c, items, n);
            for (int64_t i = 0; i < n; i++)
                item_clear(&items[i]);
            n = 0;
            fflush(stdout);
            if (c->strict && c->failed) break;
        }
    }
    if (n) run_group(c, items, n);
    for (int64_t i = 0; i < n; i++)
        item_clear(&items[i]);
    free(items);
    text_line_free(&line);
    fflush(stdout);
    if (got < 0) return cli_error(c->name, "reading stdin failed (read error or out of memory)");
    if (ferror(stdout)) return cli_error(c->name, "writing stdout failed");
    if (c->failed) {
        fprintf(stderr, "bert8 %s: %lld line(s) failed\n", c->name, (long long)c->failed);
        return 1;
    }
    return 0;
}

/* drive() for commands that take a softmax over the model's labels. */
static int drive_labels(tcmd *c) {
    if (c->width < 1) return cli_error(c->name, "the model has no labels");
    if (!(c->tmp = malloc((size_t)c->width * sizeof(float))))
        return cli_error(c->name, "out of memory");
    return drive(c);
}

static bool grow(void **p, size_t count, size_t size) {
    size_t bytes;
    if (__builtin_mul_overflow(count, size, &bytes)) return false;
    void *np = realloc(*p, bytes ? bytes : 1);
    if (!np) return false;
    *p = np;
    return true;
}

/* ---- tokenize ------------------------------------------------------------------------------- */

static bert8_status tokenize_compute(tcmd *c, int64_t n, const bert8_text *a, const bert8_text *b) {
    c->r.err[0] = 0;
    bert8_status st = bert8_encode_texts(c->r.tok, n, a, b, &c->ep, &c->r.enc, c->r.err, sizeof c->r.err);
    if (st && !c->r.err[0]) snprintf(c->r.err, sizeof c->r.err, "%s", bert8_status_string(st));
    return st;
}

/* The run options of the model commands: longest_first truncation at --max-length. */
static bert8_run_options run_opts(const tcmd *c) {
    bert8_run_options o = bert8_default_run_options();
    o.max_length = c->max_len;
    return o;
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
    print_head(it);
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
    if (!grow((void **)&c->out, (size_t)n * (size_t)c->width, sizeof(float))) {
        snprintf(c->r.err, sizeof c->r.err, "out of memory");
        return BERT8_ERR_NOMEM;
    }
    bert8_run_options o = run_opts(c);
    return bert8_classify(c->r.pl, n, a, b, &o, BERT8_SCORE_NONE, c->out, c->r.err, sizeof c->r.err);
}

static void classify_print(tcmd *c, const item *it, int64_t k) {
    const int64_t L = c->width;
    const float *lg = c->out + k * L;
    print_head(it);
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
        print_floats(lg, L);
    }
    printf("}\n");
}

/* ---- embed --------------------------------------------------------------------------------- */

static bert8_status embed_compute(tcmd *c, int64_t n, const bert8_text *a, const bert8_text *b) {
    if (!grow((void **)&c->out, (size_t)n * (size_t)c->width, sizeof(float))) {
        snprintf(c->r.err, sizeof c->r.err, "out of memory");
        return BERT8_ERR_NOMEM;
    }
    bert8_run_options o = run_opts(c);
    bert8_embed_options eo = bert8_default_embed_options();
    eo.prompt_name = c->prompt_name;
    if (c->prompt) eo.prompt = (bert8_text){c->prompt, strlen(c->prompt)};
    return bert8_embed(c->r.pl, n, a, b, &o, &eo, c->out, c->r.err, sizeof c->r.err);
}

static void embed_print(tcmd *c, const item *it, int64_t k) {
    print_head(it);
    printf("\"embedding\":");
    print_floats(c->out + k * c->width, c->width);
    printf("}\n");
}

static bert8_status sparse_compute(tcmd *c, int64_t n, const bert8_text *a, const bert8_text *b) {
    (void)b;
    bert8_sparse_embeddings_free(&c->sparse);
    bert8_run_options o = run_opts(c);
    return bert8_embed_sparse(c->r.pl, n, a, &o, &c->sparse, c->r.err, sizeof c->r.err);
}

/* TEI's sparse form: the non-zero entries as {"index", "value"}, by index. */
static void sparse_print(tcmd *c, const item *it, int64_t k) {
    const bert8_sparse_embeddings *r = &c->sparse;
    print_head(it);
    printf("\"embedding\":[");
    for (int64_t j = r->offsets[k]; j < r->offsets[k + 1]; j++) {
        printf("%s{\"index\":%d,\"value\":", j > r->offsets[k] ? "," : "", r->indices[j]);
        cli_print_float(stdout, r->values[j]);
        putchar('}');
    }
    printf("]}\n");
}

/* ---- qa ------------------------------------------------------------------------------------ */

static bert8_status qa_compute(tcmd *c, int64_t n, const bert8_text *a, const bert8_text *b) {
    if (!grow((void **)&c->answers, (size_t)n, sizeof *c->answers)) {
        snprintf(c->r.err, sizeof c->r.err, "out of memory");
        return BERT8_ERR_NOMEM;
    }
    return bert8_qa(c->r.pl, n, a, b, &c->qo, c->answers, c->r.err, sizeof c->r.err);
}

static void qa_print(tcmd *c, const item *it, int64_t k) {
    const bert8_qa_answer *s = &c->answers[k];
    print_head(it);
    if (!s->found) {
        printf("\"answer\":null,\"score\":null}\n");
        return;
    }
    text_chars tc;
    text_chars_init(&tc, it->b, strlen(it->b));
    printf("\"answer\":");
    text_print_json_bytes(stdout, it->b + s->start, (size_t)(s->end - s->start));
    printf(",\"score\":");
    cli_print_float(stdout, (float)s->score);
    putchar(',');
    print_span(&tc, s->start, s->end);
    printf("}\n");
}

/* ---- ner ----------------------------------------------------------------------------------- */

static bert8_status ner_compute(tcmd *c, int64_t n, const bert8_text *a, const bert8_text *b) {
    (void)b;
    bert8_ner_result_free(&c->ner);
    bert8_ner_options o = bert8_default_ner_options();
    o.stride = c->stride;
    return bert8_ner(c->r.pl, n, a, &o, &c->ner, c->r.err, sizeof c->r.err);
}

/* ---- fill-mask ------------------------------------------------------------------------------ */

static bert8_status fill_mask_compute(tcmd *c, int64_t n, const bert8_text *a, const bert8_text *b) {
    (void)b;
    bert8_fill_mask_result_free(&c->fm);
    bert8_run_options o = run_opts(c);
    return bert8_fill_mask(c->r.pl, n, a, &o, c->top_k, &c->fm, c->r.err, sizeof c->r.err);
}

/* transformers' output: one mask gives a list of predictions, several a list per mask. */
static void fill_mask_print(tcmd *c, const item *it, int64_t k) {
    const bert8_fill_mask_result *r = &c->fm;
    const int64_t m0 = r->mask_offsets[k], m1 = r->mask_offsets[k + 1];
    print_head(it);
    printf("\"predictions\":");
    if (m1 - m0 > 1) putchar('[');
    for (int64_t m = m0; m < m1; m++) {
        printf("%s[", m > m0 ? "," : "");
        for (int64_t j = 0; j < r->top_k; j++) {
            const bert8_fill_mask_pred *p = &r->preds[m * r->top_k + j];
            printf("%s{\"score\":", j ? "," : "");
            cli_print_float(stdout, p->score);
            printf(",\"token\":%d,\"token_str\":", p->token);
            cli_print_json_string(stdout, p->token_str);
            printf(",\"sequence\":");
            cli_print_json_string(stdout, p->sequence);
            putchar('}');
        }
        putchar(']');
    }
    if (m1 - m0 > 1) putchar(']');
    printf("}\n");
}

/* "word" (the span of the text), label, score and offsets of a word or an entity. */
static void print_entity(const char *text, const bert8_entity *x, const char *key, bool first) {
    printf("%s{\"%s\":", first ? "" : ",", key);
    cli_print_json_string(stdout, x->label ? x->label : "");
    printf(",\"score\":");
    cli_print_float(stdout, x->score);
    printf(",\"word\":");
    text_print_json_bytes(stdout, text + x->start, (size_t)(x->end - x->start));
    printf(",\"start\":%lld,\"end\":%lld,\"start_byte\":%lld,\"end_byte\":%lld}", (long long)x->start_char,
           (long long)x->end_char, (long long)x->start, (long long)x->end);
}

static void ner_print(tcmd *c, const item *it, int64_t k) {
    const bert8_ner_result *r = &c->ner;
    print_head(it);
    printf("\"words\":[");
    for (int64_t i = r->word_offsets[k]; i < r->word_offsets[k + 1]; i++)
        print_entity(it->a, &r->words[i], "entity", i == r->word_offsets[k]);
    printf("],\"entities\":[");
    for (int64_t i = r->entity_offsets[k]; i < r->entity_offsets[k + 1]; i++)
        print_entity(it->a, &r->entities[i], "entity_group", i == r->entity_offsets[k]);
    printf("]}\n");
}

/* ---- commands ------------------------------------------------------------------------------- */

static void tcmd_free(tcmd *c) {
    text_runner_close(&c->r);
    free(c->out);
    free(c->tmp);
    free(c->answers);
    bert8_ner_result_free(&c->ner);
    bert8_fill_mask_result_free(&c->fm);
    bert8_sparse_embeddings_free(&c->sparse);
}

#define COMMON_USAGE                                                                               \
    "  input: JSON lines ({\"text\": ..., \"text_pair\": ...}) or plain text lines (A<TAB>B: a "   \
    "pair)\n"                                                                                      \
    "  --batch N (32)  --threads N (0: physical cores)  --max-length N  --plain  --strict\n"       \
    "  --max-line-bytes N (4194304)  --lora-task NAME (Jina v3: the task's LoRA adapters folded in)\n"

static bool want_help(cli_args *a, const char *usage) {
    if (!cli_flag(a, "--help") && !cli_flag(a, "-h")) return false;
    printf("%s" COMMON_USAGE, usage);
    return true;
}

/* Options every text command takes; returns false (after printing why) on a bad value. */
static bool common_options(tcmd *c, cli_args *a, long *threads, long *max_len) {
    const char *v;
    long x;
    c->batch = 32;
    c->max_line = (size_t)1 << 22;
    *threads = 0;
    *max_len = 0;
    c->plain = cli_flag(a, "--plain");
    c->strict = cli_flag(a, "--strict");
    c->lora_task = cli_opt(a, "--lora-task");
    if ((v = cli_opt(a, "--batch"))) {
        if (!cli_int(c->name, "--batch", v, 1, MAX_BATCH, &x)) return false;
        c->batch = x;
    }
    if ((v = cli_opt(a, "--threads")) && !cli_int(c->name, "--threads", v, 0, 1024, threads))
        return false;
    if ((v = cli_opt(a, "--max-length")) &&
        !cli_int(c->name, "--max-length", v, 8, 1 << 20, max_len))
        return false;
    if ((v = cli_opt(a, "--max-line-bytes"))) {
        if (!cli_int(c->name, "--max-line-bytes", v, 1, 1L << 30, &x)) return false;
        c->max_line = (size_t)x;
    }
    return true;
}

/* Opens the model, checks the head and settles max_len; false after printing why. */
static bool open_model(tcmd *c, const char *dir, long threads, long max_len, int need_head,
                       int64_t dflt_len) {
    /* qa windows (default 384) are the qa call's own max_length, not the pipeline's */
    text_runner_opts o = {(int)threads, c->batch, need_head == BERT8_HEAD_QA ? 0 : max_len, c->pool,
                          c->normalize, (int64_t)c->max_line, c->lora_task};
    if (!text_runner_open(&c->r, c->name, dir, c->with_model, &o)) return false;
    if (c->with_model && need_head >= 0 && c->r.info->head != (bert8_head)need_head) {
        static const char *what[] = {"a base model", "a sequence classification model",
                                     "a token classification model", "a question answering model"};
        cli_error(c->name, "%s is not %s (architecture \"%s\")", dir, what[need_head],
                  c->r.info->architecture);
        return false;
    }
    if (max_len > 0 && c->with_model && max_len > c->r.max_tokens) {
        cli_error(c->name, "--max-length %ld exceeds the model's limit of %lld tokens", max_len,
                  (long long)c->r.max_tokens);
        return false;
    }
    c->max_len = max_len > 0
                     ? max_len
                     : (dflt_len > 0 && dflt_len < c->r.max_tokens ? dflt_len : c->r.max_tokens);
    return true;
}

static int finish(tcmd *c, cli_args *a, const char *dir, long threads, long max_len, int head,
                  int64_t dflt_len) {
    const char *left = cli_leftover(a);
    int rc = 1;
    if (left)
        cli_error(c->name, "unknown argument \"%s\"", left);
    else if (open_model(c, dir, threads, max_len, head, dflt_len))
        rc = -1;
    return rc;
}

int cmd_tokenize(int argc, char **argv) {
    tcmd c = {.name = "tokenize", .fa = "text", .fb = "text_pair"};
    cli_args a;
    cli_args_init(&a, argc, argv);
    if (want_help(
            &a, "usage: bert8 tokenize MODEL_DIR [--max-length N] [--no-special-tokens] < lines\n"))
        return 0;
    long threads, max_len;
    if (!common_options(&c, &a, &threads, &max_len)) return 1;
    bool nospecial = cli_flag(&a, "--no-special-tokens");
    const char *dir = cli_positional(&a);
    int rc = finish(&c, &a, dir, threads, max_len, -1, 0);
    if (rc < 0) {
        c.ep = bert8_default_encode_params();
        c.ep.add_special_tokens = !nospecial;
        if (max_len > 0) {
            c.ep.truncation = BERT8_TRUNCATE_LONGEST_FIRST;
            c.ep.max_length = max_len;
        }
        c.compute = tokenize_compute;
        c.print = tokenize_print;
        rc = drive(&c);
    }
    tcmd_free(&c);
    return rc;
}

int cmd_classify(int argc, char **argv) {
    tcmd c = {.name = "classify", .fa = "text", .fb = "text_pair", .with_model = true};
    cli_args a;
    cli_args_init(&a, argc, argv);
    if (want_help(&a, "usage: bert8 classify MODEL_DIR [--logits] < lines\n")) return 0;
    long threads, max_len;
    if (!common_options(&c, &a, &threads, &max_len)) return 1;
    c.logits = cli_flag(&a, "--logits");
    const char *dir = cli_positional(&a);
    int rc = finish(&c, &a, dir, threads, max_len, BERT8_HEAD_SEQ_CLS, 0);
    if (rc < 0) {
        c.width = c.r.info->num_labels;
        c.ep = bert8_default_encode_params();
        c.ep.truncation = BERT8_TRUNCATE_LONGEST_FIRST;
        c.ep.max_length = c.max_len;
        c.compute = classify_compute;
        c.print = classify_print;
        rc = drive_labels(&c);
    }
    tcmd_free(&c);
    return rc;
}

int cmd_embed(int argc, char **argv) {
    tcmd c = {.name = "embed", .fa = "text", .fb = "text_pair", .with_model = true, .normalize = -1};
    cli_args a;
    cli_args_init(&a, argc, argv);
    if (want_help(&a, "usage: bert8 embed MODEL_DIR [--pooling cls|mean|max|mean_sqrt_len_tokens|weightedmean|lasttoken|splade] "
                      "[--normalize|--no-normalize] [--prompt-name NAME | --prompt TEXT] < lines\n"
                      "  a sentence-transformers folder's modules (pooling, Dense, Normalize) and default prompt apply\n"
                      "  unless flags say otherwise; --prompt-name picks one of config_sentence_transformers.json's\n"
                      "  prompts, --prompt prepends TEXT (\"\" for none)\n"
                      "  --pooling splade (masked-LM models): sparse {\"index\", \"value\"} entries, max over tokens of\n"
                      "  log(1 + relu(logits))\n"))
        return 0;
    long threads, max_len;
    if (!common_options(&c, &a, &threads, &max_len)) return 1;
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
    int rc = finish(&c, &a, dir, threads, max_len, -1, 0);
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
        rc = drive(&c);
    }
    tcmd_free(&c);
    return rc;
}

int cmd_qa(int argc, char **argv) {
    tcmd c = {
        .name = "qa", .fa = "question", .fb = "context", .pair_needed = true, .with_model = true};
    cli_args a;
    cli_args_init(&a, argc, argv);
    if (want_help(
            &a,
            "usage: bert8 qa MODEL_DIR [--stride N] [--max-answer-len N] [--score prob|logit] < "
            "lines\n  input: {\"question\": ..., \"context\": ...} or question<TAB>context\n"))
        return 0;
    long threads, max_len, stride = -1, max_answer = 30;
    if (!common_options(&c, &a, &threads, &max_len)) return 1;
    const char *v;
    if ((v = cli_opt(&a, "--stride")) && !cli_int(c.name, "--stride", v, 0, 1 << 20, &stride))
        return 1;
    if ((v = cli_opt(&a, "--max-answer-len")) &&
        !cli_int(c.name, "--max-answer-len", v, 1, 1 << 20, &max_answer))
        return 1;
    c.qo = bert8_default_qa_options();
    if ((v = cli_opt(&a, "--score"))) {
        if (strcmp(v, "prob") && strcmp(v, "logit"))
            return cli_error(c.name, "--score must be prob or logit");
        c.qo.score_logits = !strcmp(v, "logit");
    }
    const char *dir = cli_positional(&a);
    int rc = finish(&c, &a, dir, threads, max_len, BERT8_HEAD_QA, 384);
    if (rc < 0 && stride >= c.max_len / 2) {
        rc = cli_error(c.name, "--stride %ld must be below half of max_length %lld", stride,
                       (long long)c.max_len);
    } else if (rc < 0) {
        c.qo.max_answer_len = max_answer;
        c.qo.doc_stride = stride;
        c.qo.max_length = c.max_len;
        c.compute = qa_compute;
        c.print = qa_print;
        rc = drive(&c);
    }
    tcmd_free(&c);
    return rc;
}

int cmd_ner(int argc, char **argv) {
    tcmd c = {.name = "ner", .fa = "text", .with_model = true};
    cli_args a;
    cli_args_init(&a, argc, argv);
    if (want_help(&a, "usage: bert8 ner MODEL_DIR [--stride N] < lines\n")) return 0;
    long threads, max_len, stride = -1;
    if (!common_options(&c, &a, &threads, &max_len)) return 1;
    const char *v;
    if ((v = cli_opt(&a, "--stride")) && !cli_int(c.name, "--stride", v, 0, 1 << 20, &stride))
        return 1;
    const char *dir = cli_positional(&a);
    int rc = finish(&c, &a, dir, threads, max_len, BERT8_HEAD_TOKEN_CLS, 0);
    if (rc < 0 && stride >= c.max_len / 2) {
        rc = cli_error(c.name, "--stride %ld must be below half of max_length %lld", stride,
                       (long long)c.max_len);
    } else if (rc < 0) {
        c.width = c.r.info->num_labels;
        c.stride = stride;
        c.compute = ner_compute;
        c.print = ner_print;
        rc = drive_labels(&c);
    }
    tcmd_free(&c);
    return rc;
}

int cmd_fill_mask(int argc, char **argv) {
    tcmd c = {.name = "fill-mask", .fa = "text", .with_model = true};
    cli_args a;
    cli_args_init(&a, argc, argv);
    if (want_help(&a, "usage: bert8 fill-mask MODEL_DIR [--top-k N] < lines\n"
                      "  each text holds the tokenizer's mask token ([MASK], <mask>) once or more\n"))
        return 0;
    long threads, max_len, top_k = 5;
    if (!common_options(&c, &a, &threads, &max_len)) return 1;
    const char *v;
    if ((v = cli_opt(&a, "--top-k")) && !cli_int(c.name, "--top-k", v, 1, 1 << 20, &top_k)) return 1;
    const char *dir = cli_positional(&a);
    int rc = finish(&c, &a, dir, threads, max_len, -1, 0);
    if (rc < 0 && !c.r.info->has_mlm_head) {
        rc = cli_error(c.name, "%s has no masked-LM head (architecture \"%s\")", dir, c.r.info->architecture);
    } else if (rc < 0) {
        c.top_k = top_k;
        c.compute = fill_mask_compute;
        c.print = fill_mask_print;
        rc = drive(&c);
    }
    tcmd_free(&c);
    return rc;
}
