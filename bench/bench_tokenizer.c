/* bench_tokenizer.c: single-thread tokens per second of the tokenizers (WordPiece, Unigram,
 * byte-level BPE) on the SST-2 training sentences (first column), through the encode path the
 * engine uses (UTF-8 check, special tokens, one sentence per call, result reused). Rates use
 * the thread's CPU time, so they are per core even on a busy machine; wall time is printed
 * alongside. The BPE tokenizer.json defaults to the test one (tests/data/bpe, run from the
 * source tree); it is skipped when absent.
 *
 * The added-token cases load each tokenizer again with --added N added tokens (50,000 by
 * default; "tok00000", "tok00001", ...): the BPE one with them in its tokenizer.json (every
 * other one normalized, so both matching passes hold many), the WordPiece one from a folder
 * with an added_tokens.json (lower-cased by do_lower_case: they match any case). Each case
 * prints its load time, then encodes the corpus with every tenth sentence carrying three of
 * the tokens. Their cost must not grow with N (issue 41: it used to be quadratic).
 *   bench_tokenizer [--shared DIR] [--rounds N] [--tsv FILE] [--bpe tokenizer.json] [--added N] */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tokenizer/tokenizer.h"

static double clock_s(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}
static double now(void) {
    return clock_s(CLOCK_MONOTONIC);
}
/* CPU time of this thread: "per core" even when the machine is shared with other work */
static double cpu_now(void) {
    return clock_s(CLOCK_THREAD_CPUTIME_ID);
}

typedef struct corpus {
    char *data;
    const char **text;
    size_t *len;
    size_t n, bytes;
} corpus;

/* First column of a TSV with a header row. */
static int load_corpus(const char *path, corpus *c) {
    b8_err e = {0};
    size_t n = 0;
    c->data = b8_read_file(path, &n, &e);
    if (!c->data) {
        fprintf(stderr, "%s\n", e.msg);
        return -1;
    }
    size_t lines = 1;
    for (size_t i = 0; i < n; i++)
        lines += c->data[i] == '\n';
    c->text = malloc(lines * sizeof *c->text);
    c->len = malloc(lines * sizeof *c->len);
    c->n = c->bytes = 0;
    char *p = strchr(c->data, '\n'); /* skip the header */
    while (p && *++p) {
        char *nl = strchr(p, '\n');
        char *tab = memchr(p, '\t', nl ? (size_t)(nl - p) : strlen(p));
        size_t l = tab ? (size_t)(tab - p) : (nl ? (size_t)(nl - p) : strlen(p));
        c->text[c->n] = p;
        c->len[c->n++] = l;
        c->bytes += l;
        p = nl;
    }
    return 0;
}

static void run(const char *name, const b8_tokenizer *t, const corpus *c, int rounds) {
    b8_encoding enc = {0};
    b8_encode_params ep = b8_default_encode_params();
    b8_err e = {0};
    double best = 1e30, best_wall = 1e30;
    long long tokens = 0;
    for (int r = 0; r < rounds; r++) {
        long long tk = 0;
        double t0 = cpu_now(), w0 = now();
        for (size_t i = 0; i < c->n; i++) {
            if (b8_tokenizer_encode(t, c->text[i], c->len[i], NULL, 0, &ep, &enc, &e) != BERT8_OK) {
                fprintf(stderr, "%s: sentence %zu: %s\n", name, i, e.msg);
                exit(1);
            }
            tk += enc.lengths[0] - b8_tokenizer_num_special_tokens(t, 0);
        }
        double dt = cpu_now() - t0, dw = now() - w0;
        if (dt < best) best = dt;
        if (dw < best_wall) best_wall = dw;
        tokens = tk;
    }
    printf("%-10s %9lld tokens  %8.1f ms cpu  %6.2f M tokens/s per core  %6.1f MB/s  "
           "(wall %.1f ms; %zu sentences, best of %d)\n",
           name, tokens, best * 1e3, tokens / best / 1e6, c->bytes / best / 1e6, best_wall * 1e3,
           c->n, rounds);
    b8_encoding_free(&enc);
}

/* The BPE tokenizer.json text with n added tokens put first in its added_tokens list, ids from
 * its vocabulary size up (NULL when the file has no added_tokens list). */
