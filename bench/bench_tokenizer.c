/* bench_tokenizer.c: single-thread tokens per second of the tokenizers (WordPiece, Unigram,
 * byte-level BPE) on the SST-2 training sentences (first column), through the encode path the
 * engine uses (UTF-8 check, special tokens, one sentence per call, result reused). Rates use
 * the thread's CPU time, so they are per core even on a busy machine; wall time is printed
 * alongside. The BPE tokenizer.json defaults to the test one (tests/data/bpe, run from the
 * source tree); it is skipped when absent.
 *   bench_tokenizer [--shared DIR] [--rounds N] [--tsv FILE] [--bpe tokenizer.json] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

int main(int argc, char **argv) {
    const char *shared = "../shared", *tsv = NULL, *bpe_path = "tests/data/bpe/tokenizer.json";
    int rounds = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--shared") && i + 1 < argc)
            shared = argv[++i];
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--tsv") && i + 1 < argc)
            tsv = argv[++i];
        else if (!strcmp(argv[i], "--bpe") && i + 1 < argc)
            bpe_path = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--shared DIR] [--rounds N] [--tsv FILE] [--bpe FILE]\n",
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
    b8_tokenizer_free(wp);
    b8_tokenizer_free(ug);
    free(c.text);
    free(c.len);
    free(c.data);
    return 0;
}
