/* classify_stdin.c: classifies sentences read from standard input, one per line, with a bert8
 * sequence classification model, and prints "label<TAB>score<TAB>sentence" for each.
 *
 *     classify_stdin MODEL_DIR < sentences.txt
 *
 * It uses only the installed public API (bert8.h, bert8_pipeline.h): build it with CMake
 * (find_package(bert8)) or with pkg-config (see examples/README.md). */
#include <bert8_pipeline.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reads all lines of f (newline and CR stripped); returns the count or -1 on failure. */
static long read_lines(FILE *f, char ***out) {
    char **lines = NULL, *line = NULL;
    size_t cap = 0, n = 0, lcap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, f)) >= 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        if (n == lcap) {
            lcap = lcap ? 2 * lcap : 64;
            char **grown = realloc(lines, lcap * sizeof *grown);
            if (!grown) goto fail;
            lines = grown;
        }
        if (!(lines[n] = strdup(line))) goto fail;
        n++;
    }
    free(line);
    *out = lines;
    return (long)n;
fail:
    for (size_t i = 0; i < n; i++) free(lines[i]);
    free(lines);
    free(line);
    return -1;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s MODEL_DIR < sentences.txt\n", argv[0]);
        return 2;
    }
    char err[1024];
    bert8_pipeline *p = NULL;
    bert8_pipeline_params params = bert8_default_pipeline_params();
    bert8_status st = bert8_pipeline_open(argv[1], &params, &p, err, sizeof err);
    if (st != BERT8_OK) {
        fprintf(stderr, "cannot open %s: %s (%s)\n", argv[1], err, bert8_status_string(st));
        return 1;
    }
    const bert8_pipeline_info *info = bert8_pipeline_get_info(p);
    char **lines = NULL;
    long n = read_lines(stdin, &lines);
    int rc = 1;
    bert8_text *texts = NULL;
    float *scores = NULL;
    if (n < 0) {
        fprintf(stderr, "out of memory reading standard input\n");
        goto out;
    }
    texts = calloc((size_t)n + 1, sizeof *texts);
    scores = calloc((size_t)n * (size_t)info->num_labels + 1, sizeof *scores);
    if (!texts || !scores) {
        fprintf(stderr, "out of memory\n");
        goto out;
    }
    for (long i = 0; i < n; i++) texts[i] = (bert8_text){lines[i], strlen(lines[i])};
    bert8_run_options opt = bert8_default_run_options();
    st = bert8_classify(p, n, texts, NULL, &opt, BERT8_SCORE_AUTO, scores, err, sizeof err);
    if (st != BERT8_OK) {
        fprintf(stderr, "classify: %s (%s)\n", err, bert8_status_string(st));
        goto out;
    }
    for (long i = 0; i < n; i++) {
        const float *s = scores + i * info->num_labels;
        int64_t best = 0;
        for (int64_t k = 1; k < info->num_labels; k++)
            if (s[k] > s[best]) best = k;
        const char *label = bert8_pipeline_label(p, best);
        printf("%s\t%.4f\t%s\n", label ? label : "?", s[best], lines[i]);
    }
    rc = 0;
out:
    for (long i = 0; i < n; i++) free(lines[i]);
    free(lines);
    free(texts);
    free(scores);
    bert8_pipeline_free(p);
    return rc;
}