static char *with_added_bpe(const char *json, int64_t vocab, int n) {
    const char *at = strstr(json, "\"added_tokens\"");
    const char *open = at ? strchr(at, '[') : NULL;
    if (!open) return NULL;
    const size_t head = (size_t)(open + 1 - json), per = 160;
    char *out = malloc(strlen(json) + (size_t)n * per + 2);
    if (!out) return NULL;
    memcpy(out, json, head);
    size_t k = head;
    for (int i = 0; i < n; i++)
        k += (size_t)snprintf(out + k, per,
                              "{\"id\":%lld,\"content\":\"tok%05d\",\"single_word\":false,\"lstrip\":false,"
                              "\"rstrip\":false,\"normalized\":%s,\"special\":false},",
                              (long long)(vocab + i), i, i % 2 ? "true" : "false");
    const char *rest = open + 1;
    while (*rest == ' ' || *rest == '\n')
        rest++;
    if (*rest == ']' && n) k--; /* no trailing comma before an empty list's end */
    strcpy(out + k, rest);
    return out;
}

/* A folder with vocab.txt (copied from path) and an added_tokens.json of n tokens; its path
 * (static), or NULL. */
static const char *wordpiece_added_dir(const char *vocab_path, int64_t vocab, int n) {
    static char dir[] = "/tmp/bench_tokenizer_XXXXXX";
    if (!mkdtemp(dir)) return NULL;
    b8_err e = {0};
    size_t len = 0;
    char *v = b8_read_file(vocab_path, &len, &e), path[256];
    snprintf(path, sizeof path, "%s/vocab.txt", dir);
    FILE *f = v ? fopen(path, "w") : NULL;
    bool ok = f && fwrite(v, 1, len, f) == len;
    if (f) ok = fclose(f) == 0 && ok;
    free(v);
    snprintf(path, sizeof path, "%s/added_tokens.json", dir);
    if (!ok || !(f = fopen(path, "w"))) return NULL;
    fputc('{', f);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s\"tok%05d\": %lld", i ? ", " : "", i, (long long)(vocab + i));
    fputs("}\n", f);
    return fclose(f) == 0 ? dir : NULL;
}

