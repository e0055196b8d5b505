/* text_cmd.c: the input, the batch loop and the common options of the text commands (text_cmd.h). */
#include "text_cmd.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

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

static void parse_line(tcmd *c, const text_line *l, item *it) {
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

static void parse_item(tcmd *c, const text_line *l, item *it) {
    parse_line(c, l, it);
    if (c->refuse_empty && !it->bad && it->a && !it->a[0] && !(it->b && it->b[0]))
        item_fail(it, "\"%s\" is empty%s: `inputs` cannot be empty (as TEI answers)", c->fa,
                  it->b ? ", and so is its pair" : "");
}


/* ---- output ----------------------------------------------------------------------------- */

void tcmd_print_head(const item *it) {
    putchar('{');
    if (it->id) printf("\"id\":%s,", it->id);
}

static void print_error(tcmd *c, const item *it) {
    const char *why = it->error ? it->error : "out of memory";
    fprintf(stderr, "bert8 %s: line %lld: %s\n", c->name, (long long)it->line, why);
    tcmd_print_head(it);
    printf("\"line\":%lld,\"error\":", (long long)it->line);
    cli_print_json_string(stdout, why);
    printf("}\n");
    c->failed++;
}

void tcmd_print_floats(const float *v, int64_t n) {
    putchar('[');
    for (int64_t i = 0; i < n; i++) {
        if (i) putchar(',');
        cli_print_float(stdout, v[i]);
    }
    putchar(']');
}

/* "start","end" (characters) and "start_byte","end_byte" of a span of text. */
void tcmd_print_span(text_chars *tc, int64_t b0, int64_t b1) {
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

int tcmd_drive(tcmd *c) {
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

/* tcmd_drive() for commands that take a softmax over the model's labels. */
int tcmd_drive_labels(tcmd *c) {
    if (c->width < 1) return cli_error(c->name, "the model has no labels");
    if (!(c->tmp = malloc((size_t)c->width * sizeof(float))))
        return cli_error(c->name, "out of memory");
    return tcmd_drive(c);
}

bool tcmd_grow(void **p, size_t count, size_t size) {
    size_t bytes;
    if (__builtin_mul_overflow(count, size, &bytes)) return false;
    void *np = realloc(*p, bytes ? bytes : 1);
    if (!np) return false;
    *p = np;
    return true;
}

/* The run options of the model commands: longest_first truncation at --max-length. */
bert8_run_options tcmd_run_opts(const tcmd *c) {
    bert8_run_options o = bert8_default_run_options();
    o.max_length = c->max_len;
    return o;
}

/* ---- commands ------------------------------------------------------------------------------- */

void tcmd_free(tcmd *c) {
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

bool tcmd_want_help(cli_args *a, const char *usage) {
    if (!cli_flag(a, "--help") && !cli_flag(a, "-h")) return false;
    printf("%s" COMMON_USAGE, usage);
    return true;
}

/* Options every text command takes; returns false (after printing why) on a bad value. */
bool tcmd_options(tcmd *c, cli_args *a, long *threads, long *max_len) {
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

int tcmd_finish(tcmd *c, cli_args *a, const char *dir, long threads, long max_len, int head,
                  int64_t dflt_len) {
    const char *left = cli_leftover(a);
    int rc = 1;
    if (left)
        cli_error(c->name, "unknown argument \"%s\"", left);
    else if (open_model(c, dir, threads, max_len, head, dflt_len))
        rc = -1;
    return rc;
}