static void remove_dir(const char *dir) {
    char path[256];
    snprintf(path, sizeof path, "%s/vocab.txt", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/added_tokens.json", dir);
    unlink(path);
    rmdir(dir);
}

/* The corpus with every tenth sentence followed by three added tokens in mixed case. */
static void corpus_with_added(const corpus *c, int n_added, corpus *out) {
    out->n = c->n;
    out->bytes = 0;
    out->text = malloc(c->n * sizeof *out->text);
    out->len = malloc(c->n * sizeof *out->len);
    out->data = malloc(c->bytes + c->n * 48 + 1);
    size_t at = 0;
    for (size_t i = 0; i < c->n; i++) {
        char *p = out->data + at;
        memcpy(p, c->text[i], c->len[i]);
        size_t l = c->len[i];
        if (i % 10 == 0 && n_added > 0)
            l += (size_t)sprintf(p + l, " tok%05d TOK%05d x tok%05dy", (int)(i % (size_t)n_added),
                                 (int)((i * 7) % (size_t)n_added), (int)((i * 13) % (size_t)n_added));
        out->text[i] = p;
        out->len[i] = l;
        out->bytes += l;
        at += l;
    }
}

/* The added-token cases (see the top of the file). */
static void run_added(const char *shared, const char *bpe_path, const corpus *c, int rounds, int n) {
    corpus ca = {0};
    corpus_with_added(c, n, &ca);
    b8_err e = {0};
    size_t len = 0;
    char *json = b8_read_file(bpe_path, &len, &e);
    b8_tokenizer *plain = NULL;
    if (json && b8_tokenizer_load_files(B8_TOK_AUTO, bpe_path, NULL, &plain, &e) == BERT8_OK) {
        char *big = with_added_bpe(json, b8_tokenizer_vocab_size(plain), n), path[] = "/tmp/bench_tokenizer_XXXXXX";
        int fd = big ? mkstemp(path) : -1;
        b8_tokenizer *t = NULL;
        if (fd >= 0 && write(fd, big, strlen(big)) == (ssize_t)strlen(big) && close(fd) == 0) {
            char named[300];
            snprintf(named, sizeof named, "%s.json", path); /* the loader reads tokenizer.json by its suffix */
            rename(path, named);
            double t0 = now(), c0 = cpu_now();
            if (b8_tokenizer_load_files(B8_TOK_AUTO, named, NULL, &t, &e) == BERT8_OK) {
                printf("load: bpe + %d added tokens %.1f ms cpu (wall %.1f ms)\n", n, (cpu_now() - c0) * 1e3,
                       (now() - t0) * 1e3);
                run("bpe+added", t, &ca, rounds);
            } else {
                printf("bpe+added: %s\n", e.msg);
            }
            unlink(named);
        }
        b8_tokenizer_free(t);
        free(big);
    }
    b8_tokenizer_free(plain);
    free(json);
    char vp[1024];
    snprintf(vp, sizeof vp, "%s/tokenizers/bert-base-uncased.vocab.txt", shared);
    b8_tokenizer *wp = NULL, *t = NULL;
    if (b8_tokenizer_load_files(B8_TOK_WORDPIECE, vp, NULL, &wp, &e) == BERT8_OK) {
        const char *dir = wordpiece_added_dir(vp, b8_tokenizer_vocab_size(wp), n);
        double t0 = now(), c0 = cpu_now();
        if (dir && b8_tokenizer_load_dir(dir, NULL, &t, &e) == BERT8_OK) {
            printf("load: wordpiece + %d added tokens %.1f ms cpu (wall %.1f ms)\n", n, (cpu_now() - c0) * 1e3,
                   (now() - t0) * 1e3);
            run("wp+added", t, &ca, rounds);
        } else {
            printf("wp+added: %s\n", dir ? e.msg : "cannot write the folder");
        }
        if (dir) remove_dir(dir);
    }
    b8_tokenizer_free(t);
    b8_tokenizer_free(wp);
    free(ca.text);
    free(ca.len);
    free(ca.data);
}

int main(int argc, char **argv) {
    const char *shared = "../shared", *tsv = NULL, *bpe_path = "tests/data/bpe/tokenizer.json";
    int rounds = 5, n_added = 50000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--shared") && i + 1 < argc)
            shared = argv[++i];
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--tsv") && i + 1 < argc)
            tsv = argv[++i];
        else if (!strcmp(argv[i], "--bpe") && i + 1 < argc)
            bpe_path = argv[++i];
        else if (!strcmp(argv[i], "--added") && i + 1 < argc)
            n_added = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--shared DIR] [--rounds N] [--tsv FILE] [--bpe FILE] [--added N]\n",
                    argv[0]);
            return 2;
        }
    }
    char path[1024];
    if (!tsv) {
        snprintf(path, sizeof path, "%s/data/glue/SST-2.train90.tsv", shared);
        tsv = path;
    }
    corpus c = {0};
    if (load_corpus(tsv, &c)) return 1;

    b8_err e = {0};
    b8_tokenizer *wp = NULL, *ug = NULL;
    char vp[1024];
    b8_tok_options o = b8_tok_default_options();
    o.lowercase = 1;
    snprintf(vp, sizeof vp, "%s/tokenizers/bert-base-uncased.vocab.txt", shared);
    double t0 = now();
    if (b8_tokenizer_load_files(B8_TOK_WORDPIECE, vp, &o, &wp, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    double t1 = now();
    snprintf(vp, sizeof vp, "%s/tokenizers/xlm-roberta.sentencepiece.rebuilt.model", shared);
    if (b8_tokenizer_load_files(B8_TOK_UNIGRAM, vp, NULL, &ug, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    double t2 = now();
    printf("load: wordpiece %.1f ms, unigram %.1f ms\n", (t1 - t0) * 1e3, (t2 - t1) * 1e3);
    run("wordpiece", wp, &c, rounds);
    run("unigram", ug, &c, rounds);
    b8_tokenizer *bpe = NULL;
    double t3 = now();
    if (b8_tokenizer_load_files(B8_TOK_AUTO, bpe_path, NULL, &bpe, &e) == BERT8_OK) {
        printf("load: bpe %.1f ms (%s)\n", (now() - t3) * 1e3, bpe_path);
        run("bpe", bpe, &c, rounds);
    } else {
        printf("bpe: skipped (%s)\n", e.msg);
    }
    b8_tokenizer_free(bpe);
    if (n_added > 0) run_added(shared, bpe_path, &c, rounds, n_added);
    b8_tokenizer_free(wp);
    b8_tokenizer_free(ug);
    free(c.text);
    free(c.len);
    free(c.data);
    return 0;
}
